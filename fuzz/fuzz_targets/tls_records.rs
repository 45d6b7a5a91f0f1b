//! Records from a TLS server into the driver's own record layer
//! (`RecordLayer::Driver`) after a real handshake: raw bytes and records
//! sealed with the server's traffic keys; see `cql_fuzz::records` for the
//! input format and what must hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    cql_fuzz::tls_records(data);
});
