//! Known-good policies, each with its source.
//!
//! | preset | decoder | retries | backoff | attempt | deadline |
//! |---|---|---|---|---|---|
//! | [`reactor`] | 503 only | 2 | fixed 10 ms | 3 s | 8 s |
//! | [`feign`] | OpenFeign's default | 4 | Feign's (150 ms, × 1.5, ≤ 1 s) | 60 s | 5 min |
//! | [`standard`] | transient, and a circuit breaker per authority | 3 | exponential 2 s, × 2, decorrelated jitter, ≤ 30 s | 10 s | 30 s |
//! | [`conservative`] | transient | 1 | exponential 500 ms, full jitter | 5 s | 10 s |
//! | [`apache`] | Apache's `DefaultHttpRequestRetryHandler` | 3 | none | 10 s | 60 s |
//! | [`grpc`] | gRPC's (`UNAVAILABLE`, pushback) | 4 | A6's (100 ms, × 2, ≤ 1 s, ± 20 %), token bucket 10 / 0.1 | 30 s | 30 s |
//!
//! Each returns a [`ResiliencePolicy`]; [`ResiliencePolicy::layer`] makes from it the
//! one service with the semantics of the three layers in the canonical order.
//!
//! Deadline-aware scheduling ([`CallOptions::deadline_aware`](crate::policy::CallOptions::deadline_aware)) is on in
//! [`standard`] and [`conservative`] (a retry whose wait plus 500 ms, the
//! least time an HTTP attempt needs to be worth making, cannot fit before the
//! deadline is not made; the last outcome is returned at once) and in
//! [`grpc`] (with 100 ms), and off in [`reactor`], [`feign`] and
//! [`apache`], which keep their sources' exact behaviour (in Reactor's, the
//! deadline cuts the wait).
//!
//! # Example
//!
//! ```
//! use http_resilience::presets;
//! use std::time::Duration;
//!
//! let standard = presets::standard();
//! assert_eq!(standard.deadline(), Duration::from_secs(30));
//! assert_eq!(standard.attempt_timeout(), Duration::from_secs(10));
//! let layer = standard.layer();
//! # let _ = layer;
//! ```

#[cfg(feature = "breaker")]
use crate::breaker::BreakerPolicy;
#[cfg(feature = "grpc")]
use crate::policy::{GrpcBackoff, GrpcDecoder, RetryBudget, GRPC_PREVIOUS_RPC_ATTEMPTS};
use crate::{
    policy::{
        ApacheDecoder, ExponentialBackoff, FeignDecoder, FeignRetryer, FixedDelay, Jitter,
        StatusDecoder, TransientDecoder,
    },
    resilience::ResiliencePolicy,
    retry::RetryPolicy,
};
#[cfg(feature = "grpc")]
use std::sync::Arc;
use std::time::Duration;

/// Reactor WebClient's nested-timeouts policy: only 503 is retried, at most twice (three
/// attempts), 10 ms apart; 3 s per attempt, 8 s in all. `Retry-After` is
/// ignored, as in that policy.
pub fn reactor() -> ResiliencePolicy<StatusDecoder, FixedDelay> {
    ResiliencePolicy::known_good(
        Duration::from_secs(8),
        Duration::from_secs(3),
        RetryPolicy::new(
            StatusDecoder::known_good(&[503]),
            FixedDelay::new(Duration::from_millis(10), 2),
        ),
    )
}

/// OpenFeign's defaults: `ErrorDecoder.Default` (an error status is retried
/// only with `Retry-After`; I/O failures are retried) and `Retryer.Default`
/// (5 attempts, 100 ms period, 1 s maximum). The attempt limit is Feign's
/// default read timeout, 60 s. Feign has no deadline of its own; 5 minutes
/// covers its worst case (5 attempts of 60 s).
pub fn feign() -> ResiliencePolicy<FeignDecoder, FeignRetryer> {
    ResiliencePolicy::known_good(
        Duration::from_secs(300),
        Duration::from_secs(60),
        RetryPolicy::new(FeignDecoder::new(), FeignRetryer::default()),
    )
}

/// The standard resilience handler of .NET
/// (`Microsoft.Extensions.Http.ResiliencePolicy`): 30 s in all, 10 s per attempt,
/// 3 retries with exponential backoff from 2 s and jitter (decorrelated, as
/// Polly uses for exponential backoff), on the transient outcomes (408, 429,
/// 5xx but 501 and 505, connect failures, HTTP/2 streams refused
/// unprocessed). Unlike .NET, a `Retry-After`
/// longer than 30 s is capped.
///
/// Every attempt passes a circuit breaker per authority with .NET's
/// standard settings ([`BreakerPolicy::default`]): it opens when 10 % of at
/// least 100 calls over 30 s failed, for 5 s, judging with the same
/// transient outcomes; and also, as linkerd's does, after 5 failures in a
/// row, so that an upstream with little traffic trips too. Each call of
/// `standard()` makes a breaker with circuits of its own: make the layer
/// once and clone it (its clones share the circuits).
#[cfg(feature = "breaker")]
pub fn standard(
) -> ResiliencePolicy<TransientDecoder, ExponentialBackoff, BreakerPolicy<TransientDecoder>> {
    ResiliencePolicy::known_good(
        Duration::from_secs(30),
        Duration::from_secs(10),
        RetryPolicy::new(
            TransientDecoder::new(),
            ExponentialBackoff::known_good(Duration::from_secs(2), 2.0, Duration::from_secs(30), 4)
                .with_jitter(Jitter::Decorrelated),
        )
        .map_options(|o| o.deadline_aware(MIN_USEFUL_ATTEMPT)),
    )
    .with_guard(BreakerPolicy::default())
}

