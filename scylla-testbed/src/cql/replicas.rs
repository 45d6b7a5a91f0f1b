//! Which nodes replicate a token under a keyspace's replication strategy.
//!
//! Written here on purpose, independently of the driver's routing code: the
//! test cluster judges whether the driver sent a request to a replica, so it
//! must not share the driver's mistakes. The algorithms are Cassandra's:
//! walk the ring clockwise from the token's owner; SimpleStrategy takes the
//! first RF distinct nodes; NetworkTopologyStrategy takes, per datacenter,
//! RF nodes preferring distinct racks (a node on an already-used rack is
//! kept aside and used only once every rack of that datacenter is used).

use std::collections::{BTreeMap, HashMap, HashSet};

use scylla_cql::token::Token;

use crate::topology::NodeInfo;

/// A keyspace's replication, from its replication map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Every node holds everything (LocalStrategy, EverywhereStrategy, and
    /// anything unknown: never counted as a misroute).
    Everywhere,
    /// SimpleStrategy with a replication factor.
    Simple(usize),
    /// NetworkTopologyStrategy: factor per datacenter.
    NetworkTopology(BTreeMap<String, usize>),
}

impl Strategy {
    /// Reads a replication map (`class` plus options).
    pub(crate) fn from_map(m: &BTreeMap<String, String>) -> Strategy {
        let class = m.get("class").map(String::as_str).unwrap_or("");
        let short = class.rsplit('.').next().unwrap_or(class);
        let rf = |v: &String| v.parse::<usize>().unwrap_or(0);
        match short {
            "SimpleStrategy" => Strategy::Simple(m.get("replication_factor").map_or(1, rf)),
            "NetworkTopologyStrategy" => Strategy::NetworkTopology(
                m.iter()
                    .filter(|(k, _)| k.as_str() != "class")
                    .map(|(k, v)| (k.clone(), rf(v)))
                    .collect(),
            ),
            _ => Strategy::Everywhere,
        }
    }
}

/// The ring: every (token, node index), sorted by token.
fn ring(nodes: &[NodeInfo]) -> Vec<(Token, usize)> {
    let mut r: Vec<(Token, usize)> = nodes
        .iter()
        .flat_map(|n| n.tokens.iter().map(move |&t| (t, n.index)))
        .collect();
    r.sort_unstable();
    r
}

/// The node indexes replicating `token`, in ring order from the primary.
pub(crate) fn replicas(nodes: &[NodeInfo], strategy: &Strategy, token: Token) -> Vec<usize> {
    let ring = ring(nodes);
    if ring.is_empty() {
        return Vec::new();
    }
    // The first ring position whose token is >= the token (wrapping).
    let start = ring.partition_point(|(t, _)| *t < token) % ring.len();
    let walk = (0..ring.len()).map(|i| ring[(start + i) % ring.len()].1);
    match strategy {
        Strategy::Everywhere => nodes.iter().map(|n| n.index).collect(),
        Strategy::Simple(rf) => {
            let mut out = Vec::new();
            for n in walk {
                if out.len() >= *rf {
                    break;
                }
                if !out.contains(&n) {
                    out.push(n);
                }
            }
            out
        }
        Strategy::NetworkTopology(dcs) => network_topology(nodes, dcs, walk),
    }
}

