//! Unit tests of the control task's decisions that need no server: what an
//! event makes stale and announces, and where to reconnect.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, ArcSwapOption};
use scylla_cql::frame::response::event::{Event, StatusChangeType, TopologyChangeType};
use scylla_cql::frame::response::result::{SchemaChange, SchemaChangeTarget, SchemaChangeType};
use tokio::sync::{broadcast, mpsc, watch};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::task::ControlTask;
use super::{ControlOptions, NodeEvent, Refresh, Shared};
use crate::cluster::system_tables::{Metadata, NodeMeta};
use crate::connection::ConnectionConfig;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn node(id: u128, address: &str) -> NodeMeta {
    NodeMeta {
        host_id: Uuid::from_u128(id),
        address: addr(address),
        datacenter: "dc".into(),
        rack: "r".into(),
        tokens: vec![],
        schema_version: None,
        release_version: None,
        via_client_route: false,
        own_address: None,
    }
}

/// A task over `nodes` that never runs (no connection).
fn task(nodes: Vec<NodeMeta>, contact_points: Vec<SocketAddr>) -> ControlTask {
    task_with(nodes, contact_points, ControlOptions::default())
}

fn task_with(
    nodes: Vec<NodeMeta>,
    contact_points: Vec<SocketAddr>,
    options: ControlOptions,
) -> ControlTask {
    let metadata = Arc::new(Metadata {
        nodes,
        keyspaces: Default::default(),
    });
    let shared = Arc::new(Shared {
        metadata: ArcSwap::new(metadata.clone()),
        watch: watch::channel(metadata).0,
        node_events: broadcast::channel(16).0,
        schema_changes: broadcast::channel(16).0,
        connection: ArcSwapOption::empty(),
        down: Mutex::new(HashSet::new()),
        stale_keyspaces: Mutex::new(Default::default()),
        options,
    });
    let schedule = shared.options.reconnect.new_schedule();
    ControlTask {
        shared,
        contact_points,
        config: ConnectionConfig::default(),
        events: mpsc::channel(1).1,
        commands: mpsc::channel(1).1,
        cancel: CancellationToken::new(),
        schedule,
    }
}

#[test]
fn status_changes_become_node_events() {
    let t = task(vec![node(1, "10.0.0.1:9042")], vec![]);
    let mut events = t.shared.node_events.subscribe();

    // The event names the node by its own native port; the node event uses
    // the metadata's address.
    let down = Event::StatusChange {
        change: StatusChangeType::Down,
        addr: addr("10.0.0.1:19042"),
    };
    assert_eq!(t.on_event(down), None);
    assert_eq!(
        events.try_recv().unwrap(),
        NodeEvent {
            host_id: Some(Uuid::from_u128(1)),
            address: addr("10.0.0.1:9042"),
            up: false
        }
    );
    assert!(t.shared.down().contains(&addr("10.0.0.1:0").ip()));

    let up = Event::StatusChange {
        change: StatusChangeType::Up,
        addr: addr("10.0.0.1:9042"),
    };
    assert_eq!(t.on_event(up), None);
    assert!(events.try_recv().unwrap().up);
    assert!(t.shared.down().is_empty());

    // An unknown node coming up makes the topology stale.
    let new = Event::StatusChange {
        change: StatusChangeType::Up,
        addr: addr("10.0.0.9:9042"),
    };
    assert_eq!(
        t.on_event(new),
        Some(Refresh {
            nodes: true,
            schema: false,
            ..Default::default()
        })
    );
    let e = events.try_recv().unwrap();
    assert_eq!((e.host_id, e.address), (None, addr("10.0.0.9:9042")));
}

#[test]
fn client_routes_changes_refresh_the_nodes_only_with_client_routes() {
    use scylla_cql::frame::response::event::ClientRoutesChangeType;
    let event = || Event::ClientRoutesChange {
        change: ClientRoutesChangeType::UpdateNodes,
        connection_ids: vec!["c".into()],
        host_ids: vec![Uuid::from_u128(1).to_string()],
    };
    let without = task(vec![node(1, "10.0.0.1:9042")], vec![]);
    assert_eq!(without.on_event(event()), None);
    let mut options = ControlOptions::default();
    options.nodes.client_routes = Some(crate::ClientRoutes::new(["c"]));
    let with = task_with(vec![node(1, "10.0.0.1:9042")], vec![], options);
    assert_eq!(
        with.on_event(event()),
        Some(Refresh {
            nodes: true,
            schema: false,
            ..Default::default()
        })
    );
}

