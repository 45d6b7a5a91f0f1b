//! The connection's single tick: request deadlines, heartbeats, stall
//! probes, and recycling a connection that too many timed-out requests clog.
//!
//! Requests carry deadlines, not timers: while any request is in flight this
//! task wakes every `tick` and expires the ones past their deadline (so a
//! timeout fires at most one tick late). A connection idle for a few ticks
//! parks until its heartbeat is due, so thousands of idle connections cost
//! nothing; the request that makes a parked connection busy wakes it.
//!
//! A busy connection whose reader has completed no frame for
//! `stall_probe_after` gets a probe (OPTIONS): a healthy server answers it
//! even while a slow query runs, but a stream wedged by a damaged length
//! field swallows the answer too, and the connection is recycled when the
//! probe times out. Watching costs the hot path one relaxed store per read.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_cql::frame::request::Options;
use scylla_cql::frame::response::Response;

use super::error::{BrokenReason, ConnectionRequestError};
use super::{RequestOptions, Shared};

pub(super) struct TickConfig {
    pub(super) tick: Duration,
    pub(super) heartbeat_interval: Option<Duration>,
    pub(super) heartbeat_timeout: Duration,
    pub(super) stall_probe_after: Option<Duration>,
    pub(super) stall_probe_timeout: Duration,
    pub(super) max_orphans: usize,
}

/// A heartbeat in progress.
type Heartbeat<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// Why the OPTIONS in flight was sent: it decides what its failure means.
#[derive(Debug, Clone, Copy)]
enum Probe {
    /// The connection was idle.
    Idle,
    /// The reader had been silent since `since` with requests in flight.
    Stall { since: Instant },
}

/// When the reader last made progress, as the tick sees it.
#[derive(Debug)]
struct Progress {
    frames: u64,
    since: Instant,
}

impl Progress {
    /// Records the reader's frame count at `now`; returns how long it has
    /// completed no frame while the connection was busy.
    fn observe(&mut self, frames: u64, busy: bool, now: Instant) -> Duration {
        if frames != self.frames || !busy {
            // Progress, or nothing is awaited: silence only counts while
            // answers are due.
            self.frames = frames;
            self.since = now;
        }
        now.saturating_duration_since(self.since)
    }
}

/// How long an idle connection sleeps when heartbeats are disabled.
const IDLE_SLEEP: Duration = Duration::from_secs(3600);

/// Ticks without a request in flight before the tick parks. While requests
/// come more often than that, the tick keeps its cadence and no request has
/// to wake it (waking it per request cost a fifth of the client's work at
/// concurrency 1); a connection idle for longer parks until its heartbeat.
const IDLE_TICKS_BEFORE_PARKING: u32 = 2;

pub(super) async fn run(shared: Arc<Shared>, cfg: TickConfig) {
    let cancel = shared.cancel.clone();
    tokio::select! {
        biased;
        _ = cancel.cancelled() => {}
        _ = tick_loop(&shared, &cfg) => {}
    }
}

async fn tick_loop(shared: &Shared, cfg: &TickConfig) {
    let mut heartbeat: Option<(Probe, Heartbeat<'_>)> = None;
    let mut progress = Progress {
        frames: 0,
        since: Instant::now(),
    };
    let mut idle_ticks = 0u32;
    loop {
        let busy = shared.slots.in_use() > 0;
        idle_ticks = if busy {
            0
        } else {
            idle_ticks.saturating_add(1)
        };
        let mut sleep_for = cfg.tick;
        if idle_ticks > IDLE_TICKS_BEFORE_PARKING {
            // Park until the heartbeat is due or a request arrives. The
            // requester that makes the connection busy wakes a parked tick
            // only (see `Shared::request`): the flag and `in_use` are
            // written then read on both sides, with fences between, so one
            // of the two sees the other.
            shared.tick_parked.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if shared.slots.in_use() > 0 {
                shared.tick_parked.store(false, Ordering::SeqCst);
                idle_ticks = 0;
            } else {
                sleep_for = match cfg.heartbeat_interval {
                    Some(i) => i.saturating_sub(shared.since_last_write()).max(cfg.tick),
                    None => IDLE_SLEEP,
                };
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(sleep_for) => {}
            _ = shared.tick_wake.notified() => {}
            result = async {
                match heartbeat.as_mut() {
                    Some((_, h)) => h.await,
                    None => std::future::pending().await,
                }
            } => {
                let probe = heartbeat.take().map(|(p, _)| p);
                if let Err(reason) = result {
                    shared.fail(match probe {
                        Some(Probe::Stall { since }) => BrokenReason::ReadStalled {
                            silent_for: since.elapsed(),
                            probe: reason,
                        },
                        _ => BrokenReason::HeartbeatFailed(reason),
                    });
                    return;
                }
            }
        }
        shared.tick_parked.store(false, Ordering::SeqCst);
        // The backstop of a writer waiting for frames while the server
        // answers nothing (see `writer::wait_for_frames`).
        shared.end_overdue_gathering();
        let now = Instant::now();
        let busy = shared.slots.in_use() > 0;
        if busy {
            shared.slots.expire(now);
        }
        let orphans = shared.slots.orphans();
        if orphans > cfg.max_orphans {
            shared.fail(BrokenReason::TooManyOrphans(orphans));
            return;
        }
        let silent_for = progress.observe(shared.frames_in.load(Ordering::Relaxed), busy, now);
        if heartbeat.is_none() {
            if let Some(after) = cfg.stall_probe_after.filter(|a| silent_for >= *a) {
                tracing::debug!(peer = %shared.peer, ?silent_for, ?after, "no response frame with requests in flight; probing");
                let since = now.checked_sub(silent_for).unwrap_or(now);
                heartbeat = Some((
                    Probe::Stall { since },
                    Box::pin(send_heartbeat(shared, cfg.stall_probe_timeout)),
                ));
            }
        }
        if let Some(interval) = cfg.heartbeat_interval {
            if heartbeat.is_none() && shared.since_last_write() >= interval {
                let timeout = cfg.heartbeat_timeout;
                heartbeat = Some((Probe::Idle, Box::pin(send_heartbeat(shared, timeout))));
            }
        }
    }
}

async fn send_heartbeat(shared: &Shared, timeout: Duration) -> Result<(), String> {
    let opts = RequestOptions {
        timeout: Some(timeout),
        ..RequestOptions::default()
    };
    match shared.request(&Options, &opts, Instant::now()).await {
        Ok(frame) => match frame.response {
            Response::Supported(_) => Ok(()),
            other => Err(format!("unexpected answer to OPTIONS: {other:?}")),
        },
        Err(ConnectionRequestError::NotSent(_)) => Ok(()), // the connection is already closing
        Err(e) => Err(e.to_string()),
    }
}
