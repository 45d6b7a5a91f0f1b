//! Connection set-up, in order: OPTIONS -> SUPPORTED (sharding and extensions),
//! STARTUP (CQL version, compression, the ScyllaDB extensions we use) ->
//! READY or AUTHENTICATE -> the authenticator's exchange -> AUTH_SUCCESS,
//! then `USE keyspace` and REGISTER when asked for.
//!
//! The handshake runs on the socket directly, one frame at a time, before
//! the writer and reader tasks exist; the whole of it is bounded by the
//! handshake timeout, and an error names the step that failed.
//!
//! It speaks one protocol version, chosen by the caller. In v5, OPTIONS and
//! STARTUP and their answers travel bare, and everything after the answer to
//! STARTUP (authentication, `USE`, REGISTER) in checksummed segments, as the
//! v5 spec's section 2.3 says. A server that does not speak the version
//! answers the first request with a protocol error, or in an older version:
//! that is [`ConnectionError::VersionRefused`], and the caller may try an
//! older version on a new connection.

use std::borrow::Cow;

use bytes::BytesMut;
use scylla_cql::compression::{Compression, Compressor};
use scylla_cql::frame::envelope::{decode_envelope, encode_frame, frame_len, FrameExtras};
use scylla_cql::frame::request::{startup, AuthResponse, Options, Query, Register, Startup};
use scylla_cql::frame::response::error::DbError;
use scylla_cql::frame::response::supported::{keys, ScyllaExtensions, ShardingInfo};
use scylla_cql::frame::response::{Response, ResponseContext, ResultBody};
use scylla_cql::frame::segment_stream::{SegmentDecoder, SegmentEncoder};
use scylla_cql::frame::{Direction, FrameHeader, MessageBody, ProtocolVersion, HEADER_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::auth::AuthenticationFailed;
use super::error::{looks_like_tls_record, ConnectionError, SetupStep, TlsErrorKind};
use super::ConnectionConfig;

/// What the handshake learned about the server.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    /// The protocol version the connection speaks.
    pub protocol_version: ProtocolVersion,
    /// The extensions and options from SUPPORTED.
    pub extensions: ScyllaExtensions,
    /// ScyllaDB's sharding of this connection's node, if it shards and the
    /// advertised parameters are valid.
    pub sharding: Option<ShardingInfo>,
    /// The compression in use on this connection.
    pub compression: Option<Compression>,
    /// What response decoding needs from the negotiation.
    pub response_context: ResponseContext,
    /// How long the handshake's exchanges took.
    pub setup_times: SetupTimes,
}

/// How long a handshake's exchanges took: OPTIONS to SUPPORTED (a plain
/// round trip), and STARTUP to READY, authentication included. A node under
/// a storm of handshakes queues STARTUP for one of a few CPU permits
/// (ScyllaDB), so what STARTUP took beyond a round trip bounds the time the
/// connection queued there, whatever the network's round trip: the pool
/// paces its opens by it (`pool::pacing`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SetupTimes {
    /// OPTIONS to SUPPORTED.
    pub options: std::time::Duration,
    /// STARTUP to READY (or to AUTH_SUCCESS).
    pub startup: std::time::Duration,
}

impl SetupTimes {
    /// What STARTUP took beyond the OPTIONS round trip: the node's time on
    /// it, queueing included.
    pub fn startup_excess(&self) -> std::time::Duration {
        self.startup.saturating_sub(self.options)
    }
}

/// What a connection's handshake hands on to its reader: bytes that
/// arrived after the last handshake response (a server may send an event
/// right behind it), and the v5 deframer with any segment it has begun.
pub(crate) struct Leftover {
    pub(crate) buf: BytesMut,
    pub(crate) segments: Option<SegmentDecoder>,
}

