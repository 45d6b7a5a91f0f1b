//! A plain-socket CQL client for the test cluster's own tests: frames built
//! and read with the protocol crate's codecs, one request at a time, in
//! protocol v4 or v5 (segments after the handshake, LZ4 per segment).
//! Included with `#[path]` by the tests that need it.
#![allow(dead_code)]
use scylla_cql::frame::segment::SegmentError;
use scylla_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};
use scylla_cql::frame::ProtocolVersion;

use std::borrow::Cow;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use scylla_cql::compression::{Compression, Compressor};
use scylla_cql::frame::envelope::{decode_envelope, encode_frame, Envelope, FrameExtras};
use scylla_cql::frame::header::{Direction, Flags, FrameHeader, HEADER_LEN};
use scylla_cql::frame::request::{Query, QueryParameters, Request, Startup};
use scylla_cql::frame::response::{Response, ResponseContext, ResultBody};
use scylla_cql::frame::wire::RawValue;
use scylla_cql::types::SerializedValues;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub(crate) const WAIT: Duration = Duration::from_secs(5);

pub(crate) struct Client {
    s: TcpStream,
    comp: Option<Compressor>,
    stream: i16,
    version: ProtocolVersion,
    /// v5 after the handshake: the segment codecs.
    segments: Option<(SegmentEncoder, SegmentDecoder)>,
    /// v5: bytes read and not decoded yet.
    rbuf: BytesMut,
}

impl Client {
    pub(crate) async fn connect(addr: std::net::SocketAddr, lz4: bool) -> Client {
        Client::connect_with(addr, lz4, &[]).await
    }

    /// Connects with extra STARTUP options (e.g. `TABLETS_ROUTING_V1`).
    pub(crate) async fn connect_with(
        addr: std::net::SocketAddr,
        lz4: bool,
        extra: &[(&'static str, &'static str)],
    ) -> Client {
        Client::connect_version(addr, ProtocolVersion::V4, lz4, extra).await
    }

    /// Connects in protocol `version`: in v5 the STARTUP and READY travel
    /// bare and everything after in segments (LZ4 per segment if `lz4`).
    pub(crate) async fn connect_version(
        addr: std::net::SocketAddr,
        version: ProtocolVersion,
        lz4: bool,
        extra: &[(&'static str, &'static str)],
    ) -> Client {
        let s = tokio::time::timeout(WAIT, TcpStream::connect(addr))
            .await
            .unwrap()
            .unwrap();
        let mut c = Client {
            s,
            comp: None,
            stream: 0,
            version,
            segments: None,
            rbuf: BytesMut::new(),
        };
        let mut options = vec![(Cow::from("CQL_VERSION"), Cow::from("3.0.0"))];
        if lz4 {
            options.push((Cow::from("COMPRESSION"), Cow::from("lz4")));
        }
        for (k, v) in extra {
            options.push((Cow::from(*k), Cow::from(*v)));
        }
        let r = c.send(&Request::Startup(Startup { options })).await;
        assert!(matches!(r, Response::Ready(_)), "{r:?}");
        if version.uses_segments() {
            c.start_segments(lz4);
        } else if lz4 {
            c.comp = Some(Compressor::new(Compression::Lz4));
        }
        c
    }

    /// From now on, frames travel in v5 segments (after READY or
    /// AUTHENTICATE).
    pub(crate) fn start_segments(&mut self, lz4: bool) {
        self.segments = Some((SegmentEncoder::new(lz4), SegmentDecoder::new(lz4, 1 << 24)));
    }

    /// The connection's version.
    pub(crate) fn version(&self) -> ProtocolVersion {
        self.version
    }

