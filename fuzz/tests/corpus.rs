//! The seed corpus of the `cql_frame` target: valid frames, segments, bodies
//! and payloads made with the protocol crate's encoders, each prefixed with
//! the selector byte of its decoder (see `cql_fuzz`).
//!
//! `cargo +nightly test --manifest-path fuzz/Cargo.toml` checks that the
//! committed corpus is what the encoders make today and that every file goes
//! through the checks; with `CQL_FUZZ_WRITE_CORPUS=1` it rewrites the corpus.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use cql_fuzz::{cql_frame, selector, Mode};
use scylla_cql::compression::{Compression, Compressor};
use scylla_cql::frame::request::{Query, QueryParameters, Request, Startup};
use scylla_cql::frame::response::event::{StatusChangeType, TopologyChangeType};
use scylla_cql::frame::response::result::{
    ResultMetadata, Rows, SchemaChange, SchemaChangeTarget, SchemaChangeType,
};
use scylla_cql::frame::response::{
    AuthSuccess, DbError, ErrorResponse, Event, Ready, Response, ResultBody, ScyllaExtensions,
    ShardingInfo,
};
use scylla_cql::frame::segment_stream::SegmentEncoder;
use scylla_cql::frame::tablets::{TabletRoutingInfo, TabletRoutingV2};
use scylla_cql::frame::{encode_frame, Direction, FrameExtras, MessageBody, ProtocolVersion};
use scylla_cql::types::{ColumnSpec, ColumnType, NativeType};
use scylla_cql::{Consistency, Token};

fn col(name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec {
        keyspace: "ks".into(),
        table: "t".into(),
        name: name.into(),
        typ,
    }
}

/// Responses covering every response opcode and the RESULT kinds.
fn responses() -> Vec<(&'static str, Response)> {
    let mut md = ResultMetadata::with_columns(vec![
        col("id", ColumnType::Native(NativeType::Int)),
        col("v", ColumnType::list(ColumnType::Native(NativeType::Text))),
    ]);
    md.paging_state = Some(Box::new(Bytes::from_static(b"\x00\x02ps")));
    let rows = Rows::build(
        md,
        [
            vec![Some(&b"\0\0\0\x07"[..]), None],
            vec![
                Some(&b"\0\0\0\x08"[..]),
                Some(&b"\0\0\0\x01\0\0\0\x01x"[..]),
            ],
        ],
    )
    .expect("valid rows");
    let ext = ScyllaExtensions {
        sharding: Some(Ok(ShardingInfo::murmur3(
            1,
            std::num::NonZeroU16::new(4).expect("4 > 0"),
            12,
        ))),
        compression: vec!["lz4".into()],
        ..ScyllaExtensions::default()
    };
    vec![
        ("ready", Response::Ready(Ready)),
        (
            "error-unavailable",
            Response::Error(ErrorResponse {
                error: DbError::Unavailable {
                    consistency: Consistency::Quorum,
                    required: 2,
                    alive: 1,
                },
                message: "not enough replicas".into(),
            }),
        ),
        (
            "error-already-exists",
            Response::Error(ErrorResponse {
                error: DbError::AlreadyExists {
                    keyspace: "ks".into(),
                    table: "t".into(),
                },
                message: "exists".into(),
            }),
        ),
        ("supported", Response::Supported(ext.to_supported())),
        ("result-void", Response::Result(ResultBody::Void)),
        ("result-rows", Response::Result(ResultBody::Rows(rows))),
        (
            "result-set-keyspace",
            Response::Result(ResultBody::SetKeyspace("ks".into())),
        ),
        (
            "result-schema-change",
            Response::Result(ResultBody::SchemaChange(SchemaChange {
                change: SchemaChangeType::Updated,
                target: SchemaChangeTarget::Table {
                    keyspace: "ks".into(),
                    name: "t".into(),
                },
            })),
        ),
        (
            "event-topology",
            Response::Event(Event::TopologyChange {
                change: TopologyChangeType::NewNode,
                addr: "10.0.0.2:9042".parse().expect("an address"),
            }),
        ),
        (
            "event-status",
            Response::Event(Event::StatusChange {
                change: StatusChangeType::Down,
                addr: "[::1]:9042".parse().expect("an address"),
            }),
        ),
        (
            "auth-success",
            Response::AuthSuccess(AuthSuccess {
                token: Some(Bytes::from_static(b"ok")),
            }),
        ),
    ]
}

