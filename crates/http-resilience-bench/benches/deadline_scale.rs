//! Deadline accuracy and scale: how late the deadline
//! error arrives, and the memory each call in flight holds, with 1,000 and
//! 10,000 calls in flight against an upstream that never answers.
//!
//! Every call is its own task on a multi-thread runtime with 2 workers; all
//! are spawned at once, each with a deadline 500 ms ahead. The inner service
//! is a `tower::service_fn` that returns `std::future::pending()`, so what is
//! measured is the timer and the layers, not a network. Variants:
//!
//! - `tokio timeout_at`: the floor, tokio's own timer around the pending
//!   future (no layer);
//! - `tower Timeout`: `tower::timeout::Timeout(500 ms)`;
//! - `tower nesting`: `Timeout(500 ms)` → `Retry(503, at most 2 retries)` →
//!   `Timeout(3 s)`, the other benches' nesting with this deadline;
//! - `DeadlineLayer`: our deadline alone;
//! - `Deadline + StatusRetry`: our stack without its attempt timeout, which
//!   shows what the second timer of each call (the attempt timeout, capped at
//!   the deadline, so due at the same instant) costs;
//! - `ours`: `DeadlineLayer(500 ms)` → `StatusRetryLayer(503, FixedDelay(0, 2))`
//!   → `AttemptTimeoutLayer(3 s)`;
//! - `ours, combined`: the same as `ResiliencePolicy::layer()`, one timer per call.
//!
//! Two ways to give "the same deadline":
//!
//! - **budget**: each call gets 500 ms from its own start (the layer's
//!   budget). The lateness is the error's arrival minus (the instant just
//!   before `call()` + 500 ms), an upper bound on the true lateness. The calls'
//!   deadlines spread over the time the spawning took.
//! - **instant**: every call carries one shared `RequestDeadline` (the same
//!   instant for all; tower's `Timeout` has no such input, and both tower variants are left out), so
//!   every timer expires in the same millisecond.
//!
//! Memory per call in flight: the bytes allocated and not freed between the
//! first spawn and a moment when every call is in flight and has been polled
//! (100 ms later, well before any deadline), divided by the calls; it
//! includes each task's own allocation. A second part runs 1,000 calls through
//! real connections to a hyper server (a child process on `127.0.0.1`) that
//! never answers: bare hyper-util with `tokio::time::timeout_at`, and our stack
//! around `transport::Builder`'s client.
//!
//! Each case runs `REPEATS` times, interleaved; the tables give medians.
//!
//! Run: `cargo bench -p http-resilience-bench --bench deadline_scale`; see
//! `BENCHMARKS.md`.

#[path = "support/net.rs"]
#[allow(dead_code)]
mod net;
#[path = "support/server.rs"]
mod server;
// NOTE: only the retry policies (`Retry503` and ours) are used here.
#[allow(dead_code)]
mod support;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    policy::{FixedDelay, StatusDecoder},
    retry::StatusRetryLayer,
    transport, RequestDeadline,
};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::{TokioExecutor, TokioTimer},
};
use net::median;
use server::{Server, HANG, MODE};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{
    alloc::System,
    convert::Infallible,
    future::{pending, Pending},
    hint::black_box,
    sync::Arc,
    time::Duration,
};
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

type Req = Request<Full<Bytes>>;

/// Every call's deadline (the layer's budget).
const BUDGET: Duration = Duration::from_millis(500);
/// The attempt timeout of our stack: longer than the budget, so the deadline
/// is what ends every call.
const ATTEMPT_LIMIT: Duration = Duration::from_secs(3);
/// Calls in flight, in process.
const SCALES: [usize; 2] = [1_000, 10_000];
/// Calls in flight over loopback (one connection each).
const LOOPBACK_CALLS: usize = 1_000;
/// Runs of each case, unless `--repeats N` says otherwise.
const REPEATS: usize = 3;
/// From the first spawn to the memory reading; far below `BUDGET`.
const SETTLE: Duration = Duration::from_millis(100);
/// A run that takes longer than this fails the bench.
const RUN_LIMIT: Duration = Duration::from_secs(30);

