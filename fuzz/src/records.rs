//! The checks behind the `tls_records` fuzz target: the receiving side of
//! the driver's own TLS record layer (`RecordLayer::Driver`,
//! `scylla-driver/src/connection/tls_records.rs`).
//!
//! Each input runs rustls' handshake between a rustls server and the
//! driver (`scylla_driver::connection::fuzz_receiver`) in memory, then puts
//! the bytes the input describes on the wire from the server's side and
//! reads them with the driver's reader until it ends. The server holds its
//! traffic keys (rustls' kernel API), so records sealed here open in the
//! driver and reach its parsing after decryption.
//!
//! An input is `[config] [chunk...]`. The config byte:
//!
//! | bits | meaning |
//! |------|---------|
//! | 0 | TLS 1.2 (else TLS 1.3) |
//! | 1-2 | the suite: AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305, AES-128-GCM |
//! | 3-4 | the reader's buffer: 1, 7, 512 or 65536 bytes |
//! | 5-6 | the most the wire hands out per read: all, 1, 3 or 100 bytes |
//!
//! Each chunk starts with a tag byte: bits 0-1 are the operation, bits 2-6
//! the zeros that pad a sealed TLS 1.3 record (0-31; ignored in TLS 1.2), and bit
//! 7 ends a read after the chunk (the wire never hands out the chunk's last
//! byte and the next chunk's first byte in one read).
//!
//! | op | fields | on the wire |
//! |----|--------|-------------|
//! | 0 | `n:u8, bytes[n]` | the bytes as they are |
//! | 1 | `type:u8, n:u8, plaintext[n]` | a record of `type` sealed with the server's keys |
//! | 2 | `type:u8, n:u16, byte:u8` | a record of `n` (at most [`MAX_FILL`]) times `byte`, sealed |
//! | 3 | `type:u8, n:u8, plaintext[n], at:u8, xor:u8` | a sealed record whose byte `at` (modulo its length) is xored with `xor` |
//!
//! A chunk cut short by the end of the input takes what there is (its
//! plaintext shorter); one without its fields ends the input.
//!
//! A sealed TLS 1.3 record carries `plaintext || type || zeros`: its content
//! type is the last non-zero byte (RFC 8446 section 5.4), so a `type` of 0
//! makes the plaintext's last non-zero byte the type. When a sealed TLS 1.3
//! record ends with a complete KeyUpdate, the server moves to its next
//! traffic secret for the records after it, as a peer sending a KeyUpdate
//! does.
//!
//! What must hold: the reader ends with data, a clean end (after a
//! close_notify) or an error, never waiting for bytes the wire does not
//! have, never panicking; what it hands out is a prefix of the
//! application-data plaintexts sealed (intact) in order; after an error
//! every read fails, after the clean end every read is an end again; and an
//! input of nothing but intact application-data records within the RFC's
//! sizes is handed out whole, followed by the error of a connection closed
//! without a close_notify.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use ring::aead;
use rustls::kernel::KernelConnection;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{NoServerSessionStorage, ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{ConnectionState, EncodeError, UnbufferedStatus};
use rustls::{ConnectionTrafficSecrets, ServerConfig, SupportedCipherSuite};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};

/// Content types (RFC 8446 section 5.1).
pub const ALERT: u8 = 21;
/// The handshake content type.
pub const HANDSHAKE: u8 = 22;
/// The application data content type.
pub const APPLICATION_DATA: u8 = 23;
/// The KeyUpdate handshake message type.
pub const KEY_UPDATE: u8 = 24;
/// The most plaintext a record may carry (2^14 bytes).
pub const MAX_PLAINTEXT: usize = 16 * 1024;
/// The longest plaintext of a filled record (op 2): past both versions'
/// limits.
pub const MAX_FILL: usize = MAX_PLAINTEXT + 2048;
/// The most bytes one input puts on the wire: chunks past it are left out.
pub const MAX_WIRE: usize = 256 * 1024;

/// The AEAD tag length of every suite here.
const TAG: usize = 16;
/// Record header length.
const HEADER: usize = 5;

/// The TLS versions an input picks (config bit 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// TLS 1.3.
    Tls13,
    /// TLS 1.2.
    Tls12,
}

/// The cipher suites an input picks (config bits 1-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suite {
    /// AES-128-GCM.
    Aes128Gcm,
    /// AES-256-GCM.
    Aes256Gcm,
    /// ChaCha20-Poly1305.
    Chacha20Poly1305,
}

