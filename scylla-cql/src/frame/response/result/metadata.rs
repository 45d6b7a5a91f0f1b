//! Result metadata (section 4.2.5.2): what the columns of a Rows result are,
//! and the paging state to fetch the next page.
//!
//! ```text
//! <flags><columns_count>[<paging_state>][<new_metadata_id>]
//!     [<global_table_spec>?<col_spec_1>...<col_spec_n>]
//! ```
//!
//! `<new_metadata_id>` (flag `Metadata_changed`, v5 or v4 with
//! `SCYLLA_USE_METADATA_ID`) tells a client that executed a prepared statement
//! with an outdated result metadata id which metadata (sent in full with it)
//! and id to use from now on.
//!
//! The same format describes the result of a prepared statement (the
//! `<result_metadata>` of section 4.2.5.4). The column specs that share a
//! global table spec share one decoding routine with the prepared metadata's.
//!
//! Decoded column specs are shared (`Arc`), and a [`SpecCache`] lets a
//! connection decode the specs of a result it has seen before without
//! allocating: the same bytes give the same specs.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::super::share;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::types::{ColumnSpec, ColumnType};

/// Metadata flag: one table spec for all columns.
pub const GLOBAL_TABLES_SPEC: i32 = 0x0001;
/// Metadata flag: a paging state follows; this is not the last page.
pub const HAS_MORE_PAGES: i32 = 0x0002;
/// Metadata flag: no column specs (the client asked to skip them).
pub const NO_METADATA: i32 = 0x0004;
/// Metadata flag: the result metadata changed; a new metadata id follows the
/// paging state, and the column specs are present.
pub const METADATA_CHANGED: i32 = 0x0008;

/// The keyspace and table of columns.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableSpec {
    /// Keyspace name.
    pub keyspace: String,
    /// Table name.
    pub table: String,
}

/// Metadata of a Rows result (or of a prepared statement's result).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResultMetadata {
    /// Number of columns of every row (sent even with No_metadata).
    pub columns_count: usize,
    /// Where to resume paging (`Has_more_pages`), `None` on the last page.
    ///
    /// Boxed, as [`new_metadata_id`](Self::new_metadata_id) (see there),
    /// and for the same reason: unboxed it made the driver's result 184
    /// bytes instead of 160, and two of its moves on the way to the caller
    /// became `memcpy` calls (`scripts/instructions-per-request.sh`: about
    /// 60 instructions per prepared SELECT). Only a page with more to come
    /// carries one, and pays the allocation.
    pub paging_state: Option<Box<Bytes>>,
    /// The id of these (changed) metadata (`Metadata_changed`), which the
    /// prepared statement that produced the rows adopts with them. Requires
    /// `col_specs` when encoding.
    ///
    /// Boxed: it comes only with a schema change, and unboxed it made every
    /// [`Response`](crate::frame::response::Response) 24 bytes larger (the
    /// driver's response frame 152 bytes instead of 128). A response is moved
    /// about ten times between the connection's reader and the caller; at 128
    /// bytes or less such a move is a few inline copies, above that a
    /// `memcpy` call (`scripts/instructions-per-request.sh`: 3.1% fewer
    /// instructions per prepared INSERT boxed, 3.6% per SELECT).
    pub new_metadata_id: Option<Box<Bytes>>,
    /// The table all columns belong to, when sent once (`Global_tables_spec`).
    /// Each [`ColumnSpec`] carries its table either way.
    pub global_table_spec: Option<Arc<TableSpec>>,
    /// The columns, or `None` when the server skipped them (`No_metadata`).
    pub col_specs: Option<Arc<[ColumnSpec]>>,
}

/// Column specs recently decoded on one connection, by their encoded bytes,
/// so that the next result with the same columns reuses them instead of
/// decoding (and allocating) them again. Safe by construction: an entry is
/// used only when the input holds exactly its bytes (with the same flags
/// and column count), and decoding the same bytes gives the same specs.
///
/// Bounded: [`SpecCache::ENTRIES`] entries of at most
/// [`SpecCache::MAX_ENTRY_BYTES`] encoded bytes each, replaced round-robin.
#[derive(Debug, Default)]
pub struct SpecCache {
    entries: Vec<SpecEntry>,
    next: usize,
    hits: u64,
    misses: u64,
}

#[derive(Debug)]
struct SpecEntry {
    global: bool,
    columns_count: usize,
    raw: Box<[u8]>,
    global_table_spec: Option<Arc<TableSpec>>,
    col_specs: Arc<[ColumnSpec]>,
}

