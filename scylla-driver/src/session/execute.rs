//! Running one request along its plan.
//!
//! The cluster state is loaded once; the routing table yields targets lazily
//! (replicas first, local datacenter first), and each attempt takes the
//! connection of the target's shard from that node's pool. What happens after
//! a failed attempt is the retry policy's decision; an UNPREPARED answer is
//! handled here, by preparing the statement again on that connection and
//! retrying it once. With speculative execution (idempotent statements only),
//! a further attempt on the next target starts whenever the current ones have
//! been silent for the configured delay; the first answer wins.
//!
//! The messages themselves, and how each attempt writes them for its
//! connection, are in `message`.

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;
use std::time::{Duration, Instant};

use scylla_cql::frame::request::Prepare;
use scylla_cql::frame::response::error::DbError;
use scylla_cql::frame::response::{ErrorResponse, Response, ResultBody};
use scylla_cql::Consistency;
use scylla_cql::EncodeError;
use tokio_util::either::Either;
use tracing::Instrument;

use super::inner::SwitchFailed;
use super::request::{Answer, RoutingInfo, RunOptions};
use crate::cluster::state::Snapshot;
use crate::cluster::tablets::count_payload;
use crate::connection::{Connection, ConnectionRequestError, RequestOptions, ResponseFrame};
use crate::error::{
    BadQuery, ConnectionPoolError, ExecutionError, PrepareError, RequestAttemptError,
    UnexpectedResponse,
};
use crate::history::{AttemptId, HistoryListener, RequestId, SpeculativeId};
use crate::metrics::{record, Metrics};
use crate::policy::load_balancing::preference;
use crate::policy::retry::{AttemptFailure, RetryContext, RetryDecision};
use crate::policy::speculative::SpeculativeExecution;
use crate::routing::{NodeIdx, RoutingRequest, Tablet, TabletTable};
use scylla_cql::frame::tablets::{
    TabletRoutingInfo, TabletRoutingV2, TABLETS_ROUTING_V1_KEY, TABLETS_ROUTING_V2_KEY,
};
use scylla_cql::frame::CustomPayload;
use std::sync::Arc;

use super::message::{AtConsistency, MessageFor, Reprepare};
use super::policy_plan::{PolicyTargets, Routed, Targets};
use super::reprepare::{self, Outcome, Repreparations, Role};
use super::tablets_v2::{leader_first, tablet_block};
use super::SessionInner;
use crate::policy::steering::{steer, token_aware, Only};

/// A fiber of a request whose statement has a history listener: the
/// request's first chain of attempts, or a speculative one.
#[derive(Clone, Copy)]
struct Fiber<'a> {
    listener: &'a Arc<dyn HistoryListener>,
    request: RequestId,
    speculative: Option<SpeculativeId>,
}

impl Fiber<'_> {
    /// Tells the listener of an attempt on `node`.
    fn attempt(&self, node: SocketAddr) -> AttemptId {
        self.listener
            .log_attempt_start(self.request, self.speculative, node)
    }
}

/// Tells a fiber's listener how its attempt `attempt` failed and what was
/// decided.
fn log_attempt_error(
    fiber: Option<&Fiber<'_>>,
    attempt: usize,
    error: &RequestAttemptError,
    decision: &RetryDecision,
) {
    if let Some(f) = fiber {
        f.listener
            .log_attempt_error(AttemptId(attempt), error, decision);
    }
}

/// A successful attempt: the answer, and when. The times stay here (the
/// request's latency is recorded from them before the answer is handed
/// on), so the answer the caller's future keeps is smaller.
struct Timed<'s> {
    answer: Answer<'s>,
    /// When the answering attempt started.
    attempt_started: Instant,
    /// From then until the answer arrived (the attempt's last clock
    /// reading). Computed once, for the node's latency average and, when
    /// the attempt started with the request, the request's latency.
    attempt_latency: Duration,
}

impl Timed<'_> {
    /// The request's latency, for a request that started at `started`.
    fn latency_since(&self, started: Instant) -> Duration {
        if self.attempt_started == started {
            self.attempt_latency
        } else {
            (self.attempt_started + self.attempt_latency).saturating_duration_since(started)
        }
    }
}