/// The configuration byte for `version`, `suite`, the reader's buffer size
/// (index 0-3: 1, 7, 512, 65536 bytes) and the wire's piece size (index
/// 0-3: all, 1, 3, 100 bytes).
pub fn config(version: Version, suite: Suite, read: u8, piece: u8) -> u8 {
    let v = u8::from(version == Version::Tls12);
    let s = match suite {
        Suite::Aes128Gcm => 0,
        Suite::Aes256Gcm => 1,
        Suite::Chacha20Poly1305 => 2,
    };
    v | s << 1 | (read & 3) << 3 | (piece & 3) << 5
}

const READ_SIZES: [usize; 4] = [1, 7, 512, 65536];
const PIECE_SIZES: [usize; 4] = [usize::MAX, 1, 3, 100];

/// Builds inputs (the seeds) in the format above.
#[derive(Debug, Clone)]
pub struct Input {
    bytes: Vec<u8>,
    last_tag: Option<usize>,
}

impl Input {
    /// An input starting with `config` (see [`config`]).
    pub fn new(config: u8) -> Input {
        Input {
            bytes: vec![config],
            last_tag: None,
        }
    }

    fn tag(&mut self, op: u8, pad: u8) {
        assert!(pad < 32, "padding is 5 bits");
        self.last_tag = Some(self.bytes.len());
        self.bytes.push(op | pad << 2);
    }

