//! Tower layers for resilient outbound HTTP: one deadline over the whole call,
//! Feign-style retries, and a fresh timeout for every attempt.
//!
//! # Map
//!
//! Three separate layers make an outbound call resilient. Each is a plain
//! [`tower_layer::Layer`], usable on its own around any
//! `Service<http::Request<B>, Response = http::Response<T>>`; the layers are
//! also at the crate root.
//!
//! | layer | service | response future | its errors | what it does |
//! |---|---|---|---|---|
//! | [`DeadlineLayer`] | [`deadline::Deadline`] | [`deadline::future::ResponseFuture`] | [`deadline::error::DeadlineExceeded`] | one budget for the whole call, waits and the response body ([`deadline::body::DeadlineBody`]) included |
//! | [`StatusRetryLayer`] | [`retry::StatusRetry`] | [`retry::future::ResponseFuture`] | the inner service's, unchanged | a [`policy::Decoder`] says whether an outcome is worth another attempt, a [`policy::Retryer`] whether one is made and when (OpenFeign's `ErrorDecoder` and `Retryer`) |
//! | [`AttemptTimeoutLayer`] | [`attempt_timeout::AttemptTimeout`] | [`attempt_timeout::future::ResponseFuture`] | [`attempt_timeout::error::AttemptTimedOut`] | a fresh limit for every attempt |
//!
//! Around them:
//!
//! - [`policy`]: what every layer that sends again judges and schedules by
//!   (decoders, retryers, the budget, events), and its report on a response
//!   or for an error ([`Attempts`], [`RetryReport`], [`Stop`]);
//! - [`body`]: the request bodies that can be sent again
//!   ([`body::ReplayBody`], and [`body::ReopenBody`] for large ones);
//! - [`extensions`]: the values the layers pass each other in a request
//!   ([`RequestDeadline`], [`extensions::FinalAttempt`]);
//! - [`guard`]: the one interface of whatever may admit, delay or turn away
//!   an attempt, and [`key`]: the upstream key every guard keeps its state
//!   under;
//! - [`breaker`] (feature `breaker`): a circuit per authority that fails
//!   calls fast while an upstream is down ([`breaker::BreakerPolicy`] in a [`GuardLayer`](guard::GuardLayer)),
//!   placed between the retry and the attempt timeout;
//! - [`hedge`] (feature `hedge`): another copy of a slow request, the first good answer
//!   winning ([`hedge::HedgeLayer`]);
//! - [`fault`] (feature `fault`): fault injection as a guard, latency,
//!   statuses, transport failures and bodies cut short, at a rate or on a
//!   schedule, seeded, switched at run time ([`fault::FaultPolicy`]);
//! - [`fallback`] (feature `fallback`): a response built from the failure
//!   for the failures one names and the requests that opt in
//!   ([`fallback::FallbackLayer`]), outside the whole stack;
//! - [`overload`] (feature `overload`): overload control per authority, a bulkhead, an adaptive
//!   concurrency limit and client-side throttling
//!   ([`overload::OverloadPolicy`]), placed between the retry and the
//!   breaker;
//! - [`read_timeout`] (feature `read-timeout`): the longest wait between
//!   reads, at the transport;
//! - [`resume`] (feature `resume`): a response body that fails part-way continued with a
//!   ranged request (`Range`, `If-Range`), under the call's deadline
//!   ([`resume::ResumeLayer`]), placed inside the deadline;
//! - [`transport`] (feature `transport`): a hyper-util client with connect and
//!   read timeouts and no hidden retry;
//! - [`reqwest_client`] (feature `reqwest`): a `reqwest::Client` under the
//!   layers, with reqwest's own request builder and response
//!   ([`reqwest_client::ResilientClient`]);
//! - [`grpc`] (feature `tonic`): gRPC retries and hedging for tonic, as
//!   gRPC's retry design says, and gRPC's service config
//!   ([`grpc::ServiceConfigLayer`]);
//! - [`telemetry`]: the spans of every call and attempt, and the events a
//!   listener hears; [`otel`] (feature `otel`): metrics in
//!   OpenTelemetry's terms;
//! - [`propagate`]: the budget's wire formats, and (feature `propagate`)
//!   sending each attempt's remaining budget upstream and taking a deadline
//!   over from an inbound request ([`RequestDeadline`]);
//! - [`ResiliencePolicy`] and [`presets`]: the three layers' semantics from one
//!   validated policy, as one service ([`Resilience`]: one future and one
//!   timer per call); [`config`] (feature `serde`): per-client policies from
//!   a file;
//! - [`FailureKind::of`] tells every failure apart by walking its `source()`
//!   chain, and [`errors`] has the chain helpers;
//! - [`Wrapper`]: the inner service of every service above, by reference
//!   or taken back.
//!
//! # Example
//!
//! Reactor WebClient's policy: attempts of at most 3 s, 8 s in
//! all, only 503 retried, at most twice, 10 ms apart.
//!
//! ```no_run
//! use bytes::Bytes;
//! use http_body_util::{BodyExt, Full};
//! use http_resilience::{
//!     attempt_timeout::AttemptTimeoutLayer,
//!     deadline::DeadlineLayer,
//!     policy::{FixedDelay, StatusDecoder},
//!     retry::{RetryPolicy, StatusRetryLayer},
//!     transport, Attempts, BoxError, FailureKind,
//! };
//! use std::time::Duration;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), BoxError> {
//! let client = transport::Builder::new()
//!     .connect_timeout(Duration::from_millis(1000))
//!     .read_timeout(Duration::from_secs(5))
//!     .build_http::<Full<Bytes>>()?;
//!
//! let policy = RetryPolicy::new(
//!     StatusDecoder::new([503])?,
//!     FixedDelay::new(Duration::from_millis(10), 2),
//! );
//! let svc = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(8)))
//!     .layer(StatusRetryLayer::new(policy))
//!     .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
//!     .service(client);
//!
//! let request = http::Request::get("http://127.0.0.1:8080/value").body(Full::default())?;
//! match svc.oneshot(request).await {
//!     Ok(response) => {
//!         // A 200, or the last 503 itself once the retries are used up.
//!         let attempts = Attempts::of(&response);
//!         let status = response.status();
//!         let body = response.into_body().collect().await?.to_bytes();
//!         println!("{status} after {attempts:?} attempts: {body:?}");
//!     }
//!     Err(err) => println!("failed: {} ({err})", FailureKind::of(&*err)),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Order
//!
//! The order of the layers is the semantics. The canonical stack, outermost
//! first:
//!
//! ```text
//! DeadlineLayer  ->  StatusRetryLayer  ->  AttemptTimeoutLayer  ->  client
//! ```
//!
//! - the deadline is **outside** the retry, so it covers every attempt and every
//!   wait between them, and its instant is recorded in the request for the
//!   layers inside ([`RequestDeadline`]);
//! - the attempt timeout is **inside** the retry, so each attempt gets a fresh
//!   limit and a timed-out attempt is an outcome the policy can judge.
//!
//! Stacked in another order, the same parts mean something else:
//!
//! - an attempt timeout **outside** the retry is one timer for all attempts
//!   together: it never restarts, and it cuts the retries and their waits short
//!   like a deadline (one that does not cover the body);
//! - a deadline **inside** the retry restarts with every attempt: it becomes a
//!   per-attempt limit, and nothing bounds the call as a whole.
//!
//! Both are tested in the repository (`tests/stack/order.rs`).
//!
//! # Troubleshooting
//!
//! Three mistakes a newcomer makes, and what the compiler says:
//!
//! - **A streaming request body given to the retry layer as it is** (hyper's
//!   `Incoming`, axum's `Body`): "the request body `Body` cannot be sent again
//!   by the retry layer", with the fix in its notes: wrap it in
//!   [`ReplayBody::new(body)`](body::ReplayBody) to replay it, or in
//!   [`SendOnce::new(body)`](body::SendOnce) to send it once. Called through
//!   `ServiceExt::oneshot`, rustc only says that "the method `oneshot` exists
//!   ... but its trait bounds were not satisfied"; `tower::Service::call(&mut
//!   svc, request)` makes it name the bound.
//! - **A decoder for other types than the stack's**: "`D` cannot judge an
//!   outcome of type `Result<http::Response<B>, E>`", naming the types the
//!   stack has (behind [`AttemptTimeoutLayer`] the error is [`BoxError`]); a
//!   closure written for other types gives "type mismatch in closure
//!   arguments", with the expected signature in a note. Name the types the
//!   note gives, or use [`policy::OutcomeDecoder`], which fits every stack.
//! - **A [`body::ReplayBody`] over a body that is not `Unpin`**: "the trait
//!   `Unpin` is not implemented", where the body is polled. Wrap the body in
//!   `Box::pin` first.
//!
//! # Feature flags
//!
//! The default build is the core: the three layers, the combined service,
//! the guard interface ([`guard`]) and the upstream key ([`key`]), the retry
//! policies and the presets that need nothing more, the request bodies, the
//! extensions, the budget's wire formats and [`FailureKind`]. It needs only
//! `http`, `http-body`, `http-body-util`, `bytes`, `httpdate` (for
//! `Retry-After` dates), `tracing`, `pin-project-lite`, `tower-layer`,
//! `tower-service` and tokio's timer and task budget (features `time` and
//! `rt`). Each capability that not every user needs is a feature, as in
//! tower; none but `transport`, `fs`, `serde`, `toml`, `reqwest*`, `tonic`
//! and `otel` brings a dependency:
//!
//! | feature | what it brings | implies |
//! |---|---|---|
//! | `breaker` | [`breaker`]: a circuit per authority, [`presets::standard`] | |
//! | `overload` | [`overload`]: a bulkhead or an adaptive limit per authority, client-side throttling | |
//! | `hedge` | [`hedge`]: another copy of a slow request | |
//! | `fault` | [`fault`]: fault injection as a guard (latency, statuses, transport failures, bodies cut short), seeded, switched on and off at run time | |
//! | `fallback` | [`fallback`]: a fallback response for the failures one names, for the requests that opt in | |
//! | `resume` | [`resume`]: a response body that failed part-way continued with a ranged request | |
//! | `rate-limit` | [`rate_limit`]: a rate limit per authority (GCRA in one atomic word per key), its waits bounded by the deadline, paused and paced by the server's `Retry-After`, gRPC pushback and `RateLimit` / `X-RateLimit-*` fields | |
//! | `redis` | [`rate_limit::fleet`]: one quota shared by a fleet, kept in Redis by a Lua script and spent locally through leases (redis-rs 0.32, over tokio) | `rate-limit` |
//! | `propagate` | the layers of [`propagate`]: each attempt's budget sent upstream, a deadline taken over from an inbound request | |
//! | `read-timeout` | [`read_timeout`]: the longest wait between reads, as a layer | |
//! | `grpc` | gRPC's retry design as policy parts: [`policy::GrpcDecoder`], [`policy::GrpcBackoff`], [`presets::grpc`], [`breaker::BreakerPolicy::grpc`] (with `breaker`) | |
//! | `tonic` | [`grpc`]: [`grpc::GrpcLayer`], [`grpc::GrpcHedgeLayer`] and [`grpc::ServiceConfigLayer`] around a tonic `Channel`, gRPC's service config read with `serde_json` (`std` only); tonic 0.14.2 to 0.14.8 build on this crate's minimum Rust, 0.14.9 needs 1.88 | `grpc`, `propagate`, `hedge` |
//! | `transport` | [`transport::Builder`], a hyper-util client with connect and read timeouts and no hidden retry; lets [`FailureKind`] read hyper's errors | `read-timeout` |
//! | `fs` | [`body::ReopenBody::file`], a file sent again by every attempt, its length known before the first one (tokio's `fs` and `rt`) | |
//! | `serde` | [`config`], per-client policies in the manner of Spring Cloud OpenFeign's `feign.client.config.<name>`, durations written for people (`"250ms"`, `"1m 30s"`) | `breaker`, `overload`, `rate-limit`, `hedge`, `propagate`, `grpc` |
//! | `toml` | [`config::ClientsConfig::from_toml_str`] | `serde` |
//! | `reqwest` | [`reqwest_client::ResilientClient`] (reqwest's request builder in front of the layers) and [`reqwest_client::ReqwestService`]; lets [`FailureKind`] read reqwest's errors | |
//! | `reqwest-json`, `reqwest-query`, `reqwest-form` | the `json`, `query` and `form` methods of [`reqwest_client::ResilientRequestBuilder`], each turning on reqwest's feature of the same name (without them, [`map_reqwest`](reqwest_client::ResilientRequestBuilder::map_reqwest) reaches whatever reqwest features the application has) | `reqwest` |
//! | `otel` | [`otel::Metrics`]: the library's metrics (`http.client.request.duration` and the `http_resilience.*` namespace) through the `opentelemetry` API crate alone; the application brings the SDK | `breaker`, `overload` |
//! | `full` | every feature | |
//!
//! ```toml
//! [dependencies]
//! http-resilience = { version = "0.1", features = ["full"] }
//! ```
//!
//! # Minimum supported Rust version
//!
//! Rust 1.85, the minimum of hyper-util and tokio. Clippy's
//! `incompatible_msrv` lint keeps the code within it as far as the standard
//! library goes; the workspace README says what that does not check. Raising
//! it is not a breaking change, and is done only when a dependency requires it.

