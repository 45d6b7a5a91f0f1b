//! TLS records sealed and opened in the connection's own buffers: the
//! opt-in `RecordLayer::Driver` (the default is rustls' own record layer,
//! through tokio-rustls; see `tls.rs`).
//!
//! rustls runs the handshake (its unbuffered API, `UnbufferedClientConnection`)
//! and then hands the traffic keys over through its kernel API
//! (`dangerous_into_kernel_connection`, made for kTLS). From then on this
//! module seals and opens the records itself with `ring`, each direction in a
//! buffer of its own allocated once per connection, so a request allocates
//! nothing. rustls keeps what only it can do, through its
//! `KernelConnection`: TLS 1.3 session tickets (`NewSessionTicket`, stored in
//! the configuration's resumption store, so later connections resume) and
//! new traffic secrets (`KeyUpdate`, from the server or ours).
//!
//! Why not rustls' buffered or unbuffered connection for the traffic: in
//! rustls 0.23 (`common_state.rs`: `take_received_plaintext`, and the
//! `MessageEncrypter`s' `PrefixedPayload`) both copy each received record into
//! a `Vec` of its own and seal each sent record into a fresh `Vec` before
//! copying it out: 2 allocations per request.
//!
//! Record formats: RFC 8446 section 5.2 (TLS 1.3) and RFC 5246 section
//! 6.2.3.3 with RFC 5288 and RFC 7905 (TLS 1.2 AES-GCM and ChaCha20-Poly1305,
//! the AEAD suites rustls offers), with the nonces rustls uses
//! (`crypto/ring/tls12.rs`: the write IV xor the sequence number).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use ring::aead;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::{
    AlertDescription, ConnectionTrafficSecrets, ProtocolVersion, SupportedCipherSuite,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// The most plaintext one record carries.
const MAX_PLAINTEXT: usize = 16 * 1024;
/// The longest record body accepted (TLS 1.2 allows 2048 bytes of expansion;
/// TLS 1.3 256).
const MAX_BODY: usize = MAX_PLAINTEXT + 2048;
/// A record header: type, version, length.
const HEADER: usize = 5;
/// The AEAD tag of every suite here.
const TAG: usize = 16;
/// The most a sealed record adds to its plaintext (TLS 1.2 GCM: explicit
/// nonce and tag; TLS 1.3: inner type and tag).
const MAX_OVERHEAD: usize = HEADER + 8 + TAG + 1;
/// The receive buffer: two full records (there is always room for a whole
/// record after the start of an incomplete one). Each connection keeps its
/// two buffers for its life (about 70 KiB together, in a pool of one
/// connection per shard per node), so they are no larger than a read and a
/// write of a busy connection need.
const RECV_CAP: usize = 2 * (HEADER + MAX_BODY);
/// The send buffer: two full records per write.
const SEND_CAP: usize = 2 * (MAX_PLAINTEXT + MAX_OVERHEAD);
/// The handshake's receive buffer may grow to this (certificate chains).
const MAX_HANDSHAKE_BUF: usize = 1024 * 1024;

const APPLICATION_DATA: u8 = 23;
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const HELLO_REQUEST: u8 = 0;
const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;

/// How records of the negotiated version and suite are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// TLS 1.3: the content type inside, the header as additional data.
    Tls13,
    /// TLS 1.2 AES-GCM: an 8-byte explicit nonce before the ciphertext.
    Tls12ExplicitNonce,
    /// TLS 1.2 ChaCha20-Poly1305: the nonce is implicit.
    Tls12,
}

/// The keys of one direction and its record sequence number.
struct Keys {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
    layout: Layout,
}

