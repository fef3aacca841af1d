//! The demo: a flaky upstream (the in-process mock server), the three layers
//! of http-resilience in their canonical order, and a timeline of every
//! attempt, every wait and every outcome.
//!
//! ```text
//! cargo run -p http-resilience --example demo
//! ```
//!
//! Copied into a project of its own (as `src/main.rs`), it needs, besides
//! the crates the README's "Use" section lists:
//!
//! ```toml
//! http-resilience-mock = "0.1"
//! hyper = "1"
//! ```

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    policy::{
        AnyDecoder, AnyRetryer, CallEvent, Decoder, ExponentialBackoff, RetryEvent,
        TransientDecoder, WaitSource,
    },
    presets,
    read_timeout::body::ReadTimeoutBody,
    retry::{RetryPolicy, StatusRetryLayer},
    transport, Attempts, BoxError, FailureKind, InvalidSetting, ResiliencePolicy,
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

type Body = ReadTimeoutBody<Incoming>;

/// The transport's read timeout of Reactor WebClient's policy.
const READ: Duration = Duration::from_secs(5);

/// Reactor WebClient's policy with other limits; an error when they do not fit.
fn seed_with(
    attempt: Duration,
    total: Duration,
) -> Result<ResiliencePolicy<AnyDecoder, AnyRetryer>, InvalidSetting> {
    let policy = presets::reactor()
        .with_deadline(total)?
        .with_attempt_timeout(attempt)?;
    Ok(policy.erase())
}

/// How a scenario calls the upstream.
#[derive(Clone, Copy)]
enum Call {
    Get,
    Post,
    PostWithKey,
}

