use scylla_driver_macros::DeserializeValue;

#[derive(DeserializeValue)]
struct Address {
    street: String,
    #[scylla(rename = "street")]
    other: String,
}

fn main() {}
