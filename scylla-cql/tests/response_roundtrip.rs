//! Property tests: every response message, encoded then decoded, is itself.
//!
//! The strategies cover every error code, every result kind, rows with random
//! cell layouts (nulls, empty cells), metadata with and without a global
//! table spec, paging state or column specs, prepared statements with
//! partition-key indexes, and every event kind; on v4 (with and without
//! `SCYLLA_USE_METADATA_ID`) and v5 where the body depends on the version.

use scylla_driver_cql::frame::ProtocolVersion;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::num::NonZeroU16;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use scylla_driver_cql::frame::response::error::KNOWN_CODES;
use scylla_driver_cql::frame::response::event::{
    ClientRoutesChangeType, StatusChangeType, TopologyChangeType,
};
use scylla_driver_cql::frame::response::result::{
    Prepared, PreparedMetadata, ResultMetadata, Rows, SchemaChange, SchemaChangeTarget,
    SchemaChangeType, SpecCache, TableSpec,
};
use scylla_driver_cql::frame::response::{
    AuthChallenge, AuthSuccess, Authenticate, DbError, ErrorResponse, Event, OperationType, Ready,
    Response, ResponseContext, ResultBody, ScyllaExtensions, ShardingInfo, Supported, WriteType,
};
use scylla_driver_cql::frame::{MessageBody, Opcode};
use scylla_driver_cql::types::{ColumnSpec, ColumnType, NativeType};
use scylla_driver_cql::Consistency;
use uuid::Uuid;

const CASES: u32 = 300;

fn round_trip(resp: &Response, ctx: &ResponseContext) -> Result<(), TestCaseError> {
    let mut buf = BytesMut::new();
    resp.encode_body(&mut buf, ctx.version)
        .map_err(|e| TestCaseError::fail(format!("encode: {e}")))?;
    let decoded = Response::decode(resp.opcode(), buf.freeze(), ctx)
        .map_err(|e| TestCaseError::fail(format!("decode: {e}")))?;
    prop_assert_eq!(&decoded, resp);
    Ok(())
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_é]{0,8}"
}

fn blob(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn consistency() -> impl Strategy<Value = Consistency> {
    prop::sample::select(Consistency::ALL.to_vec())
}

fn column_type() -> impl Strategy<Value = ColumnType> {
    let leaf = prop::sample::select(vec![
        ColumnType::Native(NativeType::Ascii),
        ColumnType::Native(NativeType::BigInt),
        ColumnType::Native(NativeType::Blob),
        ColumnType::Native(NativeType::Boolean),
        ColumnType::Native(NativeType::Counter),
        ColumnType::Native(NativeType::Decimal),
        ColumnType::Native(NativeType::Double),
        ColumnType::Native(NativeType::Float),
        ColumnType::Native(NativeType::Int),
        ColumnType::Native(NativeType::Text),
        ColumnType::Native(NativeType::Timestamp),
        ColumnType::Native(NativeType::Uuid),
        ColumnType::Native(NativeType::Varint),
        ColumnType::Native(NativeType::Timeuuid),
        ColumnType::Native(NativeType::Inet),
        ColumnType::Native(NativeType::Date),
        ColumnType::Native(NativeType::Time),
        ColumnType::Native(NativeType::SmallInt),
        ColumnType::Native(NativeType::TinyInt),
        ColumnType::Native(NativeType::Duration),
    ]);
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(ColumnType::list),
            inner.clone().prop_map(ColumnType::set),
            (inner.clone(), inner.clone()).prop_map(|(k, v)| ColumnType::map(k, v)),
            vec(inner.clone(), 0..3).prop_map(ColumnType::Tuple),
            (name(), name(), vec((name(), inner), 0..3))
                .prop_map(|(keyspace, name, fields)| { ColumnType::udt(keyspace, name, fields) }),
        ]
    })
}

fn table_spec() -> impl Strategy<Value = TableSpec> {
    (name(), name()).prop_map(|(keyspace, table)| TableSpec { keyspace, table })
}

