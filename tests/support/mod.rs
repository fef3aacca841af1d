//! Shared parts of the cross-crate tests: Reactor WebClient's stack over a real client.
#![allow(dead_code, unreachable_pub)]

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::{body::DeadlineBody, DeadlineLayer},
    policy::{FixedDelay, StatusDecoder},
    read_timeout::body::ReadTimeoutBody,
    retry::{RetryPolicy, StatusRetryLayer},
    transport, BoxError,
};
use hyper::body::Incoming;
use std::{future::Future, time::Duration};
use tower::{Service, ServiceBuilder};

/// The guard on every await that could hang: far above every limit under test.
pub const GUARD: Duration = Duration::from_secs(20);

/// The limits of Reactor WebClient's policy.
#[derive(Debug, Clone, Copy)]
pub struct Reactor {
    pub attempt: Duration,
    pub total: Duration,
    pub delay: Duration,
    pub read: Duration,
    pub connect: Duration,
}

impl Default for Reactor {
    fn default() -> Self {
        Self {
            attempt: Duration::from_secs(3),
            total: Duration::from_secs(8),
            delay: Duration::from_millis(10),
            read: Duration::from_secs(5),
            connect: Duration::from_millis(1000),
        }
    }
}

pub type Body = DeadlineBody<ReadTimeoutBody<Incoming>>;

/// Reactor WebClient's stack over a real hyper-util client: deadline, then retry of 503
/// only (two retries, fixed delay), then the attempt timeout.
pub fn reactor_stack(
    limits: Reactor,
) -> impl Service<Request<Full<Bytes>>, Response = Response<Body>, Error = BoxError, Future: Send>
       + Clone
       + Send {
    let client = transport::Builder::new()
        .connect_timeout(limits.connect)
        .read_timeout(limits.read)
        .build_http::<Full<Bytes>>()
        .expect("valid transport");
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(limits.delay, 2),
    );
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(limits.total))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(limits.attempt))
        .service(client)
}

/// A GET of `uri` with an empty body.
pub fn get(uri: http::Uri) -> Request<Full<Bytes>> {
    Request::get(uri).body(Full::default()).unwrap()
}

/// Awaits `future` under [`GUARD`], failing the test if it hangs.
pub async fn guarded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .expect("the call hung past the test guard")
}

/// The whole body as text.
pub async fn text<B>(body: B) -> Result<String, BoxError>
where
    B: http_body::Body,
    B::Error: Into<BoxError>,
{
    let bytes = body.collect().await.map_err(Into::into)?.to_bytes();
    Ok(String::from_utf8(bytes.to_vec())?)
}

/// Every panic message seen since [`record_panics`] was first called, on any
/// thread (a panic inside a spawned task is caught by tokio, and shows here).
static PANICS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Starts recording panics for [`panics`], keeping the default report too.
pub fn record_panics() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // NOTE: `try_lock`, so that a panic while the list is held cannot
            // wait for itself.
            if let Ok(mut panics) = PANICS.try_lock() {
                panics.push(info.to_string());
            }
            previous(info);
        }));
    });
}

/// The panics recorded so far.
pub fn panics() -> Vec<String> {
    PANICS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// Twenty-nine years: less than the thirty-year horizon that stands for
/// "never", more than any real call.
pub const ALMOST_NEVER: Duration = Duration::from_secs(86_400 * 365 * 29);

/// A response with `status` and an empty body, from a scripted upstream.
pub fn empty(status: u16) -> Response<String> {
    Response::builder()
        .status(status)
        .body(String::new())
        .unwrap()
}

/// Runs `future` to its end on a fresh single-threaded runtime whose clock is
/// paused, as a property test's case needs (one runtime per case).
pub fn on_paused_clock<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime")
        .block_on(future)
}

/// The value of `field` in `value`'s `Debug` output, the one public view of
/// a built policy's settings: the text after the first ` field: ` (or
/// `{ field: `), up to the `,` or closing bracket that ends it, so that
/// `shown(&retry, "retries")` reads `2` out of
/// `RetryPolicy { .., retryer: FixedDelay { delay: 10ms, retries: 2, .. }, .. }`.
///
/// # Panics
///
/// When the output shows no such field.
pub fn shown(value: &impl std::fmt::Debug, field: &str) -> String {
    let text = format!("{value:?}");
    let key = format!(" {field}: ");
    let start = text
        .find(&key)
        .unwrap_or_else(|| panic!("no `{field}` in {text}"))
        + key.len();
    let mut depth = 0_i32;
    let end = text[start..]
        .char_indices()
        .find(|&(_, c)| match c {
            '(' | '[' | '{' => {
                depth += 1;
                false
            }
            ')' | ']' | '}' if depth > 0 => {
                depth -= 1;
                false
            }
            ')' | ']' | '}' | ',' => depth == 0,
            _ => false,
        })
        .map_or(text.len(), |(at, _)| start + at);
    text[start..end].to_owned()
}