/// Runs the handshake on a freshly connected socket (plain TCP or TLS), in
/// protocol `version`.
///
/// `progress` is updated before each step, so that a caller that times the
/// handshake out can say which step was under way.
pub(crate) async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    config: &ConnectionConfig,
    version: ProtocolVersion,
    progress: &mut SetupStep,
) -> Result<(ServerInfo, Leftover), ConnectionError> {
    let mut io = FrameIo {
        stream,
        progress,
        version,
        buf: BytesMut::with_capacity(4096),
        compressor: None,
        inbound_compression: None,
        framing: None,
        max_frame_len: config.max_frame_len,
        context: ResponseContext::default().with_version(version),
        times: SetupTimes::default(),
    };

    // OPTIONS -> SUPPORTED
    let began = std::time::Instant::now();
    let supported = match io.round_trip(SetupStep::Options, &Options).await? {
        Response::Supported(s) => s,
        other => return Err(unexpected(SetupStep::Options, &other)),
    };
    io.times.options = began.elapsed();
    let extensions = ScyllaExtensions::from_supported(&supported);
    for problem in &extensions.problems {
        tracing::warn!(%problem, "ignoring a malformed SUPPORTED option");
    }
    let sharding = match &extensions.sharding {
        Some(Ok(info)) => Some(info.clone()),
        Some(Err(e)) => {
            tracing::warn!(error = %e, "the server's sharding parameters are unusable; treating the node as unsharded");
            None
        }
        None => None,
    };
    io.context = ResponseContext::from_extensions(&extensions).with_version(version);

    // STARTUP
    let compression = config.compression.filter(|c| {
        if version.uses_segments() && !c.in_segments() {
            tracing::info!(
                compression = c.name(),
                "protocol v5 compresses its segments with LZ4 only; not compressing \
                 (pin protocol v4 to use this compression)"
            );
            return false;
        }
        let offered = extensions
            .compression
            .iter()
            .any(|name| name.eq_ignore_ascii_case(c.name()));
        if !offered {
            tracing::info!(
                compression = c.name(),
                "the server does not offer the configured compression; not compressing"
            );
        }
        offered
    });
    let startup = startup_message(config, &extensions, compression);
    // STARTUP itself goes uncompressed, but the server may compress its
    // answer already: Cassandra 5.0 sends a compressed AUTHENTICATE when
    // STARTUP asked for LZ4 (a compressed frame is flagged, so accepting one
    // is safe either way). In v5 the envelopes are never compressed: the
    // segments that follow the answer are.
    let began = std::time::Instant::now();
    if version.uses_segments() {
        let mut answer = io.round_trip(SetupStep::Startup, &startup).await?;
        let lz4 = compression.is_some();
        io.framing = Some((
            SegmentEncoder::new(lz4),
            SegmentDecoder::new(lz4, config.max_frame_len.saturating_add(HEADER_LEN)),
        ));
        answer = io.authenticate(config, answer).await?;
        io.times.startup = began.elapsed();
        return io
            .finish(config, answer, extensions, sharding, compression)
            .await;
    }
    io.inbound_compression = compression;
    let answer = io.round_trip(SetupStep::Startup, &startup).await?;
    io.compressor = compression.map(Compressor::new);
    let answer = io.authenticate(config, answer).await?;
    io.times.startup = began.elapsed();
    io.finish(config, answer, extensions, sharding, compression)
        .await
}

impl<S: AsyncRead + AsyncWrite + Unpin> FrameIo<'_, S> {
    /// Runs the authenticator's exchange if STARTUP was answered with
    /// AUTHENTICATE; returns READY (or whatever else came, for the caller
    /// to reject).
    async fn authenticate(
        &mut self,
        config: &ConnectionConfig,
        answer: Response,
    ) -> Result<Response, ConnectionError> {
        let Response::Authenticate(auth) = &answer else {
            return Ok(answer);
        };
        let Some(authenticator) = &config.authenticator else {
            return Err(ConnectionError::AuthRequired {
                authenticator: auth.authenticator.clone(),
            });
        };
        // Never the tokens: they carry the credentials.
        tracing::debug!(
            authenticator = %auth.authenticator,
            "the server requires authentication"
        );
        let (mut token, mut session) = authenticator
            .start_authentication_session(&auth.authenticator)
            .await
            .map_err(AuthenticationFailed)?;
        // A SASL exchange has a handful of steps; bound it anyway.
        for _ in 0..16 {
            let msg = AuthResponse {
                token: token.as_deref().map(Cow::Borrowed),
            };
            match self.round_trip(SetupStep::Authenticate, &msg).await? {
                Response::AuthChallenge(c) => {
                    token = session
                        .evaluate_challenge(c.token.as_deref())
                        .await
                        .map_err(AuthenticationFailed)?;
                }
                Response::AuthSuccess(s) => {
                    session
                        .success(s.token.as_deref())
                        .await
                        .map_err(AuthenticationFailed)?;
                    tracing::debug!("authentication succeeded");
                    return Ok(Response::Ready(scylla_cql::frame::response::ready::Ready));
                }
                other => return Err(unexpected(SetupStep::Authenticate, &other)),
            }
        }
        Err(ConnectionError::UnexpectedResponse {
            step: SetupStep::Authenticate,
            got: "endless AUTH_CHALLENGE",
        })
    }

    /// After READY: `USE` and REGISTER, as configured.
    async fn finish(
        &mut self,
        config: &ConnectionConfig,
        answer: Response,
        extensions: ScyllaExtensions,
        sharding: Option<ShardingInfo>,
        compression: Option<Compression>,
    ) -> Result<(ServerInfo, Leftover), ConnectionError> {
        if !matches!(answer, Response::Ready(_)) {
            return Err(unexpected(SetupStep::Startup, &answer));
        }

        // USE keyspace
        if let Some(ks) = &config.keyspace {
            let query = Query::use_keyspace(ks);
            match self.round_trip(SetupStep::UseKeyspace, &query).await? {
                Response::Result(ResultBody::SetKeyspace(_)) => {}
                other => return Err(unexpected(SetupStep::UseKeyspace, &other)),
            }
        }

        // REGISTER
        if !config.register_events.is_empty() {
            let register = Register {
                event_types: Cow::Borrowed(&config.register_events),
            };
            match self.round_trip(SetupStep::Register, &register).await? {
                Response::Ready(_) => {}
                other => return Err(unexpected(SetupStep::Register, &other)),
            }
        }

        let leftover = Leftover {
            buf: std::mem::take(&mut self.buf),
            segments: self.framing.take().map(|(_, d)| d),
        };
        Ok((
            ServerInfo {
                protocol_version: self.version,
                response_context: self.context,
                extensions,
                sharding,
                compression,
                setup_times: self.times,
            },
            leftover,
        ))
    }
}

