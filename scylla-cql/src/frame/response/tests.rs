//! Hand-written wire bytes for the responses, checked against the spec's
//! layouts byte by byte (round trips alone could hide a symmetric mistake).

use crate::frame::ProtocolVersion;
use std::num::NonZeroU16;

use bytes::{BufMut, Bytes, BytesMut};

use super::result::{ResultMetadata, Rows, TableSpec};
use super::*;
use crate::consistency::Consistency;
use crate::types::{ColumnSpec, ColumnType, NativeType};

fn decode(opcode: Opcode, body: &[u8]) -> Result<Response, DecodeError> {
    Response::decode(
        opcode,
        Bytes::copy_from_slice(body),
        &ResponseContext::default(),
    )
}

fn string(buf: &mut Vec<u8>, s: &str) {
    buf.put_u16(s.len() as u16);
    buf.put_slice(s.as_bytes());
}

fn encode(m: &impl MessageBody) -> Vec<u8> {
    let mut b = BytesMut::new();
    m.encode_body(&mut b, ProtocolVersion::V4).unwrap();
    b.to_vec()
}

#[test]
fn ready() {
    assert_eq!(decode(Opcode::Ready, &[]).unwrap(), Response::Ready(Ready));
    assert!(encode(&Ready).is_empty());
    assert!(matches!(
        decode(Opcode::Ready, &[0]),
        Err(DecodeError::TrailingBytes { remaining: 1, .. })
    ));
}

#[test]
fn request_opcodes_are_rejected() {
    for &op in Opcode::ALL {
        if op.direction() == Direction::Request {
            assert!(matches!(
                decode(op, &[]),
                Err(DecodeError::WrongDirection { .. })
            ));
        }
    }
}

#[test]
fn error_unavailable() {
    let mut body = vec![0x00, 0x00, 0x10, 0x00];
    string(&mut body, "Cannot achieve consistency level QUORUM");
    body.extend_from_slice(&[0x00, 0x04, 0, 0, 0, 2, 0, 0, 0, 1]);
    let expected = ErrorResponse {
        error: DbError::Unavailable {
            consistency: Consistency::Quorum,
            required: 2,
            alive: 1,
        },
        message: "Cannot achieve consistency level QUORUM".into(),
    };
    assert_eq!(
        decode(Opcode::Error, &body).unwrap(),
        Response::Error(expected.clone())
    );
    assert_eq!(encode(&expected), body);
    assert_eq!(expected.error.code(), 0x1000);
    let shown = expected.to_string();
    assert!(
        shown.contains("Cannot achieve consistency level QUORUM"),
        "{shown}"
    );
    assert!(shown.contains("alive"), "{shown}");
}

#[test]
fn error_unknown_code_and_rate_limit() {
    let mut body = vec![0x00, 0x00, 0xF0, 0x00];
    string(&mut body, "too fast");
    body.extend_from_slice(&[1, 0]);
    // Without the extension, the code is unknown: the message is kept and the
    // rest is not ours to judge.
    let Response::Error(e) = decode(Opcode::Error, &body).unwrap() else {
        panic!("not an error");
    };
    assert_eq!(e.error, DbError::Other(0xF000));
    assert_eq!(e.message, "too fast");
    let ctx = ResponseContext {
        version: ProtocolVersion::V4,
        rate_limit_error_code: Some(0xF000),
        lwt_metadata_mask: None,
        use_metadata_id: false,
    };
    let Response::Error(e) = Response::decode(Opcode::Error, Bytes::from(body), &ctx).unwrap()
    else {
        panic!("not an error");
    };
    assert_eq!(
        e.error,
        DbError::RateLimitReached {
            code: 0xF000,
            op_type: OperationType::Write,
            rejected_by_coordinator: false
        }
    );
}

fn scylla_supported_body() -> Vec<u8> {
    let entries: [(&str, &[&str]); 11] = [
        ("COMPRESSION", &["lz4", "snappy"]),
        ("SCYLLA_SHARD", &["3"]),
        ("SCYLLA_NR_SHARDS", &["12"]),
        (
            "SCYLLA_PARTITIONER",
            &["org.apache.cassandra.dht.Murmur3Partitioner"],
        ),
        ("SCYLLA_SHARDING_ALGORITHM", &["biased-token-round-robin"]),
        ("SCYLLA_SHARDING_IGNORE_MSB", &["12"]),
        ("SCYLLA_SHARD_AWARE_PORT", &["19042"]),
        ("SCYLLA_SHARD_AWARE_PORT_SSL", &["19142"]),
        (
            "SCYLLA_LWT_ADD_METADATA_MARK",
            &["LWT_OPTIMIZATION_META_BIT_MASK=2147483648"],
        ),
        ("SCYLLA_RATE_LIMIT_ERROR", &["ERROR_CODE=61440"]),
        ("SCYLLA_HOST_ID", &["6f1c2d3e-0000-4000-8000-00000000abcd"]),
    ];
    let mut body = Vec::new();
    body.put_u16(entries.len() as u16);
    for (k, vs) in entries {
        string(&mut body, k);
        body.put_u16(vs.len() as u16);
        for v in vs {
            string(&mut body, v);
        }
    }
    body
}

