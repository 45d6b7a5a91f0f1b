//! Responses (server to client).
