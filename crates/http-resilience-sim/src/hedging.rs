//! Hedging's tail: see [`Hedging`].

use crate::{
    load::{self, Load},
    metrics::{quantile, sum, Bucket},
    report::{millis, percent, Report},
    simulate,
    upstream::{Latency, Model, Upstream},
};
use http::{Request, Response};
use http_resilience::{
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::{RetryBudget, TransientDecoder},
    BoxError, DeadlineLayer,
};
use std::{sync::Arc, time::Duration};
use tower::{Service, ServiceBuilder};

const SECOND: Duration = Duration::from_secs(1);
/// When the callers stop.
const END: u64 = 100;
/// The first seconds, left out of the figures: the hedging delay is read
/// from the latencies seen, and needs some first.
const WARM_UP: u64 = 10;

/// How one strategy fared over 10–100 s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tail {
    /// The calls.
    pub calls: u64,
    /// The median latency of the calls, in milliseconds.
    pub p50_ms: f64,
    /// The 99th percentile.
    pub p99_ms: f64,
    /// The 99.9th percentile.
    pub p999_ms: f64,
    /// The requests the upstream received beyond one per call, over the
    /// calls: the extra load.
    pub extra_requests: f64,
}

/// Hedging: another copy of a request still unanswered at the 95th
/// percentile of latency, and what it does to the 99.9th.
///
/// The upstream answers in 10 ms typically (log-normal, median 10 ms), but
/// 1 % of its answers are stragglers that pause 1 s to 2 s besides: "The
/// Tail at Scale"'s server that "typically responds in 10ms but with a
/// 99th-percentile latency of one second". It has servers to spare, so a
/// copy is served at once, with a latency of its own.
///
/// Without hedging, a call takes what its one request takes. With it, the
/// calls go through [`HedgeLayer`] with a [`HedgeDelay::percentile`] of
/// 95 (the 95th percentile of the latencies the client observed, over
/// windows of 10 s, from the 100th on) and at most 2 copies, under a shared
/// [`RetryBudget`] (10 tokens, 0.1), as the library's docs recommend.
/// Both stacks have a 5 s deadline outside, which no call reaches.
///
/// The figures of each strategy, and the [`Report`]; see the
/// [crate docs](crate) for an example.
#[derive(Debug, Clone)]
pub struct Hedging {
    /// One request per call.
    pub single: Tail,
    /// Hedged at the 95th percentile.
    pub hedged: Tail,
    report: Report,
}

impl Hedging {
    /// Runs the scenario with `seed`: the same seed, the same figures.
    pub fn run(seed: u64) -> Self {
        let deadline = || DeadlineLayer::new(Duration::from_secs(5));
        let plain = simulate(|| {
            one(seed, |upstream| {
                ServiceBuilder::new().layer(deadline()).service(upstream)
            })
        });
        let hedged = simulate(|| {
            one(seed, |upstream| {
                let delay = HedgeDelay::percentile(95.0, 100, Duration::from_secs(10))
                    .expect("valid delay");
                let budget = Arc::new(RetryBudget::new(10, 0.1).expect("gRPC's example"));
                let policy = HedgePolicy::new(TransientDecoder::new(), delay, 2)
                    .expect("valid policy")
                    .map_options(|o| o.with_budget(budget));
                ServiceBuilder::new()
                    .layer(deadline())
                    .layer(HedgeLayer::new(policy))
                    .service(upstream)
            })
        });
        let (single, hedged_figures) = (strategy(&plain), strategy(&hedged));
        Hedging {
            single,
            hedged: hedged_figures,
            report: report(&single, &hedged_figures, plain, hedged),
        }
    }

    /// The table and the picture.
    pub fn report(&self) -> &Report {
        &self.report
    }
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
        rate: 200.0,
        until: Duration::from_secs(END),
    };
    load::drive(
        seed,
        model(),
        load,
        Duration::from_secs(5),
        |upstream, _| stack(upstream),
    )
    .await
}

fn model() -> Model {
    Model {
        servers: 1_000,
        queue: 1_000,
        latency: Latency::Stragglers {
            median: Duration::from_millis(10),
            sigma: 0.25,
            share: 0.01,
            pause: (SECOND, 2 * SECOND),
        },
        collapse: false,
        faults: Vec::new(),
    }
}

