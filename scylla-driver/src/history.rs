//! What happened while requests ran: their attempts, on which node, how each
//! ended and what the retry policy decided, and the speculative attempts
//! started beside them (the official `scylla` crate's
//! `observability::history`).
//!
//! Set a [`HistoryListener`] on a statement, prepared statement or batch
//! (`set_history_listener`); the session tells it of every request that
//! statement runs. [`HistoryCollector`] keeps what it is told, and
//! [`StructuredHistory`] arranges it by request and prints it.
//!
//! ```no_run
//! # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use scylla_driver::observability::history::HistoryCollector;
//! use scylla_driver::statement::Statement;
//!
//! let collector = Arc::new(HistoryCollector::new());
//! let mut select = Statement::new("SELECT * FROM ks.t");
//! select.set_history_listener(collector.clone());
//! let _ = session.query_unpaged(select, ()).await;
//! println!("{}", collector.clone_structured_history());
//! # Ok(()) }
//! ```
//!
//! A statement without a listener costs its requests one check of an
//! `Option`. With one, each request allocates a small record of its first
//! fiber, and the listener's calls cost what the listener does (a [`HistoryCollector`] takes a lock and stores an
//! event for each).
//!
//! A paged read (`query_iter`, `execute_iter`) is one request per page. A
//! request ends, for its listener, when a node's answer is taken or the
//! request fails; decoding the answer (and the schema agreement after a
//! schema change) comes after.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{ExecutionError, RequestAttemptError};
use crate::handle::Handle;
use crate::policy::retry::RetryDecision;

/// A request, as its listener numbered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub usize);

/// An attempt (one request frame sent to one node), as its listener numbered
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId(pub usize);

/// A speculative fiber (a chain of attempts started beside a request's
/// first one, see
/// [`SpeculativeExecution`](crate::policy::speculative::SpeculativeExecution)),
/// as its listener numbered it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpeculativeId(pub usize);

/// Told of what happens to the requests of the statements it is set on.
///
/// The listener hands out the ids: the session passes them back in the
/// later calls about the same request, fiber or attempt. Calls come from
/// the task running the request, while it runs: a listener should return
/// quickly. A speculative fiber that was still running when another
/// answered is dropped without a last call: its attempt stays without a
/// result.
pub trait HistoryListener: fmt::Debug + Send + Sync {
    /// A request starts (before it waits for a concurrency permit).
    fn log_request_start(&self) -> RequestId;

    /// The request succeeded: a node answered it.
    fn log_request_success(&self, request_id: RequestId);

    /// The request failed with `error` (what the caller receives).
    fn log_request_error(&self, request_id: RequestId, error: &ExecutionError);

    /// A speculative fiber starts for the request.
    fn log_new_speculative_fiber(&self, request_id: RequestId) -> SpeculativeId;

    /// An attempt is sent to `node_addr`, by the request's first fiber
    /// (`speculative_id` is `None`) or a speculative one.
    fn log_attempt_start(
        &self,
        request_id: RequestId,
        speculative_id: Option<SpeculativeId>,
        node_addr: SocketAddr,
    ) -> AttemptId;

    /// The attempt's node answered with a result.
    fn log_attempt_success(&self, attempt_id: AttemptId);

    /// The attempt failed with `error`, and the retry policy decided
    /// `retry_decision` (`Fail` also when the request's deadline had
    /// passed).
    fn log_attempt_error(
        &self,
        attempt_id: AttemptId,
        error: &RequestAttemptError,
        retry_decision: &RetryDecision,
    );
}

/// A statement's history listener, as its options hold it (see [`Handle`]).
pub type HistoryListenerHandle = Handle<dyn HistoryListener>;

/// When an event happened (the system clock).
pub type TimePoint = SystemTime;