impl SpecCache {
    /// How many distinct column sets are kept.
    pub const ENTRIES: usize = 16;
    /// Larger encodings are decoded every time, not kept.
    pub const MAX_ENTRY_BYTES: usize = 4096;

    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        (self.hits, self.misses)
    }

    fn lookup(
        &mut self,
        global: bool,
        columns_count: usize,
        input: &[u8],
    ) -> Option<(usize, Specs)> {
        let e = self.entries.iter().find(|e| {
            e.global == global && e.columns_count == columns_count && input.starts_with(&e.raw)
        })?;
        self.hits += 1;
        Some((
            e.raw.len(),
            (e.global_table_spec.clone(), e.col_specs.clone()),
        ))
    }

    fn insert(&mut self, entry: SpecEntry) {
        self.misses += 1;
        if entry.raw.len() > Self::MAX_ENTRY_BYTES {
            return;
        }
        if self.entries.len() < Self::ENTRIES {
            self.entries.push(entry);
        } else {
            let i = self.next % Self::ENTRIES;
            self.entries[i] = entry;
            self.next = i + 1;
        }
    }
}

impl ResultMetadata {
    /// Metadata without column specs (`No_metadata`), e.g. for a prepared
    /// statement that is not a SELECT.
    pub fn empty() -> Self {
        Self::default()
    }

    /// Metadata for `col_specs`, sent with a global table spec when every
    /// column belongs to the same table.
    pub fn with_columns(col_specs: Vec<ColumnSpec>) -> Self {
        let global_table_spec = common_table(&col_specs).map(Arc::new);
        Self {
            columns_count: col_specs.len(),
            paging_state: None,
            new_metadata_id: None,
            global_table_spec,
            col_specs: Some(col_specs.into()),
        }
    }

    /// Decodes result metadata. The paging state shares `body`'s buffer.
    pub fn decode(body: &Bytes, r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Self::decode_cached(body, r, None)
    }

    /// [`decode`](Self::decode), reusing the specs of `cache` when the input
    /// holds bytes it has decoded before (and remembering new ones).
    pub fn decode_cached(
        body: &Bytes,
        r: &mut WireReader<'_>,
        cache: Option<&mut SpecCache>,
    ) -> Result<Self, DecodeError> {
        let flags = r.read_int("result metadata flags")?;
        let columns_count = r.read_len("result metadata columns_count")?;
        let paging_state = if flags & HAS_MORE_PAGES != 0 {
            // A null paging state is as good as none.
            r.read_bytes("paging state")?
                .map(|p| Box::new(share(body, p)))
        } else {
            None
        };
        let new_metadata_id = if flags & METADATA_CHANGED != 0 {
            if flags & NO_METADATA != 0 {
                // The spec: with Metadata_changed, No_metadata has to be unset.
                return Err(DecodeError::InvalidValue {
                    what: "result metadata flags (Metadata_changed with No_metadata)",
                    value: i64::from(flags),
                });
            }
            Some(Box::new(share(
                body,
                r.read_short_bytes("new metadata id")?,
            )))
        } else {
            None
        };
        if flags & NO_METADATA != 0 {
            return Ok(Self {
                columns_count,
                paging_state,
                new_metadata_id,
                global_table_spec: None,
                col_specs: None,
            });
        }
        let global = flags & GLOBAL_TABLES_SPEC != 0;
        let Some(cache) = cache else {
            let (global_table_spec, col_specs) = decode_specs(r, global, columns_count)?;
            return Ok(Self {
                columns_count,
                paging_state,
                new_metadata_id,
                global_table_spec,
                col_specs: Some(col_specs),
            });
        };
        if let Some((len, (global_table_spec, col_specs))) =
            cache.lookup(global, columns_count, r.rest())
        {
            r.take(len, "column specs")?;
            return Ok(Self {
                columns_count,
                paging_state,
                new_metadata_id,
                global_table_spec,
                col_specs: Some(col_specs),
            });
        }
        let start = r.rest();
        let (global_table_spec, col_specs) = decode_specs(r, global, columns_count)?;
        let used = start.len() - r.rest().len();
        cache.insert(SpecEntry {
            global,
            columns_count,
            raw: start[..used].into(),
            global_table_spec: global_table_spec.clone(),
            col_specs: col_specs.clone(),
        });
        Ok(Self {
            columns_count,
            paging_state,
            new_metadata_id,
            global_table_spec,
            col_specs: Some(col_specs),
        })
    }

