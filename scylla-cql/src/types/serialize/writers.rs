//! Where a serializer writes: a [`CellWriter`] is the place of exactly one
//! CQL value (`[bytes]`: an `[int]` length, then the bytes; -1 for null, -2
//! for "not set") inside the request being built, and the
//! [`WrittenCellProof`] it returns is how the caller knows that the value was
//! written, and what it was.
//!
//! A fixed-size value goes in one call ([`CellWriter::set_value`]); anything
//! built in pieces (a collection, a UDT, a big number) goes through a
//! [`CellValueBuilder`], whose length is back-filled by
//! [`finish`](CellValueBuilder::finish). Nested values (collection elements,
//! UDT fields) are written by [`CellValueBuilder::make_sub_writer`], so a
//! value of any depth is written in place, with no intermediate buffer.
//!
//! ```
//! use scylla_driver_cql::types::serialize::writers::CellWriter;
//!
//! let mut buf = Vec::new();
//! let proof = CellWriter::new(&mut buf).set_value(&7i32.to_be_bytes()).unwrap();
//! assert!(proof.is_value());
//! assert_eq!(buf, [0, 0, 0, 4, 0, 0, 0, 7]);
//!
//! let mut builder = CellWriter::new(&mut buf).into_value_builder();
//! builder.append_bytes(b"ab");
//! builder.append_bytes(b"c");
//! builder.finish().unwrap();
//! assert_eq!(&buf[8..], [0, 0, 0, 3, b'a', b'b', b'c']);
//! ```

use std::fmt;
use std::marker::PhantomData;

use super::{SerializationError, SerializationErrorKind, Written};
use crate::error::EncodeError;

/// The place of one CQL value in a request: write it with one of the
/// methods, each of which consumes the writer and returns the
/// [`WrittenCellProof`] that a
/// [`SerializeValue::serialize`](super::SerializeValue::serialize)
/// implementation returns.
#[derive(Debug)]
pub struct CellWriter<'buf> {
    buf: &'buf mut Vec<u8>,
}

impl<'buf> CellWriter<'buf> {
    /// A writer that appends the value (length first) to `buf`.
    pub fn new(buf: &'buf mut Vec<u8>) -> Self {
        CellWriter { buf }
    }

    /// Writes a null.
    pub fn set_null(self) -> WrittenCellProof<'buf> {
        self.buf.extend_from_slice(&(-1i32).to_be_bytes());
        WrittenCellProof::new(Written::Null)
    }

    /// Writes "not set" (the column keeps its value; valid only as a
    /// statement's bound value, not inside a collection, tuple or UDT).
    pub fn set_unset(self) -> WrittenCellProof<'buf> {
        self.buf.extend_from_slice(&(-2i32).to_be_bytes());
        WrittenCellProof::new(Written::Unset)
    }

    /// Writes a value whose bytes are all at hand. Fails, writing nothing,
    /// if `contents` is longer than a CQL value can be (`i32::MAX` bytes).
    pub fn set_value(self, contents: &[u8]) -> Result<WrittenCellProof<'buf>, CellOverflowError> {
        let len = i32::try_from(contents.len()).map_err(|_| CellOverflowError {
            length: contents.len(),
        })?;
        self.buf.reserve(4 + contents.len());
        self.buf.extend_from_slice(&len.to_be_bytes());
        self.buf.extend_from_slice(contents);
        Ok(WrittenCellProof::new(Written::Value))
    }

    /// Starts a value written in pieces; its length is written by
    /// [`CellValueBuilder::finish`].
    pub fn into_value_builder(self) -> CellValueBuilder<'buf> {
        let start = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]);
        CellValueBuilder {
            buf: self.buf,
            start,
        }
    }

    /// Writes a value with `body`, which appends the value's bytes (no
    /// length) and says what it wrote; anything it appended for a null or
    /// an unset is dropped. The helper the built-in serializers share.
    pub(crate) fn write_with<E: From<CellOverflowError>>(
        self,
        body: impl FnOnce(&mut Vec<u8>) -> Result<Written, E>,
    ) -> Result<WrittenCellProof<'buf>, E> {
        let builder = self.into_value_builder();
        match body(builder.buf)? {
            Written::Value => Ok(builder.finish()?),
            Written::Null => Ok(builder.discard(-1, Written::Null)),
            Written::Unset => Ok(builder.discard(-2, Written::Unset)),
        }
    }
}

/// A value being written in pieces (see [`CellWriter::into_value_builder`]).
/// Dropping it without [`finish`](Self::finish) leaves a zero length in
/// place, so the value reads as empty, never as garbage; but a serializer
/// has no proof to return without `finish`.
#[derive(Debug)]
pub struct CellValueBuilder<'buf> {
    buf: &'buf mut Vec<u8>,
    /// Where the `[int]` length goes.
    start: usize,
}

impl<'buf> CellValueBuilder<'buf> {
    /// Appends bytes to the value.
    pub fn append_bytes(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// A writer for a value nested in this one (a collection element, a
    /// tuple or UDT field): it writes its own `[bytes]` length.
    pub fn make_sub_writer(&mut self) -> CellWriter<'_> {
        CellWriter::new(self.buf)
    }