/// Runs a request along its plan, in a `request` span. A plain function
/// returning the request's future, so that the future does not also hold
/// room for this function's own copy of the arguments.
pub(crate) fn run<'a, 's: 'a>(
    inner: &'a SessionInner,
    state: &'s Snapshot,
    routing: &'a RoutingInfo<'a>,
    msg: &'a dyn MessageFor,
    opts: &'a RunOptions<'a>,
) -> impl Future<Output = Result<Answer<'s>, ExecutionError>> + Send + 'a {
    let span = tracing::debug_span!("request", token = ?routing.token, lwt = routing.lwt);
    let request = run_in_span(inner, state, routing, msg, opts);
    // Without a subscriber interested in the span (and without tracing's
    // `log` feature, which logs even a disabled span's entries) the span is
    // none: the request's future then goes without the wrapper that would
    // enter it at each poll and at its drop, doing nothing.
    if span.is_none() {
        Either::Left(request)
    } else {
        Either::Right(request.instrument(span))
    }
}

async fn run_in_span<'s>(
    inner: &SessionInner,
    state: &'s Snapshot,
    routing: &RoutingInfo<'_>,
    msg: &dyn MessageFor,
    opts: &RunOptions<'_>,
) -> Result<Answer<'s>, ExecutionError> {
    Metrics::inc(&inner.metrics.requests);
    let _in_flight = record::InFlight::enter();
    // The one check a request without a history listener pays. Boxed: a
    // pointer in this future (which every request moves into place), not
    // the fiber itself.
    let fiber = opts.history.map(|listener| {
        Box::new(Fiber {
            listener,
            request: listener.log_request_start(),
            speculative: None,
        })
    });
    let started = Instant::now();
    // In a block: `own` is not kept in this future beside `deadline`.
    let deadline = {
        let own = started + opts.timeout;
        opts.deadline.map_or(own, |d| d.min(own))
    };
    // Backpressure: one permit for the whole request (every attempt),
    // released when this future ends or is dropped.
    let _permit = match inner.limiter.acquire(deadline, opts.timeout).await {
        Ok(p) => p,
        Err(e) => {
            Metrics::inc(&inner.metrics.request_errors);
            record::request_finished(false, started.elapsed());
            if let Some(f) = &fiber {
                f.listener.log_request_error(f.request, &e);
            }
            return Err(e);
        }
    };
    let is_up = |idx: NodeIdx| state.node(idx).is_some_and(|n| n.pool.is_connected());
    // A tablet table routes by its tablet: the tablet's replicas with their
    // shards when the tablet is known; otherwise any node, local datacenter
    // first (the ring's replicas mean nothing there), and the answer's
    // payload teaches the tablet. (Unless a load-balancing policy turns
    // token awareness off.)
    let tablets = routing
        .tablets
        .filter(|t| t.uses_tablets() && token_aware(opts.load_balancing))
        .map(|t| t.snapshot());
    // A user's load-balancing policy gives the plan itself. Boxed: its
    // room is not in every request's future.
    let by_policy = opts
        .load_balancing
        .filter(|p| preference(&***p).is_none())
        .map(|policy| {
            Box::new(PolicyTargets::new(
                &**policy,
                inner
                    .policy_cluster
                    .get(state, || inner.state(), &inner.cluster.tablets),
                state,
                (opts.consistency, opts.serial_consistency),
                routing.token,
                routing.tablets.map(TabletTable::table_spec),
                routing.lwt,
            ))
        });
    let routed;
    let targets: &dyn Targets = match &by_policy {
        Some(targets) => &**targets,
        None => {
            // In a block: the routing request is not kept in this future.
            let (plan, only) = {
                let mut request = RoutingRequest {
                    keyspace: routing.keyspace,
                    token: routing.token,
                    lwt: routing.lwt,
                    local_dc: state.local_dc,
                    seed: next_seed(),
                };
                let mut local_rack = state.local_rack;
                // A load-balancing policy, if any, changes the request's
                // preferences and restricts its targets; without one, this is one
                // branch.
                let only = match opts.load_balancing.and_then(|p| preference(&**p)) {
                    None => Only::Any,
                    Some(pref) => steer(pref, state, &mut request, &mut local_rack),
                };
                let plan = match (&tablets, routing.token) {
                    (Some(snapshot), Some(token)) => match snapshot.lookup(state.layout, token) {
                        Some(replicas) => {
                            let request = leader_first(request, routing.tablets);
                            state.routing.plan_tablet(&request, replicas, &is_up)
                        }
                        None => state.routing.plan(
                            &RoutingRequest {
                                keyspace: None,
                                ..request
                            },
                            &is_up,
                        ),
                    },
                    _ => state.routing.plan(&request, &is_up),
                };
                // Replicas in the local rack first; the less loaded, faster of two
                // first (attempts record their load in `state.loads`, see below).
                let loads: &[_] = match inner.config.latency_aware_routing {
                    true => &state.loads,
                    false => &[],
                };
                (plan.with_local_rack(local_rack).with_loads(loads), only)
            };
            // The restriction sits with the plan, so that the attempts hold one
            // reference, as without policies.
            routed = Routed(Mutex::new((plan, only)));
            &routed
        }
    };

    let result = match opts.speculative {
        Some(spec) if opts.idempotent && spec.max_attempts > 1 => {
            speculate(
                inner,
                state,
                routing,
                msg,
                *opts,
                deadline,
                targets,
                (spec, fiber.as_deref()),
            )
            .await
        }
        _ => {
            attempt_chain(
                inner,
                state,
                routing,
                msg,
                opts,
                (started, deadline),
                targets,
                fiber.as_deref(),
            )
            .await
        }
    };
    let latency = match &result {
        Ok(answer) => answer.latency_since(started),
        Err(_) => started.elapsed(),
    };
    inner.metrics.latency.record(latency);
    record::request_finished(result.is_ok(), latency);
    if let Err(e) = &result {
        tracing::debug!(error = %e, "request failed");
        Metrics::inc(&inner.metrics.request_errors);
    }
    if let Some(f) = &fiber {
        match &result {
            Ok(_) => f.listener.log_request_success(f.request),
            Err(e) => f.listener.log_request_error(f.request, e),
        }
    }
    result.map(|timed| timed.answer)
}

