//! Hedged gRPC calls for tonic in one layer.

use super::{
    endpoint::{self, Endpoint},
    into_status, InvalidEndpoint, ResponseFuture, TonicBody,
};
use crate::{
    body::{ReplayBody, DEFAULT_REPLAY_CAP},
    deadline::{body::DeadlineBody, Deadline},
    hedge::{Hedge, HedgeLayer, HedgePolicy},
    policy::{Idempotency, GRPC_PREVIOUS_RPC_ATTEMPTS},
    propagate::{InheritDeadline, PropagateDeadline, TimeoutFormat, GRPC_TIMEOUT},
    BoxError, Wrapper,
};
use std::{
    fmt,
    task::{Context, Poll},
    time::Duration,
};
use tower_layer::Layer;
use tower_service::Service;

/// Hedges the calls of a tonic `Channel` (or any service of
/// `http::Request<tonic::body::Body>`) as a [`HedgePolicy`] says, with
/// nothing else to compose: gRPC's `hedgingPolicy` in one layer.
///
/// The stack, outermost first:
///
/// ```text
/// GrpcHedgeLayer: replay the body -> mark safe to repeat -> InheritDeadline (grpc-timeout)
///                 -> Deadline -> Hedge -> PropagateDeadline (grpc-timeout) -> Channel
/// ```
///
/// - every copy after the first carries `grpc-previous-rpc-attempts`, the
///   number of copies sent before it (the layer sets it on the policy,
///   replacing any attempt header the policy had), and every copy carries
///   the time left before the deadline as `grpc-timeout`;
/// - the deadline is the caller's (tonic's `Request::set_timeout`), or the
///   layer's own ([`with_deadline`](Self::with_deadline)) when that is
///   earlier; it covers every copy and the response stream, and an overrun
///   reaches tonic as `DEADLINE_EXCEEDED`;
/// - every call is marked
///   [`Idempotency::Idempotent`](crate::policy::Idempotency) unless the
///   caller marked it `NotIdempotent` (then it is sent once): putting a
///   hedging layer on a client declares its methods safe to send twice, as a
///   `hedgingPolicy` in gRPC's service config does. For a choice per method,
///   use [`ServiceConfigLayer`](super::ServiceConfigLayer).
///
/// The hedging itself is [`HedgeLayer`]'s: its limits, budget and
/// cancellation of the copies that lose hold here as they are.
///
/// A client made with `new(channel)` sends its calls with the path alone:
/// give the layer the channel's endpoint
/// ([`with_authority`](Self::with_authority)) so that a breaker below it
/// and the spans see the upstream (see [the channel's
/// endpoint](super#the-channels-endpoint)).
///
/// # Example
///
/// ```no_run
/// use http_resilience::{
///     grpc::GrpcHedgeLayer,
///     hedge::{HedgeDelay, HedgePolicy},
///     policy::GrpcDecoder,
/// };
/// use std::time::Duration;
/// use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
/// use tower::Layer;
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // A second copy when the first has not answered in 50 ms.
/// let policy = HedgePolicy::new(GrpcDecoder::default(), HedgeDelay::fixed(Duration::from_millis(50)), 2)?;
/// let endpoint = tonic::transport::Channel::from_static("http://127.0.0.1:50051");
/// let layer = GrpcHedgeLayer::new(policy).with_authority(endpoint.uri())?;
/// let mut client = HealthClient::new(layer.layer(endpoint.connect_lazy()));
/// let reply = client.check(HealthCheckRequest { service: String::new() }).await?;
/// println!("{:?}", reply.into_inner().status());
/// # Ok(())
/// # }
/// ```
pub struct GrpcHedgeLayer<D> {
    hedge: HedgeLayer<D>,
    deadline: Duration,
    replay_cap: usize,
    endpoint: Option<Endpoint>,
}

/// What [`GrpcHedgeLayer`] makes of a service `S`; see there.
pub struct GrpcHedge<S, D> {
    inner: HedgeStack<S, D>,
    replay_cap: usize,
    endpoint: Option<Endpoint>,
}

/// The layers inside [`GrpcHedge`], outermost first.
type HedgeStack<S, D> = InheritDeadline<Deadline<Hedge<PropagateDeadline<TonicBody<S>>, D>>>;

// ===== impl GrpcHedgeLayer =====

