//! The hedging policy: when another copy is sent, how many, and what counts
//! as an answer.

use super::latency::Histogram;
use crate::{
    policy::{CallOptions, Parts},
    InvalidSetting,
};
use std::{fmt, sync::Arc, time::Duration};
use tokio::time::Instant;

/// When, with no outcome yet, the next copy of a request is sent.
///
/// # Example
///
/// ```
/// use http_resilience::hedge::HedgeDelay;
/// use std::time::Duration;
///
/// let fixed = HedgeDelay::fixed(Duration::from_millis(50));
/// // The 95th percentile of the client's latencies over the last 10 s, from
/// // the 100th latency seen on; no hedge on a delay before that.
/// let adaptive = HedgeDelay::percentile(95.0, 100, Duration::from_secs(10))?;
/// # let _ = (fixed, adaptive);
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Clone)]
pub struct HedgeDelay {
    kind: DelayKind,
}

#[derive(Clone)]
enum DelayKind {
    Fixed(Duration),
    Percentile(Arc<Histogram>),
    Never,
}

impl HedgeDelay {
    /// The same delay for every request (gRPC's `hedgingDelay`).
    pub const fn fixed(delay: Duration) -> Self {
        Self {
            kind: DelayKind::Fixed(delay),
        }
    }

    /// The `percentile` of the latencies this client observed over the last
    /// full `window`, as tower's `hedge` and Finagle's backup requests do:
    /// only the slowest `100 − percentile` % of calls get a hedge. Every
    /// attempt that ends is recorded, in buckets within 12.5 % of its value.
    ///
    /// # When the delay is computed
    ///
    /// Once per `window`, from the window that just ended. While that window
    /// held fewer than `min_samples` latencies (the first window, or a quiet
    /// one), the delay comes from the current window instead, as soon as it
    /// holds `min_samples` of them, and again each time their count doubles;
    /// before that no hedge is sent on a delay (the other triggers still
    /// hold). So a client that starts under load hedges from its
    /// `min_samples`-th call on, not after a whole window.
    ///
    /// # Choosing the percentile
    ///
    /// A hedge helps a call only if the delay comes before the slow calls
    /// would have answered. With a fraction `f` of slow calls, a percentile
    /// `p` with `100 − p` above `f` sets the delay at the top of the fast
    /// calls: every slow call is hedged, and about `100 − p` % of calls send
    /// a second copy. A percentile with `100 − p` below `f` falls among the
    /// slow calls themselves: the delay is about their latency, and a hedge
    /// can then never fire in time. So the percentile is chosen from the tail
    /// to cut: 90 for a tail of up to a few per cent, 95 or 99 only for a
    /// rarer one. Pair it with a [`RetryBudget`](crate::policy::RetryBudget)
    /// (ratio 0.1, say) through
    /// [`CallOptions::with_budget`](crate::policy::CallOptions::with_budget), which holds the extra copies to about
    /// that fraction of calls however the latencies shift.
    ///
    /// The histogram is shared by every clone of the policy (and of the layer
    /// built from it), so it is per client.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `percentile` is not within `(0, 100)` (field
    /// `percentile`) or `window` is zero (field `window`).
    pub fn percentile(
        percentile: f64,
        min_samples: u64,
        window: Duration,
    ) -> Result<Self, InvalidSetting> {
        if !(percentile > 0.0 && percentile < 100.0) {
            let err = InvalidSetting::new("percentile", "must be within (0, 100)");
            return Err(err.with_value(percentile.to_string()));
        }
        if window.is_zero() {
            return Err(InvalidSetting::new("window", "must be greater than zero").with_value("0s"));
        }
        Ok(Self {
            kind: DelayKind::Percentile(Arc::new(Histogram::new(percentile, min_samples, window))),
        })
    }

    /// No hedge on a delay: only a non-fatal outcome or an attempt past its
    /// limit ([`HedgePolicy::hedge_on_attempt_timeout`]) starts one.
    pub const fn never() -> Self {
        Self {
            kind: DelayKind::Never,
        }
    }

