//! A closed-loop workload runner for the connection layer: exactly
//! `--concurrency` requests in flight over `--connections` connections, with
//! latency percentiles, client CPU, heap allocations and socket syscalls per
//! request, for one or several coalescing policies side by side.
//!
//! ```text
//! cargo run --release --example throughput -- --workload options --concurrency 1024 --coalescing all
//! cargo run --release --example throughput -- --node 127.0.0.1:9042 --workload insert --coalescing all
//! cargo run --release --example throughput -- --tls --workload options --concurrency 64
//! cargo run --release --example throughput -- --node 127.0.0.1:9142 --tls --tls-ca ca.pem
//! ```
//!
//! `--tls` encrypts the connections. With `--node`, the node's CA is given
//! by `--tls-ca PATH`. Without, the child process puts a TLS-terminating
//! front (tokio-rustls, a certificate made at start by rcgen) before its
//! test node; `--front` puts the same front without TLS, so that
//! `--front` vs `--tls` compares the client's cost of TLS alone (client CPU
//! per request is what this measures; the extra hop costs the child).
//!
//! Without `--node` it starts the in-process test cluster (1 node) in a
//! *child process* (this binary re-run with `--serve`), so that the CPU time
//! and allocations measured here are the client's only.
//!
//! Workloads (all sent as raw protocol messages over `Connection::request`):
//! - `options`: OPTIONS -> SUPPORTED, the cheapest round trip.
//! - `insert`: a prepared `INSERT INTO tput.kv (pk, v) VALUES (?, ?)` with
//!   fresh bigint keys and a 100-byte blob (keyspace and table are created
//!   first, SimpleStrategy RF 1).
//! - `select`: inserts its keys first (not measured), then a prepared
//!   `SELECT v FROM tput.kv WHERE pk = ?` per key, checking each row came back.
//!
//! Measurement notes:
//! - Latency: one `u32` of microseconds per request in a preallocated array.
//! - CPU: the sum over this process's threads of the on-CPU time in
//!   `/proc/self/task/*/schedstat` (nanoseconds, as kept by the scheduler;
//!   safe to read, no `getrusage`/`sysconf` needed, which would need
//!   `unsafe`). Threads that exit during a run would be missed; the runtime's
//!   workers live for the whole run.
//! - Allocations: a counting global allocator (`stats_alloc`) over the
//!   measured phase, divided by the number of requests. It also counts the
//!   spawning of the `concurrency` tasks (a few allocations each).
//! - Syscalls: the connections' [`IoCounters`].

use std::alloc::System;
use std::borrow::Cow;
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use scylla_cql::consistency::Consistency;
use scylla_cql::frame::request::{Execute, Options, Prepare, Query, QueryParameters};
use scylla_cql::frame::response::{Response, ResultBody};
use scylla_cql::frame::wire::RawValue;
use scylla_cql::frame::ProtocolVersion;
use scylla_cql::types::SerializedValues;
use scylla_driver::connection::tls::TlsConfig;
use scylla_driver::connection::{
    open, Coalescing, Connection, ConnectionConfig, IoCounters, IoSnapshot, ProtocolChoice,
    RequestOptions,
};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A workload: what each request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Workload {
    /// OPTIONS -> SUPPORTED, the cheapest round trip.
    Options,
    /// A prepared INSERT of a fresh key and a 100-byte blob.
    Insert,
    /// A prepared SELECT by key, checking each row came back.
    Select,
}

