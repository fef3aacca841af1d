//! `Retry-After` in every form, over a real client and the loopback mock
//! server: the delay the decoder reads, the wait the retryer makes of it, and
//! the requests the server sees.

use crate::support;

use http::StatusCode;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    policy::{FixedDelay, Retryer, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, Attempts,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::{
    sync::{Arc, Mutex},
    time::{Duration, SystemTime},
};
use support::{get, guarded};
use tower::{ServiceBuilder, ServiceExt};

/// The server delay a retryer was offered, and the wait it chose.
type Decision = (Option<Duration>, Option<Duration>);

/// A retryer that records its decisions.
#[derive(Clone)]
struct Recording {
    inner: FixedDelay,
    seen: Arc<Mutex<Vec<Decision>>>,
}

impl Retryer for Recording {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        let wait = self.inner.next_delay(attempts, server_delay);
        self.seen.lock().unwrap().push((server_delay, wait));
        wait
    }
}

/// The cap on any wait in these tests: a server asking for minutes costs
/// 50 ms here.
const CAP: Duration = Duration::from_millis(50);

/// Calls the server through the stack (transient decoder, one retry with a
/// 10 ms backoff, server delays capped at 50 ms) and returns what the
/// retryer saw: the server delay and the wait.
async fn first_retry(server: &MockServer, first: MockResponse) -> (Option<Duration>, Duration) {
    server.enqueue(first);
    server.enqueue(MockResponse::ok("ok"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let retryer = Recording {
        inner: FixedDelay::new(Duration::from_millis(10), 1).with_max_delay(CAP),
        seen: seen.clone(),
    };
    let client = transport::Builder::new()
        .build_http::<http_body_util::Full<bytes::Bytes>>()
        .unwrap();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(RetryPolicy::new(
            TransientDecoder::new(),
            retryer,
        )))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
        .service(client);
    let response = guarded(svc.oneshot(get(server.uri("/value"))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(server.request_count(), 2);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "one retry decision");
    let (server_delay, wait) = seen[0];
    (server_delay, wait.expect("retried"))
}

async fn server() -> MockServer {
    MockServer::start().await.unwrap()
}

fn unavailable(retry_after: &str) -> MockResponse {
    MockResponse::new(503).with_header("retry-after", retry_after)
}

#[tokio::test]
async fn delay_seconds_are_read_and_capped() {
    let server = server().await;
    let (asked, wait) = first_retry(&server, unavailable("3")).await;
    assert_eq!(asked, Some(Duration::from_secs(3)));
    assert_eq!(wait, CAP);
}

#[tokio::test]
async fn read_on_429_too() {
    let server = server().await;
    let first = MockResponse::new(429).with_header("retry-after", "0");
    let (asked, wait) = first_retry(&server, first).await;
    assert_eq!(asked, Some(Duration::ZERO));
    assert_eq!(wait, Duration::ZERO);
}

#[tokio::test]
async fn an_http_date_is_read() {
    let server = server().await;
    let at = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    let (asked, wait) = first_retry(&server, unavailable(&at)).await;
    // Whole seconds on the wire: between 118 and 120 s from now.
    let asked = asked.unwrap();
    assert!(
        asked > Duration::from_secs(118) && asked <= Duration::from_secs(120),
        "{asked:?}"
    );
    assert_eq!(wait, CAP);
}

#[tokio::test]
async fn a_past_date_means_now() {
    let server = server().await;
    let at = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(600));
    let (asked, wait) = first_retry(&server, unavailable(&at)).await;
    assert_eq!(asked, Some(Duration::ZERO));
    assert_eq!(wait, Duration::ZERO);
}

#[tokio::test]
async fn a_skewed_server_clock_is_corrected_by_its_date_header() {
    // The server's clock is an hour behind: by the client's clock its
    // Retry-After date is long past, by its own Date header it is 30 s ahead.
    let server = server().await;
    let server_now = SystemTime::now() - Duration::from_secs(3600);
    let first = MockResponse::new(503)
        .with_header("date", &httpdate::fmt_http_date(server_now))
        .with_header(
            "retry-after",
            &httpdate::fmt_http_date(server_now + Duration::from_secs(30)),
        );
    let (asked, _) = first_retry(&server, first).await;
    assert_eq!(asked, Some(Duration::from_secs(30)));
}

#[tokio::test]
async fn garbage_falls_back_to_the_backoff() {
    let server = server().await;
    let (asked, wait) = first_retry(&server, unavailable("soon, promise")).await;
    assert_eq!(asked, None);
    assert_eq!(wait, Duration::from_millis(10));
}

#[tokio::test]
async fn a_negative_value_falls_back_to_the_backoff() {
    let server = server().await;
    let (asked, wait) = first_retry(&server, unavailable("-5")).await;
    assert_eq!(asked, None);
    assert_eq!(wait, Duration::from_millis(10));
}

#[tokio::test]
async fn an_enormous_value_is_capped() {
    let server = server().await;
    let (asked, wait) = first_retry(&server, unavailable("99999999999999999999999")).await;
    assert_eq!(asked, Some(Duration::from_secs(u64::MAX)));
    assert_eq!(wait, CAP);
}
