//! Where a node is (its datacenter and rack) as a `Copy` id: a result
//! records its coordinator's location with the host id, without touching a
//! reference count on the request path, and the names are read back only
//! when [`QueryResult::request_coordinator`](crate::QueryResult::request_coordinator)
//! is asked for.
//!
//! The names are interned once per process: a cluster has a handful of
//! datacenters and racks, so the table stays small; past `u16::MAX - 1`
//! distinct pairs (never seen in a real cluster) new ones are recorded as
//! unknown rather than growing without bound.

use std::sync::{Mutex, OnceLock};

/// A (datacenter, rack) pair, interned; [`Location::UNKNOWN`] names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Location(u16);

/// The interned pairs; `Location(i)` is entry `i - 1`.
fn table() -> &'static Mutex<Vec<(String, String)>> {
    static NAMES: OnceLock<Mutex<Vec<(String, String)>>> = OnceLock::new();
    NAMES.get_or_init(|| Mutex::new(Vec::new()))
}

impl Location {
    /// No recorded location.
    pub(crate) const UNKNOWN: Location = Location(0);

    /// The id of `(datacenter, rack)`, interning it on first sight. Called
    /// when a cluster state is built, never per request.
    pub(crate) fn of(datacenter: &str, rack: &str) -> Location {
        // A poisoned lock only means another thread panicked while pushing
        // a pair: the vector itself is still valid.
        let mut names = table().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = names
            .iter()
            .position(|(dc, r)| dc == datacenter && r == rack)
        {
            return Location::from_index(i);
        }
        if names.len() >= usize::from(u16::MAX - 1) {
            return Location::UNKNOWN;
        }
        names.push((datacenter.to_owned(), rack.to_owned()));
        Location::from_index(names.len() - 1)
    }

    fn from_index(i: usize) -> Location {
        // `of` keeps the table below u16::MAX entries.
        u16::try_from(i + 1).map_or(Location::UNKNOWN, Location)
    }

    /// The datacenter and rack, unless unknown.
    pub(crate) fn names(self) -> Option<(String, String)> {
        let i = usize::from(self.0.checked_sub(1)?);
        let names = table().lock().unwrap_or_else(|e| e.into_inner());
        names.get(i).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_interned_once_and_read_back() {
        let a = Location::of("dc-location-test", "r1");
        let b = Location::of("dc-location-test", "r2");
        assert_ne!(a, b);
        assert_eq!(Location::of("dc-location-test", "r1"), a);
        assert_eq!(
            a.names(),
            Some(("dc-location-test".to_owned(), "r1".to_owned()))
        );
        assert_eq!(Location::UNKNOWN.names(), None);
        assert_eq!(Location::default(), Location::UNKNOWN);
    }
}
