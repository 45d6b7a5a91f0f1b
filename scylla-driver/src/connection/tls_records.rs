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
//!
//! What the receiving side enforces:
//! - record sizes: a TLS 1.3 ciphertext of at most 2^14 + 256 bytes, a TLS
//!   1.2 one of at most 2^14 + 2048, and at most 2^14 bytes of plaintext in
//!   either (`record_overflow`);
//! - handshake messages after the handshake (session tickets, KeyUpdate)
//!   may be split across records (RFC 8446 section 5.1): they are
//!   reassembled, up to [`MAX_HANDSHAKE_MESSAGE`] bytes, with no record of
//!   another type between the pieces;
//! - bounds on what carries no application data: [`MAX_EMPTY_RECORDS`]
//!   empty records, [`MAX_KEY_UPDATES`] KeyUpdates and
//!   [`MAX_WARNING_ALERTS`] warning alerts in a row;
//! - alerts are two bytes of a known level (warning or fatal).
//!
//! The first error of either direction poisons the connection: every later
//! read and write fails (nothing after a forged record is ever handed out),
//! and the alert that fits the error (`bad_record_mac`, `record_overflow`,
//! `unexpected_message`, `decode_error`...) goes to the server in place of
//! the close_notify.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{ready, Context, Poll};

use ring::aead;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::{AlertDescription, ConnectionTrafficSecrets, ProtocolVersion, SupportedCipherSuite};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

/// The most plaintext one record carries (RFC 8446 section 5.1, RFC 5246
/// section 6.2.1).
const MAX_PLAINTEXT: usize = 16 * 1024;
/// The longest TLS 1.3 record body (RFC 8446 section 5.2).
const MAX_BODY_TLS13: usize = MAX_PLAINTEXT + 256;
/// The longest TLS 1.2 record body (RFC 5246 section 6.2.3).
const MAX_BODY_TLS12: usize = MAX_PLAINTEXT + 2048;
/// The longest record body of either version (what the buffers hold).
const MAX_BODY: usize = MAX_BODY_TLS12;
/// The longest handshake message after the handshake (a session ticket, a
/// KeyUpdate), reassembled from the records it is split across.
const MAX_HANDSHAKE_MESSAGE: usize = 64 * 1024;
/// Empty application data records accepted in a row (rustls' bound too):
/// each costs a decryption and carries nothing.
const MAX_EMPTY_RECORDS: u32 = 32;
/// KeyUpdates (and TLS 1.2 HelloRequests) accepted without application data
/// between them.
const MAX_KEY_UPDATES: u32 = 32;
/// Warning alerts (`user_canceled`) accepted without application data
/// between them.
const MAX_WARNING_ALERTS: u32 = 4;
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
    /// Nothing of a record that fails to seal stays in `out`.
    fn seal(&mut self, typ: u8, plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        // A sequence number never wraps (RFC 8446 section 5.3): its nonce
        // would repeat. Keys are renewed long before (`Send::renew_keys`).
        if self.seq == u64::MAX {
            return Err(tls_error(rustls::Error::EncryptError));
        }
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
        let Ok(tag) = sealed else {
            out.truncate(start);
            return Err(tls_error(rustls::Error::EncryptError));
        };
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
    ) -> Result<(u8, std::ops::Range<usize>), Fatal> {
        let max_body = if self.layout == Layout::Tls13 {
            MAX_BODY_TLS13
        } else {
            MAX_BODY_TLS12
        };
        if body.len() > max_body {
            return Err(Fatal::new(
                AlertDescription::RecordOverflow,
                "a record longer than TLS allows",
            ));
        }
        let (typ, range) = match self.layout {
            Layout::Tls13 => {
                if header[0] != APPLICATION_DATA {
                    return Err(Fatal::new(
                        AlertDescription::UnexpectedMessage,
                        "a record in the clear after the handshake",
                    ));
                }
                let plain = self
                    .key
                    .open_in_place(
                        aead::Nonce::assume_unique_for_key(self.nonce()),
                        aead::Aad::from(header),
                        body,
                    )
                    .map_err(|_| Fatal::bad_mac())?;
                // TLSInnerPlaintext: at most 2^14 bytes and the type
                // (RFC 8446 section 5.4).
                if plain.len() > MAX_PLAINTEXT + 1 {
                    return Err(Fatal::new(
                        AlertDescription::RecordOverflow,
                        "a record of more than 2^14 bytes of plaintext",
                    ));
                }
                // The content type is the last non-zero byte (zeros pad).
                let Some(at) = plain.iter().rposition(|&b| b != 0) else {
                    return Err(Fatal::new(
                        AlertDescription::UnexpectedMessage,
                        "a TLS 1.3 record with no content type",
                    ));
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
                    return Err(Fatal::bad_mac());
                }
                let mut nonce = self.nonce();
                if explicit > 0 {
                    nonce[4..].copy_from_slice(&body[..8]);
                }
                let aad = self.aad12(
                    header[0],
                    [header[1], header[2]],
                    body.len() - explicit - TAG,
                );
                let plain = self
                    .key
                    .open_in_place(
                        aead::Nonce::assume_unique_for_key(nonce),
                        aead::Aad::from(aad),
                        &mut body[explicit..],
                    )
                    .map_err(|_| Fatal::bad_mac())?;
                if plain.len() > MAX_PLAINTEXT {
                    return Err(Fatal::new(
                        AlertDescription::RecordOverflow,
                        "a record of more than 2^14 bytes of plaintext",
                    ));
                }
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

/// A record error: it ends the connection, and `alert` (if any) is what
/// the server is told.
#[derive(Debug)]
struct Fatal {
    alert: Option<AlertDescription>,
    error: io::Error,
}

impl Fatal {
    /// An error of the server's records, answered with `alert`.
    fn new(alert: AlertDescription, what: &'static str) -> Fatal {
        Fatal {
            alert: Some(alert),
            error: tls_error(rustls::Error::General(format!(
                "invalid TLS record from the server ({alert:?}): {what}"
            ))),
        }
    }

    /// A record that fails authentication (forged, damaged, out of
    /// sequence).
    fn bad_mac() -> Fatal {
        Fatal {
            alert: Some(AlertDescription::BadRecordMac),
            error: tls_error(rustls::Error::DecryptError),
        }
    }

    /// A local failure (keys, lock), answered with `internal_error`.
    fn internal(error: io::Error) -> Fatal {
        Fatal {
            alert: Some(AlertDescription::InternalError),
            error,
        }
    }
}

impl From<Fatal> for io::Error {
    fn from(f: Fatal) -> io::Error {
        f.error
    }
}

/// How the connection failed, recorded by the first error of either
/// direction.
#[derive(Debug)]
struct Failure {
    /// The first error, for the errors of every later read and write.
    message: String,
    /// The fatal alert owed to the server (`None`: nothing is sent, e.g.
    /// after the server's own fatal alert).
    alert: Option<AlertDescription>,
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
    /// Set by the first error of either direction: the connection is
    /// poisoned.
    failure: OnceLock<Failure>,
}

impl Kernel {
    /// Records `fatal` as the connection's failure (the first one counts)
    /// and returns its error.
    fn fail(&self, fatal: Fatal) -> io::Error {
        let _ = self.failure.set(Failure {
            message: fatal.error.to_string(),
            alert: fatal.alert,
        });
        fatal.error
    }

    /// The error of every read and write after the connection failed.
    fn failed(&self) -> Option<io::Error> {
        let f = self.failure.get()?;
        Some(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the TLS connection failed earlier and is unusable: {}",
                f.message
            ),
        ))
    }

    fn new_secrets(&self, tx: bool) -> io::Result<Keys> {
        let mut conn = self.lock()?;
        let (seq, secrets) = if tx {
            conn.update_tx_secret()
        } else {
            conn.update_rx_secret()
        }
        .map_err(tls_error)?;
        Keys::new(self.tls13, seq, secrets)
    }

    fn lock(
        &self,
    ) -> io::Result<std::sync::MutexGuard<'_, KernelConnection<ClientConnectionData>>> {
        self.conn
            .lock()
            .map_err(|_| io::Error::other("TLS key state poisoned"))
    }
}

