//! Query traces: what the server recorded about one traced request.
//!
//! A statement run with tracing on
//! ([`with_tracing(true)`](crate::statement::Statement::with_tracing)) comes
//! back with the id of its trace ([`QueryResult::tracing_id`]). The
//! coordinator writes the trace to `system_traces.sessions` (one row per
//! traced request) and `system_traces.events` (one row per step, on every
//! node that took part) *after* it answers, asynchronously. So
//! [`Session::get_tracing_info`] reads the session row until it is complete
//! (its `duration` is set), waiting between reads as [`TraceFetchOptions`]
//! says, and then reads the events. Every read runs at consistency ONE by
//! default: traces are written with a low consistency, and a trace is a
//! diagnostic, not data that needs a quorum.
//!
//! Complete means the coordinator has finished: in a cluster of several
//! nodes, an event a replica records late (or a trace row not yet
//! replicated to the node that answers the read) can still be missing;
//! fetching again later reads it.
//!
//! [`QueryResult::tracing_id`]: crate::result::QueryResult::tracing_id

use std::borrow::Borrow;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use scylla_cql::types::CqlTimestamp;
use uuid::Uuid;

use super::Session;
use crate::error::ExecutionError;
use crate::statement::{Consistency, Statement};

/// How [`Session::get_tracing_info_with`] waits for a trace to be complete.
///
/// The session row is read up to `attempts` times. Between two reads the
/// wait starts at `interval` and doubles, up to `max_interval`. The default
/// (10 reads, 3 ms doubling up to 300 ms) waits at most
/// 3 + 6 + 12 + 24 + 48 + 96 + 192 + 300 + 300 ms = 981 ms in all, plus the
/// reads themselves (each bounded by the session's request timeout).
///
/// ```
/// use std::time::Duration;
/// use scylla_driver::session::TraceFetchOptions;
///
/// let mut patient = TraceFetchOptions::default();
/// patient.attempts = 20;
/// patient.max_interval = Duration::from_millis(500);
/// assert!(patient.max_total_wait() > TraceFetchOptions::default().max_total_wait());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TraceFetchOptions {
    /// Reads of the session row before giving up (at least one is made).
    pub attempts: u32,
    /// The wait after the first read that found no complete trace.
    pub interval: Duration,
    /// The longest wait between two reads (the wait doubles up to it).
    pub max_interval: Duration,
    /// The consistency of the reads.
    pub consistency: Consistency,
}

impl Default for TraceFetchOptions {
    fn default() -> Self {
        TraceFetchOptions {
            attempts: 10,
            interval: Duration::from_millis(3),
            max_interval: Duration::from_millis(300),
            consistency: Consistency::One,
        }
    }
}

impl TraceFetchOptions {
    /// The waits between reads, in order (`attempts - 1` of them).
    pub fn waits(&self) -> impl Iterator<Item = Duration> + '_ {
        let mut next = self.interval.min(self.max_interval);
        (1..self.attempts.max(1)).map(move |_| {
            let wait = next;
            next = next.saturating_mul(2).min(self.max_interval);
            wait
        })
    }

    /// The longest the reads can be spread over: the sum of [`waits`](Self::waits).
    pub fn max_total_wait(&self) -> Duration {
        self.waits().fold(Duration::ZERO, Duration::saturating_add)
    }
}

/// A trace: the `system_traces.sessions` row of one traced request and its
/// `system_traces.events`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracingInfo {
    /// The trace's id (the `session_id`).
    pub id: Uuid,
    /// The client's address, as the coordinator saw it.
    pub client: Option<IpAddr>,
    /// The kind of request (`QUERY`, `EXECUTE`, `BATCH`, ...).
    pub command: Option<String>,
    /// The node that coordinated the request.
    pub coordinator: Option<IpAddr>,
    /// How long the coordinator took, as it measured it, in microseconds
    /// (the column's own type, as in the official `scylla` crate; never
    /// negative, and always set in a trace that
    /// [`Session::get_tracing_info`] returns, since it waits for it).
    /// [`elapsed`](Self::elapsed) gives it as a [`Duration`].
    pub duration: Option<i32>,
    /// The request's parameters as the server logged them (for example
    /// `query`, `consistency_level`, `page_size`).
    pub parameters: HashMap<String, String>,
    /// A description of the request (e.g. `Execute CQL3 query`).
    pub request: Option<String>,
    /// When the coordinator started the request.
    pub started_at: Option<SystemTime>,
    /// What every node did, in the order of their ids (time-based).
    pub events: Vec<TracingEvent>,
}

/// One step of a trace (a `system_traces.events` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracingEvent {
    /// The event's id (a time-based uuid).
    pub event_id: Uuid,
    /// What happened.
    pub activity: Option<String>,
    /// The node it happened on.
    pub source: Option<IpAddr>,
    /// The time since that node started on the request, in microseconds
    /// (never negative); [`elapsed`](Self::elapsed) gives it as a
    /// [`Duration`].
    pub source_elapsed: Option<i32>,
    /// The server thread that recorded it.
    pub thread: Option<String>,
}

