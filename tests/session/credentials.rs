//! Credentials never leak: a login with `PasswordAuthenticator` (one that
//! succeeds, a wrong password, a node that closes the connection during the
//! authentication step) runs under a subscriber that records every event
//! and span at TRACE, and the password shows up in no log line, in no
//! error's `Display`, source chain or `Debug`, and in no `Debug` of the
//! builder, its configuration or the session.
//!
//! Each case runs on a current-thread runtime built inside the test while
//! the capturing subscriber is the thread's default, so every task the
//! driver and the test cluster spawn (they all run on that thread) logs
//! into it, and no other test's subscriber is involved.
#![allow(clippy::unwrap_used, missing_docs)]

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scylla_cql::frame::response::error::DbError;
use scylla_driver::cluster::control::{ContactError, ControlError};
use scylla_driver::connection::{ConnectionError, SetupStep};
use scylla_driver::{NewSessionError, SessionBuilder};
use scylla_testbed::{Faults, TestCluster};
use tracing_subscriber::fmt::format::FmtSpan;

/// The cluster's password, the one a correct login sends.
const PASSWORD: &str = "pw-7f3c-hunter2";
/// What the wrong-password login sends.
const WRONG_PASSWORD: &str = "pw-b41e-hunter3";
const USER: &str = "app";

/// A `MakeWriter` that appends every formatted line to one shared buffer.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl io::Write for Capture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Capture {
    type Writer = Capture;

    fn make_writer(&'a self) -> Capture {
        self.clone()
    }
}

impl Capture {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Runs `case` on a current-thread runtime under a subscriber that records
/// every event at every level, with every field, and every span (with its
/// fields) when it opens and closes; returns what `case` returned and the
/// log. The runtime is dropped (its tasks with it) before the subscriber.
fn logged<T>(case: impl Future<Output = T>) -> (T, String) {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
        .with_ansi(false)
        .with_writer(capture.clone())
        .finish();
    let dispatch = tracing::Dispatch::new(subscriber);
    let out = tracing::dispatcher::with_default(&dispatch, || {
        let blocking = dispatch.clone();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // The runtime's blocking threads (spawn_blocking) log into the
            // capture too: each gets it as its default for its lifetime,
            // which ends with the runtime's.
            .on_thread_start(move || {
                std::mem::forget(tracing::dispatcher::set_default(&blocking));
            })
            .build()
            .unwrap();
        let out = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(8), case)
                .await
                .expect("the case took longer than 8 s")
        });
        drop(rt);
        out
    });
    (out, capture.text())
}

/// The forms a secret could take in a text: as is, a distinctive part of
/// it, its bytes as `Debug` prints a byte slice or vector, and in hex.
fn forms(secret: &str) -> Vec<String> {
    let bytes = secret.as_bytes();
    let list = bytes
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    vec![
        secret.to_owned(),
        secret.rsplit('-').next().unwrap().to_owned(),
        list,
        hex.to_uppercase(),
        hex,
    ]
}

/// Asserts that neither password, in any of its forms, is in `text`.
fn assert_no_password(what: &str, text: &str) {
    for secret in [PASSWORD, WRONG_PASSWORD] {
        for form in forms(secret) {
            assert!(
                !text.contains(&form),
                "{what} contains the password (as {form:?}):\n{text}"
            );
        }
    }
}

/// The log is not empty and it shows the authentication step.
fn assert_log_sees_auth(case: &str, log: &str) {
    assert!(
        log.lines().count() > 3,
        "{case}: the capture is (almost) empty:\n{log}"
    );
    assert!(
        log.lines()
            .any(|l| l.contains("requires authentication") && l.contains("PasswordAuthenticator")),
        "{case}: no log line about authentication:\n{log}"
    );
}

