//! SUPPORTED (section 4.2.4): a `[string multimap]` of the STARTUP options the
//! server supports, and ScyllaDB's extensions advertised in it
//! (scylla-protocol-extensions.md): sharding parameters, the shard-aware
//! ports, the LWT metadata mark, the rate-limit error code, the host id.
//!
//! [`Supported`] is the raw multimap, as on the wire. [`ScyllaExtensions`]
//! parses it into typed values: an absent key means the server does not have
//! the extension (Cassandra), a present but malformed one is reported as an
//! [`ExtensionError`] naming the key, so that a driver can log why it falls
//! back. [`ScyllaExtensions::to_supported`] writes them back, for the test
//! cluster.

use crate::frame::ProtocolVersion;
use std::collections::HashMap;
use std::num::NonZeroU16;

use bytes::BytesMut;
use uuid::Uuid;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::{MessageBody, Opcode};
use crate::sharding::{Shard, Sharder, BIASED_TOKEN_ROUND_ROBIN, MURMUR3_PARTITIONER};

/// Keys and parameter names of SUPPORTED.
pub mod keys {
    /// Compression algorithms (`lz4`, `snappy`).
    pub const COMPRESSION: &str = "COMPRESSION";
    /// CQL versions.
    pub const CQL_VERSION: &str = "CQL_VERSION";
    /// Native protocol versions (`3/v3`, `4/v4`, ...).
    pub const PROTOCOL_VERSIONS: &str = "PROTOCOL_VERSIONS";
    /// Shard of this connection.
    pub const SCYLLA_SHARD: &str = "SCYLLA_SHARD";
    /// Number of shards of the node.
    pub const SCYLLA_NR_SHARDS: &str = "SCYLLA_NR_SHARDS";
    /// Partitioner class name.
    pub const SCYLLA_PARTITIONER: &str = "SCYLLA_PARTITIONER";
    /// Sharding algorithm name.
    pub const SCYLLA_SHARDING_ALGORITHM: &str = "SCYLLA_SHARDING_ALGORITHM";
    /// The algorithm's `ignore_msb` parameter.
    pub const SCYLLA_SHARDING_IGNORE_MSB: &str = "SCYLLA_SHARDING_IGNORE_MSB";
    /// The shard-aware port.
    pub const SCYLLA_SHARD_AWARE_PORT: &str = "SCYLLA_SHARD_AWARE_PORT";
    /// The shard-aware TLS port.
    pub const SCYLLA_SHARD_AWARE_PORT_SSL: &str = "SCYLLA_SHARD_AWARE_PORT_SSL";
    /// The LWT prepared-metadata mark extension.
    pub const SCYLLA_LWT_ADD_METADATA_MARK: &str = "SCYLLA_LWT_ADD_METADATA_MARK";
    /// Parameter of [`SCYLLA_LWT_ADD_METADATA_MARK`]: the flag bit mask.
    pub const LWT_OPTIMIZATION_META_BIT_MASK: &str = "LWT_OPTIMIZATION_META_BIT_MASK";
    /// The rate-limit error extension.
    pub const SCYLLA_RATE_LIMIT_ERROR: &str = "SCYLLA_RATE_LIMIT_ERROR";
    /// Parameter of [`SCYLLA_RATE_LIMIT_ERROR`]: the error code.
    pub const ERROR_CODE: &str = "ERROR_CODE";
    /// The host id of the node.
    pub const SCYLLA_HOST_ID: &str = "SCYLLA_HOST_ID";
    /// Tablet routing information in custom payloads.
    pub const TABLETS_ROUTING_V1: &str = "TABLETS_ROUTING_V1";
    /// Tablet routing v2: tablet versions on EXECUTE, refreshed routing (and
    /// the Raft leader of strongly consistent tablets) in custom payloads.
    /// The experimental name ScyllaDB uses while the extension may change.
    pub const TABLETS_ROUTING_V2: &str = "TABLETS_ROUTING_V2_EXPERIMENTAL";
    /// Result metadata ids on protocol v4.
    pub const SCYLLA_USE_METADATA_ID: &str = "SCYLLA_USE_METADATA_ID";
}

/// The partitioner as the extensions document spells it in its example; the
/// server sends [`MURMUR3_PARTITIONER`], but both name the same thing.
const MURMUR3_PARTITIONER_SPEC_SPELLING: &str =
    "org.apache.cassandra.partitioners.Murmur3Partitioner";

/// A SUPPORTED response: option name to supported values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Supported {
    /// The options, as sent.
    pub options: HashMap<String, Vec<String>>,
}

