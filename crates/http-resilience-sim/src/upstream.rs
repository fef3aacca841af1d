//! The modelled upstream: a `tower::Service` with a capacity (servers and a
//! queue), a latency distribution, and failure modes on a schedule.
//!
//! A request that finds a server free is served at once; one that finds
//! them all busy waits in a FIFO queue; one that finds the queue full is
//! answered 503 at once. A server serves a request for a time drawn from
//! [`Latency`], then answers 200. As real servers do, it finishes the work
//! whether or not the client is still waiting for it: an attempt cut by its
//! time limit leaves its work in the queue (the wasted work that sustains a
//! metastable failure).

use crate::{metrics::Recorder, rng::Rng};
use http::{Request, Response, StatusCode};
use std::{
    collections::VecDeque,
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll},
    time::Duration,
};
use tokio::{sync::oneshot, time::Instant};
use tower::Service;

/// The request header that carries when the caller's call started, in
/// microseconds since the run's start: the upstream counts each attempt
/// against the call that caused it, through every layer of services.
pub(crate) const CALL_STARTED: &str = "x-sim-call-started";

/// How long serving one request takes, before any slowdown.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Latency {
    /// Log-normal: `median`, and `sigma` the standard deviation of its
    /// logarithm (0.25: the 99th percentile about 1.8 times the median).
    LogNormal { median: Duration, sigma: f64 },
    /// A log-normal body, and a `share` of stragglers that pause, besides,
    /// for a time uniform in `pause` (a collection, a compaction, a noisy
    /// neighbour: the causes "The Tail at Scale" lists).
    Stragglers {
        median: Duration,
        sigma: f64,
        share: f64,
        pause: (Duration, Duration),
    },
}

impl Latency {
    fn draw(&self, rng: &mut Rng) -> Duration {
        match *self {
            Self::LogNormal { median, sigma } => median.mul_f64((sigma * rng.normal()).exp()),
            Self::Stragglers {
                median,
                sigma,
                share,
                pause: (least, most),
            } => {
                let body = median.mul_f64((sigma * rng.normal()).exp());
                if rng.chance(share) {
                    body + least + (most - least).mul_f64(rng.unit())
                } else {
                    body
                }
            }
        }
    }
}

/// A failure mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fault {
    /// Every request answered 503 at once.
    Outage,
    /// A share of the requests answered 503 at once, the others served.
    BrownOut { error_ratio: f64 },
    /// Only `servers` servers (a lost zone, a bad deploy): the trigger of a
    /// metastable failure.
    CapacityDrop { servers: u32 },
}

/// A failure mode from one instant of the run to another.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub(crate) from: Duration,
    pub(crate) until: Duration,
    pub(crate) fault: Fault,
}

/// The upstream's capacity, latency and failures.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    /// Requests served at once.
    pub(crate) servers: u32,
    /// Requests that may wait for a server; beyond, a 503 at once.
    pub(crate) queue: u32,
    pub(crate) latency: Latency,
    /// Overload collapse: when set, serving takes longer as the queue grows,
    /// `1 + queued / queue` times the drawn latency (twice as long at a
    /// full queue), as a server thrashing under its backlog does.
    pub(crate) collapse: bool,
    pub(crate) faults: Vec<Window>,
}

struct Job {
    reply: oneshot::Sender<()>,
}

struct State {
    model: Model,
    rng: Rng,
    busy: u32,
    queue: VecDeque<Job>,
}

/// The upstream as a service. Its clones share one set of servers and one
/// queue.
#[derive(Clone)]
pub(crate) struct Upstream {
    state: Arc<Mutex<State>>,
    recorder: Recorder,
}

