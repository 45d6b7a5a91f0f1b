//! Admission of handshakes into their CPU stage, modelled on ScyllaDB.
//!
//! ScyllaDB limits, per shard, how many not-yet-ready connections may run the
//! CPU-heavy part of the handshake at once (`uninitialized_connections_semaphore_cpu_concurrency`,
//! 8 by default): with `PasswordAuthenticator` that part is the password hash
//! check, expensive on purpose. Connections beyond the limit wait; one that
//! waits too long is shed (closed), which is what a reconnect storm of a
//! careless driver runs into. The model here:
//! - a semaphore of [`AdmissionConfig::cpu_concurrency`] permits per shard;
//! - a wait of at most [`AdmissionConfig::shed_after`], then the connection is
//!   closed and counted as shed;
//! - a modelled cost ([`HandshakeCost`]) while the permit is held: the STARTUP
//!   step without authentication, the AUTH_RESPONSE step with it;
//! - with TLS, each TLS handshake passes the same gate once more, right after
//!   it completes, and is charged its CPU time there
//!   ([`crate::TlsOptions::full_handshake_cost`] or
//!   [`crate::TlsOptions::resumed_handshake_cost`]). That time is spent on the
//!   shard's CPU clock: a shard is one core, so the TLS costs of its
//!   handshakes add up one after another (a storm of full handshakes on one
//!   shard finishes its last one only after the sum of their costs), whatever
//!   the number of permits; a request reaching a shard whose clock is ahead of
//!   now waits until it catches up (pessimistic: ScyllaDB's scheduler
//!   interleaves statements with connection work).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use std::sync::Mutex;

use crate::stats::{bump_both, GaugeGuard, NodeStats};

/// The modelled CPU cost of one handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeCost {
    /// Sleep while holding the permit: occupies a slot, not a core. Cheap for
    /// the test machine, and enough to observe queueing and shedding.
    Sleep(Duration),
    /// Spin on a blocking thread for this long while holding the permit:
    /// really burns CPU, like a password hash. Keep it small.
    Spin(Duration),
}

impl HandshakeCost {
    /// Runs the cost.
    async fn pay(self) {
        match self {
            HandshakeCost::Sleep(d) if d.is_zero() => {}
            HandshakeCost::Sleep(d) => tokio::time::sleep(d).await,
            HandshakeCost::Spin(d) => {
                // Bounded: the loop ends when the deadline passes; a failed
                // join (runtime shutting down) just ends the wait.
                let _ = tokio::task::spawn_blocking(move || {
                    let end = Instant::now() + d;
                    let mut x = 0u64;
                    while Instant::now() < end {
                        for i in 0..1_000u64 {
                            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
                        }
                    }
                    x
                })
                .await;
            }
        }
    }
}

/// Admission settings (the same on every shard of every node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmissionConfig {
    /// Handshakes allowed in their CPU stage at once, per shard (ScyllaDB: 8).
    pub cpu_concurrency: usize,
    /// Modelled cost of the CPU stage.
    pub cost: HandshakeCost,
    /// Longest wait for admission before the connection is shed.
    pub shed_after: Duration,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            cpu_concurrency: 8,
            cost: HandshakeCost::Sleep(Duration::from_millis(1)),
            shed_after: Duration::from_secs(2),
        }
    }
}

/// The CPU time of one shard, as a clock: the moment until which the shard
/// is busy with the costs already charged. Charging `d` moves it to
/// `max(now, busy_until) + d`; the charge is paid when the clock gets there.
#[derive(Debug)]
struct CpuClock {
    busy_until: Mutex<Instant>,
}

impl CpuClock {
    fn new() -> Self {
        CpuClock {
            busy_until: Mutex::new(Instant::now()),
        }
    }

    /// When the shard will be done with the costs charged so far, if that
    /// is later than now.
    fn busy_until(&self) -> Option<Instant> {
        let busy = *self.busy_until.lock().unwrap_or_else(|e| e.into_inner());
        (busy > Instant::now()).then_some(busy)
    }

    /// Charges `cost` and waits until the shard has spent it.
    async fn spend(&self, cost: Duration) {
        if cost.is_zero() {
            return;
        }
        let done = {
            let mut busy = self.busy_until.lock().unwrap_or_else(|e| e.into_inner());
            let start = (*busy).max(Instant::now());
            *busy = start + cost;
            *busy
        };
        tokio::time::sleep_until(done.into()).await;
    }
}

/// The admission gate of one shard.
#[derive(Debug)]
pub(crate) struct Admission {
    permits: Arc<Semaphore>,
    config: AdmissionConfig,
    cpu: CpuClock,
}

/// The handshake was not admitted in time: close the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shed;

impl Admission {
    pub(crate) fn new(config: AdmissionConfig) -> Self {
        Admission {
            // A limit of 0 would admit nobody, ever: treat it as 1.
            permits: Arc::new(Semaphore::new(config.cpu_concurrency.max(1))),
            config,
            cpu: CpuClock::new(),
        }
    }