/// The seed of a request's plan (its rotation and tie-breaks): a counter
/// per thread, from a random start. Per thread, not per session, so that
/// the runtime's workers do not pass one cache line between them on every
/// request; each thread's requests still take consecutive turns.
fn next_seed() -> u64 {
    thread_local!(static SEED: Cell<u64> = Cell::new(fastrand::u64(..)));
    SEED.with(|s| {
        let seed = s.get();
        s.set(seed.wrapping_add(1));
        seed
    })
}

/// Speculative execution: up to `max_attempts` attempt chains, a new one each
/// delay (fixed, or the latency percentile of the schedule) while none has
/// answered; the first result wins (the others are
/// dropped, their stream ids orphaned until their late responses).
#[allow(clippy::too_many_arguments)]
async fn speculate<'s>(
    inner: &SessionInner,
    state: &'s Snapshot,
    routing: &RoutingInfo<'_>,
    msg: &dyn MessageFor,
    opts: RunOptions<'_>,
    deadline: Instant,
    targets: &dyn Targets,
    (spec, fiber): (SpeculativeExecution, Option<&Fiber<'_>>),
) -> Result<Timed<'s>, ExecutionError> {
    type Attempt<'a, 's> =
        Pin<Box<dyn Future<Output = Result<Timed<'s>, ExecutionError>> + Send + 'a>>;
    let mut running: Vec<Attempt<'_, 's>> = Vec::with_capacity(spec.max_attempts);
    running.push(Box::pin(attempt_chain(
        inner,
        state,
        routing,
        msg,
        &opts,
        (Instant::now(), deadline),
        targets,
        fiber,
    )));
    // Fixed, or the session's latency at a percentile, read once now.
    let delay = spec.delay_with(&inner.metrics.latency);
    let mut next_start = Instant::now() + delay;
    let mut timer = Box::pin(tokio::time::sleep_until(next_start.into()));
    loop {
        let polled = std::future::poll_fn(|cx| {
            let mut i = 0;
            while i < running.len() {
                if let Poll::Ready(r) = running[i].as_mut().poll(cx) {
                    // Finished: drop it.
                    drop(running.swap_remove(i));
                    return Poll::Ready(Some(r));
                }
                i += 1;
            }
            if running.len() < spec.max_attempts && timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await;
        match polled {
            Some(Ok(answer)) => return Ok(answer),
            Some(Err(e)) => {
                // The last attempt standing decides; earlier failures are
                // superseded by the attempts still running.
                if running.is_empty() {
                    return Err(e);
                }
            }
            None => {
                Metrics::inc(&inner.metrics.speculative_attempts);
                record::speculative_attempt();
                let fiber = fiber.map(|f| Fiber {
                    speculative: Some(f.listener.log_new_speculative_fiber(f.request)),
                    ..*f
                });
                running.push(Box::pin(speculative_chain(
                    inner,
                    state,
                    routing,
                    msg,
                    &opts,
                    (Instant::now(), deadline),
                    targets,
                    fiber,
                )));
                next_start += delay;
                timer.as_mut().reset(next_start.into());
            }
        }
    }
}

/// A speculative fiber's [`attempt_chain`], which holds the fiber (boxed
/// with it by [`speculate`]).
#[allow(clippy::too_many_arguments)]
async fn speculative_chain<'s>(
    inner: &SessionInner,
    state: &'s Snapshot,
    routing: &RoutingInfo<'_>,
    msg: &dyn MessageFor,
    opts: &RunOptions<'_>,
    times: (Instant, Instant),
    targets: &dyn Targets,
    fiber: Option<Fiber<'_>>,
) -> Result<Timed<'s>, ExecutionError> {
    attempt_chain(
        inner,
        state,
        routing,
        msg,
        opts,
        times,
        targets,
        fiber.as_ref(),
    )
    .await
}

