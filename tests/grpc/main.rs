//! gRPC retries through the public API, with a real tonic client and server
//! over loopback: tonic-health's generated client and service, and a tower
//! layer in front of the server that scripts what each call gets.

#[path = "../support/mod.rs"]
mod support;

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use http_resilience::{
    grpc::GrpcLayer,
    policy::{GrpcBackoff, GrpcDecoder},
    presets,
    propagate::TimeoutFormat,
    Attempts, ResiliencePolicy,
};
use prost::Message;
use std::{
    collections::VecDeque,
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};
use tokio::{net::TcpListener, time::Instant};
use tonic::{transport::Channel, Code};
use tonic_health::pb::{
    health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    HealthCheckResponse,
};
use tower::{Layer, Service};

const GUARD: Duration = support::GUARD;

/// What the server does with one call.
#[derive(Debug, Clone)]
enum Step {
    /// A trailers-only response with this `grpc-status` and, if given, this
    /// `grpc-retry-pushback-ms`.
    Status(u8, Option<&'static str>),
    /// An HTTP error status without `grpc-status`, as a proxy sends.
    Http(u16),
    /// Headers first, then trailers with this `grpc-status`: committed.
    Committed(u8),
    /// Never answers.
    Silent,
    /// Hands the call to the real service (or, on the upload path, counts
    /// the messages streamed).
    Pass,
}

/// What the server saw of one call.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    previous_attempts: Option<String>,
    timeout: Option<String>,
}

#[derive(Debug, Default)]
struct Script {
    steps: Mutex<VecDeque<Step>>,
    seen: Mutex<Vec<Seen>>,
}

impl Script {
    fn new(steps: impl IntoIterator<Item = Step>) -> Arc<Self> {
        Arc::new(Self {
            steps: Mutex::new(steps.into_iter().collect()),
            seen: Mutex::default(),
        })
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// The path of the client-streaming method the script itself serves: it
/// counts the `HealthCheckRequest`s streamed and answers with their services.
const UPLOAD: &str = "/test.Upload/Count";

#[derive(Clone)]
struct Scripted<S> {
    inner: S,
    script: Arc<Script>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<http::Request<tonic::body::Body>> for Scripted<S>
where
    S: Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Send
        + 'static,
    S::Future: Send,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let header = |name: &str| {
            request
                .headers()
                .get(name)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        self.script.seen.lock().unwrap().push(Seen {
            at: Instant::now(),
            previous_attempts: header("grpc-previous-rpc-attempts"),
            timeout: header("grpc-timeout"),
        });
        let step = self
            .script
            .steps
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Step::Pass);
        let head = || {
            http::Response::builder()
                .status(200)
                .header("content-type", "application/grpc")
        };
        match step {
            Step::Status(code, pushback) => {
                let mut response = head()
                    .header("grpc-status", code.to_string())
                    .header("grpc-message", "scripted");
                if let Some(pushback) = pushback {
                    response = response.header("grpc-retry-pushback-ms", pushback);
                }
                let response = response.body(tonic::body::Body::empty()).unwrap();
                Box::pin(async move { Ok(response) })
            }
            Step::Http(status) => {
                let response = http::Response::builder()
                    .status(status)
                    .body(tonic::body::Body::empty())
                    .unwrap();
                Box::pin(async move { Ok(response) })
            }
            Step::Committed(code) => {
                let reply = frame(&HealthCheckResponse {
                    status: ServingStatus::Serving as i32,
                });
                let response = head().body(with_trailers(reply, code)).unwrap();
                Box::pin(async move { Ok(response) })
            }
            Step::Silent => Box::pin(std::future::pending()),
            Step::Pass if request.uri().path() == UPLOAD => Box::pin(async move {
                let body = request.into_body().collect().await.unwrap().to_bytes();
                let services: Vec<String> = unframe(body)
                    .map(|message| HealthCheckRequest::decode(message).unwrap().service)
                    .collect();
                let reply = frame(&HealthCheckResponse {
                    status: ServingStatus::Serving as i32,
                });
                Ok(head()
                    .header("x-services", services.join(","))
                    .body(with_trailers(reply, 0))
                    .unwrap())
            }),
            Step::Pass => Box::pin(self.inner.call(request)),
        }
    }
}

/// One gRPC message: the flag, the length and the bytes.
fn frame(message: &impl Message) -> Bytes {
    let bytes = message.encode_to_vec();
    let mut framed = BytesMut::with_capacity(bytes.len() + 5);
    framed.put_u8(0);
    framed.put_u32(u32::try_from(bytes.len()).unwrap());
    framed.put_slice(&bytes);
    framed.freeze()
}

/// The messages of a gRPC body.
fn unframe(mut body: Bytes) -> impl Iterator<Item = Bytes> {
    std::iter::from_fn(move || {
        if body.len() < 5 {
            return None;
        }
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        let message = body.slice(5..5 + len);
        body = body.slice(5 + len..);
        Some(message)
    })
}

/// A body of `data`, then trailers with `grpc-status: code`.
fn with_trailers(data: Bytes, code: u8) -> tonic::body::Body {
    let mut trailers = http::HeaderMap::new();
    trailers.insert("grpc-status", code.to_string().parse().unwrap());
    let frames = vec![
        Ok::<_, Infallible>(http_body::Frame::data(data)),
        Ok(http_body::Frame::trailers(trailers)),
    ];
    tonic::body::Body::new(http_body_util::StreamBody::new(tokio_stream::iter(frames)))
}

/// Serves tonic-health's service behind the script on `listener`.
fn serve(listener: TcpListener, script: Arc<Script>) -> tokio::task::JoinHandle<()> {
    let (_reporter, health) = tonic_health::server::health_reporter();
    let scripted = tower::layer::layer_fn(move |inner| Scripted {
        inner,
        script: script.clone(),
    });
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .layer(scripted)
            .add_service(health)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    })
}

