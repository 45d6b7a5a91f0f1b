//! The PROXY protocol version 2 header: what a load balancer puts in front of
//! the bytes it forwards, so that the server learns the client's address.
//!
//! Format (HAProxy's specification, section 2.2,
//! <https://www.haproxy.org/download/2.9/doc/proxy-protocol.txt>):
//!
//! | bytes | content |
//! |-------|---------|
//! | 0..12 | the signature `\r\n\r\n\0\r\nQUIT\n` |
//! | 12    | version (high nibble, `2`) and command (low nibble: `0` LOCAL, `1` PROXY) |
//! | 13    | address family (high nibble: `1` IPv4, `2` IPv6) and transport (low nibble: `1` stream) |
//! | 14..16| length of what follows, big endian |
//! | 16..  | source address, destination address, source port, destination port (IPv4: 12 bytes, IPv6: 36), then optional TLVs |
//!
//! ScyllaDB reads this header on its `*_proxy_protocol` listeners and, on the
//! shard-aware ones (`native_shard_aware_transport_port_proxy_protocol`),
//! picks the shard from the header's *source port* instead of the TCP peer's
//! (`db/config.cc` and `transport/controller.cc` in
//! <https://github.com/scylladb/scylladb>). The test cluster does the same.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The 12-byte signature every v2 header starts with.
pub const SIGNATURE: [u8; 12] = [
    0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,
];

/// Bytes of the fixed part (signature, version/command, family, length).
pub const FIXED_LEN: usize = 16;

/// The longest header accepted: the fixed part and an address block with
/// TLVs of at most this many bytes (a balancer's TLVs are small; a huge
/// length is a malformed or hostile header).
pub const MAX_BODY_LEN: usize = 1024;

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProxyHeader {
    /// `PROXY` over TCP: the client's address as the balancer saw it
    /// (`source`) and the balancer address it connected to (`destination`).
    Proxy {
        /// The client's address and port.
        source: SocketAddr,
        /// The address and port the client connected to.
        destination: SocketAddr,
    },
    /// `LOCAL` (the balancer's own connection, e.g. a health check), or
    /// `PROXY` with an unspecified or non-TCP family: the TCP peer is the
    /// client.
    Local,
}

/// Why a header was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The first 12 bytes are not the v2 signature: the sender does not
    /// speak PROXY v2 (a client connecting straight to a proxy-protocol
    /// port instead of through the balancer?).
    #[error("not a PROXY protocol v2 header (bad signature); is the client connecting to the proxy-protocol port directly, bypassing the load balancer?")]
    BadSignature,
    /// The version nibble is not 2.
    #[error("PROXY protocol version {0} is not supported (only 2)")]
    BadVersion(u8),
    /// The command nibble is neither LOCAL nor PROXY.
    #[error("unknown PROXY v2 command {0:#x}")]
    BadCommand(u8),
    /// The length field is too small for the address family's block, or
    /// larger than [`MAX_BODY_LEN`].
    #[error("PROXY v2 length {len} does not fit family {family:#x} (or is above {MAX_BODY_LEN})")]
    BadLength {
        /// The family/transport byte.
        family: u8,
        /// The length field.
        len: usize,
    },
    /// The stream ended inside the header.
    #[error("the connection ended inside the PROXY v2 header ({got} of {want} bytes)")]
    Truncated {
        /// Bytes read.
        got: usize,
        /// Bytes the header needed.
        want: usize,
    },
    /// Reading failed.
    #[error("reading the PROXY v2 header failed: {0}")]
    Io(String),
}

/// Encodes a `PROXY` header for a TCP connection from `source` to
/// `destination`. Both must be of the same family; with mixed families the
/// IPv4 one is written as an IPv4-mapped IPv6 address (the header then
/// says IPv6).
pub fn encode(source: SocketAddr, destination: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(FIXED_LEN + 36);
    out.extend_from_slice(&SIGNATURE);
    out.push(0x21); // version 2, PROXY
    match (source.ip(), destination.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            out.push(0x11); // TCP over IPv4
            out.extend_from_slice(&12u16.to_be_bytes());
            out.extend_from_slice(&s.octets());
            out.extend_from_slice(&d.octets());
        }
        (s, d) => {
            out.push(0x21); // TCP over IPv6
            out.extend_from_slice(&36u16.to_be_bytes());
            out.extend_from_slice(&v6(s).octets());
            out.extend_from_slice(&v6(d).octets());
        }
    }
    out.extend_from_slice(&source.port().to_be_bytes());
    out.extend_from_slice(&destination.port().to_be_bytes());
    out
}

