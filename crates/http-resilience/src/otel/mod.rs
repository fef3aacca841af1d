//! Metrics in OpenTelemetry's terms (feature `otel`): [`Metrics`] records
//! what the layers do to the instruments of an OpenTelemetry [`Meter`]: the
//! attempts, retries and hedges, the ends of calls, the breaker's and
//! overload control's events, and gauges read when the meter collects.
//!
//! Only OpenTelemetry's API crate (`opentelemetry`, its `metrics` feature) is
//! used: the application brings the SDK, the exporter and any views. Until
//! it sets a meter provider, the global meter's instruments record nothing.
//!
//! # Where each part goes
//!
//! The combined service and the gRPC layers take it in one call, on the
//! policy: [`ResiliencePolicy::with_metrics`](crate::otel::Observed::with_metrics).
//! Nothing else is wired: no listener, no layer.
//!
//! ```text
//! presets::standard().with_guard((overload, breaker)).with_metrics(&metrics).layer()
//! GrpcLayer::new(presets::grpc().with_guard(BreakerPolicy::grpc()).with_metrics(&metrics))
//! ```
//!
//! It gives the retry policy the metrics as a listener, beside the one it
//! had ([`RetryPolicy::with_metrics`](crate::retry::RetryPolicy::with_metrics));
//! attaches them to the breaker's circuits and overload control's slots in
//! place ([`BreakerPolicy::with_metrics`](crate::otel::Observed::with_metrics),
//! [`OverloadPolicy::with_metrics`](crate::otel::Observed::with_metrics)),
//! with their gauges, read for as long as the circuits and slots live; reads
//! the budget's tokens for as long as the policy lives; and times every
//! call, since the combined service holds the call's deadline and sees every
//! end, the deadline's included.
//!
//! The three layers and hedging are stacks of layers, each with a policy
//! of its own, so each part is wired where it is, and the timing of whole
//! calls is a layer of its own, outermost:
//!
//! ```text
//! metrics.layer() -> DeadlineLayer -> StatusRetryLayer -> [GuardLayer<BreakerPolicy>] -> [GuardLayer<OverloadPolicy>] -> AttemptTimeoutLayer -> client
//!                                     retry.with_metrics(&metrics)
//!                                                         breaker.with_metrics(&metrics)
//!                                                                                  overload.with_metrics(&metrics)
//! metrics.layer() -> DeadlineLayer -> HedgeLayer (hedge.with_metrics(&metrics)) -> ...
//! ```
//!
//! - **The retry (or hedging) policy** hears every attempt, retry, hedge and
//!   end of a call, with the call's method and authority. A listener of its
//!   own, set before, still hears everything; one set after replaces both.
//! - **A breaker's or overload control's policy** is observed in place:
//!   every clone already handed out reports too, a setter called afterwards
//!   keeps the metrics, and circuits shared by two stacks are counted once.
//! - **The layer** ([`Metrics::layer`]) times whole calls and counts deadline
//!   overruns. The [`DeadlineLayer`](crate::DeadlineLayer) drops the retry
//!   when the deadline runs out, before the retry sees an outcome (no `Done`
//!   event, nothing in `http_resilience.calls`): only a layer outside the
//!   deadline sees that end, with the deadline's error. Put inside the
//!   deadline, the layer would be dropped with the retry and count nothing.
//!   The combined service wired with `with_metrics` needs none: with one it
//!   counts every call twice.
//!
//! The metrics are a listener too: given to `with_listener` (rather than
//! `with_metrics`) they record the events the policy tells (what the retry
//! sees, the breaker's or overload control's events), no whole call (the
//! layer does) and no gauge: `with_metrics` is the one way to the gauges.
//!
//! # Instruments
//!
//! | instrument | kind | unit | attributes | recorded |
//! |---|---|---|---|---|
//! | `http.client.request.duration` | histogram | `s` | `http.request.method`, `server.address`, `server.port`, `url.scheme`; `http.response.status_code` and `network.protocol.version` with a response, `error.type` when it failed | at the end of every attempt and hedged copy with an outcome (OpenTelemetry's HTTP client convention) |
//! | `http_resilience.retries` | counter | `{retry}` | `server.address`, `http_resilience.reason`, `http_resilience.wait_source` | for every retry the policy makes |
//! | `http_resilience.retry.delay` | histogram | `s` | `server.address`, `http_resilience.wait_source` | the wait before every retry |
//! | `http_resilience.hedges` | counter | `{hedge}` | `server.address`, `http_resilience.trigger` | for every hedged copy sent |
//! | `http_resilience.calls` | counter | `{call}` | `http.request.method`, `server.address`, `http_resilience.stop` | for every call the retry or the hedge ended |
//! | `http_resilience.call.attempts` | histogram | `{attempt}` | `http.request.method`, `server.address` | the attempts of every call the retry or the hedge ended, the first included |
//! | `http_resilience.call.duration` | histogram | `s` | as `http.client.request.duration` | for every call, to its response head or its error: by the combined service wired with `with_metrics`, or by the layer |
//! | `http_resilience.deadline.overruns` | counter | `{call}` | `http.request.method`, `server.address` | for every call whose error is the deadline's, likewise |
//! | `http_resilience.breaker.transitions` | counter | `{transition}` | `http_resilience.breaker.key`, `http_resilience.breaker.state`; `http_resilience.breaker.trip_reason` when opened | for every change of state of a circuit |
//! | `http_resilience.breaker.rejections` | counter | `{call}` | `http_resilience.breaker.key` | for every call an open circuit turned away |
//! | `http_resilience.breaker.state` | gauge | `{state}` | `http_resilience.breaker.key` | read on collection, per circuit |
//! | `http_resilience.budget.tokens` | gauge | `{token}` | `http_resilience.budget.name` | read on collection ([`Metrics::with_budget_name`] names a wired policy's) |
//! | `http_resilience.overload.rejections` | counter | `{call}` | `http_resilience.overload.key`, `http_resilience.overload.reason` | for every call overload control turned away |
//! | `http_resilience.overload.limit_changes` | counter | `{change}` | `http_resilience.overload.key` | for every move of an adaptive limit |
//! | `http_resilience.overload.limit`, `.in_flight`, `.queued` | gauges | `{call}` | `http_resilience.overload.key` | read on collection, per key |
//! | `http_resilience.overload.rejection_probability` | gauge | `1` | `http_resilience.overload.key` | read on collection, per key, with throttling |
//! | `http_resilience.rate_limit.rejections` | counter | `{call}` | `http_resilience.rate_limit.key`, `http_resilience.rate_limit.reason` | for every call the rate limit turned away |
//! | `http_resilience.rate_limit.pauses` | counter | `{pause}` | `http_resilience.rate_limit.key`, `http_resilience.rate_limit.signal` | for every pause a server asked for |
//! | `http_resilience.rate_limit.fleet.fallbacks` | counter | `{fallback}` | `http_resilience.rate_limit.key` | every time a key of a fleet quota falls back (Redis away or slow) |
//! | `http_resilience.rate_limit.fleet.leases` | counter | `{lease}` | `http_resilience.rate_limit.key` | for every lease of a fleet quota: one Redis round trip each |
//! | `http_resilience.rate_limit.delay` | gauge | `s` | `http_resilience.rate_limit.key` | read on collection, per key: how long a call asking now would wait |
//!
//! The names close to gRPC's retry metrics (proposal A96:
//! `grpc.client.call.retries`, `.hedges`, `.retry_delay`) and Polly's
//! `resilience.*`; the library's own are all under `http_resilience.`, as
//! the spans' fields are ([`telemetry`](crate::telemetry)).
//! Every histogram of seconds has the bucket boundaries the HTTP
//! convention advises (5 ms to 10 s: 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
//! 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10); `http_resilience.call.attempts` has
//! 1, 2, 3, 4, 5 and 10. A view in the SDK changes them.
//!
//! # Attribute values
//!
//! - `http.request.method`: the method, or `_OTHER` for one the HTTP
//!   convention does not know; `server.address` and `server.port`: the host
//!   of the first request's URI and its port (or the scheme's default);
//! - `network.protocol.version`: the response's HTTP version, `1.0`, `1.1`,
//!   `2` or `3`, as the conventions spell it;
//! - `error.type`: the status code for a 4xx or 5xx response (`"503"`), else
//!   [`FailureKind::name`](crate::FailureKind::name) (`attempt_timeout`,
//!   `deadline`, `connect_refused`, ...);
//! - `http_resilience.reason`: why the decoder asked for the retry: a status
//!   code (`"503"`), a failure's [`FailureKind::name`](crate::FailureKind::name),
//!   a gRPC status's name (`UNAVAILABLE`), a header's name, a reason of one's
//!   own, or `error`;
//! - `http_resilience.wait_source`: `backoff`, `server` (`Retry-After`,
//!   pushback) or `none`;
//! - `http_resilience.trigger`: `delay`, `attempt_timeout` or `non_fatal`;
//! - `http_resilience.stop`: [`Stop::name`](crate::Stop::name): `accepted`,
//!   `exhausted`, `failed`, and the stops that a retry or a hedge was
//!   refused for: `budget_exhausted`, `would_miss_deadline`,
//!   `deadline_passed`, `not_idempotent`, `not_replayable`, ...;
//! - `http_resilience.breaker.key`: the circuit's
//!   [`UpstreamKey`](crate::key::UpstreamKey) as it displays
//!   (`http://api.test:8080`); `http_resilience.breaker.state`: `opened`,
//!   `half_open`, `ramping_up` or `closed`;
//!   `http_resilience.breaker.trip_reason`: `consecutive_failures`,
//!   `failure_ratio`, `probe_failed` or `ramp_failed`;
//! - `http_resilience.overload.key`: the key of the slots, as the breaker's
//!   displays; `http_resilience.overload.reason`:
//!   [`Rejection::name`](crate::overload::Rejection::name) (`queue_full`,
//!   `wait_too_long`, `throttled`);
//! - `http_resilience.rate_limit.key`: the key of the bucket, as the
//!   breaker's displays; `http_resilience.rate_limit.reason`:
//!   [`Limited::name`](crate::rate_limit::Limited::name) (`over_limit`,
//!   `wait_too_long`, `paused`, `fleet_unavailable`);
//!   `http_resilience.rate_limit.signal`:
//!   [`Signal::name`](crate::rate_limit::Signal::name) (`retry_after`,
//!   `grpc_pushback`, `ratelimit`, `x_ratelimit`).
//!
//! # Gauges
//!
//! Each gauge is registered once per [`Metrics`], when first asked for, and
//! reads, on every collection, whatever was observed through it:
//! `http_resilience.breaker.state` the circuits of every breaker wired (0
//! closed, 1 open, 2 half-open, 3 ramping up), the overload gauges the slots
//! of every overload policy wired, `http_resilience.budget.tokens` the
//! tokens left in every [`RetryBudget`](crate::policy::RetryBudget) of a
//! wired policy. A wired guard is read while its circuits or slots live (a
//! clone of the policy, a layer or a service keeps them), a budget while the
//! policy lives; then the gauge forgets it. (OpenTelemetry's SDK keeps a
//! callback until its provider shuts down and cannot take one back: the
//! gauges hold what they read weakly.)
//!
//! # Cardinality
//!
//! OpenTelemetry's HTTP client conventions require `server.address` and
//! `server.port` on `http.client.request.duration`; the library puts them
//! on `http_resilience.call.duration`, `.retries`, `.calls` and the others
//! too, and the guards' gauges and counters carry the key of the circuit or
//! of the slots. Each upstream host (and port) is then one series more of
//! every such instrument: a gateway or a crawler in front of many hosts
//! grows them without end. The SDK bounds what it keeps: each instrument's
//! stream holds at most 2,000 attribute sets by default, and the
//! measurements past the limit go to one overflow series
//! (`otel.metric.overflow = true`). A view sets a tighter limit per
//! instrument:
//!
//! ```
//! use opentelemetry_sdk::metrics::{Instrument, SdkMeterProvider, Stream};
//!
//! /// At most 200 attribute sets per instrument of the library.
//! fn bounded(instrument: &Instrument) -> Option<Stream> {
//!     let name = instrument.name();
//!     if name.starts_with("http_resilience.") || name == "http.client.request.duration" {
//!         Stream::builder().with_cardinality_limit(200).build().ok()
//!     } else {
//!         None
//!     }
//! }
//!
//! let provider = SdkMeterProvider::builder().with_view(bounded).build();
//! # let _ = provider;
//! ```
//!
//! A view can also drop the per-host attributes from an instrument, keeping
//! one series per method and outcome (with the SDK's feature
//! `spec_unstable_metrics_views`, which `with_allowed_attribute_keys` needs):
//!
//! ```
//! use opentelemetry::Key;
//! use opentelemetry_sdk::metrics::{Instrument, SdkMeterProvider, Stream};
//!
//! /// `http.client.request.duration` without `server.address` and `server.port`.
//! fn without_hosts(instrument: &Instrument) -> Option<Stream> {
//!     if instrument.name() != "http.client.request.duration" {
//!         return None;
//!     }
//!     let kept = [
//!         "http.request.method",
//!         "url.scheme",
//!         "http.response.status_code",
//!         "network.protocol.version",
//!         "error.type",
//!     ];
//!     Stream::builder()
//!         .with_allowed_attribute_keys(kept.map(Key::from_static_str))
//!         .build()
//!         .ok()
//! }
//!
//! let provider = SdkMeterProvider::builder().with_view(without_hosts).build();
//! # let _ = provider;
//! ```
//!
//! # What it costs
//!
//! A listener makes a call keep its context (one allocation) and read the
//! clock when each attempt starts; each recording builds its attributes (the
//! host is copied) and hands them to the SDK. The layer keeps the call's
//! context and its start in its future; the combined service wired with
//! `with_metrics` keeps the call's start in the context it already keeps. A
//! guard wired in place tells the metrics of its events with one more load
//! of a pointer. None of this exists without the feature, and none of it
//! runs for a policy without the metrics.
//!
//! The crate's example `examples/otel.rs` prints the metrics and the spans
//! of a retried call and a hedged call
//! (`cargo run -p http-resilience --example otel`).
//!
//! # Example
//!
//! Two 503s, then a 200, through the three layers, each part wired, read
//! back with the SDK's in-memory exporter (the combined service needs only
//! [`ResiliencePolicy::with_metrics`](crate::otel::Observed::with_metrics),
//! whose docs have an example):
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     policy::{FixedDelay, RetryBudget, StatusDecoder},
//!     retry::{RetryPolicy, StatusRetryLayer},
//!     otel::{Metrics, Observed},
//!     AttemptTimeoutLayer, DeadlineLayer,
//! };
//! use opentelemetry::metrics::MeterProvider as _;
//! use opentelemetry_sdk::metrics::{
//!     data::{AggregatedMetrics, MetricData, ResourceMetrics},
//!     InMemoryMetricExporter, PeriodicReader, SdkMeterProvider,
//! };
//! use std::{
//!     convert::Infallible,
//!     sync::{atomic::{AtomicU32, Ordering}, Arc},
//!     time::Duration,
//! };
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! /// The sum of the counter `name` over all its points.
//! fn counted(metrics: &ResourceMetrics, name: &str) -> u64 {
//!     let found = metrics.scope_metrics().flat_map(|scope| scope.metrics()).find(|m| m.name() == name);
//!     match found.map(|metric| metric.data()) {
//!         Some(AggregatedMetrics::U64(MetricData::Sum(sum))) => sum.data_points().map(|p| p.value()).sum(),
//!         _ => 0,
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let exporter = InMemoryMetricExporter::default();
//! let provider = SdkMeterProvider::builder()
//!     .with_reader(PeriodicReader::builder(exporter.clone()).build())
//!     .build();
//! let metrics = Metrics::new(&provider.meter("my-client"));
//!
//! // The retry's part of the three layers: its listener and its budget's gauge.
//! let budget = Arc::new(RetryBudget::new(10, 0.1)?);
//! let policy = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::from_millis(10), 2))
//!     .map_options(|options| options.with_budget(budget))
//!     .with_metrics(&metrics);
//! let calls = Arc::new(AtomicU32::new(0));
//! let svc = ServiceBuilder::new()
//!     .layer(metrics.layer())
//!     .layer(DeadlineLayer::new(Duration::from_secs(8)))
//!     .layer(StatusRetryLayer::new(policy))
//!     .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
//!     .service_fn(move |_: Request<String>| {
//!         // A stand-in for the network: 503, 503, then 200.
//!         let status = if calls.fetch_add(1, Ordering::Relaxed) < 2 { 503 } else { 200 };
//!         async move { Ok::<_, Infallible>(Response::builder().status(status).body(String::new()).unwrap()) }
//!     });
//! let request = Request::get("http://api.test:8080/items").body(String::new())?;
//! // The budget's gauge reads while the service (and its policy) is kept.
//! svc.clone().oneshot(request).await?;
//!
//! provider.force_flush()?;
//! let exported = exporter.get_finished_metrics()?;
//! let last = exported.last().unwrap();
//! assert_eq!(counted(last, "http_resilience.retries"), 2);
//! assert_eq!(counted(last, "http_resilience.calls"), 1);
//! let gauges = last.scope_metrics().flat_map(|scope| scope.metrics());
//! assert!(gauges.map(|m| m.name()).any(|name| name == "http_resilience.budget.tokens"));
//! # Ok(())
//! # }
//! ```

