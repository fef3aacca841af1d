//! Experiment (not part of the test command): the 503, 503, 200 path at
//! concurrency 1, counted rather than timed.
//!
//! For each variant, per call: parks of the calling runtime, polls of the call
//! future that returned `Pending`, connects the client started (a counting
//! connector), tasks hyper-util spawned (a counting executor), connections the
//! server accepted, and whether each attempt went out on the same connection
//! as the attempt before it (the local port in hyper-util's `HttpInfo`).
//!
//! It also reads where each exchange ran (the server's CPU, sent back under
//! the opt-in `x-bench-cpu` header, and this thread's as the head arrives)
//! and reports, per round, the share of exchanges that ran on one vCPU: on
//! the VM of `BENCHMARKS.md` that share, not the layers, set the 503 path's
//! speed at concurrency 1.
//!
//! Run: `cargo bench -p http-resilience --bench exp503 -- --rounds 12 --spawn`.
//! Options after `--`: `--calls N` per variant and round (512), `--rounds N`
//! (7), `--spawn` to run the calls in a task of their own as the `loopback`
//! bench does (otherwise in the `block_on` future), `--only N` for the N-th
//! variant alone (for `strace` or `perf`), `--kinds N` for the first N.

#[path = "support/net.rs"]
#[allow(dead_code)]
mod net;
#[path = "support/server.rs"]
mod server;
#[allow(dead_code)]
mod support;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use hyper_util::{
    client::legacy::{
        connect::{HttpConnector, HttpInfo},
        Client,
    },
    rt::{TokioExecutor, TokioTimer},
};
use net::{drain, median};
use server::{Server, CONNECTIONS, CPU, MODE};
use std::{
    cell::RefCell,
    future::Future,
    pin::Pin,
    sync::atomic::{AtomicU64, Ordering},
    task::{Context, Poll},
};
use support::{Req, RETRIES};
use tokio::time::Instant;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

static CONNECTS: AtomicU64 = AtomicU64::new(0);
static SPAWNS: AtomicU64 = AtomicU64::new(0);
static TASK_POLLS: AtomicU64 = AtomicU64::new(0);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The local port of every response's connection, in order.
    static PORTS: RefCell<Vec<u16>> = const { RefCell::new(Vec::new()) };
    /// Per response: the server's CPU as it answered, this thread's as the
    /// head arrived.
    static CPUS: RefCell<Vec<(i32, i32)>> = const { RefCell::new(Vec::new()) };
}

// ===== counting connector and executor =====

#[derive(Clone)]
struct CountingConnector(HttpConnector);

impl Service<Uri> for CountingConnector {
    type Response = <HttpConnector as Service<Uri>>::Response;
    type Error = <HttpConnector as Service<Uri>>::Error;
    type Future = <HttpConnector as Service<Uri>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, dst: Uri) -> Self::Future {
        CONNECTS.fetch_add(1, Ordering::Relaxed);
        self.0.call(dst)
    }
}

type BoxSendFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

#[derive(Clone)]
struct CountingExecutor(TokioExecutor);

struct PollCounted<F>(F);

impl<F: Future + Unpin> Future for PollCounted<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        TASK_POLLS.fetch_add(1, Ordering::Relaxed);
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Executor<BoxSendFuture> for CountingExecutor {
    fn execute(&self, fut: BoxSendFuture) {
        SPAWNS.fetch_add(1, Ordering::Relaxed);
        self.0.execute(Box::pin(PollCounted(fut)) as BoxSendFuture);
    }
}

type Bare = Client<CountingConnector, Full<Bytes>>;

fn client() -> Bare {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(CountingExecutor(TokioExecutor::new()))
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .retry_canceled_requests(false)
        .build(CountingConnector(connector))
}

/// The client, recording each response's connection (local port).
fn recorded(
    client: Bare,
) -> impl Service<Req, Response = Response<hyper::body::Incoming>, Error = BoxError> + Clone {
    ServiceBuilder::new()
        .map_err(Into::<BoxError>::into)
        .map_response(|response: Response<hyper::body::Incoming>| {
            let port = response
                .extensions()
                .get::<HttpInfo>()
                .map_or(0, |info| info.local_addr().port());
            PORTS.with(|ports| ports.borrow_mut().push(port));
            let server_cpu = response
                .headers()
                .get(CPU)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .unwrap_or(-1);
            let client_cpu = nix::sched::sched_getcpu().map_or(-1, |cpu| cpu as i32);
            CPUS.with(|cpus| cpus.borrow_mut().push((server_cpu, client_cpu)));
            response
        })
        .service(client)
}

