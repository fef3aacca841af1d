use super::{
    future::ResponseFuture, InvalidServiceConfig, MethodConfig, MethodPolicy, ServiceConfig,
};
use crate::{
    body::DEFAULT_REPLAY_CAP,
    grpc::{
        endpoint::{self, Endpoint},
        into_status, Grpc, GrpcHedge, GrpcHedgeLayer, GrpcLayer, InvalidEndpoint,
    },
    policy::RetryBudget,
    policy::{GrpcBackoff, GrpcDecoder},
    retry::RetryPolicy,
    BoxError, ResiliencePolicy, Wrapper,
};
use std::{
    fmt, mem,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};
use tower_layer::Layer;
use tower_service::Service;

/// The cap on a server's pushback for a retried method without `timeout`,
/// which has no deadline of the layer's own to cut the wait.
const MAX_PUSHBACK_WITHOUT_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends every call through the stack its method's entry in a
/// [`ServiceConfig`] asks for; see the [module docs](super) for an example.
///
/// Every stack is built once, here; a call only picks one.
///
/// A client made with `new(channel)` sends its calls with the path alone:
/// give the layer the channel's endpoint
/// ([`with_authority`](Self::with_authority)) so that the stacks see the
/// upstream (see [the channel's endpoint](crate::grpc#the-channels-endpoint)).
#[derive(Clone)]
pub struct ServiceConfigLayer {
    replay_cap: usize,
    routes: Arc<Routes>,
    endpoint: Option<Endpoint>,
}

/// The stacks of a config: one per method config, and the one for calls no
/// entry names.
#[derive(Debug)]
struct Routes {
    config: ServiceConfig,
    methods: Vec<Route>,
    unconfigured: Route,
}

/// The stack of one method config.
#[derive(Debug, Clone)]
enum Route {
    /// A retry policy, or none (retries turned off).
    Retry(GrpcLayer<GrpcDecoder, GrpcBackoff>),
    /// A hedging policy.
    Hedge(GrpcHedgeLayer<GrpcDecoder>),
}

// ===== impl ServiceConfigLayer =====

impl ServiceConfigLayer {
    /// The config the layer follows.
    #[cfg(test)]
    pub(crate) fn config(&self) -> &ServiceConfig {
        &self.routes.config
    }

    /// The layer for `config`, with request bodies kept for replay up to
    /// [`DEFAULT_REPLAY_CAP`] bytes.
    pub fn new(config: ServiceConfig) -> Self {
        Self::build(config, DEFAULT_REPLAY_CAP)
    }

    /// The layer for the service config `json` ([`ServiceConfig::from_json`]).
    ///
    /// # Errors
    ///
    /// As [`ServiceConfig::from_json`].
    pub fn from_json(json: &str) -> Result<Self, InvalidServiceConfig> {
        ServiceConfig::from_json(json).map(Self::new)
    }

    /// Keeps up to `cap` bytes of each request body for replay; a call whose
    /// body is longer is sent once (A6's per-call buffer limit).
    #[must_use]
    pub fn with_replay_cap(self, cap: usize) -> Self {
        Self {
            endpoint: self.endpoint,
            ..Self::build(self.routes.config.clone(), cap)
        }
    }

    /// Sends the calls that name no upstream (a tonic client made with
    /// `new(channel)`) as calls to `endpoint`'s scheme and authority, the
    /// channel's endpoint (tonic's `Endpoint::uri`), before a call picks its
    /// method's stack; a call whose URI names its own keeps it. As
    /// [`GrpcLayer::with_authority`].
    ///
    /// # Errors
    ///
    /// [`InvalidEndpoint`] when `endpoint` has no scheme or no authority.
    pub fn with_authority(mut self, endpoint: &http::Uri) -> Result<Self, InvalidEndpoint> {
        self.endpoint = Some(Endpoint::of(endpoint)?);
        Ok(self)
    }

    fn build(config: ServiceConfig, replay_cap: usize) -> Self {
        let budget = config.retry_throttling().cloned();
        let methods = config
            .methods()
            .iter()
            .map(|m| route(m, replay_cap, budget.clone()));
        let unconfigured = once(None, budget.clone()).with_replay_cap(replay_cap);
        let routes = Routes {
            methods: methods.collect(),
            unconfigured: Route::Retry(unconfigured),
            config,
        };
        Self {
            replay_cap,
            routes: Arc::new(routes),
            endpoint: None,
        }
    }
}

impl fmt::Debug for ServiceConfigLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceConfigLayer")
            .field("config", &self.routes.config)
            .field("replay_cap", &self.replay_cap)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<S> Layer<S> for ServiceConfigLayer {
    type Service = ServiceConfigured<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ServiceConfigured {
            inner,
            routes: Arc::clone(&self.routes),
            endpoint: self.endpoint.clone(),
        }
    }
}

