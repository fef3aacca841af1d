//! What a guard keeps of those who listen to it: the listener its policy was
//! given, and an observer attached to its state later, in place.

use std::sync::{Arc, OnceLock};

/// The listeners of a guard's state (a breaker's circuits, overload
/// control's slots): `L` the listener given with the policy's
/// `with_listener`, and `O` an observer attached to the state afterwards
/// (the metrics of `telemetry::otel`), which every clone of the policy
/// shares at once and every policy made from it keeps.
///
/// NOTE: the observer is set once and read with one atomic load, so that a
/// guard with none pays a branch per event; attaching a second is refused,
/// so that a state shared by two stacks is never counted twice.
pub(crate) struct Listeners<L: ?Sized, O: ?Sized> {
    given: Option<Arc<L>>,
    observer: OnceLock<Arc<O>>,
}

// ===== impl Listeners =====

impl<L: ?Sized, O: ?Sized> Listeners<L, O> {
    /// No listener, no observer.
    pub(crate) const fn none() -> Self {
        Self {
            given: None,
            observer: OnceLock::new(),
        }
    }

    /// The listeners of a policy made from this one's: `given` if there is
    /// one, else the same listener, and the same observer.
    pub(crate) fn carried(&self, given: Option<Arc<L>>) -> Self {
        let observer = OnceLock::new();
        if let Some(attached) = self.observer.get() {
            let _ = observer.set(Arc::clone(attached));
        }
        Self {
            given: given.or_else(|| self.given.clone()),
            observer,
        }
    }

    /// The listener given with the policy, if any.
    pub(crate) fn given(&self) -> Option<&L> {
        self.given.as_deref()
    }

    /// The observer attached, if any.
    pub(crate) fn observer(&self) -> Option<&Arc<O>> {
        self.observer.get()
    }

    /// Whether anyone listens.
    pub(crate) fn any(&self) -> bool {
        self.given.is_some() || self.observer.get().is_some()
    }

    /// Attaches `observer`, unless one is attached already: whether it was.
    #[cfg(feature = "otel")]
    pub(crate) fn attach(&self, observer: Arc<O>) -> bool {
        self.observer.set(observer).is_ok()
    }
}
