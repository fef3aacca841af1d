//! Soak: many concurrent calls with retries and faults
//! mixed, through a real client and the three layers, against loopback mock
//! servers; afterwards nothing is left behind.
//!
//! ```text
//! cargo test --test soak                                  # 1,000 calls (CI)
//! SOAK_CALLS=10000 cargo test --release --test soak       # the full size
//! ```
//!
//! # The calls
//!
//! Call `n` is of kind `n % 11` ([`Kind`]), each with one expected outcome:
//! a 200; a 503 then a 200; a 429 with `Retry-After: 0` then a 200; 503 on
//! every attempt; a POST that gets a 503 (not retried: not idempotent); a
//! reset before the head; a close before the head; no answer (the attempt
//! timeout); a head and then a stalled body (the read timeout); a body that
//! drips past the deadline (the deadline); and a caller that drops its call
//! after [`DROP_AFTER`] while the upstream stays silent.
//!
//! Calls start at [`START_RATE`] a second (10,000 calls over 2.5 s) and each
//! runs from its own start. Started all at once, 10,000 calls pushed some
//! first attempts past the attempt limit here: the listeners' accept queues
//! overflowed (a SYN resent after a second), and with more listeners the
//! first attempts still queued behind 10,000 connects on two cores.
//!
//! Every upstream is a `MockServer` that answers every request the same way
//! ([`Upstream`]); a test-side `map_request` between the attempt timeout and
//! the client sends each attempt of a call to the upstream its kind names for
//! that attempt (read from the policy's attempt header). So the faults are
//! mixed deterministically per call, and the requests each server must see
//! are known exactly.
//!
//! The stack is the `standard` preset's policy (its transient decoder, its
//! switches, deadline-aware scheduling with its 500 ms margin) with a short
//! backoff (10 ms, x2, at most 3 attempts) and short limits: [`DEADLINE`]
//! 6 s, [`ATTEMPT`] 1.5 s, and a transport read timeout of [`READ`] 3 s
//! (above the attempt timeout, so a silent upstream is an attempt timeout;
//! a stalled body ends 3 s after its head, 3 s before the deadline). Each
//! outcome is at least 1.2 s away from the limit that would flip it.
//!
//! # What is counted afterwards
//!
//! - **outcomes**: every call ended with the outcome its kind expects (error
//!   kind, final status and attempts);
//! - **requests**: each server saw exactly the requests the kinds routed to
//!   it (the silent server of the dropped calls: at most one per call);
//! - **connections**: once the client is dropped, every server's
//!   `open_connections()` reaches 0 (bounded wait of [`SETTLE`]);
//! - **tasks**: `num_alive_tasks()` returns to its count before the soak
//!   (bounded wait of [`SETTLE`]);
//! - **timers**: tokio does not count its timers. Every timer of the stack is
//!   a `tokio::time::Sleep` owned by a future (the deadline's and its body's,
//!   the retry wait, the attempt timeout, the read timeout inside the
//!   connection, hyper-util's pool reaper), and tokio's timer entries live
//!   inside those `Sleep`s. A timer left behind is therefore a future left
//!   behind, in a task (counted above) or in memory (counted below). On top,
//!   once everything is dropped, the runtime's workers are watched for
//!   [`IDLE`] from outside the runtime: a timer still armed would wake one,
//!   and the workers' park/unpark counts must not move;
//! - **memory**: a counting global allocator; the bytes in use after the soak
//!   (allocated minus freed) must be within [`MEMORY_TOLERANCE`] of those
//!   before it, whatever the number of calls (taken after a warm-up pass of
//!   two calls per kind, so lazily built statics and the runtime's first
//!   allocations are not counted).
//!
//! # File descriptors
//!
//! In one process, every concurrent HTTP/1.1 call holds two sockets (the
//! client's and the server's), and a retried call may keep a third idle in
//! the pool: 10,000 calls need over 20,000 descriptors, more than the usual
//! limit of 20,000 here and on CI. So the mock servers run in a child process
//! (this binary, started with [`SERVE`]), which answers `stats` and
//! `enqueue` commands on its stdin; each process then holds at most about
//! 1.3 sockets per call. The soak checks the limit first and says what it
//! needs. The servers are spread so that no listener gets more than about
//! [`PER_SERVER`] connections at once (tokio listens with a backlog of
//! 1,024).
//!
//! The binary has its own `main` (`harness = false`): the allocator must see
//! only the soak, not libtest's threads.

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    deadline::body::DeadlineBody,
    policy::{ExponentialBackoff, Jitter},
    presets,
    read_timeout::body::ReadTimeoutBody,
    transport, Attempts, BoxError, FailureKind, ResiliencePolicy, RetryReport,
};
use http_resilience_mock::{MockResponse, MockServer};
use hyper::body::Incoming;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{
    alloc::System,
    collections::BTreeMap,
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::Duration,
};
use tokio::{runtime::Runtime, task::JoinSet, time::Instant};
use tower::{Service, ServiceBuilder, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The argument that makes this binary the mock servers' process.
const SERVE: &str = "--soak-serve";
/// The number of calls when `SOAK_CALLS` is not set.
const DEFAULT_CALLS: usize = 1_000;

/// The budget of every call.
const DEADLINE: Duration = Duration::from_secs(6);
/// The limit on every attempt.
const ATTEMPT: Duration = Duration::from_millis(1500);
/// The transport's longest wait for the head or the next body frame.
const READ: Duration = Duration::from_secs(3);
/// The transport's limit on setting up a connection.
const CONNECT: Duration = Duration::from_secs(2);
/// When a dropping caller gives up.
const DROP_AFTER: Duration = Duration::from_millis(300);
/// The pause between the pieces of the slow body: below the read timeout,
/// and the whole body would take 32 s, far past the deadline.
const DRIP: Duration = Duration::from_millis(500);
/// The bound on the whole soak: far above its expected 6 to 8 s.
const SOAK_LIMIT: Duration = Duration::from_secs(120);
/// The bound on every wait for connections and tasks to go away.
const SETTLE: Duration = Duration::from_secs(15);
/// How long the idle runtime is watched for a timer that fires.
const IDLE: Duration = Duration::from_millis(1500);
/// Calls started per second (see the module docs): 1,000 calls start within
/// a quarter of a second, 10,000 within 2.5 s.
const START_RATE: f64 = 4_000.0;
/// At most this many connections to one server at once.
const PER_SERVER: usize = 500;
/// The attempt header the router reads.
const ATTEMPT_HEADER: &str = "x-attempt";
/// How far the bytes in use may end above the baseline, whatever the
/// number of calls.
///
/// Structures that keep their capacity once grown: tokio's I/O driver keeps
/// its list of registrations to release, and each worker its run queue
/// overflow batch; a few KiB in all.
const MEMORY_TOLERANCE: usize = 16 * 1024;

fn main() {
    if std::env::args().any(|arg| arg == SERVE) {
        serve();
        return;
    }
    // NOTE: `cargo test -- --list` and filters meant for other targets reach
    // this binary too; listing prints the one "test" it is.
    if std::env::args().any(|arg| arg == "--list") {
        println!("soak: test");
        return;
    }
    let calls = std::env::var("SOAK_CALLS").map_or(DEFAULT_CALLS, |n| {
        n.parse()
            .unwrap_or_else(|_| panic!("SOAK_CALLS takes a number, got {n:?}"))
    });
    soak(calls);
}

// ===== calls =====

/// An upstream: one way of answering, served by one or more mock servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Upstream {
    Ok,
    Unavailable,
    Throttled,
    Reset,
    Close,
    Silent,
    StalledBody,
    SlowBody,
    Held,
}

