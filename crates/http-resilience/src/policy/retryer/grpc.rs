//! gRPC's retry schedule (proposal A6).

use super::{
    rng::{Seeds, SplitMix64},
    Retryer,
};
use crate::{
    limits::{capped, grown, scale},
    InvalidSetting,
};
use std::{fmt, time::Duration};

/// The schedule of gRPC's retry policy (proposal A6): `maxAttempts`,
/// `initialBackoff`, `maxBackoff` and `backoffMultiplier`, with gRPC's jitter
/// and its answer to server pushback.
///
/// - The wait after the `n`-th failed attempt is
///   `min(initial × multiplier^(n−1), max)`, spread by ±20 % at random (the
///   jitter of A6 as revised in 2024; a wait may therefore end slightly below
///   `initial` or above `max`). The first published text drew the wait
///   uniformly from zero to that bound; [`ExponentialBackoff`] with
///   [`Jitter::Full`] is that schedule.
/// - A delay the server asks for (`grpc-retry-pushback-ms`, read by
///   [`GrpcDecoder`]) is the wait as it is, or at most the cap set with
///   [`with_max_pushback`](Self::with_max_pushback); the backoff then
///   **starts again** from `initial` for the retries after it, as A6 says.
/// - At most `max_attempts` attempts in all, and never more than the
///   client-side cap, 5 by default as in A6 (a larger `max_attempts` is
///   treated as the cap, as gRPC clients do with a service config;
///   [`with_attempt_cap`](Self::with_attempt_cap) moves it).
///
/// # How long a server can hold a call
///
/// A pushback can be any `i32` of milliseconds: up to `i32::MAX` ms, about
/// 24.8 days. With no cap, the wait is the server's, whole; what bounds it
/// then is the request's deadline: the retry never waits past it, and with
/// deadline-aware scheduling
/// ([`CallOptions::deadline_aware`](crate::policy::CallOptions::deadline_aware),
/// on in [`presets::grpc`](crate::presets::grpc)) a pushback that leaves no
/// room for a useful attempt ends the call at once with the server's
/// response. With neither a cap nor a deadline (a retry layer with no
/// [`DeadlineLayer`](crate::DeadlineLayer) outside it, or a deadline of
/// `Duration::MAX`), one trailers-only response holds the caller, its task
/// and the kept copy of its request for as long as the server says: up to
/// those 24.8 days. [`with_max_pushback`](Self::with_max_pushback) bounds it.
///
/// A6 does not count transparent retries (a call that never left the client,
/// or that the server refused unprocessed) against `maxAttempts`; here every
/// attempt counts, so that the number of attempts a call can make is bounded
/// by this one setting.
///
/// [`ExponentialBackoff`]: super::ExponentialBackoff
/// [`Jitter::Full`]: super::Jitter::Full
/// [`GrpcDecoder`]: crate::policy::GrpcDecoder
///
/// # Example
///
/// ```
/// use http_resilience::policy::{GrpcBackoff, Retryer};
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let mut retryer = GrpcBackoff::new(5, ms(100), ms(1000), 2.0)?.for_request();
/// let first = retryer.next_delay(1, None).unwrap();
/// assert!(ms(80) <= first && first <= ms(120), "{first:?}");
/// // The server pushes back: its wait, then the backoff from the start.
/// assert_eq!(retryer.next_delay(2, Some(ms(3000))), Some(ms(3000)));
/// let after_pushback = retryer.next_delay(3, None).unwrap();
/// assert!(ms(80) <= after_pushback && after_pushback <= ms(120), "{after_pushback:?}");
/// assert_eq!(retryer.next_delay(5, None), None, "5 attempts in all");
///
/// // A cap on what the server can ask for.
/// let mut capped = GrpcBackoff::new(5, ms(100), ms(1000), 2.0)?
///     .with_max_pushback(Duration::from_secs(2))
///     .for_request();
/// assert_eq!(capped.next_delay(1, Some(Duration::from_secs(60))), Some(Duration::from_secs(2)));
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Clone)]
pub struct GrpcBackoff {
    max_attempts: u32,
    cap: u32,
    initial: Duration,
    max_backoff: Duration,
    multiplier: f64,
    seeds: Seeds,
    rng: SplitMix64,
    /// The longest wait a server's pushback gets, if capped.
    max_pushback: Option<Duration>,
    /// The attempt after which the backoff starts again (the last pushback),
    /// 0 for none.
    restart_after: u32,
}