    /// The delay for a request starting at `now`, if there is one.
    pub(crate) fn get(&self, now: Instant) -> Option<Duration> {
        match &self.kind {
            DelayKind::Fixed(delay) => Some(*delay),
            DelayKind::Percentile(histogram) => histogram.delay(now),
            DelayKind::Never => None,
        }
    }

    /// Records the latency of an attempt that ended, for a percentile.
    pub(crate) fn record(&self, latency: Duration, now: Instant) {
        if let DelayKind::Percentile(histogram) = &self.kind {
            histogram.record(latency, now);
        }
    }
}

impl fmt::Debug for HedgeDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            DelayKind::Fixed(delay) => f.debug_tuple("Fixed").field(delay).finish(),
            DelayKind::Percentile(h) => f
                .debug_struct("Percentile")
                .field("percentile", &h.percentile())
                .field("min_samples", &h.min_samples())
                .field("window", &h.window())
                .finish(),
            DelayKind::Never => f.write_str("Never"),
        }
    }
}

/// A hedging policy: a [`Decoder`](crate::policy::Decoder) that says what an
/// outcome is, a [`HedgeDelay`], and the limits; see the
/// [module docs](super).
///
/// The decoder's verdicts mean, for a hedge:
///
/// - `Accept`: the answer; every other copy is cancelled;
/// - `Retry`: not fatal (gRPC's `nonFatalStatusCodes`); the next copy is sent
///   at once (or after the delay the server asked for), and this outcome is
///   kept in case no copy does better;
/// - `Fail`: on a response, fatal: every other copy is cancelled and this
///   response returned; on an error, the end of that copy only, while others
///   are in flight.
///
/// # Example
///
/// ```
/// use http_resilience::{hedge::{HedgeDelay, HedgePolicy}, policy::TransientDecoder};
/// use std::time::Duration;
///
/// // At most 3 copies, 50 ms apart; a copy is also sent when one is 200 ms
/// // old (and that one goes on).
/// let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(Duration::from_millis(50)), 3)?
///     .hedge_on_attempt_timeout(Duration::from_millis(200));
/// assert!(format!("{policy:?}").contains("max_attempts: 3"));
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Clone)]
pub struct HedgePolicy<D> {
    // The decoder, the budget, the listener, the attempt header and the
    // deadline-aware margin, as a retry policy has them.
    parts: Parts<D>,
    delay: HedgeDelay,
    max_attempts: u32,
    max_in_flight: u32,
    attempt_timeout: Option<Duration>,
    max_server_delay: Duration,
}

/// The default cap on a delay the server asks for before the next copy: 1 s,
/// as [`FixedDelay`](crate::policy::FixedDelay) and
/// [`FeignRetryer`](crate::policy::FeignRetryer) cap a retry's.
pub const DEFAULT_MAX_SERVER_DELAY: Duration = Duration::from_secs(1);

/// The most copies of a call a hedge sends, the first included (Polly's
/// hedging allows 10 at most; gRPC's clients cap theirs at 5): every copy in
/// flight holds a request and a connection, and a delay of zero sends them
/// all at once.
pub(crate) const MAX_COPIES: u32 = 10;

impl<D> HedgePolicy<D> {
    /// At most `max_attempts` copies of a request in all, the first included
    /// (gRPC's `maxAttempts`), a new one after each `delay` with no outcome.
    /// All of them may be in flight at once (see
    /// [`with_max_in_flight`](Self::with_max_in_flight)).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_attempts`) when `max_attempts` is zero
    /// or more than 10 (as Polly's hedging allows): the copies run at once,
    /// each with a request and a connection of its own.
    pub fn new(decoder: D, delay: HedgeDelay, max_attempts: u32) -> Result<Self, InvalidSetting> {
        let max_attempts = copies("max_attempts", max_attempts)?;
        Ok(Self {
            parts: Parts::new(decoder),
            delay,
            max_attempts,
            max_in_flight: max_attempts,
            attempt_timeout: None,
            max_server_delay: DEFAULT_MAX_SERVER_DELAY,
        })
    }

