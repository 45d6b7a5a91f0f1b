//! The guide of `scylla-driver` and the project's README, compiled.
//!
//! Each chapter of the guide (the Markdown files of `docs/`) and the
//! top-level `README.md` is the documentation of an empty module below that
//! exists only under `cfg(doctest)`, so that `cargo test -p
//! scylla-driver-guide --doc` (part of `cargo test --workspace`; CI also
//! runs it alone, so that `scylla-driver` is built as a user's dependency
//! is, without the `unstable-internals` the workspace's tests turn on) compiles
//! every Rust code block they contain and runs those not marked `no_run`: a
//! chapter whose code no longer compiles, or whose runnable example fails
//! against the in-process test cluster, fails the test suite. The one item,
//! the hidden module `guide`, is the set-up those runnable examples share.

#[doc(hidden)]
pub mod guide {
    //! Set-up shared by the guide's runnable examples, hidden in their code
    //! (`# let (_cluster, session) = scylla_driver_guide::guide::users().await?;`)
    //! so that a reader on GitHub sees one hidden line instead of ten.

    use scylla_driver::{Session, SessionBuilder};
    use scylla_testbed::TestCluster;

    /// What a set-up step failed on.
    pub type Error = Box<dyn std::error::Error + Send + Sync>;

    /// The table most chapters use.
    pub const USERS: &str = "CREATE TABLE ks.users (id int PRIMARY KEY, name text, age int)";

    /// The table of the types chapter: more columns of more types.
    pub const USERS_WITH_TYPES: &str =
        "CREATE TABLE ks.users (id int PRIMARY KEY, name text, age int, years int, emails list<text>)";

    /// A 1-node x 2-shard test cluster and a session to it, with keyspace
    /// `ks` and the table [`USERS`] holding Ada (id 1, age 36) and Alan
    /// (id 2, age 41). Keep the cluster alive while the session is used.
    pub async fn users() -> Result<(TestCluster, Session), Error> {
        users_in(USERS).await
    }

    /// As [`users`], with the table made by `create_table` (which must have
    /// the columns `id int PRIMARY KEY, name text, age int`).
    pub async fn users_in(create_table: &str) -> Result<(TestCluster, Session), Error> {
        let cluster = TestCluster::builder().nodes(1).shards(2).start().await?;
        let addr = cluster
            .cql_addrs()
            .first()
            .map(ToString::to_string)
            .ok_or("the test cluster has no node")?;
        let session = SessionBuilder::new().known_node(addr).build().await?;
        session
            .query_unpaged(
                "CREATE KEYSPACE ks WITH replication = \
                 {'class': 'SimpleStrategy', 'replication_factor': 1}",
                (),
            )
            .await?;
        session.query_unpaged(create_table, ()).await?;
        let insert = session
            .prepare("INSERT INTO ks.users (id, name, age) VALUES (?, ?, ?)")
            .await?;
        for (id, name, age) in [(1, "Ada", 36), (2, "Alan", 41)] {
            session.execute_unpaged(&insert, (id, name, age)).await?;
        }
        Ok((cluster, session))
    }
}

#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

#[cfg(doctest)]
#[doc = include_str!("README.md")]
mod guide_index {}

#[cfg(doctest)]
#[doc = include_str!("connecting.md")]
mod connecting {}

#[cfg(doctest)]
#[doc = include_str!("statements.md")]
mod statements {}

#[cfg(doctest)]
#[doc = include_str!("types.md")]
mod types {}

#[cfg(doctest)]
#[doc = include_str!("errors.md")]
mod errors {}

#[cfg(doctest)]
#[doc = include_str!("execution-profiles.md")]
mod execution_profiles {}

#[cfg(doctest)]
#[doc = include_str!("routing.md")]
mod routing {}

#[cfg(doctest)]
#[doc = include_str!("pools.md")]
mod pools {}

#[cfg(doctest)]
#[doc = include_str!("observability.md")]
mod observability {}

#[cfg(doctest)]
#[doc = include_str!("testbed.md")]
mod testbed {}

#[cfg(doctest)]
#[doc = include_str!("performance.md")]
mod performance {}

#[cfg(doctest)]
#[doc = include_str!("architecture.md")]
mod architecture {}

#[cfg(doctest)]
#[doc = include_str!("migrating-from-scylla.md")]
mod migrating_from_scylla {}
