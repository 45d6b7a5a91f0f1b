use scylla_driver_macros::SerializeValue;

#[derive(SerializeValue)]
#[scylla(repr = "bigint")]
enum Level {
    Low = 1,
    High = 2,
}

fn main() {}
