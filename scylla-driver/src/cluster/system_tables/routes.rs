//! Reading `system.client_routes` (see [`ClientRoutes`]).
//!
//! The whole table is read (it holds a row per node and private link: a
//! few rows) and filtered here by connection id, so the query needs no
//! `IN` restriction and works on every server version that has the table.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use scylla_cql::frame::response::result::Rows;
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
/// session needs (`tls_port` with TLS) are skipped with a warning. A server
/// without the table (not ScyllaDB, or an older one) has no routes: an
/// empty map, with a warning; only a failed request fails the read.
pub(crate) async fn read_routes(
    conn: &Connection,
    opts: &QueryOptions,
    routes: &ClientRoutes,
    tls: bool,
) -> Result<HashMap<Uuid, Route>, MetadataError> {
    match query::select_all(conn, ROUTES_QUERY, opts).await {
        Ok(pages) => parse_routes(&pages, routes, tls),
        Err(MetadataError::Server { error, .. }) => {
            tracing::warn!(%error, "client routes configured, but the server has no system.client_routes; dialling the nodes' own addresses");
            Ok(HashMap::new())
        }
        Err(e) => Err(e),
    }
}

/// [`read_routes`] of rows already read.
pub(crate) fn parse_routes(
    pages: &[Rows],
    routes: &ClientRoutes,
    tls: bool,
) -> Result<HashMap<Uuid, Route>, MetadataError> {
    let mut found: HashMap<Uuid, (usize, Route)> = HashMap::new();
    for_each_row::<RouteRow>(pages, ROUTES_QUERY, |row| {
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
            let address = match routes.address_override(&cid) {
                Some(a) => a.to_owned(),
                None => address,
            };
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

#[cfg(test)]
mod tests {
    use super::super::test_rows::{build, cell};
    use super::*;
    use scylla_cql::types::{ColumnType, NativeType};

    /// connection_id, host_id, address, port, tls_port.
    type Row<'a> = (&'a str, u128, &'a str, Option<i32>, Option<i32>);

    fn rows(rows: &[Row<'_>]) -> Vec<Rows> {
        let specs = [
            ("connection_id", ColumnType::Native(NativeType::Text)),
            ("host_id", ColumnType::Native(NativeType::Uuid)),
            ("address", ColumnType::Native(NativeType::Text)),
            ("port", ColumnType::Native(NativeType::Int)),
            ("tls_port", ColumnType::Native(NativeType::Int)),
        ];
        let rows = rows
            .iter()
            .map(|(c, h, a, p, t)| {
                vec![
                    cell(*c, &ColumnType::Native(NativeType::Text)),
                    cell(&Uuid::from_u128(*h), &ColumnType::Native(NativeType::Uuid)),
                    cell(*a, &ColumnType::Native(NativeType::Text)),
                    p.and_then(|p| cell(&p, &ColumnType::Native(NativeType::Int))),
                    t.and_then(|t| cell(&t, &ColumnType::Native(NativeType::Int))),
                ]
            })
            .collect();
        vec![build(&specs, rows)]
    }

    fn route(address: &str, port: u16) -> Route {
        Route {
            address: address.into(),
            port,
        }
    }

    #[test]
    fn keeps_the_configured_ids_first_wins_and_picks_the_port() {
        let pages = rows(&[
            ("other", 1, "10.9.9.9", Some(1), Some(2)),
            ("b", 1, "lb-b.example", Some(9042), Some(9142)),
            ("a", 1, "lb-a.example", Some(9042), Some(9142)),
            ("b", 2, "10.0.0.2", Some(19042), None),
            ("a", 3, "10.0.0.3", Some(0), Some(70000)),
        ]);
        let cfg = ClientRoutes::new(["a", "b"]);
        let plain = parse_routes(&pages, &cfg, false).unwrap();
        assert_eq!(plain.len(), 2, "{plain:?}");
        assert_eq!(plain[&Uuid::from_u128(1)], route("lb-a.example", 9042));
        assert_eq!(plain[&Uuid::from_u128(2)], route("10.0.0.2", 19042));
        // TLS: tls_port; a row without one (or out of range) is no route.
        let tls = parse_routes(&pages, &cfg, true).unwrap();
        assert_eq!(tls.len(), 1, "{tls:?}");
        assert_eq!(tls[&Uuid::from_u128(1)], route("lb-a.example", 9142));
        // Only "b": its row for host 1.
        let only_b = parse_routes(&pages, &ClientRoutes::new(["b"]), false).unwrap();
        assert_eq!(only_b[&Uuid::from_u128(1)], route("lb-b.example", 9042));
        assert!(parse_routes(&pages, &ClientRoutes::new(["none"]), false)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn an_overridden_address_replaces_the_rows_address_and_keeps_their_ports() {
        let pages = rows(&[
            ("a", 1, "lb-a.example", Some(9042), Some(9142)),
            ("a", 2, "10.0.0.2", Some(19042), Some(19142)),
            ("b", 3, "lb-b.example", Some(9042), Some(9142)),
        ]);
        let cfg = ClientRoutes::new(["a", "b"])
            .override_address("a", "wrong.example")
            .override_address("a", "vpce.internal");
        let plain = parse_routes(&pages, &cfg, false).unwrap();
        assert_eq!(plain[&Uuid::from_u128(1)], route("vpce.internal", 9042));
        assert_eq!(plain[&Uuid::from_u128(2)], route("vpce.internal", 19042));
        assert_eq!(plain[&Uuid::from_u128(3)], route("lb-b.example", 9042));
        let tls = parse_routes(&pages, &cfg, true).unwrap();
        assert_eq!(tls[&Uuid::from_u128(2)], route("vpce.internal", 19142));
        // An override for an id the session does not use adds no route.
        let unused = ClientRoutes::new(["b"]).override_address("a", "vpce.internal");
        assert_eq!(parse_routes(&pages, &unused, false).unwrap().len(), 1);
    }

    #[tokio::test]
    async fn resolves_ips_directly() {
        assert_eq!(
            resolve(&route("10.1.2.3", 9042)).await,
            Some("10.1.2.3:9042".parse().unwrap())
        );
        assert_eq!(
            resolve(&route("::1", 9142)).await,
            Some("[::1]:9142".parse().unwrap())
        );
    }
}
