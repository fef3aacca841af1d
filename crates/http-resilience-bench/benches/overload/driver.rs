//! The open-loop driver: calls arrive on a seeded Poisson schedule whatever
//! became of the earlier ones, each as its own task through the stack under
//! test, and each bounded by the caller's deadline.

use super::{
    rng::SplitMix64,
    upstream::{Body, Upstream},
    variants::Stack,
};
use http::{Request, StatusCode};
use std::time::Duration;
use tokio::{task::JoinHandle, time::Instant};
use tower::ServiceExt;

/// One cell's traffic.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    /// Mean arrivals per second.
    pub(crate) rate: f64,
    /// Traffic before the measured window (the adaptive controls settle).
    pub(crate) warm_up: Duration,
    /// The measured window.
    pub(crate) window: Duration,
    /// The caller's deadline for one call, from its arrival.
    pub(crate) deadline: Duration,
    /// The arrival schedule's seed.
    pub(crate) seed: u64,
}

/// What one cell measured: the calls that arrived in the window.
#[derive(Debug)]
pub(crate) struct Cell {
    /// Calls that arrived in the window.
    pub(crate) offered: u64,
    /// The latencies of those that succeeded (200 within the deadline), sorted.
    pub(crate) successes: Vec<Duration>,
    /// Requests the upstream received during the window.
    pub(crate) upstream: u64,
}

/// Drives `stack` with `load`, then waits for every call to end.
pub(crate) async fn run(stack: Stack, upstream: &Upstream, load: Load) -> Cell {
    let start = Instant::now();
    let window_start = start + load.warm_up;
    let window_end = window_start + load.window;
    let mut at = start;
    let mut measured = Vec::new();
    let mut received_at_start = None;
    for n in 0.. {
        at += gap(load.rate, load.seed, n);
        if at >= window_end {
            break;
        }
        tokio::time::sleep_until(at).await;
        if at < window_start {
            // NOTE: warm-up calls end by their deadline on their own.
            drop(tokio::spawn(call(stack.clone(), at, load.deadline)));
            continue;
        }
        received_at_start.get_or_insert_with(|| upstream.received());
        measured.push(tokio::spawn(call(stack.clone(), at, load.deadline)));
    }
    tokio::time::sleep_until(window_end).await;
    let received = upstream.received() - received_at_start.unwrap_or(0);
    Cell {
        offered: measured.len() as u64,
        successes: collect(measured).await,
        upstream: received,
    }
}

/// The wait before arrival `n`: exponential with mean `1 / rate`.
fn gap(rate: f64, seed: u64, n: u64) -> Duration {
    let unit = SplitMix64::at(seed, n).unit();
    Duration::from_secs_f64(-(1.0 - unit).ln() / rate)
}

/// One call, from its scheduled arrival: its latency if it succeeded.
async fn call(stack: Stack, arrival: Instant, deadline: Duration) -> Option<Duration> {
    // NOTE: the caller's own deadline also bounds a wait in `poll_ready`,
    // which comes before any layer's call (and so before `DeadlineLayer`
    // starts its clock).
    let outcome = tokio::time::timeout_at(arrival + deadline, stack.oneshot(request())).await;
    match outcome {
        Ok(Ok(response)) if response.status() == StatusCode::OK => Some(arrival.elapsed()),
        _ => None,
    }
}

async fn collect(calls: Vec<JoinHandle<Option<Duration>>>) -> Vec<Duration> {
    let mut successes = Vec::with_capacity(calls.len());
    for call in calls {
        if let Some(latency) = call.await.expect("a call never panics") {
            successes.push(latency);
        }
    }
    successes.sort();
    successes
}

fn request() -> Request<Body> {
    let mut request = Request::new(Body::default());
    *request.uri_mut() = http::Uri::from_static("http://upstream.test/items");
    request
}