const UPSTREAMS: [Upstream; 9] = [
    Upstream::Ok,
    Upstream::Unavailable,
    Upstream::Throttled,
    Upstream::Reset,
    Upstream::Close,
    Upstream::Silent,
    Upstream::StalledBody,
    Upstream::SlowBody,
    Upstream::Held,
];

impl Upstream {
    fn response(self) -> MockResponse {
        match self {
            Upstream::Ok => MockResponse::ok("ok"),
            Upstream::Unavailable => MockResponse::new(503),
            Upstream::Throttled => MockResponse::new(429).with_header("retry-after", "0"),
            Upstream::Reset => MockResponse::reset_before_response(),
            Upstream::Close => MockResponse::close_before_response(),
            Upstream::Silent | Upstream::Held => MockResponse::no_response(),
            Upstream::StalledBody => MockResponse::stall_after_head(200),
            Upstream::SlowBody => MockResponse::drip("0123456789abcdef".repeat(4), 1, DRIP),
        }
    }
}

/// What a call does; call `n` is of kind `KINDS[n % KINDS.len()]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ok,
    UnavailableThenOk,
    ThrottledThenOk,
    AlwaysUnavailable,
    PostUnavailable,
    Reset,
    Close,
    Silent,
    StalledBody,
    SlowBody,
    Dropped,
}

