//! The open client connections of one node, for `system.clients`.
//!
//! A connection registers its [`ConnCtx`] when its task starts serving and
//! is removed when that task ends (however it ends: the [`Registered`]
//! guard removes it on drop). The registry holds weak references, so it
//! never keeps a closed connection's context alive.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use crate::handler::ConnCtx;

/// The open connections of one node, by connection id (accept order).
#[derive(Debug, Default)]
pub(crate) struct ClientRegistry {
    open: Mutex<BTreeMap<u64, Weak<ConnCtx>>>,
}

impl ClientRegistry {
    /// Lists `ctx` until the returned guard is dropped.
    pub(crate) fn register(self: &Arc<Self>, ctx: &Arc<ConnCtx>) -> Registered {
        if let Ok(mut open) = self.open.lock() {
            open.insert(ctx.conn_id, Arc::downgrade(ctx));
        }
        Registered {
            registry: self.clone(),
            id: ctx.conn_id,
        }
    }

    /// The connections open now.
    pub(crate) fn open(&self) -> Vec<Arc<ConnCtx>> {
        self.open
            .lock()
            .map(|open| open.values().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }
}

/// Removes a connection from its registry when dropped.
#[derive(Debug)]
pub(crate) struct Registered {
    registry: Arc<ClientRegistry>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Ok(mut open) = self.registry.open.lock() {
            open.remove(&self.id);
        }
    }
}
