use super::AttemptTimeout;
use std::time::Duration;
use tower_layer::Layer;

/// Applies a fresh time limit to every call of the inner service.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone, Copy)]
pub struct AttemptTimeoutLayer {
    limit: Duration,
}

// ===== impl AttemptTimeoutLayer =====

impl AttemptTimeoutLayer {
    /// A layer that bounds each attempt by `limit`.
    pub const fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

impl<S> Layer<S> for AttemptTimeoutLayer {
    type Service = AttemptTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        AttemptTimeout::new(inner, self.limit)
    }
}
