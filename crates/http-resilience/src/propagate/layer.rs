use super::{
    InheritDeadline, PropagateDeadline, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT,
};
use http::HeaderName;
use std::time::Duration;
use tower_layer::Layer;

/// Writes the budget left for each attempt in a request header.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone)]
pub struct PropagateDeadlineLayer {
    header: HeaderName,
    format: TimeoutFormat,
    attempt_limit: Option<Duration>,
    final_uses_deadline: bool,
}

// ===== impl PropagateDeadlineLayer =====

impl PropagateDeadlineLayer {
    /// A layer that writes the budget in `header` in `format`, with no attempt
    /// limit.
    pub const fn new(header: HeaderName, format: TimeoutFormat) -> Self {
        Self {
            header,
            format,
            attempt_limit: None,
            final_uses_deadline: false,
        }
    }

    /// Envoy's `x-envoy-expected-rq-timeout-ms`, in
    /// [`Millis`](TimeoutFormat::Millis).
    pub const fn envoy() -> Self {
        Self::new(EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis)
    }

    /// gRPC's `grpc-timeout`, in [`Grpc`](TimeoutFormat::Grpc).
    pub const fn grpc() -> Self {
        Self::new(GRPC_TIMEOUT, TimeoutFormat::Grpc)
    }

    /// The same layer, with the budget also capped by `limit`: the limit of the
    /// [`AttemptTimeoutLayer`](crate::attempt_timeout::AttemptTimeoutLayer)
    /// next to it, so that the header says the smaller of the two.
    ///
    /// A limit of `Duration::MAX` is no limit, as a deadline made from a
    /// budget of `Duration::MAX` is none: with neither, no header is written.
    #[must_use]
    pub const fn with_attempt_limit(mut self, limit: Duration) -> Self {
        self.attempt_limit = Some(limit);
        self
    }

    /// Mirrors
    /// [`AttemptTimeoutLayer::final_attempt_uses_deadline`](crate::attempt_timeout::AttemptTimeoutLayer::final_attempt_uses_deadline):
    /// on the final attempt the attempt limit does not cap the budget sent.
    #[must_use]
    pub const fn final_attempt_uses_deadline(mut self) -> Self {
        self.final_uses_deadline = true;
        self
    }
}

impl<S> Layer<S> for PropagateDeadlineLayer {
    type Service = PropagateDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        let mut service = PropagateDeadline::new(inner, self.header.clone(), self.format);
        if let Some(limit) = self.attempt_limit {
            service = service.with_attempt_limit(limit);
        }
        if self.final_uses_deadline {
            service = service.final_attempt_uses_deadline();
        }
        service
    }
}

/// Records the deadline an inbound request carries in a header as its
/// [`RequestDeadline`](crate::RequestDeadline).
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone)]
pub struct InheritDeadlineLayer {
    header: HeaderName,
    format: TimeoutFormat,
}

// ===== impl InheritDeadlineLayer =====

impl InheritDeadlineLayer {
    /// A layer that reads the deadline from `header` in `format`.
    pub const fn new(header: HeaderName, format: TimeoutFormat) -> Self {
        Self { header, format }
    }

    /// Envoy's `x-envoy-expected-rq-timeout-ms`, in
    /// [`Millis`](TimeoutFormat::Millis).
    pub const fn envoy() -> Self {
        Self::new(EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis)
    }

    /// gRPC's `grpc-timeout`, in [`Grpc`](TimeoutFormat::Grpc).
    pub const fn grpc() -> Self {
        Self::new(GRPC_TIMEOUT, TimeoutFormat::Grpc)
    }
}

impl<S> Layer<S> for InheritDeadlineLayer {
    type Service = InheritDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        InheritDeadline::new(inner, self.header.clone(), self.format)
    }
}
