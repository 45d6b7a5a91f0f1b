//! The statements one node has prepared since it started: a node that
//! restarts has forgotten them all (as a ScyllaDB node does: its prepared
//! statement cache lives in memory), and answers UNPREPARED to an EXECUTE of
//! any of them until a client prepares it there again. The statements
//! themselves live in the cluster's shared [`Store`](crate::cql::Store).

use std::collections::HashSet;
use std::sync::Mutex;

use bytes::Bytes;

/// The ids of the statements a node has prepared in its current lifetime.
#[derive(Debug, Default)]
pub(crate) struct PreparedIds {
    ids: Mutex<HashSet<Bytes>>,
}

impl PreparedIds {
    /// Remembers that `id` was prepared on this node.
    pub(crate) fn add(&self, id: Bytes) {
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id);
    }

    /// Whether `id` was prepared on this node since it started.
    pub(crate) fn contains(&self, id: &[u8]) -> bool {
        self.ids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(id)
    }
}
