//! Fuzz-style property test of a node's frame reader: whatever bytes a client
//! sends (random, or a valid request frame with mutated bytes), the node
//! answers with frames and/or closes, never hangs past the client's EOF and
//! never stops serving other clients. The same after a protocol v5
//! handshake, with random bytes or (mutated) segments of request envelopes:
//! the node's answer is a bare READY and then intact segments.

// Test helpers unwrap on purpose: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::BytesMut;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use scylla_cql::frame::header::{Direction, FrameHeader, HEADER_LEN};
use scylla_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};
use scylla_cql::frame::wire;
use scylla_cql::frame::ProtocolVersion;
use scylla_testbed::TestCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(5);

/// A valid-looking request frame: known request opcode, matching length.
fn request_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![0x01u8, 0x05, 0x07, 0x09, 0x0A, 0x0B, 0x0D, 0x0F]),
        any::<i16>(),
        prop::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(op, stream, body)| {
            let mut f = vec![0x04, 0];
            f.extend_from_slice(&stream.to_be_bytes());
            f.push(op);
            f.extend_from_slice(&(body.len() as u32).to_be_bytes());
            f.extend_from_slice(&body);
            f
        })
}

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..128),
        // Several frames back to back, some of them with one byte flipped.
        prop::collection::vec(
            (
                request_frame(),
                any::<prop::sample::Index>(),
                any::<u8>(),
                any::<bool>()
            )
                .prop_map(|(mut f, at, v, mutate)| {
                    if mutate {
                        let i = at.index(f.len());
                        f[i] = v;
                    }
                    f
                }),
            1..4
        )
        .prop_map(|fs| fs.concat()),
    ]
}

/// Sends `bytes`, closes the write side, and reads until the node closes.
/// Every frame received must be a well-formed response.
async fn exchange(addr: SocketAddr, bytes: &[u8]) -> Result<(), String> {
    let mut s = tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out")?
        .map_err(|e| e.to_string())?;
    s.write_all(bytes).await.map_err(|e| e.to_string())?;
    s.shutdown().await.map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    let read = tokio::time::timeout(WAIT, s.read_to_end(&mut got)).await;
    // A reset (the node closed with our input unread) is as good as EOF.
    if read.is_err() {
        return Err("the node neither answered nor closed".into());
    }
    let mut rest = &got[..];
    while !rest.is_empty() {
        let h = FrameHeader::decode(rest, 1 << 20)
            .map_err(|e| format!("bad response header: {e}"))?
            .ok_or("truncated response header")?;
        if h.direction != Direction::Response || rest.len() < h.frame_len() {
            return Err(format!("bad response frame {h:?}"));
        }
        rest = &rest[h.frame_len()..];
    }
    Ok(())
}

/// A bare v5 STARTUP (LZ4 if `lz4`).
fn v5_startup(lz4: bool) -> Vec<u8> {
    let mut opts = vec![("CQL_VERSION", "3.0.0")];
    if lz4 {
        opts.push(("COMPRESSION", "lz4"));
    }
    let mut body = BytesMut::new();
    wire::put_string_map(&mut body, opts.into_iter(), "startup").unwrap();
    let mut f = vec![0x05, 0, 0, 0, 0x01];
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(&body);
    f
}

/// After a v5 STARTUP: random bytes, or request envelopes (v5 headers) in
/// segments, the segment bytes maybe mutated.
fn v5_input() -> impl Strategy<Value = (bool, Vec<u8>)> {
    (
        any::<bool>(),
        prop::collection::vec(request_frame(), 1..4),
        (any::<prop::sample::Index>(), any::<u8>(), any::<bool>()),
        prop::collection::vec(any::<u8>(), 0..128),
        any::<bool>(),
    )
        .prop_map(|(lz4, frames, (at, v, mutate), random, use_random)| {
            let after = if use_random {
                random
            } else {
                let mut envs = Vec::new();
                for mut f in frames {
                    f[0] = ProtocolVersion::V5.number();
                    envs.extend_from_slice(&f);
                }
                let mut out = BytesMut::new();
                SegmentEncoder::new(lz4)
                    .encode_envelopes(&envs, &mut out)
                    .unwrap();
                if mutate {
                    let i = at.index(out.len());
                    out[i] = v;
                }
                out.to_vec()
            };
            (lz4, [v5_startup(lz4), after].concat())
        })
}

