//! The one listener every policy is given ([`Listener`]), and what a guard
//! keeps of those who listen to it: the listener its policy was given, and an
//! observer attached to its state later, in place.

use std::sync::{Arc, OnceLock};

/// Hears the events of type `E` a policy tells of; closures `Fn(&E)` are
/// listeners.
///
/// Every policy takes one with `with_listener`, of the events of its own
/// feature:
///
/// - a retry or hedging policy
///   ([`CallOptions::with_listener`](crate::policy::CallOptions::with_listener),
///   [`CallOptions::with_listener`](crate::policy::CallOptions::with_listener)):
///   a [`CallEvent`](crate::policy::CallEvent), a
///   [`RetryEvent`](crate::policy::RetryEvent) with the
///   [`CallContext`](crate::policy::CallContext) of its call;
/// - a circuit breaker
///   ([`BreakerPolicy::with_listener`](crate::breaker::BreakerPolicy::with_listener)):
///   a [`BreakerEvent`](crate::breaker::BreakerEvent);
/// - overload control
///   ([`OverloadPolicy::with_listener`](crate::overload::OverloadPolicy::with_listener)):
///   an [`OverloadEvent`](crate::overload::OverloadEvent).
///
/// An event borrows what it tells of (the call's context, the circuit's
/// key): a listener that keeps something copies it out. A retry or hedging
/// policy with no listener builds no event and keeps no context.
///
/// # Example
///
/// One type that counts what each policy tells it of, given to three
/// policies:
///
/// ```
/// use http_resilience::{
///     breaker::{BreakerEvent, BreakerPolicy},
///     overload::{OverloadEvent, OverloadPolicy},
///     policy::{CallEvent, FixedDelay, RetryEvent, StatusDecoder},
///     retry::RetryPolicy,
///     telemetry::Listener,
/// };
/// use std::sync::{atomic::{AtomicU32, Ordering}, Arc};
///
/// #[derive(Clone, Default)]
/// struct Counts(Arc<[AtomicU32; 3]>);
///
/// impl Listener<CallEvent<'_>> for Counts {
///     fn on_event(&self, heard: &CallEvent<'_>) {
///         if let RetryEvent::Retry { .. } = heard.event {
///             self.0[0].fetch_add(1, Ordering::Relaxed);
///         }
///     }
/// }
///
/// impl Listener<BreakerEvent<'_>> for Counts {
///     fn on_event(&self, _: &BreakerEvent<'_>) {
///         self.0[1].fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// impl Listener<OverloadEvent<'_>> for Counts {
///     fn on_event(&self, _: &OverloadEvent<'_>) {
///         self.0[2].fetch_add(1, Ordering::Relaxed);
///     }
/// }
///
/// let counts = Counts::default();
/// let retry = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Default::default(), 2))
///     .map_options(|options| options.with_listener(counts.clone()));
/// let breaker = BreakerPolicy::default().with_listener(counts.clone());
/// let overload = OverloadPolicy::bulkhead(8)?.with_listener(counts);
/// # let _ = (retry, breaker, overload);
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
pub trait Listener<E: ?Sized>: Send + Sync + 'static {
    /// Called for every event, on the task whose call caused it, with no
    /// lock held; it should be quick (bump a counter, record a histogram).
    fn on_event(&self, event: &E);
}

impl<E: ?Sized, F> Listener<E> for F
where
    F: Fn(&E) + Send + Sync + 'static,
{
    fn on_event(&self, event: &E) {
        self(event)
    }
}

/// The listeners of a guard's state (a breaker's circuits, overload
/// control's slots): `L` the listener given with the policy's
/// `with_listener`, and `O` an observer attached to the state afterwards
/// (the metrics of `otel`), which every clone of the policy
/// shares at once and every policy made from it keeps. Both hear every
/// event.
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

impl<E, L, O> Listener<E> for Listeners<L, O>
where
    E: ?Sized,
    L: Listener<E> + ?Sized,
    O: Listener<E> + ?Sized,
{
    fn on_event(&self, event: &E) {
        if let Some(given) = self.given() {
            given.on_event(event);
        }
        if let Some(observer) = self.observer() {
            observer.on_event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    type Lines = Arc<Mutex<Vec<String>>>;

    fn writer(lines: &Lines, who: &'static str) -> Arc<dyn Listener<str>> {
        let lines = Arc::clone(lines);
        Arc::new(move |event: &str| lines.lock().unwrap().push(format!("{who}: {event}")))
    }

    #[test]
    fn the_given_listener_and_the_observer_hear_every_event() {
        let lines = Lines::default();
        let listeners: Listeners<dyn Listener<str>, dyn Listener<str>> = Listeners::none();
        assert!(!listeners.any());
        listeners.on_event("unheard");
        let listeners = listeners.carried(Some(writer(&lines, "given")));
        listeners.on_event("one");
        assert!(listeners.observer.set(writer(&lines, "observer")).is_ok());
        let carried = listeners.carried(None);
        carried.on_event("two");
        assert_eq!(
            *lines.lock().unwrap(),
            ["given: one", "given: two", "observer: two"]
        );
    }
}
