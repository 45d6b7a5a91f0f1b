//! The seed corpus of the `tls_records` target: inputs made with
//! `cql_fuzz::records::Input` (see `cql_fuzz::records` for the format),
//! covering what the driver's record layer receives: application data in
//! both versions and every suite, padding, KeyUpdate and NewSessionTicket
//! (whole and split across records), HelloRequest, alerts of each kind,
//! damaged and forged records, oversized records, empty records, unknown
//! content types, and records cut short.
//!
//! The seeds do not depend on the keys (records are sealed when an input
//! runs), so they are the same on every run. `cargo +nightly test
//! --manifest-path fuzz/Cargo.toml` checks that the committed corpus is what
//! this file makes, that each seed ends as described below, and that every
//! file of the corpus directory goes through the checks; with
//! `CQL_FUZZ_WRITE_CORPUS=1` it rewrites the corpus.

use std::path::PathBuf;

use cql_fuzz::records::{
    config, run, End, Input, Suite, Version, ALERT, APPLICATION_DATA, HANDSHAKE, KEY_UPDATE,
};

/// How a seed must end.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// All its application data handed out, then the wire's end (no
    /// close_notify).
    All,
    /// Its application data handed out, then a clean end (close_notify).
    Closed,
    /// An error whose message holds this, after the application data
    /// sealed before the bad record.
    Error(&'static str),
}

const V13: Version = Version::Tls13;
const V12: Version = Version::Tls12;

/// Whole reads and pieces.
fn cfg(v: Version) -> u8 {
    config(v, Suite::Aes128Gcm, 3, 0)
}

/// A TLS 1.3 NewSessionTicket message (RFC 8446 section 4.6.1).
fn session_ticket(id: u8) -> Vec<u8> {
    let mut body = vec![0, 0, 0x0e, 0x10]; // lifetime: an hour
    body.extend_from_slice(&[0, 0, 0, 1]); // age_add
    body.extend_from_slice(&[1, id]); // nonce
    body.extend_from_slice(&[0, 4, id, 2, 3, 4]); // ticket
    body.extend_from_slice(&[0, 0]); // extensions
    let mut m = vec![4, 0, 0, u8::try_from(body.len()).expect("short")];
    m.extend(body);
    m
}

/// A KeyUpdate (RFC 8446 section 4.6.3).
fn key_update(requested: bool) -> [u8; 5] {
    [KEY_UPDATE, 0, 0, 1, u8::from(requested)]
}

fn data(v: Version) -> Input {
    Input::new(cfg(v)).sealed(APPLICATION_DATA, b"before")
}

