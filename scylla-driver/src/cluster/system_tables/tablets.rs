//! The tablets of tablet tables, read from ScyllaDB's `system.tablets` (one
//! partition per table, one row per tablet, clustered by `last_token`; the
//! first tablet starts at the minimum token and each next one where the
//! previous ended).
//!
//! Read page by page ([`TabletRowsReader`] keeps the state a table's rows
//! need across pages), keeping only the keyspaces asked for. Bad rows are
//! skipped with a warning; a tablet after a bad row still starts where the
//! previous good row ended, which at worst makes one tablet wider than it is
//! (a later payload corrects it).

use std::collections::BTreeMap;

use scylla_cql::frame::response::result::Rows;
use scylla_cql::sharding::Shard;
use scylla_cql::token::Token;
use uuid::Uuid;

use super::query::for_each_row;
use super::MetadataError;
use crate::routing::Tablet;

/// Every tablet of every table, in partition then `last_token` order.
pub(crate) const TABLETS_QUERY: &str =
    "SELECT table_id, keyspace_name, table_name, last_token, replicas FROM system.tablets";

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct TabletRow {
    table_id: Uuid,
    keyspace_name: Option<String>,
    table_name: Option<String>,
    last_token: i64,
    replicas: Option<Vec<(Uuid, i32)>>,
}

/// The table whose rows are being read.
struct Current {
    table_id: Uuid,
    /// (keyspace, table), or `None` when its names are unknown or not wanted.
    name: Option<(String, String)>,
    previous_last: i64,
}

/// Reads `system.tablets` pages into tablets per (keyspace, table).
pub(crate) struct TabletRowsReader<'k> {
    keep: &'k (dyn Fn(&str) -> bool + Sync),
    current: Option<Current>,
    /// Tablets read so far, by (keyspace, table), in token order.
    pub(crate) tables: BTreeMap<(String, String), Vec<Tablet>>,
    /// Rows read (all of them, kept or not).
    pub(crate) rows: u64,
}

impl<'k> TabletRowsReader<'k> {
    /// A reader keeping the tables of keyspaces for which `keep` is true.
    pub(crate) fn new(keep: &'k (dyn Fn(&str) -> bool + Sync)) -> Self {
        Self {
            keep,
            current: None,
            tables: BTreeMap::new(),
            rows: 0,
        }
    }

    /// Reads one page.
    pub(crate) fn page(&mut self, page: &Rows) -> Result<(), MetadataError> {
        for_each_row::<TabletRow>(std::slice::from_ref(page), TABLETS_QUERY, |row| {
            self.rows += 1;
            match row {
                Err(e) => {
                    tracing::warn!(error = %e, "system.tablets: skipping a row that does not deserialize")
                }
                Ok(row) => self.row(row),
            }
        })
    }

    fn row(&mut self, row: TabletRow) {
        let same = self
            .current
            .as_ref()
            .is_some_and(|c| c.table_id == row.table_id);
        if !same {
            let name = match (row.keyspace_name.clone(), row.table_name.clone()) {
                (Some(ks), Some(t)) => (self.keep)(&ks).then_some((ks, t)),
                _ => {
                    tracing::warn!(table_id = %row.table_id, "system.tablets: a table without names; skipping it");
                    None
                }
            };
            self.current = Some(Current {
                table_id: row.table_id,
                name,
                previous_last: i64::MIN,
            });
        }
        let Some(current) = self.current.as_mut() else {
            return;
        };
        let first = current.previous_last;
        if row.last_token < first || (row.last_token == first && first != i64::MIN) {
            tracing::warn!(table_id = %row.table_id, last_token = row.last_token, "system.tablets: rows out of token order; skipping one");
            return;
        }
        current.previous_last = row.last_token;
        let Some((ks, table)) = &current.name else {
            return;
        };
        let replicas = row
            .replicas
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(host, shard)| Shard::try_from(shard).ok().map(|s| (host, s)))
            .collect();
        self.tables
            .entry((ks.clone(), table.clone()))
            .or_default()
            .push(Tablet {
                first_token: Token(first),
                last_token: Token(row.last_token),
                replicas,
                // system.tablets has no routing v2 version.
                version: None,
            });
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{build, cell};
    use super::*;
    use scylla_cql::types::{ColumnType, NativeType};

    /// (table id, keyspace, table, last token, replicas as (host, shard)).
    type FakeRow<'a> = (u128, &'a str, &'a str, i64, &'a [(u128, i32)]);

    fn rows(entries: &[FakeRow<'_>]) -> Rows {
        let replicas_type = ColumnType::list(ColumnType::Tuple(vec![
            ColumnType::Native(NativeType::Uuid),
            ColumnType::Native(NativeType::Int),
        ]));
        let specs = [
            ("table_id", ColumnType::Native(NativeType::Uuid)),
            ("keyspace_name", ColumnType::Native(NativeType::Text)),
            ("table_name", ColumnType::Native(NativeType::Text)),
            ("last_token", ColumnType::Native(NativeType::BigInt)),
            ("replicas", replicas_type.clone()),
        ];
        let rows = entries.iter().map(|(id, ks, t, last, replicas)| {
            let r: Vec<(Uuid, i32)> = replicas
                .iter()
                .map(|&(h, s)| (Uuid::from_u128(h), s))
                .collect();
            vec![
                cell(&Uuid::from_u128(*id), &ColumnType::Native(NativeType::Uuid)),
                cell(&(*ks).to_owned(), &ColumnType::Native(NativeType::Text)),
                cell(&(*t).to_owned(), &ColumnType::Native(NativeType::Text)),
                cell(last, &ColumnType::Native(NativeType::BigInt)),
                cell(&r, &replicas_type),
            ]
        });
        build(&specs, rows.collect())
    }

    #[test]
    fn tablets_are_chained_per_table_across_pages() {
        let keep = |ks: &str| ks != "other";
        let mut reader = TabletRowsReader::new(&keep);
        reader
            .page(&rows(&[
                (1, "ks", "t", -100, &[(10, 0), (11, 3)]),
                (1, "ks", "t", 0, &[(12, 1), (13, -1)]),
            ]))
            .unwrap();
        reader
            .page(&rows(&[
                (1, "ks", "t", i64::MAX, &[(10, 7)]),
                (2, "other", "x", 5, &[(10, 0)]),
                (3, "ks", "u", -5, &[(11, 2)]),
                (3, "ks", "u", -6, &[(11, 2)]),
                (3, "ks", "u", 9, &[(11, 4)]),
            ]))
            .unwrap();
        assert_eq!(reader.rows, 7);
        let t = &reader.tables[&("ks".to_owned(), "t".to_owned())];
        let ranges: Vec<(i64, i64)> = t
            .iter()
            .map(|t| (t.first_token.0, t.last_token.0))
            .collect();
        assert_eq!(ranges, vec![(i64::MIN, -100), (-100, 0), (0, i64::MAX)]);
        assert_eq!(
            t[0].replicas,
            vec![(Uuid::from_u128(10), 0), (Uuid::from_u128(11), 3)]
        );
        // A negative shard is dropped, its tablet kept.
        assert_eq!(t[1].replicas, vec![(Uuid::from_u128(12), 1)]);
        let u = &reader.tables[&("ks".to_owned(), "u".to_owned())];
        let ranges: Vec<(i64, i64)> = u
            .iter()
            .map(|t| (t.first_token.0, t.last_token.0))
            .collect();
        assert_eq!(ranges, vec![(i64::MIN, -5), (-5, 9)]);
        assert!(!reader.tables.keys().any(|(ks, _)| ks == "other"));
    }
}
