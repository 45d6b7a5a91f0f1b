//! TLS interop: the driver's TLS against other TLS libraries' servers, for
//! every protocol version and cipher suite both sides support with an ECDSA
//! certificate, over both record layers (rustls', the default, and the
//! driver's own, the opt-in). The peers terminate TLS in front of the test
//! cluster, so a whole session runs through them (schema, writes and reads of
//! values from a few bytes to 200 KB, i.e. one record to many):
//!
//! - OpenSSL, through `socat`;
//! - GnuTLS (ScyllaDB's TLS library), through `tests/tls_interop/gnutls_proxy.c`,
//!   whose server handshake is pinned to the cell's version and suite by a
//!   GnuTLS priority string, and which, in the TLS 1.3 cells "with
//!   KeyUpdates", sends a KeyUpdate after every 64 KiB it sends to the client
//!   across 4 MB of values read back, asking for the client's KeyUpdate too
//!   whenever the previous request was answered, at most every 150 ms
//!   (GnuTLS accepts at most 8 KeyUpdates a second from its peer).
//!
//! Ignored in `cargo test --workspace`: they need `socat` and `openssl`, and
//! the proxy built against `libgnutls28-dev` (Debian packages), its path in
//! `SCYLLA_GNUTLS_PROXY`. `scripts/tls-interop.sh` installs what is missing,
//! builds the proxy and runs them (CI does). (The real-server suite adds
//! Java's TLS: Cassandra 5.0 with client encryption.)
#![allow(clippy::unwrap_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
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

/// One version and suite both sides support with an ECDSA certificate, and
/// the suite's cipher as GnuTLS names it.
#[derive(Clone, Copy)]
struct Suite {
    version: &'static SupportedProtocolVersion,
    suite: SupportedCipherSuite,
    gnutls_cipher: &'static str,
}

fn all_suites() -> Vec<Suite> {
    let suite = |version, suite, gnutls_cipher| Suite {
        version,
        suite,
        gnutls_cipher,
    };
    let (v13, v12) = (&rustls::version::TLS13, &rustls::version::TLS12);
    vec![
        suite(v13, suites::TLS13_AES_128_GCM_SHA256, "AES-128-GCM"),
        suite(v13, suites::TLS13_AES_256_GCM_SHA384, "AES-256-GCM"),
        suite(
            v13,
            suites::TLS13_CHACHA20_POLY1305_SHA256,
            "CHACHA20-POLY1305",
        ),
        suite(
            v12,
            suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            "AES-128-GCM",
        ),
        suite(
            v12,
            suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            "AES-256-GCM",
        ),
        suite(
            v12,
            suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            "CHACHA20-POLY1305",
        ),
    ]
}

impl Suite {
    fn tls13(&self) -> bool {
        self.version.version == rustls::ProtocolVersion::TLSv1_3
    }

    /// The driver's TLS settings offering exactly this version and suite.
    fn tls(&self, ca: &str, layer: RecordLayer) -> TlsConfig {
        let mut provider = rustls::crypto::ring::default_provider();
        provider.cipher_suites = vec![self.suite];
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let config = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_protocol_versions(&[self.version])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        TlsConfig::from_client_config(Arc::new(config))
            .with_record_layer(layer)
            .unwrap()
    }

    /// The GnuTLS priority string allowing only this version and suite.
    fn gnutls_priority(&self) -> String {
        if self.tls13() {
            format!(
                "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+{}",
                self.gnutls_cipher
            )
        } else {
            format!(
                "NORMAL:-VERS-ALL:+VERS-TLS1.2:-CIPHER-ALL:+{}:-KX-ALL:+ECDHE-ECDSA",
                self.gnutls_cipher
            )
        }
    }

    /// How GnuTLS describes a session of this version and suite (parts of
    /// `gnutls_session_get_desc`).
    fn gnutls_desc(&self) -> [String; 2] {
        let version = if self.tls13() { "(TLS1.3" } else { "(TLS1.2" };
        [version.to_owned(), format!("({})", self.gnutls_cipher)]
    }
}

