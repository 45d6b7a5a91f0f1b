//! Results and paging as the official `scylla` crate names them:
//! [`PagingState`] and [`PagingStateResponse`] for paging by hand, and
//! [`query_result`] for [`QueryResult::into_rows_result`](crate::QueryResult::into_rows_result).
//!
//! [`Session::query_single_page`](crate::Session::query_single_page) and
//! [`Session::execute_single_page`](crate::Session::execute_single_page)
//! take either form of paging state ([`PageStart`]): `None` / `Some(bytes)`
//! returns the next page's state as an `Option<Bytes>`, a [`PagingState`]
//! returns a [`PagingStateResponse`].
//!
//! ```no_run
//! # async fn demo(session: &scylla_driver::Session) -> Result<(), Box<dyn std::error::Error>> {
//! use std::ops::ControlFlow;
//! use scylla_driver::response::PagingState;
//! use scylla_driver::statement::unprepared::Statement;
//!
//! let select = Statement::new("SELECT k FROM ks.t").with_page_size(100);
//! let mut state = PagingState::start();
//! loop {
//!     let (page, next) = session.query_single_page(select.clone(), &[], state).await?;
//!     println!("{} rows", page.rows_count());
//!     match next.into_paging_control_flow() {
//!         ControlFlow::Break(()) => break,
//!         ControlFlow::Continue(s) => state = s,
//!     }
//! }
//! # Ok(()) }
//! ```

pub use crate::session::paging::{PageStart, PagingState, PagingStateResponse};

pub mod coordinator;
/// [`QueryResult::into_rows_result`](crate::QueryResult::into_rows_result)
/// and what it returns.
pub mod query_result {
    pub use crate::result::rows::*;
    #[doc(no_inline)]
    pub use crate::result::QueryResult;
    #[doc(no_inline)]
    pub use scylla_cql::types::ColumnSpecs;
}

#[doc(no_inline)]
pub use coordinator::Coordinator;
