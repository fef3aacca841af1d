//! A metastable failure and its recovery: see [`Metastable`].

use crate::{
    load::{self, Load},
    metrics::{sum, Bucket},
    report::{percent, times, Report},
    simulate,
    upstream::{Fault, Latency, Model, Upstream, Window},
};
use http::{Request, Response, StatusCode};
use http_resilience::{
    breaker::BreakerPolicy,
    guard::Guard,
    overload::{OverloadPolicy, Throttle},
    policy::{ExponentialBackoff, Jitter, Outcome as Seen, OutcomeDecoder, RetryBudget, Verdict},
    retry::RetryPolicy,
    BoxError, FailureKind, Resilience, ResiliencePolicy,
};
use std::{sync::Arc, time::Duration};
use tower::{Service, ServiceBuilder};

const SECOND: Duration = Duration::from_secs(1);
/// The trigger: half the servers gone from 20 s to 30 s.
const TRIGGER: (u64, u64) = (20, 30);
/// When the callers stop.
const END: u64 = 150;
/// The offered load, calls per second.
const RATE: f64 = 35.0;
/// The seconds of goodput at 90 % of the offered load or more that count
/// as recovered.
const STEADY: usize = 10;

/// How one strategy fared.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Recovery {
    /// The share of calls that succeeded before the trigger (0–20 s).
    pub before: f64,
    /// The share of calls that succeeded during the trigger (20–30 s).
    pub during: f64,
    /// The share of calls that succeeded from 60 s after the trigger's end
    /// to the end of the run (90–150 s).
    pub long_after: f64,
    /// The upstream's load over the offered load, 90–150 s.
    pub load_long_after: f64,
    /// How long after the trigger's end goodput came back to 90 % of the
    /// offered load and stayed there for 10 s; `None` if it never did.
    pub recovery: Option<Duration>,
}

/// A metastable failure: a 10 s capacity drop leaves a retrying system down
/// after the drop ends; with the budget, the breaker and client-side
/// throttling it recovers.
///
/// The upstream has 5 servers (about 48 requests a second at its median
/// latency of 100 ms) and a queue of 500, and collapses as its queue grows
/// (at a full queue each request takes twice as long). The callers offer 35
/// calls a second, about 72 % of capacity: healthy, but, in Bronson et
/// al.'s terms, vulnerable. From 20 s to 30 s the upstream is down to 2 of
/// its 5 servers (the trigger). Every call goes through the combined service
/// ([`ResiliencePolicy`]): 1 s per attempt, 5 s in all, a 503 or a timed-out
/// attempt retried up to 3 times with exponential backoff from 100 ms.
///
/// During the drop the queue grows past what an attempt can wait for;
/// attempts time out and are retried, and the upstream still serves the
/// abandoned ones, so it does nothing but wasted work while the retries
/// keep its queue full: the sustaining effect. Once the drop ends the
/// system stays down, with four times the offered load.
///
/// With the strategy on, the same policy shares a [`RetryBudget`] (10
/// tokens, 0.1), and every attempt passes client-side throttling
/// ([`Throttle::default`]: K = 2 over two minutes) and a circuit breaker
/// ([`BreakerPolicy::default`]: .NET's standard settings), the guards in the
/// order the library documents: overload control, then the breaker.
///
/// The figures of each strategy, and the [`Report`]; see the
/// [crate docs](crate) for an example.
#[derive(Debug, Clone)]
pub struct Metastable {
    /// Retries alone.
    pub retries: Recovery,
    /// Retries under the shared budget, and nothing more.
    pub budgeted: Recovery,
    /// Retries with the budget, throttling and the breaker.
    pub guarded: Recovery,
    report: Report,
}

impl Metastable {
    /// Runs the scenario with `seed`: the same seed, the same figures.
    pub fn run(seed: u64) -> Self {
        let plain = simulate(|| one(seed, |upstream| stack(retry_policy(seed), upstream)));
        let budgeted = simulate(|| {
            one(seed, |upstream| {
                let policy = retry_policy(seed)
                    .map_retry(|retry| retry.map_options(|o| o.with_budget(budget())));
                stack(policy, upstream)
            })
        });
        let guarded = simulate(|| {
            one(seed, |upstream| {
                let guards = (
                    OverloadPolicy::throttling(Throttle::default()).with_seed(seed),
                    BreakerPolicy::default().with_seed(seed),
                );
                let policy = retry_policy(seed)
                    .map_retry(|retry| retry.map_options(|o| o.with_budget(budget())));
                stack(policy.with_guard(guards), upstream)
            })
        });
        let figures = [strategy(&plain), strategy(&budgeted), strategy(&guarded)];
        Metastable {
            retries: figures[0],
            budgeted: figures[1],
            guarded: figures[2],
            report: report(&figures, [plain, budgeted, guarded]),
        }
    }

