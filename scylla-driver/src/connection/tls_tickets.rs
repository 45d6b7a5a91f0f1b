//! The driver's TLS session store: where the tickets a node sends after each
//! handshake wait for the next connection to that node.
//!
//! A shard-aware driver opens one TLS connection per shard of every node.
//! ScyllaDB (since `enable_session_tickets` became its default) issues
//! TLS 1.3 tickets that every shard of the issuing node accepts until the node
//! restarts, two per handshake; so all but the first connection to a node can
//! skip the certificate exchange and the server's signature (see
//! `docs/pools.md`, "TLS session tickets"). What that takes of the store:
//!
//! - **One key per node.** rustls keys the store by the TLS server name. With
//!   the default [`super::tls::ServerName::PeerIp`] that is the node's IP
//!   address, the same for its regular and shard-aware TLS ports: tickets of
//!   one shard's connection are offered on every other shard's. (With
//!   `ServerName::Fixed` every node shares one key, and a connection may offer
//!   another node's ticket: the node refuses it and completes a full
//!   handshake, which costs nothing more than having no ticket.)
//! - **Room for every node.** rustls' default in-memory cache keeps 256 / 8 =
//!   32 server names and evicts the oldest beyond: a client of a larger
//!   cluster would lose tickets before using them. This store keeps
//!   [`TicketStore::DEFAULT_MAX_SERVERS`] names (a few bytes each when empty)
//!   and up to [`TicketStore::TICKETS_PER_SERVER`] tickets per name, enough for
//!   the sessions of one process that share a `TlsConfig` and reconnect to the
//!   same node at once.
//! - **Counts the pools can share.** TLS 1.3 tickets are single-use (a client
//!   offers each at most once), so the pools pace a node's opens by the
//!   tickets held for it: an open claims a ticket received since its pool's
//!   first connection to the node ([`TicketStore::try_claim`]; older ones may
//!   be of an earlier lifetime of the node, which refuses them), the claims of
//!   every pool sharing the store count against the same tickets, and a
//!   waiting open wakes up when tickets arrive or claims end
//!   ([`TicketStore::subscribe`]); see `pool::tickets`. rustls offers the
//!   newest ticket first, so the fresh tickets are the ones offered.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Mutex;
use std::time::Instant;

use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue};
use rustls::pki_types::ServerName;
use rustls::NamedGroup;
use tokio::sync::watch;

#[derive(Default)]
struct Entry {
    kx_hint: Option<NamedGroup>,
    tls12: Option<Tls12ClientSessionValue>,
    /// Oldest first, with their arrival; the newest is offered first.
    tls13: VecDeque<(Instant, Tls13ClientSessionValue)>,
    /// When the last TLS 1.3 ticket for this name arrived.
    last_received: Option<Instant>,
    /// Opens that claimed one of the tickets held and have not finished.
    claims: usize,
}

impl Entry {
    fn held_since(&self, since: Instant) -> usize {
        self.tls13
            .iter()
            .rev()
            .take_while(|(t, _)| *t >= since)
            .count()
    }
}

#[derive(Default)]
struct Inner {
    entries: HashMap<ServerName<'static>, Entry>,
    /// Names in the order they were first stored (eviction order).
    order: VecDeque<ServerName<'static>>,
}

/// A TLS session store sized for large clusters, with per-node ticket counts.
///
/// Install it with [`rustls::client::Resumption::store`]; the driver's
/// [`super::tls::TlsConfigBuilder`] does.
pub struct TicketStore {
    inner: Mutex<Inner>,
    max_servers: usize,
    arrivals: watch::Sender<u64>,
}

impl fmt::Debug for TicketStore {
    // Tickets are secrets: only counts are shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let servers = self.lock().entries.len();
        f.debug_struct("TicketStore")
            .field("servers", &servers)
            .field("max_servers", &self.max_servers)
            .finish()
    }
}

impl Default for TicketStore {
    fn default() -> Self {
        TicketStore::new(TicketStore::DEFAULT_MAX_SERVERS)
    }
}

impl TicketStore {
    /// Server names kept by default: more nodes than any cluster has.
    pub const DEFAULT_MAX_SERVERS: usize = 4096;
    /// TLS 1.3 tickets kept per server name (the oldest goes first).
    pub const TICKETS_PER_SERVER: usize = 32;