impl Supported {
    /// Decodes a SUPPORTED body.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            options: r.read_string_multimap("supported options")?,
        })
    }

    /// The values of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&[String]> {
        self.options.get(key).map(Vec::as_slice)
    }

    /// Sets the values of `key`.
    pub fn insert(&mut self, key: impl Into<String>, values: Vec<String>) {
        self.options.insert(key.into(), values);
    }
}

impl MessageBody for Supported {
    fn opcode(&self) -> Opcode {
        Opcode::Supported
    }

    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        // Sorted, so that the same options always give the same bytes.
        let mut entries: Vec<(&str, &[String])> = self
            .options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
            .collect();
        entries.sort_unstable_by_key(|&(k, _)| k);
        wire::put_string_multimap(buf, entries.into_iter(), "supported options")
    }
}

/// A SUPPORTED key present but unusable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ExtensionError {
    /// A key the extension requires is absent (others of it are present).
    #[error("SUPPORTED lacks {key} (other keys of its extension are present)")]
    MissingKey {
        /// The missing key.
        key: &'static str,
    },
    /// A key that takes a single value has another number of values.
    #[error("SUPPORTED key {key} has {count} values, expected one")]
    WrongValueCount {
        /// The key.
        key: &'static str,
        /// How many values it has.
        count: usize,
    },
    /// A value does not parse.
    #[error("SUPPORTED key {key} has malformed value {value:?}: expected {expected}")]
    Malformed {
        /// The key.
        key: &'static str,
        /// The value as sent.
        value: String,
        /// What it should be.
        expected: &'static str,
    },
    /// A key lacks its `NAME=VALUE` parameter.
    #[error("SUPPORTED key {key} lacks its {parameter}=<value> parameter")]
    MissingParameter {
        /// The key.
        key: &'static str,
        /// The parameter name.
        parameter: &'static str,
    },
    /// The partitioner is not Murmur3, the only one this crate computes tokens for.
    #[error("unsupported partitioner {0:?} (only Murmur3Partitioner is supported)")]
    UnsupportedPartitioner(String),
    /// The sharding algorithm is not `biased-token-round-robin`.
    #[error("unsupported sharding algorithm {0:?}")]
    UnsupportedAlgorithm(String),
    /// The connection's shard is not below the number of shards.
    #[error("SCYLLA_SHARD {shard} is not below SCYLLA_NR_SHARDS {nr_shards}")]
    ShardOutOfRange {
        /// The shard sent.
        shard: u16,
        /// The number of shards sent.
        nr_shards: u16,
    },
}

/// How a ScyllaDB node splits its data among shards, and which shard this
/// connection landed on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShardingInfo {
    /// The shard serving this connection.
    pub shard: Shard,
    /// Number of shards of the node.
    pub nr_shards: NonZeroU16,
    /// The sharding algorithm's `ignore_msb` parameter.
    pub ignore_msb: u8,
    /// The partitioner class name, as sent.
    pub partitioner: String,
    /// The sharding algorithm name, as sent.
    pub algorithm: String,
    /// The shard-aware port, if the node has one.
    pub shard_aware_port: Option<u16>,
    /// The shard-aware TLS port, if the node has one.
    pub shard_aware_port_ssl: Option<u16>,
}

impl ShardingInfo {
    /// Sharding with the Murmur3 partitioner and `biased-token-round-robin`,
    /// without shard-aware ports.
    pub fn murmur3(shard: Shard, nr_shards: NonZeroU16, ignore_msb: u8) -> Self {
        Self {
            shard,
            nr_shards,
            ignore_msb,
            partitioner: MURMUR3_PARTITIONER.to_owned(),
            algorithm: BIASED_TOKEN_ROUND_ROBIN.to_owned(),
            shard_aware_port: None,
            shard_aware_port_ssl: None,
        }
    }

    /// The shard math of this node.
    pub fn sharder(&self) -> Sharder {
        Sharder::new(self.nr_shards, self.ignore_msb)
    }

    fn parse(s: &Supported) -> Option<Result<Self, ExtensionError>> {
        const SHARDING_KEYS: [&str; 5] = [
            keys::SCYLLA_SHARD,
            keys::SCYLLA_NR_SHARDS,
            keys::SCYLLA_PARTITIONER,
            keys::SCYLLA_SHARDING_ALGORITHM,
            keys::SCYLLA_SHARDING_IGNORE_MSB,
        ];
        if SHARDING_KEYS.iter().all(|k| s.get(k).is_none()) {
            return None;
        }
        Some(Self::parse_present(s))
    }

