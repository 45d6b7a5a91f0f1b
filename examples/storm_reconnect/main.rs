//! A connection storm and how the driver rides it, with no cluster at hand.
//!
//! ```text
//! cargo run --release --example storm_reconnect                 # every variant
//! cargo run --release --example storm_reconnect -- baseline lockstep --json
//! cargo run --release --example storm_reconnect -- --nodes 10.0.0.1:9042,10.0.0.2:9042 --duration 120
//! ```
//!
//! By default it starts the in-process test cluster (3 nodes, ScyllaDB-like
//! sharding, handshake admission of 8 per shard with a modelled CPU cost),
//! connects many client sessions at once and measures:
//!
//! - phase 1, cold start: connection attempts needed to cover every shard of
//!   every node against the ideal (sessions x nodes x shards), from the
//!   cluster's accounting and the driver's metrics; the time until every
//!   shard is covered; the peak of handshakes waiting at a node;
//! - phase 2, a node restart under a fixed-rate read/write workload: failed
//!   requests, latency before, during and after, connection attempts during
//!   the reconnect, time until every shard is covered again, peak handshakes.
//!
//! The variants run one after another, each on a fresh cluster:
//! `baseline` (shard-aware port, full-jitter backoff, spread reconnects),
//! `no-shard-aware` (regular port only), `nat` (a NAT rewrites source ports
//! at every node), `lockstep` (no jitter, no spread: the naive driver).
//!
//! Outputs: a live progress line on stderr (only when stderr is a terminal:
//! a log gets no carriage-return rewrites), the summary tables on stdout (or
//! JSON with `--json`), and in `--out DIR` (default `target/storm/`) the
//! timeline `storm_timeline.csv` and the chart `storm.svg`. The chart puts
//! every variant on one clock whose zero is the moment its node stopped
//! (negative before), so that the variants' reconnects line up.
//!
//! Two scales:
//!
//! | mode | command | sessions x nodes x shards | connections to cover |
//! | --- | --- | --- | --- |
//! | default | `cargo run --release --example storm_reconnect` | 20 x 3 x 16 | 960 |
//! | large | `cargo run --release --example storm_reconnect -- --sessions 50 --shards 30` | 50 x 3 x 30 | 4500 |
//!
//! The second is the scale of ScyllaDB's own account of a reconnect storm
//! (50 clients, 3 nodes of 30 shards). Both ends of every connection live in
//! this process, so it needs about 10,000 open files: the example raises
//! the open-file soft limit to the hard limit when the run needs more, and
//! says so (if the hard limit is lower, raise it first, as root).
//!
//! Waiting for coverage is bounded (`--coverage-timeout SECS`, default 5):
//! without the shard-aware port, many sessions take long to cover every
//! shard, and the table then says how far they got.
//!
//! Options (`--help` lists them): `--sessions N`, `--shards N`, `--rate N`
//! (requests/s in total), `--down-ms N`, `--rf N`, `--coverage-interval-ms N`,
//! `--handshake-cost-us N` (the node's CPU time per handshake, 1000 by
//! default, spun on a core) with `--sleep-cost` (held without spinning: the
//! node's capacity is its admission permits, not this machine's cores),
//! `--no-shard-aware` (with `--nodes`), `--tls` (the test cluster's TLS
//! listeners, the driver over TLS: the same variants, each connection now
//! also paying a real TLS handshake on both sides, and the cluster charging
//! each handshake its modelled CPU time, full or resumed), `--tickets
//! node|shard|off` (with `--tls`: which shards of a node accept a TLS
//! session ticket: every shard, as ScyllaDB does by default, or only the
//! issuing one), `--no-ticket-pacing` (with `--tls`: the pools open a node's
//! missing shards at once instead of pacing them by the tickets held). With
//! `--tls` the tables add the full and resumed TLS handshakes the cluster
//! counted at cold start and at the restarted node.
//!
//! Without a usable shard-aware port (`no-shard-aware`, `nat`) the pools
//! open one connection per shard wherever the node puts them and cover the
//! shards still missing in the background: phase 1 and 2 then report the
//! connections accepted when every pool had filled, and again when every
//! shard was covered (if that happened within `--coverage-timeout`).

