use scylla_driver_macros::DeserializeRow;

#[derive(DeserializeRow)]
enum Row {
    A,
}

fn main() {}
