//! Faults a test can switch on for one node at run time.
//!
//! Each models a way real deployments break shard-awareness or slow a node:
//! - **NAT**: something between client and node rewrites the client's source
//!   port, so the shard-aware port puts the connection on a shard the client
//!   did not ask for (the connection works, on another shard);
//! - **refusing shard-aware port**: the port is advertised but closed (a
//!   firewall, an old node), so connecting to it fails with "connection refused";
//! - **silent shard-aware port**: the port accepts and then never answers (a
//!   black-holing middlebox), so only the client's timeouts save it;
//! - **latency**: a delay before each response;
//! - **corrupt segments**: one payload byte of the node's next N protocol v5
//!   segments is flipped after its CRC32 was computed (wire damage a v5
//!   client detects as a checksum error);
//! - **damaged v4 lengths**: the body length of the node's next N frames to
//!   protocol v4 clients grows by 1 MiB (wire damage a v4 client cannot
//!   detect: it waits for bytes that never come, a stalled connection).
//! - **overload**: the node answers its next N statements (QUERY, EXECUTE,
//!   BATCH) with OVERLOADED, or with ScyllaDB's rate-limit error, without
//!   running them.
//! - **a lost STARTUP answer**: the node reads the STARTUP of its next N
//!   connections and never answers it, keeping the connection open (one
//!   lost message of a connection's setup: the client's setup stalls).
//! - **closing during authentication**: the node closes its next N
//!   connections that answer AUTHENTICATE, on their AUTH_RESPONSE, without
//!   answering it (a node that crashes or restarts mid-login, or a proxy
//!   that drops the connection).
//!
//! The settings a connection reads on every response live in atomics
//! (`FaultState`); switching the shard-aware port between refusing and
//! listening is done by the node, which closes or re-binds its listener.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// How a NAT rewrites the source port the node sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NatMode {
    /// The node sees `source_port + offset` (wrapping): deterministic, so a
    /// test can compute the shard the connection lands on
    /// (`(port + offset) % shards`).
    Offset(u16),
    /// The node sees a random port in `1024..=65535` per connection (drawn
    /// from the node's seeded generator).
    Random,
}

/// What the shard-aware port does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ShardAwarePortMode {
    /// Accepts connections and assigns `source_port % shards`.
    #[default]
    Normal,
    /// The listener is closed: connecting fails with "connection refused".
    Refuse,
    /// Accepts and then never reads or answers, holding the socket until the
    /// node stops (or [`Faults::silent_hold`] passes).
    Silent,
}

/// The faults of one node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Faults {
    /// Source-port rewriting on the shard-aware port, if any.
    pub nat: Option<NatMode>,
    /// Behaviour of the shard-aware port.
    pub shard_aware_port: ShardAwarePortMode,
    /// Delay before each response the node sends (events excepted).
    pub latency: Duration,
    /// Further delay before each answer to a DDL statement (a RESULT of kind
    /// SCHEMA_CHANGE): a real node's schema update takes far longer than a
    /// request (hundreds of milliseconds on Cassandra 5.0 here).
    pub schema_change_latency: Duration,
    /// How long a silent port holds a connection before closing it;
    /// `None` means until the node stops.
    pub silent_hold: Option<Duration>,
    /// The TLS ports accept TCP and then never answer the ClientHello
    /// (a handshake that stalls), until the node stops or
    /// [`Faults::silent_hold`] passes.
    pub tls_handshake_stall: bool,
    /// Damage the payload of the node's next this many outgoing protocol v5
    /// segments (all connections together): one byte is flipped after the
    /// segment's CRC32 was computed, so the client's checksum fails. Each
    /// [`crate::TestCluster::set_faults`] (re)arms the count it carries; 0
    /// disarms; [`crate::TestCluster::faults`] reports what remains (so
    /// `set_faults(i, faults(i)?.with_latency(..))` keeps the count going).
    /// Counted in [`crate::NodeStatsSnapshot::segments_corrupted`].
    pub corrupt_segments: u32,
    /// Damage the body length field of the node's next this many frames
    /// sent to protocol v4 clients (any connection of the node, handshake
    /// frames included): bit 20 of the length is set, so the client waits
    /// for 1 MiB more than comes (a frame longer than 1 MiB is left alone).
    /// Armed like [`Faults::corrupt_segments`]; counted in
    /// [`crate::NodeStatsSnapshot::v4_lengths_damaged`].
    pub damage_v4_lengths: u32,
    /// Answer the node's next this many statements (QUERY, EXECUTE, BATCH;
    /// any connection) with OVERLOADED (0x1001), without running them.
    /// Armed like [`Faults::corrupt_segments`]; `u32::MAX` never runs out.
    pub overloaded: u32,
    /// Answer the node's next this many statements with ScyllaDB's
    /// rate-limit error (the code advertised as `SCYLLA_RATE_LIMIT_ERROR`,
    /// a write rejected by the coordinator), without running them. Checked
    /// after [`Faults::overloaded`]; armed alike.
    pub rate_limited: u32,
    /// Close the node's next this many connections that send AUTH_RESPONSE
    /// (password authentication on, see
    /// [`crate::TestClusterBuilder::password_auth`]) instead of answering
    /// it: the client sees the connection end after AUTHENTICATE, during
    /// its authentication step. Armed like [`Faults::overloaded`];
    /// `u32::MAX` never runs out.
    pub close_during_auth: u32,
    /// Leave the STARTUP of the node's next this many connections
    /// unanswered: the request is read and dropped, the connection stays
    /// open and silent (a setup that stalls on one lost message). Armed like
    /// [`Faults::overloaded`]; `u32::MAX` never runs out.
    pub withhold_startup: u32,
}