/// Attempts along the plan until one succeeds or the retry policy gives up.
#[allow(clippy::too_many_arguments)]
async fn attempt_chain<'s>(
    inner: &SessionInner,
    state: &'s Snapshot,
    routing: &RoutingInfo<'_>,
    msg: &dyn MessageFor,
    opts: &RunOptions<'_>,
    (started, deadline): (Instant, Instant),
    targets: &dyn Targets,
    fiber: Option<&Fiber<'_>>,
) -> Result<Timed<'s>, ExecutionError> {
    // The first attempt starts at the clock reading the caller took.
    let mut first_now = Some(started);
    let mut consistency = opts.consistency;
    let mut retries = 0u32;
    // The latest failure, the request's error when the plan ends: an
    // attempt's (the retry policy went on) or a node's without connection.
    // Boxed: it lives across every await of the chain, and only failures
    // allocate it.
    let mut last: Option<Box<ExecutionError>> = None;
    let mut target = targets.next();
    while let Some(t) = target {
        let Some(node) = state.node(t.node) else {
            target = targets.next();
            continue;
        };
        let conn = match t.shard {
            Some(shard) => node.pool.connection_for(Some(shard)),
            None => node.pool.connection_for_token(routing.token),
        };
        let Some(conn) = conn else {
            tracing::debug!(node = %node.address, "no open connection to the node; next target");
            last = Some(Box::new(ExecutionError::ConnectionPoolError(
                ConnectionPoolError::from_last(node.pool.last_error()),
            )));
            target = targets.next();
            continue;
        };
        let now = match first_now.take() {
            Some(t) => t,
            None => Instant::now(),
        };
        if now >= deadline {
            return Err(ExecutionError::RequestTimeout(opts.timeout));
        }
        // The attempt's id when the fiber is told of attempts (a plain
        // word: this lives across the attempt's await).
        let attempt_id = fiber.map_or(0, |f| f.attempt(node.address).0);
        // The node's requests in flight and latency average, for plans.
        let load = state.loads.get(t.node.index()).map(|l| l.start(now));
        // In a block: the outcome's room in this future ends with it, and
        // is not kept (unused) through a backoff's sleep below.
        let (decision, error) = {
            // The keyspace switch, the attempt, and a re-preparation within it
            // all share the request's deadline.
            let outcome = match inner.keyspace_switch(&conn) {
                None => {
                    let block = tablet_block(&conn, routing.tablets, routing.token);
                    attempt(
                        &inner.repreparations,
                        &conn,
                        msg,
                        (consistency, block),
                        now,
                        deadline,
                        opts.tracing,
                    )
                    .await
                }
                // Rare (a connection's first request after a keyspace change):
                // boxed, so that every request's future does not carry the
                // state of a `USE` round trip.
                Some(want) => {
                    Box::pin(switch_then_attempt(
                        inner,
                        &conn,
                        want,
                        (
                            msg,
                            (
                                consistency,
                                tablet_block(&conn, routing.tablets, routing.token),
                            ),
                        ),
                        (now, deadline),
                        opts.tracing,
                    ))
                    .await
                }
            };
            // One clock reading ends the attempt: its latency (when the node
            // answered or timed out) and, on success, the request's.
            let finished = Instant::now();
            let attempt_latency = finished.saturating_duration_since(now);
            if let Some(load) = load {
                match &outcome {
                    // A DDL statement's answer waits for the node's schema
                    // update: it says nothing about its request latency.
                    Ok(frame)
                        if matches!(
                            frame.response,
                            Response::Result(ResultBody::SchemaChange(_))
                        ) =>
                    {
                        load.discard()
                    }
                    Ok(_) | Err(Failed::Request(ConnectionRequestError::Timeout(_))) => {
                        load.finish(attempt_latency, finished)
                    }
                    Err(_) => load.discard(),
                }
            }
            let ctx = RetryContext {
                idempotent: opts.idempotent,
                retries,
                consistency,
            };
            let feedback = opts.load_balancing.is_some();
            // An answer (not an ERROR) ends the request. Handled here, not
            // in `judge`: the response, 128 bytes, moves straight into the
            // answer rather than through one more enum on the hot path.
            let failure = match outcome {
                Ok(frame) => match frame.response {
                    Response::Error(e) => Failure::Server(e),
                    _ => {
                        if let Some(payload) = frame.custom_payload() {
                            learn_tablet(inner, routing, payload);
                        }
                        if let Some(f) = fiber {
                            f.listener.log_attempt_success(AttemptId(attempt_id));
                        }
                        if feedback {
                            targets.attempt_finished(t.node, attempt_latency, None);
                        }
                        return Ok(Timed {
                            answer: Answer {
                                frame,
                                node,
                                shard: conn.shard(),
                            },
                            attempt_started: now,
                            attempt_latency,
                        });
                    }
                },
                Err(Failed::Request(e)) => Failure::Connection(e),
                Err(Failed::Fatal(e)) => return Err(e),
            };
            match judge(opts, &ctx, failure, finished >= deadline) {
                Verdict::DeadlinePassed(error) => {
                    tracing::debug!(node = %node.address, error = %error, "attempt failed");
                    log_attempt_error(fiber, attempt_id, &error, &RetryDecision::Fail);
                    if feedback {
                        targets.attempt_finished(t.node, attempt_latency, Some(&error));
                    }
                    return Err(ExecutionError::RequestTimeout(opts.timeout));
                }
                Verdict::Failed(decision, error) => {
                    tracing::debug!(node = %node.address, error = %error, "attempt failed");
                    if feedback {
                        targets.attempt_finished(t.node, attempt_latency, Some(&error));
                    }
                    (decision, error)
                }
            }
        };
        log_attempt_error(fiber, attempt_id, &error, &decision);
        let (retry_at, next, delay) = match decision {
            RetryDecision::Fail => return Err(ExecutionError::last_attempt(error, opts.timeout)),
            RetryDecision::RetrySameTarget(c) => (c, false, None),
            RetryDecision::RetryNextTarget(c) => (c, true, None),
            RetryDecision::RetryNextTargetAfter(c, d) => (c, true, Some(d)),
        };
        if let Some(delay) = delay {
            // Backoff from an overloaded node, within the deadline: a delay
            // that would pass it is not taken.
            if Instant::now() + delay >= deadline {
                return Err(ExecutionError::last_attempt(error, opts.timeout));
            }
            tracing::debug!(node = %node.address, ?delay, "backing off before the next target");
            tokio::time::sleep(delay).await;
        }
        consistency = retry_at.unwrap_or(consistency);
        Metrics::inc(&inner.metrics.retries);
        record::retry();
        retries += 1;
        last = Some(Box::new(ExecutionError::last_attempt(error, opts.timeout)));
        if next {
            target = targets.next();
        }
    }
    // The plan is exhausted: its last failure is the request's.
    Err(match last {
        Some(e) => *e,
        None => empty_plan(state, opts),
    })
}