/// Column specs, with a global table spec or each with its own table.
fn col_specs(max: usize) -> impl Strategy<Value = (Option<TableSpec>, Vec<ColumnSpec>)> {
    let per_column = vec(
        (table_spec(), name(), column_type()).prop_map(|(t, name, typ)| ColumnSpec {
            keyspace: t.keyspace,
            table: t.table,
            name,
            typ,
        }),
        0..max,
    )
    .prop_map(|specs| (None, specs));
    let global = (table_spec(), vec((name(), column_type()), 0..max)).prop_map(|(t, cols)| {
        let specs = cols
            .into_iter()
            .map(|(name, typ)| ColumnSpec {
                keyspace: t.keyspace.clone(),
                table: t.table.clone(),
                name,
                typ,
            })
            .collect();
        (Some(t), specs)
    });
    prop_oneof![per_column, global]
}

fn result_metadata() -> impl Strategy<Value = ResultMetadata> {
    let with_specs = (col_specs(5), option::of(blob(16)), option::of(blob(16))).prop_map(
        |((global, specs), paging, new_id)| ResultMetadata {
            columns_count: specs.len(),
            paging_state: paging.map(Box::new),
            new_metadata_id: new_id.map(Box::new),
            global_table_spec: global.map(Into::into),
            col_specs: Some(specs.into()),
        },
    );
    let no_metadata =
        (0usize..5, option::of(blob(16))).prop_map(|(columns_count, paging_state)| {
            ResultMetadata {
                columns_count,
                paging_state: paging_state.map(Box::new),
                new_metadata_id: None,
                global_table_spec: None,
                col_specs: None,
            }
        });
    prop_oneof![with_specs, no_metadata]
}

fn rows() -> impl Strategy<Value = Rows> {
    result_metadata().prop_flat_map(|md| {
        let cell = option::of(vec(any::<u8>(), 0..6));
        let row = vec(cell, md.columns_count..=md.columns_count);
        vec(row, 0..6)
            .prop_map(move |rows| Rows::build(md.clone(), rows).expect("rows match their metadata"))
    })
}

/// A connection: v4 with or without `SCYLLA_USE_METADATA_ID`, or v5.
fn context() -> impl Strategy<Value = ResponseContext> {
    (
        prop::sample::select(ProtocolVersion::ALL.to_vec()),
        any::<bool>(),
    )
        .prop_map(|(version, use_metadata_id)| ResponseContext {
            version,
            use_metadata_id,
            ..ResponseContext::default()
        })
}

/// A Prepared result as a connection in `ctx` sends it.
fn prepared(ctx: ResponseContext) -> impl Strategy<Value = Prepared> {
    (
        blob(20),
        blob(16),
        any::<i32>(),
        vec(any::<u16>(), 0..4),
        col_specs(5),
        result_metadata(),
    )
        .prop_map(
            move |(id, md_id, flags, pk_indexes, (global, specs), result_metadata)| {
                // The Global_tables_spec bit follows the global spec, as encoded.
                let flags = if global.is_some() {
                    flags | 1
                } else {
                    flags & !1
                };
                Prepared {
                    id,
                    result_metadata_id: ctx.has_metadata_id().then_some(md_id),
                    metadata: PreparedMetadata {
                        flags,
                        pk_indexes,
                        global_table_spec: global,
                        col_specs: specs,
                    },
                    result_metadata,
                }
            },
        )
}

fn schema_change() -> impl Strategy<Value = SchemaChange> {
    let change = prop::sample::select(vec![
        SchemaChangeType::Created,
        SchemaChangeType::Updated,
        SchemaChangeType::Dropped,
    ]);
    let target = prop_oneof![
        name().prop_map(|keyspace| SchemaChangeTarget::Keyspace { keyspace }),
        (name(), name()).prop_map(|(keyspace, name)| SchemaChangeTarget::Table { keyspace, name }),
        (name(), name()).prop_map(|(keyspace, name)| SchemaChangeTarget::Type { keyspace, name }),
        (name(), name(), vec(name(), 0..3)).prop_map(|(keyspace, name, arg_types)| {
            SchemaChangeTarget::Function {
                keyspace,
                name,
                arg_types,
            }
        }),
        (name(), name(), vec(name(), 0..3)).prop_map(|(keyspace, name, arg_types)| {
            SchemaChangeTarget::Aggregate {
                keyspace,
                name,
                arg_types,
            }
        }),
    ];
    (change, target).prop_map(|(change, target)| SchemaChange { change, target })
}