// ===== callers =====

/// A 503, 503, 200 request that also asks the server for its CPU.
fn request(uri: &Uri, id: u64) -> Req {
    let mut request = net::request(uri, Some(id));
    request
        .headers_mut()
        .insert(CPU, HeaderValue::from_static("1"));
    request
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    HandRead,
    HandDrop,
    Tower,
    Ours,
    /// `HandRead` again, at another place in the rotation.
    HandRead2,
    /// A hand loop that reads each 503 and then sleeps zero (one timer tick
    /// of tokio, about 1 ms), as reqwest-retry's zero backoff does.
    Sleeper,
}

async fn call_tower<S, T>(svc: &mut S, uri: &Uri, id: u64) -> Result<StatusCode, BoxError>
where
    S: Service<Req, Response = Response<T>>,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    net::exchange(svc, request(uri, id)).await
}

async fn call_hand<S, T>(
    svc: &mut S,
    uri: &Uri,
    id: u64,
    read: bool,
    sleep: bool,
) -> Result<StatusCode, BoxError>
where
    S: Service<Req, Response = Response<T>>,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    let mut retries = 0;
    loop {
        let svc = svc.ready().await.map_err(Into::into)?;
        let response = svc.call(request(uri, id)).await.map_err(Into::into)?;
        let last = response.status() != StatusCode::SERVICE_UNAVAILABLE || retries == RETRIES;
        if last || read {
            let status = drain(response).await?;
            if last {
                return Ok(status);
            }
        }
        retries += 1;
        if sleep {
            tokio::time::sleep(std::time::Duration::ZERO).await;
        }
    }
}

/// Counts the polls of `F` that return `Pending`.
struct Pendings<F> {
    inner: F,
    pending: u64,
}

impl<F: Future + Unpin> Future for Pendings<F> {
    type Output = (F::Output, u64);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.inner).poll(cx) {
            Poll::Ready(out) => Poll::Ready((out, self.pending)),
            Poll::Pending => {
                self.pending += 1;
                Poll::Pending
            }
        }
    }
}

