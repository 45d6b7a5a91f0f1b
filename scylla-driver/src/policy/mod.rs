//! User-pluggable policies: [`retry`] (what to do when an attempt fails) and
//! [`speculative`] (when to start another attempt before the first answers);
//! re-exported here, [`AddressTranslator`] and [`HostFilter`] (defined in
//! `cluster`, which applies them).

pub use crate::cluster::host_filter::{DatacenterFilter, FnHostFilter, HostFilter, HostInfo};
pub use crate::cluster::translation::{
    AddressTranslator, IdentityTranslator, MapTranslator, TranslationError,
};

pub mod retry;
pub mod speculative;