/// Where the deadline comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// `BUDGET` from each call's start.
    Budget,
    /// One `RequestDeadline` for every call.
    Instant,
}

/// What one call reports.
struct Record {
    /// Arrival of the error minus the deadline, in nanoseconds.
    late_ns: i64,
    /// The call failed with `DeadlineExceeded`.
    deadline_error: bool,
    /// The call failed at all.
    failed: bool,
}

/// What one run measured.
struct Sample {
    /// Sorted, in nanoseconds.
    late_ns: Vec<i64>,
    live_bytes_per_call: f64,
    allocs_per_call: f64,
    deadline_errors: usize,
    failures: usize,
    spawn: Duration,
}

impl Sample {
    fn percentile_ms(&self, q: f64) -> f64 {
        let rank = (self.late_ns.len() as f64 * q).ceil() as usize;
        self.late_ns[rank.clamp(1, self.late_ns.len()) - 1] as f64 / 1e6
    }
}

// ===== the variants =====

/// What the inner services would answer, if they ever did.
type Answer = Result<Response<Full<Bytes>>, Infallible>;

/// An inner service that never answers.
fn never(
) -> impl Service<Req, Response = Response<Full<Bytes>>, Error = Infallible, Future = Pending<Answer>>
       + Clone
       + Send
       + 'static {
    tower::service_fn(|_: Req| pending())
}

/// The deadline a request carries, or `BUDGET` from now.
fn deadline_of<B>(request: &Request<B>) -> Instant {
    RequestDeadline::of(request).map_or_else(|| Instant::now() + BUDGET, |d| d.instant())
}

/// Spawns `calls` calls on `svc`, each a task with a fresh request from
/// `request`; measures memory once all are in flight, then the lateness of
/// each error.
async fn run<S, F>(svc: S, calls: usize, due: Due, request: F) -> Sample
where
    S: Service<Req> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
    S::Error: Into<BoxError> + Send,
    F: Fn() -> Req + Clone + Send + 'static,
{
    // NOTE: allocated before the count starts.
    let mut handles = Vec::with_capacity(calls);
    let mut records = Vec::with_capacity(calls);

    let region = Region::new(GLOBAL);
    let start = Instant::now();
    let shared = start + BUDGET;
    for _ in 0..calls {
        let svc = svc.clone();
        let request = request.clone();
        handles.push(tokio::spawn(async move {
            let mut request = request();
            if due == Due::Instant {
                request.extensions_mut().insert(RequestDeadline::at(shared));
            }
            let sent = Instant::now();
            let result = svc.oneshot(request).await;
            let arrival = Instant::now();
            let deadline = match due {
                Due::Budget => sent + BUDGET,
                Due::Instant => shared,
            };
            let late_ns = if arrival >= deadline {
                (arrival - deadline).as_nanos() as i64
            } else {
                -((deadline - arrival).as_nanos() as i64)
            };
            let (failed, deadline_error) = match result {
                Ok(response) => {
                    black_box(response);
                    (false, false)
                }
                Err(err) => (true, Into::<BoxError>::into(err).is::<DeadlineExceeded>()),
            };
            Record {
                late_ns,
                deadline_error,
                failed,
            }
        }));
    }
    let spawn = start.elapsed();
    tokio::time::sleep_until(start + SETTLE).await;
    let stats = region.change();
    assert!(
        start.elapsed() < BUDGET,
        "the memory reading comes before any deadline"
    );

    for handle in handles {
        records.push(handle.await.expect("the call's task finishes"));
    }
    let mut late_ns: Vec<i64> = records.iter().map(|r| r.late_ns).collect();
    late_ns.sort_unstable();
    // NOTE: `stats_alloc` already counts a realloc's growth in
    // `bytes_allocated` and its shrinking in `bytes_deallocated`;
    // `bytes_reallocated` repeats the net change, so it is not added.
    let live = stats.bytes_allocated as f64 - stats.bytes_deallocated as f64;
    Sample {
        late_ns,
        live_bytes_per_call: live / calls as f64,
        allocs_per_call: (stats.allocations + stats.reallocations) as f64 / calls as f64,
        deadline_errors: records.iter().filter(|r| r.deadline_error).count(),
        failures: records.iter().filter(|r| r.failed).count(),
        spawn,
    }
}

