//! Overload control's events (see [`OverloadEvent`]).

use super::{error::Rejection, settings::OverloadState};
use crate::{
    key::{Kept, UpstreamKey},
    telemetry::{listeners::Listeners, Listener},
};
use std::fmt;

/// Something overload control did; a [`Listener`] given with
/// [`OverloadPolicy::with_listener`](super::OverloadPolicy::with_listener)
/// hears it, and closures `Fn(&OverloadEvent<'_>)` are such listeners.
///
/// Every event is also logged with `tracing`, at debug level.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum OverloadEvent<'a> {
    /// An adaptive limit moved.
    LimitChanged {
        /// The key whose limit it is.
        key: &'a UpstreamKey,
        /// The limit before.
        from: u32,
        /// The limit now.
        to: u32,
    },
    /// A call was turned away, never sent.
    Rejected {
        /// The key whose limit turned it away.
        key: &'a UpstreamKey,
        /// Why.
        reason: Rejection,
    },
}

impl fmt::Display for OverloadEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OverloadEvent::LimitChanged { key, from, to } => {
                write!(f, "{key}: concurrency limit {from} -> {to}")
            }
            OverloadEvent::Rejected { key, reason } => {
                write!(f, "{key}: call turned away, {reason}")
            }
        }
    }
}

/// What watches a policy's slots from outside overload control, attached to
/// them in place (the metrics of `otel`): it hears every event, as
/// a listener does, and reads the state of the slots it is attached to, and
/// of those of every policy made from that one.
pub(crate) trait Observer: for<'a> Listener<OverloadEvent<'a>> {
    /// Reads the state of `slots` from now on, for as long as they are kept.
    fn observe(&self, slots: Kept<OverloadState>);
}

/// The listeners of a policy's slots: the one given, as it is given, and the
/// observer.
pub(crate) type OverloadListeners =
    Listeners<dyn for<'a> Listener<OverloadEvent<'a>>, dyn Observer>;

/// Logs `event` (at debug level: a loaded client turns many calls away) and
/// tells `listener`, if any.
pub(crate) fn emit(listeners: &OverloadListeners, event: &OverloadEvent<'_>) {
    tracing::debug!(%event, "overload control");
    listeners.on_event(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reads_as_one_line() {
        let key = UpstreamKey::authority("http", "a", 80);
        let moved = OverloadEvent::LimitChanged {
            key: &key,
            from: 20,
            to: 18,
        };
        assert_eq!(moved.to_string(), "http://a:80: concurrency limit 20 -> 18");
        let rejected = OverloadEvent::Rejected {
            key: &key,
            reason: Rejection::WaitTooLong,
        };
        assert_eq!(
            rejected.to_string(),
            "http://a:80: call turned away, no slot in time"
        );
    }
}