impl Faults {
    /// No fault.
    pub fn none() -> Self {
        Faults::default()
    }

    /// NAT with the given mode.
    #[must_use]
    pub fn with_nat(mut self, nat: NatMode) -> Self {
        self.nat = Some(nat);
        self
    }

    /// TLS handshakes stall (see [`Faults::tls_handshake_stall`]).
    #[must_use]
    pub fn with_tls_handshake_stall(mut self, on: bool) -> Self {
        self.tls_handshake_stall = on;
        self
    }

    /// The given shard-aware port behaviour.
    #[must_use]
    pub fn with_shard_aware_port(mut self, mode: ShardAwarePortMode) -> Self {
        self.shard_aware_port = mode;
        self
    }

    /// A delay before each response.
    #[must_use]
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = latency;
        self
    }

    /// A further delay before each answer to a DDL statement (see
    /// [`Faults::schema_change_latency`]).
    #[must_use]
    pub fn with_schema_change_latency(mut self, latency: Duration) -> Self {
        self.schema_change_latency = latency;
        self
    }

    /// Damage the next `n` outgoing v5 segments (see [`Faults::corrupt_segments`]).
    #[must_use]
    pub fn with_corrupt_segments(mut self, n: u32) -> Self {
        self.corrupt_segments = n;
        self
    }

    /// Damage the length of the next `n` frames to v4 clients (see
    /// [`Faults::damage_v4_lengths`]).
    #[must_use]
    pub fn with_damaged_v4_lengths(mut self, n: u32) -> Self {
        self.damage_v4_lengths = n;
        self
    }

    /// Answer the next `n` statements with OVERLOADED (see
    /// [`Faults::overloaded`]).
    #[must_use]
    pub fn with_overloaded(mut self, n: u32) -> Self {
        self.overloaded = n;
        self
    }

    /// Answer the next `n` statements with the rate-limit error (see
    /// [`Faults::rate_limited`]).
    #[must_use]
    pub fn with_rate_limited(mut self, n: u32) -> Self {
        self.rate_limited = n;
        self
    }

    /// Close the next `n` connections on their AUTH_RESPONSE (see
    /// [`Faults::close_during_auth`]).
    #[must_use]
    pub fn with_close_during_auth(mut self, n: u32) -> Self {
        self.close_during_auth = n;
        self
    }

    /// Leave the STARTUP of the next `n` connections unanswered (see
    /// [`Faults::withhold_startup`]).
    #[must_use]
    pub fn with_withheld_startup(mut self, n: u32) -> Self {
        self.withhold_startup = n;
        self
    }
}

const NAT_OFF: u8 = 0;
const NAT_OFFSET: u8 = 1;
const NAT_RANDOM: u8 = 2;

