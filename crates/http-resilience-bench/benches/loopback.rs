//! Loopback HTTP/1.1: requests per second, p50/p99 latency
//! and allocations per request, for the stacks around a real client, against
//! a hyper server in a child process on `127.0.0.1`.
//!
//! Two modes:
//!
//! - **200**: the server answers `ok` at once. Variants: bare hyper-util
//!   client; our `transport::Builder` client alone; tower's nesting and our
//!   stack around the bare client; the floor of those semantics (the
//!   request copy a retry keeps, a deadline extension and two plain tokio
//!   timeouts around the bare client, nothing else); our stack around `transport::Builder`'s client (the stack of the
//!   crate docs); plain reqwest; reqwest with reqwest-middleware and
//!   reqwest-retry (2 retries). Ratios are to bare.
//! - **503, 503, 200**: the server answers 503 twice and then 200 for each
//!   request id; every retry waits zero. Variants: a hand loop of (up to) three
//!   raw calls on the bare client that reads each 503's body; the same loop
//!   dropping each 503 unread, as both retry layers do; the floor (that loop
//!   with a copy of each request that may be retried, the deadline extension
//!   on every attempt, a timeout per attempt and one for the call); tower's nesting; our
//!   stack (around both clients); the first loop again (a control: its
//!   spread from 1 is the noise floor); reqwest-retry. Ratios are to the
//!   first. reqwest-retry's zero backoff still sleeps, which on this VM leaves
//!   client and server on one vCPU for a while; two untimed runs of the first
//!   variant follow each of its runs, so that no variant gains from coming
//!   after it in the rotation.
//!
//! Every call reads the response body to its end (which lets the connection go
//! back to the pool), and every call must end in a 200, or the bench panics.
//!
//! Callers run with concurrency 1 and 32 on a current-thread runtime (one
//! core; the server has the other). Variants are interleaved round by round,
//! each round starting with a different variant. A round's requests per
//! second is its count over its wall time; its p50 and p99 are over its
//! latencies; the tables give medians over rounds, each ratio is the median
//! of the per-round ratios, and "x min-max" is the range of the per-round
//! throughput ratios. `cpu us` is the CPU time of the client's one thread
//! per request (`CLOCK_THREAD_CPUTIME_ID`: callers, client and its
//! connections; not the server), and `+cpu` the median over rounds of its
//! excess over the first variant's in the same round. Allocations are
//! counted in this process only (the server's are not); the harness adds
//! about 0.02 per request at concurrency 32 (one task per worker).
//!
//! Run: `cargo bench -p http-resilience-bench --bench loopback`; see
//! `BENCHMARKS.md`.

// NOTE: only the variants and limits of `support` are used here; its
// in-process services and calls serve the other benches.
#[path = "support/net.rs"]
mod net;
#[path = "support/server.rs"]
mod server;
#[allow(dead_code)]
mod support;

use bytes::Bytes;
use cpu_time::ThreadTime;
use http::{HeaderValue, Response, StatusCode, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use http_resilience::transport;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use net::{bare_client, median};
use reqwest_retry::{policies::ExponentialBackoff, Jitter, RetryTransientMiddleware};
use server::{Server, CONNECTIONS, FLAKY, MODE, REQUEST_ID};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{
    alloc::System,
    future::Future,
    pin::Pin,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};
use support::{Req, ATTEMPT_LIMIT, CALL_LIMIT, RETRIES};
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Measured rounds per variant, unless `--rounds N` says otherwise. Many
/// short rounds, so that the medians shrug off a neighbour's burst.
const ROUNDS: usize = 15;
/// Requests per variant per round, 200 mode (a multiple of 32).
const REQUESTS: usize = 1_024;
/// Calls per variant per round, 503-503-200 mode: three exchanges each.
const FLAKY_CALLS: usize = 512;
/// Requests per variant before the rounds: they fill the pool.
const WARM_UP: usize = 256;
const CONCURRENCY: [usize; 2] = [1, 32];
/// Untimed runs of the first variant after an unsettling one.
const SETTLE_RUNS: usize = 2;
/// A round that takes longer than this fails the bench.
const ROUND_LIMIT: Duration = Duration::from_secs(60);

/// Unique ids for the server's 503-503-200 counter.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ok,
    Flaky,
}

// ===== callers =====

