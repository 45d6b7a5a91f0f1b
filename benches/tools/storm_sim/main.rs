//! ScyllaDB's connection-storm scale, simulated in virtual time: every
//! session's pools start at once (cold start), then one node is restarted,
//! against a model of the server's handshake admission, driven by this
//! driver's own reconnect decisions or by the official driver's reconnect
//! policy as its source defines it (see `model.rs` for both and for the
//! server model).
//!
//! ```text
//! cargo run --release --example storm_sim -- --sessions 6000 --nodes 9 --shards 7
//! cargo run --release --example storm_sim -- --sessions 20 --nodes 3 --shards 16 --policy ours
//! cargo run --release --example storm_sim -- --sessions 600 --nodes 3 --shards 7 --nat random
//! cargo run --release --example storm_sim -- --sessions 600 --nodes 3 --shards 7 --cost-us 10000 --tls-resumed-us 1000
//! ```
//!
//! Prints a table per policy and writes `storm_sim.csv` (the timeline, one
//! row per policy, phase and 100 ms) and `storm_sim.svg` (the restart: the
//! restarted node's handshakes in progress and waiting, attempts per second,
//! sessions covered again) into `--out`.
//!
//! Simplifications (the model's, not the drivers'): no request workload and
//! no control connections (ScyllaDB's 10 s request and 6 s control timeouts
//! do not enter); loopback-like network (a fixed `--rtt-us` per connect, no
//! loss); one connection per shard wanted; with `--nat`, source ports
//! rewritten at random or shifted; with `--tls-resumed-us`, TLS session
//! tickets (two per handshake, offered newest first, accepted by the node's
//! current life on every shard or only the issuing one) decide whether a
//! handshake's CPU stage is a full or a resumed one; the CPU stage's cost is a
//! constant per handshake and shards do not compete for cores; a client that
//! gives up on a waiting handshake frees its place in the queue at once.

mod model;
mod svg;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;

use model::{Params, PhaseResult, Policy, SimResult};

/// Command line.
#[derive(Parser, Debug)]
#[command(
    name = "storm_sim",
    about = "Reconnect storms up to the scale of ScyllaDB's published storm measurement (6,000 sessions x 9 nodes x 7 shards), in virtual time: this driver's reconnect code and the official driver's policy against a model of ScyllaDB's handshake admission"
)]
struct Cli {
    /// Client sessions.
    #[arg(long, default_value_t = 6000, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    sessions: u64,
    /// Nodes (node 0 is restarted).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u64).range(1..=64))]
    nodes: u64,
    /// Shards per node.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u64).range(1..=256))]
    shards: u64,
    /// Whose reconnect policy: ours, official, or both.
    #[arg(long, default_value = "both", value_parser = ["ours", "official", "both"])]
    policy: String,
    /// Handshakes in their CPU stage at once per shard.
    #[arg(long, default_value_t = 8)]
    cpu_concurrency: usize,
    /// CPU cost of one handshake, in microseconds.
    #[arg(long, default_value_t = 1000)]
    cost_us: u64,
    /// Longest wait for admission before the node sheds a handshake, in ms.
    #[arg(long, default_value_t = 1000)]
    shed_after_ms: u64,
    /// Our client's handshake timeout, in ms (default: the driver's own
    /// `ConnectionConfig::handshake_timeout`). The official driver bounds
    /// only the TCP connect, so it has none in the model.
    #[arg(long)]
    handshake_timeout_ms: Option<u64>,
    /// Network time of a connect plus OPTIONS, in microseconds.
    #[arg(long, default_value_t = 200)]
    rtt_us: u64,
    /// How long the restarted node is down, in ms.
    #[arg(long, default_value_t = 1200)]
    down_ms: u64,
    /// Over how long a pool notices the closes of its connections to the
    /// stopped node, in ms (each close wakes our pool's refill task).
    #[arg(long, default_value_t = 2)]
    close_spread_ms: u64,
    /// Bound of each phase, in virtual seconds.
    #[arg(long, default_value_t = 600)]
    horizon_s: u64,
    /// Seed of the random draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A NAT rewrites the clients' source ports: `random` (connections
    /// through the shard-aware port land on random shards) or a number (the
    /// port shifted by it: each lands that many shards further).
    #[arg(long, value_parser = parse_nat)]
    nat: Option<model::Nat>,
    /// TLS between clients and nodes: the CPU stage of a resumed handshake,
    /// in microseconds (`--cost-us` is then a full handshake's).
    #[arg(long)]
    tls_resumed_us: Option<u64>,
    /// With TLS: which shards accept a node's session ticket, every shard
    /// of the issuing node (ScyllaDB's default) or only the issuing one.
    #[arg(long, default_value = "node", value_parser = ["node", "shard"])]
    tickets: String,
    /// With TLS: our pools open a node's missing shards without waiting for
    /// its tickets (`PoolConfig::tls_ticket_pacing` off).
    #[arg(long)]
    no_ticket_pacing: bool,
    /// Where to write storm_sim.csv and storm_sim.svg.
    #[arg(long, default_value = "target/storm-sim")]
    out: PathBuf,
}

