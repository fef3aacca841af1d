//! Hedging against a bimodal upstream: 95 % of calls take 5 to 15 ms
//! (uniform), 5 % take 1 s, two orders of magnitude more. Side by side in one
//! run: no hedging, this library's `HedgeLayer` (a fixed delay at the fast
//! mode's end, with 2 and 3 copies at most; the 96th percentile of observed latencies with the retry
//! budget), and tower's `hedge` (the same percentile, window and minimum of
//! samples, behind a `Buffer` since it is not `Clone`). The reference is the fast mode alone.
//!
//! Every variant first runs 1.5 s of traffic (the percentile variants fill
//! their first window), then 4,000 calls from 64 concurrent callers. The
//! table gives p50, p99 and p99.9 of those calls, p99 over the fast mode's
//! p99, and the extra load: upstream calls per call, less one (cancelled
//! copies included). Targets: p99 within 2x the fast mode's, at most 10 %
//! extra load.
//!
//! Run: `cargo bench -p http-resilience-bench --bench hedging`; see
//! `BENCHMARKS.md`.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_resilience::{
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::{RetryBudget, TransientDecoder},
    BoxError,
};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

const CALLS: usize = 4_000;
const CALLERS: usize = 64;
const WARM_UP: Duration = Duration::from_millis(1_500);
const WINDOW: Duration = Duration::from_secs(1);
const MIN_SAMPLES: u64 = 100;

type Body = Full<Bytes>;

/// The upstream: each call draws its latency from a fixed sequence, so every
/// variant meets the same upstream.
#[derive(Clone)]
struct Upstream {
    calls: Arc<AtomicU64>,
    slow_share: u64,
}

impl Upstream {
    fn new(slow_percent: u64) -> Self {
        Self {
            calls: Arc::new(AtomicU64::new(0)),
            slow_share: slow_percent,
        }
    }

    fn latency(&self, n: u64) -> Duration {
        // NOTE: SplitMix64 over the call number: a fixed, well-spread sequence.
        let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        if z % 100 < self.slow_share {
            Duration::from_secs(1)
        } else {
            Duration::from_micros(5_000 + (z >> 8) % 10_000)
        }
    }
}

impl Service<Request<Body>> for Upstream {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response<Body>, Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Body>) -> Self::Future {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let latency = self.latency(n);
        Box::pin(async move {
            tokio::time::sleep(latency).await;
            Ok(Response::new(Full::new(Bytes::from_static(b"ok"))))
        })
    }
}

/// tower's hedge policy: every request may be copied.
#[derive(Clone)]
struct CloneAll;

impl tower::hedge::Policy<Request<Body>> for CloneAll {
    fn clone_request(&self, request: &Request<Body>) -> Option<Request<Body>> {
        let mut copy = Request::new(request.body().clone());
        *copy.uri_mut() = request.uri().clone();
        Some(copy)
    }

    fn can_retry(&self, _: &Request<Body>) -> bool {
        true
    }
}

fn request() -> Request<Body> {
    Request::get("http://upstream.test/")
        .body(Full::default())
        .unwrap()
}

/// Runs `calls` calls from `CALLERS` callers; their latencies, sorted.
async fn run<S>(svc: S, calls: usize) -> Vec<Duration>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let per_caller = calls / CALLERS;
    let mut tasks = Vec::new();
    for _ in 0..CALLERS {
        let svc = svc.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(per_caller);
            for _ in 0..per_caller {
                let start = Instant::now();
                let outcome = svc.clone().oneshot(request()).await;
                assert!(outcome.is_ok(), "every call answers");
                latencies.push(start.elapsed());
            }
            latencies
        }));
    }
    let mut all = Vec::with_capacity(calls);
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    all.sort();
    all
}

/// Warms up for `WARM_UP`, then measures.
async fn measure<S>(name: &str, svc: S, upstream: &Upstream) -> Row
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let warm = Instant::now();
    while warm.elapsed() < WARM_UP {
        run(svc.clone(), CALLERS * 4).await;
    }
    let before = upstream.calls.load(Ordering::Relaxed);
    let latencies = run(svc, CALLS).await;
    let upstream_calls = upstream.calls.load(Ordering::Relaxed) - before;
    Row {
        name: name.to_owned(),
        p50: quantile(&latencies, 0.50),
        p99: quantile(&latencies, 0.99),
        p999: quantile(&latencies, 0.999),
        extra: upstream_calls as f64 / latencies.len() as f64 - 1.0,
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

struct Row {
    name: String,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    extra: f64,
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        let mut rows = Vec::new();

        let fast = Upstream::new(0);
        rows.push(measure("fast mode alone (reference)", fast.clone(), &fast).await);

        let upstream = Upstream::new(5);
        rows.push(measure("no hedging", upstream.clone(), &upstream).await);

        let upstream = Upstream::new(5);
        let fixed = HedgePolicy::new(
            TransientDecoder::new(),
            HedgeDelay::fixed(Duration::from_millis(15)),
            2,
        )
        .unwrap();
        let svc = HedgeLayer::new(fixed).layer(upstream.clone());
        rows.push(measure("HedgeLayer, fixed 15 ms", svc, &upstream).await);

        let upstream = Upstream::new(5);
        let three = HedgePolicy::new(
            TransientDecoder::new(),
            HedgeDelay::fixed(Duration::from_millis(15)),
            3,
        )
        .unwrap();
        let svc = HedgeLayer::new(three).layer(upstream.clone());
        rows.push(measure("HedgeLayer, fixed 15 ms, 3 copies", svc, &upstream).await);

        let upstream = Upstream::new(5);
        let percentile = HedgePolicy::new(
            TransientDecoder::new(),
            HedgeDelay::percentile(96.0, MIN_SAMPLES, WINDOW).unwrap(),
            2,
        )
        .unwrap()
        .map_options(|o| o.with_budget(Arc::new(RetryBudget::new(100, 0.1).unwrap())));
        let svc = HedgeLayer::new(percentile).layer(upstream.clone());
        rows.push(measure("HedgeLayer, p96 + budget 0.1", svc, &upstream).await);

        let upstream = Upstream::new(5);
        let hedge = tower::hedge::Hedge::new::<Request<Body>>(
            upstream.clone(),
            CloneAll,
            MIN_SAMPLES,
            0.96,
            WINDOW,
        );
        // NOTE: tower's `Hedge` is not `Clone`; a buffer shares it between
        // the callers (a channel hop, microseconds against milliseconds).
        let svc = tower::buffer::Buffer::new(hedge, CALLERS);
        rows.push(measure("tower hedge, p96", svc, &upstream).await);

        let fast_p99 = rows[0].p99;
        println!(
            "| variant | p50 | p99 | p99.9 | p99 ÷ fast p99 | extra load |\n|---|---|---|---|---|---|"
        );
        for row in &rows {
            println!(
                "| {} | {} | {} | {} | {:.2} | {:.1} % |",
                row.name,
                ms(row.p50),
                ms(row.p99),
                ms(row.p999),
                row.p99.as_secs_f64() / fast_p99.as_secs_f64(),
                row.extra * 100.0
            );
        }
    });
}
