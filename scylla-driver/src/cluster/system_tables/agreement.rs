//! Schema agreement: after DDL, wait until every reachable node reports the
//! same schema version, so that statements prepared or run next see the new
//! schema on whichever node they land.
//!
//! The versions come from `system.local` and `system.peers` on the control
//! connection's node, which learns its peers' versions through gossip. The
//! check repeats at a fixed interval until the versions agree or the timeout
//! passes; both are bounded, so the wait is too.

use std::collections::HashSet;
use std::time::Duration;

use scylla_cql::frame::response::result::Rows;
use tokio::time::Instant;
use uuid::Uuid;

use super::query::{for_each_row, select_all, QueryOptions};
use super::MetadataError;
use crate::connection::Connection;

const LOCAL_VERSION_QUERY: &str = "SELECT schema_version FROM system.local WHERE key = 'local'";
const PEER_VERSIONS_QUERY: &str = "SELECT host_id, schema_version FROM system.peers";

/// How long and how often to check for schema agreement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgreementOptions {
    /// Time between two checks.
    pub interval: Duration,
    /// Give up (answering "not agreed") after this long.
    pub timeout: Duration,
}

impl Default for AgreementOptions {
    /// Every 200 ms, for up to 60 s (Cassandra can take tens of seconds to
    /// propagate a schema change on a loaded cluster).
    fn default() -> Self {
        Self {
            interval: Duration::from_millis(200),
            timeout: Duration::from_secs(60),
        }
    }
}

#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct PeerVersionRow {
    host_id: Option<Uuid>,
    schema_version: Option<Uuid>,
}

/// The distinct schema versions reported by the control connection's node
/// and by the peers for which `is_reachable(host_id)` holds. Peers without a
/// host id or version (still joining) are left out.
pub async fn schema_versions(
    conn: &Connection,
    query: &QueryOptions,
    is_reachable: &(dyn Fn(&Uuid) -> bool + Sync),
) -> Result<HashSet<Uuid>, MetadataError> {
    let local = select_all(conn, LOCAL_VERSION_QUERY, query).await?;
    let peers = select_all(conn, PEER_VERSIONS_QUERY, query).await?;
    versions_of(&local, &peers, is_reachable)
}

fn versions_of(
    local: &[Rows],
    peers: &[Rows],
    is_reachable: &(dyn Fn(&Uuid) -> bool + Sync),
) -> Result<HashSet<Uuid>, MetadataError> {
    let mut versions = HashSet::new();
    for_each_row::<(Option<Uuid>,)>(local, LOCAL_VERSION_QUERY, |row| match row {
        Ok((Some(v),)) => {
            versions.insert(v);
        }
        Ok((None,)) => {}
        Err(e) => tracing::warn!(error = %e, "system.local: unreadable schema_version"),
    })?;
    for_each_row::<PeerVersionRow>(peers, PEER_VERSIONS_QUERY, |row| match row {
        Ok(PeerVersionRow {
            host_id: Some(host),
            schema_version: Some(v),
        }) if is_reachable(&host) => {
            versions.insert(v);
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "system.peers: unreadable schema_version row"),
    })?;
    Ok(versions)
}

/// The schema version of the node `conn` is connected to.
pub async fn local_schema_version(
    conn: &Connection,
    query: &QueryOptions,
) -> Result<Option<Uuid>, MetadataError> {
    let local = select_all(conn, LOCAL_VERSION_QUERY, query).await?;
    let mut version = None;
    for_each_row::<(Option<Uuid>,)>(&local, LOCAL_VERSION_QUERY, |row| {
        if let Ok((v,)) = row {
            version = v;
        }
    })?;
    Ok(version)
}

/// What the reachable nodes' schema versions (as the control node sees
/// them) say, against the version expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agreement {
    /// They all report this version (the expected one, if one was given).
    Agreed(Uuid),
    /// They all report this version, and it is not the expected one: the
    /// node the expected version was read from has moved on since (a later
    /// schema change, by this client or another), or the control node has
    /// not heard of the change yet. Whoever expected it tells which.
    Other(Uuid),
    /// They report different versions, or none (every node has one in
    /// `system.local`, so none only happens while a node is still joining or
    /// its tables are unreadable).
    Disagree,
}

fn agreement(versions: &HashSet<Uuid>, expected: Option<Uuid>) -> Agreement {
    let mut iter = versions.iter();
    match (iter.next(), iter.next()) {
        (Some(&only), None) if expected.is_none_or(|e| e == only) => Agreement::Agreed(only),
        (Some(&only), None) => Agreement::Other(only),
        _ => Agreement::Disagree,
    }
}

