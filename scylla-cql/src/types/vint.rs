//! Variable-length integers of the v5 notation: `[unsigned vint]` and the
//! zig-zag `[vint]`. Used by `duration` values and by the length prefixes of
//! variable-size vector elements.
//!
//! An unsigned vint stores `n` extra bytes after the first; `n` is the number
//! of leading one bits of the first byte, whose remaining bits are the most
//! significant bits of the value. Nine bytes (first byte `0xFF`) hold a full
//! 64-bit value.

use crate::error::DecodeError;

/// Appends `v` as an `[unsigned vint]`, in the shortest form.
pub fn put_unsigned_vint(out: &mut Vec<u8>, v: u64) {
    let bits = 64 - v.leading_zeros() as usize;
    // Each extra byte adds 7 bits of payload (8 bits, minus 1 bit of the
    // first byte's length marker); 9 bytes carry all 64 bits.
    let extra = (bits.max(1) - 1) / 7;
    if extra >= 8 {
        out.push(0xFF);
        out.extend_from_slice(&v.to_be_bytes());
        return;
    }
    let be = v.to_be_bytes();
    let start = out.len();
    out.extend_from_slice(&be[8 - (extra + 1)..]);
    // `extra` < 8, so the marker is `extra` ones followed by a zero bit; the
    // value fits in the bits after it because bits <= 7 * (extra + 1).
    let marker = !(0xFFu8 >> extra);
    out[start] |= marker;
}

/// Appends `v` as a zig-zag `[vint]`.
pub fn put_vint(out: &mut Vec<u8>, v: i64) {
    put_unsigned_vint(out, ((v >> 63) ^ (v << 1)) as u64);
}

/// Reads an `[unsigned vint]` from the front of `buf`, returning the value and
/// the number of bytes consumed. Non-minimal encodings are accepted.
pub fn read_unsigned_vint(buf: &[u8], what: &'static str) -> Result<(u64, usize), DecodeError> {
    let eof = |needed| DecodeError::UnexpectedEof {
        what,
        offset: 0,
        needed,
        available: buf.len(),
    };
    let first = *buf.first().ok_or(eof(1))?;
    let extra = first.leading_ones() as usize;
    let rest = buf.get(1..1 + extra).ok_or(eof(1 + extra))?;
    // The payload bits of the first byte follow the marker's ones and zero;
    // there are none when extra >= 7 (the u64 shift by up to 9 cannot overflow).
    let mut v = u64::from(first) & (0xFFu64 >> (extra + 1));
    for &b in rest {
        v = (v << 8) | u64::from(b);
    }
    Ok((v, 1 + extra))
}

/// Reads a zig-zag `[vint]` from the front of `buf`, returning the value and
/// the number of bytes consumed.
pub fn read_vint(buf: &[u8], what: &'static str) -> Result<(i64, usize), DecodeError> {
    let (u, n) = read_unsigned_vint(buf, what)?;
    Ok((((u >> 1) as i64) ^ -((u & 1) as i64), n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_unsigned_vint(&mut out, v);
        out
    }

    #[test]
    fn known_answers() {
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(127), [0x7F]);
        assert_eq!(enc(128), [0x80, 0x80]);
        // The spec's example: 256 000 on three bytes, first byte 110xxxxx.
        assert_eq!(enc(256_000), [0b1100_0011, 0b1110_1000, 0x00]);
        assert_eq!(enc(u64::MAX), [0xFF; 9]);
        let mut z = Vec::new();
        for v in [0i64, -1, 1, -2, 2] {
            put_vint(&mut z, v);
        }
        assert_eq!(z, [0, 1, 2, 3, 4]);
    }

    #[test]
    fn truncated_input_is_an_error() {
        assert!(read_unsigned_vint(&[], "x").is_err());
        assert!(read_unsigned_vint(&[0xC0, 0x00], "x").is_err());
        assert!(read_unsigned_vint(&[0xFF; 8], "x").is_err());
    }

    proptest! {
        #[test]
        fn unsigned_round_trip(v in any::<u64>()) {
            let e = enc(v);
            prop_assert_eq!(read_unsigned_vint(&e, "x"), Ok((v, e.len())));
        }

        #[test]
        fn signed_round_trip(v in any::<i64>()) {
            let mut e = Vec::new();
            put_vint(&mut e, v);
            prop_assert_eq!(read_vint(&e, "x"), Ok((v, e.len())));
        }
    }
}
