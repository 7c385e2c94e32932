//! Handle tables. A handle given to the caller is an opaque number (cast to CUDA's pointer
//! type), never the address of an object: the library never dereferences a handle, it looks it
//! up, so a forged, destroyed or other-kind handle is an error code, not a wild read. Values
//! are never reused, and each kind has its own range, so a stale or mixed-up handle is caught.
//!
//! Each object family keeps its own table as a `static` in its file (`const` construction, so
//! no family depends on a place that lists them all).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Live objects of one kind by handle value.
pub(crate) struct Table<T> {
    next: AtomicUsize,
    map: Mutex<BTreeMap<usize, Arc<T>>>,
}

impl<T> Table<T> {
    /// A table whose handles start at `base` (distinct per kind) and step by 16.
    pub(crate) const fn new(base: usize) -> Self {
        Table {
            next: AtomicUsize::new(base),
            map: Mutex::new(BTreeMap::new()),
        }
    }

    /// A fresh handle value (not yet in the table).
    pub(crate) fn reserve(&self) -> usize {
        self.next.fetch_add(16, Ordering::Relaxed)
    }

    /// Registers `v` under `h` (from [`reserve`](Self::reserve)).
    pub(crate) fn insert(&self, h: usize, v: Arc<T>) {
        self.map.lock().insert(h, v);
    }

    /// The object of handle `h`, or `None` when `h` is not a live handle of this kind.
    pub(crate) fn get(&self, h: usize) -> Option<Arc<T>> {
        self.map.lock().get(&h).cloned()
    }

    /// Takes `h` out of the table.
    pub(crate) fn remove(&self, h: usize) -> Option<Arc<T>> {
        self.map.lock().remove(&h)
    }

    /// Every live object for which `keep` holds.
    pub(crate) fn filter(&self, keep: impl Fn(&T) -> bool) -> Vec<Arc<T>> {
        self.map
            .lock()
            .values()
            .filter(|v| keep(v))
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_never_reused_and_stale_ones_are_unknown() {
        let t = Table::new(0x1000);
        let a = t.reserve();
        t.insert(a, Arc::new(1));
        assert_eq!(t.get(a).as_deref(), Some(&1));
        t.remove(a);
        let b = t.reserve();
        t.insert(b, Arc::new(2));
        assert_ne!(a, b);
        assert!(t.get(a).is_none());
        assert!(t.get(0).is_none());
    }
}
