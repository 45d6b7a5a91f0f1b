//! The part of the driver comparison that must be identical on both sides:
//! the command line, the tokio runtime, the closed-loop load generator, the
//! latency and CPU measurement, and the report (text or JSON).
//!
//! Each driver binary only connects, creates the schema, prepares two
//! statements and hands [`run`] two closures: "insert key k" and "select key
//! k and check the row". Everything that is timed lives here, so the two
//! sides cannot measure differently.

use std::alloc::System;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Every heap allocation of the process, counted (both driver binaries link
/// this crate, so they count alike). The measured phase reports the
/// allocations it made divided by its requests; that includes spawning the
/// phase's `concurrency` tasks (a few allocations each), the same for both.
#[global_allocator]
static GLOBAL: &stats_alloc::StatsAlloc<System> = &stats_alloc::INSTRUMENTED_SYSTEM;

/// Size of the blob written per row.
pub const VALUE_LEN: usize = 100;

/// Which statement is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Prepared INSERT of fresh keys.
    Insert,
    /// Prepared SELECT by keys inserted before.
    Select,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Insert => "insert",
            Workload::Select => "select",
        }
    }
}

/// The command line shared by both binaries.
#[derive(Debug, Clone)]
pub struct Args {
    /// `host:port` of the node to connect to.
    pub node: String,
    /// What to measure.
    pub workload: Workload,
    /// Requests in flight (tasks in the closed loop).
    pub concurrency: usize,
    /// Measured requests.
    pub requests: u64,
    /// Unmeasured requests run first, with the same concurrency.
    pub warmup: u64,
    /// Print one JSON object instead of a text line.
    pub json: bool,
    /// Keyspace of the table `kv`.
    pub keyspace: String,
    /// Worker threads of the tokio runtime.
    pub threads: usize,
    /// First key; the run uses `key_base .. key_base + warmup + requests`.
    pub key_base: i64,
    /// For `select`: do not insert the keys first (they were inserted by an
    /// earlier `insert` run with the same `--key-base`).
    pub no_populate: bool,
    /// Connect over TLS (`--tls-ca`, optionally `--tls-cert`/`--tls-key`).
    pub tls: Option<TlsFiles>,
    /// Count the process's syscalls during the measured phase with
    /// `perf stat -e raw_syscalls:sys_enter -p <pid>` (`--count-syscalls`).
    pub count_syscalls: bool,
}

/// The PEM files of a TLS connection. Both drivers verify the server's
/// certificate against `ca` and the node's IP address (no mode that accepts
/// any certificate).
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// CA certificate(s) to trust.
    pub ca: PathBuf,
    /// Client certificate chain and private key, for servers that require
    /// one (mutual TLS).
    pub client: Option<(PathBuf, PathBuf)>,
}

const USAGE: &str = "\
usage: BIN --node HOST:PORT --workload insert|select [options]
  --concurrency C     requests in flight (default 64)
  --requests N        measured requests (default 100000)
  --warmup N          unmeasured requests first (default 10000)
  --threads T         tokio worker threads (default 2)
  --keyspace NAME     keyspace (default: per driver)
  --key-base K        first key (default: derived from the clock, so fresh)
  --no-populate       select: the keys exist already (same --key-base as an insert run)
  --count-syscalls    count the measured phase's syscalls (perf stat, raw_syscalls:sys_enter)
  --tls-ca FILE       connect over TLS, trusting the CA certificate(s) in FILE (PEM);
                      the server certificate is verified against the node's IP address
  --tls-cert FILE     with --tls-ca: client certificate (PEM), needs --tls-key
  --tls-key FILE      with --tls-ca: client private key (PEM), needs --tls-cert
  --json              one JSON object per run";

/// Parses the command line (`default_keyspace` differs per driver). Exits
/// the process with a usage message on a bad argument.
pub fn parse_args(default_keyspace: &str) -> Args {
    match parse_from(std::env::args().skip(1), default_keyspace) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(2);
        }
    }
}

