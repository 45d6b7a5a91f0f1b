//! Authentication during the handshake: a pluggable SASL-style exchange.
//!
//! When STARTUP is answered with AUTHENTICATE (naming the server's
//! authenticator class), the connection asks the configured
//! [`Authenticator`] for an [`AuthSession`] and relays tokens:
//! AUTH_RESPONSE(initial) -> AUTH_CHALLENGE -> AUTH_RESPONSE(...) -> ... ->
//! AUTH_SUCCESS. [`PasswordAuthenticator`] implements SASL PLAIN, which is what
//! Cassandra's and ScyllaDB's `PasswordAuthenticator` expect.

use std::fmt;

/// An authentication failure on the client side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("authentication failed: {0}")]
pub struct AuthError(pub String);

/// Creates one authentication exchange per connection.
pub trait Authenticator: Send + Sync + fmt::Debug {
    /// Starts an exchange with a server that uses `authenticator_class`.
    fn start(&self, authenticator_class: &str) -> Result<Box<dyn AuthSession>, AuthError>;
}

/// The client side of one authentication exchange.
pub trait AuthSession: Send {
    /// The token of the first AUTH_RESPONSE.
    fn initial_response(&mut self) -> Result<Option<Vec<u8>>, AuthError>;
    /// Answers an AUTH_CHALLENGE.
    fn evaluate_challenge(
        &mut self,
        challenge: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, AuthError>;
    /// Called with the AUTH_SUCCESS token; may reject it.
    fn success(&mut self, _token: Option<&[u8]>) -> Result<(), AuthError> {
        Ok(())
    }
}

/// Username and password, sent as SASL PLAIN (`\0user\0password`).
///
/// Its `Debug` output never shows the password.
///
/// ```
/// use scylla_driver::connection::PasswordAuthenticator;
/// let a = PasswordAuthenticator::new("cassandra", "cassandra");
/// assert!(!format!("{a:?}").contains("cassandra\"), password: \"cassandra"));
/// ```
#[derive(Clone)]
pub struct PasswordAuthenticator {
    username: String,
    password: String,
}

impl PasswordAuthenticator {
    /// Credentials for SASL PLAIN.
    pub fn new(username: impl Into<String>, password: impl Into<String>) -> Self {
        Self {
            username: username.into(),
            password: password.into(),
        }
    }

    /// The username.
    pub fn username(&self) -> &str {
        &self.username
    }
}

impl fmt::Debug for PasswordAuthenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PasswordAuthenticator")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

struct PlainSession {
    token: Option<Vec<u8>>,
}

impl AuthSession for PlainSession {
    fn initial_response(&mut self) -> Result<Option<Vec<u8>>, AuthError> {
        Ok(self.token.take())
    }

    fn evaluate_challenge(
        &mut self,
        _challenge: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, AuthError> {
        Err(AuthError(
            "the server sent a challenge, but SASL PLAIN has a single step".into(),
        ))
    }
}

impl Authenticator for PasswordAuthenticator {
    fn start(&self, _authenticator_class: &str) -> Result<Box<dyn AuthSession>, AuthError> {
        let mut token = Vec::with_capacity(self.username.len() + self.password.len() + 2);
        token.push(0);
        token.extend_from_slice(self.username.as_bytes());
        token.push(0);
        token.extend_from_slice(self.password.as_bytes());
        Ok(Box::new(PlainSession { token: Some(token) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_plain_token() {
        let a = PasswordAuthenticator::new("u", "p");
        let mut s = a
            .start("org.apache.cassandra.auth.PasswordAuthenticator")
            .unwrap();
        assert_eq!(s.initial_response().unwrap(), Some(b"\0u\0p".to_vec()));
        assert!(s.evaluate_challenge(None).is_err());
        assert!(!format!("{a:?}").contains("\"p\""));
    }
}