impl<D> GrpcHedgeLayer<D> {
    /// The stack for `policy`, with no deadline of its own (the caller's
    /// holds) and request bodies kept for the copies up to
    /// [`DEFAULT_REPLAY_CAP`] bytes.
    pub fn new(policy: HedgePolicy<D>) -> Self {
        let policy =
            policy.map_options(|o| o.with_previous_attempts_header(GRPC_PREVIOUS_RPC_ATTEMPTS));
        Self {
            hedge: HedgeLayer::new(policy),
            deadline: Duration::MAX,
            replay_cap: DEFAULT_REPLAY_CAP,
            endpoint: None,
        }
    }

    /// Gives every call `deadline` in all (gRPC's `timeout`), copies and
    /// response stream included; an earlier deadline from the caller wins.
    #[must_use]
    pub const fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Keeps up to `cap` bytes of each request body for the copies; a call
    /// whose body is longer is not hedged past that point (see the
    /// [hedge module](crate::hedge#streaming-bodies)).
    #[must_use]
    pub const fn with_replay_cap(mut self, cap: usize) -> Self {
        self.replay_cap = cap;
        self
    }

    /// Sends the calls that name no upstream (a tonic client made with
    /// `new(channel)`) as calls to `endpoint`'s scheme and authority, the
    /// channel's endpoint (tonic's `Endpoint::uri`); a call whose URI names
    /// its own keeps it. As
    /// [`GrpcLayer::with_authority`](super::GrpcLayer::with_authority).
    ///
    /// # Errors
    ///
    /// [`InvalidEndpoint`] when `endpoint` has no scheme or no authority.
    pub fn with_authority(mut self, endpoint: &http::Uri) -> Result<Self, InvalidEndpoint> {
        self.endpoint = Some(Endpoint::of(endpoint)?);
        Ok(self)
    }
}

impl<D> Clone for GrpcHedgeLayer<D> {
    fn clone(&self) -> Self {
        Self {
            hedge: self.hedge.clone(),
            deadline: self.deadline,
            replay_cap: self.replay_cap,
            endpoint: self.endpoint.clone(),
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for GrpcHedgeLayer<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcHedgeLayer")
            .field("hedge", &self.hedge)
            .field("deadline", &self.deadline)
            .field("replay_cap", &self.replay_cap)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<S, D> Layer<S> for GrpcHedgeLayer<D> {
    type Service = GrpcHedge<S, D>;

    fn layer(&self, inner: S) -> Self::Service {
        let sent = PropagateDeadline::new(TonicBody::new(inner), GRPC_TIMEOUT, TimeoutFormat::Grpc);
        let bounded = Deadline::new(self.hedge.layer(sent), self.deadline);
        GrpcHedge {
            inner: InheritDeadline::new(bounded, GRPC_TIMEOUT, TimeoutFormat::Grpc),
            replay_cap: self.replay_cap,
            endpoint: self.endpoint.clone(),
        }
    }
}

// ===== impl GrpcHedge =====

impl<S: Clone, D> Clone for GrpcHedge<S, D> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            replay_cap: self.replay_cap,
            endpoint: self.endpoint.clone(),
        }
    }
}

impl<S: fmt::Debug, D: fmt::Debug> fmt::Debug for GrpcHedge<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcHedge")
            .field("inner", &self.inner)
            .field("replay_cap", &self.replay_cap)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

/// The inner service is the one the layer was given (the `Channel`), under
/// the layers of the stack.
impl<S, D> Wrapper for GrpcHedge<S, D> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner.get_ref().get_ref().get_ref().get_ref().inner
    }

    fn into_inner(self) -> S {
        let sent = self.inner.into_inner().into_inner().into_inner();
        sent.into_inner().inner
    }
}

impl<S, D, B, T> Service<http::Request<B>> for GrpcHedge<S, D>
where
    HedgeStack<S, D>: Service<
        http::Request<ReplayBody<B>>,
        Response = http::Response<DeadlineBody<T>>,
        Error = BoxError,
    >,
    B: http_body::Body,
    T: http_body::Body,
    T::Error: Into<BoxError>,
{
    type Response = http::Response<super::GrpcBody<T>>;
    type Error = BoxError;
    type Future =
        ResponseFuture<<HedgeStack<S, D> as Service<http::Request<ReplayBody<B>>>>::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(into_status)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        endpoint::fill(self.endpoint.as_ref(), &mut request);
        let cap = self.replay_cap;
        let mut request = request.map(|body| ReplayBody::with_cap(body, cap));
        // NOTE: the caller's word, either way, is kept; only a call with
        // none is marked (see the layer's docs for why).
        if request.extensions().get::<Idempotency>().is_none() {
            request.extensions_mut().insert(Idempotency::Idempotent);
        }
        ResponseFuture::new(self.inner.call(request))
    }
}
