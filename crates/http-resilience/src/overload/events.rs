//! Overload control's events (see [`OverloadListener`]).

use super::error::Rejection;
use crate::breaker::BreakerKey;
use std::fmt;

/// Something overload control did.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum OverloadEvent<'a> {
    /// An adaptive limit moved.
    LimitChanged {
        /// The key whose limit it is.
        key: &'a BreakerKey,
        /// The limit before.
        from: u32,
        /// The limit now.
        to: u32,
    },
    /// A call was turned away, never sent.
    Rejected {
        /// The key whose limit turned it away.
        key: &'a BreakerKey,
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

/// Hears every [`OverloadEvent`]; see
/// [`OverloadPolicy::with_listener`](super::OverloadPolicy::with_listener).
///
/// Closures of `Fn(&OverloadEvent)` are listeners.
pub trait OverloadListener: Send + Sync + 'static {
    /// Called for every event, on the task whose call caused it, with no
    /// lock held; it should be quick.
    fn on_event(&self, event: &OverloadEvent<'_>);
}

impl<F> OverloadListener for F
where
    F: Fn(&OverloadEvent<'_>) + Send + Sync + 'static,
{
    fn on_event(&self, event: &OverloadEvent<'_>) {
        self(event)
    }
}

/// Logs `event` (at debug level: a loaded client turns many calls away) and
/// tells `listener`, if any.
pub(crate) fn emit(listener: Option<&dyn OverloadListener>, event: &OverloadEvent<'_>) {
    tracing::debug!(%event, "overload control");
    if let Some(listener) = listener {
        listener.on_event(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reads_as_one_line() {
        let key = BreakerKey::authority("http", "a", 80);
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
