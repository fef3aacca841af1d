//! Resumable response bodies over real sockets, through the public API: the
//! mock server's byte ranges and bodies cut part-way (`mock.rs`), and nginx
//! serving a static file through a proxy that cuts the first connection
//! (`nginx.rs`).
//!
//! Every test runs on the real clock with limits far apart (a cut at once
//! against a deadline of seconds), and awaits under the shared guard.

#[path = "../support/mod.rs"]
mod support;

mod mock;
mod nginx;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use http_resilience::{
    attempt_timeout::{AttemptTimeout, AttemptTimeoutLayer},
    deadline::{body::DeadlineBody, DeadlineLayer},
    policy::{FixedDelay, StatusDecoder},
    read_timeout::body::ReadTimeoutBody,
    resume::{body::ResumeBody, ResumeLayer, ResumePolicy},
    retry::{RetryPolicy, StatusRetry, StatusRetryLayer},
    transport, BoxError,
};
use hyper::body::Incoming;
use std::time::Duration;
use tower::{Service, ServiceBuilder};

/// Limits of the stack, far apart from the faults under test.
#[derive(Debug, Clone, Copy)]
struct Limits {
    total: Duration,
    read: Duration,
    policy: ResumePolicy,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            total: Duration::from_secs(10),
            read: Duration::from_secs(5),
            policy: ResumePolicy::new(3),
        }
    }
}

/// A hyper-util client with a connect and a read timeout.
fn client(read: Duration) -> transport::HttpClient<Full<Bytes>> {
    transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .read_timeout(read)
        .build_http::<Full<Bytes>>()
        .expect("valid transport")
}

/// The retry policy of the stacks: 503 only, twice, 10 ms apart.
fn retry() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 2),
    )
}

/// What the documented order puts below the resume layer.
type BelowResume =
    StatusRetry<AttemptTimeout<transport::HttpClient<Full<Bytes>>>, StatusDecoder, FixedDelay>;

/// The body the caller reads from the documented order.
type StackBody = DeadlineBody<ResumeBody<BelowResume, Full<Bytes>, ReadTimeoutBody<Incoming>>>;

/// The documented order: `DeadlineLayer -> ResumeLayer -> StatusRetryLayer
/// -> AttemptTimeoutLayer -> client`.
fn stack(
    limits: Limits,
) -> impl Service<Request<Full<Bytes>>, Response = Response<StackBody>, Error = BoxError> + Clone {
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(limits.total))
        .layer(ResumeLayer::new(limits.policy))
        .layer(StatusRetryLayer::new(retry()))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service(client(limits.read))
}

/// The other order: the resume inside the retry, `DeadlineLayer ->
/// StatusRetryLayer -> ResumeLayer -> AttemptTimeoutLayer -> client`.
fn resume_inside_retry(
    limits: Limits,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = Response<impl Body<Data = Bytes, Error = BoxError> + Send>,
    Error = BoxError,
> + Clone {
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(limits.total))
        .layer(StatusRetryLayer::new(retry()))
        .layer(ResumeLayer::new(limits.policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service(client(limits.read))
}

/// `len` bytes of a pattern that no shifted copy of itself matches (so a
/// part spliced at the wrong offset cannot pass for the right one).
fn pattern(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_u32;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state.to_le_bytes()[0]
        })
        .collect()
}

/// The whole body, or the error that ended it with the bytes read before.
async fn read_to_end<B>(body: B) -> (Vec<u8>, Option<BoxError>)
where
    B: Body<Data = Bytes, Error = BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut all = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => all.extend_from_slice(&frame.into_data().unwrap_or_default()),
            Err(err) => return (all, Some(err)),
        }
    }
    (all, None)
}

/// Asserts that `got` is `expected`, byte for byte, without printing either.
#[track_caller]
fn assert_same_bytes(got: &[u8], expected: &[u8]) {
    let first_difference = got.iter().zip(expected).position(|(a, b)| a != b);
    assert!(
        got.len() == expected.len() && first_difference.is_none(),
        "{} bytes where {} were expected; first difference at {first_difference:?}",
        got.len(),
        expected.len(),
    );
}