mod progress;
mod real;
mod report;
mod scenario;
mod svg;
mod workload;

use std::path::PathBuf;
use std::time::Duration;

use clap::builder::PossibleValuesParser;
use clap::Parser;
use scylla_testbed::{HandshakeCost, TicketScope};

use crate::progress::Progress;
use crate::scenario::{Params, Variant, VARIANTS};

/// A connection storm and how the driver rides it, on the in-process test
/// cluster (or real nodes with --nodes).
///
/// Variants run one after another, each on a fresh cluster: baseline
/// (shard-aware port, full-jitter backoff, spread reconnects), no-shard-aware
/// (regular port only), nat (a NAT rewrites source ports at every node),
/// lockstep (no jitter, no spread: the naive driver).
#[derive(Debug, Parser)]
#[command(name = "storm_reconnect", verbatim_doc_comment)]
struct Cli {
    /// Variants to run (default: all of them).
    #[arg(value_parser = PossibleValuesParser::new(VARIANTS.map(|v| v.name)))]
    variants: Vec<String>,
    /// Print the results as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Exit with an error unless the baseline variant's headline holds:
    /// at most 1.01x the ideal connections accepted at cold start and at
    /// the restart, every shard covered in both phases, no failed request.
    #[arg(long)]
    check: bool,
    /// Where to write storm_timeline.csv and storm.svg.
    #[arg(long, value_name = "DIR", default_value = "target/storm")]
    out: PathBuf,
    /// Client sessions connecting at once.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=500))]
    sessions: u64,
    /// Shards per node of the test cluster (ScyllaDB's measurement: 30).
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=256))]
    shards: u64,
    /// Requests per second over all sessions.
    #[arg(long, value_name = "N", default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    rate: u64,
    /// How long the restarted node stays down, in ms.
    #[arg(long, value_name = "N", default_value_t = 1200)]
    down_ms: u64,
    /// Bound of each wait for coverage, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    coverage_timeout: u64,
    /// Without a usable shard-aware port: mean interval of the pools'
    /// background attempts to cover a shard without a connection, in ms.
    #[arg(long, value_name = "MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    coverage_interval_ms: u64,
    /// The test cluster's modelled server CPU time of one handshake (its
    /// STARTUP step, inside admission), in microseconds.
    #[arg(long, value_name = "US", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    handshake_cost_us: u64,
    /// Hold the admission permit for the handshake cost without spinning a
    /// core: the node's capacity is then its permits (8 per shard), not this
    /// machine's cores (a 10 ms cost spun for every shard of 3 nodes would
    /// measure the machine).
    #[arg(long)]
    sleep_cost: bool,
    /// Replication factor of the workload's keyspaces.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=3))]
    rf: u64,
    /// Run against these nodes instead of the test cluster.
    #[arg(long, value_name = "HOST:PORT,...", value_delimiter = ',')]
    nodes: Option<Vec<String>>,
    /// With --nodes: how long to run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    duration: u64,
    /// With --nodes: do not use the shard-aware port.
    #[arg(long)]
    no_shard_aware: bool,
    /// Use the test cluster's TLS listeners (the driver over TLS).
    #[arg(long, conflicts_with = "nodes")]
    tls: bool,
    /// With --tls: which shards accept a node's TLS session tickets: node
    /// (every shard until the node restarts: ScyllaDB's default), shard
    /// (only the issuing shard) or off (no tickets).
    #[arg(
        long,
        value_name = "node|shard|off",
        default_value = "node",
        requires = "tls"
    )]
    tickets: TicketScope,
    /// With --tls: open a node's missing shards at once instead of pacing
    /// the opens by the TLS tickets held for the node.
    #[arg(long, requires = "tls")]
    no_ticket_pacing: bool,
    /// With --tls: the test cluster's modelled server CPU time of a full TLS
    /// handshake, in microseconds (spent on the shard inside admission).
    #[arg(long, value_name = "US", default_value_t = 1000, requires = "tls")]
    tls_full_cost_us: u64,
    /// With --tls: the same for a resumed TLS handshake.
    #[arg(long, value_name = "US", default_value_t = 100, requires = "tls")]
    tls_resumed_cost_us: u64,
}