    /// Bytes onto the wire as they are (at most 255).
    pub fn raw(mut self, bytes: &[u8]) -> Input {
        self.tag(0, 0);
        self.bytes
            .push(u8::try_from(bytes.len()).expect("at most 255 raw bytes"));
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// A record of `typ` carrying `plain` (at most 255 bytes).
    pub fn sealed(self, typ: u8, plain: &[u8]) -> Input {
        self.padded(typ, plain, 0)
    }

    /// A record of `typ` carrying `plain`, with `pad` zeros in TLS 1.3.
    pub fn padded(mut self, typ: u8, plain: &[u8], pad: u8) -> Input {
        self.tag(1, pad);
        self.bytes.push(typ);
        self.bytes
            .push(u8::try_from(plain.len()).expect("at most 255 bytes"));
        self.bytes.extend_from_slice(plain);
        self
    }

    /// A record of `typ` carrying `n` times `byte`, with `pad` zeros in TLS
    /// 1.3.
    pub fn filled(mut self, typ: u8, n: u16, byte: u8, pad: u8) -> Input {
        self.tag(2, pad);
        self.bytes.push(typ);
        self.bytes.extend_from_slice(&n.to_be_bytes());
        self.bytes.push(byte);
        self
    }

    /// A record of `typ` carrying `plain`, its byte `at` xored with `xor`.
    pub fn damaged(mut self, typ: u8, plain: &[u8], at: u8, xor: u8) -> Input {
        self.tag(3, 0);
        self.bytes.push(typ);
        self.bytes
            .push(u8::try_from(plain.len()).expect("at most 255 bytes"));
        self.bytes.extend_from_slice(plain);
        self.bytes.extend_from_slice(&[at, xor]);
        self
    }

    /// The wire ends a read after the last chunk.
    pub fn cut(mut self) -> Input {
        let at = self.last_tag.expect("a chunk to cut after");
        self.bytes[at] |= 0x80;
        self
    }

    /// The input's bytes.
    pub fn build(self) -> Vec<u8> {
        self.bytes
    }
}

/// How the driver's reader ended.
#[derive(Debug)]
pub enum End {
    /// A clean end: the server's close_notify.
    Closed,
    /// An error.
    Failed(io::Error),
}

/// What one input did.
#[derive(Debug)]
pub struct Outcome {
    /// The plaintext the reader handed out.
    pub delivered: Vec<u8>,
    /// The application data sealed intact, in order.
    pub sealed: Vec<u8>,
    /// Whether the input was nothing but intact application data within
    /// the RFC's sizes.
    pub clean: bool,
    /// How the reader ended.
    pub end: End,
}

/// The fuzz target's body.
pub fn tls_records(data: &[u8]) {
    let _ = run(data);
}

/// Runs one input (see the module documentation) and checks what must
/// hold; `None` for an empty input.
pub fn run(data: &[u8]) -> Option<Outcome> {
    let (&cfg, chunks) = data.split_first()?;
    let version = if cfg & 1 != 0 {
        Version::Tls12
    } else {
        Version::Tls13
    };
    let suite = match (cfg >> 1) & 3 {
        1 => Suite::Aes256Gcm,
        2 => Suite::Chacha20Poly1305,
        _ => Suite::Aes128Gcm,
    };
    let read_size = READ_SIZES[usize::from((cfg >> 3) & 3)];
    let piece_size = PIECE_SIZES[usize::from((cfg >> 5) & 3)];

    let (mut reader, mut server, script) = connect(version, suite);
    let plan = server.plan(chunks);
    script.borrow_mut().start(plan.wire, piece_size);

    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let mut buf = vec![0u8; read_size];
    let mut delivered = Vec::new();
    let mut poll = |reader: &mut _, buf: &mut [u8]| read_once(reader, &mut cx, buf);
    // Bounded: each read hands out plaintext (at most what was sealed) or
    // ends the loop.
    let end = loop {
        match poll(&mut reader, &mut buf) {
            Ok(0) => break End::Closed,
            Ok(n) => {
                let got = &buf[..n];
                let at = delivered.len();
                assert!(
                    plan.sealed.len() >= at + n && &plan.sealed[at..at + n] == got,
                    "the reader handed out {n} bytes at offset {at} that were not sealed there \
                     ({} bytes of application data sealed)",
                    plan.sealed.len()
                );
                delivered.extend_from_slice(got);
            }
            Err(e) => break End::Failed(e),
        }
    };
    match &end {
        End::Closed => assert_eq!(
            poll(&mut reader, &mut buf).ok(),
            Some(0),
            "a read after the close_notify"
        ),
        End::Failed(_) => {
            let again = poll(&mut reader, &mut buf);
            assert!(again.is_err(), "a read after an error: {again:?}");
        }
    }
    if plan.clean {
        assert_eq!(
            delivered.len(),
            plan.sealed.len(),
            "valid application data not handed out whole ({end:?})"
        );
        match &end {
            End::Failed(e) if e.kind() == io::ErrorKind::UnexpectedEof => {}
            _ => panic!("valid records ended with {end:?}, not with the wire's end"),
        }
    }
    Some(Outcome {
        delivered,
        sealed: plan.sealed,
        clean: plan.clean,
        end,
    })
}

/// One read of the driver's reader: how many bytes it handed out (0: the
/// end).
fn read_once<R: AsyncRead + Unpin>(
    reader: &mut R,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> io::Result<usize> {
    let mut rb = ReadBuf::new(buf);
    match Pin::new(reader).poll_read(cx, &mut rb) {
        // The wire never waits: it has bytes or has ended.
        Poll::Pending => panic!("the record layer waits for bytes after the wire ended"),
        Poll::Ready(r) => r.map(|()| rb.filled().len()),
    }
}

/// What the chunks put on the wire, and what of it is application data.
struct Plan {
    wire: VecDeque<Vec<u8>>,
    sealed: Vec<u8>,
    clean: bool,
}

/// The server's side after the handshake: its sending keys and rustls'
/// part (for the next traffic secret after a KeyUpdate).
struct Server {
    sealer: Sealer,
    kernel: KernelConnection<ServerConnectionData>,
    /// Handshake bytes sealed so far that do not make a whole message yet.
    handshake: Vec<u8>,
}

impl Server {
    fn plan(&mut self, mut chunks: &[u8]) -> Plan {
        let mut pieces = VecDeque::from([Vec::new()]);
        let mut size = 0;
        let mut sealed = Vec::new();
        let mut clean = true;
        while size < MAX_WIRE {
            let Some((&tag, rest)) = chunks.split_first() else {
                break;
            };
            chunks = rest;
            let pad = usize::from((tag >> 2) & 0x1f);
            let record = match tag & 3 {
                0 => {
                    let Some((&n, rest)) = chunks.split_first() else {
                        break;
                    };
                    let (bytes, rest) = rest.split_at(usize::from(n).min(rest.len()));
                    chunks = rest;
                    clean &= bytes.is_empty();
                    bytes.to_vec()
                }
                op @ (1 | 3) => {
                    let Some((&[typ, n], rest)) = chunks.split_first_chunk::<2>() else {
                        break;
                    };
                    let (plain, rest) = rest.split_at(usize::from(n).min(rest.len()));
                    chunks = rest;
                    let damage = if op == 3 {
                        let Some((&[at, xor], rest)) = chunks.split_first_chunk::<2>() else {
                            break;
                        };
                        chunks = rest;
                        (xor != 0).then_some((at, xor))
                    } else {
                        None
                    };
                    self.seal(typ, plain, pad, damage, &mut sealed, &mut clean)
                }
                _ => {
                    let Some((&[typ, hi, lo, byte], rest)) = chunks.split_first_chunk::<4>() else {
                        break;
                    };
                    chunks = rest;
                    let n = usize::from(u16::from_be_bytes([hi, lo])).min(MAX_FILL);
                    self.seal(typ, &vec![byte; n], pad, None, &mut sealed, &mut clean)
                }
            };
            size += record.len();
            pieces.back_mut().expect("a piece").extend(record);
            if tag & 0x80 != 0 {
                pieces.push_back(Vec::new());
            }
        }
        Plan {
            wire: pieces,
            sealed,
            clean,
        }
    }

    /// Seals one record (damaged if `damage` is set) and notes what a
    /// correct reader makes of it.
    fn seal(
        &mut self,
        typ: u8,
        plain: &[u8],
        pad: usize,
        damage: Option<(u8, u8)>,
        sealed: &mut Vec<u8>,
        clean: &mut bool,
    ) -> Vec<u8> {
        let tls13 = self.sealer.tls13;
        let mut record = self.sealer.seal(typ, plain, pad);
        if let Some((at, xor)) = damage {
            let at = usize::from(at) % record.len();
            record[at] ^= xor;
            *clean = false;
            return record;
        }
        // TLSInnerPlaintext (content, type, padding) is at most 2^14 + 1
        // bytes (RFC 8446 section 5.4), a TLS 1.2 plaintext 2^14.
        let inner = if tls13 {
            plain.len() + 1 + pad
        } else {
            plain.len()
        };
        *clean &= typ == APPLICATION_DATA
            && !plain.is_empty()
            && inner <= MAX_PLAINTEXT + usize::from(tls13);
        // The content type and content a reader finds.
        let (typ, content) = if tls13 {
            let mut inner = plain.to_vec();
            inner.push(typ);
            match inner.iter().rposition(|&b| b != 0) {
                Some(at) => (inner[at], inner[..at].to_vec()),
                None => (0, Vec::new()),
            }
        } else {
            (typ, plain.to_vec())
        };
        if typ == APPLICATION_DATA {
            sealed.extend_from_slice(&content);
        }
        if !tls13 {
            return record;
        }
        if typ != HANDSHAKE {
            self.handshake.clear();
            return record;
        }
        // A KeyUpdate that ends its record: the records after it are sealed
        // with the next traffic secret.
        self.handshake.extend_from_slice(&content);
        let mut update = false;
        while self.handshake.len() >= 4 {
            let h = &self.handshake;
            let len = u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize;
            if h.len() < 4 + len {
                break;
            }
            update = h[0] == KEY_UPDATE && h.len() == 4 + len;
            self.handshake.drain(..4 + len);
        }
        if update {
            let next = self
                .kernel
                .update_tx_secret()
                .expect("TLS 1.3 has a next traffic secret");
            self.sealer = Sealer::new(true, next);
        }
        record
    }
}

/// The server's sending keys: records sealed as RFC 8446 section 5.2 (TLS
/// 1.3) and RFC 5288 / RFC 7905 (TLS 1.2) lay them out, with rustls'
/// nonces (the IV xor the sequence number).
struct Sealer {
    key: aead::LessSafeKey,
    iv: [u8; aead::NONCE_LEN],
    seq: u64,
    tls13: bool,
    /// TLS 1.2 AES-GCM: an 8-byte explicit nonce before the ciphertext.
    explicit_nonce: bool,
}

impl Sealer {
    fn new(tls13: bool, (seq, secrets): (u64, ConnectionTrafficSecrets)) -> Sealer {
        let (alg, key, iv, gcm) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&aead::AES_128_GCM, key, iv, true),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&aead::AES_256_GCM, key, iv, true),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (&aead::CHACHA20_POLY1305, key, iv, false)
            }
            _ => panic!("a suite the fuzz target does not pick"),
        };
        Sealer {
            key: aead::LessSafeKey::new(
                aead::UnboundKey::new(alg, key.as_ref()).expect("a key of the suite's length"),
            ),
            iv: iv.as_ref().try_into().expect("a 12-byte IV"),
            seq,
            tls13,
            explicit_nonce: !tls13 && gcm,
        }
    }

    fn nonce(&self) -> [u8; aead::NONCE_LEN] {
        let mut n = self.iv;
        for (b, s) in n[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *b ^= s;
        }
        n
    }

    /// One record of `typ` carrying `plain` (in TLS 1.3 followed by `pad`
    /// zeros inside the encryption).
    fn seal(&mut self, typ: u8, plain: &[u8], pad: usize) -> Vec<u8> {
        let nonce = self.nonce();
        let mut out;
        let body_at;
        let aad: Vec<u8>;
        if self.tls13 {
            let len = plain.len() + 1 + pad + TAG;
            out = vec![APPLICATION_DATA, 3, 3];
            out.extend_from_slice(&u16::try_from(len).expect("a short record").to_be_bytes());
            aad = out.clone();
            body_at = HEADER;
            out.extend_from_slice(plain);
            out.push(typ);
            out.resize(out.len() + pad, 0);
        } else {
            let explicit = if self.explicit_nonce { 8 } else { 0 };
            let len = explicit + plain.len() + TAG;
            out = vec![typ, 3, 3];
            out.extend_from_slice(&u16::try_from(len).expect("a short record").to_be_bytes());
            out.extend_from_slice(&nonce[aead::NONCE_LEN - explicit..]);
            body_at = HEADER + explicit;
            let mut a = self.seq.to_be_bytes().to_vec();
            a.extend_from_slice(&[typ, 3, 3]);
            a.extend_from_slice(&u16::try_from(plain.len()).expect("short").to_be_bytes());
            aad = a;
            out.extend_from_slice(plain);
        }
        let tag = self
            .key
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&aad[..]),
                &mut out[body_at..],
            )
            .expect("a record seals");
        out.extend_from_slice(tag.as_ref());
        self.seq += 1;
        out
    }
}