fn requests() -> Vec<(&'static str, Request<'static>)> {
    vec![
        (
            "startup",
            Request::Startup(Startup {
                options: vec![(Cow::Borrowed("CQL_VERSION"), Cow::Borrowed("3.0.0"))],
            }),
        ),
        (
            "query",
            Request::Query(Query {
                contents: Cow::Borrowed("SELECT * FROM ks.t WHERE id = 1"),
                params: QueryParameters {
                    page_size: Some(100),
                    ..QueryParameters::default()
                },
            }),
        ),
    ]
}

fn body(msg: &impl MessageBody, version: ProtocolVersion) -> Vec<u8> {
    let mut b = BytesMut::new();
    msg.encode_body(&mut b, version).expect("seeds encode");
    b.to_vec()
}

fn frame(
    msg: &impl MessageBody,
    version: ProtocolVersion,
    direction: Direction,
    extras: &FrameExtras<'_>,
    lz4: bool,
) -> Vec<u8> {
    let mut c = Compressor::new(Compression::Lz4);
    let mut b = BytesMut::new();
    encode_frame(
        &mut b,
        version,
        direction,
        3,
        msg,
        extras,
        lz4.then_some(&mut c),
    )
    .expect("seeds encode");
    b.to_vec()
}

fn with(sel: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![sel];
    out.extend_from_slice(bytes);
    out
}

/// Every seed, by file name.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let warnings = vec!["slow".to_string()];
    let mut payload = HashMap::new();
    payload.insert("k".to_string(), Some(b"v".to_vec()));
    let extras = FrameExtras {
        tracing_id: Some(uuid_of(7)),
        warnings: &warnings,
        custom_payload: Some(&payload),
        ..FrameExtras::NONE
    };
    let responses = responses();
    for (name, r) in &responses {
        // Bodies on a v4 connection with ScyllaDB's extensions.
        let opcode_index = response_opcode_index(r);
        out.push((
            format!("body-{name}"),
            with(
                selector(Mode::ResponseBody, false, 1),
                &[&[opcode_index][..], &body(r, ProtocolVersion::V4)].concat(),
            ),
        ));
        // v4 frames, plain and compressed.
        out.push((
            format!("frame-v4-{name}"),
            with(
                selector(Mode::Frames, false, 0),
                &frame(
                    r,
                    ProtocolVersion::V4,
                    Direction::Response,
                    &FrameExtras::NONE,
                    false,
                ),
            ),
        ));
        out.push((
            format!("frame-v4-lz4-{name}"),
            with(
                selector(Mode::Frames, true, 1),
                &frame(r, ProtocolVersion::V4, Direction::Response, &extras, true),
            ),
        ));
    }
    // A v4 stream of several frames.
    let stream: Vec<u8> = responses
        .iter()
        .take(4)
        .flat_map(|(_, r)| frame(r, ProtocolVersion::V4, Direction::Response, &extras, false))
        .collect();
    out.push((
        "frames-v4-stream".into(),
        with(selector(Mode::Frames, false, 1), &stream),
    ));
    // v5: envelopes in segments, plain and LZ4.
    let envelopes: Vec<u8> = responses
        .iter()
        .flat_map(|(_, r)| frame(r, ProtocolVersion::V5, Direction::Response, &extras, false))
        .collect();
    for lz4 in [false, true] {
        let mut enc = SegmentEncoder::new(lz4);
        let mut seg = BytesMut::new();
        enc.encode_envelopes(&envelopes, &mut seg)
            .expect("seeds frame");
        let suffix = if lz4 { "-lz4" } else { "" };
        out.push((
            format!("segments-v5{suffix}"),
            with(selector(Mode::Segments, lz4, 2), &seg),
        ));
        // The first segment alone.
        let one = scylla_cql::frame::segment::decode(&seg, lz4)
            .expect("a valid segment")
            .expect("a whole segment");
        out.push((
            format!("segment-v5{suffix}"),
            with(selector(Mode::Segment, lz4, 2), &seg[..one.len]),
        ));
        // A large envelope cut into several segments.
        let big = Rows::build(
            ResultMetadata::with_columns(vec![col("b", ColumnType::Native(NativeType::Blob))]),
            [vec![Some(&[0x5a_u8; 140_000][..])]],
        )
        .expect("valid rows");
        let big = frame(
            &Response::Result(ResultBody::Rows(big)),
            ProtocolVersion::V5,
            Direction::Response,
            &FrameExtras::NONE,
            false,
        );
        let mut seg = BytesMut::new();
        enc.encode_envelopes(&big, &mut seg).expect("seeds frame");
        // Compressed, the run is small; plain, it is ~140 KB: keep only the
        // compressed one in the corpus.
        if lz4 {
            out.push((
                "segments-v5-lz4-large".into(),
                with(selector(Mode::Segments, true, 3), &seg),
            ));
        }
    }
    // Built segments: one self-contained segment per envelope.
    let mut built = Vec::new();
    for (_, r) in responses.iter().take(3) {
        let e = frame(
            r,
            ProtocolVersion::V5,
            Direction::Response,
            &FrameExtras::NONE,
            false,
        );
        built.push(0x05); // self-contained, cut after it
        built.push(u8::try_from(e.len()).expect("short envelopes"));
        built.extend_from_slice(&e);
    }
    out.push((
        "built-segments-v5".into(),
        with(selector(Mode::BuiltSegments, false, 2), &built),
    ));
    // Requests, as frames and as bodies.
    for (name, q) in requests() {
        for (v, bits) in [(ProtocolVersion::V4, 0), (ProtocolVersion::V5, 2)] {
            out.push((
                format!("frame-{v}-request-{name}").to_lowercase(),
                with(
                    selector(Mode::Frames, false, bits),
                    &frame(&q, v, Direction::Request, &FrameExtras::NONE, false),
                ),
            ));
        }
        out.push((
            format!("request-body-{name}"),
            with(
                selector(Mode::RequestBody, false, 0),
                &[&[q.opcode() as u8][..], &body(&q, ProtocolVersion::V4)].concat(),
            ),
        ));
    }
    // An LZ4 body.
    let mut c = Compressor::new(Compression::Lz4);
    let mut lz = BytesMut::new();
    c.compress_into(&body(&responses[5].1, ProtocolVersion::V4), &mut lz)
        .expect("seeds compress");
    out.push(("lz4-body".into(), with(selector(Mode::Lz4, false, 0), &lz)));
    // Tablet payloads and SUPPORTED options.
    let tablet = TabletRoutingInfo {
        first_token: Token::new(-100),
        last_token: Token::new(100),
        replicas: vec![(uuid_of(1), 0), (uuid_of(2), 3)],
    };
    let v2 = TabletRoutingV2 {
        routing: tablet.clone(),
        version: 9,
    };
    let sel = selector(Mode::Payloads, false, 0);
    out.push((
        "tablet-v1".into(),
        with(sel, &tablet.encode().expect("encodes")),
    ));
    out.push((
        "tablet-v2".into(),
        with(sel, &v2.encode().expect("encodes")),
    ));
    out.push((
        "supported-options".into(),
        with(sel, &body(&responses[3].1, ProtocolVersion::V4)),
    ));
    out
}

