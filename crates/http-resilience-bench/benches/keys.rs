//! The key maps of the circuit breaker and overload control under many
//! distinct hosts: the combined service (`ResiliencePolicy::layer()`) with a
//! breaker or a bulkhead, in process, over a `service_fn` upstream that
//! answers 200 at once, through which 100,000 distinct hosts pass, at
//! `max_keys` 1,024 and 65,536.
//!
//! Per call, in ns of the calling thread's CPU time (the runtime is
//! current-thread, so that is all the work; a shared machine's other load
//! does not count): a known host whose state the service keeps at hand (the
//! same host as the call before), a known host looked up in the map (two
//! kept hosts in turn), a new host while the map fills, and a new host once
//! it is full (every one of them makes room). Then the keys kept and the
//! heap the stack holds (a counting global allocator, `stats_alloc`, as in
//! the `allocs` bench), after the map filled and after the last host: both
//! must stay bounded whatever the number of hosts.
//!
//! Run: `cargo bench -p http-resilience-bench --bench keys` (the table, a
//! few seconds); see `BENCHMARKS.md`. A phase of new hosts on a full map stops
//! after [`CHURN_BUDGET`], and the table says how many it made.
//!
//! Instructions per call, under callgrind: the binary with arguments
//! `<breaker|overload> <max_keys> <hand|lookup|new> <calls>` fills the map
//! with `max_keys` hosts and then makes `calls` calls of that kind; the
//! difference between `calls` = N and 0, divided by N, is one call's count.

#[allow(dead_code)]
mod support;

use bytes::Bytes;
use cpu_time::ThreadTime;
use http::{Request, StatusCode, Uri};
use http_body_util::Full;
use http_resilience::{
    breaker::BreakerPolicy,
    key::PerKey,
    overload::OverloadPolicy,
    policy::{FixedDelay, StatusDecoder},
    ResiliencePolicy,
};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{alloc::System, hint::black_box, time::Duration};
use support::{ok_service, retry_503, Req, ATTEMPT_LIMIT, CALL_LIMIT};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The distinct hosts each row sends calls to.
const HOSTS: usize = 100_000;
/// The bounds of the key map measured.
const SIZES: [usize; 2] = [1_024, 65_536];
/// Calls to a known host, per figure.
const KNOWN_CALLS: usize = 100_000;
/// The longest one phase of new hosts on a full map may run: a map that
/// scans its keys for every new one takes minutes at 65,536 keys.
const CHURN_BUDGET: Duration = Duration::from_secs(60);
/// How long a key with no call counts as idle: longer than any row, so that
/// every new host past the bound evicts one that is not idle.
const IDLE: Duration = Duration::from_secs(3600);

/// Which guard keeps the keys.
#[derive(Debug, Clone, Copy)]
enum Guard {
    Breaker,
    Overload,
}

impl Guard {
    fn name(self) -> &'static str {
        match self {
            Guard::Breaker => "breaker",
            Guard::Overload => "overload",
        }
    }
}

/// The calls of one measure: a service, the hosts and how many keys it keeps.
struct Run<S, K> {
    svc: S,
    kept: K,
    uris: Vec<Uri>,
}

/// One row of the table.
struct Row {
    guard: Guard,
    max_keys: usize,
    at_hand: f64,
    looked_up: f64,
    filling: f64,
    full: f64,
    full_calls: usize,
    kept: usize,
    heap_filled: isize,
    heap_end: isize,
}

/// The bytes the process holds on the heap now.
fn heap() -> isize {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as isize - stats.bytes_deallocated as isize + stats.bytes_reallocated
}

/// `http://host-<n>.test/v1/items` for every `n` below `count`.
fn uris(count: usize) -> Vec<Uri> {
    (0..count)
        .map(|n| {
            format!("http://host-{n}.test/v1/items")
                .parse()
                .expect("a URI")
        })
        .collect()
}

/// A request to `uri`, as [`support::request`] builds one.
fn request(uri: &Uri) -> Req {
    let mut request = Request::new(Full::new(Bytes::from_static(b"{}")));
    *request.uri_mut() = uri.clone();
    request
}

impl<S, K, T> Run<S, K>
where
    S: Service<Req, Response = http::Response<T>, Error = tower::BoxError>,
    K: Fn() -> usize,
{
    /// One call to `uri`, which must end in a 200.
    async fn call(&mut self, at: usize) {
        let request = request(&self.uris[at]);
        let response = self
            .svc
            .ready()
            .await
            .expect("ready")
            .call(request)
            .await
            .expect("the call succeeds");
        assert_eq!(response.status(), StatusCode::OK);
        black_box(response);
    }

    /// Calls the hosts `from..to` once each, in order, for at most `budget`
    /// (of the wall clock): CPU ns per call, and the calls made.
    async fn new_hosts(&mut self, from: usize, to: usize, budget: Duration) -> (f64, usize) {
        let (start, cpu) = (Instant::now(), ThreadTime::now());
        let mut made = 0;
        for at in from..to {
            self.call(at).await;
            made += 1;
            if made % 256 == 0 && start.elapsed() > budget {
                break;
            }
        }
        (per_call(cpu.elapsed(), made), made)
    }

    /// Calls the hosts `hosts` in turn, `calls` times: CPU ns per call.
    async fn known(&mut self, hosts: &[usize], calls: usize) -> f64 {
        let cpu = ThreadTime::now();
        for n in 0..calls {
            self.call(hosts[n % hosts.len()]).await;
        }
        per_call(cpu.elapsed(), calls)
    }
}