fn parse_from(
    mut it: impl Iterator<Item = String>,
    default_keyspace: &str,
) -> Result<Args, String> {
    fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse().map_err(|_| format!("{flag}: bad value '{v}'"))
    }
    let clock = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    let mut a = Args {
        node: String::new(),
        workload: Workload::Insert,
        concurrency: 64,
        requests: 100_000,
        warmup: 10_000,
        json: false,
        keyspace: default_keyspace.to_owned(),
        threads: 2,
        // Milliseconds times 2^20: a new range per run started a millisecond
        // apart, and far below i64::MAX.
        key_base: (clock.as_millis() as i64) << 20,
        no_populate: false,
        tls: None,
        count_syscalls: false,
    };
    let mut workload = None;
    let (mut ca, mut cert, mut key) = (None, None, None);
    let path = |flag: &str, v: Option<String>| -> Result<Option<PathBuf>, String> {
        v.map(|v| Some(PathBuf::from(v)))
            .ok_or_else(|| format!("{flag} needs a file"))
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--node" => a.node = it.next().ok_or("--node needs a value")?,
            "--workload" => {
                workload = Some(match it.next().as_deref() {
                    Some("insert") => Workload::Insert,
                    Some("select") => Workload::Select,
                    _ => return Err("--workload needs insert or select".into()),
                })
            }
            "--concurrency" => a.concurrency = num(&flag, it.next())?,
            "--requests" => a.requests = num(&flag, it.next())?,
            "--warmup" => a.warmup = num(&flag, it.next())?,
            "--threads" => a.threads = num(&flag, it.next())?,
            "--keyspace" => a.keyspace = it.next().ok_or("--keyspace needs a value")?,
            "--key-base" => a.key_base = num(&flag, it.next())?,
            "--no-populate" => a.no_populate = true,
            "--count-syscalls" => a.count_syscalls = true,
            "--tls-ca" => ca = path(&flag, it.next())?,
            "--tls-cert" => cert = path(&flag, it.next())?,
            "--tls-key" => key = path(&flag, it.next())?,
            "--json" => a.json = true,
            "--help" | "-h" => return Err(String::new()),
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    a.workload = workload.ok_or("--workload is required")?;
    a.tls = match (ca, cert, key) {
        (None, None, None) => None,
        (None, _, _) => return Err("--tls-cert and --tls-key need --tls-ca".into()),
        (Some(ca), None, None) => Some(TlsFiles { ca, client: None }),
        (Some(ca), Some(cert), Some(key)) => Some(TlsFiles {
            ca,
            client: Some((cert, key)),
        }),
        (Some(_), _, _) => return Err("--tls-cert and --tls-key go together".into()),
    };
    if a.node.is_empty() {
        return Err("--node is required".into());
    }
    if a.concurrency == 0 || a.threads == 0 || a.requests == 0 {
        return Err("--concurrency, --threads and --requests must be positive".into());
    }
    if !a
        .keyspace
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err("--keyspace: letters, digits and _ only".into());
    }
    Ok(a)
}

/// The tokio runtime both sides use: multi-threaded, `threads` workers.
pub fn runtime(threads: usize) -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the tokio runtime: {e}");
            std::process::exit(1);
        }
    }
}

/// CQL text of the schema (keyspace then table).
pub fn schema(keyspace: &str) -> [String; 2] {
    [
        format!(
            "CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = \
             {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
        ),
        format!("CREATE TABLE IF NOT EXISTS {keyspace}.kv (pk bigint PRIMARY KEY, v blob)"),
    ]
}

/// CQL text of the prepared INSERT.
pub fn insert_cql(keyspace: &str) -> String {
    format!("INSERT INTO {keyspace}.kv (pk, v) VALUES (?, ?)")
}

/// CQL text of the prepared SELECT.
pub fn select_cql(keyspace: &str) -> String {
    format!("SELECT v FROM {keyspace}.kv WHERE pk = ?")
}

