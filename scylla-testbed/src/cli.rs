//! The `testbed` program: runs the in-process test cluster standalone, so a
//! driver (ours or any other) can be pointed at it by hand:
//!
//! ```text
//! cargo run --release -p scylla-testbed --bin testbed -- --nodes 3 --shards 8
//! ```
//!
//! It prints each node's address and ports and runs until Ctrl-C or
//! `--duration-secs`. Nodes serve CQL from one in-memory store (see
//! `scylla_testbed::cql`); `SELECT * FROM testbed.stats` returns the
//! per-node, per-shard counters to any client. `--help` lists the options.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::{
    Credentials, Faults, NatMode, TabletScript, TestCluster, TestClusterBuilder, TicketScope,
    TlsOptions,
};
use scylla_cql::frame::ProtocolVersion;

/// Runs the in-process ScyllaDB-like test cluster on loopback addresses
/// until Ctrl-C (or `--duration-secs`).
#[derive(Debug, clap::Parser)]
#[command(name = "testbed")]
struct Cli {
    /// Number of nodes.
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Shards per node.
    #[arg(long, default_value_t = 1)]
    shards: u16,
    /// Tokens per node.
    #[arg(long, default_value_t = 16)]
    vnodes: usize,
    /// Seed of host ids and tokens.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Regular CQL port of every node.
    #[arg(long, default_value_t = 9042)]
    port: u16,
    /// Shard-aware port ('none' disables it).
    #[arg(long, value_name = "PORT|none", default_value = "19042", value_parser = parse_optional_port)]
    shard_aware_port: OptionalPort,
    /// Datacenter of every node.
    #[arg(long, default_value = "datacenter1")]
    datacenter: String,
    /// Rack of every node.
    #[arg(long, default_value = "rack1")]
    rack: String,
    /// Require PasswordAuthenticator credentials.
    #[arg(long, value_name = "USER:PASSWORD", value_parser = parse_credentials)]
    auth: Option<Credentials>,
    /// Rewrite source ports on the shard-aware port (random).
    #[arg(long)]
    nat: bool,
    /// Rewrite source ports on the shard-aware port by adding N.
    #[arg(long, value_name = "N", conflicts_with = "nat")]
    nat_offset: Option<u16>,
    /// Delay before each response, in milliseconds.
    #[arg(long, value_name = "MS")]
    latency_ms: Option<u64>,
    /// Node I waits MS milliseconds more before each response (repeatable).
    #[arg(long, value_name = "I:MS", value_parser = parse_slow_node)]
    slow_node: Vec<(usize, u64)>,
    /// Highest native protocol version served (4 refuses v5 like ScyllaDB,
    /// so clients negotiate down).
    #[arg(long, value_name = "4|5", default_value = "5", value_parser = parse_protocol)]
    protocol_version: ProtocolVersion,
    /// Use addresses 127.X.Y.1.. instead of an allocated block.
    #[arg(long, value_name = "X.Y", value_parser = parse_block)]
    block: Option<(u8, u8)>,
    /// Also serve TLS (port 9142, shard-aware 19142); write DIR/ca.pem,
    /// DIR/client.pem and DIR/client.key.
    #[arg(long, value_name = "DIR")]
    tls_dir: Option<PathBuf>,
    /// With --tls-dir: require a client certificate.
    #[arg(long, requires = "tls_dir")]
    tls_client_auth: bool,
    /// With --tls-dir: which handshakes TLS 1.3 session tickets resume:
    /// node (any shard of the issuing node, until it restarts: ScyllaDB's
    /// default), shard (only the issuing shard) or off.
    #[arg(
        long,
        value_name = "node|shard|off",
        default_value = "node",
        requires = "tls_dir"
    )]
    tls_tickets: TicketScope,
    /// With --tls-dir: tickets sent after each handshake (ScyllaDB: 2).
    #[arg(long, value_name = "N", default_value_t = 2, requires = "tls_dir")]
    tls_tickets_per_handshake: usize,
    /// With --tls-dir: modelled server CPU time of a full TLS handshake, in
    /// microseconds, spent on the shard inside its handshake admission.
    #[arg(long, value_name = "US", default_value_t = 1000, requires = "tls_dir")]
    tls_full_cost_us: u64,
    /// With --tls-dir: modelled server CPU time of a resumed TLS handshake,
    /// in microseconds.
    #[arg(long, value_name = "US", default_value_t = 100, requires = "tls_dir")]
    tls_resumed_cost_us: u64,
    /// New NetworkTopologyStrategy keyspaces use tablets, N initial tablets
    /// per table (as ScyllaDB does).
    #[arg(long, value_name = "N")]
    tablets: Option<usize>,
    /// Timed tablet migrations and splits (lines like '5 migrate ks.t 3 0 1 2'
    /// or '10 split ks.t').
    #[arg(long, value_name = "FILE")]
    tablet_script: Option<PathBuf>,
    /// Offer SCYLLA_USE_METADATA_ID (result metadata ids on v4).
    #[arg(long)]
    use_metadata_id: bool,
    /// Offer TABLETS_ROUTING_V2_EXPERIMENTAL (tablet versions, leaders of
    /// strongly consistent tablets).
    #[arg(long)]
    tablets_routing_v2: bool,
    /// Nodes report 127.255.Y.N instead of their 127.X.Y.N (clients need an
    /// address translator to reach peers).
    #[arg(long)]
    advertise_unreachable: bool,
    /// Serve system.peers_v2 (as Cassandra 4+; ScyllaDB has none).
    #[arg(long)]
    peers_v2: bool,
    /// Each node also listens on a Unix-domain socket, like ScyllaDB's
    /// maintenance socket: no authentication (the paths are printed).
    #[arg(long)]
    maintenance_socket: bool,
    /// Client routes: shard-aware PROXY v2 listeners on every node, one
    /// load-balancer front per node, listed in system.client_routes (the
    /// fronts are printed).
    #[arg(long)]
    client_routes: bool,
    /// Answer UNAVAILABLE, as a real coordinator, when fewer of a
    /// partition's replicas are up than the consistency level needs.
    #[arg(long)]
    check_live_replicas: bool,
    /// Record query traces: traced requests get a trace id, and
    /// system_traces.sessions/.events hold the traces (else a traced
    /// request is refused).
    #[arg(long)]
    record_traces: bool,
    /// Stop after N seconds (default: run until Ctrl-C).
    #[arg(long, value_name = "N")]
    duration_secs: Option<u64>,
}

