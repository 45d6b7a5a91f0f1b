//! Host filters: which nodes the driver uses at all.
//!
//! A [`HostFilter`] is asked about every node the metadata lists. A rejected
//! node is left out of the [`Metadata`](super::Metadata) snapshot: it gets no
//! pool, is never in a query plan, and the control connection neither
//! reconnects to it nor stays on it (a contact point that turns out to be a
//! rejected node is left for an accepted node it lists).
//!
//! Routing computes replicas among the accepted nodes only. With
//! `NetworkTopologyStrategy` and a filter by datacenter this is exact (each
//! datacenter's replicas depend only on its own nodes); other filters may
//! make token-aware routing pick a coordinator that is not a replica, which
//! is correct but costs a hop. Tablet replicas on rejected nodes are
//! skipped (the tablet routes to its accepted replicas) without the topology
//! refresh an unknown host would trigger.

use std::collections::HashSet;
use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use uuid::Uuid;

/// What a filter knows about a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostInfo<'a> {
    /// Where the driver would connect to it (after address translation).
    pub address: SocketAddr,
    /// Its datacenter.
    pub datacenter: &'a str,
    /// Its rack.
    pub rack: &'a str,
    /// Its host id.
    pub host_id: Uuid,
}

/// Decides which nodes the driver uses.
pub trait HostFilter: fmt::Debug + Send + Sync {
    /// Whether to use the node `host`.
    fn accept(&self, host: &HostInfo<'_>) -> bool;
}

/// Accepts only the nodes of the given datacenters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatacenterFilter {
    datacenters: Vec<String>,
}

impl DatacenterFilter {
    /// Accepts the nodes of `datacenters` only.
    pub fn new<I, S>(datacenters: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            datacenters: datacenters.into_iter().map(Into::into).collect(),
        }
    }
}

impl HostFilter for DatacenterFilter {
    fn accept(&self, host: &HostInfo<'_>) -> bool {
        self.datacenters.iter().any(|d| d == host.datacenter)
    }
}

/// Accepts only the nodes at the given addresses (the official crate's
/// filter by list).
///
/// Addresses are matched as the driver connects to a node: after address
/// translation, with the port. Host names are resolved once, by
/// [`new`](Self::new).
///
/// ```
/// use scylla_driver::policies::host_filter::AllowListHostFilter;
/// let filter = AllowListHostFilter::new(["127.0.0.1:9042", "127.0.0.2:9042"])?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowListHostFilter {
    allowed: HashSet<SocketAddr>,
}

impl AllowListHostFilter {
    /// Accepts the nodes at `allowed` (each an address or a host name with
    /// its port, as [`ToSocketAddrs`] takes them); fails when a name
    /// cannot be resolved.
    pub fn new<I, A>(allowed: I) -> Result<Self, io::Error>
    where
        I: IntoIterator<Item = A>,
        A: ToSocketAddrs,
    {
        let mut set = HashSet::new();
        for item in allowed {
            set.extend(item.to_socket_addrs()?);
        }
        Ok(Self { allowed: set })
    }
}

impl HostFilter for AllowListHostFilter {
    fn accept(&self, host: &HostInfo<'_>) -> bool {
        self.allowed.contains(&host.address)
    }
}

/// A filter from a closure.
pub struct FnHostFilter<F>(pub F);

impl<F> fmt::Debug for FnHostFilter<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnHostFilter")
    }
}

impl<F> HostFilter for FnHostFilter<F>
where
    F: Fn(&HostInfo<'_>) -> bool + Send + Sync,
{
    fn accept(&self, host: &HostInfo<'_>) -> bool {
        (self.0)(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datacenter_filter_and_closures() {
        let host = |dc| HostInfo {
            address: "127.0.0.1:9042".parse().unwrap(),
            datacenter: dc,
            rack: "r1",
            host_id: Uuid::nil(),
        };
        let f = DatacenterFilter::new(["dc1", "dc3"]);
        assert!(f.accept(&host("dc1")));
        assert!(!f.accept(&host("dc2")));
        let g = FnHostFilter(|h: &HostInfo<'_>| h.rack == "r1");
        assert!(g.accept(&host("dc2")));
        let listed = AllowListHostFilter::new(["127.0.0.1:9042"]).unwrap();
        assert!(listed.accept(&host("dc1")));
        let other_port = AllowListHostFilter::new([("127.0.0.1", 19042)]).unwrap();
        assert!(!other_port.accept(&host("dc1")));
        assert!(AllowListHostFilter::new(["not an address"]).is_err());
    }
}