impl Keys {
    fn new(tls13: bool, seq: u64, secrets: ConnectionTrafficSecrets) -> io::Result<Keys> {
        let (alg, key, iv, gcm) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv, true),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv, true),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv, false)
            }
            _ => {
                return Err(io::Error::other(
                    "the negotiated TLS cipher suite is not supported by the driver's record layer \
                     (AES-GCM and ChaCha20-Poly1305 are): restrict the ClientConfig's cipher suites",
                ))
            }
        };
        let key = aead::UnboundKey::new(alg, key.as_ref())
            .map_err(|_| io::Error::other("TLS traffic key of the wrong length"))?;
        let iv: [u8; aead::NONCE_LEN] = iv
            .as_ref()
            .try_into()
            .map_err(|_| io::Error::other("TLS traffic IV of the wrong length"))?;
        let layout = match (tls13, gcm) {
            (true, _) => Layout::Tls13,
            (false, true) => Layout::Tls12ExplicitNonce,
            (false, false) => Layout::Tls12,
        };
        Ok(Keys {
            key: aead::LessSafeKey::new(key),
            iv,
            seq,
            layout,
        })
    }

    /// The IV xor the sequence number (RFC 8446 section 5.3; rustls' TLS 1.2
    /// nonces too).
    fn nonce(&self) -> [u8; aead::NONCE_LEN] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }

    /// TLS 1.2's additional data: sequence number, type, version (the
    /// record's: a record received with another version than sent fails to
    /// open), length.
    fn aad12(&self, typ: u8, version: [u8; 2], len: usize) -> [u8; 13] {
        let mut a = [0u8; 13];
        a[..8].copy_from_slice(&self.seq.to_be_bytes());
        a[8] = typ;
        a[9..11].copy_from_slice(&version);
        a[11..].copy_from_slice(&(len as u16).to_be_bytes());
        a
    }

    /// Appends one record of type `typ` carrying `plain` (at most
    /// [`MAX_PLAINTEXT`] bytes) to `out`, which has room for it.
    fn seal(&mut self, typ: u8, plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        let start = out.len();
        let nonce = self.nonce();
        let sealed = match self.layout {
            Layout::Tls13 => {
                let len = plain.len() + 1 + TAG;
                out.extend_from_slice(&[APPLICATION_DATA, 3, 3]);
                out.extend_from_slice(&(len as u16).to_be_bytes());
                out.extend_from_slice(plain);
                out.push(typ);
                let mut aad = [0u8; HEADER];
                aad.copy_from_slice(&out[start..start + HEADER]);
                self.key.seal_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(aad),
                    &mut out[start + HEADER..],
                )
            }
            Layout::Tls12ExplicitNonce | Layout::Tls12 => {
                let explicit = if self.layout == Layout::Tls12ExplicitNonce {
                    8
                } else {
                    0
                };
                let len = explicit + plain.len() + TAG;
                out.extend_from_slice(&[typ, 3, 3]);
                out.extend_from_slice(&(len as u16).to_be_bytes());
                out.extend_from_slice(&nonce[aead::NONCE_LEN - explicit..]);
                out.extend_from_slice(plain);
                let aad = self.aad12(typ, [3, 3], plain.len());
                self.key.seal_in_place_separate_tag(
                    aead::Nonce::assume_unique_for_key(nonce),
                    aead::Aad::from(aad),
                    &mut out[start + HEADER + explicit..],
                )
            }
        };
        let tag = sealed.map_err(|_| tls_error(rustls::Error::EncryptError))?;
        out.extend_from_slice(tag.as_ref());
        self.seq += 1;
        Ok(())
    }

    /// Opens the record whose header is `header` and whose body is `body`
    /// in place; returns its content type and where its plaintext is in
    /// `body`.
    fn open(
        &mut self,
        header: [u8; HEADER],
        body: &mut [u8],
    ) -> io::Result<(u8, std::ops::Range<usize>)> {
        let bad = || tls_error(rustls::Error::DecryptError);
        let (typ, range) = match self.layout {
            Layout::Tls13 => {
                if header[0] != APPLICATION_DATA {
                    return Err(unexpected("a record in the clear after the handshake"));
                }
                let plain = self
                    .key
                    .open_in_place(
                        aead::Nonce::assume_unique_for_key(self.nonce()),
                        aead::Aad::from(header),
                        body,
                    )
                    .map_err(|_| bad())?;
                // The content type is the last non-zero byte (zeros pad).
                let Some(at) = plain.iter().rposition(|&b| b != 0) else {
                    return Err(unexpected("a TLS 1.3 record with no content type"));
                };
                (plain[at], 0..at)
            }
            Layout::Tls12ExplicitNonce | Layout::Tls12 => {
                let explicit = if self.layout == Layout::Tls12ExplicitNonce {
                    8
                } else {
                    0
                };
                if body.len() < explicit + TAG {
                    return Err(bad());
                }
                let mut nonce = self.nonce();
                if explicit > 0 {
                    nonce[4..].copy_from_slice(&body[..8]);
                }
                let aad = self.aad12(header[0], [header[1], header[2]], body.len() - explicit - TAG);
                let plain = self
                    .key
                    .open_in_place(
                        aead::Nonce::assume_unique_for_key(nonce),
                        aead::Aad::from(aad),
                        &mut body[explicit..],
                    )
                    .map_err(|_| bad())?;
                (header[0], explicit..explicit + plain.len())
            }
        };
        self.seq += 1;
        Ok((typ, range))
    }
}

/// An I/O error that carries a rustls error (so the connection's error
/// classification names it).
fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn unexpected(what: &'static str) -> io::Error {
    tls_error(rustls::Error::General(format!(
        "unexpected TLS message from the server: {what}"
    )))
}