/// One event a [`HistoryCollector`] was told of.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HistoryEvent {
    /// A request started.
    NewRequest(RequestId),
    /// The request succeeded.
    RequestSuccess(RequestId),
    /// The request failed; the error's text (with its causes).
    RequestError(RequestId, String),
    /// A speculative fiber started for the request.
    NewSpeculativeFiber(SpeculativeId, RequestId),
    /// An attempt of the request (of its first fiber when the speculative
    /// id is `None`) was sent to the node.
    NewAttempt(AttemptId, RequestId, Option<SpeculativeId>, SocketAddr),
    /// The attempt succeeded.
    AttemptSuccess(AttemptId),
    /// The attempt failed, and what the retry policy decided.
    AttemptError(AttemptId, RequestAttemptError, RetryDecision),
}

/// What a [`HistoryCollector`] holds: its events in the order they came,
/// each with its time.
#[derive(Debug, Clone, Default)]
pub struct HistoryCollectorData {
    events: Vec<(HistoryEvent, TimePoint)>,
    next_request: usize,
    next_fiber: usize,
    next_attempt: usize,
}

impl HistoryCollectorData {
    /// The events, in the order they came.
    pub fn events(&self) -> &[(HistoryEvent, TimePoint)] {
        &self.events
    }

    fn push(&mut self, event: HistoryEvent) {
        self.events.push((event, SystemTime::now()));
    }
}

/// A [`HistoryListener`] that keeps every event it is told of, with its
/// time. One collector may listen to many statements and requests; ids keep
/// counting when its events are taken out.
#[derive(Debug, Default)]
pub struct HistoryCollector {
    data: Mutex<HistoryCollectorData>,
}

impl HistoryCollector {
    /// A collector without events.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events so far (a copy).
    pub fn clone_collected(&self) -> HistoryCollectorData {
        self.lock().clone()
    }

    /// The events so far, taken out: the collector keeps none of them (a
    /// speculative fiber still running may add events to a request taken
    /// out; they are kept for the next take).
    pub fn take_collected(&self) -> HistoryCollectorData {
        let mut data = self.lock();
        HistoryCollectorData {
            events: std::mem::take(&mut data.events),
            ..*data
        }
    }

    /// The events so far, arranged by request.
    pub fn clone_structured_history(&self) -> StructuredHistory {
        StructuredHistory::from(&self.clone_collected())
    }

    /// The events so far, taken out and arranged by request.
    pub fn take_structured_history(&self) -> StructuredHistory {
        StructuredHistory::from(&self.take_collected())
    }

    /// The data. A panic while the lock was held cannot leave it torn (each
    /// change is one push or one counter), so a poisoned lock is used as is.
    fn lock(&self) -> MutexGuard<'_, HistoryCollectorData> {
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl HistoryListener for HistoryCollector {
    fn log_request_start(&self) -> RequestId {
        let mut data = self.lock();
        let id = RequestId(data.next_request);
        data.next_request += 1;
        data.push(HistoryEvent::NewRequest(id));
        id
    }

    fn log_request_success(&self, request_id: RequestId) {
        self.lock().push(HistoryEvent::RequestSuccess(request_id));
    }

    fn log_request_error(&self, request_id: RequestId, error: &ExecutionError) {
        let text = error.to_string();
        self.lock()
            .push(HistoryEvent::RequestError(request_id, text));
    }

    fn log_new_speculative_fiber(&self, request_id: RequestId) -> SpeculativeId {
        let mut data = self.lock();
        let id = SpeculativeId(data.next_fiber);
        data.next_fiber += 1;
        data.push(HistoryEvent::NewSpeculativeFiber(id, request_id));
        id
    }

    fn log_attempt_start(
        &self,
        request_id: RequestId,
        speculative_id: Option<SpeculativeId>,
        node_addr: SocketAddr,
    ) -> AttemptId {
        let mut data = self.lock();
        let id = AttemptId(data.next_attempt);
        data.next_attempt += 1;
        data.push(HistoryEvent::NewAttempt(
            id,
            request_id,
            speculative_id,
            node_addr,
        ));
        id
    }

    fn log_attempt_success(&self, attempt_id: AttemptId) {
        self.lock().push(HistoryEvent::AttemptSuccess(attempt_id));
    }

    fn log_attempt_error(
        &self,
        attempt_id: AttemptId,
        error: &RequestAttemptError,
        retry_decision: &RetryDecision,
    ) {
        let event = HistoryEvent::AttemptError(attempt_id, error.clone(), *retry_decision);
        self.lock().push(event);
    }
}

/// Collected events arranged by request, in the order the requests
/// started; its `Display` prints them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StructuredHistory {
    /// The requests.
    pub requests: Vec<RequestHistory>,
}