/// A closed-loop workload runner for the connection layer: latency
/// percentiles, client CPU, heap allocations and socket syscalls per request.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "throughput")]
struct Args {
    /// Run against this node instead of a test cluster in a child process.
    #[arg(long, value_name = "HOST:PORT")]
    node: Option<SocketAddr>,
    /// What each request is.
    #[arg(long, value_enum, default_value = "options")]
    workload: Workload,
    /// Requests in flight at any time.
    #[arg(long, default_value_t = 1, value_parser = positive)]
    concurrency: usize,
    /// Measured requests per coalescing policy.
    #[arg(long, default_value_t = 100_000, value_parser = positive)]
    requests: usize,
    /// Unmeasured requests before each measurement.
    #[arg(long, default_value_t = 10_000)]
    warmup: usize,
    /// Connections the requests are spread over.
    #[arg(long, default_value_t = 1, value_parser = positive)]
    connections: usize,
    /// off, fixed:<micros>, adaptive, adaptive:<max_micros>:<max_bytes>, or all
    /// (off, fixed:1000 and adaptive, one after the other); several separated
    /// by commas.
    #[arg(long = "coalescing", default_value = "adaptive", value_parser = parse_policy)]
    policies: Policies,
    /// Worker threads of the client's runtime.
    #[arg(long, default_value_t = 1, value_parser = positive)]
    threads: usize,
    /// Run the policies this many times, in reverse order every other round
    /// (ABBA, so that drift in the machine's load hits every policy alike);
    /// the table shows each policy's medians.
    #[arg(long, default_value_t = 1, value_parser = positive)]
    rounds: usize,
    /// One JSON object per policy instead of a table.
    #[arg(long)]
    json: bool,
    /// Encrypt the connections (without --node: through a TLS front in the child).
    #[arg(long)]
    tls: bool,
    /// Plaintext through the same in-child hop as --tls (a fair baseline).
    #[arg(long = "front")]
    plain_front: bool,
    /// The node's CA certificate (PEM), for --tls with --node.
    #[arg(long, value_name = "PATH")]
    tls_ca: Option<String>,
    /// Pin the protocol version (default: negotiated).
    #[arg(long, value_name = "4|5", value_parser = parse_protocol)]
    protocol: Option<ProtocolVersion>,
    /// SELECTs ask for the result metadata (default: skip it).
    #[arg(long)]
    full_metadata: bool,
    /// The TLS configuration, once known (the child's CA).
    #[arg(skip)]
    tls_config: Option<TlsConfig>,
}

/// The coalescing policies to run, by name.
#[derive(Debug, Clone)]
struct Policies(Vec<(String, Coalescing)>);

/// A count of at least 1.
fn positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn parse_protocol(s: &str) -> Result<ProtocolVersion, String> {
    s.parse::<u8>()
        .ok()
        .and_then(ProtocolVersion::from_number)
        .ok_or_else(|| format!("expected 4 or 5, got {s:?}"))
}

/// A comma-separated list of policies (or `all`).
fn parse_policy(s: &str) -> Result<Policies, String> {
    let mut all = Vec::new();
    for one in s.split(',') {
        all.extend(parse_one_policy(one.trim())?.0);
    }
    Ok(Policies(all))
}