/// What both halves of a connection share: rustls' part after the handshake.
struct Kernel {
    conn: Mutex<KernelConnection<ClientConnectionData>>,
    tls13: bool,
    /// The server asked for our new keys (a KeyUpdate with update_requested):
    /// sent before our next record (RFC 8446 section 4.6.3).
    update_requested: AtomicBool,
    /// Our sending keys are renewed (TLS 1.3) or the connection ends (TLS 1.2)
    /// at this many records: well within the suite's confidentiality limit.
    send_limit: u64,
}

impl Kernel {
    fn new_secrets(&self, tx: bool) -> io::Result<Keys> {
        let mut conn = self
            .conn
            .lock()
            .map_err(|_| io::Error::other("TLS key state poisoned"))?;
        let (seq, secrets) = if tx {
            conn.update_tx_secret()
        } else {
            conn.update_rx_secret()
        }
        .map_err(tls_error)?;
        Keys::new(self.tls13, seq, secrets)
    }
}

/// The receiving direction: ciphertext as read, opened in place.
struct Recv {
    buf: Box<[u8]>,
    /// Unprocessed ciphertext: `buf[start..end]`.
    start: usize,
    end: usize,
    /// Opened plaintext not yet handed out: `buf[plain.0..plain.1]`.
    plain: (usize, usize),
    keys: Keys,
    /// A close_notify came: no more data.
    closed: bool,
}

impl Recv {
    /// Opens the next complete record, if one is buffered, and handles it;
    /// `Ok(false)` when more bytes are needed.
    fn open_next(&mut self, kernel: &Kernel) -> io::Result<bool> {
        let avail = &self.buf[self.start..self.end];
        if avail.len() < HEADER {
            return Ok(false);
        }
        let len = u16::from_be_bytes([avail[3], avail[4]]) as usize;
        if len > MAX_BODY {
            return Err(unexpected("a record longer than TLS allows"));
        }
        if avail.len() < HEADER + len {
            return Ok(false);
        }
        let mut header = [0u8; HEADER];
        header.copy_from_slice(&avail[..HEADER]);
        let body_at = self.start + HEADER;
        self.start = body_at + len;
        let (typ, range) = self
            .keys
            .open(header, &mut self.buf[body_at..body_at + len])?;
        let (from, to) = (body_at + range.start, body_at + range.end);
        match typ {
            APPLICATION_DATA => self.plain = (from, to),
            ALERT => {
                let pair = alert_pair(&self.buf[from..to]);
                self.alert(pair)?
            }
            HANDSHAKE => self.post_handshake(kernel, from, to)?,
            _ => return Err(unexpected("a record of an unknown content type")),
        }
        Ok(true)
    }

    fn alert(&mut self, [level, desc]: [u8; 2]) -> io::Result<()> {
        let desc = AlertDescription::from(desc);
        match desc {
            AlertDescription::CloseNotify => {
                self.closed = true;
                Ok(())
            }
            // A warning that a close_notify follows.
            AlertDescription::UserCanceled if level == 1 => Ok(()),
            _ => Err(tls_error(rustls::Error::AlertReceived(desc))),
        }
    }

    /// Handshake messages after the handshake: session tickets (to rustls'
    /// store), KeyUpdate, and TLS 1.2's HelloRequest (renegotiation is not
    /// offered; ignoring it is allowed, RFC 5246 section 7.4.1.1).
    fn post_handshake(&mut self, kernel: &Kernel, from: usize, to: usize) -> io::Result<()> {
        let mut at = from;
        while at < to {
            let m = &self.buf[at..to];
            if m.len() < 4 {
                return Err(unexpected("a handshake message split across records"));
            }
            let len = u32::from_be_bytes([0, m[1], m[2], m[3]]) as usize;
            if m.len() < 4 + len {
                return Err(unexpected("a handshake message split across records"));
            }
            let body = &m[4..4 + len];
            match m[0] {
                NEW_SESSION_TICKET if kernel.tls13 => {
                    let mut conn = kernel
                        .conn
                        .lock()
                        .map_err(|_| io::Error::other("TLS key state poisoned"))?;
                    if let Err(e) = conn.handle_new_session_ticket(body) {
                        // A ticket we cannot store only costs a full
                        // handshake later.
                        tracing::debug!(error = %e, "TLS session ticket not stored");
                    } else {
                        tracing::trace!("TLS session ticket stored");
                    }
                }
                KEY_UPDATE if kernel.tls13 => {
                    let requested = match body {
                        [0] => false,
                        [1] => true,
                        _ => return Err(unexpected("a malformed KeyUpdate")),
                    };
                    if at + 4 + len != to {
                        return Err(unexpected("a KeyUpdate not at the end of its record"));
                    }
                    self.keys = kernel.new_secrets(false)?;
                    if requested {
                        kernel.update_requested.store(true, Ordering::Release);
                    }
                    tracing::debug!(requested, "TLS KeyUpdate from the server");
                }
                HELLO_REQUEST if !kernel.tls13 => {}
                _ => return Err(unexpected("a handshake message after the handshake")),
            }
            at += 4 + len;
        }
        Ok(())
    }