/// The stack of a method config, built from the library's layers; a
/// method with neither policy puts its successes back in `budget` (A6: every
/// call of the channel does).
fn route(method: &MethodConfig, replay_cap: usize, budget: Option<Arc<RetryBudget>>) -> Route {
    match method.policy() {
        MethodPolicy::Retry(retry) => {
            Route::Retry(retrying(retry.clone(), method.timeout()).with_replay_cap(replay_cap))
        }
        MethodPolicy::Hedge(hedge) => {
            let layer = GrpcHedgeLayer::new(hedge.clone()).with_replay_cap(replay_cap);
            Route::Hedge(layer.with_deadline(method.timeout().unwrap_or(Duration::MAX)))
        }
        MethodPolicy::None => {
            Route::Retry(once(method.timeout(), budget).with_replay_cap(replay_cap))
        }
    }
}

/// [`GrpcLayer`]'s stack for `retry`, with `timeout` as the deadline (and
/// the limit of every attempt: gRPC has none of its own).
fn retrying(
    retry: RetryPolicy<GrpcDecoder, GrpcBackoff>,
    timeout: Option<Duration>,
) -> GrpcLayer<GrpcDecoder, GrpcBackoff> {
    let retry = match timeout {
        Some(_) => retry,
        None => retry.map(
            |decoder| decoder,
            |backoff| backoff.with_max_pushback(MAX_PUSHBACK_WITHOUT_TIMEOUT),
        ),
    };
    let deadline = timeout.unwrap_or(Duration::MAX);
    // NOTE: the parser refuses a zero timeout, the one limit `new` refuses.
    GrpcLayer::new(ResiliencePolicy::known_good(deadline, deadline, retry))
}

/// [`GrpcLayer`]'s stack with retries off: each call sent once, bounded by
/// `timeout` if given and by the caller's deadline, which every attempt
/// sends as `grpc-timeout` (none when there is none); a success puts a
/// share back in `budget`, and no code of its own takes a token.
fn once(
    timeout: Option<Duration>,
    budget: Option<Arc<RetryBudget>>,
) -> GrpcLayer<GrpcDecoder, GrpcBackoff> {
    let schedule =
        GrpcBackoff::known_good(2, Duration::from_millis(100), Duration::from_secs(1), 2.0);
    let mut retry = RetryPolicy::new(GrpcDecoder::none(), schedule).disabled();
    if let Some(budget) = budget {
        retry = retry.map_options(|o| o.with_budget(budget));
    }
    // NOTE: a limit of `Duration::MAX` is none: the deadline and the budget
    // sent are the caller's, if any.
    let limit = timeout.unwrap_or(Duration::MAX);
    GrpcLayer::new(ResiliencePolicy::known_good(limit, limit, retry))
}

/// What [`ServiceConfigLayer`] makes of a service `S` (a tonic `Channel`):
/// a service a tonic generated client takes as its transport.
///
/// # Clone
///
/// A call is sent on the service that reported ready, and a clone takes its
/// place for the next call (tower's rule for services that clone their
/// inner one), so `S: Clone` is required. The stacks are shared behind an
/// `Arc`.
pub struct ServiceConfigured<S> {
    inner: S,
    routes: Arc<Routes>,
    endpoint: Option<Endpoint>,
}

impl<S: Clone> Clone for ServiceConfigured<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            routes: Arc::clone(&self.routes),
            endpoint: self.endpoint.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for ServiceConfigured<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceConfigured")
            .field("inner", &self.inner)
            .field("config", &self.routes.config)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl<S> Wrapper for ServiceConfigured<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

/// The retrying stack around `S`.
type Retrying<S> = Grpc<S, GrpcDecoder, GrpcBackoff>;

impl<S, B> Service<http::Request<B>> for ServiceConfigured<S>
where
    S: Service<http::Request<tonic::body::Body>> + Clone,
    S::Error: Into<BoxError>,
    Retrying<S>: Service<http::Request<B>, Error = BoxError>,
    GrpcHedge<S, GrpcDecoder>: Service<
        http::Request<B>,
        Response = <Retrying<S> as Service<http::Request<B>>>::Response,
        Error = BoxError,
    >,
{
    type Response = <Retrying<S> as Service<http::Request<B>>>::Response;
    type Error = BoxError;
    type Future = ResponseFuture<
        <Retrying<S> as Service<http::Request<B>>>::Future,
        <GrpcHedge<S, GrpcDecoder> as Service<http::Request<B>>>::Future,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|err| into_status(err.into()))
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        endpoint::fill(self.endpoint.as_ref(), &mut request);
        // NOTE: the service that reported ready sends this call; the clone
        // left in its place is made ready before the next one. The stacks
        // keep no readiness of their own (each layer in them passes
        // `poll_ready` straight through), so one built around a ready
        // service is ready.
        let clone = self.inner.clone();
        let ready = mem::replace(&mut self.inner, clone);
        let selected = self.routes.config.index_for_path(request.uri().path());
        let route = selected.map_or(&self.routes.unconfigured, |i| &self.routes.methods[i]);
        match route {
            Route::Retry(layer) => ResponseFuture::retry(layer.layer(ready).call(request)),
            Route::Hedge(layer) => ResponseFuture::hedge(layer.layer(ready).call(request)),
        }
    }
}