/// A port, or none.
#[derive(Debug, Clone, Copy)]
struct OptionalPort(Option<u16>);

fn parse_optional_port(s: &str) -> Result<OptionalPort, String> {
    if s == "none" {
        return Ok(OptionalPort(None));
    }
    s.parse()
        .map(|p| OptionalPort(Some(p)))
        .map_err(|_| format!("'{s}' is neither a port nor 'none'"))
}

/// `USER:PASSWORD`, kept as [`Credentials`] (whose `Debug` leaves the
/// password out, as the derived `Debug` of [`Cli`] prints every field).
fn parse_credentials(s: &str) -> Result<Credentials, String> {
    s.split_once(':')
        .map(|(u, p)| Credentials {
            username: u.to_owned(),
            password: p.to_owned(),
        })
        .ok_or_else(|| "expected USER:PASSWORD".to_owned())
}

fn parse_slow_node(s: &str) -> Result<(usize, u64), String> {
    let (i, ms) = s.split_once(':').ok_or("expected I:MS")?;
    match (i.parse(), ms.parse()) {
        (Ok(i), Ok(ms)) => Ok((i, ms)),
        _ => Err(format!("'{s}' is not NODE_INDEX:MILLISECONDS")),
    }
}

fn parse_protocol(s: &str) -> Result<ProtocolVersion, String> {
    s.parse::<u8>()
        .ok()
        .and_then(ProtocolVersion::from_number)
        .ok_or_else(|| format!("'{s}' is not 4 or 5"))
}

fn parse_block(s: &str) -> Result<(u8, u8), String> {
    let (x, y) = s.split_once('.').ok_or("expected X.Y")?;
    match (x.parse(), y.parse()) {
        (Ok(x), Ok(y)) => Ok((x, y)),
        _ => Err(format!("'{s}' is not X.Y with X and Y in 0..=255")),
    }
}