async fn scenario(
    call: Call,
    server: &MockServer,
    timeline: &Arc<Timeline>,
    title: &str,
    script: Vec<MockResponse>,
    policy: ResiliencePolicy<AnyDecoder, AnyRetryer>,
    read: Duration,
) -> Result<(), BoxError> {
    println!("\n== {title} ==");
    println!(
        "   attempt limit {:?}, total {:?}, read timeout {read:?}",
        policy.attempt_timeout(),
        policy.deadline(),
    );
    for response in script {
        server.enqueue(response);
    }
    let before = server.request_count();

    let client = transport::Builder::new()
        .connect_timeout(Duration::from_millis(1000))
        .read_timeout(read)
        .build_http::<Full<Bytes>>()?;
    let (deadline, attempt) = (policy.deadline(), policy.attempt_timeout());
    let narrator = timeline.clone();
    let listener = timeline.clone();
    let retry = policy
        .retry()
        .clone()
        .map(
            move |inner| {
                move |outcome: &Result<Response<Body>, BoxError>| {
                    let verdict = Decoder::<Body, BoxError>::decode(&inner, outcome);
                    let n = narrator.attempt.load(Ordering::SeqCst);
                    match outcome {
                        Ok(response) => {
                            narrator.say(format!("attempt {n} <- {}: {verdict}", response.status()))
                        }
                        Err(err) => narrator.say(format!(
                            "attempt {n} <- error: {err} [{}]: {verdict}",
                            FailureKind::of(&**err)
                        )),
                    }
                    verdict
                }
            },
            |retryer| retryer,
        )
        .map_options(|o| {
            o.with_listener(move |heard: &CallEvent<'_>| match heard.event {
                RetryEvent::Retry {
                    attempt,
                    verdict,
                    wait,
                    source,
                    ..
                } => {
                    let why = match (source, verdict.server_delay()) {
                        (WaitSource::Server, Some(asked)) if asked > wait => {
                            format!("Retry-After asked for {asked:?}, capped")
                        }
                        (WaitSource::Server, _) => "Retry-After".to_owned(),
                        (WaitSource::Backoff, _) => "the retryer's backoff".to_owned(),
                        _ => "no wait".to_owned(),
                    };
                    listener.say(format!(
                        "wait {}ms before attempt {} ({why})",
                        wait.as_millis(),
                        attempt + 1
                    ));
                }
                RetryEvent::Done { attempts, stop, .. } => {
                    listener.say(format!("done after {attempts} attempt(s): {stop}"));
                }
                _ => {}
            })
        });
    let announcer = timeline.clone();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(deadline))
        .layer(StatusRetryLayer::new(retry))
        .map_request(move |request: Request<Full<Bytes>>| {
            let n = announcer.attempt.fetch_add(1, Ordering::SeqCst) + 1;
            announcer.say(format!(
                "attempt {n} -> {} {}",
                request.method(),
                request.uri().path()
            ));
            request
        })
        .layer(AttemptTimeoutLayer::new(attempt))
        .service(client);

    timeline.restart();
    let request = match call {
        Call::Get => Request::get(server.uri("/value")).body(Full::default())?,
        Call::Post => Request::post(server.uri("/orders")).body(Full::from("{\"item\":7}"))?,
        Call::PostWithKey => Request::post(server.uri("/orders"))
            .header("idempotency-key", "order-7")
            .body(Full::from("{\"item\":7}"))?,
    };
    match svc.oneshot(request).await {
        Ok(response) => {
            let status = response.status();
            let attempts = Attempts::of(&response);
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
        Call::Get,
        &server,
        &timeline,
        "1. A flaky upstream: 503, 503, then 200",
        vec![
            MockResponse::new(503),
            MockResponse::new(503),
            MockResponse::ok("ok"),
        ],
        presets::reactor().erase(),
        READ,
    )
    .await?;

    scenario(
        Call::Get,
        &server,
        &timeline,
        "2. Unavailable on every attempt: the last 503 comes back unwrapped",
        vec![
            MockResponse::new(503).with_body("down 1"),
            MockResponse::new(503).with_body("down 2"),
            MockResponse::new(503).with_body("down 3"),
        ],
        presets::reactor().erase(),
        READ,
    )
    .await?;

    scenario(
        Call::Get,
        &server,
        &timeline,
        "3. An upstream that never answers, attempt limit 1s (timeouts are not retried)",
        vec![MockResponse::no_response()],
        seed_with(Duration::from_secs(1), Duration::from_secs(8))?,
        READ,
    )
    .await?;

    scenario(
        Call::Get,
        &server,
        &timeline,
        "4. The same silence with a transport read timeout of 250ms",
        vec![MockResponse::no_response()],
        presets::reactor().erase(),
        Duration::from_millis(250),
    )
    .await?;

    scenario(
        Call::Get,
        &server,
        &timeline,
        "5. A body dripping past a 1s deadline: the deadline covers the body too",
        vec![MockResponse::drip(
            "abcdefghijklmnopqrst",
            1,
            Duration::from_millis(150),
        )],
        seed_with(Duration::from_secs(1), Duration::from_secs(1))?,
        READ,
    )
    .await?;

    let paced = ResiliencePolicy::new(
        Duration::from_secs(10),
        Duration::from_secs(3),
        RetryPolicy::new(
            TransientDecoder::new(),
            ExponentialBackoff::new(
                Duration::from_millis(50),
                2.0,
                Duration::from_millis(800),
                4,
            )?
            .with_jitter(http_resilience::policy::Jitter::Equal),
        ),
    )?
    .erase();
    scenario(
        Call::Get,
        &server,
        &timeline,
        "6. Transient failures with server pacing: 502, then 429 with Retry-After: 60 (capped), then 200",
        vec![
            MockResponse::new(502),
            MockResponse::new(429).with_header("retry-after", "60"),
            MockResponse::ok("paced ok"),
        ],
        paced,
        READ,
    )
    .await?;

    scenario(
        Call::Post,
        &server,
        &timeline,
        "7. A POST that got a 503 is not sent again: it is not idempotent",
        vec![MockResponse::new(503)],
        presets::reactor().erase(),
        READ,
    )
    .await?;

    scenario(
        Call::PostWithKey,
        &server,
        &timeline,
        "8. The same POST with an Idempotency-Key is retried",
        vec![MockResponse::new(503), MockResponse::ok("created once")],
        presets::reactor().erase(),
        READ,
    )
    .await?;

    let budget_aware = ResiliencePolicy::new(
        Duration::from_secs(2),
        Duration::from_secs(1),
        RetryPolicy::new(
            TransientDecoder::new(),
            ExponentialBackoff::new(Duration::from_millis(50), 2.0, Duration::from_secs(10), 4)?,
        )
        .map_options(|o| o.deadline_aware(Duration::from_millis(200))),
    )?
    .erase();
    scenario(
        Call::Get,
        &server,
        &timeline,
        "9. Deadline-aware: a 503 asks for Retry-After: 5 with 2s left; no sleeping into a timeout",
        vec![MockResponse::new(503).with_header("retry-after", "5")],
        budget_aware,
        READ,
    )
    .await?;

    println!("\nSee README.md for what each layer does and why their order matters.");
    Ok(())
}
