//! The cluster's data: keyspaces, tables and rows, held in memory.
//!
//! One [`Store`] is shared by every node of a cluster (a real cluster
//! replicates; here every node simply sees the same data, which is what a
//! client observes at any consistency level anyway). Rows of a table live in
//! `BTreeMap`s keyed by an order-preserving encoding of
//! `(token, partition key, clustering key)` (see [`row_key`]), one per
//! contiguous token range with a lock of its own ([`RowMap`]), so a full scan
//! comes out in token order like ScyllaDB's, a partition is a contiguous
//! range, a row's key doubles as the paging state, and the shards of a node
//! do not queue for one lock.
//!
//! The schema version (a UUID reported by `system.local` and `system.peers`)
//! changes on every schema change, as drivers' schema-agreement checks expect.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use scylla_cql::token::Token;
use scylla_cql::types::{ColumnType, NativeType};
use uuid::Uuid;

use super::ids::random_uuid;
use super::prepared::PreparedStatement;
use super::traces::Traces;

/// The role of a column in its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColumnKind {
    PartitionKey,
    Clustering,
    Static,
    Regular,
}

impl ColumnKind {
    /// The name `system_schema.columns.kind` uses.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ColumnKind::PartitionKey => "partition_key",
            ColumnKind::Clustering => "clustering",
            ColumnKind::Static => "static",
            ColumnKind::Regular => "regular",
        }
    }
}

/// One column of a table.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    pub(crate) name: String,
    pub(crate) typ: ColumnType,
    pub(crate) kind: ColumnKind,
    /// Position within the partition or clustering key (0 for others... and
    /// -1 in `system_schema.columns`, as Cassandra reports).
    pub(crate) position: i32,
    /// Declared `frozen<...>` (a UDT or collection stored as one value):
    /// [`ColumnType`] does not record it, `system_schema.columns` shows it.
    pub(crate) frozen: bool,
}

/// A user-defined type of a keyspace (`CREATE TYPE`).
#[derive(Debug, Clone)]
pub(crate) struct UserType {
    pub(crate) name: String,
    /// Fields in declaration order.
    pub(crate) fields: Vec<(String, ColumnType)>,
}

/// How an ANN query ranks vectors (the index's `similarity_function`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Similarity {
    Cosine,
    DotProduct,
    Euclidean,
}

impl Similarity {
    /// The option value, as `system_schema.indexes` shows it.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Similarity::Cosine => "cosine",
            Similarity::DotProduct => "dot_product",
            Similarity::Euclidean => "euclidean",
        }
    }
}

/// A storage-attached (SAI) index on one column (`CREATE CUSTOM INDEX`).
#[derive(Debug, Clone)]
pub(crate) struct Index {
    pub(crate) name: String,
    pub(crate) column: String,
    /// The class as written after USING.
    pub(crate) class: String,
    /// The similarity function of a vector column's index (`None` for
    /// other columns).
    pub(crate) similarity: Option<Similarity>,
}

/// One row: a cell per column of the table (in the table's column order).
pub(crate) type Row = Vec<Option<Bytes>>;

/// How many token ranges a table's rows are split into, each with its own
/// lock (see [`RowMap`]).
const ROW_STRIPES: usize = 16;

/// The rows of one stripe, by [`row_key`].
pub(crate) type Stripe = BTreeMap<Vec<u8>, Row>;

/// A table's rows by [`row_key`], in [`ROW_STRIPES`] contiguous token ranges,
/// each behind a lock of its own.
///
/// Reads and writes of rows take the schema's *read* lock and then the lock
/// of the one stripe their token falls in, and only for the map operation
/// itself. So a write's preparation (values, token, key) runs concurrently
/// on every shard, and two shards rarely want the same stripe at once, as on
/// a real ScyllaDB node, whose shards share no data. (With the schema's write
/// lock held for whole writes, concurrent INSERTs to two shards called the
/// kernel's futex on about every other request, and with one lock for all
/// rows on about one request in seven; the server's CPU per request then
/// depended on how closely a client's writes to the two shards coincided,
/// which is not what a driver comparison means to measure.)
///
/// Every key starts with its token's order-preserving bytes, so the stripes
/// in order are the rows in token order, and a partition lies in one
/// stripe. A clone shares the rows.
#[derive(Debug, Clone)]
pub(crate) struct RowMap(Arc<[RwLock<Stripe>; ROW_STRIPES]>);

impl Default for RowMap {
    fn default() -> Self {
        RowMap(Arc::new(std::array::from_fn(|_| RwLock::default())))
    }
}

impl RowMap {
    /// The stripe holding `key`, or every key that starts with `prefix` (a
    /// token's bytes come first, and those rows share the token).
    fn stripe(&self, key: &[u8]) -> &RwLock<Stripe> {
        let i = key
            .first()
            .map_or(0, |&b| usize::from(b) * ROW_STRIPES / 256);
        &self.0[i]
    }