const KINDS: [Kind; 11] = [
    Kind::Ok,
    Kind::UnavailableThenOk,
    Kind::ThrottledThenOk,
    Kind::AlwaysUnavailable,
    Kind::PostUnavailable,
    Kind::Reset,
    Kind::Close,
    Kind::Silent,
    Kind::StalledBody,
    Kind::SlowBody,
    Kind::Dropped,
];

/// The most attempts of the soak's policy.
const MAX_ATTEMPTS: u32 = 3;

impl Kind {
    fn of(call: usize) -> Self {
        KINDS[call % KINDS.len()]
    }

    fn method(self) -> Method {
        match self {
            Kind::PostUnavailable => Method::POST,
            _ => Method::GET,
        }
    }

    /// The upstream of each attempt; the last one repeats.
    fn route(self) -> &'static [Upstream] {
        match self {
            Kind::Ok => &[Upstream::Ok],
            Kind::UnavailableThenOk => &[Upstream::Unavailable, Upstream::Ok],
            Kind::ThrottledThenOk => &[Upstream::Throttled, Upstream::Ok],
            Kind::AlwaysUnavailable | Kind::PostUnavailable => &[Upstream::Unavailable],
            Kind::Reset => &[Upstream::Reset],
            Kind::Close => &[Upstream::Close],
            Kind::Silent => &[Upstream::Silent],
            Kind::StalledBody => &[Upstream::StalledBody],
            Kind::SlowBody => &[Upstream::SlowBody],
            Kind::Dropped => &[Upstream::Held],
        }
    }

    /// The attempts a call of this kind makes.
    fn attempts(self) -> u32 {
        match self {
            Kind::UnavailableThenOk | Kind::ThrottledThenOk => 2,
            Kind::AlwaysUnavailable => MAX_ATTEMPTS,
            _ => 1,
        }
    }

    fn expected(self) -> Outcome {
        let attempts = self.attempts();
        match self {
            Kind::Ok | Kind::UnavailableThenOk | Kind::ThrottledThenOk => {
                Outcome::Status(200, attempts)
            }
            Kind::AlwaysUnavailable | Kind::PostUnavailable => Outcome::Status(503, attempts),
            Kind::Reset => Outcome::Failed(FailureKind::ConnectionReset, attempts),
            Kind::Close => Outcome::Failed(FailureKind::ConnectionClosed, attempts),
            Kind::Silent => Outcome::Failed(FailureKind::AttemptTimeout, attempts),
            Kind::StalledBody => Outcome::BodyFailed(FailureKind::ReadTimeout),
            Kind::SlowBody => Outcome::BodyFailed(FailureKind::Deadline),
            Kind::Dropped => Outcome::Dropped,
        }
    }
}

/// What a call ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A final status, its body read in full, after this many attempts.
    Status(u16, u32),
    /// The call failed after this many attempts.
    Failed(FailureKind, u32),
    /// A 200 head, then reading the body failed.
    BodyFailed(FailureKind),
    /// The caller dropped the call.
    Dropped,
}

/// Sends attempt `k` of call `n` to the server its kind names for attempt
/// `k`; `ports[upstream][replica]`.
fn route(ports: &[Vec<u16>], mut request: Request<Full<Bytes>>) -> Request<Full<Bytes>> {
    let call: usize = request.uri().path()[1..]
        .parse()
        .expect("the path is the call number");
    let attempt: usize = request.headers()[ATTEMPT_HEADER]
        .to_str()
        .ok()
        .and_then(|n| n.parse().ok())
        .expect("the attempt header holds a number");
    let kind = Kind::of(call);
    let steps = kind.route();
    let upstream = steps[(attempt - 1).min(steps.len() - 1)];
    let replicas = &ports[upstream as usize];
    let port = replicas[(call / KINDS.len()) % replicas.len()];
    *request.uri_mut() = format!("http://127.0.0.1:{port}/{call}").parse().unwrap();
    request
}

