//! Authentication during the handshake: a pluggable SASL-style exchange,
//! with the official `scylla` crate's traits (`scylla::authentication`).
//!
//! When STARTUP is answered with AUTHENTICATE (naming the server's
//! authenticator class), the connection asks the configured
//! [`AuthenticatorProvider`] to start an exchange, which gives the first
//! token and an [`AuthenticatorSession`], and relays tokens:
//! AUTH_RESPONSE(initial) -> AUTH_CHALLENGE -> AUTH_RESPONSE(...) -> ... ->
//! AUTH_SUCCESS. [`PlainTextAuthenticator`] implements SASL PLAIN, which is
//! what Cassandra's and ScyllaDB's `PasswordAuthenticator` expect.
//!
//! The traits are declared with `async_trait`, as the official crate's are,
//! so an implementation written for it (`#[async_trait] impl
//! AuthenticatorProvider for ..`) compiles here unchanged.

use std::fmt;

use async_trait::async_trait;

/// What an authenticator returns when it fails: a message for the error
/// (the official crate's type). Never put credentials in it.
pub type AuthError = String;

/// An authentication failure on the client side, as a connection reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("authentication failed: {0}")]
pub struct AuthenticationFailed(pub AuthError);

/// Starts one authentication exchange per connection.
///
/// ```
/// use async_trait::async_trait;
/// use scylla_driver::authentication::{AuthError, AuthenticatorProvider, AuthenticatorSession};
///
/// /// A token mechanism: one token, no challenge.
/// struct Token(String);
///
/// struct TokenSession;
///
/// #[async_trait]
/// impl AuthenticatorSession for TokenSession {
///     async fn evaluate_challenge(
///         &mut self,
///         _token: Option<&[u8]>,
///     ) -> Result<Option<Vec<u8>>, AuthError> {
///         Err("this mechanism has no challenge".to_string())
///     }
///
///     async fn success(&mut self, _token: Option<&[u8]>) -> Result<(), AuthError> {
///         Ok(())
///     }
/// }
///
/// #[async_trait]
/// impl AuthenticatorProvider for Token {
///     async fn start_authentication_session(
///         &self,
///         _authenticator_name: &str,
///     ) -> Result<(Option<Vec<u8>>, Box<dyn AuthenticatorSession>), AuthError> {
///         Ok((Some(self.0.clone().into_bytes()), Box::new(TokenSession)))
///     }
/// }
///
/// let builder = scylla_driver::SessionBuilder::new()
///     .authenticator_provider(std::sync::Arc::new(Token("t0k3n".into())));
/// # drop(builder);
/// ```
#[async_trait]
pub trait AuthenticatorProvider: Sync + Send {
    /// Starts an exchange with a server whose authenticator class is
    /// `authenticator_name`: the token of the first AUTH_RESPONSE and the
    /// session that answers what follows.
    async fn start_authentication_session(
        &self,
        authenticator_name: &str,
    ) -> Result<(Option<Vec<u8>>, Box<dyn AuthenticatorSession>), AuthError>;
}

/// The client side of one authentication exchange.
#[async_trait]
pub trait AuthenticatorSession: Send + Sync {
    /// Answers an AUTH_CHALLENGE with the token of the next AUTH_RESPONSE.
    async fn evaluate_challenge(
        &mut self,
        token: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, AuthError>;

    /// Called with the AUTH_SUCCESS token; may reject it.
    async fn success(&mut self, token: Option<&[u8]>) -> Result<(), AuthError>;
}

impl fmt::Debug for dyn AuthenticatorProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the credentials an implementation may hold.
        f.write_str("AuthenticatorProvider")
    }
}

/// Username and password, sent as SASL PLAIN (`\0user\0password`).
///
/// Its `Debug` output never shows the password.
///
/// ```
/// use scylla_driver::authentication::PlainTextAuthenticator;
/// let a = PlainTextAuthenticator::new("cassandra".to_string(), "cassandra".to_string());
/// assert!(!format!("{a:?}").contains("cassandra\"), password: \"cassandra"));
/// ```
#[derive(Clone)]
pub struct PlainTextAuthenticator {
    username: String,
    password: String,
}

impl PlainTextAuthenticator {
    /// Credentials for SASL PLAIN.
    pub fn new(username: String, password: String) -> Self {
        Self { username, password }
    }

    /// The username.
    pub fn username(&self) -> &str {
        &self.username
    }
}

impl fmt::Debug for PlainTextAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PlainTextAuthenticator")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// SASL PLAIN has a single step: any challenge is an error.
struct PlainSession;

#[async_trait]
impl AuthenticatorSession for PlainSession {
    async fn evaluate_challenge(
        &mut self,
        _token: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, AuthError> {
        Err("the server sent a challenge, but SASL PLAIN has a single step".into())
    }

    async fn success(&mut self, _token: Option<&[u8]>) -> Result<(), AuthError> {
        Ok(())
    }
}

#[async_trait]
impl AuthenticatorProvider for PlainTextAuthenticator {
    async fn start_authentication_session(
        &self,
        _authenticator_name: &str,
    ) -> Result<(Option<Vec<u8>>, Box<dyn AuthenticatorSession>), AuthError> {
        let mut token = Vec::with_capacity(self.username.len() + self.password.len() + 2);
        token.push(0);
        token.extend_from_slice(self.username.as_bytes());
        token.push(0);
        token.extend_from_slice(self.password.as_bytes());
        Ok((Some(token), Box::new(PlainSession)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn sasl_plain_token() {
        let a = PlainTextAuthenticator::new("u".into(), "p".into());
        let (token, mut s) = a
            .start_authentication_session("org.apache.cassandra.auth.PasswordAuthenticator")
            .await
            .unwrap();
        assert_eq!(token, Some(b"\0u\0p".to_vec()));
        assert!(s.evaluate_challenge(None).await.is_err());
        assert!(s.success(None).await.is_ok());
        assert!(!format!("{a:?}").contains("\"p\""));
    }
}
