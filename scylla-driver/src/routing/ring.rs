//! The token ring: every (token, owner) pair of the cluster, sorted by token,
//! searched by binary search.
//!
//! The owner of a token `t` is the node of the first ring entry whose token is
//! `>= t`, wrapping around to the first entry past the largest token: each
//! node's token ends (inclusively) the range of tokens it owns.

use scylla_cql::token::Token;

use super::topology::{NodeIdx, NodeInfo};

/// The sorted token ring. Tokens and owners live in two parallel arrays so the
/// search touches only the (dense) token array.
///
/// A plain binary search over 25,600 vnode tokens is 15 dependent loads, most
/// of them cache misses on a busy client. Tokens are hashes, so they spread
/// evenly over the ring: a bucket index on the top bits of the token narrows
/// the search to the few entries of one bucket (about 4 on average) in one
/// load. Skewed tokens only make a bucket bigger; the search within it is
/// still a binary search, so the worst case stays logarithmic.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Ring {
    /// Ring tokens in increasing order (equal tokens are adjacent).
    tokens: Vec<Token>,
    /// `owners[i]` owns `tokens[i]`.
    owners: Vec<NodeIdx>,
    /// `buckets[b]`: the first entry whose token lies in bucket `b` or later,
    /// for `b` in `0..=2^bits` (the last is `tokens.len()`). Empty for an
    /// empty ring.
    buckets: Vec<u32>,
    /// `64 - bits`: a token's bucket is its biased value shifted right by this.
    shift: u32,
}

/// The token as an unsigned value with the same order (`i64::MIN` -> 0).
#[inline]
fn biased(t: Token) -> u64 {
    (t.0 as u64) ^ (1 << 63)
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
        let (tokens, owners): (Vec<Token>, Vec<NodeIdx>) = pairs.into_iter().unzip();
        // About 4 entries per bucket; at least 2 buckets so that the shift
        // stays below 64, at most 2^20 (4 MiB of index) for huge rings.
        let bits = (tokens.len() / 4).max(2).ilog2().clamp(1, 20);
        let shift = 64 - bits;
        let mut buckets = Vec::new();
        if !tokens.is_empty() {
            buckets.reserve((1 << bits) + 1);
            for (i, &t) in tokens.iter().enumerate() {
                // Every bucket up to this token's own starts at or before it.
                let b = (biased(t) >> shift) as usize;
                if buckets.len() <= b {
                    buckets.resize(b + 1, i as u32);
                }
            }
            buckets.resize((1 << bits) + 1, tokens.len() as u32);
        }
        Self {
            tokens,
            owners,
            buckets,
            shift,
        }
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
        let b = (biased(token) >> self.shift) as usize;
        // Entries before `lo` are in earlier buckets (all < token), entries
        // from `hi` on are in later ones (all > token): the answer is in
        // `lo..=hi`. `b < 2^bits` and `buckets` has `2^bits + 1` entries, so
        // `get` always succeeds; the fallback searches the whole ring.
        let (lo, hi) = match self.buckets.get(b..b + 2) {
            Some(&[lo, hi]) => (lo as usize, hi as usize),
            _ => (0, self.tokens.len()),
        };
        let within = self.tokens.get(lo..hi).unwrap_or(&[]);
        let p = lo + within.partition_point(|&t| t < token);
        Some(if p >= self.tokens.len() { 0 } else { p })
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

    #[cfg(any(test, feature = "unstable-internals"))]
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
    fn bucket_index_agrees_with_binary_search() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state as i64
        };
        for len in [1usize, 2, 3, 7, 64, 1000] {
            // Evenly spread tokens, and tokens crowded into one bucket.
            let spread: Vec<i64> = (0..len).map(|_| next()).collect();
            let crowded: Vec<i64> = (0..len).map(|_| next() % 1000).collect();
            for tokens in [spread, crowded] {
                let ring = Ring::new(&[node(&tokens)]);
                let mut probes: Vec<i64> = (0..500).map(|_| next()).collect();
                probes.extend(
                    tokens
                        .iter()
                        .flat_map(|&t| [t, t.wrapping_add(1), t.wrapping_sub(1)]),
                );
                probes.extend([i64::MIN, i64::MAX, 0, -1]);
                for t in probes {
                    let p = ring.tokens.partition_point(|&x| x < Token(t));
                    let want = if p == ring.len() { 0 } else { p };
                    assert_eq!(ring.position(Token(t)), Some(want), "token {t}");
                }
            }
        }
    }

    #[test]
    fn empty_ring_has_no_owner() {
        let ring = Ring::new(&[node(&[])]);
        assert_eq!(ring.len(), 0);
        assert_eq!(ring.owner(Token(0)), None);
    }
}