#![cfg_attr(docsrs, feature(doc_cfg))]
// NOTE: the shared vocabulary (the key map, the error registry, the guards'
// plumbing, the seeded random numbers) serves capabilities behind cargo
// features; a build without some of them leaves parts of it unused. The
// `full` build, which CI checks with every lint, has none unused.
#![cfg_attr(
    not(feature = "full"),
    allow(dead_code, unused_imports, unreachable_pub)
)]

pub mod attempt_timeout;
pub mod body;
#[cfg(feature = "breaker")]
pub mod breaker;
#[cfg(feature = "serde")]
pub mod config;
mod coop;
pub mod deadline;
pub mod errors;
pub mod extensions;
#[cfg(feature = "fallback")]
pub mod fallback;
#[cfg(feature = "fault")]
pub mod fault;
#[cfg(any(feature = "overload", feature = "transport"))]
mod flag;
#[cfg(feature = "tonic")]
pub mod grpc;
pub mod guard;
#[cfg(feature = "hedge")]
pub mod hedge;
pub mod key;
mod limits;
#[cfg(feature = "otel")]
pub mod otel;
#[cfg(feature = "overload")]
pub mod overload;
pub mod policy;
pub mod presets;
pub mod propagate;
#[cfg(feature = "rate-limit")]
pub mod rate_limit;
#[cfg(feature = "read-timeout")]
pub mod read_timeout;
#[cfg(feature = "reqwest")]
pub mod reqwest_client;
pub mod resilience;
#[cfg(feature = "resume")]
pub mod resume;
pub mod retry;
mod session;
mod setting;
pub mod telemetry;
mod timer;
#[cfg(feature = "transport")]
pub mod transport;
#[cfg(any(feature = "transport", feature = "reqwest"))]
mod userinfo;
mod wrapper;

