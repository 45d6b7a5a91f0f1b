//! Fuzz-style robustness of [`Response::decode`] on hostile bodies: random
//! bytes for every response opcode, and valid bodies mutated (bits flipped,
//! bytes inserted, deleted or overwritten, truncated, huge counts planted).
//!
//! Decoding must never panic; a huge count or length must be rejected before
//! anything is allocated for it (a `with_capacity` of a planted 2^31 count
//! would abort the process, which the planted-count mutations would reveal);
//! and whatever decodes must encode again and decode to the same value.
//!
//! Every body is tried on v4 (plain, and with ScyllaDB's extensions including
//! `SCYLLA_USE_METADATA_ID`) and on v5, with a corpus written for each.
//!
//! The generator is a fixed-seed SplitMix64, so failures are reproducible.

use scylla_driver_cql::frame::ProtocolVersion;
use std::net::SocketAddr;
use std::num::NonZeroU16;

use bytes::{Bytes, BytesMut};
use scylla_driver_cql::frame::response::event::StatusChangeType;
use scylla_driver_cql::frame::response::result::{
    Prepared, PreparedMetadata, ResultMetadata, Rows, SchemaChange, SchemaChangeTarget,
    SchemaChangeType, TableSpec,
};
use scylla_driver_cql::frame::response::{
    AuthChallenge, Authenticate, DbError, ErrorResponse, Event, OperationType, Ready, Response,
    ResponseContext, ResultBody, ScyllaExtensions, ShardingInfo, WriteType,
};
use scylla_driver_cql::frame::{Direction, MessageBody, Opcode};
use scylla_driver_cql::types::{ColumnSpec, ColumnType, NativeType};
use scylla_driver_cql::Consistency;

const RATE_LIMIT_CODE: i32 = 0xF000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn byte(&mut self) -> u8 {
        self.next() as u8
    }
}

fn spec(table: &str, name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec {
        keyspace: "ks".into(),
        table: table.into(),
        name: name.into(),
        typ,
    }
}

