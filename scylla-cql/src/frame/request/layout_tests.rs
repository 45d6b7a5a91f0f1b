//! Exact byte layouts of requests, written by hand from the spec.
use crate::frame::ProtocolVersion;

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};

use super::*;
use crate::consistency::Consistency;
use crate::frame::envelope::{decode_envelope, encode_frame, frame_len, FrameExtras};
use crate::frame::wire::RawValue;
use crate::frame::{Direction, HEADER_LEN};
use crate::types::SerializedValues;

fn frame(stream: i16, msg: &Request<'_>) -> BytesMut {
    let mut buf = BytesMut::new();
    encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        stream,
        msg,
        &FrameExtras::NONE,
        None,
    )
    .unwrap();
    buf
}

/// Decodes `buf` as one frame: its opcode and message body.
fn body_of(buf: &[u8]) -> (Opcode, Bytes) {
    let (h, len) = frame_len(buf, 1 << 20).unwrap().unwrap();
    assert_eq!(len, buf.len());
    let env = decode_envelope(
        &h,
        Bytes::copy_from_slice(&buf[HEADER_LEN..len]),
        None,
        1 << 20,
    )
    .unwrap();
    (h.opcode, env.body)
}

#[test]
fn startup_layout() {
    let req = Request::Startup(Startup {
        options: vec![(Cow::Borrowed("CQL_VERSION"), Cow::Borrowed("3.0.0"))],
    });
    let buf = frame(1, &req);
    let mut expected = vec![0x04, 0x00, 0x00, 0x01, 0x01, 0, 0, 0, 22];
    expected.extend_from_slice(&[0x00, 0x01]); // one pair
    expected.extend_from_slice(&[0x00, 11]);
    expected.extend_from_slice(b"CQL_VERSION");
    expected.extend_from_slice(&[0x00, 5]);
    expected.extend_from_slice(b"3.0.0");
    assert_eq!(&buf[..], &expected[..]);
    let (op, body) = body_of(&buf);
    assert_eq!(
        Request::decode(op, &body, ProtocolVersion::V4).unwrap(),
        req
    );
}

#[test]
fn options_layout() {
    let buf = frame(0x0102, &Request::Options(Options));
    assert_eq!(&buf[..], &[0x04, 0x00, 0x01, 0x02, 0x05, 0, 0, 0, 0]);
    let (op, body) = body_of(&buf);
    assert_eq!(
        Request::decode(op, &body, ProtocolVersion::V4).unwrap(),
        Request::Options(Options)
    );
}

#[test]
fn query_with_values_layout() {
    let mut values = SerializedValues::new();
    values.push(RawValue::Value(&[0, 0, 0, 42])).unwrap();
    values.push(RawValue::Null).unwrap();
    let req = Request::Query(Query {
        contents: Cow::Borrowed("SELECT ?"),
        params: QueryParameters {
            consistency: Consistency::One,
            values: Cow::Borrowed(&values),
            page_size: Some(100),
            default_timestamp: Some(7),
            ..QueryParameters::default()
        },
    });
    let buf = frame(5, &req);
    let mut body = vec![0, 0, 0, 8];
    body.extend_from_slice(b"SELECT ?");
    body.extend_from_slice(&[0x00, 0x01]); // consistency ONE
    body.push(0x01 | 0x04 | 0x20); // values, page size, timestamp
    body.extend_from_slice(&[0x00, 0x02]); // two values
    body.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 42]);
    body.extend_from_slice(&[0xff, 0xff, 0xff, 0xff]); // null
    body.extend_from_slice(&[0, 0, 0, 100]);
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 7]);
    let mut expected = vec![0x04, 0x00, 0x00, 0x05, 0x07];
    expected.extend_from_slice(&(body.len() as u32).to_be_bytes());
    expected.extend_from_slice(&body);
    assert_eq!(&buf[..], &expected[..]);
    let (op, body) = body_of(&buf);
    assert_eq!(
        Request::decode(op, &body, ProtocolVersion::V4).unwrap(),
        req
    );
}

#[test]
fn register_and_batch_layout() {
    let req = Request::Register(Register {
        event_types: Cow::Borrowed(&[EventType::StatusChange]),
    });
    let buf = frame(0, &req);
    let mut body = vec![0, 1, 0, 13];
    body.extend_from_slice(b"STATUS_CHANGE");
    assert_eq!(&buf[HEADER_LEN..], &body[..]);

    let stmts = [BatchStatement {
        kind: BatchStatementKind::Prepared(Cow::Borrowed(&[0xAB])),
        values: Cow::Owned(SerializedValues::new()),
    }];
    let req = Request::Batch(Batch {
        batch_type: BatchType::Unlogged,
        statements: Cow::Borrowed(&stmts),
        consistency: Consistency::Quorum,
        serial_consistency: Some(Consistency::LocalSerial),
        default_timestamp: None,
        keyspace: None,
        now_in_seconds: None,
    });
    let buf = frame(0, &req);
    let body = [1, 0, 1, 1, 0, 1, 0xAB, 0, 0, 0, 4, 0x10, 0, 9];
    assert_eq!(&buf[HEADER_LEN..], &body[..]);
    let (op, body) = body_of(&buf);
    assert_eq!(
        Request::decode(op, &body, ProtocolVersion::V4).unwrap(),
        req
    );
}

