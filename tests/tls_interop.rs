//! TLS interop: the driver's TLS against another TLS library's server, for
//! every protocol version and cipher suite both sides support with an ECDSA
//! certificate, over both record layers (rustls', the default, and the
//! driver's own, the opt-in): OpenSSL, through `socat`, which terminates TLS
//! in front of the test cluster, so a whole session runs through it (schema,
//! writes and reads of values from a few bytes to 200 KB, i.e. one record
//! to many).
//!
//! Ignored in `cargo test --workspace`: it needs `socat` and `openssl`
//! (Debian packages). `scripts/tls-interop.sh` installs what is missing and
//! runs it (CI does); by hand: `cargo test --test tls_interop -- --ignored
//! --nocapture`. (The real-server suite adds Java's TLS: Cassandra 5.0 with
//! client encryption.)
#![allow(clippy::unwrap_used, missing_docs)]

mod common;
use common::create_keyspace;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::ring::cipher_suite as suites;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, SupportedCipherSuite, SupportedProtocolVersion};
use scylla_driver::connection::tls::{RecordLayer, TlsConfig};
use scylla_driver::policy::MapTranslator;
use scylla_driver::{Session, SessionBuilder};
use scylla_testbed::TestCluster;

/// A server process, killed when dropped.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A CA and a server certificate for 127.0.0.1 signed by it (ECDSA P-256),
/// written to `dir`: (CA PEM, certificate path, key path).
fn certificates(dir: &Path) -> (String, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("server.pem"), dir.join("server.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (ca.pem(), cert_path, key_path)
}

/// A loopback port free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (bounded) until something listens on `addr`.
async fn listening(addr: SocketAddr, what: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < until, "{what} is not listening on {addr}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `program`, failing with what to install if it is missing.
fn spawn(program: &str, args: &[String], package: &str) -> Peer {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): install the {package} package"));
    Peer(child)
}

/// The versions and suites both sides support with an ECDSA certificate.
fn cells() -> Vec<(&'static SupportedProtocolVersion, SupportedCipherSuite)> {
    vec![
        (&rustls::version::TLS13, suites::TLS13_AES_128_GCM_SHA256),
        (&rustls::version::TLS13, suites::TLS13_AES_256_GCM_SHA384),
        (
            &rustls::version::TLS13,
            suites::TLS13_CHACHA20_POLY1305_SHA256,
        ),
        (
            &rustls::version::TLS12,
            suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            &rustls::version::TLS12,
            suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            &rustls::version::TLS12,
            suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// The driver's TLS settings offering exactly one version and one suite.
fn tls(
    ca: &str,
    version: &'static SupportedProtocolVersion,
    suite: SupportedCipherSuite,
    layer: RecordLayer,
) -> TlsConfig {
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![suite];
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConfig::from_client_config(Arc::new(config))
        .with_record_layer(layer)
        .unwrap()
}

fn name(
    version: &'static SupportedProtocolVersion,
    suite: SupportedCipherSuite,
    layer: RecordLayer,
) -> String {
    format!("{:?} {:?} over {layer}", version.version, suite.suite())
}

/// A table in keyspace `interop`, then values from a few bytes to 200 KB
/// written and read back.
async fn exchange(session: &Session, table: &str) {
    session
        .query_unpaged(
            format!("CREATE TABLE interop.{table} (k int PRIMARY KEY, v blob)"),
            (),
        )
        .await
        .unwrap();
    let insert = session
        .prepare(format!("INSERT INTO interop.{table} (k, v) VALUES (?, ?)"))
        .await
        .unwrap();
    let select = session
        .prepare(format!("SELECT v FROM interop.{table} WHERE k = ?"))
        .await
        .unwrap();
    for (k, len) in [(1, 7usize), (2, 20_000), (3, 200_000)] {
        let value: Vec<u8> = (0..len).map(|i| (i * 31 + k as usize) as u8).collect();
        session
            .execute_unpaged(&insert, (k, value.clone()))
            .await
            .unwrap();
        let (got,): (Vec<u8>,) = session
            .execute_unpaged(&select, (k,))
            .await
            .unwrap()
            .single_row()
            .unwrap();
        assert!(got == value, "value {k} ({len} bytes) came back different");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs socat and openssl (scripts/tls-interop.sh)"]
async fn openssl_server_every_version_suite_and_record_layer() {
    let dir = tempdir();
    let (ca, cert, key) = certificates(&dir);
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .start()
        .await
        .unwrap();
    let node = cluster.cql_addrs()[0];
    let front: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let _socat = spawn(
        "socat",
        &[
            format!(
                "OPENSSL-LISTEN:{},bind=127.0.0.1,reuseaddr,fork,cert={},key={},verify=0",
                front.port(),
                cert.display(),
                key.display()
            ),
            format!("TCP:{node}"),
        ],
        "socat",
    );
    listening(front, "socat").await;
    let mut n = 0;
    for (version, suite) in cells() {
        for layer in [RecordLayer::Rustls, RecordLayer::Driver] {
            let cell = name(version, suite, layer);
            let session = SessionBuilder::new()
                .known_node(front.to_string())
                .shard_aware_port(false)
                // The node reports its own address: reach it through socat.
                .address_translator(Arc::new(MapTranslator::new().address(node, front)))
                .tls(tls(&ca, version, suite, layer))
                .build()
                .await
                .unwrap_or_else(|e| panic!("{cell}: {e}"));
            if n == 0 {
                create_keyspace(&session, "interop", 1).await;
            }
            n += 1;
            exchange(&session, &format!("t{n}")).await;
            eprintln!("OpenSSL (socat): {cell}: ok");
        }
    }
    cluster.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory for one test's certificates.
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "scylla-tls-interop-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