/// What carries no application data, counted since the last record that
/// did: bounded, as each costs work and brings nothing.
#[derive(Debug, Default)]
struct Idle {
    empty_records: u32,
    key_updates: u32,
    warnings: u32,
}

impl Idle {
    fn count(n: &mut u32, max: u32, what: &'static str) -> Result<(), Fatal> {
        *n += 1;
        if *n > max {
            return Err(Fatal::new(AlertDescription::UnexpectedMessage, what));
        }
        Ok(())
    }

    fn empty_record(&mut self) -> Result<(), Fatal> {
        Self::count(
            &mut self.empty_records,
            MAX_EMPTY_RECORDS,
            "too many empty records in a row",
        )
    }

    fn key_update(&mut self) -> Result<(), Fatal> {
        Self::count(
            &mut self.key_updates,
            MAX_KEY_UPDATES,
            "too many KeyUpdates without application data",
        )
    }

    fn warning(&mut self) -> Result<(), Fatal> {
        Self::count(
            &mut self.warnings,
            MAX_WARNING_ALERTS,
            "too many warning alerts without application data",
        )
    }

    /// Application data came: the counts start over.
    fn data(&mut self) {
        *self = Idle::default();
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
    /// The start of a handshake message split across records (empty, and
    /// unallocated, unless one is).
    fragment: Vec<u8>,
    idle: Idle,
}

impl Recv {
    fn new(buf: Box<[u8]>, start: usize, end: usize, plain: (usize, usize), keys: Keys) -> Recv {
        Recv {
            buf,
            start,
            end,
            plain,
            keys,
            closed: false,
            fragment: Vec::new(),
            idle: Idle::default(),
        }
    }