    /// Read access to the stripe of `key`.
    pub(crate) fn read_at(&self, key: &[u8]) -> RwLockReadGuard<'_, Stripe> {
        read_stripe(self.stripe(key))
    }

    /// Write access to the stripe of `key`.
    pub(crate) fn write_at(&self, key: &[u8]) -> RwLockWriteGuard<'_, Stripe> {
        write_stripe(self.stripe(key))
    }

    /// Every row, in key (so token) order, copied out stripe by stripe.
    pub(crate) fn snapshot(&self) -> Vec<(Vec<u8>, Row)> {
        let mut all = Vec::new();
        for stripe in self.0.iter() {
            let rows = read_stripe(stripe);
            all.extend(rows.iter().map(|(k, r)| (k.clone(), r.clone())));
        }
        all
    }

    /// How many rows there are.
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(|s| read_stripe(s).len()).sum()
    }

    /// Removes every row (TRUNCATE).
    pub(crate) fn clear(&self) {
        for stripe in self.0.iter() {
            write_stripe(stripe).clear();
        }
    }
}

/// The rows of `stripe` whose keys start with `prefix` (a partition, or a
/// clustering prefix within one), in key order.
pub(crate) fn with_prefix<'a>(
    stripe: &'a Stripe,
    prefix: &'a [u8],
) -> impl Iterator<Item = (&'a Vec<u8>, &'a Row)> + 'a {
    stripe
        .range::<[u8], _>((
            std::ops::Bound::Included(prefix),
            std::ops::Bound::Unbounded,
        ))
        .take_while(move |(k, _)| k.starts_with(prefix))
}

/// Read access to one stripe (see [`Store::read`] on poisoning).
fn read_stripe(stripe: &RwLock<Stripe>) -> RwLockReadGuard<'_, Stripe> {
    stripe.read().unwrap_or_else(|e| e.into_inner())
}

/// Write access to one stripe (see [`Store::read`] on poisoning).
fn write_stripe(stripe: &RwLock<Stripe>) -> RwLockWriteGuard<'_, Stripe> {
    stripe.write().unwrap_or_else(|e| e.into_inner())
}

/// A table: its columns (partition key, clustering key, then the others by
/// name, which is also `SELECT *` order) and rows.
#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub(crate) keyspace: String,
    pub(crate) name: String,
    pub(crate) id: Uuid,
    pub(crate) columns: Vec<Column>,
    pub(crate) pk_len: usize,
    pub(crate) ck_len: usize,
    pub(crate) rows: RowMap,
    /// Its indexes (names are unique in the keyspace).
    pub(crate) indexes: Vec<Index>,
}

impl Table {
    /// The index of column `name`.
    pub(crate) fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }
}

/// A keyspace and its tables.
#[derive(Debug, Clone)]
pub(crate) struct Keyspace {
    pub(crate) name: String,
    /// The replication map as given (`class` included, class name expanded).
    pub(crate) replication: BTreeMap<String, String>,
    pub(crate) durable_writes: bool,
    /// Tablets: `Some(initial)` (0 = the cluster's default) for a tablets
    /// keyspace, `None` for vnodes.
    pub(crate) tablets: Option<usize>,
    /// `consistency = 'global'`: its tables are strongly consistent (a
    /// Raft leader per tablet). Tablets keyspaces only.
    pub(crate) strongly_consistent: bool,
    pub(crate) tables: BTreeMap<String, Table>,
    /// User-defined types by name.
    pub(crate) types: BTreeMap<String, UserType>,
}

/// The schema and data.
#[derive(Debug)]
pub(crate) struct Schema {
    pub(crate) keyspaces: BTreeMap<String, Keyspace>,
    pub(crate) version: Uuid,
}

impl Schema {
    /// A new random schema version: call after every schema change.
    pub(crate) fn bump_version(&mut self) {
        self.version = random_uuid();
    }
}

/// Everything a cluster's CQL layer keeps: schema, rows, prepared statements.
#[derive(Debug)]
pub struct Store {
    schema: RwLock<Schema>,
    prepared: Mutex<HashMap<Vec<u8>, Arc<PreparedStatement>>>,
    traces: Traces,
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

impl Store {
    /// An empty store (only the built-in system keyspaces exist).
    pub fn new() -> Self {
        Store {
            schema: RwLock::new(Schema {
                keyspaces: BTreeMap::new(),
                version: random_uuid(),
            }),
            prepared: Mutex::new(HashMap::new()),
            traces: Traces::default(),
        }
    }

    /// The current schema version.
    pub fn schema_version(&self) -> Uuid {
        self.read().version
    }

    /// Names of the user keyspaces.
    pub fn keyspace_names(&self) -> Vec<String> {
        self.read().keyspaces.keys().cloned().collect()
    }

    /// Number of rows in `keyspace.table`, if it exists.
    pub fn row_count(&self, keyspace: &str, table: &str) -> Option<usize> {
        let s = self.read();
        s.keyspaces
            .get(keyspace)
            .and_then(|k| k.tables.get(table))
            .map(|t| t.rows.len())
    }