/// One request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestHistory {
    /// When it started.
    pub start_time: TimePoint,
    /// Its first fiber (started with the request).
    pub non_speculative_fiber: FiberHistory,
    /// The speculative fibers, in the order they started.
    pub speculative_fibers: Vec<FiberHistory>,
    /// How it ended (`None`: not yet, when the events were taken).
    pub result: Option<RequestHistoryResult>,
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestHistoryResult {
    /// It succeeded, at this time.
    Success(TimePoint),
    /// It failed, at this time, with this error (its text).
    Error(TimePoint, String),
}

/// A chain of attempts: a request's first, or a speculative one.
#[derive(Debug, Clone, PartialEq)]
pub struct FiberHistory {
    /// When it started.
    pub start_time: TimePoint,
    /// Its attempts, in order.
    pub attempts: Vec<AttemptHistory>,
}

/// One attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptHistory {
    /// When it was sent.
    pub send_time: TimePoint,
    /// The node it was sent to.
    pub node_addr: SocketAddr,
    /// How it ended (`None`: not yet, or never: its fiber was dropped when
    /// another answered, or the request failed without a retry decision).
    pub result: Option<AttemptResult>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptResult {
    /// The node answered, at this time.
    Success(TimePoint),
    /// It failed, at this time, with this error; the retry policy decided
    /// this.
    Error(TimePoint, RequestAttemptError, RetryDecision),
}

/// Where an attempt sits in a [`StructuredHistory`]: request, fiber (0: the
/// first; `n`: the `n`th speculative), attempt.
type Place = (usize, usize, usize);

impl From<&HistoryCollectorData> for StructuredHistory {
    fn from(data: &HistoryCollectorData) -> Self {
        let mut requests: Vec<RequestHistory> = Vec::new();
        let mut request_at: BTreeMap<RequestId, usize> = BTreeMap::new();
        // A fiber: its request's index and its own in that request.
        let mut fiber_at: BTreeMap<SpeculativeId, (usize, usize)> = BTreeMap::new();
        let mut attempt_at: BTreeMap<AttemptId, Place> = BTreeMap::new();
        for (event, time) in &data.events {
            let time = *time;
            match event {
                HistoryEvent::NewRequest(id) => {
                    request_at.insert(*id, requests.len());
                    requests.push(RequestHistory {
                        start_time: time,
                        non_speculative_fiber: FiberHistory {
                            start_time: time,
                            attempts: Vec::new(),
                        },
                        speculative_fibers: Vec::new(),
                        result: None,
                    });
                }
                HistoryEvent::RequestSuccess(id) => {
                    if let Some(r) = request_at.get(id).and_then(|&i| requests.get_mut(i)) {
                        r.result = Some(RequestHistoryResult::Success(time));
                    }
                }
                HistoryEvent::RequestError(id, error) => {
                    if let Some(r) = request_at.get(id).and_then(|&i| requests.get_mut(i)) {
                        r.result = Some(RequestHistoryResult::Error(time, error.clone()));
                    }
                }
                HistoryEvent::NewSpeculativeFiber(fiber, id) => {
                    let Some(&i) = request_at.get(id) else {
                        tracing::debug!(?fiber, request = ?id, "history: a fiber of an unknown request");
                        continue;
                    };
                    if let Some(r) = requests.get_mut(i) {
                        r.speculative_fibers.push(FiberHistory {
                            start_time: time,
                            attempts: Vec::new(),
                        });
                        fiber_at.insert(*fiber, (i, r.speculative_fibers.len()));
                    }
                }
                HistoryEvent::NewAttempt(attempt, id, fiber, node_addr) => {
                    let place = match fiber {
                        None => request_at.get(id).map(|&i| (i, 0)),
                        Some(f) => fiber_at.get(f).copied(),
                    };
                    let Some((i, f)) = place else {
                        tracing::debug!(?attempt, request = ?id, "history: an attempt of an unknown request or fiber");
                        continue;
                    };
                    let Some(fiber) = requests.get_mut(i).and_then(|r| r.fiber_mut(f)) else {
                        continue;
                    };
                    attempt_at.insert(*attempt, (i, f, fiber.attempts.len()));
                    fiber.attempts.push(AttemptHistory {
                        send_time: time,
                        node_addr: *node_addr,
                        result: None,
                    });
                }
                HistoryEvent::AttemptSuccess(attempt) => {
                    if let Some(a) = attempt_mut(&mut requests, attempt_at.get(attempt)) {
                        a.result = Some(AttemptResult::Success(time));
                    }
                }
                HistoryEvent::AttemptError(attempt, error, decision) => {
                    if let Some(a) = attempt_mut(&mut requests, attempt_at.get(attempt)) {
                        a.result = Some(AttemptResult::Error(time, error.clone(), *decision));
                    }
                }
            }
        }
        StructuredHistory { requests }
    }
}

