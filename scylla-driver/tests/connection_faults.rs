//! The connection against small fake servers that misbehave on purpose:
//! handshake timeouts and closes, authentication, protocol violations,
//! timeouts and orphans, peer closes under load, heartbeats, stream-id
//! exhaustion, LZ4, and closing on drop.
#![allow(clippy::unwrap_used, missing_docs)]

mod fake_server;

use std::borrow::Cow;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_server::{accept_ready, handshake, listen, split, supported, supported_response};
use scylla_cql::compression::Compression;
use scylla_cql::frame::request::{Options, Query, Request};
use scylla_cql::frame::response::{
    AuthSuccess, Authenticate, DbError, ErrorResponse, Response, ResultBody,
};
use scylla_cql::frame::Flags;
use scylla_driver::connection::{
    open, BrokenReason, Connection, ConnectionConfig, ConnectionError, ConnectionRequestError,
    PlainTextAuthenticator, RequestOptions, SetupStep,
};
use tokio::sync::Notify;

fn opts(timeout: Duration) -> RequestOptions<'static> {
    {
        let mut built = RequestOptions::default();
        built.timeout = Some(timeout);
        built
    }
}

fn config() -> ConnectionConfig {
    {
        let mut built = fake_server::v4_config();
        built.handshake_timeout = Duration::from_secs(2);
        built.heartbeat_interval = None;
        built
    }
}

/// Waits (bounded) until `cond` holds.
async fn eventually(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < within, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn wait_closed(conn: &Connection, within: Duration) -> Arc<String> {
    tokio::time::timeout(within, conn.closed())
        .await
        .expect("the connection did not close in time");
    Arc::new(format!("{:?}", conn.broken().map(|b| b.reason())))
}

// (a) ------------------------------------------------------------------------

#[tokio::test]
async fn handshake_times_out_naming_the_step() {
    // Accepts and never answers: stuck at OPTIONS.
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        drop(s);
    });
    let cfg = {
        let mut built = config();
        built.handshake_timeout = Duration::from_millis(200);
        built
    };
    let start = Instant::now();
    let e = open(addr, None, &cfg).await.unwrap_err();
    let took = start.elapsed();
    assert!(
        matches!(e, ConnectionError::Timeout { step: SetupStep::Options, after } if after == cfg.handshake_timeout),
        "{e:?}"
    );
    assert!(took >= Duration::from_millis(200), "{took:?}");
    // Well before the server's 3 s close would have ended it (a loaded
    // machine may run the open's task late; the bound is not its precision).
    assert!(took < Duration::from_millis(2500), "{took:?}");
    server.abort();

    // Answers OPTIONS, then sits on STARTUP.
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let (mut rd, wr) = split(s);
        let inc = rd.next().await.unwrap();
        assert!(matches!(inc.request, Request::Options(_)));
        wr.send(inc.header.stream, &Response::Supported(supported(false)))
            .await;
        let _startup = rd.next().await;
        tokio::time::sleep(Duration::from_secs(3)).await;
    });
    let e = open(addr, None, &cfg).await.unwrap_err();
    assert!(
        matches!(
            e,
            ConnectionError::Timeout {
                step: SetupStep::Startup,
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.step(), SetupStep::Startup);
    server.abort();
}

// (b) ------------------------------------------------------------------------

#[tokio::test]
async fn server_closing_mid_handshake_is_closed_at_that_step() {
    let (l, addr) = listen().await;
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let (mut rd, wr) = split(s);
        let inc = rd.next().await.unwrap();
        wr.send(inc.header.stream, &Response::Supported(supported(false)))
            .await;
        let inc = rd.next().await.unwrap();
        assert!(matches!(inc.request, Request::Startup(_)));
        // Close with nothing unread, so the client sees FIN, not RST.
        wr.shutdown().await;
        rd.drain_to_eof(Duration::from_secs(2)).await;
    });
    let e = open(addr, None, &config()).await.unwrap_err();
    assert!(
        matches!(
            e,
            ConnectionError::Closed {
                step: SetupStep::Startup
            }
        ),
        "{e:?}"
    );
}

// (c) ------------------------------------------------------------------------

const PASSWORD_AUTH: &str = "org.apache.cassandra.auth.PasswordAuthenticator";