    /// Writes raw bytes (already framed as the connection expects).
    pub(crate) async fn write_raw(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).await.unwrap();
    }

    /// `req` as one frame (an envelope in v5, not yet in segments).
    pub(crate) fn encode(&mut self, req: &Request<'_>) -> BytesMut {
        self.stream += 1;
        let mut buf = BytesMut::new();
        encode_frame(
            &mut buf,
            self.version,
            Direction::Request,
            self.stream,
            req,
            &FrameExtras::NONE,
            self.comp.as_mut(),
        )
        .unwrap();
        buf
    }

    /// Reads the next response frame, bare (v4, v5 handshake) or out of
    /// segments; the segment decoder's error if one fails.
    pub(crate) async fn read_frame(&mut self) -> Result<(FrameHeader, Bytes), SegmentError> {
        let Some((_, dec)) = self.segments.as_mut() else {
            let mut head = [0u8; HEADER_LEN];
            tokio::time::timeout(WAIT, self.s.read_exact(&mut head))
                .await
                .unwrap()
                .unwrap();
            let h = FrameHeader::decode(&head, 1 << 24).unwrap().unwrap();
            let mut body = vec![0u8; h.body_len as usize];
            self.s.read_exact(&mut body).await.unwrap();
            return Ok((h, Bytes::from(body)));
        };
        // Bounded: each round reads at least one byte or fails.
        loop {
            if let Some(env) = dec.decode_next(&mut self.rbuf)? {
                let h = FrameHeader::decode(&env, 1 << 24).unwrap().unwrap();
                assert_eq!(h.frame_len(), env.len());
                return Ok((h, env.slice(HEADER_LEN..)));
            }
            let n = tokio::time::timeout(WAIT, self.s.read_buf(&mut self.rbuf))
                .await
                .unwrap()
                .unwrap();
            assert!(n > 0, "connection closed");
        }
    }

    /// Sends `req` (in segments after a v5 handshake) and reads until the
    /// segment decoder fails: the error (a damaged segment from the server).
    pub(crate) async fn send_expecting_segment_error(&mut self, req: &Request<'_>) -> SegmentError {
        self.send_frames(&[req]).await;
        match self.read_frame().await {
            Err(e) => e,
            Ok((h, _)) => panic!("a response came through: {h:?}"),
        }
    }

    /// Sends the requests in one write (in v5: packed in segments).
    pub(crate) async fn send_frames(&mut self, reqs: &[&Request<'_>]) {
        let mut frames = BytesMut::new();
        for r in reqs {
            frames.extend_from_slice(&self.encode(r));
        }
        let out = match self.segments.as_mut() {
            None => frames,
            Some((enc, _)) => {
                let mut out = BytesMut::new();
                enc.encode_envelopes(&frames, &mut out).unwrap();
                out
            }
        };
        self.s.write_all(&out).await.unwrap();
    }

    /// Decodes a response frame read with [`Client::read_frame`].
    pub(crate) fn decode(&self, h: &FrameHeader, body: Bytes) -> (Envelope, Response) {
        if self.comp.is_some() {
            assert!(
                h.flags.contains(Flags::COMPRESSION),
                "response not compressed"
            );
        }
        let env = decode_envelope(
            h,
            body,
            self.comp.as_ref().map(|c| c.compression()),
            1 << 24,
        )
        .unwrap();
        let ctx = ResponseContext {
            version: self.version,
            ..ResponseContext::default()
        };
        let r = Response::decode(h.opcode, env.body.clone(), &ctx).unwrap();
        (env, r)
    }

    /// Whether the server closed the connection (within [`WAIT`]).
    pub(crate) async fn is_closed(&mut self) -> bool {
        let mut b = [0u8; 256];
        // Bounded: each round reads at least one byte or ends.
        loop {
            match tokio::time::timeout(WAIT, self.s.read(&mut b)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => continue,
                Err(_) => return false,
            }
        }
    }

    pub(crate) async fn send(&mut self, req: &Request<'_>) -> Response {
        self.send_envelope(req).await.1
    }

    /// Sends `req`; returns the response's envelope (custom payload,
    /// warnings) and its decoded message.
    pub(crate) async fn send_envelope(&mut self, req: &Request<'_>) -> (Envelope, Response) {
        self.send_frames(&[req]).await;
        let (h, body) = self.read_frame().await.unwrap();
        assert_eq!(h.stream, self.stream);
        assert_eq!(h.version, self.version);
        self.decode(&h, body)
    }

    pub(crate) async fn query(&mut self, q: &str) -> Response {
        self.query_with(q, SerializedValues::new(), None, None)
            .await
    }

    pub(crate) async fn query_with(
        &mut self,
        q: &str,
        values: SerializedValues,
        page_size: Option<i32>,
        paging_state: Option<Bytes>,
    ) -> Response {
        let params = QueryParameters {
            values: Cow::Owned(values),
            page_size,
            paging_state: paging_state.map(|p| Cow::Owned(p.to_vec())),
            ..Default::default()
        };
        self.send(&Request::Query(Query {
            contents: Cow::Borrowed(q),
            params,
        }))
        .await
    }

    pub(crate) async fn ok(&mut self, q: &str) -> ResultBody {
        match self.query(q).await {
            Response::Result(r) => r,
            other => panic!("{q}: {other:?}"),
        }
    }
}

pub(crate) fn rows(r: Response) -> scylla_cql::frame::response::result::Rows {
    match r {
        Response::Result(ResultBody::Rows(rows)) => rows,
        other => panic!("not rows: {other:?}"),
    }
}

pub(crate) fn cells(rows: &scylla_cql::frame::response::result::Rows) -> Vec<Vec<Option<Vec<u8>>>> {
    let n = rows.columns_count();
    let mut r = scylla_cql::frame::wire::WireReader::new(rows.raw_rows());
    (0..rows.rows_count())
        .map(|_| {
            (0..n)
                .map(|_| r.read_bytes("c").unwrap().map(<[u8]>::to_vec))
                .collect()
        })
        .collect()
}

pub(crate) fn error_code(r: &Response) -> i32 {
    match r {
        Response::Error(e) => e.error.code(),
        other => panic!("not an error: {other:?}"),
    }
}

pub(crate) fn vals(v: &[&[u8]]) -> SerializedValues {
    let mut s = SerializedValues::new();
    for x in v {
        s.push(RawValue::Value(x)).unwrap();
    }
    s
}