/// What a failed attempt means for the request.
enum Verdict {
    /// The attempt failed; the retry policy decided what comes next.
    Failed(RetryDecision, RequestAttemptError),
    /// The attempt timed out at the request's deadline: the request times
    /// out.
    DeadlinePassed(RequestAttemptError),
}

/// How an attempt failed: the node answered with an ERROR, or the connection
/// failed the request.
enum Failure {
    Server(ErrorResponse),
    Connection(ConnectionRequestError),
}

/// Judges a failed attempt (`past_deadline`: it ended at or after the
/// request's deadline): the retry policy's decision, or the request's end.
fn judge(
    opts: &RunOptions<'_>,
    ctx: &RetryContext,
    failure: Failure,
    past_deadline: bool,
) -> Verdict {
    match failure {
        Failure::Server(e) => {
            let decision = opts
                .retry_policy
                .decide(AttemptFailure::Server(&e.error), ctx);
            Verdict::Failed(decision, RequestAttemptError::DbError(e.error, e.message))
        }
        Failure::Connection(e) => {
            if matches!(e, ConnectionRequestError::Timeout(_)) && past_deadline {
                return Verdict::DeadlinePassed(RequestAttemptError::from(e));
            }
            let decision = opts
                .retry_policy
                .decide(AttemptFailure::Connection(&e), ctx);
            Verdict::Failed(decision, RequestAttemptError::from(e))
        }
    }
}

