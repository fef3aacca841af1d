//! gRPC retries, hedging and service configs for tonic, as gRPC's retry
//! design (proposal A6) says (feature `grpc`).
//!
//! tonic makes no retries of its own, and tower's `Retry` cannot wrap a tonic
//! `Channel`: the request body a generated client sends is a stream, not
//! `Clone`. [`GrpcLayer`] stacks the layers around a `Channel` so that a
//! generated client takes the stack as it is:
//!
//! ```text
//! GrpcLayer: replay the body -> InheritDeadline (grpc-timeout)
//!            -> Resilience (deadline, retries, attempt limit; grpc-timeout on every attempt) -> Channel
//! ```
//!
//! - the request body, whatever its type, is wrapped in a
//!   [`ReplayBody`], so a retry sends it again, streamed or not (A6's
//!   buffer: past the cap, the call is *committed* and not retried);
//! - a timeout the caller set with tonic's `Request::set_timeout` (sent as
//!   `grpc-timeout`) becomes the call's deadline when it is the earlier one,
//!   and is **enforced** here, not only sent;
//! - every attempt sends the time left as `grpc-timeout`, so the server can
//!   give up when the caller will no longer wait;
//! - the policy judges each attempt: with [`presets::grpc`], as A6 says
//!   ([`GrpcDecoder`], [`GrpcBackoff`], retry throttling and
//!   `grpc-previous-rpc-attempts`);
//! - a deadline overrun reaches the caller as a `tonic::Status` with code
//!   `DEADLINE_EXCEEDED`, the code gRPC defines for it, its message the
//!   layer's and its source the layer's error. (Left alone, tonic would report
//!   an error it does not know as `UNKNOWN`.) Other failures are handed to
//!   tonic as they are, which reads its own transport errors (a refused
//!   connection is `UNAVAILABLE`).
//!
//! Three layers make those stacks, each one call away:
//!
//! | layer | from | what every call of the client gets |
//! |---|---|---|
//! | [`GrpcLayer`] | a [`ResiliencePolicy`] ([`presets::grpc`]) | retries, one after another |
//! | [`GrpcHedgeLayer`] | a [`HedgePolicy`](crate::hedge::HedgePolicy) | hedged copies, the first answer winning |
//! | [`ServiceConfigLayer`] | gRPC's service config (JSON) | per method: retries, hedging or neither, and a timeout |
//!
//! # The channel's endpoint
//!
//! A tonic client made with `new(channel)`, the usual form, sends every call
//! with its path alone (`/grpc.health.v1.Health/Check`): the `Channel` puts
//! its endpoint's scheme and authority on the request below every layer, and
//! does not tell what they are. The circuit breaker and overload control key
//! their state by the request's authority, and the spans report it as
//! `server.address`, so, left alone, every such call has the same key
//! whatever channel it goes to, shown as `(no authority)`: two channels to
//! two servers under one policy trip and throttle each other, and the errors
//! name no upstream.
//!
//! Each layer is therefore given its channel's endpoint,
//! `with_authority(endpoint.uri())` ([`GrpcLayer::with_authority`],
//! [`GrpcHedgeLayer::with_authority`],
//! [`ServiceConfigLayer::with_authority`]). A call that names no authority
//! is sent, from where it enters the layer, as a call to that scheme and
//! authority, so that everything below sees its upstream; a call whose URI
//! names one (a client made with `with_origin(channel, origin)`) keeps its
//! own. The channel sets both again as it sends, so the server sees the same
//! request. Without an endpoint, a policy of its own for each channel, or
//! circuits keyed with
//! [`BreakerPolicy::with_key`](crate::key::PerKey::with_key),
//! keeps the servers apart.
//!
//! ```no_run
//! use http_resilience::{breaker::BreakerPolicy, grpc::GrpcLayer, presets};
//! use tonic::transport::Channel;
//! use tonic_health::pb::health_client::HealthClient;
//! use tower::Layer;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One policy, one breaker, for every server: a circuit each.
//! let policy = presets::grpc().with_guard(BreakerPolicy::grpc());
//! let mut clients = Vec::new();
//! for uri in ["http://10.0.0.1:50051", "http://10.0.0.2:50051"] {
//!     let endpoint = Channel::from_shared(uri)?;
//!     let layer = GrpcLayer::new(policy.clone()).with_authority(endpoint.uri())?;
//!     clients.push(HealthClient::new(layer.layer(endpoint.connect_lazy())));
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Service config
//!
//! The JSON document grpc-go and grpc-java take for their per-method
//! policies ([`ServiceConfig`]) gives the same per-method behaviour here:
//! `methodConfig` entries with `name`, `retryPolicy`, `hedgingPolicy` and
//! `timeout`, and `retryThrottling`, checked as A6 says and refused with the
//! path of the field at fault ([`InvalidServiceConfig`]). Each entry becomes
//! one of the stacks above, built once when the layer is; a call's path
//! (`/pkg.Svc/Method`) picks the most specific entry. See the
//! [`service_config`] module for the rules.
//!
//! With the `grpc` feature, tonic's `transport` feature and a generated
//! client (tonic-health's here):
//!
//! ```no_run
//! use http_resilience::grpc::ServiceConfigLayer;
//! use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
//! use tower::Layer;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The retry policy of grpc.io's retry guide, for the health service.
//! let layer = ServiceConfigLayer::from_json(
//!     r#"{
//!       "methodConfig": [{
//!         "name": [{"service": "grpc.health.v1.Health"}],
//!         "timeout": "5s",
//!         "retryPolicy": {
//!           "maxAttempts": 4,
//!           "initialBackoff": "0.1s",
//!           "maxBackoff": "1s",
//!           "backoffMultiplier": 2,
//!           "retryableStatusCodes": ["UNAVAILABLE"]
//!         }
//!       }],
//!       "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//!     }"#,
//! )?;
//! let endpoint = tonic::transport::Channel::from_static("http://127.0.0.1:50051");
//! let layer = layer.with_authority(endpoint.uri())?;
//! let mut client = HealthClient::new(layer.layer(endpoint.connect_lazy()));
//! let reply = client.check(HealthCheckRequest { service: String::new() }).await?;
//! println!("{:?}", reply.into_inner().status());
//! # Ok(())
//! # }
//! ```
//!
//! # Hedging
//!
//! [`GrpcHedgeLayer::new`] takes a hedging policy and needs nothing else
//! around the channel: the body is kept for the copies, every copy after the
//! first carries `grpc-previous-rpc-attempts`, every copy carries the time
//! left as `grpc-timeout`, and a deadline overrun is `DEADLINE_EXCEEDED`.
//! The hedging is [`HedgeLayer`](crate::hedge::HedgeLayer)'s. Every call is
//! marked safe to repeat, unless its caller marked it
//! [`Idempotency::NotIdempotent`](crate::policy::Idempotency): a hedging
//! layer on a client, like a `hedgingPolicy` in a service config, is the
//! service owner's word that its methods may be sent twice.
//!
//! # A circuit breaker
//!
//! Given to the policy, `GrpcLayer::new(presets::grpc().with_guard(BreakerPolicy::grpc()))`,
//! a [`BreakerPolicy`](crate::breaker::BreakerPolicy) turns calls away while
//! the server is down: `UNAVAILABLE` and `RESOURCE_EXHAUSTED` count as
//! failures, as do attempts that time out, and a call turned away reaches
//! the caller as a `tonic::Status` with code `UNAVAILABLE`, its source the
//! [`CircuitOpen`](crate::breaker::error::CircuitOpen) error.
//!
//! Overload control goes the same way,
//! `GrpcLayer::new(presets::grpc().with_guard(OverloadPolicy::adaptive(..)))`
//! ([`ResiliencePolicy::with_guard`]): `RESOURCE_EXHAUSTED` and attempts
//! that time out shrink an adaptive limit, and a call turned away reaches
//! the caller as `UNAVAILABLE`, its source the
//! [`Overloaded`](crate::overload::error::Overloaded) error.
//!
//! A rate limit goes the same way too,
//! `GrpcLayer::new(presets::grpc().with_guard(RateLimitPolicy::new(..)?))`
//! (see [`rate_limit`](crate::rate_limit); with
//! [`Signal::GrpcPushback`](crate::rate_limit::Signal::GrpcPushback), a
//! `RESOURCE_EXHAUSTED` with `grpc-retry-pushback-ms` pauses every call to
//! the server): a call turned away reaches the caller as
//! `RESOURCE_EXHAUSTED`, its source the
//! [`RateLimited`](crate::rate_limit::RateLimited) error.
//!
//! Circuits and overload control's slots are kept per upstream: give each
//! layer its channel's endpoint ([the channel's
//! endpoint](#the-channels-endpoint)).
//!
//! A response that ends the call with a status in its head (trailers-only)
//! reaches tonic as it came, so the caller sees the server's status, message
//! and metadata; [`Attempts`](crate::Attempts) is in the response's
//! extensions, which tonic keeps (`tonic::Response::extensions`).
//!
//! # Idempotency
//!
//! Every gRPC call is a POST, so the library's rules for requests that are not
//! idempotent would never retry one. gRPC answers this differently: the
//! service owner lists the codes worth retrying, and lists only those the
//! server sends when it did not process the call. A retry for such a code is
//! therefore made whatever the method; a failure the server cannot have acted
//! on (never sent, or an HTTP/2 stream refused unprocessed) is retried as
//! everywhere in this library; any other failure after sending is not. A
//! caller who knows better marks a request
//! [`Idempotency::NotIdempotent`](crate::policy::Idempotency), which wins.
//!
//! # Why not tower-http's gRPC classifier
//!
//! tower-http already classifies gRPC responses (`classify::GrpcCode`,
//! `GrpcErrorsAsFailures`), for logs and metrics. It does not fit a retry
//! decision: it counts a `grpc-status` that is not a number as a success
//! (gRPC clients read it as a failure), it ignores the HTTP status, so a
//! proxy's 503 without `grpc-status` (gRPC's `UNAVAILABLE`) would be a
//! success, and its set of codes is private, with no conversion from the
//! number on the wire. [`GrpcDecoder`] reads the head itself and takes codes
//! as numbers or as tonic's `Code`.
//!
//! [`ReplayBody`]: crate::body::ReplayBody
//! [`presets::grpc`]: crate::presets::grpc
//! [`ResiliencePolicy`]: crate::ResiliencePolicy
//! [`GrpcDecoder`]: crate::policy::GrpcDecoder
//! [`GrpcBackoff`]: crate::policy::GrpcBackoff
//!
//! # Example
//!
//! ```no_run
//! use http_resilience::{grpc::GrpcLayer, presets};
//! use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
//! use tower::Layer;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let endpoint = tonic::transport::Channel::from_static("http://127.0.0.1:50051");
//! let layer = GrpcLayer::new(presets::grpc()).with_authority(endpoint.uri())?;
//! let mut client = HealthClient::new(layer.layer(endpoint.connect_lazy()));
//! let reply = client.check(HealthCheckRequest { service: String::new() }).await?;
//! println!("{:?}", reply.into_inner().status());
//! # Ok(())
//! # }
//! ```