fn socket_addr() -> impl Strategy<Value = SocketAddr> {
    let ip = prop_oneof![
        any::<[u8; 4]>().prop_map(|o| IpAddr::V4(Ipv4Addr::from(o))),
        any::<[u8; 16]>().prop_map(|o| IpAddr::V6(Ipv6Addr::from(o))),
    ];
    (ip, any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(ip, port))
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (
            prop::sample::select(vec![
                TopologyChangeType::NewNode,
                TopologyChangeType::RemovedNode
            ]),
            socket_addr()
        )
            .prop_map(|(change, addr)| Event::TopologyChange { change, addr }),
        (
            prop::sample::select(vec![StatusChangeType::Up, StatusChangeType::Down]),
            socket_addr()
        )
            .prop_map(|(change, addr)| Event::StatusChange { change, addr }),
        schema_change().prop_map(Event::SchemaChange),
        (vec(name(), 0..3), vec(name(), 0..3)).prop_map(|(connection_ids, host_ids)| {
            Event::ClientRoutesChange {
                change: ClientRoutesChangeType::UpdateNodes,
                connection_ids,
                host_ids,
            }
        }),
    ]
}

fn write_type() -> impl Strategy<Value = WriteType> {
    prop_oneof![
        prop::sample::select(vec![
            WriteType::Simple,
            WriteType::Batch,
            WriteType::UnloggedBatch,
            WriteType::Counter,
            WriteType::BatchLog,
            WriteType::Cas,
            WriteType::View,
            WriteType::Cdc,
        ]),
        "[a-z]{0,6}".prop_map(WriteType::Other),
    ]
}

/// A rate-limit code outside the spec's codes (as ScyllaDB chooses it).
fn rate_limit_code() -> impl Strategy<Value = i32> {
    any::<i32>().prop_filter("not a spec code", |c| !KNOWN_CODES.contains(c))
}

/// `<numfailures>` and `<reasonmap>` as `version` carries them.
fn failures(version: ProtocolVersion) -> impl Strategy<Value = (i32, Vec<(IpAddr, u16)>)> {
    let ip = prop_oneof![
        any::<[u8; 4]>().prop_map(|o| IpAddr::V4(Ipv4Addr::from(o))),
        any::<[u8; 16]>().prop_map(|o| IpAddr::V6(Ipv6Addr::from(o))),
    ];
    (any::<i32>(), vec((ip, any::<u16>()), 0..4)).prop_map(move |(n, reasons)| match version {
        ProtocolVersion::V4 => (n, Vec::new()),
        ProtocolVersion::V5 => (reasons.len() as i32, reasons),
    })
}

