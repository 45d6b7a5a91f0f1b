//! The SUPPORTED answer to OPTIONS, with ScyllaDB's extension keys.
//!
//! This is how a driver learns the connection's shard, the node's shard
//! count and sharding parameters, and the shard-aware port, so the values
//! must be exactly what ScyllaDB sends (see the protocol-extensions spec).

use bytes::{Bytes, BytesMut};
use scylla_cql::frame::header::Opcode;
use scylla_cql::frame::wire;
use scylla_cql::frame::ProtocolVersion;
use scylla_cql::sharding::{Shard, BIASED_TOKEN_ROUND_ROBIN, MURMUR3_PARTITIONER};

use crate::handler::Response;
use crate::topology::SHARDING_IGNORE_MSB;

/// The CQL version advertised.
pub const CQL_VERSION: &str = "3.3.1";
/// The LWT bit ScyllaDB marks in prepared metadata flags.
pub const LWT_OPTIMIZATION_META_BIT_MASK: u32 = 0x8000_0000;
/// ScyllaDB's error code for the rate-limit error.
pub const RATE_LIMIT_ERROR_CODE: i32 = 0xF000;

/// The SUPPORTED/STARTUP key of the tablets routing v1 extension.
pub const TABLETS_ROUTING_V1: &str = "TABLETS_ROUTING_V1";

/// The SUPPORTED/STARTUP key of tablets routing v2 (experimental name).
pub const TABLETS_ROUTING_V2: &str = "TABLETS_ROUTING_V2_EXPERIMENTAL";

/// ScyllaDB's key for result metadata ids on protocol v4.
pub const SCYLLA_USE_METADATA_ID: &str = "SCYLLA_USE_METADATA_ID";

/// The `PROTOCOL_VERSIONS` values of a cluster serving versions up to
/// `max`, oldest first, in Cassandra's `number/name` form (`"4/v4"`,
/// `"5/v5"`). Cassandra also lists `3/v3`; the test cluster lists only what
/// it really speaks.
pub fn protocol_versions(max: ProtocolVersion) -> Vec<String> {
    ProtocolVersion::ALL
        .iter()
        .filter(|v| **v <= max)
        .map(|v| format!("{}/{v}", v.number()))
        .collect()
}

/// The SUPPORTED options of a connection on `shard` of a node with
/// `nr_shards` shards and (maybe) a shard-aware port, on a cluster serving
/// every protocol version this crate speaks.
pub fn supported_options(
    shard: Shard,
    nr_shards: u16,
    shard_aware_port: Option<u16>,
) -> Vec<(&'static str, Vec<String>)> {
    supported_options_with_ssl(shard, nr_shards, shard_aware_port, None)
}

/// [`supported_options`] plus `SCYLLA_SHARD_AWARE_PORT_SSL` when the node
/// has a TLS shard-aware port (ScyllaDB advertises both ports on every
/// connection, plain or TLS).
pub fn supported_options_with_ssl(
    shard: Shard,
    nr_shards: u16,
    shard_aware_port: Option<u16>,
    shard_aware_port_ssl: Option<u16>,
) -> Vec<(&'static str, Vec<String>)> {
    supported_options_for(
        shard,
        nr_shards,
        shard_aware_port,
        shard_aware_port_ssl,
        ProtocolVersion::NEWEST,
    )
}

/// [`supported_options_with_ssl`] of a cluster serving protocol versions
/// up to `max_version` (listed in `PROTOCOL_VERSIONS`).
pub fn supported_options_for(
    shard: Shard,
    nr_shards: u16,
    shard_aware_port: Option<u16>,
    shard_aware_port_ssl: Option<u16>,
    max_version: ProtocolVersion,
) -> Vec<(&'static str, Vec<String>)> {
    let one = |s: String| vec![s];
    let mut v = vec![
        ("CQL_VERSION", one(CQL_VERSION.into())),
        ("COMPRESSION", vec!["lz4".into(), "snappy".into()]),
        ("PROTOCOL_VERSIONS", protocol_versions(max_version)),
        ("SCYLLA_SHARD", one(shard.to_string())),
        ("SCYLLA_NR_SHARDS", one(nr_shards.to_string())),
        ("SCYLLA_PARTITIONER", one(MURMUR3_PARTITIONER.into())),
        (
            "SCYLLA_SHARDING_ALGORITHM",
            one(BIASED_TOKEN_ROUND_ROBIN.into()),
        ),
        (
            "SCYLLA_SHARDING_IGNORE_MSB",
            one(SHARDING_IGNORE_MSB.to_string()),
        ),
        (
            "SCYLLA_LWT_ADD_METADATA_MARK",
            one(format!(
                "LWT_OPTIMIZATION_META_BIT_MASK={LWT_OPTIMIZATION_META_BIT_MASK}"
            )),
        ),
        (
            "SCYLLA_RATE_LIMIT_ERROR",
            one(format!("ERROR_CODE={RATE_LIMIT_ERROR_CODE}")),
        ),
        // As ScyllaDB: the key with one empty value; a client that puts the
        // key in its STARTUP gets `tablets-routing-v1` custom payloads.
        (TABLETS_ROUTING_V1, one(String::new())),
    ];
    if let Some(p) = shard_aware_port {
        v.push(("SCYLLA_SHARD_AWARE_PORT", one(p.to_string())));
    }
    if let Some(p) = shard_aware_port_ssl {
        v.push(("SCYLLA_SHARD_AWARE_PORT_SSL", one(p.to_string())));
    }
    v
}

/// The SUPPORTED response.
pub fn supported_response(shard: Shard, nr_shards: u16, shard_aware_port: Option<u16>) -> Response {
    supported_response_with_ssl(shard, nr_shards, shard_aware_port, None)
}

