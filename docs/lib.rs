//! The guide of `scylla-driver` and the project's README, compiled.
//!
//! This library has no items. Each chapter of the guide (the Markdown files
//! of `docs/`) and the top-level `README.md` is the documentation of an empty
//! module below that exists only under `cfg(doctest)`, so that `cargo test
//! -p scylla-driver-suite --doc` (part of `cargo test --workspace`) compiles
//! every Rust code block they contain and runs those not marked `no_run`: a
//! chapter whose code no longer compiles fails the test suite.

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

#[cfg(doctest)]
#[doc = include_str!("README.md")]
mod guide_index {}

#[cfg(doctest)]
#[doc = include_str!("connecting.md")]
mod connecting {}

#[cfg(doctest)]
#[doc = include_str!("statements.md")]
mod statements {}

#[cfg(doctest)]
#[doc = include_str!("types.md")]
mod types {}

#[cfg(doctest)]
#[doc = include_str!("errors.md")]
mod errors {}

#[cfg(doctest)]
#[doc = include_str!("execution-profiles.md")]
mod execution_profiles {}

#[cfg(doctest)]
#[doc = include_str!("routing.md")]
mod routing {}

#[cfg(doctest)]
#[doc = include_str!("pools.md")]
mod pools {}

#[cfg(doctest)]
#[doc = include_str!("observability.md")]
mod observability {}

#[cfg(doctest)]
#[doc = include_str!("testbed.md")]
mod testbed {}

#[cfg(doctest)]
#[doc = include_str!("performance.md")]
mod performance {}

#[cfg(doctest)]
#[doc = include_str!("architecture.md")]
mod architecture {}

// The migration guide from the official `scylla` crate, once it is in
// `docs/`:
// #[cfg(doctest)]
// #[doc = include_str!("migrating-from-scylla.md")]
// mod migrating_from_scylla {}