/// The value stored under `key`: 100 bytes starting with the key
/// (little-endian), so a SELECT can tell it got the right row.
pub fn value_for(key: i64) -> [u8; VALUE_LEN] {
    let mut v = [0xA5u8; VALUE_LEN];
    v[..8].copy_from_slice(&key.to_le_bytes());
    v
}

/// Checks a value read back for `key`.
pub fn check_value(key: i64, v: &[u8]) -> Result<(), String> {
    if v.len() == VALUE_LEN && v[..8] == key.to_le_bytes() {
        Ok(())
    } else {
        Err(format!("key {key}: wrong value ({} bytes)", v.len()))
    }
}

/// Process CPU time: user + system, in clock ticks, from `/proc/self/stat`
/// (all threads, including exited ones). USER_HZ is 100 on Linux, so one
/// tick is 10 ms: over a run of a few seconds that is a resolution of a few
/// tenths of a percent.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces:
    // count fields after the last ')'. There, field 3 (state) is index 0,
    // so utime (field 14) is index 11 and stime (field 15) index 12.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace();
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Process CPU time in nanoseconds: the sum of the first field of
/// `/proc/self/task/*/schedstat` (time on a CPU per live thread). Much finer
/// than [`cpu_ticks`]; threads that exit during the run are missed, but the
/// runtime's workers live for the whole run.
fn cpu_sched_ns() -> Option<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        let s = std::fs::read_to_string(path).ok()?;
        total += s.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// The process's connected TCP sockets, counted by the remote port (e.g.
/// `{9142: 2, 19142: 1}`: two connections to the regular TLS port, one to
/// the TLS shard-aware port). Found by asking each socket descriptor listed
/// in `/proc/self/fd` for its type and peer (`getpeername`), so it is the
/// same count for both drivers whatever their own metrics. (Reading
/// `/proc/self/net/tcp` instead missed sockets: that table is read a page at
/// a time and entries are skipped while other connections come and go.)
/// `None` if /proc cannot be read.
pub fn connections_by_remote_port() -> Option<BTreeMap<u16, u64>> {
    use std::os::fd::BorrowedFd;

    let mut by_port = BTreeMap::new();
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        let Ok(entry) = entry else { continue };
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        // A descriptor closed since read_dir listed it has no link: skip it.
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if !target.to_string_lossy().starts_with("socket:[") {
            continue;
        }
        // SAFETY: `fd` was open a moment ago (its /proc link resolved) and
        // is only borrowed for two read-only socket calls (getsockopt
        // SO_TYPE, getpeername) and never closed here. The measured phase
        // has ended, so the drivers are idle; if one closed the descriptor
        // in between anyway, the calls fail with EBADF (skipped below) or
        // describe whatever socket now has that number: a count off by one,
        // nothing worse.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&fd);
        if sock.r#type().ok() != Some(socket2::Type::STREAM) {
            continue;
        }
        // Unix-domain stream sockets have no IP peer: as_socket() is None.
        // A TCP socket still connecting has no peer yet (ENOTCONN).
        if let Some(peer) = sock.peer_addr().ok().and_then(|a| a.as_socket()) {
            *by_port.entry(peer.port()).or_insert(0) += 1;
        }
    }
    Some(by_port)
}

/// What one closed-loop phase measured.
#[derive(Debug)]
pub struct Phase {
    /// Requests run.
    pub requests: u64,
    /// Wall time of the phase.
    pub elapsed: Duration,
    /// Latency of each request in nanoseconds, sorted.
    pub latencies_ns: Vec<u64>,
    /// CPU ticks (1/100 s) the process used during the phase.
    pub cpu_ticks: Option<u64>,
    /// CPU nanoseconds the process's threads used during the phase.
    pub cpu_sched_ns: Option<u64>,
    /// Requests that failed.
    pub errors: u64,
    /// The first failure, for the report.
    pub first_error: Option<String>,
    /// Heap allocations the process made during the phase.
    pub allocations: u64,
    /// Syscalls the process made during the phase, if counted.
    pub syscalls: Option<u64>,
}

