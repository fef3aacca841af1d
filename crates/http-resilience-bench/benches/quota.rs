//! A fleet sharing one quota through Redis, measured at one counting
//! upstream: 4 processes (this binary again, as children) × 16 callers
//! sharing 500 calls a second for 10 s; then the same with Redis frozen
//! (`SIGSTOP`) from 3 s to 5 s. Prints the table of `BENCHMARKS.md`.
//!
//! ```text
//! cargo bench -p http-resilience-bench --bench quota
//! ```
//!
//! Needs Debian's `redis-server`, which it starts on a free loopback port
//! with its own settings (no persistence, a temporary directory) and stops
//! by its process handle; without it, it says so and ends.

#[path = "../../../tests/quota/fleet_run.rs"]
mod fleet_run;
#[path = "../../../tests/quota/redis.rs"]
mod redis;
#[path = "../../../tests/quota/upstream.rs"]
mod upstream;

use fleet_run::{collect, figures, spawn, start_instant, Counts, Plan, PLAN};
use std::time::Duration;
use tokio::time::Instant;

/// The fleet: processes, callers each, the quota per second, the run.
const PROCESSES: usize = 4;
const CALLERS: usize = 16;
const RATE: u32 = 500;
const RUN: Duration = Duration::from_secs(10);

/// When Redis is frozen, and for how long, in the second run.
const FROZEN_AT: Duration = Duration::from_secs(3);
const FROZEN_FOR: Duration = Duration::from_secs(2);

fn main() {
    if let Ok(plan) = std::env::var(PLAN) {
        return fleet_run::child_main(&plan);
    }
    if std::env::args().any(|arg| arg == "--list" || arg == "--test") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let Some(mut redis) = redis::Redis::start_or_skip().await else {
            return;
        };
        println!("| run | calls | aggregate ÷ quota | busiest 1 s window ÷ quota | Redis round trips per call | fallbacks | slowest call | leases again after Redis returned |");
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        let steady = fleet(&mut redis, "steady", None).await;
        println!("{steady}");
        let frozen = fleet(&mut redis, "frozen", Some((FROZEN_AT, FROZEN_FOR))).await;
        println!("{frozen}");
    });
}

/// Runs the fleet, Redis frozen for a span if asked; its row of the table.
async fn fleet(
    redis: &mut redis::Redis,
    name: &str,
    frozen: Option<(Duration, Duration)>,
) -> String {
    let upstream = upstream::Upstream::start().await;
    let plan = Plan {
        redis: redis.url(),
        prefix: name.to_owned(),
        upstream: upstream.addr,
        rate: RATE,
        callers: CALLERS,
        start_ms: Plan::starting_in(Duration::from_millis(1_500)),
        millis: u64::try_from(RUN.as_millis()).expect("a run of milliseconds"),
        share: 1.0 / PROCESSES as f64,
        lease_wait_ms: 5,
        turn_away: false,
    };
    let start = start_instant(&plan);
    let exe = std::env::current_exe().expect("this binary");
    let children = spawn(&exe, &[], &vec![plan.clone(); PROCESSES]);
    let resumed = match frozen {
        Some((at, span)) => Some(freeze(redis, start, at, span).await),
        None => None,
    };
    let counts = tokio::task::spawn_blocking(move || collect(children))
        .await
        .expect("the children's counts");
    let arrivals: Vec<Instant> = upstream.arrivals().iter().map(|a| a.at).collect();
    row(
        name,
        &plan,
        &figures(&plan, &arrivals, start, &counts),
        &counts,
        resumed,
    )
}

/// Freezes Redis `at` into the run for `span`; when it was thawed, in
/// milliseconds since the start.
async fn freeze(redis: &redis::Redis, start: Instant, at: Duration, span: Duration) -> u64 {
    tokio::time::sleep_until(start + at).await;
    signal(redis, "STOP");
    tokio::time::sleep(span).await;
    signal(redis, "CONT");
    u64::try_from((Instant::now() - start).as_millis()).unwrap_or(u64::MAX)
}

fn signal(redis: &redis::Redis, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(redis.pid().to_string())
        .status()
        .expect("kill");
    assert!(status.success(), "kill -{signal}");
}

fn row(
    name: &str,
    plan: &Plan,
    f: &fleet_run::Figures,
    counts: &[Counts],
    resumed: Option<u64>,
) -> String {
    let fallbacks: u64 = counts.iter().map(|c| c.fallbacks).sum();
    let slowest = counts.iter().map(|c| c.slowest_ms).max().unwrap_or(0);
    let recovered = match resumed {
        Some(resumed) => {
            let back = counts.iter().filter_map(|c| c.recovered_ms).max();
            back.map_or("never".to_owned(), |ms| {
                format!("{} ms", ms.saturating_sub(resumed))
            })
        }
        None => "–".to_owned(),
    };
    format!(
        "| {name}, {PROCESSES} × {} callers, {}/s, {} s | {} | {:.3} | {:.3} | {:.4} | {fallbacks} | {slowest} ms | {recovered} |",
        plan.callers,
        plan.rate,
        plan.millis / 1000,
        f.calls,
        f.aggregate,
        f.busiest,
        f.round_trips_per_call,
    )
}
