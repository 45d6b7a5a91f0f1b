//! The reader task: reads the socket into its own buffer, splits it into
//! frames, decodes each, and completes the slot of its stream id. Events
//! (stream -1) go to the event channel.
//!
//! Frames are cut out of the read buffer without copying (`split_to` +
//! `freeze`): a response's rows borrow the bytes they were read into. In
//! protocol v5 the bytes are segments: the [`SegmentDecoder`] verifies both
//! checksums of a segment before it hands out any envelope in it (without
//! copying, unless compressed). Any damaged segment, malformed frame, frame
//! for a stream with no request, or end of file ends the connection,
//! failing every request in flight with the reason.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use scylla_cql::compression::{Compression, Decompressor};
use scylla_cql::frame::envelope::{decode_envelope_with, frame_len};
use scylla_cql::frame::response::event::Event;
use scylla_cql::frame::response::result::SpecCache;
use scylla_cql::frame::response::{Response, ResponseContext};
use scylla_cql::frame::segment_stream::SegmentDecoder;
use scylla_cql::frame::{Direction, FrameHeader, ProtocolVersion, HEADER_LEN};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::error::BrokenReason;
use super::stats::IoCounters;
use super::stream_slots::{CompleteError, WakeBatch};
use super::{ResponseExtras, ResponseFrame, Shared};

/// The read buffer grows in steps of at least this much.
const READ_CHUNK: usize = 64 * 1024;
/// A read is given at least this much free space (else the buffer grows).
const MIN_READ_SPACE: usize = 16 * 1024;

pub(super) struct ReaderConfig {
    pub(super) context: ResponseContext,
    pub(super) compression: Option<Compression>,
    pub(super) events: Option<mpsc::Sender<Event>>,
    /// The connection's version: every frame must carry it.
    pub(super) version: ProtocolVersion,
    /// v5: the deframer (as the handshake left it).
    pub(super) segments: Option<SegmentDecoder>,
}

pub(super) async fn run<R: AsyncRead + Unpin>(
    shared: Arc<Shared>,
    mut socket: R,
    mut cfg: ReaderConfig,
    leftover: BytesMut,
) {
    let reason = tokio::select! {
        biased;
        _ = shared.cancel.cancelled() => return,
        reason = read_loop(&shared, &mut socket, &mut cfg, leftover) => reason,
    };
    shared.fail(reason);
}

