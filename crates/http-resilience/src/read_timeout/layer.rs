use super::ReadTimeout;
use std::time::Duration;
use tower_layer::Layer;

/// Bounds every wait for data from the upstream: for the response head, and
/// between body frames.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone, Copy)]
pub struct ReadTimeoutLayer {
    limit: Duration,
}

// ===== impl ReadTimeoutLayer =====

impl ReadTimeoutLayer {
    /// A layer that allows waits of at most `limit` for data.
    ///
    /// Every limit is accepted. With a zero limit any read that has to wait
    /// fails; a limit too long to count from now (`Duration::MAX`) is held to
    /// about thirty years, which is no limit in practice.
    pub const fn new(limit: Duration) -> Self {
        Self { limit }
    }
}

impl<S> Layer<S> for ReadTimeoutLayer {
    type Service = ReadTimeout<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ReadTimeout::new(inner, self.limit)
    }
}
