//! The test cluster's network layer, exercised with plain sockets: shard
//! assignment on both ports, faults, admission, malformed input, node
//! stop/start, events, shutdown. Frames are hand-encoded here so these tests
//! do not depend on the protocol crate's message codecs.

// Test helpers (outside #[test] fns) unwrap on purpose: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use scylla_cql::frame::header::{FrameHeader, Opcode, HEADER_LEN};
use scylla_cql::frame::wire::{self, WireReader};
use scylla_testbed::{
    error_code, AdmissionConfig, ConnCtx, EventKind, Faults, HandlerFuture, HandshakeCost, NatMode,
    Reply, Request, RequestHandler, Response, ShardAwarePortMode, TestCluster,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// Longest wait for anything the server should do promptly.
const WAIT: Duration = Duration::from_secs(5);

fn frame(stream: i16, opcode: u8, body: &[u8]) -> Vec<u8> {
    let mut f = vec![0x04, 0];
    f.extend_from_slice(&stream.to_be_bytes());
    f.push(opcode);
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(body);
    f
}

fn startup_body(opts: &[(&str, &str)]) -> Vec<u8> {
    let mut b = BytesMut::new();
    wire::put_string_map(&mut b, opts.iter().map(|(k, v)| (*k, *v)), "startup").unwrap();
    b.to_vec()
}

fn string_list_body(items: &[&str]) -> Vec<u8> {
    let mut b = BytesMut::new();
    wire::put_string_list(&mut b, items, "list").unwrap();
    b.to_vec()
}

/// Reads one frame, or fails on EOF/timeout.
async fn read_frame<S: AsyncRead + Unpin>(
    s: &mut S,
    within: Duration,
) -> io::Result<(FrameHeader, Vec<u8>)> {
    let deadline = Instant::now() + within;
    let mut buf = Vec::new();
    loop {
        if let Some(h) = FrameHeader::decode(&buf, 1 << 20)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
        {
            if buf.len() >= h.frame_len() {
                return Ok((h, buf[HEADER_LEN..h.frame_len()].to_vec()));
            }
        }
        let mut chunk = [0u8; 4096];
        let left = deadline.saturating_duration_since(Instant::now());
        let n = tokio::time::timeout(left, s.read(&mut chunk))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no frame in time"))??;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads exactly `n` frames (the peer may pack several into one segment).
async fn read_frames(s: &mut TcpStream, n: usize) -> io::Result<Vec<(FrameHeader, Vec<u8>)>> {
    let deadline = Instant::now() + WAIT;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    while out.len() < n {
        if let Some(h) = FrameHeader::decode(&buf, 1 << 20)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?
        {
            if buf.len() >= h.frame_len() {
                out.push((h, buf[HEADER_LEN..h.frame_len()].to_vec()));
                buf.drain(..h.frame_len());
                continue;
            }
        }
        let mut chunk = [0u8; 4096];
        let left = deadline.saturating_duration_since(Instant::now());
        let got = tokio::time::timeout(left, s.read(&mut chunk))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "frames not in time"))??;
        if got == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
        }
        buf.extend_from_slice(&chunk[..got]);
    }
    Ok(out)
}

/// Waits until the peer closes (EOF or reset), ignoring any frames before it.
async fn expect_closed(s: &mut TcpStream) {
    let deadline = Instant::now() + WAIT;
    let mut chunk = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Err(_) => panic!("connection not closed in time"),
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
        }
    }
}

fn error_of(body: &[u8]) -> (i32, String) {
    let mut r = WireReader::new(body);
    let code = r.read_int("code").unwrap();
    (code, r.read_string("msg").unwrap().to_owned())
}

async fn options(s: &mut TcpStream) -> io::Result<HashMap<String, Vec<String>>> {
    s.write_all(&frame(1, 0x05, &[])).await?;
    let (h, body) = read_frame(s, WAIT).await?;
    assert_eq!(h.opcode, Opcode::Supported);
    assert_eq!(h.stream, 1);
    Ok(WireReader::new(&body)
        .read_string_multimap("supported")
        .unwrap())
}

