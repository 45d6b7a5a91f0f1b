//! What the routing table is built from: the nodes (datacenter, rack, tokens,
//! sharding) and the replication strategy of every keyspace, as the metadata
//! layer read them from `system.local`, `system.peers` and
//! `system_schema.keyspaces`.
//!
//! These are plain owned values with no behaviour beyond parsing the
//! `replication` map, so the metadata layer can assemble them freely and the
//! routing table can be built (and tested) without a cluster.

use std::collections::BTreeMap;

use scylla_cql::sharding::Sharder;
use scylla_cql::token::Token;

/// The index of a node in [`TopologyInput::nodes`], and everywhere in a
/// routing table built from it.
///
/// Indices are cheap to copy and compare; the cluster layer maps them back to
/// its node objects (address, pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeIdx(pub u32);

impl NodeIdx {
    /// The index as a `usize`, for indexing slices.
    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// One node of the cluster as routing needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The node's datacenter name (`data_center` column).
    pub datacenter: String,
    /// The node's rack name within its datacenter (`rack` column).
    pub rack: String,
    /// The tokens the node owns on the ring (`tokens` column). May be empty
    /// (ScyllaDB's zero-token nodes, or a node still joining): such a node
    /// replicates nothing but can still coordinate requests.
    pub tokens: Vec<Token>,
    /// How the node splits tokens among its shards, when it is ScyllaDB and
    /// advertised its sharding parameters; `None` for Cassandra.
    pub sharder: Option<Sharder>,
}

/// The cluster description a [`RoutingTable`](super::RoutingTable) is built from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopologyInput {
    /// Every known node; a node's position is its [`NodeIdx`].
    pub nodes: Vec<NodeInfo>,
    /// Every known keyspace and its replication strategy. A `BTreeMap` so that
    /// building a table is deterministic (same input, identical table).
    pub keyspaces: BTreeMap<String, ReplicationStrategy>,
}

/// How a keyspace places the replicas of a token, as stored in the
/// `replication` column of `system_schema.keyspaces`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReplicationStrategy {
    /// `SimpleStrategy`: the first `rf` distinct nodes walking the ring
    /// clockwise from the token, ignoring datacenters and racks.
    Simple {
        /// The replication factor.
        rf: usize,
    },
    /// `NetworkTopologyStrategy`: `rf` replicas in each listed datacenter,
    /// spread over distinct racks where possible.
    NetworkTopology {
        /// Replication factor per datacenter name.
        dc_rfs: BTreeMap<String, usize>,
    },
    /// `LocalStrategy`: the data lives on every node, each holding only its
    /// own copy (system keyspaces). There are no "replicas" to prefer, so
    /// routing spreads requests over all nodes, local datacenter first.
    Local,
    /// ScyllaDB's `EverywhereStrategy`: every node is a replica of every token.
    Everywhere,
    /// A strategy class this driver does not know.
    ///
    /// Routed like `SimpleStrategy` with `rf = 1`: the node that owns the
    /// token on the ring is a replica in every ring-based strategy we know of,
    /// so preferring it is likely right and never wrong (the plan still falls
    /// back to every other node).
    Other {
        /// The class name as found in the schema.
        class: String,
    },
}

/// Why a `replication` map could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicationParseError {
    /// The map has no `class` entry.
    #[error("replication map has no 'class' entry")]
    MissingClass,
    /// `SimpleStrategy` without a `replication_factor` entry.
    #[error("SimpleStrategy without 'replication_factor'")]
    MissingReplicationFactor,
    /// A replication factor that is not a non-negative integer (optionally in
    /// Cassandra 4's `total/transient` form).
    #[error("invalid replication factor {value:?} for {key:?}")]
    InvalidReplicationFactor {
        /// The map key (`replication_factor` or a datacenter name).
        key: String,
        /// The value found.
        value: String,
    },
}

/// The package prefix Cassandra puts before its strategy class names; the
/// schema may hold either the full or the short name.
const CLASS_PREFIX: &str = "org.apache.cassandra.locator.";