fn params(cli: &Cli, policy: Policy) -> Params {
    let mut p = Params::new(
        cli.sessions as usize,
        cli.nodes as usize,
        cli.shards as usize,
        policy,
    );
    p.cpu_concurrency = cli.cpu_concurrency;
    p.cost = Duration::from_micros(cli.cost_us);
    p.shed_after = Duration::from_millis(cli.shed_after_ms);
    if let (Some(ms), Policy::Ours) = (cli.handshake_timeout_ms, policy) {
        p.handshake_timeout = Some(Duration::from_millis(ms));
    }
    p.rtt = Duration::from_micros(cli.rtt_us);
    p.down = Duration::from_millis(cli.down_ms);
    p.close_spread = Duration::from_millis(cli.close_spread_ms);
    p.horizon = Duration::from_secs(cli.horizon_s);
    p.seed = cli.seed;
    p.nat = cli.nat;
    p.tls = cli.tls_resumed_us.map(|us| model::Tls {
        resumed_cost: Duration::from_micros(us),
        node_wide_tickets: cli.tickets == "node",
        ticket_pacing: !cli.no_ticket_pacing,
    });
    p
}

fn parse_nat(s: &str) -> Result<model::Nat, String> {
    if s == "random" {
        return Ok(model::Nat::Random);
    }
    s.parse::<u16>()
        .map(model::Nat::Offset)
        .map_err(|_| format!("`{s}`: expected `random` or a port offset (0-65535)"))
}

fn main() {
    let cli = Cli::parse();
    let policies: Vec<Policy> = match cli.policy.as_str() {
        "ours" => vec![Policy::Ours],
        "official" => vec![Policy::Official],
        _ => vec![Policy::Ours, Policy::Official],
    };
    let mut results = Vec::new();
    for policy in policies {
        let wall = Instant::now();
        let r = model::run(params(&cli, policy));
        eprintln!(
            "{}: {} events in {:.1} s of real time",
            policy.name(),
            r.events,
            wall.elapsed().as_secs_f64()
        );
        results.push(r);
    }
    print!("{}", table(&results));
    if let Err(e) = write_outputs(&cli.out, &results) {
        eprintln!("storm_sim: cannot write into {}: {e}", cli.out.display());
        std::process::exit(1);
    }
    eprintln!(
        "wrote {} and {}",
        cli.out.join("storm_sim.csv").display(),
        cli.out.join("storm_sim.svg").display()
    );
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(
        || "not within the horizon".to_string(),
        |d| format!("{:.2} s", d.as_secs_f64()),
    )
}

fn ratio(n: u64, ideal: u64) -> String {
    format!("{n} / {ideal} = {:.2}x", n as f64 / ideal.max(1) as f64)
}

fn phase_rows(o: &mut String, policy: &str, phase: &str, r: &PhaseResult) {
    let _ = writeln!(
        o,
        "| {policy} | {phase} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} |",
        ratio(r.accepted_at_coverage, r.ideal),
        ratio(r.accepted, r.ideal),
        ratio(r.attempts, r.ideal),
        r.refused,
        r.shed,
        r.timed_out,
        r.closed_excess,
        secs(r.covered_after),
        r.peak_in_progress,
        r.peak_in_progress_shard,
        r.peak_waiting,
        r.peak_waiting_shard,
        r.samples.iter().map(|s| s.attempts).max().unwrap_or(0) * 10,
    );
}

