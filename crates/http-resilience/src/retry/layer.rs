use super::{RetryPolicy, StatusRetry};
use std::{fmt, sync::Arc};
use tower_layer::Layer;

/// Retries calls of the inner service as a [`RetryPolicy`] says.
///
/// See the [module docs](super) for an example.
pub struct StatusRetryLayer<P> {
    policy: Arc<P>,
}

// ===== impl StatusRetryLayer =====

impl<D, R> StatusRetryLayer<RetryPolicy<D, R>> {
    /// A layer that retries as `policy` says.
    pub fn new(policy: RetryPolicy<D, R>) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl<P> Clone for StatusRetryLayer<P> {
    fn clone(&self) -> Self {
        Self {
            policy: Arc::clone(&self.policy),
        }
    }
}

impl<P: fmt::Debug> fmt::Debug for StatusRetryLayer<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatusRetryLayer")
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, P> Layer<S> for StatusRetryLayer<P> {
    type Service = StatusRetry<S, P>;

    fn layer(&self, inner: S) -> Self::Service {
        StatusRetry::from_shared(inner, Arc::clone(&self.policy))
    }
}