fn startup_message<'a>(
    config: &'a ConnectionConfig,
    ext: &ScyllaExtensions,
    compression: Option<Compression>,
) -> Startup<'a> {
    let cql_version = ext
        .cql_versions
        .first()
        .cloned()
        .unwrap_or_else(|| "3.0.0".to_owned());
    let mut options: Vec<(Cow<'a, str>, Cow<'a, str>)> = vec![
        (startup::CQL_VERSION.into(), cql_version.into()),
        (
            startup::DRIVER_NAME.into(),
            config.driver_name.as_str().into(),
        ),
        (
            startup::DRIVER_VERSION.into(),
            config.driver_version.as_str().into(),
        ),
    ];
    // The application's identity, then the driver's settings as JSON. Both
    // go to every server: ScyllaDB keeps all STARTUP options in
    // `system.clients.client_options`, and Cassandra ignores keys it does
    // not know (checked with Cassandra 5.0.6: STARTUP with these keys and
    // an unknown one is answered READY, and `system_views.clients` shows
    // them all in its `client_options` column). No server advertises
    // CLIENT_OPTIONS in SUPPORTED, so there is nothing to wait for there.
    let identity = [
        (startup::APPLICATION_NAME, &config.application_name),
        (startup::APPLICATION_VERSION, &config.application_version),
        (startup::CLIENT_ID, &config.client_id),
    ];
    for (key, value) in identity {
        if let Some(v) = value {
            options.push((key.into(), v.as_str().into()));
        }
    }
    if let Some(json) = &config.client_options {
        options.push((startup::CLIENT_OPTIONS.into(), json.as_ref().into()));
    }
    if let Some(c) = compression {
        options.push((startup::COMPRESSION.into(), c.name().into()));
    }
    // ScyllaDB extensions: asking for them in STARTUP turns them on.
    if let Some(mask) = ext.lwt_metadata_mask {
        options.push((
            keys::SCYLLA_LWT_ADD_METADATA_MARK.into(),
            format!("{}={mask}", keys::LWT_OPTIMIZATION_META_BIT_MASK).into(),
        ));
    }
    if ext.rate_limit_error_code.is_some() {
        options.push((keys::SCYLLA_RATE_LIMIT_ERROR.into(), "".into()));
    }
    // Tablet routing: v2 when offered (it subsumes v1, and a client asks
    // for one of the two): every EXECUTE then carries a tablet version
    // block, and a stale one brings the tablet's routing back. Otherwise
    // v1: routing payloads on misrouted requests. Routing learns from both.
    if ext.tablets_routing_v2 {
        options.push((keys::TABLETS_ROUTING_V2.into(), "".into()));
    } else if ext.tablets_routing_v1 {
        options.push((keys::TABLETS_ROUTING_V1.into(), "".into()));
    }
    // Result metadata ids on v4 (PREPARED carries one, EXECUTE sends it,
    // changed metadata comes with its new id): safe skipping of metadata.
    // The response context reads them when SUPPORTED offered the extension.
    if ext.use_metadata_id {
        options.push((keys::SCYLLA_USE_METADATA_ID.into(), "".into()));
    }
    Startup { options }
}