#[test]
fn named_values_in_batch_are_rejected() {
    let mut values = SerializedValues::new();
    values.push_named("a", RawValue::Null).unwrap();
    let stmts = [BatchStatement {
        kind: BatchStatementKind::Query(Cow::Borrowed("x")),
        values: Cow::Owned(values),
    }];
    let req = Request::Batch(Batch {
        batch_type: BatchType::Logged,
        statements: Cow::Borrowed(&stmts),
        consistency: Consistency::One,
        serial_consistency: None,
        default_timestamp: None,
        keyspace: None,
        now_in_seconds: None,
    });
    let mut buf = BytesMut::new();
    let r = encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        0,
        &req,
        &FrameExtras::NONE,
        None,
    );
    assert!(matches!(r, Err(crate::EncodeError::Invalid(_))));
    assert!(buf.is_empty());
    // And the names flag is rejected on decode.
    let body = [0, 0, 0, 0, 1, 0x40];
    assert!(matches!(
        Request::decode(Opcode::Batch, &body, ProtocolVersion::V4),
        Err(DecodeError::InvalidValue { .. })
    ));
}

#[test]
fn decode_rejects_bad_input() {
    assert!(matches!(
        Request::decode(Opcode::Options, &[0], ProtocolVersion::V4),
        Err(DecodeError::TrailingBytes { .. })
    ));
    assert!(matches!(
        Request::decode(Opcode::Ready, &[], ProtocolVersion::V4),
        Err(DecodeError::WrongDirection { .. })
    ));
    // Unknown query flag bit 0x80.
    let body = [0, 0, 0, 0, 0, 1, 0x80];
    assert!(matches!(
        Request::decode(Opcode::Query, &body, ProtocolVersion::V4),
        Err(DecodeError::InvalidValue { .. })
    ));
    // Batch low flag bits must be zero.
    let body = [0, 0, 0, 0, 1, 0x01];
    assert!(matches!(
        Request::decode(Opcode::Batch, &body, ProtocolVersion::V4),
        Err(DecodeError::InvalidValue { .. })
    ));
    let mut body = vec![0, 1, 0, 3];
    body.extend_from_slice(b"FOO");
    assert!(matches!(
        Request::decode(Opcode::Register, &body, ProtocolVersion::V4),
        Err(DecodeError::InvalidText { .. })
    ));
}

/// The body of `msg` encoded for `version`.
fn body(msg: &Request<'_>, version: ProtocolVersion) -> Result<Vec<u8>, crate::EncodeError> {
    let mut buf = BytesMut::new();
    msg.encode_body(&mut buf, version)?;
    Ok(buf.to_vec())
}

#[test]
fn v5_query_with_keyspace_and_now_layout() {
    let req = Request::Query(Query {
        contents: Cow::Borrowed("SELECT 1"),
        params: QueryParameters {
            consistency: Consistency::LocalQuorum,
            default_timestamp: Some(9),
            keyspace: Some(Cow::Borrowed("ks1")),
            now_in_seconds: Some(1_700_000_000),
            ..QueryParameters::default()
        },
    });
    let mut expected = vec![0, 0, 0, 8];
    expected.extend_from_slice(b"SELECT 1");
    expected.extend_from_slice(&[0x00, 0x06]); // LOCAL_QUORUM
    expected.extend_from_slice(&[0x00, 0x00, 0x01, 0xA0]); // [int] flags: 0x20|0x80|0x100
    expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 9]); // timestamp
    expected.extend_from_slice(&[0x00, 0x03]); // keyspace, after the timestamp
    expected.extend_from_slice(b"ks1");
    expected.extend_from_slice(&1_700_000_000i32.to_be_bytes()); // now_in_seconds
    assert_eq!(body(&req, ProtocolVersion::V5).unwrap(), expected);
    assert_eq!(
        Request::decode(Opcode::Query, &expected, ProtocolVersion::V5).unwrap(),
        req
    );
    // v4 cannot say it.
    assert_eq!(
        body(&req, ProtocolVersion::V4),
        Err(crate::EncodeError::Invalid(query_params::KEYSPACE_NEEDS_V5))
    );
    // And a v4 reader refuses the v5 flag bits; a v5 reader the unknown ones.
    assert!(Request::decode(Opcode::Query, &expected, ProtocolVersion::V4).is_err());
    let mut unknown = vec![0, 0, 0, 0, 0x00, 0x01, 0x00, 0x00, 0x02, 0x00];
    assert!(matches!(
        Request::decode(Opcode::Query, &unknown, ProtocolVersion::V5),
        Err(DecodeError::InvalidValue { .. })
    ));
    unknown[8] = 0x00;
    assert!(Request::decode(Opcode::Query, &unknown, ProtocolVersion::V5).is_ok());
}

