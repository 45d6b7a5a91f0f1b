use scylla_driver_macros::SerializeValue;

#[derive(SerializeValue)]
#[scylla(repr = "int")]
enum Level {
    Low = 1,
    #[scylla(rename = "high")]
    High = 2,
}

fn main() {}
