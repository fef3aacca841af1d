//! Credentials in a request's URI (`http://user:password@host/`) over a real
//! client and the mock server: the transport sends them as
//! `Authorization: Basic`, as reqwest and curl do, and hands the URI on
//! without them, so that no span or event of the library's layers or of
//! hyper-util's pool carries them.
//!
//! A subscriber of the test's own records every span's fields, every value
//! recorded later and every event's fields, as text. It is the default of
//! the test's thread only; the tests run on a current-thread runtime, so the
//! client's connection tasks and the upstream run on that thread too.

use crate::support;

use bytes::Bytes;
use http::{header::AUTHORIZATION, Request, StatusCode};
use http_body_util::Full;
use http_resilience::{
    breaker::BreakerPolicy,
    policy::{FixedDelay, TransientDecoder},
    reqwest_client::ReqwestService,
    retry::RetryPolicy,
    transport, Attempts, ResiliencePolicy,
};
use http_resilience_mock::{MockResponse, MockServer, RecordedRequest};
use std::{
    fmt,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};
use support::{guarded, text};
use tower::{Layer, ServiceExt};
use tracing::{
    field::{Field, Visit},
    span, Event, Subscriber,
};
use tracing_subscriber::{layer::Context, prelude::*, registry::LookupSpan};

/// The password as it is written in the URI, percent-encoded.
const WRITTEN: &str = "s3cr3t-p%40ss";
/// The password as the upstream must receive it.
const DECODED: &str = "s3cr3t-p@ss";
/// `base64("user:s3cr3t-p@ss")`.
const BASIC: &str = "Basic dXNlcjpzM2NyM3QtcEBzcw==";

/// Every span field, recorded value and event field, as `name=value` text.
#[derive(Clone, Default)]
struct Everything(Arc<Mutex<Vec<String>>>);

impl Everything {
    fn texts(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn keep(&self, texts: Vec<String>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(texts);
    }
}

/// Collects the fields of one span or event.
#[derive(Default)]
struct Texts(Vec<String>);

impl Visit for Texts {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push(format!("{}={value}", field.name()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.push(format!("{}={value} / {value:?}", field.name()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.push(format!("{}={value:?}", field.name()));
    }
}

impl<S> tracing_subscriber::Layer<S> for Everything
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, _: &span::Id, _: Context<'_, S>) {
        let mut texts = Texts::default();
        attrs.record(&mut texts);
        texts.0.push(format!("span={}", attrs.metadata().name()));
        self.keep(texts.0);
    }

    fn on_record(&self, _: &span::Id, values: &span::Record<'_>, _: Context<'_, S>) {
        let mut texts = Texts::default();
        values.record(&mut texts);
        self.keep(texts.0);
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut texts = Texts::default();
        event.record(&mut texts);
        self.keep(texts.0);
    }
}

/// Records everything on this thread until the guard is dropped.
fn record_everything() -> (Everything, tracing::subscriber::DefaultGuard) {
    let everything = Everything::default();
    let subscriber = tracing_subscriber::registry().with(everything.clone());
    let guard = tracing::subscriber::set_default(subscriber);
    // NOTE: a call site first reached by another test's thread before this
    // subscriber was installed may be cached as heard by no one; asking
    // again makes every call site ask this one too.
    tracing::callsite::rebuild_interest_cache();
    (everything, guard)
}

/// The combined service's policy: a breaker, and a 503 retried once.
fn policy() -> ResiliencePolicy<TransientDecoder, FixedDelay, BreakerPolicy<TransientDecoder>> {
    let retry = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 1),
    );
    ResiliencePolicy::new(Duration::from_secs(10), Duration::from_secs(5), retry)
        .expect("a valid policy")
        .with_guard(BreakerPolicy::new(TransientDecoder::new()))
}

/// `request` through the combined service over the library's transport,
/// to an upstream that answers 503, then 200.
async fn call(
    http2: bool,
    request: Request<Full<Bytes>>,
    server: &MockServer,
) -> http::Response<support::Body> {
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .http2_only(http2)
        .build_http::<Full<Bytes>>()
        .expect("a valid transport");
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("fine"));
    guarded(policy().layer().layer(client).oneshot(request))
        .await
        .expect("a response")
}

