//! A Rows result (section 4.2.5.2): metadata, `<rows_count>`, then
//! `rows_count * columns_count` `[bytes]` cells.
//!
//! The cells stay in the frame's buffer ([`Rows::raw_rows`] is a slice of the
//! body, not a copy). Their layout is validated once, when the result is
//! decoded, so that iterating them later ([`Rows::raw_iter`]) cannot meet a
//! structural error: deserializing a row only has to worry about the values.

use bytes::{BufMut, Bytes, BytesMut};

use super::super::share;
use super::metadata::{ResultMetadata, SpecCache};
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};

/// The rows of a result, borrowed from the frame body.
///
/// Invariant: `raw_rows` holds exactly `rows_count * metadata.columns_count`
/// well-formed `[bytes]` cells. Constructors check it, so fields are private.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rows {
    metadata: ResultMetadata,
    rows_count: usize,
    raw_rows: Bytes,
}

/// Checks that `cells` holds exactly `rows_count * columns_count` `[bytes]`.
fn validate(cells: &[u8], rows_count: usize, columns_count: usize) -> Result<(), DecodeError> {
    let n_cells = rows_count.saturating_mul(columns_count);
    // Each cell has at least its 4-byte length: rejects impossible counts
    // before looping over them.
    if n_cells.saturating_mul(4) > cells.len() {
        return Err(DecodeError::InvalidLength {
            what: "rows_count",
            length: rows_count as i64,
            offset: 0,
        });
    }
    let mut r = WireReader::new(cells);
    for _ in 0..n_cells {
        r.read_bytes("row cell")?;
    }
    r.expect_end("rows content")
}

impl Rows {
    /// Decodes a Rows result (after the kind). The cells share `body`'s buffer
    /// and must extend to the end of the body.
    pub fn decode(body: &Bytes, r: &mut WireReader<'_>) -> Result<Self, DecodeError> {
        Self::decode_cached(body, r, None)
    }

    /// [`decode`](Self::decode), with the column specs through `cache`
    /// (see [`SpecCache`]).
    pub fn decode_cached(
        body: &Bytes,
        r: &mut WireReader<'_>,
        cache: Option<&mut SpecCache>,
    ) -> Result<Self, DecodeError> {
        let metadata = ResultMetadata::decode_cached(body, r, cache)?;
        let rows_count = r.read_len("rows_count")?;
        let cells = r.rest();
        validate(cells, rows_count, metadata.columns_count)?;
        // Every remaining byte is a cell: consume them.
        r.take(cells.len(), "rows content")?;
        Ok(Self {
            metadata,
            rows_count,
            raw_rows: share(body, cells),
        })
    }

    /// Rows from already-serialized cells, checked like a decoded result.
    pub fn from_raw(
        metadata: ResultMetadata,
        rows_count: usize,
        raw_rows: Bytes,
    ) -> Result<Self, DecodeError> {
        validate(&raw_rows, rows_count, metadata.columns_count)?;
        Ok(Self {
            metadata,
            rows_count,
            raw_rows,
        })
    }

    /// Serializes `rows` (each a sequence of cells, `None` for null) under
    /// `metadata`; for the test cluster. Every row must have
    /// `metadata.columns_count` cells.
    pub fn build<R, C>(
        metadata: ResultMetadata,
        rows: impl IntoIterator<Item = R>,
    ) -> Result<Self, EncodeError>
    where
        R: IntoIterator<Item = Option<C>>,
        C: AsRef<[u8]>,
    {
        let mut buf = BytesMut::new();
        let mut rows_count = 0usize;
        for row in rows {
            let mut n = 0usize;
            for cell in row {
                wire::put_bytes(&mut buf, cell.as_ref().map(AsRef::as_ref), "row cell")?;
                n += 1;
            }
            if n != metadata.columns_count {
                return Err(EncodeError::Invalid(
                    "a row's cell count differs from columns_count",
                ));
            }
            rows_count += 1;
        }
        if i32::try_from(rows_count).is_err() {
            return Err(EncodeError::TooMany {
                what: "rows",
                count: rows_count,
                max: i32::MAX as usize,
            });
        }
        Ok(Self {
            metadata,
            rows_count,
            raw_rows: buf.freeze(),
        })
    }

    /// The column metadata (and paging state).
    pub fn metadata(&self) -> &ResultMetadata {
        &self.metadata
    }

    /// Number of rows.
    pub fn rows_count(&self) -> usize {
        self.rows_count
    }

    /// Number of columns of every row.
    pub fn columns_count(&self) -> usize {
        self.metadata.columns_count
    }

    /// The serialized cells, as sent.
    pub fn raw_rows(&self) -> &Bytes {
        &self.raw_rows
    }

    /// The paging state for the next page, if any.
    pub fn paging_state(&self) -> Option<&Bytes> {
        self.metadata.paging_state.as_deref()
    }

    /// The parts: metadata, rows count and serialized cells.
    pub fn into_parts(self) -> (ResultMetadata, usize, Bytes) {
        (self.metadata, self.rows_count, self.raw_rows)
    }

    /// Iterates over the rows, each an iterator over its cells.
    pub fn raw_iter(&self) -> RawRowsIter<'_> {
        RawRowsIter {
            reader: WireReader::new(&self.raw_rows),
            rows_left: self.rows_count,
            columns_count: self.metadata.columns_count,
        }
    }

    /// Appends the Rows body (after the kind).
    pub(crate) fn encode(&self, buf: &mut BytesMut) -> Result<(), EncodeError> {
        self.metadata.encode(buf)?;
        wire::put_int_len(buf, self.rows_count, "rows count")?;
        buf.put_slice(&self.raw_rows);
        Ok(())
    }
}

/// Iterator over the rows of a [`Rows`].
#[derive(Debug, Clone)]
pub struct RawRowsIter<'a> {
    reader: WireReader<'a>,
    rows_left: usize,
    columns_count: usize,
}

impl<'a> Iterator for RawRowsIter<'a> {
    type Item = RawRow<'a>;

    fn next(&mut self) -> Option<RawRow<'a>> {
        if self.rows_left == 0 {
            return None;
        }
        self.rows_left -= 1;
        let start = self.reader.position();
        for _ in 0..self.columns_count {
            // Cannot fail: the cells were validated when the Rows was built.
            // Were it to, the iteration just ends early.
            if self.reader.read_bytes("row cell").is_err() {
                self.rows_left = 0;
                return None;
            }
        }
        Some(RawRow {
            reader: WireReader::new(self.reader.consumed_since(start)),
            cells_left: self.columns_count,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.rows_left, Some(self.rows_left))
    }
}

impl ExactSizeIterator for RawRowsIter<'_> {}

/// One row: an iterator over its cells, `None` for null.
#[derive(Debug, Clone)]
pub struct RawRow<'a> {
    reader: WireReader<'a>,
    cells_left: usize,
}

impl<'a> RawRow<'a> {
    /// The serialized cells of this row not yet iterated over.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.reader.rest()
    }
}

impl<'a> Iterator for RawRow<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Option<&'a [u8]>> {
        if self.cells_left == 0 {
            return None;
        }
        self.cells_left -= 1;
        // Validated at construction; an error (impossible) ends the row.
        match self.reader.read_bytes("row cell") {
            Ok(cell) => Some(cell),
            Err(_) => {
                self.cells_left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.cells_left, Some(self.cells_left))
    }
}

impl ExactSizeIterator for RawRow<'_> {}