#[test]
fn supported_with_scylla_extensions() {
    let Response::Supported(s) = decode(Opcode::Supported, &scylla_supported_body()).unwrap()
    else {
        panic!("not SUPPORTED");
    };
    assert_eq!(s.get("SCYLLA_SHARD"), Some(&["3".to_owned()][..]));
    let ext = ScyllaExtensions::from_supported(&s);
    let sharding = ext.sharding.clone().unwrap().unwrap();
    assert_eq!(
        sharding,
        ShardingInfo {
            shard: 3,
            nr_shards: NonZeroU16::new(12).unwrap(),
            ignore_msb: 12,
            partitioner: "org.apache.cassandra.dht.Murmur3Partitioner".into(),
            algorithm: "biased-token-round-robin".into(),
            shard_aware_port: Some(19042),
            shard_aware_port_ssl: Some(19142),
        }
    );
    assert_eq!(sharding.sharder().nr_shards().get(), 12);
    assert_eq!(ext.lwt_metadata_mask, Some(0x8000_0000));
    assert_eq!(ext.rate_limit_error_code, Some(61440));
    assert_eq!(
        ext.host_id.unwrap().to_string(),
        "6f1c2d3e-0000-4000-8000-00000000abcd"
    );
    assert_eq!(ext.compression, ["lz4", "snappy"]);
    assert!(ext.problems.is_empty());
    let ctx = ResponseContext::from_extensions(&ext);
    assert_eq!(ctx.rate_limit_error_code, Some(61440));
    // Writing the typed form back gives the same options.
    assert_eq!(ext.to_supported(), s);
}

#[test]
fn supported_without_and_with_broken_extensions() {
    let ext = ScyllaExtensions::from_supported(&Supported::default());
    assert_eq!(ext, ScyllaExtensions::default());
    assert!(ext.sharding.is_none());

    let mut s = Supported::default();
    s.insert("SCYLLA_SHARD", vec!["1".into()]);
    assert_eq!(
        ScyllaExtensions::from_supported(&s).sharding,
        Some(Err(ExtensionError::MissingKey {
            key: "SCYLLA_NR_SHARDS"
        }))
    );
    s.insert("SCYLLA_NR_SHARDS", vec!["zero".into()]);
    assert!(matches!(
        ScyllaExtensions::from_supported(&s).sharding,
        Some(Err(ExtensionError::Malformed {
            key: "SCYLLA_NR_SHARDS",
            ..
        }))
    ));
    s.insert("SCYLLA_NR_SHARDS", vec!["1".into()]);
    assert_eq!(
        ScyllaExtensions::from_supported(&s).sharding,
        Some(Err(ExtensionError::ShardOutOfRange {
            shard: 1,
            nr_shards: 1
        }))
    );
    s.insert("SCYLLA_SHARD", vec!["0".into()]);
    s.insert("SCYLLA_SHARDING_IGNORE_MSB", vec!["12".into()]);
    s.insert("SCYLLA_PARTITIONER", vec!["RandomPartitioner".into()]);
    s.insert("SCYLLA_SHARDING_ALGORITHM", vec!["x".into()]);
    assert!(matches!(
        ScyllaExtensions::from_supported(&s).sharding,
        Some(Err(ExtensionError::UnsupportedPartitioner(_)))
    ));
    s.insert(
        "SCYLLA_PARTITIONER",
        vec!["org.apache.cassandra.partitioners.Murmur3Partitioner".into()],
    );
    assert!(matches!(
        ScyllaExtensions::from_supported(&s).sharding,
        Some(Err(ExtensionError::UnsupportedAlgorithm(_)))
    ));
    s.insert("SCYLLA_RATE_LIMIT_ERROR", vec!["CODE=1".into()]);
    s.insert("SCYLLA_HOST_ID", vec!["not-a-uuid".into()]);
    let ext = ScyllaExtensions::from_supported(&s);
    assert_eq!(ext.rate_limit_error_code, None);
    assert_eq!(ext.host_id, None);
    assert_eq!(ext.problems.len(), 2);
}