fn with_credentials(server: &MockServer) -> Request<Full<Bytes>> {
    let port = server.addr().port();
    let uri = format!("http://user:{WRITTEN}@127.0.0.1:{port}/x");
    Request::get(uri).body(Full::default()).unwrap()
}

/// Asserts that neither form of the password nor the header's token is in
/// anything recorded, and that the layers' spans and the pool's events were
/// recorded.
fn assert_nowhere(everything: &Everything) {
    let texts = everything.texts();
    assert!(
        texts.iter().any(|text| text.starts_with("url.full=")),
        "the layers' spans were recorded: {texts:#?}"
    );
    assert!(
        texts
            .iter()
            .any(|text| text.contains("for (\"http\", 127.0.0.1:")),
        "the pool's events name the upstream: {texts:#?}"
    );
    for secret in [WRITTEN, DECODED, "dXNlcjpzM2NyM3QtcEBzcw"] {
        let found: Vec<_> = texts.iter().filter(|text| text.contains(secret)).collect();
        assert!(found.is_empty(), "{secret} recorded in {found:#?}");
    }
}

/// Asserts that both attempts arrived with the credentials as a header and
/// a target without them.
fn assert_sent_as_basic(seen: &[RecordedRequest]) {
    assert_eq!(seen.len(), 2, "the 503 and the retry");
    for request in seen {
        assert_eq!(request.headers[AUTHORIZATION], BASIC);
        assert_eq!(request.uri.path(), "/x");
        let target = request.uri.to_string();
        assert!(!target.contains('@'), "{target}");
        if let Some(host) = request.headers.get(http::header::HOST) {
            assert!(!host.to_str().unwrap().contains('@'), "{host:?}");
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn credentials_in_the_uri_go_as_basic_auth_and_reach_no_span_or_event() {
    let server = guarded(MockServer::start()).await.unwrap();
    let (everything, _guard) = record_everything();
    let response = call(false, with_credentials(&server), &server).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "fine");
    assert_nowhere(&everything);
    assert_sent_as_basic(&server.requests());
}

#[tokio::test(flavor = "current_thread")]
async fn credentials_in_the_uri_stay_out_of_an_http2_authority() {
    let server = guarded(MockServer::start_h2()).await.unwrap();
    let (everything, _guard) = record_everything();
    let response = call(true, with_credentials(&server), &server).await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    assert_nowhere(&everything);
    let seen = server.requests();
    let authority = seen[0].uri.authority().expect("HTTP/2 sends the authority");
    assert_eq!(
        authority.as_str(),
        format!("127.0.0.1:{}", server.addr().port())
    );
    assert_sent_as_basic(&seen);
}

#[tokio::test(flavor = "current_thread")]
async fn an_authorization_header_already_there_is_kept() {
    let server = guarded(MockServer::start()).await.unwrap();
    let (everything, _guard) = record_everything();
    let mut request = with_credentials(&server);
    request
        .headers_mut()
        .insert(AUTHORIZATION, "Bearer t0ken".parse().unwrap());
    let response = call(false, request, &server).await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        let values: Vec<_> = request.headers.get_all(AUTHORIZATION).iter().collect();
        assert_eq!(values, ["Bearer t0ken"], "the caller's, alone");
        assert!(!request.uri.to_string().contains('@'));
    }
    assert_nowhere(&everything);
}

#[tokio::test(flavor = "current_thread")]
async fn a_user_without_a_password_is_sent_with_an_empty_one() {
    let server = guarded(MockServer::start()).await.unwrap();
    let port = server.addr().port();
    let request = Request::get(format!("http://us%20er@127.0.0.1:{port}/x"))
        .body(Full::default())
        .unwrap();
    let response = call(false, request, &server).await;
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    // `base64("us er:")`.
    assert_eq!(
        server.requests()[0].headers[AUTHORIZATION],
        "Basic dXMgZXI6"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn credentials_in_the_uri_go_as_basic_auth_through_reqwest_too() {
    let server = guarded(MockServer::start()).await.unwrap();
    let (everything, _guard) = record_everything();
    let reqwest = reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .build()
        .expect("a client");
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("fine"));
    let stack = policy().layer().layer(ReqwestService::new(reqwest));
    let response = guarded(stack.oneshot(with_credentials(&server)))
        .await
        .expect("a response");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    drop(response);
    assert_nowhere(&everything);
    assert_sent_as_basic(&server.requests());
}
