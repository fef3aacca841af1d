//! The rate limit's events (see [`RateLimitEvent`]).

use super::{error::Limited, learn::Signal, settings::RateLimitState};
use crate::{
    key::{Kept, UpstreamKey},
    telemetry::{listeners::Listeners, Listener},
};
use std::{fmt, time::Duration};

/// Something the rate limit did; a [`Listener`] given with
/// [`RateLimitPolicy::with_listener`](super::RateLimitPolicy::with_listener)
/// hears it, and closures `Fn(&RateLimitEvent<'_>)` are such listeners.
///
/// Every event is also logged with `tracing`, at debug level.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum RateLimitEvent<'a> {
    /// A call was turned away, never sent.
    Rejected {
        /// The key whose limit turned it away.
        key: &'a UpstreamKey,
        /// Why.
        reason: Limited,
        /// How long until a slot frees.
        retry_after: Duration,
    },
    /// The server asked for a pause of every call to the key.
    Paused {
        /// The key paused.
        key: &'a UpstreamKey,
        /// For how long (capped).
        pause: Duration,
        /// Who asked.
        source: Signal,
    },
    /// The server's quota set the pace of the key's calls.
    Paced {
        /// The key paced.
        key: &'a UpstreamKey,
        /// The time between calls, while the pace holds.
        interval: Duration,
        /// How long the pace holds (the time to the quota's reset, capped).
        lasts: Duration,
        /// Who said.
        source: Signal,
    },
    /// A lease of tokens of the fleet's quota came from Redis (feature
    /// `redis`): one round trip.
    Leased {
        /// The key whose quota it is.
        key: &'a UpstreamKey,
        /// The tokens it holds (0 when the quota has none to lease yet).
        tokens: u32,
    },
    /// Redis could not be reached in time (feature `redis`): the key's
    /// calls fall back on the policy's [`Fallback`](super::fleet::Fallback)
    /// until a lease comes again.
    FleetFallback {
        /// The key.
        key: &'a UpstreamKey,
    },
    /// A lease came again after a fallback (feature `redis`).
    FleetRecovered {
        /// The key.
        key: &'a UpstreamKey,
    },
}

impl fmt::Display for RateLimitEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RateLimitEvent::Rejected {
                key,
                reason,
                retry_after,
            } => write!(
                f,
                "{key}: call turned away, {reason} (free in {retry_after:?})"
            ),
            RateLimitEvent::Paused { key, pause, source } => {
                write!(f, "{key}: paused for {pause:?} ({})", source.name())
            }
            RateLimitEvent::Paced {
                key,
                interval,
                lasts,
                source,
            } => write!(
                f,
                "{key}: one call every {interval:?} for {lasts:?} ({})",
                source.name()
            ),
            RateLimitEvent::Leased { key, tokens } => {
                write!(f, "{key}: leased {tokens} tokens of the fleet's quota")
            }
            RateLimitEvent::FleetFallback { key } => {
                write!(f, "{key}: fleet quota unreachable, falling back")
            }
            RateLimitEvent::FleetRecovered { key } => write!(f, "{key}: fleet quota back"),
        }
    }
}

/// What watches a policy's buckets from outside the rate limit (the metrics
/// of `otel`): it hears every event and reads the state of the
/// buckets it is attached to.
pub(crate) trait Observer: for<'a> Listener<RateLimitEvent<'a>> {
    /// Reads the state of `buckets` from now on, for as long as they are
    /// kept.
    fn observe(&self, buckets: Kept<RateLimitState>);
}

/// The listeners of a policy's buckets: the one given, and the observer.
pub(crate) type RateLimitListeners =
    Listeners<dyn for<'a> Listener<RateLimitEvent<'a>>, dyn Observer>;

/// Logs `event` and tells the listeners, if any.
pub(crate) fn emit(listeners: &RateLimitListeners, event: &RateLimitEvent<'_>) {
    tracing::debug!(%event, "rate limit");
    listeners.on_event(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_reads_as_one_line() {
        let key = UpstreamKey::authority("http", "a", 80);
        let lines = [
            RateLimitEvent::Rejected {
                key: &key,
                reason: Limited::OverLimit,
                retry_after: Duration::from_millis(10),
            }
            .to_string(),
            RateLimitEvent::Paused {
                key: &key,
                pause: Duration::from_secs(2),
                source: Signal::RetryAfter,
            }
            .to_string(),
            RateLimitEvent::Paced {
                key: &key,
                interval: Duration::from_millis(500),
                lasts: Duration::from_secs(3),
                source: Signal::XRateLimit,
            }
            .to_string(),
            RateLimitEvent::Leased {
                key: &key,
                tokens: 25,
            }
            .to_string(),
            RateLimitEvent::FleetFallback { key: &key }.to_string(),
            RateLimitEvent::FleetRecovered { key: &key }.to_string(),
        ];
        assert_eq!(
            lines,
            [
                "http://a:80: call turned away, over the limit (free in 10ms)",
                "http://a:80: paused for 2s (retry_after)",
                "http://a:80: one call every 500ms for 3s (x_ratelimit)",
                "http://a:80: leased 25 tokens of the fleet's quota",
                "http://a:80: fleet quota unreachable, falling back",
                "http://a:80: fleet quota back",
            ]
        );
    }
}
