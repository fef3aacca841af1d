//! Retry amplification during an outage: see [`Outage`].

use crate::{
    load::{self, Load},
    metrics::{sum, Bucket},
    report::{percent, times, Report},
    simulate,
    upstream::{Fault, Latency, Model, Window},
};
use http::{Request, Response, StatusCode};
use http_resilience::{
    policy::{ExponentialBackoff, Jitter, RetryBudget, StatusDecoder},
    retry::RetryPolicy,
    AttemptTimeoutLayer, BoxError, DeadlineLayer, StatusRetryLayer,
};
use std::{convert::Infallible, sync::Arc, time::Duration};
use tower::{util::BoxCloneService, ServiceBuilder, ServiceExt};

const SECOND: Duration = Duration::from_secs(1);
/// The faults of the timeline, in seconds: `[from, until)`.
const OUTAGE: (u64, u64) = (10, 30);
const BROWN_OUT: (u64, u64) = (30, 50);
/// When the callers stop.
const END: u64 = 60;
/// The phases the figures count calls in, by when they started. A call
/// whose every attempt fails lasts up to about 1.6 s (its services' waits
/// between attempts), so the calls of a fault's last 2 s, which end after
/// it, count in none.
const HEALTHY: (u64, u64) = (0, OUTAGE.0);
const IN_OUTAGE: (u64, u64) = (OUTAGE.0, OUTAGE.1 - 2);
const IN_BROWN_OUT: (u64, u64) = (BROWN_OUT.0, BROWN_OUT.1 - 2);
const RECOVERED: (u64, u64) = (BROWN_OUT.1, END);
/// The share of D's answers that are 503 during the brown-out.
const BROWN_OUT_ERRORS: f64 = 0.5;
/// The attempts of every service's calls below: 3 retries.
const ATTEMPTS: u32 = 4;

/// How one strategy fared in one phase of the timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Phase {
    /// The users' calls started in the phase.
    pub calls: u64,
    /// The attempts those calls caused at the deepest service, D.
    pub attempts: u64,
    /// Those calls that ended with a 200.
    pub good: u64,
}

impl Phase {
    /// The attempts at D per user's call.
    pub fn amplification(&self) -> f64 {
        self.attempts as f64 / self.calls.max(1) as f64
    }

    /// The share of the users' calls that ended with a 200.
    pub fn success(&self) -> f64 {
        self.good as f64 / self.calls.max(1) as f64
    }
}

/// One strategy's figures, phase by phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amplification {
    /// 0–10 s, before the outage.
    pub healthy: Phase,
    /// 10–28 s: every answer of D a 503 (the outage lasts until 30 s).
    pub outage: Phase,
    /// 30–48 s: half the answers of D 503 (until 50 s).
    pub brown_out: Phase,
    /// 50–60 s: healthy again.
    pub recovered: Phase,
}

/// Retry amplification: three layers of services, each retrying 3 times,
/// during an outage of the deepest.
///
/// Users call service A; A calls B, B calls C and C calls the upstream D,
/// each through the three layers ([`DeadlineLayer`] → [`StatusRetryLayer`]
/// → [`AttemptTimeoutLayer`]) with the same policy: 503 retried, 4 attempts
/// (3 retries), exponential backoff from 10 ms with full jitter. A service
/// whose call below failed answers 503 itself, which the service above
/// retries. When D answers nothing but 503, a user's call makes 4 attempts
/// at B, each 4 at C, each 4 at D: 4³ = 64.
///
/// With the strategy on, each service's client shares one
/// [`RetryBudget`] among all its calls (gRPC's retry throttling with the
/// numbers of its example, 10 tokens and 0.1 per success): once a service's
/// calls below have failed 5 times more than the successes paid for, it
/// stops retrying until successes refill the bucket.
///
/// The timeline: healthy 0–10 s, a hard outage of D 10–30 s, a brown-out of
/// D (half its answers 503) 30–50 s, healthy again 50–60 s.
///
/// The figures of each strategy, and the [`Report`]; see the
/// [crate docs](crate) for an example.
#[derive(Debug, Clone)]
pub struct Outage {
    /// Retries at every layer, no budget.
    pub retries: Amplification,
    /// The same retries, each service's under a shared budget.
    pub budgeted: Amplification,
    report: Report,
}