    /// The table and the picture.
    pub fn report(&self) -> &Report {
        &self.report
    }
}

/// The combined service of `policy` around the upstream.
fn stack<D, G>(
    policy: ResiliencePolicy<D, ExponentialBackoff, G>,
    upstream: Upstream,
) -> Resilience<Upstream, D, ExponentialBackoff, G>
where
    G: Guard,
{
    ServiceBuilder::new()
        .layer(policy.layer())
        .service(upstream)
}

type Decoder = OutcomeDecoder<fn(Seen<'_>) -> Verdict>;

/// What a retrying client retries: a 503, and an attempt that timed out.
fn judge(outcome: Seen<'_>) -> Verdict {
    match outcome {
        Seen::Head { status, .. } if status == StatusCode::SERVICE_UNAVAILABLE => {
            Verdict::retry(status)
        }
        Seen::Error(err) => match FailureKind::of(err) {
            FailureKind::AttemptTimeout => Verdict::retry(FailureKind::AttemptTimeout),
            kind => Verdict::fail(kind),
        },
        _ => Verdict::Accept,
    }
}

fn retry_policy(seed: u64) -> ResiliencePolicy<Decoder, ExponentialBackoff> {
    let backoff = ExponentialBackoff::new(Duration::from_millis(100), 2.0, SECOND, 4)
        .expect("valid backoff")
        .with_jitter(Jitter::Full)
        .with_seed(seed);
    let retry = RetryPolicy::new(
        OutcomeDecoder::new(judge as fn(Seen<'_>) -> Verdict),
        backoff,
    );
    ResiliencePolicy::new(Duration::from_secs(5), SECOND, retry).expect("valid limits")
}

fn budget() -> Arc<RetryBudget> {
    Arc::new(RetryBudget::new(10, 0.1).expect("gRPC's example"))
}

/// One run, every call through the client `stack` makes around the
/// upstream.
async fn one<S, B>(seed: u64, stack: impl FnOnce(Upstream) -> S) -> Vec<Bucket>
where
    S: Service<Request<String>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let load = Load {
        callers: 2_000,
        rate: RATE,
        until: Duration::from_secs(END),
    };
    load::drive(
        seed,
        model(),
        load,
        Duration::from_secs(10),
        |upstream, _| stack(upstream),
    )
    .await
}

fn model() -> Model {
    Model {
        servers: 5,
        queue: 500,
        latency: Latency::LogNormal {
            median: Duration::from_millis(100),
            sigma: 0.25,
        },
        collapse: true,
        faults: vec![Window {
            from: Duration::from_secs(TRIGGER.0),
            until: Duration::from_secs(TRIGGER.1),
            fault: Fault::CapacityDrop { servers: 2 },
        }],
    }
}

fn share(buckets: &[Bucket], (from, until): (u64, u64)) -> f64 {
    let (from, until) = (from as usize, until as usize);
    let good = sum(buckets, from, until, |b| b.started_good);
    good as f64 / sum(buckets, from, until, |b| b.offered).max(1) as f64
}

fn strategy(buckets: &[Bucket]) -> Recovery {
    let late = (TRIGGER.1 + 60, END);
    let (from, until) = (late.0 as usize, late.1 as usize);
    let load = sum(buckets, from, until, |b| b.arrivals) as f64;
    Recovery {
        before: share(buckets, (0, TRIGGER.0)),
        during: share(buckets, TRIGGER),
        long_after: share(buckets, late),
        load_long_after: load / sum(buckets, from, until, |b| b.offered).max(1) as f64,
        recovery: recovery(buckets),
    }
}

/// The first second after the trigger's end from which goodput stays at
/// 90 % of the offered load or more for `STEADY` seconds, as a time after
/// the trigger's end.
fn recovery(buckets: &[Bucket]) -> Option<Duration> {
    let end = TRIGGER.1 as usize;
    let last = (END as usize).min(buckets.len());
    (end..last.saturating_sub(STEADY)).find_map(|from| {
        let good = sum(buckets, from, from + STEADY, |b| b.good);
        let offered = sum(buckets, from, from + STEADY, |b| b.offered);
        (good as f64 >= 0.9 * offered as f64).then(|| Duration::from_secs((from - end) as u64))
    })
}

const TITLE: &str = "Metastable failure: a 10 s capacity drop under retries, and its recovery";

const SOURCE: &str =
    "metastable failures \"occur in open systems with an uncontrolled source of load \
    where a trigger causes the system to enter a bad state that persists even when the trigger is \
    removed\"; retries are their classic sustaining effect (N. Bronson, A. Aghayev, A. Charapko, \
    T. Zhu, \"Metastable Failures in Distributed Systems\", HotOS 2021)";

const NOTES: [&str; 3] = [
    "The paper gives no number to reproduce: its figure is the shape, a system that stays down after \
     the trigger ends. The model's numbers (capacity, load, drop, queue) are this simulator's; the \
     retry policy is an ordinary one.",
    "The budget alone stops the retries, not the first attempts, and leaves recovery to chance. \
     When the drop ends the upstream has the drop's backlog in its queue; slowed by it (1 + queued \
     / 500 times), its 5 servers serve 48.5 / (1 + q / 500) requests a second, fewer than the 35 \
     offered once q passes about 190; the drop leaves about that many (35 offered against some 17 \
     served, for 10 s). With seed 1 the backlog was past that point and the system stays down; of \
     seeds 1 to 4, seed 2 recovered, after 39 s.",
    "With the guards, the breaker opens on the timed-out attempts and throttling turns calls away \
     while few are accepted: the upstream's backlog drains, a probe gets through, and the callers \
     come back. The bound comes from the guards' own times: the breaker's break, 5 s, doubled after \
     each failed probe up to 60 s, and the throttle's window of two minutes.",
];

fn rows(figures: &[Recovery; 3]) -> Vec<Vec<String>> {
    let recovered = |s: &Recovery| {
        s.recovery.map_or_else(
            || format!("not within {} s", END - TRIGGER.1),
            |d| format!("{} s", d.as_secs()),
        )
    };
    let row = |name: &str, published: &str, f: &dyn Fn(&Recovery) -> String| {
        let mut cells = vec![name.to_owned(), published.to_owned()];
        cells.extend(figures.iter().map(f));
        cells
    };
    vec![
        row(
            "calls ok before the trigger (0-20 s)",
            "stable (vulnerable)",
            &|s| percent(s.before),
        ),
        row("calls ok during the trigger (20-30 s)", "-", &|s| {
            percent(s.during)
        }),
        row("calls ok long after it (90-150 s)", "stays down", &|s| {
            percent(s.long_after)
        }),
        row(
            "upstream load over offered load (90-150 s)",
            "work amplification",
            &|s| times(s.load_long_after),
        ),
        row(
            "back to 90 % goodput for 10 s, after the trigger's end",
            "not without a strong corrective push",
            &recovered,
        ),
    ]
}

fn report(figures: &[Recovery; 3], runs: [Vec<Bucket>; 3]) -> Report {
    let caption = |name: &str, s: &Recovery| match s.recovery {
        Some(after) => format!("{name}: back {} s after the trigger ended", after.as_secs()),
        None => format!(
            "{name}: still down {} s after the trigger ended, at {} the offered load",
            END - TRIGGER.1,
            times(s.load_long_after)
        ),
    };
    let names = [
        "retries alone",
        "retries + budget",
        "retries + budget + throttling + breaker",
    ];
    Report {
        name: "metastable",
        title: TITLE.to_owned(),
        source: SOURCE,
        header: ["figure", "published"]
            .into_iter()
            .chain(names)
            .map(str::to_owned)
            .collect(),
        rows: rows(figures),
        notes: NOTES.map(str::to_owned).to_vec(),
        runs: names
            .iter()
            .zip(figures)
            .map(|(name, s)| caption(name, s))
            .zip(runs)
            .collect(),
        quantile: 0.99,
        bucket: SECOND,
        merge: 1,
        until: Duration::from_secs(END),
        faults: vec![(
            Duration::from_secs(TRIGGER.0),
            Duration::from_secs(TRIGGER.1),
            "capacity drop: 2 of 5 servers",
        )],
    }
}
