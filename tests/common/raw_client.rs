//! A plain-socket CQL client for the test cluster's own tests: frames built
//! and read with the protocol crate's codecs, one request at a time.
//! Included with `#[path]` by the tests that need it.
#![allow(dead_code)]
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
        let s = tokio::time::timeout(WAIT, TcpStream::connect(addr))
            .await
            .unwrap()
            .unwrap();
        let mut c = Client {
            s,
            comp: None,
            stream: 0,
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
        if lz4 {
            c.comp = Some(Compressor::new(Compression::Lz4));
        }
        c
    }

    pub(crate) async fn send(&mut self, req: &Request<'_>) -> Response {
        self.send_envelope(req).await.1
    }

    /// Sends `req`; returns the response's envelope (custom payload,
    /// warnings) and its decoded message.
    pub(crate) async fn send_envelope(&mut self, req: &Request<'_>) -> (Envelope, Response) {
        self.stream += 1;
        let mut buf = BytesMut::new();
        encode_frame(
            &mut buf,
            ProtocolVersion::V4,
            Direction::Request,
            self.stream,
            req,
            &FrameExtras::NONE,
            self.comp.as_mut(),
        )
        .unwrap();
        self.s.write_all(&buf).await.unwrap();
        let mut head = [0u8; HEADER_LEN];
        tokio::time::timeout(WAIT, self.s.read_exact(&mut head))
            .await
            .unwrap()
            .unwrap();
        let h = FrameHeader::decode(&head, 1 << 24).unwrap().unwrap();
        let mut body = vec![0u8; h.body_len as usize];
        self.s.read_exact(&mut body).await.unwrap();
        assert_eq!(h.stream, self.stream);
        if self.comp.is_some() {
            assert!(
                h.flags.contains(Flags::COMPRESSION),
                "response not compressed"
            );
        }
        let env = decode_envelope(
            &h,
            Bytes::from(body),
            self.comp.as_ref().map(|c| c.compression()),
            1 << 24,
        )
        .unwrap();
        let r = Response::decode(h.opcode, env.body.clone(), &ResponseContext::default()).unwrap();
        (env, r)
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