/// One check, without waiting: the version every reachable node reports, or
/// `None` when they disagree (or, with `expected`, agree on another one).
pub async fn check_schema_agreement(
    conn: &Connection,
    query: &QueryOptions,
    is_reachable: &(dyn Fn(&Uuid) -> bool + Sync),
    expected: Option<Uuid>,
) -> Result<Option<Uuid>, MetadataError> {
    match look(conn, query, is_reachable, expected).await? {
        Agreement::Agreed(version) => Ok(Some(version)),
        Agreement::Other(_) | Agreement::Disagree => Ok(None),
    }
}

async fn look(
    conn: &Connection,
    query: &QueryOptions,
    is_reachable: &(dyn Fn(&Uuid) -> bool + Sync),
    expected: Option<Uuid>,
) -> Result<Agreement, MetadataError> {
    let versions = schema_versions(conn, query, is_reachable).await?;
    let found = agreement(&versions, expected);
    if !matches!(found, Agreement::Agreed(_)) {
        tracing::debug!(?versions, ?expected, "schema versions disagree");
    }
    Ok(found)
}

/// Checks for schema agreement every `opts.interval` until every reachable
/// node reports the same version ([`Agreement::Agreed`], or
/// [`Agreement::Other`] when `expected` is given and they agree on another
/// one) or `opts.timeout` passes ([`Agreement::Disagree`]). A failed query
/// ends the wait with its error.
///
/// With `expected` (the version of the node that ran a DDL statement), only
/// agreement on that version is [`Agreement::Agreed`]. Without it, a control
/// node that has not yet heard of a change made elsewhere would see every
/// node on the *old* version and report agreement at once (seen on a 3-node
/// Cassandra 5.0: a PREPARE right after CREATE TABLE failed with "table does
/// not exist"). Agreement on another version is returned at once: the node
/// the version was read from may have moved on to a later change (another
/// client's DDL), which only that node can tell.
pub async fn wait_for_schema_agreement(
    conn: &Connection,
    opts: &AgreementOptions,
    query: &QueryOptions,
    is_reachable: &(dyn Fn(&Uuid) -> bool + Sync),
    expected: Option<Uuid>,
) -> Result<Agreement, MetadataError> {
    let deadline = Instant::now() + opts.timeout;
    loop {
        let found = look(conn, query, is_reachable, expected).await?;
        if found != Agreement::Disagree || Instant::now() + opts.interval > deadline {
            return Ok(found);
        }
        tokio::time::sleep(opts.interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{build, cell};
    use super::*;
    use scylla_cql::types::{ColumnType, NativeType};

    #[test]
    fn agreement_on_the_expected_version() {
        use Agreement::{Agreed, Disagree, Other};
        let v = |n: u128| Uuid::from_u128(n);
        let set = |xs: &[u128]| xs.iter().map(|&x| v(x)).collect::<HashSet<_>>();
        assert_eq!(agreement(&set(&[1]), None), Agreed(v(1)));
        assert_eq!(agreement(&set(&[]), None), Disagree);
        assert_eq!(agreement(&set(&[1, 2]), None), Disagree);
        assert_eq!(agreement(&set(&[2]), Some(v(2))), Agreed(v(2)));
        // Everyone on another version (still the old one, or already a
        // later one) is not agreement on the expected one: the caller asks
        // the node it read the expected version from.
        assert_eq!(agreement(&set(&[1]), Some(v(2))), Other(v(1)));
        assert_eq!(agreement(&set(&[1, 2]), Some(v(2))), Disagree);
    }

    #[test]
    fn versions_of_reachable_nodes_only() {
        let uuid = |v: u128| cell(&Uuid::from_u128(v), &ColumnType::Native(NativeType::Uuid));
        let local = build(
            &[("schema_version", ColumnType::Native(NativeType::Uuid))],
            vec![vec![uuid(1)]],
        );
        let peers = build(
            &[
                ("host_id", ColumnType::Native(NativeType::Uuid)),
                ("schema_version", ColumnType::Native(NativeType::Uuid)),
            ],
            vec![
                vec![uuid(10), uuid(1)],
                vec![uuid(11), uuid(2)], // unreachable: ignored
                vec![None, uuid(3)],     // no host id: ignored
                vec![uuid(12), None],    // no version: ignored
            ],
        );
        let reachable = |h: &Uuid| h.as_u128() != 11;
        let v = versions_of(
            std::slice::from_ref(&local),
            std::slice::from_ref(&peers),
            &reachable,
        )
        .unwrap();
        assert_eq!(v, [Uuid::from_u128(1)].into_iter().collect());
        let v = versions_of(&[local], &[peers], &|_| true).unwrap();
        assert_eq!(v.len(), 2);
    }
}