/// The live fault settings of a node, read lock-free by its connections.
#[derive(Debug)]
pub(crate) struct FaultState {
    nat_kind: AtomicU8,
    nat_offset: AtomicU32,
    latency_us: AtomicU64,
    /// A slow node's latency on top of `latency_us` (not part of [`Faults`]:
    /// set once from the cluster's configuration).
    extra_latency_us: AtomicU64,
    schema_change_latency_us: AtomicU64,
    silent: AtomicU8,
    silent_hold_ms: AtomicU64,
    /// Outgoing v5 segments still to damage.
    corrupt_segments: AtomicU32,
    /// Outgoing v4 frames whose length is still to damage.
    damage_v4_lengths: AtomicU32,
    /// Statements still to answer with OVERLOADED / the rate-limit error.
    overloaded: AtomicU32,
    rate_limited: AtomicU32,
    /// Connections still to close on their AUTH_RESPONSE.
    close_during_auth: AtomicU32,
    /// Connections whose STARTUP is still to leave unanswered.
    withhold_startup: AtomicU32,
    /// Random ports for [`NatMode::Random`]; a lock is fine here, it is taken
    /// once per accepted connection and only while that fault is on.
    rng: Mutex<fastrand::Rng>,
    /// The whole last setting, for [`FaultState::get`].
    current: Mutex<Faults>,
}

impl FaultState {
    pub(crate) fn new(seed: u64) -> Self {
        FaultState {
            nat_kind: AtomicU8::new(NAT_OFF),
            nat_offset: AtomicU32::new(0),
            latency_us: AtomicU64::new(0),
            extra_latency_us: AtomicU64::new(0),
            schema_change_latency_us: AtomicU64::new(0),
            silent: AtomicU8::new(0),
            silent_hold_ms: AtomicU64::new(u64::MAX),
            corrupt_segments: AtomicU32::new(0),
            damage_v4_lengths: AtomicU32::new(0),
            overloaded: AtomicU32::new(0),
            rate_limited: AtomicU32::new(0),
            close_during_auth: AtomicU32::new(0),
            withhold_startup: AtomicU32::new(0),
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
            current: Mutex::new(Faults::none()),
        }
    }

    pub(crate) fn set(&self, f: &Faults) {
        let (kind, offset) = match f.nat {
            None => (NAT_OFF, 0),
            Some(NatMode::Offset(o)) => (NAT_OFFSET, o),
            Some(NatMode::Random) => (NAT_RANDOM, 0),
        };
        self.nat_offset.store(offset as u32, Ordering::Relaxed);
        self.nat_kind.store(kind, Ordering::Relaxed);
        let us = u64::try_from(f.latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_us.store(us, Ordering::Relaxed);
        let us = u64::try_from(f.schema_change_latency.as_micros()).unwrap_or(u64::MAX);
        self.schema_change_latency_us.store(us, Ordering::Relaxed);
        let hold = f.silent_hold.map_or(u64::MAX, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
        });
        self.silent_hold_ms.store(hold, Ordering::Relaxed);
        self.silent.store(
            (f.shard_aware_port == ShardAwarePortMode::Silent) as u8,
            Ordering::Relaxed,
        );
        self.corrupt_segments
            .store(f.corrupt_segments, Ordering::Relaxed);
        self.damage_v4_lengths
            .store(f.damage_v4_lengths, Ordering::Relaxed);
        self.overloaded.store(f.overloaded, Ordering::Relaxed);
        self.rate_limited.store(f.rate_limited, Ordering::Relaxed);
        self.close_during_auth
            .store(f.close_during_auth, Ordering::Relaxed);
        self.withhold_startup
            .store(f.withhold_startup, Ordering::Relaxed);
        if let Ok(mut cur) = self.current.lock() {
            *cur = f.clone();
        }
    }

    /// Whether the corrupt-segments fault is armed.
    pub(crate) fn corrupting_segments(&self) -> bool {
        self.corrupt_segments.load(Ordering::Relaxed) > 0
    }

    /// Whether to damage the segment about to go out (taking one from the
    /// armed count). One atomic load when the fault is off.
    pub(crate) fn take_corrupt_segment(&self) -> bool {
        take_one(&self.corrupt_segments)
    }

