//! Choosing the source port that lands a connection on a given shard.
//!
//! ScyllaDB's shard-aware port assigns a connection to shard
//! `source_port % nr_shards`, so a client that binds its source port can open
//! exactly one connection per shard instead of retrying until the server's
//! "least loaded shard" rule happens to cover them all.
//!
//! The ports come from a range outside the kernel's ephemeral range (read from
//! `/proc/sys/net/ipv4/ip_local_port_range`), so they do not collide with
//! ports the kernel hands to ordinary outgoing connections. The allocator is
//! process-wide: several sessions in one process share it. A lease is keyed by
//! (port, destination), because with `SO_REUSEADDR` one local port can serve
//! connections to different nodes; the kernel only refuses a duplicate 4-tuple.
//! Candidates start at a random point of the range so that many clients do not
//! all try the same first port.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

use scylla_cql::sharding::{Shard, Sharder};

/// Fewest ports a range outside the ephemeral range must have to be used.
const MIN_RANGE_PORTS: u32 = 2048;

/// A half-open range of local ports `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub start: u16,
    /// One past the last port.
    pub end: u16,
}

impl PortRange {
    /// `[start, end)`; `None` if empty.
    pub fn new(start: u16, end: u16) -> Option<Self> {
        (start < end).then_some(Self { start, end })
    }

    /// Number of ports.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Whether the range holds no port (never true for a constructed range).
    pub fn is_empty(&self) -> bool {
        self.start >= self.end
    }

    /// The default range given the kernel's ephemeral range `[lo, hi]`: above
    /// it if that leaves enough ports, else below it (from 1024), else the top
    /// of the port space (49152..65535).
    pub fn outside_ephemeral(lo: u16, hi: u16) -> PortRange {
        let above = (hi as u32 + 1)..65535u32;
        let below = 1024u32..lo as u32;
        let pick = if above.len() as u32 >= MIN_RANGE_PORTS {
            above
        } else if below.len() as u32 >= MIN_RANGE_PORTS {
            below
        } else {
            49152..65535
        };
        // Both ends are within u16 by construction (<= 65535).
        PortRange {
            start: pick.start as u16,
            end: pick.end as u16,
        }
    }

    /// The default range for this machine.
    pub fn system_default() -> PortRange {
        let (lo, hi) = read_ephemeral_range().unwrap_or((32768, 60999));
        Self::outside_ephemeral(lo, hi)
    }
}

fn read_ephemeral_range() -> Option<(u16, u16)> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    let mut it = text.split_whitespace().map(|s| s.parse::<u16>().ok());
    let (lo, hi) = (it.next()??, it.next()??);
    (lo <= hi).then_some((lo, hi))
}

/// The process-wide table of source ports in use per destination.
#[derive(Debug, Default)]
pub struct SourcePortAllocator {
    leased: Mutex<HashSet<(u16, SocketAddr)>>,
}

impl SourcePortAllocator {
    /// The allocator shared by every session of the process.
    pub fn global() -> &'static SourcePortAllocator {
        static GLOBAL: OnceLock<SourcePortAllocator> = OnceLock::new();
        GLOBAL.get_or_init(SourcePortAllocator::default)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<(u16, SocketAddr)>> {
        // Insert/remove of plain values cannot leave the set torn.
        self.leased.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ports of `range` that land on `shard` and are not leased for `dest`,
    /// starting from a random point and wrapping once.
    pub fn candidates<'a>(
        &'a self,
        sharder: &Sharder,
        shard: Shard,
        range: PortRange,
        dest: SocketAddr,
        rng: &mut fastrand::Rng,
    ) -> impl Iterator<Item = u16> + 'a {
        let start = rng.u16(range.start..range.end);
        sharder
            .source_ports_for_shard(shard, range.start..range.end, start)
            .filter(move |p| !self.lock().contains(&(*p, dest)))
    }

    /// Leases `port` for connections to `dest`; `None` if already leased.
    pub fn try_lease(&'static self, port: u16, dest: SocketAddr) -> Option<PortLease> {
        // Insert first and build the lease only on success: a lease built and
        // dropped on failure would release the *existing* lease (and re-lock
        // the set while this statement still holds it).
        let inserted = self.lock().insert((port, dest));
        inserted.then(|| PortLease {
            port,
            dest,
            allocator: self,
        })
    }
}

/// A source port reserved for one connection; released when dropped.
#[derive(Debug)]
pub struct PortLease {
    port: u16,
    dest: SocketAddr,
    allocator: &'static SourcePortAllocator,
}

impl PortLease {
    #[cfg(any(test, feature = "unstable-internals"))]
    /// The leased port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for PortLease {
    fn drop(&mut self) {
        self.allocator.lock().remove(&(self.port, self.dest));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU16;

    #[test]
    fn default_range_avoids_the_ephemeral_range() {
        let r = PortRange::outside_ephemeral(32768, 60999);
        assert_eq!((r.start, r.end), (61000, 65535));
        let r = PortRange::outside_ephemeral(1024, 65000);
        assert_eq!((r.start, r.end), (49152, 65535));
        let r = PortRange::outside_ephemeral(40000, 65000);
        assert_eq!((r.start, r.end), (1024, 40000));
        let sys = PortRange::system_default();
        assert!(sys.len() >= 2048);
    }

    #[test]
    fn leases_are_per_destination_and_released() {
        let a: SocketAddr = "127.0.0.1:19042".parse().unwrap();
        let b: SocketAddr = "127.0.0.2:19042".parse().unwrap();
        let alloc = SourcePortAllocator::global();
        let l1 = alloc.try_lease(61001, a).unwrap();
        assert!(alloc.try_lease(61001, a).is_none());
        let l2 = alloc.try_lease(61001, b).unwrap();
        drop(l1);
        assert!(alloc.try_lease(61001, a).is_some());
        drop(l2);
    }

    #[test]
    fn candidates_land_on_the_shard_and_skip_leased() {
        let s = Sharder::new(NonZeroU16::new(8).unwrap(), 12);
        let dest: SocketAddr = "127.0.0.3:19042".parse().unwrap();
        let alloc = SourcePortAllocator::global();
        let range = PortRange::new(62000, 62100).unwrap();
        let mut rng = fastrand::Rng::with_seed(1);
        let all: Vec<u16> = alloc.candidates(&s, 5, range, dest, &mut rng).collect();
        assert!(all.iter().all(|p| p % 8 == 5));
        assert_eq!(all.len(), (62000..62100).filter(|p| p % 8 == 5).count());
        let _lease = alloc.try_lease(all[0], dest).unwrap();
        let again: Vec<u16> = alloc.candidates(&s, 5, range, dest, &mut rng).collect();
        assert!(!again.contains(&all[0]));
        assert_eq!(again.len(), all.len() - 1);
    }
}
