//! The writer task: takes the frames requests encoded into the pending
//! buffer and writes them to the socket, as many per syscall as the
//! [coalescing policy](super::coalescing) allows.
//!
//! The writer owns one buffer and the requesters fill another; when the writer
//! is ready to write it swaps them under the pending lock, so neither side
//! allocates in steady state and requesters never wait for a syscall. The
//! writer never parks with bytes it has taken but not written: it only waits
//! (for frames, or for more frames while coalescing) before the swap.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::BytesMut;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use scylla_cql::frame::segment_stream::SegmentEncoder;

use super::coalescing::{Coalescing, Decision, PendingWrites};
use super::error::BrokenReason;
use super::stats::IoCounters;
use super::Shared;

pub(super) async fn run<W: AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut socket: W,
    segments: Option<SegmentEncoder>,
) {
    let policy = shared.coalescer.policy();
    let mut bufs = WriteBuffers {
        out: BytesMut::with_capacity(8 * 1024),
        framed: BytesMut::new(),
        ids: Vec::new(),
        ends: Vec::new(),
        segments,
    };
    // Cancellation is watched only where the writer can wait without bound
    // (for the first frame, and on a socket that does not take bytes), not
    // around the whole loop: the coalescing rounds poll the writer hundreds
    // of times per write, and a select around them polled the token each
    // time (profiled: 1.5% of the client's CPU at concurrency 1024).
    if let Err(e) = write_loop(&shared, &mut socket, policy, &mut bufs).await {
        shared.fail(BrokenReason::Io(e));
    }
    // Over TLS the close_notify (rustls' write half sends nothing when
    // dropped). Dropping the write half sends FIN.
    shutdown_once(&mut socket).await;
}

/// A goodbye that never waits: one attempt at a shutdown, which over TLS
/// sends the close_notify if the socket takes it at once.
pub(super) async fn shutdown_once<W: AsyncWrite + Unpin>(socket: &mut W) {
    let mut goodbye = std::pin::pin!(tokio::io::AsyncWriteExt::shutdown(socket));
    std::future::poll_fn(|cx| {
        let _ = std::future::Future::poll(goodbye.as_mut(), cx);
        std::task::Poll::Ready(())
    })
    .await;
}

/// The writer's side of the swap with [`super::Pending`], and the v5
/// framing.
struct WriteBuffers {
    /// Frames (envelopes) taken from the requesters.
    out: BytesMut,
    /// v5: the bytes that go to the socket (segments).
    framed: BytesMut,
    ids: Vec<u16>,
    ends: Vec<usize>,
    /// v5: packs the envelopes of `out` into segments.
    segments: Option<SegmentEncoder>,
}

async fn write_loop<W: AsyncWrite + Unpin>(
    shared: &Shared,
    socket: &mut W,
    policy: Coalescing,
    b: &mut WriteBuffers,
) -> std::io::Result<()> {
    loop {
        // Wait for the first frame. `notify_one` stores a permit, so a frame
        // encoded between the check and the wait is not missed.
        while shared.pending().is_empty() {
            tokio::select! {
                biased;
                _ = shared.cancel.cancelled() => return Ok(()),
                _ = shared.writer_wake.notified() => {}
            }
        }
        if shared.cancel.is_cancelled() {
            return Ok(());
        }
        // Bounded by the policy's time bound: no cancellation needed.
        coalesce(shared, policy).await;
        {
            let mut p = shared.pending();
            // Requesters do not write directly while these are on their way.
            p.writing = true;
            std::mem::swap(&mut p.buf, &mut b.out);
            std::mem::swap(&mut p.ids, &mut b.ids);
            std::mem::swap(&mut p.ends, &mut b.ends);
            // v5: the rest of a direct write, already in segments, goes first.
            std::mem::swap(&mut p.framed, &mut b.framed);
        }
        let written = tokio::select! {
            biased;
            _ = shared.cancel.cancelled() => return Ok(()),
            r = write_out(shared, socket, policy, b) => r,
        };
        written?;
        IoCounters::add(&shared.counters.frames_written, b.ids.len() as u64);
        shared.mark_write();
        b.out.clear();
        b.framed.clear();
        b.ids.clear();
        b.ends.clear();
        shared.pending().writing = false;
    }
}

/// Writes the frames taken from the requesters: as they are (v4), or packed
/// into segments (v5); one write per frame when the policy says so.
async fn write_out<W: AsyncWrite + Unpin>(
    shared: &Shared,
    socket: &mut W,
    policy: Coalescing,
    b: &mut WriteBuffers,
) -> std::io::Result<()> {
    match &mut b.segments {
        Some(encoder) if policy.one_frame_per_write() => {
            write_counted(socket, &b.framed, &shared.counters).await?;
            let mut start = 0;
            for &end in b.ends.iter() {
                b.framed.clear();
                encoder
                    .encode_envelopes(&b.out[start..end], &mut b.framed)
                    .map_err(std::io::Error::other)?;
                write_counted(socket, &b.framed, &shared.counters).await?;
                start = end;
            }
        }
        Some(encoder) => {
            // Whole frames only (requesters append whole frames), so
            // this cannot fail; if it did, the connection fails loudly.
            encoder
                .encode_envelopes(&b.out, &mut b.framed)
                .map_err(std::io::Error::other)?;
            write_counted(socket, &b.framed, &shared.counters).await?;
        }
        None if policy.one_frame_per_write() => {
            let mut start = 0;
            for &end in b.ends.iter() {
                write_counted(socket, &b.out[start..end], &shared.counters).await?;
                start = end;
            }
        }
        None => write_counted(socket, &b.out, &shared.counters).await?,
    }
    // A no-op on TCP (no extra syscall); TLS may hold records until flushed.
    socket.flush().await
}