impl Outage {
    /// Runs the scenario with `seed`: the same seed, the same figures.
    pub fn run(seed: u64) -> Self {
        let (retries, plain) = simulate(|| one(seed, false));
        let (budgeted, shared) = simulate(|| one(seed, true));
        let report = report(&retries, &budgeted, plain, shared);
        Outage {
            retries,
            budgeted,
            report,
        }
    }

    /// The table and the picture.
    pub fn report(&self) -> &Report {
        &self.report
    }
}

/// One run of the timeline, with or without budgets.
async fn one(seed: u64, budgets: bool) -> (Amplification, Vec<Bucket>) {
    let load = Load {
        callers: 1_000,
        rate: 20.0,
        until: Duration::from_secs(END),
    };
    let buckets = load::drive(seed, deepest(), load, Duration::from_secs(15), |d, rng| {
        let mut next: Hop = BoxCloneService::new(d);
        for _ in 0..3 {
            let budget =
                budgets.then(|| Arc::new(RetryBudget::new(10, 0.1).expect("gRPC's example")));
            next = service_over(next, budget, rng.next_u64());
        }
        next
    })
    .await;
    (strategy(&buckets), buckets)
}

/// D: ample capacity (the outage, not overload, is what fails it).
fn deepest() -> Model {
    let window = |(from, until): (u64, u64), fault| Window {
        from: Duration::from_secs(from),
        until: Duration::from_secs(until),
        fault,
    };
    Model {
        servers: 200,
        queue: 1_000,
        latency: Latency::LogNormal {
            median: Duration::from_millis(20),
            sigma: 0.25,
        },
        collapse: false,
        faults: vec![
            window(OUTAGE, Fault::Outage),
            window(
                BROWN_OUT,
                Fault::BrownOut {
                    error_ratio: BROWN_OUT_ERRORS,
                },
            ),
        ],
    }
}

/// A service as its caller sees it.
type Hop = BoxCloneService<Request<String>, Response<String>, Infallible>;

