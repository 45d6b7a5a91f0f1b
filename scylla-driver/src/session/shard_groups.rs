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
    /// markers.
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
            match index.get(&key).and_then(|&at| groups.get_mut(at)) {
                Some(group) => group.rows.push(row),
                None => {
                    index.insert(key, groups.len());
                    groups.push(ShardGroup {
                        replicas,
                        rows: vec![row],
                    });
                }
            }
        }
        Ok(groups)
    }
}