    fn poll_read<R: AsyncRead + Unpin>(
        &mut self,
        io: &mut R,
        kernel: &Kernel,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = out.filled().len();
        // Bounded: each round hands out plaintext, opens a buffered record,
        // or returns.
        loop {
            if self.plain.0 < self.plain.1 {
                let n = (self.plain.1 - self.plain.0).min(out.remaining());
                out.put_slice(&self.buf[self.plain.0..self.plain.0 + n]);
                self.plain.0 += n;
                if out.remaining() == 0 {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            if self.closed {
                return Poll::Ready(Ok(()));
            }
            if self.open_next(kernel)? {
                continue;
            }
            if out.filled().len() > before {
                return Poll::Ready(Ok(()));
            }
            // Room for a whole record from the start of the incomplete one.
            if self.start == self.end {
                (self.start, self.end) = (0, 0);
            } else if self.buf.len() - self.start < HEADER + MAX_BODY {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            }
            let mut rb = ReadBuf::new(&mut self.buf[self.end..]);
            ready!(Pin::new(&mut *io).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection without a TLS close_notify",
                )));
            }
            self.end += n;
        }
    }
}

/// An alert's level and description (alerts are exactly two bytes; anything
/// else is reported as a fatal decode error).
fn alert_pair(b: &[u8]) -> [u8; 2] {
    match b {
        [a, b] => [*a, *b],
        _ => [2, u8::from(AlertDescription::DecodeError)],
    }
}

/// The sending direction: records sealed into `out`, then written.
struct Send {
    out: Vec<u8>,
    /// How much of `out` is written.
    sent: usize,
    keys: Keys,
    /// The close_notify is sealed (it goes once).
    close_sealed: bool,
}

impl Send {
    /// Writes what is sealed and not yet written.
    fn poll_drain<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(Pin::new(&mut *io).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.out.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Our KeyUpdate, when the server asked for it or our keys near their
    /// limit (TLS 1.3); the end of the connection at the limit (TLS 1.2).
    fn renew_keys(&mut self, kernel: &Kernel) -> io::Result<()> {
        let requested = kernel.update_requested.swap(false, Ordering::AcqRel);
        if !requested && self.keys.seq < kernel.send_limit {
            return Ok(());
        }
        if !kernel.tls13 {
            return Err(io::Error::other(
                "the TLS 1.2 keys of this connection reached their cipher suite's limit; \
                 the connection ends (a new one gets new keys)",
            ));
        }
        // KeyUpdate, update_not_requested (RFC 8446 section 4.6.3).
        self.keys
            .seal(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], &mut self.out)?;
        self.keys = kernel.new_secrets(true)?;
        tracing::debug!(requested, "TLS KeyUpdate sent");
        Ok(())
    }