/// Valid responses covering every opcode and every variable-length part, as
/// a connection in `ctx` carries them.
fn corpus(ctx: &ResponseContext) -> Vec<Response> {
    let v5 = ctx.version == ProtocolVersion::V5;
    let cols = vec![
        spec("t", "id", ColumnType::Native(NativeType::Int)),
        spec(
            "t",
            "m",
            ColumnType::map(
                ColumnType::Native(NativeType::Text),
                ColumnType::Native(NativeType::Blob),
            ),
        ),
        spec(
            "t",
            "u",
            ColumnType::udt(
                "ks",
                "addr",
                vec![("street".into(), ColumnType::Native(NativeType::Text))],
            ),
        ),
    ];
    let mut md = ResultMetadata::with_columns(cols.clone());
    md.paging_state = Some(Box::new(Bytes::from_static(b"\x00\x01page")));
    if ctx.has_metadata_id() {
        md.new_metadata_id = Some(Box::new(Bytes::from_static(b"new-md-id")));
    }
    let rows = Rows::build(
        md,
        [
            vec![Some(&b"\0\0\0\x01"[..]), None, Some(&b""[..])],
            vec![None, Some(&b"abcdef"[..]), Some(&b"xyz"[..])],
        ],
    )
    .expect("valid rows");
    let mut per_column = cols.clone();
    per_column[1].table = "other".into();
    let rows_per_column = Rows::build(
        ResultMetadata::with_columns(per_column.clone()),
        [vec![Some(&b"1234"[..]), None, None]],
    )
    .expect("valid rows");
    let no_md = Rows::build(
        ResultMetadata {
            columns_count: 2,
            ..ResultMetadata::empty()
        },
        [vec![Some(&b"a"[..]), None]],
    )
    .expect("valid rows");
    let prepared = Prepared {
        id: Bytes::from_static(b"0123456789abcdef"),
        result_metadata_id: ctx.has_metadata_id().then(|| Bytes::from_static(b"md-id")),
        metadata: PreparedMetadata {
            flags: 1,
            pk_indexes: vec![1, 0],
            global_table_spec: Some(TableSpec {
                keyspace: "ks".into(),
                table: "t".into(),
            }),
            col_specs: cols.clone(),
        },
        result_metadata: ResultMetadata::with_columns(per_column),
    };
    let errors = [
        DbError::Unavailable {
            consistency: Consistency::Quorum,
            required: 3,
            alive: 1,
        },
        DbError::WriteTimeout {
            consistency: Consistency::One,
            received: 0,
            block_for: 1,
            write_type: WriteType::BatchLog,
            contentions: None,
        },
        DbError::WriteTimeout {
            consistency: Consistency::Serial,
            received: 0,
            block_for: 1,
            write_type: WriteType::Cas,
            contentions: v5.then_some(3),
        },
        DbError::ReadFailure {
            consistency: Consistency::All,
            received: 1,
            block_for: 3,
            num_failures: 2,
            reasons: if v5 {
                vec![
                    ("10.0.0.1".parse().expect("an address"), 1),
                    ("::2".parse().expect("an address"), 2),
                ]
            } else {
                Vec::new()
            },
            data_present: true,
        },
        DbError::FunctionFailure {
            keyspace: "ks".into(),
            function: "f".into(),
            arg_types: vec!["int".into(), "text".into()],
        },
        DbError::WriteFailure {
            consistency: Consistency::Two,
            received: 1,
            block_for: 2,
            num_failures: 1,
            reasons: if v5 {
                vec![("10.0.0.3".parse().expect("an address"), 0)]
            } else {
                Vec::new()
            },
            write_type: WriteType::Cas,
        },
        DbError::CdcWriteFailure,
        DbError::CasWriteUnknown {
            consistency: Consistency::Quorum,
            received: 1,
            block_for: 2,
        },
        DbError::AlreadyExists {
            keyspace: "ks".into(),
            table: "t".into(),
        },
        DbError::Unprepared {
            statement_id: Bytes::from_static(b"\x01\x02\x03"),
        },
        DbError::RateLimitReached {
            code: RATE_LIMIT_CODE,
            op_type: OperationType::Read,
            rejected_by_coordinator: true,
        },
        DbError::Other(0x7777),
    ];
    let ext = ScyllaExtensions {
        sharding: Some(Ok(ShardingInfo {
            shard_aware_port: Some(19042),
            ..ShardingInfo::murmur3(2, NonZeroU16::new(8).expect("8 > 0"), 12)
        })),
        lwt_metadata_mask: Some(0x8000_0000),
        rate_limit_error_code: Some(RATE_LIMIT_CODE),
        compression: vec!["lz4".into()],
        ..ScyllaExtensions::default()
    };
    let addr: SocketAddr = "[2001:db8::1]:9042".parse().expect("valid address");
    let mut out: Vec<Response> = errors
        .into_iter()
        .map(|error| {
            Response::Error(ErrorResponse {
                error,
                message: "something went wrong".into(),
            })
        })
        .collect();
    out.extend([
        Response::Ready(Ready),
        Response::Authenticate(Authenticate {
            authenticator: "org.apache.cassandra.auth.PasswordAuthenticator".into(),
        }),
        Response::AuthChallenge(AuthChallenge {
            token: Some(Bytes::from_static(b"challenge")),
        }),
        Response::Supported(ext.to_supported()),
        Response::Result(ResultBody::Void),
        Response::Result(ResultBody::Rows(rows)),
        Response::Result(ResultBody::Rows(rows_per_column)),
        Response::Result(ResultBody::Rows(no_md)),
        Response::Result(ResultBody::SetKeyspace("ks".into())),
        Response::Result(ResultBody::Prepared(Box::new(prepared))),
        Response::Result(ResultBody::SchemaChange(SchemaChange {
            change: SchemaChangeType::Created,
            target: SchemaChangeTarget::Function {
                keyspace: "ks".into(),
                name: "f".into(),
                arg_types: vec!["int".into()],
            },
        })),
        Response::Event(Event::StatusChange {
            change: StatusChangeType::Up,
            addr,
        }),
        Response::Event(Event::SchemaChange(SchemaChange {
            change: SchemaChangeType::Dropped,
            target: SchemaChangeTarget::Table {
                keyspace: "ks".into(),
                name: "t".into(),
            },
        })),
    ]);
    out
}

fn encode(r: &Response, version: ProtocolVersion) -> Vec<u8> {
    let mut b = BytesMut::new();
    r.encode_body(&mut b, version).expect("corpus encodes");
    b.to_vec()
}

fn mutate(rng: &mut Rng, body: &mut Vec<u8>) {
    for _ in 0..1 + rng.below(3) {
        let len = body.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                body[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                body[i] = rng.byte();
            }
            2 => {
                let i = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.byte()).collect();
                body.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = (1 + rng.below(8)).min(len - i);
                body.drain(i..i + n);
            }
            4 => body.truncate(rng.below(len + 1)),
            // Plant a huge or negative [int] count/length.
            5 if len >= 4 => {
                let i = rng.below(len - 3);
                let v: i32 = [i32::MAX, -1, -2, i32::MIN, 0x0100_0000][rng.below(5)];
                body[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            // Plant a huge [short] count/length.
            6 if len >= 2 => {
                let i = rng.below(len - 1);
                body[i..i + 2].copy_from_slice(&[0xff, 0xff]);
            }
            _ => body.push(rng.byte()),
        }
    }
}