/// The bytes the driver's reader sees after the handshake: the wire's
/// pieces, each handed out in reads of at most `piece` bytes, then the end.
#[derive(Default)]
struct Script {
    on: bool,
    pieces: VecDeque<Vec<u8>>,
    at: usize,
    piece: usize,
}

impl Script {
    fn start(&mut self, pieces: VecDeque<Vec<u8>>, piece: usize) {
        *self = Script {
            on: true,
            pieces,
            at: 0,
            piece,
        };
    }

    fn read(&mut self, buf: &mut ReadBuf<'_>) {
        while let Some(p) = self.pieces.front() {
            if self.at < p.len() {
                let n = (p.len() - self.at).min(buf.remaining()).min(self.piece);
                buf.put_slice(&p[self.at..self.at + n]);
                self.at += n;
                return;
            }
            self.pieces.pop_front();
            self.at = 0;
        }
        // The end: nothing put in `buf`.
    }
}

/// The client's byte stream: an in-memory pipe to the server for the
/// handshake, then the script.
struct Wire {
    pipe: DuplexStream,
    script: Rc<RefCell<Script>>,
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let mut script = me.script.borrow_mut();
        if script.on {
            script.read(buf);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.pipe).poll_read(cx, buf)
    }
}

impl AsyncWrite for Wire {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        if me.script.borrow().on {
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut me.pipe).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().pipe).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().pipe).poll_shutdown(cx)
    }
}