/// Every error code as `version` carries it, with the rate-limit code that
/// decoding must be told.
fn db_error(version: ProtocolVersion) -> impl Strategy<Value = (DbError, i32)> {
    let c = consistency;
    let v5 = version == ProtocolVersion::V5;
    let err = prop_oneof![
        prop::sample::select(vec![
            DbError::ServerError,
            DbError::ProtocolError,
            DbError::AuthenticationError,
            DbError::Overloaded,
            DbError::IsBootstrapping,
            DbError::TruncateError,
            DbError::SyntaxError,
            DbError::Unauthorized,
            DbError::Invalid,
            DbError::ConfigError,
            DbError::CdcWriteFailure,
        ]),
        (c(), any::<i32>(), any::<i32>()).prop_map(|(consistency, received, block_for)| {
            DbError::CasWriteUnknown {
                consistency,
                received,
                block_for,
            }
        }),
        (c(), any::<i32>(), any::<i32>()).prop_map(|(consistency, required, alive)| {
            DbError::Unavailable {
                consistency,
                required,
                alive,
            }
        }),
        (c(), any::<i32>(), any::<i32>(), write_type(), any::<u16>()).prop_map(
            move |(consistency, received, block_for, write_type, contentions)| {
                let contentions = (v5 && write_type == WriteType::Cas).then_some(contentions);
                DbError::WriteTimeout {
                    consistency,
                    received,
                    block_for,
                    write_type,
                    contentions,
                }
            }
        ),
        (c(), any::<i32>(), any::<i32>(), any::<bool>()).prop_map(
            |(consistency, received, block_for, data_present)| DbError::ReadTimeout {
                consistency,
                received,
                block_for,
                data_present,
            }
        ),
        (
            c(),
            any::<i32>(),
            any::<i32>(),
            failures(version),
            any::<bool>()
        )
            .prop_map(
                |(consistency, received, block_for, (num_failures, reasons), data_present)| {
                    DbError::ReadFailure {
                        consistency,
                        received,
                        block_for,
                        num_failures,
                        reasons,
                        data_present,
                    }
                }
            ),
        (name(), name(), vec(name(), 0..3)).prop_map(|(keyspace, function, arg_types)| {
            DbError::FunctionFailure {
                keyspace,
                function,
                arg_types,
            }
        }),
        (
            c(),
            any::<i32>(),
            any::<i32>(),
            failures(version),
            write_type()
        )
            .prop_map(
                |(consistency, received, block_for, (num_failures, reasons), write_type)| {
                    DbError::WriteFailure {
                        consistency,
                        received,
                        block_for,
                        num_failures,
                        reasons,
                        write_type,
                    }
                }
            ),
        (name(), name()).prop_map(|(keyspace, table)| DbError::AlreadyExists { keyspace, table }),
        blob(20).prop_map(|statement_id| DbError::Unprepared { statement_id }),
    ];
    prop_oneof![
        (err, rate_limit_code()),
        (rate_limit_code(), any::<u8>(), any::<bool>()).prop_map(|(code, op, by_coordinator)| {
            (
                DbError::RateLimitReached {
                    code,
                    op_type: OperationType::from_code(op),
                    rejected_by_coordinator: by_coordinator,
                },
                code,
            )
        }),
        (rate_limit_code(), rate_limit_code())
            .prop_filter("distinct codes", |(a, b)| a != b)
            .prop_map(|(other, rate)| (DbError::Other(other), rate)),
    ]
}

fn sharding_info() -> impl Strategy<Value = ShardingInfo> {
    (
        1u16..,
        any::<u16>(),
        any::<u8>(),
        option::of(any::<u16>()),
        option::of(any::<u16>()),
    )
        .prop_map(|(nr, shard, msb, port, port_ssl)| {
            // nr >= 1 by the range above.
            let nr_shards = NonZeroU16::new(nr).expect("positive");
            ShardingInfo {
                shard_aware_port: port,
                shard_aware_port_ssl: port_ssl,
                ..ShardingInfo::murmur3(shard % nr, nr_shards, msb)
            }
        })
}