/// Everything a user could print of an error: `Display`, each `source()`
/// down the chain (what `{:#}` of anyhow shows), `Debug` and `{:#?}`.
fn error_texts(e: &(dyn StdError + 'static)) -> Vec<(String, String)> {
    let mut texts = vec![
        ("Debug".to_owned(), format!("{e:?}")),
        ("{:#?}".to_owned(), format!("{e:#?}")),
    ];
    let mut level = Some(e);
    let mut depth = 0;
    while let Some(err) = level {
        texts.push((format!("Display of level {depth}"), err.to_string()));
        texts.push((format!("Debug of level {depth}"), format!("{err:?}")));
        level = err.source();
        depth += 1;
        assert!(depth < 16, "source chain too long");
    }
    texts
}

fn assert_error_keeps_it(case: &str, e: &(dyn StdError + 'static)) {
    for (what, text) in error_texts(e) {
        assert_no_password(&format!("{case}: the error's {what}"), &text);
    }
}

/// Every contact point failed; each failure.
fn contact_failures(err: &NewSessionError) -> impl Iterator<Item = &ContactError> {
    let NewSessionError::Control(ControlError::Unreachable(failures)) = err else {
        panic!("expected every contact point to fail, got {err:?}");
    };
    assert!(!failures.is_empty());
    failures.iter().map(|f| &f.error)
}

async fn cluster(faults: Faults) -> TestCluster {
    TestCluster::builder()
        .nodes(1)
        .shards(1)
        .password_auth(USER, PASSWORD)
        .faults(0, faults)
        .start()
        .await
        .unwrap()
}

/// A builder with the given password, whose `Debug` (the builder's and its
/// configuration's, both forms) must not show it.
fn builder(cluster: &TestCluster, password: &str) -> SessionBuilder {
    let b = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .user(USER, password)
        .request_timeout(Duration::from_secs(3));
    for (what, text) in [
        ("SessionBuilder", format!("{b:?}")),
        ("SessionBuilder {:#?}", format!("{b:#?}")),
        ("SessionConfig", format!("{:?}", b.config)),
        (
            "ConnectionConfig",
            format!("{:?}", b.config.pool.connection),
        ),
    ] {
        assert_no_password(&format!("Debug of the {what}"), &text);
        // The authenticator is there (the check looks at the right thing).
        assert!(
            text.contains("authenticator: Some(") && text.contains("AuthenticatorProvider"),
            "{what}: {text}"
        );
    }
    b
}

#[test]
fn a_successful_login_and_a_query() {
    let (session_debug, log) = logged(async {
        let cluster = cluster(Faults::none()).await;
        let session = builder(&cluster, PASSWORD).build().await.unwrap();
        assert!(session.wait_for_all_shards(Duration::from_secs(5)).await);
        session
            .query_unpaged("SELECT cluster_name FROM system.local", ())
            .await
            .unwrap();
        let debug = format!("{session:?} {session:#?}");
        drop(session);
        cluster.shutdown().await;
        debug
    });
    assert_no_password("the log", &log);
    assert_no_password("Debug of the Session", &session_debug);
    assert_log_sees_auth("a successful login", &log);
    assert!(
        log.contains("authentication succeeded"),
        "no successful authentication logged:\n{log}"
    );
}

#[test]
fn a_wrong_password() {
    let (err, log) = logged(async {
        let cluster = cluster(Faults::none()).await;
        let err = builder(&cluster, WRONG_PASSWORD).build().await.unwrap_err();
        cluster.shutdown().await;
        err
    });
    assert_no_password("the log", &log);
    assert_error_keeps_it("a wrong password", &err);
    for e in contact_failures(&err) {
        assert!(
            matches!(
                e,
                ContactError::Connect(ConnectionError::Server { error, .. })
                    if matches!(error.error, DbError::AuthenticationError)
            ),
            "{e:?}"
        );
    }
    assert_log_sees_auth("a wrong password", &log);
}

#[test]
fn the_node_closes_the_connection_during_authentication() {
    let (err, log) = logged(async {
        let cluster = cluster(Faults::none().with_close_during_auth(u32::MAX)).await;
        let err = builder(&cluster, PASSWORD).build().await.unwrap_err();
        cluster.shutdown().await;
        err
    });
    assert_no_password("the log", &log);
    assert_error_keeps_it("a connection closed during authentication", &err);
    for e in contact_failures(&err) {
        assert!(
            matches!(
                e,
                ContactError::Connect(ConnectionError::Closed {
                    step: SetupStep::Authenticate
                })
            ),
            "{e:?}"
        );
    }
    assert_log_sees_auth("a connection closed during authentication", &log);
    assert!(
        log.contains("closing the connection instead of answering AUTH_RESPONSE"),
        "the fault did not fire:\n{log}"
    );
}
