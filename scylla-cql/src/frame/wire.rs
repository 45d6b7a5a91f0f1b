//! The notation types of the native protocol (section 3 of the v4 spec):
//! `[byte] [short] [int] [long] [string] [long string] [uuid] [string list]
//! [bytes] [value] [short bytes] [inet] [consistency] [string map]
//! [string multimap] [bytes map]`.
//!
//! [`WireReader`] is a cursor over a borrowed slice; every read is bounds-checked
//! and returns a [`DecodeError`] naming the item and its offset, so decoders built
//! on it cannot panic on hostile input. The `put_*` functions append to any
//! [`BufMut`] (in practice the connection writer's reusable `BytesMut`) and check
//! that each item fits its length prefix.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::BufMut;
use uuid::Uuid;

use crate::consistency::Consistency;
use crate::error::{DecodeError, EncodeError};

/// A `[value]`: bytes, null (length -1) or not set (length -2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawValue<'a> {
    /// A present value.
    Value(&'a [u8]),
    /// `null` (length -1).
    Null,
    /// "not set" (length -2): leaves the column unchanged.
    Unset,
}

/// A bounds-checked reading cursor over a borrowed byte slice.
#[derive(Debug, Clone)]
pub struct WireReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> WireReader<'a> {
    /// A cursor at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes consumed so far (the offset of the next read).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Whether every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The bytes not yet consumed.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// The bytes consumed since offset `start` (a position obtained earlier
    /// from [`position`](Self::position)); empty if `start` is not behind the cursor.
    pub fn consumed_since(&self, start: usize) -> &'a [u8] {
        self.buf.get(start..self.pos).unwrap_or(&[])
    }

    /// Fails with [`DecodeError::TrailingBytes`] unless everything was consumed.
    pub fn expect_end(&self, what: &'static str) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            remaining => Err(DecodeError::TrailingBytes { what, remaining }),
        }
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::UnexpectedEof {
                what,
                offset: self.pos,
                needed: n,
                available: self.remaining(),
            });
        }
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// `[byte]`
    pub fn read_u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// `[short]` (unsigned 16 bits).
    pub fn read_short(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    /// `[int]` (signed 32 bits).
    pub fn read_int(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    /// `[long]` (signed 64 bits).
    pub fn read_long(&mut self, what: &'static str) -> Result<i64, DecodeError> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// An `[int]` that must be a non-negative count or length.
    pub fn read_len(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let n = self.read_int(what)?;
        usize::try_from(n).map_err(|_| DecodeError::InvalidLength {
            what,
            length: n as i64,
            offset,
        })
    }

    /// An `[int]` count of items each at least `min_item_len` bytes long; rejects
    /// counts that the remaining input cannot possibly hold, so that a caller can
    /// pre-allocate `count` items without trusting the peer.
    pub fn read_count(
        &mut self,
        what: &'static str,
        min_item_len: usize,
    ) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let n = self.read_len(what)?;
        self.check_count(n, min_item_len, what, offset)
    }

    /// A `[short]` count, checked like [`read_count`](Self::read_count).
    pub fn read_short_count(
        &mut self,
        what: &'static str,
        min_item_len: usize,
    ) -> Result<usize, DecodeError> {
        let offset = self.pos;
        let n = self.read_short(what)? as usize;
        self.check_count(n, min_item_len, what, offset)
    }

    fn check_count(
        &self,
        n: usize,
        min_item_len: usize,
        what: &'static str,
        offset: usize,
    ) -> Result<usize, DecodeError> {
        if n.saturating_mul(min_item_len) > self.remaining() {
            return Err(DecodeError::InvalidLength {
                what,
                length: n as i64,
                offset,
            });
        }
        Ok(n)
    }

    /// `[string]`: a `[short]` length and UTF-8 bytes.
    pub fn read_string(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let n = self.read_short(what)? as usize;
        self.utf8(n, what)
    }

    /// `[long string]`: an `[int]` length and UTF-8 bytes.
    pub fn read_long_string(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let n = self.read_len(what)?;
        self.utf8(n, what)
    }

    fn utf8(&mut self, n: usize, what: &'static str) -> Result<&'a str, DecodeError> {
        let offset = self.pos;
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|_| DecodeError::InvalidText { what, offset })
    }

    /// `[uuid]`: 16 bytes.
    pub fn read_uuid(&mut self, what: &'static str) -> Result<Uuid, DecodeError> {
        Ok(Uuid::from_bytes(self.array(what)?))
    }

    /// `[string list]`.
    pub fn read_string_list(&mut self, what: &'static str) -> Result<Vec<String>, DecodeError> {
        let n = self.read_short_count(what, 2)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.read_string(what)?.to_owned());
        }
        Ok(out)
    }

    /// `[bytes]`: an `[int]` length (negative means null) and bytes.
    pub fn read_bytes(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        let n = self.read_int(what)?;
        if n < 0 {
            return Ok(None);
        }
        self.take(n as usize, what).map(Some)
    }

    /// `[value]`: like `[bytes]`, but -2 means "not set" and other negatives are invalid.
    pub fn read_value(&mut self, what: &'static str) -> Result<RawValue<'a>, DecodeError> {
        let offset = self.pos;
        let n = self.read_int(what)?;
        match n {
            -1 => Ok(RawValue::Null),
            -2 => Ok(RawValue::Unset),
            n if n < 0 => Err(DecodeError::InvalidLength {
                what,
                length: n as i64,
                offset,
            }),
            n => self.take(n as usize, what).map(RawValue::Value),
        }
    }

    /// `[short bytes]`: a `[short]` length and bytes.
    pub fn read_short_bytes(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let n = self.read_short(what)? as usize;
        self.take(n, what)
    }

    /// `[inet]`: one address-size byte, 4 or 16 address bytes, an `[int]` port.
    pub fn read_inet(&mut self, what: &'static str) -> Result<SocketAddr, DecodeError> {
        let ip = self.read_inetaddr(what)?;
        let offset = self.pos;
        let port = self.read_int(what)?;
        let port = u16::try_from(port).map_err(|_| DecodeError::InvalidLength {
            what,
            length: port as i64,
            offset,
        })?;
        Ok(SocketAddr::new(ip, port))
    }

    /// `[inetaddr]`: one address-size byte and 4 or 16 address bytes.
    pub fn read_inetaddr(&mut self, what: &'static str) -> Result<IpAddr, DecodeError> {
        let offset = self.pos;
        match self.read_u8(what)? {
            4 => Ok(IpAddr::V4(Ipv4Addr::from(self.array::<4>(what)?))),
            16 => Ok(IpAddr::V6(Ipv6Addr::from(self.array::<16>(what)?))),
            n => Err(DecodeError::InvalidLength {
                what,
                length: n as i64,
                offset,
            }),
        }
    }

    /// `[consistency]`.
    pub fn read_consistency(&mut self, what: &'static str) -> Result<Consistency, DecodeError> {
        Consistency::from_code(self.read_short(what)?)
    }

    /// `[string map]`.
    pub fn read_string_map(
        &mut self,
        what: &'static str,
    ) -> Result<HashMap<String, String>, DecodeError> {
        let n = self.read_short_count(what, 4)?;
        let mut out = HashMap::with_capacity(n);
        for _ in 0..n {
            let k = self.read_string(what)?;
            let v = self.read_string(what)?;
            out.insert(k.to_owned(), v.to_owned());
        }
        Ok(out)
    }

    /// `[string multimap]`.
    pub fn read_string_multimap(
        &mut self,
        what: &'static str,
    ) -> Result<HashMap<String, Vec<String>>, DecodeError> {
        let n = self.read_short_count(what, 4)?;
        let mut out = HashMap::with_capacity(n);
        for _ in 0..n {
            let k = self.read_string(what)?;
            let v = self.read_string_list(what)?;
            out.insert(k.to_owned(), v);
        }
        Ok(out)
    }

    /// `[bytes map]`: `[short]` n, then n pairs of `[string]` and `[bytes]`.
    pub fn read_bytes_map(
        &mut self,
        what: &'static str,
    ) -> Result<HashMap<String, Option<Vec<u8>>>, DecodeError> {
        let n = self.read_short_count(what, 6)?;
        let mut out = HashMap::with_capacity(n);
        for _ in 0..n {
            let k = self.read_string(what)?;
            let v = self.read_bytes(what)?;
            out.insert(k.to_owned(), v.map(<[u8]>::to_vec));
        }
        Ok(out)
    }
}

