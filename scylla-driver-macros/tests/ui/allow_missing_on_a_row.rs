use scylla_driver_macros::SerializeRow;

#[derive(SerializeRow)]
struct Row {
    id: i32,
    #[scylla(allow_missing)]
    name: String,
}

fn main() {}
