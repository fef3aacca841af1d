use super::AttemptTimeout;
use std::time::Duration;
use tower_layer::Layer;

/// Applies a fresh time limit to every call of the inner service.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone, Copy)]
pub struct AttemptTimeoutLayer {
    limit: Duration,
    final_uses_deadline: bool,
}

// ===== impl AttemptTimeoutLayer =====

impl AttemptTimeoutLayer {
    /// A layer that bounds each attempt by `limit`.
    ///
    /// Every limit is accepted. With a zero limit only a response that is
    /// ready at once gets through (the response is polled before the timer);
    /// a limit too long to count from now (`Duration::MAX`) is held to about
    /// thirty years, which is no limit in practice.
    pub const fn new(limit: Duration) -> Self {
        Self {
            limit,
            final_uses_deadline: false,
        }
    }

    /// Lets the last attempt a retry layer can make (marked with
    /// [`FinalAttempt`](crate::extensions::FinalAttempt)) run until the
    /// request's deadline instead of its own limit; see the
    /// [module docs](super). Without a deadline the limit still applies.
    #[must_use]
    pub const fn final_attempt_uses_deadline(mut self) -> Self {
        self.final_uses_deadline = true;
        self
    }
}

impl<S> Layer<S> for AttemptTimeoutLayer {
    type Service = AttemptTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        let service = AttemptTimeout::new(inner, self.limit);
        if self.final_uses_deadline {
            service.final_attempt_uses_deadline()
        } else {
            service
        }
    }
}