struct Args {
    variants: Vec<Variant>,
    json: bool,
    check: bool,
    out: PathBuf,
    nodes: Option<Vec<String>>,
    duration: Duration,
    shard_aware_port: bool,
    params: Params,
}

fn parse_args() -> Args {
    let cli = Cli::parse();
    let mut variants: Vec<Variant> = cli
        .variants
        .iter()
        .filter_map(|name| VARIANTS.iter().find(|v| v.name == name).copied())
        .collect();
    if variants.is_empty() {
        variants = VARIANTS.to_vec();
    }
    Args {
        variants,
        json: cli.json,
        check: cli.check,
        out: cli.out,
        nodes: cli
            .nodes
            .map(|n| n.into_iter().filter(|s| !s.is_empty()).collect()),
        duration: Duration::from_secs(cli.duration),
        shard_aware_port: !cli.no_shard_aware,
        params: Params {
            nodes: 3,
            // Bounded by the parsers above.
            shards: cli.shards as u16,
            sessions: cli.sessions as usize,
            rate: cli.rate as u32,
            rf: cli.rf as usize,
            cost: {
                let cost = Duration::from_micros(cli.handshake_cost_us);
                if cli.sleep_cost {
                    HandshakeCost::Sleep(cost)
                } else {
                    HandshakeCost::Spin(cost)
                }
            },
            cpu_concurrency: 8,
            shed_after: Duration::from_secs(1),
            steady: Duration::from_millis(1000),
            down: Duration::from_millis(cli.down_ms),
            after: Duration::from_millis(1000),
            coverage_timeout: Duration::from_secs(cli.coverage_timeout),
            coverage_interval: Duration::from_millis(cli.coverage_interval_ms),
            backoff_base: Duration::from_millis(100),
            backoff_cap: Duration::from_secs(2),
            reconnect_spread: Duration::from_secs(1),
            request_timeout: Duration::from_secs(2),
            tls: cli.tls,
            tickets: cli.tickets,
            ticket_pacing: !cli.no_ticket_pacing,
            tls_costs: (
                Duration::from_micros(cli.tls_full_cost_us),
                Duration::from_micros(cli.tls_resumed_cost_us),
            ),
        },
    }
}

