//! Session options and extension points as programs written for the official
//! `scylla` 1.x crate use them, against the in-process test cluster:
//! `use_keyspace(name, case_sensitive)`, a custom `AuthenticatorProvider`
//! implemented with `#[async_trait]`, `PlainTextAuthenticator`, `PoolSize`,
//! and the TCP and keepalive settings.
#![allow(clippy::unwrap_used, missing_docs)]

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use scylla::authentication::{
    AuthError, AuthenticatorProvider, AuthenticatorSession, PlainTextAuthenticator,
};
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::client::PoolSize;
use scylla_testbed::TestCluster;

type Error = Box<dyn std::error::Error + Send + Sync>;

const USER: &str = "app";
const PASSWORD: &str = "s3cret";

/// SASL PLAIN written by hand, as an application with its own mechanism
/// would write one; counts its exchanges.
struct CountingPlain {
    started: Arc<AtomicUsize>,
    succeeded: Arc<AtomicUsize>,
    password: String,
}

struct CountingSession {
    succeeded: Arc<AtomicUsize>,
}

#[async_trait]
impl AuthenticatorSession for CountingSession {
    async fn evaluate_challenge(
        &mut self,
        _token: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, AuthError> {
        Err("unexpected challenge".to_string())
    }

    async fn success(&mut self, _token: Option<&[u8]>) -> Result<(), AuthError> {
        self.succeeded.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait]
impl AuthenticatorProvider for CountingPlain {
    async fn start_authentication_session(
        &self,
        authenticator_name: &str,
    ) -> Result<(Option<Vec<u8>>, Box<dyn AuthenticatorSession>), AuthError> {
        assert!(
            authenticator_name.ends_with("PasswordAuthenticator"),
            "{authenticator_name}"
        );
        self.started.fetch_add(1, Ordering::SeqCst);
        let token = format!("\0{USER}\0{}", self.password).into_bytes();
        let session = CountingSession {
            succeeded: self.succeeded.clone(),
        };
        Ok((Some(token), Box::new(session)))
    }
}

async fn password_cluster(shards: u16) -> TestCluster {
    TestCluster::builder()
        .nodes(1)
        .shards(shards)
        .password_auth(USER, PASSWORD)
        .start()
        .await
        .unwrap()
}

/// Waits (bounded) until the session's pools hold `n` connections.
async fn total_connections(session: &Session, n: u64) -> u64 {
    let metrics = session.get_metrics();
    for _ in 0..200 {
        if metrics.get_total_connections() >= n {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    metrics.get_total_connections()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_authenticator_provider_authenticates_every_connection() -> Result<(), Error> {
    let cluster = password_cluster(2).await;
    let started = Arc::new(AtomicUsize::new(0));
    let succeeded = Arc::new(AtomicUsize::new(0));
    let provider = CountingPlain {
        started: started.clone(),
        succeeded: succeeded.clone(),
        password: PASSWORD.to_string(),
    };
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .authenticator_provider(Arc::new(provider))
        .build()
        .await?;
    session
        .query_unpaged("SELECT * FROM system.local", &[])
        .await?;
    // The control connection and one connection per shard.
    assert_eq!(total_connections(&session, 2).await, 2);
    assert!(started.load(Ordering::SeqCst) >= 3);
    assert_eq!(
        started.load(Ordering::SeqCst),
        succeeded.load(Ordering::SeqCst)
    );

    // A wrong password: the session does not start, and says why.
    let wrong = CountingPlain {
        started: Arc::new(AtomicUsize::new(0)),
        succeeded: Arc::new(AtomicUsize::new(0)),
        password: "wrong".to_string(),
    };
    let err = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .authenticator_provider(Arc::new(wrong))
        .build()
        .await
        .expect_err("a wrong password must not connect");
    let text = format!("{err}");
    assert!(!text.contains("wrong"), "the password leaked: {text}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_authenticator_as_a_provider() -> Result<(), Error> {
    let cluster = password_cluster(1).await;
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .authenticator_provider(Arc::new(PlainTextAuthenticator::new(
            USER.to_string(),
            PASSWORD.to_string(),
        )))
        .build()
        .await?;
    session
        .query_unpaged("SELECT * FROM system.local", &[])
        .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_size_per_host_and_per_shard() -> Result<(), Error> {
    let cluster = TestCluster::builder().nodes(1).shards(4).start().await?;
    let five = NonZeroUsize::new(5).unwrap();
    let two = NonZeroUsize::new(2).unwrap();
    // 5 per node over 4 shards: 2 per shard, every shard covered.
    for (size, want) in [(PoolSize::PerHost(five), 8), (PoolSize::PerShard(two), 8)] {
        let session: Session = SessionBuilder::new()
            .known_node(cluster.cql_addrs()[0].to_string())
            .pool_size(size)
            .tcp_nodelay(true)
            .tcp_keepalive_interval(Duration::from_secs(60))
            .keepalive_interval(Duration::from_secs(20))
            .keepalive_timeout(Duration::from_secs(5))
            .build()
            .await?;
        assert_eq!(total_connections(&session, want).await, want, "{size:?}");
        // And no more than that, once the pool has settled.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            session.get_metrics().get_total_connections(),
            want,
            "{size:?}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_keyspace_case_sensitive_or_not() -> Result<(), Error> {
    let cluster = TestCluster::builder().nodes(1).shards(1).start().await?;
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await?;
    session
        .query_unpaged(
            "CREATE KEYSPACE shop WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
            &[],
        )
        .await?;
    // Not case-sensitive: `Shop` is `shop`.
    session.use_keyspace("Shop", false).await?;
    assert_eq!(
        session.get_keyspace().as_deref().map(String::as_str),
        Some("shop")
    );
    // Case-sensitive: `Shop` is another keyspace, which does not exist.
    assert!(session.use_keyspace("Shop", true).await.is_err());
    assert_eq!(
        session.get_keyspace().as_deref().map(String::as_str),
        Some("shop")
    );

    // The builder takes the same two arguments.
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .use_keyspace("SHOP", false)
        .build()
        .await?;
    assert_eq!(
        session.get_keyspace().as_deref().map(String::as_str),
        Some("shop")
    );
    Ok(())
}

/// `Session::node_events()` is a `futures::Stream`: `StreamExt` works on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_events_are_a_stream() -> Result<(), Error> {
    use futures::StreamExt;
    use scylla::cluster::events::NodeEventKind;

    let cluster = TestCluster::builder().nodes(2).shards(1).start().await?;
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await?;
    assert!(session.wait_for_all_shards(Duration::from_secs(20)).await);
    let stopped = cluster.node(1).unwrap().host_id;
    let mut downs = session
        .node_events()
        .filter(|e| std::future::ready(e.kind == NodeEventKind::Down));
    cluster.stop_node(1).await?;
    let event = tokio::time::timeout(Duration::from_secs(20), downs.next())
        .await?
        .expect("the session is open");
    assert_eq!(event.host_id, stopped);
    Ok(())
}

/// An address translator as programs for the official crate write one (the
/// peer's lifetime elided, `#[async_trait]`): every peer as it reports itself.
struct AsReported {
    calls: Arc<AtomicUsize>,
}

#[async_trait]
impl scylla::policies::address_translator::AddressTranslator for AsReported {
    async fn translate_address(
        &self,
        peer: &scylla::policies::address_translator::UntranslatedPeer,
    ) -> Result<std::net::SocketAddr, scylla::errors::TranslationError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(peer.untranslated_address())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_translator_sees_every_peer() -> Result<(), Error> {
    let cluster = TestCluster::builder().nodes(3).start().await.unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .address_translator(Arc::new(AsReported {
            calls: calls.clone(),
        }))
        .build()
        .await?;
    // The two peers of the contact point, at least once each.
    assert!(calls.load(Ordering::SeqCst) >= 2);
    assert_eq!(session.get_cluster_state().get_nodes_info().len(), 3);
    Ok(())
}
