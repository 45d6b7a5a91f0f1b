use scylla_driver_macros::SerializeRow;

#[derive(SerializeRow)]
#[scylla(flavor = "by_position")]
struct Row {
    id: i32,
}

fn main() {}