/// Runs keys `first .. first + count` through `op` with exactly
/// `concurrency` requests in flight: `concurrency` tasks, each taking the
/// next key from a shared counter as soon as its previous request ended.
/// Each latency goes into a slot of a vector allocated before the start.
pub async fn closed_loop<F, Fut>(concurrency: usize, first: i64, count: u64, op: F) -> Phase
where
    F: Fn(i64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let slots: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
    let next = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let first_error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
    let ticks0 = cpu_ticks();
    let sched0 = cpu_sched_ns();
    let allocs0 = GLOBAL.stats().allocations;
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let (op, slots, next) = (op.clone(), slots.clone(), next.clone());
        let (errors, first_error) = (errors.clone(), first_error.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let t = Instant::now();
                let r = op(first + i as i64).await;
                slots[i as usize].store(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                if let Err(e) = r {
                    errors.fetch_add(1, Ordering::Relaxed);
                    let mut f = first_error.lock().unwrap_or_else(|p| p.into_inner());
                    f.get_or_insert(e);
                }
            }
        }));
    }
    for t in tasks {
        if let Err(e) = t.await {
            errors.fetch_add(1, Ordering::Relaxed);
            let mut f = first_error.lock().unwrap_or_else(|p| p.into_inner());
            f.get_or_insert(format!("task failed: {e}"));
        }
    }
    let elapsed = start.elapsed();
    let allocations = GLOBAL.stats().allocations.saturating_sub(allocs0) as u64;
    let ticks1 = cpu_ticks();
    let sched1 = cpu_sched_ns();
    let mut latencies_ns: Vec<u64> = slots.iter().map(|s| s.load(Ordering::Relaxed)).collect();
    latencies_ns.sort_unstable();
    let first_error = first_error.lock().unwrap_or_else(|p| p.into_inner()).take();
    Phase {
        requests: count,
        elapsed,
        latencies_ns,
        cpu_ticks: ticks0.zip(ticks1).map(|(a, b)| b.saturating_sub(a)),
        cpu_sched_ns: sched0.zip(sched1).map(|(a, b)| b.saturating_sub(a)),
        errors: errors.load(Ordering::Relaxed),
        first_error,
        allocations,
        syscalls: None,
    }
}

/// `perf stat` counting this process's syscalls until [`stop`](Self::stop).
struct SyscallCounter {
    child: std::process::Child,
    out: PathBuf,
}

impl SyscallCounter {
    /// Attaches `perf stat` to this process; `None` if perf is missing or
    /// refuses (no tracepoint access). Waits a moment for it to attach.
    async fn start() -> Option<Self> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let out =
            std::env::temp_dir().join(format!("bench-syscalls-{}-{nanos}.csv", std::process::id()));
        let child = std::process::Command::new("perf")
            .args(["stat", "-x,", "-e", "raw_syscalls:sys_enter", "-p"])
            .arg(std::process::id().to_string())
            .arg("-o")
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        // perf needs a moment to attach; syscalls of the idle runtime in the
        // meantime are a handful, against tens of thousands measured.
        tokio::time::sleep(Duration::from_millis(300)).await;
        Some(Self { child, out })
    }

    /// Stops perf (SIGINT makes it write its count) and reads the count.
    fn stop(mut self) -> Option<u64> {
        let pid = self.child.id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status();
        let _ = self.child.wait();
        let text = std::fs::read_to_string(&self.out).ok();
        let _ = std::fs::remove_file(&self.out);
        text?
            .lines()
            .find(|l| l.contains("raw_syscalls:sys_enter"))?
            .split(',')
            .next()?
            .trim()
            .parse()
            .ok()
    }
}

/// The percentile of sorted latencies (ns), in microseconds (0 if none).
fn percentile_us(sorted: &[u64], q: f64) -> f64 {
    measure::percentile(sorted, q).map_or(0.0, |ns| ns as f64 / 1000.0)
}