    /// A store that keeps up to `max_servers` server names (at least 1).
    pub fn new(max_servers: usize) -> TicketStore {
        TicketStore {
            inner: Mutex::new(Inner::default()),
            max_servers: max_servers.max(1),
            arrivals: watch::channel(0).0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent data (every
        // update is a single step): keep using it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// TLS 1.3 tickets held for `name`, not yet offered, that arrived at or
    /// after `since`.
    pub fn available_since(&self, name: &ServerName<'_>, since: Instant) -> usize {
        self.lock()
            .entries
            .get(&name.to_owned())
            .map_or(0, |e| e.held_since(since))
    }

    /// Whether a TLS 1.3 ticket for `name` arrived at or after `since`.
    pub fn received_since(&self, name: &ServerName<'_>, since: Instant) -> bool {
        self.lock()
            .entries
            .get(&name.to_owned())
            .and_then(|e| e.last_received)
            .is_some_and(|t| t >= since)
    }

    /// Claims one of the tickets for `name` that arrived at or after
    /// `since`, if more are held than already claimed; a claim ends with
    /// [`TicketStore::release_claim`].
    pub fn try_claim(&self, name: &ServerName<'_>, since: Instant) -> bool {
        let mut inner = self.lock();
        let Some(e) = inner.entries.get_mut(&name.to_owned()) else {
            return false;
        };
        if e.held_since(since) > e.claims {
            e.claims += 1;
            true
        } else {
            false
        }
    }

    /// Ends a claim of [`TicketStore::try_claim`] (its open finished).
    pub fn release_claim(&self, name: &ServerName<'_>) {
        if let Some(e) = self.lock().entries.get_mut(&name.to_owned()) {
            e.claims = e.claims.saturating_sub(1);
        }
        self.arrivals.send_modify(|n| *n += 1);
    }

    /// A receiver that changes whenever a TLS 1.3 ticket arrives or a claim
    /// ends (for any name).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.arrivals.subscribe()
    }

    /// Edits the entry of `name`, creating it (and evicting the oldest name
    /// beyond the bound) if needed.
    fn edit(&self, name: ServerName<'static>, f: impl FnOnce(&mut Entry)) {
        let mut inner = self.lock();
        if !inner.entries.contains_key(&name) {
            while inner.entries.len() >= self.max_servers {
                match inner.order.pop_front() {
                    Some(old) => {
                        inner.entries.remove(&old);
                    }
                    None => break,
                }
            }
            inner.order.push_back(name.clone());
        }
        f(inner.entries.entry(name).or_default());
    }
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.edit(server_name, |e| e.kx_hint = Some(group));
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.lock()
            .entries
            .get(&server_name.to_owned())
            .and_then(|e| e.kx_hint)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.edit(server_name, |e| e.tls12 = Some(value));
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.lock()
            .entries
            .get(&server_name.to_owned())
            .and_then(|e| e.tls12.clone())
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        if let Some(e) = self.lock().entries.get_mut(server_name) {
            e.tls12 = None;
        }
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: Tls13ClientSessionValue,
    ) {
        self.edit(server_name, |e| {
            if e.tls13.len() >= TicketStore::TICKETS_PER_SERVER {
                e.tls13.pop_front();
            }
            let now = Instant::now();
            e.tls13.push_back((now, value));
            e.last_received = Some(now);
        });
        self.arrivals.send_modify(|n| *n += 1);
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        self.lock()
            .entries
            .get_mut(server_name)
            .and_then(|e| e.tls13.pop_back())
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(ip: [u8; 4]) -> ServerName<'static> {
        ServerName::IpAddress(std::net::IpAddr::from(ip).into())
    }

    #[test]
    fn bounded_by_names_oldest_evicted_first() {
        let s = TicketStore::new(2);
        s.set_kx_hint(name([127, 0, 0, 1]), NamedGroup::X25519);
        s.set_kx_hint(name([127, 0, 0, 2]), NamedGroup::X25519);
        s.set_kx_hint(name([127, 0, 0, 3]), NamedGroup::X25519);
        assert_eq!(s.kx_hint(&name([127, 0, 0, 1])), None);
        assert_eq!(s.kx_hint(&name([127, 0, 0, 2])), Some(NamedGroup::X25519));
        assert_eq!(s.kx_hint(&name([127, 0, 0, 3])), Some(NamedGroup::X25519));
        let now = Instant::now();
        assert_eq!(s.available_since(&name([127, 0, 0, 3]), now), 0);
        assert!(!s.received_since(&name([127, 0, 0, 3]), now));
        assert!(!s.try_claim(&name([127, 0, 0, 3]), now));
    }
}
