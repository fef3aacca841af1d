//! The rate limits compared on their closed path (under the limit, the key
//! known): ours, governor's `RateLimiter::check` (direct, and keyed by the
//! request's authority in its `HashMap` store), and tower's `RateLimit`.
//! Each is set so far above the calls made that no call waits.

use governor::{Quota, RateLimiter};
use http::Request;

use http_resilience::guard::GuardLayer;
use http_resilience::rate_limit::RateLimitPolicy;
use std::{
    fmt,
    num::NonZeroU32,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};
use tower::{Layer, Service};

/// `inner` behind our rate limit, far above the calls made: a slot taken
/// per call with one compare-and-swap.
pub(crate) fn with_rate_limit<S>(inner: S) -> <GuardLayer<RateLimitPolicy> as Layer<S>>::Service {
    let limit = RateLimitPolicy::new(u32::MAX, Duration::from_secs(1))
        .expect("a rate")
        .with_burst(1_000_000)
        .expect("a burst");
    GuardLayer::new(limit).layer(inner)
}

/// `inner` behind tower's `RateLimit`, as many calls a second as it counts.
pub(crate) fn with_tower_rate_limit<S>(inner: S) -> tower::limit::RateLimit<S> {
    let rate = tower::limit::rate::Rate::new(u64::MAX, Duration::from_secs(1));
    tower::limit::RateLimit::new(inner, rate)
}

/// Which of governor's limiters.
#[derive(Clone)]
enum Limiter {
    Direct(Arc<governor::DefaultDirectRateLimiter>),
    Keyed(Arc<governor::DefaultKeyedRateLimiter<http::uri::Authority>>),
}

/// `inner` behind governor's `check`, one limiter for every call
/// (`keyed = false`) or one per authority.
#[derive(Clone)]
pub(crate) struct Governed<S> {
    inner: S,
    limiter: Limiter,
}

impl<S> fmt::Debug for Governed<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Governed").finish_non_exhaustive()
    }
}

pub(crate) fn with_governor<S>(inner: S, keyed: bool) -> Governed<S> {
    let quota = Quota::per_second(NonZeroU32::MAX).allow_burst(NonZeroU32::new(1_000_000).unwrap());
    let limiter = match keyed {
        false => Limiter::Direct(Arc::new(RateLimiter::direct(quota))),
        true => Limiter::Keyed(Arc::new(RateLimiter::keyed(quota))),
    };
    Governed { inner, limiter }
}

/// NOTE: the inner future is returned as it is (a call over the limit is
/// a bench's mistake, and panics), so that nothing but `check` is counted.
impl<S, B> Service<Request<B>> for Governed<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let allowed = match &self.limiter {
            Limiter::Direct(limiter) => limiter.check().is_ok(),
            Limiter::Keyed(limiter) => match request.uri().authority() {
                Some(authority) => limiter.check_key(authority).is_ok(),
                None => true,
            },
        };
        assert!(allowed, "far above the calls made");
        self.inner.call(request)
    }
}