    /// At most `n` copies in flight at once; a copy due while `n` are in
    /// flight is sent when one of them ends.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_in_flight`) when `n` is zero or more
    /// than 10, as for [`new`](Self::new).
    pub fn with_max_in_flight(mut self, n: u32) -> Result<Self, InvalidSetting> {
        self.max_in_flight = copies("max_in_flight", n)?;
        Ok(self)
    }

    /// Sends another copy when an attempt is `limit` old with no outcome,
    /// and lets that attempt go on (Envoy's `hedge_on_per_try_timeout`).
    #[must_use]
    pub fn hedge_on_attempt_timeout(mut self, limit: Duration) -> Self {
        self.attempt_timeout = Some(limit);
        self
    }

    /// Caps a delay the server asks for before the next copy (`Retry-After`,
    /// gRPC's pushback, read by the decoder) at `max`; 1 s by default
    /// ([`DEFAULT_MAX_SERVER_DELAY`]). Whatever the cap, the wait is cut at
    /// the request's deadline: the call then ends with the outcome in hand
    /// and [`Stop::DeadlinePassed`](crate::Stop::DeadlinePassed), as a
    /// retry's does.
    #[must_use]
    pub fn with_max_server_delay(mut self, max: Duration) -> Self {
        self.max_server_delay = max;
        self
    }

    /// The options this policy sets as a hedging (or retry) policy would:
    /// deadline-aware scheduling, the budget, the listener, the attempt
    /// header and the spans.
    pub(crate) const fn options(&self) -> &CallOptions {
        &self.parts.options
    }

    /// The options `f` makes of this policy's (see [`CallOptions`]).
    #[must_use]
    pub fn map_options(mut self, f: impl FnOnce(CallOptions) -> CallOptions) -> Self {
        self.parts.options = f(self.parts.options);
        self
    }

    /// The decoder.
    pub(crate) const fn decoder(&self) -> &D {
        &self.parts.decoder
    }

    /// The parts the retry and the hedging policies share.
    pub(crate) const fn parts(&self) -> &Parts<D> {
        &self.parts
    }

    /// The parts a retry policy has too, to give a hedge a retry's (the
    /// configuration's hedging takes the client's).
    #[cfg(feature = "serde")]
    pub(crate) fn parts_mut(&mut self) -> &mut Parts<D> {
        &mut self.parts
    }

    /// The delay.
    pub(crate) const fn delay(&self) -> &HedgeDelay {
        &self.delay
    }

    /// The most copies of a request, the first included.
    pub(crate) const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The most copies in flight at once.
    pub(crate) const fn max_in_flight(&self) -> u32 {
        self.max_in_flight
    }

    /// The age of an attempt at which another copy is sent, if set.
    pub(crate) const fn attempt_timeout(&self) -> Option<Duration> {
        self.attempt_timeout
    }

    /// The cap on a delay the server asks for before the next copy.
    pub(crate) const fn max_server_delay(&self) -> Duration {
        self.max_server_delay
    }
}

impl<D: fmt::Debug> fmt::Debug for HedgePolicy<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgePolicy")
            .field("decoder", &self.parts.decoder)
            .field("delay", &self.delay)
            .field("max_attempts", &self.max_attempts)
            .field("max_in_flight", &self.max_in_flight)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("max_server_delay", &self.max_server_delay)
            .field("deadline_margin", &self.parts.options.deadline_margin)
            .field("budget", &self.parts.options.budget)
            .field("listener", &self.parts.options.listener.is_some())
            .field("attempt_header", &self.parts.options.attempt_header)
            .finish()
    }
}

/// `n` copies as `field` allows them: at least one, at most [`MAX_COPIES`].
fn copies(field: &'static str, n: u32) -> Result<u32, InvalidSetting> {
    match n {
        0 => Err(InvalidSetting::new(field, "must be at least 1").with_value("0")),
        n if n > MAX_COPIES => {
            let problem = format!("must be at most {MAX_COPIES}");
            Err(InvalidSetting::new(field, problem).with_value(n.to_string()))
        }
        n => Ok(n),
    }
}
