//! The token ring: every (token, owner) pair of the cluster, sorted by token,
//! searched by binary search.
//!
//! The owner of a token `t` is the node of the first ring entry whose token is
//! `>= t`, wrapping around to the first entry past the largest token: each
//! node's token ends (inclusively) the range of tokens it owns.

use scylla_cql::token::Token;

use super::topology::{NodeIdx, NodeInfo};

/// The sorted token ring. Tokens and owners live in two parallel arrays so the
/// binary search touches only the (dense) token array.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Ring {
    /// Ring tokens in increasing order (equal tokens are adjacent).
    tokens: Vec<Token>,
    /// `owners[i]` owns `tokens[i]`.
    owners: Vec<NodeIdx>,
}

impl Ring {
    /// Builds the ring from every node's tokens.
    ///
    /// A token listed twice by the same node counts once. A token claimed by
    /// several nodes (a replaced node still in `system.peers`, a token
    /// collision during bootstrap) keeps one entry per node, ordered by node
    /// index: the lowest index owns the token, the others follow it on the
    /// walk. Sorting by `(token, node)` makes that choice deterministic,
    /// independent of the order tokens were listed in.
    pub(crate) fn new(nodes: &[NodeInfo]) -> Self {
        let total: usize = nodes.iter().map(|n| n.tokens.len()).sum();
        let mut pairs: Vec<(Token, NodeIdx)> = Vec::with_capacity(total);
        for (i, node) in nodes.iter().enumerate() {
            // Node counts above u32::MAX cannot come from a real cluster; the
            // table builder caps the node list before calling us.
            let idx = NodeIdx(i as u32);
            pairs.extend(node.tokens.iter().map(|&t| (t, idx)));
        }
        pairs.sort_unstable();
        pairs.dedup();
        let (tokens, owners) = pairs.into_iter().unzip();
        Self { tokens, owners }
    }

    /// Number of ring entries.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The index of the ring entry that owns `token`: the first entry with a
    /// token `>= token`, or entry 0 when `token` is past the last one.
    /// `None` only for an empty ring.
    #[inline]
    pub(crate) fn position(&self, token: Token) -> Option<usize> {
        if self.tokens.is_empty() {
            return None;
        }
        let p = self.tokens.partition_point(|&t| t < token);
        Some(if p == self.tokens.len() { 0 } else { p })
    }

    /// The owner of ring entry `pos`, for `pos < self.len()`.
    #[inline]
    pub(crate) fn owner_at(&self, pos: usize) -> Option<NodeIdx> {
        self.owners.get(pos).copied()
    }

    /// Owners of all ring entries, in ring order.
    #[inline]
    pub(crate) fn owners(&self) -> &[NodeIdx] {
        &self.owners
    }

    /// The node owning `token` on the ring (its primary replica).
    #[inline]
    pub(crate) fn owner(&self, token: Token) -> Option<NodeIdx> {
        self.position(token).and_then(|p| self.owner_at(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(tokens: &[i64]) -> NodeInfo {
        NodeInfo {
            datacenter: "dc".into(),
            rack: "r".into(),
            tokens: tokens.iter().map(|&t| Token(t)).collect(),
            sharder: None,
        }
    }

    #[test]
    fn owner_is_first_token_at_or_after_wrapping() {
        let ring = Ring::new(&[node(&[100, -50]), node(&[0]), node(&[200])]);
        assert_eq!(ring.len(), 4);
        let owner = |t| ring.owner(Token(t)).unwrap().0;
        assert_eq!(owner(-100), 0); // -> -50
        assert_eq!(owner(-50), 0); // inclusive end
        assert_eq!(owner(-49), 1); // -> 0
        assert_eq!(owner(1), 0); // -> 100
        assert_eq!(owner(150), 2); // -> 200
        assert_eq!(owner(201), 0); // wraps to -50
        assert_eq!(owner(i64::MIN), 0);
        assert_eq!(owner(i64::MAX), 0);
    }

    #[test]
    fn duplicate_tokens_are_deterministic() {
        let a = Ring::new(&[node(&[5, 5, 10]), node(&[5])]);
        assert_eq!(a.len(), 3);
        assert_eq!(a.owner(Token(5)), Some(NodeIdx(0)));
        assert_eq!(a.owners(), &[NodeIdx(0), NodeIdx(1), NodeIdx(0)]);
        let b = Ring::new(&[node(&[10, 5]), node(&[5])]);
        assert_eq!(a, b);
    }

    #[test]
    fn empty_ring_has_no_owner() {
        let ring = Ring::new(&[node(&[])]);
        assert_eq!(ring.len(), 0);
        assert_eq!(ring.owner(Token(0)), None);
    }
}
