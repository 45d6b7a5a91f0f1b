//! I/O counters of a connection (or, when shared, of many).
//!
//! The benchmarks divide them by the number of requests to report write and
//! read syscalls per request, which is what coalescing is meant to reduce.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters updated by a connection's writer and reader. Share one `Arc` of
/// it among connections to get totals.
#[derive(Debug, Default)]
pub struct IoCounters {
    /// `write` calls on the socket.
    pub write_syscalls: AtomicU64,
    /// `read` calls on the socket that returned data or end of file.
    pub read_syscalls: AtomicU64,
    /// Request frames written.
    pub frames_written: AtomicU64,
    /// Response frames read.
    pub frames_read: AtomicU64,
    /// Bytes written.
    pub bytes_written: AtomicU64,
    /// Bytes read.
    pub bytes_read: AtomicU64,
    /// Requests that timed out.
    pub timeouts: AtomicU64,
}

/// A point-in-time copy of [`IoCounters`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoSnapshot {
    /// `write` calls on the socket.
    pub write_syscalls: u64,
    /// `read` calls on the socket.
    pub read_syscalls: u64,
    /// Request frames written.
    pub frames_written: u64,
    /// Response frames read.
    pub frames_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Requests that timed out.
    pub timeouts: u64,
}

impl IoCounters {
    /// Reads every counter.
    pub fn snapshot(&self) -> IoSnapshot {
        let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
        IoSnapshot {
            write_syscalls: r(&self.write_syscalls),
            read_syscalls: r(&self.read_syscalls),
            frames_written: r(&self.frames_written),
            frames_read: r(&self.frames_read),
            bytes_written: r(&self.bytes_written),
            bytes_read: r(&self.bytes_read),
            timeouts: r(&self.timeouts),
        }
    }

    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
}

impl IoSnapshot {
    /// The difference `self - earlier`, counter by counter.
    pub fn since(&self, earlier: &IoSnapshot) -> IoSnapshot {
        IoSnapshot {
            write_syscalls: self.write_syscalls - earlier.write_syscalls,
            read_syscalls: self.read_syscalls - earlier.read_syscalls,
            frames_written: self.frames_written - earlier.frames_written,
            frames_read: self.frames_read - earlier.frames_read,
            bytes_written: self.bytes_written - earlier.bytes_written,
            bytes_read: self.bytes_read - earlier.bytes_read,
            timeouts: self.timeouts - earlier.timeouts,
        }
    }
}

/// The [`metrics`](https://docs.rs/metrics) gauge of requests waiting for a
/// free stream id (re-exported as `names::REQUESTS_QUEUED` of the `metrics` module;
/// it lives here because this layer records it).
pub(crate) const REQUESTS_QUEUED_METRIC: &str = "scylla_driver_requests_queued";

/// Counts one request in [`REQUESTS_QUEUED_METRIC`] while it lives.
#[derive(Debug)]
pub(crate) struct QueuedGuard(());

impl QueuedGuard {
    pub(crate) fn enter() -> Self {
        ::metrics::gauge!(REQUESTS_QUEUED_METRIC).increment(1.0);
        QueuedGuard(())
    }
}

impl Drop for QueuedGuard {
    fn drop(&mut self) {
        ::metrics::gauge!(REQUESTS_QUEUED_METRIC).decrement(1.0);
    }
}