/// Like [`exchange`] for [`v5_input`]: the answer is a bare v5 READY, then
/// segments that decode into v5 response envelopes.
async fn exchange_v5(addr: SocketAddr, lz4: bool, bytes: &[u8]) -> Result<(), String> {
    let mut s = tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out")?
        .map_err(|e| e.to_string())?;
    s.write_all(bytes).await.map_err(|e| e.to_string())?;
    s.shutdown().await.map_err(|e| e.to_string())?;
    let mut got = Vec::new();
    if tokio::time::timeout(WAIT, s.read_to_end(&mut got))
        .await
        .is_err()
    {
        return Err("the node neither answered nor closed".into());
    }
    let ready = FrameHeader::decode(&got, 1 << 20)
        .map_err(|e| format!("bad READY header: {e}"))?
        .ok_or("no READY")?;
    if ready.version != ProtocolVersion::V5 || ready.opcode as u8 != 0x02 {
        return Err(format!("not a v5 READY: {ready:?}"));
    }
    let mut raw = BytesMut::from(&got[ready.frame_len()..]);
    let mut dec = SegmentDecoder::new(lz4, 1 << 20);
    // Bounded: each envelope consumes bytes of `raw`.
    while let Some(env) = dec
        .decode_next(&mut raw)
        .map_err(|e| format!("bad segment from the node: {e}"))?
    {
        let h = FrameHeader::decode(&env, 1 << 20)
            .map_err(|e| format!("bad envelope header: {e}"))?
            .ok_or("truncated envelope")?;
        if h.direction != Direction::Response || h.version != ProtocolVersion::V5 {
            return Err(format!("bad response envelope {h:?}"));
        }
    }
    if !raw.is_empty() {
        return Err(format!("{} bytes after the last segment", raw.len()));
    }
    Ok(())
}

#[test]
fn any_v5_input_after_the_handshake_is_answered_or_closed() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = rt
        .block_on(TestCluster::builder().shards(2).max_body_len(256).start())
        .unwrap();
    let addr = cluster.node(0).unwrap().cql_addr();
    let mut runner = TestRunner::new(Config::with_cases(96));
    runner
        .run(&v5_input(), |(lz4, bytes)| {
            rt.block_on(exchange_v5(addr, lz4, &bytes))
                .map_err(|e| TestCaseError::fail(format!("{e} for input {bytes:02x?}")))
        })
        .unwrap();
    let st = cluster.stats();
    assert_eq!(st.nodes[0].node.connections_v5, 96);
    assert_eq!(st.nodes[0].node.handshakes_finished, 96);
    rt.block_on(cluster.shutdown());
}

#[test]
fn any_input_is_answered_or_closed_and_the_node_survives() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cluster = rt
        .block_on(TestCluster::builder().shards(2).max_body_len(256).start())
        .unwrap();
    let addr = cluster.node(0).unwrap().cql_addr();
    let mut runner = TestRunner::new(Config::with_cases(96));
    runner
        .run(&input(), |bytes| {
            rt.block_on(exchange(addr, &bytes))
                .map_err(|e| TestCaseError::fail(format!("{e} for input {bytes:02x?}")))
        })
        .unwrap();
    // Still serving: an OPTIONS gets SUPPORTED.
    rt.block_on(async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&[4, 0, 0, 1, 5, 0, 0, 0, 0]).await.unwrap();
        let mut h = [0u8; HEADER_LEN];
        tokio::time::timeout(WAIT, s.read_exact(&mut h))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(h[4], 0x06);
    });
    let st = cluster.stats();
    assert_eq!(st.nodes[0].node.accepted_regular, 97);
    rt.block_on(cluster.shutdown());
}
