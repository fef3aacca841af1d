use super::{CallMetrics, Metrics};
use tower_layer::Layer;

/// Records every call of the inner service: `http_resilience.call.duration`,
/// and `http_resilience.deadline.overruns` for a call its deadline ended.
/// Made by [`Metrics::layer`]; it goes outermost, around the
/// [`DeadlineLayer`](crate::DeadlineLayer) or the combined service.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone)]
pub struct CallMetricsLayer {
    metrics: Metrics,
}

// ===== impl CallMetricsLayer =====

impl CallMetricsLayer {
    /// The layer recording to `metrics` (made by [`Metrics::layer`]).
    pub(crate) const fn new(metrics: Metrics) -> Self {
        Self { metrics }
    }
}

impl<S> Layer<S> for CallMetricsLayer {
    type Service = CallMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallMetrics::new(inner, self.metrics.clone())
    }
}
