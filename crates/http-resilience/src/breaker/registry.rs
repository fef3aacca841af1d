//! The bounded map of circuits, by key: the crate's keyed map of
//! [`Circuit`]s, made and read on the breaker's clock.

#[cfg(test)]
use super::circuit::Ctx;
use super::{circuit::Circuit, rules::Settings, CircuitState};
#[cfg(test)]
use crate::key::KeyRef;
use crate::key::UpstreamKey;
use crate::key::{self, Keyed, Room};
use std::sync::atomic::AtomicBool;
use tokio::time::Instant;

/// The circuits of one policy.
pub(crate) type Registry = key::Registry<Circuit>;

impl Keyed for Circuit {
    fn key(&self) -> &UpstreamKey {
        Circuit::key(self)
    }

    fn last_used(&self) -> u64 {
        Circuit::last_used(self)
    }

    fn evicted(&self) -> &AtomicBool {
        Circuit::evicted(self)
    }

    /// A circuit that is not closed remembers a trip: closed ones go first.
    fn is_busy(&self, _: u64) -> bool {
        !self.is_closed()
    }
}

impl key::Registry<Circuit> {
    /// The circuit of `key`, made (and room made for it) if none is kept.
    #[cfg(test)]
    pub(crate) fn get_or_insert(&self, key: KeyRef<'_>, ctx: Ctx<'_>) -> std::sync::Arc<Circuit> {
        let room = room(ctx.settings());
        self.get_or_make(key, || ctx.nanos(Instant::now()), room, Circuit::new)
    }
}

impl key::Registry<Circuit> {
    /// The state of every circuit kept, on a clock that counts from `base`.
    pub(crate) fn states(&self, base: Instant) -> Vec<(UpstreamKey, CircuitState)> {
        self.all()
            .iter()
            .map(|circuit| (circuit.key().clone(), circuit.state(base)))
            .collect()
    }
}

/// The room the breaker's `settings` give its circuits.
pub(crate) fn room(settings: &Settings) -> Room {
    Room {
        max_keys: settings.max_keys,
        idle: settings.idle,
    }
}