/// The error of a plan that held no node: a policy's plan that was empty
/// is [`ExecutionError::EmptyPlan`]; the default plan leaves out only nodes
/// that are down, so when it is empty the cluster is unreachable, a pool
/// error (the first that knows how its last connection attempt failed).
fn empty_plan(state: &Snapshot, opts: &RunOptions<'_>) -> ExecutionError {
    if opts.load_balancing.is_some() || state.nodes.is_empty() {
        return ExecutionError::EmptyPlan;
    }
    let last = state.nodes.iter().find_map(|n| n.pool.last_error());
    ExecutionError::ConnectionPoolError(ConnectionPoolError::from_last(last))
}

/// Learns the tablet of a `tablets-routing-v1` payload (the request was
/// misrouted) for the statement's table. A malformed payload is logged and
/// ignored; a replica on a host the cluster state does not know starts a
/// topology refresh.
fn learn_tablet(inner: &SessionInner, routing: &RoutingInfo<'_>, payload: &CustomPayload) {
    // A v2 payload (the request's tablet version was stale) also carries the
    // tablet's version; its replicas come in the payload's order (the
    // leader first on a strongly consistent table).
    let decoded = if let Some(value) = payload.get(TABLETS_ROUTING_V2_KEY) {
        TabletRoutingV2::decode_entry(value.as_deref()).map(|info| Tablet {
            first_token: info.routing.first_token,
            last_token: info.routing.last_token,
            replicas: info.routing.replicas,
            version: Some(info.version),
        })
    } else if let Some(value) = payload.get(TABLETS_ROUTING_V1_KEY) {
        TabletRoutingInfo::decode_entry(value.as_deref()).map(|info| Tablet {
            first_token: info.first_token,
            last_token: info.last_token,
            replicas: info.replicas,
            version: None,
        })
    } else {
        return;
    };
    count_payload(&inner.metrics);
    let tablet = match decoded {
        Ok(tablet) => {
            record::tablet_misroute(true);
            tablet
        }
        Err(e) => {
            Metrics::inc(&inner.metrics.tablet_payload_errors);
            record::tablet_misroute(false);
            tracing::warn!(error = %e, "ignoring a malformed tablet routing payload");
            return;
        }
    };
    let Some(slot) = &routing.tablets else {
        tracing::debug!("tablet routing payload for a statement without a known table; ignored");
        return;
    };
    let tablets = &inner.cluster.tablets;
    let learned = tablets.learn(slot, tablet);
    if learned.unknown_host {
        tablets.refresh_for_unknown_host(&inner.cluster.control);
    }
}

