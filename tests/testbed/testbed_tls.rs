//! The test cluster serves TLS as ScyllaDB does: regular and shard-aware TLS
//! ports, certificates made at start, `SCYLLA_SHARD_AWARE_PORT_SSL`, client
//! certificates, and a handshake-stall fault.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use scylla_cql::frame::wire::WireReader;
use scylla_testbed::{Faults, TestCluster, TlsOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const TIMEOUT: Duration = Duration::from_secs(10);

fn pem_certs(pem: &str) -> Result<Vec<CertificateDer<'static>>, BoxError> {
    use rustls::pki_types::pem::PemObject;
    Ok(CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<Vec<_>, _>>()?)
}

fn connector(cluster: &TestCluster, with_client_cert: bool) -> Result<TlsConnector, BoxError> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = RootCertStore::empty();
    for c in pem_certs(cluster.tls_ca_pem().ok_or("no CA")?)? {
        roots.add(c)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let config = if with_client_cert {
        let certs = pem_certs(cluster.tls_client_cert_pem().ok_or("no client cert")?)?;
        let key = PrivateKeyDer::from_pem_slice(
            cluster
                .tls_client_key_pem()
                .ok_or("no client key")?
                .as_bytes(),
        )?;
        b.with_client_auth_cert(certs, key)?
    } else {
        b.with_no_client_auth()
    };
    Ok(TlsConnector::from(Arc::new(config)))
}

/// Connects from `src_port` (0: any) and does the TLS handshake for the node's IP.
async fn tls_connect(
    tls: &TlsConnector,
    addr: SocketAddr,
    src_port: u16,
) -> Result<TlsStream<TcpStream>, BoxError> {
    let sock = TcpSocket::new_v4()?;
    sock.set_reuseaddr(true)?;
    sock.bind(SocketAddr::new([127, 0, 0, 1].into(), src_port))?;
    let tcp = tokio::time::timeout(TIMEOUT, sock.connect(addr)).await??;
    let name = ServerName::IpAddress(addr.ip().into());
    Ok(tokio::time::timeout(TIMEOUT, tls.connect(name, tcp)).await??)
}

/// Sends OPTIONS (v4, stream 1) and reads SUPPORTED.
async fn options(s: &mut TlsStream<TcpStream>) -> Result<HashMap<String, Vec<String>>, BoxError> {
    s.write_all(&[0x04, 0, 0, 1, 0x05, 0, 0, 0, 0]).await?;
    s.flush().await?;
    let mut h = [0u8; 9];
    tokio::time::timeout(TIMEOUT, s.read_exact(&mut h)).await??;
    assert_eq!(h[4], 0x06, "expected SUPPORTED, got opcode {:#x}", h[4]);
    let len = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) as usize;
    let mut body = vec![0u8; len];
    tokio::time::timeout(TIMEOUT, s.read_exact(&mut body)).await??;
    Ok(WireReader::new(&body).read_string_multimap("SUPPORTED")?)
}

async fn tls_cluster(nodes: usize, shards: u16, mtls: bool) -> Result<TestCluster, BoxError> {
    Ok(TestCluster::builder()
        .nodes(nodes)
        .shards(shards)
        .tls(TlsOptions::default().require_client_cert(mtls))
        .start()
        .await?)
}

