//! `<query_parameters>` of QUERY and EXECUTE (section 4.1.4 of the v4 spec):
//!
//! ```text
//! <consistency><flags>[<n>[name_1]<value_1>...][<result_page_size>][<paging_state>]
//!     [<serial_consistency>][<timestamp>]
//! ```
//!
//! The flags byte is derived from which optional parts are present, so a
//! [`QueryParameters`] cannot disagree with its own flags. Decoding rejects flag
//! bits the spec does not define: a peer using them expects a behaviour we do
//! not implement.

use std::borrow::Cow;

use bytes::BufMut;

use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::types::SerializedValues;

/// Values are present.
const VALUES: u8 = 0x01;
/// The result should omit its metadata.
const SKIP_METADATA: u8 = 0x02;
/// A page size is present.
const PAGE_SIZE: u8 = 0x04;
/// A paging state is present.
const PAGING_STATE: u8 = 0x08;
/// A serial consistency is present.
const SERIAL_CONSISTENCY: u8 = 0x10;
/// A default timestamp is present.
const DEFAULT_TIMESTAMP: u8 = 0x20;
/// Values are preceded by names.
const NAMES_FOR_VALUES: u8 = 0x40;
/// Every flag defined by protocol v4.
const KNOWN: u8 = 0x7f;

/// How to run a QUERY or EXECUTE. Borrows what it can (values, paging state)
/// so the driver encodes from its own buffers without copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryParameters<'a> {
    /// The consistency level.
    pub consistency: Consistency,
    /// Bound values, positional or named; empty means no VALUES flag.
    pub values: Cow<'a, SerializedValues>,
    /// Ask for rows without column metadata (the client has it from PREPARE).
    pub skip_metadata: bool,
    /// Rows per page; `None` means no paging (the server's default applies).
    pub page_size: Option<i32>,
    /// Where to resume a paged query (an opaque value from a previous result).
    pub paging_state: Option<Cow<'a, [u8]>>,
    /// The consistency of the Paxos phase of a conditional update.
    pub serial_consistency: Option<Consistency>,
    /// The default write timestamp in microseconds.
    pub default_timestamp: Option<i64>,
}

impl Default for QueryParameters<'_> {
    fn default() -> Self {
        Self {
            consistency: Consistency::default(),
            values: Cow::Owned(SerializedValues::new()),
            skip_metadata: false,
            page_size: None,
            paging_state: None,
            serial_consistency: None,
            default_timestamp: None,
        }
    }
}

impl<'a> QueryParameters<'a> {
    /// The flags byte these parameters are written with.
    pub fn flags(&self) -> u8 {
        let mut f = 0;
        if !self.values.is_empty() {
            f |= VALUES;
            if self.values.is_named() {
                f |= NAMES_FOR_VALUES;
            }
        }
        if self.skip_metadata {
            f |= SKIP_METADATA;
        }
        if self.page_size.is_some() {
            f |= PAGE_SIZE;
        }
        if self.paging_state.is_some() {
            f |= PAGING_STATE;
        }
        if self.serial_consistency.is_some() {
            f |= SERIAL_CONSISTENCY;
        }
        if self.default_timestamp.is_some() {
            f |= DEFAULT_TIMESTAMP;
        }
        f
    }

    /// Appends the encoded parameters.
    pub fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        let flags = self.flags();
        wire::put_consistency(buf, self.consistency);
        buf.put_u8(flags);
        if flags & VALUES != 0 {
            self.values.encode(buf);
        }
        if let Some(n) = self.page_size {
            wire::put_int(buf, n);
        }
        if let Some(state) = &self.paging_state {
            wire::put_bytes(buf, Some(state), "paging state")?;
        }
        if let Some(c) = self.serial_consistency {
            wire::put_consistency(buf, c);
        }
        if let Some(ts) = self.default_timestamp {
            wire::put_long(buf, ts);
        }
        Ok(())
    }

    /// Reads parameters, borrowing the paging state from the input.
    ///
    /// A paging state written as a null `[bytes]` is read as no paging state.
    pub fn decode(r: &mut WireReader<'a>) -> Result<Self, DecodeError> {
        let consistency = r.read_consistency("consistency")?;
        let flags = r.read_u8("query flags")?;
        if flags & !KNOWN != 0 {
            return Err(DecodeError::InvalidValue {
                what: "query flags",
                value: flags as i64,
            });
        }
        let values = if flags & VALUES != 0 {
            SerializedValues::decode(r, flags & NAMES_FOR_VALUES != 0)?
        } else {
            SerializedValues::new()
        };
        let page_size = if flags & PAGE_SIZE != 0 {
            Some(r.read_int("page size")?)
        } else {
            None
        };
        let paging_state = if flags & PAGING_STATE != 0 {
            r.read_bytes("paging state")?.map(Cow::Borrowed)
        } else {
            None
        };
        let serial_consistency = if flags & SERIAL_CONSISTENCY != 0 {
            Some(r.read_consistency("serial consistency")?)
        } else {
            None
        };
        let default_timestamp = if flags & DEFAULT_TIMESTAMP != 0 {
            Some(r.read_long("default timestamp")?)
        } else {
            None
        };
        Ok(Self {
            consistency,
            values: Cow::Owned(values),
            skip_metadata: flags & SKIP_METADATA != 0,
            page_size,
            paging_state,
            serial_consistency,
            default_timestamp,
        })
    }

    /// A copy that owns all its data.
    pub fn into_owned(self) -> QueryParameters<'static> {
        QueryParameters {
            consistency: self.consistency,
            values: Cow::Owned(self.values.into_owned()),
            skip_metadata: self.skip_metadata,
            page_size: self.page_size,
            paging_state: self.paging_state.map(|p| Cow::Owned(p.into_owned())),
            serial_consistency: self.serial_consistency,
            default_timestamp: self.default_timestamp,
        }
    }
}