fn too_long(what: &'static str, length: usize, max: usize) -> EncodeError {
    EncodeError::TooLong { what, length, max }
}

/// `[byte]`
pub fn put_u8(buf: &mut impl BufMut, v: u8) {
    buf.put_u8(v);
}

/// `[short]`
pub fn put_short(buf: &mut impl BufMut, v: u16) {
    buf.put_u16(v);
}

/// `[int]`
pub fn put_int(buf: &mut impl BufMut, v: i32) {
    buf.put_i32(v);
}

/// `[long]`
pub fn put_long(buf: &mut impl BufMut, v: i64) {
    buf.put_i64(v);
}

/// A `[short]` length prefix, checked.
pub fn put_short_len(
    buf: &mut impl BufMut,
    len: usize,
    what: &'static str,
) -> Result<(), EncodeError> {
    let n = u16::try_from(len).map_err(|_| too_long(what, len, u16::MAX as usize))?;
    buf.put_u16(n);
    Ok(())
}

/// An `[int]` length prefix, checked.
pub fn put_int_len(
    buf: &mut impl BufMut,
    len: usize,
    what: &'static str,
) -> Result<(), EncodeError> {
    let n = i32::try_from(len).map_err(|_| too_long(what, len, i32::MAX as usize))?;
    buf.put_i32(n);
    Ok(())
}