// ===== impl GrpcBackoff =====

impl GrpcBackoff {
    /// A6's client-side cap on attempts.
    pub(crate) const ATTEMPT_CAP: u32 = 5;

    /// The schedule of a gRPC retry policy with these fields.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`], with A6's rules: `max_attempts` below 2 (field
    /// `max_attempts`), a zero `initial` (field `delay`), a `max_backoff`
    /// below `initial` (field `max_delay`; A6 only asks for it to be
    /// positive, but a cap below the first wait means nothing), or a
    /// `multiplier` that is not a positive finite number (field
    /// `multiplier`).
    pub fn new(
        max_attempts: u32,
        initial: Duration,
        max_backoff: Duration,
        multiplier: f64,
    ) -> Result<Self, InvalidSetting> {
        if max_attempts < 2 {
            let err =
                InvalidSetting::new("max_attempts", "must be at least 2 for a gRPC retry policy");
            return Err(err.with_value(max_attempts.to_string()));
        }
        if initial.is_zero() {
            return Err(InvalidSetting::new("delay", "must be greater than zero").with_value("0s"));
        }
        if max_backoff < initial {
            let err = InvalidSetting::new("max_delay", "must be at least the initial delay");
            return Err(err.with_value(format!("{max_backoff:?}")));
        }
        if !(multiplier.is_finite() && multiplier > 0.0) {
            let err = InvalidSetting::new("multiplier", "must be a positive number");
            return Err(err.with_value(multiplier.to_string()));
        }
        Ok(Self::known_good(
            max_attempts,
            initial,
            max_backoff,
            multiplier,
        ))
    }

    /// The schedule from settings known to pass [`new`](Self::new)'s checks
    /// (the preset's). Nothing is checked here.
    pub(crate) fn known_good(
        max_attempts: u32,
        initial: Duration,
        max_backoff: Duration,
        multiplier: f64,
    ) -> Self {
        let seeds = Seeds::random();
        Self {
            max_attempts,
            cap: Self::ATTEMPT_CAP,
            initial,
            max_backoff,
            multiplier,
            rng: seeds.next_rng(),
            seeds,
            max_pushback: None,
            restart_after: 0,
        }
    }

    /// Moves the client-side cap on attempts (A6's channel argument); at
    /// least 2.
    #[must_use]
    pub fn with_attempt_cap(mut self, cap: u32) -> Self {
        self.cap = cap.max(2);
        self
    }

    /// Caps the wait a server's pushback (`grpc-retry-pushback-ms`) asks
    /// for at `max`: a longer pushback waits `max`, then the backoff starts
    /// again as after any pushback. Off by default: the server's wait is
    /// taken whole, up to `i32::MAX` ms (see
    /// [How long a server can hold a call](Self#how-long-a-server-can-hold-a-call)).
    ///
    /// Every cap is accepted; with zero, a pushback retries at once, which
    /// defeats the server's pacing.
    #[must_use]
    pub fn with_max_pushback(mut self, max: Duration) -> Self {
        self.max_pushback = Some(max);
        self
    }