/// The rustls server configurations, one per version and suite, sharing a
/// self-signed certificate made once per process.
fn server_config(version: Version, suite: Suite) -> Arc<ServerConfig> {
    static CONFIGS: OnceLock<Vec<Arc<ServerConfig>>> = OnceLock::new();
    let configs = CONFIGS.get_or_init(|| {
        let key = rcgen::KeyPair::generate().expect("a key pair");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .expect("certificate parameters")
            .self_signed(&key)
            .expect("a certificate");
        let der = key.serialize_der();
        let mut out = Vec::new();
        for v in [Version::Tls13, Version::Tls12] {
            for s in [Suite::Aes128Gcm, Suite::Aes256Gcm, Suite::Chacha20Poly1305] {
                use rustls::crypto::ring::cipher_suite as cs;
                let one: SupportedCipherSuite = match (v, s) {
                    (Version::Tls13, Suite::Aes128Gcm) => cs::TLS13_AES_128_GCM_SHA256,
                    (Version::Tls13, Suite::Aes256Gcm) => cs::TLS13_AES_256_GCM_SHA384,
                    (Version::Tls13, Suite::Chacha20Poly1305) => cs::TLS13_CHACHA20_POLY1305_SHA256,
                    (Version::Tls12, Suite::Aes128Gcm) => {
                        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                    }
                    (Version::Tls12, Suite::Aes256Gcm) => {
                        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
                    }
                    (Version::Tls12, Suite::Chacha20Poly1305) => {
                        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
                    }
                };
                let provider = rustls::crypto::CryptoProvider {
                    cipher_suites: vec![one],
                    ..rustls::crypto::ring::default_provider()
                };
                let versions: &[&rustls::SupportedProtocolVersion] = match v {
                    Version::Tls13 => &[&rustls::version::TLS13],
                    Version::Tls12 => &[&rustls::version::TLS12],
                };
                let mut c = ServerConfig::builder_with_provider(Arc::new(provider))
                    .with_protocol_versions(versions)
                    .expect("the version and suite go together")
                    .with_no_client_auth()
                    .with_single_cert(
                        vec![cert.der().clone()],
                        PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.clone())),
                    )
                    .expect("the certificate and key");
                // The traffic keys handed over after the handshake; nothing
                // sent after it but the fuzz input; no state kept between
                // inputs.
                c.enable_secret_extraction = true;
                c.send_tls13_tickets = 0;
                c.session_storage = Arc::new(NoServerSessionStorage {});
                out.push(Arc::new(c));
            }
        }
        out
    });
    let v = usize::from(version == Version::Tls12);
    let s = match suite {
        Suite::Aes128Gcm => 0,
        Suite::Aes256Gcm => 1,
        Suite::Chacha20Poly1305 => 2,
    };
    configs[v * 3 + s].clone()
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
}