/// A server on a fresh loopback port, and a lazy channel to it.
async fn server(script: &Arc<Script>) -> Channel {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    serve(listener, script.clone());
    Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy()
}

/// gRPC's preset, with waits short enough for a test and a fixed seed.
fn quick() -> ResiliencePolicy<GrpcDecoder, GrpcBackoff> {
    presets::grpc().map_retry(|retry| {
        retry.map(
            |decoder| decoder,
            |_| {
                GrpcBackoff::new(5, Duration::from_millis(10), Duration::from_millis(40), 2.0)
                    .unwrap()
                    .with_seed(1)
            },
        )
    })
}

/// The messages "a", "b" and "c", streamed one `every` so long from a
/// channel: a body that can be read once only.
fn three_messages(every: Duration) -> tokio_stream::wrappers::ReceiverStream<HealthCheckRequest> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tokio::spawn(async move {
        for service in ["a", "b", "c"] {
            tokio::time::sleep(every).await;
            let message = HealthCheckRequest {
                service: service.into(),
            };
            if tx.send(message).await.is_err() {
                return;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx)
}

fn check() -> tonic::Request<HealthCheckRequest> {
    tonic::Request::new(HealthCheckRequest {
        service: String::new(),
    })
}

/// The attempts tonic's response records (the retry layer's extension).
fn attempts(extensions: &http::Extensions) -> u32 {
    extensions.get::<Attempts>().map_or(1, Attempts::get)
}

async fn guarded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .expect("the call ended before the guard")
}

#[tokio::test]
async fn unavailable_twice_then_ok_takes_three_attempts() {
    let script = Script::new([Step::Status(14, None), Step::Status(14, None)]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));

    let response = guarded(client.check(check())).await.unwrap();

    assert_eq!(attempts(response.extensions()), 3);
    assert_eq!(response.into_inner().status(), ServingStatus::Serving);
    let seen = script.seen();
    assert_eq!(seen.len(), 3);
    let previous: Vec<_> = seen
        .iter()
        .map(|s| s.previous_attempts.as_deref())
        .collect();
    assert_eq!(previous, [None, Some("1"), Some("2")]);
    assert!(seen.iter().all(|s| s.timeout.is_some()), "{seen:?}");
}

#[tokio::test]
async fn a_proxy_503_without_grpc_status_is_unavailable_and_retried() {
    let script = Script::new([Step::Http(503)]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));

    let response = guarded(client.check(check())).await.unwrap();

    assert_eq!(response.into_inner().status(), ServingStatus::Serving);
    assert_eq!(script.seen().len(), 2);
}

