use scylla_driver_macros::DeserializeRow;

#[derive(DeserializeRow)]
#[scylla(skip_name_checks)]
struct Row {
    id: i32,
}

fn main() {}