#[tokio::test]
async fn tls_port_answers_options_with_ssl_shard_aware_port() -> Result<(), BoxError> {
    let cluster = tls_cluster(2, 4, false).await?;
    assert_eq!(cluster.tls_port(), Some(9142));
    assert_eq!(cluster.tls_shard_aware_port(), Some(19142));
    let tls = connector(&cluster, false)?;
    for addr in cluster.tls_addrs() {
        let mut s = tls_connect(&tls, addr, 0).await?;
        let m = options(&mut s).await?;
        assert_eq!(m["SCYLLA_SHARD_AWARE_PORT_SSL"], vec!["19142"]);
        assert_eq!(m["SCYLLA_SHARD_AWARE_PORT"], vec!["19042"]);
        assert_eq!(m["SCYLLA_NR_SHARDS"], vec!["4"]);
    }
    let st = cluster.node_stats(0).ok_or("no stats")?;
    assert_eq!(st.node.accepted_tls, 1);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn plain_port_advertises_ssl_port_too_and_tls_off_by_default() -> Result<(), BoxError> {
    let cluster = TestCluster::builder().shards(2).start().await?;
    assert_eq!(cluster.tls_port(), None);
    assert!(cluster.tls_addrs().is_empty());
    assert!(cluster.tls_ca_pem().is_none());
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn tls_shard_aware_port_picks_source_port_modulo_shards() -> Result<(), BoxError> {
    let shards = 4u16;
    let cluster = tls_cluster(1, shards, false).await?;
    let tls = connector(&cluster, false)?;
    let ip = cluster.tls_addrs()[0].ip();
    let sa = SocketAddr::new(ip, cluster.tls_shard_aware_port().ok_or("no port")?);
    let mut seen = 0;
    // Bounded: try a window of source ports, skipping ones in use.
    for p in 50_000u16..50_040 {
        let Ok(mut s) = tls_connect(&tls, sa, p).await else {
            continue;
        };
        let m = options(&mut s).await?;
        assert_eq!(
            m["SCYLLA_SHARD"],
            vec![(p % shards).to_string()],
            "port {p}"
        );
        seen += 1;
        if seen == 8 {
            break;
        }
    }
    assert!(seen >= 4, "too few source ports usable: {seen}");
    let st = cluster.node_stats(0).ok_or("no stats")?;
    assert_eq!(st.node.accepted_tls, seen);
    assert_eq!(st.node.accepted_shard_aware, seen);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn client_cert_required() -> Result<(), BoxError> {
    let cluster = tls_cluster(1, 1, true).await?;
    let addr = cluster.tls_addrs()[0];
    // Without a certificate: the handshake (or the first read, TLS 1.3 sends
    // the server's verdict after the client's Finished) fails.
    let without = connector(&cluster, false)?;
    let failed = match tls_connect(&without, addr, 0).await {
        Err(_) => true,
        Ok(mut s) => options(&mut s).await.is_err(),
    };
    assert!(failed, "a client without certificate was served");
    let with = connector(&cluster, true)?;
    let mut s = tls_connect(&with, addr, 0).await?;
    let m = options(&mut s).await?;
    assert!(m.contains_key("SCYLLA_SHARD"));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn handshake_stall_fault_never_answers() -> Result<(), BoxError> {
    let cluster = TestCluster::builder()
        .tls(TlsOptions::default())
        .faults(0, Faults::none().with_tls_handshake_stall(true))
        .start()
        .await?;
    let tls = connector(&cluster, false)?;
    let addr = cluster.tls_addrs()[0];
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::IpAddress(addr.ip().into());
    let r = tokio::time::timeout(Duration::from_millis(500), tls.connect(name, tcp)).await;
    assert!(r.is_err(), "the handshake finished despite the stall fault");
    // Without the fault, the same port completes handshakes.
    cluster.set_faults(0, Faults::none()).await?;
    let mut s = tls_connect(&tls, addr, 0).await?;
    assert!(options(&mut s).await?.contains_key("SCYLLA_SHARD"));
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn plaintext_client_on_tls_port_is_closed() -> Result<(), BoxError> {
    let cluster = tls_cluster(1, 1, false).await?;
    let mut s = TcpStream::connect(cluster.tls_addrs()[0]).await?;
    s.write_all(&[0x04, 0, 0, 1, 0x05, 0, 0, 0, 0]).await?;
    let mut buf = [0u8; 64];
    // The server answers with a TLS alert or closes; it must not hang or serve CQL.
    let r = tokio::time::timeout(TIMEOUT, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => assert_ne!(buf[0], 0x84, "CQL answered on a TLS port"),
            }
        }
    })
    .await;
    assert!(r.is_ok(), "server kept a plaintext client open");
    // And the node still serves TLS.
    let tls = connector(&cluster, false)?;
    let mut t = tls_connect(&tls, cluster.tls_addrs()[0], 0).await?;
    assert!(options(&mut t).await?.contains_key("SCYLLA_SHARD"));
    cluster.shutdown().await;
    Ok(())
}

/// Opens a TLS connection to `shard` through the shard-aware TLS port (a
/// source port from `ports` with the right remainder), reads SUPPORTED (so
/// the tickets sent after the handshake arrive) and says whether the
/// handshake resumed a session.
async fn open_on_shard(
    tls: &TlsConnector,
    sa: SocketAddr,
    shards: u16,
    shard: u16,
    ports: &mut impl Iterator<Item = u16>,
) -> Result<bool, BoxError> {
    // Bounded: the iterator is a finite window; ports in use are skipped.
    for p in ports.by_ref() {
        if p % shards != shard {
            continue;
        }
        let Ok(mut s) = tls_connect(tls, sa, p).await else {
            continue;
        };
        let resumed = s.get_ref().1.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
        let m = options(&mut s).await?;
        assert_eq!(m["SCYLLA_SHARD"], vec![shard.to_string()], "port {p}");
        return Ok(resumed);
    }
    Err("no usable source port left".into())
}

fn ticket_cluster(scope: scylla_testbed::TicketScope) -> scylla_testbed::TestClusterBuilder {
    TestCluster::builder().nodes(1).shards(4).tls(
        TlsOptions::default()
            .tickets(scope)
            .handshake_costs(Duration::from_micros(500), Duration::from_micros(50)),
    )
}

#[tokio::test]
async fn tickets_per_shard_resume_only_on_the_issuing_shard_and_never_after_a_restart(
) -> Result<(), BoxError> {
    let cluster = ticket_cluster(scylla_testbed::TicketScope::Shard)
        .start()
        .await?;
    let tls = connector(&cluster, false)?;
    let ip = cluster.tls_addrs()[0].ip();
    let sa = SocketAddr::new(ip, cluster.tls_shard_aware_port().ok_or("no port")?);
    let mut ports = 51_200u16..51_600;
    // First handshake: full; its tickets come from shard 0.
    assert!(!open_on_shard(&tls, sa, 4, 0, &mut ports).await?);
    // Shard 0 again: resumed.
    assert!(open_on_shard(&tls, sa, 4, 0, &mut ports).await?);
    // Shard 1 with a ticket of shard 0: full (its ticket key differs).
    assert!(!open_on_shard(&tls, sa, 4, 1, &mut ports).await?);
    // The newest tickets are shard 1's now: shard 0 does a full handshake,
    // after which its own (newest) ticket resumes there again.
    assert!(!open_on_shard(&tls, sa, 4, 0, &mut ports).await?);
    assert!(open_on_shard(&tls, sa, 4, 0, &mut ports).await?);
    let st = cluster.node_stats(0).ok_or("no stats")?;
    assert_eq!(st.node.tls_handshakes_full, 3);
    assert_eq!(st.node.tls_handshakes_resumed, 2);
    assert_eq!(st.shards[0].tls_handshakes_resumed, 2);
    assert_eq!(st.shards[0].tls_handshakes_full, 2);
    assert_eq!(st.shards[1].tls_handshakes_full, 1);
    assert_eq!(st.shards[1].tls_handshakes_resumed, 0);
    // Each TLS handshake passed the admission once more than the CQL ones
    // (none here: OPTIONS only), and none was shed.
    assert_eq!(st.node.handshakes_shed, 0);

    // After a restart no ticket resumes, even on the shard that issued it:
    // the client offers its newest ticket, shard 0's of the last lifetime.
    cluster.restart_node(0).await?;
    assert!(!open_on_shard(&tls, sa, 4, 0, &mut ports).await?);
    let st = cluster.node_stats(0).ok_or("no stats")?;
    assert_eq!(st.node.tls_handshakes_full, 1);
    assert_eq!(st.node.tls_handshakes_resumed, 0);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn tickets_per_node_resume_on_every_shard_and_port() -> Result<(), BoxError> {
    let cluster = ticket_cluster(scylla_testbed::TicketScope::Node)
        .start()
        .await?;
    let tls = connector(&cluster, false)?;
    let addr = cluster.tls_addrs()[0];
    let sa = SocketAddr::new(addr.ip(), cluster.tls_shard_aware_port().ok_or("no port")?);
    let mut ports = 51_600u16..52_000;
    // The regular TLS port first (full), then every shard through the
    // shard-aware TLS port, each with a ticket of an earlier handshake.
    let mut s = tls_connect(&tls, addr, 0).await?;
    assert_eq!(
        s.get_ref().1.handshake_kind(),
        Some(rustls::HandshakeKind::Full)
    );
    options(&mut s).await?;
    for shard in 0..4 {
        assert!(
            open_on_shard(&tls, sa, 4, shard, &mut ports).await?,
            "shard {shard} did not resume"
        );
    }
    let st = cluster.node_stats(0).ok_or("no stats")?;
    assert_eq!(st.node.tls_handshakes_full, 1);
    assert_eq!(st.node.tls_handshakes_resumed, 4);
    cluster.shutdown().await;
    Ok(())
}

#[tokio::test]
async fn tickets_off_means_full_handshakes_only() -> Result<(), BoxError> {
    let cluster = ticket_cluster(scylla_testbed::TicketScope::Off)
        .start()
        .await?;
    let tls = connector(&cluster, false)?;
    let ip = cluster.tls_addrs()[0].ip();
    let sa = SocketAddr::new(ip, cluster.tls_shard_aware_port().ok_or("no port")?);
    let mut ports = 52_000u16..52_400;
    for _ in 0..3 {
        assert!(!open_on_shard(&tls, sa, 4, 2, &mut ports).await?);
    }
    let st = cluster.node_stats(0).ok_or("no stats")?;
    assert_eq!(st.node.tls_handshakes_full, 3);
    assert_eq!(st.node.tls_handshakes_resumed, 0);
    cluster.shutdown().await;
    Ok(())
}

/// Sends QUERY "SELECT release_version FROM system.local" (v4, stream 2) and
/// waits for its answer.
async fn query_local(s: &mut TlsStream<TcpStream>) -> Result<(), BoxError> {
    let q = b"SELECT release_version FROM system.local";
    let mut body = Vec::new();
    body.extend_from_slice(&(q.len() as u32).to_be_bytes());
    body.extend_from_slice(q);
    body.extend_from_slice(&[0x00, 0x01, 0x00]); // ONE, no flags
    let mut frame = vec![0x04, 0, 0, 2, 0x07];
    frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
    frame.extend_from_slice(&body);
    s.write_all(&frame).await?;
    s.flush().await?;
    let mut h = [0u8; 9];
    tokio::time::timeout(TIMEOUT, s.read_exact(&mut h)).await??;
    let len = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) as usize;
    let mut rest = vec![0u8; len];
    tokio::time::timeout(TIMEOUT, s.read_exact(&mut rest)).await??;
    assert_eq!(h[4], 0x08, "expected RESULT, got opcode {:#x}", h[4]);
    Ok(())
}

#[tokio::test]
async fn a_shard_busy_with_full_handshakes_answers_requests_after_them() -> Result<(), BoxError> {
    // One shard, 100 ms per full handshake, no tickets.
    const COST: Duration = Duration::from_millis(100);
    let cluster = TestCluster::builder()
        .nodes(1)
        .shards(1)
        .tls(
            TlsOptions::default()
                .tickets(scylla_testbed::TicketScope::Off)
                .handshake_costs(COST, Duration::ZERO),
        )
        .start()
        .await?;
    let tls = connector(&cluster, false)?;
    let addr = cluster.tls_addrs()[0];
    let mut first = tls_connect(&tls, addr, 0).await?;
    // STARTUP, so that QUERY is served.
    first
        .write_all(&[
            0x04, 0, 0, 1, 0x01, 0, 0, 0, 22, 0, 1, 0, 11, b'C', b'Q', b'L', b'_', b'V', b'E',
            b'R', b'S', b'I', b'O', b'N', 0, 5, b'3', b'.', b'0', b'.', b'0',
        ])
        .await?;
    let mut h = [0u8; 9];
    tokio::time::timeout(TIMEOUT, first.read_exact(&mut h)).await??;
    assert_eq!(h[4], 0x02, "expected READY");
    let idle = std::time::Instant::now();
    query_local(&mut first).await?;
    let idle = idle.elapsed();
    // Four more full handshakes charge the shard 100 ms each, one after
    // another; a request sent while they are being paid waits for them.
    let mut others = Vec::new();
    for _ in 0..4 {
        let tls = tls.clone();
        others.push(tokio::spawn(
            async move { tls_connect(&tls, addr, 0).await },
        ));
    }
    // Wait (bounded) until two of them are in the shard's CPU stage at
    // once: neither has finished, so the shard still owes at least one
    // whole COST from this moment, however loaded the machine is (a fixed
    // sleep here let a busy machine send the query before the handshakes
    // reached the shard).
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let observed = loop {
        if std::time::Instant::now() > until {
            return Err("the four handshakes did not reach the shard within 20 s".into());
        }
        let st = cluster.node_stats(0).ok_or("no stats")?;
        if st.node.handshakes_in_progress >= 2 {
            break std::time::Instant::now();
        }
        if st.node.tls_handshakes_full >= 5 && st.node.handshakes_in_progress == 0 {
            return Err("the handshakes were paid one at a time, never two at once".into());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    query_local(&mut first).await?;
    let busy = observed.elapsed();
    for o in others {
        o.await??;
    }
    eprintln!("idle shard answered in {idle:?}, busy shard {busy:?} after two handshakes were in its CPU stage");
    assert!(busy >= COST, "busy shard: {busy:?}");
    let st = cluster.node_stats(0).ok_or("no stats")?;
    assert_eq!(st.node.tls_handshakes_full, 5);
    cluster.shutdown().await;
    Ok(())
}
