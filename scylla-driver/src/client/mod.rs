//! The official `scylla` crate's `client` paths, as aliases of this crate's
//! types: [`session::Session`], [`session_builder::SessionBuilder`],
//! [`execution_profile`] (the official builder and unnamed handles, over
//! this crate's profiles), [`pager`], [`client_routes`] and [`SelfIdentity`]
//! (for [`SessionBuilder::custom_identity`](crate::SessionBuilder::custom_identity)).
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

use std::borrow::Cow;

pub use crate::pool::PoolSize;
pub use scylla_cql::compression::Compression;

/// The application's and driver's identity sent in STARTUP, as the official
/// `scylla` crate builds it for
/// [`SessionBuilder::custom_identity`](crate::SessionBuilder::custom_identity).
/// Unset fields leave the session's settings as they are (the driver's own
/// name and version by default, no application name, version or client id);
/// [`SessionBuilder::application_name`](crate::SessionBuilder::application_name),
/// `application_version` and `client_id` are this crate's names for the same.
///
/// ```
/// use scylla_driver::client::SelfIdentity;
///
/// let identity = SelfIdentity::new()
///     .with_application_name("billing")
///     .with_application_version("2.4.1")
///     .with_client_id("billing-7f9c-pod-3");
/// assert_eq!(identity.get_application_name(), Some("billing"));
/// assert_eq!(identity.get_custom_driver_name(), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelfIdentity<'id> {
    custom_driver_name: Option<Cow<'id, str>>,
    custom_driver_version: Option<Cow<'id, str>>,
    application_name: Option<Cow<'id, str>>,
    application_version: Option<Cow<'id, str>>,
    client_id: Option<Cow<'id, str>>,
}

/// The setter, builder-style setter and getter of one [`SelfIdentity`] field.
macro_rules! identity_field {
    ($field:ident, $set:ident, $with:ident, $get:ident, $what:literal) => {
        #[doc = concat!("Sets ", $what, ".")]
        pub fn $set(&mut self, value: impl Into<Cow<'id, str>>) {
            self.$field = Some(value.into());
        }

        #[doc = concat!("Sets ", $what, " (builder style).")]
        #[must_use]
        pub fn $with(mut self, value: impl Into<Cow<'id, str>>) -> Self {
            self.$set(value);
            self
        }

        #[doc = concat!("Returns ", $what, ", if set.")]
        pub fn $get(&self) -> Option<&str> {
            self.$field.as_deref()
        }
    };
}

impl<'id> SelfIdentity<'id> {
    /// An identity with every field unset.
    pub fn new() -> Self {
        Self::default()
    }

    identity_field!(
        custom_driver_name,
        set_custom_driver_name,
        with_custom_driver_name,
        get_custom_driver_name,
        "the driver name sent instead of this driver's (`DRIVER_NAME`)"
    );
    identity_field!(
        custom_driver_version,
        set_custom_driver_version,
        with_custom_driver_version,
        get_custom_driver_version,
        "the driver version sent instead of this driver's (`DRIVER_VERSION`)"
    );
    identity_field!(
        application_name,
        set_application_name,
        with_application_name,
        get_application_name,
        "the application's name (`APPLICATION_NAME`)"
    );
    identity_field!(
        application_version,
        set_application_version,
        with_application_version,
        get_application_version,
        "the application's version (`APPLICATION_VERSION`)"
    );
    identity_field!(
        client_id,
        set_client_id,
        with_client_id,
        get_client_id,
        "this client instance's identifier (`CLIENT_ID`)"
    );
}

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

/// [`SessionBuilder`](session_builder::SessionBuilder), and
/// [`ClientRoutesSessionBuilder`](session_builder::ClientRoutesSessionBuilder)
/// for sessions through client routes.
pub mod session_builder {
    pub use super::client_routes::ClientRoutesSessionBuilder;
    pub use crate::session::SessionBuilder;
}

pub mod client_routes;

/// A session that prepares every statement it runs, in a bounded cache.
pub mod caching_session {
    pub use crate::session::caching::{CachingSession, CachingSessionBuilder};
}

/// Execution profiles as the official `scylla` crate builds them:
/// [`ExecutionProfile::builder()`](execution_profile::ExecutionProfile::builder)
/// `...build().into_handle()`.
///
/// This module's [`ExecutionProfile`](execution_profile::ExecutionProfile)
/// is a thin wrapper of this crate's
/// [`statement::ExecutionProfile`](crate::statement::ExecutionProfile) (see
/// [`statement::profile`](crate::statement::profile) for what a profile
/// does): the two convert into each other, and both make the same
/// [`ExecutionProfileHandle`](execution_profile::ExecutionProfileHandle).
pub mod execution_profile {
    use std::sync::Arc;
    use std::time::Duration;

