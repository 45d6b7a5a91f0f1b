//! The open client connections of one node, for `system.clients`.
//!
//! A connection registers its context (a [`ConnCtx`](crate::handler::ConnCtx))
//! when its task starts serving and is removed when that task ends (however
//! it ends: the [`Registered`] guard removes it on drop). The registry holds
//! weak references, so it never keeps a closed connection's context alive.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

/// The open connections of one node, by connection id (accept order): their
/// contexts, of type `C`.
#[derive(Debug)]
pub(crate) struct ClientRegistry<C> {
    open: Mutex<BTreeMap<u64, Weak<C>>>,
}

impl<C> Default for ClientRegistry<C> {
    fn default() -> Self {
        ClientRegistry {
            open: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<C> ClientRegistry<C> {
    /// Lists connection `id` (context `ctx`) until the returned guard is
    /// dropped.
    pub(crate) fn register(self: &Arc<Self>, id: u64, ctx: &Arc<C>) -> Registered<C> {
        if let Ok(mut open) = self.open.lock() {
            open.insert(id, Arc::downgrade(ctx));
        }
        Registered {
            registry: self.clone(),
            id,
        }
    }

    /// The connections open now.
    pub(crate) fn open(&self) -> Vec<Arc<C>> {
        self.open
            .lock()
            .map(|open| open.values().filter_map(Weak::upgrade).collect())
            .unwrap_or_default()
    }
}

/// Removes a connection from its registry when dropped.
#[derive(Debug)]
pub(crate) struct Registered<C> {
    registry: Arc<ClientRegistry<C>>,
    id: u64,
}

impl<C> Drop for Registered<C> {
    fn drop(&mut self) {
        if let Ok(mut open) = self.registry.open.lock() {
            open.remove(&self.id);
        }
    }
}