    /// Whether to damage the length of the v4 frame about to go out.
    pub(crate) fn take_damaged_v4_length(&self) -> bool {
        take_one(&self.damage_v4_lengths)
    }

    /// The last setting, with the corruption counts as they remain now (so
    /// that `set(get().with_latency(..))` does not re-arm spent ones).
    pub(crate) fn get(&self) -> Faults {
        let mut f = self.current.lock().map(|f| f.clone()).unwrap_or_default();
        f.corrupt_segments = self.corrupt_segments.load(Ordering::Relaxed);
        f.damage_v4_lengths = self.damage_v4_lengths.load(Ordering::Relaxed);
        f.overloaded = self.overloaded.load(Ordering::Relaxed);
        f.rate_limited = self.rate_limited.load(Ordering::Relaxed);
        f.close_during_auth = self.close_during_auth.load(Ordering::Relaxed);
        f.withhold_startup = self.withhold_startup.load(Ordering::Relaxed);
        f
    }

    /// The source port the node sees for a client port, and whether NAT changed it.
    pub(crate) fn seen_port(&self, client_port: u16) -> (u16, bool) {
        match self.nat_kind.load(Ordering::Relaxed) {
            NAT_OFFSET => {
                let off = self.nat_offset.load(Ordering::Relaxed) as u16;
                (client_port.wrapping_add(off), true)
            }
            NAT_RANDOM => {
                let port = self
                    .rng
                    .lock()
                    .map(|mut r| r.u16(1024..=u16::MAX))
                    .unwrap_or(client_port);
                (port, true)
            }
            _ => (client_port, false),
        }
    }

    pub(crate) fn latency(&self) -> Duration {
        let us = self.latency_us.load(Ordering::Relaxed);
        let extra = self.extra_latency_us.load(Ordering::Relaxed);
        Duration::from_micros(us.saturating_add(extra))
    }

    /// The delay before `r` goes out: [`latency`](Self::latency), and the
    /// schema-change latency on top for a DDL statement's answer.
    pub(crate) fn latency_of(&self, r: &crate::handler::Response) -> Duration {
        let base = self.latency();
        let ddl = self.schema_change_latency_us.load(Ordering::Relaxed);
        if ddl == 0 || !r.is_schema_change() {
            return base;
        }
        base.saturating_add(Duration::from_micros(ddl))
    }

    /// Sets the slow-node latency added to every response.
    pub(crate) fn set_extra_latency(&self, extra: Duration) {
        let us = u64::try_from(extra.as_micros()).unwrap_or(u64::MAX);
        self.extra_latency_us.store(us, Ordering::Relaxed);
    }

    pub(crate) fn is_silent(&self) -> bool {
        self.silent.load(Ordering::Relaxed) != 0
    }

    /// How long a silent connection is held; `None` = until the node stops.
    pub(crate) fn silent_hold(&self) -> Option<Duration> {
        match self.silent_hold_ms.load(Ordering::Relaxed) {
            u64::MAX => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }
}

/// Decrements `armed` if it is above 0; whether it did.
fn take_one(armed: &AtomicU32) -> bool {
    armed.load(Ordering::Relaxed) > 0
        && armed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
}

/// Overload answers: what the node answers a statement with instead of
/// running it, if an overload fault is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OverloadAnswer {
    Overloaded,
    RateLimited,
}

impl FaultState {
    /// The overload answer for the statement about to run, taking one from
    /// the armed count (`u32::MAX` is never used up). Two atomic loads when
    /// the faults are off.
    pub(crate) fn take_overload(&self) -> Option<OverloadAnswer> {
        if take_one_or_endless(&self.overloaded) {
            Some(OverloadAnswer::Overloaded)
        } else if take_one_or_endless(&self.rate_limited) {
            Some(OverloadAnswer::RateLimited)
        } else {
            None
        }
    }

    /// Whether to close the connection whose AUTH_RESPONSE just came
    /// instead of answering it, taking one from the armed count.
    pub(crate) fn take_close_during_auth(&self) -> bool {
        take_one_or_endless(&self.close_during_auth)
    }