    /// Read access. A poisoned lock (a panic while writing, which the code
    /// avoids) still gives the data: a test server keeps serving.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Schema> {
        self.schema.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Write access (see [`Store::read`] on poisoning).
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Schema> {
        self.schema.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The query traces kept (see `traces`).
    pub(crate) fn traces(&self) -> &Traces {
        &self.traces
    }

    pub(crate) fn prepared(&self, id: &[u8]) -> Option<Arc<PreparedStatement>> {
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Forgets every prepared statement, as a restarted ScyllaDB node does:
    /// the next EXECUTE of each gets UNPREPARED (for tests of re-preparing).
    pub fn forget_prepared(&self) {
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub(crate) fn add_prepared(&self, p: Arc<PreparedStatement>) {
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.id.to_vec(), p);
    }
}

/// The order-preserving encoding of a token (sign bit flipped, big-endian).
fn token_bytes(t: Token) -> [u8; 8] {
    ((t.0 as u64) ^ (1 << 63)).to_be_bytes()
}

/// Appends `b` so that byte-wise order of the encodings is the order of the
/// inputs and no encoding is a prefix of another: 0x00 escaped as 0x00 0xFF,
/// then a 0x00 0x00 terminator.
fn put_escaped(out: &mut Vec<u8>, b: &[u8]) {
    for &x in b {
        out.push(x);
        if x == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// A clustering value in a byte-comparable form: signed integers get their
/// sign bit flipped (so they sort numerically); others sort by bytes.
fn orderable(typ: &ColumnType, v: &[u8]) -> Vec<u8> {
    let mut o = v.to_vec();
    let signed = matches!(
        typ,
        ColumnType::Native(NativeType::Int)
            | ColumnType::Native(NativeType::BigInt)
            | ColumnType::Native(NativeType::SmallInt)
            | ColumnType::Native(NativeType::TinyInt)
            | ColumnType::Native(NativeType::Timestamp)
            | ColumnType::Native(NativeType::Counter)
            | ColumnType::Native(NativeType::Time)
    );
    if signed {
        if let Some(first) = o.first_mut() {
            *first ^= 0x80;
        }
    }
    o
}

/// The key prefix shared by every row of one partition.
pub(crate) fn partition_prefix(token: Token, pk: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + pk.len() + 2);
    k.extend_from_slice(&token_bytes(token));
    put_escaped(&mut k, pk);
    k
}

/// The full key of a row: partition prefix, then the clustering values.
pub(crate) fn row_key(token: Token, pk: &[u8], ck: &[(&ColumnType, &[u8])]) -> Vec<u8> {
    let mut k = partition_prefix(token, pk);
    for (t, v) in ck {
        put_escaped(&mut k, &orderable(t, v));
    }
    k
}

/// Compares two values of `typ` for range relations (numeric for integer
/// types, byte-wise otherwise).
pub(crate) fn compare(typ: &ColumnType, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    orderable(typ, a).cmp(&orderable(typ, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_parts() {
        let int = ColumnType::Native(NativeType::Int);
        let k = |t: i64, pk: &[u8], c: i32| row_key(Token(t), pk, &[(&int, &c.to_be_bytes())]);
        assert!(k(-5, b"a", 0) < k(3, b"a", 0));
        assert!(k(1, b"a", -1) < k(1, b"a", 1));
        assert!(k(1, b"a", 7) < k(1, b"a\0", -100));
        let p = partition_prefix(Token(1), b"a");
        assert!(k(1, b"a", 5).starts_with(&p));
        assert!(!k(1, b"a\0", 5).starts_with(&p));
    }

    proptest::proptest! {
        /// Rows written stripe by stripe read back as one map would hold
        /// them: a full scan in key (token) order, and each partition whole
        /// from the stripe its prefix names.
        #[test]
        fn striped_rows_read_back_as_one_map(
            rows in proptest::collection::vec(
                (proptest::prelude::any::<i64>(), 0u8..4, proptest::prelude::any::<i32>()),
                0..200,
            ),
            truncate_first in proptest::prelude::any::<bool>(),
        ) {
            let int = ColumnType::Native(NativeType::Int);
            let striped = RowMap::default();
            let mut plain: BTreeMap<Vec<u8>, Row> = BTreeMap::new();
            if truncate_first {
                striped.write_at(&[0x80]).insert(vec![0x80], Vec::new());
                striped.clear();
            }
            for &(t, pk, c) in &rows {
                let key = row_key(Token(t), &[pk], &[(&int, &c.to_be_bytes())]);
                let row: Row = vec![Some(Bytes::copy_from_slice(&c.to_be_bytes()))];
                striped.write_at(&key).insert(key.clone(), row.clone());
                plain.insert(key, row);
            }
            let all: Vec<(Vec<u8>, Row)> = plain.clone().into_iter().collect();
            proptest::prop_assert_eq!(striped.snapshot(), all);
            proptest::prop_assert_eq!(striped.len(), plain.len());
            for &(t, pk, _) in &rows {
                let prefix = partition_prefix(Token(t), &[pk]);
                let stripe = striped.read_at(&prefix);
                let got: Vec<&Vec<u8>> = with_prefix(&stripe, &prefix).map(|(k, _)| k).collect();
                let want: Vec<&Vec<u8>> = with_prefix(&plain, &prefix).map(|(k, _)| k).collect();
                proptest::prop_assert_eq!(got, want);
            }
        }
    }
}
