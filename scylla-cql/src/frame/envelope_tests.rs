//! Unit tests of the frame envelope with a stand-in message.

use super::*;
use crate::frame::ProtocolVersion;

/// A raw message: an opcode and body bytes, for envelope-only tests.
struct Raw(Opcode, Vec<u8>);

impl MessageBody for Raw {
    fn opcode(&self) -> Opcode {
        self.0
    }
    fn encode_body(
        &self,
        buf: &mut BytesMut,
        _version: ProtocolVersion,
    ) -> Result<(), EncodeError> {
        buf.extend_from_slice(&self.1);
        Ok(())
    }
}

fn decode_one(buf: &[u8], c: Option<Compression>) -> Result<(Envelope, usize), DecodeError> {
    let (h, len) = frame_len(buf, 1 << 20)?.ok_or(DecodeError::Decompression("incomplete"))?;
    let body = Bytes::copy_from_slice(&buf[HEADER_LEN..len]);
    Ok((decode_envelope(&h, body, c, 1 << 20)?, len))
}

#[test]
fn options_frame_bytes() {
    let mut buf = BytesMut::new();
    let msg = Raw(Opcode::Options, vec![]);
    encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        3,
        &msg,
        &FrameExtras::NONE,
        None,
    )
    .unwrap();
    assert_eq!(&buf[..], &[0x04, 0, 0, 3, 0x05, 0, 0, 0, 0]);
}

#[test]
fn response_extras_order_and_round_trip() {
    let id = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
    let warnings = vec!["w".to_owned()];
    let mut payload = CustomPayload::new();
    payload.insert("k".to_owned(), Some(vec![9]));
    let extras = FrameExtras {
        tracing_id: Some(id),
        warnings: &warnings,
        custom_payload: Some(&payload),
        ..FrameExtras::NONE
    };
    let mut buf = BytesMut::from(&b"prev"[..]);
    let msg = Raw(Opcode::Ready, vec![0xAA]);
    encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Response,
        -1,
        &msg,
        &extras,
        None,
    )
    .unwrap();
    let f = &buf[4..];
    assert_eq!(&f[..5], &[0x84, 0x0e, 0xff, 0xff, 0x02]);
    let mut body = id.as_bytes().to_vec();
    body.extend_from_slice(&[0, 1, 0, 1, b'w']);
    body.extend_from_slice(&[0, 1, 0, 1, b'k', 0, 0, 0, 1, 9]);
    body.push(0xAA);
    assert_eq!(&f[5..9], &(body.len() as u32).to_be_bytes());
    assert_eq!(&f[9..], &body[..]);
    let (env, len) = decode_one(f, None).unwrap();
    assert_eq!(len, f.len());
    assert_eq!(env.tracing_id, Some(id));
    assert_eq!(env.warnings, warnings);
    assert_eq!(env.custom_payload, Some(payload));
    assert_eq!(&env.body[..], &[0xAA]);
}

#[test]
fn request_tracing_flag_has_no_bytes() {
    let extras = FrameExtras {
        tracing: true,
        ..FrameExtras::NONE
    };
    let mut buf = BytesMut::new();
    let msg = Raw(Opcode::Query, vec![1, 2]);
    encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        0,
        &msg,
        &extras,
        None,
    )
    .unwrap();
    assert_eq!(buf[1], 0x02);
    let (env, _) = decode_one(&buf, None).unwrap();
    assert!(env.tracing_requested());
    assert_eq!(env.tracing_id, None);
    assert_eq!(&env.body[..], &[1, 2]);
}

#[test]
fn compressed_round_trip_and_startup_never_compressed() {
    let mut c = Compressor::new(Compression::Lz4);
    let mut buf = BytesMut::new();
    let msg = Raw(Opcode::Query, vec![7; 300]);
    encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        1,
        &msg,
        &FrameExtras::NONE,
        Some(&mut c),
    )
    .unwrap();
    assert_eq!(buf[1], 0x01);
    assert!(buf.len() < 300);
    let (env, _) = decode_one(&buf, Some(Compression::Lz4)).unwrap();
    assert_eq!(&env.body[..], &[7; 300][..]);
    // Flag set but nothing negotiated.
    assert!(matches!(
        decode_one(&buf, None),
        Err(DecodeError::Decompression(_))
    ));

    let mut buf = BytesMut::new();
    let msg = Raw(Opcode::Startup, vec![0, 0]);
    encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        0,
        &msg,
        &FrameExtras::NONE,
        Some(&mut c),
    )
    .unwrap();
    assert_eq!(buf[1], 0);
}

#[test]
fn errors_leave_buffer_untouched() {
    let mut buf = BytesMut::from(&b"abc"[..]);
    let big = Raw(Opcode::Query, vec![0; 100]);
    let r = encode_frame_limited(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        0,
        &big,
        &FrameExtras::NONE,
        None,
        99,
    );
    assert!(matches!(
        r,
        Err(EncodeError::FrameTooLarge {
            length: 100,
            limit: 99
        })
    ));
    assert_eq!(&buf[..], b"abc");
    let mut c = Compressor::new(Compression::Lz4);
    let r = encode_frame_limited(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        0,
        &big,
        &FrameExtras::NONE,
        Some(&mut c),
        99,
    );
    assert!(r.is_err());
    assert_eq!(&buf[..], b"abc");
    let wrong_dir = encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Response,
        0,
        &big,
        &FrameExtras::NONE,
        None,
    );
    assert!(matches!(wrong_dir, Err(EncodeError::Invalid(_))));
    let negative = encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        -1,
        &big,
        &FrameExtras::NONE,
        None,
    );
    assert!(matches!(negative, Err(EncodeError::Invalid(_))));
    let warnings = vec!["x".to_owned()];
    let bad = FrameExtras {
        warnings: &warnings,
        ..FrameExtras::NONE
    };
    assert!(encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        0,
        &big,
        &bad,
        None
    )
    .is_err());
    assert_eq!(&buf[..], b"abc");
}

#[test]
fn frame_len_waits_for_whole_frame() {
    let mut buf = BytesMut::new();
    let msg = Raw(Opcode::Query, vec![1, 2, 3]);
    encode_frame(
        &mut buf,
        ProtocolVersion::V4,
        Direction::Request,
        0,
        &msg,
        &FrameExtras::NONE,
        None,
    )
    .unwrap();
    for cut in 0..buf.len() {
        assert_eq!(frame_len(&buf[..cut], 100).unwrap(), None);
    }
    assert_eq!(frame_len(&buf, 100).unwrap().map(|(_, l)| l), Some(12));
    assert!(matches!(
        frame_len(&buf, 2),
        Err(DecodeError::FrameTooLarge { .. })
    ));
}
