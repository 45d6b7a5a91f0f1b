//! Address translation: from the address a node reports to the address the
//! driver connects to.
//!
//! Nodes behind a NAT, a proxy, a Kubernetes service or a private link report
//! (in `system.peers` / `system.peers_v2`, and in events) addresses that are
//! not reachable from the client. An [`AddressTranslator`] maps each reported
//! address (the node's native-transport address and port) to the one to use.
//!
//! Where it applies:
//! - every peer read from `system.peers(_v2)`: the translated address is the
//!   node's [`NodeMeta::address`](super::NodeMeta::address), so pools, routing
//!   and control-connection reconnects all use it;
//! - STATUS_CHANGE events, before they are matched to a known node (through
//!   the translations of the latest read: the translator is not called);
//! - not the contact points (used as given), and not the node the control
//!   connection is on (it is known by the address the connection reached).
//!
//! The shard-aware port: a pool learns it from the node's SUPPORTED answer on
//! the regular port, and connects to it on the *translated IP* with the port
//! *number* the node reports. A translation that changes ports must therefore
//! map the shard-aware port number unchanged (or the pool falls back to the
//! regular port after the first refused attempt, which still works).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;

use async_trait::async_trait;
use uuid::Uuid;

/// Why an address could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot translate {address}: {reason}")]
pub struct TranslationError {
    /// The reported address.
    pub address: SocketAddr,
    /// Why.
    pub reason: String,
}

/// Maps the address a node reports to the address to connect to (the
/// official `scylla` crate's trait, declared with `async_trait` as there, so
/// an implementation written for it compiles here unchanged).
///
/// Called for each peer on every metadata read: a node whose address fails
/// to translate is left out of the topology (with a warning) until it
/// translates again. STATUS_CHANGE events, which name a node by the address
/// it reports, are matched through the translations of the latest read.
///
/// ```
/// use std::net::SocketAddr;
/// use async_trait::async_trait;
/// use scylla_driver::policy::{AddressTranslator, TranslationError, UntranslatedPeer};
///
/// /// Every node through one proxy.
/// #[derive(Debug)]
/// struct Proxy(SocketAddr);
///
/// #[async_trait]
/// impl AddressTranslator for Proxy {
///     async fn translate_address(
///         &self,
///         _peer: &UntranslatedPeer,
///     ) -> Result<SocketAddr, TranslationError> {
///         Ok(self.0)
///     }
/// }
/// ```
// The peer's lifetime is elided as the official crate's trait elides it:
// with `#[async_trait]`, an impl must write it the same way (elided there,
// `<'_>` here, and the two do not match).
#[async_trait]
pub trait AddressTranslator: Send + Sync {
    /// The address to connect to for `untranslated_peer`.
    async fn translate_address(
        &self,
        untranslated_peer: &UntranslatedPeer,
    ) -> Result<SocketAddr, TranslationError>;
}

impl fmt::Debug for dyn AddressTranslator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AddressTranslator")
    }
}

/// A node as its peers describe it, before translation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntranslatedPeer<'a> {
    host_id: Uuid,
    untranslated_address: SocketAddr,
    datacenter: Option<&'a str>,
    rack: Option<&'a str>,
}

impl<'a> UntranslatedPeer<'a> {
    /// A peer (datacenter and rack `None` when the node reports none).
    pub fn new(
        host_id: Uuid,
        untranslated_address: SocketAddr,
        datacenter: Option<&'a str>,
        rack: Option<&'a str>,
    ) -> Self {
        Self {
            host_id,
            untranslated_address,
            datacenter,
            rack,
        }
    }

    /// The node's host id.
    pub fn host_id(&self) -> Uuid {
        self.host_id
    }

    /// The address the node reports (its native-transport address and port).
    pub fn untranslated_address(&self) -> SocketAddr {
        self.untranslated_address
    }

    /// Its datacenter, if reported.
    pub fn datacenter(&self) -> Option<&'a str> {
        self.datacenter
    }

    /// Its rack, if reported.
    pub fn rack(&self) -> Option<&'a str> {
        self.rack
    }
}