mod endpoint;
pub mod error;
mod hedge;
pub mod service_config;

pub use self::{
    error::InvalidEndpoint,
    hedge::{GrpcHedge, GrpcHedgeLayer},
    service_config::{InvalidServiceConfig, ServiceConfig, ServiceConfigLayer, ServiceConfigured},
};

use self::endpoint::Endpoint;
use crate::{
    attempt_timeout::error::AttemptTimedOut,
    body::{ReplayBody, DEFAULT_REPLAY_CAP},
    deadline::{body::DeadlineBody, error::DeadlineExceeded},
    errors::find,
    guard::Guard,
    propagate::{InheritDeadline, InheritDeadlineLayer, TimeoutFormat, GRPC_TIMEOUT},
    BoxError, Resilience, ResilienceLayer, ResiliencePolicy, Wrapper,
};
use bytes::Bytes;
use http_body_util::{combinators::MapErr, BodyExt};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};
use tower_layer::Layer;
use tower_service::Service;

/// The stack [`GrpcLayer`] puts around a tonic `Channel` (or any service of
/// `http::Request<tonic::body::Body>`); see the [module docs](self).
pub struct GrpcLayer<D, R, G = ()> {
    inherit: InheritDeadlineLayer,
    resilience: ResilienceLayer<D, R, G>,
    replay_cap: usize,
    endpoint: Option<Endpoint>,
}