/// `[string]`
pub fn put_string(buf: &mut impl BufMut, s: &str, what: &'static str) -> Result<(), EncodeError> {
    put_short_len(buf, s.len(), what)?;
    buf.put_slice(s.as_bytes());
    Ok(())
}

/// `[long string]`
pub fn put_long_string(
    buf: &mut impl BufMut,
    s: &str,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_int_len(buf, s.len(), what)?;
    buf.put_slice(s.as_bytes());
    Ok(())
}

/// `[uuid]`
pub fn put_uuid(buf: &mut impl BufMut, u: &Uuid) {
    buf.put_slice(u.as_bytes());
}

/// `[string list]`
pub fn put_string_list<S: AsRef<str>>(
    buf: &mut impl BufMut,
    list: &[S],
    what: &'static str,
) -> Result<(), EncodeError> {
    put_short_len(buf, list.len(), what)?;
    for s in list {
        put_string(buf, s.as_ref(), what)?;
    }
    Ok(())
}

/// `[bytes]`; `None` is written as null (length -1).
pub fn put_bytes(
    buf: &mut impl BufMut,
    b: Option<&[u8]>,
    what: &'static str,
) -> Result<(), EncodeError> {
    match b {
        None => buf.put_i32(-1),
        Some(b) => {
            put_int_len(buf, b.len(), what)?;
            buf.put_slice(b);
        }
    }
    Ok(())
}

/// `[value]`
pub fn put_value(
    buf: &mut impl BufMut,
    v: RawValue<'_>,
    what: &'static str,
) -> Result<(), EncodeError> {
    match v {
        RawValue::Null => buf.put_i32(-1),
        RawValue::Unset => buf.put_i32(-2),
        RawValue::Value(b) => {
            put_int_len(buf, b.len(), what)?;
            buf.put_slice(b);
        }
    }
    Ok(())
}

/// `[short bytes]`
pub fn put_short_bytes(
    buf: &mut impl BufMut,
    b: &[u8],
    what: &'static str,
) -> Result<(), EncodeError> {
    put_short_len(buf, b.len(), what)?;
    buf.put_slice(b);
    Ok(())
}

/// `[inetaddr]`
pub fn put_inetaddr(buf: &mut impl BufMut, ip: &IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            buf.put_u8(4);
            buf.put_slice(&v4.octets());
        }
        IpAddr::V6(v6) => {
            buf.put_u8(16);
            buf.put_slice(&v6.octets());
        }
    }
}

