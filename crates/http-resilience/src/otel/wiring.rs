//! `with_metrics`: one call that gives a policy the metrics, its guards and
//! its budget included.

use super::{gauges::Observation, Metrics};
use crate::{
    breaker::BreakerPolicy,
    overload::OverloadPolicy,
    policy::{CallEvent, CallListener, Parts},
    rate_limit::RateLimitPolicy,
    retry::RetryPolicy,
    telemetry::Listener,
    ResiliencePolicy,
};
use std::{fmt, sync::Arc};

pub(crate) mod sealed {
    use super::Metrics;

    /// What `with_metrics` calls of a guard; crate-private, so that only
    /// this crate's types are observed.
    pub(crate) trait Sealed {
        /// Attaches `metrics` to the guard's state, in place.
        fn attach_metrics(&self, metrics: &Metrics);
    }
}

/// A policy whose events and state [`Metrics`] can observe: a
/// [`ResiliencePolicy`], a [`RetryPolicy`], a
/// [`HedgePolicy`](crate::hedge::HedgePolicy) (feature `hedge`), and the
/// guards: a [`BreakerPolicy`], an [`OverloadPolicy`], a
/// [`RateLimitPolicy`], an `Option` or a pair of guards, or `()`; a
/// [`FaultPolicy`](crate::fault::FaultPolicy) (feature `fault`) too, which
/// has no metrics of its own: what it injects is counted as the upstream's
/// outcomes are.
///
/// One call wires it: `with_metrics` on a [`ResiliencePolicy`] wires the
/// retry and the guards it holds; under the three layers each policy is
/// wired on its own. Import the trait to call it.
///
/// # The guards
///
/// A guard is observed in place (unlike every other setter, this one keeps
/// its state, and every clone already handed out reports too), with no
/// handle to keep; the setters called afterwards keep the metrics, and the
/// state they make is read too. A guard's state is observed by one
/// [`Metrics`]: wiring a guard already wired (one shared by two stacks)
/// changes nothing, so that nothing is counted twice.
///
/// - [`BreakerPolicy`]: every change of state and every call turned away,
///   beside the policy's listener, and the gauge
///   `http_resilience.breaker.state`, which reads the circuits.
/// - [`OverloadPolicy`]: every call turned away and every move of an
///   adaptive limit, and the gauges `http_resilience.overload.limit`,
///   `.in_flight`, `.queued` and `.rejection_probability`.
/// - [`RateLimitPolicy`]: every call turned away
///   (`http_resilience.rate_limit.rejections`), every pause learned
///   (`.pauses`), every fallback of a fleet quota (`.fleet.fallbacks`) and
///   lease (`.fleet.leases`), and the gauge `http_resilience.rate_limit.delay`.
pub trait Observed: Sized {
    /// The same policy recording to `metrics`: its events beside those of
    /// the listener it has, if any, and gauges that read its state for as
    /// long as the state lives. Each implementation below says what it
    /// records and where.
    #[must_use]
    fn with_metrics(self, metrics: &Metrics) -> Self;
}

// NOTE: what each guard records is said on the trait, since its
// implementation is the blanket one below.

/// A guard is observed in place: its state is shared by every clone, so
/// the clones already handed out report too.
impl<G: sealed::Sealed> Observed for G {
    fn with_metrics(self, metrics: &Metrics) -> Self {
        self.attach_metrics(metrics);
        self
    }
}

/// The listener `with_metrics` gives a retry or hedging policy: the
/// metrics, beside the listener the policy had (both hear every event), and
/// the gauge of the policy's budget, which reads while the policy lives.
struct Wired {
    metrics: Metrics,
    given: Option<Arc<CallListener>>,
    _budget: Option<Observation>,
}

// ===== impl Wired =====

impl Wired {
    /// The listener of a policy whose shared `parts` are these.
    fn of<D>(metrics: &Metrics, parts: &Parts<D>) -> Self {
        let budget =
            parts.options.budget.as_ref().map(|budget| {
                metrics.observe_budget(metrics.budget_name.clone(), Arc::clone(budget))
            });
        Self {
            metrics: metrics.clone(),
            given: parts.options.listener.clone(),
            _budget: budget,
        }
    }
}

