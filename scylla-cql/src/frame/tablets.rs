//! ScyllaDB's `tablets-routing-v1` custom payload (scylla-protocol-extensions.md,
//! "Tablets routing v1"): the tablet a misrouted request belongs to.
//!
//! When a request for a tablet table reaches a node or shard that does not
//! hold the token, the server (if the connection negotiated
//! `TABLETS_ROUTING_V1` in STARTUP) attaches to its RESULT a custom payload
//! entry [`TABLETS_ROUTING_V1_KEY`] whose value is a serialized
//! `tuple<bigint, bigint, list<frozen<tuple<uuid, int>>>>`: the tablet's token
//! range `(first_token, last_token]` and its replicas as (host id, shard), in
//! the tablet's replica order.
//!
//! [`TabletRoutingInfo::decode`] reads it with the crate's own type codecs
//! and never panics: malformed bytes, a negative or oversized shard, or an
//! empty range are a [`TabletPayloadError`] (a driver logs it and ignores
//! the payload: the request itself succeeded). [`TabletRoutingInfo::encode`]
//! writes it, for tests and the test cluster.

use uuid::Uuid;

use crate::sharding::Shard;
use crate::token::Token;
use crate::types::{ColumnType, DeserializationError, DeserializeValue, SerializationError};

/// The custom payload key of the tablet routing information.
pub const TABLETS_ROUTING_V1_KEY: &str = "tablets-routing-v1";

/// One tablet as the server describes it: a token range and its replicas.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TabletRoutingInfo {
    /// The range's exclusive start.
    pub first_token: Token,
    /// The range's inclusive end.
    pub last_token: Token,
    /// (host id, shard) of each replica, in the tablet's replica order.
    pub replicas: Vec<(Uuid, Shard)>,
}

/// A `tablets-routing-v1` payload that cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TabletPayloadError {
    /// The bytes are not a `tuple<bigint, bigint, list<tuple<uuid, int>>>`.
    #[error("tablets-routing-v1 payload does not decode")]
    Decode(#[from] DeserializationError),
    /// The payload entry is null.
    #[error("tablets-routing-v1 payload is null")]
    Null,
    /// `first_token >= last_token`: the range `(first, last]` is empty.
    #[error("tablets-routing-v1 range ({first}, {last}] is empty")]
    EmptyRange {
        /// The first token.
        first: i64,
        /// The last token.
        last: i64,
    },
    /// A replica's shard is negative or above the largest shard number.
    #[error("tablets-routing-v1 replica {host} has shard {shard}, out of range")]
    BadShard {
        /// The replica.
        host: Uuid,
        /// Its shard as sent.
        shard: i32,
    },
}

/// The payload's CQL type.
fn payload_type() -> ColumnType {
    ColumnType::Tuple(vec![
        ColumnType::BigInt,
        ColumnType::BigInt,
        ColumnType::List(Box::new(ColumnType::Tuple(vec![
            ColumnType::Uuid,
            ColumnType::Int,
        ]))),
    ])
}

type Wire = (i64, i64, Vec<(Uuid, i32)>);

impl TabletRoutingInfo {
    /// Decodes the value of a [`TABLETS_ROUTING_V1_KEY`] payload entry.
    pub fn decode(bytes: &[u8]) -> Result<Self, TabletPayloadError> {
        let typ = payload_type();
        <Wire as DeserializeValue>::type_check(&typ).map_err(DeserializationError::from)?;
        let (first, last, raw) = <Wire as DeserializeValue>::deserialize(&typ, Some(bytes))?;
        if first >= last {
            return Err(TabletPayloadError::EmptyRange { first, last });
        }
        let replicas = raw
            .into_iter()
            .map(|(host, shard)| {
                Shard::try_from(shard)
                    .map(|s| (host, s))
                    .map_err(|_| TabletPayloadError::BadShard { host, shard })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            first_token: Token(first),
            last_token: Token(last),
            replicas,
        })
    }

    /// Decodes a payload entry as found in a custom payload map (`None`:
    /// null).
    pub fn decode_entry(value: Option<&[u8]>) -> Result<Self, TabletPayloadError> {
        Self::decode(value.ok_or(TabletPayloadError::Null)?)
    }