fn uuid_of(n: u8) -> uuid::Uuid {
    uuid::Uuid::from_bytes([n; 16])
}

/// The index the target maps to `r`'s opcode (response opcodes in
/// `Opcode::ALL` order).
fn response_opcode_index(r: &Response) -> u8 {
    let responses: Vec<_> = scylla_cql::frame::Opcode::ALL
        .iter()
        .filter(|o| o.direction() == Direction::Response)
        .collect();
    let i = responses
        .iter()
        .position(|&&o| o == r.opcode())
        .expect("a response opcode");
    u8::try_from(i).expect("few opcodes")
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/cql_frame")
}

#[test]
fn seed_corpus() {
    let seeds = seeds();
    let dir = corpus_dir();
    if std::env::var_os("CQL_FUZZ_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for (name, bytes) in &seeds {
            std::fs::write(dir.join(name), bytes).expect("corpus file");
        }
    }
    let total: usize = seeds.iter().map(|(_, b)| b.len()).sum();
    assert!(total < 200 * 1024, "the seed corpus is {total} bytes");
    for (name, bytes) in &seeds {
        let on_disk = std::fs::read(dir.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e} (CQL_FUZZ_WRITE_CORPUS=1 writes it)"));
        assert_eq!(&on_disk, bytes, "{name} is stale (CQL_FUZZ_WRITE_CORPUS=1)");
    }
}

/// Every file of the corpus directory (seeds and whatever fuzzing added)
/// goes through the checks without a panic.
#[test]
fn corpus_files_pass_the_checks() {
    let mut n = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus directory") {
        let path = entry.expect("a directory entry").path();
        cql_frame(&std::fs::read(&path).expect("a corpus file"));
        n += 1;
    }
    assert!(n >= 24, "{n} corpus files");
}

/// The seeds decode all the way: the frame seeds reach the message
/// decoders, so mutations start from deep inside.
#[test]
fn seeds_reach_the_message_decoders() {
    let mut cache = scylla_cql::frame::response::result::SpecCache::new();
    for (name, bytes) in seeds() {
        if name.starts_with("frame-") {
            let ctx = cql_fuzz::context(bytes[0]);
            assert!(
                cql_fuzz::frame(&bytes[1..], bytes[0] & 8 != 0, &ctx, &mut cache),
                "{name}"
            );
        }
    }
}