/// The least time an attempt needs to be worth making, for the HTTP presets
/// with deadline-aware scheduling ([`standard`], [`conservative`]).
const MIN_USEFUL_ATTEMPT: Duration = Duration::from_millis(500);

/// The least time an attempt needs to be worth making, for [`grpc`]: 100 ms.
///
/// A retried gRPC call goes out on a channel already open (HTTP/2 streams
/// share the connection), so a useful attempt needs a round trip and the
/// server's work, not a new connection and a TLS handshake as an HTTP
/// attempt may. 100 ms, A6's initial backoff, covers that in one region and
/// still lets a caller who gives a call a few hundred milliseconds (tonic's
/// `Request::set_timeout`) have a retry, where [`MIN_USEFUL_ATTEMPT`] would
/// refuse every one.
#[cfg(feature = "grpc")]
pub(crate) const GRPC_MIN_USEFUL_ATTEMPT: Duration = Duration::from_millis(100);

/// One retry only, after about half a second, on the transient outcomes; 5 s
/// per attempt, 10 s in all. For calls where a second try is worth it but
/// load on a struggling upstream must stay low. (This crate's own choice.)
pub fn conservative() -> ResiliencePolicy<TransientDecoder, ExponentialBackoff> {
    ResiliencePolicy::known_good(
        Duration::from_secs(10),
        Duration::from_secs(5),
        RetryPolicy::new(
            TransientDecoder::new(),
            ExponentialBackoff::known_good(
                Duration::from_millis(500),
                2.0,
                Duration::from_secs(2),
                2,
            )
            .with_jitter(Jitter::Full),
        )
        .map_options(|o| o.deadline_aware(MIN_USEFUL_ATTEMPT)),
    )
}

/// Apache HttpClient 4's `DefaultHttpRequestRetryHandler`: 3 retries, at
/// once; responses are never retried; timeouts, unknown hosts, refused
/// connections and TLS failures are never retried; a request that was sent is
/// retried only when idempotent (`requestSentRetryEnabled` off). Apache sets no
/// time limits of its own; 10 s per attempt and 60 s in all are this crate's.
pub fn apache() -> ResiliencePolicy<ApacheDecoder, FixedDelay> {
    ResiliencePolicy::known_good(
        Duration::from_secs(60),
        Duration::from_secs(10),
        RetryPolicy::new(ApacheDecoder::new(), FixedDelay::new(Duration::ZERO, 3)),
    )
}

