//! The session's cache of prepared statements, keyed by (session keyspace
//! when prepared, statement text), bounded by a size with least-recently-used
//! eviction.
//!
//! `Session::prepare` and the `query_*` methods with values (which prepare
//! their statement first) go through it, so a workload of many distinct
//! statement texts cannot grow it without bound. Eviction scans for the
//! oldest entry: it runs only on a miss into a full cache, which is followed
//! by a PREPARE round trip to every node anyway.

use std::collections::HashMap;
use std::sync::Arc;

use crate::statement::PreparedStatement;

/// The key: the session's keyspace when the statement was prepared (an
/// unqualified table name means another table after `USE`) and its text.
pub(crate) type PreparedKey = (Option<Arc<String>>, String);

/// A bounded LRU map of prepared statements.
#[derive(Debug)]
pub(crate) struct PreparedCache {
    capacity: usize,
    entries: HashMap<PreparedKey, Entry>,
    /// Incremented on every use: the larger, the more recent.
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    statement: PreparedStatement,
    last_used: u64,
}

impl PreparedCache {
    /// A cache of at most `capacity` statements (0: nothing is cached).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: HashMap::new(),
            clock: 0,
        }
    }

    /// The statement cached under `key`, marked as just used.
    pub(crate) fn get(&mut self, key: &PreparedKey) -> Option<PreparedStatement> {
        self.clock += 1;
        let entry = self.entries.get_mut(key)?;
        entry.last_used = self.clock;
        Some(entry.statement.clone())
    }

    /// Caches `statement`, evicting the least recently used one if full.
    pub(crate) fn insert(&mut self, key: PreparedKey, statement: PreparedStatement) {
        if self.capacity == 0 {
            return;
        }
        self.clock += 1;
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            let oldest = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.entries.remove(&k);
            }
        }
        self.entries.insert(
            key,
            Entry {
                statement,
                last_used: self.clock,
            },
        );
    }

    /// Statements cached.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}