/// The write half of a TCP connection shared with the requesters that write
/// to an idle connection themselves ([`super::Pending::write_direct`]): the
/// writer task writes through readiness and `try_write`, which need only a
/// shared reference.
pub(super) struct SharedWriteHalf(pub(super) Arc<tokio::net::tcp::OwnedWriteHalf>);

impl AsyncWrite for SharedWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let stream: &tokio::net::TcpStream = self.0.as_ref().as_ref();
        // Bounded: each round either writes, fails, or waits for readiness
        // (a spurious readiness is cleared by the WouldBlock).
        loop {
            match stream.poll_write_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            match stream.try_write(buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                r => return Poll::Ready(r),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // FIN goes when the last handle of the write half drops.
        Poll::Ready(Ok(()))
    }
}

/// Waits as long as the policy wants more frames to join the pending ones.
async fn coalesce(shared: &Shared, policy: Coalescing) {
    let first_seen = Instant::now();
    // The clock is read every few scheduler rounds only (a round takes about
    // a microsecond, the policy's bounds are hundreds, and a clock read in a
    // VM costs as much as a round: profiled at 9% of the client's CPU at
    // concurrency 64 when read every round), and after every wait for
    // frames. Fixed windows sleep on the timer and read it every time.
    let clock_every = policy.clock_every_rounds();
    let mut now = first_seen;
    let mut rounds = 0u32;
    let mut last_bytes = 0usize;
    let mut woke = false;
    loop {
        let (bytes, frames) = {
            let p = shared.pending();
            (p.buf.len(), p.ids.len())
        };
        if woke || (rounds > 0 && rounds % clock_every == 0) {
            now = Instant::now();
        }
        let state = PendingWrites {
            bytes,
            frames,
            awaiting_responses: shared.slots.in_use().saturating_sub(frames),
            waited: now - first_seen,
            rounds,
            grew: rounds > 0 && bytes > last_bytes,
            arrival_gap: shared.coalescer.arrival_gap(),
        };
        last_bytes = bytes;
        woke = false;
        match shared.coalescer.decide(&state) {
            Decision::Write => return,
            Decision::Yield => YieldToQueue::default().await,
            Decision::WaitForFrames(at_most) => {
                wait_for_frames(shared, bytes, now + at_most).await;
                woke = true;
            }
            Decision::Sleep(d) => tokio::time::sleep(d).await,
        }
        rounds += 1;
    }
}

/// Parks the writer until whoever ends the wait wakes it (see
/// [`Coalescer`](super::coalescing::Coalescer): the requester whose frame
/// completes the batch, or the reader or the tick once `until` has passed),
/// or the connection ends. Returns at once if frames came since the writer counted `bytes`. No
/// timer: the reader runs whenever responses arrive, and the tick while
/// requests are in flight, so a wait outlives its bound only while the
/// server answers nothing, by at most a tick.
async fn wait_for_frames(shared: &Shared, bytes: usize, until: Instant) {
    {
        let p = shared.pending();
        if p.buf.len() != bytes || shared.cancel.is_cancelled() {
            return;
        }
        shared.coalescer.begin_wait(until);
    }
    // `Shared::fail` wakes it too, after cancelling.
    shared.writer_wake.notified().await;
    shared.coalescer.end_wait();
}

/// Lets the tasks already queued on this worker run once (requesters about
/// to add frames), then resumes: the task wakes itself, and tokio queues a
/// task that woke itself while running at the back of the run queue.
///
/// Not `tokio::task::yield_now`: that one defers the task until the worker
/// has run out of tasks and polled the I/O driver, which costs an
/// `epoll_wait` per round: measured 3.4 syscalls per request at concurrency
/// 64 (official driver: 0.5), nearly all of them from the coalescing rounds.
#[derive(Default)]
struct YieldToQueue {
    yielded: bool,
}

impl std::future::Future for YieldToQueue {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

async fn write_counted<W: AsyncWrite + Unpin>(
    socket: &mut W,
    mut buf: &[u8],
    counters: &IoCounters,
) -> std::io::Result<()> {
    IoCounters::add(&counters.bytes_written, buf.len() as u64);
    while !buf.is_empty() {
        let n = socket.write(buf).await?;
        IoCounters::add(&counters.write_syscalls, 1);
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
    }
    Ok(())
}