/// A request as the in-process variants get it: no URI, no headers.
fn plain() -> Req {
    Request::new(Full::new(Bytes::new()))
}

/// One case: a variant at a scale.
async fn case(variant: &str, calls: usize, due: Due) -> Sample {
    let calls_run = async {
        match variant {
            "tokio timeout_at" => {
                let svc = tower::service_fn(|request: Req| {
                    let deadline = deadline_of(&request);
                    tokio::time::timeout_at(deadline, pending::<Answer>())
                });
                run(svc, calls, due, plain).await
            }
            "tower Timeout" => {
                let svc = ServiceBuilder::new().timeout(BUDGET).service(never());
                run(svc, calls, due, plain).await
            }
            "tower nesting" => {
                let svc = ServiceBuilder::new()
                    .timeout(BUDGET)
                    .retry(support::Retry503::new(2))
                    .timeout(ATTEMPT_LIMIT)
                    .service(never());
                run(svc, calls, due, plain).await
            }
            "DeadlineLayer" => {
                let svc = ServiceBuilder::new()
                    .layer(DeadlineLayer::new(BUDGET))
                    .service(never());
                run(svc, calls, due, plain).await
            }
            "Deadline + StatusRetry" => {
                let svc = ServiceBuilder::new()
                    .layer(DeadlineLayer::new(BUDGET))
                    .layer(StatusRetryLayer::new(support::retry_503()))
                    .service(never());
                run(svc, calls, due, plain).await
            }
            "ours" => run(ours(never()), calls, due, plain).await,
            "ours, combined" => run(ours_fused(never()), calls, due, plain).await,
            _ => unreachable!("a known variant"),
        }
    };
    tokio::time::timeout(RUN_LIMIT, calls_run)
        .await
        .expect("the run ends in time")
}

/// Our stack combined (`ResiliencePolicy::layer()`), the same policy; its
/// attempt limit is the deadline (`ResiliencePolicy` refuses a longer one, which the
/// deadline would cut to the same instant anyway).
fn ours_fused<S>(inner: S) -> http_resilience::Resilience<S, StatusDecoder, FixedDelay> {
    let resilience = http_resilience::ResiliencePolicy::new(
        BUDGET,
        ATTEMPT_LIMIT.min(BUDGET),
        support::retry_503(),
    )
    .expect("the limits fit together");
    tower::Layer::layer(&resilience.layer(), inner)
}

/// Our stack, the policy of the other benches with a 500 ms deadline.
fn ours<S>(
    inner: S,
) -> http_resilience::deadline::Deadline<
    http_resilience::retry::StatusRetry<
        http_resilience::attempt_timeout::AttemptTimeout<S>,
        StatusDecoder,
        FixedDelay,
    >,
> {
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(BUDGET))
        .layer(StatusRetryLayer::new(support::retry_503()))
        .layer(AttemptTimeoutLayer::new(ATTEMPT_LIMIT))
        .service(inner)
}

/// The loopback cases: `LOOPBACK_CALLS` calls over real connections to a
/// server that never answers.
async fn loopback_case(variant: &str, uri: Arc<Uri>) -> Sample {
    let request = move || {
        let mut request = Request::new(Full::new(Bytes::new()));
        *request.uri_mut() = Uri::clone(&uri);
        request
            .headers_mut()
            .insert(MODE, HeaderValue::from_static(HANG));
        request
    };
    let calls_run = async {
        match variant {
            "hyper-util + timeout_at" => {
                let mut connector = HttpConnector::new();
                connector.set_nodelay(true);
                let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
                    .timer(TokioTimer::new())
                    .pool_timer(TokioTimer::new())
                    .retry_canceled_requests(false)
                    .build(connector);
                let svc = tower::service_fn(move |request: Req| {
                    let deadline = deadline_of(&request);
                    tokio::time::timeout_at(deadline, client.request(request))
                });
                run(svc, LOOPBACK_CALLS, Due::Budget, request).await
            }
            "ours + transport" => {
                let client = transport::Builder::new()
                    .build_http::<Full<Bytes>>()
                    .expect("a transport client");
                run(ours(client), LOOPBACK_CALLS, Due::Budget, request).await
            }
            _ => unreachable!("a known variant"),
        }
    };
    tokio::time::timeout(RUN_LIMIT, calls_run)
        .await
        .expect("the run ends in time")
}