/// gRPC's retry design (proposal A6), with the numbers of its example
/// policy and `maxAttempts` at A6's cap: `UNAVAILABLE` retried
/// ([`GrpcDecoder`], server pushback honoured), 5 attempts in all, backoff
/// from 100 ms, × 2, at most 1 s, ± 20 % ([`GrpcBackoff`]), retry throttling
/// with A6's example bucket (10 tokens, 0.1 per success; a new bucket for
/// every call of this function, so one per client), and
/// `grpc-previous-rpc-attempts` on every retry.
///
/// gRPC sets no deadline of its own; 30 s covers the call, its waits and its
/// response stream. gRPC has no limit per attempt either, so the attempt
/// limit is the deadline. Change them with
/// [`with_deadline`](ResiliencePolicy::with_deadline) and
/// [`with_attempt_timeout`](ResiliencePolicy::with_attempt_timeout) (raise
/// them for long-lived streams); a caller shortens one call with tonic's
/// `Request::set_timeout`.
///
/// Scheduling is deadline-aware ([`CallOptions::deadline_aware`](crate::policy::CallOptions::deadline_aware) with
/// 100 ms, the least time a gRPC attempt needs to be worth making: a round
/// trip on a channel already open and the server's work): when a server's pushback, or the
/// backoff, plus 100 ms cannot fit before the deadline, no wait happens, and
/// the caller gets the server's response (its `UNAVAILABLE`, trailers-only) at
/// once, its [`Attempts`](crate::Attempts) saying
/// [`Stop::WouldMissDeadline`](crate::Stop::WouldMissDeadline); a pushback of
/// a minute against the 30 s deadline ends the call there and then. The
/// pushback itself is not capped ([`GrpcBackoff::with_max_pushback`] is off):
/// the deadline is what bounds it. Raised to `Duration::MAX` (no deadline in
/// practice), a server's `grpc-retry-pushback-ms` can hold a call, its task
/// and the kept copy of its request for up to `i32::MAX` ms, about 24.8 days;
/// set a cap with [`map_retry`](ResiliencePolicy::map_retry) and
/// [`RetryPolicy::map`]:
///
/// ```
/// use http_resilience::presets;
/// use std::time::Duration;
///
/// let long_lived = presets::grpc()
///     .with_deadline(Duration::MAX)?
///     .with_attempt_timeout(Duration::MAX)?
///     .map_retry(|retry| {
///         retry.map(|decoder| decoder, |backoff| backoff.with_max_pushback(Duration::from_secs(10)))
///     });
/// assert!(format!("{long_lived:?}").contains("max_pushback: Some(10s)"));
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
///
/// Around a tonic `Channel`, [`grpc::GrpcLayer`](crate::grpc::GrpcLayer)
/// (feature `grpc`) stacks it with `grpc-timeout` propagation and the
/// statuses a tonic caller expects.
#[cfg(feature = "grpc")]
pub fn grpc() -> ResiliencePolicy<GrpcDecoder, GrpcBackoff> {
    let budget = RetryBudget::known_good(10, 100);
    ResiliencePolicy::known_good(
        Duration::from_secs(30),
        Duration::from_secs(30),
        RetryPolicy::new(
            GrpcDecoder::default(),
            GrpcBackoff::known_good(5, Duration::from_millis(100), Duration::from_secs(1), 2.0),
        )
        .map_options(|o| {
            o.with_budget(Arc::new(budget))
                .with_previous_attempts_header(GRPC_PREVIOUS_RPC_ATTEMPTS)
                .deadline_aware(GRPC_MIN_USEFUL_ATTEMPT)
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_hold_their_documented_numbers() {
        let reactor = reactor();
        assert_eq!(
            (reactor.deadline(), reactor.attempt_timeout()),
            (Duration::from_secs(8), Duration::from_secs(3))
        );
        assert_eq!(reactor.retry().retryer().retries(), 2);
        let standard = standard();
        assert_eq!(standard.retry().retryer().max_attempts(), 4);
        assert_eq!(standard.retry().retryer().jitter(), Jitter::Decorrelated);
        assert_eq!(conservative().retry().retryer().max_attempts(), 2);
        assert_eq!(feign().attempt_timeout(), Duration::from_secs(60));
        let grpc = grpc();
        assert_eq!(grpc.retry().retryer().max_attempts(), 5);
        assert_eq!(
            grpc.retry().decoder().retryable_codes().collect::<Vec<_>>(),
            [14]
        );
        let budget = grpc.retry().budget().expect("a budget");
        assert_eq!((budget.max_tokens(), budget.token_ratio()), (10, 0.1));
        assert_eq!(
            grpc.retry().options().deadline_margin(),
            Some(GRPC_MIN_USEFUL_ATTEMPT)
        );
        assert_eq!(grpc.retry().retryer().max_pushback(), None, "opt-in");
        assert_eq!(
            standard.retry().options().deadline_margin(),
            Some(MIN_USEFUL_ATTEMPT)
        );
    }

    /// The presets skip the checks of the public constructors; these hold
    /// their numbers to the same checks.
    fn passes_the_checks<D: Clone, R: Clone, G>(name: &str, preset: &ResiliencePolicy<D, R, G>) {
        if let Err(err) = ResiliencePolicy::new(
            preset.deadline(),
            preset.attempt_timeout(),
            preset.retry().clone(),
        ) {
            panic!("{name}: {err}");
        }
    }

    fn backoff_passes_the_checks(name: &str, backoff: &ExponentialBackoff) {
        let checked = ExponentialBackoff::new(
            backoff.initial(),
            backoff.multiplier(),
            backoff.max_delay(),
            backoff.max_attempts(),
        );
        if let Err(err) = checked {
            panic!("{name}: {err}");
        }
    }

    #[test]
    fn presets_pass_the_checks_of_the_public_constructors() {
        passes_the_checks("reactor", &reactor());
        passes_the_checks("feign", &feign());
        passes_the_checks("standard", &standard());
        passes_the_checks("conservative", &conservative());
        passes_the_checks("apache", &apache());
        passes_the_checks("grpc", &grpc());
        let backoff = grpc().retry().retryer().clone();
        let checked = GrpcBackoff::new(
            backoff.max_attempts(),
            backoff.initial(),
            backoff.max_backoff(),
            backoff.multiplier(),
        );
        assert!(checked.is_ok(), "grpc: {checked:?}");
        backoff_passes_the_checks("standard", standard().retry().retryer());
        backoff_passes_the_checks("conservative", conservative().retry().retryer());
        backoff_passes_the_checks("default", &ExponentialBackoff::default());
        let statuses: Vec<u16> = reactor()
            .retry()
            .decoder()
            .statuses()
            .map(|s| s.as_u16())
            .collect();
        assert_eq!(statuses, [503]);
    }
}