#[tokio::test]
async fn the_pushback_is_the_wait_before_the_retry() {
    // Backoff of 10 ms, pushback of 600 ms: the server's wait is kept.
    let script = Script::new([Step::Status(14, Some("600"))]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));
    guarded(client.check(check())).await.unwrap();
    let seen = script.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap >= Duration::from_millis(600), "{gap:?}");

    // Backoff of 10 s, pushback of 50 ms: the server's wait is kept too.
    let slow = quick().map_retry(|retry| {
        retry.map(
            |decoder| decoder,
            |_| GrpcBackoff::new(5, Duration::from_secs(10), Duration::from_secs(10), 2.0).unwrap(),
        )
    });
    let script = Script::new([Step::Status(14, Some("50"))]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(slow).layer(channel));
    guarded(client.check(check())).await.unwrap();
    let seen = script.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap < Duration::from_secs(5), "{gap:?}");
}

#[tokio::test]
async fn a_negative_pushback_is_not_retried() {
    for pushback in ["-1", "soon"] {
        let script = Script::new([Step::Status(14, Some(pushback))]);
        let channel = server(&script).await;
        let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));

        let status = guarded(client.check(check())).await.unwrap_err();

        assert_eq!(status.code(), Code::Unavailable, "{pushback}: {status:?}");
        assert_eq!(status.message(), "scripted");
        assert_eq!(script.seen().len(), 1, "{pushback}");
    }
}

#[tokio::test]
async fn a_code_that_is_not_retryable_is_not_retried() {
    let script = Script::new([Step::Status(7, None)]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(script.seen().len(), 1);

    // Unless the policy lists it.
    let listed = quick().map_retry(|retry| {
        retry.map(
            |_| {
                GrpcDecoder::new()
                    .with_codes([Code::Unavailable, Code::PermissionDenied])
                    .unwrap()
            },
            |retryer| retryer,
        )
    });
    let script = Script::new([Step::Status(7, None)]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(listed).layer(channel));
    guarded(client.check(check())).await.unwrap();
    assert_eq!(script.seen().len(), 2);
}

#[tokio::test]
async fn a_committed_response_is_not_retried() {
    let script = Script::new([Step::Committed(14)]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.seen().len(), 1);
}

#[tokio::test]
async fn the_deadline_is_sent_as_grpc_timeout_and_enforced() {
    let budget = Duration::from_millis(400);
    let script = Script::new([Step::Silent]);
    let channel = server(&script).await;
    let policy = quick()
        .with_deadline(budget)
        .and_then(|policy| policy.with_attempt_timeout(budget))
        .unwrap();
    let mut client = HealthClient::new(GrpcLayer::new(policy).layer(channel));

    let start = Instant::now();
    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(start.elapsed() >= budget, "{:?}", start.elapsed());
    let seen = script.seen();
    assert_eq!(seen.len(), 1);
    let sent = TimeoutFormat::Grpc
        .parse(&seen[0].timeout.as_deref().unwrap().parse().unwrap())
        .unwrap();
    assert!(sent > Duration::ZERO && sent <= budget, "{sent:?}");
}

#[tokio::test]
async fn a_timeout_set_on_the_tonic_request_is_enforced() {
    let timeout = Duration::from_millis(300);
    let script = Script::new([Step::Silent]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));

    let mut request = check();
    request.set_timeout(timeout);
    let start = Instant::now();
    let status = guarded(client.check(request)).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let elapsed = start.elapsed();
    assert!(
        elapsed >= timeout && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
    let seen = script.seen();
    let sent = TimeoutFormat::Grpc
        .parse(&seen[0].timeout.as_deref().unwrap().parse().unwrap())
        .unwrap();
    assert!(sent <= timeout, "{sent:?}");
}

#[tokio::test]
async fn a_copied_previous_attempts_header_is_not_sent_on_the_first_attempt() {
    let script = Script::new([Step::Status(14, None)]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(quick()).layer(channel));

    // As a gateway that forwards the metadata of the call it serves would.
    let mut request = check();
    request
        .metadata_mut()
        .insert("grpc-previous-rpc-attempts", "3".parse().unwrap());
    guarded(client.check(request)).await.unwrap();

    let previous: Vec<_> = script
        .seen()
        .into_iter()
        .map(|s| s.previous_attempts)
        .collect();
    assert_eq!(previous, [None, Some("1".to_owned())]);
}

#[tokio::test]
async fn a_streamed_request_is_retried_after_a_refused_connection() {
    let addr = http_resilience_mock::vacant_addr().unwrap();
    let script = Script::new([]);
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    // The preset as it is: its waits (about 100, 200, 400 ms) outlast the
    // server's absence.
    let mut grpc = tonic::client::Grpc::new(GrpcLayer::new(presets::grpc()).layer(channel));

    // The server comes up 200 ms after the first attempt was refused.
    let late = script.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        serve(TcpListener::bind(addr).await.unwrap(), late);
    });
    // The messages are streamed, one every 20 ms, from a channel: the body
    // can be read once only.
    let messages = three_messages(Duration::from_millis(20));

    let response = guarded(async {
        grpc.ready().await.unwrap();
        grpc.client_streaming(
            tonic::Request::new(messages),
            http::uri::PathAndQuery::from_static(UPLOAD),
            tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default(),
        )
        .await
    })
    .await
    .unwrap();

    assert!(attempts(response.extensions()) >= 2);
    assert_eq!(response.metadata().get("x-services").unwrap(), "a,b,c");
    assert_eq!(script.seen().len(), 1, "the server saw the call once");
}

