use scylla_driver_macros::DeserializeRow;

#[derive(DeserializeRow)]
struct Row {
    id: i32,
    #[scylla(renamed = "x")]
    name: String,
}

fn main() {}
