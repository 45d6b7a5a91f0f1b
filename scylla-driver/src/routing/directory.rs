//! Per-node facts by [`NodeIdx`], with datacenter and rack names interned
//! into small integers, and the nodes grouped by datacenter.
//!
//! Interning happens once per table build so that the per-request code
//! compares integers, never strings, and walks a datacenter's nodes as one
//! contiguous slice.

use std::collections::BTreeMap;

use scylla_cql::sharding::Sharder;

use super::topology::{NodeIdx, NodeInfo};

/// A datacenter of one routing table, by index. Resolve a datacenter name
/// with [`RoutingTable::dc_id`](super::RoutingTable::dc_id) once (at session
/// configuration), then pass the id with every request.
///
/// Ids are assigned in name order, so tables built from topologies with the
/// same datacenter names agree on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DcId(pub u32);

/// A rack of one routing table: a (datacenter, rack) pair, by index (equal
/// rack names in different datacenters are different racks). Resolve it with
/// [`RoutingTable::rack_id`](super::RoutingTable::rack_id) once, then pass it
/// to plans ([`Plan::with_local_rack`](super::Plan::with_local_rack)).
///
/// Ids are assigned in (datacenter, rack) name order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RackId(pub u32);

/// Nodes by index: datacenter, rack, sharder; nodes grouped by datacenter.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Directory {
    /// Datacenter names by [`DcId`], sorted.
    dc_names: Vec<String>,
    /// `node_dc[n]`: the datacenter of node `n`.
    node_dc: Vec<DcId>,
    /// `node_rack[n]`: the rack of node `n`, as an id unique over all
    /// (datacenter, rack) pairs, so equal rack names in different
    /// datacenters are different racks.
    node_rack: Vec<u32>,
    /// The (datacenter, rack) names by rack id, sorted.
    rack_names: Vec<(String, String)>,
    /// `sharders[n]`: how node `n` maps tokens to shards, if it shards.
    sharders: Vec<Option<Sharder>>,
    /// Every node once, grouped by datacenter (in `DcId` order), in index
    /// order within a datacenter.
    dc_nodes: Vec<NodeIdx>,
    /// `dc_spans[d]`: the range of `dc_nodes` holding datacenter `d`.
    dc_spans: Vec<(u32, u32)>,
}

impl Directory {
    /// FNV-1a of the datacenter and rack names, folded to 32 bits: equal
    /// names, equal ids ([`DcId`] and [`RackId`] are assigned in name
    /// order), so ids resolved against a table with an equal fingerprint
    /// hold in this one.
    pub(crate) fn names_fingerprint(&self) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        for dc in &self.dc_names {
            eat(dc.as_bytes());
        }
        for (dc, rack) in &self.rack_names {
            eat(dc.as_bytes());
            eat(rack.as_bytes());
        }
        (h ^ (h >> 32)) as u32
    }

    /// Interns the datacenters and racks of `nodes`.
    pub(crate) fn new(nodes: &[NodeInfo]) -> Self {
        let mut dcs: BTreeMap<&str, u32> = BTreeMap::new();
        let mut racks: BTreeMap<(&str, &str), u32> = BTreeMap::new();
        for n in nodes {
            dcs.insert(&n.datacenter, 0);
            racks.insert((&n.datacenter, &n.rack), 0);
        }
        // Number the names in sorted order (deterministic ids).
        for (i, id) in dcs.values_mut().enumerate() {
            *id = i as u32;
        }
        for (i, id) in racks.values_mut().enumerate() {
            *id = i as u32;
        }
        // Lookups below cannot miss: both maps were filled from these nodes.
        let node_dc: Vec<DcId> = nodes
            .iter()
            .map(|n| DcId(dcs.get(n.datacenter.as_str()).copied().unwrap_or(0)))
            .collect();
        let node_rack = nodes
            .iter()
            .map(|n| {
                racks
                    .get(&(n.datacenter.as_str(), n.rack.as_str()))
                    .copied()
                    .unwrap_or(0)
            })
            .collect();
        let mut dc_nodes: Vec<NodeIdx> = (0..nodes.len() as u32).map(NodeIdx).collect();
        // Stable sort keeps index order within a datacenter.
        dc_nodes.sort_by_key(|n| node_dc[n.index()]);
        let mut dc_spans = vec![(0u32, 0u32); dcs.len()];
        for (pos, n) in dc_nodes.iter().enumerate() {
            let span = &mut dc_spans[node_dc[n.index()].0 as usize];
            if span.1 == 0 {
                span.0 = pos as u32;
            }
            span.1 = pos as u32 + 1;
        }
        Self {
            dc_names: dcs.keys().map(|s| (*s).to_owned()).collect(),
            node_dc,
            node_rack,
            rack_names: racks
                .keys()
                .map(|(d, r)| ((*d).to_owned(), (*r).to_owned()))
                .collect(),
            sharders: nodes.iter().map(|n| n.sharder).collect(),
            dc_nodes,
            dc_spans,
        }
    }

    /// Number of nodes.
    #[inline]
    pub(crate) fn node_count(&self) -> usize {
        self.node_dc.len()
    }

    /// Number of datacenters.
    #[inline]
    pub(crate) fn dc_count(&self) -> usize {
        self.dc_names.len()
    }

    /// Number of distinct (datacenter, rack) pairs.
    #[inline]
    pub(crate) fn rack_count(&self) -> usize {
        self.rack_names.len()
    }

    /// The id of rack `rack` of datacenter `dc`.
    pub(crate) fn rack_id(&self, dc: &str, rack: &str) -> Option<RackId> {
        self.rack_names
            .binary_search_by(|(d, r)| (d.as_str(), r.as_str()).cmp(&(dc, rack)))
            .ok()
            .map(|i| RackId(i as u32))
    }

    /// The id of the datacenter named `name`.
    pub(crate) fn dc_id(&self, name: &str) -> Option<DcId> {
        self.dc_names
            .binary_search_by(|n| n.as_str().cmp(name))
            .ok()
            .map(|i| DcId(i as u32))
    }

    #[cfg(any(test, feature = "unstable-internals"))]
    /// The name of datacenter `dc`.
    pub(crate) fn dc_name(&self, dc: DcId) -> Option<&str> {
        self.dc_names.get(dc.0 as usize).map(String::as_str)
    }

    /// The datacenter of `node` (`None` for an index out of range).
    #[inline]
    pub(crate) fn dc_of(&self, node: NodeIdx) -> Option<DcId> {
        self.node_dc.get(node.index()).copied()
    }

    /// The global rack id of `node`.
    #[inline]
    pub(crate) fn rack_of(&self, node: NodeIdx) -> Option<u32> {
        self.node_rack.get(node.index()).copied()
    }

    /// The sharder of `node`, if it shards.
    #[inline]
    pub(crate) fn sharder_of(&self, node: NodeIdx) -> Option<Sharder> {
        self.sharders.get(node.index()).copied().flatten()
    }

    /// All nodes, grouped by datacenter.
    #[inline]
    pub(crate) fn dc_nodes(&self) -> &[NodeIdx] {
        &self.dc_nodes
    }

    /// The range of [`Self::dc_nodes`] holding datacenter `dc` (empty for an
    /// unknown id).
    #[inline]
    pub(crate) fn dc_span(&self, dc: DcId) -> (usize, usize) {
        self.dc_spans
            .get(dc.0 as usize)
            .map_or((0, 0), |&(a, b)| (a as usize, b as usize))
    }
}
