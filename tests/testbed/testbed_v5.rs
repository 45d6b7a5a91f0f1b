//! The test cluster in protocol v5, exercised with plain sockets and the
//! protocol crate's codecs: the bare handshake, then segments (with and
//! without LZ4) in both directions; a v4-only cluster refusing a v5 first
//! frame as ScyllaDB does; v4 clients on a v5 cluster; version changes
//! mid-connection; the corrupt-segment and damaged-v4-length faults; a
//! damaged segment from the client.

// Test helpers unwrap on purpose: a failure is a test failure.
#![allow(clippy::unwrap_used)]

use crate::raw_client;

use std::borrow::Cow;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use scylla_cql::frame::header::{Direction, FrameHeader, Opcode, HEADER_LEN};
use scylla_cql::frame::request::register::EventType;
use scylla_cql::frame::request::{
    AuthResponse, Options, Query, QueryParameters, Register, Request, Startup,
};
use scylla_cql::frame::response::Response;
use scylla_cql::frame::segment::{self, SegmentError};
use scylla_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};
use scylla_cql::frame::wire::WireReader;
use scylla_cql::frame::{encode_frame, FrameExtras, ProtocolVersion};
use scylla_cql::types::SerializedValues;
use scylla_testbed::{error_code, EventKind, Faults, TestCluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use raw_client::{cells, rows, vals, Client, WAIT};

const V4: ProtocolVersion = ProtocolVersion::V4;
const V5: ProtocolVersion = ProtocolVersion::V5;

fn query(q: &str) -> Request<'_> {
    Request::Query(Query {
        contents: Cow::Borrowed(q),
        params: QueryParameters {
            values: Cow::Owned(SerializedValues::new()),
            ..Default::default()
        },
    })
}

/// One bare request frame of `version`.
fn bare(version: ProtocolVersion, stream: i16, req: &Request<'_>) -> BytesMut {
    let mut b = BytesMut::new();
    encode_frame(
        &mut b,
        version,
        Direction::Request,
        stream,
        req,
        &FrameExtras::NONE,
        None,
    )
    .unwrap();
    b
}

/// Reads one bare frame from `s`.
async fn read_bare(s: &mut TcpStream) -> (FrameHeader, Vec<u8>) {
    let mut head = [0u8; HEADER_LEN];
    tokio::time::timeout(WAIT, s.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    let h = FrameHeader::decode(&head, 1 << 24).unwrap().unwrap();
    let mut body = vec![0u8; h.body_len as usize];
    s.read_exact(&mut body).await.unwrap();
    (h, body)
}

/// Whether the server closed `s` (within [`WAIT`]).
async fn closed(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 256];
    loop {
        match tokio::time::timeout(WAIT, s.read(&mut b)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => continue,
            Err(_) => return false,
        }
    }
}

fn error_of(body: &[u8]) -> (i32, String) {
    let mut r = WireReader::new(body);
    let code = r.read_int("code").unwrap();
    (code, r.read_string("msg").unwrap().to_owned())
}