/// One variant's way of making a call and reading the whole response.
trait Caller: Clone + 'static {
    /// One call in `mode`; `id` keys the server's 503-503-200 counter.
    async fn call(&mut self, mode: Mode, id: u64) -> Result<StatusCode, BoxError>;
}

/// A request for `uri` as the tower-based variants send it (see
/// [`net::request`]).
fn request(uri: &Uri, mode: Mode, id: u64) -> Req {
    net::request(uri, (mode == Mode::Flaky).then_some(id))
}

/// A `tower::Service` over HTTP: the bare client, or a stack around it.
#[derive(Clone)]
struct Tower<S> {
    svc: S,
    uri: Uri,
}

impl<S> Tower<S> {
    fn new(svc: S, uri: &Uri) -> Self {
        Self {
            svc,
            uri: uri.clone(),
        }
    }
}

impl<S, T> Caller for Tower<S>
where
    S: Service<Req, Response = Response<T>> + Clone + 'static,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    async fn call(&mut self, mode: Mode, id: u64) -> Result<StatusCode, BoxError> {
        let request = request(&self.uri, mode, id);
        net::exchange(&mut self.svc, request).await
    }
}

/// A hand loop on a service (see [`net::hand_loop`]): up to three raw calls,
/// each 503 read or dropped, with or without the floor's deadline and timers.
#[derive(Clone)]
struct HandLoop<S> {
    inner: Tower<S>,
    how: net::HandLoop,
}

impl<S> HandLoop<S> {
    /// Each 503 read (`read_503_bodies`) or dropped; no timers.
    fn plain(inner: Tower<S>, read_503_bodies: bool) -> Self {
        let how = net::HandLoop {
            retries: RETRIES,
            read_503_bodies,
            limits: None,
        };
        Self { inner, how }
    }

    /// The least any stack with our semantics does: a copy of each request
    /// that may be retried, the call's deadline on every attempt's request, a
    /// timeout per attempt and one for the call, each 503 dropped unread (as
    /// both retry layers do). In the 200 mode that is one attempt.
    fn floor(inner: Tower<S>) -> Self {
        let how = net::HandLoop {
            retries: RETRIES,
            read_503_bodies: false,
            limits: Some((ATTEMPT_LIMIT, CALL_LIMIT)),
        };
        Self { inner, how }
    }
}

impl<S, T> Caller for HandLoop<S>
where
    S: Service<Req, Response = Response<T>> + Clone + 'static,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    async fn call(&mut self, mode: Mode, id: u64) -> Result<StatusCode, BoxError> {
        let flaky = (mode == Mode::Flaky).then_some(id);
        net::hand_loop(&mut self.inner.svc, &self.inner.uri, flaky, self.how).await
    }
}

/// reqwest alone, no timeout (reqwest's counterpart of bare).
#[derive(Clone)]
struct Reqwest {
    client: reqwest::Client,
    url: reqwest::Url,
}

impl Caller for Reqwest {
    async fn call(&mut self, mode: Mode, id: u64) -> Result<StatusCode, BoxError> {
        let mut request = self.client.get(self.url.clone());
        if mode == Mode::Flaky {
            request = request.header(MODE, FLAKY).header(REQUEST_ID, id);
        }
        let mut response = request.send().await?;
        let status = response.status();
        while response.chunk().await?.is_some() {}
        Ok(status)
    }
}

/// reqwest with reqwest-retry (2 retries, zero waits): the client's timeout
/// bounds each attempt (the middleware sends each one through the client) and
/// a `tokio::time::timeout` the whole call, the same semantics as the other
/// stacks.
#[derive(Clone)]
struct ReqwestRetry {
    client: reqwest_middleware::ClientWithMiddleware,
    url: reqwest::Url,
}

impl Caller for ReqwestRetry {
    async fn call(&mut self, mode: Mode, id: u64) -> Result<StatusCode, BoxError> {
        let call = async {
            let mut request = self.client.get(self.url.clone());
            if mode == Mode::Flaky {
                request = request.header(MODE, FLAKY).header(REQUEST_ID, id);
            }
            let mut response = request.send().await?;
            let status = response.status();
            while response.chunk().await?.is_some() {}
            Ok::<_, BoxError>(status)
        };
        tokio::time::timeout(CALL_LIMIT, call).await?
    }
}

// ===== clients =====

fn reqwest_client(attempt_limit: Option<Duration>) -> reqwest::Client {
    let builder = reqwest::Client::builder().no_proxy().tcp_nodelay(true);
    match attempt_limit {
        Some(limit) => builder.timeout(limit),
        None => builder,
    }
    .build()
    .expect("a reqwest client")
}

