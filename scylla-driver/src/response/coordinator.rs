//! The node that coordinated a request, in the official `scylla` crate's
//! path ([`QueryResult::request_coordinator`](crate::QueryResult::request_coordinator)).

#[doc(no_inline)]
pub use crate::result::Coordinator;
