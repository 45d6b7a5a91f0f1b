//! Arbitrary bytes into every decoder of the protocol crate: see
//! `cql_fuzz::cql_frame` for how the first byte picks one.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cql_fuzz::cql_frame(data);
});