#[test]
fn v5_execute_with_metadata_id_layout() {
    let req = Request::Execute(Execute {
        id: Cow::Borrowed(&[0xAA, 0xBB]),
        result_metadata_id: Some(Cow::Borrowed(&[0x01, 0x02, 0x03])),
        params: QueryParameters {
            consistency: Consistency::One,
            skip_metadata: true,
            ..QueryParameters::default()
        },
        tablet_version_block: None,
    });
    let expected = [
        0x00, 0x02, 0xAA, 0xBB, // id
        0x00, 0x03, 0x01, 0x02, 0x03, // result metadata id
        0x00, 0x01, // ONE
        0x00, 0x00, 0x00, 0x02, // [int] flags: skip metadata
    ];
    assert_eq!(body(&req, ProtocolVersion::V5).unwrap(), expected);
    assert_eq!(
        Request::decode(Opcode::Execute, &expected, ProtocolVersion::V5).unwrap(),
        req
    );
    // v4 with SCYLLA_USE_METADATA_ID: same ids, flags a [byte].
    let v4_ext = [
        0x00, 0x02, 0xAA, 0xBB, 0x00, 0x03, 0x01, 0x02, 0x03, 0x00, 0x01, 0x02,
    ];
    assert_eq!(body(&req, ProtocolVersion::V4).unwrap(), v4_ext);
    let ctx = RequestContext {
        version: ProtocolVersion::V4,
        use_metadata_id: true,
        tablets_routing_v2: false,
    };
    assert_eq!(
        Request::decode_in(Opcode::Execute, &v4_ext, &ctx).unwrap(),
        req
    );
    // Plain v4 without an id: the v4 layout; v5 without an id: refused.
    let Request::Execute(mut e) = req else {
        unreachable!()
    };
    e.result_metadata_id = None;
    let req = Request::Execute(e);
    assert_eq!(
        body(&req, ProtocolVersion::V4).unwrap(),
        [0x00, 0x02, 0xAA, 0xBB, 0x00, 0x01, 0x02]
    );
    assert!(matches!(
        body(&req, ProtocolVersion::V5),
        Err(crate::EncodeError::Invalid(_))
    ));
    // TABLETS_ROUTING_V2: one byte, the tablet version block, after the
    // parameters; read only on a connection that negotiated it.
    let Request::Execute(mut e) = req else {
        unreachable!()
    };
    e.tablet_version_block = Some(0xDC);
    let req = Request::Execute(e);
    let v2 = [0x00, 0x02, 0xAA, 0xBB, 0x00, 0x01, 0x02, 0xDC];
    assert_eq!(body(&req, ProtocolVersion::V4).unwrap(), v2);
    let ctx = RequestContext {
        tablets_routing_v2: true,
        ..RequestContext::new(ProtocolVersion::V4)
    };
    assert_eq!(Request::decode_in(Opcode::Execute, &v2, &ctx).unwrap(), req);
    // Without the extension the byte is left over: refused.
    assert!(Request::decode(Opcode::Execute, &v2, ProtocolVersion::V4).is_err());
    // With it, a missing byte is refused too.
    assert!(Request::decode_in(Opcode::Execute, &v2[..7], &ctx).is_err());
}

#[test]
fn v5_prepare_and_batch_layout() {
    let req = Request::Prepare(Prepare {
        query: Cow::Borrowed("SELECT"),
        keyspace: Some(Cow::Borrowed("ks")),
    });
    let mut expected = vec![0, 0, 0, 6];
    expected.extend_from_slice(b"SELECT");
    expected.extend_from_slice(&[0, 0, 0, 1, 0, 2]); // flags, keyspace
    expected.extend_from_slice(b"ks");
    assert_eq!(body(&req, ProtocolVersion::V5).unwrap(), expected);
    assert_eq!(
        Request::decode(Opcode::Prepare, &expected, ProtocolVersion::V5).unwrap(),
        req
    );
    assert!(matches!(
        body(&req, ProtocolVersion::V4),
        Err(crate::EncodeError::Invalid(_))
    ));
    let plain = Request::Prepare(Prepare::new("SELECT"));
    assert_eq!(
        body(&plain, ProtocolVersion::V5).unwrap(),
        [0, 0, 0, 6, b'S', b'E', b'L', b'E', b'C', b'T', 0, 0, 0, 0]
    );
    assert_eq!(
        body(&plain, ProtocolVersion::V4).unwrap(),
        [0, 0, 0, 6, b'S', b'E', b'L', b'E', b'C', b'T']
    );

    let req = Request::Batch(Batch {
        batch_type: BatchType::Logged,
        statements: Cow::Owned(Vec::new()),
        consistency: Consistency::One,
        serial_consistency: None,
        default_timestamp: None,
        keyspace: Some(Cow::Borrowed("k")),
        now_in_seconds: Some(5),
    });
    let expected = [
        0, 0, 0, // logged, no statements
        0, 1, // ONE
        0, 0, 0x01, 0x80, // [int] flags
        0, 1, b'k', // keyspace
        0, 0, 0, 5, // now_in_seconds
    ];
    assert_eq!(body(&req, ProtocolVersion::V5).unwrap(), expected);
    assert_eq!(
        Request::decode(Opcode::Batch, &expected, ProtocolVersion::V5).unwrap(),
        req
    );
}