/// Hedging a gRPC call with one layer: the body replayed, the deadline
/// inherited and sent, a hedge after 50 ms, the method marked safe to
/// repeat, all by `GrpcHedgeLayer`.
#[tokio::test]
async fn a_hedged_check_takes_the_copy_that_answers() {
    use http_resilience::{
        grpc::GrpcHedgeLayer,
        hedge::{HedgeDelay, HedgePolicy},
    };
    let script = Script::new([Step::Silent]);
    let channel = server(&script).await;
    let policy = HedgePolicy::new(
        GrpcDecoder::default(),
        HedgeDelay::fixed(Duration::from_millis(50)),
        2,
    )
    .unwrap();
    let layer = GrpcHedgeLayer::new(policy).with_deadline(Duration::from_secs(10));
    let mut client = HealthClient::new(layer.layer(channel));

    let start = Instant::now();
    let response = guarded(client.check(check())).await.unwrap();

    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(response.get_ref().status(), ServingStatus::Serving);
    let winner = response
        .extensions()
        .get::<Attempts>()
        .map(Attempts::winner);
    assert_eq!(winner, Some(2));
    // Every attempt after the first carries the count of those before it,
    // hedged ones included, as gRPC's retry design says; every copy carries
    // the time left.
    let seen = script.seen();
    let previous: Vec<_> = seen.iter().map(|s| s.previous_attempts.clone()).collect();
    assert_eq!(previous, [None, Some("1".to_owned())]);
    for copy in &seen {
        let value = copy.timeout.as_deref().expect("grpc-timeout on every copy");
        let left = TimeoutFormat::Grpc.parse(&value.parse().unwrap()).unwrap();
        assert!(
            left > Duration::ZERO && left <= Duration::from_secs(10),
            "{left:?}"
        );
    }
}

/// The one layer's deadline reaches tonic as `DEADLINE_EXCEEDED` when no
/// copy answers.
#[tokio::test]
async fn a_hedged_check_that_no_copy_answers_ends_with_deadline_exceeded() {
    use http_resilience::{
        grpc::GrpcHedgeLayer,
        hedge::{HedgeDelay, HedgePolicy},
    };
    let script = Script::new([Step::Silent, Step::Silent]);
    let channel = server(&script).await;
    let delay = HedgeDelay::fixed(Duration::from_millis(50));
    let policy = HedgePolicy::new(GrpcDecoder::default(), delay, 2).unwrap();
    let layer = GrpcHedgeLayer::new(policy).with_deadline(Duration::from_millis(400));
    let mut client = HealthClient::new(layer.layer(channel));

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(script.seen().len(), 2);
}

mod breaker;
mod endpoint;
mod fault;
mod metrics;
mod overload;
mod pushback;
mod rate_limit;
mod service_config;

/// A client-streaming call that the server ends with a trailers-only
/// `UNAVAILABLE` while the client is still streaming is retried (nothing was
/// committed), and the retry carries every message, those sent to the first
/// attempt and those streamed after.
#[tokio::test]
async fn a_stream_ended_early_by_unavailable_is_retried_whole() {
    let script = Script::new([Step::Status(14, None)]);
    let channel = server(&script).await;
    let mut grpc = tonic::client::Grpc::new(GrpcLayer::new(quick()).layer(channel));
    let messages = three_messages(Duration::from_millis(100));
    let response = guarded(async {
        grpc.ready().await.unwrap();
        grpc.client_streaming(
            tonic::Request::new(messages),
            http::uri::PathAndQuery::from_static(UPLOAD),
            tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default(),
        )
        .await
    })
    .await
    .unwrap();
    assert_eq!(attempts(response.extensions()), 2);
    assert_eq!(response.metadata().get("x-services").unwrap(), "a,b,c");
}