async fn read_loop<R: AsyncRead + Unpin>(
    shared: &Shared,
    socket: &mut R,
    cfg: &mut ReaderConfig,
    leftover: BytesMut,
) -> BrokenReason {
    // Bytes the handshake read past its last response come first.
    let mut buf = leftover;
    buf.reserve(READ_CHUNK);
    let mut frames_in: u64 = 0;
    // The column specs of results seen on this connection: a prepared
    // SELECT's results decode without allocating after the first.
    let mut specs = SpecCache::new();
    // v4 compressed bodies are carved from its shared buffer.
    let mut decompressor = cfg.compression.map(Decompressor::new);
    let mut segments = cfg.segments.take();
    // The requesters of one read's responses, woken once it is decoded.
    let mut wakes = WakeBatch::new();
    loop {
        // Handle every complete frame buffered so far. Two loops, one per
        // framing, on purpose: one loop over an enum of the two deframers
        // measured 0.5-1 % more instructions per request
        // (scripts/instructions-per-request.sh, medians of 3).
        let wanted = if let Some(decoder) = &mut segments {
            loop {
                match decoder.decode_next(&mut buf) {
                    Ok(Some(frame)) => {
                        let header = match FrameHeader::decode_whole(&frame, shared.max_frame_len) {
                            Ok(h) => h,
                            Err(e) => return BrokenReason::Decode(e),
                        };
                        if let Err(reason) = dispatch(
                            shared,
                            cfg,
                            &mut specs,
                            decompressor.as_mut(),
                            header,
                            frame,
                            &mut wakes,
                        ) {
                            return reason;
                        }
                        frames_in += 1;
                    }
                    Ok(None) => {
                        shared.frames_in.store(frames_in, Ordering::Relaxed);
                        break decoder.needed(&buf);
                    }
                    Err(e) => return BrokenReason::Segment(e),
                }
            }
        } else {
            loop {
                match frame_len(&buf, shared.max_frame_len) {
                    Ok(Some((header, len))) => {
                        let frame = buf.split_to(len).freeze();
                        if let Err(reason) = dispatch(
                            shared,
                            cfg,
                            &mut specs,
                            decompressor.as_mut(),
                            header,
                            frame,
                            &mut wakes,
                        ) {
                            return reason;
                        }
                        frames_in += 1;
                    }
                    // Incomplete: read at least the rest of this frame.
                    Ok(None) => {
                        // Once per read: the tick watches this for stalls.
                        shared.frames_in.store(frames_in, Ordering::Relaxed);
                        break incomplete_frame_len(&buf, shared.max_frame_len);
                    }
                    Err(e) => return BrokenReason::Decode(e),
                }
            }
        };
        wakes.wake_all();
        // Grow towards the rest of a large frame only as fast as its bytes
        // arrive (at most doubling what is buffered), so a header announcing
        // a huge body cannot make us allocate it before the peer sends it.
        let rest_of_frame = wanted.saturating_sub(buf.len());
        // Reserve only when the free space runs short: frames split off
        // earlier may still be alive (a result's rows borrow from their
        // frame), and reserving a full chunk then would move to a fresh
        // allocation on every read instead of filling this one first.
        let free = buf.capacity() - buf.len();
        if free < rest_of_frame.max(MIN_READ_SPACE) {
            let want = rest_of_frame
                .min(buf.len().max(READ_CHUNK))
                .max(READ_CHUNK.min(shared.max_frame_len));
            buf.reserve(want);
        }
        match socket.read_buf(&mut buf).await {
            Ok(0) => return BrokenReason::ClosedByPeer,
            Ok(n) => {
                IoCounters::add(&shared.counters.read_syscalls, 1);
                IoCounters::add(&shared.counters.bytes_read, n as u64);
                // Responses arrived: a writer waiting for frames past its
                // bound writes what is pending now (the frames of the
                // requesters these responses wake go with its next write).
                shared.end_overdue_gathering();
            }
            Err(e) => return BrokenReason::Io(e),
        }
    }
}

/// The full length of the frame at the start of `buf`, if its header is here.
fn incomplete_frame_len(buf: &[u8], max: usize) -> usize {
    match FrameHeader::decode(buf, max) {
        Ok(Some(h)) => h.frame_len(),
        _ => 0,
    }
}

fn dispatch(
    shared: &Shared,
    cfg: &ReaderConfig,
    specs: &mut SpecCache,
    decompressor: Option<&mut Decompressor>,
    header: FrameHeader,
    frame: bytes::Bytes,
    wakes: &mut WakeBatch,
) -> Result<(), BrokenReason> {
    header
        .expect_direction(Direction::Response)
        .map_err(BrokenReason::Decode)?;
    header
        .expect_version(cfg.version)
        .map_err(BrokenReason::Decode)?;
    let envelope = decode_envelope_with(
        &header,
        frame.slice(HEADER_LEN..),
        decompressor,
        shared.max_frame_len,
    )
    .map_err(BrokenReason::Decode)?;
    let response = Response::decode_cached(header.opcode, envelope.body, &cfg.context, Some(specs))
        .map_err(BrokenReason::Decode)?;
    IoCounters::add(&shared.counters.frames_read, 1);
    if header.stream < 0 {
        return match response {
            Response::Event(event) => {
                forward_event(shared, cfg, event);
                Ok(())
            }
            _ => Err(BrokenReason::UnknownStream(header.stream)),
        };
    }
    shared
        .slots
        .complete_into(
            header.stream,
            Ok(ResponseFrame::new(
                response,
                ResponseExtras {
                    tracing_id: envelope.tracing_id,
                    warnings: envelope.warnings,
                    custom_payload: envelope.custom_payload,
                },
            )),
            wakes,
        )
        .map_err(|CompleteError::UnknownStream(s)| BrokenReason::UnknownStream(s))
}

fn forward_event(shared: &Shared, cfg: &ReaderConfig, event: Event) {
    let Some(tx) = &cfg.events else {
        tracing::debug!(peer = %shared.peer, ?event, "event on a connection that did not register; ignored");
        return;
    };
    if let Err(e) = tx.try_send(event) {
        // Events are hints (the control connection also refreshes
        // periodically); a slow consumer must not stall the reader.
        tracing::warn!(peer = %shared.peer, error = %e, "event dropped");
    }
}