/// What [`GrpcLayer`] makes of a service `S`: a service of
/// `http::Request<B>` for any request body, which a tonic generated client
/// takes as its transport.
pub struct Grpc<S, D, R, G: Guard = ()> {
    inner: Stack<S, D, R, G>,
    replay_cap: usize,
    endpoint: Option<Endpoint>,
}

/// The layers inside [`Grpc`], outermost first.
type Stack<S, D, R, G> = InheritDeadline<Resilience<TonicBody<S>, D, R, G>>;

/// The response body of [`Grpc`]: the inner service's, bounded by the
/// deadline, with a deadline overrun read as a `tonic::Status`.
pub(crate) type GrpcBody<T> = MapErr<DeadlineBody<T>, fn(BoxError) -> BoxError>;

// ===== impl GrpcLayer =====

impl<D, R, G> GrpcLayer<D, R, G> {
    /// The stack for `resilience`'s deadline, attempt limit, retry policy and
    /// guard, if it has one (usually
    /// [`presets::grpc`](crate::presets::grpc), and
    /// [`BreakerPolicy::grpc`](crate::breaker::BreakerPolicy::grpc) given with
    /// [`with_guard`](ResiliencePolicy::with_guard)), with request bodies
    /// kept for replay up to [`DEFAULT_REPLAY_CAP`] bytes.
    pub fn new(resilience: ResiliencePolicy<D, R, G>) -> Self {
        Self {
            inherit: InheritDeadlineLayer::grpc(),
            resilience: resilience
                .propagating(GRPC_TIMEOUT, TimeoutFormat::Grpc)
                .layer(),
            replay_cap: DEFAULT_REPLAY_CAP,
            endpoint: None,
        }
    }

