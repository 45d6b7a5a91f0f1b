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
//!
//! # Tablets routing v2
//!
//! With `TABLETS_ROUTING_V2_EXPERIMENTAL` negotiated instead (it subsumes
//! v1; scylla-tablets-routing-v2.md), every tablet has a 64-bit
//! `tablet_version` the server derives from its replica list (and, for a
//! strongly consistent tablet, from its Raft leader). Every EXECUTE carries
//! one [`TabletVersionBlock`] of the version the client holds for the
//! request's tablet; when it does not match the server's, a successful
//! answer carries [`TABLETS_ROUTING_V2_KEY`]: a [`TabletRoutingV2`], the v1
//! tuple plus the version (`tuple<bigint, bigint, list<frozen<tuple<uuid,
//! int>>>, bigint>`), replicas in the order the version was computed from
//! (leader first on a strongly consistent table).

use uuid::Uuid;

use crate::sharding::Shard;
use crate::token::Token;
use crate::types::{
    ColumnType, DeserializationError, DeserializeValue, NativeType, SerializationError,
};

/// The custom payload key of the tablet routing information.
pub const TABLETS_ROUTING_V1_KEY: &str = "tablets-routing-v1";

/// The custom payload key of tablet routing v2 information.
pub const TABLETS_ROUTING_V2_KEY: &str = "tablets-routing-v2";

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

/// A `tablets-routing-v1` or `-v2` payload that cannot be used.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum TabletPayloadError {
    /// The bytes are not a `tuple<bigint, bigint, list<tuple<uuid, int>>>`
    /// (v2: with a trailing `bigint`).
    #[error("tablet routing payload does not decode")]
    Decode(#[from] DeserializationError),
    /// The payload entry is null.
    #[error("tablet routing payload is null")]
    Null,
    /// `first_token >= last_token`: the range `(first, last]` is empty.
    #[error("tablet routing payload range ({first}, {last}] is empty")]
    EmptyRange {
        /// The first token.
        first: i64,
        /// The last token.
        last: i64,
    },
    /// A replica's shard is negative or above the largest shard number.
    #[error("tablet routing payload replica {host} has shard {shard}, out of range")]
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
        ColumnType::Native(NativeType::BigInt),
        ColumnType::Native(NativeType::BigInt),
        ColumnType::list(ColumnType::Tuple(vec![
            ColumnType::Native(NativeType::Uuid),
            ColumnType::Native(NativeType::Int),
        ])),
    ])
}

type Wire = (i64, i64, Vec<(Uuid, i32)>);

/// The v2 payload's CQL type: the v1 tuple and the tablet version.
fn payload_type_v2() -> ColumnType {
    let ColumnType::Tuple(mut parts) = payload_type() else {
        return ColumnType::Tuple(Vec::new());
    };
    parts.push(ColumnType::Native(NativeType::BigInt));
    ColumnType::Tuple(parts)
}

type WireV2 = (i64, i64, Vec<(Uuid, i32)>, i64);

impl TabletRoutingInfo {
    /// Decodes the value of a [`TABLETS_ROUTING_V1_KEY`] payload entry.
    pub fn decode(bytes: &[u8]) -> Result<Self, TabletPayloadError> {
        let typ = payload_type();
        <Wire as DeserializeValue>::type_check(&typ).map_err(DeserializationError::from)?;
        let (first, last, raw) = <Wire as DeserializeValue>::deserialize(&typ, Some(bytes))?;
        Self::checked(first, last, raw)
    }

    /// The routing of a decoded tuple, its range and shards checked.
    fn checked(first: i64, last: i64, raw: Vec<(Uuid, i32)>) -> Result<Self, TabletPayloadError> {
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
        let wire: Wire = (self.first_token.0, self.last_token.0, self.wire_replicas());
        let mut out = Vec::new();
        crate::types::serialize::serialize_bytes(&wire, &payload_type(), &mut out)?;
        Ok(out)
    }

    fn wire_replicas(&self) -> Vec<(Uuid, i32)> {
        self.replicas
            .iter()
            .map(|&(h, s)| (h, i32::from(s)))
            .collect()
    }
}

/// A `tablets-routing-v2` payload: the tablet's current routing, replicas in
/// the order its version was computed from (for a strongly consistent
/// tablet the Raft leader first), and that version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TabletRoutingV2 {
    /// The range and the replicas, as in v1.
    pub routing: TabletRoutingInfo,
    /// The tablet version (a bigint on the wire, read as its 64 bits).
    pub version: u64,
}

impl TabletRoutingV2 {
    /// Decodes the value of a [`TABLETS_ROUTING_V2_KEY`] payload entry.
    pub fn decode(bytes: &[u8]) -> Result<Self, TabletPayloadError> {
        let typ = payload_type_v2();
        <WireV2 as DeserializeValue>::type_check(&typ).map_err(DeserializationError::from)?;
        let (first, last, raw, version) =
            <WireV2 as DeserializeValue>::deserialize(&typ, Some(bytes))?;
        Ok(Self {
            routing: TabletRoutingInfo::checked(first, last, raw)?,
            version: version as u64,
        })
    }

    /// Decodes a payload entry as found in a custom payload map (`None`:
    /// null).
    pub fn decode_entry(value: Option<&[u8]>) -> Result<Self, TabletPayloadError> {
        Self::decode(value.ok_or(TabletPayloadError::Null)?)
    }