    /// Opens the next complete record, if one is buffered, and handles it;
    /// `Ok(false)` when more bytes are needed.
    fn open_next(&mut self, kernel: &Kernel) -> Result<bool, Fatal> {
        let avail = &self.buf[self.start..self.end];
        if avail.len() < HEADER {
            return Ok(false);
        }
        let len = u16::from_be_bytes([avail[3], avail[4]]) as usize;
        // Checked before waiting for the body (and again by `Keys::open`
        // for the negotiated version).
        if len > MAX_BODY {
            return Err(Fatal::new(
                AlertDescription::RecordOverflow,
                "a record longer than TLS allows",
            ));
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
        if typ != HANDSHAKE && !self.fragment.is_empty() {
            return Err(Fatal::new(
                AlertDescription::UnexpectedMessage,
                "a record between the pieces of a handshake message",
            ));
        }
        match typ {
            APPLICATION_DATA if from == to => self.idle.empty_record()?,
            APPLICATION_DATA => {
                self.idle.data();
                self.plain = (from, to);
            }
            ALERT => self.alert(from, to)?,
            HANDSHAKE => self.post_handshake(kernel, from, to)?,
            _ => {
                return Err(Fatal::new(
                    AlertDescription::UnexpectedMessage,
                    "a record of an unknown content type",
                ))
            }
        }
        Ok(true)
    }

    /// An alert: two bytes, a known level. A close_notify ends the data; a
    /// `user_canceled` warning (a close_notify follows) is counted; any
    /// other alert ends the connection (with nothing sent back).
    fn alert(&mut self, from: usize, to: usize) -> Result<(), Fatal> {
        let &[level, desc] = &self.buf[from..to] else {
            return Err(Fatal::new(
                AlertDescription::DecodeError,
                "an alert that is not two bytes",
            ));
        };
        if level != 1 && level != 2 {
            return Err(Fatal::new(
                AlertDescription::IllegalParameter,
                "an alert of an unknown level",
            ));
        }
        let desc = AlertDescription::from(desc);
        match desc {
            AlertDescription::CloseNotify => {
                self.closed = true;
                Ok(())
            }
            AlertDescription::UserCanceled if level == 1 => self.idle.warning(),
            _ => Err(Fatal {
                alert: None,
                error: tls_error(rustls::Error::AlertReceived(desc)),
            }),
        }
    }

    /// Handshake messages after the handshake, reassembled when split
    /// across records (RFC 8446 section 5.1).
    fn post_handshake(&mut self, kernel: &Kernel, from: usize, to: usize) -> Result<(), Fatal> {
        if from == to {
            return Err(Fatal::new(
                AlertDescription::UnexpectedMessage,
                "an empty handshake record",
            ));
        }
        if self.fragment.is_empty() {
            let used =
                handle_messages(&mut self.keys, &mut self.idle, kernel, &self.buf[from..to])?;
            // The start of a message continued in the next record(s):
            // bounded by `handle_messages` (a header and at most
            // MAX_HANDSHAKE_MESSAGE bytes).
            self.fragment.extend_from_slice(&self.buf[from + used..to]);
            return Ok(());
        }
        self.fragment.extend_from_slice(&self.buf[from..to]);
        let fragment = std::mem::take(&mut self.fragment);
        let handled = handle_messages(&mut self.keys, &mut self.idle, kernel, &fragment);
        self.fragment = fragment;
        let used = handled?;
        self.fragment.drain(..used);
        if self.fragment.is_empty() && self.fragment.capacity() > 2 * MAX_PLAINTEXT {
            // A large message is done with: its memory is not kept.
            self.fragment = Vec::new();
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
        if let Some(e) = kernel.failed() {
            return Poll::Ready(Err(e));
        }
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
            match self.open_next(kernel) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(fatal) => {
                    let e = kernel.fail(fatal);
                    // What came before the bad record is handed out; the
                    // next read fails.
                    if out.filled().len() > before {
                        return Poll::Ready(Ok(()));
                    }
                    return Poll::Ready(Err(e));
                }
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

/// Handles the complete handshake messages at the start of `msgs` (session
/// tickets to rustls' store, KeyUpdate, and TLS 1.2's HelloRequest:
/// renegotiation is not offered, and ignoring it is allowed, RFC 5246
/// section 7.4.1.1); returns how many bytes they took. What is left is the
/// start of a message continued in the next record.
fn handle_messages(
    keys: &mut Keys,
    idle: &mut Idle,
    kernel: &Kernel,
    msgs: &[u8],
) -> Result<usize, Fatal> {
    let mut at = 0;
    // Bounded: each round consumes a message or returns.
    while msgs.len() - at >= 4 {
        let m = &msgs[at..];
        let len = u32::from_be_bytes([0, m[1], m[2], m[3]]) as usize;
        if len > MAX_HANDSHAKE_MESSAGE {
            return Err(Fatal::new(
                AlertDescription::DecodeError,
                "a handshake message over 64 KiB after the handshake",
            ));
        }
        if m.len() < 4 + len {
            break;
        }
        let body = &m[4..4 + len];
        match m[0] {
            NEW_SESSION_TICKET if kernel.tls13 => {
                let mut conn = kernel.lock().map_err(Fatal::internal)?;
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
                    _ => {
                        return Err(Fatal::new(
                            AlertDescription::DecodeError,
                            "a malformed KeyUpdate",
                        ))
                    }
                };
                // The new keys start with the next record (RFC 8446
                // section 5.1: a KeyUpdate ends its record).
                if at + 4 + len != msgs.len() {
                    return Err(Fatal::new(
                        AlertDescription::UnexpectedMessage,
                        "a KeyUpdate not at the end of its record",
                    ));
                }
                idle.key_update()?;
                *keys = kernel.new_secrets(false).map_err(Fatal::internal)?;
                if requested {
                    kernel.update_requested.store(true, Ordering::Release);
                }
                tracing::debug!(requested, "TLS KeyUpdate from the server");
            }
            HELLO_REQUEST if !kernel.tls13 => idle.key_update()?,
            _ => {
                return Err(Fatal::new(
                    AlertDescription::UnexpectedMessage,
                    "a handshake message after the handshake",
                ))
            }
        }
        at += 4 + len;
    }
    Ok(at)
}

/// The sending direction: records sealed into `out`, then written.
struct Send {
    out: Vec<u8>,
    /// How much of `out` is written.
    sent: usize,
    keys: Keys,
    /// The last alert (close_notify, or the fatal alert of the connection's
    /// failure) is sealed: it goes once, and nothing follows it.
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
    fn renew_keys(&mut self, kernel: &Kernel) -> Result<(), Fatal> {
        let requested = kernel.update_requested.swap(false, Ordering::AcqRel);
        if !requested && self.keys.seq < kernel.send_limit {
            return Ok(());
        }
        if !kernel.tls13 {
            // Not an error of either side: a close_notify says goodbye.
            return Err(Fatal {
                alert: Some(AlertDescription::CloseNotify),
                error: io::Error::other(
                    "the TLS 1.2 keys of this connection reached their cipher suite's limit; \
                     the connection ends (a new one gets new keys)",
                ),
            });
        }
        // KeyUpdate, update_not_requested (RFC 8446 section 4.6.3).
        self.keys
            .seal(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], &mut self.out)
            .map_err(Fatal::internal)?;
        self.keys = kernel.new_secrets(true).map_err(Fatal::internal)?;
        tracing::debug!(requested, "TLS KeyUpdate sent");
        Ok(())
    }

    /// Seals as much of `buf` as `out` has room for; returns how much.
    fn seal_data(&mut self, kernel: &Kernel, buf: &[u8]) -> Result<usize, Fatal> {
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
                .seal(APPLICATION_DATA, &buf[taken..taken + n], &mut self.out)
                .map_err(Fatal::internal)?;
            taken += n;
        }
        Ok(taken)
    }

    fn poll_write<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        kernel: &Kernel,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(e) = kernel.failed() {
            return self.poll_failed(io, kernel, cx, e);
        }
        ready!(self.poll_drain(io, cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let taken = match self.seal_data(kernel, buf) {
            Ok(n) => n,
            Err(fatal) => {
                let e = kernel.fail(fatal);
                return self.poll_failed(io, kernel, cx, e);
            }
        };
        // Start writing now; what the socket does not take yet goes before
        // the next record (or on flush).
        if let Poll::Ready(Err(e)) = self.poll_drain(io, cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(taken))
    }

    /// A write after the connection failed: the alert owed to the server
    /// goes out (best effort), and the write fails with `e`.
    fn poll_failed<W: AsyncWrite + Unpin, T>(
        &mut self,
        io: &mut W,
        kernel: &Kernel,
        cx: &mut Context<'_>,
        e: io::Error,
    ) -> Poll<io::Result<T>> {
        self.seal_last_alert(kernel);
        let _ = self.poll_drain(io, cx);
        Poll::Ready(Err(e))
    }

    /// On drop: the last alert, if the socket takes it at once and only on
    /// a record boundary (a record half written cannot be followed by
    /// another).
    fn close_on_drop(
        &mut self,
        kernel: &Kernel,
        try_write: impl FnOnce(&[u8]) -> io::Result<usize>,
    ) {
        if self.sent != 0 || !self.out.is_empty() || self.close_sealed {
            return;
        }
        self.seal_last_alert(kernel);
        if !self.out.is_empty() {
            let _ = try_write(&self.out);
        }
    }

    /// Seals the last alert: a close_notify, or after a failure the alert
    /// that fits it (fatal), or nothing (after the server's own fatal
    /// alert).
    fn seal_last_alert(&mut self, kernel: &Kernel) {
        if self.close_sealed || SEND_CAP - self.out.len() < MAX_OVERHEAD + 2 {
            return;
        }
        self.close_sealed = true;
        let alert = match kernel.failure.get() {
            None => Some(AlertDescription::CloseNotify),
            Some(f) => f.alert,
        };
        let Some(desc) = alert else {
            return;
        };
        let level = if desc == AlertDescription::CloseNotify {
            1
        } else {
            2
        };
        // Best effort: a connection whose keys fail cannot say goodbye.
        let _ = self
            .keys
            .seal(ALERT, &[level, u8::from(desc)], &mut self.out);
    }
}

/// A TLS connection whose records live in its own buffers (see the module
/// documentation); split it with [`TlsStream::into_split`]. Sends a
/// close_notify (or the alert of its failure) when dropped whole (a
/// connection given up during the CQL handshake).
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

/// The writing half of a [`TlsStream`]: sends a close_notify (or the alert
/// of the connection's failure) when dropped (if the socket takes it at
/// once).
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
            send.close_on_drop(&self.kernel, |b| tcp.try_write(b));
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
        let me = self.get_mut();
        let Some((tcp, _, send)) = &mut me.parts else {
            return Poll::Ready(Err(split_already()));
        };
        ready!(send.poll_drain(tcp, cx))?;
        if let Some(e) = me.kernel.failed() {
            return Poll::Ready(Err(e));
        }
        Pin::new(tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let Some((tcp, _, send)) = &mut me.parts else {
            return Poll::Ready(Err(split_already()));
        };
        send.seal_last_alert(&me.kernel);
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
        if let Some(e) = me.kernel.failed() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut me.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.send.seal_last_alert(&me.kernel);
        ready!(me.send.poll_drain(&mut me.tcp, cx))?;
        Pin::new(&mut me.tcp).poll_shutdown(cx)
    }
}

impl Drop for TlsWriteHalf {
    fn drop(&mut self) {
        let tcp = &self.tcp;
        self.send.close_on_drop(&self.kernel, |b| tcp.try_write(b));
    }
}

/// Runs rustls' handshake on `tcp` (unbuffered: records in buffers of this
/// function), then takes the traffic keys over. Errors from rustls arrive
/// wrapped in `io::Error`, as from tokio-rustls, for the same
/// classification.
pub(crate) async fn handshake(
    mut tcp: TcpStream,
    conn: UnbufferedClientConnection,
) -> io::Result<TlsStream> {
    let (recv, send, kernel, resumed) = handshake_on(&mut tcp, conn).await?;
    Ok(TlsStream {
        parts: Some((tcp, recv, send)),
        kernel: Arc::new(kernel),
        resumed,
    })
}

/// [`handshake`] on any byte stream: the two directions' state, rustls'
/// part, and whether the session was resumed.
async fn handshake_on<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    mut conn: UnbufferedClientConnection,
) -> io::Result<(Recv, Send, Kernel, bool)> {
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
                send_alert(&mut conn, stream).await;
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
                stream.write_all(&outgoing[..out_len]).await?;
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
                let n = stream.read(&mut incoming[filled..]).await?;
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
        stream.write_all(&outgoing[..out_len]).await?;
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
    let recv = Recv::new(
        buf,
        p,
        p + filled,
        (0, p),
        Keys::new(tls13, secrets.rx.0, secrets.rx.1)?,
    );
    let kernel = Kernel {
        conn: Mutex::new(kernel),
        tls13,
        update_requested: AtomicBool::new(false),
        send_limit,
        failure: OnceLock::new(),
    };
    Ok((recv, send, kernel, resumed))
}

/// The receiving half of the driver's record layer over any byte stream,
/// after rustls' handshake on it. It exists for the `tls_records` fuzz
/// target (`fuzz/`), which runs the handshake in memory against a rustls
/// server holding the traffic keys and then feeds crafted records to the
/// reader; it is no API of the driver (hidden, `unstable-internals` only).
/// The sending half is dropped: nothing is written after the handshake.
#[cfg(feature = "unstable-internals")]
#[doc(hidden)]
pub async fn fuzz_receiver<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    conn: UnbufferedClientConnection,
) -> io::Result<impl AsyncRead + Unpin> {
    let (recv, _send, kernel, _resumed) = handshake_on(&mut stream, conn).await?;
    Ok(FuzzReceiver {
        stream,
        recv,
        kernel,
    })
}

