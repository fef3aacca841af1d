//! The stacks under test. Every variant is the same retry stack with a
//! different overload control in the middle, outermost first:
//!
//! `DeadlineLayer` → `StatusRetryLayer` (transient outcomes, exponential
//! backoff, a retry budget) → *control* → `AttemptTimeoutLayer` → upstream.
//!
//! A variant is one function from the upstream to a boxed stack; each call of
//! it makes a fresh budget and a fresh control, so no state carries over from
//! one cell of the table to the next.

use super::upstream::{Body, Upstream};
use crate::{
    ATTEMPT_TIMEOUT, BACKOFF_INITIAL, BACKOFF_MAX, BUDGET_RATIO, BUDGET_TOKENS, DEADLINE,
    MAX_ATTEMPTS, SERVICE_TIME, SLOTS,
};
use http::{Request, Response};
use http_resilience::{
    attempt_timeout::AttemptTimeout,
    guard::GuardLayer,
    overload::{AdaptiveLimit, OverloadPolicy, Throttle},
    policy::{ExponentialBackoff, Jitter, RetryBudget, TransientDecoder},
    retry::RetryPolicy,
    AttemptTimeoutLayer, BoxError, DeadlineLayer, StatusRetryLayer,
};
use std::sync::Arc;
use tower::{
    layer::util::Identity, util::BoxCloneService, Layer, Service, ServiceBuilder, ServiceExt,
};
use tower_resilience::adaptive::{AdaptiveError, AdaptiveLimiterLayer, Aimd};

/// A stack under test, boxed so that every variant has one type. The
/// response keeps its status only: the driver reads nothing else.
pub(crate) type Stack = BoxCloneService<Request<Body>, Response<()>, BoxError>;

/// The seed of every random draw of the stacks (the backoff's jitter, the
/// throttle's).
const SEED: u64 = 7;

/// What every control wraps.
type Attempt = AttemptTimeout<Upstream>;
/// What every control answers: the attempt's response, as the upstream gave it.
type AttemptResponse = Response<Body>;

/// One column of the comparison: a name for the table and how to build it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Variant {
    pub(crate) name: &'static str,
    pub(crate) build: fn(Upstream) -> Stack,
}

/// The variants, in the table's order.
pub(crate) fn all() -> Vec<Variant> {
    vec![
        Variant {
            name: "no control",
            build: no_control,
        },
        Variant {
            name: "tower `ConcurrencyLimit` + `LoadShed`",
            build: tower_limit,
        },
        Variant {
            name: "tower-resilience AIMD + `LoadShed`",
            build: tower_resilience_aimd,
        },
        Variant {
            name: "`GuardLayer<OverloadPolicy>`, bulkhead",
            build: bulkhead,
        },
        Variant {
            name: "`GuardLayer<OverloadPolicy>`, adaptive",
            build: adaptive,
        },
        Variant {
            name: "`GuardLayer<OverloadPolicy>`, adaptive + throttle",
            build: adaptive_throttled,
        },
    ]
}

/// The retry every variant shares: the transient outcomes (503 among them),
/// three attempts at most, waits of 10 ms then 20 ms (full jitter, seeded),
/// and gRPC's token bucket as the budget.
fn retry_policy() -> RetryPolicy<TransientDecoder, ExponentialBackoff> {
    let backoff = ExponentialBackoff::new(BACKOFF_INITIAL, 2.0, BACKOFF_MAX, MAX_ATTEMPTS)
        .expect("valid backoff")
        .with_jitter(Jitter::Full)
        .with_seed(SEED);
    let budget = RetryBudget::new(BUDGET_TOKENS, BUDGET_RATIO).expect("valid budget");
    RetryPolicy::new(TransientDecoder::new(), backoff)
        .map_options(|o| o.with_budget(Arc::new(budget)))
}

/// The shared stack with `control` between the retry and the attempt timeout.
fn around<L>(control: L, upstream: Upstream) -> Stack
where
    L: Layer<Attempt>,
    L::Service: Service<Request<Body>, Response = AttemptResponse, Error = BoxError>
        + Clone
        + Send
        + 'static,
    <L::Service as Service<Request<Body>>>::Future: Send + 'static,
{
    let stack = ServiceBuilder::new()
        .layer(DeadlineLayer::new(DEADLINE))
        .layer(StatusRetryLayer::new(retry_policy()))
        .layer(control)
        .layer(AttemptTimeoutLayer::new(ATTEMPT_TIMEOUT))
        .service(upstream)
        .map_response(|response| response.map(|_| ()));
    BoxCloneService::new(stack)
}

/// No overload control: the retry stack alone.
fn no_control(upstream: Upstream) -> Stack {
    around(Identity::new(), upstream)
}

/// tower's static limit of `SLOTS` attempts in flight, shedding at once
/// (`LoadShed` turns the limit's wait into an `Overloaded` error, which the
/// retry does not retry).
fn tower_limit(upstream: Upstream) -> Stack {
    let control = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(SLOTS)
        .into_inner();
    around(control, upstream)
}

/// tower-resilience's adaptive limiter (AIMD: +1 per fast outcome, halved on
/// an error or an outcome slower than twice the service time), starting at
/// `SLOTS`, between 1 and `4 × SLOTS`; behind `LoadShed`, since it otherwise
/// waits in `poll_ready` with no bound on its queue.
fn tower_resilience_aimd(upstream: Upstream) -> Stack {
    let aimd = Aimd::builder()
        .initial_limit(SLOTS)
        .min_limit(1)
        .max_limit(4 * SLOTS)
        .latency_threshold(SERVICE_TIME * 2)
        .build()
        .expect("valid AIMD settings");
    let control = ServiceBuilder::new()
        .load_shed()
        .map_err(unwrap_adaptive)
        .layer(AdaptiveLimiterLayer::new(aimd))
        .into_inner();
    around(control, upstream)
}

/// The inner error as it was (so the retry's decoder sees it typed), or the
/// limiter's own.
fn unwrap_adaptive(error: AdaptiveError<BoxError>) -> BoxError {
    match error {
        AdaptiveError::Service(inner) => inner,
        limit @ AdaptiveError::LimitReached => limit.into(),
    }
}

/// This library's bulkhead: `SLOTS` attempts in flight and `SLOTS` more
/// waiting in order, each wait bounded by the call's deadline.
fn bulkhead(upstream: Upstream) -> Stack {
    let slots = u32::try_from(SLOTS).expect("a small number");
    let policy = OverloadPolicy::bulkhead(slots)
        .expect("a valid bulkhead")
        .with_queue(slots);
    around(GuardLayer::new(policy), upstream)
}

/// This library's adaptive limit with its defaults (from 20, within
/// `[1, 1000]`), no queue.
fn adaptive(upstream: Upstream) -> Stack {
    let policy = OverloadPolicy::adaptive(AdaptiveLimit::default()).with_seed(SEED);
    around(GuardLayer::new(policy), upstream)
}

/// The adaptive limit with client-side throttling, both with their
/// defaults (`K` = 2 over two minutes).
fn adaptive_throttled(upstream: Upstream) -> Stack {
    let policy = OverloadPolicy::adaptive(AdaptiveLimit::default())
        .with_throttle(Throttle::default())
        .with_seed(SEED);
    around(GuardLayer::new(policy), upstream)
}