/// What the command line asks for, ready to run.
struct Args {
    builder: TestClusterBuilder,
    check_live_replicas: bool,
    record_traces: bool,
    faults: Faults,
    duration: Option<Duration>,
    tls_dir: Option<PathBuf>,
    tablet_script: Option<TabletScript>,
}

impl Cli {
    fn into_args(self) -> Result<Args, String> {
        let mut b = TestCluster::builder()
            .nodes(self.nodes)
            .shards(self.shards)
            .vnodes(self.vnodes)
            .seed(self.seed)
            .port(self.port)
            .shard_aware_port(self.shard_aware_port.0)
            .datacenter(self.datacenter)
            .rack(self.rack)
            .max_protocol_version(self.protocol_version)
            .use_metadata_id(self.use_metadata_id)
            .tablets_routing_v2(self.tablets_routing_v2)
            .advertise_unreachable(self.advertise_unreachable)
            .peers_v2(self.peers_v2)
            .maintenance_socket(self.maintenance_socket)
            .client_routes(self.client_routes);
        if let Some(c) = &self.auth {
            b = b.password_auth(&c.username, &c.password);
        }
        if let Some((x, y)) = self.block {
            b = b.address_block(x, y);
        }
        for &(i, ms) in &self.slow_node {
            if i >= self.nodes {
                return Err(format!(
                    "--slow-node {i}:{ms}: there are {} node(s)",
                    self.nodes
                ));
            }
            b = b.slow_node(i, Duration::from_millis(ms));
        }
        if let Some(n) = self.tablets {
            b = b.tablets(n);
        }
        if self.tls_dir.is_some() {
            b = b.tls(
                TlsOptions::default()
                    .require_client_cert(self.tls_client_auth)
                    .tickets(self.tls_tickets)
                    .tickets_per_handshake(self.tls_tickets_per_handshake)
                    .handshake_costs(
                        Duration::from_micros(self.tls_full_cost_us),
                        Duration::from_micros(self.tls_resumed_cost_us),
                    ),
            );
        }
        let mut faults = Faults::none();
        if self.nat {
            faults = faults.with_nat(NatMode::Random);
        }
        if let Some(n) = self.nat_offset {
            faults = faults.with_nat(NatMode::Offset(n));
        }
        if let Some(ms) = self.latency_ms {
            faults = faults.with_latency(Duration::from_millis(ms));
        }
        let tablet_script = match &self.tablet_script {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("--tablet-script: cannot read {}: {e}", path.display()))?;
                Some(TabletScript::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?)
            }
            None => None,
        };
        for i in 0..self.nodes {
            b = b.faults(i, faults.clone());
        }
        Ok(Args {
            builder: b,
            check_live_replicas: self.check_live_replicas,
            record_traces: self.record_traces,
            faults,
            duration: self.duration_secs.map(Duration::from_secs),
            tls_dir: self.tls_dir,
            tablet_script,
        })
    }
}