/// Switches `conn` to keyspace `want`, then makes the attempt; both within
/// `deadline`.
async fn switch_then_attempt(
    inner: &SessionInner,
    conn: &Connection,
    want: Arc<String>,
    (msg, at): (&dyn MessageFor, (Consistency, Option<u8>)),
    (now, deadline): (Instant, Instant),
    tracing: bool,
) -> Result<ResponseFrame, Failed> {
    match inner.switch_keyspace(conn, want, deadline).await {
        Ok(()) => attempt(&inner.repreparations, conn, msg, at, now, deadline, tracing).await,
        Err(SwitchFailed::Connection(e)) => Err(Failed::Request(e)),
        Err(SwitchFailed::Refused(e)) => Err(Failed::Fatal(ExecutionError::UseKeyspaceError(e))),
    }
}

/// How [`attempt`] failed: on its connection (the retry policy decides), or
/// for good.
enum Failed {
    Request(ConnectionRequestError),
    Fatal(ExecutionError),
}

/// Options of a request that must end by `deadline`.
fn until(deadline: Instant, tracing: bool) -> RequestOptions<'static> {
    RequestOptions {
        deadline: Some(deadline),
        tracing,
        ..RequestOptions::default()
    }
}

/// One attempt on one connection at a consistency (with the tablet version
/// block of a v2 connection), preparing again once on UNPREPARED; every
/// request it sends ends by `deadline` (the request's, shared with the other
/// attempts).
async fn attempt(
    repreparations: &Repreparations,
    conn: &Connection,
    msg: &dyn MessageFor,
    (consistency, tablet_block): (Consistency, Option<u8>),
    now: Instant,
    deadline: Instant,
    tracing: bool,
) -> Result<ResponseFrame, Failed> {
    let opts = until(deadline, tracing);
    let body = AtConsistency {
        msg,
        consistency,
        metadata_id: conn.info().server.response_context.has_metadata_id(),
        tablet_block,
    };
    // In a block: the UNPREPARED answer is not kept in this future while
    // the statement is prepared again.
    let again = {
        let frame = conn
            .request_at(&body, &opts, now)
            .await
            .map_err(request_error)?;
        let Response::Error(e) = &frame.response else {
            return Ok(frame);
        };
        let DbError::Unprepared { statement_id } = &e.error else {
            return Ok(frame);
        };
        let Some(again) = msg.reprepare(statement_id) else {
            return Ok(frame);
        };
        (again, statement_id.clone())
    };
    // Boxed: the re-preparation is rare, and inline its futures would
    // make every attempt's future larger (it is moved at each await layer).
    Box::pin(reprepare_and_retry(
        repreparations,
        conn,
        again,
        &body,
        (now, deadline),
        tracing,
    ))
    .await
}

