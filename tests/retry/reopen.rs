//! Re-opened request bodies over a real client and the mock server: every
//! path that sends a request again opens the body anew (a 503, an HTTP/2
//! stream refused unprocessed, a `GOAWAY`), and a factory that fails ends
//! the call with its error below `ReopenFailed`, not retried. A file body
//! announces its length on every attempt, the first included, and fails with
//! `BodyChanged` when the file changed length; a factory that panics ends the
//! call as a request body failure that keeps the panic's message.
//!
//! The 256 MiB uploads, with the client's heap measured, are
//! `tests/large_upload`.

use crate::support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    body::{BodyChanged, FactoryPanicked, Reopen, ReopenBody, ReopenFailed, TryCloneBody},
    deadline::DeadlineLayer,
    errors,
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, Attempts, BoxError, FailureKind, RetryReport, Stop,
};
use http_resilience_mock::{body::ScriptedBody, MockResponse, MockServer};
use std::{
    error::Error as _,
    future::{ready, Ready},
    io,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use support::{guarded, text};
use tower::{Service, ServiceBuilder, ServiceExt};

/// Opens a body of [`LEN`] bytes in 16 KiB frames, failing from the
/// `fails_from`th opening on (counting from 0) with a refused connection,
/// which the transient decoder would retry were it a transport failure.
#[derive(Clone)]
struct Frames {
    fails_from: u32,
    opened: Arc<AtomicU32>,
}

/// 1 MiB: over a replay buffer's cap, in 64 frames.
const LEN: usize = 1024 * 1024;

const FRAME: usize = 16 * 1024;

impl Frames {
    fn new() -> Self {
        Self {
            fails_from: u32::MAX,
            opened: Arc::default(),
        }
    }

    fn opened(&self) -> u32 {
        self.opened.load(Ordering::Relaxed)
    }

    /// The bytes every opening sends.
    fn whole() -> Bytes {
        (0..LEN).map(|n| (n % 251) as u8).collect()
    }
}

impl Reopen for Frames {
    type Body = ScriptedBody;
    type Error = io::Error;
    type Future = Ready<Result<ScriptedBody, io::Error>>;

    fn reopen(&self) -> Self::Future {
        if self.opened.fetch_add(1, Ordering::Relaxed) >= self.fails_from {
            return ready(Err(io::Error::from(io::ErrorKind::ConnectionRefused)));
        }
        let whole = Self::whole();
        let frames = (0..LEN / FRAME).map(|n| whole.slice(n * FRAME..(n + 1) * FRAME));
        ready(Ok(frames.fold(ScriptedBody::new(), ScriptedBody::data)))
    }
}

type Outbound = ReopenBody<Frames>;

/// Transient outcomes retried every 10 ms, 3 times at most, within a 10 s
/// deadline; attempts of at most 5 s.
fn stack(
    http2: bool,
) -> impl Service<
    Request<Outbound>,
    Response = http::Response<support::Body>,
    Error = BoxError,
    Future: Send,
> {
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .http2_only(http2)
        .build_http::<Outbound>()
        .expect("valid transport");
    let policy = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 3),
    );
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
        .service(client)
}

/// A PUT of a body `frames` opens, through the stack, with a report.
fn put(server: &MockServer, frames: &Frames, report: &RetryReport) -> Request<Outbound> {
    Request::put(server.uri("/objects/7"))
        .extension(report.clone())
        .body(ReopenBody::new(frames.clone()))
        .unwrap()
}

/// Sends a body over HTTP/2 to an upstream that first turns it away with
/// `refusal`: the retry opens it again and it arrives once, whole.
async fn refused_then_sent_whole(refusal: MockResponse) {
    let server = guarded(MockServer::start_h2()).await.unwrap();
    server.enqueue(refusal);
    server.enqueue(MockResponse::ok("stored"));
    let frames = Frames::new();
    let report = RetryReport::new();
    let response = guarded(stack(true).oneshot(put(&server, &frames, &report)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(server.refused_count(), 1);
    let seen = server.requests();
    assert_eq!(seen.len(), 1, "processed once");
    assert!(seen[0].body == Frames::whole(), "whole, in order");
    // NOTE: the refused attempt may or may not have opened its copy first.
    assert!((1..=2).contains(&frames.opened()), "{}", frames.opened());
}

#[tokio::test]
async fn a_reopened_body_refused_unprocessed_over_http2_is_sent_again_whole() {
    refused_then_sent_whole(MockResponse::refuse_stream()).await;
}

#[tokio::test]
async fn a_reopened_body_turned_away_by_goaway_is_sent_again_whole() {
    refused_then_sent_whole(MockResponse::goaway_unprocessed()).await;
}

#[tokio::test]
async fn a_reopened_body_answered_503_is_sent_again_whole_with_its_length() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("stored"));
    let frames = Frames::new();
    let report = RetryReport::new();
    let response = guarded(stack(false).oneshot(put(&server, &frames, &report)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "stored");
    assert_eq!(frames.opened(), 2);
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|request| request.body == Frames::whole()));
    // The first opening told the length: the retry announced it.
    assert_eq!(seen[1].headers["content-length"], LEN.to_string());
}

