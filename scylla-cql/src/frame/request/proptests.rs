//! Property tests: every request survives encode (envelope, optionally LZ4,
//! random extras) -> `frame_len` -> `decode_envelope` -> `Request::decode`,
//! on v4 (with and without `SCYLLA_USE_METADATA_ID`) and v5.

use crate::frame::ProtocolVersion;
use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;

use super::*;
use crate::compression::{Compression, Compressor};
use crate::consistency::Consistency;
use crate::frame::envelope::{
    decode_envelope, encode_frame, frame_len, CustomPayload, FrameExtras,
};
use crate::frame::wire::RawValue;
use crate::frame::{Direction, Flags, HEADER_LEN};
use crate::types::SerializedValues;

fn consistency() -> impl Strategy<Value = Consistency> {
    proptest::sample::select(Consistency::ALL.to_vec())
}

fn raw_value() -> impl Strategy<Value = Option<Option<Vec<u8>>>> {
    // None = unset, Some(None) = null, Some(Some(b)) = bytes.
    prop_oneof![
        Just(None),
        Just(Some(None)),
        proptest::collection::vec(any::<u8>(), 0..20).prop_map(|b| Some(Some(b))),
    ]
}

fn to_raw(v: &Option<Option<Vec<u8>>>) -> RawValue<'_> {
    match v {
        None => RawValue::Unset,
        Some(None) => RawValue::Null,
        Some(Some(b)) => RawValue::Value(b),
    }
}

fn values(allow_named: bool) -> impl Strategy<Value = SerializedValues> {
    (
        proptest::collection::vec(("[a-z]{0,6}", raw_value()), 0..6),
        any::<bool>(),
    )
        .prop_map(move |(vals, named)| {
            let mut sv = SerializedValues::new();
            for (name, v) in &vals {
                if named && allow_named {
                    sv.push_named(name, to_raw(v)).unwrap();
                } else {
                    sv.push(to_raw(v)).unwrap();
                }
            }
            sv
        })
}

/// The v5-only parts (keyspace, now_in_seconds): always absent on v4.
fn v5_parts(v5: bool) -> impl Strategy<Value = (Option<Cow<'static, str>>, Option<i32>)> {
    (
        proptest::option::of("[a-z_]{0,12}".prop_map(Cow::Owned)),
        any::<Option<i32>>(),
    )
        .prop_map(move |(ks, now)| if v5 { (ks, now) } else { (None, None) })
}

fn params(v5: bool) -> impl Strategy<Value = QueryParameters<'static>> {
    (
        consistency(),
        values(true),
        any::<bool>(),
        any::<Option<i32>>(),
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..30)),
        proptest::option::of(consistency()),
        any::<Option<i64>>(),
        v5_parts(v5),
    )
        .prop_map(
            |(c, v, skip, page, state, serial, ts, (keyspace, now_in_seconds))| QueryParameters {
                consistency: c,
                values: Cow::Owned(v),
                skip_metadata: skip,
                page_size: page,
                paging_state: state.map(Cow::Owned),
                serial_consistency: serial,
                default_timestamp: ts,
                keyspace,
                now_in_seconds,
            },
        )
}

fn text() -> impl Strategy<Value = Cow<'static, str>> {
    "\\PC{0,40}".prop_map(Cow::Owned)
}

fn bytes(max: usize) -> impl Strategy<Value = Cow<'static, [u8]>> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(Cow::Owned)
}

fn batch(v5: bool) -> impl Strategy<Value = Batch<'static>> {
    let stmt = (
        prop_oneof![
            text().prop_map(BatchStatementKind::Query),
            bytes(20).prop_map(BatchStatementKind::Prepared),
        ],
        values(false),
    )
        .prop_map(|(kind, v)| BatchStatement {
            kind,
            values: Cow::Owned(v),
        });
    (
        proptest::sample::select(vec![
            BatchType::Logged,
            BatchType::Unlogged,
            BatchType::Counter,
        ]),
        proptest::collection::vec(stmt, 0..5),
        consistency(),
        proptest::option::of(consistency()),
        any::<Option<i64>>(),
        v5_parts(v5),
    )
        .prop_map(|(t, s, c, serial, ts, (keyspace, now_in_seconds))| Batch {
            batch_type: t,
            statements: Cow::Owned(s),
            consistency: c,
            serial_consistency: serial,
            default_timestamp: ts,
            keyspace,
            now_in_seconds,
        })
}

