//! The official `scylla` crate's `policies` paths, as aliases of
//! [`policy`](crate::policy): retry, speculative execution, load
//! balancing, host filters and address translation.
//!
//! A session routes every request token- and shard-aware by itself, with
//! the preferences of
//! [`SessionBuilder::local_datacenter`](crate::SessionBuilder::local_datacenter),
//! [`local_rack`](crate::SessionBuilder::local_rack) and
//! [`latency_aware_routing`](crate::SessionBuilder::latency_aware_routing);
//! the [`load_balancing`] policies of a profile or statement change those
//! preferences for the requests they apply to.

/// Load-balancing preferences of a profile or statement:
/// [`DefaultPolicy`](load_balancing::DefaultPolicy) and
/// [`SingleTargetLoadBalancingPolicy`](load_balancing::SingleTargetLoadBalancingPolicy)
/// (see [`policy::load_balancing`](crate::policy::load_balancing)).
pub mod load_balancing {
    #[doc(no_inline)]
    pub use crate::policy::load_balancing::*;
}

/// What to do when an attempt fails.
pub mod retry {
    #[doc(no_inline)]
    pub use crate::policy::retry::*;
}

/// Speculative execution: another attempt on the next target when the
/// current ones are slow (idempotent statements only).
pub mod speculative_execution {
    #[doc(no_inline)]
    pub use crate::policy::speculative::SpeculativeExecution;

    #[doc(no_inline)]
    pub use crate::policy::speculative::{
        PercentileSpeculativeExecutionPolicy, SimpleSpeculativeExecutionPolicy,
        SpeculativeExecutionPolicy,
    };
}

/// Which nodes the session connects to.
pub mod host_filter {
    #[doc(no_inline)]
    pub use crate::policy::{
        AllowListHostFilter, DatacenterFilter, FnHostFilter, HostFilter, HostInfo,
    };
}

/// Translating the addresses nodes advertise into addresses to connect to.
pub mod address_translator {
    #[doc(no_inline)]
    pub use crate::policy::TranslationError;
    #[doc(no_inline)]
    pub use crate::policy::{
        AddressTranslator, IdentityTranslator, MapTranslator, UntranslatedPeer,
    };
}