/// The requests call numbers `calls` make to each server, keyed by
/// `(upstream, replica)`; dropped calls count as one request.
fn expected_requests(
    calls: std::ops::Range<usize>,
    replicas: usize,
) -> BTreeMap<(usize, usize), usize> {
    let mut expected = BTreeMap::new();
    for call in calls {
        let kind = Kind::of(call);
        let steps = kind.route();
        for attempt in 0..kind.attempts() as usize {
            let upstream = steps[attempt.min(steps.len() - 1)];
            let replica = (call / KINDS.len()) % replicas;
            *expected.entry((upstream as usize, replica)).or_insert(0) += 1;
        }
    }
    expected
}

/// The stack: the standard preset's policy with a short backoff and short
/// limits, the router, and a real client.
fn stack(
    ports: Vec<Vec<u16>>,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = http::Response<DeadlineBody<ReadTimeoutBody<Incoming>>>,
    Error = BoxError,
    Future: Send,
> + Clone
       + Send
       + 'static {
    let client = transport::Builder::new()
        .connect_timeout(CONNECT)
        .read_timeout(READ)
        .build_http::<Full<Bytes>>()
        .expect("valid transport limits");
    let retry = presets::standard()
        .retry()
        .clone()
        .map(
            |decoder| decoder,
            |_| {
                ExponentialBackoff::new(
                    Duration::from_millis(10),
                    2.0,
                    Duration::from_millis(100),
                    MAX_ATTEMPTS,
                )
                .expect("a valid backoff")
                .with_jitter(Jitter::Decorrelated)
            },
        )
        .map_options(|o| o.with_attempt_header(http::HeaderName::from_static(ATTEMPT_HEADER)));
    ServiceBuilder::new()
        .layer(
            ResiliencePolicy::new(DEADLINE, ATTEMPT, retry)
                .expect("valid limits")
                .layer(),
        )
        .map_request(move |request| route(&ports, request))
        .service(client)
}

/// Makes call `n` and classifies how it ended.
async fn call<S, B>(svc: S, n: usize) -> Outcome
where
    S: Service<Request<Full<Bytes>>, Response = http::Response<B>, Error = BoxError>,
    B: http_body::Body<Error = BoxError>,
{
    let kind = Kind::of(n);
    let report = RetryReport::new();
    let mut request = Request::builder()
        .method(kind.method())
        .uri(format!("http://upstream.invalid/{n}"))
        .body(Full::from("payload"))
        .unwrap();
    request.extensions_mut().insert(report.clone());
    let work = async {
        match svc.oneshot(request).await {
            Err(err) => Outcome::Failed(FailureKind::of(&*err), report.attempts()),
            Ok(response) => {
                let status = response.status().as_u16();
                let attempts = Attempts::of(&response);
                match response.into_body().collect().await {
                    Ok(_) => Outcome::Status(status, attempts),
                    Err(err) => Outcome::BodyFailed(FailureKind::of(&*err)),
                }
            }
        }
    };
    if kind == Kind::Dropped {
        tokio::time::timeout(DROP_AFTER, work)
            .await
            .unwrap_or(Outcome::Dropped)
    } else {
        work.await
    }
}

// ===== the soak =====

