//! Tests of the routing table: small hand-computed rings, then property tests
//! on random topologies against a straightforward reference model of the
//! replication strategies (written after Cassandra's structure, independently
//! of the precomputed implementation).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use scylla_cql::sharding::Sharder;
use scylla_cql::token::Token;

use super::*;

fn node(dc: &str, rack: &str, tokens: &[i64]) -> NodeInfo {
    NodeInfo {
        datacenter: dc.into(),
        rack: rack.into(),
        tokens: tokens.iter().map(|&t| Token(t)).collect(),
        sharder: None,
    }
}

fn input(nodes: Vec<NodeInfo>, keyspaces: &[(&str, ReplicationStrategy)]) -> TopologyInput {
    TopologyInput {
        nodes,
        keyspaces: keyspaces
            .iter()
            .map(|(n, s)| ((*n).to_owned(), s.clone()))
            .collect(),
    }
}

fn nts(rfs: &[(&str, usize)]) -> ReplicationStrategy {
    ReplicationStrategy::NetworkTopology {
        dc_rfs: rfs.iter().map(|&(d, rf)| (d.to_owned(), rf)).collect(),
    }
}

fn ids(v: &[u32]) -> Vec<NodeIdx> {
    v.iter().map(|&i| NodeIdx(i)).collect()
}

fn all_up(_: NodeIdx) -> bool {
    true
}

/// Ring: -100 A, 0 B, 50 A, 100 C (A = 0, B = 1, C = 2).
fn three_nodes() -> RoutingTable {
    RoutingTable::build(&input(
        vec![
            node("dc1", "r1", &[-100, 50]),
            node("dc1", "r1", &[0]),
            node("dc1", "r1", &[100]),
        ],
        &[
            ("rf2", ReplicationStrategy::Simple { rf: 2 }),
            ("rf3", ReplicationStrategy::Simple { rf: 3 }),
            ("rf9", ReplicationStrategy::Simple { rf: 9 }),
            ("local", ReplicationStrategy::Local),
        ],
    ))
}

#[test]
fn simple_strategy_by_hand() {
    let t = three_nodes();
    let rf2 = t.keyspace_id("rf2").unwrap();
    let rf3 = t.keyspace_id("rf3").unwrap();
    assert_eq!(t.replicas(rf2, Token(-100)), ids(&[0, 1]));
    assert_eq!(t.replicas(rf2, Token(-99)), ids(&[1, 0]));
    assert_eq!(t.replicas(rf2, Token(1)), ids(&[0, 2]));
    assert_eq!(t.replicas(rf2, Token(60)), ids(&[2, 0]));
    assert_eq!(t.replicas(rf2, Token(101)), ids(&[0, 1])); // wraps
    assert_eq!(t.replicas(rf3, Token(1)), ids(&[0, 2, 1]));
    assert_eq!(t.replicas(rf3, Token(60)), ids(&[2, 0, 1]));
    // RF above the node count is capped, and shares rf3's lists.
    assert_eq!(t.keyspace_id("rf9"), Some(rf3));
    let local = t.keyspace_id("local").unwrap();
    assert!(t.replicas(local, Token(1)).is_empty());
}

/// dc1: n0 r1 @0, n1 r1 @10, n2 r2 @20, n3 r2 @30; dc2: n4 @5, n5 @25.
/// Ring: 0 n0, 5 n4, 10 n1, 20 n2, 25 n5, 30 n3.
fn racks_nodes() -> Vec<NodeInfo> {
    vec![
        node("dc1", "r1", &[0]),
        node("dc1", "r1", &[10]),
        node("dc1", "r2", &[20]),
        node("dc1", "r2", &[30]),
        node("dc2", "r1", &[5]),
        node("dc2", "r1", &[25]),
    ]
}

fn racks() -> RoutingTable {
    RoutingTable::build(&input(
        racks_nodes(),
        &[
            ("a", nts(&[("dc1", 2), ("dc2", 1)])),
            ("b", nts(&[("dc1", 3), ("dc2", 1), ("nowhere", 5)])),
            ("c", nts(&[("dc2", 7)])),
        ],
    ))
}

#[test]
fn network_topology_strategy_by_hand() {
    let t = racks();
    let a = t.keyspace_id("a").unwrap();
    // n1 shares n0's rack and dc1 has 2 racks for rf 2: skipped for n2.
    assert_eq!(t.replicas(a, Token(0)), ids(&[0, 4, 2]));
    assert_eq!(t.replicas(a, Token(6)), ids(&[1, 2, 5]));
    assert_eq!(t.replicas(a, Token(21)), ids(&[5, 3, 0]));
    let b = t.keyspace_id("b").unwrap();
    // rf 3 over 2 racks: one repeat allowed, taken by the first node met.
    assert_eq!(t.replicas(b, Token(0)), ids(&[0, 4, 1, 2]));
    assert_eq!(t.replicas(b, Token(11)), ids(&[2, 5, 3, 0]));
    let c = t.keyspace_id("c").unwrap();
    assert_eq!(t.replicas(c, Token(0)), ids(&[4, 5]));
    assert_eq!(t.replicas(c, Token(6)), ids(&[5, 4]));
}