#[test]
fn status_change_addresses_are_translated() {
    use crate::cluster::translation::MapTranslator;
    let mut options = ControlOptions::default();
    options.nodes.translator = Arc::new(
        MapTranslator::new().ip("10.9.0.1".parse().unwrap(), "127.0.0.1".parse().unwrap()),
    );
    // The metadata holds translated addresses (the read recorded the
    // translation it made); the event names the node by the address it
    // reports.
    options
        .nodes
        .record_translations([(addr("10.9.0.1:9042"), addr("127.0.0.1:9042"))].into());
    let t = task_with(vec![node(1, "127.0.0.1:9042")], vec![], options);
    let mut events = t.shared.node_events.subscribe();
    let down = Event::StatusChange {
        change: StatusChangeType::Down,
        addr: addr("10.9.0.1:9042"),
    };
    assert_eq!(t.on_event(down), None);
    let e = events.try_recv().unwrap();
    assert_eq!(
        (e.host_id, e.address, e.up),
        (Some(Uuid::from_u128(1)), addr("127.0.0.1:9042"), false)
    );
    assert!(t.shared.down().contains(&addr("127.0.0.1:0").ip()));
    // An address the latest read did not translate stays as it is.
    let other = Event::StatusChange {
        change: StatusChangeType::Down,
        addr: addr("10.9.0.2:9042"),
    };
    t.on_event(other);
    let e = events.try_recv().unwrap();
    assert_eq!((e.host_id, e.address), (None, addr("10.9.0.2:9042")));
}

#[test]
fn events_say_what_is_stale() {
    let t = task(vec![], vec![]);
    let schema = |target| {
        Event::SchemaChange(SchemaChange {
            change: SchemaChangeType::Created,
            target,
        })
    };
    let stale =
        |t: &ControlTask| -> Vec<String> { t.shared.stale_keyspaces().iter().cloned().collect() };
    let changed = Refresh {
        keyspaces: true,
        ..Default::default()
    };
    // A table, keyspace or type change: that keyspace is read again, alone.
    let table = schema(SchemaChangeTarget::Table {
        keyspace: "ks".into(),
        name: "t".into(),
    });
    assert_eq!(t.on_event(table), Some(changed));
    assert_eq!(stale(&t), ["ks"]);
    let ks = schema(SchemaChangeTarget::Keyspace {
        keyspace: "other".into(),
    });
    assert_eq!(t.on_event(ks), Some(changed));
    let typ = schema(SchemaChangeTarget::Type {
        keyspace: "third".into(),
        name: "u".into(),
    });
    assert_eq!(t.on_event(typ), Some(changed));
    assert_eq!(stale(&t), ["ks", "other", "third"]);
    // Functions are not part of the snapshot.
    let function = schema(SchemaChangeTarget::Function {
        keyspace: "ks".into(),
        name: "f".into(),
        arg_types: vec![],
    });
    assert_eq!(t.on_event(function), None);
    let joined = Event::TopologyChange {
        change: TopologyChangeType::NewNode,
        addr: addr("10.0.0.5:9042"),
    };
    assert_eq!(
        t.on_event(joined),
        Some(Refresh {
            nodes: true,
            schema: false,
            ..Default::default()
        })
    );
    assert_eq!(changed.union(Refresh::default()), changed);
    let both = changed.union(Refresh {
        nodes: true,
        ..Default::default()
    });
    assert!(both.nodes && both.keyspaces && !both.schema);
}

#[test]
fn reconnect_candidates_put_the_failed_node_last() {
    let t = task(
        vec![
            node(1, "10.0.0.1:9042"),
            node(2, "10.0.0.2:9042"),
            node(3, "10.0.0.3:9042"),
        ],
        vec![addr("10.0.0.9:9042"), addr("10.0.0.1:9042")],
    );
    t.shared.down().insert(addr("10.0.0.1:0").ip());
    for _ in 0..20 {
        // Node 2 failed; node 1 is reported down: 3, then 1, then the other
        // contact point, then 2.
        let c = t.candidates(addr("10.0.0.2:9042"));
        assert_eq!(
            c,
            vec![
                addr("10.0.0.3:9042"),
                addr("10.0.0.1:9042"),
                addr("10.0.0.9:9042"),
                addr("10.0.0.2:9042"),
            ]
        );
    }
}

