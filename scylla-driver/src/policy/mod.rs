//! User-pluggable policies: [`retry`] (what to do when an attempt fails),
//! [`load_balancing`] (routing preferences of a profile or statement) and
//! [`speculative`] (when to start another attempt before the first answers);
//! re-exported here, [`AddressTranslator`] and [`HostFilter`] (defined in
//! `cluster`, which applies them).

pub use crate::cluster::host_filter::{
    AllowListHostFilter, DatacenterFilter, FnHostFilter, HostFilter, HostInfo,
};
pub use crate::cluster::translation::{
    AddressTranslator, IdentityTranslator, MapTranslator, UntranslatedPeer,
};
#[doc(no_inline)]
pub use crate::cluster::TranslationError;

pub mod load_balancing;
pub mod retry;
pub mod speculative;
pub(crate) mod steering;
