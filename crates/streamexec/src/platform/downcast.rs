//! The one way a backend gets its own type back from an interface object.
//!
//! The handles hand a backend only objects that backend made: events, kernels and executors of
//! another platform are refused above the interface (`Stream::then_wait_for`,
//! `then_record_event`, `Event::elapsed_since`, kernel launches and peer operations compare
//! executors or platforms and return `InvalidArgument` / `Event` / `LaunchConfig` errors that
//! say what the caller did wrong). So a failed downcast in a backend is never the user's
//! mistake: it is `Error::Internal`, naming the type that was expected, and never a panic.

use std::any::{Any, type_name};
use std::sync::Arc;

use crate::error::{Error, Result};

fn mismatch<T>(what: &str) -> Error {
    Error::internal(format!(
        "{what} is not a `{}`; the handle layer should only pass a backend objects it made",
        type_name::<T>()
    ))
}

/// `obj` (an interface object's `as_any()`) as the backend's own `T`; `what` names the object
/// for the error ("the event passed to then_wait_for").
pub(crate) fn downcast<'a, T: Any>(obj: &'a dyn Any, what: &str) -> Result<&'a T> {
    obj.downcast_ref::<T>().ok_or_else(|| mismatch::<T>(what))
}

/// `arc` (an interface object) as an `Arc` of the backend's own `T`, sharing its count, for
/// backends that keep the object beyond the call; `any` is `arc.as_any()`.
pub(crate) fn downcast_arc<T: Any + Send + Sync, I: ?Sized>(
    arc: &Arc<I>,
    any: &dyn Any,
    what: &str,
) -> Result<Arc<T>> {
    let object = Arc::as_ptr(arc) as *const u8;
    let same_object = std::ptr::eq(any as *const dyn Any as *const u8, object);
    // The size and alignment of the Arc's value must be `T`'s for `Arc::from_raw` below.
    let same_layout = std::mem::size_of_val::<I>(arc) == std::mem::size_of::<T>()
        && std::mem::align_of_val::<I>(arc) == std::mem::align_of::<T>();
    if !same_object || !same_layout || !any.is::<T>() {
        return Err(mismatch::<T>(what));
    }
    let raw = Arc::into_raw(Arc::clone(arc)) as *const T;
    // SAFETY: `raw` comes from `Arc::into_raw` of an `Arc<I>` whose value has `T`'s size and
    // alignment (checked above), and that value is a valid `T`: `any` is a `T` at the very
    // same address (checked above) and the value has no bytes beyond it. The clone's count is
    // moved into the returned `Arc`, so the count stays balanced.
    Ok(unsafe { Arc::from_raw(raw) })
}

#[cfg(test)]
mod tests {
    use super::*;

    trait Object: Send + Sync {
        fn as_any(&self) -> &dyn Any;
    }
    struct A(u64);
    struct B;
    impl Object for A {
        fn as_any(&self) -> &dyn Any {
            self
        }
    }
    impl Object for B {
        fn as_any(&self) -> &dyn Any {
            self
        }
    }

    #[test]
    fn a_mismatch_is_an_internal_error_naming_the_expected_type() {
        let a: Arc<dyn Object> = Arc::new(A(7));
        assert_eq!(downcast::<A>(a.as_any(), "the object").unwrap().0, 7);
        let got = downcast_arc::<A, _>(&a, a.as_any(), "the object").unwrap();
        assert_eq!((got.0, Arc::strong_count(&a)), (7, 2));
        drop(got);
        assert_eq!(Arc::strong_count(&a), 1);
        for err in [
            downcast::<B>(a.as_any(), "the object").err().unwrap(),
            downcast_arc::<B, _>(&a, a.as_any(), "the object")
                .err()
                .unwrap(),
        ] {
            let Error::Internal { detail } = &err else {
                panic!("{err}")
            };
            assert!(
                detail.contains("the object") && detail.contains("::B`"),
                "{err}"
            );
            assert!(err.to_string().contains("bug in streamexec"), "{err}");
        }
    }
}