/// Runs the handshake between a rustls server and the driver in memory:
/// the driver's reader, the server, and the script of the reader's wire.
fn connect(
    version: Version,
    suite: Suite,
) -> (impl AsyncRead + Unpin, Server, Rc<RefCell<Script>>) {
    // A fresh client configuration per input: its ticket store starts empty
    // (no resumption, no state kept between inputs).
    let tls = scylla_driver::tls::TlsConfig::builder()
        .danger_accept_invalid_certs()
        .record_layer(scylla_driver::tls::RecordLayer::Driver)
        .build()
        .expect("a client configuration");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("a name");
    let client = rustls::client::UnbufferedClientConnection::new(tls.client.clone(), name)
        .expect("a client connection");
    let server = UnbufferedServerConnection::new(server_config(version, suite))
        .expect("a server connection");
    let (ours, mut theirs) = tokio::io::duplex(64 * 1024);
    let script = Rc::new(RefCell::new(Script::default()));
    let wire = Wire {
        pipe: ours,
        script: script.clone(),
    };
    let (reader, (secrets, kernel)) = RUNTIME.with(|rt| {
        rt.block_on(async {
            tokio::join!(
                scylla_driver::connection::fuzz_receiver(wire, client),
                serve(&mut theirs, server),
            )
        })
    });
    let reader = reader.expect("the driver's handshake");
    let tls13 = version == Version::Tls13;
    let server = Server {
        sealer: Sealer::new(tls13, secrets.tx),
        kernel,
        handshake: Vec::new(),
    };
    (reader, server, script)
}

/// The server's handshake (rustls' unbuffered API), then its traffic keys
/// and rustls' part.
async fn serve(
    pipe: &mut DuplexStream,
    mut conn: UnbufferedServerConnection,
) -> (
    rustls::ExtractedSecrets,
    KernelConnection<ServerConnectionData>,
) {
    let mut incoming = vec![0u8; 64 * 1024];
    let mut filled = 0;
    let mut outgoing = Vec::new();
    let mut out_len = 0;
    // Bounded: each round encodes, writes or reads, and the client's
    // handshake is a few messages.
    loop {
        let UnbufferedStatus { discard, state } = conn.process_tls_records(&mut incoming[..filled]);
        let mut read = false;
        let mut traffic = false;
        match state.expect("the server's handshake") {
            ConnectionState::EncodeTlsData(mut enc) => loop {
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
            },
            ConnectionState::TransmitTlsData(t) => {
                pipe.write_all(&outgoing[..out_len])
                    .await
                    .expect("the pipe takes the handshake");
                out_len = 0;
                t.done();
            }
            ConnectionState::BlockedHandshake => read = true,
            ConnectionState::WriteTraffic(_) => traffic = true,
            other => panic!("the server's handshake in state {other:?}"),
        }
        incoming.copy_within(discard..filled, 0);
        filled -= discard;
        if traffic {
            if !conn.is_handshaking() {
                break;
            }
            read = true;
        }
        if read {
            let n = pipe
                .read(&mut incoming[filled..])
                .await
                .expect("the pipe gives the handshake");
            assert!(n > 0, "the client left during the handshake");
            filled += n;
        }
    }
    assert_eq!(out_len, 0, "the server's last flight was sent");
    conn.dangerous_into_kernel_connection()
        .expect("the server's traffic keys")
}