fn soak(calls: usize) {
    let replicas = calls.div_ceil(KINDS.len()).div_ceil(PER_SERVER).max(1);
    check_descriptors(calls);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut servers = Servers::start(replicas);

    // Warm-up: two calls of every kind, so that what is built once (statics,
    // the runtime's first allocations, the pipes' buffers) is not counted.
    let warm_up = 0..2 * KINDS.len();
    let elapsed = pass(&runtime, &mut servers, warm_up.clone(), replicas);
    settle(&runtime, &mut servers, 0);
    let tasks_before = runtime.metrics().num_alive_tasks();
    let region = Region::new(GLOBAL);

    let soak = warm_up.end..warm_up.end + calls;
    let soak_elapsed = pass(&runtime, &mut servers, soak.clone(), replicas);
    let settled = settle(&runtime, &mut servers, tasks_before);

    // Requests: exactly what the kinds routed, counted over both passes.
    let mut expected = expected_requests(warm_up.start..soak.end, replicas);
    let stats = servers.stats();
    for (upstream, replicas_stats) in stats.chunks(replicas).enumerate() {
        for (replica, &(requests, _open)) in replicas_stats.iter().enumerate() {
            let want = expected.remove(&(upstream, replica)).unwrap_or(0);
            if UPSTREAMS[upstream] == Upstream::Held {
                assert!(
                    requests <= want,
                    "{:?} #{replica}: {requests} requests from {want} dropped calls",
                    UPSTREAMS[upstream]
                );
            } else {
                assert_eq!(
                    requests, want,
                    "{:?} #{replica}: requests seen",
                    UPSTREAMS[upstream]
                );
            }
        }
    }

    // Timers: nothing wakes the idle runtime.
    let parks_before = parks(&runtime);
    idle(IDLE);
    let parks_after = parks(&runtime);
    assert_eq!(
        parks_before, parks_after,
        "a worker woke up in an idle runtime: something (a timer) was left armed"
    );

    // Memory: back to the baseline.
    let change = region.change();
    // NOTE: `stats_alloc` counts a realloc's growth in `bytes_allocated` and
    // its shrinking in `bytes_deallocated`; its `bytes_reallocated` repeats
    // the net change and only ever adds up, so it is not part of the bytes in
    // use.
    let growth = change.bytes_allocated as isize - change.bytes_deallocated as isize;
    assert!(
        growth <= MEMORY_TOLERANCE as isize,
        "{growth} bytes more in use after the soak than before (bound {MEMORY_TOLERANCE})"
    );

    drop(servers);
    drop(runtime);
    println!(
        "soak: {calls} calls in {soak_elapsed:.2?} (warm-up {elapsed:.2?}), {replicas} server(s) \
         per upstream; settled in {settled:.2?}; {growth} bytes above the baseline; \
         tasks back to {tasks_before}"
    );
}

/// Runs calls `numbers` concurrently and checks every outcome; returns the
/// elapsed time.
fn pass(
    runtime: &Runtime,
    servers: &mut Servers,
    numbers: std::ops::Range<usize>,
    replicas: usize,
) -> Duration {
    for ((upstream, replica), count) in expected_requests(numbers.clone(), replicas) {
        servers.enqueue(upstream * replicas + replica, count);
    }
    let ports = servers.ports.clone();
    runtime.block_on(async move {
        let svc = stack(ports);
        let start = Instant::now();
        let mut tasks = JoinSet::new();
        for n in numbers.clone() {
            let svc = svc.clone();
            // NOTE: calls start at most `START_RATE` a second, so that the
            // connection burst stays within what two cores can accept before
            // the first attempt's limit; each call's limits count from its
            // own start, so no outcome depends on the pacing.
            let delay = Duration::from_secs_f64((n - numbers.start) as f64 / START_RATE);
            tasks.spawn(async move {
                tokio::time::sleep(delay).await;
                (n, call(svc, n).await)
            });
        }
        let outcomes = tokio::time::timeout(SOAK_LIMIT, tasks.join_all())
            .await
            .unwrap_or_else(|_| panic!("the calls took longer than {SOAK_LIMIT:?}"));
        let elapsed = start.elapsed();
        let mut wrong = BTreeMap::<String, usize>::new();
        for (n, outcome) in outcomes {
            let kind = Kind::of(n);
            if outcome != kind.expected() {
                *wrong.entry(format!("{kind:?}: {outcome:?}")).or_default() += 1;
            }
        }
        assert!(
            wrong.is_empty(),
            "calls with unexpected outcomes (kind: outcome => calls): {wrong:?}"
        );
        elapsed
    })
}

/// Waits until no server has an open connection and the runtime is back to
/// `tasks` alive tasks; returns how long that took.
fn settle(runtime: &Runtime, servers: &mut Servers, tasks: usize) -> Duration {
    let start = Instant::now();
    loop {
        let open: usize = servers.stats().iter().map(|&(_, open)| open).sum();
        let alive = runtime.metrics().num_alive_tasks();
        if open == 0 && alive == tasks {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < SETTLE,
            "after {SETTLE:?}: {open} connection(s) still open, {alive} task(s) alive (before: {tasks})"
        );
        idle(Duration::from_millis(20));
    }
}