#[test]
fn plan_orders_local_replicas_remote_replicas_then_others() {
    let t = racks();
    let a = t.keyspace_id("a").unwrap();
    let dc2 = t.dc_id("dc2");
    let request = RoutingRequest {
        keyspace: Some(a),
        token: Some(Token(0)),
        lwt: true,
        local_dc: dc2,
        seed: 0,
    };
    let order: Vec<u32> = t.plan(&request, &all_up).map(|x| x.node.0).collect();
    // Local replica n4; remote replicas n0, n2; other local n5; other remote n1, n3.
    assert_eq!(order, [4, 0, 2, 5, 1, 3]);
    // Down nodes are skipped everywhere.
    let up = |n: NodeIdx| n != NodeIdx(4) && n != NodeIdx(1);
    let order: Vec<u32> = t.plan(&request, &up).map(|x| x.node.0).collect();
    assert_eq!(order, [0, 2, 5, 3]);
}

#[test]
fn simple_strategy_over_several_dcs_still_puts_local_replicas_first() {
    // SimpleStrategy ignores datacenters, so the number of local replicas
    // varies by position and the plan scans instead of slicing.
    let topology = input(
        racks_nodes(),
        &[("s", ReplicationStrategy::Simple { rf: 3 })],
    );
    let t = RoutingTable::build(&topology);
    let request = RoutingRequest {
        keyspace: t.keyspace_id("s"),
        token: Some(Token(0)),
        lwt: true,
        local_dc: t.dc_id("dc2"),
        seed: 0,
    };
    assert_eq!(
        t.replicas(request.keyspace.unwrap(), Token(0)),
        ids(&[0, 4, 1])
    );
    let order: Vec<u32> = t.plan(&request, &all_up).map(|x| x.node.0).collect();
    assert_eq!(order, [4, 0, 1, 5, 2, 3]);
}

#[test]
fn seed_spreads_load_but_lwt_keeps_the_primary_first() {
    let t = three_nodes();
    let rf3 = t.keyspace_id("rf3").unwrap();
    let mut request = RoutingRequest {
        keyspace: Some(rf3),
        token: Some(Token(1)),
        ..Default::default()
    };
    let firsts: BTreeSet<u32> = (0..3)
        .map(|seed| {
            request.seed = seed;
            t.plan(&request, &all_up).next().unwrap().node.0
        })
        .collect();
    assert_eq!(firsts.len(), 3);
    request.lwt = true;
    for seed in 0..3 {
        request.seed = seed;
        let order: Vec<u32> = t.plan(&request, &all_up).map(|x| x.node.0).collect();
        assert_eq!(order, [0, 2, 1]);
    }
}

#[test]
fn no_routing_information_round_robins_local_dc_first() {
    let t = racks();
    let dc1 = t.dc_id("dc1");
    for seed in 0..8 {
        let request = RoutingRequest {
            local_dc: dc1,
            seed,
            ..Default::default()
        };
        let plan: Vec<Target> = t.plan(&request, &all_up).collect();
        let order: Vec<u32> = plan.iter().map(|x| x.node.0).collect();
        assert_eq!(order.len(), 6);
        assert!(order[..4].iter().all(|&n| n < 4), "{order:?}");
        assert_eq!(order[0] as u64, seed % 4);
        assert!(plan.iter().all(|x| x.shard.is_none()));
    }
}

#[test]
fn shards_come_from_each_nodes_sharder() {
    let mut nodes = vec![node("dc1", "r1", &[0]), node("dc1", "r1", &[1 << 40])];
    nodes[0].sharder = Some(Sharder::new(NonZeroU16::new(8).unwrap(), 12));
    let t = RoutingTable::build(&input(
        nodes,
        &[("ks", ReplicationStrategy::Simple { rf: 1 })],
    ));
    let token = Token(-12345);
    let request = RoutingRequest {
        keyspace: t.keyspace_id("ks"),
        token: Some(token),
        ..Default::default()
    };
    let plan: Vec<Target> = t.plan(&request, &all_up).collect();
    let expected = Sharder::new(NonZeroU16::new(8).unwrap(), 12).shard_of(token);
    assert_eq!(
        plan,
        [
            Target {
                node: NodeIdx(0),
                shard: Some(expected)
            },
            Target {
                node: NodeIdx(1),
                shard: None
            },
        ]
    );
}

#[test]
fn stale_keyspace_ids_are_detected() {
    let old = three_nodes();
    let rf2 = old.keyspace_id("rf2").unwrap();
    let new = RoutingTable::build(&input(
        vec![node("dc1", "r1", &[0])],
        &[("rf2", ReplicationStrategy::Local)],
    ));
    assert!(old.is_current(rf2));
    assert!(!new.is_current(rf2));
    assert!(new.replicas(rf2, Token(0)).is_empty());
}

