use scylla_driver_macros::SerializeRow;

#[derive(SerializeRow)]
struct Row(i32, String);

fn main() {}