fn v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// Checks the fixed part; returns the body's length.
fn parse_fixed(fixed: &[u8; FIXED_LEN]) -> Result<usize, ProxyError> {
    if fixed[..12] != SIGNATURE {
        return Err(ProxyError::BadSignature);
    }
    let version = fixed[12] >> 4;
    if version != 2 {
        return Err(ProxyError::BadVersion(version));
    }
    let command = fixed[12] & 0x0F;
    if command > 1 {
        return Err(ProxyError::BadCommand(command));
    }
    let len = usize::from(u16::from_be_bytes([fixed[14], fixed[15]]));
    let family = fixed[13];
    let need = match family {
        0x11 | 0x12 => 12,
        0x21 | 0x22 => 36,
        _ => 0,
    };
    if len < need || len > MAX_BODY_LEN {
        return Err(ProxyError::BadLength { family, len });
    }
    Ok(len)
}

/// Reads the addresses out of a checked fixed part and its body.
fn parse_body(fixed: &[u8; FIXED_LEN], body: &[u8]) -> ProxyHeader {
    if fixed[12] & 0x0F == 0 {
        return ProxyHeader::Local;
    }
    let port = |i: usize| u16::from_be_bytes([body[i], body[i + 1]]);
    match fixed[13] {
        0x11 => {
            let ip = |i: usize| Ipv4Addr::new(body[i], body[i + 1], body[i + 2], body[i + 3]);
            ProxyHeader::Proxy {
                source: SocketAddr::new(IpAddr::V4(ip(0)), port(8)),
                destination: SocketAddr::new(IpAddr::V4(ip(4)), port(10)),
            }
        }
        0x21 => {
            let ip = |i: usize| {
                let mut o = [0u8; 16];
                o.copy_from_slice(&body[i..i + 16]);
                Ipv6Addr::from(o)
            };
            let canonical = |a: Ipv6Addr| match a.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(a),
            };
            ProxyHeader::Proxy {
                source: SocketAddr::new(canonical(ip(0)), port(32)),
                destination: SocketAddr::new(canonical(ip(16)), port(34)),
            }
        }
        // UDP, Unix or unspecified: nothing usable for a TCP client.
        _ => ProxyHeader::Local,
    }
}

/// Parses a whole header at the start of `bytes`; returns it and its length
/// (the forwarded stream starts right after).
pub fn parse(bytes: &[u8]) -> Result<(ProxyHeader, usize), ProxyError> {
    let Some(fixed) = bytes.get(..FIXED_LEN) else {
        // A prefix that is not the signature is rejected as such.
        let n = bytes.len().min(12);
        if bytes[..n] != SIGNATURE[..n] {
            return Err(ProxyError::BadSignature);
        }
        return Err(ProxyError::Truncated {
            got: bytes.len(),
            want: FIXED_LEN,
        });
    };
    let mut f = [0u8; FIXED_LEN];
    f.copy_from_slice(fixed);
    let len = parse_fixed(&f)?;
    let Some(body) = bytes.get(FIXED_LEN..FIXED_LEN + len) else {
        return Err(ProxyError::Truncated {
            got: bytes.len(),
            want: FIXED_LEN + len,
        });
    };
    Ok((parse_body(&f, body), FIXED_LEN + len))
}

/// Reads exactly one header from `stream` (nothing beyond it).
pub async fn read<R: AsyncRead + Unpin>(stream: &mut R) -> Result<ProxyHeader, ProxyError> {
    let mut fixed = [0u8; FIXED_LEN];
    read_exact(stream, &mut fixed).await?;
    let len = parse_fixed(&fixed)?;
    let mut body = vec![0u8; len];
    read_exact(stream, &mut body).await.map_err(|e| match e {
        ProxyError::Truncated { got, .. } => ProxyError::Truncated {
            got: FIXED_LEN + got,
            want: FIXED_LEN + len,
        },
        e => e,
    })?;
    Ok(parse_body(&fixed, &body))
}

