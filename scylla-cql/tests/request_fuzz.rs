//! Fuzz-style tests of the request path of the server side: random bytes and
//! mutated valid frames (bit flips, insertions, deletions, truncations,
//! overwritten lengths) go through `frame_len`, `decode_envelope` and
//! `Request::decode` for every opcode. Errors are expected; panics, hangs and
//! unbounded allocations are not. A fixed-seed generator keeps runs repeatable.
use scylla_driver_cql::frame::ProtocolVersion;

use std::borrow::Cow;
use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use scylla_driver_cql::compression::{Compression, Compressor};
use scylla_driver_cql::frame::request::*;
use scylla_driver_cql::frame::wire::RawValue;
use scylla_driver_cql::frame::{
    decode_envelope, encode_frame, frame_len, Direction, Flags, FrameExtras, FrameHeader, Opcode,
    HEADER_LEN,
};
use scylla_driver_cql::types::SerializedValues;
use scylla_driver_cql::{Consistency, DecodeError};

/// Body limit for the fuzzed decoders: small, so that no mutated length can
/// make a case slow.
const MAX_BODY: usize = 64 * 1024;

/// xorshift64*: tiny, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn bool(&mut self) -> bool {
        self.next() & 1 == 1
    }
    fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.below(max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
    fn text(&mut self, max: usize) -> String {
        let n = self.below(max + 1);
        (0..n)
            .map(|_| (b'a' + self.below(26) as u8) as char)
            .collect()
    }
}

fn values(rng: &mut Rng, allow_named: bool) -> SerializedValues {
    let mut sv = SerializedValues::new();
    let named = allow_named && rng.bool();
    for _ in 0..rng.below(4) {
        let b = rng.bytes(12);
        let v = match rng.below(3) {
            0 => RawValue::Null,
            1 => RawValue::Unset,
            _ => RawValue::Value(&b),
        };
        if named {
            let name = rng.text(4);
            sv.push_named(&name, v).expect("a few short values fit");
        } else {
            sv.push(v).expect("a few short values fit");
        }
    }
    sv
}

fn params(rng: &mut Rng, v5: bool) -> QueryParameters<'static> {
    QueryParameters {
        consistency: Consistency::ALL[rng.below(11)],
        values: Cow::Owned(values(rng, true)),
        skip_metadata: rng.bool(),
        page_size: rng.bool().then(|| rng.next() as i32),
        paging_state: rng.bool().then(|| Cow::Owned(rng.bytes(16))),
        serial_consistency: rng.bool().then_some(Consistency::Serial),
        default_timestamp: rng.bool().then(|| rng.next() as i64),
        keyspace: (v5 && rng.bool()).then(|| Cow::Owned(rng.text(10))),
        now_in_seconds: (v5 && rng.bool()).then(|| rng.next() as i32),
    }
}

/// A request valid on `version` (v5 parts only on v5).
fn request(rng: &mut Rng, version: ProtocolVersion) -> Request<'static> {
    let v5 = version == ProtocolVersion::V5;
    match rng.below(8) {
        0 => Request::Startup(Startup {
            options: (0..rng.below(3))
                .map(|_| (Cow::Owned(rng.text(8)), Cow::Owned(rng.text(8))))
                .collect(),
        }),
        1 => Request::Options(Options),
        2 => Request::Query(Query {
            contents: Cow::Owned(rng.text(30)),
            params: params(rng, v5),
        }),
        3 => Request::Prepare(Prepare {
            query: Cow::Owned(rng.text(30)),
            keyspace: (v5 && rng.bool()).then(|| Cow::Owned(rng.text(10))),
        }),
        4 => Request::Execute(Execute {
            id: Cow::Owned(rng.bytes(16)),
            result_metadata_id: v5.then(|| Cow::Owned(rng.bytes(16))),
            params: params(rng, v5),
            tablet_version_block: None,
        }),
        5 => Request::Batch(Batch {
            batch_type: [BatchType::Logged, BatchType::Unlogged, BatchType::Counter][rng.below(3)],
            statements: Cow::Owned(
                (0..rng.below(4))
                    .map(|_| BatchStatement {
                        kind: if rng.bool() {
                            BatchStatementKind::Query(Cow::Owned(rng.text(20)))
                        } else {
                            BatchStatementKind::Prepared(Cow::Owned(rng.bytes(16)))
                        },
                        values: Cow::Owned(values(rng, false)),
                    })
                    .collect(),
            ),
            consistency: Consistency::ALL[rng.below(11)],
            serial_consistency: rng.bool().then_some(Consistency::LocalSerial),
            default_timestamp: rng.bool().then(|| rng.next() as i64),
            keyspace: (v5 && rng.bool()).then(|| Cow::Owned(rng.text(10))),
            now_in_seconds: (v5 && rng.bool()).then(|| rng.next() as i32),
        }),
        6 => Request::Register(Register {
            event_types: Cow::Owned(EventType::ALL[..rng.below(4)].to_vec()),
        }),
        _ => Request::AuthResponse(AuthResponse {
            token: rng.bool().then(|| Cow::Owned(rng.bytes(20))),
        }),
    }
}

