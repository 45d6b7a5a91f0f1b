//! Running a metadata query on the control connection: one SELECT over a
//! system table, every page fetched, with a timeout per page.
//!
//! System tables are read with consistency ONE (they are node-local, or
//! replicated to every node), paged so that a large schema cannot produce a
//! frame above the size limit, and with a bounded number of pages so that a
//! server that keeps answering "more pages" cannot keep us looping.

use std::borrow::Cow;
use std::time::Duration;

use scylla_cql::consistency::Consistency;
use scylla_cql::frame::request::query::Query;
use scylla_cql::frame::request::query_params::QueryParameters;
use scylla_cql::frame::response::result::{ResultBody, Rows};
use scylla_cql::frame::response::Response;
use scylla_cql::frame::wire::RawValue;
use scylla_cql::types::deserialize::{ColumnIterator, DeserializationError, DeserializeRow};
use scylla_cql::types::{ColumnSpec, SerializedValues};

use super::MetadataError;
use crate::connection::{Connection, RequestOptions};

/// Most pages read for one query (at the default page size, 10 million rows).
const MAX_PAGES: usize = 10_000;

/// How metadata queries are run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QueryOptions {
    /// Bound on each request (each page).
    pub timeout: Duration,
    /// Rows per page.
    pub page_size: i32,
}

impl Default for QueryOptions {
    /// 5 s per page, 1,000 rows per page.
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(5),
            page_size: 1000,
        }
    }
}

/// Runs `cql` and returns every page of its rows.
pub(crate) async fn select_all(
    conn: &Connection,
    cql: &'static str,
    opts: &QueryOptions,
) -> Result<Vec<Rows>, MetadataError> {
    select_all_with(conn, cql, &SerializedValues::new(), opts).await
}

/// Runs `cql` (whose one bind marker is a keyspace name) for `keyspace`
/// and returns every page of its rows.
pub(crate) async fn select_keyspace(
    conn: &Connection,
    cql: &'static str,
    keyspace: &str,
    opts: &QueryOptions,
) -> Result<Vec<Rows>, MetadataError> {
    let mut values = SerializedValues::new();
    values
        .push(RawValue::Value(keyspace.as_bytes()))
        .map_err(|_| MetadataError::LocalRow(format!("keyspace name too long: {keyspace:?}")))?;
    select_all_with(conn, cql, &values, opts).await
}

async fn select_all_with(
    conn: &Connection,
    cql: &'static str,
    values: &SerializedValues,
    opts: &QueryOptions,
) -> Result<Vec<Rows>, MetadataError> {
    let mut pages = Vec::new();
    for_each_page_with(conn, cql, values, opts, |rows| {
        pages.push(rows);
        Ok(())
    })
    .await?;
    Ok(pages)
}

/// Runs `cql` and hands each page of its rows to `f` as it arrives (memory
/// stays bounded by one page); stops at the first error of `f`.
pub(crate) async fn for_each_page(
    conn: &Connection,
    cql: &'static str,
    opts: &QueryOptions,
    f: impl FnMut(Rows) -> Result<(), MetadataError>,
) -> Result<(), MetadataError> {
    for_each_page_with(conn, cql, &SerializedValues::new(), opts, f).await
}

async fn for_each_page_with(
    conn: &Connection,
    cql: &'static str,
    values: &SerializedValues,
    opts: &QueryOptions,
    mut f: impl FnMut(Rows) -> Result<(), MetadataError>,
) -> Result<(), MetadataError> {
    let mut paging_state: Option<Vec<u8>> = None;
    for _ in 0..MAX_PAGES {
        let query = Query {
            contents: Cow::Borrowed(cql),
            params: QueryParameters {
                consistency: Consistency::One,
                page_size: Some(opts.page_size.max(1)),
                paging_state: paging_state.as_deref().map(Cow::Borrowed),
                values: Cow::Borrowed(values),
                ..QueryParameters::default()
            },
        };
        let request_opts = RequestOptions {
            timeout: Some(opts.timeout),
            ..RequestOptions::default()
        };
        let frame = conn
            .request(&query, &request_opts)
            .await
            .map_err(|source| MetadataError::Request { query: cql, source })?;
        let rows = match frame.response {
            Response::Result(ResultBody::Rows(rows)) => rows,
            Response::Error(error) => return Err(MetadataError::Server { query: cql, error }),
            other => {
                return Err(MetadataError::UnexpectedResponse {
                    query: cql,
                    got: response_name(&other),
                })
            }
        };
        paging_state = rows.paging_state().map(|p| p.to_vec());
        f(rows)?;
        if paging_state.is_none() {
            return Ok(());
        }
    }
    Err(MetadataError::TooManyPages { query: cql })
}

/// The column specs of a page; a result without them (No_metadata, which
/// we never ask for) cannot be interpreted.
fn specs<'r>(rows: &'r Rows, query: &'static str) -> Result<&'r [ColumnSpec], MetadataError> {
    rows.metadata()
        .col_specs
        .as_deref()
        .ok_or(MetadataError::NoColumnSpecs { query })
}

fn response_name(r: &Response) -> &'static str {
    match r {
        Response::Error(_) => "ERROR",
        Response::Ready(_) => "READY",
        Response::Authenticate(_) => "AUTHENTICATE",
        Response::Supported(_) => "SUPPORTED",
        Response::Result(ResultBody::Void) => "RESULT Void",
        Response::Result(ResultBody::Rows(_)) => "RESULT Rows",
        Response::Result(ResultBody::SetKeyspace(_)) => "RESULT Set_keyspace",
        Response::Result(ResultBody::Prepared(_)) => "RESULT Prepared",
        Response::Result(ResultBody::SchemaChange(_)) => "RESULT Schema_change",
        Response::Event(_) => "EVENT",
        Response::AuthChallenge(_) => "AUTH_CHALLENGE",
        Response::AuthSuccess(_) => "AUTH_SUCCESS",
    }
}

/// Deserializes every row of `pages` as an `R`, handing each result to `f`.
///
/// `R` is type-checked once per page (a column of an unexpected type fails
/// the whole query: the server is not what we think it is). A row whose
/// values do not deserialize is handed over as an error, so that the caller
/// can skip that one row: each row's cells are located from the validated
/// frame layout, independently of the rows before it.
pub(crate) fn for_each_row<R>(
    pages: &[Rows],
    query: &'static str,
    mut f: impl FnMut(Result<R, DeserializationError>),
) -> Result<(), MetadataError>
where
    R: for<'r> DeserializeRow<'r, 'r>,
{
    for page in pages {
        let specs = specs(page, query)?;
        R::type_check(specs).map_err(|source| MetadataError::TypeCheck { query, source })?;
        for raw in page.raw_iter() {
            let mut cells = ColumnIterator::new(specs, raw.as_bytes());
            f(R::deserialize(&mut cells));
        }
    }
    Ok(())
}
