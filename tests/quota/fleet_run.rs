//! One process of a fleet sharing a quota through Redis: its callers, the
//! events it counts, and the figures of a run read at the upstream. Shared
//! by the fleet tests (`tests/quota/fleet.rs`) and the `quota` bench, which
//! run it in child processes (their own binary again, with [`PLAN`] set).
// NOTE: shared with the `quota` bench, which uses other parts of it.
#![allow(dead_code, unreachable_pub)]

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use http_resilience::{
    presets,
    rate_limit::{
        fleet::{Fallback, FleetQuota},
        RateLimitEvent, RateLimitMode, RateLimitPolicy,
    },
    BoxError, FailureKind,
};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, SystemTime},
};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

/// The environment variable that holds a child's plan.
pub const PLAN: &str = "HTTP_RESILIENCE_QUOTA_PLAN";

/// What one process of the fleet does.
#[derive(Debug, Clone)]
pub struct Plan {
    pub redis: String,
    pub prefix: String,
    pub upstream: SocketAddr,
    /// The fleet's quota, per second.
    pub rate: u32,
    pub callers: usize,
    /// When the run starts and how long it lasts, by the wall clock (the
    /// processes share it), in milliseconds since the Unix epoch.
    pub start_ms: u64,
    pub millis: u64,
    /// The share of the quota this process takes while Redis is away.
    pub share: f64,
    pub lease_wait_ms: u64,
    /// Whether a call over the limit is turned away at once (rather than
    /// wait for its slot).
    pub turn_away: bool,
}

/// What one process counted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub calls: u64,
    pub refused: u64,
    pub leases: u64,
    pub fallbacks: u64,
    /// When the first lease after a fallback came, in milliseconds since
    /// the run's start.
    pub recovered_ms: Option<u64>,
    /// The longest a call took, in milliseconds.
    pub slowest_ms: u64,
}

// ===== impl Plan =====

impl Plan {
    /// The plan as an environment variable's value.
    pub fn encode(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {} {}",
            self.redis,
            self.prefix,
            self.upstream,
            self.rate,
            self.callers,
            self.start_ms,
            self.millis,
            self.share,
            self.lease_wait_ms,
            self.turn_away
        )
    }

    /// The plan of an environment variable's value.
    pub fn decode(text: &str) -> Self {
        let parts: Vec<&str> = text.split(' ').collect();
        Self {
            redis: parts[0].to_owned(),
            prefix: parts[1].to_owned(),
            upstream: parts[2].parse().unwrap(),
            rate: parts[3].parse().unwrap(),
            callers: parts[4].parse().unwrap(),
            start_ms: parts[5].parse().unwrap(),
            millis: parts[6].parse().unwrap(),
            share: parts[7].parse().unwrap(),
            lease_wait_ms: parts[8].parse().unwrap(),
            turn_away: parts[9].parse().unwrap(),
        }
    }

    /// A plan whose run starts `lead` from now.
    pub fn starting_in(lead: Duration) -> u64 {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap();
        u64::try_from((now + lead).as_millis()).unwrap()
    }

    /// How long until the run starts, by the wall clock.
    fn until_start(&self) -> Duration {
        let start = SystemTime::UNIX_EPOCH + Duration::from_millis(self.start_ms);
        start
            .duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    }
}

impl Counts {
    /// The line a child prints.
    pub fn encode(&self) -> String {
        format!(
            "quota-child {} {} {} {} {} {}",
            self.calls,
            self.refused,
            self.leases,
            self.fallbacks,
            self.recovered_ms.map_or(-1, |ms| ms as i64),
            self.slowest_ms
        )
    }

    /// The counts of a child's line, if it is one.
    pub fn decode(line: &str) -> Option<Self> {
        // NOTE: libtest prints the test's name on the same line first.
        let rest = &line[line.find("quota-child ")? + "quota-child ".len()..];
        let n: Vec<i64> = rest.split(' ').map(|n| n.parse().unwrap()).collect();
        Some(Self {
            calls: n[0] as u64,
            refused: n[1] as u64,
            leases: n[2] as u64,
            fallbacks: n[3] as u64,
            recovered_ms: u64::try_from(n[4]).ok(),
            slowest_ms: n[5] as u64,
        })
    }
}

/// The events a process counts, and when the run started.
#[derive(Default)]
struct Heard {
    leases: AtomicU64,
    fallbacks: AtomicU64,
    recovered_ms: AtomicU64,
}

/// Runs `plan` in this process: its callers call the upstream through the
/// fleet's quota until the run ends; what they counted.
pub async fn run(plan: &Plan) -> Counts {
    let heard = Arc::new(Heard::default());
    let start = start_instant(plan);
    let quota = quota(plan);
    let limit = policy(plan, quota.clone(), Arc::clone(&heard), start);
    // NOTE: a clone of the quota shares its link to Redis with the policy's.
    quota.connect().await.expect("Redis is up at the start");
    tokio::time::sleep(plan.until_start()).await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let svc = presets::reactor().with_guard(limit).layer().layer(client);
    let end = start + Duration::from_millis(plan.millis);
    let uri: http::Uri = format!("http://{}/fleet", plan.upstream).parse().unwrap();
    let callers = (0..plan.callers).map(|_| {
        let (svc, uri) = (svc.clone(), uri.clone());
        tokio::spawn(async move {
            let mut counts = Counts::default();
            while Instant::now() < end {
                let began = Instant::now();
                let request = Request::get(uri.clone()).body(Full::default()).unwrap();
                match svc.clone().oneshot(request).await {
                    Ok(_) => counts.calls += 1,
                    Err(err) => refused(&mut counts, &err).await,
                }
                let took = u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX);
                counts.slowest_ms = counts.slowest_ms.max(took);
            }
            counts
        })
    });
    let mut total = Counts::default();
    for caller in callers.collect::<Vec<_>>() {
        let counts = caller.await.unwrap();
        total.calls += counts.calls;
        total.refused += counts.refused;
        total.slowest_ms = total.slowest_ms.max(counts.slowest_ms);
    }
    total.leases = heard.leases.load(Ordering::Relaxed);
    total.fallbacks = heard.fallbacks.load(Ordering::Relaxed);
    let recovered = heard.recovered_ms.load(Ordering::Relaxed);
    total.recovered_ms = (recovered > 0).then_some(recovered);
    total
}