/// A service that serves each request by calling `next` through the three
/// layers, and answers 503 when that call fails.
fn service_over(next: Hop, budget: Option<Arc<RetryBudget>>, seed: u64) -> Hop {
    let backoff = ExponentialBackoff::new(
        Duration::from_millis(10),
        2.0,
        Duration::from_millis(100),
        ATTEMPTS,
    )
    .expect("valid backoff")
    .with_jitter(Jitter::Full)
    .with_seed(seed);
    let decoder = StatusDecoder::new([503]).expect("a valid status");
    let mut policy = RetryPolicy::new(decoder, backoff);
    if let Some(budget) = budget {
        policy = policy.map_options(|o| o.with_budget(budget));
    }
    let client = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
        .service(next);
    BoxCloneService::new(tower::service_fn(move |inbound: Request<String>| {
        let client = client.clone();
        async move {
            let outcome: Result<_, BoxError> = client.oneshot(load::forward(&inbound)).await;
            let status = match outcome {
                Ok(response) => response.status(),
                Err(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            let mut response = Response::new(String::new());
            *response.status_mut() = status;
            Ok::<_, Infallible>(response)
        }
    }))
}

fn phase(buckets: &[Bucket], (from, until): (u64, u64)) -> Phase {
    let (from, until) = (from as usize, until as usize);
    Phase {
        calls: sum(buckets, from, until, |b| b.offered),
        attempts: sum(buckets, from, until, |b| b.caused),
        good: sum(buckets, from, until, |b| b.started_good),
    }
}

/// The figures of each phase, each call counted in the phase it started in.
fn strategy(buckets: &[Bucket]) -> Amplification {
    Amplification {
        healthy: phase(buckets, HEALTHY),
        outage: phase(buckets, IN_OUTAGE),
        brown_out: phase(buckets, IN_BROWN_OUT),
        recovered: phase(buckets, RECOVERED),
    }
}

/// The expected attempts at D per call when each attempt at D fails with
/// probability `p` and each of three layers makes up to 4 attempts, each
/// layer's call failing when all 4 of its attempts did.
fn expected_amplification(p: f64) -> f64 {
    let mut per_call = 1.0;
    let mut fails = p;
    for _ in 0..3 {
        let attempts: f64 = (0..ATTEMPTS as i32).map(|k| fails.powi(k)).sum();
        per_call *= attempts;
        fails = fails.powi(ATTEMPTS as i32);
    }
    per_call
}

const TITLE: &str =
    "Retry amplification: three layers, each making 4 attempts, during an outage of the deepest";

const SOURCE: &str = "\"a single user action may create 64 attempts (4^3) on the database\" when three \
    layers each make 3 retries (Google SRE book, \"Addressing Cascading Failures\"; retries multiply \
    across layers: M. Brooker, \"Timeouts, retries, and backoff with jitter\", Amazon Builders' \
    Library); with a token bucket refilled by 10 % of a token per success, retries fall to about \
    \"0.1 retries\" once failures pass 10 %: at most 1.1x (M. Brooker, \"Fixing retries with token \
    buckets and circuit breakers\", 2022)";

const NOTES: [&str; 3] = [
    "Attempts are counted against the user's call that caused them, whenever they reached D; calls \
     are counted in the phase they started in. The outage lasts 10-30 s and the brown-out 30-50 s; \
     the calls of their last 2 s end after them, and count in neither.",
    "The brown-out's figure without the budget is a sample of some 360 calls, each making anywhere \
     from 1 to 64 attempts at D: over seeds 1 to 8 it reads 1.89x to 2.09x (1.97x on average), \
     around the model's 2.00x.",
    "With the budget, a full outage leaves each service only the half bucket it began with (5 \
     retries) and those already past the check, whatever the outage's length: the amplification \
     tends to 1x as the outage lasts. In the brown-out every second attempt fails, far beyond the \
     10 % the refill pays for, so the buckets stay empty and the services stop retrying: the load \
     stays at 1x, and half the calls fail where the retries saved nearly all of them at twice the \
     load. That is the budget's trade (Brooker's post shows the same).",
];

fn rows(retries: &Amplification, budgeted: &Amplification) -> Vec<Vec<String>> {
    let row = |name: &str, published: &str, expected: f64, a: &Phase, b: &Phase| {
        let figures =
            |p: &Phase| format!("{} ({} ok)", times(p.amplification()), percent(p.success()));
        vec![
            name.to_owned(),
            published.to_owned(),
            times(expected),
            figures(a),
            figures(b),
        ]
    };
    let (r, b) = (retries, budgeted);
    vec![
        row("healthy, 0-10 s", "1x", 1.0, &r.healthy, &b.healthy),
        row(
            "outage, calls started 10-28 s",
            "up to 64x; <= 1.1x with the budget",
            expected_amplification(1.0),
            &r.outage,
            &b.outage,
        ),
        row(
            "brown-out (50 % errors), calls started 30-48 s",
            "-",
            expected_amplification(BROWN_OUT_ERRORS),
            &r.brown_out,
            &b.brown_out,
        ),
        row(
            "healthy again, 50-60 s",
            "1x",
            1.0,
            &r.recovered,
            &b.recovered,
        ),
    ]
}

fn report(
    retries: &Amplification,
    budgeted: &Amplification,
    plain: Vec<Bucket>,
    shared: Vec<Bucket>,
) -> Report {
    let caption = |name: &str, s: &Amplification| {
        let outage = times(s.outage.amplification());
        format!("{name}: {outage} attempts at D per call in the outage")
    };
    let window = |(from, until): (u64, u64), what| {
        (Duration::from_secs(from), Duration::from_secs(until), what)
    };
    Report {
        name: "outage",
        title: TITLE.to_owned(),
        source: SOURCE,
        header: [
            "phase",
            "published",
            "model's expectation (no budget)",
            "retries, no budget: attempts at D per call (calls ok)",
            "retries + shared budget (10 tokens, 0.1)",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows: rows(retries, budgeted),
        notes: NOTES.map(str::to_owned).to_vec(),
        runs: vec![
            (caption("retries at every layer, no budget", retries), plain),
            (
                caption("each service's retries under a shared budget", budgeted),
                shared,
            ),
        ],
        quantile: 0.99,
        bucket: SECOND,
        merge: 1,
        until: Duration::from_secs(END),
        faults: vec![
            window(OUTAGE, "outage: every answer 503"),
            window(BROWN_OUT, "brown-out: half the answers 503"),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_expects_four_cubed_in_a_full_outage() {
        assert_eq!(expected_amplification(1.0), 64.0);
        assert_eq!(expected_amplification(0.0), 1.0);
        let brown_out = expected_amplification(0.5);
        assert!((brown_out - 2.0).abs() < 0.01, "{brown_out}");
    }
}