fn unexpected(step: SetupStep, got: &Response) -> ConnectionError {
    match got {
        Response::Error(e) => ConnectionError::Server {
            step,
            error: e.clone(),
        },
        other => ConnectionError::UnexpectedResponse {
            step,
            got: response_name(other),
        },
    }
}

/// The protocol name of a response message.
pub(crate) fn response_name(r: &Response) -> &'static str {
    match r {
        Response::Error(_) => "ERROR",
        Response::Ready(_) => "READY",
        Response::Authenticate(_) => "AUTHENTICATE",
        Response::Supported(_) => "SUPPORTED",
        Response::Result(_) => "RESULT",
        Response::Event(_) => "EVENT",
        Response::AuthChallenge(_) => "AUTH_CHALLENGE",
        Response::AuthSuccess(_) => "AUTH_SUCCESS",
    }
}

/// One request, one response, on the raw socket.
struct FrameIo<'s, S> {
    stream: &'s mut S,
    progress: &'s mut SetupStep,
    /// The version every frame is written in (and every answer must have).
    version: ProtocolVersion,
    buf: BytesMut,
    /// v4: compresses requests once STARTUP negotiated it.
    compressor: Option<Compressor>,
    /// v4: the compression flagged responses may use (set from STARTUP on,
    /// one round trip before requests are compressed).
    inbound_compression: Option<Compression>,
    /// v5, after the answer to STARTUP: the segment codecs.
    framing: Option<(SegmentEncoder, SegmentDecoder)>,
    max_frame_len: usize,
    context: ResponseContext,
    /// How long the exchanges took so far.
    times: SetupTimes,
}