fn rows_two_columns_body() -> Vec<u8> {
    let mut b = Vec::new();
    b.put_i32(0x0002); // kind: Rows
    b.put_i32(0x0001 | 0x0002); // Global_tables_spec | Has_more_pages
    b.put_i32(2); // columns_count
    b.put_i32(3); // paging state
    b.put_slice(b"\x01\x02\x03");
    string(&mut b, "ks");
    string(&mut b, "t");
    string(&mut b, "id");
    b.put_u16(0x0009); // int
    string(&mut b, "name");
    b.put_u16(0x000D); // varchar
    b.put_i32(2); // rows_count
    b.put_i32(4);
    b.put_i32(7);
    b.put_i32(3);
    b.put_slice(b"abc");
    b.put_i32(4);
    b.put_i32(8);
    b.put_i32(-1); // null
    b
}

#[test]
fn rows_with_two_columns_and_paging_state() {
    let body = Bytes::from(rows_two_columns_body());
    let Response::Result(ResultBody::Rows(rows)) =
        Response::decode(Opcode::Result, body.clone(), &ResponseContext::default()).unwrap()
    else {
        panic!("not rows");
    };
    assert_eq!(rows.rows_count(), 2);
    assert_eq!(rows.columns_count(), 2);
    assert_eq!(rows.paging_state().unwrap().as_ref(), b"\x01\x02\x03");
    let md = rows.metadata();
    assert_eq!(
        md.global_table_spec.as_deref(),
        Some(&TableSpec {
            keyspace: "ks".into(),
            table: "t".into()
        })
    );
    let specs = md.col_specs.as_ref().unwrap();
    assert_eq!(specs[1].name, "name");
    assert_eq!(specs[1].typ, ColumnType::Native(NativeType::Text));
    assert_eq!(specs[1].keyspace, "ks");
    // Zero-copy: the cells point into the body.
    let cells = rows.raw_rows();
    assert_eq!(
        cells.as_ptr() as usize + cells.len(),
        body.as_ptr() as usize + body.len()
    );
    let got: Vec<Vec<Option<&[u8]>>> = rows.raw_iter().map(|r| r.collect()).collect();
    assert_eq!(
        got,
        vec![
            vec![Some(&[0, 0, 0, 7][..]), Some(&b"abc"[..])],
            vec![Some(&[0, 0, 0, 8][..]), None],
        ]
    );
    assert_eq!(encode(&ResultBody::Rows(rows)), body.to_vec());
}

#[test]
fn rows_structure_is_validated() {
    let good = rows_two_columns_body();
    // Missing last cell, extra bytes, a cell longer than the body.
    let mut short = good.clone();
    short.truncate(good.len() - 4);
    let mut long = good.clone();
    long.push(0);
    let mut overlong = good.clone();
    let n = overlong.len();
    overlong[n - 4..].copy_from_slice(&100i32.to_be_bytes());
    for bad in [short, long, overlong] {
        assert!(decode(Opcode::Result, &bad).is_err());
    }
}

#[test]
fn rows_build_checks_cell_count() {
    let md = ResultMetadata::with_columns(vec![ColumnSpec {
        keyspace: "k".into(),
        table: "t".into(),
        name: "a".into(),
        typ: ColumnType::Native(NativeType::Blob),
    }]);
    assert!(Rows::build(md.clone(), [vec![Some(b"x"), None]]).is_err());
    let rows = Rows::build(md, [vec![Some(b"x")], vec![None]]).unwrap();
    assert_eq!(rows.rows_count(), 2);
    assert_eq!(rows.raw_iter().map(|r| r.len()).collect::<Vec<_>>(), [1, 1]);
}

#[test]
fn no_metadata_keeps_the_column_count() {
    let mut b = Vec::new();
    b.put_i32(0x0002);
    b.put_i32(0x0004); // No_metadata
    b.put_i32(1);
    b.put_i32(1);
    b.put_i32(0); // an empty (not null) cell
    let Response::Result(ResultBody::Rows(rows)) = decode(Opcode::Result, &b).unwrap() else {
        panic!("not rows");
    };
    assert_eq!(rows.metadata().col_specs, None);
    assert_eq!(rows.columns_count(), 1);
    assert_eq!(
        rows.raw_iter().next().unwrap().collect::<Vec<_>>(),
        [Some(&[][..])]
    );
}