/// A table in keyspace `interop`, then values from a few bytes to 200 KB
/// written and read back, and `big` more values of 256 KB.
async fn exchange(session: &Session, table: &str, big: i32) {
    session
        .query_unpaged(
            format!("CREATE TABLE IF NOT EXISTS interop.{table} (k int PRIMARY KEY, v blob)"),
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
    let values = [(1, 7usize), (2, 20_000), (3, 200_000)]
        .into_iter()
        .chain((0..big).map(|i| (10 + i, 256 * 1024)));
    for (k, len) in values {
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

/// A session through `front`, which stands for `node`, then `exchange`.
async fn session_through(
    front: SocketAddr,
    node: SocketAddr,
    tls: TlsConfig,
    table: String,
    big: i32,
) {
    let session = SessionBuilder::new()
        .known_node(front.to_string())
        .shard_aware_port(false)
        // The node reports its own address: reach it through the peer.
        .address_translator(Arc::new(MapTranslator::new().address(node, front)))
        .tls(tls)
        .build()
        .await
        .unwrap();
    create_keyspace_once(&session).await;
    exchange(&session, &table, big).await;
    let _ = session.close(Duration::from_secs(5)).await;
}

async fn create_keyspace_once(session: &Session) {
    session
        .query_unpaged(
            "CREATE KEYSPACE IF NOT EXISTS interop WITH replication = \
             {'class': 'SimpleStrategy', 'replication_factor': 1}",
            (),
        )
        .await
        .unwrap();
}

/// Runs one cell as a task of its own: a panic fails the cell, not the
/// matrix (the panic message is printed where it happens).
async fn run_cell(
    cell: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    tokio::spawn(cell).await.map_err(|e| {
        e.try_into_panic()
            .ok()
            .and_then(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            })
            .unwrap_or_else(|| "cancelled".to_owned())
    })
}

/// One row of the printed matrix.
struct Row {
    peer: &'static str,
    suite: Suite,
    layer: RecordLayer,
    key_updates: String,
    result: Result<(), String>,
}

/// Prints the matrix, then fails if a cell did.
fn report(rows: &[Row]) {
    eprintln!(
        "\n{:<16} {:<8} {:<48} {:<8} {:<30} result",
        "peer", "version", "suite", "records", "KeyUpdates (server/asked/client)"
    );
    for r in rows {
        eprintln!(
            "{:<16} {:<8} {:<48} {:<8} {:<30} {}",
            r.peer,
            format!("{:?}", r.suite.version.version),
            format!("{:?}", r.suite.suite.suite()),
            r.layer.to_string(),
            r.key_updates,
            match &r.result {
                Ok(()) => "ok".to_owned(),
                Err(e) => format!("FAILED: {}", e.lines().next().unwrap_or("")),
            }
        );
    }
    let failed = rows.iter().filter(|r| r.result.is_err()).count();
    eprintln!("{} of {} cells passed\n", rows.len() - failed, rows.len());
    assert_eq!(failed, 0, "{failed} cells failed");
}

const LAYERS: [RecordLayer; 2] = [RecordLayer::Rustls, RecordLayer::Driver];

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
    let mut rows = Vec::new();
    for suite in all_suites() {
        for layer in LAYERS {
            let table = format!("t{}", rows.len());
            let cell = session_through(front, node, suite.tls(&ca, layer), table, 0);
            rows.push(Row {
                peer: "OpenSSL (socat)",
                suite,
                layer,
                key_updates: "-".to_owned(),
                result: run_cell(cell).await,
            });
        }
    }
    report(&rows);
    cluster.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The GnuTLS proxy (`tests/tls_interop/gnutls_proxy.c`) for one cell: its
/// listening address, and its report of each connection when it ends.
struct GnutlsProxy {
    child: Child,
    front: SocketAddr,
    stdout: BufReader<ChildStdout>,
}

/// What the proxy reported of one cell's connections.
#[derive(Debug, Default)]
struct Connections {
    count: usize,
    /// KeyUpdates the proxy sent, those asking for the client's, and the
    /// client's.
    key_updates: u64,
    asked: u64,
    client_key_updates: u64,
    resumed: usize,
}

impl GnutlsProxy {
    fn start(
        proxy: &Path,
        node: SocketAddr,
        cert: &Path,
        key: &Path,
        priority: &str,
        key_update_every: Option<u64>,
    ) -> GnutlsProxy {
        let mut args = vec![
            "--backend".to_owned(),
            node.to_string(),
            "--cert".to_owned(),
            cert.display().to_string(),
            "--key".to_owned(),
            key.display().to_string(),
            "--priority".to_owned(),
            priority.to_owned(),
        ];
        if let Some(n) = key_update_every {
            args.extend(["--key-update-every".to_owned(), n.to_string()]);
        }
        let mut child = Command::new(proxy)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {} ({e})", proxy.display()));
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let port: u16 = line
            .strip_prefix("listening ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the GnuTLS proxy did not start: {line:?}"));
        GnutlsProxy {
            child,
            front: SocketAddr::from(([127, 0, 0, 1], port)),
            stdout,
        }
    }

    /// Ends the proxy with SIGTERM (it ends its connections and waits for
    /// them), checks that it exited cleanly, and sums its connections'
    /// reports, checking each for the expected description and a clean end.
    fn stop(mut self, expected_desc: &[String]) -> Result<Connections, String> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let until = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > until {
                return Err("the GnuTLS proxy did not exit within 10 s of SIGTERM".to_owned());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !status.success() {
            return Err(format!("the GnuTLS proxy exited with {status}"));
        }
        // The listener waited for every connection process: all of them
        // have written their line, and the pipe is at its end.
        let mut report = Connections::default();
        for line in (&mut self.stdout).lines() {
            let line = line.unwrap();
            let field = |name: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                    .unwrap_or("")
                    .to_owned()
            };
            let number = |name: &str| field(name).parse::<u64>().unwrap_or(0);
            let end = field("end");
            if !["close_notify", "eof", "backend-closed", "sigterm"].contains(&end.as_str()) {
                return Err(format!("a connection ended with {end}: {line}"));
            }
            let desc = field("desc");
            if !expected_desc.iter().all(|d| desc.contains(d.as_str())) {
                return Err(format!("negotiated {desc}, expected {expected_desc:?}"));
            }
            // The proxy asks again only once the client answered: every
            // request is answered, but the last may be in flight at the end.
            let (asked, answered) = (number("requested"), number("client_key_updates"));
            if answered > asked || answered + 1 < asked {
                return Err(format!(
                    "the client answered {answered} of {asked} KeyUpdate requests: {line}"
                ));
            }
            report.count += 1;
            report.key_updates += number("key_updates");
            report.asked += asked;
            report.client_key_updates += answered;
            report.resumed += usize::from(field("resumed") == "1");
        }
        Ok(report)
    }
}

