//! The schema as the session knows it, in the official `scylla` crate's
//! shape: [`Keyspace`]s with their replication [`Strategy`], [`Table`]s and
//! [`MaterializedView`]s with their [`Column`]s, keys and indexes, and
//! user-defined types; from
//! [`ClusterState::get_keyspace`](crate::cluster::ClusterState::get_keyspace)
//! and [`keyspaces_iter`](crate::cluster::ClusterState::keyspaces_iter).
//!
//! Read from `system_schema` on the control connection when the session
//! starts, and again per keyspace when the cluster reports a change to it
//! (a `SCHEMA_CHANGE` event for the keyspace, a table or a type), so a large
//! schema is not re-read for a change to one keyspace.
//! [`SessionBuilder::fetch_schema_metadata`](crate::SessionBuilder::fetch_schema_metadata)
//! turns it off (only what routing needs is then read) and
//! [`keyspaces_to_fetch`](crate::SessionBuilder::keyspaces_to_fetch)
//! narrows it to some keyspaces.
//!
//! Also the column type ([`ColumnType`], as hand-written
//! `DeserializeValue` implementations name it) and its parts
//! ([`NativeType`], [`CollectionType`], [`UserDefinedType`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

pub use scylla_cql::frame::response::result::{CollectionType, ColumnType, UserDefinedType};
pub use scylla_cql::types::NativeType;

/// A keyspace.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Keyspace {
    /// How it places replicas.
    pub strategy: Strategy,
    /// Whether writes go through the commit log (`durable_writes`).
    pub durable_writes: bool,
    /// Whether its tables are distributed by tablets (ScyllaDB) rather than
    /// the token ring.
    pub tablet_based: bool,
    /// Its tables, by name (materialized views are in
    /// [`views`](Self::views)).
    pub tables: HashMap<String, Table>,
    /// Its materialized views, by name (ScyllaDB's secondary indexes, backed
    /// by views named `<index>_index`, are among them).
    pub views: HashMap<String, MaterializedView>,
    /// Its user-defined types, by name (fields in declaration order).
    /// (shared with the column types that use them).
    pub user_defined_types: HashMap<String, Arc<UserDefinedType<'static>>>,
}

/// A table (or the table of a materialized view).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Table {
    /// Every column, by name.
    pub columns: HashMap<String, Column>,
    /// The partition-key columns, in key order.
    pub partition_key: Vec<String>,
    /// The clustering columns, in key order (their order of rows is each
    /// column's [`clustering_order`](Column::clustering_order)).
    pub clustering_key: Vec<String>,
    /// The table's partitioner, when it is not the cluster's (ScyllaDB's
    /// CDC log tables); `None` here otherwise.
    pub partitioner: Option<String>,
    /// Its secondary indexes, by name.
    pub indexes: HashMap<String, Index>,
}

/// A materialized view: its own table, and the table it is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MaterializedView {
    /// The view's columns and keys.
    pub view_metadata: Table,
    /// The name of the base table (in the same keyspace).
    pub base_table_name: String,
}

/// A column of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Column {
    /// Its type.
    pub typ: ColumnType<'static>,
    /// Its role in the table.
    pub kind: ColumnKind,
    /// For a clustering column, the order of rows by it.
    pub clustering_order: Option<ClusteringOrder>,
}

/// A column's role in its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ColumnKind {
    /// An ordinary column.
    Regular,
    /// A column shared by every row of a partition.
    Static,
    /// Part of the clustering key.
    Clustering,
    /// Part of the partition key.
    PartitionKey,
}

/// Why a `kind` of `system_schema.columns` is not a [`ColumnKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a column kind (expected regular, static, clustering or partition_key)")]
pub struct ColumnKindFromStrError;

impl std::str::FromStr for ColumnKind {
    type Err = ColumnKindFromStrError;

    /// `regular`, `static`, `clustering` or `partition_key`, as
    /// `system_schema.columns` names them (any case).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "regular" => Ok(ColumnKind::Regular),
            "static" => Ok(ColumnKind::Static),
            "clustering" => Ok(ColumnKind::Clustering),
            "partition_key" => Ok(ColumnKind::PartitionKey),
            _ => Err(ColumnKindFromStrError),
        }
    }
}

/// The order of a table's rows by one clustering column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ClusteringOrder {
    /// `ASC` (the default).
    Ascending,
    /// `DESC`.
    Descending,
}

/// A secondary index.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Index {
    /// `COMPOSITES`, `KEYS` or `CUSTOM` (as `system_schema.indexes` says).
    pub kind: String,
    /// Its options: `target` (the indexed column, or a function of it),
    /// `class_name` for a custom index, ...
    pub options: BTreeMap<String, String>,
}

impl Index {
    /// What it indexes (its `target` option), if given.
    pub fn target(&self) -> Option<&str> {
        self.options.get("target").map(String::as_str)
    }
}