/// A connection: its version and whether it negotiated
/// `SCYLLA_USE_METADATA_ID` (v4 only; v5 always has metadata ids) and
/// `TABLETS_ROUTING_V2_EXPERIMENTAL` (a tablet version block on EXECUTE).
fn context() -> impl Strategy<Value = RequestContext> {
    (
        prop_oneof![
            Just(RequestContext::new(ProtocolVersion::V4)),
            Just(RequestContext {
                use_metadata_id: true,
                ..RequestContext::new(ProtocolVersion::V4)
            }),
            Just(RequestContext::new(ProtocolVersion::V5)),
        ],
        any::<bool>(),
    )
        .prop_map(|(ctx, tablets_routing_v2)| RequestContext {
            tablets_routing_v2,
            ..ctx
        })
}

/// A request valid on a connection in `ctx`.
fn request(ctx: RequestContext) -> impl Strategy<Value = Request<'static>> {
    let v5 = ctx.version == ProtocolVersion::V5;
    let with_metadata_id = v5 || ctx.use_metadata_id;
    let tablets_v2 = ctx.tablets_routing_v2;
    prop_oneof![
        proptest::collection::vec((text(), text()), 0..4)
            .prop_map(|options| Request::Startup(Startup { options })),
        Just(Request::Options(Options)),
        (text(), params(v5))
            .prop_map(|(contents, params)| Request::Query(Query { contents, params })),
        (text(), v5_parts(v5))
            .prop_map(|(query, (keyspace, _))| Request::Prepare(Prepare { query, keyspace })),
        // Up to 40 bytes each: ids that fit in one append from the stack and
        // ids that do not (see `put_ids`).
        (bytes(40), bytes(40), params(v5), any::<u8>()).prop_map(move |(id, md, params, block)| {
            Request::Execute(Execute {
                id,
                result_metadata_id: with_metadata_id.then_some(md),
                params,
                tablet_version_block: tablets_v2.then_some(block),
            })
        }),
        batch(v5).prop_map(Request::Batch),
        proptest::collection::vec(proptest::sample::select(EventType::ALL.to_vec()), 0..4)
            .prop_map(|e| Request::Register(Register {
                event_types: Cow::Owned(e)
            })),
        proptest::option::of(bytes(30))
            .prop_map(|token| Request::AuthResponse(AuthResponse { token })),
    ]
}

fn payload() -> impl Strategy<Value = Option<CustomPayload>> {
    proptest::option::of(proptest::collection::hash_map(
        "[a-z]{0,5}",
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..10)),
        0..3,
    ))
}