/// A valid encoded request frame, sometimes compressed, sometimes with extras.
fn valid_frame(rng: &mut Rng, compressor: &mut Compressor) -> Vec<u8> {
    let version = if rng.bool() {
        ProtocolVersion::V5
    } else {
        ProtocolVersion::V4
    };
    let req = request(rng, version);
    let mut payload = HashMap::new();
    payload.insert(rng.text(3), Some(rng.bytes(5)));
    let extras = FrameExtras {
        tracing: rng.bool(),
        custom_payload: rng.bool().then_some(&payload),
        ..FrameExtras::NONE
    };
    let mut buf = BytesMut::new();
    // v5 envelopes are never compressed (their segments are).
    let c = (rng.bool() && version == ProtocolVersion::V4).then_some(compressor);
    encode_frame(
        &mut buf,
        version,
        Direction::Request,
        rng.below(100) as i16,
        &req,
        &extras,
        c,
    )
    .expect("generated requests are valid");
    buf.to_vec()
}

fn mutate(rng: &mut Rng, f: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        let len = f.len();
        match rng.below(7) {
            0 if len > 0 => {
                let i = rng.below(len);
                f[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                f.insert(i, rng.next() as u8);
            }
            2 if len > 0 => {
                f.remove(rng.below(len));
            }
            3 => f.truncate(rng.below(len + 1)),
            4 if len > 0 => {
                let i = rng.below(len);
                f[i] = [0x00, 0xff, 0x7f, 0x80, 0x01][rng.below(5)];
            }
            5 if len >= 4 => {
                // Overwrite 4 bytes with an extreme length.
                let i = rng.below(len - 3);
                let v: u32 = [0, 1, 0x7fff_ffff, 0xffff_ffff, 0xffff_fffe][rng.below(5)];
                f[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            _ => {
                // Keep the header's length consistent after a body mutation,
                // so the mutation reaches the body decoders.
                if len >= HEADER_LEN {
                    let body = (len - HEADER_LEN) as u32;
                    f[5..9].copy_from_slice(&body.to_be_bytes());
                }
            }
        }
    }
}

/// Runs every decoder stage on `f`; returns how far it got (for sanity checks).
fn feed(f: &[u8], compression: Option<Compression>) -> usize {
    let (h, len) = match frame_len(f, MAX_BODY) {
        Ok(Some(x)) => x,
        _ => return 0,
    };
    let body = Bytes::copy_from_slice(&f[HEADER_LEN..len]);
    let env = match decode_envelope(&h, body, compression, MAX_BODY) {
        Ok(e) => e,
        Err(_) => return 1,
    };
    match Request::decode(h.opcode, &env.body, h.version) {
        Ok(_) => 3,
        Err(_) => 2,
    }
}

#[test]
fn valid_frames_decode() {
    let mut rng = Rng(0x5eed);
    let mut c = Compressor::new(Compression::Lz4);
    for _ in 0..2000 {
        let f = valid_frame(&mut rng, &mut c);
        assert_eq!(feed(&f, Some(Compression::Lz4)), 3);
    }
}

#[test]
fn mutated_frames_do_not_panic() {
    let mut rng = Rng(0xdead_beef);
    let mut c = Compressor::new(Compression::Lz4);
    let mut reached_body = 0;
    for _ in 0..30_000 {
        let mut f = valid_frame(&mut rng, &mut c);
        mutate(&mut rng, &mut f);
        // Now and then, decode without negotiated compression.
        let c = (rng.below(8) != 0).then_some(Compression::Lz4);
        if feed(&f, c) >= 2 {
            reached_body += 1;
        }
    }
    // The mutations must not all be stopped at the header.
    assert!(
        reached_body > 5_000,
        "only {reached_body} reached a body decoder"
    );
}

#[test]
fn random_bodies_for_every_opcode() {
    let mut rng = Rng(42);
    for _ in 0..20_000 {
        let body = rng.bytes(40);
        for &op in Opcode::ALL {
            for v in ProtocolVersion::ALL {
                let _ = Request::decode(op, &body, v);
            }
            let ctx = RequestContext {
                version: ProtocolVersion::V4,
                use_metadata_id: true,
                tablets_routing_v2: false,
            };
            let _ = Request::decode_in(op, &body, &ctx);
        }
        // And as a whole frame with a plausible header.
        let mut f = vec![
            0x04,
            rng.next() as u8 & 0x17,
            0,
            1,
            Opcode::ALL[rng.below(16)] as u8,
        ];
        f.extend_from_slice(&(body.len() as u32).to_be_bytes());
        f.extend_from_slice(&body);
        feed(&f, Some(Compression::Lz4));
        // And fully random bytes.
        feed(&rng.bytes(30), None);
    }
}

fn compressed_frame(body: &[u8]) -> (FrameHeader, Bytes) {
    let h = FrameHeader {
        version: ProtocolVersion::V4,
        direction: Direction::Request,
        flags: Flags::COMPRESSION,
        stream: 0,
        opcode: Opcode::Query,
        body_len: body.len() as u32,
    };
    (h, Bytes::copy_from_slice(body))
}

#[test]
fn corrupt_and_oversized_lz4_are_typed_errors() {
    // 4 GiB announced: refused by the limit, or, with no limit, by the
    // impossible-ratio check that runs before the output is allocated.
    let (h, b) = compressed_frame(&[0xff, 0xff, 0xff, 0xff, 0x10, b'a', 0]);
    assert!(matches!(
        decode_envelope(&h, b.clone(), Some(Compression::Lz4), MAX_BODY),
        Err(DecodeError::FrameTooLarge {
            length: 0xffff_ffff,
            ..
        })
    ));
    assert_eq!(
        decode_envelope(&h, b, Some(Compression::Lz4), usize::MAX),
        Err(DecodeError::Decompression(
            "LZ4 announced length impossible for the compressed size"
        ))
    );
    // Garbage block.
    let (h, b) = compressed_frame(&[0, 0, 0, 50, 0xff, 0xff, 0xff, 0x01, 0x02]);
    assert!(matches!(
        decode_envelope(&h, b, Some(Compression::Lz4), MAX_BODY),
        Err(DecodeError::Decompression(_))
    ));
    // Shorter than the length prefix.
    let (h, b) = compressed_frame(&[0, 0]);
    assert!(matches!(
        decode_envelope(&h, b, Some(Compression::Lz4), MAX_BODY),
        Err(DecodeError::Decompression(_))
    ));
    // A valid block that expands beyond the limit.
    let mut out = BytesMut::new();
    Compression::Lz4
        .compress_into(&vec![0u8; MAX_BODY + 1], &mut out)
        .unwrap();
    let (h, b) = compressed_frame(&out);
    assert!(matches!(
        decode_envelope(&h, b, Some(Compression::Lz4), MAX_BODY),
        Err(DecodeError::FrameTooLarge { .. })
    ));
}

#[test]
fn random_lz4_blocks_do_not_panic() {
    let mut rng = Rng(7);
    for _ in 0..10_000 {
        let mut body = ((rng.below(2000)) as u32).to_be_bytes().to_vec();
        body.extend(rng.bytes(60));
        let _ = Compression::Lz4.decompress(&body, MAX_BODY);
    }
}
