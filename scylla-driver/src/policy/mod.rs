//! User-pluggable policies: [`retry`] (what to do when an attempt fails) and
//! [`speculative`] (when to start another attempt before the first answers).

pub mod retry;
pub mod speculative;
