//! The connection's single tick: request deadlines, heartbeats, and
//! recycling a connection that too many timed-out requests clog.
//!
//! Requests carry deadlines, not timers: while any request is in flight this
//! task wakes every `tick` and expires the ones past their deadline (so a
//! timeout fires at most one tick late). An idle connection sleeps until its
//! heartbeat is due, so thousands of idle connections cost nothing.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use scylla_cql::frame::request::Options;
use scylla_cql::frame::response::Response;

use super::error::{BrokenReason, RequestError};
use super::{RequestOptions, Shared};

pub(super) struct TickConfig {
    pub(super) tick: Duration,
    pub(super) heartbeat_interval: Option<Duration>,
    pub(super) heartbeat_timeout: Duration,
    pub(super) max_orphans: usize,
}

/// A heartbeat in progress.
type Heartbeat<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// How long an idle connection sleeps when heartbeats are disabled.
const IDLE_SLEEP: Duration = Duration::from_secs(3600);

pub(super) async fn run(shared: Arc<Shared>, cfg: TickConfig) {
    let cancel = shared.cancel.clone();
    tokio::select! {
        biased;
        _ = cancel.cancelled() => {}
        _ = tick_loop(&shared, &cfg) => {}
    }
}

async fn tick_loop(shared: &Shared, cfg: &TickConfig) {
    let mut heartbeat: Option<Heartbeat<'_>> = None;
    loop {
        let busy = shared.slots.in_use() > 0;
        let sleep_for = if busy {
            cfg.tick
        } else {
            match cfg.heartbeat_interval {
                Some(i) => i.saturating_sub(shared.since_last_write()).max(cfg.tick),
                None => IDLE_SLEEP,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(sleep_for) => {}
            _ = shared.tick_wake.notified() => {}
            result = async {
                match heartbeat.as_mut() {
                    Some(h) => h.await,
                    None => std::future::pending().await,
                }
            } => {
                heartbeat = None;
                if let Err(reason) = result {
                    shared.fail(BrokenReason::HeartbeatFailed(reason));
                    return;
                }
            }
        }
        if shared.slots.in_use() > 0 {
            shared.slots.expire(Instant::now());
        }
        let orphans = shared.slots.orphans();
        if orphans > cfg.max_orphans {
            shared.fail(BrokenReason::TooManyOrphans(orphans));
            return;
        }
        if let Some(interval) = cfg.heartbeat_interval {
            if heartbeat.is_none() && shared.since_last_write() >= interval {
                let timeout = cfg.heartbeat_timeout;
                heartbeat = Some(Box::pin(send_heartbeat(shared, timeout)));
            }
        }
    }
}

async fn send_heartbeat(shared: &Shared, timeout: Duration) -> Result<(), String> {
    let opts = RequestOptions {
        timeout: Some(timeout),
        ..RequestOptions::default()
    };
    match shared.request(&Options, &opts).await {
        Ok(frame) => match frame.response {
            Response::Supported(_) => Ok(()),
            other => Err(format!("unexpected answer to OPTIONS: {other:?}")),
        },
        Err(RequestError::NotSent(_)) => Ok(()), // the connection is already closing
        Err(e) => Err(e.to_string()),
    }
}
