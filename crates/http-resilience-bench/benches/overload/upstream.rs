//! The simulated upstream: a server of known capacity, in process.
//!
//! It has `slots` server slots and room for `queue` more requests waiting for
//! one; each request holds a slot for the service time (drawn from a seeded
//! sequence), so a request that waits is slower by its wait. A request that
//! finds the slots and the queue full is answered 503 at once, as a server
//! whose accept queue is full sheds. In the failing mode every request is
//! answered 503 at once.
//!
//! Dropping a request's future (an attempt timeout, a deadline, a caller who
//! gave up) frees its place at once: the simulated server stops work it can
//! no longer deliver.

use super::rng::SplitMix64;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};
use tokio::sync::Semaphore;
use tower::Service;

/// What the upstream answers.
pub(crate) type Body = Full<Bytes>;

/// How the upstream behaves.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mode {
    /// Serves up to its capacity, queues a little, sheds the rest with 503.
    Healthy,
    /// Answers 503 to every request at once.
    Failing,
}

/// The shape of the simulated server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Requests served at once.
    pub(crate) slots: usize,
    /// Requests that may wait for a slot beyond those served.
    pub(crate) queue: usize,
    /// The mean service time of one request.
    pub(crate) service_time: Duration,
    /// The spread around it: each request takes the mean ± up to this share.
    pub(crate) spread: f64,
}

/// A simulated upstream; its clones share the slots, the queue and the
/// counter.
#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    mode: Mode,
    shape: Shape,
    slots: Arc<Semaphore>,
    /// Requests served or waiting now.
    in_system: AtomicUsize,
    /// Requests that reached the upstream, shed ones included.
    received: AtomicU64,
    /// The service-time sequence.
    draws: AtomicU64,
    seed: u64,
}

/// Leaves the system when the request's future ends or is dropped.
struct InSystem(Arc<Shared>);

impl Drop for InSystem {
    fn drop(&mut self) {
        self.0.in_system.fetch_sub(1, Ordering::Relaxed);
    }
}

// ===== impl Upstream =====

impl Upstream {
    pub(crate) fn new(mode: Mode, shape: Shape, seed: u64) -> Self {
        let shared = Shared {
            mode,
            shape,
            slots: Arc::new(Semaphore::new(shape.slots)),
            in_system: AtomicUsize::new(0),
            received: AtomicU64::new(0),
            draws: AtomicU64::new(0),
            seed,
        };
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Requests that reached the upstream so far.
    pub(crate) fn received(&self) -> u64 {
        self.shared.received.load(Ordering::Relaxed)
    }

    /// The next service time: the mean, spread uniformly by the shape's share.
    fn service_time(&self) -> Duration {
        let n = self.shared.draws.fetch_add(1, Ordering::Relaxed);
        let unit = SplitMix64::at(self.shared.seed, n).unit();
        let shape = self.shared.shape;
        shape
            .service_time
            .mul_f64(1.0 + shape.spread * (2.0 * unit - 1.0))
    }

    /// Enters the system, unless the slots and the queue are full.
    fn admit(&self) -> Option<InSystem> {
        let shape = self.shared.shape;
        let bound = shape.slots + shape.queue;
        let admitted = self
            .shared
            .in_system
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < bound).then_some(n + 1)
            })
            .is_ok();
        admitted.then(|| InSystem(Arc::clone(&self.shared)))
    }
}

fn answer(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
    *response.status_mut() = status;
    response
}

impl<B> Service<Request<B>> for Upstream {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<B>) -> Self::Future {
        self.shared.received.fetch_add(1, Ordering::Relaxed);
        let place = match self.shared.mode {
            Mode::Failing => None,
            Mode::Healthy => self.admit(),
        };
        let Some(place) = place else {
            return Box::pin(async { Ok(answer(StatusCode::SERVICE_UNAVAILABLE)) });
        };
        let slots = Arc::clone(&self.shared.slots);
        let service_time = self.service_time();
        Box::pin(async move {
            // NOTE: tokio's semaphore is fair, so the queue is first come,
            // first served.
            let _slot = slots.acquire_owned().await.expect("never closed");
            tokio::time::sleep(service_time).await;
            drop(place);
            Ok(answer(StatusCode::OK))
        })
    }
}