async fn accepted(probe: &mut Bare, uri: &Uri) -> u64 {
    let mut request = Request::new(Full::new(Bytes::new()));
    *request.uri_mut() = uri.clone();
    request
        .headers_mut()
        .insert(MODE, HeaderValue::from_static(CONNECTIONS));
    let response = probe.ready().await.unwrap().call(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    std::str::from_utf8(&body).unwrap().parse().unwrap()
}

fn parks() -> u64 {
    tokio::runtime::Handle::current()
        .metrics()
        .worker_park_count(0)
}

#[derive(Default, Debug, Clone)]
struct Counts {
    calls: u64,
    parks: u64,
    pendings: u64,
    connects: u64,
    spawns: u64,
    task_polls: u64,
    accepted: u64,
    attempts: u64,
    same_conn_as_previous: u64,
    distinct_conns: usize,
    /// Exchanges whose answer the server made on the CPU the client then
    /// received it on.
    same_cpu: u64,
    /// The index of the first exchange not on one CPU, if any, and the
    /// number of changes between the two placements along the run.
    first_split: Option<usize>,
    flips: usize,
    micros: f64,
}

type CallFn = Box<dyn Fn(u64) -> Pin<Box<dyn Future<Output = Result<StatusCode, BoxError>>>>>;

fn caller(kind: Kind, uri: &Uri) -> CallFn {
    let bare = recorded(client());
    let hand = bare.clone();
    let tower = support::tower_nesting(bare.clone());
    let ours = support::ours(bare);
    let uri = uri.clone();
    Box::new(
        move |id: u64| -> Pin<Box<dyn Future<Output = Result<StatusCode, BoxError>>>> {
            let uri = uri.clone();
            match kind {
                Kind::HandRead | Kind::HandRead2 => {
                    let mut s = hand.clone();
                    Box::pin(async move { call_hand(&mut s, &uri, id, true, false).await })
                }
                Kind::HandDrop => {
                    let mut s = hand.clone();
                    Box::pin(async move { call_hand(&mut s, &uri, id, false, false).await })
                }
                Kind::Sleeper => {
                    let mut s = hand.clone();
                    Box::pin(async move { call_hand(&mut s, &uri, id, true, true).await })
                }
                Kind::Tower => {
                    let mut s = tower.clone();
                    Box::pin(async move { call_tower(&mut s, &uri, id).await })
                }
                Kind::Ours => {
                    let mut s = ours.clone();
                    Box::pin(async move { call_tower(&mut s, &uri, id).await })
                }
            }
        },
    )
}

/// `calls` calls in sequence, in a task of their own (as the loopback bench's
/// worker) or in the `block_on` future itself.
async fn run(
    one: &std::rc::Rc<CallFn>,
    uri: &Uri,
    probe: &mut Bare,
    calls: u64,
    spawn: bool,
) -> Counts {
    // Settle: let background tasks finish.
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
    PORTS.with(|p| p.borrow_mut().clear());
    CPUS.with(|p| p.borrow_mut().clear());
    let accepted_before = accepted(probe, uri).await;
    let (c0, s0, t0) = (
        CONNECTS.load(Ordering::Relaxed),
        SPAWNS.load(Ordering::Relaxed),
        TASK_POLLS.load(Ordering::Relaxed),
    );
    let one = one.clone();
    let start = Instant::now();
    let work = async move {
        let mut counts = Counts::default();
        for _ in 0..calls {
            let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
            let p0 = parks();
            let (status, pending) = Pendings {
                inner: one(id),
                pending: 0,
            }
            .await;
            counts.parks += parks() - p0;
            assert_eq!(status.unwrap(), StatusCode::OK);
            counts.pendings += pending;
            counts.calls += 1;
        }
        counts
    };
    let mut counts = if spawn {
        tokio::task::spawn_local(work).await.unwrap()
    } else {
        work.await
    };
    counts.micros = start.elapsed().as_secs_f64() * 1e6 / calls as f64;
    counts.connects = CONNECTS.load(Ordering::Relaxed) - c0;
    counts.spawns = SPAWNS.load(Ordering::Relaxed) - s0;
    counts.task_polls = TASK_POLLS.load(Ordering::Relaxed) - t0;
    counts.accepted = accepted(probe, uri).await - accepted_before;
    PORTS.with(|p| {
        let p = p.borrow();
        counts.attempts = p.len() as u64;
        counts.same_conn_as_previous = p.windows(2).filter(|w| w[0] == w[1]).count() as u64;
        let mut d = p.clone();
        d.sort_unstable();
        d.dedup();
        counts.distinct_conns = d.len();
    });
    CPUS.with(|c| {
        let c = c.borrow();
        let same: Vec<bool> = c.iter().map(|(s, c)| s == c).collect();
        counts.same_cpu = same.iter().filter(|&&x| x).count() as u64;
        counts.first_split = same.iter().position(|&x| !x);
        counts.flips = same.windows(2).filter(|w| w[0] != w[1]).count();
    });
    counts
}

async fn bench(server: &Server, calls: u64, rounds: usize, spawn: bool) {
    let uri: Uri = server.url("/").parse().unwrap();
    let mut probe = client();
    let all_kinds = [
        Kind::HandRead,
        Kind::HandDrop,
        Kind::Tower,
        Kind::Ours,
        Kind::HandRead2,
        Kind::Sleeper,
    ];
    // `--only N`: one variant alone (for strace and perf).
    let only = server::count_arg("--only", 0, all_kinds.len());
    let kinds: Vec<Kind> = if std::env::args().any(|a| a == "--only") {
        vec![all_kinds[only - 1]]
    } else {
        // `--kinds N`: the first N variants only.
        all_kinds[..server::count_arg("--kinds", all_kinds.len(), all_kinds.len())].to_vec()
    };
    let callers: Vec<std::rc::Rc<CallFn>> = kinds
        .iter()
        .map(|&k| std::rc::Rc::new(caller(k, &uri)))
        .collect();
    for one in &callers {
        run(one, &uri, &mut probe, 256, spawn).await;
    }
    let mut all: Vec<Vec<Counts>> = kinds.iter().map(|_| Vec::new()).collect();
    // Every run in the order made: (variant, same-CPU share, us per call).
    let mut sequence: Vec<(Kind, f64, f64)> = Vec::new();
    for r in 0..rounds {
        for k in 0..kinds.len() {
            let i = (k + r) % kinds.len();
            let counts = run(&callers[i], &uri, &mut probe, calls, spawn).await;
            sequence.push((
                kinds[i],
                counts.same_cpu as f64 / counts.attempts.max(1) as f64,
                counts.micros,
            ));
            all[i].push(counts);
        }
    }
    println!("spawn = {spawn}; {rounds} rounds of {calls} calls; per call: parks, pend, connect, spawns, tpolls; totals: accepted, attempts, sameconn; conns: max distinct per round");
    println!(
        "{:<10} {:>7} {:>7} {:>7} {:>7} {:>8} {:>8} {:>9} {:>9} {:>6} {:>8} {:>6}",
        "variant",
        "parks",
        "pend",
        "connect",
        "spawns",
        "tpolls",
        "accepted",
        "attempts",
        "sameconn",
        "conns",
        "us/call",
        "x"
    );
    let _ = "samecpu";
    // By the number of runs since the last `Sleeper` run (1: right after it).
    let mut by_distance: Vec<Vec<(f64, f64)>> = vec![Vec::new(); 2 * kinds.len()];
    let mut since: Option<usize> = None;
    for &(kind, share, micros) in &sequence {
        if kind == Kind::Sleeper {
            since = Some(0);
            continue;
        }
        if let Some(d) = since.as_mut() {
            *d += 1;
            by_distance[*d].push((share, micros));
        }
    }
    for (d, runs) in by_distance
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty())
    {
        println!(
            "runs since the zero-sleep loop {d}: {} runs, same-CPU share median {:.2}, us/call median {:.0}",
            runs.len(),
            median(runs.iter().map(|r| r.0).collect()),
            median(runs.iter().map(|r| r.1).collect()),
        );
    }
    for (i, kind) in kinds.iter().enumerate() {
        let c = &all[i];
        let calls: u64 = c.iter().map(|c| c.calls).sum();
        let per = |f: &dyn Fn(&Counts) -> u64| c.iter().map(f).sum::<u64>() as f64 / calls as f64;
        let ratio = median(
            c.iter()
                .zip(&all[0])
                .map(|(c, b)| b.micros / c.micros)
                .collect(),
        );
        println!(
            "{:<10} {:>7.3} {:>7.3} {:>7.3} {:>7.3} {:>8.3} {:>8} {:>9} {:>9} {:>6} {:>8.1} {:>6.3}",
            format!("{kind:?}"),
            per(&|c| c.parks),
            per(&|c| c.pendings),
            per(&|c| c.connects),
            per(&|c| c.spawns),
            per(&|c| c.task_polls),
            c.iter().map(|c| c.accepted).sum::<u64>(),
            c.iter().map(|c| c.attempts).sum::<u64>(),
            c.iter().map(|c| c.same_conn_as_previous).sum::<u64>(),
            c.iter().map(|c| c.distinct_conns).max().unwrap_or(0),
            median(c.iter().map(|c| c.micros).collect()),
            ratio,
        );
        println!(
            "{:<10} same-CPU exchanges {} of {} (per round: {:?}); us/call per round: {:?}",
            "",
            c.iter().map(|c| c.same_cpu).sum::<u64>(),
            c.iter().map(|c| c.attempts).sum::<u64>(),
            c.iter()
                .map(|c| c.same_cpu * 100 / c.attempts.max(1))
                .collect::<Vec<_>>(),
            c.iter().map(|c| c.micros as u64).collect::<Vec<_>>(),
        );
        println!(
            "{:<10} first split exchange per round: {:?}; placement changes per round: {:?}",
            "",
            c.iter()
                .map(|c| c.first_split.map_or(-1, |i| i as i64))
                .collect::<Vec<_>>(),
            c.iter().map(|c| c.flips).collect::<Vec<_>>(),
        );
    }
}

fn main() {
    server::serve_if_asked();
    let calls = server::count_arg("--calls", 512, 1_000_000) as u64;
    let rounds = server::count_arg("--rounds", 7, 1000);
    let spawn = std::env::args().any(|a| a == "--spawn");
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let local = tokio::task::LocalSet::new();
    local.block_on(&runtime, bench(&server, calls, rounds, spawn));
    drop(server);
}