fn per_call(elapsed: Duration, calls: usize) -> f64 {
    elapsed.as_nanos() as f64 / calls.max(1) as f64
}

/// The combined service with a breaker keeping at most `max_keys` circuits.
fn breaker_run(
    max_keys: usize,
) -> Run<
    impl Service<Req, Response = http::Response<impl Sized>, Error = tower::BoxError>,
    impl Fn() -> usize,
> {
    let breaker = BreakerPolicy::default()
        .max_keys(max_keys, IDLE)
        .expect("a bound");
    let policy = combined().with_guard(breaker.clone());
    Run {
        svc: policy.layer().layer(ok_service()),
        kept: move || breaker.states().len(),
        uris: uris(HOSTS),
    }
}

/// The combined service with a bulkhead keeping the slots of at most
/// `max_keys` keys.
fn overload_run(
    max_keys: usize,
) -> Run<
    impl Service<Req, Response = http::Response<impl Sized>, Error = tower::BoxError>,
    impl Fn() -> usize,
> {
    let overload = OverloadPolicy::bulkhead(1024)
        .and_then(|p| p.max_keys(max_keys, IDLE))
        .expect("a bound");
    let policy = combined().with_guard(overload.clone());
    Run {
        svc: policy.layer().layer(ok_service()),
        kept: move || overload.states().len(),
        uris: uris(HOSTS),
    }
}

fn combined() -> ResiliencePolicy<StatusDecoder, FixedDelay> {
    ResiliencePolicy::new(CALL_LIMIT, ATTEMPT_LIMIT, retry_503()).expect("the limits fit together")
}

/// The row of `guard` at `max_keys`.
async fn row(guard: Guard, max_keys: usize) -> Row {
    match guard {
        Guard::Breaker => breaker_run(max_keys).row(guard, max_keys).await,
        Guard::Overload => overload_run(max_keys).row(guard, max_keys).await,
    }
}

/// The calls the instruction counter measures (see the module docs).
async fn counted(guard: Guard, max_keys: usize, kind: &str, calls: usize) {
    match guard {
        Guard::Breaker => breaker_run(max_keys).counted(max_keys, kind, calls).await,
        Guard::Overload => overload_run(max_keys).counted(max_keys, kind, calls).await,
    }
}

impl<S, K, T> Run<S, K>
where
    S: Service<Req, Response = http::Response<T>, Error = tower::BoxError>,
    K: Fn() -> usize,
{
    /// The row of this run, `guard` at `max_keys`.
    async fn row(mut self, guard: Guard, max_keys: usize) -> Row {
        let base = heap();
        let (filling, _) = self.new_hosts(0, max_keys, Duration::MAX).await;
        let heap_filled = heap() - base;
        let (full, full_calls) = self.new_hosts(max_keys, HOSTS, CHURN_BUDGET).await;
        let last = max_keys + full_calls - 1;
        let at_hand = self.known(&[last], KNOWN_CALLS).await;
        let looked_up = self.known(&[last - 1, last], KNOWN_CALLS).await;
        let kept = (self.kept)();
        let heap_end = heap() - base;
        Row {
            guard,
            max_keys,
            at_hand,
            looked_up,
            filling,
            full,
            full_calls,
            kept,
            heap_filled,
            heap_end,
        }
    }

    /// Fills the map, then makes `calls` calls of `kind`.
    async fn counted(mut self, max_keys: usize, kind: &str, calls: usize) {
        self.new_hosts(0, max_keys, Duration::MAX).await;
        let ns = match kind {
            "hand" => self.known(&[max_keys - 1], calls).await,
            "lookup" => self.known(&[max_keys - 2, max_keys - 1], calls).await,
            "new" => {
                let to = max_keys + calls;
                self.new_hosts(max_keys, to, Duration::MAX).await.0
            }
            other => panic!("unknown kind of call {other:?}: hand, lookup or new"),
        };
        black_box(ns);
        assert!((self.kept)() <= max_keys, "over the bound");
    }
}

fn kib(bytes: isize) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

fn print(rows: &[Row]) {
    println!(
        "{HOSTS} distinct hosts through the combined service (CPU ns per call; heap above the stack's own)"
    );
    println!();
    println!(
        "| guard | max_keys | known, at hand | known, looked up | new, map filling | new, map full | new hosts on the full map | keys kept | heap, map full | heap, after the last host |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} |",
            r.guard.name(),
            r.max_keys,
            r.at_hand,
            r.looked_up,
            r.filling,
            r.full,
            r.full_calls,
            r.kept,
            kib(r.heap_filled),
            kib(r.heap_end),
        );
    }
}

fn main() {
    // NOTE: `cargo bench` passes `--bench`; the instruction counter passes
    // the four arguments of the module docs.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let runtime = support::runtime();
    if let [guard, max_keys, kind, calls] = args.as_slice() {
        let guard = match guard.as_str() {
            "breaker" => Guard::Breaker,
            "overload" => Guard::Overload,
            other => panic!("unknown guard {other:?}: breaker or overload"),
        };
        let max_keys = max_keys.parse().expect("max_keys: a number");
        let calls = calls.parse().expect("calls: a number");
        runtime.block_on(counted(guard, max_keys, kind, calls));
        return;
    }
    let mut rows = Vec::new();
    for guard in [Guard::Breaker, Guard::Overload] {
        for max_keys in SIZES {
            let row = runtime.block_on(row(guard, max_keys));
            eprintln!(
                "{} {}: done ({} new hosts on the full map)",
                guard.name(),
                max_keys,
                row.full_calls
            );
            rows.push(row);
        }
    }
    print(&rows);
}
