//! Reading the schema as programs written for the official `scylla` 1.x
//! crate read it (migration tools checking what exists before creating it,
//! change-data consumers looking up a table's columns), against the
//! in-process test cluster.
#![allow(clippy::unwrap_used, missing_docs)]

use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::cluster::metadata::{ColumnKind, Strategy, Table};
use scylla_testbed::TestCluster;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Creates what is missing, asking the schema first.
async fn migrate(
    session: &Session,
    keyspace: &str,
    tables: &[(&str, &str)],
) -> Result<usize, Error> {
    let mut created = 0;
    if session.get_cluster_state().get_keyspace(keyspace).is_none() {
        session
            .query_unpaged(
                format!(
                    "CREATE KEYSPACE {keyspace} WITH REPLICATION = \
                     {{'class': 'NetworkTopologyStrategy', 'datacenter1': 1}}"
                ),
                &[],
            )
            .await?;
        created += 1;
    }
    for (name, ddl) in tables {
        let exists = session
            .get_cluster_state()
            .get_keyspace(keyspace)
            .and_then(|ks| ks.tables.get(*name))
            .is_some();
        if !exists {
            session.query_unpaged(*ddl, &[]).await?;
            created += 1;
        }
    }
    Ok(created)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_creates_only_what_the_schema_lacks() -> Result<(), Error> {
    let cluster = TestCluster::builder()
        .nodes(1)
        .datacenter("datacenter1")
        .start()
        .await
        .unwrap();
    let session: Session = SessionBuilder::new()
        .known_node(cluster.cql_addrs()[0].to_string())
        .build()
        .await?;
    let tables = [
        (
            "users",
            "CREATE TABLE app.users (id uuid PRIMARY KEY, name text, emails set<text>)",
        ),
        (
            "events",
            "CREATE TABLE app.events (user uuid, at timestamp, kind text, PRIMARY KEY (user, at))",
        ),
    ];
    // A statement that changes the schema returns once the session's schema
    // has the change: a second run finds everything.
    assert_eq!(migrate(&session, "app", &tables).await?, 3);
    assert_eq!(migrate(&session, "app", &tables).await?, 0);

    let state = session.get_cluster_state();
    let ks = state.get_keyspace("app").unwrap();
    let Strategy::NetworkTopologyStrategy {
        datacenter_repfactors,
    } = &ks.strategy
    else {
        panic!("{:?}", ks.strategy);
    };
    assert_eq!(datacenter_repfactors.get("datacenter1"), Some(&1));
    let events: Table = ks.tables.get("events").cloned().unwrap();
    assert_eq!(events.partition_key, ["user"]);
    assert_eq!(events.clustering_key, ["at"]);
    let mut regular: Vec<&String> = events
        .columns
        .iter()
        .filter(|(_, c)| c.kind == ColumnKind::Regular)
        .map(|(name, _)| name)
        .collect();
    regular.sort();
    assert_eq!(regular, ["kind"]);
    Ok(())
}