impl<S: AsyncRead + AsyncWrite + Unpin> FrameIo<'_, S> {
    async fn round_trip(
        &mut self,
        step: SetupStep,
        msg: &(impl MessageBody + ?Sized),
    ) -> Result<Response, ConnectionError> {
        *self.progress = step;
        let io_err = |source| ConnectionError::Io { step, source };
        let mut out = BytesMut::new();
        encode_frame(
            &mut out,
            self.version,
            Direction::Request,
            0,
            msg,
            &FrameExtras::NONE,
            self.compressor.as_mut(),
        )
        .map_err(|source| ConnectionError::Encode { step, source })?;
        if let Some((encoder, _)) = &mut self.framing {
            let mut segments = BytesMut::with_capacity(encoder.encoded_len_bound(out.len()));
            encoder
                .encode_envelopes(&out, &mut segments)
                .map_err(|source| ConnectionError::Segment { step, source })?;
            out = segments;
        }
        self.stream.write_all(&out).await.map_err(io_err)?;
        // A no-op on TCP; TLS may hold encrypted records until flushed.
        self.stream.flush().await.map_err(io_err)?;

        loop {
            if looks_like_tls_record(&self.buf) {
                // A TLS server answering a plaintext client (with an alert).
                return Err(ConnectionError::Tls {
                    step,
                    kind: TlsErrorKind::ServerRequiresTls,
                    source: None,
                });
            }
            if let Some(frame) = self.next_frame(step)? {
                let decode = |source| ConnectionError::Decode { step, source };
                let header = FrameHeader::decode_whole(&frame, usize::MAX).map_err(decode)?;
                header
                    .expect_direction(Direction::Response)
                    .map_err(decode)?;
                let context = self.context.with_version(header.version);
                let envelope = decode_envelope(
                    &header,
                    frame.slice(HEADER_LEN..),
                    self.inbound_compression,
                    self.max_frame_len,
                )
                .map_err(decode)?;
                let response =
                    Response::decode(header.opcode, envelope.body, &context).map_err(decode)?;
                if header.stream == -1 {
                    // An event before set-up finished: not ours to answer.
                    continue;
                }
                if let Some(refusal) = self.refusal(step, header.version, &response) {
                    return Err(refusal);
                }
                header.expect_version(self.version).map_err(decode)?;
                return Ok(response);
            }
            self.buf.reserve(4096);
            let n = self.stream.read_buf(&mut self.buf).await.map_err(io_err)?;
            if n == 0 {
                return Err(ConnectionError::Closed { step });
            }
        }
    }

    /// The next whole frame (envelope) received, if one is buffered.
    fn next_frame(&mut self, step: SetupStep) -> Result<Option<bytes::Bytes>, ConnectionError> {
        if let Some((_, decoder)) = &mut self.framing {
            return decoder
                .decode_next(&mut self.buf)
                .map_err(|source| ConnectionError::Segment { step, source });
        }
        match frame_len(&self.buf, self.max_frame_len) {
            Ok(Some((_, len))) => Ok(Some(self.buf.split_to(len).freeze())),
            Ok(None) => Ok(None),
            // A server that does not speak our version may answer in a
            // version we do not speak either (v3): a refusal, not damage.
            Err(scylla_cql::DecodeError::UnsupportedVersion(byte))
                if step == SetupStep::Options && self.version > ProtocolVersion::V4 =>
            {
                Err(ConnectionError::VersionRefused {
                    offered: self.version,
                    message: format!("answered with version byte {byte:#04x}"),
                })
            }
            Err(source) => Err(ConnectionError::Decode { step, source }),
        }
    }

    /// Whether the answer to the first request says the server does not
    /// speak our version: an answer in an older version, or a protocol
    /// error (Cassandra and ScyllaDB answer an unsupported version with
    /// "Invalid or unsupported protocol version"; a server where our
    /// version is still beta says so with a protocol error too).
    fn refusal(
        &self,
        step: SetupStep,
        answered: ProtocolVersion,
        response: &Response,
    ) -> Option<ConnectionError> {
        if step != SetupStep::Options || self.version == ProtocolVersion::V4 {
            return None;
        }
        match response {
            Response::Error(e) if matches!(e.error, DbError::ProtocolError) => {
                Some(ConnectionError::VersionRefused {
                    offered: self.version,
                    message: e.message.clone(),
                })
            }
            _ if answered < self.version => Some(ConnectionError::VersionRefused {
                offered: self.version,
                message: format!("answered in protocol {answered}"),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_carries_the_identity_and_client_options_when_set() {
        let ext = ScyllaExtensions::default();
        let defaults = ConnectionConfig::default();
        let plain = startup_message(&defaults, &ext, None);
        assert_eq!(
            plain.get(startup::DRIVER_NAME),
            Some("scylla-driver (Rust)")
        );
        for key in [
            startup::APPLICATION_NAME,
            startup::APPLICATION_VERSION,
            startup::CLIENT_ID,
            startup::CLIENT_OPTIONS,
        ] {
            assert_eq!(plain.get(key), None, "{key}");
        }

        let config = ConnectionConfig {
            application_name: Some("app".into()),
            application_version: Some("1.0".into()),
            client_id: Some("pod-1".into()),
            client_options: Some(r#"{"tls":false}"#.into()),
            ..ConnectionConfig::default()
        };
        let startup = startup_message(&config, &ext, None);
        assert_eq!(startup.get(startup::APPLICATION_NAME), Some("app"));
        assert_eq!(startup.get(startup::APPLICATION_VERSION), Some("1.0"));
        assert_eq!(startup.get(startup::CLIENT_ID), Some("pod-1"));
        assert_eq!(
            startup.get(startup::CLIENT_OPTIONS),
            Some(r#"{"tls":false}"#)
        );
    }

    #[test]
    fn use_is_built_with_the_name_quoted_when_needed() {
        assert_eq!(Query::use_keyspace("ks_1").contents, "USE ks_1");
        assert_eq!(Query::use_keyspace("MyKs").contents, "USE \"MyKs\"");
        assert_eq!(Query::use_keyspace("1ks").contents, "USE \"1ks\"");
    }

    #[test]
    fn tablets_routing_v2_when_offered_else_v1_never_both() {
        let config = ConnectionConfig::default();
        let asked = |v1: bool, v2: bool| {
            let ext = ScyllaExtensions {
                tablets_routing_v1: v1,
                tablets_routing_v2: v2,
                ..ScyllaExtensions::default()
            };
            let startup = startup_message(&config, &ext, None);
            let has = |k: &str| startup.options.iter().any(|(key, _)| key == k);
            (has(keys::TABLETS_ROUTING_V1), has(keys::TABLETS_ROUTING_V2))
        };
        assert_eq!(asked(true, true), (false, true));
        assert_eq!(asked(false, true), (false, true));
        assert_eq!(asked(true, false), (true, false));
        assert_eq!(asked(false, false), (false, false));
    }
}
