//! Fuzzes the connection reader over a real socket: after a correct
//! handshake, a fake server answers requests in flight with random bytes or
//! with valid response frames mutated (bits flipped, bytes inserted, deleted,
//! truncated), then closes. Nothing may panic, every request must end (with a
//! response or a typed error) in bounded time, and a connection that got
//! garbage must end with a typed reason.
#![allow(clippy::unwrap_used, missing_docs)]

mod fake_server;

use std::time::Duration;

use fake_server::{accept_ready, encode_response, listen, supported};
use scylla_cql::frame::request::Options;
use scylla_cql::frame::response::{DbError, ErrorResponse, Response, ResultBody};
use scylla_driver::connection::{open, BrokenReason, RequestOptions};

/// Connections in total (each one a fresh handshake and a fresh garbage script).
const CONNECTIONS: usize = 600;
/// Connections run at the same time.
const PARALLEL: usize = 12;
/// Requests in flight per connection.
const REQUESTS: usize = 6;

/// A valid response frame for `stream`, of a random kind.
fn valid_frame(rng: &mut fastrand::Rng, stream: i16) -> Vec<u8> {
    let resp = match rng.u8(0..5) {
        0 => Response::Supported(supported(rng.bool())),
        1 => Response::Result(ResultBody::Void),
        2 => Response::Result(ResultBody::SetKeyspace("keyspace_1".to_owned())),
        3 => Response::Error(ErrorResponse {
            error: DbError::Overloaded,
            message: "too busy".to_owned(),
        }),
        _ => Response::Error(ErrorResponse {
            error: DbError::AlreadyExists {
                keyspace: "ks".to_owned(),
                table: "t".to_owned(),
            },
            message: "exists".to_owned(),
        }),
    };
    encode_response(stream, &resp)
}

/// Mutates a frame in one of several ways (at least one byte changes, or the
/// frame gets shorter).
fn mutate(rng: &mut fastrand::Rng, mut f: Vec<u8>) -> Vec<u8> {
    for _ in 0..rng.usize(1..=3) {
        if f.is_empty() {
            break;
        }
        match rng.u8(0..4) {
            0 => {
                let i = rng.usize(..f.len());
                f[i] ^= 1 << rng.u8(0..8);
            }
            1 => {
                let i = rng.usize(..=f.len());
                f.insert(i, rng.u8(..));
            }
            2 => {
                let i = rng.usize(..f.len());
                f.remove(i);
            }
            _ => {
                let n = rng.usize(..f.len());
                f.truncate(n);
            }
        }
    }
    f
}

/// What the server sends on one connection, once every request arrived.
fn garbage(rng: &mut fastrand::Rng, streams: &[i16]) -> Vec<u8> {
    let mut out = Vec::new();
    // Sometimes answer a few requests correctly first.
    for &s in streams.iter().take(rng.usize(0..3)) {
        out.extend(valid_frame(rng, s));
    }
    let target = streams[rng.usize(..streams.len())];
    if rng.u8(0..4) == 0 {
        let n = rng.usize(1..64);
        out.extend((0..n).map(|_| rng.u8(..)));
    } else {
        let frame = valid_frame(rng, target);
        out.extend(mutate(rng, frame));
    }
    out
}

async fn one_connection(seed: u64) -> &'static str {
    let mut rng = fastrand::Rng::with_seed(seed);
    let (l, addr) = listen().await;
    let script_rng = rng.u64(..);
    let server = tokio::spawn(async move {
        let mut rng = fastrand::Rng::with_seed(script_rng);
        let (mut rd, wr) = accept_ready(&l, false).await;
        let mut streams = Vec::new();
        while streams.len() < REQUESTS {
            match rd.next().await {
                Some(inc) => streams.push(inc.header.stream),
                None => return,
            }
        }
        let bytes = garbage(&mut rng, &streams);
        // Sometimes in pieces, to exercise partial frames.
        let cut = rng.usize(..=bytes.len());
        wr.send_raw(&bytes[..cut]).await;
        tokio::task::yield_now().await;
        wr.send_raw(&bytes[cut..]).await;
        // FIN, then wait for the client to close (no RST on unread data).
        wr.shutdown().await;
        rd.drain_to_eof(Duration::from_secs(5)).await;
    });

    let cfg = {
        let mut built = fake_server::v4_config();
        built.heartbeat_interval = None;
        // Keep a garbage length from reserving the protocol's 256 MiB.
        built.max_frame_len = if seed % 2 == 0 {
            1 << 20
        } else {
            scylla_cql::frame::DEFAULT_MAX_BODY_LEN
        };
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let handles: Vec<_> = (0..REQUESTS)
        .map(|_| {
            let c = conn.clone();
            tokio::spawn(async move {
                let o = {
                    let mut built = RequestOptions::default();
                    built.timeout = Some(Duration::from_secs(2));
                    built
                };
                c.request(&Options, &o).await
            })
        })
        .collect();
    for h in handles {
        // Every request ends, with a result or a typed error, well in time.
        let r = tokio::time::timeout(Duration::from_secs(5), h)
            .await
            .expect("a request did not end")
            .expect("a request task panicked");
        drop(r);
    }
    tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .expect("the connection did not end after garbage and FIN");
    let kind = match conn.broken().map(|b| b.reason()) {
        Some(BrokenReason::Decode(_)) => "decode",
        Some(BrokenReason::UnknownStream(_)) => "unknown stream",
        Some(BrokenReason::ClosedByPeer) => "closed by peer",
        other => panic!("unexpected end of a fuzzed connection: {other:?}"),
    };
    assert_eq!(conn.in_flight(), 0);
    drop(conn);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("server did not finish")
        .expect("server panicked");
    kind
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_the_server_ends_connections_cleanly() {
    let base = std::env::var("READER_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    let mut counts = std::collections::BTreeMap::new();
    let start = std::time::Instant::now();
    for batch in 0..CONNECTIONS / PARALLEL {
        let tasks: Vec<_> = (0..PARALLEL)
            .map(|i| {
                let seed = base + (batch * PARALLEL + i) as u64;
                (seed, tokio::spawn(one_connection(seed)))
            })
            .collect();
        for (seed, t) in tasks {
            match t.await {
                Ok(kind) => *counts.entry(kind).or_insert(0usize) += 1,
                Err(e) => panic!("fuzz case failed; rerun with READER_FUZZ_SEED={seed}: {e}"),
            }
        }
    }
    eprintln!("{counts:?} in {:?}", start.elapsed());
    // The script produces every kind of ending.
    assert_eq!(counts.len(), 3, "{counts:?}");
}