/// The workers' park and unpark counts, all workers together.
fn parks(runtime: &Runtime) -> u64 {
    let metrics = runtime.metrics();
    (0..metrics.num_workers())
        .map(|worker| metrics.worker_park_unpark_count(worker))
        .sum()
}

/// Blocks this thread, which is not one of the runtime's.
#[allow(clippy::disallowed_methods)]
fn idle(duration: Duration) {
    // NOTE: a tokio timer would wake the very workers being watched.
    std::thread::sleep(duration);
}

/// Fails early, and says why, when this process may not open enough files.
fn check_descriptors(calls: usize) {
    let Ok(limits) = std::fs::read_to_string("/proc/self/limits") else {
        return;
    };
    let soft = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(3))
        .and_then(|n| n.parse::<usize>().ok());
    // One client socket per call, one more idle in the pool for the retried
    // ones, and room for the runtime, the pipes and the standard streams.
    let needed = calls + calls * 3 / 10 + 256;
    if let Some(soft) = soft {
        assert!(
            needed <= soft,
            "{calls} calls need about {needed} file descriptors per process, the limit is {soft}"
        );
    }
}

// ===== the servers' process =====

/// The mock servers, in a child process: `ports[upstream][replica]`.
struct Servers {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    ports: Vec<Vec<u16>>,
    line: String,
}

impl Servers {
    fn start(replicas: usize) -> Self {
        let exe = std::env::current_exe().expect("the path of this test binary");
        let mut child = Command::new(exe)
            .arg(SERVE)
            .arg(replicas.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the servers' process");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut servers = Self {
            child,
            stdin,
            stdout,
            ports: Vec::new(),
            line: String::new(),
        };
        let ports: Vec<u16> = servers
            .read_line()
            .split_whitespace()
            .map(|port| port.parse().unwrap())
            .collect();
        servers.ports = ports.chunks(replicas).map(<[u16]>::to_vec).collect();
        servers
    }

    fn read_line(&mut self) -> &str {
        self.line.clear();
        self.stdout
            .read_line(&mut self.line)
            .expect("a line from the servers' process");
        assert!(!self.line.is_empty(), "the servers' process is gone");
        self.line.trim_end()
    }

    /// Queues `count` more answers on server `index`.
    fn enqueue(&mut self, index: usize, count: usize) {
        writeln!(self.stdin, "enqueue {index} {count}").unwrap();
        assert_eq!(self.read_line(), "ok");
    }

    /// `(requests, open connections)` of every server, in order.
    fn stats(&mut self) -> Vec<(usize, usize)> {
        writeln!(self.stdin, "stats").unwrap();
        let numbers: Vec<usize> = self
            .read_line()
            .split_whitespace()
            .map(|n| n.parse().unwrap())
            .collect();
        numbers.chunks(2).map(|pair| (pair[0], pair[1])).collect()
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        // NOTE: the child also exits when its stdin closes; killing it covers
        // a parent that panicked mid-command.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The servers' process: `replicas` mock servers per upstream, in the order
/// of [`UPSTREAMS`]; prints their ports on one line, then answers commands
/// until its stdin closes.
fn serve() {
    let replicas: usize = std::env::args()
        .skip_while(|arg| arg != SERVE)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("the number of replicas");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut servers = Vec::new();
    for upstream in UPSTREAMS {
        for _ in 0..replicas {
            let server = runtime.block_on(MockServer::start()).unwrap();
            servers.push((upstream, server));
        }
    }
    let ports: Vec<String> = servers
        .iter()
        .map(|(_, server)| server.addr().port().to_string())
        .collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}", ports.join(" ")).unwrap();
    out.flush().unwrap();
    for line in std::io::stdin().lines() {
        let line = line.unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["enqueue", index, count] => {
                let (upstream, server) = &servers[index.parse::<usize>().unwrap()];
                for _ in 0..count.parse::<usize>().unwrap() {
                    server.enqueue(upstream.response());
                }
                writeln!(out, "ok").unwrap();
            }
            ["stats"] => {
                let stats: Vec<String> = servers
                    .iter()
                    .map(|(_, s)| format!("{} {}", s.request_count(), s.open_connections()))
                    .collect();
                writeln!(out, "{}", stats.join(" ")).unwrap();
            }
            _ => panic!("unknown command {line:?}"),
        }
        out.flush().unwrap();
    }
}