    pub use crate::statement::ExecutionProfileHandle;

    use crate::policies::speculative_execution::SpeculativeExecutionPolicy;
    use crate::policy::retry::RetryPolicy;
    use crate::statement::{Consistency, SerialConsistency};

    /// A bundle of request settings, built with
    /// [`builder`](Self::builder); unset fields mean "the session's".
    ///
    /// ```
    /// use std::time::Duration;
    /// use scylla_driver::client::execution_profile::ExecutionProfile;
    /// use scylla_driver::statement::{Consistency, SerialConsistency};
    ///
    /// use scylla_driver::policies::load_balancing::DefaultPolicy;
    ///
    /// let profile = ExecutionProfile::builder()
    ///     .consistency(Consistency::One)
    ///     .serial_consistency(Some(SerialConsistency::LocalSerial))
    ///     .request_timeout(Some(Duration::from_secs(3)))
    ///     .load_balancing_policy(DefaultPolicy::builder().prefer_datacenter("dc1".into()).build())
    ///     .build();
    /// let policy = profile.get_load_balancing_policy().unwrap();
    /// assert_eq!(policy.name(), "DefaultPolicy");
    /// assert_eq!(profile.get_consistency(), Some(Consistency::One));
    /// assert_eq!(profile.get_serial_consistency(), Some(SerialConsistency::LocalSerial));
    /// let handle = profile.into_handle();
    /// assert_eq!(handle.profile().request_timeout, Some(Duration::from_secs(3)));
    /// ```
    #[derive(Debug, Clone, Default)]
    pub struct ExecutionProfile {
        profile: crate::statement::ExecutionProfile,
    }

    impl ExecutionProfile {
        /// A builder starting with every field unset.
        pub fn builder() -> ExecutionProfileBuilder {
            ExecutionProfileBuilder {
                profile: crate::statement::ExecutionProfile::new(),
            }
        }

        /// A builder starting from this profile.
        pub fn to_builder(&self) -> ExecutionProfileBuilder {
            ExecutionProfileBuilder {
                profile: self.profile.clone(),
            }
        }

        /// A handle to this profile, with an empty label.
        pub fn into_handle(self) -> ExecutionProfileHandle {
            self.profile.into_handle(String::new())
        }

        /// A handle to this profile labelled `label` (shown by the handle's
        /// `Debug` and [`name`](ExecutionProfileHandle::name)).
        pub fn into_handle_with_label(self, label: String) -> ExecutionProfileHandle {
            self.profile.into_handle(label)
        }

        /// The consistency level, if set.
        pub fn get_consistency(&self) -> Option<Consistency> {
            self.profile.consistency
        }

        /// The serial consistency level, if set.
        pub fn get_serial_consistency(&self) -> Option<SerialConsistency> {
            self.profile
                .serial_consistency
                .and_then(|c| SerialConsistency::try_from(c).ok())
        }

        /// The request timeout, if set.
        pub fn get_request_timeout(&self) -> Option<Duration> {
            self.profile.request_timeout
        }

        /// The load-balancing policy, if set.
        pub fn get_load_balancing_policy(
            &self,
        ) -> Option<&Arc<dyn crate::policies::load_balancing::LoadBalancingPolicy>> {
            self.profile.load_balancing.as_ref()
        }

        /// This crate's form of the profile.
        pub fn as_profile(&self) -> &crate::statement::ExecutionProfile {
            &self.profile
        }
    }

    impl From<ExecutionProfile> for crate::statement::ExecutionProfile {
        fn from(p: ExecutionProfile) -> Self {
            p.profile
        }
    }

    impl From<crate::statement::ExecutionProfile> for ExecutionProfile {
        fn from(profile: crate::statement::ExecutionProfile) -> Self {
            ExecutionProfile { profile }
        }
    }

    /// Builds an [`ExecutionProfile`], with the official `scylla` crate's
    /// method signatures.
    #[derive(Debug, Clone)]
    pub struct ExecutionProfileBuilder {
        profile: crate::statement::ExecutionProfile,
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

        /// Sets the load-balancing policy (see
        /// [`policies::load_balancing`](crate::policies::load_balancing)).
        #[must_use]
        pub fn load_balancing_policy(
            mut self,
            p: Arc<dyn crate::policies::load_balancing::LoadBalancingPolicy>,
        ) -> Self {
            self.profile.load_balancing = Some(p);
            self
        }

        /// The profile.
        pub fn build(self) -> ExecutionProfile {
            ExecutionProfile {
                profile: self.profile,
            }
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