/// Every seed, by file name, and how it ends.
fn seeds() -> Vec<(String, Vec<u8>, Expect)> {
    use Expect::*;
    let mut out: Vec<(String, Input, Expect)> = Vec::new();
    let mut add = |name: &str, input: Input, expect: Expect| {
        out.push((name.to_owned(), input, expect));
    };
    for (v, vn) in [(V13, "tls13"), (V12, "tls12")] {
        for (s, sn) in [
            (Suite::Aes128Gcm, "aes128"),
            (Suite::Aes256Gcm, "aes256"),
            (Suite::Chacha20Poly1305, "chacha"),
        ] {
            add(
                &format!("app-data-{vn}-{sn}"),
                Input::new(config(v, s, 3, 0))
                    .sealed(APPLICATION_DATA, b"hello ")
                    .sealed(APPLICATION_DATA, b"world"),
                All,
            );
        }
        add(
            &format!("close-notify-{vn}"),
            data(v).sealed(ALERT, &[1, 0]),
            Closed,
        );
        add(
            &format!("warning-alerts-{vn}"),
            data(v)
                .sealed(ALERT, &[1, 90])
                .sealed(ALERT, &[1, 90])
                .sealed(APPLICATION_DATA, b"after"),
            All,
        );
        add(
            &format!("fatal-alert-{vn}"),
            data(v).sealed(ALERT, &[2, 80]),
            Error("InternalError"),
        );
        add(
            &format!("empty-records-{vn}"),
            data(v)
                .sealed(APPLICATION_DATA, b"")
                .sealed(APPLICATION_DATA, b"")
                .sealed(APPLICATION_DATA, b"")
                .sealed(APPLICATION_DATA, b"after"),
            All,
        );
        add(
            &format!("unknown-content-type-{vn}"),
            data(v).sealed(99, b"x"),
            Error("unknown content type"),
        );
        add(
            &format!("truncated-record-{vn}"),
            data(v).raw(&[APPLICATION_DATA, 3, 3, 0]),
            Error("without a TLS close_notify"),
        );
    }
    // Reads of 1 byte from a wire of 1-byte pieces; reads of 7 from pieces
    // of 3.
    add(
        "app-data-tls13-small-reads",
        Input::new(config(V13, Suite::Aes128Gcm, 0, 1))
            .sealed(APPLICATION_DATA, b"hello")
            .cut()
            .sealed(APPLICATION_DATA, b"world"),
        All,
    );
    add(
        "app-data-tls12-pieces",
        Input::new(config(V12, Suite::Chacha20Poly1305, 1, 2))
            .sealed(APPLICATION_DATA, b"hello")
            .sealed(APPLICATION_DATA, b"world")
            .cut()
            .filled(APPLICATION_DATA, 300, b'x', 0),
        All,
    );
    // TLS 1.3 padding, and a content type taken from the plaintext (the
    // type byte 0 is padding).
    add(
        "padding-tls13",
        Input::new(cfg(V13))
            .padded(APPLICATION_DATA, b"padded", 31)
            .filled(APPLICATION_DATA, 100, b'x', 5),
        All,
    );
    add(
        "inner-type-from-plaintext-tls13",
        Input::new(cfg(V13)).padded(0, b"data\x17", 3),
        All,
    );
    add(
        "no-content-type-tls13",
        data(V13).padded(0, b"", 4),
        Error("no content type"),
    );
    add(
        "clear-record-tls13",
        data(V13).raw(&[HANDSHAKE, 3, 3, 0, 1, 0]),
        Error("in the clear"),
    );
    // Post-handshake messages.
    add(
        "key-update-tls13",
        data(V13)
            .sealed(HANDSHAKE, &key_update(false))
            .sealed(APPLICATION_DATA, b"second keys")
            .sealed(HANDSHAKE, &key_update(true))
            .sealed(APPLICATION_DATA, b"third keys"),
        All,
    );
    add(
        "key-update-split-tls13",
        data(V13)
            .sealed(HANDSHAKE, &key_update(false)[..2])
            .sealed(HANDSHAKE, &key_update(false)[2..])
            .sealed(APPLICATION_DATA, b"after"),
        All,
    );
    let mut too_many = data(V13);
    for _ in 0..33 {
        too_many = too_many.sealed(HANDSHAKE, &key_update(false));
    }
    add("too-many-key-updates-tls13", too_many, Error("KeyUpdates"));
    add(
        "new-session-ticket-tls13",
        data(V13)
            .sealed(HANDSHAKE, &session_ticket(1))
            .sealed(APPLICATION_DATA, b"after"),
        All,
    );
    let (one, two) = (session_ticket(1), session_ticket(2));
    add(
        "new-session-ticket-split-tls13",
        data(V13)
            .sealed(HANDSHAKE, &one[..6])
            .sealed(HANDSHAKE, &[&one[6..], &two[..]].concat())
            .sealed(APPLICATION_DATA, b"after"),
        All,
    );
    add(
        "data-between-handshake-pieces-tls13",
        data(V13)
            .sealed(HANDSHAKE, &one[..6])
            .sealed(APPLICATION_DATA, b"between"),
        Error("between the pieces"),
    );
    add(
        "hello-request-tls12",
        data(V12)
            .sealed(HANDSHAKE, &[0, 0, 0, 0])
            .sealed(APPLICATION_DATA, b"after"),
        All,
    );
    add(
        "empty-handshake-record-tls12",
        data(V12).sealed(HANDSHAKE, b""),
        Error("empty handshake record"),
    );
    add(
        "change-cipher-spec-tls12",
        data(V12).sealed(20, &[1]),
        Error("unknown content type"),
    );
    // Alerts of an unknown level or length.
    add(
        "alert-unknown-level-tls13",
        data(V13).sealed(ALERT, &[3, 0]),
        Error("unknown level"),
    );
    add(
        "alert-three-bytes-tls12",
        data(V12).sealed(ALERT, &[1, 0, 0]),
        Error("not two bytes"),
    );
    // Records that fail authentication: the tag's last byte, the explicit
    // nonce, a well-framed forgery.
    add(
        "bad-mac-tls13",
        data(V13)
            .damaged(APPLICATION_DATA, b"forged", 27, 1)
            .sealed(APPLICATION_DATA, b"next"),
        Error("decrypt"),
    );
    add(
        "bad-mac-tls12-nonce",
        data(V12).damaged(APPLICATION_DATA, b"forged", 6, 0x80),
        Error("decrypt"),
    );
    add(
        "bad-mac-forged-tls13",
        data(V13).raw(&[&[APPLICATION_DATA, 3, 3, 0, 20][..], &[0x5a; 20]].concat()),
        Error("decrypt"),
    );
    // Sizes: a header over both limits, a TLS 1.3 body over its own, more
    // than 2^14 bytes of plaintext, and the most allowed.
    add(
        "oversized-header",
        data(V13).raw(&[APPLICATION_DATA, 3, 3, 0xff, 0xff]),
        Error("RecordOverflow"),
    );
    add(
        "oversized-body-tls13",
        data(V13)
            .raw(&[APPLICATION_DATA, 3, 3, 0x41, 0x01])
            .filled(APPLICATION_DATA, 16700, 7, 0),
        Error("RecordOverflow"),
    );
    add(
        "oversized-plaintext-tls12",
        data(V12).filled(APPLICATION_DATA, 16385, 1, 0),
        Error("RecordOverflow"),
    );
    add(
        "oversized-plaintext-tls13",
        data(V13).filled(APPLICATION_DATA, 16384, 1, 1),
        Error("RecordOverflow"),
    );
    add(
        "largest-plaintext-tls13",
        data(V13).filled(APPLICATION_DATA, 16384, 1, 0),
        All,
    );
    let mut empty = data(V12);
    for _ in 0..33 {
        empty = empty.sealed(APPLICATION_DATA, b"");
    }
    add(
        "too-many-empty-records-tls12",
        empty,
        Error("empty records"),
    );
    out.into_iter().map(|(n, i, e)| (n, i.build(), e)).collect()
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus/tls_records")
}