fn reqwest_retry(url: reqwest::Url) -> ReqwestRetry {
    let policy = ExponentialBackoff::builder()
        .retry_bounds(Duration::ZERO, Duration::ZERO)
        .jitter(Jitter::None)
        .build_with_max_retries(RETRIES);
    let client = reqwest_middleware::ClientBuilder::new(reqwest_client(Some(ATTEMPT_LIMIT)))
        .with(RetryTransientMiddleware::new_with_policy(policy))
        .build();
    ReqwestRetry { client, url }
}

// ===== rounds =====

/// What one round of one variant measured.
struct Sample {
    requests: usize,
    wall: Duration,
    /// Sorted.
    latencies: Vec<Duration>,
    allocs: usize,
    bytes: usize,
    /// The CPU time of this thread, which runs every caller and the client's
    /// connections (the runtime has one thread).
    cpu: Duration,
    /// Connections the server accepted during the round.
    connections: u64,
}

impl Sample {
    fn rps(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64()
    }

    /// CPU microseconds per request.
    fn cpu_us(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.requests as f64
    }

    fn percentile(&self, q: f64) -> Duration {
        let rank = (self.latencies.len() as f64 * q).ceil() as usize;
        self.latencies[rank.clamp(1, self.latencies.len()) - 1]
    }
}

/// `requests` calls in `mode`, split over `concurrency` workers.
async fn round<C: Caller>(caller: &C, mode: Mode, concurrency: usize, requests: usize) -> Sample {
    let per_worker = requests / concurrency;
    // NOTE: every buffer is allocated before the count starts.
    let mut buffers: Vec<Vec<Duration>> = (0..concurrency)
        .map(|_| Vec::with_capacity(per_worker))
        .collect();
    let mut workers = Vec::with_capacity(concurrency);
    let mut latencies = Vec::with_capacity(per_worker * concurrency);

    let cpu = ThreadTime::now().as_duration();
    let region = Region::new(GLOBAL);
    let start = Instant::now();
    for mut buffer in buffers.drain(..) {
        let mut caller = caller.clone();
        workers.push(tokio::task::spawn_local(async move {
            for _ in 0..per_worker {
                let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                let sent = Instant::now();
                let status = caller.call(mode, id).await.expect("the call succeeds");
                buffer.push(sent.elapsed());
                assert_eq!(status, StatusCode::OK, "every call ends in a 200");
            }
            buffer
        }));
    }
    for worker in workers {
        latencies.extend(worker.await.expect("the worker finishes"));
    }
    let wall = start.elapsed();
    let stats = region.change();
    let cpu = ThreadTime::now().as_duration().saturating_sub(cpu);

    latencies.sort_unstable();
    Sample {
        requests: per_worker * concurrency,
        wall,
        latencies,
        allocs: stats.allocations + stats.reallocations,
        bytes: stats.bytes_allocated,
        cpu,
        connections: 0,
    }
}

type Run = Box<dyn Fn(Mode, usize, usize) -> Pin<Box<dyn Future<Output = Sample>>>>;

/// A named variant; its runs are monomorphised, only the round is boxed.
struct Variant {
    name: &'static str,
    run: Run,
    // Whether its runs leave the two processes placed unlike the others do,
    // so that the next run needs settling first (see `measure`).
    unsettles: bool,
}

fn variant<C: Caller>(name: &'static str, caller: C) -> Variant {
    Variant {
        name,
        run: Box::new(move |mode, concurrency, requests| {
            let caller = caller.clone();
            Box::pin(async move { round(&caller, mode, concurrency, requests).await })
        }),
        unsettles: false,
    }
}

impl Variant {
    /// Marks a variant whose runs sleep between exchanges (reqwest-retry's
    /// zero backoff still sleeps about 1 ms per retry): on this VM that leaves
    /// client and server on one vCPU for the next run, which is then several
    /// times faster at concurrency 1 than a run that finds them on two (see
    /// `BENCHMARKS.md`).
    fn unsettling(mut self) -> Self {
        self.unsettles = true;
        self
    }
}