#[test]
fn debounce_keeps_the_first_deadline_and_widens() {
    use super::task::Debounce;
    use std::time::Duration;
    use tokio::time::Instant;

    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut d = Debounce::default();
    assert_eq!(d.deadline(), None);
    let schema = Refresh {
        nodes: false,
        schema: true,
        ..Default::default()
    };
    d.add(t0, ms(50), schema);
    d.add(t0 + ms(30), ms(50), schema);
    d.add(
        t0 + ms(45),
        ms(50),
        Refresh {
            nodes: true,
            schema: false,
            ..Default::default()
        },
    );
    assert_eq!(d.deadline(), Some(t0 + ms(50)));
    assert_eq!(d.take(), Some(Refresh::ALL));
    assert_eq!(d.take(), None);
    d.add(t0 + ms(60), ms(50), schema);
    assert_eq!(d.deadline(), Some(t0 + ms(110)));
    d.clear();
    assert_eq!(d.deadline(), None);
}

#[test]
fn the_periodic_check_reads_the_schema_only_when_a_version_changed() {
    use super::task::schema_versions_differ;
    let with_version = |id, v: Option<u128>| NodeMeta {
        schema_version: v.map(Uuid::from_u128),
        ..node(id, "10.0.0.1:9042")
    };
    let before = vec![with_version(1, Some(7)), with_version(2, Some(7))];
    assert!(!schema_versions_differ(&before, &before.clone()));
    // A node moved to another version (a schema change whose event was missed).
    let changed = vec![with_version(1, Some(7)), with_version(2, Some(8))];
    assert!(schema_versions_differ(&before, &changed));
    // A node joined, left, or stopped reporting its version.
    assert!(schema_versions_differ(&before, &before[..1]));
    let joined = vec![
        before[0].clone(),
        before[1].clone(),
        with_version(3, Some(7)),
    ];
    assert!(schema_versions_differ(&before, &joined));
    let unknown = vec![with_version(1, Some(7)), with_version(2, None)];
    assert!(schema_versions_differ(&before, &unknown));
    // The periodic check reads the topology and asks for the comparison.
    let check = Refresh::CHECK;
    assert!(check.nodes && check.schema_if_changed && !check.schema);
}

#[test]
fn the_control_connection_follows_its_node_s_route_only() {
    use super::task::route_moved_away;
    let routed = |id, a: &str| NodeMeta {
        via_client_route: true,
        ..node(id, a)
    };
    let old = Metadata {
        nodes: vec![routed(1, "10.0.0.1:9042"), routed(2, "10.0.0.2:9042")],
        keyspaces: Default::default(),
    };
    let moved = vec![routed(1, "10.0.0.9:9042"), routed(2, "10.0.0.2:9042")];
    let peer = addr("10.0.0.1:9042");
    let local = Uuid::from_u128(1);
    // On node 1's route, which moved: move.
    assert!(route_moved_away(&old, &moved, local, peer));
    // The route did not move, or another node's did: stay.
    assert!(!route_moved_away(&old, &old.nodes, local, peer));
    assert!(!route_moved_away(
        &old,
        &moved,
        Uuid::from_u128(2),
        addr("10.0.0.2:9042")
    ));
    // Through a contact point that is no node's route: stay.
    assert!(!route_moved_away(
        &old,
        &moved,
        local,
        addr("10.0.0.100:9042")
    ));
    // Without routes: stay.
    let plain = Metadata {
        nodes: vec![node(1, "10.0.0.1:9042")],
        keyspaces: Default::default(),
    };
    assert!(!route_moved_away(
        &plain,
        &[node(1, "10.0.0.9:9042")],
        local,
        peer
    ));
}

#[test]
fn status_changes_name_routed_nodes_by_their_own_address() {
    let routed = NodeMeta {
        via_client_route: true,
        own_address: Some(addr("10.0.0.1:9042")),
        ..node(1, "192.0.2.7:40001")
    };
    let t = task(vec![routed], vec![]);
    let mut events = t.shared.node_events.subscribe();
    let down = Event::StatusChange {
        change: StatusChangeType::Down,
        addr: addr("10.0.0.1:9042"),
    };
    assert_eq!(t.on_event(down), None);
    assert_eq!(
        events.try_recv().unwrap(),
        NodeEvent {
            host_id: Some(Uuid::from_u128(1)),
            address: addr("192.0.2.7:40001"),
            up: false
        }
    );
    // Reported down by the address the driver dials.
    assert!(t.shared.down().contains(&addr("192.0.2.7:0").ip()));
    let up = Event::StatusChange {
        change: StatusChangeType::Up,
        addr: addr("10.0.0.1:9042"),
    };
    // A known node: no refresh.
    assert_eq!(t.on_event(up), None);
    assert!(t.shared.down().is_empty());
}
