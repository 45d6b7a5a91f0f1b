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

use std::fmt;
use std::net::SocketAddr;

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
    }
}