async fn read_exact<R: AsyncRead + Unpin>(
    stream: &mut R,
    buf: &mut [u8],
) -> Result<(), ProxyError> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]).await {
            Ok(0) => {
                return Err(ProxyError::Truncated {
                    got,
                    want: buf.len(),
                })
            }
            Ok(n) => got += n,
            Err(e) => return Err(ProxyError::Io(e.to_string())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn addr() -> impl Strategy<Value = SocketAddr> {
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>())
                .prop_map(|(o, p)| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(o)), p)),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(o, p)| SocketAddr::new(IpAddr::V6(Ipv6Addr::from(o)), p)),
        ]
    }

    fn canonical(a: SocketAddr) -> SocketAddr {
        match a.ip() {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => SocketAddr::new(IpAddr::V4(v4), a.port()),
                None => a,
            },
            IpAddr::V4(_) => a,
        }
    }

    proptest! {
        #[test]
        fn any_address_round_trips(src in addr(), dst in addr(), tail in proptest::collection::vec(any::<u8>(), 0..8)) {
            let mut bytes = encode(src, dst);
            let len = bytes.len();
            bytes.extend_from_slice(&tail);
            let (h, used) = parse(&bytes).unwrap();
            prop_assert_eq!(used, len);
            prop_assert_eq!(h, ProxyHeader::Proxy { source: canonical(src), destination: canonical(dst) });
            if src.is_ipv4() && dst.is_ipv4() {
                prop_assert_eq!(len, 28);
                prop_assert_eq!(bytes[13], 0x11);
            }
        }

        #[test]
        fn async_read_matches_parse(src in addr(), dst in addr()) {
            let bytes = encode(src, dst);
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let got = rt.block_on(async { read(&mut &bytes[..]).await }).unwrap();
            prop_assert_eq!(got, parse(&bytes).unwrap().0);
        }

        #[test]
        fn every_truncation_is_an_error(src in addr(), dst in addr(), cut in 0usize..52) {
            let bytes = encode(src, dst);
            let cut = cut.min(bytes.len() - 1);
            let truncated = matches!(parse(&bytes[..cut]), Err(ProxyError::Truncated { .. }));
            prop_assert!(truncated, "cut at {}", cut);
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let r = rt.block_on(async { read(&mut &bytes[..cut]).await });
            let truncated = matches!(r, Err(ProxyError::Truncated { .. }));
            prop_assert!(truncated, "read cut at {}", cut);
        }

        #[test]
        fn a_damaged_signature_is_rejected(src in addr(), dst in addr(), at in 0usize..12, flip in 1u8..=255) {
            let mut bytes = encode(src, dst);
            bytes[at] ^= flip;
            prop_assert_eq!(parse(&bytes), Err(ProxyError::BadSignature));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = parse(&bytes);
        }
    }

    #[test]
    fn malformed_fixed_parts_are_rejected() {
        let src: SocketAddr = "10.0.0.1:40000".parse().unwrap();
        let dst: SocketAddr = "10.0.0.2:9042".parse().unwrap();
        let good = encode(src, dst);
        let mut v1 = good.clone();
        v1[12] = 0x11;
        assert_eq!(parse(&v1), Err(ProxyError::BadVersion(1)));
        let mut cmd = good.clone();
        cmd[12] = 0x22;
        assert_eq!(parse(&cmd), Err(ProxyError::BadCommand(2)));
        let mut short = good.clone();
        short[15] = 4;
        assert_eq!(
            parse(&short),
            Err(ProxyError::BadLength {
                family: 0x11,
                len: 4
            })
        );
        let mut huge = good.clone();
        huge[14] = 0xFF;
        assert!(matches!(parse(&huge), Err(ProxyError::BadLength { .. })));
        assert_eq!(
            parse(b"OPTIONS\r\n\r\n\0\0\0\0\0\0\0\0"),
            Err(ProxyError::BadSignature)
        );
        // LOCAL: the TCP peer is the client.
        let mut local = good.clone();
        local[12] = 0x20;
        assert_eq!(parse(&local).unwrap().0, ProxyHeader::Local);
        // TLVs after the address block are skipped.
        let mut tlv = good.clone();
        tlv[15] = 12 + 3;
        tlv.extend_from_slice(&[0x04, 0x00, 0x00]);
        assert_eq!(
            parse(&tlv).unwrap(),
            (
                ProxyHeader::Proxy {
                    source: src,
                    destination: dst
                },
                31
            )
        );
    }
}
