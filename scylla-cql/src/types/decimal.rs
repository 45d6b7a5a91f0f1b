//! `decimal`: an arbitrary-precision decimal number `unscaled * 10^-scale`,
//! encoded as an `[int]` scale followed by the unscaled value's varint bytes.

use super::varint::CqlVarint;

/// A CQL `decimal`: `unscaled * 10^(-scale)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CqlDecimal {
    /// The unscaled integer.
    pub unscaled: CqlVarint,
    /// The power-of-ten scale (digits after the decimal point).
    pub scale: i32,
}

impl CqlDecimal {
    /// `unscaled * 10^(-scale)` from a 64-bit unscaled value.
    pub fn from_i64(unscaled: i64, scale: i32) -> Self {
        CqlDecimal {
            unscaled: CqlVarint::from(unscaled),
            scale,
        }
    }

    /// `unscaled * 10^(-scale)`, the unscaled value as big-endian two's
    /// complement bytes (any padding; empty means 0).
    pub fn from_signed_be_bytes_and_exponent(unscaled: Vec<u8>, scale: i32) -> Self {
        CqlDecimal {
            unscaled: CqlVarint::from_signed_bytes_be(unscaled),
            scale,
        }
    }

    /// As [`from_signed_be_bytes_and_exponent`](Self::from_signed_be_bytes_and_exponent),
    /// from a slice.
    pub fn from_signed_be_bytes_slice_and_exponent(unscaled: &[u8], scale: i32) -> Self {
        CqlDecimal {
            unscaled: CqlVarint::from_signed_bytes_be_slice(unscaled),
            scale,
        }
    }

    /// The unscaled value's bytes (big-endian two's complement) and the scale.
    pub fn as_signed_be_bytes_slice_and_exponent(&self) -> (&[u8], i32) {
        (self.unscaled.as_signed_bytes_be_slice(), self.scale)
    }

    /// The unscaled value's bytes and the scale, consuming the value.
    pub fn into_signed_be_bytes_and_exponent(self) -> (Vec<u8>, i32) {
        (self.unscaled.into_signed_bytes_be(), self.scale)
    }

    /// Appends the encoding (scale, then the varint bytes; no length).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.scale.to_be_bytes());
        out.extend_from_slice(self.unscaled.as_signed_bytes_be_slice());
    }

    /// Decodes a whole value; `None` if shorter than the scale plus one byte.
    pub fn decode(buf: &[u8]) -> Option<Self> {
        let (scale, unscaled) = buf.split_first_chunk::<4>()?;
        if unscaled.is_empty() {
            return None;
        }
        Some(CqlDecimal {
            unscaled: CqlVarint::from_signed_bytes_be_slice(unscaled),
            scale: i32::from_be_bytes(*scale),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answers() {
        // 1.28 = 128 * 10^-2: scale 2, unscaled 0x0080.
        let d = CqlDecimal::from_i64(128, 2);
        let mut out = Vec::new();
        d.encode(&mut out);
        assert_eq!(out, [0, 0, 0, 2, 0x00, 0x80]);
        assert_eq!(CqlDecimal::decode(&out), Some(d));
        // -1E+3: scale -3, unscaled -1.
        let d = CqlDecimal::from_i64(-1, -3);
        out.clear();
        d.encode(&mut out);
        assert_eq!(out, [0xFF, 0xFF, 0xFF, 0xFD, 0xFF]);
        assert_eq!(CqlDecimal::decode(&out), Some(d));
        assert_eq!(CqlDecimal::decode(&[0, 0, 0, 1]), None);
        assert_eq!(CqlDecimal::decode(&[0, 0]), None);
    }
}