/// Runs the workload named by `args` (warm-up, then the measured phase) and
/// prints the report. `insert` writes key k; `select` reads key k and checks
/// the row. Returns the process exit code: 0 if no request failed.
pub async fn run<I, IF, S, SF>(args: &Args, driver: &str, insert: I, select: S) -> i32
where
    I: Fn(i64) -> IF + Clone + Send + Sync + 'static,
    IF: Future<Output = Result<(), String>> + Send + 'static,
    S: Fn(i64) -> SF + Clone + Send + Sync + 'static,
    SF: Future<Output = Result<(), String>> + Send + 'static,
{
    let total = args.warmup + args.requests;
    let c = args.concurrency;
    let measured_first = args.key_base + args.warmup as i64;
    let phase = match args.workload {
        Workload::Insert => {
            if args.warmup > 0 {
                closed_loop(c, args.key_base, args.warmup, insert.clone()).await;
            }
            let counter = start_counter(args).await;
            let mut p = closed_loop(c, measured_first, args.requests, insert).await;
            p.syscalls = counter.and_then(SyscallCounter::stop);
            p
        }
        Workload::Select => {
            if !args.no_populate {
                let p = closed_loop(c, args.key_base, total, insert).await;
                if p.errors > 0 {
                    eprintln!(
                        "{driver}: populating failed {} times: {}",
                        p.errors,
                        p.first_error.unwrap_or_default()
                    );
                    return 1;
                }
            }
            if args.warmup > 0 {
                closed_loop(c, args.key_base, args.warmup, select.clone()).await;
            }
            let counter = start_counter(args).await;
            let mut p = closed_loop(c, measured_first, args.requests, select).await;
            p.syscalls = counter.and_then(SyscallCounter::stop);
            p
        }
    };
    let connections = connections_by_remote_port();
    report(args, driver, &phase, connections.as_ref());
    if phase.errors > 0 {
        eprintln!(
            "{driver}: {} of {} requests failed; first: {}",
            phase.errors,
            phase.requests,
            phase.first_error.as_deref().unwrap_or("?")
        );
        1
    } else {
        0
    }
}

async fn start_counter(args: &Args) -> Option<SyscallCounter> {
    if !args.count_syscalls {
        return None;
    }
    let c = SyscallCounter::start().await;
    if c.is_none() {
        eprintln!("--count-syscalls: perf stat could not be started; not counting");
    }
    c
}

