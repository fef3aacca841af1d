//! The layer of the combined service.

use super::{future::Limits, Resilience};
use crate::{guard::Guard, retry::RetryPolicy};
use std::{fmt, sync::Arc};
use tower_layer::Layer;

/// Makes [`Resilience`] around a service: the semantics of
/// [`DeadlineLayer`](crate::DeadlineLayer) →
/// [`StatusRetryLayer`](crate::StatusRetryLayer) →
/// [`AttemptTimeoutLayer`](crate::AttemptTimeoutLayer) in one service.
///
/// See [`ResiliencePolicy`](super::ResiliencePolicy) for an example.
pub struct ResilienceLayer<D, R, G = ()> {
    pub(super) limits: Arc<Limits>,
    pub(super) policy: Arc<RetryPolicy<D, R>>,
    pub(super) guard: G,
}

impl<D, R, G: Clone> Clone for ResilienceLayer<D, R, G> {
    fn clone(&self) -> Self {
        Self {
            limits: Arc::clone(&self.limits),
            policy: Arc::clone(&self.policy),
            guard: self.guard.clone(),
        }
    }
}

impl<D: fmt::Debug, R: fmt::Debug, G: fmt::Debug> fmt::Debug for ResilienceLayer<D, R, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResilienceLayer")
            .field("deadline", &self.limits.deadline)
            .field("attempt_timeout", &self.limits.attempt)
            .field("final_uses_deadline", &self.limits.final_uses_deadline)
            .field("retry", &self.policy)
            .field("guard", &self.guard)
            .finish()
    }
}

impl<S, D, R, G: Guard> Layer<S> for ResilienceLayer<D, R, G> {
    type Service = Resilience<S, D, R, G>;

    fn layer(&self, inner: S) -> Self::Service {
        Resilience {
            inner,
            limits: Arc::clone(&self.limits),
            policy: Arc::clone(&self.policy),
            guard: self.guard.clone(),
            local: G::Local::default(),
        }
    }
}
