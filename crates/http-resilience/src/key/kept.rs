//! A guard's states by key, read from outside the guard (the metrics'
//! gauges) without keeping the guard alive.

use super::UpstreamKey;
use std::sync::{Arc, Weak};

/// What reads the states of a guard's keys: a weak handle on what the
/// guard's clones share, and how to read it.
///
/// Once the last clone of the guard (and every layer and service made from
/// it) is dropped, [`states`](Self::states) answers `None`, so that a gauge
/// stops reporting keys nobody calls any more.
pub(crate) struct Kept<S>(Arc<StatesFn<S>>);

/// The reader behind a [`Kept`].
type StatesFn<S> = dyn Fn() -> Option<Vec<(UpstreamKey, S)>> + Send + Sync;

impl<S> Clone for Kept<S> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<S: 'static> Kept<S> {
    /// The states `read` finds in `shared`, for as long as `shared` is kept.
    pub(crate) fn of<T, R>(shared: &Arc<T>, read: R) -> Self
    where
        T: Send + Sync + 'static,
        R: Fn(&T) -> Vec<(UpstreamKey, S)> + Send + Sync + 'static,
    {
        let weak: Weak<T> = Arc::downgrade(shared);
        Self(Arc::new(move || Some(read(&*weak.upgrade()?))))
    }

    /// The state of every key kept, or `None` once nothing keeps them.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub(crate) fn states(&self) -> Option<Vec<(UpstreamKey, S)>> {
        (self.0)()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_states_are_read_while_the_guard_is_kept_and_not_after() {
        let shared = Arc::new(7_u32);
        let kept = Kept::of(&shared, |n: &u32| vec![(UpstreamKey::custom("a"), *n)]);
        assert_eq!(
            kept.clone().states(),
            Some(vec![(UpstreamKey::custom("a"), 7)])
        );
        drop(shared);
        assert_eq!(kept.states(), None, "the handle keeps nothing alive");
    }
}
