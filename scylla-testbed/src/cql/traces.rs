//! Query traces, when the cluster records them
//! ([`Topology::set_record_traces`](crate::topology::Topology::set_record_traces)):
//! a request with the TRACING flag is run as usual, then a trace of it is
//! kept (one `system_traces.sessions` row and a few `system_traces.events`
//! rows, written before the response goes out, so a reader finds it
//! complete at once), and the response carries the trace id.
//!
//! The events say what the test cluster did (parsed, executed, answered),
//! with the times it took; they are not ScyllaDB's events. The last
//! [`KEPT`] traces are kept.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use scylla_cql::types::{CqlTimestamp, CqlValue};
use uuid::Uuid;

use super::ids::{random_uuid, time_uuid};

/// How many traces are kept (the oldest go first).
pub(crate) const KEPT: usize = 1000;

/// One step of a traced request.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) id: Uuid,
    pub(crate) activity: String,
    pub(crate) source: IpAddr,
    pub(crate) elapsed: Duration,
    pub(crate) thread: String,
}

/// One traced request.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    pub(crate) id: Uuid,
    pub(crate) client: IpAddr,
    pub(crate) coordinator: IpAddr,
    /// `QUERY`, `EXECUTE` or `BATCH`.
    pub(crate) command: &'static str,
    /// What was asked (the statement's text, if there is one).
    pub(crate) request: String,
    pub(crate) parameters: Vec<(String, String)>,
    pub(crate) started_at: SystemTime,
    pub(crate) duration: Duration,
    pub(crate) events: Vec<Event>,
}

/// A trace being recorded: events are added as the request runs.
#[derive(Debug)]
pub(crate) struct Recorder {
    started: Instant,
    started_at: SystemTime,
    source: IpAddr,
    thread: String,
    events: Vec<Event>,
}

impl Recorder {
    /// Starts a trace on the node at `source`, on shard `shard`.
    pub(crate) fn start(source: IpAddr, shard: u16) -> Self {
        Recorder {
            started: Instant::now(),
            started_at: SystemTime::now(),
            source,
            thread: format!("shard {shard}"),
            events: Vec::new(),
        }
    }

    /// Records that `activity` happened now.
    pub(crate) fn event(&mut self, activity: impl Into<String>) {
        self.events.push(Event {
            id: time_uuid(),
            activity: activity.into(),
            source: self.source,
            elapsed: self.started.elapsed(),
            thread: self.thread.clone(),
        });
    }

    /// The finished trace.
    pub(crate) fn finish(
        mut self,
        client: IpAddr,
        command: &'static str,
        request: String,
        parameters: Vec<(String, String)>,
    ) -> Trace {
        self.event("Request complete");
        Trace {
            id: random_uuid(),
            client,
            coordinator: self.source,
            command,
            request,
            parameters,
            started_at: self.started_at,
            duration: self.started.elapsed(),
            events: self.events,
        }
    }
}

/// The traces kept, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Traces(Mutex<VecDeque<Trace>>);

impl Traces {
    /// Keeps `t` (dropping the oldest beyond [`KEPT`]).
    pub(crate) fn add(&self, t: Trace) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= KEPT {
            q.pop_front();
        }
        q.push_back(t);
    }

    /// A copy of every trace kept.
    pub(crate) fn all(&self) -> Vec<Trace> {
        let q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        q.iter().cloned().collect()
    }
}

/// Microseconds as an `int` column holds them (saturating).
fn micros(d: Duration) -> CqlValue {
    CqlValue::Int(i32::try_from(d.as_micros()).unwrap_or(i32::MAX))
}

/// Columns of `system_traces.sessions`.
pub(crate) const SESSION_COLUMNS: [(&str, &str); 8] = [
    ("session_id", "uuid"),
    ("client", "inet"),
    ("command", "text"),
    ("coordinator", "inet"),
    ("duration", "int"),
    ("parameters", "map<text, text>"),
    ("request", "text"),
    ("started_at", "timestamp"),
];

/// Columns of `system_traces.events`.
pub(crate) const EVENT_COLUMNS: [(&str, &str); 6] = [
    ("session_id", "uuid"),
    ("event_id", "timeuuid"),
    ("activity", "text"),
    ("source", "inet"),
    ("source_elapsed", "int"),
    ("thread", "text"),
];

/// The `system_traces.sessions` rows of `traces`.
pub(crate) fn session_rows(traces: &[Trace]) -> Vec<Vec<Option<CqlValue>>> {
    traces
        .iter()
        .map(|t| {
            let started_ms = t
                .started_at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
            let params = t
                .parameters
                .iter()
                .map(|(k, v)| (CqlValue::Text(k.clone()), CqlValue::Text(v.clone())))
                .collect();
            vec![
                Some(CqlValue::Uuid(t.id)),
                Some(CqlValue::Inet(t.client)),
                Some(CqlValue::Text(t.command.to_owned())),
                Some(CqlValue::Inet(t.coordinator)),
                Some(micros(t.duration)),
                Some(CqlValue::Map(params)),
                Some(CqlValue::Text(t.request.clone())),
                Some(CqlValue::Timestamp(CqlTimestamp(started_ms))),
            ]
        })
        .collect()
}

/// The `system_traces.events` rows of `traces`.
pub(crate) fn event_rows(traces: &[Trace]) -> Vec<Vec<Option<CqlValue>>> {
    let mut rows = Vec::new();
    for t in traces {
        for e in &t.events {
            rows.push(vec![
                Some(CqlValue::Uuid(t.id)),
                Some(CqlValue::Timeuuid(e.id.into())),
                Some(CqlValue::Text(e.activity.clone())),
                Some(CqlValue::Inet(e.source)),
                Some(micros(e.elapsed)),
                Some(CqlValue::Text(e.thread.clone())),
            ]);
        }
    }
    rows
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_trace_has_its_events_and_rows() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let mut r = Recorder::start(ip, 3);
        r.event("Parsing SELECT 1");
        let t = r.finish(
            ip,
            "QUERY",
            "SELECT 1".into(),
            vec![("consistency_level".into(), "ONE".into())],
        );
        assert_eq!(t.events.len(), 2);
        assert_eq!(t.events[1].activity, "Request complete");
        assert!(t.events[0].elapsed <= t.events[1].elapsed);
        assert_eq!(t.events[0].id.get_version_num(), 1);
        let traces = Traces::default();
        for _ in 0..KEPT + 5 {
            traces.add(t.clone());
        }
        assert_eq!(traces.all().len(), KEPT);
        assert_eq!(
            session_rows(std::slice::from_ref(&t))[0].len(),
            SESSION_COLUMNS.len()
        );
        let events = event_rows(&[t]);
        assert_eq!(events.len(), 2);
        assert!(events.iter().all(|e| e.len() == EVENT_COLUMNS.len()));
    }
}
