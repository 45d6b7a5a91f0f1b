//! Fuzz-style property test of a node's frame reader: whatever bytes a client
//! sends (random, or a valid request frame with mutated bytes), the node
//! answers with frames and/or closes, never hangs past the client's EOF and
//! never stops serving other clients.

// Test helpers unwrap on purpose: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use scylla_cql::frame::header::{Direction, FrameHeader, HEADER_LEN};
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