#[test]
fn prepared_exposes_lwt_flag() {
    let mut b = Vec::new();
    b.put_i32(0x0004);
    b.put_u16(2);
    b.put_slice(b"\xAB\xCD");
    b.put_i32(i32::MIN | 0x0001); // LWT mark | Global_tables_spec
    b.put_i32(1);
    b.put_i32(1);
    b.put_u16(0);
    string(&mut b, "ks");
    string(&mut b, "t");
    string(&mut b, "pk");
    b.put_u16(0x0002);
    b.put_i32(0x0004);
    b.put_i32(0);
    let Response::Result(ResultBody::Prepared(p)) = decode(Opcode::Result, &b).unwrap() else {
        panic!("not prepared");
    };
    assert_eq!(p.id.as_ref(), b"\xAB\xCD");
    assert_eq!(p.metadata.pk_indexes, [0]);
    let ctx = ResponseContext {
        version: ProtocolVersion::V4,
        rate_limit_error_code: None,
        lwt_metadata_mask: Some(0x8000_0000),
        use_metadata_id: false,
    };
    assert!(p.is_lwt(&ctx));
    assert!(!p.is_lwt(&ResponseContext::default()));
    assert_eq!(encode(&ResultBody::Prepared(p)), b);
}

#[test]
fn event_status_change() {
    let mut b = Vec::new();
    string(&mut b, "STATUS_CHANGE");
    string(&mut b, "DOWN");
    b.put_slice(&[4, 10, 0, 0, 1, 0, 0, 0x23, 0x52]);
    let expected = Event::StatusChange {
        change: event::StatusChangeType::Down,
        addr: "10.0.0.1:9042".parse().unwrap(),
    };
    assert_eq!(
        decode(Opcode::Event, &b).unwrap(),
        Response::Event(expected.clone())
    );
    assert_eq!(encode(&expected), b);
}

/// Decodes `body` on a connection in `ctx`, and checks that encoding the
/// result for the same version gives `body` back.
fn v5_trip(opcode: Opcode, body: &[u8], ctx: &ResponseContext) -> Response {
    let resp = Response::decode(opcode, Bytes::copy_from_slice(body), ctx).unwrap();
    let mut again = BytesMut::new();
    resp.encode_body(&mut again, ctx.version).unwrap();
    assert_eq!(&again[..], body);
    resp
}

fn v5() -> ResponseContext {
    ResponseContext::default().with_version(ProtocolVersion::V5)
}

#[test]
fn v5_prepared_with_metadata_id() {
    let mut body = vec![0, 0, 0, 4]; // kind Prepared
    body.extend_from_slice(&[0, 2, 0xAA, 0xBB]); // id
    body.extend_from_slice(&[0, 3, 7, 8, 9]); // result metadata id
    body.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]); // global, 1 marker, pk [0]
    string(&mut body, "ks");
    string(&mut body, "t");
    string(&mut body, "k");
    body.extend_from_slice(&[0, 9]); // int
    body.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0]); // result: No_metadata, 0 columns
    let Response::Result(ResultBody::Prepared(p)) = v5_trip(Opcode::Result, &body, &v5()) else {
        panic!("not prepared");
    };
    assert_eq!(&p.id[..], &[0xAA, 0xBB]);
    assert_eq!(p.result_metadata_id.as_deref(), Some(&[7u8, 8, 9][..]));
    assert_eq!(p.metadata.pk_indexes, vec![0]);
    // v4 with SCYLLA_USE_METADATA_ID reads the same bytes.
    let ext = ResponseContext {
        use_metadata_id: true,
        ..ResponseContext::default()
    };
    assert_eq!(
        v5_trip(Opcode::Result, &body, &ext),
        Response::Result(ResultBody::Prepared(p.clone()))
    );
    // Plain v4 reads the metadata id as the start of the metadata: garbage.
    assert_ne!(
        decode(Opcode::Result, &body).ok(),
        Some(Response::Result(ResultBody::Prepared(p.clone())))
    );
    // v5 without a metadata id cannot be written.
    let mut p = *p;
    p.result_metadata_id = None;
    let mut buf = BytesMut::new();
    assert!(matches!(
        ResultBody::Prepared(Box::new(p)).encode_body(&mut buf, ProtocolVersion::V5),
        Err(EncodeError::Invalid(_))
    ));
}