/// The results as a Markdown table.
fn table(results: &[SimResult]) -> String {
    let mut o = String::new();
    if let Some(p) = results.first().map(|r| &r.params) {
        let _ = writeln!(
            o,
            "{} sessions x {} nodes x {} shards; admission {} per shard, {:?} per handshake, shed after {:?}; node 0 down {:?}, UP event {:?} after its start",
            p.sessions, p.nodes, p.shards, p.cpu_concurrency, p.cost, p.shed_after, p.down, p.up_event_after
        );
    }
    let _ = writeln!(
        o,
        "\n| policy | phase | accepted when covered / ideal | accepted / ideal (phase) | attempts / ideal (phase) | refused (node down) | shed | client timeouts | closed by the client | covered in | peak in progress node / shard | peak waiting node / shard | peak attempts/s (100 ms) |"
    );
    let _ = writeln!(
        o,
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for r in results {
        let name = r.params.policy.name();
        phase_rows(&mut o, name, "cold start (every node)", &r.cold);
        phase_rows(&mut o, name, "restart (node 0)", &r.restart);
    }
    for r in results.iter().filter(|r| r.params.tls.is_some()) {
        let _ = writeln!(
            o,
            "\n{}: TLS handshakes full / resumed: cold start {} / {}, restart {} / {}.",
            r.params.policy.name(),
            r.cold.tls_full,
            r.cold.tls_resumed,
            r.restart.tls_full,
            r.restart.tls_resumed,
        );
    }
    for r in results.iter().filter(|r| r.params.policy == Policy::Ours) {
        let _ = writeln!(
            o,
            "\nOurs: the pools' rounds counted {} and {} failed opens as shed (cold start, restart): \
             the node's sheds plus the client's timeouts are {} and {}.",
            r.cold.shed_seen,
            r.restart.shed_seen,
            r.cold.shed + r.cold.timed_out,
            r.restart.shed + r.restart.timed_out,
        );
    }
    let _ = writeln!(
        o,
        "\nThe restart, per second from the node's stop (node 0 only; peaks summed over its shards):\n\n| policy | second | attempts | accepted | shed | client timeouts | peak in progress | peak waiting | sessions covered |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for r in results {
        for (i, row) in per_second(&r.restart).iter().enumerate() {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.params.policy.name(),
                i + 1,
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                row[6]
            );
        }
    }
    o
}

/// Per second of the restart: attempts, accepted, shed, timed out, peaks.
fn per_second(r: &PhaseResult) -> Vec<[u64; 7]> {
    let mut out: Vec<[u64; 7]> = Vec::new();
    for s in &r.samples {
        let sec = (s.t_ms.saturating_sub(1) / 1000) as usize;
        if out.len() <= sec {
            out.resize(sec + 1, [0; 7]);
        }
        let row = &mut out[sec];
        row[0] += s.attempts;
        row[1] += s.accepted;
        row[2] += s.shed;
        row[3] += s.timed_out;
        row[4] = row[4].max(s.peak_in_progress);
        row[5] = row[5].max(s.peak_waiting);
        row[6] = s.covered_sessions;
    }
    out
}

fn write_outputs(dir: &PathBuf, results: &[SimResult]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut csv = String::from(
        "policy,phase,t_ms,attempts,accepted,completed,shed,timed_out,peak_in_progress,peak_waiting,peak_in_progress_shard,peak_waiting_shard,covered_sessions\n",
    );
    for r in results {
        for (phase, pr) in [("cold", &r.cold), ("restart", &r.restart)] {
            for s in &pr.samples {
                let _ = writeln!(
                    csv,
                    "{},{phase},{},{},{},{},{},{},{},{},{},{},{}",
                    r.params.policy.name(),
                    s.t_ms,
                    s.attempts,
                    s.accepted,
                    s.completed,
                    s.shed,
                    s.timed_out,
                    s.peak_in_progress,
                    s.peak_waiting,
                    s.peak_in_progress_shard,
                    s.peak_waiting_shard,
                    s.covered_sessions
                );
            }
        }
    }
    std::fs::write(dir.join("storm_sim.csv"), csv)?;
    let mut secs = String::from("policy,phase,second,attempts,accepted,shed,timed_out,peak_in_progress,peak_waiting,covered_sessions\n");
    for r in results {
        for (phase, pr) in [("cold", &r.cold), ("restart", &r.restart)] {
            for (i, row) in per_second(pr).iter().enumerate() {
                let _ = writeln!(
                    secs,
                    "{},{phase},{},{},{},{},{},{},{},{}",
                    r.params.policy.name(),
                    i + 1,
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    row[4],
                    row[5],
                    row[6]
                );
            }
        }
    }
    std::fs::write(dir.join("storm_sim_per_second.csv"), secs)?;
    std::fs::write(dir.join("storm_sim.svg"), svg::chart(results))?;
    std::fs::write(dir.join("storm_sim.md"), table(results))?;
    Ok(())
}

#[cfg(test)]
mod agreement;

#[cfg(test)]
mod tests {
    use super::*;

    fn small(policy: Policy, seed: u64) -> SimResult {
        let mut p = Params::new(50, 3, 4, policy);
        p.seed = seed;
        p.horizon = Duration::from_secs(120);
        model::run(p)
    }