async fn shard_of(s: &mut TcpStream) -> u16 {
    options(s).await.unwrap()["SCYLLA_SHARD"][0]
        .parse()
        .unwrap()
}

async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    tokio::time::timeout(WAIT, TcpStream::connect(addr))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
}

/// Connects from 127.0.0.1:<a port p with p % shards == shard>, binding the
/// source port with socket2; retries other ports if one is taken.
async fn connect_to_shard(
    dst: SocketAddr,
    shards: u16,
    shard: u16,
) -> io::Result<(TcpStream, u16)> {
    let mut last = io::Error::other("no attempt");
    for _ in 0..50 {
        let base = fastrand::u16(20_000..30_000);
        let port = base - base % shards + shard;
        match connect_from(port, dst).await {
            Ok(s) => return Ok((s, port)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

async fn connect_from(port: u16, dst: SocketAddr) -> io::Result<TcpStream> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    sock.set_nonblocking(true)?;
    let src: SocketAddr = ([127, 0, 0, 1], port).into();
    sock.bind(&src.into())?;
    let sock = TcpSocket::from_std_stream(sock.into());
    tokio::time::timeout(WAIT, sock.connect(dst))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
}

/// Polls `cond` until true (bounded).
async fn eventually(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached in time");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn ready(s: &mut TcpStream) {
    s.write_all(&frame(0, 0x01, &startup_body(&[("CQL_VERSION", "3.0.0")])))
        .await
        .unwrap();
    let (h, _) = read_frame(s, WAIT).await.unwrap();
    assert_eq!(h.opcode, Opcode::Ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regular_port_balances_over_shards() {
    let c = TestCluster::builder().shards(4).start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    let mut conns = Vec::new();
    let mut shards = Vec::new();
    for _ in 0..8 {
        let mut s = connect(addr).await.unwrap();
        shards.push(shard_of(&mut s).await);
        conns.push(s);
    }
    assert_eq!(shards, vec![0, 1, 2, 3, 0, 1, 2, 3]);
    // Close one connection of shard 2: shard 2 becomes the emptiest.
    drop(conns.remove(2));
    eventually(|| c.stats().nodes[0].shards[2].connections == 1).await;
    let mut s = connect(addr).await.unwrap();
    assert_eq!(shard_of(&mut s).await, 2);
    let st = c.stats();
    assert_eq!(st.nodes[0].node.accepted_regular, 9);
    assert_eq!(st.nodes[0].node.peak_connections, 8);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shard_aware_port_uses_the_source_port() {
    let c = TestCluster::builder()
        .nodes(2)
        .shards(8)
        .start()
        .await
        .unwrap();
    let node = c.node(1).unwrap().clone();
    let dst = node.shard_aware_addr().unwrap();
    for shard in 0..8 {
        let (mut s, port) = connect_to_shard(dst, 8, shard).await.unwrap();
        let opts = options(&mut s).await.unwrap();
        assert_eq!(opts["SCYLLA_SHARD"], vec![(port % 8).to_string()]);
        assert_eq!(opts["SCYLLA_NR_SHARDS"], vec!["8"]);
        assert_eq!(opts["SCYLLA_SHARD_AWARE_PORT"], vec!["19042"]);
        assert_eq!(
            opts["SCYLLA_PARTITIONER"],
            vec!["org.apache.cassandra.dht.Murmur3Partitioner"]
        );
        assert_eq!(
            opts["SCYLLA_SHARDING_ALGORITHM"],
            vec!["biased-token-round-robin"]
        );
        assert_eq!(opts["SCYLLA_SHARDING_IGNORE_MSB"], vec!["12"]);
        assert_eq!(opts["COMPRESSION"], vec!["lz4", "snappy"]);
        assert_eq!(opts["PROTOCOL_VERSIONS"], vec!["4/v4", "5/v5"]);
    }
    let st = c.stats();
    assert_eq!(st.nodes[1].node.accepted_shard_aware, 8);
    assert!(st.nodes[1]
        .shards
        .iter()
        .all(|s| s.accepted_shard_aware == 1));
    assert_eq!(st.nodes[0].node.accepted_shard_aware, 0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nat_puts_connections_on_another_shard() {
    let c = TestCluster::builder().shards(8).start().await.unwrap();
    let dst = c.node(0).unwrap().shard_aware_addr().unwrap();
    c.set_faults(0, Faults::none().with_nat(NatMode::Offset(3)))
        .await
        .unwrap();
    for shard in [0u16, 5] {
        let (mut s, _) = connect_to_shard(dst, 8, shard).await.unwrap();
        assert_eq!(shard_of(&mut s).await, (shard + 3) % 8);
        ready(&mut s).await;
    }
    c.set_faults(0, Faults::none().with_nat(NatMode::Random))
        .await
        .unwrap();
    let (mut s, _) = connect_to_shard(dst, 8, 1).await.unwrap();
    assert!(shard_of(&mut s).await < 8);
    assert_eq!(c.stats().nodes[0].nat_rewrites, 3);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusing_shard_aware_port_refuses_then_recovers() {
    let c = TestCluster::builder().shards(2).start().await.unwrap();
    let node = c.node(0).unwrap().clone();
    let dst = node.shard_aware_addr().unwrap();
    c.set_faults(
        0,
        Faults::none().with_shard_aware_port(ShardAwarePortMode::Refuse),
    )
    .await
    .unwrap();
    let err = connect(dst).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused);
    // The regular port still works and still advertises the port.
    let mut s = connect(node.cql_addr()).await.unwrap();
    assert_eq!(
        options(&mut s).await.unwrap()["SCYLLA_SHARD_AWARE_PORT"],
        vec!["19042"]
    );
    c.set_faults(0, Faults::none()).await.unwrap();
    let mut s = connect(dst).await.unwrap();
    assert!(shard_of(&mut s).await < 2);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_shard_aware_port_never_answers() {
    let c = TestCluster::builder()
        .shards(2)
        .faults(
            0,
            Faults::none().with_shard_aware_port(ShardAwarePortMode::Silent),
        )
        .start()
        .await
        .unwrap();
    let node = c.node(0).unwrap().clone();
    let mut s = connect(node.shard_aware_addr().unwrap()).await.unwrap();
    s.write_all(&frame(1, 0x05, &[])).await.unwrap();
    // Held by the node (however late its accept runs), and then silent.
    eventually(|| c.stats().nodes[0].silent_held == 1).await;
    let mut b = [0u8; 16];
    let r = tokio::time::timeout(Duration::from_millis(300), s.read(&mut b)).await;
    assert!(r.is_err(), "the silent port answered: {r:?}");
    assert_eq!(c.stats().nodes[0].silent_held, 1);
    // The regular port is unaffected.
    let mut r = connect(node.cql_addr()).await.unwrap();
    assert!(shard_of(&mut r).await < 2);
    // Stopping the node releases the held socket.
    c.stop_node(0).await.unwrap();
    expect_closed(&mut s).await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_without_shard_aware_port_does_not_advertise_it() {
    let c = TestCluster::builder()
        .nodes(2)
        .without_shard_aware_port(1)
        .start()
        .await
        .unwrap();
    let n1 = c.node(1).unwrap().clone();
    assert_eq!(n1.shard_aware_port, None);
    let mut s = connect(n1.cql_addr()).await.unwrap();
    assert!(!options(&mut s)
        .await
        .unwrap()
        .contains_key("SCYLLA_SHARD_AWARE_PORT"));
    let refused = connect(SocketAddr::new(n1.address, 19042))
        .await
        .unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    let mut s0 = connect(c.node(0).unwrap().cql_addr()).await.unwrap();
    assert!(options(&mut s0)
        .await
        .unwrap()
        .contains_key("SCYLLA_SHARD_AWARE_PORT"));
    c.shutdown().await;
}

/// Opens `n` connections and sends STARTUP on all of them at once; returns
/// how many got READY.
async fn startup_storm(addr: SocketAddr, n: usize) -> usize {
    let mut conns = Vec::new();
    for _ in 0..n {
        conns.push(connect(addr).await.unwrap());
    }
    let mut tasks = Vec::new();
    for mut s in conns {
        tasks.push(tokio::spawn(async move {
            s.write_all(&frame(0, 0x01, &startup_body(&[])))
                .await
                .unwrap();
            match read_frame(&mut s, WAIT).await {
                Ok((h, _)) => h.opcode == Opcode::Ready,
                Err(_) => false,
            }
        }));
    }
    let mut ready = 0;
    for t in tasks {
        ready += t.await.unwrap() as usize;
    }
    ready
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_limits_concurrent_handshakes() {
    let c = TestCluster::builder()
        .admission(AdmissionConfig {
            cpu_concurrency: 3,
            cost: HandshakeCost::Sleep(Duration::from_millis(30)),
            shed_after: Duration::from_secs(5),
        })
        .start()
        .await
        .unwrap();
    let ready = startup_storm(c.node(0).unwrap().cql_addr(), 12).await;
    assert_eq!(ready, 12);
    let st = c.stats().nodes[0].node;
    assert_eq!(st.handshakes_started, 12);
    assert_eq!(st.handshakes_finished, 12);
    assert_eq!(st.handshakes_shed, 0);
    assert!(st.peak_handshakes_in_progress <= 3, "{st:?}");
    assert!(st.peak_handshakes_waiting >= 1, "{st:?}");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_sheds_handshakes_that_wait_too_long() {
    let c = TestCluster::builder()
        .admission(AdmissionConfig {
            cpu_concurrency: 2,
            cost: HandshakeCost::Sleep(Duration::from_millis(400)),
            shed_after: Duration::from_millis(100),
        })
        .start()
        .await
        .unwrap();
    let ready = startup_storm(c.node(0).unwrap().cql_addr(), 8).await;
    let st = c.stats().nodes[0].node;
    assert_eq!(ready, 2);
    assert_eq!(st.handshakes_finished, 2);
    assert_eq!(st.handshakes_shed, 6);
    assert!(st.peak_handshakes_in_progress <= 2);
    // Every client socket is gone now (the storm's tasks dropped them): the
    // server released every connection, shed or not.
    eventually(|| c.stats().nodes[0].node.connections == 0).await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_gets_a_protocol_error_and_the_server_survives() {
    let c = TestCluster::builder()
        .shards(2)
        .max_body_len(1024)
        .start()
        .await
        .unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    let bad_inputs: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        frame(3, 0x04, &[]), // unknown opcode
        frame(4, 0x02, &[]), // READY is a response opcode
        {
            let mut f = frame(5, 0x07, &[]);
            f[5..9].copy_from_slice(&100_000u32.to_be_bytes()); // over max_body_len
            f
        },
        {
            let mut f = frame(6, 0x05, &[]);
            f[0] = 0x84; // response direction bit
            f
        },
    ];
    for bad in bad_inputs {
        let mut s = connect(addr).await.unwrap();
        s.write_all(&bad).await.unwrap();
        let (h, body) = read_frame(&mut s, WAIT).await.unwrap();
        assert_eq!(h.opcode, Opcode::Error);
        assert_eq!(error_of(&body).0, error_code::PROTOCOL_ERROR);
        expect_closed(&mut s).await;
    }
    // Truncated frame, then the client goes away.
    let mut s = connect(addr).await.unwrap();
    s.write_all(&frame(1, 0x01, &[0, 5, 0])[..11])
        .await
        .unwrap();
    drop(s);
    // Malformed bodies and out-of-order messages keep the connection usable.
    let mut s = connect(addr).await.unwrap();
    s.write_all(&frame(1, 0x01, &[0, 9, 0])).await.unwrap();
    let (h, body) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!(
        (h.opcode, error_of(&body).0),
        (Opcode::Error, error_code::PROTOCOL_ERROR)
    );
    s.write_all(&frame(2, 0x07, &[])).await.unwrap();
    let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!((h.opcode, h.stream), (Opcode::Error, 2));
    ready(&mut s).await;
    // The server still accepts and answers.
    let mut s = connect(addr).await.unwrap();
    assert!(shard_of(&mut s).await < 2);
    assert!(c.stats().nodes[0].node.protocol_errors >= 7);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_registered_connections_only() {
    let c = TestCluster::builder().nodes(2).start().await.unwrap();
    let mut a = connect(c.node(0).unwrap().cql_addr()).await.unwrap();
    let mut b = connect(c.node(1).unwrap().cql_addr()).await.unwrap();
    for s in [&mut a, &mut b] {
        ready(s).await;
    }
    a.write_all(&frame(
        3,
        0x0B,
        &string_list_body(&["SCHEMA_CHANGE", "STATUS_CHANGE"]),
    ))
    .await
    .unwrap();
    let (h, _) = read_frame(&mut a, WAIT).await.unwrap();
    assert_eq!((h.opcode, h.stream), (Opcode::Ready, 3));
    b.write_all(&frame(3, 0x0B, &string_list_body(&["TOPOLOGY_CHANGE"])))
        .await
        .unwrap();
    assert_eq!(
        read_frame(&mut b, WAIT).await.unwrap().0.opcode,
        Opcode::Ready
    );
    let body = Bytes::from_static(b"\x00\x0dSCHEMA_CHANGE-ish");
    assert_eq!(c.push_event(EventKind::SchemaChange, body.clone()), 1);
    let (h, got) = read_frame(&mut a, WAIT).await.unwrap();
    assert_eq!((h.opcode, h.stream), (Opcode::Event, -1));
    assert_eq!(got, body.to_vec());
    assert_eq!(c.push_event(EventKind::TopologyChange, body.clone()), 1);
    assert_eq!(
        read_frame(&mut b, WAIT).await.unwrap().0.opcode,
        Opcode::Event
    );
    // An unknown event type is a protocol error.
    a.write_all(&frame(4, 0x0B, &string_list_body(&["NOPE"])))
        .await
        .unwrap();
    let (h, body) = read_frame(&mut a, WAIT).await.unwrap();
    assert_eq!(
        (h.opcode, error_of(&body).0),
        (Opcode::Error, error_code::PROTOCOL_ERROR)
    );
    // Other requests go to the default (CQL) handler, which answers a
    // malformed QUERY body with a protocol error.
    a.write_all(&frame(9, 0x07, &[0, 0, 0, 0])).await.unwrap();
    let (h, body) = read_frame(&mut a, WAIT).await.unwrap();
    assert_eq!(
        (h.opcode, h.stream, error_of(&body).0),
        (Opcode::Error, 9, error_code::PROTOCOL_ERROR)
    );
    assert_eq!(c.stats().nodes[0].node.requests_served, 1);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_authentication() {
    let c = TestCluster::builder()
        .password_auth("cassandra", "secret")
        .start()
        .await
        .unwrap();
    let mut s = connect(c.node(0).unwrap().cql_addr()).await.unwrap();
    s.write_all(&frame(0, 0x01, &startup_body(&[])))
        .await
        .unwrap();
    let (h, body) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!(h.opcode, Opcode::Authenticate);
    assert_eq!(
        WireReader::new(&body).read_string("a").unwrap(),
        "org.apache.cassandra.auth.PasswordAuthenticator"
    );
    let token = |u: &str, p: &str| {
        let mut b = BytesMut::new();
        let t = format!("\0{u}\0{p}");
        b.put_i32(t.len() as i32);
        b.put_slice(t.as_bytes());
        b.to_vec()
    };
    s.write_all(&frame(1, 0x0F, &token("cassandra", "wrong")))
        .await
        .unwrap();
    let (h, body) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!(
        (h.opcode, error_of(&body).0),
        (Opcode::Error, error_code::BAD_CREDENTIALS)
    );
    s.write_all(&frame(2, 0x0F, &token("cassandra", "secret")))
        .await
        .unwrap();
    let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!((h.opcode, h.stream), (Opcode::AuthSuccess, 2));
    let st = c.stats().nodes[0].node;
    assert_eq!((st.handshakes_started, st.handshakes_finished), (1, 1));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_and_start_node() {
    let c = TestCluster::builder()
        .nodes(2)
        .shards(2)
        .seed(7)
        .start()
        .await
        .unwrap();
    let n0 = c.node(0).unwrap().clone();
    let mut s = connect(n0.cql_addr()).await.unwrap();
    ready(&mut s).await;
    c.stop_node(0).await.unwrap();
    assert!(!c.topology().is_up(0));
    expect_closed(&mut s).await;
    assert_eq!(
        connect(n0.cql_addr()).await.unwrap_err().kind(),
        io::ErrorKind::ConnectionRefused
    );
    let mut other = connect(c.node(1).unwrap().cql_addr()).await.unwrap();
    assert!(shard_of(&mut other).await < 2);
    c.start_node(0).await.unwrap();
    assert!(c.topology().is_up(0));
    let mut s = connect(n0.cql_addr()).await.unwrap();
    assert_eq!(shard_of(&mut s).await, 0);
    let (mut sa, port) = connect_to_shard(n0.shard_aware_addr().unwrap(), 2, 1)
        .await
        .unwrap();
    assert_eq!(shard_of(&mut sa).await, port % 2);
    // Same identity, fresh stats.
    assert_eq!(c.node(0).unwrap(), &n0);
    assert_eq!(c.stats().nodes[0].node.accepted_regular, 1);
    c.restart_node(1).await.unwrap();
    expect_closed(&mut other).await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_handler_sees_its_connection() {
    let handler = |ctx: &ConnCtx, req: Request| -> Reply {
        if req.body.as_ref() == b"wrong" {
            ctx.record_wrong_shard();
        }
        let mut b = BytesMut::new();
        b.put_i32(0x0001); // RESULT Void
        b.put_u16(ctx.shard());
        Reply::Respond(Response::new(Opcode::Result, b.freeze()))
    };
    let c = TestCluster::builder()
        .shards(4)
        .handler(Arc::new(handler))
        .start()
        .await
        .unwrap();
    let dst = c.node(0).unwrap().shard_aware_addr().unwrap();
    let (mut s, _) = connect_to_shard(dst, 4, 3).await.unwrap();
    ready(&mut s).await;
    // Pipelined requests on several streams, all answered.
    for stream in 10..20 {
        s.write_all(&frame(stream, 0x07, b"wrong")).await.unwrap();
    }
    let mut streams = Vec::new();
    for (h, body) in read_frames(&mut s, 10).await.unwrap() {
        assert_eq!(h.opcode, Opcode::Result);
        assert_eq!(&body[4..6], &[0, 3]);
        streams.push(h.stream);
    }
    streams.sort_unstable();
    assert_eq!(streams, (10..20).collect::<Vec<_>>());
    let st = c.stats().nodes[0].clone();
    assert_eq!(st.shards[3].requests_wrong_shard, 10);
    assert_eq!(st.node.requests_served, 10);
    c.shutdown().await;
}

/// A one-node cluster answering with `handler`, and a connection past STARTUP.
async fn one_ready_connection(handler: Arc<dyn RequestHandler>) -> (TestCluster, TcpStream) {
    let c = TestCluster::builder()
        .handler(handler)
        .start()
        .await
        .unwrap();
    let mut s = connect(c.node(0).unwrap().cql_addr()).await.unwrap();
    ready(&mut s).await;
    (c, s)
}

/// Answers `slow` requests only once `release` is notified, others at once.
struct HoldsSlowOnes {
    release: Arc<tokio::sync::Notify>,
}

impl RequestHandler for HoldsSlowOnes {
    fn handle<'a>(&'a self, _ctx: &'a ConnCtx, req: Request) -> HandlerFuture<'a> {
        Box::pin(async move {
            if req.body.as_ref() == b"slow" {
                self.release.notified().await;
            }
            let mut b = BytesMut::new();
            b.put_i32(0x0001); // RESULT Void
            Reply::Respond(Response::new(Opcode::Result, b.freeze()))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_handler_does_not_hold_up_later_requests() {
    let release = Arc::new(tokio::sync::Notify::new());
    let handler = HoldsSlowOnes {
        release: release.clone(),
    };
    let (c, mut s) = one_ready_connection(Arc::new(handler)).await;
    s.write_all(&frame(1, 0x07, b"slow")).await.unwrap();
    s.write_all(&frame(2, 0x07, b"fast")).await.unwrap();
    let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!(h.stream, 2, "the fast request waited for the slow one");
    // The slow one is still waiting, then answered once released.
    assert!(read_frame(&mut s, Duration::from_millis(50)).await.is_err());
    release.notify_one();
    let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!((h.stream, h.opcode), (1, Opcode::Result));
    assert_eq!(c.stats().nodes[0].node.requests_served, 2);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_answered_while_the_client_does_not_read() {
    // 4 KiB answers to 6,000 pipelined requests that the client reads only
    // after sending them all: the node's socket buffer and then its writer's
    // queue (1,024 frames) fill up, and the answers that find it full wait
    // for room.
    let handler = |_ctx: &ConnCtx, _req: Request| -> Reply {
        let mut b = BytesMut::new();
        b.put_i32(0x0001); // RESULT Void
        b.put_bytes(0, 4096);
        Reply::Respond(Response::new(Opcode::Result, b.freeze()))
    };
    let (c, mut s) = one_ready_connection(Arc::new(handler)).await;
    const N: i16 = 6_000;
    let mut requests = Vec::new();
    for stream in 1..=N {
        requests.extend_from_slice(&frame(stream, 0x07, b"q"));
    }
    s.write_all(&requests).await.unwrap();
    // Let the node answer into full buffers before reading anything.
    eventually(|| c.stats().nodes[0].node.requests_served >= 2_000).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut streams: Vec<i16> = read_frames(&mut s, N as usize)
        .await
        .unwrap()
        .into_iter()
        .map(|(h, _)| h.stream)
        .collect();
    streams.sort_unstable();
    assert_eq!(streams, (1..=N).collect::<Vec<_>>());
    assert_eq!(c.stats().nodes[0].node.requests_served, N as u64);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_fault_delays_responses() {
    let c = TestCluster::builder().start().await.unwrap();
    c.set_faults(0, Faults::none().with_latency(Duration::from_millis(150)))
        .await
        .unwrap();
    let mut s = connect(c.node(0).unwrap().cql_addr()).await.unwrap();
    let start = Instant::now();
    options(&mut s).await.unwrap();
    assert!(start.elapsed() >= Duration::from_millis(150));
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_cluster_closes_everything() {
    let c = TestCluster::builder()
        .nodes(2)
        .shards(2)
        .start()
        .await
        .unwrap();
    let addrs = c.cql_addrs();
    let mut conns = Vec::new();
    for a in &addrs {
        let mut s = connect(*a).await.unwrap();
        ready(&mut s).await;
        conns.push(s);
    }
    drop(c);
    for s in &mut conns {
        expect_closed(s).await;
    }
    // The listeners are closed too (bounded retry: closing is asynchronous).
    let deadline = Instant::now() + WAIT;
    loop {
        if connect(addrs[0]).await.is_err() {
            break;
        }
        assert!(Instant::now() < deadline, "listener still open");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_get_distinct_blocks_and_identities() {
    let a = TestCluster::builder()
        .nodes(3)
        .vnodes(8)
        .seed(42)
        .start()
        .await
        .unwrap();
    let b = TestCluster::builder()
        .nodes(3)
        .vnodes(8)
        .seed(42)
        .start()
        .await
        .unwrap();
    assert_ne!(a.node(0).unwrap().address, b.node(0).unwrap().address);
    for i in 0..3 {
        let (na, nb) = (a.node(i).unwrap(), b.node(i).unwrap());
        assert_eq!((na.host_id, &na.tokens), (nb.host_id, &nb.tokens));
        assert_eq!(
            (na.datacenter.as_str(), na.rack.as_str()),
            ("datacenter1", "rack1")
        );
        assert_eq!(na.tokens.len(), 8);
    }
    assert!(TestCluster::builder().port(0).start().await.is_err());
    assert!(TestCluster::builder().shards(0).start().await.is_err());
    a.shutdown().await;
    b.shutdown().await;
}

/// A QUERY frame body: the statement at consistency ONE, no values.
fn query_body(q: &str) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i32(q.len() as i32);
    b.put_slice(q.as_bytes());
    b.put_u16(0x0001);
    b.put_u8(0);
    b.to_vec()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maintenance_socket_serves_cql_without_credentials() {
    use tokio::net::UnixStream;
    let c = TestCluster::builder()
        .nodes(2)
        .shards(2)
        .password_auth("cassandra", "secret")
        .maintenance_socket(true)
        .start()
        .await
        .unwrap();
    let path = c.maintenance_socket(1).unwrap();
    assert!(path.ends_with("node1/cql.m"), "{}", path.display());
    assert!(path.exists());
    assert_ne!(c.maintenance_socket(0), Some(path.clone()));
    assert_eq!(c.maintenance_socket(2), None);
    // STARTUP gets READY at once although the cluster requires
    // credentials, and queries are served; the node balances the
    // connections over its shards as on the regular port.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::time::timeout(WAIT, UnixStream::connect(&path))
            .await
            .unwrap()
            .unwrap();
        s.write_all(&frame(0, 0x01, &startup_body(&[("CQL_VERSION", "3.0.0")])))
            .await
            .unwrap();
        let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
        assert_eq!(h.opcode, Opcode::Ready);
        s.write_all(&frame(
            1,
            0x07,
            &query_body("SELECT host_id FROM system.local WHERE key = 'local'"),
        ))
        .await
        .unwrap();
        let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
        assert_eq!((h.opcode, h.stream), (Opcode::Result, 1));
        held.push(s);
    }
    let st = c.stats();
    let n1 = &st.nodes[1];
    assert_eq!(n1.node.accepted_maintenance_socket, 2);
    assert_eq!(
        (
            n1.shards[0].accepted_maintenance_socket,
            n1.shards[1].accepted_maintenance_socket
        ),
        (1, 1)
    );
    assert_eq!(
        (n1.node.accepted_regular, n1.node.accepted_shard_aware),
        (0, 0)
    );
    assert_eq!(n1.node.handshakes_finished, 2);
    assert_eq!(n1.node.connections, 2);
    assert_eq!(st.nodes[0].node.accepted_maintenance_socket, 0);
    // The regular port of the same node still asks for credentials.
    let mut s = connect(c.node(1).unwrap().cql_addr()).await.unwrap();
    s.write_all(&frame(0, 0x01, &startup_body(&[])))
        .await
        .unwrap();
    let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!(h.opcode, Opcode::Authenticate);
    drop(s);
    // A stopped node's socket file is gone; a restart brings it back.
    c.stop_node(1).await.unwrap();
    assert!(!path.exists());
    let e = UnixStream::connect(&path).await.unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    c.start_node(1).await.unwrap();
    assert!(path.exists());
    let mut s = UnixStream::connect(&path).await.unwrap();
    s.write_all(&frame(0, 0x05, &[])).await.unwrap();
    let (h, _) = read_frame(&mut s, WAIT).await.unwrap();
    assert_eq!(h.opcode, Opcode::Supported);
    drop(held);
    // Dropping the cluster removes the sockets' directory.
    let dir = c.maintenance_socket_dir().unwrap().to_owned();
    drop(c);
    assert!(!dir.exists(), "{}", dir.display());
}