fn parse_one_policy(s: &str) -> Result<Policies, String> {
    let fixed = |us: u64| {
        (
            format!("fixed:{us}"),
            Coalescing::Fixed(Duration::from_micros(us)),
        )
    };
    Ok(Policies(match s {
        "off" => vec![("off".to_owned(), Coalescing::Off)],
        "adaptive" => vec![("adaptive".to_owned(), Coalescing::ADAPTIVE)],
        "all" => vec![
            ("off".to_owned(), Coalescing::Off),
            fixed(1000),
            ("adaptive".to_owned(), Coalescing::ADAPTIVE),
        ],
        other => {
            if let Some(rest) = other.strip_prefix("adaptive:") {
                // adaptive:<max_delay_micros>:<max_bytes>
                let mut it = rest.split(':').map(str::parse::<u64>);
                match (it.next(), it.next()) {
                    (Some(Ok(us)), Some(Ok(bytes))) => vec![(
                        other.to_owned(),
                        Coalescing::Adaptive {
                            max_delay: Duration::from_micros(us),
                            max_bytes: bytes as usize,
                        },
                    )],
                    _ => return Err(format!("bad policy {other:?}")),
                }
            } else {
                match other.strip_prefix("fixed:").map(str::parse::<u64>) {
                    Some(Ok(us)) => vec![fixed(us)],
                    _ => return Err(format!("unknown policy {other:?}")),
                }
            }
        }
    }))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("--serve") {
        let front = if argv.iter().any(|a| a == "--tls") {
            Front::Tls
        } else if argv.iter().any(|a| a == "--front") {
            Front::Plain
        } else {
            Front::None
        };
        return serve(front);
    }
    let mut args = <Args as clap::Parser>::parse();
    let mut child = None;
    let addr = match args.node {
        Some(a) => a,
        None => match spawn_server(args.front()) {
            Ok((c, a, ca)) => {
                child = Some(c);
                if ca.is_some() {
                    args.tls_ca = ca;
                }
                a
            }
            Err(e) => {
                eprintln!("cannot start the test cluster: {e}");
                return ExitCode::FAILURE;
            }
        },
    };
    if args.tls {
        let built = match &args.tls_ca {
            Some(ca) => TlsConfig::builder()
                .ca_pem_file(ca)
                .and_then(|b| b.build())
                .map_err(|e| e.to_string()),
            None => Err("--tls with --node needs --tls-ca PATH".to_owned()),
        };
        match built {
            Ok(t) => {
                args.tls_config = Some(t);
                if let (Some(ca), true) = (&args.tls_ca, child.is_some()) {
                    // The child's CA file has served its purpose.
                    let _ = std::fs::remove_file(ca);
                }
            }
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build();
    let code = match rt {
        Ok(rt) => match rt.block_on(run_all(&args, addr)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            ExitCode::FAILURE
        }
    };
    if let Some(mut c) = child {
        // Closing its stdin ends the server; kill it if it lingers.
        drop(c.stdin.take());
        let _ = c.kill();
        let _ = c.wait();
    }
    code
}

/// Child mode: run the test cluster until stdin closes; print its address.
fn serve(front: Front) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async {
        let cluster = match scylla_testbed::TestCluster::builder()
            .nodes(1)
            .shards(1)
            .start()
            .await
        {
            Ok(c) => c,
            Err(e) => {
                eprintln!("serve: {e}");
                return ExitCode::FAILURE;
            }
        };
        let node = cluster.cql_addrs()[0];
        match front {
            Front::None => println!("ADDR {node}"),
            Front::Plain | Front::Tls => match start_front(node, front == Front::Tls).await {
                Ok((addr, ca)) => {
                    if let Some(pem) = ca {
                        // The CA goes to a file the parent reads.
                        let path = std::env::temp_dir()
                            .join(format!("throughput-ca-{}.pem", std::process::id()));
                        if let Err(e) = std::fs::write(&path, pem) {
                            eprintln!("serve: {e}");
                            return ExitCode::FAILURE;
                        }
                        println!("CA {}", path.display());
                    }
                    println!("ADDR {addr}");
                }
                Err(e) => {
                    eprintln!("serve: {e}");
                    return ExitCode::FAILURE;
                }
            },
        }
        let _ = std::io::stdout().flush();
        // Block a helper thread on stdin; EOF means the parent is done.
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin()
                .read_line(&mut sink)
                .map(|n| n > 0)
                .unwrap_or(false)
            {}
        })
        .await;
        cluster.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// What the child puts before its test node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Front {
    /// Nothing: the node's own port.
    None,
    /// A plaintext relay.
    Plain,
    /// A TLS-terminating relay.
    Tls,
}

impl Args {
    fn front(&self) -> Front {
        if self.tls {
            Front::Tls
        } else if self.plain_front {
            Front::Plain
        } else {
            Front::None
        }
    }
}

/// A relay on 127.0.0.1 to `node`, terminating TLS if `tls` (with a CA and
/// certificate for 127.0.0.1 made here); its address and the CA's PEM.
async fn start_front(
    node: SocketAddr,
    tls: bool,
) -> Result<(SocketAddr, Option<String>), BoxError> {
    let (acceptor, ca) = if tls {
        let ca_key = rcgen::KeyPair::generate()?;
        let mut p = rcgen::CertificateParams::new(Vec::<String>::new())?;
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = p.self_signed(&ca_key)?;
        let key = rcgen::KeyPair::generate()?;
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])?
            .signed_by(&key, &ca, &ca_key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )?;
        (
            Some(tokio_rustls::TlsAcceptor::from(Arc::new(cfg))),
            Some(ca.pem()),
        )
    } else {
        (None, None)
    };
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = l.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = l.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                let Ok(mut up) = tokio::net::TcpStream::connect(node).await else {
                    return;
                };
                let _ = up.set_nodelay(true);
                match acceptor {
                    Some(a) => {
                        if let Ok(mut t) = a.accept(tcp).await {
                            let _ = tokio::io::copy_bidirectional(&mut t, &mut up).await;
                        }
                    }
                    None => {
                        let mut tcp = tcp;
                        let _ = tokio::io::copy_bidirectional(&mut tcp, &mut up).await;
                    }
                }
            });
        }
    });
    Ok((addr, ca))
}

