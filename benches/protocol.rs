//! The protocol layer's hot paths, no I/O.
//!
//! Run this suite alone with `cargo bench --bench protocol` (a quick pass:
//! `cargo bench --bench protocol -- --warm-up-time 1 --measurement-time 2`).
//!
//! - `execute_4_values`: serialize 4 bound values (bigint, text, int, double)
//!   and encode the EXECUTE frame into a reused buffer: what every prepared
//!   request pays before it reaches the socket.
//! - `rows_100x5/decode`: decode a RESULT Rows body of 100 rows x 5 columns
//!   (metadata, then one validation pass over the cells, which stay in the
//!   frame's buffer).
//! - `rows_100x5/typed_iter`: type-check once and deserialize every row into
//!   `(i64, &str, i32, f64, bool)`, borrowing text from the frame.
//! - `token_16_byte_key`: Murmur3 token of a 16-byte partition key.
//! - `shard_of_token`: ScyllaDB's token-to-shard mapping (16 shards).
//! - `lz4_4k/compress`, `lz4_4k/decompress`: a 4 KiB body of repetitive rows.
//!
//! Each group sets a short measurement time in code so the suite finishes in
//! well under a minute on 2 cores.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]
use scylla_cql::frame::ProtocolVersion;

use std::borrow::Cow;
use std::hint::black_box;
use std::num::NonZeroU16;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use scylla_cql::compression::Compression;
use scylla_cql::frame::request::{Execute, QueryParameters};
use scylla_cql::frame::response::result::{ResultBody, ResultMetadata, Rows};
use scylla_cql::frame::wire::{put_int, WireReader};
use scylla_cql::frame::{encode_frame, Direction, FrameExtras};
use scylla_cql::sharding::Sharder;
use scylla_cql::token::murmur3_token;
use scylla_cql::types::{
    ColumnSpec, ColumnType, NativeType, RowIterator, SerializeRow, SerializedValues,
};
use scylla_cql::{Consistency, Token};

fn spec(name: &str, typ: ColumnType) -> ColumnSpec {
    ColumnSpec {
        keyspace: "ks".into(),
        table: "t".into(),
        name: name.into(),
        typ,
    }
}

fn short(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group("protocol");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50);
    g
}

fn execute(c: &mut Criterion) {
    let specs = vec![
        spec("pk", ColumnType::Native(NativeType::BigInt)),
        spec("name", ColumnType::Native(NativeType::Text)),
        spec("n", ColumnType::Native(NativeType::Int)),
        spec("score", ColumnType::Native(NativeType::Double)),
    ];
    let id = [0xabu8; 16];
    let row = (42i64, "some text value", 7i32, 3.25f64);
    let mut values = SerializedValues::new();
    let mut buf = BytesMut::with_capacity(1024);
    let mut g = short(c);
    g.bench_function("execute_4_values", |b| {
        b.iter(|| {
            values.clear();
            black_box(&row)
                .serialize_row(&specs, &mut values)
                .expect("values fit their markers");
            let msg = Execute {
                id: Cow::Borrowed(&id),
                result_metadata_id: None,
                params: QueryParameters {
                    consistency: Consistency::LocalQuorum,
                    values: Cow::Borrowed(&values),
                    ..QueryParameters::default()
                },
                tablet_version_block: None,
            };
            buf.clear();
            encode_frame(
                &mut buf,
                ProtocolVersion::V4,
                Direction::Request,
                1,
                &msg,
                &FrameExtras::default(),
                None,
            )
            .expect("frame encodes");
            black_box(buf.len())
        })
    });
    g.finish();
}

/// The body of a RESULT Rows frame: kind, metadata, count, cells.
fn rows_body() -> Bytes {
    let specs = vec![
        spec("pk", ColumnType::Native(NativeType::BigInt)),
        spec("name", ColumnType::Native(NativeType::Text)),
        spec("n", ColumnType::Native(NativeType::Int)),
        spec("score", ColumnType::Native(NativeType::Double)),
        spec("flag", ColumnType::Native(NativeType::Boolean)),
    ];
    let rows = (0..100i64).map(|i| {
        let name = format!("name-{i:04}-padding");
        vec![
            Some(i.to_be_bytes().to_vec()),
            Some(name.into_bytes()),
            Some((i as i32 * 3).to_be_bytes().to_vec()),
            Some((i as f64 / 7.0).to_be_bytes().to_vec()),
            Some(vec![u8::from(i % 2 == 0)]),
        ]
    });
    let rows = Rows::build(ResultMetadata::with_columns(specs), rows).expect("rows build");
    let mut body = BytesMut::new();
    put_int(&mut body, 0x0002); // kind: Rows
    rows.metadata().encode(&mut body).expect("metadata encodes");
    put_int(&mut body, rows.rows_count() as i32);
    body.put_slice(rows.raw_rows());
    body.freeze()
}

