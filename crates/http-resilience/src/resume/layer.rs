use super::{Resume, ResumePolicy};
use tower_layer::Layer;

/// Resumes response bodies that fail part-way, with ranged requests.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResumeLayer {
    policy: ResumePolicy,
}

// ===== impl ResumeLayer =====

impl ResumeLayer {
    /// A layer that resumes bodies as `policy` allows.
    pub const fn new(policy: ResumePolicy) -> Self {
        Self { policy }
    }
}

impl<S> Layer<S> for ResumeLayer {
    type Service = Resume<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Resume::new(inner, self.policy)
    }
}