/// `[inet]`
pub fn put_inet(buf: &mut impl BufMut, addr: &SocketAddr) {
    put_inetaddr(buf, &addr.ip());
    buf.put_i32(addr.port() as i32);
}

/// `[consistency]`
pub fn put_consistency(buf: &mut impl BufMut, c: Consistency) {
    buf.put_u16(c.code());
}

/// `[string map]`. Entries are written in the map's iteration order.
pub fn put_string_map<'s>(
    buf: &mut impl BufMut,
    entries: impl ExactSizeIterator<Item = (&'s str, &'s str)>,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_short_len(buf, entries.len(), what)?;
    for (k, v) in entries {
        put_string(buf, k, what)?;
        put_string(buf, v, what)?;
    }
    Ok(())
}

/// `[string multimap]`.
pub fn put_string_multimap<'s>(
    buf: &mut impl BufMut,
    entries: impl ExactSizeIterator<Item = (&'s str, &'s [String])>,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_short_len(buf, entries.len(), what)?;
    for (k, v) in entries {
        put_string(buf, k, what)?;
        put_string_list(buf, v, what)?;
    }
    Ok(())
}

/// `[bytes map]`.
pub fn put_bytes_map<'s>(
    buf: &mut impl BufMut,
    entries: impl ExactSizeIterator<Item = (&'s str, Option<&'s [u8]>)>,
    what: &'static str,
) -> Result<(), EncodeError> {
    put_short_len(buf, entries.len(), what)?;
    for (k, v) in entries {
        put_string(buf, k, what)?;
        put_bytes(buf, v, what)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    #[test]
    fn primitives_round_trip() {
        let mut b = BytesMut::new();
        put_u8(&mut b, 7);
        put_short(&mut b, 0xBEEF);
        put_int(&mut b, -5);
        put_long(&mut b, i64::MIN);
        put_string(&mut b, "héllo", "s").unwrap();
        put_long_string(&mut b, "long", "ls").unwrap();
        put_bytes(&mut b, None, "b").unwrap();
        put_bytes(&mut b, Some(b"xy"), "b").unwrap();
        put_value(&mut b, RawValue::Unset, "v").unwrap();
        put_inet(&mut b, &"[::1]:9042".parse().unwrap());
        put_consistency(&mut b, Consistency::LocalOne);
        let mut r = WireReader::new(&b);
        assert_eq!(r.read_u8("").unwrap(), 7);
        assert_eq!(r.read_short("").unwrap(), 0xBEEF);
        assert_eq!(r.read_int("").unwrap(), -5);
        assert_eq!(r.read_long("").unwrap(), i64::MIN);
        assert_eq!(r.read_string("").unwrap(), "héllo");
        assert_eq!(r.read_long_string("").unwrap(), "long");
        assert_eq!(r.read_bytes("").unwrap(), None);
        assert_eq!(r.read_bytes("").unwrap(), Some(&b"xy"[..]));
        assert_eq!(r.read_value("").unwrap(), RawValue::Unset);
        assert_eq!(r.read_inet("").unwrap(), "[::1]:9042".parse().unwrap());
        assert_eq!(r.read_consistency("").unwrap(), Consistency::LocalOne);
        r.expect_end("test").unwrap();
    }

    #[test]
    fn truncation_and_bad_lengths_are_errors() {
        assert!(matches!(
            WireReader::new(&[0, 5, b'a']).read_string("s"),
            Err(DecodeError::UnexpectedEof { .. })
        ));
        assert!(matches!(
            WireReader::new(&(-3i32).to_be_bytes()).read_value("v"),
            Err(DecodeError::InvalidLength { length: -3, .. })
        ));
        // A count that the input cannot hold is rejected before any allocation.
        assert!(matches!(
            WireReader::new(&[0xff, 0xff]).read_string_list("l"),
            Err(DecodeError::InvalidLength { .. })
        ));
        assert!(matches!(
            WireReader::new(&[0, 3, b'a']).read_string("s"),
            Err(DecodeError::UnexpectedEof { .. })
        ));
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        assert!(matches!(
            WireReader::new(&[0, 2, 0xc3, 0x28]).read_string("s"),
            Err(DecodeError::InvalidText { .. })
        ));
    }
}
