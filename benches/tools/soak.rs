//! Soak: a mixed workload against the in-process test cluster while a churn
//! schedule restarts nodes, moves and splits tablets, creates and drops
//! tables, turns NAT and a slow node on and off, and drops connections;
//! then checks that nothing was lost, answered twice or wrong, and that
//! memory, descriptors, connections and tasks came back to where they were
//! after the warm-up.
//!
//! ```text
//! scripts/soak.sh --minutes 60          # or:
//! cargo run --release --example soak -- --seconds 120 --out target/soak
//! ```
//!
//! The workload (64 tasks): prepared writes then reads of the same key with
//! the value checked, on a vnode table and a tablet table; unlogged batches
//! of one partition, read back; paged reads of a 100-row partition whose
//! values never change; lightweight transactions (a key deleted, then
//! `INSERT ... IF NOT EXISTS` twice: applied, then not, and read back). Every operation ends exactly once, as a
//! success or a failure: `issued = succeeded + failed` is checked per kind,
//! every operation must end within a deadline (60 s, far above the driver's
//! request timeouts), and the workers must stop within 90 s of the load's
//! end: an operation that never ends fails the run instead of hanging it.
//! A value read back that is neither what was last written nor (after a
//! failed write, whose effect is unknown) what that write tried, is wrong.
//!
//! Failures are expected only around the disruptions that make them
//! unavoidable: a request in flight on a node that restarts (an LWT is not
//! idempotent, so it is not retried). Every failure is attributed to the
//! churn event before it (within `--grace` seconds) or reported as
//! unexplained, which fails the run.
//!
//! Samples every second: resident memory, open file descriptors, the
//! session's connections, live tokio tasks, operations done. Written to
//! `samples.csv`, with `summary.txt` and `chart.svg`, in `--out`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use measure::chart::{Chart, Mark, Panel, Stroke};
use scylla_driver::statement::{BatchType, Consistency, Statement};
use scylla_driver::{ExecutionError, PreparedStatement, Session, SessionBuilder};
use scylla_testbed::{Faults, NatMode, TestCluster};

const NODES: usize = 3;
const SHARDS: u16 = 4;
const TABLETS: usize = 16;
const CONCURRENCY: usize = 64;
/// Keys each worker owns in each kv table.
const KEYS_PER_WORKER: i64 = 200;
/// Rows of each worker's paged partition.
const PAGED_ROWS: i32 = 100;

