//! Authentication (the official `scylla` crate's `authentication` path):
//! [`PlainTextAuthenticator`] for username and password, and the traits a
//! custom mechanism implements, [`AuthenticatorProvider`] and
//! [`AuthenticatorSession`], given to
//! [`SessionBuilder::authenticator_provider`](crate::SessionBuilder::authenticator_provider).

#[doc(no_inline)]
pub use crate::connection::{
    AuthError, AuthenticatorProvider, AuthenticatorSession, PlainTextAuthenticator,
};