/// The node did not know the statement: prepares it there again (within the
/// request's deadline, untraced; once for all the session's requests that
/// met UNPREPARED for it there meanwhile, see [`super::reprepare`]) and
/// sends the request once more. `sent`: when the request that met
/// UNPREPARED was sent (a PREPARE answered since makes its answer stale).
async fn reprepare_and_retry(
    repreparations: &Repreparations,
    conn: &Connection,
    (again, id): (Reprepare<'_>, bytes::Bytes),
    body: &AtConsistency<'_>,
    (sent, deadline): (Instant, Instant),
    tracing: bool,
) -> Result<ResponseFrame, Failed> {
    let node = conn.info().peer;
    let timed_out = || {
        let left = deadline.saturating_duration_since(Instant::now());
        Failed::Request(ConnectionRequestError::Timeout(left))
    };
    let opts = until(deadline, tracing);
    let mut sent = sent;
    // At most twice: a stale UNPREPARED is sent again as is; if that meets
    // UNPREPARED too, the node forgot the statement again since, and it is
    // prepared (or waited for) from that send on.
    for round in 0..2 {
        let prepared_by_another = match repreparations.join(node, &id, sent) {
            Role::PreparedSince => {
                let now = Instant::now();
                let frame = conn
                    .request_at(body, &opts, now)
                    .await
                    .map_err(request_error)?;
                let unprepared = matches!(&frame.response, Response::Error(e)
                    if matches!(&e.error, DbError::Unprepared { statement_id } if *statement_id == id));
                if unprepared && round == 0 {
                    sent = now;
                    continue;
                }
                return Ok(frame);
            }
            Role::Follower(rx) => {
                tokio::time::timeout_at(deadline.into(), reprepare::outcome(rx))
                    .await
                    .map_err(|_| timed_out())?
                    == Some(Outcome::Prepared)
            }
            Role::Leader(leader) => {
                let _permit = tokio::time::timeout_at(deadline.into(), leader.permit())
                    .await
                    .map_err(|_| timed_out())?;
                let prepared = prepare_again(conn, &again, deadline).await;
                leader.finish(if prepared.is_ok() {
                    Outcome::Prepared
                } else {
                    Outcome::Failed
                });
                prepared?;
                true
            }
        };
        if !prepared_by_another {
            // The request that prepared it failed, or went away: prepare it
            // here for this request.
            prepare_again(conn, &again, deadline).await?;
        }
        break;
    }
    let now = Instant::now();
    conn.request_at(body, &opts, now)
        .await
        .map_err(request_error)
}

/// Sends the PREPARE of a statement a node forgot (untraced, within the
/// request's deadline).
async fn prepare_again(
    conn: &Connection,
    again: &Reprepare<'_>,
    deadline: Instant,
) -> Result<(), Failed> {
    tracing::debug!(peer = %conn.info().peer, "statement unknown to the node; preparing it again");
    crate::metrics::record::reprepared();
    let prepare = Prepare {
        query: again.text.into(),
        keyspace: super::prepare::keyspace_for(conn.protocol_version(), again.keyspace),
    };
    let now = Instant::now();
    // The re-preparation is not the user's statement: it is not traced.
    let untraced = until(deadline, false);
    let prepared = conn
        .request_at(&prepare, &untraced, now)
        .await
        .map_err(request_error)?;
    match prepared.response {
        Response::Result(ResultBody::Prepared(_)) => {}
        Response::Error(e) => {
            return Err(Failed::Fatal(ExecutionError::from(
                PrepareError::AllAttemptsFailed {
                    first_attempt: RequestAttemptError::DbError(e.error, e.message),
                },
            )))
        }
        other => {
            return Err(Failed::Fatal(ExecutionError::LastAttemptError(
                RequestAttemptError::UnexpectedResponse(UnexpectedResponse::new(
                    conn.info().peer,
                    "PREPARE",
                    crate::connection::handshake::response_name(&other),
                )),
            )))
        }
    }
    Ok(())
}

/// A request that cannot be written for its connection (a v5-only option on
/// v4, say) fails the same way everywhere: no retry, a client-side error.
fn request_error(e: ConnectionRequestError) -> Failed {
    match e {
        ConnectionRequestError::Encode(EncodeError::Invalid(why)) => {
            Failed::Fatal(ExecutionError::BadQuery(BadQuery::Unsupported(why)))
        }
        e => Failed::Request(e),
    }
}
