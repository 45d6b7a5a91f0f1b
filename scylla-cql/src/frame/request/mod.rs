//! Requests (client to server).
