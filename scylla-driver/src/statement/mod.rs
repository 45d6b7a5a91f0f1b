//! What a user runs: unprepared [`Statement`]s, [`PreparedStatement`]s and
//! [`Batch`]es, each with its [`StatementOptions`].

pub mod batch;
pub mod prepared;
pub mod profile;

use std::time::Duration;

pub use scylla_cql::frame::request::BatchType;
pub use scylla_cql::{Consistency, NotSerialConsistency, SerialConsistency};

pub use self::batch::{Batch, BatchStatement};
pub use self::prepared::PreparedStatement;
pub use self::profile::{ExecutionProfile, ExecutionProfileBuilder, ExecutionProfileHandle};
pub use crate::handle::Handle;

/// The unprepared [`Statement`] (the official `scylla` crate's path).
pub mod unprepared {
    pub use super::Statement;
}

/// Options of one statement; unset fields take the session's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatementOptions {
    /// Consistency level.
    pub consistency: Option<Consistency>,
    /// Serial consistency (for lightweight transactions).
    pub serial_consistency: Option<Consistency>,
    /// Client-side write timestamp, in microseconds since the epoch.
    pub timestamp: Option<i64>,
    /// Rows per page for paged execution.
    pub page_size: Option<i32>,
    /// Whether running the statement twice has the same effect as once. Only
    /// idempotent statements are retried after they may have reached a node,
    /// or executed speculatively.
    pub idempotent: bool,
    /// Overall timeout of a request (all its attempts).
    pub timeout: Option<Duration>,
    /// Ask the server to trace the request (see `with_tracing`).
    pub tracing: bool,
    /// The time the server should run the statement at ("now", seconds
    /// since the epoch: TTL expiry and deletion times), for tests. Protocol
    /// v5 only: on a v4 connection the request fails with
    /// [`ExecutionError::BadQuery`](crate::ExecutionError::BadQuery).
    pub now_in_seconds: Option<i32>,
    /// The execution profile whose settings fill the options left unset
    /// here (see [`profile`] for the precedence).
    pub profile: Option<ExecutionProfileHandle>,
    /// The load-balancing policy, over the profile's (see
    /// [`policy::load_balancing`](crate::policy::load_balancing)); `None`:
    /// the profile's, else the session's routing.
    pub load_balancing: Option<crate::policy::load_balancing::PolicyHandle>,
    /// The listener told of this statement's requests, their attempts and
    /// speculative fibers (see [`observability::history`](crate::observability::history)).
    pub history_listener: Option<crate::history::HistoryListenerHandle>,
    /// The retry policy, over the profile's (see
    /// [`policy::retry`](crate::policy::retry)); `None`: the profile's, else
    /// the session's.
    pub retry_policy: Option<crate::policy::retry::RetryPolicyHandle>,
}

/// An unprepared CQL statement.
///
/// ```
/// use scylla_driver::statement::{Consistency, Statement};
/// let s = Statement::new("SELECT * FROM ks.t")
///     .with_consistency(Consistency::One)
///     .with_page_size(500);
/// assert_eq!(s.options.page_size, Some(500));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// The CQL text.
    pub contents: String,
    /// Its options.
    pub options: StatementOptions,
}