    fn poll_write<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        kernel: &Kernel,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(io, cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.renew_keys(kernel)?;
        let mut taken = 0;
        while taken < buf.len() {
            let room = SEND_CAP - self.out.len();
            if room <= MAX_OVERHEAD {
                break;
            }
            let n = (buf.len() - taken)
                .min(MAX_PLAINTEXT)
                .min(room - MAX_OVERHEAD);
            self.keys
                .seal(APPLICATION_DATA, &buf[taken..taken + n], &mut self.out)?;
            taken += n;
        }
        // Start writing now; what the socket does not take yet goes before
        // the next record (or on flush).
        if let Poll::Ready(Err(e)) = self.poll_drain(io, cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    /// On drop: a close_notify, if the socket takes it at once and only on a
    /// record boundary (a record half written cannot be followed by another).
    fn close_on_drop(&mut self, try_write: impl FnOnce(&[u8]) -> io::Result<usize>) {
        if self.sent != 0 || !self.out.is_empty() || self.close_sealed {
            return;
        }
        self.seal_close_notify();
        let _ = try_write(&self.out);
    }

    fn seal_close_notify(&mut self) {
        if self.close_sealed || SEND_CAP - self.out.len() < MAX_OVERHEAD + 2 {
            return;
        }
        self.close_sealed = true;
        // Best effort: a connection whose keys fail cannot say goodbye.
        let _ = self.keys.seal(
            ALERT,
            &[1, u8::from(AlertDescription::CloseNotify)],
            &mut self.out,
        );
    }
}

/// A TLS connection whose records live in its own buffers (see the module
/// documentation); split it with [`TlsStream::into_split`]. Sends a
/// close_notify when dropped whole (a connection given up during the CQL
/// handshake).
pub(crate) struct TlsStream {
    /// `None` once split.
    parts: Option<(TcpStream, Recv, Send)>,
    kernel: Arc<Kernel>,
    /// The handshake resumed an earlier session (a ticket was accepted).
    resumed: bool,
}

fn split_already() -> io::Error {
    io::Error::other("TLS stream used after it was split")
}

/// The reading half of a [`TlsStream`].
pub(crate) struct TlsReadHalf {
    tcp: OwnedReadHalf,
    recv: Recv,
    kernel: Arc<Kernel>,
}

/// The writing half of a [`TlsStream`]: sends a close_notify when dropped
/// (if the socket takes it at once).
pub(crate) struct TlsWriteHalf {
    tcp: OwnedWriteHalf,
    send: Send,
    kernel: Arc<Kernel>,
}

impl TlsStream {
    /// Whether the handshake resumed an earlier session (the server accepted
    /// a session ticket) rather than running in full.
    pub(crate) fn resumed(&self) -> bool {
        self.resumed
    }

    /// The two halves, each with its own direction's buffer and keys: reads
    /// and writes need no lock between them.
    pub(crate) fn into_split(mut self) -> io::Result<(TlsReadHalf, TlsWriteHalf)> {
        let (tcp, recv, send) = self.parts.take().ok_or_else(split_already)?;
        let (rd, wr) = tcp.into_split();
        Ok((
            TlsReadHalf {
                tcp: rd,
                recv,
                kernel: self.kernel.clone(),
            },
            TlsWriteHalf {
                tcp: wr,
                send,
                kernel: self.kernel.clone(),
            },
        ))
    }
}

impl Drop for TlsStream {
    fn drop(&mut self) {
        if let Some((tcp, _, send)) = &mut self.parts {
            send.close_on_drop(|b| tcp.try_write(b));
        }
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let Some((tcp, recv, _)) = &mut me.parts else {
            return Poll::Ready(Err(split_already()));
        };
        recv.poll_read(tcp, &me.kernel, cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let Some((tcp, _, send)) = &mut me.parts else {
            return Poll::Ready(Err(split_already()));
        };
        send.poll_write(tcp, &me.kernel, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((tcp, _, send)) = &mut self.get_mut().parts else {
            return Poll::Ready(Err(split_already()));
        };
        ready!(send.poll_drain(tcp, cx))?;
        Pin::new(tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((tcp, _, send)) = &mut self.get_mut().parts else {
            return Poll::Ready(Err(split_already()));
        };
        send.seal_close_notify();
        ready!(send.poll_drain(tcp, cx))?;
        Pin::new(tcp).poll_shutdown(cx)
    }
}

impl AsyncRead for TlsReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.recv.poll_read(&mut me.tcp, &me.kernel, cx, buf)
    }
}

impl AsyncWrite for TlsWriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        me.send.poll_write(&mut me.tcp, &me.kernel, cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        ready!(me.send.poll_drain(&mut me.tcp, cx))?;
        Pin::new(&mut me.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.send.seal_close_notify();
        ready!(me.send.poll_drain(&mut me.tcp, cx))?;
        Pin::new(&mut me.tcp).poll_shutdown(cx)
    }
}

impl Drop for TlsWriteHalf {
    fn drop(&mut self) {
        let tcp = &self.tcp;
        self.send.close_on_drop(|b| tcp.try_write(b));
    }
}

/// Runs rustls' handshake on `tcp` (unbuffered: records in buffers of this
/// function), then takes the traffic keys over. Errors from rustls arrive
/// wrapped in `io::Error`, as from tokio-rustls, for the same
/// classification.
pub(crate) async fn handshake(
    mut tcp: TcpStream,
    mut conn: UnbufferedClientConnection,
) -> io::Result<TlsStream> {
    let mut incoming = vec![0u8; RECV_CAP];
    let mut filled = 0usize;
    let mut outgoing: Vec<u8> = Vec::new();
    let mut out_len = 0usize;
    // Application data that arrived with the handshake's last records.
    let mut early_plain: Vec<u8> = Vec::new();
    // Bounded: each round consumes records, writes, or reads (a read of 0
    // bytes ends it), and the caller's timeout bounds the whole.
    loop {
        let UnbufferedStatus { discard, state } = conn.process_tls_records(&mut incoming[..filled]);
        let state = match state {
            Ok(state) => state,
            Err(e) => {
                send_alert(&mut conn, &mut tcp).await;
                return Err(tls_error(e));
            }
        };
        let done = match state {
            ConnectionState::EncodeTlsData(mut enc) => {
                loop {
                    match enc.encode(&mut outgoing[out_len..]) {
                        Ok(n) => {
                            out_len += n;
                            break;
                        }
                        Err(EncodeError::InsufficientSize(s)) => {
                            outgoing.resize(out_len + s.required_size, 0);
                        }
                        Err(EncodeError::AlreadyEncoded) => break,
                    }
                }
                false
            }
            ConnectionState::TransmitTlsData(t) => {
                tcp.write_all(&outgoing[..out_len]).await?;
                out_len = 0;
                t.done();
                false
            }
            ConnectionState::BlockedHandshake => {
                if filled == incoming.len() {
                    if incoming.len() >= MAX_HANDSHAKE_BUF {
                        return Err(unexpected("a handshake message over 1 MiB"));
                    }
                    incoming.resize(incoming.len() * 2, 0);
                }
                let n = tcp.read(&mut incoming[filled..]).await?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the server closed the connection during the TLS handshake",
                    ));
                }
                filled += n;
                false
            }
            ConnectionState::ReadTraffic(mut r) => {
                // Bounded: by the records buffered.
                while let Some(rec) = r.next_record() {
                    early_plain.extend_from_slice(rec.map_err(tls_error)?.payload);
                }
                false
            }
            ConnectionState::WriteTraffic(_) => true,
            ConnectionState::PeerClosed | ConnectionState::Closed => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the TLS session during the handshake",
                ))
            }
            _ => return Err(unexpected("a TLS state the driver does not handle")),
        };
        incoming.copy_within(discard..filled, 0);
        filled -= discard;
        if done {
            break;
        }
    }
    if out_len > 0 {
        tcp.write_all(&outgoing[..out_len]).await?;
    }
    let tls13 = conn.protocol_version() == Some(ProtocolVersion::TLSv1_3);
    let resumed = conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    let (secrets, kernel) = conn.dangerous_into_kernel_connection().map_err(tls_error)?;
    let limit = match kernel.negotiated_cipher_suite() {
        SupportedCipherSuite::Tls13(s) => s.common.confidentiality_limit,
        SupportedCipherSuite::Tls12(s) => s.common.confidentiality_limit,
    };
    let send_limit = limit - limit / 8;
    let send = Send {
        out: Vec::with_capacity(SEND_CAP),
        sent: 0,
        keys: Keys::new(tls13, secrets.tx.0, secrets.tx.1)?,
        close_sealed: false,
    };
    let p = early_plain.len();
    let buf = receive_buffer(incoming, filled, &early_plain);
    let recv = Recv {
        buf,
        start: p,
        end: p + filled,
        plain: (0, p),
        keys: Keys::new(tls13, secrets.rx.0, secrets.rx.1)?,
        closed: false,
    };
    Ok(TlsStream {
        parts: Some((tcp, recv, send)),
        kernel: Arc::new(Kernel {
            conn: Mutex::new(kernel),
            tls13,
            update_requested: AtomicBool::new(false),
            send_limit,
        }),
        resumed,
    })
}