/// A server that requires `user`/`pass`; returns the tokens it received.
fn auth_server(l: tokio::net::TcpListener) -> tokio::task::JoinHandle<Vec<Vec<u8>>> {
    tokio::spawn(async move {
        let mut tokens = Vec::new();
        let (s, _) = l.accept().await.unwrap();
        let (mut rd, wr) = split(s);
        loop {
            let Some(inc) = rd.next().await else {
                return tokens;
            };
            let stream = inc.header.stream;
            match inc.request {
                Request::Options(_) => wr.send(stream, &supported_response()).await,
                Request::Startup(_) => {
                    let auth = Authenticate {
                        authenticator: PASSWORD_AUTH.to_owned(),
                    };
                    wr.send(stream, &Response::Authenticate(auth)).await
                }
                Request::AuthResponse(a) => {
                    let token = a.token.map(|t| t.into_owned()).unwrap_or_default();
                    let ok = token == b"\0user\0pass";
                    tokens.push(token);
                    let resp = if ok {
                        Response::AuthSuccess(AuthSuccess { token: None })
                    } else {
                        Response::Error(ErrorResponse {
                            error: DbError::AuthenticationError,
                            message: "Provided username user and/or password are incorrect"
                                .to_owned(),
                        })
                    };
                    wr.send(stream, &resp).await;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    })
}

#[tokio::test]
async fn authentication_required_without_credentials() {
    let (l, addr) = listen().await;
    let server = auth_server(l);
    let e = open(addr, None, &config()).await.unwrap_err();
    match &e {
        ConnectionError::AuthRequired { authenticator } => {
            assert_eq!(authenticator, PASSWORD_AUTH)
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.step(), SetupStep::Authenticate);
    assert!(server.await.unwrap().is_empty());
}

#[tokio::test]
async fn password_authentication_sends_sasl_plain() {
    let (l, addr) = listen().await;
    let server = auth_server(l);
    let cfg = {
        let mut built = config();
        built.authenticator = Some(Arc::new(PlainTextAuthenticator::new(
            "user".into(),
            "pass".into(),
        )));
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let r = conn.request(&Options, &opts(Duration::from_secs(2))).await;
    assert!(matches!(r.unwrap().response, Response::Supported(_)));
    drop(conn);
    assert_eq!(server.await.unwrap(), vec![b"\0user\0pass".to_vec()]);
}

#[tokio::test]
async fn bad_credentials_are_a_server_error_at_authentication() {
    let (l, addr) = listen().await;
    let server = auth_server(l);
    let cfg = {
        let mut built = config();
        built.authenticator = Some(Arc::new(PlainTextAuthenticator::new(
            "user".into(),
            "wrong".into(),
        )));
        built
    };
    let e = open(addr, None, &cfg).await.unwrap_err();
    match &e {
        ConnectionError::Server {
            step: SetupStep::Authenticate,
            error,
        } => assert_eq!(error.error, DbError::AuthenticationError),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.await.unwrap(), vec![b"\0user\0wrong".to_vec()]);
}

// (d) ------------------------------------------------------------------------

/// Spawns `n` requests; returns their join handles.
fn spawn_requests(
    conn: &Connection,
    n: usize,
    timeout: Duration,
) -> Vec<tokio::task::JoinHandle<Result<Response, ConnectionRequestError>>> {
    (0..n)
        .map(|_| {
            let c = conn.clone();
            tokio::spawn(async move {
                c.request(&Options, &opts(timeout))
                    .await
                    .map(|f| f.response)
            })
        })
        .collect()
}

#[tokio::test]
async fn unknown_stream_breaks_the_connection() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut rd, wr) = accept_ready(&l, false).await;
        let mut seen = Vec::new();
        while seen.len() < 10 {
            seen.push(rd.next().await.unwrap().header.stream);
        }
        // Ids are handed out from 0 up, so 999 was never used.
        assert!(!seen.contains(&999));
        wr.send(999, &supported_response()).await;
        rd.drain_to_eof(Duration::from_secs(5)).await
    });
    let conn = open(addr, None, &config()).await.unwrap();
    let handles = spawn_requests(&conn, 10, Duration::from_secs(5));
    let mut broken = 0;
    for h in handles {
        match h.await.unwrap() {
            Err(ConnectionRequestError::Broken(b)) => {
                assert!(matches!(b.reason(), BrokenReason::UnknownStream(999)));
                broken += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(broken, 10);
    assert!(matches!(
        conn.broken().map(|b| b.reason()),
        Some(BrokenReason::UnknownStream(999))
    ));
    let later = conn.request(&Options, &opts(Duration::from_secs(1))).await;
    assert!(
        matches!(later, Err(ConnectionRequestError::NotSent(_))),
        "{later:?}"
    );
    assert!(later.unwrap_err().is_not_sent());
    assert_eq!(conn.in_flight(), 0);
    // The client closed its side.
    assert!(server.await.unwrap());
}

// (e) ------------------------------------------------------------------------

/// A server that records every request and holds its answer (OPTIONS ->
/// SUPPORTED) until `release` is notified; from then on it answers the held
/// ones and every later request at once.
fn late_server(
    l: tokio::net::TcpListener,
    release: Arc<Notify>,
    received: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (mut rd, wr) = accept_ready(&l, false).await;
        // `None` once released.
        let held = Arc::new(std::sync::Mutex::new(Some(Vec::new())));
        let (held2, wr2) = (held.clone(), wr.clone());
        tokio::spawn(async move {
            release.notified().await;
            let ids: Vec<i16> = held2.lock().unwrap().take().unwrap_or_default();
            for id in ids {
                wr2.send(id, &supported_response()).await;
            }
        });
        while let Some(inc) = rd.next().await {
            received.fetch_add(1, Ordering::SeqCst);
            let answer_now = match held.lock().unwrap().as_mut() {
                Some(ids) => {
                    ids.push(inc.header.stream);
                    false
                }
                None => true,
            };
            if answer_now {
                wr.send(inc.header.stream, &supported_response()).await;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_orphan_ids_until_late_responses_drain_them() {
    let (l, addr) = listen().await;
    let release = Arc::new(Notify::new());
    let received = Arc::new(AtomicUsize::new(0));
    let _server = late_server(l, release.clone(), received.clone());
    let tick = Duration::from_millis(50);
    let cfg = {
        let mut built = config();
        built.timeout_tick = tick;
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let timeout = Duration::from_millis(200);
    let handles: Vec<_> = (0..20)
        .map(|_| {
            let c = conn.clone();
            tokio::spawn(async move {
                let start = Instant::now();
                let r = c.request(&Options, &opts(timeout)).await;
                (r, start.elapsed())
            })
        })
        .collect();
    for h in handles {
        let (r, took) = h.await.unwrap();
        assert!(
            matches!(r, Err(ConnectionRequestError::Timeout(t)) if t == timeout),
            "{r:?}"
        );
        assert!(took >= timeout, "{took:?}");
        // The deadline's precision is the slots' unit tests' (explicit
        // instants); here, only that the tick ended it, with room for a
        // loaded machine running this task late.
        assert!(took <= timeout + 20 * tick, "timed out late: {took:?}");
    }
    assert_eq!(received.load(Ordering::SeqCst), 20);
    assert_eq!(conn.orphans(), 20);
    assert_eq!(conn.in_flight(), 20);
    assert_eq!(conn.counters().snapshot().timeouts, 20);

    // The late responses free the ids; the connection stays usable.
    release.notify_one();
    eventually("orphans drain", Duration::from_secs(3), || {
        conn.orphans() == 0
    })
    .await;
    assert_eq!(conn.in_flight(), 0);
    assert!(conn.is_usable());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_orphans_recycles_the_connection() {
    let (l, addr) = listen().await;
    let _server = late_server(l, Arc::new(Notify::new()), Arc::new(AtomicUsize::new(0)));
    let cfg = {
        let mut built = config();
        built.timeout_tick = Duration::from_millis(10);
        built.max_orphans = 5;
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let handles = spawn_requests(&conn, 8, Duration::from_millis(50));
    // Every request ends once: by its timeout, or, when a busy machine ran its
    // task after the sixth orphan had already closed the connection, by that
    // close. At least six timeouts are needed for the close.
    let mut timeouts = 0;
    for h in handles {
        match h.await.unwrap() {
            Err(ConnectionRequestError::Timeout(_)) => timeouts += 1,
            Err(ConnectionRequestError::Broken(b))
                if matches!(b.reason(), BrokenReason::TooManyOrphans(_)) => {}
            r => panic!("neither a timeout nor the orphans' close: {r:?}"),
        }
    }
    assert!(timeouts > 5, "{timeouts} timeouts");
    let reason = wait_closed(&conn, Duration::from_secs(2)).await;
    assert!(
        matches!(
            conn.broken().map(|b| b.reason()),
            Some(BrokenReason::TooManyOrphans(n)) if *n > 5
        ),
        "{reason}"
    );
    // Closing frees the orphans (no response will come on a closed socket).
    assert_eq!(conn.orphans(), 0);
    assert_eq!(conn.in_flight(), 0);
}

// (f) ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_close_fails_every_request_in_flight_once() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut rd, wr) = accept_ready(&l, false).await;
        for _ in 0..100 {
            rd.next().await.unwrap();
        }
        wr.shutdown().await;
        rd.drain_to_eof(Duration::from_secs(5)).await
    });
    let conn = open(addr, None, &config()).await.unwrap();
    let completions = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..100)
        .map(|_| {
            let (c, done) = (conn.clone(), completions.clone());
            tokio::spawn(async move {
                let r = c.request(&Options, &opts(Duration::from_secs(10))).await;
                done.fetch_add(1, Ordering::SeqCst);
                r
            })
        })
        .collect();
    for h in handles {
        match h.await.unwrap() {
            Err(ConnectionRequestError::Broken(b)) => {
                assert!(
                    matches!(b.reason(), BrokenReason::ClosedByPeer),
                    "{:?}",
                    b.reason()
                );
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(completions.load(Ordering::SeqCst), 100);
    assert_eq!(conn.in_flight(), 0);
    assert!(server.await.unwrap());
}

// (g) ------------------------------------------------------------------------

/// After the handshake, answers OPTIONS after `delay`; counts them.
fn options_server(
    l: tokio::net::TcpListener,
    delay: Duration,
    count: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (mut rd, wr) = accept_ready(&l, false).await;
        while let Some(inc) = rd.next().await {
            assert!(matches!(inc.request, Request::Options(_)));
            count.fetch_add(1, Ordering::SeqCst);
            let wr = wr.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                wr.send(inc.header.stream, &supported_response()).await;
            });
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_heartbeat_breaks_the_connection() {
    let (l, addr) = listen().await;
    let count = Arc::new(AtomicUsize::new(0));
    let _server = options_server(l, Duration::from_secs(2), count.clone());
    let cfg = {
        let mut built = config();
        built.heartbeat_interval = Some(Duration::from_millis(100));
        built.heartbeat_timeout = Duration::from_millis(100);
        built.timeout_tick = Duration::from_millis(10);
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let start = Instant::now();
    let reason = wait_closed(&conn, Duration::from_secs(2)).await;
    assert!(
        matches!(
            conn.broken().map(|b| b.reason()),
            Some(BrokenReason::HeartbeatFailed(_))
        ),
        "{reason}"
    );
    // Interval + timeout + a few ticks, and in any case before the server's
    // answer 2 s after the heartbeat (which would have kept it open).
    assert!(
        start.elapsed() < Duration::from_millis(1800),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connection_sends_heartbeats_and_stays_up() {
    let (l, addr) = listen().await;
    let count = Arc::new(AtomicUsize::new(0));
    let _server = options_server(l, Duration::ZERO, count.clone());
    let interval = Duration::from_millis(100);
    let cfg = {
        let mut built = config();
        built.heartbeat_interval = Some(interval);
        // Answered at once: a timeout far beyond a loaded machine's stall.
        built.heartbeat_timeout = Duration::from_secs(5);
        built
    };
    let start = Instant::now();
    let conn = open(addr, None, &cfg).await.unwrap();
    // Heartbeats come (counted, not timed: a loaded machine may send fewer
    // in a given time)...
    eventually("4 heartbeats", Duration::from_secs(5), || {
        count.load(Ordering::SeqCst) >= 4
    })
    .await;
    // ... no more often than the interval (a stall only spaces them out)...
    let n = count.load(Ordering::SeqCst);
    let most = start.elapsed().as_millis() / interval.as_millis() + 1;
    assert!(n as u128 <= most, "{n} heartbeats in {:?}", start.elapsed());
    // ... and their answers keep the connection up.
    assert!(conn.is_usable(), "{:?}", conn.broken());
    let r = conn.request(&Options, &opts(Duration::from_secs(5))).await;
    assert!(matches!(r.unwrap().response, Response::Supported(_)));
}

// (h) ------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_stream_ids_wait_then_proceed() {
    let (l, addr) = listen().await;
    let release = Arc::new(Notify::new());
    let count = Arc::new(AtomicUsize::new(0));
    let _server = late_server(l, release.clone(), count.clone());
    let cfg = {
        let mut built = config();
        built.max_in_flight = 4;
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let first = spawn_requests(&conn, 4, Duration::from_secs(5));
    eventually("4 received", Duration::from_secs(5), || {
        count.load(Ordering::SeqCst) == 4
    })
    .await;
    // The server holds its answers: every id stays busy until the release.
    assert_eq!(conn.in_flight(), 4);

    // All ids busy, short timeout: the wait for an id times out, unsent.
    let r = conn
        .request(&Options, &opts(Duration::from_millis(50)))
        .await;
    assert!(
        matches!(r, Err(ConnectionRequestError::Timeout(_))),
        "{r:?}"
    );

    // A request with time to spare waits for an id (its first poll finds none
    // free) and, once the answers free them, is sent and completes.
    let spare = opts(Duration::from_secs(5));
    let fifth = conn.request(&Options, &spare);
    tokio::pin!(fifth);
    let first_poll =
        std::future::poll_fn(|cx| std::task::Poll::Ready(fifth.as_mut().poll(cx))).await;
    assert!(first_poll.is_pending(), "an id was free: {first_poll:?}");
    assert_eq!(count.load(Ordering::SeqCst), 4);
    release.notify_one();
    assert!(matches!(
        fifth.await.unwrap().response,
        Response::Supported(_)
    ));
    for h in first {
        assert!(h.await.unwrap().is_ok());
    }
    // Only 4 + 1 requests reached the server (the timed-out one was never sent).
    assert_eq!(count.load(Ordering::SeqCst), 5);
    assert!(conn.is_usable());
}

// (i) ------------------------------------------------------------------------

#[tokio::test]
async fn lz4_compresses_frames_both_ways() {
    let (l, addr) = listen().await;
    let text: String = "SELECT * FROM ks.table WHERE pk = ? ".repeat(300);
    let expected = text.clone();
    let server = tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let (mut rd, wr) = split(s);
        let startup = handshake(&mut rd, &wr, &supported(true)).await.unwrap();
        assert!(startup.contains(&("COMPRESSION".to_owned(), "lz4".to_owned())));
        let mut compressed_queries = 0;
        while let Some(inc) = rd.next().await {
            let Request::Query(q) = inc.request else {
                panic!("{:?}", inc.request)
            };
            assert!(inc.header.flags.contains(Flags::COMPRESSION));
            // A full body arrived compressed: far smaller than the text.
            assert!((inc.header.body_len as usize) < expected.len() / 4);
            assert_eq!(q.contents, expected);
            compressed_queries += 1;
            wr.send(
                inc.header.stream,
                &Response::Result(ResultBody::SetKeyspace("ks".repeat(500))),
            )
            .await;
        }
        compressed_queries
    });
    let cfg = {
        let mut built = config();
        built.compression = Some(Compression::Lz4);
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    assert_eq!(conn.info().server.compression, Some(Compression::Lz4));
    let query = Query {
        contents: Cow::Borrowed(&text),
        params: Default::default(),
    };
    for _ in 0..3 {
        let before = conn.counters().snapshot();
        let r = conn
            .request(&query, &opts(Duration::from_secs(2)))
            .await
            .unwrap();
        assert_eq!(
            r.response,
            Response::Result(ResultBody::SetKeyspace("ks".repeat(500)))
        );
        let d = conn.counters().snapshot().since(&before);
        assert!(d.bytes_written < text.len() as u64 / 4, "{d:?}");
        assert!(d.bytes_read < 500, "the response came compressed: {d:?}");
    }
    drop(conn);
    assert_eq!(server.await.unwrap(), 3);
}

// (j) ------------------------------------------------------------------------

#[tokio::test]
async fn dropping_the_last_handle_closes_the_socket() {
    let (l, addr) = listen().await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let (mut rd, wr) = accept_ready(&l, false).await;
        let inc = rd.next().await.unwrap();
        wr.send(inc.header.stream, &supported_response()).await;
        let _ = tx.send(());
        rd.drain_to_eof(Duration::from_secs(2)).await
    });
    let conn = open(addr, None, &config()).await.unwrap();
    let second = conn.clone();
    conn.request(&Options, &opts(Duration::from_secs(1)))
        .await
        .unwrap();
    rx.await.unwrap();
    drop(conn);
    // One handle is left: still open.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(second.is_usable());
    drop(second);
    assert!(server.await.unwrap(), "the server did not see EOF");
}

// (i) ------------------------------------------------------------------------

/// Answers OPTIONS after `delay`; the first answer's length field is damaged
/// (it announces 1 MiB but 12 bytes follow), as a bit flip on the wire would.
fn damaging_server(l: tokio::net::TcpListener, delay: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (mut rd, wr) = accept_ready(&l, false).await;
        let mut first = true;
        while let Some(inc) = rd.next().await {
            let mut bytes = fake_server::encode_response(inc.header.stream, &supported_response());
            if std::mem::take(&mut first) {
                bytes.truncate(9 + 12);
                bytes[5..9].copy_from_slice(&(1u32 << 20).to_be_bytes());
            }
            let wr = wr.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                wr.send_raw(&bytes).await;
            });
        }
    })
}

fn stall_config() -> ConnectionConfig {
    {
        let mut built = config();
        built.stall_probe_after = Some(Duration::from_millis(200));
        built.stall_probe_timeout = Duration::from_millis(300);
        built.timeout_tick = Duration::from_millis(10);
        built
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn damaged_length_field_recycles_the_connection_within_the_probe_bound() {
    let (l, addr) = listen().await;
    let _server = damaging_server(l, Duration::ZERO);
    let conn = open(addr, None, &stall_config()).await.unwrap();
    let start = Instant::now();
    // The first answer wedges the reader; later ones (the probe's too) vanish
    // into the announced body.
    let first = conn.request(&Options, &opts(Duration::from_secs(30))).await;
    let elapsed = start.elapsed();
    match &first {
        Err(ConnectionRequestError::Broken(b)) => assert!(
            matches!(b.reason(), BrokenReason::ReadStalled { .. }),
            "{b}"
        ),
        other => panic!("{other:?}"),
    }
    // probe_after + probe timeout + ticks; far below the request's 30 s.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert!(elapsed >= Duration::from_millis(450), "{elapsed:?}");
    assert!(!conn.is_usable());
    // Every request ended: nothing is left in flight once the connection has
    // finished closing (the first request's error can reach us while the
    // closing still frees the timed-out probe's id: wait for the close).
    tokio::time::timeout(Duration::from_secs(5), conn.closed())
        .await
        .unwrap();
    assert_eq!(conn.in_flight(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_answers_with_a_responsive_server_are_not_a_stall() {
    let (l, addr) = listen().await;
    // Every answer takes 700 ms, longer than the probe's silence bound; the
    // probe is answered (after 700 ms too, within its 1 s), so the
    // connection stays.
    let count = Arc::new(AtomicUsize::new(0));
    let _server = options_server(l, Duration::from_millis(700), count.clone());
    let cfg = {
        let mut built = stall_config();
        built.stall_probe_timeout = Duration::from_secs(1);
        built
    };
    let conn = open(addr, None, &cfg).await.unwrap();
    let r = conn.request(&Options, &opts(Duration::from_secs(5))).await;
    assert!(matches!(r.unwrap().response, Response::Supported(_)));
    assert!(conn.is_usable(), "{:?}", conn.broken());
    // The request plus one probe.
    assert!(count.load(Ordering::SeqCst) >= 2);
}

#[tokio::test]
async fn a_length_beyond_the_frame_cap_fails_at_once() {
    let (l, addr) = listen().await;
    let server = tokio::spawn(async move {
        let (mut rd, wr) = accept_ready(&l, false).await;
        let inc = rd.next().await.unwrap();
        let mut bytes = fake_server::encode_response(inc.header.stream, &supported_response());
        // 64 MiB: above the 16 MiB default cap.
        bytes[5..9].copy_from_slice(&(64u32 << 20).to_be_bytes());
        wr.send_raw(&bytes).await;
        rd.drain_to_eof(Duration::from_secs(5)).await
    });
    assert_eq!(
        ConnectionConfig::default().max_frame_len,
        scylla_driver::connection::DEFAULT_MAX_FRAME_LEN
    );
    let conn = open(addr, None, &config()).await.unwrap();
    let start = Instant::now();
    let r = conn.request(&Options, &opts(Duration::from_secs(10))).await;
    // At once: far below the request's 10 s timeout.
    assert!(start.elapsed() < Duration::from_secs(5));
    match r {
        Err(ConnectionRequestError::Broken(b)) => {
            assert!(matches!(b.reason(), BrokenReason::Decode(_)), "{b}")
        }
        other => panic!("{other:?}"),
    }
    assert!(server.await.unwrap());
}
