use super::{RetryPolicy, StatusRetry};
use std::{fmt, sync::Arc};
use tower_layer::Layer;

/// Retries calls of the inner service as a [`RetryPolicy`] says.
///
/// See the [module docs](super) for an example.
pub struct StatusRetryLayer<D, R> {
    policy: Arc<RetryPolicy<D, R>>,
}

// ===== impl StatusRetryLayer =====

impl<D, R> StatusRetryLayer<D, R> {
    /// A layer that retries as `policy` says.
    pub fn new(policy: RetryPolicy<D, R>) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl<D, R> Clone for StatusRetryLayer<D, R> {
    fn clone(&self) -> Self {
        Self {
            policy: Arc::clone(&self.policy),
        }
    }
}

impl<D: fmt::Debug, R: fmt::Debug> fmt::Debug for StatusRetryLayer<D, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatusRetryLayer")
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, D, R> Layer<S> for StatusRetryLayer<D, R> {
    type Service = StatusRetry<S, D, R>;

    fn layer(&self, inner: S) -> Self::Service {
        StatusRetry::from_shared(inner, Arc::clone(&self.policy))
    }
}