/// The default translator: connects to the address the node reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdentityTranslator;

#[async_trait]
impl AddressTranslator for IdentityTranslator {
    async fn translate_address(
        &self,
        peer: &UntranslatedPeer,
    ) -> Result<SocketAddr, TranslationError> {
        Ok(peer.untranslated_address())
    }
}

/// Exact addresses (IP and port); any other address is an error.
#[async_trait]
impl AddressTranslator for HashMap<SocketAddr, SocketAddr> {
    async fn translate_address(
        &self,
        peer: &UntranslatedPeer,
    ) -> Result<SocketAddr, TranslationError> {
        let from = peer.untranslated_address();
        self.get(&from).copied().ok_or_else(|| TranslationError {
            address: from,
            reason: "not in the translation table".into(),
        })
    }
}

/// A fixed table of translations, by IP (the port is kept) or by exact
/// address (IP and port); addresses not in the table are an error, or kept
/// as they are with [`MapTranslator::pass_through_unknown`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapTranslator {
    by_addr: HashMap<SocketAddr, SocketAddr>,
    by_ip: HashMap<std::net::IpAddr, std::net::IpAddr>,
    pass_through: bool,
}

impl MapTranslator {
    /// An empty table (every address is unknown).
    pub fn new() -> Self {
        Self::default()
    }

    /// Maps the exact address `from` (IP and port) to `to`.
    #[must_use]
    pub fn address(mut self, from: SocketAddr, to: SocketAddr) -> Self {
        self.by_addr.insert(from, to);
        self
    }

    /// Maps every address on IP `from` to the same port on IP `to`.
    #[must_use]
    pub fn ip(mut self, from: std::net::IpAddr, to: std::net::IpAddr) -> Self {
        self.by_ip.insert(from, to);
        self
    }

    /// Keeps unknown addresses unchanged instead of failing.
    #[must_use]
    pub fn pass_through_unknown(mut self, on: bool) -> Self {
        self.pass_through = on;
        self
    }
}

impl MapTranslator {
    /// The translation of `advertised`.
    pub fn translate(&self, advertised: SocketAddr) -> Result<SocketAddr, TranslationError> {
        if let Some(&to) = self.by_addr.get(&advertised) {
            return Ok(to);
        }
        if let Some(&ip) = self.by_ip.get(&advertised.ip()) {
            return Ok(SocketAddr::new(ip, advertised.port()));
        }
        if self.pass_through {
            return Ok(advertised);
        }
        Err(TranslationError {
            address: advertised,
            reason: "not in the translation table".into(),
        })
    }
}

#[async_trait]
impl AddressTranslator for MapTranslator {
    async fn translate_address(
        &self,
        peer: &UntranslatedPeer,
    ) -> Result<SocketAddr, TranslationError> {
        self.translate(peer.untranslated_address())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_translator_prefers_exact_addresses() {
        let a: SocketAddr = "10.0.0.1:9042".parse().unwrap();
        let t = MapTranslator::new()
            .address(a, "127.0.0.1:19000".parse().unwrap())
            .ip("10.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        assert_eq!(t.translate(a).unwrap(), "127.0.0.1:19000".parse().unwrap());
        assert_eq!(
            t.translate("10.0.0.1:19042".parse().unwrap()).unwrap(),
            "127.0.0.2:19042".parse().unwrap()
        );
        let unknown: SocketAddr = "10.0.0.9:9042".parse().unwrap();
        assert_eq!(t.translate(unknown).unwrap_err().address, unknown);
        let t = t.pass_through_unknown(true);
        assert_eq!(t.translate(unknown).unwrap(), unknown);
        let peer = UntranslatedPeer::new(uuid::Uuid::nil(), unknown, Some("dc1"), None);
        let identity = block_on(IdentityTranslator.translate_address(&peer));
        assert_eq!(identity.unwrap(), unknown);
        let exact: HashMap<SocketAddr, SocketAddr> = [(unknown, a)].into();
        assert_eq!(block_on(exact.translate_address(&peer)).unwrap(), a);
    }

    /// Runs a future that never waits (the translators here do not).
    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(f)
    }
}
