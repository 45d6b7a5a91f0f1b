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

use super::coalescing::{Coalescing, Decision, PendingWrites};
use super::error::BrokenReason;
use super::stats::IoCounters;
use super::Shared;

pub(super) async fn run<W: AsyncWrite + Unpin>(
    shared: Arc<Shared>,
    mut socket: W,
    policy: Coalescing,
) {
    let mut out = BytesMut::with_capacity(8 * 1024);
    let mut ids: Vec<u16> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    let result = tokio::select! {
        biased;
        _ = shared.cancel.cancelled() => Ok(()),
        r = write_loop(&shared, &mut socket, policy, &mut out, &mut ids, &mut ends) => r,
    };
    if let Err(e) = result {
        shared.fail(BrokenReason::Io(e));
    }
    // Dropping the write half sends FIN.
}

async fn write_loop<W: AsyncWrite + Unpin>(
    shared: &Shared,
    socket: &mut W,
    policy: Coalescing,
    out: &mut BytesMut,
    ids: &mut Vec<u16>,
    ends: &mut Vec<usize>,
) -> std::io::Result<()> {
    loop {
        // Wait for the first frame. `notify_one` stores a permit, so a frame
        // encoded between the check and the wait is not missed.
        while shared.pending().buf.is_empty() {
            shared.writer_wake.notified().await;
        }
        coalesce(shared, policy).await;
        {
            let mut p = shared.pending();
            // Requesters do not write directly while these are on their way.
            p.writing = true;
            std::mem::swap(&mut p.buf, out);
            std::mem::swap(&mut p.ids, ids);
            std::mem::swap(&mut p.ends, ends);
        }
        if policy.one_frame_per_write() {
            let mut start = 0;
            for &end in ends.iter() {
                write_counted(socket, &out[start..end], &shared.counters).await?;
                start = end;
            }
        } else {
            write_counted(socket, out, &shared.counters).await?;
        }
        // A no-op on TCP (no extra syscall); TLS may hold records until flushed.
        socket.flush().await?;
        IoCounters::add(&shared.counters.frames_written, ids.len() as u64);
        shared.mark_write();
        out.clear();
        ids.clear();
        ends.clear();
        shared.pending().writing = false;
    }
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
    let mut last_growth = first_seen;
    let mut rounds = 0u32;
    let mut last_bytes = 0usize;
    loop {
        let (bytes, frames) = {
            let p = shared.pending();
            (p.buf.len(), p.ids.len())
        };
        let now = Instant::now();
        let grew = rounds > 0 && bytes > last_bytes;
        if grew {
            last_growth = now;
        }
        let state = PendingWrites {
            bytes,
            frames,
            awaiting_responses: shared.slots.in_use().saturating_sub(frames),
            waited: now - first_seen,
            rounds,
            grew,
            quiet: now - last_growth,
            arrival_gap: shared.arrival_gap(),
        };
        last_bytes = bytes;
        match policy.decide(&state) {
            Decision::Write => return,
            Decision::Yield => tokio::task::yield_now().await,
            Decision::Sleep(d) => tokio::time::sleep(d).await,
        }
        rounds += 1;
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
