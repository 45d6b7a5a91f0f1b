//! Runs the in-process test cluster as a standalone program, so a driver (ours
//! or any other) can be pointed at it by hand:
//!
//! ```text
//! cargo run --release --bin testbed -- --nodes 3 --shards 8
//! ```
//!
//! It prints each node's address and ports and runs until Ctrl-C or
//! `--duration-secs`. Nodes serve CQL from one in-memory store (see
//! `scylla_testbed::cql`); `SELECT * FROM testbed.stats` returns the
//! per-node, per-shard counters to any client. Arguments are parsed by hand to keep the dependency
//! list short.

use std::process::ExitCode;
use std::time::Duration;

use scylla_cql::frame::ProtocolVersion;
use scylla_testbed::{Faults, NatMode, TabletScript, TestCluster, TestClusterBuilder, TlsOptions};

const USAGE: &str = "\
usage: testbed [options]
  --nodes N               number of nodes (default 1)
  --shards N              shards per node (default 1)
  --vnodes N              tokens per node (default 16)
  --seed N                seed of host ids and tokens (default 0)
  --port P                regular CQL port of every node (default 9042)
  --shard-aware-port P    shard-aware port (default 19042; 'none' disables it)
  --datacenter NAME       datacenter of every node (default datacenter1)
  --rack NAME             rack of every node (default rack1)
  --auth USER:PASSWORD    require PasswordAuthenticator credentials
  --nat                   rewrite source ports on the shard-aware port (random)
  --nat-offset N          rewrite source ports by adding N
  --latency-ms N          delay before each response
  --slow-node I:MS        node I waits MS milliseconds more before each response
                          (repeatable)
  --protocol-version 4|5  highest native protocol version served (default 5;
                          4 refuses v5 like ScyllaDB, so clients negotiate down)
  --block X.Y             use addresses 127.X.Y.1.. instead of an allocated block
  --tls-dir DIR           also serve TLS (port 9142, shard-aware 19142); write
                          DIR/ca.pem, DIR/client.pem and DIR/client.key
  --tls-client-auth       with --tls-dir: require a client certificate
  --tablets N             new NetworkTopologyStrategy keyspaces use tablets,
                          N initial tablets per table (as ScyllaDB does)
  --tablet-script FILE    timed tablet migrations and splits (lines like
                          '5 migrate ks.t 3 0 1 2' or '10 split ks.t')
  --use-metadata-id       offer SCYLLA_USE_METADATA_ID (result metadata ids on v4)
  --advertise-unreachable nodes report 127.255.Y.N instead of their 127.X.Y.N
                          (clients need an address translator to reach peers)
  --peers-v2              serve system.peers_v2 (as Cassandra 4+; ScyllaDB has none)
  --duration-secs N       stop after N seconds (default: run until Ctrl-C)
  --help                  print this help";

struct Args {
    builder: TestClusterBuilder,
    faults: Faults,
    duration: Option<Duration>,
    tls_dir: Option<std::path::PathBuf>,
    tablet_script: Option<TabletScript>,
}

fn parse_num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse()
        .map_err(|_| format!("{flag}: '{v}' is not a valid number"))
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut b = TestCluster::builder();
    let mut faults = Faults::none();
    let mut duration = None;
    let mut tls_dir = None;
    let mut tls_client_auth = false;
    let mut tablet_script = None;
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--help" | "-h" => return Ok(None),
            "--nodes" => b = b.nodes(parse_num(&flag, it.next())?),
            "--shards" => b = b.shards(parse_num(&flag, it.next())?),
            "--vnodes" => b = b.vnodes(parse_num(&flag, it.next())?),
            "--seed" => b = b.seed(parse_num(&flag, it.next())?),
            "--port" => b = b.port(parse_num(&flag, it.next())?),
            "--shard-aware-port" => {
                let v = it.next();
                b = if v.as_deref() == Some("none") {
                    b.shard_aware_port(None)
                } else {
                    b.shard_aware_port(Some(parse_num(&flag, v)?))
                };
            }
            "--datacenter" => b = b.datacenter(it.next().ok_or("--datacenter needs a value")?),
            "--rack" => b = b.rack(it.next().ok_or("--rack needs a value")?),
            "--auth" => {
                let v = it.next().ok_or("--auth needs USER:PASSWORD")?;
                let (u, p) = v.split_once(':').ok_or("--auth needs USER:PASSWORD")?;
                b = b.password_auth(u, p);
            }
            "--nat" => faults = faults.with_nat(NatMode::Random),
            "--nat-offset" => {
                faults = faults.with_nat(NatMode::Offset(parse_num(&flag, it.next())?))
            }
            "--latency-ms" => {
                faults = faults.with_latency(Duration::from_millis(parse_num(&flag, it.next())?))
            }
            "--slow-node" => {
                let v = it.next().ok_or("--slow-node needs I:MS")?;
                let (i, ms) = v.split_once(':').ok_or("--slow-node needs I:MS")?;
                b = b.slow_node(
                    parse_num("--slow-node", Some(i.into()))?,
                    Duration::from_millis(parse_num("--slow-node", Some(ms.into()))?),
                );
            }
            "--block" => {
                let v = it.next().ok_or("--block needs X.Y")?;
                let (x, y) = v.split_once('.').ok_or("--block needs X.Y")?;
                b = b.address_block(
                    parse_num("--block", Some(x.into()))?,
                    parse_num("--block", Some(y.into()))?,
                );
            }
            "--protocol-version" => {
                let n: u8 = parse_num(&flag, it.next())?;
                let v = ProtocolVersion::from_number(n)
                    .ok_or_else(|| format!("--protocol-version: {n} is not 4 or 5"))?;
                b = b.max_protocol_version(v);
            }
            "--duration-secs" => duration = Some(Duration::from_secs(parse_num(&flag, it.next())?)),
            "--tls-dir" => {
                tls_dir = Some(std::path::PathBuf::from(
                    it.next().ok_or("--tls-dir needs a directory")?,
                ))
            }
            "--tls-client-auth" => tls_client_auth = true,
            "--use-metadata-id" => b = b.use_metadata_id(true),
            "--advertise-unreachable" => b = b.advertise_unreachable(true),
            "--peers-v2" => b = b.peers_v2(true),
            "--tablets" => b = b.tablets(parse_num(&flag, it.next())?),
            "--tablet-script" => {
                let path = it.next().ok_or("--tablet-script needs a file")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("--tablet-script: cannot read {path}: {e}"))?;
                tablet_script =
                    Some(TabletScript::parse(&text).map_err(|e| format!("{path}: {e}"))?);
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if tls_dir.is_some() {
        b = b.tls(TlsOptions::default().require_client_cert(tls_client_auth));
    } else if tls_client_auth {
        return Err("--tls-client-auth needs --tls-dir".into());
    }
    let nodes = b.config().nodes;
    for i in 0..nodes {
        b = b.faults(i, faults.clone());
    }
    Ok(Some(Args {
        builder: b,
        faults,
        duration,
        tls_dir,
        tablet_script,
    }))
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("testbed: {e}\n{USAGE}");
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