fn report(args: &Args, driver: &str, p: &Phase, conns: Option<&BTreeMap<u16, u64>>) {
    let secs = p.elapsed.as_secs_f64();
    let ops = p.requests as f64 / secs;
    let (p50, p99, p999) = (
        percentile_us(&p.latencies_ns, 0.50),
        percentile_us(&p.latencies_ns, 0.99),
        percentile_us(&p.latencies_ns, 0.999),
    );
    // 1 tick = 10 ms (USER_HZ = 100).
    let cpu_us = p.cpu_ticks.map(|t| t as f64 * 10_000.0 / p.requests as f64);
    let sched_us = p
        .cpu_sched_ns
        .map(|n| n as f64 / 1000.0 / p.requests as f64);
    let opt = |v: Option<f64>| v.map_or_else(|| "null".to_owned(), |v| format!("{v:.3}"));
    let allocs = p.allocations as f64 / p.requests as f64;
    let syscalls = opt(p.syscalls.map(|n| n as f64 / p.requests as f64));
    let tls = if args.tls.is_some() { "true" } else { "false" };
    if args.json {
        let conns = conns.map_or_else(
            || "null".to_owned(),
            |m| {
                let kv: Vec<String> = m.iter().map(|(p, n)| format!("\"{p}\":{n}")).collect();
                format!("{{{}}}", kv.join(","))
            },
        );
        println!(
            "{{\"driver\":\"{driver}\",\"workload\":\"{}\",\"concurrency\":{},\"threads\":{},\
             \"requests\":{},\"errors\":{},\"elapsed_s\":{secs:.4},\"ops_per_s\":{ops:.1},\
             \"p50_us\":{p50:.1},\"p99_us\":{p99:.1},\"p999_us\":{p999:.1},\
             \"cpu_ticks\":{},\"cpu_us_per_req\":{},\"cpu_sched_us_per_req\":{},\
             \"allocs_per_req\":{allocs:.3},\"syscalls_per_req\":{syscalls},\
             \"tls\":{tls},\"connections_by_port\":{conns}}}",
            args.workload.name(),
            args.concurrency,
            args.threads,
            p.requests,
            p.errors,
            p.cpu_ticks
                .map_or_else(|| "null".to_owned(), |t| t.to_string()),
            opt(cpu_us),
            opt(sched_us),
        );
    } else {
        println!(
            "{driver:>8} {:<6} c={:<4} n={} ops/s={ops:.0} p50={p50:.1}us p99={p99:.1}us \
             p999={p999:.1}us cpu/req={}us (ticks {}; 10 ms each) sched cpu/req={}us \
             allocs/req={allocs:.3} syscalls/req={syscalls} errors={} \
             tls={tls} connections (port:count)={}",
            args.workload.name(),
            args.concurrency,
            p.requests,
            opt(cpu_us),
            p.cpu_ticks
                .map_or_else(|| "?".to_owned(), |t| t.to_string()),
            opt(sched_us),
            p.errors,
            conns.map_or_else(
                || "?".to_owned(),
                |m| m
                    .iter()
                    .map(|(p, n)| format!("{p}:{n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        assert_eq!(percentile_us(&v, 0.5), 500.0);
        assert_eq!(percentile_us(&v, 0.99), 990.0);
        assert_eq!(percentile_us(&v, 0.999), 999.0);
        assert_eq!(percentile_us(&[], 0.5), 0.0);
    }

    #[test]
    fn cpu_counters_read() {
        assert!(cpu_ticks().is_some());
        assert!(cpu_sched_ns().is_some_and(|n| n > 0));
    }

    #[test]
    fn values_round_trip() {
        assert!(check_value(42, &value_for(42)).is_ok());
        assert!(check_value(43, &value_for(42)).is_err());
    }

    #[test]
    fn args_parse() {
        let a = parse_from(
            [
                "--node",
                "h:1",
                "--workload",
                "select",
                "--concurrency",
                "8",
                "--json",
            ]
            .into_iter()
            .map(String::from),
            "ks",
        );
        let a = a.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.workload, Workload::Select);
        assert_eq!(a.concurrency, 8);
        assert!(a.json);
        assert!(parse_from(std::iter::empty(), "ks").is_err());
        assert!(a.tls.is_none());
    }

    fn parse(args: &[&str]) -> Result<Args, String> {
        let base = ["--node", "h:1", "--workload", "insert"];
        parse_from(base.iter().chain(args).map(|s| s.to_string()), "ks")
    }

    #[test]
    fn tls_args_parse() {
        let a = parse(&["--tls-ca", "ca.pem"]).unwrap_or_else(|e| panic!("{e}"));
        let tls = a.tls.unwrap_or_else(|| panic!("no tls"));
        assert_eq!(tls.ca, PathBuf::from("ca.pem"));
        assert!(tls.client.is_none());
        let a = parse(&["--tls-ca", "ca", "--tls-cert", "c", "--tls-key", "k"])
            .unwrap_or_else(|e| panic!("{e}"));
        let tls = a.tls.unwrap_or_else(|| panic!("no tls"));
        assert_eq!(tls.client, Some(("c".into(), "k".into())));
        // A client certificate without its key (or without a CA) is refused.
        assert!(parse(&["--tls-ca", "ca", "--tls-cert", "c"]).is_err());
        assert!(parse(&["--tls-cert", "c", "--tls-key", "k"]).is_err());
        assert!(parse(&["--tls-ca"]).is_err());
    }

    #[test]
    fn connections_are_counted() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port();
        let before = connections_by_remote_port().unwrap_or_default();
        let _c1 =
            std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let _c2 =
            std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_or_else(|e| panic!("{e}"));
        let after = connections_by_remote_port().unwrap_or_default();
        assert_eq!(before.get(&port), None);
        assert_eq!(after.get(&port), Some(&2));
    }
}
