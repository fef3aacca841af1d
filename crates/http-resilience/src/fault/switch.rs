//! The run-time switch of fault injection.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

/// Turns fault injection on and off at run time, for every policy that
/// shares it: a handle that clones share, as Simmy's `EnabledGenerator` or
/// an Envoy runtime key.
///
/// Off, a policy lets every attempt through untouched, and costs one atomic
/// load per attempt (per call in the combined service, which asks its
/// guards once per call: a call that started while the switch was off
/// sends its attempts untouched). Each [`FaultPolicy`](super::FaultPolicy)
/// has a switch of its own, on, unless it is given one
/// ([`FaultPolicy::with_switch`](super::FaultPolicy::with_switch)).
///
/// # Example
///
/// ```
/// use http_resilience::fault::{Fault, FaultPolicy, FaultSwitch};
/// use http::StatusCode;
///
/// // One switch for every fault of the service, off until a test turns it on.
/// let chaos = FaultSwitch::new(false);
/// let policy = FaultPolicy::at_rate(0.1, Fault::status(StatusCode::SERVICE_UNAVAILABLE))?
///     .with_switch(chaos.clone());
/// assert!(format!("{policy:?}").contains("on: false"));
/// chaos.turn_on();
/// assert!(format!("{policy:?}").contains("on: true"));
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Debug, Clone)]
pub struct FaultSwitch(Arc<AtomicBool>);

// ===== impl FaultSwitch =====

impl FaultSwitch {
    /// A switch, on or off.
    pub fn new(on: bool) -> Self {
        Self(Arc::new(AtomicBool::new(on)))
    }

    /// Turns injection on, for every clone.
    pub fn turn_on(&self) {
        self.set(true);
    }

    /// Turns injection off, for every clone.
    pub fn turn_off(&self) {
        self.set(false);
    }

    /// Turns injection on or off, for every clone.
    fn set(&self, on: bool) {
        // NOTE: the flag guards no other data: a relaxed store is seen by
        // the next attempts on every thread soon after, which is all a
        // switch promises.
        self.0.store(on, Ordering::Relaxed);
    }

    /// Whether injection is on.
    #[inline(always)]
    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}
