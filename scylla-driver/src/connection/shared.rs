//! The state a connection's handles and tasks share: the pending buffer
//! requests encode into, the stream slots, the broken flag, the counters.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use scylla_cql::compression::Compressor;
use scylla_cql::frame::envelope::{encode_frame_limited, FrameExtras};
use scylla_cql::frame::segment_stream::SegmentEncoder;
use scylla_cql::frame::{Direction, MessageBody, ProtocolVersion};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::coalescing::Coalescer;
use super::stream_slots::{ResponseFuture, SlotOutcome, StreamSlots};
use super::{
    stats, BrokenConnection, BrokenReason, ConnectionRequestError, IoCounters, RequestOptions,
    ResponseFrame,
};

pub(super) type SlotValue = Result<ResponseFrame, ConnectionRequestError>;

/// Frames encoded by requesters and not yet taken by the writer.
pub(super) struct Pending {
    pub(super) buf: BytesMut,
    /// Stream ids of the frames in `buf`, in order.
    pub(super) ids: Vec<u16>,
    /// End offset of each frame in `buf` (for one-write-per-frame policies).
    pub(super) ends: Vec<usize>,
    /// v4: compresses each frame (v5 compresses segments instead).
    pub(super) compressor: Option<Compressor>,
    /// v5: frames a direct write into segments.
    pub(super) segments: Option<SegmentEncoder>,
    /// v5: bytes already in segments that go out before `buf` (the rest
    /// of a direct write the socket did not take whole).
    pub(super) framed: BytesMut,
    /// The writer has taken frames and is writing them.
    pub(super) writing: bool,
    /// The socket, for requesters to write to directly when the connection
    /// is idle (plain TCP only; `None` once the connection is broken).
    pub(super) direct: Option<Arc<tokio::net::tcp::OwnedWriteHalf>>,
}

impl Pending {
    /// Nothing waits to be written.
    pub(super) fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.framed.is_empty()
    }

    /// Writes the pending bytes (one frame, submitted to an idle connection)
    /// straight to the socket without blocking. Returns whether they are all
    /// written; whatever is left stays pending for the writer task.
    pub(super) fn write_direct(&mut self, counters: &IoCounters) -> bool {
        let Some(socket) = &self.direct else {
            return false;
        };
        if let Some(encoder) = &mut self.segments {
            // v5: frame the envelope into `framed` (empty: the connection
            // is idle), then write that.
            if encoder
                .encode_envelopes(&self.buf, &mut self.framed)
                .is_err()
            {
                // Cannot happen for a whole frame; the writer reports it.
                return false;
            }
            self.buf.clear();
            self.ends.clear();
            // Cleared, not taken: the vectors keep their capacity.
            let frames = self.ids.len();
            self.ids.clear();
            // On an error (would block, or failed) the writer retries and
            // reports.
            if let Ok(n) = socket.try_write(&self.framed) {
                IoCounters::add(&counters.write_syscalls, 1);
                IoCounters::add(&counters.bytes_written, n as u64);
                IoCounters::add(&counters.frames_written, frames as u64);
                if n == self.framed.len() {
                    self.framed.clear();
                } else {
                    bytes::Buf::advance(&mut self.framed, n);
                }
            }
            return self.framed.is_empty();
        }
        match socket.try_write(&self.buf) {
            Ok(n) => {
                IoCounters::add(&counters.write_syscalls, 1);
                IoCounters::add(&counters.bytes_written, n as u64);
                if n == self.buf.len() {
                    IoCounters::add(&counters.frames_written, self.ids.len() as u64);
                    self.buf.clear();
                    self.ids.clear();
                    self.ends.clear();
                    return true;
                }
                // A partial write: the rest goes first, by the writer.
                bytes::Buf::advance(&mut self.buf, n);
                for e in &mut self.ends {
                    *e -= n;
                }
                false
            }
            // Would block, or failed: the writer retries and reports.
            Err(_) => false,
        }
    }
}

