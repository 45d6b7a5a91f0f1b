//! The official `scylla` crate's `client` paths, as aliases of this crate's
//! types: [`session::Session`], [`session_builder::SessionBuilder`],
//! [`execution_profile`] (with the official builder,
//! [`ExecutionProfile::builder`](execution_profile::ExecutionProfile::builder))
//! and [`pager`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use scylla_driver::client::session::Session;
//! use scylla_driver::client::session_builder::SessionBuilder;
//!
//! let session: Session = SessionBuilder::new().known_node("127.0.0.1:9042").build().await?;
//! session.query_unpaged("SELECT * FROM system.local", &[]).await?;
//! # Ok(()) }
//! ```

/// [`Session`](session::Session) and its configuration.
pub mod session {
    pub use crate::session::{Session, SessionConfig};

    impl SessionConfig {
        /// The default configuration, without contact points.
        pub fn new() -> Self {
            Self::default()
        }

        /// Adds a contact point (`host:port`, or `host` for port 9042).
        pub fn add_known_node(&mut self, addr: impl Into<String>) {
            self.contact_points.push(addr.into());
        }

        /// Adds contact points.
        pub fn add_known_nodes<S: Into<String>>(&mut self, addrs: impl IntoIterator<Item = S>) {
            self.contact_points
                .extend(addrs.into_iter().map(Into::into));
        }
    }

    impl Session {
        /// Connects with `config` (the same as
        /// [`SessionBuilder::build`](crate::SessionBuilder::build) with that
        /// configuration).
        pub async fn connect(config: SessionConfig) -> Result<Session, crate::NewSessionError> {
            crate::SessionBuilder { config }.build().await
        }
    }
}

/// [`SessionBuilder`](session_builder::SessionBuilder).
pub mod session_builder {
    pub use crate::session::SessionBuilder;
}

/// Execution profiles: named bundles of request settings (see
/// [`statement::profile`](crate::statement::profile)).
pub mod execution_profile {
    use std::sync::Arc;
    use std::time::Duration;

    pub use crate::statement::{ExecutionProfile, ExecutionProfileHandle};

    use crate::policies::speculative_execution::SpeculativeExecutionPolicy;
    use crate::policy::retry::RetryPolicy;
    use crate::statement::{Consistency, SerialConsistency};

    impl ExecutionProfile {
        /// A builder in the official `scylla` crate's style, starting with
        /// every field unset (this crate's own form is
        /// [`ExecutionProfile::new`] with the setters on the profile).
        pub fn builder() -> ExecutionProfileBuilder {
            ExecutionProfileBuilder {
                profile: ExecutionProfile::new(),
            }
        }

        /// A handle to this profile labelled `label` (the same as
        /// [`into_handle`](ExecutionProfile::into_handle), the official
        /// crate's name for it).
        pub fn into_handle_with_label(self, label: String) -> ExecutionProfileHandle {
            self.into_handle(label)
        }

        /// A builder starting from this profile.
        pub fn to_builder(&self) -> ExecutionProfileBuilder {
            ExecutionProfileBuilder {
                profile: self.clone(),
            }
        }
    }

    /// Builds an [`ExecutionProfile`], with the official `scylla` crate's
    /// method signatures.
    ///
    /// ```
    /// use std::time::Duration;
    /// use scylla_driver::client::execution_profile::ExecutionProfile;
    /// use scylla_driver::statement::{Consistency, SerialConsistency};
    ///
    /// let profile = ExecutionProfile::builder()
    ///     .consistency(Consistency::One)
    ///     .serial_consistency(Some(SerialConsistency::LocalSerial))
    ///     .request_timeout(Some(Duration::from_secs(3)))
    ///     .build();
    /// assert_eq!(profile.consistency, Some(Consistency::One));
    /// assert_eq!(profile.serial_consistency, Some(Consistency::LocalSerial));
    /// ```
    #[derive(Debug, Clone)]
    pub struct ExecutionProfileBuilder {
        profile: ExecutionProfile,
    }

    impl ExecutionProfileBuilder {
        /// Sets the consistency level.
        #[must_use]
        pub fn consistency(mut self, c: Consistency) -> Self {
            self.profile.consistency = Some(c);
            self
        }

        /// Sets (or clears) the serial consistency level.
        #[must_use]
        pub fn serial_consistency(mut self, c: Option<SerialConsistency>) -> Self {
            self.profile.serial_consistency = c.map(Consistency::from);
            self
        }

        /// Sets (or clears) the request timeout.
        #[must_use]
        pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
            self.profile.request_timeout = timeout;
            self
        }

        /// Sets the retry policy.
        #[must_use]
        pub fn retry_policy(mut self, p: Arc<dyn RetryPolicy>) -> Self {
            self.profile.retry_policy = Some(p);
            self
        }

        /// Sets speculative execution (`None`: none, even where the
        /// session has it on).
        #[must_use]
        pub fn speculative_execution_policy(
            mut self,
            p: Option<Arc<dyn SpeculativeExecutionPolicy>>,
        ) -> Self {
            self.profile.speculative_execution = Some(match p {
                Some(p) => p.schedule(),
                None => crate::policy::speculative::SpeculativeExecution::new(1, Duration::ZERO),
            });
            self
        }

        /// Sets the page size.
        #[must_use]
        pub fn page_size(mut self, rows: i32) -> Self {
            self.profile.page_size = Some(rows);
            self
        }

        /// The profile.
        pub fn build(self) -> ExecutionProfile {
            self.profile
        }
    }
}

/// Paged results: [`QueryPager`](pager::QueryPager), what
/// [`Session::query_iter`](crate::Session::query_iter) returns before
/// [`rows_stream`](crate::session::RowStream::rows_stream) picks the row
/// type, and [`TypedRowStream`](pager::TypedRowStream).
pub mod pager {
    /// A paged query whose row type is not chosen yet (its rows read as
    /// [`Row`](crate::value::Row)s).
    pub type QueryPager = crate::session::RowStream<crate::value::Row>;
    /// A paged query's rows, as `R`.
    pub type TypedRowStream<R> = crate::session::RowStream<R>;
}