/// The number of connections the server has accepted, asked over `probe`.
async fn accepted(probe: &mut Tower<Client<HttpConnector, Full<Bytes>>>) -> u64 {
    let mut request = request(&probe.uri, Mode::Ok, 0);
    request
        .headers_mut()
        .insert(MODE, HeaderValue::from_static(CONNECTIONS));
    let response = probe
        .svc
        .ready()
        .await
        .expect("the probe is ready")
        .call(request)
        .await
        .expect("the server answers");
    let body = response
        .into_body()
        .collect()
        .await
        .expect("the count")
        .to_bytes();
    std::str::from_utf8(&body)
        .ok()
        .and_then(|count| count.parse().ok())
        .expect("a number")
}

/// Warms every variant up, then runs `ROUNDS` interleaved rounds; returns
/// the samples per variant.
async fn measure(
    variants: &[Variant],
    probe: &mut Tower<Client<HttpConnector, Full<Bytes>>>,
    rounds: usize,
    (mode, concurrency, requests): (Mode, usize, usize),
) -> Vec<Vec<Sample>> {
    for variant in variants {
        let warm_up = (variant.run)(mode, concurrency, WARM_UP);
        tokio::time::timeout(ROUND_LIMIT, warm_up)
            .await
            .expect("the warm-up ends in time");
    }
    let mut samples: Vec<Vec<Sample>> = variants.iter().map(|_| Vec::new()).collect();
    for r in 0..rounds {
        for k in 0..variants.len() {
            let i = (k + r) % variants.len();
            let before = accepted(probe).await;
            let run = (variants[i].run)(mode, concurrency, requests);
            let mut sample = tokio::time::timeout(ROUND_LIMIT, run)
                .await
                .expect("the round ends in time");
            sample.connections = accepted(probe).await - before;
            samples[i].push(sample);
            if variants[i].unsettles {
                // NOTE: two untimed runs of the first variant bring the
                // placement back to where the other runs find it, so that no
                // variant gains from following this one in the rotation.
                for _ in 0..SETTLE_RUNS {
                    let settle = (variants[0].run)(mode, concurrency, requests);
                    tokio::time::timeout(ROUND_LIMIT, settle)
                        .await
                        .expect("the settling run ends in time");
                }
            }
        }
    }
    samples
}

// ===== report =====

fn report(title: &str, variants: &[Variant], samples: &[Vec<Sample>]) {
    let base = &samples[0];
    let per_round =
        |i: usize, f: &dyn Fn(&Sample) -> f64| -> Vec<f64> { samples[i].iter().map(f).collect() };
    let ratio = |i: usize, f: &dyn Fn(&Sample) -> f64| -> Vec<f64> {
        samples[i]
            .iter()
            .zip(base)
            .map(|(sample, base)| f(sample) / f(base))
            .collect()
    };
    let p50 = |s: &Sample| s.percentile(0.50).as_secs_f64() * 1e6;
    let p99 = |s: &Sample| s.percentile(0.99).as_secs_f64() * 1e6;
    let above = |i: usize| -> Vec<f64> {
        samples[i]
            .iter()
            .zip(base)
            .map(|(sample, base)| sample.cpu_us() - base.cpu_us())
            .collect()
    };
    println!();
    println!(
        "{title} (ratios to {}; medians over {} rounds)",
        variants[0].name,
        base.len()
    );
    println!(
        "{:<20} {:>7} {:>6} {:>11} {:>8} {:>6} {:>8} {:>6} {:>7} {:>6} {:>7} {:>7} {:>5}",
        "variant",
        "req/s",
        "x",
        "x min-max",
        "p50 us",
        "x",
        "p99 us",
        "x",
        "cpu us",
        "+cpu",
        "allocs",
        "bytes",
        "conns"
    );
    for (i, variant) in variants.iter().enumerate() {
        let requests: usize = samples[i].iter().map(|s| s.requests).sum();
        let allocs: usize = samples[i].iter().map(|s| s.allocs).sum();
        let bytes: usize = samples[i].iter().map(|s| s.bytes).sum();
        let connections: u64 = samples[i].iter().map(|s| s.connections).sum();
        let rps_ratios = ratio(i, &Sample::rps);
        let low = rps_ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let high = rps_ratios.iter().copied().fold(0.0, f64::max);
        println!(
            "{:<20} {:>7.0} {:>6.3} {:>11} {:>8.1} {:>6.3} {:>8.1} {:>6.3} {:>7.2} {:>6.2} {:>7.1} {:>7.0} {:>5}",
            variant.name,
            median(per_round(i, &Sample::rps)),
            median(rps_ratios),
            format!("{low:.2}-{high:.2}"),
            median(per_round(i, &p50)),
            median(ratio(i, &p50)),
            median(per_round(i, &p99)),
            median(ratio(i, &p99)),
            median(per_round(i, &Sample::cpu_us)),
            median(above(i)),
            allocs as f64 / requests as f64,
            bytes as f64 / requests as f64,
            connections,
        );
    }
}