    /// Encodes result metadata. Fails if the column count disagrees with the
    /// column specs, if a column lies outside the global table spec, or if a
    /// global table spec is given without column specs.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        let mut flags = 0;
        if self.paging_state.is_some() {
            flags |= HAS_MORE_PAGES;
        }
        if self.new_metadata_id.is_some() {
            if self.col_specs.is_none() {
                return Err(EncodeError::Invalid(
                    "a new metadata id (Metadata_changed) needs the column specs",
                ));
            }
            flags |= METADATA_CHANGED;
        }
        match (&self.col_specs, &self.global_table_spec) {
            (None, Some(_)) => {
                return Err(EncodeError::Invalid(
                    "a global table spec needs column specs (No_metadata sends neither)",
                ))
            }
            (None, None) => flags |= NO_METADATA,
            (Some(specs), global) => {
                if specs.len() != self.columns_count {
                    return Err(EncodeError::Invalid(
                        "columns_count differs from the number of column specs",
                    ));
                }
                if global.is_some() {
                    flags |= GLOBAL_TABLES_SPEC;
                }
            }
        }
        wire::put_int(buf, flags);
        wire::put_int_len(buf, self.columns_count, "columns count")?;
        if let Some(p) = &self.paging_state {
            wire::put_bytes(buf, Some(p), "paging state")?;
        }
        if let Some(id) = &self.new_metadata_id {
            wire::put_short_bytes(buf, id, "new metadata id")?;
        }
        if let Some(specs) = &self.col_specs {
            if let Some(g) = &self.global_table_spec {
                g.encode(buf)?;
            }
            encode_col_specs(buf, specs, self.global_table_spec.as_deref())?;
        }
        Ok(())
    }
}

/// A result's table spec (if global) and column specs, shared.
type Specs = (Option<Arc<TableSpec>>, Arc<[ColumnSpec]>);

/// Decodes `[<global_table_spec>]<col_spec_1>...<col_spec_n>`.
fn decode_specs(
    r: &mut WireReader<'_>,
    global: bool,
    columns_count: usize,
) -> Result<Specs, DecodeError> {
    let global_table_spec = if global {
        Some(TableSpec::decode(r)?)
    } else {
        None
    };
    let col_specs = decode_col_specs(r, columns_count, global_table_spec.as_ref())?;
    Ok((global_table_spec.map(Arc::new), col_specs.into()))
}

impl TableSpec {
    /// Decodes `<keyspace><table>`.
    pub fn decode(r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Ok(Self {
            keyspace: r.read_string("table spec keyspace")?.to_owned(),
            table: r.read_string("table spec table")?.to_owned(),
        })
    }

    /// Encodes `<keyspace><table>`.
    pub fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        wire::put_string(buf, &self.keyspace, "table spec keyspace")?;
        wire::put_string(buf, &self.table, "table spec table")
    }
}

/// The table shared by every column, if there is at least one column and
/// they all share one.
pub(crate) fn common_table(specs: &[ColumnSpec]) -> Option<TableSpec> {
    let first = specs.first()?;
    specs
        .iter()
        .all(|c| c.keyspace == first.keyspace && c.table == first.table)
        .then(|| TableSpec {
            keyspace: first.keyspace.clone(),
            table: first.table.clone(),
        })
}

/// Decodes `count` column specs `(<ksname><tablename>)?<name><type>`.
pub(crate) fn decode_col_specs(
    r: &mut WireReader<'_>,
    count: usize,
    global: Option<&TableSpec>,
) -> Result<Vec<ColumnSpec>, DecodeError> {
    // A spec is at least a name length and a type id (4 bytes); checking the
    // count against the input before allocating bounds the allocation by the
    // body size.
    if count.saturating_mul(4) > r.remaining() {
        return Err(DecodeError::InvalidLength {
            what: "column spec count",
            length: count as i64,
            offset: r.position(),
        });
    }
    let mut specs = Vec::with_capacity(count);
    for _ in 0..count {
        let (keyspace, table) = match global {
            Some(g) => (g.keyspace.clone(), g.table.clone()),
            None => (
                r.read_string("column keyspace")?.to_owned(),
                r.read_string("column table")?.to_owned(),
            ),
        };
        let name = r.read_string("column name")?.to_owned();
        let typ = ColumnType::decode(r)?;
        specs.push(ColumnSpec {
            keyspace,
            table,
            name,
            typ,
        });
    }
    Ok(specs)
}

/// Encodes column specs, with their table unless `global` covers it.
pub(crate) fn encode_col_specs(
    buf: &mut BytesMut,
    specs: &[ColumnSpec],
    global: Option<&TableSpec>,
) -> Result<(), EncodeError> {
    for c in specs {
        match global {
            Some(g) if g.keyspace != c.keyspace || g.table != c.table => {
                return Err(EncodeError::Invalid(
                    "a column's table differs from the global table spec",
                ))
            }
            Some(_) => {}
            None => {
                wire::put_string(buf, &c.keyspace, "column keyspace")?;
                wire::put_string(buf, &c.table, "column table")?;
            }
        }
        wire::put_string(buf, &c.name, "column name")?;
        c.typ.encode(buf)?;
    }
    Ok(())
}