mod attributes;
pub mod future;
mod gauges;
mod instruments;
mod layer;
pub(crate) mod wiring;

pub use self::{layer::CallMetricsLayer, wiring::Observed};

use self::{future::ResponseFuture, instruments::Instruments};
use crate::{
    breaker::BreakerEvent,
    errors::AsError,
    overload::OverloadEvent,
    policy::{CallContext, CallEvent, RetryEvent},
    rate_limit::RateLimitEvent,
    telemetry::Listener,
    Wrapper,
};
use opentelemetry::{metrics::Meter, InstrumentationScope};
use std::{
    borrow::Cow,
    fmt,
    sync::Arc,
    task::{Context, Poll},
};
use tower_service::Service;

/// Records the library's metrics to the instruments of one [`Meter`]: given
/// to a policy once with `with_metrics`
/// ([`ResiliencePolicy::with_metrics`](crate::otel::Observed::with_metrics)
/// and the others), or as a listener by hand; the source of the call layer
/// and the gauges.
///
/// See the [module docs](self) for the instruments and an example.
///
/// # Clone
///
/// The instruments are made once, in [`new`](Self::new), and kept behind an
/// `Arc`: a clone copies a pointer, and every clone records to the same
/// instruments.
#[derive(Clone)]
pub struct Metrics {
    instruments: Arc<Instruments>,
    // The `http_resilience.budget.name` of a budget `with_metrics` observes.
    budget_name: Cow<'static, str>,
}