// ===== report =====

fn header() {
    println!(
        "{:<8} {:>6} {:<24} {:>8} {:>8} {:>8} {:>8} {:>11} {:>11} {:>11} {:>9}",
        "due",
        "calls",
        "variant",
        "p50 ms",
        "p99 ms",
        "max ms",
        "min ms",
        "bytes/call",
        "allocs/call",
        "DeadlineExc",
        "spawn ms"
    );
}

fn row(due: Due, calls: usize, variant: &str, samples: &[Sample]) {
    let of = |f: &dyn Fn(&Sample) -> f64| median(samples.iter().map(f).collect());
    let deadline_errors: usize = samples.iter().map(|s| s.deadline_errors).sum();
    let failures: usize = samples.iter().map(|s| s.failures).sum();
    assert_eq!(failures, calls * samples.len(), "every call fails");
    println!(
        "{:<8} {:>6} {:<24} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>11.0} {:>11.2} {:>11} {:>9.1}",
        format!("{due:?}").to_lowercase(),
        calls,
        variant,
        of(&|s| s.percentile_ms(0.50)),
        of(&|s| s.percentile_ms(0.99)),
        of(&|s| s.percentile_ms(1.0)),
        of(&|s| s.late_ns[0] as f64 / 1e6),
        of(&|s| s.live_bytes_per_call),
        of(&|s| s.allocs_per_call),
        format!("{}/{}", deadline_errors, failures),
        of(&|s| s.spawn.as_secs_f64() * 1e3),
    );
}

async fn bench(repeats: usize) {
    println!(
        "deadline lateness (error arrival minus deadline; medians over {repeats} runs) and \
         memory per call in flight; 2 worker threads, deadline {BUDGET:?}; \
         DeadlineExc counts the calls that failed with DeadlineExceeded"
    );
    println!();
    header();
    let variants = [
        "tokio timeout_at",
        "tower Timeout",
        "tower nesting",
        "DeadlineLayer",
        "Deadline + StatusRetry",
        "ours",
        "ours, combined",
    ];
    for due in [Due::Budget, Due::Instant] {
        for calls in SCALES {
            let mut samples: Vec<Vec<Sample>> = variants.iter().map(|_| Vec::new()).collect();
            for r in 0..repeats {
                for k in 0..variants.len() {
                    let i = (k + r) % variants.len();
                    if due == Due::Instant && variants[i].starts_with("tower") {
                        continue;
                    }
                    samples[i].push(case(variants[i], calls, due).await);
                }
            }
            for (variant, samples) in variants.iter().zip(&samples) {
                if !samples.is_empty() {
                    row(due, calls, variant, samples);
                }
            }
        }
    }

    println!();
    println!(
        "over loopback: {LOOPBACK_CALLS} calls, one connection each, to a server that never answers"
    );
    println!();
    header();
    let server = Server::start();
    let uri = Arc::new(server.url("/").parse::<Uri>().expect("a URI"));
    let variants = ["hyper-util + timeout_at", "ours + transport"];
    let mut samples: Vec<Vec<Sample>> = variants.iter().map(|_| Vec::new()).collect();
    for r in 0..repeats {
        for k in 0..variants.len() {
            let i = (k + r) % variants.len();
            samples[i].push(loopback_case(variants[i], uri.clone()).await);
        }
    }
    for (variant, samples) in variants.iter().zip(&samples) {
        row(Due::Budget, LOOPBACK_CALLS, variant, samples);
    }
    drop(server);
}

/// `--repeats N` after `--` on the `cargo bench` command line; `REPEATS` by
/// default.
fn repeats() -> usize {
    server::count_arg("--repeats", REPEATS, 20)
}

fn main() {
    server::serve_if_asked();
    // NOTE: `cargo bench` passes `--bench`, which is ignored.
    let repeats = repeats();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a multi-thread runtime");
    runtime.block_on(bench(repeats));
}