/// What [`fuzz_receiver`] returns: the stream and the receiving state.
#[cfg(feature = "unstable-internals")]
struct FuzzReceiver<S> {
    stream: S,
    recv: Recv,
    kernel: Kernel,
}

#[cfg(feature = "unstable-internals")]
impl<S: AsyncRead + Unpin> AsyncRead for FuzzReceiver<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        me.recv.poll_read(&mut me.stream, &me.kernel, cx, buf)
    }
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
async fn send_alert<S: AsyncWrite + Unpin>(conn: &mut UnbufferedClientConnection, stream: &mut S) {
    let mut alert = [0u8; 64];
    let n = match conn.process_tls_records(&mut []).state {
        Ok(ConnectionState::EncodeTlsData(mut enc)) => enc.encode(&mut alert).unwrap_or(0),
        _ => 0,
    };
    if n > 0 {
        let _ = stream.write_all(&alert[..n]).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

    /// A rustls server configuration for `version` with a fresh
    /// self-signed certificate for "localhost".
    fn server_config(version: &'static rustls::SupportedProtocolVersion) -> rustls::ServerConfig {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .unwrap()
    }

    /// An echoing rustls server speaking `version` on loopback, and a
    /// stream of ours connected to it (after the handshake), with our send
    /// limit set to `send_limit` records; the server task ends with how the
    /// client's side ended.
    async fn echo_pair(
        version: &'static rustls::SupportedProtocolVersion,
        send_limit: u64,
    ) -> (TlsStream, tokio::task::JoinHandle<io::Result<()>>) {
        let server = server_config(version);
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
        assert!(
            send.keys.seq <= 4,
            "the keys were renewed: {}",
            send.keys.seq
        );
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

    /// A rustls server speaking `version` that hands its traffic keys over
    /// after the handshake (so the test seals records of its own choosing
    /// and opens what the client sends), and a stream of ours connected to
    /// it. Returns the stream, the server's socket, the keys the server
    /// seals with and those it opens with, and the client's ticket store.
    async fn crafted_pair(
        version: &'static rustls::SupportedProtocolVersion,
    ) -> (
        TlsStream,
        TcpStream,
        Keys,
        Keys,
        Arc<crate::connection::tls_tickets::TicketStore>,
    ) {
        let mut server = server_config(version);
        server.enable_secret_extraction = true;
        server.send_tls13_tickets = 0;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(server));
        let accept = tokio::spawn(async move {
            let (tcp, _) = l.accept().await.unwrap();
            acceptor.accept(tcp).await.unwrap()
        });
        let tls = super::super::tls::TlsConfig::builder()
            .danger_accept_invalid_certs()
            .record_layer(super::super::tls::RecordLayer::Driver)
            .build()
            .unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn = UnbufferedClientConnection::new(tls.client.clone(), name).unwrap();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let client = handshake(tcp, conn).await.unwrap();
        let (tcp, conn) = accept.await.unwrap().into_inner();
        let secrets = conn.dangerous_extract_secrets().unwrap();
        let tls13 = version.version == ProtocolVersion::TLSv1_3;
        let tx = Keys::new(tls13, secrets.tx.0, secrets.tx.1).unwrap();
        let rx = Keys::new(tls13, secrets.rx.0, secrets.rx.1).unwrap();
        (client, tcp, tx, rx, tls.tickets.clone().unwrap())
    }

    /// One record sealed with `keys`.
    fn sealed(keys: &mut Keys, typ: u8, plain: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        keys.seal(typ, plain, &mut out).unwrap();
        out
    }

    /// The records the client sends, opened, until it closes (or resets
    /// the connection: it does when it closes with bytes unread) or `max`
    /// came.
    async fn received(tcp: &mut TcpStream, keys: &mut Keys, max: usize) -> Vec<(u8, Vec<u8>)> {
        let mut records = Vec::new();
        while records.len() < max {
            let mut header = [0u8; HEADER];
            if tcp.read_exact(&mut header).await.is_err() {
                break;
            }
            let len = u16::from_be_bytes([header[3], header[4]]) as usize;
            let mut body = vec![0u8; len];
            tcp.read_exact(&mut body).await.unwrap();
            let (typ, range) = keys.open(header, &mut body).unwrap();
            records.push((typ, body[range].to_vec()));
        }
        records
    }

    const VERSIONS: [&rustls::SupportedProtocolVersion; 2] =
        [&rustls::version::TLS13, &rustls::version::TLS12];

    /// The server sends what `bad` makes (sealed with its keys): the client
    /// refuses it, stays failed for every later read and write, and tells
    /// the server `alert` (a fatal alert, in place of the close_notify).
    async fn assert_refused(
        version: &'static rustls::SupportedProtocolVersion,
        alert: AlertDescription,
        bad: impl FnOnce(&mut Keys) -> Vec<u8>,
    ) {
        let (mut s, mut server, mut tx, mut rx, _) = crafted_pair(version).await;
        let mut bytes = sealed(&mut tx, APPLICATION_DATA, b"before");
        bytes.extend(bad(&mut tx));
        server.write_all(&bytes).await.unwrap();
        let mut buf = [0u8; 64];
        let mut got = Vec::new();
        // Bounded: the server sent a few records.
        let first = loop {
            match s.read(&mut buf).await {
                Ok(0) => panic!("{alert:?}: a clean end instead of an error"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        assert_eq!(got, b"before", "{alert:?}");
        assert_eq!(
            first.kind(),
            io::ErrorKind::InvalidData,
            "{alert:?}: {first}"
        );
        // Poisoned: whatever the server sends next is never handed out.
        server
            .write_all(&sealed(&mut tx, APPLICATION_DATA, b"after"))
            .await
            .unwrap();
        let again = s.read(&mut buf).await;
        assert!(
            again.is_err(),
            "{alert:?}: read after the failure: {again:?}"
        );
        // The write fails, and the alert goes out instead.
        let w = s.write_all(b"request").await;
        assert!(w.is_err(), "{alert:?}: write after the failure");
        assert_eq!(
            received(&mut server, &mut rx, 1).await,
            vec![(ALERT, vec![2, u8::from(alert)])],
            "{alert:?} ({version:?})"
        );
        // Nothing follows it: no close_notify, no data.
        drop(s);
        assert_eq!(received(&mut server, &mut rx, usize::MAX).await, vec![]);
    }

    #[tokio::test]
    async fn a_forged_record_poisons_the_stream_and_is_answered_with_bad_record_mac() {
        for version in VERSIONS {
            assert_refused(version, AlertDescription::BadRecordMac, |tx| {
                let seq = tx.seq;
                let mut forged = sealed(tx, APPLICATION_DATA, b"forged");
                let last = forged.len() - 1;
                forged[last] ^= 1;
                // A valid record at the forged one's sequence number: a
                // layer that skipped the forged record would hand it out.
                tx.seq = seq;
                forged.extend(sealed(tx, APPLICATION_DATA, b"next"));
                forged
            })
            .await;
        }
    }

    #[tokio::test]
    async fn records_over_the_rfc_sizes_are_answered_with_record_overflow() {
        for (version, max_body) in VERSIONS.into_iter().zip([MAX_BODY_TLS13, MAX_BODY_TLS12]) {
            // A ciphertext one byte over the version's limit.
            assert_refused(version, AlertDescription::RecordOverflow, |_| {
                let mut r = vec![APPLICATION_DATA, 3, 3];
                r.extend_from_slice(&((max_body + 1) as u16).to_be_bytes());
                r.resize(HEADER + max_body + 1, 7);
                r
            })
            .await;
            // A well-sealed record of 2^14 + 1 bytes of plaintext.
            assert_refused(version, AlertDescription::RecordOverflow, |tx| {
                sealed(tx, APPLICATION_DATA, &vec![1u8; MAX_PLAINTEXT + 1])
            })
            .await;
        }
        // The largest allowed plaintext passes.
        let (mut s, mut server, mut tx, _, _) = crafted_pair(&rustls::version::TLS13).await;
        server
            .write_all(&sealed(
                &mut tx,
                APPLICATION_DATA,
                &vec![1u8; MAX_PLAINTEXT],
            ))
            .await
            .unwrap();
        let mut back = vec![0u8; MAX_PLAINTEXT];
        s.read_exact(&mut back).await.unwrap();
    }

    /// A TLS 1.3 NewSessionTicket message (RFC 8446 section 4.6.1).
    fn session_ticket(id: u8) -> Vec<u8> {
        let mut body = vec![0, 0, 0x0e, 0x10]; // lifetime: an hour
        body.extend_from_slice(&[0, 0, 0, 1]); // age_add
        body.extend_from_slice(&[1, id]); // nonce
        body.extend_from_slice(&[0, 4, id, 2, 3, 4]); // ticket
        body.extend_from_slice(&[0, 0]); // extensions
        let mut m = vec![NEW_SESSION_TICKET, 0, 0, body.len() as u8];
        m.extend(body);
        m
    }

    #[tokio::test]
    async fn handshake_messages_split_across_records_are_reassembled() {
        let since = std::time::Instant::now();
        let (mut s, mut server, mut tx, _, tickets) = crafted_pair(&rustls::version::TLS13).await;
        let (one, two) = (session_ticket(1), session_ticket(2));
        // The first ticket in three pieces (the first not even a whole
        // header), the last piece followed by the whole second ticket.
        let mut bytes = sealed(&mut tx, HANDSHAKE, &one[..2]);
        bytes.extend(sealed(&mut tx, HANDSHAKE, &one[2..9]));
        let mut rest = one[9..].to_vec();
        rest.extend_from_slice(&two);
        bytes.extend(sealed(&mut tx, HANDSHAKE, &rest));
        bytes.extend(sealed(&mut tx, APPLICATION_DATA, b"data"));
        server.write_all(&bytes).await.unwrap();
        let mut back = [0u8; 4];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"data");
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        assert_eq!(
            tickets.available_since(&name, since),
            2,
            "both tickets stored"
        );
        let recv = &s.parts.as_ref().unwrap().1;
        assert!(recv.fragment.is_empty());
    }

    #[tokio::test]
    async fn split_handshake_messages_are_bounded_and_not_interleaved() {
        // A message declared over 64 KiB.
        assert_refused(
            &rustls::version::TLS13,
            AlertDescription::DecodeError,
            |tx| {
                let len = (MAX_HANDSHAKE_MESSAGE + 1) as u32;
                let [_, a, b, c] = len.to_be_bytes();
                sealed(tx, HANDSHAKE, &[NEW_SESSION_TICKET, a, b, c, 0, 0])
            },
        )
        .await;
        // Application data between the pieces of a message.
        assert_refused(
            &rustls::version::TLS13,
            AlertDescription::UnexpectedMessage,
            |tx| {
                let ticket = session_ticket(1);
                let mut bytes = sealed(tx, HANDSHAKE, &ticket[..6]);
                bytes.extend(sealed(tx, APPLICATION_DATA, b"between"));
                bytes
            },
        )
        .await;
        // A record of no handshake bytes at all.
        assert_refused(
            &rustls::version::TLS12,
            AlertDescription::UnexpectedMessage,
            |tx| sealed(tx, HANDSHAKE, &[]),
        )
        .await;
    }

    #[tokio::test]
    async fn empty_records_and_warning_alerts_are_bounded() {
        for version in VERSIONS {
            let (mut s, mut server, mut tx, _, _) = crafted_pair(version).await;
            // As many as allowed, then data: accepted.
            let mut bytes = Vec::new();
            for _ in 0..MAX_EMPTY_RECORDS {
                bytes.extend(sealed(&mut tx, APPLICATION_DATA, b""));
            }
            for _ in 0..MAX_WARNING_ALERTS {
                bytes.extend(sealed(
                    &mut tx,
                    ALERT,
                    &[1, u8::from(AlertDescription::UserCanceled)],
                ));
            }
            bytes.extend(sealed(&mut tx, APPLICATION_DATA, b"ok"));
            server.write_all(&bytes).await.unwrap();
            let mut back = [0u8; 2];
            s.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, b"ok");
            drop(s);
            assert_refused(version, AlertDescription::UnexpectedMessage, |tx| {
                let mut bytes = Vec::new();
                for _ in 0..=MAX_EMPTY_RECORDS {
                    bytes.extend(sealed(tx, APPLICATION_DATA, b""));
                }
                bytes
            })
            .await;
            assert_refused(version, AlertDescription::UnexpectedMessage, |tx| {
                let mut bytes = Vec::new();
                for _ in 0..=MAX_WARNING_ALERTS {
                    bytes.extend(sealed(
                        tx,
                        ALERT,
                        &[1, u8::from(AlertDescription::UserCanceled)],
                    ));
                }
                bytes
            })
            .await;
        }
    }

    #[test]
    fn what_carries_no_data_is_counted_until_data_comes() {
        let mut idle = Idle::default();
        for _ in 0..MAX_KEY_UPDATES {
            idle.key_update().unwrap();
        }
        let e = idle.key_update().unwrap_err();
        assert_eq!(e.alert, Some(AlertDescription::UnexpectedMessage));
        idle.data();
        idle.key_update().unwrap();
        for _ in 0..MAX_EMPTY_RECORDS {
            idle.empty_record().unwrap();
        }
        assert!(idle.empty_record().is_err());
        for _ in 0..MAX_WARNING_ALERTS {
            idle.warning().unwrap();
        }
        assert!(idle.warning().is_err());
    }

    #[tokio::test]
    async fn alerts_of_an_unknown_level_or_length_are_refused() {
        for version in VERSIONS {
            assert_refused(version, AlertDescription::IllegalParameter, |tx| {
                sealed(tx, ALERT, &[3, u8::from(AlertDescription::CloseNotify)])
            })
            .await;
            assert_refused(version, AlertDescription::DecodeError, |tx| {
                sealed(tx, ALERT, &[1, 0, 0])
            })
            .await;
        }
        // A close_notify of a known level is a clean end.
        let (mut s, mut server, mut tx, _, _) = crafted_pair(&rustls::version::TLS13).await;
        server
            .write_all(&sealed(
                &mut tx,
                ALERT,
                &[1, u8::from(AlertDescription::CloseNotify)],
            ))
            .await
            .unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(s.read(&mut buf).await.unwrap(), 0);
    }

    /// The server's own fatal alert ends the connection, with nothing sent
    /// back.
    #[tokio::test]
    async fn a_fatal_alert_from_the_server_is_not_answered() {
        let (mut s, mut server, mut tx, mut rx, _) = crafted_pair(&rustls::version::TLS13).await;
        server
            .write_all(&sealed(
                &mut tx,
                ALERT,
                &[2, u8::from(AlertDescription::InternalError)],
            ))
            .await
            .unwrap();
        let mut buf = [0u8; 8];
        let e = s.read(&mut buf).await.unwrap_err();
        assert_eq!(
            super::super::tls::classify_io(&e),
            Some(crate::connection::TlsErrorKind::Other)
        );
        assert!(s.read(&mut buf).await.is_err());
        drop(s);
        assert_eq!(received(&mut server, &mut rx, usize::MAX).await, vec![]);
    }

    #[test]
    fn a_record_that_fails_to_seal_leaves_nothing_behind() {
        use rustls::crypto::cipher::{AeadKey, Iv};
        for tls13 in [true, false] {
            let secrets = ConnectionTrafficSecrets::Aes256Gcm {
                key: AeadKey::from([7u8; 32]),
                iv: Iv::new([1u8; 12]),
            };
            let mut keys = Keys::new(tls13, u64::MAX, secrets).unwrap();
            let mut out = b"earlier records".to_vec();
            assert!(keys.seal(APPLICATION_DATA, b"plaintext", &mut out).is_err());
            assert_eq!(out, b"earlier records");
            assert_eq!(keys.seq, u64::MAX);
        }
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
    fn open_one(keys: &mut Keys, out: &mut [u8]) -> Result<(u8, Vec<u8>), Fatal> {
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