/// Microseconds (checked non-negative when the trace was read) as a duration.
fn micros_duration(v: Option<i32>) -> Option<Duration> {
    v.and_then(|v| u64::try_from(v).ok())
        .map(Duration::from_micros)
}

impl TracingInfo {
    /// [`duration`](Self::duration) as a [`Duration`].
    pub fn elapsed(&self) -> Option<Duration> {
        micros_duration(self.duration)
    }
}

impl TracingEvent {
    /// [`source_elapsed`](Self::source_elapsed) as a [`Duration`].
    pub fn elapsed(&self) -> Option<Duration> {
        micros_duration(self.source_elapsed)
    }
}

/// Fetching a trace failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TracingError {
    /// A read of `system_traces` failed (the server does not trace, the
    /// tables are unavailable, the read timed out, ...).
    #[error("reading the trace failed")]
    Query(#[from] ExecutionError),
    /// The trace was not complete (its session row missing, or without a
    /// duration) after every read. The server may still be writing it:
    /// fetching again later can succeed.
    #[error(
        "trace {id} is not complete after {attempts} reads over {waited:?} ({})",
        if *session_found { "its session has no duration yet" } else { "no session row" }
    )]
    NotComplete {
        /// The trace's id.
        id: Uuid,
        /// Reads of the session row made.
        attempts: u32,
        /// The time waited between them.
        waited: Duration,
        /// Whether the session row was there (without its duration).
        session_found: bool,
    },
    /// The trace has a value no trace can have.
    #[error("trace {id}: {what}")]
    Malformed {
        /// The trace's id.
        id: Uuid,
        /// What is wrong.
        what: String,
    },
}

/// The columns read from `system_traces.sessions`, in this order. ScyllaDB
/// and Cassandra both have them (each has a few more).
const SESSION_COLUMNS: &str =
    "client, command, coordinator, duration, parameters, request, started_at";
/// The columns read from `system_traces.events`, in this order.
const EVENT_COLUMNS: &str = "event_id, activity, source, source_elapsed, thread";

type SessionRow = (
    Option<IpAddr>,
    Option<String>,
    Option<IpAddr>,
    Option<i32>,
    Option<HashMap<String, String>>,
    Option<String>,
    Option<CqlTimestamp>,
);
type EventRow = (
    Uuid,
    Option<String>,
    Option<IpAddr>,
    Option<i32>,
    Option<String>,
);

/// A count of microseconds, checked: a negative one is malformed.
fn micros(id: Uuid, column: &str, v: i32) -> Result<i32, TracingError> {
    if v < 0 {
        return Err(TracingError::Malformed {
            id,
            what: format!("negative {column}: {v} µs"),
        });
    }
    Ok(v)
}

/// Milliseconds since the epoch as a time (`None` out of `SystemTime`'s range).
fn time_of(ts: CqlTimestamp) -> Option<SystemTime> {
    let ms = Duration::from_millis(ts.0.unsigned_abs());
    if ts.0 >= 0 {
        UNIX_EPOCH.checked_add(ms)
    } else {
        UNIX_EPOCH.checked_sub(ms)
    }
}

/// The trace from its session row (complete: with a duration) and events.
fn tracing_info(
    id: Uuid,
    session: SessionRow,
    duration: i32,
    events: Vec<EventRow>,
) -> Result<TracingInfo, TracingError> {
    let (client, command, coordinator, _, parameters, request, started_at) = session;
    let events = events
        .into_iter()
        .map(|(event_id, activity, source, elapsed, thread)| {
            Ok(TracingEvent {
                event_id,
                activity,
                source,
                source_elapsed: elapsed
                    .map(|v| micros(id, "source_elapsed", v))
                    .transpose()?,
                thread,
            })
        })
        .collect::<Result<Vec<_>, TracingError>>()?;
    Ok(TracingInfo {
        id,
        client,
        command,
        coordinator,
        duration: Some(micros(id, "duration", duration)?),
        parameters: parameters.unwrap_or_default(),
        request,
        started_at: started_at.and_then(time_of),
        events,
    })
}

impl Session {
    /// Fetches the trace of a traced request, waiting (bounded, as the
    /// builder's `tracing_info_fetch_*` settings say; by default, see
    /// [`TraceFetchOptions::default`], at most about a second) until the
    /// server has written it whole. The id is taken by value or by
    /// reference (`&id`, as in the official `scylla` crate).
    ///
    /// ```no_run
    /// # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
    /// use scylla_driver::statement::Statement;
    ///
    /// let traced = Statement::new("SELECT * FROM ks.t WHERE pk = 1").with_tracing(true);
    /// let result = session.query_unpaged(traced, ()).await?;
    /// let id = result.tracing_id().ok_or("the server did not trace the request")?;
    /// let trace = session.get_tracing_info(&id).await?;
    /// println!("{:?} on {:?} took {:?}", trace.command, trace.coordinator, trace.elapsed());
    /// for e in &trace.events {
    ///     println!("{:>8?} {:?}: {}", e.elapsed(), e.source, e.activity.as_deref().unwrap_or(""));
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_tracing_info(
        &self,
        id: impl Borrow<Uuid>,
    ) -> Result<TracingInfo, TracingError> {
        let options = &self.inner.config.tracing_info_fetch;
        self.get_tracing_info_with(*id.borrow(), options).await
    }

