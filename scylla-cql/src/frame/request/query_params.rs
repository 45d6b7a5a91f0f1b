//! `<query_parameters>` of QUERY and EXECUTE (section 4.1.4 of the v4 and v5
//! specs):
//!
//! ```text
//! <consistency><flags>[<n>[name_1]<value_1>...][<result_page_size>][<paging_state>]
//!     [<serial_consistency>][<timestamp>][<keyspace>][<now_in_seconds>]
//! ```
//!
//! The flags are a `[byte]` in v4 and an `[int]` in v5, which adds
//! `With_keyspace` (0x80) and `With_now_in_seconds` (0x100). They are derived
//! from which optional parts are present, so a [`QueryParameters`] cannot
//! disagree with its own flags; asking v4 for a v5-only part is an
//! [`EncodeError::Invalid`]. Decoding rejects flag bits the version does not
//! define: a peer using them expects a behaviour we do not implement.

use std::borrow::Cow;

use bytes::BufMut;

use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};
use crate::frame::ProtocolVersion;
use crate::types::SerializedValues;

/// Values are present.
const VALUES: u32 = 0x01;
/// The result should omit its metadata.
const SKIP_METADATA: u32 = 0x02;
/// A page size is present.
const PAGE_SIZE: u32 = 0x04;
/// A paging state is present.
const PAGING_STATE: u32 = 0x08;
/// A serial consistency is present.
pub(crate) const SERIAL_CONSISTENCY: u32 = 0x10;
/// A default timestamp is present.
pub(crate) const DEFAULT_TIMESTAMP: u32 = 0x20;
/// Values are preceded by names.
pub(crate) const NAMES_FOR_VALUES: u32 = 0x40;
/// A keyspace is present (v5).
pub(crate) const WITH_KEYSPACE: u32 = 0x80;
/// A `now_in_seconds` is present (v5).
pub(crate) const WITH_NOW_IN_SECONDS: u32 = 0x100;
/// Every flag defined by protocol v4.
const KNOWN_V4: u32 = 0x7f;
/// Every flag defined by protocol v5.
const KNOWN_V5: u32 = KNOWN_V4 | WITH_KEYSPACE | WITH_NOW_IN_SECONDS;

/// The message of the error for a per-request keyspace on v4.
pub(crate) const KEYSPACE_NEEDS_V5: &str =
    "per-request keyspace needs protocol v5 (this connection speaks v4)";
/// The message of the error for `now_in_seconds` on v4.
pub(crate) const NOW_IN_SECONDS_NEEDS_V5: &str =
    "now_in_seconds needs protocol v5 (this connection speaks v4)";

/// Writes the flags of QUERY/EXECUTE/BATCH: a `[byte]` in v4 (the caller
/// checked that no bit above 0x7f is set), an `[int]` in v5.
pub(crate) fn put_flags(buf: &mut impl BufMut, flags: u32, version: ProtocolVersion) {
    match version {
        // Callers reject v5-only parts on v4 first, so the flags fit a byte.
        ProtocolVersion::V4 => buf.put_u8(flags as u8),
        ProtocolVersion::V5 => buf.put_u32(flags),
    }
}

/// The `[consistency]`, the flags that follow it in QUERY and EXECUTE and,
/// when there are values, their `[short]` count, in one append (see
/// [`put_flags`]): each append to a `BytesMut` is a call and a `memcpy`
/// call, about 35 instructions however short the slice.
fn put_consistency_flags_and_count(
    buf: &mut impl BufMut,
    consistency: Consistency,
    flags: u32,
    version: ProtocolVersion,
    value_count: Option<u16>,
) {
    let mut head = [0u8; 8];
    head[..2].copy_from_slice(&consistency.code().to_be_bytes());
    let mut len = match version {
        // Callers reject v5-only parts on v4 first, so the flags fit a byte.
        ProtocolVersion::V4 => {
            head[2] = flags as u8;
            3
        }
        ProtocolVersion::V5 => {
            head[2..6].copy_from_slice(&flags.to_be_bytes());
            6
        }
    };
    if let Some(n) = value_count {
        head[len..len + 2].copy_from_slice(&n.to_be_bytes());
        len += 2;
    }
    buf.put_slice(&head[..len]);
}

/// Reads the flags of QUERY/EXECUTE/BATCH and rejects bits outside `known`
/// for the version (`known_v4` or `known_v5`).
pub(crate) fn read_flags(
    r: &mut WireReader<'_>,
    version: ProtocolVersion,
    what: &'static str,
    known_v4: u32,
    known_v5: u32,
) -> Result<u32, DecodeError> {
    let (flags, known) = match version {
        ProtocolVersion::V4 => (u32::from(r.read_u8(what)?), known_v4),
        // The flags are a bit set: reinterpreting the sign bit keeps the bits.
        ProtocolVersion::V5 => (r.read_int(what)? as u32, known_v5),
    };
    if flags & !known != 0 {
        return Err(DecodeError::InvalidValue {
            what,
            value: i64::from(flags),
        });
    }
    Ok(flags)
}

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
    /// The keyspace to run in, overriding the connection's (v5 only).
    pub keyspace: Option<Cow<'a, str>>,
    /// The time ("now") the query runs at, in seconds since the epoch: it
    /// decides TTL liveness and deletion times (v5 only; meant for tests).
    pub now_in_seconds: Option<i32>,
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
            keyspace: None,
            now_in_seconds: None,
        }
    }
}