struct Args {
    duration: Duration,
    warmup: Duration,
    out: std::path::PathBuf,
    churn_every: Duration,
    grace: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        duration: Duration::from_secs(120),
        warmup: Duration::from_secs(15),
        out: std::path::PathBuf::from("target/soak"),
        churn_every: Duration::from_secs(5),
        grace: Duration::from_secs(15),
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let secs = |v: String| {
            v.parse::<u64>()
                .map(Duration::from_secs)
                .map_err(|e| format!("{v}: {e}"))
        };
        match a.as_str() {
            "--seconds" => args.duration = secs(value("--seconds")?)?,
            "--minutes" => args.duration = secs(value("--minutes")?)? * 60,
            "--warmup" => args.warmup = secs(value("--warmup")?)?,
            "--churn-every" => args.churn_every = secs(value("--churn-every")?)?,
            "--grace" => args.grace = secs(value("--grace")?)?,
            "--out" => args.out = value("--out")?.into(),
            "-h" | "--help" => {
                println!(
                    "usage: soak [--seconds N | --minutes N] [--warmup S] [--churn-every S] \
                     [--grace S] [--out DIR]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

/// The outcome counters of one kind of operation.
#[derive(Default)]
struct Tally {
    issued: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    wrong: AtomicU64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    VnodeWriteRead,
    TabletWriteRead,
    Batch,
    Paged,
    Lwt,
}

const OPS: [Op; 5] = [
    Op::VnodeWriteRead,
    Op::TabletWriteRead,
    Op::Batch,
    Op::Paged,
    Op::Lwt,
];

/// Everything the workers and the report share.
struct Shared {
    start: Instant,
    tallies: BTreeMap<Op, Tally>,
    /// Failures: (seconds since start, operation, error kind).
    failures: Mutex<Vec<(f64, Op, String)>>,
    /// Wrong values, described.
    wrong: Mutex<Vec<String>>,
    /// Churn events: (seconds since start, what).
    events: Mutex<Vec<(f64, String)>>,
    /// Ends the churn schedule.
    churn_stop: AtomicBool,
    /// Ends the workers.
    stop: AtomicBool,
    /// Operations that took longer than [`OP_DEADLINE`]: (seconds since
    /// start when it ended, operation, how long it took).
    overdue: Mutex<Vec<(f64, Op, Duration)>>,
}

/// The longest an operation may take, from its first request to its last
/// answer, before the run fails: well above what the driver's own request
/// timeouts allow (an operation makes up to 4 requests, or a paged read's
/// page fetches), so only an operation that hangs misses it.
const OP_DEADLINE: Duration = Duration::from_secs(60);

/// How long the workers get to stop once the load ends; one still running
/// then holds an operation that never ended, and the run fails instead of
/// waiting for it.
const STOP_DEADLINE: Duration = Duration::from_secs(90);

impl Shared {
    fn secs(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn tally(&self, op: Op) -> &Tally {
        // Every `Op` has a tally (built from `OPS`).
        &self.tallies[&op]
    }

    fn fail(&self, op: Op, e: &ExecutionError) {
        self.tally(op).failed.fetch_add(1, Ordering::Relaxed);
        let kind = error_kind(e);
        lock(&self.failures).push((self.secs(), op, kind));
    }

    /// Notes an operation that took longer than [`OP_DEADLINE`].
    fn ended(&self, op: Op, took: Duration) {
        if took > OP_DEADLINE {
            lock(&self.overdue).push((self.secs(), op, took));
        }
    }

    fn wrong(&self, op: Op, what: String) {
        self.tally(op).wrong.fetch_add(1, Ordering::Relaxed);
        lock(&self.wrong).push(what);
    }

    fn event(&self, what: String) {
        println!("[{:7.1} s] {what}", self.secs());
        lock(&self.events).push((self.secs(), what));
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A short name for an error, for the failure table.
fn error_kind(e: &ExecutionError) -> String {
    let text = format!("{e:?}");
    text.split(|c: char| !c.is_alphanumeric())
        .find(|s| !s.is_empty())
        .unwrap_or("error")
        .to_owned()
}

struct Statements {
    vnode_write: PreparedStatement,
    vnode_read: PreparedStatement,
    tablet_write: PreparedStatement,
    tablet_read: PreparedStatement,
    batch_write: PreparedStatement,
    batch_read: PreparedStatement,
    paged_read: PreparedStatement,
    lwt: PreparedStatement,
    lwt_read: PreparedStatement,
    lwt_delete: PreparedStatement,
}

async fn schema(s: &Session) -> Result<Statements, ExecutionError> {
    for ddl in [
        "CREATE KEYSPACE soak WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}",
        "CREATE KEYSPACE soak_t WITH replication = {'class': 'NetworkTopologyStrategy', \
         'replication_factor': 3} AND tablets = {'enabled': true, 'initial': 16}",
        "CREATE TABLE soak.kv (k bigint PRIMARY KEY, v bigint)",
        "CREATE TABLE soak_t.kv (k bigint PRIMARY KEY, v bigint)",
        "CREATE TABLE soak.batch (p bigint, c int, v bigint, PRIMARY KEY (p, c))",
        "CREATE TABLE soak.rows (p bigint, c int, v bigint, PRIMARY KEY (p, c))",
        "CREATE TABLE soak.lwt (k bigint PRIMARY KEY, v bigint)",
    ] {
        s.query_unpaged(ddl, ()).await?;
    }
    let idempotent = |text: &str| {
        Statement::new(text)
            .with_consistency(Consistency::Quorum)
            .with_idempotent(true)
    };
    Ok(Statements {
        vnode_write: s
            .prepare(idempotent("INSERT INTO soak.kv (k, v) VALUES (?, ?)"))
            .await?,
        vnode_read: s
            .prepare(idempotent("SELECT v FROM soak.kv WHERE k = ?"))
            .await?,
        tablet_write: s
            .prepare(idempotent("INSERT INTO soak_t.kv (k, v) VALUES (?, ?)"))
            .await?,
        tablet_read: s
            .prepare(idempotent("SELECT v FROM soak_t.kv WHERE k = ?"))
            .await?,
        batch_write: s
            .prepare(idempotent(
                "INSERT INTO soak.batch (p, c, v) VALUES (?, ?, ?)",
            ))
            .await?,
        batch_read: s
            .prepare(idempotent("SELECT c, v FROM soak.batch WHERE p = ?"))
            .await?,
        paged_read: s
            .prepare(idempotent("SELECT c, v FROM soak.rows WHERE p = ?").with_page_size(10))
            .await?,
        // Not idempotent: a lost answer cannot be retried blindly.
        lwt: s
            .prepare(
                Statement::new("INSERT INTO soak.lwt (k, v) VALUES (?, ?) IF NOT EXISTS")
                    .with_consistency(Consistency::Quorum),
            )
            .await?,
        lwt_read: s
            .prepare(idempotent("SELECT v FROM soak.lwt WHERE k = ?"))
            .await?,
        lwt_delete: s
            .prepare(idempotent("DELETE FROM soak.lwt WHERE k = ?"))
            .await?,
    })
}

/// What a worker knows of one key: the last value written for sure, and the
/// value of a failed write since (which may or may not have applied).
#[derive(Clone, Copy, Default)]
struct Known {
    value: Option<i64>,
    maybe: Option<i64>,
}

impl Known {
    fn accepts(&self, read: Option<i64>) -> bool {
        read == self.value || (self.maybe.is_some() && read == self.maybe)
    }
}

async fn worker(w: usize, s: Session, st: Arc<Statements>, shared: Arc<Shared>) {
    let base = w as i64 * 1_000_000;
    let mut vnode = vec![Known::default(); KEYS_PER_WORKER as usize];
    let mut tablet = vec![Known::default(); KEYS_PER_WORKER as usize];
    let mut generation: i64 = 0;
    // LWT keys: a ring, each deleted before it is used again (the test
    // cluster keeps every row in memory).
    let mut lwt_next: i64 = 0;
    let mut i = w;
    // The operation in progress and when it started: it has ended when the
    // loop comes round again (every branch ends at the loop's next turn).
    let mut current: Option<(Op, Instant)> = None;
    loop {
        if let Some((op, started)) = current.take() {
            shared.ended(op, started.elapsed());
        }
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        let op = OPS[i % OPS.len()];
        current = Some((op, Instant::now()));
        i += 1;
        generation += 1;
        shared.tally(op).issued.fetch_add(1, Ordering::Relaxed);
        match op {
            Op::VnodeWriteRead | Op::TabletWriteRead => {
                let (write, read, known) = if op == Op::VnodeWriteRead {
                    (&st.vnode_write, &st.vnode_read, &mut vnode)
                } else {
                    (&st.tablet_write, &st.tablet_read, &mut tablet)
                };
                let slot = (generation % KEYS_PER_WORKER) as usize;
                let k = base + slot as i64;
                let v = generation;
                if let Err(e) = s.execute_unpaged(write, (k, v)).await {
                    known[slot].maybe = Some(v);
                    shared.fail(op, &e);
                    continue;
                }
                known[slot] = Known {
                    value: Some(v),
                    maybe: None,
                };
                match s.execute_unpaged(read, (k,)).await {
                    Err(e) => shared.fail(op, &e),
                    Ok(r) => match r.first_row::<(Option<i64>,)>() {
                        Ok(row) => {
                            let got = row.and_then(|(v,)| v);
                            if known[slot].accepts(got) {
                                shared.tally(op).ok.fetch_add(1, Ordering::Relaxed);
                            } else {
                                shared
                                    .wrong(op, format!("{op:?} key {k}: read {got:?}, wrote {v}"));
                            }
                        }
                        Err(e) => shared.wrong(op, format!("{op:?} key {k}: {e}")),
                    },
                }
            }
            Op::Batch => {
                let p = base + generation % 50;
                let rows: Vec<(i64, i32, i64)> = (0..5)
                    .map(|c| (p, c, generation * 10 + i64::from(c)))
                    .collect();
                let mut batch = scylla_driver::Batch::new(BatchType::Unlogged);
                for _ in &rows {
                    batch.append(&st.batch_write);
                }
                let batch = batch
                    .with_consistency(Consistency::Quorum)
                    .with_idempotent(true);
                if let Err(e) = s.batch(&batch, &rows[..]).await {
                    shared.fail(op, &e);
                    continue;
                }
                match s.execute_unpaged(&st.batch_read, (p,)).await {
                    Err(e) => shared.fail(op, &e),
                    Ok(r) => {
                        match r.rows::<(i32, i64)>() {
                            Ok(read) => {
                                let read: Result<Vec<_>, _> = read.collect();
                                // This worker owns the partition: the batch it
                                // just wrote is what it reads (all five rows of
                                // one generation: a batch of one partition is
                                // applied whole).
                                let expected: Vec<(i32, i64)> =
                                    rows.iter().map(|&(_, c, v)| (c, v)).collect();
                                match read {
                                Ok(got) if got == expected => {
                                    shared.tally(op).ok.fetch_add(1, Ordering::Relaxed);
                                }
                                other => shared.wrong(
                                    op,
                                    format!("batch partition {p}: read {other:?}, wrote {expected:?}"),
                                ),
                            }
                            }
                            Err(e) => shared.wrong(op, format!("batch partition {p}: {e}")),
                        }
                    }
                }
            }
            Op::Paged => {
                let p = w as i64;
                let stream = match s.execute_iter(&st.paged_read, (p,)).await {
                    Ok(stream) => stream,
                    Err(e) => {
                        shared.fail(op, &e);
                        continue;
                    }
                };
                // Typed before any row is read: cannot fail.
                let Ok(mut stream) = stream.rows_stream::<(i32, i64)>() else {
                    shared.wrong(op, format!("paged partition {p}: rows read before typing"));
                    continue;
                };
                let mut n = 0;
                let mut bad = None;
                let mut failed = None;
                while let Some(row) = next(&mut stream).await {
                    match row {
                        Ok((c, v)) => {
                            if c != n || v != p * 1000 + i64::from(c) {
                                bad = Some(format!("paged partition {p}: row {n} was ({c}, {v})"));
                            }
                            n += 1;
                        }
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                match (failed, bad) {
                    (Some(e), _) => shared.fail(op, &e),
                    (None, Some(b)) => shared.wrong(op, b),
                    (None, None) if n != PAGED_ROWS => {
                        shared.wrong(op, format!("paged partition {p}: {n} rows"))
                    }
                    (None, None) => {
                        shared.tally(op).ok.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Op::Lwt => {
                let k = base + lwt_next % 100;
                lwt_next += 1;
                if let Err(e) = s.execute_unpaged(&st.lwt_delete, (k,)).await {
                    shared.fail(op, &e);
                    continue;
                }
                let first = s.execute_unpaged(&st.lwt, (k, generation)).await;
                let first = match first.map(|r| r.first_row::<(bool,)>()) {
                    Ok(Ok(Some((applied,)))) => applied,
                    Ok(Ok(None)) | Ok(Err(_)) => {
                        shared.wrong(op, format!("lwt key {k}: no [applied]"));
                        continue;
                    }
                    Err(e) => {
                        // Unknown whether it applied: the key is not reused.
                        shared.fail(op, &e);
                        continue;
                    }
                };
                let second = s.execute_unpaged(&st.lwt, (k, generation + 1)).await;
                let second = match second.map(|r| r.first_row::<(bool,)>()) {
                    Ok(Ok(Some((applied,)))) => Some(applied),
                    Ok(_) => None,
                    Err(e) => {
                        shared.fail(op, &e);
                        continue;
                    }
                };
                let read = s.execute_unpaged(&st.lwt_read, (k,)).await;
                let read = match read.map(|r| r.first_row::<(Option<i64>,)>()) {
                    Ok(Ok(row)) => row.and_then(|(v,)| v),
                    Ok(Err(e)) => {
                        shared.wrong(op, format!("lwt key {k}: {e}"));
                        continue;
                    }
                    Err(e) => {
                        shared.fail(op, &e);
                        continue;
                    }
                };
                if first && second == Some(false) && read == Some(generation) {
                    shared.tally(op).ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    shared.wrong(
                        op,
                        format!("lwt key {k}: applied {first} then {second:?}, read {read:?}"),
                    );
                }
            }
        }
    }
}

/// The next item of a stream.
async fn next<S: futures_core::Stream + Unpin>(s: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *s).poll_next(cx)).await
}

/// One sample of the process.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    t: f64,
    rss_mb: f64,
    fds: usize,
    connections: usize,
    tasks: usize,
    ops: u64,
}

fn rss_mb() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

fn sample(shared: &Shared, session: &Session) -> Sample {
    Sample {
        t: shared.secs(),
        rss_mb: rss_mb(),
        fds: std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count()),
        connections: session
            .cluster()
            .nodes()
            .iter()
            .map(|n| n.connections)
            .sum(),
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        ops: shared
            .tallies
            .values()
            .map(|t| t.issued.load(Ordering::Relaxed))
            .sum(),
    }
}

/// The churn schedule, one step every `every`, cycling; each step undoes
/// the previous disruption of its kind.
async fn churn(cluster: Arc<TestCluster>, session: Session, shared: Arc<Shared>, every: Duration) {
    let mut step = 0usize;
    let mut table = 0u32;
    while !shared.churn_stop.load(Ordering::Relaxed) {
        tokio::time::sleep(every).await;
        if shared.churn_stop.load(Ordering::Relaxed) {
            break;
        }
        let node = 1 + step % (NODES - 1);
        match step % 8 {
            0 => {
                shared.event(format!("restart node {node}"));
                let _ = cluster.restart_node(node).await;
            }
            1 => {
                let tablets = cluster.tablets("soak_t", "kv").unwrap_or_default();
                let t = step % tablets.len().max(1);
                let target = (step % NODES, (step % usize::from(SHARDS)) as u16);
                shared.event(format!("move a replica of tablet {t} to {target:?}"));
                let _ = cluster.migrate_tablet("soak_t", "kv", t, 0, target);
            }
            2 => {
                table += 1;
                shared.event(format!("create and drop table soak.churn{table}"));
                let create = format!("CREATE TABLE soak.churn{table} (k int PRIMARY KEY, v int)");
                let drop = format!("DROP TABLE soak.churn{table}");
                let _ = session.query_unpaged(create, ()).await;
                let _ = session.query_unpaged(drop, ()).await;
            }
            3 => {
                shared.event(format!("NAT on node {node}"));
                let _ = cluster
                    .set_faults(node, Faults::default().with_nat(NatMode::Random))
                    .await;
            }
            4 => {
                shared.event("NAT off, node 0 slow (30 ms)".to_owned());
                for n in 0..NODES {
                    let _ = cluster.set_faults(n, Faults::default()).await;
                }
                let _ = cluster
                    .set_faults(0, Faults::default().with_latency(Duration::from_millis(30)))
                    .await;
            }
            5 => {
                shared.event("node 0 fast again".to_owned());
                let _ = cluster.set_faults(0, Faults::default()).await;
            }
            6 => {
                if cluster
                    .tablets("soak_t", "kv")
                    .is_some_and(|t| t.len() < 256)
                {
                    shared.event("split the tablets of soak_t.kv".to_owned());
                    let _ = cluster.split_tablets("soak_t", "kv");
                } else {
                    shared.event("restart node 2 (instead of a split)".to_owned());
                    let _ = cluster.restart_node(2).await;
                }
            }
            _ => {
                // Dropping connections: a stop and a start of the node (every
                // connection to it breaks at once).
                shared.event(format!("drop the connections of node {node}"));
                let _ = cluster.stop_node(node).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
                let _ = cluster.start_node(node).await;
            }
        }
        step += 1;
    }
    // Everything back to normal.
    for n in 0..NODES {
        let _ = cluster.set_faults(n, Faults::default()).await;
        let _ = cluster.start_node(n).await;
    }
    shared.event("churn stopped; every node up, no fault".to_owned());
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("soak: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("soak: cannot start the runtime: {e}");
            std::process::exit(2);
        }
    };
    let passed = rt.block_on(run(args));
    std::process::exit(if passed { 0 } else { 1 });
}

async fn run(args: Args) -> bool {
    let cluster = match TestCluster::builder()
        .nodes(NODES)
        .shards(SHARDS)
        .tablets(TABLETS)
        .start()
        .await
    {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("soak: cannot start the test cluster: {e}");
            return false;
        }
    };
    let session = match SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("soak: cannot connect: {e}");
            return false;
        }
    };
    let st = match schema(&session).await {
        Ok(st) => Arc::new(st),
        Err(e) => {
            eprintln!("soak: cannot create the schema: {e}");
            return false;
        }
    };
    // Each worker's paged partition: rows that never change.
    for w in 0..CONCURRENCY as i64 {
        let insert = session
            .prepare("INSERT INTO soak.rows (p, c, v) VALUES (?, ?, ?)")
            .await;
        let Ok(insert) = insert else {
            eprintln!("soak: cannot prepare the paged rows' insert");
            return false;
        };
        for c in 0..PAGED_ROWS {
            if let Err(e) = session
                .execute_unpaged(&insert, (w, c, w * 1000 + i64::from(c)))
                .await
            {
                eprintln!("soak: cannot write the paged rows: {e}");
                return false;
            }
        }
    }
    let shared = Arc::new(Shared {
        start: Instant::now(),
        tallies: OPS.iter().map(|&op| (op, Tally::default())).collect(),
        failures: Mutex::new(Vec::new()),
        wrong: Mutex::new(Vec::new()),
        events: Mutex::new(Vec::new()),
        churn_stop: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        overdue: Mutex::new(Vec::new()),
    });
    println!(
        "soak: {} s of load ({} s warm-up without churn), {NODES} nodes x {SHARDS} shards, \
         {CONCURRENCY} workers, churn every {:?}",
        args.duration.as_secs(),
        args.warmup.as_secs(),
        args.churn_every
    );
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..CONCURRENCY {
        workers.spawn(worker(w, session.clone(), st.clone(), shared.clone()));
    }
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let load_end = Instant::now() + args.duration;
    let warmup_end = Instant::now() + args.warmup;
    let mut churn_task = None;
    let mut baseline = None;
    while Instant::now() < load_end {
        tick.tick().await;
        let s = sample(&shared, &session);
        if s.t as u64 % 30 == 0 {
            println!(
                "[{:7.1} s] rss {:.1} MB, fds {}, connections {}, tasks {}, ops {}",
                s.t, s.rss_mb, s.fds, s.connections, s.tasks, s.ops
            );
        }
        samples.push(s);
        if churn_task.is_none() && Instant::now() >= warmup_end {
            baseline = Some(s);
            shared.event(format!(
                "warm-up done: rss {:.1} MB, fds {}, connections {}, tasks {}",
                s.rss_mb, s.fds, s.connections, s.tasks
            ));
            churn_task = Some(tokio::spawn(churn(
                cluster.clone(),
                session.clone(),
                shared.clone(),
                args.churn_every,
            )));
        }
    }
    // Churn stops first (everything back up, no fault), then the load
    // settles and the footprint is sampled (the workers still running, as
    // after the warm-up), then the workers stop.
    shared.churn_stop.store(true, Ordering::Relaxed);
    if let Some(t) = churn_task {
        let _ = t.await;
    }
    let _ = session.wait_for_all_shards(Duration::from_secs(20)).await;
    let settle_end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < settle_end {
        tick.tick().await;
        samples.push(sample(&shared, &session));
    }
    let last = sample(&shared, &session);
    samples.push(last);
    shared.stop.store(true, Ordering::Relaxed);
    let stopping = async { while workers.join_next().await.is_some() {} };
    let stuck = match tokio::time::timeout(STOP_DEADLINE, stopping).await {
        Ok(()) => 0,
        Err(_) => {
            let stuck = workers.len();
            workers.abort_all();
            stuck
        }
    };
    report(&args, &shared, &samples, baseline, last, stuck)
}

/// The checks and notes of the report.
struct Summary {
    text: String,
    passed: bool,
}

impl Default for Summary {
    fn default() -> Self {
        Summary {
            text: String::new(),
            passed: true,
        }
    }
}

impl Summary {
    fn check(&mut self, ok: bool, what: String) {
        let _ = writeln!(self.text, "{} {what}", if ok { "ok  " } else { "FAIL" });
        self.passed &= ok;
    }

    fn note(&mut self, what: String) {
        let _ = writeln!(self.text, "     {what}");
    }
}

/// Writes the files, prints the summary, and says whether every check passed.
fn report(
    args: &Args,
    shared: &Shared,
    samples: &[Sample],
    baseline: Option<Sample>,
    last: Sample,
    stuck: usize,
) -> bool {
    let mut r = Summary::default();
    r.check(
        stuck == 0,
        format!(
            "every worker stopped within {} s of the load's end ({stuck} still inside an operation)",
            STOP_DEADLINE.as_secs()
        ),
    );
    let overdue = lock(&shared.overdue).clone();
    r.check(
        overdue.is_empty(),
        format!(
            "every operation ended within {} s ({} did not)",
            OP_DEADLINE.as_secs(),
            overdue.len()
        ),
    );
    for (t, op, took) in overdue.iter().take(10) {
        r.note(format!("overdue: {op:?} ended at {t:.1} s after {took:?}"));
    }
    let _ = std::fs::create_dir_all(&args.out);
    let mut lines = String::from("op,issued,succeeded,failed,wrong\n");
    for (op, t) in &shared.tallies {
        let (i, o, f, w) = (
            t.issued.load(Ordering::Relaxed),
            t.ok.load(Ordering::Relaxed),
            t.failed.load(Ordering::Relaxed),
            t.wrong.load(Ordering::Relaxed),
        );
        let _ = writeln!(lines, "{op:?},{i},{o},{f},{w}");
        r.check(
            i == o + f + w,
            format!("{op:?}: issued {i} = succeeded {o} + failed {f} + wrong {w}"),
        );
        r.check(w == 0, format!("{op:?}: {w} wrong values"));
    }
    for w in lock(&shared.wrong).iter().take(10) {
        r.note(format!("wrong: {w}"));
    }
    // Failures, each attributed to the churn event before it.
    let events = lock(&shared.events).clone();
    let failures = lock(&shared.failures).clone();
    let mut by_cause: BTreeMap<(String, Op, String), u64> = BTreeMap::new();
    let mut unexplained = Vec::new();
    for (t, op, kind) in &failures {
        let cause = events
            .iter()
            .rev()
            .find(|(at, what)| {
                *at <= *t && *t - *at <= args.grace.as_secs_f64() && !what.starts_with("warm-up")
            })
            .map(|(_, what)| what.clone());
        match cause {
            Some(c) => *by_cause.entry((c, *op, kind.clone())).or_default() += 1,
            None => unexplained.push((*t, *op, kind.clone())),
        }
    }
    r.check(
        unexplained.is_empty(),
        format!(
            "{} failures, {} not within {} s of a churn event",
            failures.len(),
            unexplained.len(),
            args.grace.as_secs()
        ),
    );
    for ((cause, op, kind), n) in &by_cause {
        r.note(format!("{n} x {op:?} failed ({kind}) after: {cause}"));
    }
    for (t, op, kind) in unexplained.iter().take(10) {
        r.note(format!("unexplained: {op:?} ({kind}) at {t:.1} s"));
    }
    // Footprint: back within margins of the level after the warm-up.
    if let Some(b) = baseline {
        r.note(format!(
            "after warm-up: rss {:.1} MB, fds {}, connections {}, tasks {}; at the end: \
             rss {:.1} MB, fds {}, connections {}, tasks {}",
            b.rss_mb,
            b.fds,
            b.connections,
            b.tasks,
            last.rss_mb,
            last.fds,
            last.connections,
            last.tasks
        ));
        let peak_rss = samples.iter().map(|s| s.rss_mb).fold(0.0, f64::max);
        r.note(format!("peak rss {peak_rss:.1} MB"));
        r.check(
            last.rss_mb <= b.rss_mb * 1.25 + 16.0,
            format!(
                "memory: {:.1} MB at the end, within 25 % + 16 MB of {:.1} MB",
                last.rss_mb, b.rss_mb
            ),
        );
        r.check(
            last.fds <= b.fds + 8,
            format!(
                "descriptors: {} at the end, within 8 of {}",
                last.fds, b.fds
            ),
        );
        r.check(
            last.connections == b.connections,
            format!(
                "connections: {} at the end, {} after the warm-up",
                last.connections, b.connections
            ),
        );
        r.check(
            last.tasks <= b.tasks + 16,
            format!("tasks: {} at the end, within 16 of {}", last.tasks, b.tasks),
        );
    } else {
        r.check(false, "the run ended before its warm-up".to_owned());
    }
    let mut csv = String::from("t_s,rss_mb,fds,connections,tasks,ops\n");
    for s in samples {
        let _ = writeln!(
            csv,
            "{:.1},{:.1},{},{},{},{}",
            s.t, s.rss_mb, s.fds, s.connections, s.tasks, s.ops
        );
    }
    let _ = std::fs::write(args.out.join("samples.csv"), csv);
    let _ = std::fs::write(args.out.join("operations.csv"), lines.clone());
    let _ = std::fs::write(args.out.join("chart.svg"), chart(samples, &events));
    let _ = std::fs::write(args.out.join("summary.txt"), &r.text);
    println!("{lines}{}", r.text);
    println!(
        "soak: {} (files in {})",
        if r.passed { "passed" } else { "FAILED" },
        args.out.display()
    );
    r.passed
}

/// Four panels over time (memory, descriptors, connections, tasks), churn
/// events as grey lines.
fn chart(samples: &[Sample], events: &[(f64, String)]) -> String {
    type Series = (&'static str, fn(&Sample) -> f64);
    let series: [Series; 4] = [
        ("resident memory (MB)", |s| s.rss_mb),
        ("open file descriptors", |s| s.fds as f64),
        ("session connections", |s| s.connections as f64),
        ("live tokio tasks", |s| s.tasks as f64),
    ];
    let t_max = samples.last().map_or(1.0, |s| s.t.max(1.0));
    let mut chart = Chart::new(
        format!("Soak: footprint over {t_max:.0} s (dotted: churn events)"),
        "time (s)",
        1.0,
    )
    .panel_height(150.0);
    for (t, _) in events {
        chart.mark(Mark::new(*t, Stroke::Dotted));
    }
    for (title, f) in series {
        let mut panel = Panel::new(title);
        panel.line(0, samples.iter().map(|s| (s.t, f(s))).collect());
        chart.panel(panel);
    }
    chart.to_svg()
}
