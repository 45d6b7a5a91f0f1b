//! Heap allocations of the v5 stream codec in steady state, counted (not
//! timed): small envelopes encoded into segments and decoded back, round
//! after round, with the writer's and reader's buffers reused. It runs
//! without the libtest harness (`harness = false`): a plain `main` on one
//! thread, so no other thread allocates meanwhile.
#![allow(clippy::unwrap_used, missing_docs)]

use std::alloc::System;

use bytes::BytesMut;
use scylla_driver_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ROUNDS: usize = 1_000;

fn envelope(stream: i16, body_len: usize) -> Vec<u8> {
    let mut e = vec![0x85, 0];
    e.extend_from_slice(&stream.to_be_bytes());
    e.push(0x08);
    e.extend_from_slice(&(body_len as u32).to_be_bytes());
    e.extend(b"value; ".iter().cycle().take(body_len));
    e
}

/// Allocations per round: 20 small envelopes encoded (one segment) and
/// decoded, each envelope dropped after use as a response decoder would.
fn allocations_per_round(compressed: bool) -> f64 {
    let envelopes: Vec<u8> = (0..20i16)
        .flat_map(|i| envelope(i, 100 + 10 * i as usize))
        .collect();
    let mut enc = SegmentEncoder::new(compressed);
    let mut dec = SegmentDecoder::new(compressed, 1 << 20);
    let mut wire = BytesMut::with_capacity(64 * 1024);
    let mut raw = BytesMut::with_capacity(64 * 1024);
    let mut round = |total: &mut usize| {
        wire.clear();
        enc.encode_envelopes(&envelopes, &mut wire).unwrap();
        raw.extend_from_slice(&wire);
        while let Some(e) = dec.decode_next(&mut raw).unwrap() {
            *total += e.len();
        }
    };
    let mut total = 0;
    for _ in 0..10 {
        round(&mut total);
    }
    let region = Region::new(GLOBAL);
    for _ in 0..ROUNDS {
        round(&mut total);
    }
    let allocations = region.change().allocations;
    assert_eq!(total, envelopes.len() * (ROUNDS + 10));
    allocations as f64 / ROUNDS as f64
}

fn main() {
    let plain = allocations_per_round(false);
    let lz4 = allocations_per_round(true);
    println!("allocations per round: uncompressed {plain}, LZ4 {lz4}");
    assert_eq!(plain, 0.0, "uncompressed framing allocates");
    // lz4_flex allocates its hash table on every compression (one segment
    // per round); decompression reuses its buffer.
    assert!(lz4 <= 1.0, "LZ4 framing: {lz4} allocations per round");
}