fn network_topology(
    nodes: &[NodeInfo],
    dcs: &BTreeMap<String, usize>,
    walk: impl Iterator<Item = usize>,
) -> Vec<usize> {
    // Per datacenter: how many nodes and racks exist (an RF above the node
    // count is capped, as Cassandra does).
    let mut dc_nodes: HashMap<&str, usize> = HashMap::new();
    let mut dc_racks: HashMap<&str, HashSet<&str>> = HashMap::new();
    for n in nodes {
        *dc_nodes.entry(&n.datacenter).or_default() += 1;
        dc_racks.entry(&n.datacenter).or_default().insert(&n.rack);
    }
    let want = |dc: &str| -> usize {
        dcs.get(dc)
            .copied()
            .unwrap_or(0)
            .min(dc_nodes.get(dc).copied().unwrap_or(0))
    };
    let mut out: Vec<usize> = Vec::new();
    let mut got: HashMap<&str, usize> = HashMap::new();
    let mut seen_racks: HashMap<&str, HashSet<&str>> = HashMap::new();
    let mut skipped: HashMap<&str, Vec<usize>> = HashMap::new();
    let total: usize = dc_nodes.keys().map(|dc| want(dc)).sum();
    for i in walk {
        if out.len() >= total {
            break;
        }
        let Some(n) = nodes.get(i) else { continue };
        let dc = n.datacenter.as_str();
        let have = got.get(dc).copied().unwrap_or(0);
        if have >= want(dc) || out.contains(&i) {
            continue;
        }
        let racks = seen_racks.entry(dc).or_default();
        let all_racks = dc_racks.get(dc).map_or(0, HashSet::len);
        if racks.len() >= all_racks {
            // Every rack used: take nodes in ring order.
            out.push(i);
            *got.entry(dc).or_default() += 1;
        } else if racks.insert(&n.rack) {
            out.push(i);
            *got.entry(dc).or_default() += 1;
            if racks.len() >= all_racks {
                // Racks now exhausted: the nodes kept aside come first.
                for s in skipped.remove(dc).unwrap_or_default() {
                    if got.get(dc).copied().unwrap_or(0) >= want(dc) {
                        break;
                    }
                    out.push(s);
                    *got.entry(dc).or_default() += 1;
                }
            }
        } else {
            skipped.entry(dc).or_default().push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::num::NonZeroU16;

    fn node(index: usize, dc: &str, rack: &str, tokens: &[i64]) -> NodeInfo {
        NodeInfo {
            index,
            address: std::net::IpAddr::from([127, 0, 0, 1]),
            advertised: std::net::IpAddr::from([127, 0, 0, 1]),
            port: 9042,
            shard_aware_port: None,
            host_id: uuid::Uuid::nil(),
            datacenter: dc.into(),
            rack: rack.into(),
            tokens: tokens.iter().map(|&t| Token(t)).collect(),
            shards: NonZeroU16::MIN,
        }
    }

    #[test]
    fn simple_walks_distinct_nodes() {
        let n = vec![
            node(0, "dc", "r", &[0, 100]),
            node(1, "dc", "r", &[50]),
            node(2, "dc", "r", &[75]),
        ];
        assert_eq!(replicas(&n, &Strategy::Simple(1), Token(10)), vec![1]);
        assert_eq!(replicas(&n, &Strategy::Simple(2), Token(60)), vec![2, 0]);
        assert_eq!(
            replicas(&n, &Strategy::Simple(3), Token(101)),
            vec![0, 1, 2]
        );
        assert_eq!(replicas(&n, &Strategy::Simple(5), Token(101)).len(), 3);
    }

    #[test]
    fn nts_prefers_distinct_racks() {
        let n = vec![
            node(0, "a", "r1", &[0]),
            node(1, "a", "r1", &[10]),
            node(2, "a", "r2", &[20]),
            node(3, "b", "r1", &[30]),
        ];
        let s = Strategy::NetworkTopology([("a".into(), 2), ("b".into(), 1)].into());
        // From token 0: node 0 (r1), node 1 skipped (r1 used), node 2 (r2), node 3 (dc b).
        assert_eq!(replicas(&n, &s, Token(-5)), vec![0, 2, 3]);
        let s = Strategy::NetworkTopology([("a".into(), 3)].into());
        assert_eq!(replicas(&n, &s, Token(-5)), vec![0, 2, 1]);
        let m: BTreeMap<String, String> = [
            (
                "class".to_string(),
                "org.apache.cassandra.locator.SimpleStrategy".to_string(),
            ),
            ("replication_factor".to_string(), "3".to_string()),
        ]
        .into();
        assert_eq!(Strategy::from_map(&m), Strategy::Simple(3));
    }
}