    /// Draws the jitter of every request from a sequence fixed by `seed`.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seeds = Seeds::fixed(seed);
        self.rng = self.seeds.next_rng();
        self
    }

    /// The attempts a call can make: `max_attempts`, at most the cap.
    pub(crate) fn max_attempts(&self) -> u32 {
        self.max_attempts.min(self.cap)
    }

    /// The first wait, before jitter (`initialBackoff`).
    pub(crate) const fn initial(&self) -> Duration {
        self.initial
    }

    /// The longest wait, before jitter (`maxBackoff`).
    pub(crate) const fn max_backoff(&self) -> Duration {
        self.max_backoff
    }

    /// The growth of each wait over the one before (`backoffMultiplier`).
    pub(crate) const fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The cap on a server's pushback, if any.
    pub(crate) const fn max_pushback(&self) -> Option<Duration> {
        self.max_pushback
    }

    /// The shortest first wait the jitter can draw: the first base less a
    /// fifth, as [`next_delay`](Retryer::next_delay) spreads it. The
    /// configuration's check that a deadline leaves room for a retry reads it.
    #[cfg(feature = "serde")]
    pub(crate) fn shortest_first_wait(&self) -> Duration {
        let base = grown(self.initial, self.multiplier, 1, self.max_backoff);
        base.saturating_sub(base / 5)
    }
}

/// Shows the settings; the random state of a request's jitter and where its
/// backoff starts again are left out.
impl fmt::Debug for GrpcBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcBackoff")
            .field("max_attempts", &self.max_attempts)
            .field("attempt_cap", &self.cap)
            .field("initial", &self.initial)
            .field("max_backoff", &self.max_backoff)
            .field("multiplier", &self.multiplier)
            .field("max_pushback", &self.max_pushback)
            .finish_non_exhaustive()
    }
}