#[test]
fn rows_with_metadata_changed() {
    let mut body = vec![0, 0, 0, 2]; // kind Rows
    body.extend_from_slice(&[0, 0, 0, 0x0B]); // Global | Has_more_pages | Metadata_changed
    body.extend_from_slice(&[0, 0, 0, 1]); // one column
    body.extend_from_slice(&[0, 0, 0, 2, 0xCA, 0xFE]); // paging state
    body.extend_from_slice(&[0, 2, 0x11, 0x22]); // new metadata id
    string(&mut body, "ks");
    string(&mut body, "t");
    string(&mut body, "v");
    body.extend_from_slice(&[0, 0x0D]); // varchar
    body.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, b'x']); // one row
    for ctx in [v5(), ResponseContext::default()] {
        let Response::Result(ResultBody::Rows(rows)) = v5_trip(Opcode::Result, &body, &ctx) else {
            panic!("not rows");
        };
        let md = rows.metadata();
        assert_eq!(
            md.new_metadata_id.as_deref().map(|id| &id[..]),
            Some(&[0x11u8, 0x22][..])
        );
        assert_eq!(
            md.paging_state.as_deref().map(|p| &p[..]),
            Some(&[0xCAu8, 0xFE][..])
        );
        assert_eq!(md.col_specs.as_ref().map(|c| c.len()), Some(1));
        assert_eq!(rows.rows_count(), 1);
    }
    // Metadata_changed with No_metadata contradicts the spec.
    let bad = [
        0, 0, 0, 2, 0, 0, 0, 0x0C, 0, 0, 0, 0, 0, 1, 0x11, 0, 0, 0, 0,
    ];
    assert!(matches!(
        Response::decode(Opcode::Result, Bytes::copy_from_slice(&bad), &v5()),
        Err(DecodeError::InvalidValue { .. })
    ));
}

#[test]
fn v5_read_failure_with_reasonmap() {
    let mut body = vec![0x00, 0x00, 0x13, 0x00];
    string(&mut body, "Operation failed");
    body.extend_from_slice(&[0x00, 0x04]); // QUORUM
    body.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]); // received, block_for
    body.extend_from_slice(&[0, 0, 0, 2]); // two reasons
    body.extend_from_slice(&[4, 127, 0, 0, 2, 0x00, 0x01]); // 127.0.0.2 -> 1
    body.extend_from_slice(&[
        16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x00, 0x05,
    ]); // ::1 -> 5
    body.push(1); // data present
    let expected = ErrorResponse {
        error: DbError::ReadFailure {
            consistency: Consistency::Quorum,
            received: 1,
            block_for: 2,
            num_failures: 2,
            reasons: vec![
                ("127.0.0.2".parse().unwrap(), 1),
                ("::1".parse().unwrap(), 5),
            ],
            data_present: true,
        },
        message: "Operation failed".into(),
    };
    assert_eq!(
        v5_trip(Opcode::Error, &body, &v5()),
        Response::Error(expected.clone())
    );
    // On v4 the same error is the count alone.
    let mut v4 = BytesMut::new();
    expected.encode_body(&mut v4, ProtocolVersion::V4).unwrap();
    let mut expected_v4 = vec![0x00, 0x00, 0x13, 0x00];
    string(&mut expected_v4, "Operation failed");
    expected_v4.extend_from_slice(&[0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 2, 1]);
    assert_eq!(&v4[..], &expected_v4[..]);
}

#[test]
fn v5_write_timeout_cas_and_new_codes() {
    let mut body = vec![0x00, 0x00, 0x11, 0x00];
    string(&mut body, "");
    body.extend_from_slice(&[0x00, 0x08, 0, 0, 0, 0, 0, 0, 0, 1]); // SERIAL, 0/1
    string(&mut body, "CAS");
    body.extend_from_slice(&[0x00, 0x03]); // contentions
    let Response::Error(e) = v5_trip(Opcode::Error, &body, &v5()) else {
        panic!("not an error");
    };
    assert!(matches!(
        e.error,
        DbError::WriteTimeout {
            contentions: Some(3),
            ..
        }
    ));
    // v4 has no contentions: the same bytes leave two trailing.
    assert!(decode(Opcode::Error, &body).is_err());

    let mut body = vec![0x00, 0x00, 0x17, 0x00];
    string(&mut body, "");
    body.extend_from_slice(&[0x00, 0x04, 0, 0, 0, 1, 0, 0, 0, 2]);
    assert_eq!(
        v5_trip(Opcode::Error, &body, &v5()),
        Response::Error(ErrorResponse {
            error: DbError::CasWriteUnknown {
                consistency: Consistency::Quorum,
                received: 1,
                block_for: 2
            },
            message: String::new(),
        })
    );
    let mut body = vec![0x00, 0x00, 0x16, 0x00];
    string(&mut body, "cdc");
    assert!(matches!(
        v5_trip(Opcode::Error, &body, &v5()),
        Response::Error(ErrorResponse {
            error: DbError::CdcWriteFailure,
            ..
        })
    ));
}