impl Upstream {
    /// The upstream of `model`, drawing from `rng` and counting its arrivals
    /// in `recorder`. Must be called within the run's runtime: it starts the
    /// task that brings servers back when a capacity drop ends.
    pub(crate) fn new(model: Model, rng: Rng, recorder: Recorder) -> Self {
        let ends: Vec<Duration> = model.faults.iter().map(|w| w.until).collect();
        let upstream = Self {
            state: Arc::new(Mutex::new(State {
                model,
                rng,
                busy: 0,
                queue: VecDeque::new(),
            })),
            recorder,
        };
        let restarter = upstream.clone();
        tokio::spawn(async move {
            for end in ends {
                tokio::time::sleep_until(restarter.recorder.start() + end).await;
                restarter.dispatch(&mut restarter.lock());
            }
        });
        upstream
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The fault in force now, if any.
    fn fault(&self, state: &State) -> Option<Fault> {
        let now = Instant::now().saturating_duration_since(self.recorder.start());
        state
            .model
            .faults
            .iter()
            .find(|w| w.from <= now && now < w.until)
            .map(|w| w.fault)
    }

    fn servers(&self, state: &State) -> u32 {
        match self.fault(state) {
            Some(Fault::CapacityDrop { servers }) => servers,
            _ => state.model.servers,
        }
    }

    /// Starts servers while some are free and requests wait, each with the
    /// request first in line.
    fn dispatch(&self, state: &mut State) {
        while state.busy < self.servers(state) {
            let Some(next) = Self::next_job(state) else {
                return;
            };
            state.busy += 1;
            tokio::spawn(self.clone().serve(next));
        }
    }

    /// The request first in line, and how long serving it takes.
    fn next_job(state: &mut State) -> Option<(Job, Duration)> {
        let job = state.queue.pop_front()?;
        let latency = state.model.latency.draw(&mut state.rng);
        let slowdown = if state.model.collapse {
            1.0 + state.queue.len() as f64 / f64::from(state.model.queue.max(1))
        } else {
            1.0
        };
        Some((job, latency.mul_f64(slowdown)))
    }

    /// One server: serves `first`, then the queue's requests in turn until
    /// it is empty, or until there are fewer servers than busy ones (a
    /// capacity drop).
    async fn serve(self, first: (Job, Duration)) {
        let mut next = first;
        loop {
            let (job, latency) = next;
            tokio::time::sleep(latency).await;
            // NOTE: the client may be gone (its attempt timed out, or lost a
            // hedge race); the work was done all the same.
            let _ = job.reply.send(());
            let mut state = self.lock();
            let state = &mut *state;
            let more = if state.busy <= self.servers(state) {
                Self::next_job(state)
            } else {
                None
            };
            match more {
                Some(job) => next = job,
                None => {
                    state.busy -= 1;
                    return;
                }
            }
        }
    }

    /// Admits a request: a reply at once (503) or a place in line.
    fn admit(&self) -> Reply {
        let mut state = self.lock();
        match self.fault(&state) {
            Some(Fault::Outage) => return Reply::now(StatusCode::SERVICE_UNAVAILABLE),
            Some(Fault::BrownOut { error_ratio }) if state.rng.chance(error_ratio) => {
                return Reply::now(StatusCode::SERVICE_UNAVAILABLE);
            }
            _ => {}
        }
        let free = state.busy < self.servers(&state) && state.queue.is_empty();
        if !free && state.queue.len() >= state.model.queue as usize {
            return Reply::now(StatusCode::SERVICE_UNAVAILABLE);
        }
        let (reply, wait) = oneshot::channel();
        state.queue.push_back(Job { reply });
        self.dispatch(&mut state);
        Reply::Waiting(wait)
    }
}

impl<B> Service<Request<B>> for Upstream {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Reply;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let call = request
            .headers()
            .get(CALL_STARTED)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
            .map(|micros| self.recorder.start() + Duration::from_micros(micros));
        self.recorder.arrival(call);
        self.admit()
    }
}

/// The upstream's answer to one request.
pub(crate) enum Reply {
    Now(Option<StatusCode>),
    Waiting(oneshot::Receiver<()>),
}

impl Reply {
    fn now(status: StatusCode) -> Self {
        Self::Now(Some(status))
    }
}

fn respond(status: StatusCode) -> Response<String> {
    let mut response = Response::new(String::new());
    *response.status_mut() = status;
    response
}

impl Future for Reply {
    type Output = Result<Response<String>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            Self::Now(status) => {
                let status = status.take().expect("a reply polled after it was ready");
                Poll::Ready(Ok(respond(status)))
            }
            Self::Waiting(wait) => Pin::new(wait).poll(cx).map(|served| {
                // NOTE: a server never drops a job unanswered; should one,
                // the request fails as an overloaded server's would.
                Ok(respond(
                    served.map_or(StatusCode::SERVICE_UNAVAILABLE, |()| StatusCode::OK),
                ))
            }),
        }
    }
}