fn decode_rows(body: &Bytes) -> Rows {
    let ctx = scylla_cql::frame::response::ResponseContext::default();
    match ResultBody::decode(body, &mut WireReader::new(body), &ctx) {
        Ok(ResultBody::Rows(r)) => r,
        other => panic!("not rows: {other:?}"),
    }
}

fn rows(c: &mut Criterion) {
    let body = rows_body();
    let decoded = decode_rows(&body);
    assert_eq!(decoded.rows_count(), 100);
    let mut g = short(c);
    g.throughput(Throughput::Elements(100));
    g.bench_function("rows_100x5/decode", |b| {
        b.iter(|| decode_rows(black_box(&body)))
    });
    let specs = decoded
        .metadata()
        .col_specs
        .clone()
        .expect("rows have column specs");
    g.bench_function("rows_100x5/typed_iter", |b| {
        b.iter(|| {
            let it = RowIterator::<(i64, &str, i32, f64, bool)>::new(
                &specs,
                decoded.raw_rows(),
                decoded.rows_count(),
            )
            .expect("types fit");
            let mut sum = 0i64;
            for row in it {
                let (pk, name, n, _score, _flag) = row.expect("row decodes");
                sum += pk + i64::from(n) + name.len() as i64;
            }
            black_box(sum)
        })
    });
    g.finish();
}

fn token_and_shard(c: &mut Criterion) {
    let key: [u8; 16] = *b"0123456789abcdef";
    let sharder = Sharder::new(NonZeroU16::new(16).expect("16 > 0"), 12);
    let mut g = short(c);
    g.bench_function("token_16_byte_key", |b| {
        b.iter(|| murmur3_token(black_box(&key)))
    });
    let mut t = 0x1234_5678_9abc_def0u64 as i64;
    g.bench_function("shard_of_token", |b| {
        b.iter(|| {
            t = t.wrapping_add(0x9e37_79b9_7f4a_7c15u64 as i64);
            sharder.shard_of(black_box(Token(t)))
        })
    });
    g.finish();
}

fn lz4(c: &mut Criterion) {
    // 4 KiB of row-like text: compressible, as real result bodies are.
    let mut input = Vec::with_capacity(4096);
    let mut i = 0u32;
    while input.len() < 4096 {
        input.extend_from_slice(
            format!("row {i:05} name-{:04} value={}\n", i * 7, i % 13).as_bytes(),
        );
        i += 1;
    }
    input.truncate(4096);
    let mut compressed = BytesMut::new();
    Compression::Lz4
        .compress_into(&input, &mut compressed)
        .expect("compresses");
    let compressed = compressed.freeze();
    let mut out = BytesMut::with_capacity(Compression::Lz4.max_compressed_len(input.len()));
    let mut g = short(c);
    g.throughput(Throughput::Bytes(input.len() as u64));
    g.bench_function("lz4_4k/compress", |b| {
        b.iter(|| {
            out.clear();
            Compression::Lz4
                .compress_into(black_box(&input), &mut out)
                .expect("compresses");
            black_box(out.len())
        })
    });
    g.bench_function("lz4_4k/decompress", |b| {
        b.iter(|| {
            Compression::Lz4
                .decompress(black_box(&compressed), 1 << 20)
                .expect("decompresses")
        })
    });
    g.finish();
    eprintln!(
        "lz4_4k: {} bytes compress to {} ({:.0}%)",
        input.len(),
        compressed.len(),
        100.0 * compressed.len() as f64 / input.len() as f64
    );
}

criterion_group!(benches, execute, rows, token_and_shard, lz4);
criterion_main!(benches);