/// Starts the child test cluster; returns it, its address and, with TLS,
/// the path of its CA's PEM file.
fn spawn_server(
    front: Front,
) -> Result<(std::process::Child, SocketAddr, Option<String>), BoxError> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("--serve");
    match front {
        Front::None => {}
        Front::Plain => {
            cmd.arg("--front");
        }
        Front::Tls => {
            cmd.arg("--tls");
        }
    }
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    let out = child.stdout.take().ok_or("no stdout")?;
    let mut out = BufReader::new(out);
    let mut line = String::new();
    out.read_line(&mut line)?;
    let mut ca = None;
    if let Some(path) = line.trim().strip_prefix("CA ") {
        ca = Some(path.to_owned());
        line.clear();
        out.read_line(&mut line)?;
    }
    let addr = line
        .trim()
        .strip_prefix("ADDR ")
        .ok_or_else(|| format!("unexpected server output {line:?}"))?
        .parse()?;
    Ok((child, addr, ca))
}

/// One run's measurements.
struct Report {
    policy: String,
    protocol: ProtocolVersion,
    ops_per_s: f64,
    p50: u32,
    p99: u32,
    p999: u32,
    cpu_us_per_req: f64,
    allocs_per_req: f64,
    writes_per_req: f64,
    reads_per_req: f64,
    bytes_read_per_req: f64,
    errors: u64,
}

async fn run_all(args: &Args, addr: SocketAddr) -> Result<(), BoxError> {
    if args.workload != Workload::Options {
        create_schema(args, addr).await?;
    }
    // Per policy (in the order given), the reports of every round.
    let mut runs: Vec<Vec<Report>> = args.policies.0.iter().map(|_| Vec::new()).collect();
    for round in 0..args.rounds {
        let mut order: Vec<usize> = (0..args.policies.0.len()).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let (name, policy) = &args.policies.0[i];
            let r = run_one(args, addr, name, *policy).await?;
            if args.json {
                print_json(args, round, &r);
            }
            runs[i].push(r);
        }
    }
    let reports: Vec<Report> = runs.iter().filter_map(|r| median_report(r)).collect();
    if !args.json {
        println!(
            "workload {:?}{}, protocol {}, concurrency {}, {} connection(s){}, {} requests (+{} warm-up), {} client thread(s), server {}{}",
            args.workload, if args.full_metadata { " (full result metadata)" } else { "" },
            reports.first().map_or("?".to_owned(), |r| r.protocol.to_string()), args.concurrency, args.connections, if args.tls { " over TLS" } else { "" }, args.requests, args.warmup,
            args.threads, args.node.map_or("in-process test cluster (child process)".to_owned(), |a| a.to_string()),
            if args.rounds > 1 { format!("; medians of {} rounds, order alternating", args.rounds) } else { String::new() }
        );
        println!(
            "{:<12} {:>10} {:>8} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>9} {:>6}",
            "coalescing",
            "ops/s",
            "p50 µs",
            "p99 µs",
            "p999 µs",
            "cpu µs/r",
            "allocs/r",
            "writes/r",
            "reads/r",
            "rbytes/r",
            "errors"
        );
        for r in &reports {
            println!(
                "{:<12} {:>10.0} {:>8} {:>8} {:>8} {:>9.2} {:>9.3} {:>9.4} {:>9.4} {:>9.1} {:>6}",
                r.policy,
                r.ops_per_s,
                r.p50,
                r.p99,
                r.p999,
                r.cpu_us_per_req,
                r.allocs_per_req,
                r.writes_per_req,
                r.reads_per_req,
                r.bytes_read_per_req,
                r.errors
            );
        }
    }
    Ok(())
}

