//! Shard-aware batching: rows of one prepared statement grouped by the
//! replicas (nodes and shards) that own their partitions, so that each group
//! goes out as a batch that one coordinator shard applies locally.
//!
//! A batch is routed like its first statement: to a replica of the first
//! row's partition, on that partition's shard. A batch that mixes partitions
//! of several replica sets therefore makes that shard forward most of its
//! rows to other shards and nodes; grouping first avoids that. Rows are
//! grouped by their whole replica set (each replica with its shard), not by
//! one node, so whichever replica the session picks for a group's batch
//! owns every row of it.

use std::collections::HashMap;

use scylla_cql::types::{SerializeRow, SerializedValues};
use uuid::Uuid;

use crate::cluster::view::Replica;
use crate::error::ExecutionError;
use crate::statement::{Batch, BatchType, PreparedStatement};

use super::Session;

/// How large a group may grow before another group of the same replicas is
/// started, so that each group sent as one batch stays within what servers
/// accept: Cassandra refuses a batch above `batch_size_fail_threshold`
/// (50 KiB by default, of mutations a little larger than their values),
/// ScyllaDB above 1 MiB by default, and a BATCH message holds at most 65,535
/// statements.
///
/// ```
/// use scylla_driver::session::ShardGroupLimits;
///
/// let limits = ShardGroupLimits::default().max_rows(100).max_bytes(16 * 1024);
/// assert_eq!((limits.rows(), limits.bytes()), (100, 16 * 1024));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardGroupLimits {
    max_rows: usize,
    max_bytes: usize,
}

impl Default for ShardGroupLimits {
    /// At most 1,000 rows and 32 KiB of bound values per group.
    fn default() -> Self {
        Self {
            max_rows: 1000,
            max_bytes: 32 * 1024,
        }
    }
}

impl ShardGroupLimits {
    /// At most `n` rows per group (at least 1; at most 65,535).
    #[must_use]
    pub fn max_rows(mut self, n: usize) -> Self {
        self.max_rows = n.clamp(1, usize::from(u16::MAX));
        self
    }

    /// At most `n` bytes of serialized values per group (a single row
    /// larger than this is a group of its own).
    #[must_use]
    pub fn max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = n;
        self
    }

    /// The row bound.
    pub fn rows(&self) -> usize {
        self.max_rows
    }

    /// The byte bound.
    pub fn bytes(&self) -> usize {
        self.max_bytes
    }
}

/// Rows whose partitions have the same replicas, on the same shards: one
/// batch's worth (see [`Session::group_by_replica_shard`]).
#[derive(Debug, Clone)]
pub struct ShardGroup<R> {
    /// The replicas of every row of the group, in the session's order of
    /// preference (primary first), each with its shard when known. Empty for
    /// rows whose replicas the session does not know: rows without a whole
    /// partition key, or of a tablet not learned yet.
    pub replicas: Vec<Replica>,
    /// The rows, in their input order.
    pub rows: Vec<R>,
    /// The size of the rows' serialized values.
    pub bytes: usize,
}

impl<R> ShardGroup<R> {
    /// A batch of `batch_type` with `statement` once per row, and the rows:
    /// what [`Session::batch`] takes.
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::statement::BatchType;
    ///
    /// let insert = session.prepare("INSERT INTO ks.t (k, v) VALUES (?, ?)").await?;
    /// let rows: Vec<(i32, String)> = (0..1000).map(|k| (k, format!("v{k}"))).collect();
    /// for group in session.group_by_replica_shard(&insert, rows)? {
    ///     let (batch, rows) = group.into_batch(BatchType::Unlogged, &insert);
    ///     session.batch(&batch, rows).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn into_batch(
        self,
        batch_type: BatchType,
        statement: &PreparedStatement,
    ) -> (Batch, Vec<R>) {
        let mut batch = Batch::new(batch_type);
        batch.statements.reserve(self.rows.len());
        for _ in 0..self.rows.len() {
            batch.append(statement);
        }
        (batch, self.rows)
    }
}

impl Session {
    /// Groups `rows`, values of `statement`, by the replicas and shards that
    /// own their partitions, from the session's current view of the cluster
    /// (token ring or tablets): a batch made of one group
    /// ([`ShardGroup::into_batch`]) is applied by one shard of one replica,
    /// instead of being forwarded piecemeal. Groups come in the order of
    /// their first row. Fails if a row does not fit the statement's bind
    /// markers. Groups are bounded by [`ShardGroupLimits::default`] (see
    /// [`group_by_replica_shard_within`](Self::group_by_replica_shard_within)):
    /// rows of one replica set beyond a bound start another group.
    ///
    /// For a table with tablets, rows of tablets the session has not learned
    /// yet share one group with no replicas; the session learns a tablet
    /// from the first request that reaches it (or from
    /// [`TabletWarmup`](crate::TabletWarmup)).
    pub fn group_by_replica_shard<R: SerializeRow>(
        &self,
        statement: &PreparedStatement,
        rows: impl IntoIterator<Item = R>,
    ) -> Result<Vec<ShardGroup<R>>, ExecutionError> {
        self.group_by_replica_shard_within(statement, rows, ShardGroupLimits::default())
    }

    /// As [`group_by_replica_shard`](Self::group_by_replica_shard), each
    /// group within `limits`.
    pub fn group_by_replica_shard_within<R: SerializeRow>(
        &self,
        statement: &PreparedStatement,
        rows: impl IntoIterator<Item = R>,
        limits: ShardGroupLimits,
    ) -> Result<Vec<ShardGroup<R>>, ExecutionError> {
        let view = self.cluster();
        let table = statement.keyspace().zip(statement.table());
        let mut groups: Vec<ShardGroup<R>> = Vec::new();
        let mut index: HashMap<Vec<(Uuid, Option<u16>)>, usize> = HashMap::new();
        let mut values = SerializedValues::new();
        for row in rows {
            values.clear();
            row.serialize_row(statement.bind_markers(), &mut values)?;
            let token = crate::routing::partition_key::token_of(statement.pk_indexes(), &values);
            let replicas = match (table, token) {
                (Some((keyspace, table)), Some(token)) => view.replicas(keyspace, table, token),
                _ => Vec::new(),
            };
            let mut key: Vec<(Uuid, Option<u16>)> =
                replicas.iter().map(|r| (r.host_id, r.shard)).collect();
            key.sort_unstable();
            let size = values.as_bytes().len();
            let open = index
                .get(&key)
                .and_then(|&at| groups.get_mut(at))
                .filter(|g| {
                    g.rows.len() < limits.max_rows
                        && g.bytes.saturating_add(size) <= limits.max_bytes
                });
            match open {
                Some(group) => {
                    group.rows.push(row);
                    group.bytes += size;
                }
                None => {
                    // The first group of these replicas, or the previous one
                    // is full: this one takes the replicas' next rows.
                    index.insert(key, groups.len());
                    groups.push(ShardGroup {
                        replicas,
                        rows: vec![row],
                        bytes: size,
                    });
                }
            }
        }
        Ok(groups)
    }
}