/// A call turned away: counted, and a pause before the next, as a caller
/// that honours `retry_after` would.
async fn refused(counts: &mut Counts, err: &BoxError) {
    assert_eq!(FailureKind::of(err), FailureKind::RateLimited, "{err}");
    counts.refused += 1;
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// The fleet's quota as `plan` says.
fn quota(plan: &Plan) -> FleetQuota {
    FleetQuota::new(&plan.redis)
        .unwrap()
        .with_prefix(&plan.prefix)
        .with_lease_wait(Duration::from_millis(plan.lease_wait_ms))
        .unwrap()
        .with_fallback(Fallback::LocalShare(plan.share))
        .unwrap()
}

/// The rate limit of `fleet` as `plan` says, its events counted in `heard`.
fn policy(plan: &Plan, fleet: FleetQuota, heard: Arc<Heard>, start: Instant) -> RateLimitPolicy {
    let mode = match plan.turn_away {
        true => RateLimitMode::TurnAway,
        false => RateLimitMode::Wait,
    };
    RateLimitPolicy::new(plan.rate, Duration::from_secs(1))
        .unwrap()
        .with_burst(10)
        .unwrap()
        .with_mode(mode)
        .with_fleet(fleet)
        .with_listener(move |event: &RateLimitEvent<'_>| match event {
            RateLimitEvent::Leased { .. } => {
                heard.leases.fetch_add(1, Ordering::Relaxed);
            }
            RateLimitEvent::FleetFallback { .. } => {
                heard.fallbacks.fetch_add(1, Ordering::Relaxed);
            }
            RateLimitEvent::FleetRecovered { .. } => {
                let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                heard.recovered_ms.store(ms.max(1), Ordering::Relaxed);
            }
            _ => {}
        })
}

/// A child's `main`: the plan in [`PLAN`], run, and its counts printed.
pub fn child_main(plan: &str) {
    let plan = Plan::decode(plan);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let counts = runtime.block_on(run(&plan));
    println!("{}", counts.encode());
}

/// Starts `plans.len()` children: `exe` with `args`, each with its plan.
pub fn spawn(exe: &std::path::Path, args: &[&str], plans: &[Plan]) -> Vec<std::process::Child> {
    plans
        .iter()
        .map(|plan| {
            std::process::Command::new(exe)
                .args(args)
                .env(PLAN, plan.encode())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect()
}

/// The counts of every child, once it has ended.
pub fn collect(children: Vec<std::process::Child>) -> Vec<Counts> {
    children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().unwrap();
            assert!(
                output.status.success(),
                "a child failed: {:?}",
                output.status
            );
            let text = String::from_utf8_lossy(&output.stdout);
            text.lines()
                .find_map(Counts::decode)
                .unwrap_or_else(|| panic!("no counts from a child: {text}"))
        })
        .collect()
}

/// The figures of a run of `plan` by `processes`, from the arrivals at the
/// upstream (mapped to the wall clock's start) and the children's counts.
#[derive(Debug, Clone, Copy)]
pub struct Figures {
    /// The calls that arrived during the run, over the quota for it.
    pub aggregate: f64,
    /// The most calls in any 1 s window, over the quota per second.
    pub busiest: f64,
    pub round_trips_per_call: f64,
    pub calls: u64,
}

pub fn figures(plan: &Plan, arrivals: &[Instant], start: Instant, counts: &[Counts]) -> Figures {
    let end = start + Duration::from_millis(plan.millis);
    let during: Vec<Instant> = arrivals
        .iter()
        .copied()
        .filter(|at| *at >= start && *at < end)
        .collect();
    let expected = f64::from(plan.rate) * plan.millis as f64 / 1000.0;
    let busiest = super::upstream::busiest(&during, Duration::from_secs(1));
    let calls: u64 = counts.iter().map(|c| c.calls).sum();
    let leases: u64 = counts.iter().map(|c| c.leases).sum();
    Figures {
        aggregate: during.len() as f64 / expected,
        busiest: busiest as f64 / f64::from(plan.rate),
        round_trips_per_call: leases as f64 / calls.max(1) as f64,
        calls,
    }
}

/// The instant on this process's tokio clock of `plan`'s wall-clock start.
pub fn start_instant(plan: &Plan) -> Instant {
    let start = SystemTime::UNIX_EPOCH + Duration::from_millis(plan.start_ms);
    let now = SystemTime::now();
    match start.duration_since(now) {
        Ok(ahead) => Instant::now() + ahead,
        Err(behind) => Instant::now() - behind.duration(),
    }
}