    fn parse_present(s: &Supported) -> Result<Self, ExtensionError> {
        let required = |key| single(s, key)?.ok_or(ExtensionError::MissingKey { key });
        let shard: u16 = parse_num(keys::SCYLLA_SHARD, required(keys::SCYLLA_SHARD)?)?;
        let nr: u16 = parse_num(keys::SCYLLA_NR_SHARDS, required(keys::SCYLLA_NR_SHARDS)?)?;
        let nr_shards = NonZeroU16::new(nr).ok_or_else(|| ExtensionError::Malformed {
            key: keys::SCYLLA_NR_SHARDS,
            value: nr.to_string(),
            expected: "a positive number of shards",
        })?;
        if shard >= nr {
            return Err(ExtensionError::ShardOutOfRange {
                shard,
                nr_shards: nr,
            });
        }
        let ignore_msb = parse_num(
            keys::SCYLLA_SHARDING_IGNORE_MSB,
            required(keys::SCYLLA_SHARDING_IGNORE_MSB)?,
        )?;
        let partitioner = required(keys::SCYLLA_PARTITIONER)?;
        if partitioner != MURMUR3_PARTITIONER && partitioner != MURMUR3_PARTITIONER_SPEC_SPELLING {
            return Err(ExtensionError::UnsupportedPartitioner(
                partitioner.to_owned(),
            ));
        }
        let algorithm = required(keys::SCYLLA_SHARDING_ALGORITHM)?;
        if algorithm != BIASED_TOKEN_ROUND_ROBIN {
            return Err(ExtensionError::UnsupportedAlgorithm(algorithm.to_owned()));
        }
        let port = |key| {
            single(s, key)?
                .map(|v| parse_num::<u16>(key, v))
                .transpose()
        };
        Ok(Self {
            shard,
            nr_shards,
            ignore_msb,
            partitioner: partitioner.to_owned(),
            algorithm: algorithm.to_owned(),
            shard_aware_port: port(keys::SCYLLA_SHARD_AWARE_PORT)?,
            shard_aware_port_ssl: port(keys::SCYLLA_SHARD_AWARE_PORT_SSL)?,
        })
    }
}

/// The value of a single-valued key, `None` if absent.
fn single<'s>(s: &'s Supported, key: &'static str) -> Result<Option<&'s str>, ExtensionError> {
    match s.get(key) {
        None => Ok(None),
        Some([v]) => Ok(Some(v)),
        Some(vs) => Err(ExtensionError::WrongValueCount {
            key,
            count: vs.len(),
        }),
    }
}

/// A base-10 number.
fn parse_num<T: std::str::FromStr>(key: &'static str, v: &str) -> Result<T, ExtensionError> {
    v.parse().map_err(|_| ExtensionError::Malformed {
        key,
        value: v.to_owned(),
        expected: "a decimal number in range",
    })
}

/// The number in the `parameter=<n>` value of `key`, `None` if `key` is absent.
fn parameter<T: std::str::FromStr>(
    s: &Supported,
    key: &'static str,
    parameter: &'static str,
) -> Option<Result<T, ExtensionError>> {
    let values = s.get(key)?;
    let found = values.iter().find_map(|v| {
        v.split_once('=')
            .filter(|(name, _)| *name == parameter)
            .map(|(_, value)| value)
    });
    Some(match found {
        None => Err(ExtensionError::MissingParameter { key, parameter }),
        Some(v) => parse_num(key, v),
    })
}

/// The value of an optional extension; a malformed one is recorded in `problems`.
fn keep<T>(problems: &mut Vec<ExtensionError>, r: Option<Result<T, ExtensionError>>) -> Option<T> {
    match r? {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(e);
            None
        }
    }
}

/// What a SUPPORTED response says, typed: the standard options and the
/// ScyllaDB extensions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScyllaExtensions {
    /// Intranode sharding: `None` if the node does not shard (Cassandra).
    pub sharding: Option<Result<ShardingInfo, ExtensionError>>,
    /// The prepared-metadata flag bit that marks LWT statements.
    pub lwt_metadata_mask: Option<u32>,
    /// The error code of the rate-limit error.
    pub rate_limit_error_code: Option<i32>,
    /// The node's host id.
    pub host_id: Option<Uuid>,
    /// Whether the node sends tablet routing information (`TABLETS_ROUTING_V1`).
    pub tablets_routing_v1: bool,
    /// Whether the node offers tablet routing v2
    /// (`TABLETS_ROUTING_V2_EXPERIMENTAL`), which subsumes v1: a client
    /// negotiates one of the two, v2 when offered.
    pub tablets_routing_v2: bool,
    /// Whether the node supports metadata ids on v4 (`SCYLLA_USE_METADATA_ID`).
    pub use_metadata_id: bool,
    /// Supported compression algorithms.
    pub compression: Vec<String>,
    /// Supported CQL versions.
    pub cql_versions: Vec<String>,
    /// Supported protocol versions.
    pub protocol_versions: Vec<String>,
    /// Extensions other than sharding whose keys are present but malformed
    /// (they are left `None` above); for logging.
    pub problems: Vec<ExtensionError>,
}