    /// Writes the value's length. Fails if the value grew beyond what a CQL
    /// value can hold (`i32::MAX` bytes).
    pub fn finish(self) -> Result<WrittenCellProof<'buf>, CellOverflowError> {
        let length = self.buf.len() - self.start - 4;
        let len = i32::try_from(length).map_err(|_| CellOverflowError { length })?;
        self.buf[self.start..self.start + 4].copy_from_slice(&len.to_be_bytes());
        Ok(WrittenCellProof::new(Written::Value))
    }

    /// Drops what was appended and writes `len` (-1 or -2) instead.
    fn discard(self, len: i32, written: Written) -> WrittenCellProof<'buf> {
        self.buf.truncate(self.start + 4);
        self.buf[self.start..self.start + 4].copy_from_slice(&len.to_be_bytes());
        WrittenCellProof::new(written)
    }
}

/// Proof that a [`CellWriter`] was used up: what
/// [`SerializeValue::serialize`](super::SerializeValue::serialize) returns.
/// Its lifetime ties it to the writer's buffer, so an implementation cannot
/// return a proof from another writer; [`written`](Self::written) tells
/// whether a value, a null or an unset was written.
#[derive(Debug)]
pub struct WrittenCellProof<'buf> {
    written: Written,
    /// Invariant in `'buf`.
    _buf: PhantomData<fn(&'buf ()) -> &'buf ()>,
}

impl WrittenCellProof<'_> {
    fn new(written: Written) -> Self {
        WrittenCellProof {
            written,
            _buf: PhantomData,
        }
    }

    /// What was written.
    pub fn written(&self) -> Written {
        self.written
    }

    /// Whether a value (not a null, not an unset) was written.
    pub fn is_value(&self) -> bool {
        self.written == Written::Value
    }
}

/// A value longer than a CQL value can be (`i32::MAX` bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellOverflowError {
    /// The value's length in bytes.
    pub length: usize,
}

impl fmt::Display for CellOverflowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a value of {} bytes is longer than a CQL value can be ({} bytes)",
            self.length,
            i32::MAX
        )
    }
}

impl std::error::Error for CellOverflowError {}

impl From<CellOverflowError> for SerializationError {
    fn from(e: CellOverflowError) -> Self {
        SerializationError::new(SerializationErrorKind::Encode(EncodeError::TooLong {
            what: "value",
            length: e.length,
            max: i32::MAX as usize,
        }))
    }
}

/// Where a row's values go, one [`CellWriter`] per value: what a
/// hand-written [`SerializeRow::serialize`](super::row::SerializeRow::serialize)
/// writes into, in the official `scylla` crate's shape.
///
/// ```
/// use scylla_driver_cql::types::serialize::writers::RowWriter;
/// use scylla_driver_cql::types::SerializedValues;
///
/// let mut values = SerializedValues::new();
/// let mut writer = RowWriter::new(&mut values);
/// writer.make_cell_writer().set_value(&7i32.to_be_bytes()).unwrap();
/// writer.make_cell_writer().set_null();
/// assert_eq!(writer.value_count(), 2);
/// ```
#[derive(Debug)]
pub struct RowWriter<'buf> {
    values: &'buf mut crate::types::SerializedValues,
    /// The first error starting a value met (more than 65,535 values),
    /// reported by [`finish`](Self::finish).
    overflow: Option<EncodeError>,
}

impl<'buf> RowWriter<'buf> {
    /// A writer appending to `values`.
    pub fn new(values: &'buf mut crate::types::SerializedValues) -> Self {
        RowWriter {
            values,
            overflow: None,
        }
    }

    /// How many values the row holds so far.
    pub fn value_count(&self) -> usize {
        self.values.len()
    }

    /// The place of the row's next value.
    pub fn make_cell_writer(&mut self) -> CellWriter<'_> {
        let (buf, started) = self.values.start_value();
        if let Err(e) = started {
            self.overflow.get_or_insert(e);
        }
        CellWriter::new(buf)
    }

    /// The values written so far (for a row that serializes itself with
    /// [`SerializeRow::serialize_row`](super::row::SerializeRow::serialize_row)).
    pub(crate) fn values(&mut self) -> &mut crate::types::SerializedValues {
        self.values
    }

    /// Ends the row: an error if a value could not be started (too many).
    pub(crate) fn finish(self) -> Result<(), SerializationError> {
        match self.overflow {
            Some(e) => Err(SerializationError::from(e)),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_unset_and_values_have_their_lengths() {
        let mut buf = Vec::new();
        assert_eq!(
            CellWriter::new(&mut buf).set_null().written(),
            Written::Null
        );
        assert_eq!(
            CellWriter::new(&mut buf).set_unset().written(),
            Written::Unset
        );
        let proof = CellWriter::new(&mut buf).set_value(b"").unwrap();
        assert!(proof.is_value());
        assert_eq!(buf, [255, 255, 255, 255, 255, 255, 255, 254, 0, 0, 0, 0]);
    }

    #[test]
    fn builder_back_fills_the_length_and_nests() {
        let mut buf = vec![9];
        let mut b = CellWriter::new(&mut buf).into_value_builder();
        b.append_bytes(&[1, 2]);
        b.make_sub_writer().set_value(&[3]).unwrap();
        b.make_sub_writer().set_null();
        b.finish().unwrap();
        assert_eq!(
            buf,
            [9, 0, 0, 0, 11, 1, 2, 0, 0, 0, 1, 3, 255, 255, 255, 255]
        );
    }

    #[test]
    fn write_with_drops_the_body_of_a_null() {
        let mut buf = Vec::new();
        let proof = CellWriter::new(&mut buf)
            .write_with(|out| {
                out.extend_from_slice(b"junk");
                Ok::<_, CellOverflowError>(Written::Null)
            })
            .unwrap();
        assert_eq!(proof.written(), Written::Null);
        assert_eq!(buf, [255, 255, 255, 255]);
    }
}