impl ReplicationStrategy {
    /// Parses the `replication` map of `system_schema.keyspaces`, e.g.
    /// `{'class': 'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '3'}`
    /// or `{'class': 'NetworkTopologyStrategy', 'dc1': '3', 'dc2': '2'}`.
    ///
    /// Class names are accepted with or without the `org.apache.cassandra.locator.`
    /// prefix. Replication factors may use Cassandra 4's `total/transient` form;
    /// only the total matters for routing. In a `NetworkTopologyStrategy` map a
    /// `replication_factor` key (a CREATE-time shorthand that Cassandra expands
    /// into per-datacenter entries before storing) is ignored.
    ///
    /// ```
    /// use scylla_driver::routing::ReplicationStrategy;
    /// let s = ReplicationStrategy::from_replication_map([
    ///     ("class", "org.apache.cassandra.locator.SimpleStrategy"),
    ///     ("replication_factor", "3"),
    /// ]);
    /// assert_eq!(s, Ok(ReplicationStrategy::Simple { rf: 3 }));
    /// ```
    pub fn from_replication_map<I, K, V>(map: I) -> Result<Self, ReplicationParseError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        let mut class = None;
        let mut others = Vec::new();
        for (k, v) in map {
            if k.as_ref() == "class" {
                class = Some(v.as_ref().to_owned());
            } else {
                others.push((k.as_ref().to_owned(), v.as_ref().to_owned()));
            }
        }
        let class = class.ok_or(ReplicationParseError::MissingClass)?;
        let short = class.strip_prefix(CLASS_PREFIX).unwrap_or(&class);
        match short {
            "SimpleStrategy" => {
                let (key, value) = others
                    .iter()
                    .find(|(k, _)| k == "replication_factor")
                    .ok_or(ReplicationParseError::MissingReplicationFactor)?;
                Ok(Self::Simple {
                    rf: parse_rf(key, value)?,
                })
            }
            "NetworkTopologyStrategy" => {
                let mut dc_rfs = BTreeMap::new();
                for (key, value) in &others {
                    if key == "replication_factor" {
                        continue;
                    }
                    dc_rfs.insert(key.clone(), parse_rf(key, value)?);
                }
                Ok(Self::NetworkTopology { dc_rfs })
            }
            "LocalStrategy" => Ok(Self::Local),
            "EverywhereStrategy" => Ok(Self::Everywhere),
            _ => Ok(Self::Other { class }),
        }
    }
}

/// Parses `"3"` or Cassandra 4's transient form `"3/1"` (3 replicas in all,
/// 1 of them transient) into the total replica count.
fn parse_rf(key: &str, value: &str) -> Result<usize, ReplicationParseError> {
    let total = value.split_once('/').map_or(value, |(total, _)| total);
    total
        .trim()
        .parse::<usize>()
        .map_err(|_| ReplicationParseError::InvalidReplicationFactor {
            key: key.to_owned(),
            value: value.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_class_form() {
        let nts = ReplicationStrategy::from_replication_map([
            ("class", "NetworkTopologyStrategy"),
            ("dc1", "3"),
            ("dc2", "2/1"),
            ("replication_factor", "9"),
        ])
        .unwrap();
        let mut dc_rfs = BTreeMap::new();
        dc_rfs.insert("dc1".to_owned(), 3);
        dc_rfs.insert("dc2".to_owned(), 2);
        assert_eq!(nts, ReplicationStrategy::NetworkTopology { dc_rfs });

        let simple = ReplicationStrategy::from_replication_map([
            ("replication_factor", "1"),
            ("class", "SimpleStrategy"),
        ]);
        assert_eq!(simple, Ok(ReplicationStrategy::Simple { rf: 1 }));
        let local = ReplicationStrategy::from_replication_map([(
            "class",
            "org.apache.cassandra.locator.LocalStrategy",
        )]);
        assert_eq!(local, Ok(ReplicationStrategy::Local));
        let every = ReplicationStrategy::from_replication_map([(
            "class",
            "org.apache.cassandra.locator.EverywhereStrategy",
        )]);
        assert_eq!(every, Ok(ReplicationStrategy::Everywhere));
        let other = ReplicationStrategy::from_replication_map([("class", "com.example.Mine")]);
        assert_eq!(
            other,
            Ok(ReplicationStrategy::Other {
                class: "com.example.Mine".to_owned()
            })
        );
    }

    #[test]
    fn rejects_bad_maps() {
        let none: [(&str, &str); 0] = [];
        assert_eq!(
            ReplicationStrategy::from_replication_map(none),
            Err(ReplicationParseError::MissingClass)
        );
        assert_eq!(
            ReplicationStrategy::from_replication_map([("class", "SimpleStrategy")]),
            Err(ReplicationParseError::MissingReplicationFactor)
        );
        assert!(matches!(
            ReplicationStrategy::from_replication_map([
                ("class", "NetworkTopologyStrategy"),
                ("dc1", "three"),
            ]),
            Err(ReplicationParseError::InvalidReplicationFactor { .. })
        ));
        assert!(ReplicationStrategy::from_replication_map([
            ("class", "SimpleStrategy"),
            ("replication_factor", "-1"),
        ])
        .is_err());
    }
}
