//! [`Handle`]: how a statement's options hold a shared object (a policy, a
//! history listener).

use std::fmt;
use std::sync::Arc;

/// A shared object as a statement's options hold it: compared by identity,
/// so that statements stay comparable, and one pointer wide (the object's
/// `Arc` in an `Arc`, allocated when it is set), so that statements, which
/// request futures carry, grow by one word only.
pub struct Handle<T: ?Sized>(Arc<Arc<T>>);

impl<T: ?Sized> Handle<T> {
    /// A handle to `shared`.
    pub fn new(shared: Arc<T>) -> Self {
        Handle(Arc::new(shared))
    }

    /// The object.
    pub fn get(&self) -> &Arc<T> {
        &self.0
    }
}

impl<T: ?Sized> Clone for Handle<T> {
    fn clone(&self) -> Self {
        Handle(Arc::clone(&self.0))
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<T: ?Sized> PartialEq for Handle<T> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&*self.0), Arc::as_ptr(&*other.0))
    }
}

impl<T: ?Sized> Eq for Handle<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_compare_by_identity_and_are_one_word() {
        let a: Arc<str> = Arc::from("x");
        let b: Arc<str> = Arc::from("x");
        let ha = Handle::new(a.clone());
        assert_eq!(ha, ha.clone());
        assert_eq!(ha, Handle::new(a));
        assert_ne!(ha, Handle::new(b));
        assert_eq!(
            std::mem::size_of::<Option<Handle<str>>>(),
            std::mem::size_of::<usize>()
        );
    }
}
