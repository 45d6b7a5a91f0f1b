use scylla_driver_macros::DeserializeValue;

#[derive(DeserializeValue)]
#[scylla(rename_all = "lowercase")]
enum Mode {
    ReadOnly,
    #[scylla(rename = "readonly")]
    Locked,
}

fn main() {}
