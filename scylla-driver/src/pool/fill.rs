//! What a refill round aims at and where its connections go, by counts
//! alone: how the round fills the pool ([`Fill`]), what it may keep
//! ([`Bounds`]), what becomes of a connection that landed on a shard
//! ([`placement`]) and which shard gives up a surplus connection
//! ([`surplus_shard`]). The refill task applies these to the connections it
//! holds (`slots`); the `storm_sim` tool applies them to its counts, so the
//! two decide alike, with a NAT between them and the node too.

use scylla_cql::sharding::Shard;

/// How a round fills the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Through a working shard-aware port: a connection for every missing
    /// slot, exactly.
    Strict,
    /// Without a usable shard-aware port and below the wanted total: as many
    /// connections as are missing in total, wherever the node puts them.
    Total,
    /// At the wanted total with shards still uncovered: one background
    /// coverage attempt now and then.
    Background,
}

impl Fill {
    /// The round's aim: exact coverage is chased only while the shard-aware
    /// port works (`strict_port`); else the wanted total first (`total` held
    /// of `target`), then background coverage.
    pub fn choose(strict_port: bool, total: usize, target: usize) -> Fill {
        if strict_port {
            Fill::Strict
        } else if total < target {
            Fill::Total
        } else {
            Fill::Background
        }
    }

    /// The shards the round opens for, from the missing ones (one entry per
    /// missing connection): all of them when strict, as many as the total
    /// lacks otherwise. A background round's one attempt is drawn apart
    /// (`coverage`).
    pub fn wanted(self, missing: Vec<Shard>, total: usize, target: usize) -> Vec<Shard> {
        match self {
            Fill::Strict => missing,
            Fill::Total | Fill::Background => missing
                .into_iter()
                .take(target.saturating_sub(total))
                .collect(),
        }
    }

    /// How many connections the round may keep in all (`target`, or a few
    /// more while covering shards in the background: see [`surplus_bound`]).
    pub fn bounds(self, want: usize, target: usize, shards: usize) -> Bounds {
        let room = if self == Fill::Background {
            target + surplus_bound(shards)
        } else {
            target
        };
        Bounds { want, target, room }
    }

    /// Whether the finished round leaves the pool at its wanted total (or was
    /// a background attempt) without every shard covered: the `partial` fact
    /// of its outcome ([`super::plan::RoundTally::round`]).
    pub fn partial(self, total: usize, target: usize) -> bool {
        self != Fill::Strict && (self == Fill::Background || total >= target)
    }
}

/// How many connections a round may keep: `want` per shard, `target` in
/// all, `room` in all while covering shards in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Connections wanted per shard.
    pub want: usize,
    /// Connections wanted in all.
    pub target: usize,
    /// Most connections held in all during the round.
    pub room: usize,
}

/// What becomes of an opened connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Kept; `covers`: it fills a missing slot of its shard; `retire`: the
    /// pool then holds more than its total, and a surplus connection goes.
    Kept {
        /// It fills a missing slot of its shard.
        covers: bool,
        /// A surplus connection elsewhere is retired.
        retire: bool,
    },
    /// Kept in place of an older surplus connection (retired: of another
    /// shard than this one's if there is one).
    Rotated,
    /// Closed: its shard has all it wants and the pool all it may hold (or
    /// the node has no such shard).
    Closed,
}

/// Where a connection that landed on `landed` goes, given what the pool
/// holds per shard (`held`) and the round's bounds (`background`: a
/// background coverage attempt).
pub fn placement(held: &[usize], landed: usize, b: Bounds, background: bool) -> Placement {
    let total: usize = held.iter().sum();
    let Some(&on_shard) = held.get(landed) else {
        return Placement::Closed;
    };
    let covers = on_shard < b.want;
    if background && !covers && total >= b.room {
        // At the bound: rotate, keeping the new connection and retiring an
        // older surplus one elsewhere. Closing the new one would hand its
        // shard's slot straight back, and the node would give the next
        // attempt (of anyone) the same shard: coverage would stall.
        Placement::Rotated
    } else if covers || total < b.room {
        // A missing slot, or extra capacity on a covered shard (while fewer
        // than `room` are open).
        Placement::Kept {
            covers,
            retire: covers && total >= b.target,
        }
    } else {
        Placement::Closed
    }
}

