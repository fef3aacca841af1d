//! The guards of a client's policy as the configuration builds them.

use crate::{
    breaker::BreakerPolicy,
    guard::{sealed, Ask, Settle},
    overload::OverloadPolicy,
    policy::AnyDecoder,
    rate_limit::RateLimitPolicy,
    BoxError, RequestDeadline,
};
use std::task::{Context, Poll};

/// The guards of a [`ClientPolicy`](super::ClientPolicy): the rate limit
/// first, then overload control, then the circuit breaker (the order of the
/// [`GuardLayer`](crate::guard::GuardLayer)s between the three layers'
/// retry and attempt timeout), each where the client's section turns it on.
/// The rate limit comes first so that a call waiting for its slot holds no
/// slot of overload control.
///
/// A guard of one's own choosing replaces the file's by a field:
///
/// ```
/// use http_resilience::key::PerKey;
/// use http_resilience::{config::ClientsConfig, key::UpstreamKey};
///
/// let config = ClientsConfig::from_toml_str("[clients.search.breaker]\nbreak_duration = \"10s\"\n")?;
/// let search = config.policy("search")?;
/// let mut guards = search.guard().clone();
/// guards.breaker = guards
///     .breaker
///     .map(|breaker| breaker.with_key(|uri, _| UpstreamKey::custom(uri.path())));
/// let search = search.with_guard(guards);
/// assert!(search.guard().overload.is_none());
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClientGuards {
    /// The rate limit, if the client has one.
    pub rate_limit: Option<RateLimitPolicy>,
    /// Overload control, if the client has it.
    pub overload: Option<OverloadPolicy>,
    /// The circuit breaker, if the client has one.
    pub breaker: Option<BreakerPolicy<AnyDecoder>>,
}

/// The pairs the guards are asked as: the rate limit, then overload control
/// and the breaker.
type Pair = (
    Option<RateLimitPolicy>,
    (Option<OverloadPolicy>, Option<BreakerPolicy<AnyDecoder>>),
);

impl sealed::Sealed for ClientGuards {
    type Local = <Pair as sealed::Sealed>::Local;
    type Pass = <Pair as sealed::Sealed>::Pass;

    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        let rate_limit = self.rate_limit.pass_for(&mut local.0, request);
        let overload = self.overload.pass_for(&mut local.1 .0, request);
        let breaker = self.breaker.pass_for(&mut local.1 .1, request);
        (rate_limit, (overload, breaker, false), false)
    }

    fn admit(pass: &mut Self::Pass, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        Pair::admit(pass, ask)
    }

    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        Pair::poll_admit(pass, deadline, cx)
    }

    fn release(pass: &mut Self::Pass) {
        Pair::release(pass);
    }
}

impl<T> sealed::SealedSettle<T> for ClientGuards
where
    Pair: Settle<T>,
{
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        Pair::settle(pass, outcome);
    }
}

impl From<()> for ClientGuards {
    fn from((): ()) -> Self {
        Self::default()
    }
}

impl<D: Into<AnyDecoder> + Clone> From<BreakerPolicy<D>> for ClientGuards {
    fn from(breaker: BreakerPolicy<D>) -> Self {
        Self {
            rate_limit: None,
            overload: None,
            breaker: Some(breaker.erase()),
        }
    }
}

#[cfg(feature = "otel")]
impl crate::otel::wiring::sealed::Sealed for ClientGuards {
    fn attach_metrics(&self, metrics: &crate::otel::Metrics) {
        self.rate_limit.attach_metrics(metrics);
        self.overload.attach_metrics(metrics);
        self.breaker.attach_metrics(metrics);
    }
}