/// The SUPPORTED response with the TLS shard-aware port, if any.
pub fn supported_response_with_ssl(
    shard: Shard,
    nr_shards: u16,
    shard_aware_port: Option<u16>,
    shard_aware_port_ssl: Option<u16>,
) -> Response {
    supported_response_for(
        shard,
        nr_shards,
        shard_aware_port,
        shard_aware_port_ssl,
        ProtocolVersion::NEWEST,
        false,
    )
}

/// [`supported_response_with_ssl`], offering [`SCYLLA_USE_METADATA_ID`]
/// when `use_metadata_id`.
pub fn supported_response_with(
    shard: Shard,
    nr_shards: u16,
    shard_aware_port: Option<u16>,
    shard_aware_port_ssl: Option<u16>,
    use_metadata_id: bool,
) -> Response {
    supported_response_for(
        shard,
        nr_shards,
        shard_aware_port,
        shard_aware_port_ssl,
        ProtocolVersion::NEWEST,
        use_metadata_id,
    )
}

/// The SUPPORTED response of a cluster serving protocol versions up to
/// `max_version`, offering [`SCYLLA_USE_METADATA_ID`] when `use_metadata_id`.
pub fn supported_response_for(
    shard: Shard,
    nr_shards: u16,
    shard_aware_port: Option<u16>,
    shard_aware_port_ssl: Option<u16>,
    max_version: ProtocolVersion,
    use_metadata_id: bool,
) -> Response {
    supported_response_ext(
        shard,
        nr_shards,
        (shard_aware_port, shard_aware_port_ssl),
        max_version,
        use_metadata_id,
        false,
    )
}

/// [`supported_response_for`], also offering [`TABLETS_ROUTING_V2`] (beside
/// `TABLETS_ROUTING_V1`, as ScyllaDB does) when `tablets_routing_v2`.
pub fn supported_response_ext(
    shard: Shard,
    nr_shards: u16,
    (shard_aware_port, shard_aware_port_ssl): (Option<u16>, Option<u16>),
    max_version: ProtocolVersion,
    use_metadata_id: bool,
    tablets_routing_v2: bool,
) -> Response {
    let mut opts = supported_options_for(
        shard,
        nr_shards,
        shard_aware_port,
        shard_aware_port_ssl,
        max_version,
    );
    if use_metadata_id {
        opts.push((SCYLLA_USE_METADATA_ID, vec![String::new()]));
    }
    if tablets_routing_v2 {
        opts.push((TABLETS_ROUTING_V2, vec![String::new()]));
    }
    let mut b = BytesMut::with_capacity(512);
    // Cannot fail: a dozen short keys and values, far below the [short] limits.
    let _ = wire::put_string_multimap(
        &mut b,
        opts.iter().map(|(k, v)| (*k, v.as_slice())),
        "SUPPORTED",
    );
    Response::new(Opcode::Supported, Bytes::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use scylla_cql::frame::wire::WireReader;

    #[test]
    fn lists_the_versions_served() {
        let r = supported_response_for(0, 1, None, None, ProtocolVersion::V4, false);
        let m = WireReader::new(&r.body).read_string_multimap("s").unwrap();
        assert_eq!(m["PROTOCOL_VERSIONS"], vec!["4/v4"]);
        let r = supported_response_for(0, 1, None, None, ProtocolVersion::V5, false);
        let m = WireReader::new(&r.body).read_string_multimap("s").unwrap();
        assert_eq!(m["PROTOCOL_VERSIONS"], vec!["4/v4", "5/v5"]);
    }

    #[test]
    fn advertises_the_ssl_shard_aware_port_next_to_the_plain_one() {
        let r = supported_response_with_ssl(1, 4, Some(19042), Some(19142));
        let m = WireReader::new(&r.body).read_string_multimap("s").unwrap();
        assert_eq!(m["SCYLLA_SHARD_AWARE_PORT"], vec!["19042"]);
        assert_eq!(m["SCYLLA_SHARD_AWARE_PORT_SSL"], vec!["19142"]);
        let plain = supported_response(1, 4, Some(19042));
        let m = WireReader::new(&plain.body)
            .read_string_multimap("s")
            .unwrap();
        assert!(!m.contains_key("SCYLLA_SHARD_AWARE_PORT_SSL"));
    }

    #[test]
    fn carries_the_scylla_keys() {
        let r = supported_response(3, 8, Some(19042));
        let m = WireReader::new(&r.body).read_string_multimap("s").unwrap();
        assert_eq!(m["SCYLLA_SHARD"], vec!["3"]);
        assert_eq!(m["SCYLLA_NR_SHARDS"], vec!["8"]);
        assert_eq!(m["SCYLLA_SHARDING_IGNORE_MSB"], vec!["12"]);
        assert_eq!(m["SCYLLA_SHARD_AWARE_PORT"], vec!["19042"]);
        assert_eq!(
            m["SCYLLA_LWT_ADD_METADATA_MARK"],
            vec!["LWT_OPTIMIZATION_META_BIT_MASK=2147483648"]
        );
        assert_eq!(m["SCYLLA_RATE_LIMIT_ERROR"], vec!["ERROR_CODE=61440"]);
        assert_eq!(m["TABLETS_ROUTING_V1"], vec![""]);
        assert_eq!(m["PROTOCOL_VERSIONS"], vec!["4/v4", "5/v5"]);
        let r = supported_response(0, 1, None);
        let m = WireReader::new(&r.body).read_string_multimap("s").unwrap();
        assert!(!m.contains_key("SCYLLA_SHARD_AWARE_PORT"));
    }
}
