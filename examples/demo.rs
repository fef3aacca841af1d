//! The demo: a flaky upstream (the in-process mock server), the three layers
//! of http-resilience in their canonical order, and a timeline of every
//! attempt, every wait and every outcome.
//!
//! ```text
//! cargo run --example demo
//! ```

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    read_timeout::body::ReadTimeoutBody,
    retry::{Decoder, FixedDelay, RetryPolicy, Retryer, StatusDecoder, StatusRetryLayer},
    transport, Attempts, BoxError, FailureKind,
};
use http_resilience_mock::{MockResponse, MockServer};
use hyper::body::Incoming;
use std::{
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// The shared record of one call: when it started and which attempt is on.
#[derive(Debug)]
struct Timeline {
    start: Mutex<Instant>,
    attempt: AtomicU32,
}

impl Timeline {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            start: Mutex::new(Instant::now()),
            attempt: AtomicU32::new(0),
        })
    }

    fn restart(&self) {
        *self.start.lock().unwrap() = Instant::now();
        self.attempt.store(0, Ordering::SeqCst);
    }

    fn say(&self, what: impl std::fmt::Display) {
        let elapsed = self.start.lock().unwrap().elapsed();
        println!("  {:>9}  {what}", format!("+{}ms", elapsed.as_millis()));
    }
}

/// A retryer that narrates the seed's fixed delay.
#[derive(Debug, Clone)]
struct Narrated {
    inner: FixedDelay,
    timeline: Arc<Timeline>,
}

impl Retryer for Narrated {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        let delay = self.inner.next_delay(attempts, server_delay);
        match delay {
            Some(delay) => {
                let why = if server_delay.is_some() {
                    "the server asked for it"
                } else {
                    "fixed delay"
                };
                self.timeline.say(format!(
                    "wait {delay:?} before attempt {} ({why})",
                    attempts + 1
                ));
            }
            None => self.timeline.say(format!(
                "no retries left: attempt {attempts}'s outcome goes to the caller as it is"
            )),
        }
        delay
    }
}

type Body = ReadTimeoutBody<Incoming>;

/// The limits of one scenario.
struct Limits {
    attempt: Duration,
    total: Duration,
    read: Duration,
}

const SEED: Limits = Limits {
    attempt: Duration::from_secs(3),
    total: Duration::from_secs(8),
    read: Duration::from_secs(5),
};

async fn scenario(
    server: &MockServer,
    timeline: &Arc<Timeline>,
    title: &str,
    script: Vec<MockResponse>,
    limits: Limits,
) -> Result<(), BoxError> {
    println!("\n== {title} ==");
    println!(
        "   attempt limit {:?}, total {:?}, read timeout {:?}, 503 retried twice, 10ms apart",
        limits.attempt, limits.total, limits.read
    );
    for response in script {
        server.enqueue(response);
    }
    let before = server.request_count();

    let client = transport::Builder::new()
        .connect_timeout(Duration::from_millis(1000))
        .read_timeout(limits.read)
        .build_http::<Full<Bytes>>()?;
    let seed = StatusDecoder::new([503]);
    let narrator = timeline.clone();
    let decoder = move |outcome: &Result<Response<Body>, BoxError>| {
        let verdict = Decoder::<Body, BoxError>::decode(&seed, outcome);
        let n = narrator.attempt.load(Ordering::SeqCst);
        let judged = if verdict.is_retry() {
            "retryable"
        } else {
            "final"
        };
        match outcome {
            Ok(response) => {
                narrator.say(format!("attempt {n} <- {} ({judged})", response.status()))
            }
            Err(err) => narrator.say(format!(
                "attempt {n} <- error: {err} [{}] ({judged})",
                FailureKind::of(&**err)
            )),
        }
        verdict
    };
    let retryer = Narrated {
        inner: FixedDelay::new(Duration::from_millis(10), 2),
        timeline: timeline.clone(),
    };
    let announcer = timeline.clone();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(limits.total))
        .layer(StatusRetryLayer::new(RetryPolicy::new(decoder, retryer)))
        .map_request(move |request: Request<Full<Bytes>>| {
            let n = announcer.attempt.fetch_add(1, Ordering::SeqCst) + 1;
            announcer.say(format!(
                "attempt {n} -> {} {}",
                request.method(),
                request.uri().path()
            ));
            request
        })
        .layer(AttemptTimeoutLayer::new(limits.attempt))
        .service(client);

    timeline.restart();
    let request = Request::get(server.uri("/value")).body(Full::default())?;
    match svc.oneshot(request).await {
        Ok(response) => {
            let status = response.status();
            let attempts = Attempts::of(&response).unwrap_or(0);
            timeline.say(format!(
                "head: {status} after {attempts} attempt(s); reading the body"
            ));
            match http_body_util::BodyExt::collect(response.into_body()).await {
                Ok(body) => timeline.say(format!(
                    "result: {status}, body {:?}",
                    String::from_utf8_lossy(&body.to_bytes())
                )),
                Err(err) => timeline.say(format!(
                    "result: the body failed: {err} [{}]",
                    FailureKind::of(&*err)
                )),
            }
        }
        Err(err) => timeline.say(format!("result: error: {err} [{}]", FailureKind::of(&*err))),
    }
    println!(
        "   the server saw {} request(s)",
        server.request_count() - before
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let server = MockServer::start().await?;
    let timeline = Timeline::new();
    println!("http-resilience demo: upstream at {}", server.uri("/"));
    println!(
        "stack: DeadlineLayer -> StatusRetryLayer -> AttemptTimeoutLayer -> hyper-util client"
    );

    scenario(
        &server,
        &timeline,
        "1. A flaky upstream: 503, 503, then 200",
        vec![
            MockResponse::new(503),
            MockResponse::new(503),
            MockResponse::ok("ok"),
        ],
        SEED,
    )
    .await?;

    scenario(
        &server,
        &timeline,
        "2. Unavailable on every attempt: the last 503 comes back unwrapped",
        vec![
            MockResponse::new(503).with_body("down 1"),
            MockResponse::new(503).with_body("down 2"),
            MockResponse::new(503).with_body("down 3"),
        ],
        SEED,
    )
    .await?;

    scenario(
        &server,
        &timeline,
        "3. An upstream that never answers, attempt limit 1s (timeouts are not retried)",
        vec![MockResponse::no_response()],
        Limits {
            attempt: Duration::from_secs(1),
            ..SEED
        },
    )
    .await?;

    scenario(
        &server,
        &timeline,
        "4. The same silence with a transport read timeout of 250ms",
        vec![MockResponse::no_response()],
        Limits {
            read: Duration::from_millis(250),
            ..SEED
        },
    )
    .await?;

    scenario(
        &server,
        &timeline,
        "5. A body dripping past a 1s deadline: the deadline covers the body too",
        vec![MockResponse::drip(
            "abcdefghijklmnopqrst",
            1,
            Duration::from_millis(150),
        )],
        Limits {
            total: Duration::from_secs(1),
            ..SEED
        },
    )
    .await?;

    println!("\nSee README.md for what each layer does and why their order matters.");
    Ok(())
}