/// State shared by the handles and the connection's tasks.
pub(super) struct Shared {
    pub(super) slots: Arc<StreamSlots<SlotValue>>,
    pub(super) pending: Mutex<Pending>,
    pub(super) writer_wake: Notify,
    pub(super) tick_wake: Notify,
    /// The tick sleeps until woken or its heartbeat (see `housekeeping`).
    pub(super) tick_parked: AtomicBool,
    pub(super) broken: OnceLock<BrokenConnection>,
    pub(super) cancel: CancellationToken,
    pub(super) counters: Arc<IoCounters>,
    /// Nanoseconds after `epoch` of the last write.
    pub(super) last_write: AtomicU64,
    /// Response frames completed by the reader so far (written by the
    /// reader only, once per read; the tick watches it for stalls).
    pub(super) frames_in: AtomicU64,
    pub(super) epoch: Instant,
    /// When the writer writes, and what it waits for meanwhile.
    pub(super) coalescer: Coalescer,
    pub(super) max_frame_len: usize,
    /// The protocol version every frame is written in.
    pub(super) version: ProtocolVersion,
    pub(super) peer: SocketAddr,
    /// The keyspace this connection last switched to (`USE`), as a marker
    /// the session compares with its own.
    pub(super) keyspace: arc_swap::ArcSwapOption<String>,
}