    /// Encodes the payload entry's value.
    pub fn encode(&self) -> Result<Vec<u8>, SerializationError> {
        let wire: Wire = (
            self.first_token.0,
            self.last_token.0,
            self.replicas
                .iter()
                .map(|&(h, s)| (h, i32::from(s)))
                .collect(),
        );
        let mut out = Vec::new();
        crate::types::serialize::serialize_bytes(&wire, &payload_type(), &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info() -> impl Strategy<Value = TabletRoutingInfo> {
        (
            any::<i64>(),
            any::<i64>(),
            proptest::collection::vec((any::<u128>(), any::<u16>()), 0..8),
        )
            .prop_filter_map("non-empty range", |(a, b, r)| {
                (a < b).then(|| TabletRoutingInfo {
                    first_token: Token(a),
                    last_token: Token(b),
                    replicas: r
                        .into_iter()
                        .map(|(h, s)| (Uuid::from_u128(h), s % 0x8000))
                        .collect(),
                })
            })
    }

    #[test]
    fn known_bytes() {
        let host = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        let t = TabletRoutingInfo {
            first_token: Token(-1),
            last_token: Token(5),
            replicas: vec![(host, 3)],
        };
        let bytes = t.encode().unwrap();
        let mut want = vec![0, 0, 0, 8];
        want.extend_from_slice(&(-1i64).to_be_bytes());
        want.extend_from_slice(&[0, 0, 0, 8]);
        want.extend_from_slice(&5i64.to_be_bytes());
        // list: [bytes] length, count 1, element = [bytes] of tuple
        let mut elem = vec![0, 0, 0, 16];
        elem.extend_from_slice(host.as_bytes());
        elem.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 3]);
        let mut list = vec![0, 0, 0, 1];
        list.extend_from_slice(&(elem.len() as i32).to_be_bytes());
        list.extend_from_slice(&elem);
        want.extend_from_slice(&(list.len() as i32).to_be_bytes());
        want.extend_from_slice(&list);
        assert_eq!(bytes, want);
        assert_eq!(TabletRoutingInfo::decode(&want).unwrap(), t);
    }

    #[test]
    fn bad_payloads_are_typed_errors() {
        assert!(matches!(
            TabletRoutingInfo::decode_entry(None),
            Err(TabletPayloadError::Null)
        ));
        assert!(matches!(
            TabletRoutingInfo::decode(&[0, 0]),
            Err(TabletPayloadError::Decode(_))
        ));
        let empty = TabletRoutingInfo {
            first_token: Token(5),
            last_token: Token(5),
            replicas: vec![],
        };
        assert!(matches!(
            TabletRoutingInfo::decode(&empty.encode().unwrap()),
            Err(TabletPayloadError::EmptyRange { first: 5, last: 5 })
        ));
        let wire: Wire = (0, 1, vec![(Uuid::nil(), -1)]);
        let mut bytes = Vec::new();
        crate::types::serialize::serialize_bytes(&wire, &payload_type(), &mut bytes).unwrap();
        assert!(matches!(
            TabletRoutingInfo::decode(&bytes),
            Err(TabletPayloadError::BadShard { shard: -1, .. })
        ));
    }

    proptest! {
        #[test]
        fn round_trip(t in info()) {
            let bytes = t.encode().unwrap();
            prop_assert_eq!(TabletRoutingInfo::decode(&bytes).unwrap(), t);
        }

        /// Mutated, truncated or extended bytes never panic.
        #[test]
        fn mutated_bytes_never_panic(
            t in info(),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
            tail in proptest::collection::vec(any::<u8>(), 0..4),
        ) {
            let mut bytes = t.encode().unwrap();
            for (at, x) in flips {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    bytes[i] ^= x;
                }
            }
            bytes.truncate(cut % (bytes.len() + 1));
            bytes.extend_from_slice(&tail);
            let _ = TabletRoutingInfo::decode(&bytes);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = TabletRoutingInfo::decode(&bytes);
        }
    }
}
