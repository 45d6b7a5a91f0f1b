//! A Set_keyspace result (section 4.2.5.3), the answer to `USE`: a single
//! `[string]`, the keyspace now in use on the connection.

use bytes::BytesMut;

use crate::error::{DecodeError, EncodeError};
use crate::frame::wire::{self, WireReader};

/// Decodes a Set_keyspace result (after the kind).
pub(crate) fn decode(r: &mut WireReader<'_>) -> Result<String, DecodeError> {
    Ok(r.read_string("set keyspace")?.to_owned())
}

/// Appends a Set_keyspace result (after the kind).
pub(crate) fn encode(buf: &mut BytesMut, keyspace: &str) -> Result<(), EncodeError> {
    wire::put_string(buf, keyspace, "set keyspace")
}