/// NOTE: the end of a whole call is recorded only when wired: a plain
/// `with_listener(metrics)` leaves whole calls to `Metrics::layer`, which
/// would count them a second time.
impl Listener<CallEvent<'_>> for Wired {
    fn on_event(&self, heard: &CallEvent<'_>) {
        if let Some(given) = &self.given {
            given.on_event(heard);
        }
        self.metrics.instruments.record(heard.call, &heard.event);
    }
}

impl fmt::Debug for Wired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wired")
            .field("given", &self.given.is_some())
            .finish_non_exhaustive()
    }
}

// ===== impl ResiliencePolicy =====

impl<D, R, G: Observed> Observed for ResiliencePolicy<D, R, G> {
    /// The same policy recording to `metrics`, with nothing else to wire:
    /// its retry policy's listener (beside any it had:
    /// [`RetryPolicy::with_metrics`](crate::otel::Observed::with_metrics)), its guards' (a circuit breaker's,
    /// overload control's), in place ([`BreakerPolicy::with_metrics`](crate::otel::Observed::with_metrics),
    /// [`OverloadPolicy::with_metrics`](crate::otel::Observed::with_metrics)), the gauges of its circuits, slots
    /// and budget, and the end of every call its service makes,
    /// `http_resilience.call.duration` and `http_resilience.deadline.overruns`
    /// included: the combined service holds the call's deadline, so it sees
    /// every end that [`Metrics::layer`] sees from outside. The layer and
    /// the gRPC layers ([`GrpcLayer`](crate::grpc::GrpcLayer)) made from it
    /// need no other part.
    ///
    /// A policy is wired once: wired again (or put under a [`Metrics::layer`])
    /// it counts every call twice. Set the guard before (one given later with
    /// [`with_guard`](Self::with_guard) is not observed); every other setter,
    /// [`erase`](Self::erase) included, keeps the wiring.
    ///
    /// # Example
    ///
    /// ```
    /// use http::{Request, Response};
    /// use http_resilience::{breaker::BreakerPolicy, presets, otel::{Metrics, Observed}};
    /// use opentelemetry::metrics::MeterProvider as _;
    /// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
    /// use std::convert::Infallible;
    /// use tower::{ServiceBuilder, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> Result<(), http_resilience::BoxError> {
    /// let exporter = InMemoryMetricExporter::default();
    /// let provider = SdkMeterProvider::builder()
    ///     .with_reader(PeriodicReader::builder(exporter.clone()).build())
    ///     .build();
    /// let metrics = Metrics::new(&provider.meter("my-client"));
    ///
    /// let policy = presets::standard()
    ///     .with_guard(BreakerPolicy::default())
    ///     .with_metrics(&metrics);
    /// let svc = ServiceBuilder::new()
    ///     .layer(policy.layer())
    ///     .service_fn(|_: Request<String>| async {
    ///         Ok::<_, Infallible>(Response::new(String::new()))
    ///     });
    /// // The breaker's gauge reads its circuits while the service keeps them.
    /// svc.clone().oneshot(Request::get("http://api.test/").body(String::new())?).await?;
    ///
    /// provider.force_flush()?;
    /// let exported = exporter.get_finished_metrics()?;
    /// let names: Vec<&str> = exported.last().unwrap().scope_metrics()
    ///     .flat_map(|scope| scope.metrics())
    ///     .map(|metric| metric.name())
    ///     .collect();
    /// for name in [
    ///     "http.client.request.duration",
    ///     "http_resilience.call.duration",
    ///     "http_resilience.breaker.state",
    /// ] {
    ///     assert!(names.contains(&name), "{name} in {names:?}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    fn with_metrics(self, metrics: &Metrics) -> Self {
        self.map_guard(|guard| guard.with_metrics(metrics))
            .map_retry(|retry| retry.with_metrics(metrics))
    }
}

