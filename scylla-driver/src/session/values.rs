//! Bound values: serializing them for a prepared statement's bind markers,
//! and computing the routing (keyspace, token) they imply.

use std::cell::RefCell;

use scylla_cql::types::{SerializeRow, SerializedValues};

use super::request::RoutingInfo;
use crate::cluster::state::Snapshot;
use crate::error::ExecutionError;
use crate::routing::partition_key::token_of;
use crate::statement::PreparedStatement;

/// Serializes `values` for the bind markers of `prepared` (type-checked),
/// into a recycled buffer.
pub(crate) fn serialize(
    prepared: &PreparedStatement,
    values: &(impl SerializeRow + ?Sized),
) -> Result<PooledValues, ExecutionError> {
    let mut out = PooledValues::take();
    values.serialize_row(prepared.bind_markers(), &mut out)?;
    Ok(out)
}

/// Buffers kept per thread for reuse.
const POOLED_PER_THREAD: usize = 32;

thread_local! {
    static FREE_VALUES: RefCell<Vec<SerializedValues>> = const { RefCell::new(Vec::new()) };
}

/// A [`SerializedValues`] buffer that goes back to a per-thread free list
/// when dropped, so that binding values allocates nothing in steady state.
/// (A request's future may finish on another thread than it started on; the
/// buffer then simply joins that thread's list.)
#[derive(Debug, Default)]
pub(crate) struct PooledValues(Option<SerializedValues>);

impl PooledValues {
    pub(crate) fn take() -> Self {
        let reused = FREE_VALUES.with(|f| f.try_borrow_mut().ok().and_then(|mut f| f.pop()));
        let mut v = reused.unwrap_or_default();
        v.clear();
        PooledValues(Some(v))
    }

    /// The buffer, no longer pooled.
    pub(crate) fn into_inner(mut self) -> SerializedValues {
        self.0.take().unwrap_or_default()
    }
}

impl std::ops::Deref for PooledValues {
    type Target = SerializedValues;
    fn deref(&self) -> &SerializedValues {
        // `Some` from construction until `into_inner`/drop, which consume it.
        self.0.as_ref().unwrap_or(&EMPTY)
    }
}

impl std::ops::DerefMut for PooledValues {
    fn deref_mut(&mut self) -> &mut SerializedValues {
        self.0.get_or_insert_with(SerializedValues::new)
    }
}

impl Drop for PooledValues {
    fn drop(&mut self) {
        if let Some(v) = self.0.take() {
            let _ = FREE_VALUES.try_with(|f| {
                if let Ok(mut f) = f.try_borrow_mut() {
                    if f.len() < POOLED_PER_THREAD {
                        f.push(v);
                    }
                }
            });
        }
    }
}

static EMPTY: SerializedValues = SerializedValues::new();

/// Where a prepared statement with these values should go.
pub(crate) fn routing<'p>(
    state: &Snapshot,
    prepared: &'p PreparedStatement,
    values: &SerializedValues,
) -> RoutingInfo<'p> {
    RoutingInfo {
        keyspace: prepared
            .keyspace()
            .and_then(|ks| prepared.shared.keyspace_id.resolve(&state.routing, ks)),
        token: token_of(prepared.pk_indexes(), values),
        lwt: prepared.is_lwt(),
        tablets: prepared.shared.tablets.as_deref(),
    }
}