#[test]
fn seed_corpus() {
    let seeds = seeds();
    let dir = corpus_dir();
    if std::env::var_os("CQL_FUZZ_WRITE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for (name, bytes, _) in &seeds {
            std::fs::write(dir.join(name), bytes).expect("corpus file");
        }
    }
    let total: usize = seeds.iter().map(|(_, b, _)| b.len()).sum();
    assert!(total < 16 * 1024, "the seed corpus is {total} bytes");
    for (name, bytes, _) in &seeds {
        let on_disk = std::fs::read(dir.join(name))
            .unwrap_or_else(|e| panic!("{name}: {e} (CQL_FUZZ_WRITE_CORPUS=1 writes it)"));
        assert_eq!(&on_disk, bytes, "{name} is stale (CQL_FUZZ_WRITE_CORPUS=1)");
    }
}

/// Every file of the corpus directory (seeds and whatever fuzzing added)
/// goes through the checks without a panic.
#[test]
fn corpus_files_pass_the_checks() {
    let mut n = 0;
    for entry in std::fs::read_dir(corpus_dir()).expect("corpus directory") {
        let path = entry.expect("a directory entry").path();
        cql_fuzz::tls_records(&std::fs::read(&path).expect("a corpus file"));
        n += 1;
    }
    assert!(n >= 30, "{n} corpus files");
}

/// Each seed ends as it says: it reaches the part of the record layer it
/// is for, so mutations start from there.
#[test]
fn seeds_end_as_intended() {
    for (name, bytes, expect) in seeds() {
        let o = run(&bytes).expect("a non-empty input");
        match (expect, &o.end) {
            (Expect::All, End::Failed(e)) => {
                assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{name}: {e}");
                assert_eq!(o.delivered, o.sealed, "{name}");
                assert!(!o.sealed.is_empty(), "{name}");
            }
            (Expect::Closed, End::Closed) => {
                assert_eq!(o.delivered, o.sealed, "{name}");
            }
            (Expect::Error(what), End::Failed(e)) => {
                let msg = format!("{e} {e:?}");
                assert!(msg.contains(what), "{name}: {msg} (expected {what:?})");
                assert_eq!(o.delivered, b"before", "{name}");
            }
            (expect, end) => panic!("{name}: ended with {end:?}, expected {expect:?}"),
        }
    }
}
