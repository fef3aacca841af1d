use super::{Fallback, FallbackPolicy};
use tower_layer::Layer;

/// Answers the failures its policy names with the policy's response, for
/// the requests that opt in ([`AcceptFallback`](super::AcceptFallback)).
///
/// See the [module docs](super) for where it goes and an example.
#[derive(Debug, Clone)]
pub struct FallbackLayer {
    policy: FallbackPolicy,
}

// ===== impl FallbackLayer =====

impl FallbackLayer {
    /// A layer that falls back as `policy` says.
    pub const fn new(policy: FallbackPolicy) -> Self {
        Self { policy }
    }
}

impl<S> Layer<S> for FallbackLayer {
    type Service = Fallback<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Fallback::new(inner, self.policy.clone())
    }
}