/// No compression, LZ4 or Snappy.
fn compression() -> impl Strategy<Value = Option<Compression>> {
    proptest::option::of(prop_oneof![
        Just(Compression::Lz4),
        Just(Compression::Snappy)
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn request_round_trip(
        (ctx, req) in context().prop_flat_map(|ctx| (Just(ctx), request(ctx))),
        stream in 0i16..=i16::MAX,
        tracing in any::<bool>(),
        beta in any::<bool>(),
        payload in payload(),
        compression in compression(),
        prefix in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        // v5 envelopes are never compressed (their segments are).
        let compression = compression.filter(|_| ctx.version == ProtocolVersion::V4);
        let lz4 = compression.is_some();
        let algorithm = compression.unwrap_or(Compression::Lz4);
        let extras = FrameExtras {
            tracing,
            custom_payload: payload.as_ref(),
            beta,
            ..FrameExtras::NONE
        };
        let mut compressor = Compressor::new(algorithm);
        let mut buf = BytesMut::from(&prefix[..]);
        encode_frame(&mut buf, ctx.version, Direction::Request, stream, &req, &extras, lz4.then_some(&mut compressor))
            .unwrap();
        let frame = &buf[prefix.len()..];
        let (h, len) = frame_len(frame, 1 << 20).unwrap().unwrap();
        prop_assert_eq!(len, frame.len());
        prop_assert_eq!(h.stream, stream);
        prop_assert_eq!(h.opcode, req.opcode());
        prop_assert_eq!(h.flags.contains(Flags::TRACING), tracing);
        prop_assert_eq!(h.flags.contains(Flags::BETA), beta);
        let compressed = lz4 && !matches!(req, Request::Startup(_) | Request::Options(_));
        prop_assert_eq!(h.flags.contains(Flags::COMPRESSION), compressed);
        let body = Bytes::copy_from_slice(&frame[HEADER_LEN..]);
        let env = decode_envelope(&h, body, Some(algorithm), 1 << 20).unwrap();
        prop_assert_eq!(env.tracing_requested(), tracing);
        prop_assert_eq!(env.tracing_id, None);
        prop_assert!(env.warnings.is_empty());
        prop_assert_eq!(&env.custom_payload, &payload);
        let decoded = Request::decode_in(h.opcode, &env.body, &ctx).unwrap().into_owned();
        prop_assert_eq!(decoded, req);
    }

    /// v5-only parts are refused on v4 with an `Invalid` naming the version,
    /// and nothing is left in the buffer.
    #[test]
    fn v5_parts_refused_on_v4(
        req in request(RequestContext::new(ProtocolVersion::V5)),
    ) {
        let needs_v5 = match &req {
            Request::Query(q) => q.params.keyspace.is_some() || q.params.now_in_seconds.is_some(),
            Request::Execute(e) => e.params.keyspace.is_some() || e.params.now_in_seconds.is_some(),
            Request::Prepare(p) => p.keyspace.is_some(),
            Request::Batch(b) => b.keyspace.is_some() || b.now_in_seconds.is_some(),
            _ => false,
        };
        let mut buf = BytesMut::new();
        let r = encode_frame(&mut buf, ProtocolVersion::V4, Direction::Request, 0, &req, &FrameExtras::NONE, None);
        if needs_v5 {
            match r {
                Err(EncodeError::Invalid(msg)) => prop_assert!(msg.contains("needs protocol v5"), "{}", msg),
                other => prop_assert!(false, "expected Invalid, got {:?}", other),
            }
            prop_assert!(buf.is_empty());
        } else {
            prop_assert!(r.is_ok());
        }
    }

    #[test]
    fn response_extras_round_trip(
        tracing_id in proptest::option::of(any::<u128>()),
        warnings in proptest::collection::vec("\\PC{0,10}", 0..3),
        payload in payload(),
        body in proptest::collection::vec(any::<u8>(), 0..50),
        compression in compression(),
    ) {
        let lz4 = compression.is_some();
        let algorithm = compression.unwrap_or(Compression::Lz4);
        struct Raw(Vec<u8>);
        impl MessageBody for Raw {
            fn opcode(&self) -> Opcode { Opcode::Result }
            fn encode_body(&self, buf: &mut BytesMut, _version: ProtocolVersion) -> Result<(), EncodeError> {
                buf.extend_from_slice(&self.0);
                Ok(())
            }
        }
        let tracing_id = tracing_id.map(uuid::Uuid::from_u128);
        let extras = FrameExtras {
            tracing_id,
            warnings: &warnings,
            custom_payload: payload.as_ref(),
            ..FrameExtras::NONE
        };
        let mut compressor = Compressor::new(algorithm);
        let mut buf = BytesMut::new();
        encode_frame(&mut buf, ProtocolVersion::V4, Direction::Response, -1, &Raw(body.clone()), &extras, lz4.then_some(&mut compressor))
            .unwrap();
        let (h, _) = frame_len(&buf, 1 << 20).unwrap().unwrap();
        let env = decode_envelope(&h, buf.freeze().slice(HEADER_LEN..), Some(algorithm), 1 << 20).unwrap();
        prop_assert_eq!(env.tracing_id, tracing_id);
        prop_assert_eq!(env.warnings, warnings);
        prop_assert_eq!(env.custom_payload, payload);
        prop_assert_eq!(&env.body[..], &body[..]);
    }
}
