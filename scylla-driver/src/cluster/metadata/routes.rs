//! Reading `system.client_routes` (see [`ClientRoutes`]).
//!
//! The whole table is read (it holds a row per node and private link: a
//! few rows) and filtered here by connection id, so the query needs no
//! `IN` restriction and works on every server version that has the table.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use uuid::Uuid;

use super::query::{self, for_each_row};
use super::{MetadataError, QueryOptions};
use crate::cluster::client_routes::ClientRoutes;
use crate::connection::Connection;

/// The query.
pub(crate) const ROUTES_QUERY: &str =
    "SELECT connection_id, host_id, address, port, tls_port FROM system.client_routes";

/// A `system.client_routes` row; every column may be null.
#[derive(scylla_driver_macros::DeserializeRow)]
#[scylla(crate = ::scylla_cql)]
struct RouteRow {
    connection_id: Option<String>,
    host_id: Option<Uuid>,
    address: Option<String>,
    port: Option<i32>,
    tls_port: Option<i32>,
}

/// A usable route: where to dial a host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    /// The endpoint's address as the table says (DNS name or IP).
    pub(crate) address: String,
    /// The port to use (`tls_port` with TLS).
    pub(crate) port: u16,
}

/// The routes of the configured connection ids by host id (the first
/// connection id in the configured order wins); rows without the port the
/// session needs (`tls_port` with TLS) are skipped with a warning.
pub(crate) async fn read_routes(
    conn: &Connection,
    opts: &QueryOptions,
    routes: &ClientRoutes,
    tls: bool,
) -> Result<HashMap<Uuid, Route>, MetadataError> {
    let pages = query::select_all(conn, ROUTES_QUERY, opts).await?;
    let mut found: HashMap<Uuid, (usize, Route)> = HashMap::new();
    for_each_row::<RouteRow>(&pages, ROUTES_QUERY, |row| {
        let row = match row {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "system.client_routes row skipped");
                return;
            }
        };
        let (Some(cid), Some(host), Some(address)) = (row.connection_id, row.host_id, row.address)
        else {
            return;
        };
        let Some(rank) = routes.connection_ids().iter().position(|c| *c == cid) else {
            return;
        };
        let port = if tls { row.tls_port } else { row.port };
        let Some(port) = port.and_then(|p| u16::try_from(p).ok()).filter(|&p| p != 0) else {
            tracing::warn!(%host, connection_id = %cid, tls, "client route without a usable port for this session; skipped");
            return;
        };
        if found.get(&host).is_none_or(|(r, _)| rank < *r) {
            found.insert(host, (rank, Route { address, port }));
        }
    })?;
    Ok(found.into_iter().map(|(h, (_, r))| (h, r)).collect())
}

/// The socket address of `route`: its address parsed as an IP, or resolved
/// by DNS (the first address). `None` (logged) if it does not resolve.
pub(crate) async fn resolve(route: &Route) -> Option<SocketAddr> {
    if let Ok(ip) = route.address.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, route.port));
    }
    match tokio::net::lookup_host((route.address.as_str(), route.port)).await {
        Ok(mut addrs) => addrs.next(),
        Err(error) => {
            tracing::warn!(address = %route.address, %error, "client route address does not resolve");
            None
        }
    }
}