    /// When the shard's CPU is free of the TLS handshake costs charged so
    /// far, if it is busy now: a request that arrives meanwhile waits until
    /// then (a shard is one core). Pessimistic: ScyllaDB's scheduler
    /// interleaves statements with connection work instead of queueing them
    /// behind all of it.
    pub(crate) fn cpu_busy_until(&self) -> Option<Instant> {
        self.cpu.busy_until()
    }

    /// Admits a finished TLS handshake and charges its CPU time `cost` on
    /// the shard's clock while holding the permit. Shed like any handshake
    /// that waits too long.
    pub(crate) async fn run_tls(
        &self,
        stats: &NodeStats,
        shard: usize,
        cost: Duration,
    ) -> Result<(), Shed> {
        let permit = self.acquire(stats, shard).await?;
        let _p_node = GaugeGuard::new(&stats.node.handshakes_in_progress);
        let _p_shard = stats
            .shards
            .get(shard)
            .map(|s| GaugeGuard::new(&s.handshakes_in_progress));
        self.cpu.spend(cost).await;
        drop(permit);
        Ok(())
    }

    /// Waits (bounded by `shed_after`) for a permit; counts a shed one.
    async fn acquire(&self, stats: &NodeStats, shard: usize) -> Result<OwnedSemaphorePermit, Shed> {
        let _w_node = GaugeGuard::new(&stats.node.handshakes_waiting);
        let _w_shard = stats
            .shards
            .get(shard)
            .map(|s| GaugeGuard::new(&s.handshakes_waiting));
        let acquire = self.permits.clone().acquire_owned();
        match tokio::time::timeout(self.config.shed_after, acquire).await {
            Ok(Ok(p)) => Ok(p),
            // Timed out, or the semaphore was closed (never done): shed.
            Ok(Err(_)) | Err(_) => {
                bump_both(stats, shard, |s| &s.handshakes_shed);
                Err(Shed)
            }
        }
    }

    /// Waits for admission, pays the cost, and returns the held permit (the
    /// caller finishes its CPU stage, e.g. builds the answer, and drops it).
    /// Updates the waiting/in-progress gauges and the shed counter.
    pub(crate) async fn run<T>(
        &self,
        stats: &NodeStats,
        shard: usize,
        stage: impl std::future::Future<Output = T>,
    ) -> Result<T, Shed> {
        let permit = self.acquire(stats, shard).await?;
        Ok(self.in_progress(stats, shard, permit, stage).await)
    }

    async fn in_progress<T>(
        &self,
        stats: &NodeStats,
        shard: usize,
        _permit: OwnedSemaphorePermit,
        stage: impl std::future::Future<Output = T>,
    ) -> T {
        let _p_node = GaugeGuard::new(&stats.node.handshakes_in_progress);
        let _p_shard = stats
            .shards
            .get(shard)
            .map(|s| GaugeGuard::new(&s.handshakes_in_progress));
        self.config.cost.pay().await;
        stage.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn limit_and_shedding() {
        let adm = Arc::new(Admission::new(AdmissionConfig {
            cpu_concurrency: 2,
            cost: HandshakeCost::Sleep(Duration::from_millis(100)),
            shed_after: Duration::from_millis(30),
        }));
        let stats = Arc::new(NodeStats::new(1));
        let mut tasks = Vec::new();
        for _ in 0..5 {
            let (adm, stats) = (adm.clone(), stats.clone());
            tasks.push(tokio::spawn(
                async move { adm.run(&stats, 0, async {}).await },
            ));
        }
        let mut ok = 0;
        for t in tasks {
            if t.await.unwrap().is_ok() {
                ok += 1;
            }
        }
        let snap = stats.snapshot(true);
        assert_eq!(ok, 2);
        assert_eq!(snap.node.handshakes_shed, 3);
        assert_eq!(snap.node.peak_handshakes_in_progress, 2);
        assert_eq!(snap.shards[0].handshakes_in_progress, 0);
        assert_eq!(snap.shards[0].handshakes_waiting, 0);
    }

    #[tokio::test]
    async fn tls_costs_of_one_shard_add_up() {
        // 4 permits, 6 handshakes of 20 ms each on one shard: the shard's
        // clock serialises them, so the last ends after about 120 ms.
        let adm = Arc::new(Admission::new(AdmissionConfig {
            cpu_concurrency: 4,
            cost: HandshakeCost::Sleep(Duration::ZERO),
            shed_after: Duration::from_secs(5),
        }));
        let stats = Arc::new(NodeStats::new(2));
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let (adm, stats) = (adm.clone(), stats.clone());
            tasks.push(tokio::spawn(async move {
                adm.run_tls(&stats, 1, Duration::from_millis(20)).await
            }));
        }
        for t in tasks {
            assert!(t.await.unwrap().is_ok());
        }
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(120), "{took:?}");
        let snap = stats.snapshot(true);
        assert_eq!(snap.shards[1].peak_handshakes_in_progress, 4);
        assert_eq!(snap.shards[1].handshakes_in_progress, 0);
        assert_eq!(snap.node.handshakes_shed, 0);
    }

    #[tokio::test]
    async fn spin_cost_is_bounded() {
        let start = Instant::now();
        HandshakeCost::Spin(Duration::from_millis(5)).pay().await;
        assert!(start.elapsed() < Duration::from_secs(2));
    }
}