fn supported_versions(body: &[u8]) -> Vec<String> {
    let m = WireReader::new(body).read_string_multimap("s").unwrap();
    m["PROTOCOL_VERSIONS"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v5_handshake_is_bare_and_then_segments_carry_queries() {
    let c = TestCluster::builder().start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    for lz4 in [false, true] {
        // OPTIONS and STARTUP, and their answers, travel bare in v5.
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&bare(V5, 3, &Request::Options(Options)))
            .await
            .unwrap();
        let (h, body) = read_bare(&mut s).await;
        assert_eq!((h.version, h.opcode, h.stream), (V5, Opcode::Supported, 3));
        assert_eq!(supported_versions(&body), vec!["4/v4", "5/v5"]);
        let mut options = vec![(Cow::from("CQL_VERSION"), Cow::from("3.0.0"))];
        if lz4 {
            options.push((Cow::from("COMPRESSION"), Cow::from("lz4")));
        }
        s.write_all(&bare(V5, 4, &Request::Startup(Startup { options })))
            .await
            .unwrap();
        let (h, body) = read_bare(&mut s).await;
        assert_eq!((h.version, h.opcode, h.stream), (V5, Opcode::Ready, 4));
        assert!(body.is_empty());
        // Then a QUERY in a segment gets its RESULT in a segment.
        let mut enc = SegmentEncoder::new(lz4);
        let mut seg = BytesMut::new();
        let q = bare(V5, 5, &query("SELECT * FROM system.local"));
        enc.encode_envelopes(&q, &mut seg).unwrap();
        s.write_all(&seg).await.unwrap();
        let mut raw = Vec::new();
        let answer = loop {
            let mut b = [0u8; 4096];
            let n = tokio::time::timeout(WAIT, s.read(&mut b))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "closed");
            raw.extend_from_slice(&b[..n]);
            if let Some(sg) = segment::decode(&raw, lz4).unwrap() {
                break (sg.header, sg.payload.to_vec(), sg.len);
            }
        };
        let (sh, payload, len) = answer;
        assert_eq!(len, raw.len(), "one segment");
        assert!(sh.self_contained);
        if lz4 {
            // A whole system.local row with its metadata shrinks under LZ4.
            assert!(sh.uncompressed_len > payload.len(), "{sh:?}");
        } else {
            assert_eq!(sh.uncompressed_len, 0);
        }
        let mut raw = BytesMut::from(&raw[..]);
        let envelope = SegmentDecoder::new(lz4, 1 << 24)
            .decode_next(&mut raw)
            .unwrap()
            .unwrap();
        let h = FrameHeader::decode(&envelope, 1 << 24).unwrap().unwrap();
        assert_eq!((h.version, h.opcode, h.stream), (V5, Opcode::Result, 5));
        assert_eq!(h.frame_len(), envelope.len());
        assert!(!h.flags.contains(scylla_cql::frame::Flags::COMPRESSION));
    }
    let st = c.stats();
    assert_eq!(st.nodes[0].node.connections_v5, 2);
    assert_eq!(st.nodes[0].node.version_refusals, 0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v5_client_runs_cql_with_and_without_lz4() {
    let c = TestCluster::builder().shards(2).start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    let mut a = Client::connect_version(addr, V5, false, &[]).await;
    let mut b = Client::connect_version(addr, V5, true, &[]).await;
    a.ok("CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await;
    a.ok("CREATE TABLE ks.t (k int PRIMARY KEY, v blob)").await;
    // Values across segment boundaries (a 300 KiB blob is a multi-segment
    // envelope both ways), compressible or not.
    let big: Vec<u8> = (0..300 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    for (cl, k) in [(&mut a, 1i32), (&mut b, 2)] {
        let r = cl
            .query_with(
                "INSERT INTO ks.t (k, v) VALUES (?, ?)",
                vals(&[&k.to_be_bytes(), &big]),
                None,
                None,
            )
            .await;
        assert!(matches!(r, Response::Result(_)), "{r:?}");
    }
    for cl in [&mut a, &mut b] {
        for k in [1i32, 2] {
            let r = cl
                .query_with(
                    "SELECT v FROM ks.t WHERE k = ?",
                    vals(&[&k.to_be_bytes()]),
                    None,
                    None,
                )
                .await;
            let got = cells(&rows(r));
            assert_eq!(got, vec![vec![Some(big.clone())]]);
        }
    }
    // Several requests in one segment: every answer comes, in segments.
    // (They are served concurrently, like a server does: no USE here.)
    let (q1, q2, q3) = (
        query("SELECT cluster_name FROM system.local"),
        query("SELECT k FROM ks.t"),
        query("NOT CQL"),
    );
    b.send_frames(&[&q1, &q2, &q3]).await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        let (h, body) = b.read_frame().await.unwrap();
        assert_eq!(h.version, V5);
        let (_, r) = b.decode(&h, body);
        streams.push((h.stream, matches!(r, Response::Error(_))));
    }
    streams.sort();
    let first = streams[0].0;
    assert_eq!(
        streams,
        vec![(first, false), (first + 1, false), (first + 2, true)]
    );
    assert_eq!(c.stats().nodes[0].node.connections_v5, 2);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v4_only_cluster_refuses_v5_like_scylladb() {
    let c = TestCluster::builder()
        .max_protocol_version(V4)
        .start()
        .await
        .unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    for first in [
        Request::Options(Options),
        query("SELECT * FROM system.local"),
    ] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&bare(V5, 7, &first)).await.unwrap();
        let (h, body) = read_bare(&mut s).await;
        assert_eq!((h.version, h.opcode, h.stream), (V4, Opcode::Error, 7));
        assert_eq!(h.direction, Direction::Response);
        let (code, msg) = error_of(&body);
        assert_eq!(code, error_code::PROTOCOL_ERROR);
        assert_eq!(
            msg,
            "Invalid or unsupported protocol version (5); supported versions are (4/v4)"
        );
        assert!(closed(&mut s).await);
    }
    let st = c.stats();
    assert_eq!(st.nodes[0].node.version_refusals, 2);
    assert_eq!(st.nodes[0].node.connections_v5, 0);
    // The same address then serves v4, and says it serves only v4.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&bare(V4, 1, &Request::Options(Options)))
        .await
        .unwrap();
    let (h, body) = read_bare(&mut s).await;
    assert_eq!((h.version, h.opcode), (V4, Opcode::Supported));
    assert_eq!(supported_versions(&body), vec!["4/v4"]);
    let mut cl = Client::connect(addr, true).await;
    cl.ok("SELECT cluster_name FROM system.local").await;
    assert_eq!(c.stats().nodes[0].node.version_refusals, 2);
    // Tests in other processes read the count from testbed.stats.
    let stats = rows(cl.query("SELECT * FROM testbed.stats").await);
    let specs = stats.metadata().col_specs.as_ref().unwrap();
    let col = specs
        .iter()
        .position(|s| s.name == "version_refusals")
        .unwrap();
    let total: i64 = cells(&stats)
        .iter()
        .map(|r| i64::from_be_bytes(r[col].clone().unwrap().try_into().unwrap()))
        .sum();
    assert_eq!(total, 2);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_first_versions_are_refused_too() {
    let c = TestCluster::builder().start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    for (v, reply) in [(3u8, V4), (6, V5)] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut f = bare(V4, 9, &Request::Options(Options));
        f[0] = v;
        s.write_all(&f).await.unwrap();
        let (h, body) = read_bare(&mut s).await;
        assert_eq!((h.version, h.opcode, h.stream), (reply, Opcode::Error, 9));
        let (code, msg) = error_of(&body);
        assert_eq!(code, error_code::PROTOCOL_ERROR);
        assert_eq!(
            msg,
            format!("Invalid or unsupported protocol version ({v}); supported versions are (4/v4, 5/v5)")
        );
        assert!(closed(&mut s).await);
    }
    assert_eq!(c.stats().nodes[0].node.version_refusals, 2);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v4_clients_work_on_a_v5_cluster() {
    let c = TestCluster::builder().start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    for lz4 in [false, true] {
        let mut cl = Client::connect(addr, lz4).await;
        assert_eq!(cl.version(), V4);
        // `send_envelope` checks each response's version is 4.
        cl.ok("SELECT cluster_name FROM system.local").await;
    }
    let st = c.stats();
    assert_eq!(st.nodes[0].node.connections_v5, 0);
    assert_eq!(st.nodes[0].node.version_refusals, 0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_version_mid_connection_is_a_protocol_error() {
    let c = TestCluster::builder().start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    // v4 then v5.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&bare(V4, 1, &Request::Options(Options)))
        .await
        .unwrap();
    assert_eq!(read_bare(&mut s).await.0.opcode, Opcode::Supported);
    s.write_all(&bare(V5, 2, &Request::Options(Options)))
        .await
        .unwrap();
    let (h, body) = read_bare(&mut s).await;
    assert_eq!((h.version, h.opcode, h.stream), (V4, Opcode::Error, 2));
    let (code, msg) = error_of(&body);
    assert_eq!(code, error_code::PROTOCOL_ERROR);
    assert!(msg.contains("Got 5 but previous messages"), "{msg}");
    assert!(closed(&mut s).await);
    // v5 handshake, then a v4 envelope inside a segment.
    let mut cl = Client::connect_version(addr, V5, false, &[]).await;
    let mut seg = BytesMut::new();
    let q = bare(V4, 3, &query("SELECT cluster_name FROM system.local"));
    SegmentEncoder::new(false)
        .encode_envelopes(&q, &mut seg)
        .unwrap();
    cl.write_raw(&seg).await;
    let (h, body) = cl.read_frame().await.unwrap();
    assert_eq!((h.version, h.opcode, h.stream), (V5, Opcode::Error, 3));
    assert!(error_of(&body).1.contains("Got 4 but previous messages"));
    assert!(cl.is_closed().await);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_segment_fault_breaks_the_crc32_of_the_next_segments() {
    let c = TestCluster::builder().start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    for lz4 in [false, true] {
        let mut cl = Client::connect_version(addr, V5, lz4, &[]).await;
        cl.ok("SELECT cluster_name FROM system.local").await;
        c.set_faults(0, Faults::none().with_corrupt_segments(1))
            .await
            .unwrap();
        let e = cl
            .send_expecting_segment_error(&query("SELECT cluster_name FROM system.local"))
            .await;
        assert!(
            matches!(e, SegmentError::PayloadChecksum { .. }),
            "expected a CRC32 failure, got {e:?}"
        );
        // One segment only: a new connection gets clean answers.
        let mut cl = Client::connect_version(addr, V5, lz4, &[]).await;
        cl.ok("SELECT cluster_name FROM system.local").await;
    }
    let st = c.stats();
    assert_eq!(st.nodes[0].segments_corrupted, 2);
    // v4 connections are not affected by the segment fault.
    c.set_faults(0, Faults::none().with_corrupt_segments(5))
        .await
        .unwrap();
    let mut v4 = Client::connect(addr, false).await;
    v4.ok("SELECT cluster_name FROM system.local").await;
    assert_eq!(c.stats().nodes[0].segments_corrupted, 2);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_segment_from_the_client_closes_the_connection() {
    let c = TestCluster::builder().start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    let mut cl = Client::connect_version(addr, V5, false, &[]).await;
    let mut seg = BytesMut::new();
    let q = bare(V5, 1, &query("SELECT cluster_name FROM system.local"));
    SegmentEncoder::new(false)
        .encode_envelopes(&q, &mut seg)
        .unwrap();
    let mid = segment::header_and_crc_len(false) + 12;
    seg[mid] ^= 0x01;
    cl.write_raw(&seg).await;
    assert!(cl.is_closed().await);
    let st = c.stats();
    assert_eq!(st.nodes[0].node.segment_checksum_failures, 1);
    assert_eq!(st.nodes[0].node.requests_served, 0);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_v4_length_fault_stalls_the_next_frame() {
    let c = TestCluster::builder().start().await.unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(&bare(V4, 1, &Request::Options(Options)))
        .await
        .unwrap();
    let (h, _) = read_bare(&mut s).await;
    let honest = h.body_len;
    c.set_faults(0, Faults::none().with_damaged_v4_lengths(1))
        .await
        .unwrap();
    s.write_all(&bare(V4, 2, &Request::Options(Options)))
        .await
        .unwrap();
    let mut head = [0u8; HEADER_LEN];
    tokio::time::timeout(WAIT, s.read_exact(&mut head))
        .await
        .unwrap()
        .unwrap();
    let h = FrameHeader::decode(&head, 1 << 24).unwrap().unwrap();
    assert_eq!(h.stream, 2);
    assert_eq!(h.body_len, honest + (1 << 20));
    // The honest body comes, and then nothing: a reader trusting the
    // length waits.
    let mut body = vec![0u8; honest as usize];
    s.read_exact(&mut body).await.unwrap();
    let mut more = [0u8; 1];
    let r = tokio::time::timeout(Duration::from_millis(300), s.read(&mut more)).await;
    assert!(r.is_err(), "nothing more is sent");
    assert_eq!(c.stats().nodes[0].v4_lengths_damaged, 1);
    // v5 connections are not affected by the v4 fault.
    c.set_faults(0, Faults::none().with_damaged_v4_lengths(3))
        .await
        .unwrap();
    let mut cl = Client::connect_version(addr, V5, false, &[]).await;
    cl.ok("SELECT cluster_name FROM system.local").await;
    assert_eq!(c.stats().nodes[0].v4_lengths_damaged, 1);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v5_authentication_and_events_travel_in_segments() {
    let c = TestCluster::builder()
        .password_auth("cassandra", "secret")
        .start()
        .await
        .unwrap();
    let addr = c.node(0).unwrap().cql_addr();
    let mut s = TcpStream::connect(addr).await.unwrap();
    let options = vec![(Cow::from("CQL_VERSION"), Cow::from("3.0.0"))];
    s.write_all(&bare(V5, 1, &Request::Startup(Startup { options })))
        .await
        .unwrap();
    // AUTHENTICATE is the last bare frame.
    let (h, _) = read_bare(&mut s).await;
    assert_eq!((h.version, h.opcode), (V5, Opcode::Authenticate));
    let token = b"\0cassandra\0secret".to_vec();
    let auth = Request::AuthResponse(AuthResponse {
        token: Some(Cow::Owned(token)),
    });
    let mut seg = BytesMut::new();
    let mut enc = SegmentEncoder::new(false);
    let reg = Request::Register(Register {
        event_types: Cow::Owned(vec![EventType::SchemaChange]),
    });
    let mut frames = bare(V5, 2, &auth);
    frames.extend_from_slice(&bare(V5, 3, &reg));
    enc.encode_envelopes(&frames, &mut seg).unwrap();
    s.write_all(&seg).await.unwrap();
    // Read segments: AUTH_SUCCESS, READY (REGISTER), then the event.
    let mut raw = BytesMut::new();
    let mut dec = SegmentDecoder::new(false, 1 << 24);
    let mut next = |raw: &mut BytesMut| dec.decode_next(raw).unwrap();
    let mut got = Vec::new();
    let mut pushed = false;
    for _ in 0..100 {
        while let Some(env) = next(&mut raw) {
            let h = FrameHeader::decode(&env, 1 << 24).unwrap().unwrap();
            assert_eq!(h.version, V5);
            got.push((
                h.opcode,
                h.stream,
                Bytes::copy_from_slice(&env[HEADER_LEN..]),
            ));
        }
        if got.len() == 2 && !pushed {
            let body = Bytes::from_static(b"\x00\x07CREATED");
            assert_eq!(c.push_event(EventKind::SchemaChange, body), 1);
            pushed = true;
        }
        if got.len() == 3 {
            break;
        }
        tokio::time::timeout(WAIT, s.read_buf(&mut raw))
            .await
            .unwrap()
            .unwrap();
    }
    let kinds: Vec<(Opcode, i16)> = got.iter().map(|(o, s, _)| (*o, *s)).collect();
    assert!(kinds.contains(&(Opcode::AuthSuccess, 2)), "{kinds:?}");
    assert!(kinds.contains(&(Opcode::Ready, 3)), "{kinds:?}");
    assert_eq!(kinds[2], (Opcode::Event, -1));
    assert_eq!(&got[2].2[..], b"\x00\x07CREATED");
    c.shutdown().await;
}
