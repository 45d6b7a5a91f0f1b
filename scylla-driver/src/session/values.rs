//! Bound values: serializing them for a prepared statement's bind markers,
//! and computing the routing (keyspace, token) they imply.

use std::cell::RefCell;

use scylla_cql::frame::wire::RawValue;
use scylla_cql::token::{murmur3_token, PartitionKeyBuilder, Token};
use scylla_cql::types::{SerializeRow, SerializedValues};

use super::execute::RoutingInfo;
use crate::cluster::state::ClusterState;
use crate::error::ExecutionError;
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
pub(crate) fn routing(
    state: &ClusterState,
    prepared: &PreparedStatement,
    values: &SerializedValues,
) -> RoutingInfo {
    RoutingInfo {
        keyspace: prepared
            .keyspace()
            .and_then(|ks| state.routing.keyspace_id(ks)),
        token: token_of(prepared.pk_indexes(), values),
        lwt: prepared.is_lwt(),
    }
}

fn value_at(values: &SerializedValues, index: u16) -> Option<&[u8]> {
    match values.iter().nth(index as usize)?.1 {
        RawValue::Value(v) => Some(v),
        RawValue::Null | RawValue::Unset => None,
    }
}

thread_local! {
    /// Reused for composite keys, so that computing a token never allocates
    /// in steady state.
    static KEY: RefCell<PartitionKeyBuilder> = RefCell::new(PartitionKeyBuilder::new());
}

/// The token of the partition key bound by `values`, when every component is
/// bound (and not null).
pub(crate) fn token_of(pk_indexes: &[u16], values: &SerializedValues) -> Option<Token> {
    match pk_indexes {
        [] => None,
        [single] => value_at(values, *single).map(murmur3_token),
        many => KEY.with(|key| {
            let mut key = key.try_borrow_mut().ok()?;
            key.clear();
            for &i in many {
                key.push(value_at(values, i)?).ok()?;
            }
            Some(murmur3_token(key.finish()))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_of_single_and_composite_keys() {
        let mut v = SerializedValues::new();
        v.push(RawValue::Value(b"test")).unwrap();
        v.push(RawValue::Value(&7i32.to_be_bytes())).unwrap();
        v.push(RawValue::Null).unwrap();
        assert_eq!(token_of(&[0], &v), Some(murmur3_token(b"test")));
        let composite = scylla_cql::token::partition_key::serialize_partition_key(&[
            &7i32.to_be_bytes(),
            b"test",
        ])
        .unwrap();
        assert_eq!(token_of(&[1, 0], &v), Some(murmur3_token(&composite)));
        assert_eq!(token_of(&[2], &v), None, "a null key has no token");
        assert_eq!(token_of(&[], &v), None);
        assert_eq!(token_of(&[9], &v), None);
    }
}