impl Drop for GnutlsProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Bytes the proxy sends to the client between its KeyUpdates.
const KEY_UPDATE_EVERY: u64 = 64 * 1024;
/// The 256 KB values of a KeyUpdate cell: 4 MB read back, about 64
/// KeyUpdates.
const KEY_UPDATE_VALUES: i32 = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the GnuTLS proxy built (scripts/tls-interop.sh)"]
async fn gnutls_server_every_version_suite_record_layer_and_key_updates() {
    let proxy = PathBuf::from(std::env::var_os("SCYLLA_GNUTLS_PROXY").unwrap_or_else(|| {
        panic!(
            "SCYLLA_GNUTLS_PROXY is not set: run scripts/tls-interop.sh, which builds \
             tests/tls_interop/gnutls_proxy.c and sets it"
        )
    }));
    let dir = tempdir();
    let (ca, cert, key) = certificates(&dir);
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .start()
        .await
        .unwrap();
    let node = cluster.cql_addrs()[0];
    let mut rows = Vec::new();
    let with_key_updates = all_suites()
        .into_iter()
        .filter(Suite::tls13)
        .map(|s| (s, true));
    for (suite, key_updates) in all_suites()
        .into_iter()
        .map(|s| (s, false))
        .chain(with_key_updates)
    {
        for layer in LAYERS {
            let every = key_updates.then_some(KEY_UPDATE_EVERY);
            let peer =
                GnutlsProxy::start(&proxy, node, &cert, &key, &suite.gnutls_priority(), every);
            let table = format!("t{}", rows.len());
            let values = if key_updates { KEY_UPDATE_VALUES } else { 0 };
            let cell = session_through(peer.front, node, suite.tls(&ca, layer), table, values);
            let mut result = run_cell(cell).await;
            let mut seen = "-".to_owned();
            match peer.stop(&suite.gnutls_desc()) {
                Err(e) => result = result.and(Err(e)),
                Ok(c) => {
                    if key_updates {
                        seen = format!("{}/{}/{}", c.key_updates, c.asked, c.client_key_updates);
                        if c.key_updates < 8 || c.asked == 0 || c.client_key_updates == 0 {
                            result = result.and(Err(format!(
                                "expected several KeyUpdates, some answered: {c:?}"
                            )));
                        }
                    }
                }
            }
            rows.push(Row {
                peer: if key_updates {
                    "GnuTLS+KeyUpdate"
                } else {
                    "GnuTLS (proxy)"
                },
                suite,
                layer,
                key_updates: seen,
                result,
            });
        }
    }
    report(&rows);
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
