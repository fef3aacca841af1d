//! Client-side throttling at twice the capacity: see [`Throttling`].

use crate::{
    load::{self, Load},
    metrics::{sum, Bucket},
    report::{percent, times, Report},
    simulate,
    upstream::{Latency, Model, Upstream},
};
use http::{Request, Response};
use http_resilience::{
    guard::GuardLayer,
    overload::{OverloadPolicy, Throttle},
    AttemptTimeoutLayer, BoxError, DeadlineLayer,
};
use std::time::Duration;
use tower::{Service, ServiceBuilder};

const SECOND: Duration = Duration::from_secs(1);
/// When the callers stop.
const END: u64 = 240;
/// The steady state the figures are read over: one whole window of the
/// throttle's, once its first has filled.
const STEADY: (u64, u64) = (120, END);
const SERVERS: u32 = 5;
const MEDIAN: Duration = Duration::from_millis(100);
const SIGMA: f64 = 0.25;

/// How one strategy fared over 120–240 s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttled {
    /// The throttle's multiplier, if it throttles.
    pub k: Option<f64>,
    /// The calls the callers made (the throttle's requests).
    pub requests: u64,
    /// The calls the upstream accepted (a 200).
    pub accepts: u64,
    /// The share of calls the client turned away itself.
    pub reject_ratio: f64,
    /// The book's formula on `requests` and `accepts`:
    /// `max(0, (requests − K × accepts) / (requests + 1))`.
    pub formula: f64,
    /// The requests the upstream received a second, over its capacity.
    pub load: f64,
    /// The requests the upstream itself rejected (503) for each it
    /// accepted.
    pub upstream_rejects_per_accept: f64,
}

/// Client-side throttling at twice the upstream's capacity.
///
/// The upstream has 5 servers (log-normal latency, median 100 ms) and a
/// queue of 5, beyond which it answers 503 at once; its capacity is the
/// servers over the mean latency, about 48.5 requests a second. The callers
/// offer twice that, steadily, for 240 s. Each call is one attempt through
/// [`DeadlineLayer`] → [`GuardLayer<OverloadPolicy>`] → [`AttemptTimeoutLayer`], the
/// overload policy throttling alone ([`OverloadPolicy::throttling`]) with
/// the book's window of two minutes; no retries, so the throttle's requests
/// are the callers' calls.
///
/// Three strategies: no throttling; `K` = 2, the book's default; and `K` =
/// 1.1, the more aggressive multiplier the book describes. Over 120–240 s
/// (one whole two-minute window, once the first has filled), the figures compare the
/// share of calls turned away by the client with the book's formula
/// evaluated on the counts the run made, and with the steady state the
/// formula predicts, `max(0, 1 − K × capacity / offered)`.
///
/// The figures of each strategy, and the [`Report`]; see the
/// [crate docs](crate) for an example.
#[derive(Debug, Clone)]
pub struct Throttling {
    /// No throttling.
    pub unthrottled: Throttled,
    /// `K` = 2.
    pub k2: Throttled,
    /// `K` = 1.1.
    pub k11: Throttled,
    /// The upstream's capacity, in requests a second.
    pub capacity: f64,
    report: Report,
}

impl Throttling {
    /// Runs the scenario with `seed`: the same seed, the same figures.
    pub fn run(seed: u64) -> Self {
        let stack = |k: Option<f64>| {
            move |upstream: Upstream| {
                let policy = k.map(|k| {
                    let throttle = Throttle::new(k).expect("a valid multiplier");
                    OverloadPolicy::throttling(throttle).with_seed(seed)
                });
                ServiceBuilder::new()
                    .layer(DeadlineLayer::new(Duration::from_secs(5)))
                    .option_layer(policy.map(GuardLayer::new))
                    .layer(AttemptTimeoutLayer::new(Duration::from_secs(2)))
                    .service(upstream)
            }
        };
        let runs: Vec<(Throttled, Vec<Bucket>)> = [None, Some(2.0), Some(1.1)]
            .into_iter()
            .map(|k| {
                let buckets = simulate(|| one(seed, stack(k)));
                (strategy(k, &buckets), buckets)
            })
            .collect();
        let [unthrottled, k2, k11] = [runs[0].0, runs[1].0, runs[2].0];
        let report = report(
            &[unthrottled, k2, k11],
            runs.into_iter().map(|(_, b)| b).collect(),
        );
        Throttling {
            unthrottled,
            k2,
            k11,
            capacity: capacity(),
            report,
        }
    }

    /// The table and the picture.
    pub fn report(&self) -> &Report {
        &self.report
    }
}

/// The capacity of the upstream: its servers over the mean of its
/// log-normal latency (`median × e^(σ²/2)`).
fn capacity() -> f64 {
    f64::from(SERVERS) / (MEDIAN.as_secs_f64() * (SIGMA * SIGMA / 2.0).exp())
}