    /// Keeps up to `cap` bytes of each request body for replay; a call whose
    /// body is longer is sent once (A6's per-call buffer limit).
    #[must_use]
    pub fn with_replay_cap(mut self, cap: usize) -> Self {
        self.replay_cap = cap;
        self
    }

    /// Sends the calls that name no upstream, those of a tonic client made
    /// with `new(channel)`, as calls to `endpoint`'s scheme and authority:
    /// the channel's endpoint (tonic's `Endpoint::uri`), which a `Channel`
    /// does not tell. The circuit breaker, overload control and the spans
    /// then key and name them by that upstream; a call whose URI names its
    /// own keeps it. See [the channel's endpoint](self#the-channels-endpoint).
    ///
    /// # Errors
    ///
    /// [`InvalidEndpoint`] when `endpoint` has no scheme or no authority.
    pub fn with_authority(mut self, endpoint: &http::Uri) -> Result<Self, InvalidEndpoint> {
        self.endpoint = Some(Endpoint::of(endpoint)?);
        Ok(self)
    }
}

impl<D, R, G: Clone> Clone for GrpcLayer<D, R, G> {
    fn clone(&self) -> Self {
        Self {
            inherit: self.inherit.clone(),
            resilience: self.resilience.clone(),
            replay_cap: self.replay_cap,
            endpoint: self.endpoint.clone(),
        }
    }
}

impl<D: fmt::Debug, R: fmt::Debug, G: fmt::Debug> fmt::Debug for GrpcLayer<D, R, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcLayer")
            .field("resilience", &self.resilience)
            .field("replay_cap", &self.replay_cap)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<S, D, R, G: Guard> Layer<S> for GrpcLayer<D, R, G> {
    type Service = Grpc<S, D, R, G>;

    fn layer(&self, inner: S) -> Self::Service {
        let call = self.resilience.layer(TonicBody { inner });
        Grpc {
            inner: self.inherit.layer(call),
            replay_cap: self.replay_cap,
            endpoint: self.endpoint.clone(),
        }
    }
}

// ===== impl Grpc =====

impl<S: Clone, D, R, G: Guard> Clone for Grpc<S, D, R, G> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            replay_cap: self.replay_cap,
            endpoint: self.endpoint.clone(),
        }
    }
}

impl<S: fmt::Debug, D: fmt::Debug, R: fmt::Debug, G: Guard + fmt::Debug> fmt::Debug
    for Grpc<S, D, R, G>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grpc")
            .field("inner", &self.inner)
            .field("replay_cap", &self.replay_cap)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// The inner service is the one the layer was given (the `Channel`), under
/// the layers of the stack.
impl<S, D, R, G: Guard> Wrapper for Grpc<S, D, R, G> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner.get_ref().get_ref().inner
    }

    fn into_inner(self) -> S {
        self.inner.into_inner().into_inner().inner
    }
}

impl<S, D, R, G, B, T> Service<http::Request<B>> for Grpc<S, D, R, G>
where
    G: Guard,
    Stack<S, D, R, G>: Service<
        http::Request<ReplayBody<B>>,
        Response = http::Response<DeadlineBody<T>>,
        Error = BoxError,
    >,
    B: http_body::Body,
    T: http_body::Body,
    T::Error: Into<BoxError>,
{
    type Response = http::Response<GrpcBody<T>>;
    type Error = BoxError;
    type Future =
        ResponseFuture<<Stack<S, D, R, G> as Service<http::Request<ReplayBody<B>>>>::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(into_status)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        endpoint::fill(self.endpoint.as_ref(), &mut request);
        let cap = self.replay_cap;
        let request = request.map(|body| ReplayBody::with_cap(body, cap));
        ResponseFuture {
            inner: self.inner.call(request),
        }
    }
}

