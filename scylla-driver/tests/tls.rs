//! TLS connections against a tiny tokio-rustls CQL server with certificates
//! made here (rcgen): success, mutual TLS, and every failure the driver must
//! name (unknown CA, wrong name, expired, TLS/plaintext mismatches both ways,
//! a stalled handshake, a missing client certificate, builder errors).
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used, missing_docs)]
use scylla_cql::frame::ProtocolVersion;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use scylla_cql::frame::envelope::{decode_envelope, encode_frame, frame_len, FrameExtras};
use scylla_cql::frame::request::{Options, Request};
use scylla_cql::frame::response::{Ready, Response, Supported};
use scylla_cql::frame::{Direction, HEADER_LEN};
use scylla_driver::connection::tls::{RecordLayer, ServerName, TlsConfig, TlsConfigError};
use scylla_driver::connection::{
    open, ConnectionConfig, ConnectionError, RequestOptions, SetupStep, TlsErrorKind,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// A CA and what it signs.
struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    fn pem(&self) -> String {
        self.cert.pem()
    }

    /// A leaf certificate for `names` (DNS names or IP addresses).
    fn issue(&self, names: &[&str], client: bool, expired: bool) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, "leaf");
        p.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        if expired {
            p.not_before = rcgen::date_time_ymd(2001, 1, 1);
            p.not_after = rcgen::date_time_ymd(2002, 1, 1);
        }
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf { cert, key }
    }
}

struct Leaf {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl Leaf {
    fn der(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![self.cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.serialize_der())),
        )
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server TLS config presenting `leaf`, requiring a client certificate
/// signed by `client_ca` if given.
fn server_config(leaf: &Leaf, client_ca: Option<&Ca>) -> Arc<ServerConfig> {
    let b = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let b = match client_ca {
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            roots.add(ca.cert.der().clone()).unwrap();
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .unwrap();
            b.with_client_cert_verifier(v)
        }
        None => b.with_no_client_auth(),
    };
    let (chain, key) = leaf.der();
    Arc::new(b.with_single_cert(chain, key).unwrap())
}

fn supported() -> Supported {
    let mut s = Supported::default();
    s.insert("CQL_VERSION", vec!["3.4.7".to_owned()]);
    s.insert("PROTOCOL_VERSIONS", vec!["4/v4".to_owned()]);
    s.insert("COMPRESSION", vec!["lz4".to_owned()]);
    s
}

/// Answers OPTIONS with SUPPORTED and STARTUP with READY until EOF.
async fn serve_cql<S: AsyncRead + AsyncWrite + Unpin>(s: S) {
    serve_cql_with(s, supported()).await
}

/// [`serve_cql`] with a given SUPPORTED.
async fn serve_cql_with<S: AsyncRead + AsyncWrite + Unpin>(s: S, supported: Supported) {
    let _ = serve_cql_hooked(s, supported, |_| {}).await;
}

/// [`serve_cql_with`], calling `after_response` after each response is
/// written; returns how the client's stream ended (`Ok` on a clean TLS
/// close).
async fn serve_cql_hooked<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    supported: Supported,
    mut after_response: impl FnMut(&mut S),
) -> std::io::Result<()> {
    let mut buf = BytesMut::new();
    loop {
        while let Ok(Some((header, len))) = frame_len(&buf, 1 << 20) {
            let frame = buf.split_to(len).freeze();
            let env = decode_envelope(&header, frame.slice(HEADER_LEN..), None, 1 << 20).unwrap();
            let resp = match Request::decode(header.opcode, &env.body, ProtocolVersion::V4).unwrap()
            {
                Request::Options(_) => Response::Supported(supported.clone()),
                Request::Startup(_) => Response::Ready(Ready),
                other => panic!("unexpected request {other:?}"),
            };
            let mut out = BytesMut::new();
            encode_frame(
                &mut out,
                ProtocolVersion::V4,
                Direction::Response,
                header.stream,
                &resp,
                &FrameExtras::NONE,
                None,
            )
            .unwrap();
            s.write_all(&out).await?;
            s.flush().await?;
            after_response(&mut s);
        }
        if s.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
    }
}

