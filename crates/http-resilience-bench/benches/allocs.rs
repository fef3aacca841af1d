//! Allocations per call and the size of each response future, for the
//! variants of the `overhead` bench.
//!
//! A counting global allocator (`stats_alloc`, whose `unsafe impl GlobalAlloc`
//! lives in that crate: this workspace forbids unsafe code) counts what the
//! calls allocate; the calls run on a current-thread runtime, so nothing else
//! allocates meanwhile. Each variant is warmed up first, so that one-time
//! set-up (the runtime's timer, thread-locals, tracing's call sites) is not
//! counted.
//!
//! A second table gives the response future sizes of the same stacks around
//! hyper-util's legacy client, whose own future is boxed: what a real stack
//! holds per call in flight.
//!
//! Run: `cargo bench -p http-resilience-bench --bench allocs`; see `BENCHMARKS.md`.

#[path = "support/rate_limit.rs"]
mod rate_limit;
mod support;

use http::StatusCode;
use http_resilience::overload::OverloadPolicy;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{
    alloc::System,
    hint::black_box,
    mem::{size_of, size_of_val},
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
};
use support::{
    call, faults, flaky_service, hand_loop, ok_service, ours, ours_fused, ours_fused_breaker,
    ours_fused_bulkhead, ours_fused_faults, tower_nesting, with_breaker, with_deadline_extension,
    with_faults, with_no_guard, with_overload, with_request_copy, with_tower_resilience_breaker,
    Req,
};
use tower::Service;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WARM_UP: u32 = 1_000;
const CALLS: u32 = 10_000;

/// One row of the table.
struct Row {
    path: &'static str,
    variant: &'static str,
    allocs: f64,
    reallocs: f64,
    bytes: f64,
    future: usize,
}

impl Row {
    fn new(path: &'static str, variant: &'static str, stats: stats_alloc::Stats) -> Self {
        let per_call = |n: usize| n as f64 / f64::from(CALLS);
        Self {
            path,
            variant,
            allocs: per_call(stats.allocations),
            reallocs: per_call(stats.reallocations),
            bytes: per_call(stats.bytes_allocated),
            future: 0,
        }
    }

    fn future(mut self, size: usize) -> Self {
        self.future = size;
        self
    }
}

/// The size of `S`'s response future.
fn future_size<S: Service<Req>>(_: &S) -> usize {
    size_of::<S::Future>()
}

/// Warms up, then counts what `CALLS` runs of `$call` allocate. `$call` is an
/// expression of a future whose output is a `Result`, evaluated anew each time.
macro_rules! count {
    ($call:expr) => {{
        for _ in 0..WARM_UP {
            black_box($call.await.expect("the call succeeds"));
        }
        let region = Region::new(GLOBAL);
        for _ in 0..CALLS {
            black_box($call.await.expect("the call succeeds"));
        }
        region.change()
    }};
}

