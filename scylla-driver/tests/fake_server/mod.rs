//! A tiny scriptable CQL server for connection tests: it decodes requests and
//! encodes responses with scylla-cql, answers the handshake like a real node
//! (OPTIONS -> SUPPORTED, STARTUP -> READY), and then does whatever the test
//! tells it to, including misbehaving.
//!
//! Shared by several test binaries, so not every helper is used by each.
#![allow(dead_code, clippy::unwrap_used, unreachable_pub)]
use scylla_cql::frame::ProtocolVersion;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use scylla_cql::compression::{Compression, Compressor};
use scylla_cql::frame::envelope::{decode_envelope, encode_frame, frame_len, FrameExtras};
use scylla_cql::frame::request::Request;
use scylla_cql::frame::response::{Response, Supported};
use scylla_cql::frame::{Direction, FrameHeader, HEADER_LEN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

/// A listener on 127.0.0.1 with a random port.
pub async fn listen() -> (TcpListener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let a = l.local_addr().unwrap();
    (l, a)
}

/// A SUPPORTED like Cassandra's, optionally offering lz4.
pub fn supported(lz4: bool) -> Supported {
    let mut s = Supported::default();
    s.insert("CQL_VERSION", vec!["3.4.7".to_owned()]);
    s.insert("PROTOCOL_VERSIONS", vec!["4/v4".to_owned()]);
    let mut comp = vec!["snappy".to_owned()];
    if lz4 {
        comp.push("lz4".to_owned());
    }
    s.insert("COMPRESSION", comp);
    s
}

/// One decoded request frame.
#[derive(Debug)]
pub struct Incoming {
    /// Its header as received.
    pub header: FrameHeader,
    /// The message.
    pub request: Request<'static>,
}

/// The reading side of a server connection.
#[derive(Debug)]
pub struct ServerReader {
    rd: OwnedReadHalf,
    buf: BytesMut,
    /// Negotiated compression (set after STARTUP).
    pub compression: Option<Compression>,
}

impl ServerReader {
    /// The next request; `None` at end of file (or on a reset).
    pub async fn next(&mut self) -> Option<Incoming> {
        loop {
            if let Some((header, len)) = frame_len(&self.buf, 1 << 30).unwrap() {
                let frame = self.buf.split_to(len).freeze();
                header.expect_direction(Direction::Request).unwrap();
                let env = decode_envelope(
                    &header,
                    frame.slice(HEADER_LEN..),
                    self.compression,
                    1 << 30,
                )
                .unwrap();
                let request = Request::decode(header.opcode, &env.body, ProtocolVersion::V4)
                    .unwrap()
                    .into_owned();
                return Some(Incoming { header, request });
            }
            self.buf.reserve(4096);
            match self.rd.read_buf(&mut self.buf).await {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// Reads and discards until end of file; returns whether EOF came in `within`.
    pub async fn drain_to_eof(&mut self, within: std::time::Duration) -> bool {
        let mut scratch = [0u8; 4096];
        tokio::time::timeout(within, async {
            loop {
                match self.rd.read(&mut scratch).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await
        .is_ok()
    }
}

/// The writing side of a server connection; clone it to answer from tasks.
#[derive(Debug, Clone)]
pub struct ServerWriter {
    inner: Arc<Mutex<WriterInner>>,
}

#[derive(Debug)]
struct WriterInner {
    wr: OwnedWriteHalf,
    compressor: Option<Compressor>,
}

impl ServerWriter {
    /// Sends `resp` on `stream` (compressed if negotiated). Errors are ignored:
    /// the client may be gone.
    pub async fn send(&self, stream: i16, resp: &Response) {
        let mut g = self.inner.lock().await;
        let mut out = BytesMut::new();
        let inner = &mut *g;
        encode_frame(
            &mut out,
            ProtocolVersion::V4,
            Direction::Response,
            stream,
            resp,
            &FrameExtras::NONE,
            inner.compressor.as_mut(),
        )
        .unwrap();
        let _ = inner.wr.write_all(&out).await;
    }

    /// Sends raw bytes.
    pub async fn send_raw(&self, bytes: &[u8]) {
        let mut g = self.inner.lock().await;
        let _ = g.wr.write_all(bytes).await;
    }

    /// Sends FIN (the read side stays open).
    pub async fn shutdown(&self) {
        let mut g = self.inner.lock().await;
        let _ = g.wr.shutdown().await;
    }

    /// Turns on compression for the responses that follow.
    pub async fn set_compression(&self, c: Compression) {
        self.inner.lock().await.compressor = Some(Compressor::new(c));
    }
}

/// Encodes one response frame (uncompressed) into a fresh buffer.
pub fn encode_response(stream: i16, resp: &Response) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_frame(
        &mut out,
        ProtocolVersion::V4,
        Direction::Response,
        stream,
        resp,
        &FrameExtras::NONE,
        None,
    )
    .unwrap();
    out.to_vec()
}

/// Splits an accepted socket into its two scripted halves.
pub fn split(stream: TcpStream) -> (ServerReader, ServerWriter) {
    stream.set_nodelay(true).unwrap();
    let (rd, wr) = stream.into_split();
    (
        ServerReader {
            rd,
            buf: BytesMut::new(),
            compression: None,
        },
        ServerWriter {
            inner: Arc::new(Mutex::new(WriterInner {
                wr,
                compressor: None,
            })),
        },
    )
}

/// Answers OPTIONS with `supported` and STARTUP with READY (turning on the
/// compression STARTUP asked for). Returns the STARTUP options, or `None` if
/// the client went away first.
pub async fn handshake(
    rd: &mut ServerReader,
    wr: &ServerWriter,
    supported: &Supported,
) -> Option<Vec<(String, String)>> {
    loop {
        let inc = rd.next().await?;
        match inc.request {
            Request::Options(_) => {
                wr.send(inc.header.stream, &Response::Supported(supported.clone()))
                    .await
            }
            Request::Startup(s) => {
                let opts: Vec<(String, String)> = s
                    .options
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect();
                let comp = opts
                    .iter()
                    .find(|(k, _)| k == "COMPRESSION")
                    .and_then(|(_, v)| Compression::from_name(v));
                wr.send(
                    inc.header.stream,
                    &Response::Ready(scylla_cql::frame::response::Ready),
                )
                .await;
                if let Some(c) = comp {
                    rd.compression = Some(c);
                    wr.set_compression(c).await;
                }
                return Some(opts);
            }
            other => panic!("unexpected request during the handshake: {other:?}"),
        }
    }
}

/// Accepts one connection and completes the handshake on it.
pub async fn accept_ready(l: &TcpListener, lz4: bool) -> (ServerReader, ServerWriter) {
    let (s, _) = l.accept().await.unwrap();
    let (mut rd, wr) = split(s);
    handshake(&mut rd, &wr, &supported(lz4)).await.unwrap();
    (rd, wr)
}

/// The SUPPORTED response used to answer OPTIONS after set-up.
pub fn supported_response() -> Response {
    Response::Supported(supported(false))
}

/// The default connection config, pinned to protocol v4: this server speaks
/// v4 only and accepts the connections its test expects, not the extra one
/// that negotiating down from v5 would open.
pub fn v4_config() -> scylla_driver::connection::ConnectionConfig {
    {
        let mut built = scylla_driver::connection::ConnectionConfig::default();
        built.protocol = scylla_driver::connection::ProtocolChoice::pinned(ProtocolVersion::V4);
        built
    }
}