/// A TLS CQL server on 127.0.0.1; returns its address.
async fn tls_server(config: Arc<ServerConfig>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(config);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    serve_cql(tls).await;
                }
            });
        }
    });
    addr
}

/// A plaintext CQL server on 127.0.0.1.
async fn plain_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut tcp = tcp;
                let mut b = [0u8; 9];
                // Whatever arrives, answer like a CQL node that cannot parse
                // it: a v4 ERROR frame (protocol error), then close.
                let _ = tcp.read(&mut b).await;
                let msg = b"Invalid or unsupported protocol version";
                let mut out = vec![0x84, 0, 0, 0, 0x00];
                let body_len = 4 + 2 + msg.len();
                out.extend_from_slice(&(body_len as u32).to_be_bytes());
                out.extend_from_slice(&0x000Au32.to_be_bytes());
                out.extend_from_slice(&(msg.len() as u16).to_be_bytes());
                out.extend_from_slice(msg);
                let _ = tcp.write_all(&out).await;
            });
        }
    });
    addr
}

fn client(ca: &Ca) -> ConnectionConfig {
    client_with(ca, RecordLayer::Rustls)
}

/// [`client`] with records sealed by `layer`.
fn client_with(ca: &Ca, layer: RecordLayer) -> ConnectionConfig {
    let tls = TlsConfig::builder()
        .ca_pem(ca.pem().as_bytes())
        .unwrap()
        .record_layer(layer)
        .build()
        .unwrap();
    assert_eq!(tls.record_layer(), layer);
    with_tls(tls)
}

const RECORD_LAYERS: [RecordLayer; 2] = [RecordLayer::Rustls, RecordLayer::Driver];

fn with_tls(tls: TlsConfig) -> ConnectionConfig {
    let mut c = {
        let mut built = ConnectionConfig::default();
        built.handshake_timeout = Duration::from_secs(3);
        built.heartbeat_interval = None;
        built
    };
    c.socket.connect_timeout = Duration::from_secs(3);
    c.tls = Some(tls);
    c
}

fn opts() -> RequestOptions<'static> {
    {
        let mut built = RequestOptions::default();
        built.timeout = Some(Duration::from_secs(3));
        built
    }
}

async fn expect_tls_error(
    addr: SocketAddr,
    config: &ConnectionConfig,
    want: TlsErrorKind,
) -> ConnectionError {
    let started = Instant::now();
    let e = tokio::time::timeout(Duration::from_secs(10), open(addr, None, config))
        .await
        .expect("open must end in bounded time")
        .expect_err("open must fail");
    eprintln!("{want:?}: {e}");
    assert_eq!(e.tls_kind(), Some(want), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5), "{e}");
    // The error says what went wrong and keeps its cause.
    assert!(!e.to_string().is_empty());
    e
}

#[tokio::test]
async fn connects_and_requests_over_tls() {
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    let addr = tls_server(server_config(&leaf, None)).await;
    let conn = open(addr, None, &client(&ca)).await.unwrap();
    assert!(conn.info().tls);
    for _ in 0..3 {
        let r = conn.request(&Options, &opts()).await.unwrap();
        assert!(matches!(r.response, Response::Supported(_)), "{r:?}");
    }
    // Many concurrent requests through the split TLS halves.
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let c = conn.clone();
        set.spawn(async move { c.request(&Options, &opts()).await.map(|_| ()) });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap().unwrap();
    }
}

#[tokio::test]
async fn unknown_ca_is_named() {
    let ca = Ca::new("server CA");
    let other = Ca::new("some other CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    let addr = tls_server(server_config(&leaf, None)).await;
    let e = expect_tls_error(addr, &client(&other), TlsErrorKind::UnknownCa).await;
    assert_eq!(e.step(), SetupStep::Tls);
    assert!(std::error::Error::source(&e).is_some());
}

#[tokio::test]
async fn wrong_name_is_named_and_a_fixed_name_fixes_it() {
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["db.example.com"], false, false);
    let addr = tls_server(server_config(&leaf, None)).await;
    // By default the node is verified by its IP address, which the
    // certificate does not list.
    expect_tls_error(addr, &client(&ca), TlsErrorKind::NameMismatch).await;

    let tls = TlsConfig::builder()
        .ca_pem(ca.pem().as_bytes())
        .unwrap()
        .server_name(ServerName::Fixed("db.example.com".into()))
        .build()
        .unwrap();
    let conn = open(addr, None, &with_tls(tls)).await.unwrap();
    conn.request(&Options, &opts()).await.unwrap();

    let tls = TlsConfig::builder()
        .ca_pem(ca.pem().as_bytes())
        .unwrap()
        .server_name(ServerName::Custom(Arc::new(|a: SocketAddr| {
            assert!(a.ip().is_loopback());
            "db.example.com".to_owned()
        })))
        .build()
        .unwrap();
    open(addr, None, &with_tls(tls)).await.unwrap();
}