impl<'a> QueryParameters<'a> {
    /// The flags these parameters are written with (a `[byte]` in v4, an
    /// `[int]` in v5).
    pub fn flags(&self) -> u32 {
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
        f | self.tail().flags()
    }

    /// The optional parts shared with BATCH, borrowed.
    fn tail(&self) -> Tail<'_> {
        Tail {
            serial_consistency: self.serial_consistency,
            default_timestamp: self.default_timestamp,
            keyspace: self.keyspace.as_deref().map(Cow::Borrowed),
            now_in_seconds: self.now_in_seconds,
        }
    }

    /// Appends the encoded parameters for a connection speaking `version`.
    /// A keyspace or `now_in_seconds` on v4 is an [`EncodeError::Invalid`].
    pub fn encode(
        &self,
        buf: &mut impl BufMut,
        version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        check_v5_parts(
            self.keyspace.is_some(),
            self.now_in_seconds.is_some(),
            version,
        )?;
        let flags = self.flags();
        let has_values = flags & VALUES != 0;
        let count = has_values.then(|| self.values.count());
        put_consistency_flags_and_count(buf, self.consistency, flags, version, count);
        if has_values {
            buf.put_slice(self.values.as_bytes());
        }
        if let Some(n) = self.page_size {
            wire::put_int(buf, n);
        }
        if let Some(state) = &self.paging_state {
            wire::put_bytes(buf, Some(state), "paging state")?;
        }
        self.tail().encode(buf)?;
        Ok(())
    }

    /// Reads parameters written for `version`, borrowing the paging state and
    /// keyspace from the input.
    ///
    /// A paging state written as a null `[bytes]` is read as no paging state.
    pub fn decode(r: &mut WireReader<'a>, version: ProtocolVersion) -> Result<Self, DecodeError> {
        let consistency = r.read_consistency("consistency")?;
        let flags = read_flags(r, version, "query flags", KNOWN_V4, KNOWN_V5)?;
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
        let tail = Tail::decode(r, flags)?;
        Ok(Self {
            consistency,
            values: Cow::Owned(values),
            skip_metadata: flags & SKIP_METADATA != 0,
            page_size,
            paging_state,
            serial_consistency: tail.serial_consistency,
            default_timestamp: tail.default_timestamp,
            keyspace: tail.keyspace,
            now_in_seconds: tail.now_in_seconds,
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
            keyspace: self.keyspace.map(|k| Cow::Owned(k.into_owned())),
            now_in_seconds: self.now_in_seconds,
        }
    }
}

/// Rejects the parts v4 cannot carry (a keyspace, `now_in_seconds`).
pub(crate) fn check_v5_parts(
    keyspace: bool,
    now_in_seconds: bool,
    version: ProtocolVersion,
) -> Result<(), EncodeError> {
    if version == ProtocolVersion::V4 {
        if keyspace {
            return Err(EncodeError::Invalid(KEYSPACE_NEEDS_V5));
        }
        if now_in_seconds {
            return Err(EncodeError::Invalid(NOW_IN_SECONDS_NEEDS_V5));
        }
    }
    Ok(())
}

/// The optional parts that end both the QUERY/EXECUTE parameters and a
/// BATCH, with the same flag bits and in this wire order: serial
/// consistency, default timestamp, keyspace (v5), `now_in_seconds` (v5).
pub(crate) struct Tail<'a> {
    pub(crate) serial_consistency: Option<Consistency>,
    pub(crate) default_timestamp: Option<i64>,
    pub(crate) keyspace: Option<Cow<'a, str>>,
    pub(crate) now_in_seconds: Option<i32>,
}

impl<'a> Tail<'a> {
    /// The flag bits of the parts present.
    pub(crate) fn flags(&self) -> u32 {
        let mut f = 0;
        if self.serial_consistency.is_some() {
            f |= SERIAL_CONSISTENCY;
        }
        if self.default_timestamp.is_some() {
            f |= DEFAULT_TIMESTAMP;
        }
        if self.keyspace.is_some() {
            f |= WITH_KEYSPACE;
        }
        if self.now_in_seconds.is_some() {
            f |= WITH_NOW_IN_SECONDS;
        }
        f
    }

    /// Appends the parts present (the caller checked the version).
    pub(crate) fn encode(&self, buf: &mut impl BufMut) -> Result<(), EncodeError> {
        if let Some(c) = self.serial_consistency {
            wire::put_consistency(buf, c);
        }
        if let Some(ts) = self.default_timestamp {
            wire::put_long(buf, ts);
        }
        if let Some(ks) = &self.keyspace {
            wire::put_string(buf, ks, "keyspace")?;
        }
        if let Some(now) = self.now_in_seconds {
            wire::put_int(buf, now);
        }
        Ok(())
    }

    /// Reads the parts `flags` announce, borrowing the keyspace.
    pub(crate) fn decode(r: &mut WireReader<'a>, flags: u32) -> Result<Self, DecodeError> {
        Ok(Self {
            serial_consistency: if flags & SERIAL_CONSISTENCY != 0 {
                Some(r.read_consistency("serial consistency")?)
            } else {
                None
            },
            default_timestamp: if flags & DEFAULT_TIMESTAMP != 0 {
                Some(r.read_long("default timestamp")?)
            } else {
                None
            },
            keyspace: if flags & WITH_KEYSPACE != 0 {
                Some(Cow::Borrowed(r.read_string("keyspace")?))
            } else {
                None
            },
            now_in_seconds: if flags & WITH_NOW_IN_SECONDS != 0 {
                Some(r.read_int("now_in_seconds")?)
            } else {
                None
            },
        })
    }
}
