//! What a user runs: unprepared [`Statement`]s, [`PreparedStatement`]s and
//! [`Batch`]es, each with its [`StatementOptions`].

mod batch;
pub(crate) mod partition_key;
pub(crate) mod prepared;
pub mod profile;

use std::time::Duration;

pub use scylla_cql::frame::request::BatchType;
pub use scylla_cql::Consistency;

pub use self::batch::{Batch, BatchStatement};
pub use self::prepared::PreparedStatement;
pub use self::profile::{ExecutionProfile, ExecutionProfileHandle};

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