#[tokio::test]
async fn expired_certificate_is_named() {
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["127.0.0.1"], false, true);
    let addr = tls_server(server_config(&leaf, None)).await;
    expect_tls_error(addr, &client(&ca), TlsErrorKind::Expired).await;
}

#[tokio::test]
async fn tls_client_to_plaintext_server_is_named() {
    let ca = Ca::new("test CA");
    let addr = plain_server().await;
    let e = expect_tls_error(addr, &client(&ca), TlsErrorKind::NotTls).await;
    assert!(e.to_string().contains("does not speak TLS"), "{e}");
}

#[tokio::test]
async fn plaintext_client_to_tls_server_is_named() {
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    let addr = tls_server(server_config(&leaf, None)).await;
    let mut plain = {
        let mut built = ConnectionConfig::default();
        built.handshake_timeout = Duration::from_secs(3);
        built.heartbeat_interval = None;
        built
    };
    plain.tls = None;
    let e = expect_tls_error(addr, &plain, TlsErrorKind::ServerRequiresTls).await;
    assert!(e.to_string().contains("enable TLS"), "{e}");
}

#[tokio::test]
async fn stalled_tls_handshake_is_bounded_by_the_connect_timeout() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    // Accepts, then says nothing.
    let _hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let ca = Ca::new("test CA");
    let mut config = client(&ca);
    config.socket.connect_timeout = Duration::from_millis(300);
    config.handshake_timeout = Duration::from_secs(30);
    let started = Instant::now();
    let e = open(addr, None, &config).await.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(
        e.tls_kind(),
        Some(TlsErrorKind::HandshakeTimeout(Duration::from_millis(300))),
        "{e}"
    );
    assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
    // The connect timeout's, far below the 30 s handshake timeout.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
}

