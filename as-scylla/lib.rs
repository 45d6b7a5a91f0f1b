//! Nothing of its own: the tests in `tests/` are programs written for the
//! official `scylla` crate, built against `scylla-driver` renamed to
//! `scylla` in `Cargo.toml`.
