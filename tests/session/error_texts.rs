//! What users read when something fails: the `Display` of the common
//! failures (a refused connection, a timeout, a syntax error, a type
//! mismatch), alone and as anyhow prints a chain (`{:#}`: each error, then
//! its sources). Every level says what happened there and never repeats its
//! source's text, and the failures a user can fix say what to check.
//! `cargo test --test error_texts -- --nocapture` prints them.
#![allow(clippy::unwrap_used, missing_docs)]

use std::error::Error as StdError;
use std::time::Duration;

use scylla_driver::{SessionBuilder, Statement};
use scylla_testbed::{Faults, TestCluster};

/// Prints `e` both ways and checks its chain: no level's text contains the
/// text of its source, and no text is empty.
fn check_chain(name: &str, e: &anyhow::Error) -> String {
    println!("{name}\n  {{}}:   {e}\n  {{:#}}: {e:#}");
    let mut level: &(dyn StdError + 'static) = e.as_ref();
    let mut depth = 0;
    loop {
        let text = level.to_string();
        assert!(!text.is_empty(), "{name}: level {depth} displays nothing");
        let Some(source) = level.source() else { break };
        let inner = source.to_string();
        assert!(
            !text.contains(&inner),
            "{name}: level {depth} repeats its source's text\n  outer: {text}\n  source: {inner}"
        );
        level = source;
        depth += 1;
        assert!(depth < 16, "{name}: source chain too long");
    }
    format!("{e:#}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn common_failures_say_what_happened_once_and_what_to_check() {
    // A refused connection: a loopback port nothing listens on (bound, then
    // released).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = SessionBuilder::new()
        .known_node(format!("127.0.0.1:{port}"))
        .build()
        .await
        .unwrap_err();
    let all = check_chain("refused connection", &anyhow::Error::new(err));
    assert!(all.contains(&format!("127.0.0.1:{port}")), "{all}");
    assert!(all.contains("refused"), "{all}");
    assert!(all.contains("address and port"), "{all}");

    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .start()
        .await
        .unwrap();
    // The default request timeout: the statements expected to come back
    // with the server's error get it whatever a loaded machine does to
    // their round trip; only the timeout's statement has a short one.
    let session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
        .unwrap();

    // A syntax error: the server's message.
    let err = session
        .query_unpaged("SELEC nonsense", ())
        .await
        .unwrap_err();
    let all = check_chain("syntax error", &anyhow::Error::new(err));
    assert!(all.to_lowercase().contains("syntax"), "{all}");

    // A type mismatch: a text column read as an integer.
    let result = session
        .query_unpaged("SELECT release_version FROM system.local", ())
        .await
        .unwrap();
    let err = result.single_row::<(i64,)>().unwrap_err();
    let all = check_chain("type mismatch", &anyhow::Error::new(err));
    assert!(all.contains("release_version"), "{all}");

    // A timeout: the node answers seconds after the request's deadline.
    cluster
        .set_faults(0, Faults::none().with_latency(Duration::from_secs(5)))
        .await
        .unwrap();
    let err = session
        .query_unpaged(
            Statement::new("SELECT release_version FROM system.local")
                .with_timeout(Duration::from_millis(300)),
            (),
        )
        .await
        .unwrap_err();
    let all = check_chain("timeout", &anyhow::Error::new(err));
    assert!(all.contains("300ms"), "{all}");
    assert!(all.contains("request_timeout"), "{all}");
    // The deadline is said once.
    assert_eq!(all.matches("no response within").count(), 1, "{all}");
    cluster.shutdown().await;
}