impl RequestHistory {
    /// Fiber `f`: 0 the first, `n` the `n`th speculative.
    fn fiber_mut(&mut self, f: usize) -> Option<&mut FiberHistory> {
        match f.checked_sub(1) {
            None => Some(&mut self.non_speculative_fiber),
            Some(s) => self.speculative_fibers.get_mut(s),
        }
    }
}

fn attempt_mut<'a>(
    requests: &'a mut [RequestHistory],
    place: Option<&Place>,
) -> Option<&'a mut AttemptHistory> {
    let &(i, f, a) = place?;
    requests.get_mut(i)?.fiber_mut(f)?.attempts.get_mut(a)
}

impl fmt::Display for StructuredHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} request(s)", self.requests.len())?;
        for (i, request) in self.requests.iter().enumerate() {
            writeln!(f, "Request {i}, started {}", Utc(request.start_time))?;
            write_fiber(f, "first fiber", &request.non_speculative_fiber)?;
            for (s, fiber) in request.speculative_fibers.iter().enumerate() {
                write_fiber(f, &format!("speculative fiber {s}"), fiber)?;
            }
            match &request.result {
                Some(RequestHistoryResult::Success(t)) => writeln!(f, "  succeeded {}", Utc(*t))?,
                Some(RequestHistoryResult::Error(t, e)) => {
                    writeln!(f, "  failed {}: {e}", Utc(*t))?
                }
                None => writeln!(f, "  not finished")?,
            }
        }
        Ok(())
    }
}

fn write_fiber(f: &mut fmt::Formatter<'_>, name: &str, fiber: &FiberHistory) -> fmt::Result {
    writeln!(
        f,
        "  {name}, started {}: {} attempt(s)",
        Utc(fiber.start_time),
        fiber.attempts.len()
    )?;
    for (i, attempt) in fiber.attempts.iter().enumerate() {
        writeln!(
            f,
            "    attempt {i} to {}, sent {}",
            attempt.node_addr,
            Utc(attempt.send_time)
        )?;
        match &attempt.result {
            Some(AttemptResult::Success(t)) => writeln!(f, "      answered {}", Utc(*t))?,
            Some(AttemptResult::Error(t, e, decision)) => {
                writeln!(f, "      failed {}: {e}", Utc(*t))?;
                writeln!(f, "      retry decision: {decision:?}")?;
            }
            None => writeln!(f, "      no result")?,
        }
    }
    Ok(())
}

/// A time printed as a UTC date and time, to the microsecond
/// (`2026-11-26 11:22:23.123456 UTC`).
struct Utc(SystemTime);

impl fmt::Display for Utc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Ok(since) = self.0.duration_since(UNIX_EPOCH) else {
            return write!(f, "{:?}", self.0);
        };
        let secs = since.as_secs();
        let (days, rest) = (secs / 86_400, secs % 86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{:06} UTC",
            rest / 3600,
            rest % 3600 / 60,
            rest % 60,
            since.subsec_micros()
        )
    }
}