    /// [`get_tracing_info`](Self::get_tracing_info), waiting as `options`
    /// says rather than as the session was built with.
    pub async fn get_tracing_info_with(
        &self,
        id: Uuid,
        options: &TraceFetchOptions,
    ) -> Result<TracingInfo, TracingError> {
        let read = |cql: String| {
            Statement::new(cql)
                .with_consistency(options.consistency)
                .with_idempotent(true)
        };
        // The id is a uuid constant in the text: nothing to bind, nothing
        // to prepare (and to cache) for a one-off read.
        let sessions =
            format!("SELECT {SESSION_COLUMNS} FROM system_traces.sessions WHERE session_id = {id}");
        let mut waits = options.waits();
        let mut attempts = 0;
        let mut waited = Duration::ZERO;
        let mut session_found;
        loop {
            attempts += 1;
            let result = self.query_unpaged(read(sessions.clone()), ()).await?;
            let row: Option<SessionRow> = result.first_row()?;
            session_found = row.is_some();
            if let Some(row) = row {
                if let Some(duration) = row.3 {
                    let events = format!(
                        "SELECT {EVENT_COLUMNS} FROM system_traces.events WHERE session_id = {id}"
                    );
                    let events: Vec<EventRow> =
                        self.query_unpaged(read(events), ()).await?.into_rows()?;
                    tracing::debug!(%id, attempts, events = events.len(), "trace fetched");
                    return tracing_info(id, row, duration, events);
                }
            }
            let Some(wait) = waits.next() else { break };
            tokio::time::sleep(wait).await;
            waited += wait;
        }
        Err(TracingError::NotComplete {
            id,
            attempts,
            waited,
            session_found,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_waits_double_up_to_the_cap_and_stay_bounded() {
        let o = TraceFetchOptions::default();
        let waits: Vec<u64> = o.waits().map(|d| d.as_millis() as u64).collect();
        assert_eq!(waits, [3, 6, 12, 24, 48, 96, 192, 300, 300]);
        assert_eq!(o.max_total_wait(), Duration::from_millis(981));
    }

    #[test]
    fn one_attempt_never_waits_and_zero_means_one() {
        for attempts in [0, 1] {
            let o = TraceFetchOptions {
                attempts,
                ..TraceFetchOptions::default()
            };
            assert_eq!(o.waits().count(), 0);
        }
    }

    #[test]
    fn an_interval_above_the_cap_is_capped() {
        let o = TraceFetchOptions {
            attempts: 3,
            interval: Duration::from_secs(5),
            max_interval: Duration::from_millis(10),
            ..TraceFetchOptions::default()
        };
        assert_eq!(o.max_total_wait(), Duration::from_millis(20));
    }

    #[test]
    fn rows_become_a_typed_trace() {
        let id = Uuid::from_u128(7);
        let coordinator: IpAddr = "127.0.0.1".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        let session: SessionRow = (
            None,
            Some("QUERY".into()),
            Some(coordinator),
            Some(1500),
            Some(HashMap::from([("query".into(), "SELECT 1".into())])),
            Some("Execute CQL3 query".into()),
            Some(CqlTimestamp(1_000)),
        );
        let events = vec![(
            Uuid::from_u128(1),
            Some("Parsing".into()),
            Some(coordinator),
            Some(20),
            None,
        )];
        let t = tracing_info(id, session, 1500, events).expect("a valid trace");
        assert_eq!(t.duration, Some(1500));
        assert_eq!(t.elapsed(), Some(Duration::from_micros(1500)));
        assert_eq!(t.coordinator, Some(coordinator));
        assert_eq!(t.started_at, UNIX_EPOCH.checked_add(Duration::from_secs(1)));
        assert_eq!(
            t.parameters.get("query").map(String::as_str),
            Some("SELECT 1")
        );
        assert_eq!(t.events.len(), 1);
        assert_eq!(t.events[0].source_elapsed, Some(20));
        assert_eq!(t.events[0].elapsed(), Some(Duration::from_micros(20)));
    }

    #[test]
    fn a_negative_duration_is_malformed() {
        let id = Uuid::from_u128(7);
        let session: SessionRow = (None, None, None, Some(-1), None, None, None);
        let err = tracing_info(id, session, -1, Vec::new()).unwrap_err();
        assert!(matches!(err, TracingError::Malformed { .. }), "{err}");
    }

    #[test]
    fn timestamps_before_the_epoch_are_times_too() {
        assert_eq!(
            time_of(CqlTimestamp(-1_000)),
            UNIX_EPOCH.checked_sub(Duration::from_secs(1))
        );
    }
}