async fn measure() -> Vec<Row> {
    let calls = Arc::new(AtomicU32::new(0));
    let mut rows = Vec::new();

    // The happy path: one attempt, answered 200 at once.
    macro_rules! ok_row {
        ($name:literal, $svc:expr) => {{
            let mut svc = $svc;
            let stats = count!(call(&mut svc));
            rows.push(Row::new("200", $name, stats).future(future_size(&svc)));
        }};
    }
    ok_row!("bare", ok_service());
    ok_row!("tower nesting", tower_nesting(ok_service()));
    ok_row!(
        "bare + deadline extension",
        with_deadline_extension(ok_service())
    );
    ok_row!("bare + request copy", with_request_copy(ok_service()));
    ok_row!("ours", ours(ok_service()));
    ok_row!("ours, combined", ours_fused(ok_service()));
    ok_row!(
        "ours, combined, closed breaker",
        ours_fused_breaker(ok_service())
    );
    ok_row!("bare + closed breaker", with_breaker(ok_service()));
    ok_row!(
        "ours, combined, bulkhead",
        ours_fused_bulkhead(ok_service())
    );
    ok_row!(
        "bare + bulkhead",
        with_overload(
            ok_service(),
            OverloadPolicy::bulkhead(1024)
                .expect("a limit")
                .with_queue(1024)
        )
    );
    ok_row!(
        "bare + rate limit",
        rate_limit::with_rate_limit(ok_service())
    );
    ok_row!(
        "bare + governor (keyed)",
        rate_limit::with_governor(ok_service(), true)
    );
    ok_row!(
        "bare + tower RateLimit",
        rate_limit::with_tower_rate_limit(ok_service())
    );
    ok_row!(
        "bare + tower-resilience breaker",
        with_tower_resilience_breaker(ok_service())
    );
    ok_row!(
        "bare + guard layer of no guard",
        with_no_guard(ok_service())
    );
    ok_row!(
        "bare + fault injection, none",
        with_faults(ok_service(), None)
    );
    ok_row!(
        "bare + fault injection, off",
        with_faults(ok_service(), Some(faults(false)))
    );
    ok_row!(
        "bare + fault injection, on at rate 0",
        with_faults(ok_service(), Some(faults(true)))
    );
    ok_row!(
        "ours, combined, fault injection off",
        ours_fused_faults(ok_service(), Some(faults(false)))
    );

    // The retry path: 503, 503, 200 at zero backoff.
    let flaky = || flaky_service(calls.clone());
    let reset = || calls.store(0, Ordering::Relaxed);
    let mut svc = flaky();
    reset();
    let outcome = hand_loop(&mut svc).await.expect("the call succeeds");
    check(&outcome.status(), &calls);
    let stats = count!({
        reset();
        hand_loop(&mut svc)
    });
    let size = size_of_val(&hand_loop(&mut svc));
    rows.push(Row::new("503,503,200", "hand loop", stats).future(size));

    // Each stack first makes one call that must take three attempts.
    macro_rules! retry_row {
        ($name:literal, $svc:expr) => {{
            let mut svc = $svc;
            reset();
            let outcome = call(&mut svc).await.expect("the call succeeds");
            check(&outcome.status(), &calls);
            let stats = count!({
                reset();
                call(&mut svc)
            });
            rows.push(Row::new("503,503,200", $name, stats).future(future_size(&svc)));
        }};
    }
    retry_row!("tower nesting", tower_nesting(flaky()));
    retry_row!("ours", ours(flaky()));
    retry_row!("ours, combined", ours_fused(flaky()));

    // The happy path again, with a subscriber that records every span at
    // `DEBUG` (tracing-subscriber's registry), set for this thread only so
    // that the rows above run with none.
    let _spans = record_every_span();
    ok_row!("ours, spans recorded", ours(ok_service()));
    ok_row!("ours, combined, spans recorded", ours_fused(ok_service()));

    rows
}

/// Sets, for this thread, a subscriber that wants every span and event at
/// `DEBUG` and keeps each span's data (tracing-subscriber's registry).
fn record_every_span() -> tracing::subscriber::DefaultGuard {
    use tracing_subscriber::layer::SubscriberExt as _;
    let subscriber =
        tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::DEBUG);
    tracing::subscriber::set_default(subscriber)
}

/// Response future sizes around hyper-util's legacy client, the inner service
/// of a real stack (its own future is boxed). Nothing is called: the sizes
/// are the types'.
fn client_future_sizes() -> [(&'static str, usize); 5] {
    type Client = hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        support::Body,
    >;
    let client = || -> Client {
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http()
    };
    [
        ("bare", future_size(&client())),
        ("tower nesting", future_size(&tower_nesting(client()))),
        ("ours", future_size(&ours(client()))),
        ("ours, combined", future_size(&ours_fused(client()))),
        (
            "ours, combined, breaker",
            future_size(&ours_fused_breaker(client())),
        ),
    ]
}

/// The retry path really made three attempts and ended with the 200.
fn check(status: &StatusCode, calls: &AtomicU32) {
    assert_eq!(*status, StatusCode::OK);
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

fn main() {
    // NOTE: `cargo bench` passes `--bench` (and any arguments after `--`, meant
    // for criterion); there is nothing to configure here, so they are ignored.
    let rows = support::runtime().block_on(measure());
    println!(
        "allocations per call ({CALLS} calls after {WARM_UP} to warm up), and response future sizes"
    );
    println!();
    println!(
        "{:<12} {:<32} {:>10} {:>10} {:>12} {:>12}",
        "path", "variant", "allocs", "reallocs", "bytes", "future (B)"
    );
    for row in &rows {
        println!(
            "{:<12} {:<32} {:>10.2} {:>10.2} {:>12.1} {:>12}",
            row.path, row.variant, row.allocs, row.reallocs, row.bytes, row.future
        );
    }
    println!();
    println!("response future around hyper-util's legacy client (HttpConnector, Full<Bytes>)");
    println!();
    for (variant, size) in client_future_sizes() {
        println!("{variant:<45} {size:>10} B");
    }
}
