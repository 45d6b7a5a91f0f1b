//! Server-pushed EVENT frames and the connections that asked for them.
//!
//! A connection sends REGISTER with a list of event types; from then on the
//! node pushes matching EVENT frames on stream -1. Each connection of a node
//! has an entry here (its outgoing frame queue and the mask of event types it
//! registered for); `EventRegistry::push` delivers one encoded event to every
//! matching connection. The lock is taken on connect, disconnect and push,
//! never per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use scylla_cql::frame::header::Opcode;
use tokio::sync::mpsc;

use crate::handler::Response;
use crate::outgoing::Outgoing;

/// An event type a connection can REGISTER for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// `TOPOLOGY_CHANGE`: nodes added or removed.
    TopologyChange,
    /// `STATUS_CHANGE`: nodes up or down.
    StatusChange,
    /// `SCHEMA_CHANGE`: keyspaces, tables, types... created, updated or dropped.
    SchemaChange,
    /// `CLIENT_ROUTES_CHANGE` (ScyllaDB): rows of `system.client_routes`
    /// inserted, updated or deleted.
    ClientRoutesChange,
}

impl EventKind {
    /// The protocol name of the event type.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::TopologyChange => "TOPOLOGY_CHANGE",
            EventKind::StatusChange => "STATUS_CHANGE",
            EventKind::SchemaChange => "SCHEMA_CHANGE",
            EventKind::ClientRoutesChange => "CLIENT_ROUTES_CHANGE",
        }
    }

    /// Parses a protocol name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "TOPOLOGY_CHANGE" => Some(EventKind::TopologyChange),
            "STATUS_CHANGE" => Some(EventKind::StatusChange),
            "SCHEMA_CHANGE" => Some(EventKind::SchemaChange),
            "CLIENT_ROUTES_CHANGE" => Some(EventKind::ClientRoutesChange),
            _ => None,
        }
    }

    pub(crate) fn bit(self) -> u8 {
        match self {
            EventKind::TopologyChange => 1,
            EventKind::StatusChange => 2,
            EventKind::SchemaChange => 4,
            EventKind::ClientRoutesChange => 8,
        }
    }
}

#[derive(Debug)]
struct Subscriber {
    mask: Arc<AtomicU8>,
    out: mpsc::Sender<Outgoing>,
}

/// The connections of one node and their event registrations.
#[derive(Debug, Default)]
pub(crate) struct EventRegistry {
    conns: Mutex<HashMap<u64, Subscriber>>,
}

impl EventRegistry {
    /// Adds a connection; returns the mask its REGISTER handling updates.
    pub(crate) fn add(&self, id: u64, out: mpsc::Sender<Outgoing>) -> Arc<AtomicU8> {
        let mask = Arc::new(AtomicU8::new(0));
        if let Ok(mut m) = self.conns.lock() {
            m.insert(
                id,
                Subscriber {
                    mask: mask.clone(),
                    out,
                },
            );
        }
        mask
    }

    pub(crate) fn remove(&self, id: u64) {
        if let Ok(mut m) = self.conns.lock() {
            m.remove(&id);
        }
    }

    /// Sends an EVENT with `body` to every connection registered for `kind`;
    /// returns how many got it. A connection whose queue is full misses it
    /// (like a real server's overloaded connection would be, eventually).
    pub(crate) fn push(&self, kind: EventKind, body: &Bytes) -> usize {
        let mut frame = BytesMut::new();
        Response::new(Opcode::Event, body.clone()).encode_frame(-1, &mut frame);
        let frame = frame.freeze();
        let Ok(m) = self.conns.lock() else {
            return 0;
        };
        m.values()
            .filter(|s| s.mask.load(Ordering::Relaxed) & kind.bit() != 0)
            .filter(|s| s.out.try_send(Outgoing::Frame(frame.clone())).is_ok())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in [
            EventKind::TopologyChange,
            EventKind::StatusChange,
            EventKind::SchemaChange,
            EventKind::ClientRoutesChange,
        ] {
            assert_eq!(EventKind::from_name(k.name()), Some(k));
        }
        assert_eq!(EventKind::from_name("X"), None);
    }

    #[tokio::test]
    async fn delivers_to_registered_only() {
        let reg = EventRegistry::default();
        let (tx1, mut rx1) = mpsc::channel(4);
        let (tx2, mut rx2) = mpsc::channel(4);
        let m1 = reg.add(1, tx1);
        reg.add(2, tx2);
        m1.store(EventKind::SchemaChange.bit(), Ordering::Relaxed);
        assert_eq!(
            reg.push(EventKind::SchemaChange, &Bytes::from_static(b"x")),
            1
        );
        assert_eq!(
            reg.push(EventKind::StatusChange, &Bytes::from_static(b"x")),
            0
        );
        let Outgoing::Frame(f) = rx1.try_recv().unwrap() else {
            panic!("not a frame")
        };
        assert_eq!(&f[2..5], &[0xff, 0xff, 0x0c]);
        assert!(rx2.try_recv().is_err());
        reg.remove(1);
        assert_eq!(
            reg.push(EventKind::SchemaChange, &Bytes::from_static(b"x")),
            0
        );
    }
}