#[tokio::test]
async fn mutual_tls_works_and_a_missing_client_cert_is_named() {
    let ca = Ca::new("test CA");
    let client_ca = Ca::new("client CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    let addr = tls_server(server_config(&leaf, Some(&client_ca))).await;

    let dir = temp_dir("mtls");
    let cert = client_ca.issue(&["client.example"], true, false);
    let (ca_path, cert_path, key_path) = (dir.join("ca.pem"), dir.join("c.pem"), dir.join("c.key"));
    std::fs::write(&ca_path, ca.pem()).unwrap();
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.key.serialize_pem()).unwrap();
    let tls = TlsConfig::builder()
        .ca_pem_file(&ca_path)
        .unwrap()
        .client_cert_pem_files(&cert_path, &key_path)
        .unwrap()
        .build()
        .unwrap();
    let conn = open(addr, None, &with_tls(tls)).await.unwrap();
    conn.request(&Options, &opts()).await.unwrap();

    // Without a certificate: TLS 1.3 servers reject only after the client's
    // handshake finished, so the alert arrives during the first CQL exchange.
    expect_tls_error(addr, &client(&ca), TlsErrorKind::ClientCertRejected).await;

    // A certificate from a CA the server does not trust.
    let stranger = Ca::new("stranger").issue(&["client.example"], true, false);
    let tls = TlsConfig::builder()
        .ca_pem(ca.pem().as_bytes())
        .unwrap()
        .client_cert_pem(
            stranger.cert.pem().as_bytes(),
            stranger.key.serialize_pem().as_bytes(),
        )
        .unwrap()
        .build()
        .unwrap();
    expect_tls_error(addr, &with_tls(tls), TlsErrorKind::ClientCertRejected).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn danger_accept_invalid_certs_accepts_an_unknown_ca() {
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["db.example.com"], false, false);
    let addr = tls_server(server_config(&leaf, None)).await;
    let tls = TlsConfig::builder()
        .danger_accept_invalid_certs()
        .build()
        .unwrap();
    open(addr, None, &with_tls(tls)).await.unwrap();
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "scylla-driver-tls-{tag}-{}-{}",
        std::process::id(),
        fastrand_suffix()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fastrand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

#[test]
fn builder_errors_name_the_file_and_the_problem() {
    let dir = temp_dir("builder");
    let missing = dir.join("nope.pem");
    let e = TlsConfig::builder().ca_pem_file(&missing).unwrap_err();
    assert!(matches!(e, TlsConfigError::Read { .. }), "{e}");
    assert!(e.to_string().contains("nope.pem"), "{e}");

    let garbage = dir.join("garbage.pem");
    std::fs::write(&garbage, "this is not PEM\n").unwrap();
    let e = TlsConfig::builder().ca_pem_file(&garbage).unwrap_err();
    assert!(matches!(e, TlsConfigError::Pem { .. }), "{e}");
    assert!(e.to_string().contains("garbage.pem"), "{e}");

    let broken = dir.join("broken.pem");
    std::fs::write(
        &broken,
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let e = TlsConfig::builder().ca_pem_file(&broken).unwrap_err();
    assert!(e.to_string().contains("broken.pem"), "{e}");

    // A certificate file given as the key.
    let ca = Ca::new("test CA");
    let cert = ca.issue(&["client"], true, false);
    let cert_path = dir.join("c.pem");
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    let e = TlsConfig::builder()
        .client_cert_pem_files(&cert_path, &cert_path)
        .unwrap_err();
    assert!(
        matches!(
            e,
            TlsConfigError::Pem {
                what: "private key",
                ..
            }
        ),
        "{e}"
    );

    // A key that does not match the certificate.
    let other_key = dir.join("other.key");
    std::fs::write(&other_key, KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let e = TlsConfig::builder()
        .ca_pem(ca.pem().as_bytes())
        .unwrap()
        .client_cert_pem_files(&cert_path, &other_key)
        .unwrap()
        .build()
        .unwrap_err();
    assert!(matches!(e, TlsConfigError::ClientCert { .. }), "{e}");

    let e = TlsConfig::builder().build().unwrap_err();
    assert!(matches!(e, TlsConfigError::NoRoots), "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A ScyllaDB-like SUPPORTED of a 2-shard node.
fn sharded_supported(shard: u16, plain_port: u16, ssl_port: u16) -> Supported {
    let mut s = supported();
    for (k, v) in [
        ("SCYLLA_SHARD", shard.to_string()),
        ("SCYLLA_NR_SHARDS", "2".to_owned()),
        (
            "SCYLLA_PARTITIONER",
            "org.apache.cassandra.dht.Murmur3Partitioner".to_owned(),
        ),
        (
            "SCYLLA_SHARDING_ALGORITHM",
            "biased-token-round-robin".to_owned(),
        ),
        ("SCYLLA_SHARDING_IGNORE_MSB", "12".to_owned()),
        ("SCYLLA_SHARD_AWARE_PORT", plain_port.to_string()),
        ("SCYLLA_SHARD_AWARE_PORT_SSL", ssl_port.to_string()),
    ] {
        s.insert(k, vec![v]);
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_over_tls_use_the_ssl_shard_aware_port() {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use scylla_driver::metrics::Metrics;
    use scylla_driver::pool::{NodePool, PoolConfig};

    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    let acceptor = TlsAcceptor::from(server_config(&leaf, None));
    let regular = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let regular_addr = regular.local_addr().unwrap();
    let ssl_sa = TcpListener::bind("127.0.0.1:0").await.unwrap();
    // The plaintext shard-aware port: a TLS pool must never use it.
    let plain_sa = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (ssl_port, plain_port) = (
        ssl_sa.local_addr().unwrap().port(),
        plain_sa.local_addr().unwrap().port(),
    );
    let plain_accepts = Arc::new(AtomicUsize::new(0));
    let counted = plain_accepts.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = plain_sa.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            held.push(s);
        }
    });
    // `by_port`: the shard is the client's source port modulo 2 (the
    // shard-aware port's rule); otherwise shard 0.
    for (l, by_port) in [(regular, false), (ssl_sa, true)] {
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            while let Ok((tcp, peer)) = l.accept().await {
                let shard = if by_port { peer.port() % 2 } else { 0 };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve_cql_with(tls, sharded_supported(shard, plain_port, ssl_port)).await;
                    }
                });
            }
        });
    }
    let metrics = Arc::new(Metrics::default());
    let pool = NodePool::new(
        regular_addr,
        {
            let mut built = PoolConfig::default();
            built.connection = client(&ca);
            built
        },
        metrics.clone(),
    );
    assert!(pool.wait_until_full(Duration::from_secs(10)).await);
    let snap = pool.snapshot();
    assert_eq!(snap.covered_shards(), 2);
    assert_eq!(snap.shards[0][0].info().peer.port(), regular_addr.port());
    assert_eq!(snap.shards[1][0].info().peer.port(), ssl_port);
    assert!(snap.shards[1][0].info().tls);
    let m = metrics.snapshot();
    assert_eq!(m.connects_shard_aware_ok, 1, "{m:?}");
    assert_eq!(m.connect_attempts(), 2, "{m:?}");
    assert_eq!(plain_accepts.load(Ordering::SeqCst), 0);
    pool.shutdown();
}