    /// At 50 sessions x 3 nodes x 4 shards, both policies: every session is
    /// covered again in both phases, every handshake accounted for, attempts
    /// bounded; after the restart ours sheds no more than the official
    /// policy and covers every session no later (the node has headroom
    /// here: its admission bound is the only limit).
    #[test]
    fn small_storm_invariants() {
        for seed in 1..=3 {
            let ours = small(Policy::Ours, seed);
            let official = small(Policy::Official, seed);
            for r in [&ours, &official] {
                let name = r.params.policy.name();
                for (phase, pr) in [("cold", &r.cold), ("restart", &r.restart)] {
                    assert!(
                        pr.covered_after.is_some(),
                        "{name} {phase}: not covered: {pr:?}"
                    );
                    // Every accepted connection was kept, shed, timed out
                    // or closed by its client.
                    assert!(pr.accepted >= pr.ideal, "{name} {phase}: {pr:?}");
                    assert!(
                        pr.accepted_at_coverage <= 3 * pr.ideal,
                        "{name} {phase}: {} accepted for {} wanted",
                        pr.accepted_at_coverage,
                        pr.ideal
                    );
                    // The admission bound holds at every shard.
                    assert!(pr.peak_in_progress_shard <= 8, "{name} {phase}");
                }
            }
            assert!(
                ours.restart.covered_after <= official.restart.covered_after,
                "seed {seed}: ours {:?} official {:?}",
                ours.restart.covered_after,
                official.restart.covered_after
            );
            assert!(ours.restart.shed <= official.restart.shed);
            // Ours reaches exact coverage with exactly one accepted
            // connection per wanted one when nothing is shed.
            if ours.restart.shed == 0 {
                assert_eq!(ours.restart.accepted_at_coverage, ours.restart.ideal);
            }
        }
    }

    /// Over TLS with tickets every shard of the node accepts, each of our
    /// pools pays one full handshake per life of its node (its first
    /// connection's) and resumes the rest; with per-shard tickets every
    /// handshake is full (each shard is opened once). Behind a NAT that
    /// shifts source ports, every shard is still covered.
    #[test]
    fn tickets_and_nat_as_the_pool_meets_them() {
        for node_wide in [true, false] {
            let mut p = Params::new(50, 3, 4, Policy::Ours);
            p.cost = Duration::from_millis(2);
            p.tls = Some(model::Tls {
                resumed_cost: Duration::from_micros(200),
                node_wide_tickets: node_wide,
                ticket_pacing: true,
            });
            p.horizon = Duration::from_secs(120);
            let r = model::run(p);
            for (phase, pr, pools) in [("cold", &r.cold, 150), ("restart", &r.restart, 50)] {
                assert!(pr.covered_after.is_some(), "{phase}: {pr:?}");
                assert_eq!(pr.shed, 0, "{phase}");
                assert_eq!(pr.tls_full + pr.tls_resumed, pr.accepted, "{phase}");
                if node_wide {
                    assert_eq!(
                        (pr.tls_full, pr.tls_resumed),
                        (pools, pr.ideal - pools),
                        "{phase}"
                    );
                } else {
                    assert_eq!((pr.tls_full, pr.tls_resumed), (pr.ideal, 0), "{phase}");
                }
            }
        }
        let mut p = Params::new(50, 3, 4, Policy::Ours);
        p.nat = Some(model::Nat::Offset(1));
        let r = model::run(p);
        assert!(r.cold.covered_after.is_some() && r.restart.covered_after.is_some());
        assert!(
            r.cold.closed_excess > 0,
            "the NAT cost throwaway connections"
        );
    }

    /// The same seed gives the same run.
    #[test]
    fn reproducible() {
        let a = small(Policy::Ours, 9);
        let b = small(Policy::Ours, 9);
        assert_eq!(a.events, b.events);
        assert_eq!(a.restart.covered_after, b.restart.covered_after);
    }

    /// An overloaded node (a costly handshake, a short wait) sheds, and the
    /// pools still cover every shard: shed handshakes are retried.
    #[test]
    fn shedding_is_recovered() {
        for policy in [Policy::Ours, Policy::Official] {
            let mut p = Params::new(50, 3, 4, policy);
            p.cost = Duration::from_millis(20);
            p.shed_after = Duration::from_millis(5);
            p.horizon = Duration::from_secs(300);
            let r = model::run(p);
            assert!(r.cold.shed > 0, "{}: nothing shed", policy.name());
            assert!(r.cold.covered_after.is_some(), "{}", policy.name());
            assert!(r.restart.covered_after.is_some(), "{}", policy.name());
            if policy == Policy::Ours {
                // The rounds counted every shed and timed-out handshake as
                // shed (the pool's own classification), and nothing else.
                for pr in [&r.cold, &r.restart] {
                    assert_eq!(pr.shed_seen, pr.shed + pr.timed_out, "{pr:?}");
                }
            }
        }
    }
}
