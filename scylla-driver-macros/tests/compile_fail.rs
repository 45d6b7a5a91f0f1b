//! The derives' compile errors: each case in `tests/ui/` must fail to
//! compile with the message (and span) in its `.stderr` file.

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