impl Shared {
    pub(super) fn pending(&self) -> MutexGuard<'_, Pending> {
        // Every critical section leaves `Pending` consistent (the encoder
        // truncates its partial frame on error), so a poisoned lock is usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn mark_write(&self) {
        self.mark_write_at(Instant::now());
    }

    pub(super) fn mark_write_at(&self, now: Instant) {
        self.last_write.store(self.nanos_at(now), Ordering::Relaxed);
    }

    /// Nanoseconds after `epoch` at `t`.
    fn nanos_at(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Wakes the writer if it waits for frames past its bound (called by the
    /// reader after each read and by the tick).
    pub(super) fn end_overdue_gathering(&self) {
        if self.coalescer.take_overdue() {
            self.writer_wake.notify_one();
        }
    }

    pub(super) fn since_last_write(&self) -> Duration {
        let last = Duration::from_nanos(self.last_write.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// Ends the connection: every request in flight fails with `reason`
    /// (those still in the pending buffer as not sent). The first reason wins.
    pub(super) fn fail(&self, reason: BrokenReason) {
        let broken = BrokenConnection(Arc::new(reason));
        if self.broken.set(broken.clone()).is_err() {
            return;
        }
        match broken.reason() {
            BrokenReason::Closed => tracing::debug!(peer = %self.peer, "connection closed"),
            reason => tracing::info!(peer = %self.peer, %reason, "connection broken"),
        }
        let unsent = {
            let mut p = self.pending();
            p.buf.clear();
            p.framed.clear();
            p.ends.clear();
            // The socket closes once the writer lets go of it too.
            p.direct = None;
            std::mem::take(&mut p.ids)
        };
        for id in unsent {
            // These were never handed to the socket.
            let _ = self.slots.complete(
                id as i16,
                Err(ConnectionRequestError::NotSent(broken.clone())),
            );
        }
        self.slots
            .close(|_| Err(ConnectionRequestError::Broken(broken.clone())));
        // Last, so that whoever awaits `Connection::closed` sees every request
        // already ended and every orphaned id freed.
        self.cancel.cancel();
        // A writer waiting for frames sees the cancellation.
        self.writer_wake.notify_one();
    }

    /// Sends `msg`; `now` is the caller's reading of the clock (the
    /// deadline and the arrival statistics use it: one clock read serves
    /// the whole submission).
    pub(super) async fn request(
        &self,
        msg: &(impl MessageBody + ?Sized),
        opts: &RequestOptions<'_>,
        now: Instant,
    ) -> Result<ResponseFrame, ConnectionRequestError> {
        let deadline = opts.deadline.or_else(|| opts.timeout.map(|t| now + t));
        // What a timeout error reports: the time the request was given.
        let budget = || {
            opts.timeout
                .or_else(|| deadline.map(|d| d.saturating_duration_since(now)))
                .unwrap_or_default()
        };
        let id = match self.slots.try_alloc(deadline) {
            Some(id) => id,
            // All ids busy (rare: 32,768 per connection): boxed, so that
            // every request's future does not carry this wait's timer.
            None => Box::pin(self.alloc_slow(deadline, budget())).await?,
        };
        if self.slots.take_became_busy() {
            // A parked tick (the connection was idle for a while) must start
            // watching deadlines again; a ticking one sees this request at
            // its next tick. Pairs with the fence in `housekeeping`.
            std::sync::atomic::fence(Ordering::SeqCst);
            if self.tick_parked.swap(false, Ordering::SeqCst) {
                self.tick_wake.notify_one();
            }
        }
        let extras = FrameExtras {
            tracing: opts.tracing,
            custom_payload: opts.custom_payload,
            ..FrameExtras::NONE
        };
        let wake_writer = {
            let mut p = self.pending();
            if let Some(b) = self.broken.get() {
                drop(p);
                self.slots.cancel_unsent(id);
                return Err(ConnectionRequestError::NotSent(b.clone()));
            }
            let was_empty = p.is_empty();
            let Pending {
                buf,
                ids,
                ends,
                compressor,
                ..
            } = &mut *p;
            if let Err(e) = encode_frame_limited(
                buf,
                self.version,
                Direction::Request,
                id as i16,
                msg,
                &extras,
                compressor.as_mut(),
                self.max_frame_len,
            ) {
                drop(p);
                self.slots.cancel_unsent(id);
                return Err(ConnectionRequestError::Encode(e));
            }
            ids.push(id);
            ends.push(buf.len());
            self.coalescer.note_arrival(now);
            // An idle connection (this request is the only one in flight,
            // nothing else pending, the writer not writing): write from here.
            let direct = was_empty
                && !p.writing
                && self.coalescer.writes_direct()
                && self.slots.in_use() == 1
                && p.write_direct(&self.counters);
            if direct {
                self.mark_write_at(now);
            }
            // A writer waiting for frames wakes when the batch is large
            // enough for the load or the bytes reach its cap (or the reader
            // or the tick finds its time bound passed).
            let batch_done =
                self.coalescer
                    .frame_ends_wait(p.ids.len(), self.slots.in_use(), p.buf.len());
            (was_empty || batch_done) && !direct
        };
        if wake_writer {
            self.writer_wake.notify_one();
        }
        match ResponseFuture::new(&self.slots, id).await {
            SlotOutcome::Done(result) => result,
            SlotOutcome::TimedOut => {
                IoCounters::add(&self.counters.timeouts, 1);
                Err(ConnectionRequestError::Timeout(budget()))
            }
        }
    }

    /// Waits for a free stream id (all are busy), within the request's timeout.
    pub(super) async fn alloc_slow(
        &self,
        deadline: Option<Instant>,
        budget: Duration,
    ) -> Result<u16, ConnectionRequestError> {
        let closed = || {
            ConnectionRequestError::NotSent(
                self.broken
                    .get()
                    .cloned()
                    .unwrap_or_else(|| BrokenConnection(Arc::new(BrokenReason::Closed))),
            )
        };
        // Counted as queued until it has an id (or gives up).
        let _queued = stats::QueuedGuard::enter();
        let wait = self.slots.alloc(deadline);
        let id = match deadline {
            Some(d) => tokio::time::timeout_at(d.into(), wait)
                .await
                .map_err(|_| ConnectionRequestError::Timeout(budget))?,
            None => wait.await,
        };
        id.ok_or_else(closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_moves_as_at_most_128_bytes() {
        // A response is moved about ten times on its way from the reader to
        // the caller (slot, attempt, plan, session). Up to 128 bytes those
        // moves are inline copies; a larger value makes each a `memcpy`
        // call (`scripts/instructions-per-request.sh`: 7,950 instructions
        // per prepared INSERT at 152 bytes, 7,706 at 128). See
        // `ResultMetadata::new_metadata_id`.
        assert!(std::mem::size_of::<ResponseFrame>() <= 128);
        assert!(std::mem::size_of::<SlotValue>() <= 128);
    }
}