/// A server configuration offering one TLS version and one cipher suite.
fn server_config_with(
    leaf: &Leaf,
    version: &'static rustls::SupportedProtocolVersion,
    suite: rustls::SupportedCipherSuite,
) -> Arc<ServerConfig> {
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: vec![suite],
        ..rustls::crypto::ring::default_provider()
    };
    let (chain, key) = leaf.der();
    Arc::new(
        ServerConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[version])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap(),
    )
}

/// A TLS CQL server that answers with `supported` and calls `hook` on its
/// side of the TLS connection after each response; each connection's end
/// (`Ok` on a clean TLS close) goes to the returned channel.
async fn hooked_tls_server(
    config: Arc<ServerConfig>,
    supported: Supported,
    hook: fn(&mut tokio_rustls::server::TlsStream<tokio::net::TcpStream>),
) -> (
    SocketAddr,
    tokio::sync::mpsc::UnboundedReceiver<(Option<rustls::HandshakeKind>, std::io::Result<()>)>,
) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(config);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let (acceptor, tx, supported) = (acceptor.clone(), tx.clone(), supported.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    let kind = tls.get_ref().1.handshake_kind();
                    let end = serve_cql_hooked(tls, supported, hook).await;
                    let _ = tx.send((kind, end));
                }
            });
        }
    });
    (addr, rx)
}

/// A SUPPORTED of about 100 KB: its response spans several TLS records.
fn large_supported() -> Supported {
    let mut s = supported();
    s.insert(
        "PADDING",
        (0..1000).map(|i| format!("{i:0>96}")).collect::<Vec<_>>(),
    );
    s
}

/// Small and large responses, one at a time and 100 at once, on `conn`.
async fn exchange(conn: &scylla_driver::connection::Connection, large: bool) {
    for _ in 0..5 {
        let r = conn.request(&Options, &opts()).await.unwrap();
        let Response::Supported(s) = r.response else {
            panic!("{r:?}")
        };
        assert_eq!(s.get("PADDING").map(|v| v.len()), large.then_some(1000));
    }
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let c = conn.clone();
        set.spawn(async move { c.request(&Options, &opts()).await.map(|_| ()) });
    }
    while let Some(r) = set.join_next().await {
        r.unwrap().unwrap();
    }
}

