//! Opening a node's TLS connections so that they can resume.
//!
//! A node that accepts its tickets on every shard (ScyllaDB's default, see
//! `docs/pools.md`) sends two TLS 1.3 tickets after each handshake, and a
//! client offers each ticket at most once. A pool that opens a node's shards
//! all at once right after the first connection has two tickets for up to
//! `max_concurrent_opens` handshakes: the rest pay a full handshake. The
//! [`TicketGate`] paces the opens by the tickets held for the node instead:
//! an open may start when
//!
//! - it claims a ticket: more tickets arrived since the pool's first
//!   connection to the node (its epoch) are held than opens (of any pool
//!   sharing the store) have claimed and not finished, or
//! - no open of this pool is in flight (nothing would bring a ticket), or
//! - an open finished since the epoch and no ticket arrived (the node issues
//!   none: no pacing), or
//! - it has waited [`TICKET_WAIT`] (a stuck handshake never stalls coverage).
//!
//! (The rule itself is [`TicketGateFacts::admits`], which `storm_sim`'s TLS
//! model calls too.)
//!
//! Every finished handshake (full or resumed, accepted ticket or not) brings
//! two new tickets, so the opens in flight grow 2, 3, 4... up to the pool's
//! `max_concurrent_opens` within a few handshakes. When the node accepts a
//! ticket only on the shard that issued it, the offered tickets fail and the
//! handshakes are full ones, as without pacing; the pace costs at most the
//! first few handshake times of ramp-up (measured in `docs/performance.md`).
//!
//! The epoch is reset whenever the pool finds connections broken or opens a
//! first connection (the node may have restarted): tickets of before may be
//! of the node's earlier lifetime, which refuses them, so they are not
//! counted (rustls offers the newest ticket first, so they are offered only
//! when no newer one is left). The first open after that goes alone (no
//! open in flight) and brings the new lifetime's tickets.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::pki_types::ServerName;
use tokio::sync::Notify;

use super::pacing::{TicketGateFacts, TICKET_WAIT};
use crate::connection::tls_tickets::TicketStore;

/// The pacing of one pool's opens by the tickets held for its node.
#[derive(Debug)]
pub(crate) struct TicketGate {
    store: Arc<TicketStore>,
    name: ServerName<'static>,
    state: Mutex<GateState>,
    finished: Notify,
}

#[derive(Debug)]
struct GateState {
    /// Tickets that arrived before this are not counted.
    epoch: Instant,
    /// Opens let through and not finished.
    in_flight: usize,
    /// Whether an open finished (or a first connection was opened) since
    /// the epoch.
    finished_since_epoch: bool,
}

/// An open let through the gate; dropping it says the open finished.
#[derive(Debug)]
pub(crate) struct Pass {
    gate: Arc<TicketGate>,
    claim: bool,
}

impl Drop for Pass {
    fn drop(&mut self) {
        {
            let mut st = self.gate.lock();
            st.in_flight = st.in_flight.saturating_sub(1);
            st.finished_since_epoch = true;
        }
        if self.claim {
            self.gate.store.release_claim(&self.gate.name);
        }
        self.gate.finished.notify_waiters();
    }
}

impl TicketGate {
    pub(crate) fn new(store: Arc<TicketStore>, name: ServerName<'static>) -> TicketGate {
        TicketGate {
            store,
            name,
            state: Mutex::new(GateState {
                epoch: Instant::now(),
                in_flight: 0,
                finished_since_epoch: false,
            }),
            finished: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The pool is about to open a first connection: count only tickets
    /// that arrive from now on.
    pub(crate) fn new_epoch(&self) {
        let mut st = self.lock();
        st.epoch = Instant::now();
        st.finished_since_epoch = false;
    }

    /// A first connection (not paced) was opened.
    pub(crate) fn first_opened(&self) {
        self.lock().finished_since_epoch = true;
    }

    /// Tickets counted now (arrived since the epoch, not yet offered).
    pub(crate) fn available(&self) -> usize {
        let epoch = self.lock().epoch;
        self.store.available_since(&self.name, epoch)
    }

    /// Waits (at most [`TICKET_WAIT`]) until an open may start; see the module
    /// doc.
    pub(crate) async fn enter(self: &Arc<Self>) -> Pass {
        let deadline = tokio::time::Instant::now() + TICKET_WAIT;
        let mut changes = self.store.subscribe();
        loop {
            // Register for both wake-ups before looking, so that none is
            // missed between the look and the wait.
            changes.borrow_and_update();
            let finished = self.finished.notified();
            tokio::pin!(finished);
            finished.as_mut().enable();
            {
                let mut st = self.lock();
                let claim = self.store.try_claim(&self.name, st.epoch);
                let facts = TicketGateFacts {
                    claimed: claim,
                    in_flight: st.in_flight,
                    finished_since_epoch: st.finished_since_epoch,
                    received_since_epoch: self.store.received_since(&self.name, st.epoch),
                    waited_out: tokio::time::Instant::now() >= deadline,
                };
                if facts.admits() {
                    st.in_flight += 1;
                    return Pass {
                        gate: self.clone(),
                        claim,
                    };
                }
            }
            tokio::select! {
                _ = changes.changed() => {}
                _ = &mut finished => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}
