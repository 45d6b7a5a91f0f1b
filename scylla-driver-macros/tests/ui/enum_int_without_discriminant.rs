use scylla_driver_macros::DeserializeValue;

#[derive(DeserializeValue)]
#[scylla(repr = "int")]
enum Level {
    Low = 1,
    High,
}

fn main() {}