// ===== impl Metrics =====

impl Metrics {
    /// The metrics, recorded to instruments of `meter`.
    pub fn new(meter: &Meter) -> Self {
        Self {
            instruments: Arc::new(Instruments::new(meter)),
            budget_name: Cow::Borrowed("default"),
        }
    }

    /// The same metrics (the same instruments), naming the budget of every
    /// policy they are wired into with `with_metrics`
    /// ([`ResiliencePolicy::with_metrics`](crate::otel::Observed::with_metrics)):
    /// the `http_resilience.budget.name` of its gauge, `default` unless
    /// named. Two clients with budgets of their own are wired with metrics
    /// of two names, so that their gauges read apart.
    #[must_use]
    pub fn with_budget_name(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.budget_name = name.into();
        self
    }

    /// The metrics, recorded to the global meter provider's meter
    /// `http-resilience` (with the crate's version). Made after
    /// `opentelemetry::global::set_meter_provider`: instruments made before
    /// it record nothing.
    pub fn global() -> Self {
        let scope = InstrumentationScope::builder("http-resilience")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Self::new(&opentelemetry::global::meter_with_scope(scope))
    }

    /// The layer that times whole calls and counts deadline overruns; it
    /// goes outermost (see the module docs).
    pub fn layer(&self) -> CallMetricsLayer {
        CallMetricsLayer::new(self.clone())
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

/// As a listener given by hand (`with_listener`), the metrics record what
/// the retry sees and no whole call: [`Metrics::layer`] times those, and
/// `with_metrics` wires the combined service to (see the module docs).
impl Listener<CallEvent<'_>> for Metrics {
    fn on_event(&self, heard: &CallEvent<'_>) {
        // NOTE: the end of a whole call is recorded where it is wired alone
        // (`with_metrics`, `Metrics::layer`): a listener set by hand under a
        // `Metrics::layer` would count every call twice.
        if !matches!(heard.event, RetryEvent::CallEnd { .. }) {
            self.instruments.record(heard.call, &heard.event);
        }
    }
}

impl Listener<BreakerEvent<'_>> for Metrics {
    fn on_event(&self, event: &BreakerEvent<'_>) {
        self.instruments.breaker(event);
    }
}

impl Listener<OverloadEvent<'_>> for Metrics {
    fn on_event(&self, event: &OverloadEvent<'_>) {
        self.instruments.overload(event);
    }
}

impl Listener<RateLimitEvent<'_>> for Metrics {
    fn on_event(&self, event: &RateLimitEvent<'_>) {
        self.instruments.rate_limit(event);
    }
}

/// Times every call of the inner service, to its response head or its
/// error, and counts the calls whose error is the deadline's; made by
/// [`CallMetricsLayer`].
///
/// See the [module docs](self) for an example.
///
/// The response body is not timed: a deadline that ends the body while it
/// is read is the body's error, which this service does not see.
#[derive(Debug, Clone)]
pub struct CallMetrics<S> {
    inner: S,
    metrics: Metrics,
}

// ===== impl CallMetrics =====

impl<S> CallMetrics<S> {
    /// Wraps `inner`, recording to `metrics`.
    pub const fn new(inner: S, metrics: Metrics) -> Self {
        Self { inner, metrics }
    }
}

impl<S> Wrapper for CallMetrics<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, T> Service<http::Request<B>> for CallMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: AsError,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let call = CallContext::of(&request);
        ResponseFuture::new(self.inner.call(request), self.metrics.clone(), call)
    }
}