/// Runs the `testbed` program with the command line `args` (the program
/// name first, as [`std::env::args_os`] gives it) until Ctrl-C or
/// `--duration-secs`; `--help` and bad options print and exit as clap does.
pub fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args = match <Cli as clap::Parser>::parse_from(args).into_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("testbed: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("testbed: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let cluster = match args.builder.start().await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("testbed: {e}");
            return ExitCode::FAILURE;
        }
    };
    cluster
        .topology()
        .set_check_live_replicas(args.check_live_replicas);
    cluster.topology().set_record_traces(args.record_traces);
    println!(
        "cluster '{}': {} node(s), {} shard(s) each, protocol up to {}, faults: {:?}",
        cluster.topology().cluster_name(),
        cluster.len(),
        cluster.shards(),
        cluster.config().max_protocol_version,
        args.faults
    );
    for n in cluster.nodes() {
        let sa = n
            .shard_aware_port
            .map_or_else(|| "none".to_owned(), |p| p.to_string());
        println!(
            "node {}: {} port {} shard-aware port {} host_id {} dc {} rack {} tokens {}",
            n.index,
            n.address,
            n.port,
            sa,
            n.host_id,
            n.datacenter,
            n.rack,
            n.tokens.len()
        );
        if n.advertised != n.address {
            println!("node {}: advertised as {}", n.index, n.advertised);
        }
        if let Some(path) = cluster.maintenance_socket(n.index) {
            println!("node {}: maintenance socket {}", n.index, path.display());
        }
        if let Some(f) = cluster.route_front(n.index) {
            let tls = f
                .tls_address
                .map_or_else(|| "none".to_owned(), |a| a.to_string());
            println!(
                "node {}: client route {} (TLS {tls}), connection id {}",
                n.index,
                f.address,
                crate::routes::DEFAULT_CONNECTION_ID
            );
        }
        for (_, extra) in cluster
            .config()
            .slow_nodes
            .iter()
            .filter(|(i, _)| *i == n.index)
        {
            println!("node {}: slow, {extra:?} more per response", n.index);
        }
    }
    if let Some(dir) = &args.tls_dir {
        if let Err(e) = write_tls_files(&cluster, dir) {
            eprintln!("testbed: cannot write TLS files to {}: {e}", dir.display());
            cluster.shutdown().await;
            return ExitCode::FAILURE;
        }
        println!(
            "tls: port {} shard-aware port {} client certificate {}; CA {}",
            cluster
                .tls_port()
                .map_or_else(|| "none".into(), |p| p.to_string()),
            cluster
                .tls_shard_aware_port()
                .map_or_else(|| "none".into(), |p| p.to_string()),
            if cluster
                .config()
                .tls
                .as_ref()
                .is_some_and(|t| t.require_client_cert)
            {
                "required"
            } else {
                "optional"
            },
            dir.join("ca.pem").display()
        );
    }
    if let Some(n) = cluster.config().tablets {
        println!(
            "tablets: new NetworkTopologyStrategy keyspaces use tablets, {n} initial per table"
        );
    }
    let script = async {
        if let Some(s) = &args.tablet_script {
            s.run(&cluster).await;
        }
        // The script is done; keep serving until the end.
        std::future::pending::<()>().await
    };
    let wait = async {
        match args.duration {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if let Err(e) = r {
                eprintln!("testbed: cannot listen for Ctrl-C: {e}");
            }
        }
        () = wait => {}
        () = script => {}
    }
    println!(
        "{:#?}",
        cluster
            .stats()
            .nodes
            .iter()
            .map(|n| n.node)
            .collect::<Vec<_>>()
    );
    cluster.shutdown().await;
    ExitCode::SUCCESS
}

/// Writes the CA certificate and the client certificate and key (PEM).
fn write_tls_files(cluster: &TestCluster, dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let files = [
        ("ca.pem", cluster.tls_ca_pem()),
        ("client.pem", cluster.tls_client_cert_pem()),
        ("client.key", cluster.tls_client_key_pem()),
    ];
    for (name, pem) in files {
        if let Some(pem) = pem {
            std::fs::write(dir.join(name), pem)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maintenance_socket_flag_turns_the_sockets_on() {
        let cli =
            <Cli as clap::Parser>::try_parse_from(["testbed", "--maintenance-socket"]).unwrap();
        assert!(cli.into_args().unwrap().builder.config().maintenance_socket);
        let cli = <Cli as clap::Parser>::try_parse_from(["testbed"]).unwrap();
        assert!(!cli.into_args().unwrap().builder.config().maintenance_socket);
    }

    #[test]
    fn client_routes_flag_turns_the_proxy_listeners_on() {
        let cli = <Cli as clap::Parser>::try_parse_from(["testbed", "--client-routes"]).unwrap();
        assert_eq!(
            cli.into_args().unwrap().builder.config().proxy_port,
            Some(29042)
        );
        let cli = <Cli as clap::Parser>::try_parse_from(["testbed"]).unwrap();
        assert_eq!(cli.into_args().unwrap().builder.config().proxy_port, None);
    }

    #[test]
    fn debug_of_the_command_line_leaves_the_password_out() {
        let cli =
            <Cli as clap::Parser>::try_parse_from(["testbed", "--auth", "app:pw-7f3c"]).unwrap();
        assert!(!format!("{cli:?}").contains("pw-7f3c"), "{cli:?}");
        let c = cli.auth.unwrap();
        assert_eq!(
            (c.username.as_str(), c.password.as_str()),
            ("app", "pw-7f3c")
        );
    }
}
