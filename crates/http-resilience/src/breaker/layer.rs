use super::{BreakerPolicy, CircuitBreaker};
use std::fmt;
use tower_layer::Layer;

/// Wraps the inner service in a [`CircuitBreaker`] whose circuits every
/// clone of this layer (and of its policy) shares.
///
/// See the [module docs](super) for an example.
pub struct CircuitBreakerLayer<D> {
    policy: BreakerPolicy<D>,
}

// ===== impl CircuitBreakerLayer =====

impl<D> CircuitBreakerLayer<D> {
    /// A layer that breaks circuits as `policy` says.
    pub const fn new(policy: BreakerPolicy<D>) -> Self {
        Self { policy }
    }

    /// The policy, whose [`state`](BreakerPolicy::state) reads the circuits.
    pub const fn policy(&self) -> &BreakerPolicy<D> {
        &self.policy
    }
}

impl<D> Clone for CircuitBreakerLayer<D> {
    fn clone(&self) -> Self {
        Self {
            policy: self.policy.clone(),
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for CircuitBreakerLayer<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CircuitBreakerLayer")
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, D> Layer<S> for CircuitBreakerLayer<D> {
    type Service = CircuitBreaker<S, D>;

    fn layer(&self, inner: S) -> Self::Service {
        CircuitBreaker::new(inner, self.policy.clone())
    }
}