pub use self::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    errors::FailureKind,
    extensions::RequestDeadline,
    policy::{Attempts, RetryReport, Stop},
    resilience::{Resilience, ResilienceLayer, ResiliencePolicy},
    retry::StatusRetryLayer,
    setting::InvalidSetting,
    wrapper::Wrapper,
};

/// The boxed error that the layers which create failures return, as in tower.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the unit tests of several modules share.
#[cfg(test)]
pub(crate) mod test_support {
    /// A runtime without a timer: creating any tokio sleep on it panics with
    /// "timers are disabled", which is how a test proves a path makes none.
    pub(crate) fn without_timers() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a current-thread runtime")
    }

    /// The wakes a [`counting_waker`] had.
    #[derive(Default)]
    pub(crate) struct WakeCount(std::sync::atomic::AtomicUsize);

    impl WakeCount {
        pub(crate) fn wakes(&self) -> usize {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    impl std::task::Wake for WakeCount {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A waker that counts its wakes, and its count.
    pub(crate) fn counting_waker() -> (std::sync::Arc<WakeCount>, std::task::Waker) {
        let count = std::sync::Arc::new(WakeCount::default());
        (std::sync::Arc::clone(&count), std::task::Waker::from(count))
    }

    /// A runtime whose clock is paused, for a property test's case (one
    /// runtime per case).
    pub(crate) fn paused() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime")
    }
}

#[cfg(test)]
mod tests {
    /// The TOML snippets in the docs name the current version.
    #[test]
    fn doc_snippets_name_the_current_version() {
        let version = env!("CARGO_PKG_VERSION");
        let minor = version.rsplit_once('.').map_or(version, |(head, _)| head);
        let snippet = format!("http-resilience = {{ version = \"{minor}\"");
        assert!(
            include_str!("lib.rs").contains(&snippet),
            "lib.rs should contain {snippet}"
        );
        assert!(
            include_str!("../../../README.md").contains(&snippet),
            "README.md should contain {snippet}"
        );
    }
}
