//! The UUIDs a node makes: random ones (v4) for schema versions, table ids
//! and trace sessions, and time-based ones (v1 bits) for trace events.

use uuid::Uuid;

/// A random (v4) UUID, for schema versions, table ids and trace sessions.
pub(crate) fn random_uuid() -> Uuid {
    let mut b = [0u8; 16];
    fastrand::fill(&mut b);
    uuid::Builder::from_random_bytes(b).into_uuid()
}

/// A random UUID with the time-based version (1) bits, for `event_id`
/// (`timeuuid`) columns.
pub(crate) fn time_uuid() -> Uuid {
    let mut b = *random_uuid().as_bytes();
    b[6] = (b[6] & 0x0f) | 0x10;
    Uuid::from_bytes(b)
}
