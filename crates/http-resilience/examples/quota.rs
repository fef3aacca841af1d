//! Two processes sharing one quota through a local Redis (feature `redis`):
//! 50 calls a second to one upstream, for the pair, whatever each process
//! would send alone.
//!
//! The example starts everything itself: `redis-server` (Debian's package)
//! on a free loopback port, with no persistence and its files in a
//! temporary directory; a counting upstream (axum) in this process; and two
//! workers, this program again, each with 8 callers calling as fast as the
//! quota lets them for three seconds. It prints what each worker sent and
//! what the upstream saw each second: about 50, never the 100 two local
//! limits of 50 would let through.
//!
//! ```text
//! cargo run -p http-resilience --example quota
//! ```
//!
//! Without `redis-server` it says how to install it, and ends.

use axum::{routing::get, Router};
use http::Request;
use http_body_util::Full;
use http_resilience::{
    presets,
    rate_limit::{fleet::FleetQuota, RateLimitEvent, RateLimitPolicy},
    transport, BoxError,
};
use std::{
    net::{Ipv4Addr, SocketAddr},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

/// The quota of the pair, per second.
const QUOTA: u32 = 50;
/// How long the workers call.
const RUN: Duration = Duration::from_secs(3);
/// The environment variable that makes this program a worker.
const WORKER: &str = "QUOTA_EXAMPLE_WORKER";

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    if let Ok(plan) = std::env::var(WORKER) {
        return worker(&plan).await;
    }
    let Some(redis) = Redis::start()? else {
        println!(
            "redis-server is not installed: this example needs it. On Debian or Ubuntu:\n\
             \n    apt-get install -y redis-server\n\nthen run the example again."
        );
        return Ok(());
    };
    redis.wait_until_listening().await?;
    let (upstream, seen) = upstream().await?;
    println!("redis on {}, upstream on {upstream}", redis.addr);
    let workers: Vec<_> = (1..=2)
        .map(|n| {
            Command::new(std::env::current_exe()?)
                .env(
                    WORKER,
                    format!("{n} redis://{}/ http://{upstream}/", redis.addr),
                )
                .stdout(Stdio::inherit())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    for mut worker in workers {
        tokio::task::spawn_blocking(move || worker.wait()).await??;
    }
    let seen = seen.lock().unwrap().clone();
    let first = seen.first().copied().unwrap_or_else(Instant::now);
    let mut per_second = vec![0; 4];
    for at in seen {
        let second = (at - first).as_secs() as usize;
        per_second[second.min(3)] += 1;
    }
    println!("the upstream saw, second by second: {per_second:?} (quota {QUOTA}/s for the pair)");
    Ok(())
}

/// A worker: 8 callers through the fleet's quota for [`RUN`].
async fn worker(plan: &str) -> Result<(), BoxError> {
    let mut parts = plan.split(' ');
    let (name, redis, upstream) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let leases = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&leases);
    let fleet = FleetQuota::new(redis)?.with_prefix("quota-example");
    fleet.connect().await?;
    let quota = RateLimitPolicy::new(QUOTA, Duration::from_secs(1))?
        .with_fleet(fleet)
        .with_listener(move |event: &RateLimitEvent<'_>| {
            if let RateLimitEvent::Leased { .. } = event {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
    let client = transport::Builder::new().build_http::<Full<bytes::Bytes>>()?;
    let svc = presets::reactor().with_guard(quota).layer().layer(client);
    let end = Instant::now() + RUN;
    let sent = Arc::new(AtomicU64::new(0));
    let callers: Vec<_> = (0..8)
        .map(|_| {
            let (svc, sent, uri) = (svc.clone(), Arc::clone(&sent), upstream.to_owned());
            tokio::spawn(async move {
                while Instant::now() < end {
                    let request = Request::get(uri.as_str()).body(Full::default()).unwrap();
                    if svc.clone().oneshot(request).await.is_ok() {
                        sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for caller in callers {
        caller.await?;
    }
    println!(
        "worker {name}: {} calls in {RUN:?}, {} leases from Redis",
        sent.load(Ordering::Relaxed),
        leases.load(Ordering::Relaxed)
    );
    Ok(())
}

/// The upstream: answers every call, and records when it came.
async fn upstream() -> Result<(SocketAddr, Arc<Mutex<Vec<Instant>>>), BoxError> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let app = Router::new().route(
        "/",
        get(move || {
            record.lock().unwrap().push(Instant::now());
            async { "ok" }
        }),
    );
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((addr, seen))
}

/// `redis-server`, a child process, stopped on drop.
struct Redis {
    addr: SocketAddr,
    dir: std::path::PathBuf,
    child: std::process::Child,
}

impl Redis {
    /// Redis on a free loopback port; `None` when it is not installed.
    fn start() -> Result<Option<Self>, BoxError> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let binary = std::env::split_paths(&path)
            .chain([std::path::PathBuf::from("/usr/bin")])
            .map(|dir| dir.join("redis-server"))
            .find(|candidate| candidate.is_file());
        let Some(binary) = binary else {
            return Ok(None);
        };
        let addr = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?;
        let dir = std::env::temp_dir().join(format!("quota-example-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let child = Command::new(binary)
            .args(["--bind", "127.0.0.1", "--port", &addr.port().to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()?;
        Ok(Some(Self { addr, dir, child }))
    }

    /// Waits (five seconds at most) until Redis accepts connections.
    async fn wait_until_listening(&self) -> Result<(), BoxError> {
        let started = Instant::now();
        while tokio::net::TcpStream::connect(self.addr).await.is_err() {
            if started.elapsed() > Duration::from_secs(5) {
                return Err("redis-server did not listen in time".into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
