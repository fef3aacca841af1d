use super::Deadline;
use std::time::Duration;
use tower_layer::Layer;

/// Bounds a whole call, and the reading of its response body, by one budget.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    budget: Duration,
}

// ===== impl DeadlineLayer =====

impl DeadlineLayer {
    /// A layer that gives every call `budget` in all.
    ///
    /// Every budget is accepted. A zero budget fails every call at once with
    /// [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded), without
    /// calling the inner service; a budget too long to count from now
    /// (`Duration::MAX`) is held to about thirty years, which is no deadline
    /// in practice.
    pub const fn new(budget: Duration) -> Self {
        Self { budget }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Deadline::new(inner, self.budget)
    }
}