pin_project! {
    /// The response future of [`Grpc`].
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
    }
}

impl<F> ResponseFuture<F> {
    /// The future of a stack whose outcome is to be read as tonic reads it.
    pub(crate) const fn new(inner: F) -> Self {
        Self { inner }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

impl<F, T> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<DeadlineBody<T>>, BoxError>>,
    T: http_body::Body,
    T::Error: Into<BoxError>,
{
    type Output = Result<http::Response<GrpcBody<T>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let outcome = ready!(self.project().inner.poll(cx));
        Poll::Ready(match outcome {
            Ok(response) => {
                Ok(response.map(|body| body.map_err(into_status as fn(BoxError) -> BoxError)))
            }
            Err(err) => Err(into_status(err)),
        })
    }
}

/// A deadline overrun (the call's deadline, or the limit of its last
/// attempt) as the `tonic::Status` gRPC defines for it,
/// `DEADLINE_EXCEEDED`; a call the rate limit turned away as
/// `RESOURCE_EXHAUSTED` (gRPC's code for a quota spent, "perhaps a per-user
/// quota", which a client's own limit is); a call an open circuit or
/// overload control turned away as `UNAVAILABLE` (gRPC's code for a client
/// failing fast); each message naming the upstream turned away from; a
/// failure before sending that fault injection made (feature `fault`) as
/// `UNAVAILABLE`, as tonic gives its own connection's; each with `err` as
/// its source; any other error as it is.
pub(crate) fn into_status(err: BoxError) -> BoxError {
    if err.is::<tonic::Status>() {
        return err;
    }
    let overrun =
        find::<DeadlineExceeded>(&*err).is_some() || find::<AttemptTimedOut>(&*err).is_some();
    let mut status = if overrun {
        tonic::Status::deadline_exceeded(err.to_string())
    } else if let Some(key) = rate_limited_by(&*err) {
        tonic::Status::resource_exhausted(format!("{err} for {key}"))
    } else if let Some(key) = turned_away_from(&*err) {
        tonic::Status::unavailable(format!("{err} for {key}"))
    } else if injected_before_send(&*err) {
        tonic::Status::unavailable(err.to_string())
    } else {
        return err;
    };
    status.set_source(Arc::from(err));
    Box::new(status)
}

/// The upstream whose rate limit turned `err` away, if one did.
fn rate_limited_by<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a crate::key::UpstreamKey> {
    #[cfg(feature = "rate-limit")]
    if let Some(limited) = crate::errors::find::<crate::rate_limit::RateLimited>(err) {
        return Some(limited.key());
    }
    let _ = err;
    None
}

/// The upstream a guard turned `err` away from, if one did.
fn turned_away_from<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a crate::key::UpstreamKey> {
    #[cfg(feature = "breaker")]
    if let Some(open) = crate::errors::find::<crate::breaker::error::CircuitOpen>(err) {
        return Some(open.key());
    }
    #[cfg(feature = "overload")]
    if let Some(overloaded) = crate::errors::find::<crate::overload::error::Overloaded>(err) {
        return Some(overloaded.key());
    }
    let _ = err;
    None
}

/// Whether `err` is a failure before sending that fault injection made
/// (refused, connect timeout, unsent), which tonic gives as `UNAVAILABLE`
/// when its own connection fails so.
fn injected_before_send(err: &(dyn std::error::Error + 'static)) -> bool {
    #[cfg(feature = "fault")]
    if let Some(fault) = crate::errors::find::<crate::fault::InjectedFault>(err) {
        let reads_as = fault.kind().reads_as();
        return reads_as.is_some_and(|kind| kind.is_before_send());
    }
    let _ = err;
    false
}

/// Sends any request body as tonic's body type, which a `Channel` takes.
#[derive(Clone, Debug)]
pub struct TonicBody<S> {
    inner: S,
}

impl<S> TonicBody<S> {
    /// Wraps `inner`.
    pub const fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, B> Service<http::Request<B>> for TonicBody<S>
where
    S: Service<http::Request<tonic::body::Body>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        self.inner.call(request.map(tonic::body::Body::new))
    }
}