fn print_json(args: &Args, round: usize, r: &Report) {
    let line = serde_json::json!({
        "workload": args.workload,
        "policy": r.policy,
        "round": round + 1,
        "concurrency": args.concurrency,
        "connections": args.connections,
        "tls": args.tls,
        "requests": args.requests,
        "ops_per_s": r.ops_per_s.round(),
        "p50_us": r.p50,
        "p99_us": r.p99,
        "p999_us": r.p999,
        "cpu_us_per_req": r.cpu_us_per_req,
        "allocs_per_req": r.allocs_per_req,
        "writes_per_req": r.writes_per_req,
        "reads_per_req": r.reads_per_req,
        "bytes_read_per_req": r.bytes_read_per_req,
        "protocol": r.protocol.to_string(),
        "errors": r.errors,
    });
    println!("{line}");
}

/// Each field's median over the rounds of one policy (errors: the sum).
fn median_report(runs: &[Report]) -> Option<Report> {
    let first = runs.first()?;
    fn median<T: Copy + PartialOrd>(mut v: Vec<T>) -> T {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
        v[v.len() / 2]
    }
    let m = |f: fn(&Report) -> f64| median(runs.iter().map(f).collect());
    let mu = |f: fn(&Report) -> u32| median(runs.iter().map(f).collect());
    Some(Report {
        policy: first.policy.clone(),
        protocol: first.protocol,
        ops_per_s: m(|r| r.ops_per_s),
        p50: mu(|r| r.p50),
        p99: mu(|r| r.p99),
        p999: mu(|r| r.p999),
        cpu_us_per_req: m(|r| r.cpu_us_per_req),
        allocs_per_req: m(|r| r.allocs_per_req),
        writes_per_req: m(|r| r.writes_per_req),
        reads_per_req: m(|r| r.reads_per_req),
        bytes_read_per_req: m(|r| r.bytes_read_per_req),
        errors: runs.iter().map(|r| r.errors).sum(),
    })
}

fn opts() -> RequestOptions<'static> {
    {
        let mut built = RequestOptions::default();
        built.timeout = Some(Duration::from_secs(10));
        built
    }
}

async fn simple_query(conn: &Connection, cql: &str) -> Result<ResultBody, BoxError> {
    let q = Query {
        contents: Cow::Borrowed(cql),
        params: QueryParameters::default(),
    };
    match conn.request(&q, &opts()).await?.response {
        Response::Result(r) => Ok(r),
        other => Err(format!("{cql}: {other:?}").into()),
    }
}

/// The connection settings every connection starts from (TLS or not).
fn base_config(args: &Args) -> ConnectionConfig {
    {
        let mut built = ConnectionConfig::default();
        built.tls = args.tls_config.clone();
        built.protocol = args
            .protocol
            .map_or_else(ProtocolChoice::negotiate, ProtocolChoice::pinned);
        built
    }
}

async fn create_schema(args: &Args, addr: SocketAddr) -> Result<(), BoxError> {
    let conn = open(addr, None, &base_config(args)).await?;
    simple_query(&conn, "CREATE KEYSPACE IF NOT EXISTS tput WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}").await?;
    simple_query(
        &conn,
        "CREATE TABLE IF NOT EXISTS tput.kv (pk bigint PRIMARY KEY, v blob)",
    )
    .await?;
    Ok(())
}

/// A prepared statement's id and its result metadata id (protocol v5, or v4
/// with `SCYLLA_USE_METADATA_ID`), which every EXECUTE then carries.
type PreparedIds = (Bytes, Option<Bytes>);

async fn prepare(conn: &Connection, cql: &str) -> Result<PreparedIds, BoxError> {
    let p = Prepare::new(cql);
    match conn.request(&p, &opts()).await?.response {
        Response::Result(ResultBody::Prepared(p)) => Ok((p.id, p.result_metadata_id)),
        other => Err(format!("PREPARE {cql}: {other:?}").into()),
    }
}