/// Raises the open-file soft limit to the hard limit when the run needs
/// more descriptors than the soft limit allows (both ends of every
/// connection live in this process), and says so.
fn raise_open_file_limit(p: &Params) {
    let conns = p.sessions * (p.nodes * p.shards as usize + 1);
    // Client and server side of each connection, plus listeners and slack
    // for reconnects and excess connections.
    let need = (conns * 2 + 1024) as u64;
    let Ok((soft, hard)) = rlimit::getrlimit(rlimit::Resource::NOFILE) else {
        return;
    };
    if soft >= need {
        return;
    }
    match rlimit::increase_nofile_limit(hard) {
        Ok(now) => {
            eprintln!(
                "raised the open-file soft limit from {soft} to {now} (hard limit {hard}): \
                 the run needs about {need} descriptors"
            );
            if now < need {
                eprintln!("warning: {now} open files may not be enough for {need}");
            }
        }
        Err(e) => eprintln!(
            "warning: could not raise the open-file limit from {soft} (need about {need}): {e}"
        ),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args = parse_args();
    if args.nodes.is_none() {
        raise_open_file_limit(&args.params);
    }
    let progress = Progress::new();
    let mut results = Vec::new();
    // On stderr: stdout holds the tables (or the JSON).
    match &args.nodes {
        Some(nodes) => eprintln!("running against {} (--nodes)", nodes.join(", ")),
        None => eprintln!(
            "running against test clusters started in this process, a fresh one per variant \
             ({} nodes x {} shards; --nodes HOST:PORT,... for real nodes)",
            args.params.nodes, args.params.shards
        ),
    }
    if let Some(nodes) = &args.nodes {
        match real::run(
            nodes,
            &args.params,
            args.shard_aware_port,
            args.duration,
            &progress,
        )
        .await
        {
            Ok(r) => results.push(r),
            Err(e) => {
                progress.finish();
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        }
    } else {
        for v in &args.variants {
            match scenario::run(*v, &args.params, &progress).await {
                Ok(r) => {
                    progress.finish();
                    eprintln!(
                        "{}: done in {:.1} s (cold start covered in {} ms, restart covered in {} ms)",
                        v.name,
                        r.wall_ms as f64 / 1000.0,
                        r.cold.time_ms,
                        r.restart.time_ms
                    );
                    results.push(r);
                }
                Err(e) => {
                    progress.finish();
                    eprintln!("{}: error: {e}", v.name);
                    std::process::exit(1);
                }
            }
        }
    }
    progress.finish();
    if args.json {
        print!("{}", report::json(&args.params, &results));
    } else {
        print!("{}", report::table(&args.params, &results));
    }
    let written = std::fs::create_dir_all(&args.out).and_then(|()| {
        std::fs::write(args.out.join("storm_timeline.csv"), report::csv(&results))?;
        std::fs::write(
            args.out.join("storm.svg"),
            svg::chart(&results, scenario::RESTARTED),
        )
    });
    match written {
        Ok(()) => eprintln!(
            "wrote {} and {}",
            args.out.join("storm_timeline.csv").display(),
            args.out.join("storm.svg").display()
        ),
        Err(e) => eprintln!("could not write to {}: {e}", args.out.display()),
    }
    if args.check {
        let failures = headline_failures(&results);
        for f in &failures {
            eprintln!("check failed: {f}");
        }
        if !failures.is_empty() {
            std::process::exit(1);
        }
        eprintln!("check passed: the baseline's headline holds");
    }
}

/// Most connections accepted per ideal one that `--check` lets through.
const MAX_ACCEPTED_PER_IDEAL: f64 = 1.01;

/// What `--check` finds wrong with the baseline variant's results (empty
/// when its headline holds).
fn headline_failures(results: &[scenario::VariantResult]) -> Vec<String> {
    let mut out = Vec::new();
    if !results.iter().any(|r| r.variant.name == "baseline") {
        out.push("the baseline variant did not run".to_owned());
    }
    for r in results.iter().filter(|r| r.variant.name == "baseline") {
        let (c, x) = (&r.cold, &r.restart);
        let cold_ideal = c.ideal + c.control;
        if c.accepted as f64 > cold_ideal as f64 * MAX_ACCEPTED_PER_IDEAL {
            out.push(format!(
                "cold start: {} connections accepted for {} wanted (over {MAX_ACCEPTED_PER_IDEAL}x)",
                c.accepted, cold_ideal
            ));
        }
        if !c.covered {
            out.push("cold start: not every shard was covered".to_owned());
        }
        if x.accepted as f64 > x.ideal as f64 * MAX_ACCEPTED_PER_IDEAL {
            out.push(format!(
                "restart: {} connections accepted by the restarted node for {} wanted (over {MAX_ACCEPTED_PER_IDEAL}x)",
                x.accepted, x.ideal
            ));
        }
        if !x.covered {
            out.push("restart: the restarted node's shards were not all covered again".to_owned());
        }
        if x.failed_requests > 0 {
            out.push(format!("restart: {} requests failed", x.failed_requests));
        }
    }
    out
}