impl Retryer for GrpcBackoff {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        if attempts >= self.max_attempts() {
            return None;
        }
        if let Some(asked) = server_delay {
            self.restart_after = attempts;
            return Some(self.max_pushback.map_or(asked, |max| capped(asked, max)));
        }
        let n = attempts.saturating_sub(self.restart_after).max(1);
        let base = grown(self.initial, self.multiplier, n, self.max_backoff);
        // NOTE: base × (0.8 + 0.4u), in parts that cannot overflow.
        let fifth = base / 5;
        let low = base.saturating_sub(fifth);
        let span = fifth.saturating_mul(2);
        Some(low.saturating_add(scale(span, self.rng.next_unit(), span)))
    }

    fn for_request(&self) -> Self {
        Self {
            rng: self.seeds.next_rng(),
            restart_after: 0,
            ..self.clone()
        }
    }

    fn max_attempts(&self) -> Option<u32> {
        Some(GrpcBackoff::max_attempts(self))
    }

    fn with_max_attempts(mut self, max: u32) -> Result<Self, InvalidSetting> {
        if max < 2 {
            let err =
                InvalidSetting::new("max_attempts", "must be at least 2 for a gRPC retry policy");
            return Err(err.with_value(max.to_string()));
        }
        self.max_attempts = max;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    fn within(delay: Duration, base: Duration) -> bool {
        delay >= base.mul_f64(0.8) && delay <= base.mul_f64(1.2)
    }

    #[test]
    fn waits_grow_within_a_fifth_of_the_base_and_stop_at_the_cap() {
        for seed in 0..200 {
            let mut retryer = GrpcBackoff::new(9, MS(100), MS(1000), 2.0)
                .unwrap()
                .with_seed(seed)
                .for_request();
            for (attempt, base) in [(1, 100), (2, 200), (3, 400), (4, 800)] {
                let delay = retryer.next_delay(attempt, None).unwrap();
                assert!(within(delay, MS(base)), "seed {seed}: {attempt}: {delay:?}");
            }
            assert_eq!(retryer.next_delay(5, None), None, "capped at 5 attempts");
        }
    }

    #[test]
    fn the_jitter_spreads_both_ways() {
        let retryer = GrpcBackoff::new(5, MS(1000), MS(1000), 1.0)
            .unwrap()
            .with_seed(7);
        let delays: Vec<_> = (0..200)
            .map(|_| retryer.for_request().next_delay(1, None).unwrap())
            .collect();
        assert!(delays.iter().any(|d| *d < MS(900)), "some below the base");
        assert!(delays.iter().any(|d| *d > MS(1100)), "some above the base");
        assert!(delays.iter().all(|d| within(*d, MS(1000))));
    }

    #[test]
    fn a_pushback_is_the_wait_and_restarts_the_backoff() {
        let mut retryer = GrpcBackoff::new(5, MS(100), MS(10_000), 10.0)
            .unwrap()
            .with_seed(3)
            .for_request();
        assert!(within(retryer.next_delay(1, None).unwrap(), MS(100)));
        assert_eq!(
            retryer.next_delay(2, Some(MS(60_000))),
            Some(MS(60_000)),
            "not capped"
        );
        assert!(within(retryer.next_delay(3, None).unwrap(), MS(100)));
        assert!(within(retryer.next_delay(4, None).unwrap(), MS(1000)));
        // A new request starts from the beginning.
        let mut fresh = retryer.for_request();
        assert!(within(fresh.next_delay(2, None).unwrap(), MS(1000)));
    }

    #[test]
    fn a_pushback_is_capped_when_asked() {
        let mut retryer = GrpcBackoff::new(5, MS(100), MS(1000), 2.0)
            .unwrap()
            .with_max_pushback(MS(2000))
            .with_seed(3)
            .for_request();
        assert_eq!(retryer.max_pushback(), Some(MS(2000)));
        assert_eq!(retryer.next_delay(1, Some(MS(60_000))), Some(MS(2000)));
        assert_eq!(retryer.next_delay(2, Some(MS(500))), Some(MS(500)));
        let largest = Duration::from_millis(i32::MAX.unsigned_abs().into());
        assert_eq!(retryer.next_delay(3, Some(largest)), Some(MS(2000)));
        // The backoff starts again after a capped pushback too.
        assert!(within(retryer.next_delay(4, None).unwrap(), MS(100)));
        // Without a cap, the server's wait is whole.
        let mut uncapped = GrpcBackoff::new(5, MS(100), MS(1000), 2.0)
            .unwrap()
            .for_request();
        assert_eq!(uncapped.max_pushback(), None);
        assert_eq!(uncapped.next_delay(1, Some(largest)), Some(largest));
    }

    #[cfg(feature = "serde")]
    #[test]
    fn the_shortest_first_wait_is_the_lowest_jitter() {
        let retryer = GrpcBackoff::new(5, MS(100), MS(1000), 2.0).unwrap();
        assert_eq!(retryer.shortest_first_wait(), MS(80));
        for seed in 0..200 {
            let first = retryer
                .clone()
                .with_seed(seed)
                .for_request()
                .next_delay(1, None)
                .unwrap();
            assert!(first >= retryer.shortest_first_wait(), "{seed}: {first:?}");
        }
    }

    #[test]
    fn the_cap_moves() {
        let retryer = GrpcBackoff::new(8, MS(1), MS(1), 1.0).unwrap();
        assert_eq!(retryer.max_attempts(), 5);
        assert_eq!(retryer.clone().with_attempt_cap(10).max_attempts(), 8);
        assert_eq!(retryer.with_attempt_cap(0).max_attempts(), 2);
    }

    #[test]
    fn nonsense_is_refused_by_field() {
        for (attempts, initial, max, multiplier, field) in [
            (1, MS(100), MS(1000), 2.0, "max_attempts"),
            (0, MS(100), MS(1000), 2.0, "max_attempts"),
            (3, MS(0), MS(1000), 2.0, "delay"),
            (3, MS(100), MS(10), 2.0, "max_delay"),
            (3, MS(100), MS(1000), 0.0, "multiplier"),
            (3, MS(100), MS(1000), -1.0, "multiplier"),
            (3, MS(100), MS(1000), f64::NAN, "multiplier"),
            (3, MS(100), MS(1000), f64::INFINITY, "multiplier"),
        ] {
            let err = GrpcBackoff::new(attempts, initial, max, multiplier).unwrap_err();
            assert_eq!(err.field(), field, "{err}");
        }
        // Huge settings do not panic.
        let mut huge = GrpcBackoff::new(5, Duration::MAX / 2, Duration::MAX, 1e300).unwrap();
        assert!(huge.next_delay(4, None).is_some());
    }
}
