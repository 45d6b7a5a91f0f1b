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
//! - STATUS_CHANGE events, before they are matched to a known node;
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

/// Why an address could not be translated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot translate {address}: {reason}")]
pub struct TranslationError {
    /// The reported address.
    pub address: SocketAddr,
    /// Why.
    pub reason: String,
}

/// Maps the address a node reports to the address to connect to.
///
/// Called on every metadata read (for each peer) and on every STATUS_CHANGE
/// event: keep it cheap and non-blocking. A node whose address fails to
/// translate is left out of the topology (with a warning) until it
/// translates again.
pub trait AddressTranslator: fmt::Debug + Send + Sync {
    /// The address to connect to for a node that reports `advertised`.
    fn translate(&self, advertised: SocketAddr) -> Result<SocketAddr, TranslationError>;
}

/// The default translator: connects to the address the node reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdentityTranslator;

impl AddressTranslator for IdentityTranslator {
    fn translate(&self, advertised: SocketAddr) -> Result<SocketAddr, TranslationError> {
        Ok(advertised)
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

impl AddressTranslator for MapTranslator {
    fn translate(&self, advertised: SocketAddr) -> Result<SocketAddr, TranslationError> {
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
        assert_eq!(IdentityTranslator.translate(unknown).unwrap(), unknown);
    }
}