/// One run, every call through the client `stack` makes around the
/// upstream.
async fn one<S, B>(seed: u64, stack: impl FnOnce(Upstream) -> S) -> Vec<Bucket>
where
    S: Service<Request<String>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let model = Model {
        servers: SERVERS,
        queue: SERVERS,
        latency: Latency::LogNormal {
            median: MEDIAN,
            sigma: SIGMA,
        },
        collapse: false,
        faults: Vec::new(),
    };
    let load = Load {
        callers: 2_000,
        rate: 2.0 * capacity(),
        until: Duration::from_secs(END),
    };
    load::drive(seed, model, load, Duration::from_secs(5), |upstream, _| {
        stack(upstream)
    })
    .await
}

fn strategy(k: Option<f64>, buckets: &[Bucket]) -> Throttled {
    let (from, until) = (STEADY.0 as usize, STEADY.1 as usize);
    let requests = sum(buckets, from, until, |b| b.offered);
    let accepts = sum(buckets, from, until, |b| b.good);
    let turned_away = sum(buckets, from, until, |b| b.turned_away);
    let rejected = sum(buckets, from, until, |b| b.rejected);
    let arrivals = sum(buckets, from, until, |b| b.arrivals);
    let (r, a) = (requests as f64, accepts as f64);
    Throttled {
        k,
        requests,
        accepts,
        reject_ratio: turned_away as f64 / r.max(1.0),
        formula: k.map_or(0.0, |k| ((r - k * a) / (r + 1.0)).max(0.0)),
        load: arrivals as f64 / (until - from) as f64 / capacity(),
        upstream_rejects_per_accept: rejected as f64 / a.max(1.0),
    }
}

const TITLE: &str = "Client-side throttling at twice the upstream's capacity";

const SOURCE: &str =
    "each client keeps, over the last two minutes, its requests and the backend's \
    accepts, and rejects a new request itself with probability max(0, (requests - K * accepts) / \
    (requests + 1)); with K = 2, \"backends end up rejecting one request for each request they \
    actually process\"; with K = 1.1, \"only one request will be rejected by the backend for every \
    10 requests accepted\" (Google SRE book, \"Handling Overload\", \"Client-Side Throttling\")";

const LABELS: [&str; 3] = ["no throttling", "throttling, K = 2", "throttling, K = 1.1"];

/// What the formula gives in a steady state where the upstream accepts
/// its whole capacity and the callers offer twice that.
fn at_capacity(s: &Throttled) -> f64 {
    s.k.map_or(0.0, |k| (1.0 - k / 2.0).max(0.0))
}

fn rows(strategies: &[Throttled; 3]) -> Vec<Vec<String>> {
    let row = |name: &str, published: &str, f: &dyn Fn(&Throttled) -> String| {
        let mut cells = vec![name.to_owned(), published.to_owned()];
        cells.extend(strategies.iter().map(f));
        cells
    };
    vec![
        row("share turned away by the client", "the formula", &|s| {
            percent(s.reject_ratio)
        }),
        row(
            "the formula, on the run's requests and accepts",
            "-",
            &|s| percent(s.formula),
        ),
        row(
            "the formula, were the upstream to accept its whole capacity: max(0, 1 - K / 2)",
            "-",
            &|s| percent(at_capacity(s)),
        ),
        row(
            "upstream load over its capacity",
            "about K x its accepts",
            &|s| times(s.load),
        ),
        row(
            "upstream 503s per accepted request",
            "1 at K = 2; 0.1 at K = 1.1",
            &|s| format!("{:.2}", s.upstream_rejects_per_accept),
        ),
    ]
}

fn notes(k11: &Throttled) -> Vec<String> {
    let seconds = (STEADY.1 - STEADY.0) as f64;
    let accepted = k11.accepts as f64 / seconds / capacity();
    vec![
        format!(
            "Figures over {} s to {} s, one whole window once the first has filled; the upstream's \
             capacity is {:.1} requests a second (its servers over its mean latency), the offered load \
             twice that.",
            STEADY.0,
            STEADY.1,
            capacity()
        ),
        "At exactly twice the capacity, K = 2 sits at the formula's threshold (requests = 2 x \
         accepts): the client sends nearly everything, and the upstream rejects about one request per \
         request it serves, as the book says of K = 2."
            .to_owned(),
        format!(
            "K = 1.1 brings the upstream's load down to about its capacity. It then accepts {} of \
             its capacity, not all of it (with a queue of 5, arrivals at random leave a server idle \
             at times), so the formula turns away more than the 45 % it would at full capacity.",
            percent(accepted)
        ),
    ]
}

fn report(strategies: &[Throttled; 3], runs: Vec<Vec<Bucket>>) -> Report {
    let caption = |name: &str, s: &Throttled| {
        format!(
            "{name}: {} turned away by the client (the formula: {}), the upstream at {} its capacity",
            percent(s.reject_ratio),
            percent(s.formula),
            times(s.load)
        )
    };
    Report {
        name: "throttling",
        title: TITLE.to_owned(),
        source: SOURCE,
        header: ["figure", "published"]
            .into_iter()
            .chain(LABELS)
            .map(str::to_owned)
            .collect(),
        rows: rows(strategies),
        notes: notes(&strategies[2]),
        runs: LABELS
            .iter()
            .zip(strategies)
            .map(|(l, s)| caption(l, s))
            .zip(runs)
            .collect(),
        quantile: 0.99,
        bucket: SECOND,
        merge: 5,
        until: Duration::from_secs(END),
        faults: Vec::new(),
    }
}