impl ScyllaExtensions {
    /// Parses the options of a SUPPORTED response.
    pub fn from_supported(s: &Supported) -> Self {
        let mut problems = Vec::new();
        let lwt_metadata_mask = keep(
            &mut problems,
            parameter(
                s,
                keys::SCYLLA_LWT_ADD_METADATA_MARK,
                keys::LWT_OPTIMIZATION_META_BIT_MASK,
            ),
        );
        let rate_limit_error_code = keep(
            &mut problems,
            parameter(s, keys::SCYLLA_RATE_LIMIT_ERROR, keys::ERROR_CODE),
        );
        let host_id = keep(
            &mut problems,
            single(s, keys::SCYLLA_HOST_ID).transpose().map(|r| {
                r.and_then(|v| {
                    Uuid::parse_str(v).map_err(|_| ExtensionError::Malformed {
                        key: keys::SCYLLA_HOST_ID,
                        value: v.to_owned(),
                        expected: "a UUID",
                    })
                })
            }),
        );
        let list = |key| s.get(key).map(<[String]>::to_vec).unwrap_or_default();
        Self {
            sharding: ShardingInfo::parse(s),
            lwt_metadata_mask,
            rate_limit_error_code,
            host_id,
            tablets_routing_v1: s.get(keys::TABLETS_ROUTING_V1).is_some(),
            tablets_routing_v2: s.get(keys::TABLETS_ROUTING_V2).is_some(),
            use_metadata_id: s.get(keys::SCYLLA_USE_METADATA_ID).is_some(),
            compression: list(keys::COMPRESSION),
            cql_versions: list(keys::CQL_VERSION),
            protocol_versions: list(keys::PROTOCOL_VERSIONS),
            problems,
        }
    }

    /// The SUPPORTED options advertising these extensions (a sharding error
    /// and `problems` are not represented); for the test cluster.
    pub fn to_supported(&self) -> Supported {
        let mut s = Supported::default();
        let one = |v: String| vec![v];
        if let Some(Ok(sh)) = &self.sharding {
            s.insert(keys::SCYLLA_SHARD, one(sh.shard.to_string()));
            s.insert(keys::SCYLLA_NR_SHARDS, one(sh.nr_shards.to_string()));
            s.insert(keys::SCYLLA_PARTITIONER, one(sh.partitioner.clone()));
            s.insert(keys::SCYLLA_SHARDING_ALGORITHM, one(sh.algorithm.clone()));
            s.insert(
                keys::SCYLLA_SHARDING_IGNORE_MSB,
                one(sh.ignore_msb.to_string()),
            );
            if let Some(p) = sh.shard_aware_port {
                s.insert(keys::SCYLLA_SHARD_AWARE_PORT, one(p.to_string()));
            }
            if let Some(p) = sh.shard_aware_port_ssl {
                s.insert(keys::SCYLLA_SHARD_AWARE_PORT_SSL, one(p.to_string()));
            }
        }
        if let Some(mask) = self.lwt_metadata_mask {
            s.insert(
                keys::SCYLLA_LWT_ADD_METADATA_MARK,
                one(format!("{}={mask}", keys::LWT_OPTIMIZATION_META_BIT_MASK)),
            );
        }
        if let Some(code) = self.rate_limit_error_code {
            s.insert(
                keys::SCYLLA_RATE_LIMIT_ERROR,
                one(format!("{}={code}", keys::ERROR_CODE)),
            );
        }
        if let Some(id) = self.host_id {
            s.insert(keys::SCYLLA_HOST_ID, one(id.hyphenated().to_string()));
        }
        if self.tablets_routing_v1 {
            s.insert(keys::TABLETS_ROUTING_V1, Vec::new());
        }
        if self.tablets_routing_v2 {
            s.insert(keys::TABLETS_ROUTING_V2, Vec::new());
        }
        if self.use_metadata_id {
            s.insert(keys::SCYLLA_USE_METADATA_ID, Vec::new());
        }
        for (key, values) in [
            (keys::COMPRESSION, &self.compression),
            (keys::CQL_VERSION, &self.cql_versions),
            (keys::PROTOCOL_VERSIONS, &self.protocol_versions),
        ] {
            if !values.is_empty() {
                s.insert(key, values.clone());
            }
        }
        s
    }
}
