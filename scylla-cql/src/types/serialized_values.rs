//! Bound values, already encoded: the `<n><value_1>...<value_n>` part of query
//! parameters (or `<n><name_1><value_1>...` when values are named).
//!
//! The buffer is reusable (`clear` keeps its capacity), so a caller that binds
//! values for every request does not allocate in steady state.

use bytes::BufMut;

use super::serialize::writers::{CellWriter, WrittenCellProof};
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, RawValue, WireReader};

/// Encoded bound values, positional or named (never both).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SerializedValues {
    buf: Vec<u8>,
    count: u16,
    named: bool,
}

impl SerializedValues {
    /// No values.
    pub const fn new() -> Self {
        Self {
            buf: Vec::new(),
            count: 0,
            named: false,
        }
    }

    /// Forgets all values, keeping the capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.count = 0;
        self.named = false;
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Number of values, as the `[short]` that precedes them on the wire.
    pub(crate) fn count(&self) -> u16 {
        self.count
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether values carry names.
    pub fn is_named(&self) -> bool {
        self.named
    }

    /// The encoded values, without the count.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Starts one more positional value, written next into the returned
    /// buffer by a [`CellWriter`] (a [`RowWriter`](crate::types::serialize::writers::RowWriter)'s
    /// cell). The count is bumped even when it overflows, so that the row
    /// writer can report it at the end.
    pub(crate) fn start_value(&mut self) -> (&mut Vec<u8>, Result<(), EncodeError>) {
        let bumped = self.bump(false);
        (&mut self.buf, bumped)
    }

    /// The buffer's length and the count, to go back to with
    /// [`rewind`](Self::rewind) when a row fails half-way.
    pub(crate) fn mark(&self) -> (usize, u16) {
        (self.buf.len(), self.count)
    }

    /// Drops what was written after `mark`.
    pub(crate) fn rewind(&mut self, (len, count): (usize, u16)) {
        self.buf.truncate(len);
        self.count = count;
    }

    fn bump(&mut self, named: bool) -> Result<(), EncodeError> {
        if self.count > 0 && self.named != named {
            return Err(EncodeError::Invalid(
                "cannot mix named and positional values",
            ));
        }
        if self.count == u16::MAX {
            return Err(EncodeError::TooMany {
                what: "bound values",
                count: self.count as usize + 1,
                max: u16::MAX as usize,
            });
        }
        self.named = named;
        self.count += 1;
        Ok(())
    }

    /// Appends a positional value.
    pub fn push(&mut self, v: RawValue<'_>) -> Result<(), EncodeError> {
        self.bump(false)?;
        wire::put_value(&mut self.buf, v, "bound value")
    }

    /// Appends a named value.
    pub fn push_named(&mut self, name: &str, v: RawValue<'_>) -> Result<(), EncodeError> {
        self.bump(true)?;
        wire::put_string(&mut self.buf, name, "bound value name")?;
        wire::put_value(&mut self.buf, v, "bound value")
    }

    /// Appends a positional value written in place by `write`, which must append
    /// exactly the value's bytes (no length): the `[int]` length is back-filled.
    /// This is how typed serializers avoid an intermediate buffer.
    pub fn push_with(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
    ) -> Result<(), EncodeError> {
        self.bump(false)?;
        let len_at = self.buf.len();
        self.buf.put_i32(0);
        let rollback = |s: &mut Self| {
            s.buf.truncate(len_at);
            s.count -= 1;
        };
        if let Err(e) = write(&mut self.buf) {
            rollback(self);
            return Err(e);
        }
        let n = self.buf.len() - len_at - 4;
        match i32::try_from(n) {
            Ok(n) => {
                self.buf[len_at..len_at + 4].copy_from_slice(&n.to_be_bytes());
                Ok(())
            }
            Err(_) => {
                rollback(self);
                Err(EncodeError::TooLong {
                    what: "bound value",
                    length: n,
                    max: i32::MAX as usize,
                })
            }
        }
    }

    /// Appends a positional value written in place by a typed serializer:
    /// `write` writes exactly one value (its length included) through the
    /// [`CellWriter`] it is given. On error nothing is kept.
    pub fn push_serialized<E: From<EncodeError>>(
        &mut self,
        write: impl for<'b> FnOnce(CellWriter<'b>) -> Result<WrittenCellProof<'b>, E>,
    ) -> Result<(), E> {
        self.bump(false)?;
        let at = self.buf.len();
        if let Err(e) = write(CellWriter::new(&mut self.buf)) {
            self.buf.truncate(at);
            self.count -= 1;
            return Err(e);
        }
        Ok(())
    }

    /// Appends the `[short]` count and the values.
    pub fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u16(self.count);
        buf.put_slice(&self.buf);
    }

    /// Reads `count` values (named or not) from `r` (server side).
    pub fn decode(r: &mut WireReader<'_>, named: bool) -> Result<Self, DecodeError> {
        let count = r.read_short_count("value count", 4)?;
        let start = r.position();
        for _ in 0..count {
            if named {
                r.read_string("value name")?;
            }
            r.read_value("bound value")?;
        }
        let bytes = r.consumed_since(start);
        let out = SerializedValues {
            buf: bytes.to_vec(),
            // read_short_count returned a [short], so it fits in u16.
            count: count as u16,
            named,
        };
        Ok(out)
    }

    /// Iterates over the values: `(name, value)`, `name` is `None` when positional.
    pub fn iter(&self) -> impl Iterator<Item = (Option<&str>, RawValue<'_>)> {
        let mut r = WireReader::new(&self.buf);
        let named = self.named;
        // The buffer was built by this type's own writers (or validated by
        // `decode`), so each read succeeds; a failure ends the iteration.
        (0..self.count).map_while(move |_| {
            let name = if named {
                Some(r.read_string("value name").ok()?)
            } else {
                None
            };
            Some((name, r.read_value("bound value").ok()?))
        })
    }
}