async fn bench(server: &Server, rounds: usize) {
    let url = server.url("/");
    let uri: Uri = url.parse().expect("a URI");
    let reqwest_url = reqwest::Url::parse(&url).expect("a URL");
    let transport_client = || {
        transport::Builder::new()
            .build_http::<Full<Bytes>>()
            .expect("a transport client")
    };
    let mut probe = Tower::new(bare_client(), &uri);

    let happy = [
        variant("bare hyper-util", Tower::new(bare_client(), &uri)),
        variant("transport::Builder", Tower::new(transport_client(), &uri)),
        variant(
            "tower nesting",
            Tower::new(support::tower_nesting(bare_client()), &uri),
        ),
        variant("floor", HandLoop::floor(Tower::new(bare_client(), &uri))),
        variant("ours", Tower::new(support::ours(bare_client()), &uri)),
        variant(
            "ours, combined",
            Tower::new(support::ours_fused(bare_client()), &uri),
        ),
        variant(
            "ours + transport",
            Tower::new(support::ours(transport_client()), &uri),
        ),
        variant(
            "reqwest",
            Reqwest {
                client: reqwest_client(None),
                url: reqwest_url.clone(),
            },
        ),
        variant("reqwest-retry", reqwest_retry(reqwest_url.clone())),
    ];
    let flaky = [
        variant(
            "hand loop (bare)",
            HandLoop::plain(Tower::new(bare_client(), &uri), true),
        ),
        variant(
            "hand loop, 503 dropped",
            HandLoop::plain(Tower::new(bare_client(), &uri), false),
        ),
        variant("floor", HandLoop::floor(Tower::new(bare_client(), &uri))),
        variant(
            "tower nesting",
            Tower::new(support::tower_nesting(bare_client()), &uri),
        ),
        variant("ours", Tower::new(support::ours(bare_client()), &uri)),
        variant(
            "ours, combined",
            Tower::new(support::ours_fused(bare_client()), &uri),
        ),
        variant(
            "ours + transport",
            Tower::new(support::ours(transport_client()), &uri),
        ),
        variant("reqwest-retry", reqwest_retry(reqwest_url.clone())).unsettling(),
    ];
    // NOTE: the first variant again, one place before reqwest-retry: the
    // spread between the two copies of the baseline is the noise floor.
    let mut flaky = Vec::from(flaky);
    let at = flaky.len() - 1;
    flaky.insert(
        at,
        variant(
            "hand loop, again",
            HandLoop::plain(Tower::new(bare_client(), &uri), true),
        ),
    );

    for concurrency in CONCURRENCY {
        let samples = measure(
            &happy,
            &mut probe,
            rounds,
            (Mode::Ok, concurrency, REQUESTS),
        )
        .await;
        report(
            &format!("200, concurrency {concurrency}, {REQUESTS} requests per round"),
            &happy,
            &samples,
        );
        let samples = measure(
            &flaky,
            &mut probe,
            rounds,
            (Mode::Flaky, concurrency, FLAKY_CALLS),
        )
        .await;
        report(
            &format!(
                "503, 503, 200 at zero backoff, concurrency {concurrency}, {FLAKY_CALLS} calls per round"
            ),
            &flaky,
            &samples,
        );
    }
    println!();
    println!(
        "the server accepted {} connections in all (warm-ups included)",
        accepted(&mut probe).await
    );
}

/// `--rounds N` after `--` on the `cargo bench` command line; `ROUNDS` by
/// default.
fn rounds() -> usize {
    server::count_arg("--rounds", ROUNDS, 100)
}

fn main() {
    server::serve_if_asked();
    // NOTE: `cargo bench` passes `--bench`, which is ignored.
    let rounds = rounds();
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    let local = tokio::task::LocalSet::new();
    println!(
        "loopback HTTP/1.1 against a hyper server in a child process (127.0.0.1); \
         allocs and bytes per request in this process"
    );
    local.block_on(&runtime, bench(&server, rounds));
    drop(server);
}
