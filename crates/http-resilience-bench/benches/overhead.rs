//! In-process overhead per call: an inner service that
//! answers at once, bare, inside tower's own nesting, and inside our three
//! layers; then the 503, 503, 200 path against a hand-written loop.
//!
//! Run: `cargo bench -p http-resilience-bench --bench overhead`; see `BENCHMARKS.md`.

mod support;

use criterion::{BenchmarkGroup, Criterion};
use http_resilience::overload::OverloadPolicy;
use std::{
    hint::black_box,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use support::{
    call, faults, flaky_service, hand_loop, ok_service, ours, ours_fused, ours_fused_breaker,
    ours_fused_bulkhead, ours_fused_faults, tower_nesting, with_breaker, with_deadline_extension,
    with_faults, with_no_guard, with_overload, with_request_copy, with_tower_resilience_breaker,
    Req,
};
use tokio::{runtime::Runtime, time::Instant};
use tower::Service;

type Group<'a> = BenchmarkGroup<'a, criterion::measurement::WallTime>;

/// Times `svc` call after call. The whole sample runs inside one `block_on`,
/// so the runtime's entry and exit are not part of the figure. `calls` (the
/// flaky service's counter) is reset before every request.
fn per_call<S>(group: &mut Group<'_>, rt: &Runtime, name: &str, mut svc: S, calls: &AtomicU32)
where
    S: Service<Req>,
    S::Error: std::fmt::Debug,
{
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    calls.store(0, Ordering::Relaxed);
                    black_box(call(&mut svc).await.expect("the call succeeds"));
                }
                start.elapsed()
            })
        });
    });
}

fn overhead(c: &mut Criterion) {
    let rt = support::runtime();
    // NOTE: the happy path never reads this counter; one more relaxed store per
    // call keeps every variant's loop the same.
    let calls = Arc::new(AtomicU32::new(0));
    // NOTE: one group, so that the variants print side by side.
    let mut group = c.benchmark_group("per_call");

    per_call(&mut group, &rt, "ok/bare", ok_service(), &calls);
    per_call(
        &mut group,
        &rt,
        "ok/tower",
        tower_nesting(ok_service()),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_deadline",
        with_deadline_extension(ok_service()),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_request_copy",
        with_request_copy(ok_service()),
        &calls,
    );
    per_call(&mut group, &rt, "ok/ours", ours(ok_service()), &calls);
    per_call(
        &mut group,
        &rt,
        "ok/ours-combined",
        ours_fused(ok_service()),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/ours-combined_with_breaker",
        ours_fused_breaker(ok_service()),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_breaker",
        with_breaker(ok_service()),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/ours-combined_with_bulkhead",
        ours_fused_bulkhead(ok_service()),
        &calls,
    );
    let bulkhead = OverloadPolicy::bulkhead(1024)
        .expect("a limit")
        .with_queue(1024);
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_bulkhead",
        with_overload(ok_service(), bulkhead),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_tower_resilience_breaker",
        with_tower_resilience_breaker(ok_service()),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_no_guard",
        with_no_guard(ok_service()),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_faults_off",
        with_faults(ok_service(), Some(faults(false))),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/bare_with_faults_on",
        with_faults(ok_service(), Some(faults(true))),
        &calls,
    );
    per_call(
        &mut group,
        &rt,
        "ok/ours-combined_with_faults_off",
        ours_fused_faults(ok_service(), Some(faults(false))),
        &calls,
    );

    let mut svc = flaky_service(calls.clone());
    group.bench_function("503x2/hand_loop", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    calls.store(0, Ordering::Relaxed);
                    black_box(hand_loop(&mut svc).await.expect("the call succeeds"));
                }
                start.elapsed()
            })
        });
    });
    let flaky = || flaky_service(calls.clone());
    per_call(
        &mut group,
        &rt,
        "503x2/tower",
        tower_nesting(flaky()),
        &calls,
    );
    per_call(&mut group, &rt, "503x2/ours", ours(flaky()), &calls);
    per_call(
        &mut group,
        &rt,
        "503x2/ours-combined",
        ours_fused(flaky()),
        &calls,
    );

    group.finish();
}

fn main() {
    // NOTE: short by default, for a shared 2-core machine; the command line
    // (`-- --warm-up-time 3 --measurement-time 10`) overrides these.
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    overhead(&mut criterion);
    criterion.final_summary();
}
