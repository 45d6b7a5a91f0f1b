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

#[doc(no_inline)]
pub use crate::pool::PoolSize;
#[doc(no_inline)]
pub use scylla_cql::compression::Compression;

pub use crate::session::identity::SelfIdentity;

/// [`Session`](session::Session) and its configuration.
pub mod session {
    #[doc(no_inline)]
    pub use crate::session::{Session, SessionConfig};
}

/// [`SessionBuilder`](session_builder::SessionBuilder), and
/// [`ClientRoutesSessionBuilder`](session_builder::ClientRoutesSessionBuilder)
/// for sessions through client routes.
pub mod session_builder {
    pub use crate::session::client_routes::ClientRoutesSessionBuilder;
    #[doc(no_inline)]
    pub use crate::session::SessionBuilder;
}

pub mod client_routes {
    //! Client routes as the official `scylla` crate configures them
    //! ([`ClientRoutesConfig`] of [`ClientRoutesProxy`]s, and a
    //! [`ClientRoutesSessionBuilder`](crate::client::session_builder::ClientRoutesSessionBuilder)),
    //! over this crate's [`ClientRoutes`](crate::ClientRoutes) and
    //! [`SessionBuilder::client_routes`](crate::SessionBuilder::client_routes): see [`ClientRoutes`](crate::ClientRoutes) for what a
    //! session does with the routes.
    //!
    //! ```
    //! use scylla_driver::client::client_routes::{ClientRoutesConfig, ClientRoutesProxy};
    //! use scylla_driver::client::session_builder::ClientRoutesSessionBuilder;
    //!
    //! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
    //! let proxy = ClientRoutesProxy::new_with_connection_id("my-connection-id".to_owned());
    //! let builder = ClientRoutesSessionBuilder::new(ClientRoutesConfig::new(vec![proxy])?)
    //!     .known_node("my-link-endpoint.example.com:9042");
    //! // `builder.build().await?` connects.
    //! # drop(builder);
    //! # Ok(()) }
    //! # demo().unwrap();
    //! ```

    pub use crate::session::client_routes::{
        ClientRoutesConfig, ClientRoutesConfigError, ClientRoutesProxy,
    };
}

/// A session that prepares every statement it runs, in a bounded cache.
pub mod caching_session {
    #[doc(no_inline)]
    pub use crate::session::caching::{CachingSession, CachingSessionBuilder};
}

/// Execution profiles at the official `scylla` crate's path (the types of
/// [`statement::profile`](crate::statement::profile)).
pub mod execution_profile {
    #[doc(no_inline)]
    pub use crate::statement::{ExecutionProfile, ExecutionProfileBuilder, ExecutionProfileHandle};
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