    /// Encodes the payload entry's value.
    pub fn encode(&self) -> Result<Vec<u8>, SerializationError> {
        let r = &self.routing;
        let wire: WireV2 = (
            r.first_token.0,
            r.last_token.0,
            r.wire_replicas(),
            self.version as i64,
        );
        let mut out = Vec::new();
        crate::types::serialize::serialize_bytes(&wire, &payload_type_v2(), &mut out)?;
        Ok(out)
    }
}

/// One 4-bit block of a 64-bit tablet version as an EXECUTE carries it: the
/// block's index (0..=15, from the least significant bits) in the high
/// nibble, its value in the low one. Block `i` is bits `[4i, 4i + 4)` of the
/// version as an integer, whatever the byte order. The 13th block equal to
/// 0xC is the byte 0xDC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TabletVersionBlock(pub u8);

impl TabletVersionBlock {
    /// Block `index` (taken modulo 16) of `version`.
    #[inline]
    pub const fn of(version: u64, index: u8) -> Self {
        let i = index & 0x0F;
        let value = ((version >> (4 * i as u32)) & 0x0F) as u8;
        Self((i << 4) | value)
    }

    /// The block's index in the version (0..=15).
    #[inline]
    pub const fn index(self) -> u8 {
        self.0 >> 4
    }

    /// The block's value (0..=15).
    #[inline]
    pub const fn value(self) -> u8 {
        self.0 & 0x0F
    }

    /// Whether `version` has this block (the server's check: a mismatch
    /// sends the current routing back).
    #[inline]
    pub const fn matches(self, version: u64) -> bool {
        Self::of(version, self.index()).0 == self.0
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

    #[test]
    fn version_blocks_follow_the_spec() {
        // The spec's example: block 13 equal to 0xC is the byte 0xDC.
        let v = 0xCu64 << (13 * 4);
        assert_eq!(TabletVersionBlock::of(v, 13), TabletVersionBlock(0xDC));
        let b = TabletVersionBlock(0xA3);
        assert_eq!((b.index(), b.value()), (0xA, 0x3));
        let v = 0x0123_4567_89AB_CDEFu64;
        assert_eq!(TabletVersionBlock::of(v, 0).0, 0x0F);
        assert_eq!(TabletVersionBlock::of(v, 15).0, 0xF0);
        assert_eq!(TabletVersionBlock::of(v, 16), TabletVersionBlock::of(v, 0));
        assert!(TabletVersionBlock(0x1E).matches(v));
        assert!(!TabletVersionBlock(0x1F).matches(v));
    }

    #[test]
    fn v2_known_bytes_extend_v1() {
        let host = Uuid::from_u128(7);
        let routing = TabletRoutingInfo {
            first_token: Token(-10),
            last_token: Token(10),
            replicas: vec![(host, 1)],
        };
        let t = TabletRoutingV2 {
            routing: routing.clone(),
            version: u64::MAX - 1,
        };
        let v1 = routing.encode().unwrap();
        let v2 = t.encode().unwrap();
        // Same leading elements, then the version as a bigint.
        assert_eq!(&v2[..v1.len()], &v1[..]);
        let mut tail = vec![0, 0, 0, 8];
        tail.extend_from_slice(&(-2i64).to_be_bytes());
        assert_eq!(&v2[v1.len()..], &tail[..]);
        assert_eq!(TabletRoutingV2::decode(&v2).unwrap(), t);
        // Neither decoder takes the other's payload.
        assert!(TabletRoutingV2::decode(&v1).is_err());
        assert!(TabletRoutingInfo::decode(&v2).is_err());
        assert!(matches!(
            TabletRoutingV2::decode_entry(None),
            Err(TabletPayloadError::Null)
        ));
    }

    proptest! {
        #[test]
        fn v2_round_trip(t in info(), version in any::<u64>()) {
            let t = TabletRoutingV2 { routing: t, version };
            let bytes = t.encode().unwrap();
            prop_assert_eq!(TabletRoutingV2::decode(&bytes).unwrap(), t);
        }

        /// Mutated, truncated or extended v2 bytes never panic.
        #[test]
        fn v2_mutated_bytes_never_panic(
            t in info(),
            version in any::<u64>(),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
        ) {
            let mut bytes = TabletRoutingV2 { routing: t, version }.encode().unwrap();
            for (at, x) in flips {
                if !bytes.is_empty() {
                    let i = at % bytes.len();
                    bytes[i] ^= x;
                }
            }
            bytes.truncate(cut % (bytes.len() + 1));
            let _ = TabletRoutingV2::decode(&bytes);
        }

        /// A block encodes its index and value and decodes back to them;
        /// the version it came from matches it, and a version differing in
        /// that block does not.
        #[test]
        fn version_block_pairs(version in any::<u64>(), index in 0u8..16, flip in 1u64..16) {
            let b = TabletVersionBlock::of(version, index);
            prop_assert_eq!(b.index(), index);
            prop_assert_eq!(u64::from(b.value()), (version >> (4 * u32::from(index))) & 0xF);
            prop_assert_eq!(TabletVersionBlock((b.index() << 4) | b.value()), b);
            prop_assert!(b.matches(version));
            let other = version ^ (flip << (4 * u32::from(index)));
            prop_assert!(!b.matches(other));
            // Any byte is some block: decoding never fails.
            let any = TabletVersionBlock(version as u8);
            prop_assert_eq!(TabletVersionBlock::of(version, any.index()).matches(version), true);
        }

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