#[test]
fn zero_token_nodes_coordinate_but_do_not_replicate() {
    let t = RoutingTable::build(&input(
        vec![node("dc1", "r1", &[]), node("dc1", "r1", &[7])],
        &[("ks", ReplicationStrategy::Everywhere)],
    ));
    let ks = t.keyspace_id("ks").unwrap();
    assert_eq!(t.replicas(ks, Token(100)), ids(&[1]));
    let request = RoutingRequest {
        keyspace: Some(ks),
        token: Some(Token(100)),
        ..Default::default()
    };
    let order: Vec<u32> = t.plan(&request, &all_up).map(|x| x.node.0).collect();
    assert_eq!(order, [1, 0]);
    let empty = RoutingTable::build(&TopologyInput::default());
    assert_eq!(empty.plan(&request, &all_up).count(), 0);
}

// ---------------------------------------------------------------------------
// Reference model.

/// The ring as sorted, deduplicated (token, node) pairs.
fn ref_ring(input: &TopologyInput) -> Vec<(i64, u32)> {
    let mut ring: Vec<(i64, u32)> = input
        .nodes
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.tokens.iter().map(move |t| (t.0, i as u32)))
        .collect();
    ring.sort();
    ring.dedup();
    ring
}

/// Owners in walk order starting at the owner of `token`.
fn ref_walk(ring: &[(i64, u32)], token: i64) -> Vec<u32> {
    let start = ring.iter().position(|&(t, _)| t >= token).unwrap_or(0);
    (0..ring.len())
        .map(|k| ring[(start + k) % ring.len()].1)
        .collect()
}