/// The proleptic Gregorian date `days` days after 1970-01-01: counts whole
/// 400-year eras (146 097 days each) from 0000-03-01, then the year of
/// the era, the day of that March-based year, and its month and day.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // 1970-01-01 is day 719 468 after 0000-03-01.
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March: 0 is March, 11 February.
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn dates_from_days() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(59), (1970, 3, 1));
        // 2000-02-29 (a leap day of a year divisible by 400).
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        // 2100 is not a leap year.
        assert_eq!(civil_from_days(47_540), (2100, 2, 28));
        assert_eq!(civil_from_days(47_541), (2100, 3, 1));
        assert_eq!(civil_from_days(20_783), (2026, 11, 26));
    }

    #[test]
    fn utc_printing() {
        let t = UNIX_EPOCH + Duration::from_micros(1_764_156_143_000_123);
        assert_eq!(Utc(t).to_string(), "2025-11-26 11:22:23.000123 UTC");
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn events_arranged_by_request_and_fiber() {
        let c = HistoryCollector::new();
        let r0 = c.log_request_start();
        let a0 = c.log_attempt_start(r0, None, addr(1));
        let spec = c.log_new_speculative_fiber(r0);
        let a1 = c.log_attempt_start(r0, Some(spec), addr(2));
        let r1 = c.log_request_start();
        let a2 = c.log_attempt_start(r1, None, addr(3));
        c.log_attempt_error(
            a0,
            &RequestAttemptError::UnableToAllocStreamId,
            &RetryDecision::RetryNextTarget(None),
        );
        let a3 = c.log_attempt_start(r0, None, addr(4));
        c.log_attempt_success(a1);
        c.log_request_success(r0);
        c.log_attempt_success(a2);
        assert_eq!((r0, r1), (RequestId(0), RequestId(1)));
        assert_eq!(
            (a0, a1, a2, a3),
            (AttemptId(0), AttemptId(1), AttemptId(2), AttemptId(3))
        );

        let h = c.clone_structured_history();
        assert_eq!(h.requests.len(), 2);
        let first = &h.requests[0];
        let nodes: Vec<_> = first
            .non_speculative_fiber
            .attempts
            .iter()
            .map(|a| a.node_addr)
            .collect();
        assert_eq!(nodes, [addr(1), addr(4)]);
        assert!(matches!(
            first.non_speculative_fiber.attempts[0].result,
            Some(AttemptResult::Error(
                _,
                RequestAttemptError::UnableToAllocStreamId,
                RetryDecision::RetryNextTarget(None)
            ))
        ));
        assert_eq!(first.non_speculative_fiber.attempts[1].result, None);
        assert_eq!(first.speculative_fibers.len(), 1);
        assert_eq!(first.speculative_fibers[0].attempts[0].node_addr, addr(2));
        assert!(matches!(
            first.speculative_fibers[0].attempts[0].result,
            Some(AttemptResult::Success(_))
        ));
        assert!(matches!(
            first.result,
            Some(RequestHistoryResult::Success(_))
        ));
        let second = &h.requests[1];
        assert!(matches!(
            second.non_speculative_fiber.attempts[0].result,
            Some(AttemptResult::Success(_))
        ));
        assert_eq!(second.result, None);

        let text = h.to_string();
        assert!(text.starts_with("2 request(s)\n"), "{text}");
        assert!(text.contains("speculative fiber 0"), "{text}");
        assert!(text.contains("attempt 1 to 127.0.0.1:4"), "{text}");
        assert!(
            text.contains("retry decision: RetryNextTarget(None)"),
            "{text}"
        );
        assert!(text.contains("not finished"), "{text}");
    }

    #[test]
    fn taking_empties_but_ids_keep_counting() {
        let c = HistoryCollector::new();
        let r = c.log_request_start();
        c.log_request_success(r);
        assert_eq!(c.take_structured_history().requests.len(), 1);
        assert!(c.clone_collected().events().is_empty());
        assert_eq!(c.log_request_start(), RequestId(1));
        assert_eq!(c.clone_structured_history().requests.len(), 1);
    }
}
