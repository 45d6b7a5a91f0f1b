//! Tablets routing v2 on the request path (scylla-tablets-routing-v2.md):
//! the tablet version block each EXECUTE carries on a connection that
//! negotiated `TABLETS_ROUTING_V2_EXPERIMENTAL`, and leader-first plans for
//! strongly consistent tables. The `tablets-routing-v2` payload a stale
//! block brings back is applied with the v1 one (`execute::learn_tablet`).
//!
//! # Which tables go to the leader first
//! A keyspace created with `consistency = 'global'` (or `'local'`) is
//! strongly consistent: each tablet is a Raft group, and a request reaching
//! another replica is forwarded to the leader. The driver knows it from the
//! schema (`system_schema.scylla_keyspaces.consistency`, read with the rest
//! of the metadata), not from the payload: a v2 payload lists the leader
//! first only for such tables, and for the others in a sorted order that
//! would send all of a tablet's requests to one replica if it were kept.
//! For a strongly consistent table the plan keeps the tablet's replica order
//! (as for an LWT: no rotation, no load-based reordering), so once a v2
//! payload taught the tablet, the leader comes first (within the local
//! datacenter first, when one is set).
//!
//! # Cost
//! A connection without v2 pays one flag check per attempt. A v2 attempt
//! reads the tablet's version (a guard load of the table's snapshot and one
//! binary search) and a thread-local counter; nothing is allocated.

use std::cell::Cell;

use scylla_cql::frame::tablets::TabletVersionBlock;

use crate::connection::Connection;
use crate::routing::{RoutingRequest, TabletTable, Token};

/// The tablet version block of an attempt on `conn` for the request's
/// table's tablets (`tablets`) and `token`: `None` unless the connection
/// negotiated tablets routing v2 (the byte is then part of every EXECUTE it
/// sends).
#[inline]
pub(super) fn tablet_block(
    conn: &Connection,
    tablets: Option<&TabletTable>,
    token: Option<Token>,
) -> Option<u8> {
    if !conn.info().server.extensions.tablets_routing_v2 {
        return None;
    }
    Some(block_for(tablets, token))
}

/// A block of the version cached for the request's tablet, at a block
/// index that advances with every v2 attempt of the thread: a stale version
/// that agrees with the current one in some blocks is still found by the
/// next ones.
fn block_for(tablets: Option<&TabletTable>, token: Option<Token>) -> u8 {
    thread_local!(static TURN: Cell<u8> = const { Cell::new(0) });
    let turn = TURN.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n
    });
    let version = match (tablets, token) {
        (Some(t), Some(token)) if t.uses_tablets() => t.version(token),
        _ => None,
    };
    match version {
        Some(v) => TabletVersionBlock::of(v, turn).0,
        // Unknown version: a tablet not learned yet (a cold cache), learned
        // from `system.tablets` or a v1 payload, a vnode table (the server
        // ignores the byte), a request without a token. Any byte will do;
        // against the server's version a block matches with probability
        // 1/16, so the first request to such a tablet brings its routing
        // back with probability 15/16 (16/15 requests expected), and the
        // version stays unknown, and each request keeps asking, until it does.
        None => turn.rotate_right(4),
    }
}

/// `request` with the tablet's replica order kept (leader first) when
/// `slot`'s table is strongly consistent.
#[inline]
pub(super) fn leader_first(request: RoutingRequest, slot: Option<&TabletTable>) -> RoutingRequest {
    match slot {
        Some(t) if t.leader_first() => RoutingRequest {
            lwt: true,
            ..request
        },
        _ => request,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strongly_consistent_tables_keep_the_replica_order() {
        let request = RoutingRequest::default();
        let t = TabletTable::new("ks", "t", true);
        assert!(!leader_first(request, Some(&t)).lwt);
        assert!(!leader_first(request, None).lwt);
        t.set_leader_first(true);
        assert!(leader_first(request, Some(&t)).lwt);
    }

    #[test]
    fn blocks_rotate_over_every_index() {
        let mut seen = [false; 16];
        for _ in 0..16 {
            seen[usize::from(block_for(None, None) >> 4)] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }
}