fn extensions() -> impl Strategy<Value = ScyllaExtensions> {
    (
        option::of(sharding_info()),
        option::of(any::<u32>()),
        option::of(any::<i32>()),
        option::of(any::<[u8; 16]>()),
        any::<(bool, bool, bool)>(),
        vec("[a-z0-9]{1,6}", 0..3),
        vec("[0-9.]{1,6}", 0..3),
        vec("[0-9/v]{1,6}", 0..3),
    )
        .prop_map(
            |(sharding, lwt, rate, host, (tablets, tablets_v2, md_id), compression, cql, proto)| {
                ScyllaExtensions {
                    sharding: sharding.map(Ok),
                    lwt_metadata_mask: lwt,
                    rate_limit_error_code: rate,
                    host_id: host.map(Uuid::from_bytes),
                    tablets_routing_v1: tablets,
                    tablets_routing_v2: tablets_v2,
                    use_metadata_id: md_id,
                    compression,
                    cql_versions: cql,
                    protocol_versions: proto,
                    problems: Vec::new(),
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn errors(
        (version, (error, rate_code)) in prop::sample::select(ProtocolVersion::ALL.to_vec())
            .prop_flat_map(|v| (Just(v), db_error(v))),
        message in name(),
    ) {
        let ctx = ResponseContext { version, rate_limit_error_code: Some(rate_code), ..ResponseContext::default() };
        round_trip(&Response::Error(ErrorResponse { error, message }), &ctx)?;
    }

    /// Decoding through a shared spec cache gives what plain decoding gives,
    /// for results seen once or again (hits), in any order.
    #[test]
    fn spec_cache_decodes_like_plain_decoding(
        all in vec(rows(), 1..6),
        order in vec(0usize..64, 1..24),
    ) {
        let mut cache = SpecCache::new();
        for i in order {
            let rows = &all[i % all.len()];
            let mut body = BytesMut::new();
            ResultBody::Rows(rows.clone()).encode_body(&mut body, ProtocolVersion::V4).unwrap();
            let body = body.freeze();
            let ctx = ResponseContext::default();
            let plain = Response::decode(Opcode::Result, body.clone(), &ctx).unwrap();
            let cached = Response::decode_cached(Opcode::Result, body, &ctx, Some(&mut cache)).unwrap();
            prop_assert_eq!(&plain, &cached);
            prop_assert_eq!(cached, Response::Result(ResultBody::Rows(rows.clone())));
        }
        // Each distinct column set is decoded at most once (the cache holds
        // more entries than there are distinct results here).
        let (_, misses) = cache.stats();
        prop_assert!(misses as usize <= all.len(), "{} misses for {} results", misses, all.len());
    }

    #[test]
    fn handshake_messages(class in name(), challenge in option::of(blob(32)), success in option::of(blob(32))) {
        let ctx = ResponseContext::default();
        round_trip(&Response::Ready(Ready), &ctx)?;
        round_trip(&Response::Authenticate(Authenticate { authenticator: class }), &ctx)?;
        round_trip(&Response::AuthChallenge(AuthChallenge { token: challenge }), &ctx)?;
        round_trip(&Response::AuthSuccess(AuthSuccess { token: success }), &ctx)?;
    }

    #[test]
    fn supported(options in prop::collection::hash_map(name(), vec(name(), 0..4), 0..6)) {
        let options: HashMap<String, Vec<String>> = options;
        round_trip(&Response::Supported(Supported { options }), &ResponseContext::default())?;
    }

    #[test]
    fn scylla_extensions(ext in extensions()) {
        let supported = ext.to_supported();
        round_trip(&Response::Supported(supported.clone()), &ResponseContext::default())?;
        prop_assert_eq!(ScyllaExtensions::from_supported(&supported), ext);
    }

    #[test]
    fn simple_results(keyspace in name(), sc in schema_change()) {
        let ctx = ResponseContext::default();
        round_trip(&Response::Result(ResultBody::Void), &ctx)?;
        round_trip(&Response::Result(ResultBody::SetKeyspace(keyspace)), &ctx)?;
        round_trip(&Response::Result(ResultBody::SchemaChange(sc)), &ctx)?;
    }

    #[test]
    fn rows_results(rows in rows(), ctx in context()) {
        // Iterating gives back the cells they were built from.
        let cells: usize = rows.raw_iter().map(|r| r.len()).sum();
        prop_assert_eq!(cells, rows.rows_count() * rows.columns_count());
        round_trip(&Response::Result(ResultBody::Rows(rows)), &ctx)?;
    }

    #[test]
    fn prepared_results((ctx, p) in context().prop_flat_map(|ctx| (Just(ctx), prepared(ctx)))) {
        round_trip(&Response::Result(ResultBody::Prepared(Box::new(p))), &ctx)?;
    }

    #[test]
    fn events(e in event()) {
        round_trip(&Response::Event(e), &ResponseContext::default())?;
    }
}

#[test]
fn rows_cells_survive_the_trip() {
    let md = ResultMetadata::with_columns(vec![
        ColumnSpec {
            keyspace: "k".into(),
            table: "t".into(),
            name: "a".into(),
            typ: ColumnType::Native(NativeType::Blob),
        },
        ColumnSpec {
            keyspace: "k".into(),
            table: "t".into(),
            name: "b".into(),
            typ: ColumnType::Native(NativeType::Int),
        },
    ]);
    let input: Vec<Vec<Option<&[u8]>>> =
        vec![vec![Some(b""), None], vec![None, Some(&[0, 0, 0, 1])]];
    let rows = Rows::build(md, input.clone()).unwrap();
    let mut buf = BytesMut::new();
    ResultBody::Rows(rows)
        .encode_body(&mut buf, ProtocolVersion::V4)
        .unwrap();
    let Response::Result(ResultBody::Rows(rows)) = Response::decode(
        scylla_driver_cql::frame::Opcode::Result,
        buf.freeze(),
        &ResponseContext::default(),
    )
    .unwrap() else {
        panic!("not rows");
    };
    let out: Vec<Vec<Option<&[u8]>>> = rows.raw_iter().map(|r| r.collect()).collect();
    assert_eq!(out, input);
}