/// Most connections a pool keeps beyond its wanted total while covering
/// shards in the background: a quarter of the shards, at least one.
pub fn surplus_bound(shards: usize) -> usize {
    (shards / 4).max(1)
}

/// The shard that gives up a surplus connection: the one holding the most
/// beyond `want`, another than `not` if there is one. `None`: no surplus.
pub fn surplus_shard(held: &[usize], want: usize, not: Option<usize>) -> Option<usize> {
    let surplus = |skip: Option<usize>| {
        held.iter()
            .enumerate()
            .filter(|&(i, &n)| n > want && Some(i) != skip)
            .max_by_key(|&(_, &n)| n)
            .map(|(i, _)| i)
    };
    surplus(not).or_else(|| surplus(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aim_follows_the_port_and_the_total() {
        assert_eq!(Fill::choose(true, 0, 4), Fill::Strict);
        assert_eq!(Fill::choose(false, 3, 4), Fill::Total);
        assert_eq!(Fill::choose(false, 4, 4), Fill::Background);
        assert_eq!(Fill::Strict.wanted(vec![1, 2, 3], 1, 4), vec![1, 2, 3]);
        assert_eq!(Fill::Total.wanted(vec![1, 2, 3], 2, 4), vec![1, 2]);
        assert!(Fill::Total.wanted(vec![1], 5, 4).is_empty());
        assert_eq!(Fill::Background.bounds(1, 8, 8).room, 10);
        assert_eq!(Fill::Total.bounds(1, 8, 8).room, 8);
        assert!(!Fill::Strict.partial(8, 8));
        assert!(Fill::Total.partial(8, 8) && !Fill::Total.partial(7, 8));
        assert!(Fill::Background.partial(7, 8));
    }

    #[test]
    fn a_landing_is_kept_rotated_or_closed() {
        let b = Fill::Total.bounds(1, 4, 4);
        // A missing slot: kept, nothing to retire below the total.
        assert_eq!(
            placement(&[1, 0, 1, 0], 1, b, false),
            Placement::Kept {
                covers: true,
                retire: false
            }
        );
        // A covered shard below the total: kept as extra capacity.
        assert_eq!(
            placement(&[1, 0, 1, 0], 0, b, false),
            Placement::Kept {
                covers: false,
                retire: false
            }
        );
        // At the total: a covered shard's landing is closed...
        assert_eq!(placement(&[2, 0, 1, 1], 0, b, false), Placement::Closed);
        // ...and a missing one's kept, a surplus retired.
        assert_eq!(
            placement(&[2, 0, 1, 1], 1, b, false),
            Placement::Kept {
                covers: true,
                retire: true
            }
        );
        // A background attempt at the room rotates.
        let bg = Fill::Background.bounds(1, 4, 4);
        assert_eq!(placement(&[3, 0, 1, 1], 0, bg, true), Placement::Rotated);
        assert_eq!(placement(&[1, 1], 5, b, false), Placement::Closed);
    }

    #[test]
    fn the_fullest_other_shard_gives_up_its_surplus() {
        assert_eq!(surplus_shard(&[1, 3, 2, 1], 1, None), Some(1));
        assert_eq!(surplus_shard(&[1, 3, 2, 1], 1, Some(1)), Some(2));
        assert_eq!(surplus_shard(&[1, 3, 1, 1], 1, Some(1)), Some(1));
        assert_eq!(surplus_shard(&[1, 1, 1], 1, None), None);
    }
}