    /// Whether to leave the STARTUP that just came unanswered, taking one
    /// from the armed count.
    pub(crate) fn take_withheld_startup(&self) -> bool {
        take_one_or_endless(&self.withhold_startup)
    }
}

/// [`take_one`], except that `u32::MAX` is never used up.
fn take_one_or_endless(armed: &AtomicU32) -> bool {
    match armed.load(Ordering::Relaxed) {
        0 => false,
        u32::MAX => true,
        _ => take_one(armed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nat_offset_wraps() {
        let s = FaultState::new(1);
        assert_eq!(s.seen_port(40000), (40000, false));
        s.set(&Faults::none().with_nat(NatMode::Offset(3)));
        assert_eq!(s.seen_port(65534), (1, true));
        s.set(&Faults::none().with_nat(NatMode::Random));
        let (p, rewritten) = s.seen_port(40000);
        assert!(rewritten && p >= 1024);
    }

    #[test]
    fn settings_round_trip() {
        let s = FaultState::new(1);
        let f = Faults::none()
            .with_latency(Duration::from_millis(7))
            .with_shard_aware_port(ShardAwarePortMode::Silent);
        s.set(&f);
        assert_eq!(s.get(), f);
        assert_eq!(s.latency(), Duration::from_millis(7));
        assert!(s.is_silent());
        assert_eq!(s.silent_hold(), None);
    }

    #[test]
    fn corruption_counts_down_and_rearms() {
        let s = FaultState::new(1);
        assert!(!s.take_corrupt_segment());
        s.set(
            &Faults::none()
                .with_corrupt_segments(2)
                .with_damaged_v4_lengths(1),
        );
        assert!(s.take_corrupt_segment());
        assert!(s.take_corrupt_segment());
        assert!(!s.take_corrupt_segment());
        assert!(s.take_damaged_v4_length());
        assert!(!s.take_damaged_v4_length());
        s.set(&Faults::none().with_corrupt_segments(3));
        assert!(s.take_corrupt_segment());
        // What remains is what `get` reports, and setting that back keeps it.
        assert_eq!(s.get().corrupt_segments, 2);
        s.set(&s.get().with_latency(Duration::from_millis(1)));
        assert!(s.take_corrupt_segment());
        assert!(s.take_corrupt_segment());
        assert!(!s.take_corrupt_segment());
        assert_eq!(s.get().corrupt_segments, 0);
    }

    #[test]
    fn overload_answers_count_down() {
        let s = FaultState::new(1);
        assert_eq!(s.take_overload(), None);
        s.set(&Faults::none().with_overloaded(1).with_rate_limited(2));
        assert_eq!(s.take_overload(), Some(OverloadAnswer::Overloaded));
        assert_eq!(s.take_overload(), Some(OverloadAnswer::RateLimited));
        assert_eq!(s.get().rate_limited, 1);
        assert_eq!(s.take_overload(), Some(OverloadAnswer::RateLimited));
        assert_eq!(s.take_overload(), None);
        s.set(&Faults::none().with_overloaded(u32::MAX));
        for _ in 0..3 {
            assert_eq!(s.take_overload(), Some(OverloadAnswer::Overloaded));
        }
        assert_eq!(s.get().overloaded, u32::MAX);
    }

    #[test]
    fn withheld_startups_count_down() {
        let s = FaultState::new(1);
        assert!(!s.take_withheld_startup());
        s.set(&Faults::none().with_withheld_startup(1));
        assert!(s.take_withheld_startup());
        assert_eq!(s.get().withhold_startup, 0);
        assert!(!s.take_withheld_startup());
    }

    #[test]
    fn close_during_auth_counts_down() {
        let s = FaultState::new(1);
        assert!(!s.take_close_during_auth());
        s.set(&Faults::none().with_close_during_auth(2));
        assert!(s.take_close_during_auth());
        assert_eq!(s.get().close_during_auth, 1);
        assert!(s.take_close_during_auth());
        assert!(!s.take_close_during_auth());
        s.set(&Faults::none().with_close_during_auth(u32::MAX));
        for _ in 0..3 {
            assert!(s.take_close_during_auth());
        }
        assert_eq!(s.get().close_during_auth, u32::MAX);
    }
}