/// Decodes `body`; whatever decodes must survive a second trip unchanged.
fn check(opcode: Opcode, body: &[u8], ctx: &ResponseContext) -> bool {
    let Ok(resp) = Response::decode(opcode, Bytes::copy_from_slice(body), ctx) else {
        return false;
    };
    if let Response::Result(ResultBody::Rows(rows)) = &resp {
        // Iteration cannot fail once decoded (skip column-less rows, whose
        // count may be huge without taking any bytes).
        if rows.columns_count() > 0 {
            let cells: usize = rows.raw_iter().map(|r| r.count()).sum();
            assert_eq!(cells, rows.rows_count() * rows.columns_count());
        }
    }
    let mut again = BytesMut::new();
    resp.encode_body(&mut again, ctx.version)
        .unwrap_or_else(|e| panic!("decoded {resp:?} but cannot encode it: {e}"));
    let back = Response::decode(opcode, again.freeze(), ctx)
        .unwrap_or_else(|e| panic!("re-encoded {resp:?} does not decode: {e}"));
    assert_eq!(back, resp, "from body {body:02x?}");
    true
}

fn contexts() -> [ResponseContext; 3] {
    let scylla = ResponseContext {
        version: ProtocolVersion::V4,
        rate_limit_error_code: Some(RATE_LIMIT_CODE),
        lwt_metadata_mask: Some(0x8000_0000),
        use_metadata_id: true,
    };
    [
        ResponseContext::default(),
        scylla,
        ResponseContext {
            version: ProtocolVersion::V5,
            use_metadata_id: false,
            ..scylla
        },
    ]
}

#[test]
fn mutated_valid_bodies() {
    let mut rng = Rng(0x5EED_0001);
    let mut decoded = 0;
    let mut total = 0;
    for ctx in contexts() {
        let corpus: Vec<(Opcode, Vec<u8>)> = corpus(&ctx)
            .iter()
            .map(|r| (r.opcode(), encode(r, ctx.version)))
            .collect();
        for (opcode, body) in &corpus {
            // The unmutated body decodes.
            assert!(check(*opcode, body, &ctx), "{opcode:?} corpus body");
            for _ in 0..1_000 {
                let mut b = body.clone();
                mutate(&mut rng, &mut b);
                decoded += usize::from(check(*opcode, &b, &ctx));
                total += 1;
            }
        }
    }
    assert!(total >= 40_000, "{total} cases");
    // Some mutations (of a cell, of a string) still decode: the check above
    // ran on them too.
    assert!(decoded > 0);
}

#[test]
fn random_bodies_for_every_opcode() {
    let mut rng = Rng(0x5EED_0002);
    let responses: Vec<Opcode> = Opcode::ALL
        .iter()
        .copied()
        .filter(|o| o.direction() == Direction::Response)
        .collect();
    for i in 0..20_000 {
        let opcode = responses[i % responses.len()];
        let len = rng.below(64);
        let mut body: Vec<u8> = (0..len).map(|_| rng.byte()).collect();
        // Often start with a plausible kind/code/type so decoding goes deeper.
        if opcode == Opcode::Result && len >= 4 && rng.below(2) == 0 {
            body[..4].copy_from_slice(&(1 + rng.below(5) as i32).to_be_bytes());
        }
        for ctx in contexts() {
            check(opcode, &body, &ctx);
        }
    }
}

#[test]
fn huge_counts_are_rejected_without_allocating() {
    let i32max = i32::MAX.to_be_bytes();
    let mut bodies: Vec<(Opcode, Vec<u8>)> = vec![
        // Rows: huge columns_count, then huge rows_count with one column.
        (
            Opcode::Result,
            [&[0, 0, 0, 2, 0, 0, 0, 0][..], &i32max, &[0; 4]].concat(),
        ),
        (
            Opcode::Result,
            [&[0, 0, 0, 2, 0, 0, 0, 4, 0, 0, 0, 1][..], &i32max].concat(),
        ),
        // Prepared: huge pk_count, then huge bind-marker count.
        (
            Opcode::Result,
            [&[0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0][..], &i32max].concat(),
        ),
        (
            Opcode::Result,
            [&[0, 0, 0, 4, 0, 0, 0, 0, 0, 0][..], &i32max, &[0; 4]].concat(),
        ),
        // SUPPORTED with 65535 keys.
        (Opcode::Supported, vec![0xff, 0xff, 0, 1, b'k']),
    ];
    // v5 READ_FAILURE with a huge reasonmap.
    let read_failure = [
        &[0, 0, 0x13, 0][..],
        &[0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2],
        &i32max,
        &[4, 10, 0, 0, 1, 0, 1, 1],
    ]
    .concat();
    assert!(Response::decode(
        Opcode::Error,
        Bytes::from(read_failure),
        &ResponseContext::default().with_version(ProtocolVersion::V5)
    )
    .is_err());
    // An event with a 65535-long string list.
    let mut ev = Vec::new();
    for s in ["SCHEMA_CHANGE", "CREATED", "FUNCTION", "k", "f"] {
        ev.extend_from_slice(&(s.len() as u16).to_be_bytes());
        ev.extend_from_slice(s.as_bytes());
    }
    ev.extend_from_slice(&[0xff, 0xff]);
    bodies.push((Opcode::Event, ev));
    for (opcode, body) in bodies {
        assert!(
            Response::decode(
                opcode,
                Bytes::from(body.clone()),
                &ResponseContext::default()
            )
            .is_err(),
            "{opcode:?} {body:02x?}"
        );
    }
}