/// The connection's receive buffer: the plaintext that came with the
/// handshake's last records, then the `filled` bytes of `incoming` that
/// followed them (records not opened yet); at least [`RECV_CAP`] long. The
/// handshake's buffer is reused when it has that size (it has, unless a
/// handshake message over its size made it grow), saving an allocation and
/// a copy per connection.
fn receive_buffer(mut incoming: Vec<u8>, filled: usize, early_plain: &[u8]) -> Box<[u8]> {
    let p = early_plain.len();
    let size = RECV_CAP.max(p + filled);
    let mut buf = if incoming.len() == size {
        incoming.copy_within(..filled, p);
        incoming.into_boxed_slice()
    } else {
        let mut fresh = vec![0u8; size].into_boxed_slice();
        fresh[p..p + filled].copy_from_slice(&incoming[..filled]);
        fresh
    };
    buf[..p].copy_from_slice(early_plain);
    buf
}

/// After a handshake error, the alert rustls queued for the server (unknown
/// CA, bad certificate...), if any: best effort, as the error is what
/// counts.
async fn send_alert(conn: &mut UnbufferedClientConnection, tcp: &mut TcpStream) {
    let mut alert = [0u8; 64];
    let n = match conn.process_tls_records(&mut []).state {
        Ok(ConnectionState::EncodeTlsData(mut enc)) => enc.encode(&mut alert).unwrap_or(0),
        _ => 0,
    };
    if n > 0 {
        let _ = tcp.write_all(&alert[..n]).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

    /// An echoing rustls server speaking `version` on loopback, and a
    /// stream of ours connected to it (after the handshake), with our send
    /// limit set to `send_limit` records; the server task ends with how the
    /// client's side ended.
    async fn echo_pair(
        version: &'static rustls::SupportedProtocolVersion,
        send_limit: u64,
    ) -> (TlsStream, tokio::task::JoinHandle<io::Result<()>>) {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap();
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let echo = tokio::spawn(async move {
            let (tcp, _) = l.accept().await.unwrap();
            let mut s = acceptor.accept(tcp).await.unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            // Bounded: ends at the client's close.
            loop {
                let n = s.read(&mut buf).await?;
                if n == 0 {
                    return Ok::<(), io::Error>(());
                }
                s.write_all(&buf[..n]).await?;
                s.flush().await?;
            }
        });
        let tls = super::super::tls::TlsConfig::builder()
            .danger_accept_invalid_certs()
            .record_layer(super::super::tls::RecordLayer::Driver)
            .build()
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn = UnbufferedClientConnection::new(tls.client.clone(), name).unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let mut s = handshake(tcp, conn).await.unwrap();
        Arc::get_mut(&mut s.kernel).unwrap().send_limit = send_limit;
        (s, echo)
    }

    #[test]
    fn the_receive_buffer_holds_early_plaintext_then_the_unread_records() {
        // The handshake's buffer as it is (RECV_CAP), reused.
        let mut incoming = vec![0u8; RECV_CAP];
        incoming[..5].copy_from_slice(b"12345");
        let ptr = incoming.as_ptr();
        let buf = receive_buffer(incoming, 5, b"plain");
        assert_eq!(buf.len(), RECV_CAP);
        assert_eq!(buf.as_ptr(), ptr, "reused");
        assert_eq!(&buf[..10], b"plain12345");
        // No early plaintext, nothing left over.
        let buf = receive_buffer(vec![7u8; RECV_CAP], 0, b"");
        assert_eq!(buf.len(), RECV_CAP);
        // A buffer grown past RECV_CAP by a large handshake message, holding
        // little now: a fresh one of RECV_CAP.
        let mut grown = vec![0u8; RECV_CAP * 2];
        grown[..3].copy_from_slice(b"abc");
        let buf = receive_buffer(grown, 3, b"xy");
        assert_eq!(buf.len(), RECV_CAP);
        assert_eq!(&buf[..5], b"xyabc");
        // More than RECV_CAP to keep: as long as needed.
        let mut full = vec![1u8; RECV_CAP];
        full[RECV_CAP - 1] = 9;
        let buf = receive_buffer(full, RECV_CAP, b"pp");
        assert_eq!(buf.len(), RECV_CAP + 2);
        assert_eq!(&buf[..3], b"pp\x01");
        assert_eq!(buf[RECV_CAP + 1], 9);
    }

    /// Message `i` of a test: some span several records.
    fn message(i: u32) -> Vec<u8> {
        (0..(i as usize * 3000 + 1))
            .map(|b| (b as u32 ^ i) as u8)
            .collect()
    }

    /// Our own KeyUpdate (sent when our keys reach their limit, here forced
    /// to a few records): an echoing rustls server keeps decrypting what we
    /// send after it, so the update and the new keys are right.
    #[tokio::test]
    async fn our_key_updates_are_followed_by_the_server() {
        let (mut s, echo) = echo_pair(&rustls::version::TLS13, 3).await;
        for i in 0..20u32 {
            let msg = message(i);
            s.write_all(&msg).await.unwrap();
            s.flush().await.unwrap();
            let mut back = vec![0u8; msg.len()];
            s.read_exact(&mut back).await.unwrap();
            assert_eq!(back, msg, "message {i}");
        }
        let (_, _, send) = s.parts.as_ref().unwrap();
        assert!(send.keys.seq <= 4, "the keys were renewed: {}", send.keys.seq);
        drop(s);
        // The close_notify makes it a clean close.
        echo.await.unwrap().unwrap();
    }

    /// TLS 1.2 has no KeyUpdate: at the limit the connection ends, with an
    /// error that says why, before a record goes out under worn keys.
    #[tokio::test]
    async fn tls12_ends_at_the_limit() {
        let (mut s, echo) = echo_pair(&rustls::version::TLS12, 5).await;
        // The keys already sealed the handshake's Finished.
        let first = s.parts.as_ref().unwrap().2.keys.seq;
        assert_eq!(first, 1);
        let mut sent = 0;
        let e = loop {
            let msg = message(1);
            if let Err(e) = s.write_all(&msg).await {
                break e;
            }
            s.flush().await.unwrap();
            let mut back = vec![0u8; msg.len()];
            s.read_exact(&mut back).await.unwrap();
            assert_eq!(back, msg);
            sent += 1;
            assert!(sent <= 4, "records went past the limit");
        };
        assert_eq!(sent, 4);
        assert!(e.to_string().contains("limit"), "{e}");
        drop(s);
        echo.await.unwrap().unwrap();
    }
}

#[cfg(test)]
mod record_properties {
    //! Sealing and opening are inverse for every layout and suite with a
    //! 32-byte key, and a damaged or forged record is refused (an error,
    //! never a panic, never plaintext).
    use super::*;
    use proptest::prelude::*;
    use rustls::crypto::cipher::{AeadKey, Iv};

    /// Keys of one direction: suite `chacha` (else AES-256-GCM), TLS 1.3 or
    /// 1.2, from raw bytes, starting at sequence number `seq`.
    fn keys(chacha: bool, tls13: bool, key: [u8; 32], iv: [u8; 12], seq: u64) -> Keys {
        let (key, iv) = (AeadKey::from(key), Iv::new(iv));
        let secrets = if chacha {
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv }
        } else {
            ConnectionTrafficSecrets::Aes256Gcm { key, iv }
        };
        Keys::new(tls13, seq, secrets).unwrap()
    }

    fn record_type() -> impl Strategy<Value = u8> {
        prop_oneof![Just(APPLICATION_DATA), Just(HANDSHAKE), Just(ALERT)]
    }

    /// Opens the one record at the start of `out`.
    fn open_one(keys: &mut Keys, out: &mut [u8]) -> io::Result<(u8, Vec<u8>)> {
        let mut header = [0u8; HEADER];
        header.copy_from_slice(&out[..HEADER]);
        let body = &mut out[HEADER..];
        let (typ, range) = keys.open(header, body)?;
        Ok((typ, body[range].to_vec()))
    }

    proptest! {
        #[test]
        fn opened_records_are_what_was_sealed(
            chacha: bool,
            tls13: bool,
            key: [u8; 32],
            iv: [u8; 12],
            seq in 0u64..u64::MAX - 64,
            records in proptest::collection::vec(
                (record_type(), proptest::collection::vec(any::<u8>(), 0..2048)),
                1..8,
            ),
        ) {
            let mut tx = keys(chacha, tls13, key, iv, seq);
            let mut rx = keys(chacha, tls13, key, iv, seq);
            for (typ, plain) in &records {
                let mut out = Vec::with_capacity(HEADER + plain.len() + MAX_OVERHEAD);
                tx.seal(*typ, plain, &mut out).unwrap();
                prop_assert!(out.len() <= HEADER + plain.len() + MAX_OVERHEAD);
                let declared = u16::from_be_bytes([out[3], out[4]]) as usize;
                prop_assert_eq!(declared, out.len() - HEADER);
                let (got_typ, got) = open_one(&mut rx, &mut out).unwrap();
                prop_assert_eq!(got_typ, *typ);
                prop_assert_eq!(&got, plain);
            }
        }

        #[test]
        fn a_damaged_record_is_refused(
            chacha: bool,
            tls13: bool,
            key: [u8; 32],
            iv: [u8; 12],
            typ in record_type(),
            plain in proptest::collection::vec(any::<u8>(), 0..512),
            flip in any::<proptest::sample::Index>(),
            bit in 0u8..8,
        ) {
            let mut tx = keys(chacha, tls13, key, iv, 0);
            let mut rx = keys(chacha, tls13, key, iv, 0);
            let mut out = Vec::with_capacity(HEADER + plain.len() + MAX_OVERHEAD);
            tx.seal(typ, &plain, &mut out).unwrap();
            // Any bit of the record but the length field (which frames it).
            let mut at = flip.index(out.len());
            if at == 3 || at == 4 {
                at = 0;
            }
            out[at] ^= 1 << bit;
            prop_assert!(open_one(&mut rx, &mut out).is_err());
        }

        #[test]
        fn forged_records_are_refused(
            chacha: bool,
            tls13: bool,
            key: [u8; 32],
            iv: [u8; 12],
            header: [u8; HEADER],
            mut body in proptest::collection::vec(any::<u8>(), 0..256),
        ) {
            let mut rx = keys(chacha, tls13, key, iv, 0);
            prop_assert!(rx.open(header, &mut body).is_err());
        }

        #[test]
        fn a_record_out_of_sequence_is_refused(
            chacha: bool,
            tls13: bool,
            key: [u8; 32],
            iv: [u8; 12],
            plain in proptest::collection::vec(any::<u8>(), 0..256),
            skip in 1u64..1000,
        ) {
            let mut tx = keys(chacha, tls13, key, iv, skip);
            let mut rx = keys(chacha, tls13, key, iv, 0);
            let mut out = Vec::with_capacity(HEADER + plain.len() + MAX_OVERHEAD);
            tx.seal(APPLICATION_DATA, &plain, &mut out).unwrap();
            // TLS 1.2 with AES-GCM carries its nonce explicitly: the
            // sequence number still enters the additional data.
            prop_assert!(open_one(&mut rx, &mut out).is_err());
        }
    }
}