// ===== impl RetryPolicy =====

impl<D, R> Observed for RetryPolicy<D, R> {
    /// The same policy telling `metrics` of every attempt, retry and end of
    /// a call, beside the listener it has, if any (both hear every event),
    /// and observing its budget, if it has one (the gauge
    /// `http_resilience.budget.tokens`, named as
    /// [`Metrics::with_budget_name`] says, for as long as the policy lives).
    ///
    /// Under the three layers, this is the retry's part: [`Metrics::layer`]
    /// goes outermost, around the deadline, since the deadline drops the
    /// retry when it runs out and only a layer outside sees that end; a
    /// breaker or overload control below the retry is its own layer, with a
    /// policy of its own, wired with [`BreakerPolicy::with_metrics`](crate::otel::Observed::with_metrics) and
    /// [`OverloadPolicy::with_metrics`](crate::otel::Observed::with_metrics). In the combined service
    /// ([`ResiliencePolicy::with_metrics`](crate::otel::Observed::with_metrics) does this too) the policy also
    /// records the end of every call. A listener set after this one replaces
    /// both.
    fn with_metrics(self, metrics: &Metrics) -> Self {
        let wired = Wired::of(metrics, self.parts());
        self.map_options(|o| o.with_listener(wired))
    }
}

// ===== impl HedgePolicy =====

#[cfg(feature = "hedge")]
impl<D> Observed for crate::hedge::HedgePolicy<D> {
    /// The same policy telling `metrics` of every copy, hedge and end of a
    /// call, beside the listener it has, if any, and observing its budget,
    /// as [`RetryPolicy::with_metrics`](crate::otel::Observed::with_metrics) does. A hedging stack is a stack of
    /// layers: [`Metrics::layer`] goes outermost, around the deadline (around
    /// the [`GrpcHedgeLayer`](crate::grpc::GrpcHedgeLayer)'s service, which
    /// holds its own), and a breaker inside is wired with
    /// [`BreakerPolicy::with_metrics`](crate::otel::Observed::with_metrics).
    /// The call is then recorded before the hedge layer puts the channel's
    /// endpoint on a request that names only its path: a tonic client made
    /// with `with_origin(service, endpoint.uri().clone())` rather than
    /// `new(service)` gives the call's metrics their server, as its
    /// attempts' have.
    fn with_metrics(self, metrics: &Metrics) -> Self {
        let wired = Wired::of(metrics, self.parts());
        self.map_options(|o| o.with_listener(wired))
    }
}

// ===== impl sealed::Sealed =====

impl sealed::Sealed for () {
    fn attach_metrics(&self, _: &Metrics) {}
}

impl<G: sealed::Sealed> sealed::Sealed for Option<G> {
    fn attach_metrics(&self, metrics: &Metrics) {
        if let Some(guard) = self {
            guard.attach_metrics(metrics);
        }
    }
}

impl<A: sealed::Sealed, B: sealed::Sealed> sealed::Sealed for (A, B) {
    fn attach_metrics(&self, metrics: &Metrics) {
        self.0.attach_metrics(metrics);
        self.1.attach_metrics(metrics);
    }
}

impl<D> sealed::Sealed for BreakerPolicy<D> {
    fn attach_metrics(&self, metrics: &Metrics) {
        self.attach(Arc::new(metrics.clone()));
    }
}

impl sealed::Sealed for OverloadPolicy {
    fn attach_metrics(&self, metrics: &Metrics) {
        self.attach(Arc::new(metrics.clone()));
    }
}

/// NOTE: nothing to attach: an injected outcome is recorded as the
/// upstream's, which is what it stands for.
#[cfg(feature = "fault")]
impl sealed::Sealed for crate::fault::FaultPolicy {
    fn attach_metrics(&self, _: &Metrics) {}
}

impl sealed::Sealed for RateLimitPolicy {
    fn attach_metrics(&self, metrics: &Metrics) {
        self.attach(Arc::new(metrics.clone()));
    }
}