/// How a keyspace places replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
#[allow(clippy::enum_variant_names)] // the official names
pub enum Strategy {
    /// `SimpleStrategy`: replicas on the next nodes of the ring, whatever
    /// their datacenter and rack.
    SimpleStrategy {
        /// Replicas of each partition.
        replication_factor: usize,
    },
    /// `NetworkTopologyStrategy`: replicas per datacenter, on distinct
    /// racks where possible.
    NetworkTopologyStrategy {
        /// Replicas of each partition, by datacenter.
        datacenter_repfactors: HashMap<String, usize>,
    },
    /// `LocalStrategy`: the node's own data (system keyspaces).
    LocalStrategy,
    /// Another strategy class, with its options.
    Other {
        /// The class as the schema names it.
        name: String,
        /// Its options (the replication map without `class`).
        data: HashMap<String, String>,
    },
}

impl Strategy {
    /// The strategy of a `replication` map as `system_schema.keyspaces`
    /// holds it. A replication factor that is not a number makes the
    /// strategy [`Other`](Strategy::Other) (with the map as it is), rather
    /// than a made-up factor.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use scylla_driver::cluster::metadata::Strategy;
    ///
    /// let map: BTreeMap<String, String> = [
    ///     ("class", "org.apache.cassandra.locator.NetworkTopologyStrategy"),
    ///     ("dc1", "3"),
    /// ]
    /// .into_iter()
    /// .map(|(k, v)| (k.to_owned(), v.to_owned()))
    /// .collect();
    /// let Strategy::NetworkTopologyStrategy { datacenter_repfactors } = Strategy::from_replication(&map)
    /// else {
    ///     panic!("not NetworkTopologyStrategy")
    /// };
    /// assert_eq!(datacenter_repfactors["dc1"], 3);
    /// ```
    pub fn from_replication(map: &BTreeMap<String, String>) -> Strategy {
        let class = map.get("class").map(String::as_str).unwrap_or("");
        let short = class.rsplit('.').next().unwrap_or(class);
        let options = || {
            map.iter()
                .filter(|(k, _)| k.as_str() != "class")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<HashMap<_, _>>()
        };
        let other = || Strategy::Other {
            name: class.to_owned(),
            data: options(),
        };
        match short {
            "SimpleStrategy" => match map.get("replication_factor").map(|rf| rf.trim().parse()) {
                Some(Ok(replication_factor)) => Strategy::SimpleStrategy { replication_factor },
                _ => other(),
            },
            "NetworkTopologyStrategy" => {
                let mut datacenter_repfactors = HashMap::new();
                for (dc, rf) in map {
                    // ScyllaDB lists `replication_factor` beside the
                    // datacenters when a keyspace was created with it.
                    if dc == "class" || dc == "replication_factor" {
                        continue;
                    }
                    match rf.trim().parse() {
                        Ok(rf) => {
                            datacenter_repfactors.insert(dc.clone(), rf);
                        }
                        Err(_) => return other(),
                    }
                }
                Strategy::NetworkTopologyStrategy {
                    datacenter_repfactors,
                }
            }
            "LocalStrategy" => Strategy::LocalStrategy,
            _ => other(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn strategies_from_replication_maps() {
        assert_eq!(
            Strategy::from_replication(&map(&[
                ("class", "org.apache.cassandra.locator.SimpleStrategy"),
                ("replication_factor", "2"),
            ])),
            Strategy::SimpleStrategy {
                replication_factor: 2
            }
        );
        assert_eq!(
            Strategy::from_replication(&map(&[
                ("class", "NetworkTopologyStrategy"),
                ("dc1", "3"),
                ("dc2", "1"),
            ])),
            Strategy::NetworkTopologyStrategy {
                datacenter_repfactors: [("dc1".to_owned(), 3), ("dc2".to_owned(), 1)].into()
            }
        );
        assert_eq!(
            Strategy::from_replication(&map(&[(
                "class",
                "org.apache.cassandra.locator.LocalStrategy"
            )])),
            Strategy::LocalStrategy
        );
        // Not a number: kept as it is, not guessed.
        assert_eq!(
            Strategy::from_replication(&map(&[
                ("class", "SimpleStrategy"),
                ("replication_factor", "x")
            ])),
            Strategy::Other {
                name: "SimpleStrategy".to_owned(),
                data: [("replication_factor".to_owned(), "x".to_owned())].into()
            }
        );
        assert!(matches!(
            Strategy::from_replication(&map(&[("class", "EverywhereStrategy")])),
            Strategy::Other { name, .. } if name == "EverywhereStrategy"
        ));
    }

    #[test]
    fn column_kinds_parse_as_the_schema_names_them() {
        assert_eq!("partition_key".parse(), Ok(ColumnKind::PartitionKey));
        assert_eq!("CLUSTERING".parse(), Ok(ColumnKind::Clustering));
        assert_eq!("static".parse(), Ok(ColumnKind::Static));
        assert_eq!("regular".parse(), Ok(ColumnKind::Regular));
        assert_eq!("key".parse::<ColumnKind>(), Err(ColumnKindFromStrError));
    }
}
