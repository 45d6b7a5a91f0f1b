//! The token of a partition key, from the bound values of a statement (its
//! partition key columns at `pk_indexes`): what routes a request.

use std::cell::RefCell;

use scylla_cql::frame::wire::RawValue;
use scylla_cql::token::{murmur3_token, PartitionKeyBuilder, Token};
use scylla_cql::types::SerializedValues;

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