/// Both record layers (rustls', the default, and the driver's opt-in):
/// every version and AEAD rustls offers carries requests and multi-record
/// responses both ways, and the connection ends with a close_notify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tls_version_and_cipher_suite_carries_requests() {
    use rustls::crypto::ring::cipher_suite as cs;
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    let cases = [
        (&rustls::version::TLS13, cs::TLS13_AES_128_GCM_SHA256),
        (&rustls::version::TLS13, cs::TLS13_AES_256_GCM_SHA384),
        (&rustls::version::TLS13, cs::TLS13_CHACHA20_POLY1305_SHA256),
        (
            &rustls::version::TLS12,
            cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            &rustls::version::TLS12,
            cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            &rustls::version::TLS12,
            cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ];
    for (version, suite) in cases {
        for (large, layer) in [false, true]
            .into_iter()
            .flat_map(|l| RECORD_LAYERS.map(|r| (l, r)))
        {
            let supported = if large {
                large_supported()
            } else {
                supported()
            };
            let (addr, mut ends) =
                hooked_tls_server(server_config_with(&leaf, version, suite), supported, |_| {})
                    .await;
            let conn = open(addr, None, &client_with(&ca, layer)).await.unwrap();
            exchange(&conn, large).await;
            drop(conn);
            // The connection ends with a close_notify: a clean TLS close.
            let (_, end) = tokio::time::timeout(Duration::from_secs(5), ends.recv())
                .await
                .expect("the server sees the end of the connection")
                .unwrap();
            end.unwrap_or_else(|e| panic!("{suite:?} ({layer}): not a clean TLS close: {e}"));
        }
    }
}

/// A server that renews its keys after every response (TLS 1.3 KeyUpdate,
/// asking for ours): the driver follows, and answers with its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_updates_from_the_server_are_followed() {
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    for layer in RECORD_LAYERS {
        let (addr, mut ends) =
            hooked_tls_server(server_config(&leaf, None), large_supported(), |s| {
                s.get_mut().1.refresh_traffic_keys().unwrap()
            })
            .await;
        let conn = open(addr, None, &client_with(&ca, layer)).await.unwrap();
        exchange(&conn, true).await;
        exchange(&conn, true).await;
        drop(conn);
        let (_, end) = tokio::time::timeout(Duration::from_secs(5), ends.recv())
            .await
            .unwrap()
            .unwrap();
        end.unwrap_or_else(|e| panic!("{layer}: {e}"));
    }
}

/// TLS 1.3 session tickets that arrive after the handshake reach the
/// configuration's resumption store: the next connection resumes.
#[tokio::test]
async fn session_tickets_are_stored_and_resume_later_connections() {
    let ca = Ca::new("test CA");
    let leaf = ca.issue(&["127.0.0.1"], false, false);
    for layer in RECORD_LAYERS {
        let (addr, mut ends) =
            hooked_tls_server(server_config(&leaf, None), supported(), |_| {}).await;
        let config = client_with(&ca, layer);
        for expected in [
            rustls::HandshakeKind::Full,
            rustls::HandshakeKind::Resumed,
            rustls::HandshakeKind::Resumed,
        ] {
            let conn = open(addr, None, &config).await.unwrap();
            conn.request(&Options, &opts()).await.unwrap();
            // The client's view (what the metrics' full/resumed counts
            // read) agrees. (The first open may take two connections, the
            // second resuming: v5 is offered first, and this server answers
            // in v4.)
            if expected == rustls::HandshakeKind::Resumed {
                assert!(conn.info().tls_resumed, "{layer}");
            }
            drop(conn);
            let (kind, _) = tokio::time::timeout(Duration::from_secs(5), ends.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(kind, Some(expected), "{layer}");
        }
    }
}

/// A handshake the driver refuses (a certificate from an unknown CA) ends
/// with rustls' alert to the server, as before the driver ran its own
/// records: the server's log can say why.
#[tokio::test]
async fn a_refused_handshake_tells_the_server_why() {
    let ca = Ca::new("test CA");
    let leaf = Ca::new("other CA").issue(&["127.0.0.1"], false, false);
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = TlsAcceptor::from(server_config(&leaf, None));
    let server = tokio::spawn(async move {
        let (tcp, _) = l.accept().await.unwrap();
        acceptor.accept(tcp).await.map(|_| ())
    });
    expect_tls_error(addr, &client(&ca), TlsErrorKind::UnknownCa).await;
    let e = tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap()
        .expect_err("the server's handshake fails");
    let alert = e
        .get_ref()
        .and_then(|i| i.downcast_ref::<rustls::Error>())
        .cloned();
    assert_eq!(
        alert,
        Some(rustls::Error::AlertReceived(
            rustls::AlertDescription::UnknownCA
        )),
        "{e}"
    );
}