fn ref_simple(walk: &[u32], rf: usize) -> Vec<u32> {
    let mut out = Vec::new();
    for &n in walk {
        if out.len() < rf && !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Cassandra's per-datacenter bookkeeping, literally: `rf_left` capped by
/// the dc's nodes, rack repeats from the *uncapped* factor.
fn ref_nts(input: &TopologyInput, walk: &[u32], dc_rfs: &BTreeMap<String, usize>) -> Vec<u32> {
    struct Dc {
        rf_left: usize,
        repeats: isize,
        racks: HashSet<String>,
    }
    let on_ring: BTreeSet<u32> = walk.iter().copied().collect();
    let mut dcs: BTreeMap<&str, Dc> = BTreeMap::new();
    for (name, &rf) in dc_rfs {
        let members: Vec<&NodeInfo> = on_ring
            .iter()
            .map(|&n| &input.nodes[n as usize])
            .filter(|n| &n.datacenter == name)
            .collect();
        let rack_count = members
            .iter()
            .map(|n| &n.rack)
            .collect::<HashSet<_>>()
            .len();
        dcs.insert(
            name,
            Dc {
                rf_left: rf.min(members.len()),
                repeats: rf as isize - rack_count as isize,
                racks: HashSet::new(),
            },
        );
    }
    let mut out: Vec<u32> = Vec::new();
    for &n in walk {
        let info = &input.nodes[n as usize];
        let Some(dc) = dcs.get_mut(info.datacenter.as_str()) else {
            continue;
        };
        if dc.rf_left == 0 || out.contains(&n) {
            continue;
        }
        if dc.racks.insert(info.rack.clone()) {
            dc.rf_left -= 1;
            out.push(n);
        } else if dc.repeats > 0 {
            dc.repeats -= 1;
            dc.rf_left -= 1;
            out.push(n);
        }
    }
    out
}

fn ref_replicas(input: &TopologyInput, s: &ReplicationStrategy, token: i64) -> Vec<u32> {
    let ring = ref_ring(input);
    if ring.is_empty() {
        return Vec::new();
    }
    let walk = ref_walk(&ring, token);
    match s {
        ReplicationStrategy::Simple { rf } => ref_simple(&walk, *rf),
        ReplicationStrategy::Other { .. } => ref_simple(&walk, 1),
        ReplicationStrategy::Everywhere => ref_simple(&walk, usize::MAX),
        ReplicationStrategy::Local => Vec::new(),
        ReplicationStrategy::NetworkTopology { dc_rfs } => ref_nts(input, &walk, dc_rfs),
    }
}

// ---------------------------------------------------------------------------
// Property tests.

#[derive(Debug, Clone)]
struct Case {
    input: TopologyInput,
    token: i64,
    up: Vec<bool>,
    seed: u64,
    lwt: bool,
    local_dc: Option<String>,
}

fn arb_token() -> impl Strategy<Value = i64> {
    // Small tokens make collisions between nodes (and with the query) likely.
    prop_oneof![any::<i64>(), -40i64..40, Just(i64::MIN), Just(i64::MAX)]
}

fn arb_node(dcs: usize, racks: usize) -> impl Strategy<Value = NodeInfo> {
    (
        0..dcs,
        0..racks,
        proptest::collection::vec(arb_token(), 1..=16),
        proptest::option::of((1u16..=16, 0u8..=14)),
    )
        .prop_map(|(dc, rack, tokens, shards)| NodeInfo {
            datacenter: format!("dc{dc}"),
            rack: format!("r{rack}"),
            tokens: tokens.into_iter().map(Token).collect(),
            sharder: shards.and_then(|(n, msb)| Some(Sharder::new(NonZeroU16::new(n)?, msb))),
        })
}

fn arb_strategy() -> impl Strategy<Value = ReplicationStrategy> {
    let dc = prop_oneof![Just("dc0"), Just("dc1"), Just("dc2"), Just("dcX")];
    prop_oneof![
        2 => (0usize..6).prop_map(|rf| ReplicationStrategy::Simple { rf }),
        2 => proptest::collection::btree_map(dc.prop_map(str::to_owned), 0usize..5, 0..4)
            .prop_map(|dc_rfs| ReplicationStrategy::NetworkTopology { dc_rfs }),
        3 => proptest::collection::btree_map(Just("dc0".to_owned()), 1usize..5, 1)
            .prop_map(|dc_rfs| ReplicationStrategy::NetworkTopology { dc_rfs }),
        1 => Just(ReplicationStrategy::Local),
        1 => Just(ReplicationStrategy::Everywhere),
        1 => Just(ReplicationStrategy::Other { class: "x.Custom".to_owned() }),
    ]
}

fn arb_case() -> impl Strategy<Value = Case> {
    (1usize..=3, 1usize..=4)
        .prop_flat_map(|(dcs, racks)| {
            (
                proptest::collection::vec(arb_node(dcs, racks), 1..=12),
                proptest::collection::btree_map("ks[0-5]", arb_strategy(), 1..5),
                arb_token(),
                proptest::collection::vec(proptest::bool::weighted(0.7), 12),
                any::<u64>(),
                any::<bool>(),
                proptest::option::of((0..dcs).prop_map(|d| format!("dc{d}"))),
            )
        })
        .prop_map(|(nodes, keyspaces, token, up, seed, lwt, local_dc)| Case {
            input: TopologyInput { nodes, keyspaces },
            token,
            up,
            seed,
            lwt,
            local_dc,
        })
}

/// Replica-list properties stated directly (besides equality with the model).
fn check_replicas(case: &Case, s: &ReplicationStrategy, got: &[NodeIdx], table: &RoutingTable) {
    let nodes = &case.input.nodes;
    let distinct: HashSet<NodeIdx> = got.iter().copied().collect();
    assert_eq!(distinct.len(), got.len(), "replicas repeat: {got:?}");
    let owner = table.owner(Token(case.token));
    match s {
        ReplicationStrategy::Simple { rf } => {
            assert_eq!(got.len(), (*rf).min(nodes.len()));
            if *rf > 0 {
                assert_eq!(got.first().copied(), owner);
            }
        }
        ReplicationStrategy::NetworkTopology { dc_rfs } => {
            for (dc, &rf) in dc_rfs {
                let in_dc: Vec<&NodeInfo> = nodes.iter().filter(|n| &n.datacenter == dc).collect();
                let racks: HashSet<&String> = in_dc.iter().map(|n| &n.rack).collect();
                let chosen: Vec<&NodeInfo> = got
                    .iter()
                    .map(|n| &nodes[n.index()])
                    .filter(|n| &n.datacenter == dc)
                    .collect();
                assert_eq!(chosen.len(), rf.min(in_dc.len()), "dc {dc}");
                if rf <= racks.len() {
                    let chosen_racks: HashSet<&String> = chosen.iter().map(|n| &n.rack).collect();
                    assert_eq!(chosen_racks.len(), chosen.len(), "racks repeat in {dc}");
                }
            }
            let owner_dc = owner.map(|o| &nodes[o.index()].datacenter);
            if owner_dc.is_some_and(|dc| dc_rfs.get(dc).is_some_and(|&rf| rf > 0)) {
                assert_eq!(got.first().copied(), owner);
            }
            assert!(got
                .iter()
                .all(|n| dc_rfs.contains_key(&nodes[n.index()].datacenter)));
        }
        ReplicationStrategy::Everywhere => {
            assert_eq!(got.len(), nodes.len());
            assert_eq!(got.first().copied(), owner);
        }
        ReplicationStrategy::Other { .. } => assert_eq!(got, owner.as_slice()),
        ReplicationStrategy::Local => assert!(got.is_empty()),
    }
}

/// Plan properties for one request, whose plan balances by `loads` (empty:
/// not at all). Balancing only moves where each step starts, so every
/// property of the plain plan holds.
fn check_plan(
    case: &Case,
    table: &RoutingTable,
    request: &RoutingRequest,
    replicas: &[NodeIdx],
    loads: &[Arc<NodeLoad>],
) {
    let nodes = &case.input.nodes;
    let up = |n: NodeIdx| case.up[n.index()];
    let plan: Vec<Target> = table.plan(request, &up).with_loads(loads).collect();
    let yielded: Vec<NodeIdx> = plan.iter().map(|t| t.node).collect();
    let set: BTreeSet<NodeIdx> = yielded.iter().copied().collect();
    assert_eq!(set.len(), yielded.len(), "a node twice: {yielded:?}");
    let all_up_nodes: BTreeSet<NodeIdx> = (0..nodes.len() as u32)
        .map(NodeIdx)
        .filter(|&n| up(n))
        .collect();
    assert_eq!(set, all_up_nodes, "yields exactly the up nodes");
    let everyone = table.plan(request, &all_up).with_loads(loads).count();
    assert_eq!(everyone, nodes.len());

    for t in &plan {
        let expected = match (request.token, nodes[t.node.index()].sharder) {
            (Some(tok), Some(s)) => Some(s.shard_of(tok)),
            _ => None,
        };
        assert_eq!(t.shard, expected);
    }

    let local_dc = request.local_dc.and_then(|d| table.dc_name(d));
    let is_local = |n: &NodeIdx| local_dc.is_none_or(|dc| nodes[n.index()].datacenter == dc);
    // Replica part: the up replicas, local ones first, each part a rotation
    // (LWT: no rotation) of that part's replicas with down ones skipped, in
    // ring order or (remote replicas, when grouped) by datacenter.
    let (locals, remotes): (Vec<NodeIdx>, Vec<NodeIdx>) =
        replicas.iter().partition(|n| is_local(n));
    let mut by_dc = remotes.clone();
    by_dc.sort_by_key(|n| &nodes[n.index()].datacenter);
    let mut at = 0;
    for orders in [vec![locals], vec![remotes, by_dc]] {
        let up_count = orders[0].iter().filter(|&&n| up(n)).count();
        let got = &yielded[at..at + up_count];
        at += up_count;
        let fits = orders.iter().any(|part| {
            (0..part.len().max(1)).any(|r| {
                if request.lwt && r > 0 {
                    return false;
                }
                let mut p = part.clone();
                let k = r.min(p.len());
                p.rotate_left(k);
                p.retain(|&n| up(n));
                p == got
            })
        });
        assert!(fits, "{got:?} vs {orders:?} (lwt {})", request.lwt);
    }
    // Fallback part: non-replicas, local datacenter first.
    let rest = &yielded[at..];
    assert!(rest.iter().all(|n| !replicas.contains(n)));
    let first_remote = rest.iter().position(|n| !is_local(n)).unwrap_or(rest.len());
    assert!(rest[first_remote..].iter().all(|n| !is_local(n)));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn table_matches_the_model_and_plans_are_sound(case in arb_case()) {
        let table = RoutingTable::build(&case.input);
        // Rebuilding, also from differently ordered token lists, is identical.
        prop_assert_eq!(&RoutingTable::build(&case.input), &table);
        let mut shuffled = case.input.clone();
        for n in &mut shuffled.nodes {
            n.tokens.reverse();
        }
        prop_assert_eq!(&RoutingTable::build(&shuffled), &table);

        let local_dc = case.local_dc.as_deref().and_then(|d| table.dc_id(d));
        for (name, strategy) in &case.input.keyspaces {
            let ks = table.keyspace_id(name).unwrap();
            let got = table.replicas(ks, Token(case.token));
            let mut want = ref_replicas(&case.input, strategy, case.token);
            let mut got_ids: Vec<u32> = got.iter().map(|n| n.0).collect();
            if *strategy == ReplicationStrategy::Everywhere {
                // Owner first; the others in the walk order from the owner's
                // first ring position, not necessarily from this one.
                prop_assert_eq!(got_ids.first(), want.first());
                got_ids.sort_unstable();
                want.sort_unstable();
            }
            prop_assert_eq!(got_ids, want);
            check_replicas(&case, strategy, got, &table);

            let request = RoutingRequest {
                keyspace: Some(ks),
                token: Some(Token(case.token)),
                lwt: case.lwt,
                local_dc,
                seed: case.seed,
            };
            check_plan(&case, &table, &request, got, &[]);
        }
        // No routing information: only the round robin.
        for token in [None, Some(Token(case.token))] {
            let request = RoutingRequest { token, local_dc, seed: case.seed, ..Default::default() };
            check_plan(&case, &table, &request, &[], &[]);
        }
    }
}

proptest! {
    /// A remembered keyspace id is the one a lookup by name gives, whatever
    /// sequence of tables (schemas that add, drop and remap keyspaces) it
    /// is used with.
    #[test]
    fn a_cached_keyspace_id_is_always_the_lookup(
        schemas in proptest::collection::vec(
            proptest::collection::btree_map(0u8..5, 1u8..5, 0..5), 1..6),
        lookups in proptest::collection::vec((0usize..6, 0u8..6), 1..40),
    ) {
        let tables: Vec<RoutingTable> = schemas
            .iter()
            .map(|ks| {
                let named: Vec<(String, ReplicationStrategy)> = ks
                    .iter()
                    .map(|(&k, &rf)| (format!("ks{k}"), ReplicationStrategy::Simple { rf: rf.into() }))
                    .collect();
                let named: Vec<(&str, ReplicationStrategy)> =
                    named.iter().map(|(n, s)| (n.as_str(), s.clone())).collect();
                RoutingTable::build(&input(
                    vec![node("dc1", "r1", &[-100]), node("dc1", "r1", &[0]), node("dc1", "r1", &[100])],
                    &named,
                ))
            })
            .collect();
        let caches: Vec<KeyspaceIdCache> = (0..6).map(|_| KeyspaceIdCache::default()).collect();
        for (t, k) in lookups {
            let table = &tables[t % tables.len()];
            let name = format!("ks{k}");
            prop_assert_eq!(caches[usize::from(k)].resolve(table, &name), table.keyspace_id(&name));
        }
    }
}

/// Tablet plans: replicas first with the tablet's shards, no duplicates,
/// down nodes skipped, every up node once, local replicas first, LWT in the
/// tablet's replica order.
mod tablet_plans {
    use super::*;

    /// (nodes, tablet replicas as (node, shard), up, lwt, with a local dc, seed).
    type Case = (usize, Vec<(u32, u16)>, Vec<bool>, bool, bool, u64);

    fn arb_case() -> impl Strategy<Value = Case> {
        (2usize..9).prop_flat_map(|n| {
            (
                Just(n),
                proptest::sample::subsequence((0..n as u32).collect::<Vec<_>>(), 0..=n.min(4))
                    .prop_shuffle()
                    .prop_flat_map(|nodes| {
                        let k = nodes.len();
                        (Just(nodes), proptest::collection::vec(0u16..8, k))
                    })
                    .prop_map(|(nodes, shards)| nodes.into_iter().zip(shards).collect()),
                proptest::collection::vec(proptest::bool::weighted(0.8), n),
                any::<bool>(),
                any::<bool>(),
                any::<u64>(),
            )
        })
    }

    proptest! {
        #[test]
        fn tablet_plan_invariants((n, replicas, up, lwt, with_dc, seed) in arb_case()) {
            let sharder = NonZeroU16::new(8).map(|s| Sharder::new(s, 12));
            let nodes = (0..n)
                .map(|i| NodeInfo {
                    datacenter: format!("dc{}", i % 2),
                    rack: "r".into(),
                    tokens: vec![Token(i as i64 * 1000)],
                    sharder,
                })
                .collect();
            let table = RoutingTable::build(&input(nodes, &[]));
            let local_dc = if with_dc { table.dc_id("dc0") } else { None };
            let map = TabletMap::from_tablets(
                [Tablet {
                    first_token: Token(-10),
                    last_token: Token(10),
                    replicas: replicas
                        .iter()
                        .map(|&(node, s)| (uuid::Uuid::from_u128(u128::from(node)), s))
                        .collect(),
                    version: None,
                }],
                &|h| Some(NodeIdx(h.as_u128() as u32)),
            );
            let tablet = map.lookup(Token(3)).unwrap();
            let request = RoutingRequest { keyspace: None, token: Some(Token(3)), lwt, local_dc, seed };
            let is_up = |x: NodeIdx| up[x.index()];
            let targets: Vec<Target> = table.plan_tablet(&request, tablet, &is_up).collect();

            let mut seen = HashSet::new();
            for t in &targets {
                prop_assert!(seen.insert(t.node), "duplicate {:?}", t.node);
                prop_assert!(up[t.node.index()]);
            }
            prop_assert_eq!(seen.len(), up.iter().filter(|&&u| u).count());
            let shard_of: BTreeMap<NodeIdx, u16> =
                replicas.iter().map(|&(x, s)| (NodeIdx(x), s)).collect();
            let up_replicas: Vec<(u32, u16)> =
                replicas.iter().copied().filter(|&(x, _)| up[x as usize]).collect();
            let k = up_replicas.len();
            for t in &targets[..k] {
                prop_assert_eq!(Some(&t.shard.unwrap()), shard_of.get(&t.node));
            }
            for t in &targets[k..] {
                prop_assert!(!shard_of.contains_key(&t.node));
                prop_assert_eq!(t.shard, None);
            }
            let is_local = |x: NodeIdx| local_dc.is_none() || table.node_dc(x) == local_dc;
            let local_count = up_replicas.iter().filter(|&&(x, _)| is_local(NodeIdx(x))).count();
            prop_assert!(targets[..local_count].iter().all(|t| is_local(t.node)));
            if lwt {
                let want: Vec<NodeIdx> = up_replicas
                    .iter()
                    .map(|&(x, _)| NodeIdx(x))
                    .filter(|&x| is_local(x))
                    .collect();
                let got: Vec<NodeIdx> = targets[..local_count].iter().map(|t| t.node).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}

/// Plans with a preferred rack and with per-node load: still a permutation of
/// the plain plan's targets in the same steps, the rack's nodes first within
/// the local datacenter, and every candidate of the first step first now and
/// then however loaded it is.
mod preferences {
    use super::*;
    use crate::routing::load::{InFlight, PROBE_EVERY, WARM_UP};

    /// Per node: requests in flight, and a latency sample in µs, if any.
    fn arb_loads() -> impl Strategy<Value = Vec<(u32, Option<u64>)>> {
        proptest::collection::vec(
            (
                0u32..20,
                proptest::option::of(prop_oneof![1u64..100, 100u64..50_000]),
            ),
            12,
        )
    }

    fn loads_of(spec: &[(u32, Option<u64>)]) -> (Vec<Arc<NodeLoad>>, Vec<InFlight<'static>>) {
        let loads: Vec<Arc<NodeLoad>> = spec
            .iter()
            .map(|&(_, us)| {
                let l = NodeLoad::new();
                if let Some(us) = us {
                    for _ in 0..WARM_UP {
                        l.record(Duration::from_micros(us));
                    }
                }
                Arc::new(l)
            })
            .collect();
        // The guards hold the requests in flight; leaked loads outlive them
        // (a test's few bytes).
        let leaked: &'static [Arc<NodeLoad>] = Box::leak(loads.clone().into_boxed_slice());
        let guards = spec
            .iter()
            .zip(leaked)
            .flat_map(|(&(n, _), l)| (0..n).map(move |_| l.start(Instant::now())))
            .collect();
        (loads, guards)
    }

    /// The requests of a case: each keyspace with the token, and no keyspace
    /// with and without the token.
    fn requests(case: &Case, table: &RoutingTable) -> Vec<(RoutingRequest, Vec<NodeIdx>)> {
        let local_dc = case.local_dc.as_deref().and_then(|d| table.dc_id(d));
        let mut out: Vec<(RoutingRequest, Vec<NodeIdx>)> = case
            .input
            .keyspaces
            .keys()
            .map(|name| {
                let ks = table.keyspace_id(name).unwrap();
                let request = RoutingRequest {
                    keyspace: Some(ks),
                    token: Some(Token(case.token)),
                    lwt: case.lwt,
                    local_dc,
                    seed: case.seed,
                };
                (request, table.replicas(ks, Token(case.token)).to_vec())
            })
            .collect();
        for token in [None, Some(Token(case.token))] {
            let request = RoutingRequest {
                token,
                local_dc,
                seed: case.seed,
                ..Default::default()
            };
            out.push((request, Vec::new()));
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn balanced_plans_keep_every_plan_invariant(case in arb_case(), spec in arb_loads()) {
            let table = RoutingTable::build(&case.input);
            let (loads, _guards) = loads_of(&spec);
            for (request, replicas) in requests(&case, &table) {
                check_plan(&case, &table, &request, &replicas, &loads);
                // Also on probe seeds, and whatever the seed.
                for seed in [0, u64::from(PROBE_EVERY) * 7, case.seed ^ 1] {
                    let request = RoutingRequest { seed, ..request };
                    check_plan(&case, &table, &request, &replicas, &loads);
                }
            }
        }

        #[test]
        fn every_candidate_is_first_now_and_then(
            case in arb_case(),
            spec in arb_loads(),
            start in 0u32..(u32::MAX - PROBE_EVERY * 16),
        ) {
            let table = RoutingTable::build(&case.input);
            let (loads, _guards) = loads_of(&spec);
            let up = |n: NodeIdx| case.up[n.index()];
            let n = case.input.nodes.len() as u64;
            for (request, _) in requests(&case, &table) {
                let first = |seed: u64, loads: &[Arc<NodeLoad>]| {
                    table.plan(&RoutingRequest { seed, ..request }, &up).with_loads(loads).next()
                };
                // A window of consecutive seeds, as a session uses them.
                let base = (case.seed & !u64::from(u32::MAX)) | u64::from(start);
                let window = base..base + u64::from(PROBE_EVERY) * n;
                let plain: BTreeSet<NodeIdx> =
                    window.clone().filter_map(|s| first(s, &[])).map(|t| t.node).collect();
                let balanced: BTreeSet<NodeIdx> =
                    window.filter_map(|s| first(s, &loads)).map(|t| t.node).collect();
                prop_assert_eq!(balanced, plain);
            }
        }

        #[test]
        fn the_local_rack_comes_first(case in arb_case(), rack in 0usize..4, spec in arb_loads()) {
            let table = RoutingTable::build(&case.input);
            let nodes = &case.input.nodes;
            let Some(dc) = case.local_dc.clone() else { return Ok(()) };
            let rack_name = format!("r{rack}");
            let rack_id = table.rack_id(&dc, &rack_name);
            prop_assert_eq!(
                rack_id.is_some(),
                nodes.iter().any(|n| n.datacenter == dc && n.rack == rack_name)
            );
            let (loads, _guards) = loads_of(&spec);
            let up = |n: NodeIdx| case.up[n.index()];
            let in_dc = |n: NodeIdx| nodes[n.index()].datacenter == dc;
            let in_rack = |n: NodeIdx| in_dc(n) && nodes[n.index()].rack == rack_name;
            for (request, replicas) in requests(&case, &table) {
                for loads in [&loads[..], &[]] {
                    let plain: Vec<NodeIdx> =
                        table.plan(&request, &up).map(|t| t.node).collect();
                    let got: Vec<NodeIdx> = table
                        .plan(&request, &up)
                        .with_local_rack(rack_id)
                        .with_loads(loads)
                        .map(|t| t.node)
                        .collect();
                    let mut a = plain.clone();
                    let mut b = got.clone();
                    a.sort_unstable();
                    b.sort_unstable();
                    prop_assert_eq!(a, b, "not a permutation");
                    // Local replicas, then remote replicas, then the rest, as
                    // in the plain plan; the rack first within the local parts.
                    let local_replicas =
                        replicas.iter().filter(|&&n| in_dc(n) && up(n)).count();
                    let replica_count = replicas.iter().filter(|&&n| up(n)).count();
                    let sets = |v: &[NodeIdx]| v.iter().copied().collect::<BTreeSet<_>>();
                    prop_assert_eq!(sets(&got[..local_replicas]), sets(&plain[..local_replicas]));
                    prop_assert_eq!(sets(&got[..replica_count]), sets(&plain[..replica_count]));
                    let rack_first = |part: &[NodeIdx]| {
                        let k = part.iter().filter(|&&n| in_rack(n)).count();
                        part[..k].iter().all(|&n| in_rack(n))
                    };
                    if request.lwt {
                        prop_assert_eq!(&got[..local_replicas], &plain[..local_replicas]);
                    } else {
                        prop_assert!(rack_first(&got[..local_replicas]), "{:?}", got);
                    }
                    let rest = &got[replica_count..];
                    let local_rest = rest.iter().filter(|&&n| in_dc(n)).count();
                    prop_assert!(rest[..local_rest].iter().all(|&n| in_dc(n)));
                    prop_assert!(rack_first(&rest[..local_rest]), "{:?}", got);
                }
            }
        }
    }

    #[test]
    fn a_slow_replica_is_first_only_on_probes() {
        let table = RoutingTable::build(&input(
            vec![
                node("dc1", "r1", &[-100]),
                node("dc1", "r1", &[0]),
                node("dc1", "r1", &[100]),
            ],
            &[("rf3", ReplicationStrategy::Simple { rf: 3 })],
        ));
        let ks = table.keyspace_id("rf3").unwrap();
        let loads: Vec<Arc<NodeLoad>> = (0..3).map(|_| Arc::new(NodeLoad::new())).collect();
        for _ in 0..WARM_UP {
            loads[0].record(Duration::from_millis(20));
            loads[1].record(Duration::from_micros(300));
            loads[2].record(Duration::from_micros(300));
        }
        let requests = u64::from(PROBE_EVERY) * 30;
        let mut first = [0u64; 3];
        for seed in 1000..1000 + requests {
            let request = RoutingRequest {
                keyspace: Some(ks),
                token: Some(Token(1)),
                seed,
                ..Default::default()
            };
            let t = table
                .plan(&request, &all_up)
                .with_loads(&loads)
                .next()
                .unwrap();
            first[t.node.index()] += 1;
        }
        // Probes: 1 in PROBE_EVERY requests, a third of them on node 0.
        assert_eq!(first[0], requests / u64::from(PROBE_EVERY) / 3, "{first:?}");
        // The fast two share the rest about evenly.
        let (a, b) = (first[1] as f64, first[2] as f64);
        assert!((a / b - 1.0).abs() < 0.2, "{first:?}");

        // Equal loads: the plain rotation, every node first a third of the time.
        let equal: Vec<Arc<NodeLoad>> = (0..3).map(|_| Arc::new(NodeLoad::new())).collect();
        let mut first = [0u64; 3];
        for seed in 0..300 {
            let request = RoutingRequest {
                keyspace: Some(ks),
                token: Some(Token(1)),
                seed,
                ..Default::default()
            };
            let t = table
                .plan(&request, &all_up)
                .with_loads(&equal)
                .next()
                .unwrap();
            first[t.node.index()] += 1;
        }
        assert_eq!(first, [100, 100, 100]);
    }

    #[test]
    fn rack_ids_are_per_datacenter() {
        let table = RoutingTable::build(&input(
            vec![
                node("dc1", "r1", &[0]),
                node("dc2", "r1", &[10]),
                node("dc1", "r2", &[20]),
            ],
            &[],
        ));
        let a = table.rack_id("dc1", "r1").unwrap();
        let b = table.rack_id("dc2", "r1").unwrap();
        assert_ne!(a, b);
        assert!(table.rack_id("dc1", "r2").is_some());
        assert_eq!(table.rack_id("dc2", "r2"), None);
        assert_eq!(table.rack_id("dc3", "r1"), None);
    }
}