macro_rules! option_setters {
    () => {
        /// Sets the consistency level.
        #[must_use]
        pub fn with_consistency(mut self, c: Consistency) -> Self {
            self.options.consistency = Some(c);
            self
        }

        /// Sets the serial consistency level.
        #[must_use]
        pub fn with_serial_consistency(mut self, c: Consistency) -> Self {
            self.options.serial_consistency = Some(c);
            self
        }

        /// Sets the client-side timestamp (microseconds).
        #[must_use]
        pub fn with_timestamp(mut self, micros: i64) -> Self {
            self.options.timestamp = Some(micros);
            self
        }

        /// Sets the page size.
        #[must_use]
        pub fn with_page_size(mut self, rows: i32) -> Self {
            self.options.page_size = Some(rows);
            self
        }

        /// Marks the statement idempotent (or not).
        #[must_use]
        pub fn with_idempotent(mut self, idempotent: bool) -> Self {
            self.options.idempotent = idempotent;
            self
        }

        /// Sets the request timeout.
        #[must_use]
        pub fn with_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.options.timeout = Some(timeout);
            self
        }

        /// Turns tracing on or off: the server records what it does with
        /// a traced request, the result carries the trace's id
        /// ([`QueryResult::tracing_id`](crate::QueryResult::tracing_id)),
        /// and [`Session::get_tracing_info`](crate::Session::get_tracing_info)
        /// fetches the trace. Tracing costs the server writes: trace a few
        /// requests, not a workload.
        #[must_use]
        pub fn with_tracing(mut self, tracing: bool) -> Self {
            self.options.tracing = tracing;
            self
        }

        /// Runs with `profile`'s settings where this statement sets none
        /// (see [`profile`](crate::statement::profile) for the precedence).
        #[must_use]
        pub fn with_execution_profile(
            mut self,
            profile: crate::statement::ExecutionProfileHandle,
        ) -> Self {
            self.options.profile = Some(profile);
            self
        }

        /// Sets (or clears) the time the server runs the statement at, in
        /// seconds since the epoch (protocol v5 only; see
        /// [`StatementOptions::now_in_seconds`](crate::statement::StatementOptions::now_in_seconds)).
        pub fn set_now_in_seconds(&mut self, now: Option<i32>) {
            self.options.now_in_seconds = now;
        }

        /// Sets the consistency level (in place).
        pub fn set_consistency(&mut self, c: Consistency) {
            self.options.consistency = Some(c);
        }

        /// The consistency level, if set here.
        pub fn get_consistency(&self) -> Option<Consistency> {
            self.options.consistency
        }

        /// Sets (or clears) the serial consistency level (in place).
        pub fn set_serial_consistency(&mut self, c: Option<crate::statement::SerialConsistency>) {
            self.options.serial_consistency = c.map(Consistency::from);
        }

        /// The serial consistency level, if set here.
        pub fn get_serial_consistency(&self) -> Option<crate::statement::SerialConsistency> {
            self.options
                .serial_consistency
                .and_then(|c| crate::statement::SerialConsistency::try_from(c).ok())
        }

        /// Sets the page size (in place).
        pub fn set_page_size(&mut self, rows: i32) {
            self.options.page_size = Some(rows);
        }

        /// The page size, if set here.
        pub fn get_page_size(&self) -> Option<i32> {
            self.options.page_size
        }

        /// Marks the statement idempotent or not (in place).
        pub fn set_is_idempotent(&mut self, idempotent: bool) {
            self.options.idempotent = idempotent;
        }

        /// Whether the statement is marked idempotent.
        pub fn get_is_idempotent(&self) -> bool {
            self.options.idempotent
        }

        /// Turns tracing on or off (in place; see `with_tracing`).
        pub fn set_tracing(&mut self, tracing: bool) {
            self.options.tracing = tracing;
        }

        /// Whether the statement asks for tracing.
        pub fn get_tracing(&self) -> bool {
            self.options.tracing
        }

        /// Sets (or clears) the client-side timestamp, in microseconds.
        pub fn set_timestamp(&mut self, micros: Option<i64>) {
            self.options.timestamp = micros;
        }

        /// The client-side timestamp, if set.
        pub fn get_timestamp(&self) -> Option<i64> {
            self.options.timestamp
        }

        /// Sets (or clears) the request timeout.
        pub fn set_request_timeout(&mut self, timeout: Option<std::time::Duration>) {
            self.options.timeout = timeout;
        }

        /// The request timeout, if set here.
        pub fn get_request_timeout(&self) -> Option<std::time::Duration> {
            self.options.timeout
        }

        /// Sets (or clears) the execution profile (in place; see
        /// `with_execution_profile`).
        pub fn set_execution_profile_handle(
            &mut self,
            profile: Option<crate::statement::ExecutionProfileHandle>,
        ) {
            self.options.profile = profile;
        }

        /// Sets (or clears) the load-balancing policy of this statement
        /// (it takes precedence over its execution profile's).
        pub fn set_load_balancing_policy(
            &mut self,
            policy: Option<std::sync::Arc<dyn crate::policy::load_balancing::LoadBalancingPolicy>>,
        ) {
            self.options.load_balancing =
                policy.map(crate::policy::load_balancing::PolicyHandle::new);
        }

        /// The load-balancing policy of this statement, if set.
        pub fn get_load_balancing_policy(
            &self,
        ) -> Option<&std::sync::Arc<dyn crate::policy::load_balancing::LoadBalancingPolicy>> {
            self.options.load_balancing.as_ref().map(|h| h.get())
        }

        /// Sets (or clears) the retry policy of this statement (it takes
        /// precedence over its execution profile's and the session's).
        pub fn set_retry_policy(
            &mut self,
            policy: Option<std::sync::Arc<dyn crate::policy::retry::RetryPolicy>>,
        ) {
            self.options.retry_policy = policy.map(crate::policy::retry::RetryPolicyHandle::new);
        }

        /// The retry policy of this statement, if set.
        pub fn get_retry_policy(
            &self,
        ) -> Option<&std::sync::Arc<dyn crate::policy::retry::RetryPolicy>> {
            self.options.retry_policy.as_ref().map(|h| h.get())
        }

        /// Sets the listener told of this statement's requests: each
        /// request's start and end, and each attempt's node and outcome
        /// (with the retry decision), speculative fibers included (see
        /// [`observability::history`](crate::observability::history)).
        pub fn set_history_listener(
            &mut self,
            listener: std::sync::Arc<dyn crate::history::HistoryListener>,
        ) {
            self.options.history_listener =
                Some(crate::history::HistoryListenerHandle::new(listener));
        }

        /// Removes the history listener, returning it.
        pub fn remove_history_listener(
            &mut self,
        ) -> Option<std::sync::Arc<dyn crate::history::HistoryListener>> {
            self.options
                .history_listener
                .take()
                .map(|h| std::sync::Arc::clone(h.get()))
        }

        /// The execution profile, if set.
        pub fn get_execution_profile_handle(
            &self,
        ) -> Option<&crate::statement::ExecutionProfileHandle> {
            self.options.profile.as_ref()
        }
    };
}
pub(crate) use option_setters;

impl Statement {
    /// A statement with default options.
    pub fn new(contents: impl Into<String>) -> Self {
        Self {
            contents: contents.into(),
            options: StatementOptions::default(),
        }
    }

    option_setters!();
}

impl From<&str> for Statement {
    fn from(s: &str) -> Self {
        Statement::new(s)
    }
}

impl From<String> for Statement {
    fn from(s: String) -> Self {
        Statement::new(s)
    }
}