fn strategy(buckets: &[Bucket]) -> Tail {
    let (from, until) = (WARM_UP as usize, END as usize);
    let mut latencies: Vec<f64> = buckets
        .iter()
        .skip(from)
        .take(until - from)
        .flat_map(|b| b.latencies_ms.iter().copied())
        .collect();
    let calls = sum(buckets, from, until, |b| b.offered);
    let requests = sum(buckets, from, until, |b| b.caused);
    let mut at = |q| quantile(&mut latencies, q).unwrap_or(f64::NAN);
    Tail {
        calls,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        p999_ms: at(0.999),
        extra_requests: requests as f64 / calls.max(1) as f64 - 1.0,
    }
}

const TITLE: &str = "Hedging at the 95th percentile: the 99.9th percentile, and the extra requests";

const SOURCE: &str =
    "\"sending a hedging request after a 10ms delay reduces the 99.9th-percentile \
    latency for retrieving all 1,000 values from 1,800ms to 74ms while sending just 2% more \
    requests\" (a 1,000-key read over 100 BigTable servers); deferring the copy to the \
    95th-percentile latency \"limits the additional load to approximately 5%\" (J. Dean, L. A. \
    Barroso, \"The Tail at Scale\", CACM 56(2), 2013)";

const MODEL_NOTE: &str =
    "The published figure is for a read of 1,000 keys over 100 servers, a call \
    that waits for the slowest of its requests, with a copy after 10 ms, which went out for 2 % of \
    the requests (so 10 ms was about their 98th percentile). Here a call is one request, and the \
    copy goes at the 95th percentile, hence about 5 % more requests. Without hedging, the 99.9th \
    percentile is set by the model's stragglers (a pause of 1 s to 2 s for 1 % of requests, after \
    the paper's server with a 99th percentile of one second); with it, by the hedging delay plus a \
    second copy's ordinary latency.";

fn rows(single: &Tail, hedged: &Tail) -> Vec<Vec<String>> {
    let cut = 1.0 - (hedged.p999_ms - hedged.p50_ms) / (single.p999_ms - single.p50_ms);
    let row = |name: &str, published: &str, f: &dyn Fn(&Tail) -> String| {
        vec![name.to_owned(), published.to_owned(), f(single), f(hedged)]
    };
    vec![
        row("p50", "-", &|s| millis(Some(s.p50_ms))),
        row("p99", "-", &|s| millis(Some(s.p99_ms))),
        row("p99.9", "1,800 ms -> 74 ms", &|s| millis(Some(s.p999_ms))),
        row(
            "extra requests",
            "2 % (a copy after 10 ms); about 5 % at p95",
            &|s| percent(s.extra_requests),
        ),
        vec![
            "share of the p99.9's excess over the median cut".to_owned(),
            "96 % of the p99.9 itself ((1,800 - 74) / 1,800; the median not given)".to_owned(),
            "-".to_owned(),
            percent(cut),
        ],
    ]
}

fn report(single: &Tail, hedged: &Tail, plain: Vec<Bucket>, copies: Vec<Bucket>) -> Report {
    let calls_note = format!(
        "Calls from {WARM_UP} s to {END} s ({} of them): the delay is read from the latencies the \
         client saw, so the first seconds are left out.",
        single.calls
    );
    Report {
        name: "hedging",
        title: TITLE.to_owned(),
        source: SOURCE,
        header: [
            "figure",
            "published",
            "one request per call",
            "hedged at p95 (2 copies at most, shared budget)",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows: rows(single, hedged),
        notes: vec![calls_note, MODEL_NOTE.to_owned()],
        runs: vec![
            (
                format!(
                    "one request per call: p99.9 {}",
                    millis(Some(single.p999_ms))
                ),
                plain,
            ),
            (
                format!(
                    "hedged at the 95th percentile: p99.9 {}, {} more requests",
                    millis(Some(hedged.p999_ms)),
                    percent(hedged.extra_requests)
                ),
                copies,
            ),
        ],
        quantile: 0.999,
        bucket: SECOND,
        merge: 5,
        until: Duration::from_secs(END),
        faults: Vec::new(),
    }
}