#[tokio::test]
async fn a_factory_that_fails_to_reopen_ends_the_call_with_its_error_not_retried() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let frames = Frames {
        fails_from: 1,
        ..Frames::new()
    };
    let report = RetryReport::new();
    let err = guarded(stack(false).oneshot(put(&server, &frames, &report)))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody, "{err}");
    let failed = errors::find::<ReopenFailed>(&*err).expect("the typed error");
    let source = failed
        .source()
        .unwrap()
        .downcast_ref::<io::Error>()
        .unwrap();
    assert_eq!(source.kind(), io::ErrorKind::ConnectionRefused);
    let summary = report.summary().unwrap();
    assert_eq!((summary.get(), summary.stop()), (2, Stop::Failed));
    assert_eq!(frames.opened(), 2, "not opened a third time");
    assert_eq!(server.requests().len(), 1, "only the first arrived whole");
}

// ===== files and panics =====

/// A file of `text` under the system's temporary directory, removed when
/// dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, text: &[u8]) -> Self {
        let path = std::env::temp_dir().join(format!(
            "http-resilience-tests-{name}-{}",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The stack of [`stack`] for any body, running `before_attempt` with the
/// attempt's number (from 1) before the client sends it.
fn stack_of<B>(
    before_attempt: impl Fn(u32) + Clone + Send + 'static,
) -> impl Service<Request<B>, Response = http::Response<support::Body>, Error = BoxError>
where
    B: http_body::Body<Data = Bytes> + TryCloneBody + Send + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .build_http::<B>()
        .expect("valid transport");
    let policy = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 3),
    );
    let attempts = Arc::new(AtomicU32::new(0));
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
        .map_request(move |request: Request<B>| {
            before_attempt(attempts.fetch_add(1, Ordering::Relaxed) + 1);
            request
        })
        .service(client)
}

#[tokio::test]
async fn a_file_body_announces_its_length_on_every_attempt_the_first_included() {
    let whole = Frames::whole();
    let file = TempFile::new("announced", &whole);
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("stored"));
    let body = ReopenBody::file(&file.0).await.unwrap();
    let request = Request::put(server.uri("/objects/7")).body(body).unwrap();
    let response = guarded(stack_of(|_| {}).oneshot(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    for (n, request) in seen.iter().enumerate() {
        let length = request.headers.get("content-length");
        assert_eq!(
            length.map(|v| v.to_str().unwrap()),
            Some("1048576"),
            "attempt {}",
            n + 1
        );
        assert!(
            request.headers.get("transfer-encoding").is_none(),
            "not chunked"
        );
        assert!(request.body == whole, "whole, in order");
    }
}

#[tokio::test]
async fn a_file_whose_length_changed_between_attempts_ends_the_call_with_body_changed() {
    let file = TempFile::new("changed", b"version one");
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let path = file.0.clone();
    let rewrite = move |attempt: u32| {
        if attempt == 2 {
            std::fs::write(&path, b"version two, longer").unwrap();
        }
    };
    let report = RetryReport::new();
    let request = Request::put(server.uri("/objects/7"))
        .extension(report.clone())
        .body(ReopenBody::file(&file.0).await.unwrap())
        .unwrap();
    let err = guarded(stack_of(rewrite).oneshot(request))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody, "{err}");
    let changed = errors::find::<BodyChanged>(&*err).expect("the typed error");
    assert_eq!((changed.expected(), changed.got()), (11, 19));
    let summary = report.summary().unwrap();
    assert_eq!((summary.get(), summary.stop()), (2, Stop::Failed));
    assert_eq!(server.requests().len(), 1, "only the first arrived whole");
}

/// Opens [`Frames`]' body, and panics from its second opening on.
#[derive(Clone)]
struct PanicsOnRetry(Frames);

impl Reopen for PanicsOnRetry {
    type Body = ScriptedBody;
    type Error = io::Error;
    type Future = Ready<Result<ScriptedBody, io::Error>>;

    fn reopen(&self) -> Self::Future {
        assert!(self.0.opened() < 1, "the object store is gone");
        self.0.reopen()
    }
}

#[tokio::test]
async fn a_factory_that_panics_ends_the_call_as_a_request_body_failure_with_its_message() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let factory = PanicsOnRetry(Frames::new());
    let report = RetryReport::new();
    let request = Request::put(server.uri("/objects/7"))
        .extension(report.clone())
        .body(ReopenBody::new(factory.clone()))
        .unwrap();
    let err = guarded(stack_of(|_| {}).oneshot(request))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody, "{err}");
    assert!(errors::find::<ReopenFailed>(&*err).is_some(), "{err:?}");
    let panicked = errors::find::<FactoryPanicked>(&*err).expect("the panic, typed");
    assert_eq!(panicked.message(), Some("the object store is gone"));
    let chain: Vec<String> = errors::chain(&*err).map(ToString::to_string).collect();
    assert!(
        chain.iter().any(|text| text == "the object store is gone"),
        "{chain:?}"
    );
    let summary = report.summary().unwrap();
    assert_eq!((summary.get(), summary.stop()), (2, Stop::Failed));
    assert_eq!(server.requests().len(), 1, "only the first arrived");
}
