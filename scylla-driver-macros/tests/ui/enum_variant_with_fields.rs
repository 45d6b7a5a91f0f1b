use scylla_driver_macros::SerializeValue;

#[derive(SerializeValue)]
enum Shape {
    Point,
    Circle(f64),
}

fn main() {}
