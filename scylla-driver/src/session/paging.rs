//! Paging by hand: [`PagingState`], [`PagingStateResponse`], and
//! [`PageStart`], the two forms of paging state that
//! [`Session::query_single_page`](crate::Session::query_single_page) and
//! [`Session::execute_single_page`](crate::Session::execute_single_page)
//! take (the official crate's `response` path names them).

use std::ops::ControlFlow;

use bytes::Bytes;

/// Where a page starts: the beginning, or where the previous page ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PagingState(Option<Bytes>);

impl PagingState {
    /// The first page.
    pub fn start() -> Self {
        Self(None)
    }

    /// A state saved from [`as_bytes_slice`](Self::as_bytes_slice) earlier
    /// (the server's opaque bytes).
    pub fn new_from_raw_bytes(raw: impl Into<Bytes>) -> Self {
        Self(Some(raw.into()))
    }

    /// The server's opaque bytes (`None` for the first page).
    pub fn as_bytes_slice(&self) -> Option<&Bytes> {
        self.0.as_ref()
    }

    /// The bytes, as [`Session`](crate::Session)'s `Option<Bytes>` form.
    pub fn into_bytes(self) -> Option<Bytes> {
        self.0
    }
}

impl From<Option<Bytes>> for PagingState {
    fn from(raw: Option<Bytes>) -> Self {
        Self(raw)
    }
}

impl From<PagingState> for Option<Bytes> {
    fn from(state: PagingState) -> Self {
        state.0
    }
}

/// What a page says about the next one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PagingStateResponse {
    /// There are more pages; `state` fetches the next.
    HasMorePages {
        /// Where the next page starts.
        state: PagingState,
    },
    /// That was the last page.
    NoMorePages,
}

impl PagingStateResponse {
    /// Whether that was the last page.
    pub fn finished(&self) -> bool {
        matches!(self, Self::NoMorePages)
    }

    /// `Continue(state)` with the next page's state, or `Break(())` after
    /// the last page.
    pub fn into_paging_control_flow(self) -> ControlFlow<(), PagingState> {
        match self {
            Self::HasMorePages { state } => ControlFlow::Continue(state),
            Self::NoMorePages => ControlFlow::Break(()),
        }
    }

    fn from_next(next: Option<Bytes>) -> Self {
        match next {
            Some(raw) => Self::HasMorePages {
                state: PagingState(Some(raw)),
            },
            None => Self::NoMorePages,
        }
    }
}

mod sealed {
    // Unnameable on purpose: only this crate implements `PageStart`.
    #[allow(unnameable_types)]
    pub trait Sealed {}
    impl Sealed for Option<bytes::Bytes> {}
    impl Sealed for super::PagingState {}
}

/// The paging state argument of
/// [`Session::query_single_page`](crate::Session::query_single_page) and
/// [`Session::execute_single_page`](crate::Session::execute_single_page),
/// which decides the form the next page's state comes back in:
///
/// | argument | next page's state |
/// | --- | --- |
/// | `Option<Bytes>` (`None` for the first page) | `Option<Bytes>` (`None` after the last page) |
/// | [`PagingState`] | [`PagingStateResponse`] |
pub trait PageStart: sealed::Sealed {
    /// The next page's state in the same form.
    type Next;

    /// The server's bytes (`None` for the first page).
    fn into_bytes(self) -> Option<Bytes>;

    /// The next page's state from the server's bytes (`None`: no more pages).
    fn next(next: Option<Bytes>) -> Self::Next;
}

impl PageStart for Option<Bytes> {
    type Next = Option<Bytes>;

    fn into_bytes(self) -> Option<Bytes> {
        self
    }

    fn next(next: Option<Bytes>) -> Option<Bytes> {
        next
    }
}

impl PageStart for PagingState {
    type Next = PagingStateResponse;

    fn into_bytes(self) -> Option<Bytes> {
        self.0
    }

    fn next(next: Option<Bytes>) -> PagingStateResponse {
        PagingStateResponse::from_next(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_state_round_trips_and_ends() {
        let raw = Bytes::from_static(b"\x00\x01page");
        let state = PagingState::new_from_raw_bytes(raw.clone());
        assert_eq!(state.as_bytes_slice(), Some(&raw));
        assert_eq!(PagingState::start().as_bytes_slice(), None);
        assert_eq!(PagingState::default(), PagingState::start());

        let more = <PagingState as PageStart>::next(Some(raw.clone()));
        assert!(!more.finished());
        match more.into_paging_control_flow() {
            ControlFlow::Continue(next) => assert_eq!(next.into_bytes(), Some(raw.clone())),
            ControlFlow::Break(()) => panic!("a page with a state is not the last"),
        }
        let last = <PagingState as PageStart>::next(None);
        assert!(last.finished());
        assert_eq!(last.into_paging_control_flow(), ControlFlow::Break(()));

        // The `Option<Bytes>` form passes the bytes through unchanged.
        assert_eq!(
            <Option<Bytes> as PageStart>::next(Some(raw.clone())),
            Some(raw.clone())
        );
        assert_eq!(Some(raw.clone()).into_bytes(), Some(raw));
    }
}