/// What every task of a phase shares.
struct Phase {
    conns: Vec<Connection>,
    /// SELECTs ask for their result metadata.
    full_metadata: bool,
    workload: Workload,
    insert_id: PreparedIds,
    select_id: PreparedIds,
    key_base: i64,
    total: usize,
    next: AtomicUsize,
    latencies: Vec<AtomicU32>,
    errors: AtomicU64,
    go: AtomicBool,
    ready: AtomicUsize,
    done: AtomicUsize,
}

/// One request of the workload for key index `i`.
async fn one_request(p: &Phase, i: usize, values: &mut SerializedValues) -> Result<(), String> {
    let conn = &p.conns[i % p.conns.len()];
    let ((id, metadata_id), insert) = match p.workload {
        Workload::Options => {
            return match conn.request(&Options, &opts()).await.map(|f| f.response) {
                Ok(Response::Supported(_)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
        Workload::Insert => (&p.insert_id, true),
        Workload::Select => (&p.select_id, false),
    };
    let key = p.key_base + i as i64;
    values.clear();
    let key_bytes = key.to_be_bytes();
    values
        .push(RawValue::Value(&key_bytes))
        .map_err(|e| e.to_string())?;
    if insert {
        let v = [0xAB_u8; 100];
        values
            .push(RawValue::Value(&v))
            .map_err(|e| e.to_string())?;
    }
    let exec = Execute {
        id: Cow::Borrowed(id),
        result_metadata_id: metadata_id.as_deref().map(Cow::Borrowed),
        params: QueryParameters {
            consistency: Consistency::One,
            values: Cow::Borrowed(values),
            skip_metadata: !insert && !p.full_metadata,
            ..QueryParameters::default()
        },
        tablet_version_block: None,
    };
    match conn.request(&exec, &opts()).await.map(|f| f.response) {
        Ok(Response::Result(ResultBody::Void)) if insert => Ok(()),
        Ok(Response::Result(ResultBody::Rows(rows))) if !insert && rows.rows_count() == 1 => Ok(()),
        other => Err(format!("key {key}: {other:?}")),
    }
}

async fn worker(p: Arc<Phase>) {
    let mut values = SerializedValues::new();
    p.ready.fetch_add(1, Ordering::Release);
    while !p.go.load(Ordering::Acquire) {
        tokio::task::yield_now().await;
    }
    loop {
        let i = p.next.fetch_add(1, Ordering::Relaxed);
        if i >= p.total {
            break;
        }
        let start = Instant::now();
        if let Err(e) = one_request(&p, i, &mut values).await {
            if p.errors.fetch_add(1, Ordering::Relaxed) < 3 {
                eprintln!("request failed: {e}");
            }
        }
        let us = u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX);
        p.latencies[i].store(us, Ordering::Relaxed);
    }
    p.done.fetch_add(1, Ordering::Release);
}

/// What one phase measured.
struct PhaseResult {
    elapsed: Duration,
    latencies: Vec<u32>,
    errors: u64,
    cpu: Duration,
    allocs: usize,
    io: IoSnapshot,
}

/// Runs `total` requests with `concurrency` tasks in a closed loop.
async fn run_phase(
    concurrency: usize,
    template: &Phase,
    workload: Workload,
    key_base: i64,
    total: usize,
    counters: &IoCounters,
) -> PhaseResult {
    let p = Arc::new(Phase {
        conns: template.conns.clone(),
        full_metadata: template.full_metadata,
        workload,
        insert_id: template.insert_id.clone(),
        select_id: template.select_id.clone(),
        key_base,
        total,
        next: AtomicUsize::new(0),
        latencies: (0..total).map(|_| AtomicU32::new(0)).collect(),
        errors: AtomicU64::new(0),
        go: AtomicBool::new(false),
        ready: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    });
    let handles: Vec<_> = (0..concurrency)
        .map(|_| tokio::spawn(worker(p.clone())))
        .collect();
    while p.ready.load(Ordering::Acquire) < concurrency {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let cpu0 = cpu_time();
    let alloc0 = GLOBAL.stats();
    let io0 = counters.snapshot();
    let start = Instant::now();
    p.go.store(true, Ordering::Release);
    while p.done.load(Ordering::Acquire) < concurrency {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = start.elapsed();
    let io = counters.snapshot().since(&io0);
    let alloc1 = GLOBAL.stats();
    let cpu = cpu_time().saturating_sub(cpu0);
    for h in handles {
        let _ = h.await;
    }
    PhaseResult {
        elapsed,
        latencies: p
            .latencies
            .iter()
            .map(|l| l.load(Ordering::Relaxed))
            .collect(),
        errors: p.errors.load(Ordering::Relaxed),
        cpu,
        allocs: alloc1.allocations + alloc1.reallocations
            - alloc0.allocations
            - alloc0.reallocations,
        io,
    }
}

/// On-CPU time of every thread of this process, from the scheduler's
/// statistics (nanosecond resolution).
fn cpu_time() -> Duration {
    let mut ns = 0u64;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for e in dir.flatten() {
            let path = e.path().join("schedstat");
            if let Ok(s) = std::fs::read_to_string(path) {
                ns += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    Duration::from_nanos(ns)
}

async fn run_one(
    args: &Args,
    addr: SocketAddr,
    name: &str,
    policy: Coalescing,
) -> Result<Report, BoxError> {
    let counters = Arc::new(IoCounters::default());
    let cfg = {
        let mut built = base_config(args);
        built.coalescing = policy;
        built.counters = counters.clone();
        built
    };
    let mut conns = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        conns.push(open(addr, None, &cfg).await?);
    }
    let (insert_id, select_id) = if args.workload == Workload::Options {
        ((Bytes::new(), None), (Bytes::new(), None))
    } else {
        (
            prepare(&conns[0], "INSERT INTO tput.kv (pk, v) VALUES (?, ?)").await?,
            prepare(&conns[0], "SELECT v FROM tput.kv WHERE pk = ?").await?,
        )
    };
    let protocol = conns[0].protocol_version();
    let template = Phase {
        conns,
        full_metadata: args.full_metadata,
        workload: args.workload,
        insert_id,
        select_id,
        key_base: 0,
        total: 0,
        next: AtomicUsize::new(0),
        latencies: Vec::new(),
        errors: AtomicU64::new(0),
        go: AtomicBool::new(false),
        ready: AtomicUsize::new(0),
        done: AtomicUsize::new(0),
    };
    // Fresh keys for every run: microseconds since the epoch, times 1000.
    let base = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64 * 1000)
        .unwrap_or(0);
    let c = args.concurrency;
    if args.workload == Workload::Select {
        // The rows to read back (not measured).
        let total = args.warmup + args.requests;
        let r = run_phase(c, &template, Workload::Insert, base, total, &counters).await;
        if r.errors > 0 {
            return Err(format!("{} inserts failed while loading", r.errors).into());
        }
    }
    if args.warmup > 0 {
        run_phase(c, &template, args.workload, base, args.warmup, &counters).await;
    }
    let base = base + args.warmup as i64;
    let r = run_phase(c, &template, args.workload, base, args.requests, &counters).await;
    let mut lat = r.latencies;
    lat.sort_unstable();
    let n = args.requests as f64;
    Ok(Report {
        policy: name.to_owned(),
        protocol,
        ops_per_s: n / r.elapsed.as_secs_f64(),
        p50: measure::percentile(&lat, 0.50).unwrap_or(0),
        p99: measure::percentile(&lat, 0.99).unwrap_or(0),
        p999: measure::percentile(&lat, 0.999).unwrap_or(0),
        cpu_us_per_req: r.cpu.as_secs_f64() * 1e6 / n,
        allocs_per_req: r.allocs as f64 / n,
        writes_per_req: r.io.write_syscalls as f64 / n,
        reads_per_req: r.io.read_syscalls as f64 / n,
        bytes_read_per_req: r.io.bytes_read as f64 / n,
        errors: r.errors,
    })
}
