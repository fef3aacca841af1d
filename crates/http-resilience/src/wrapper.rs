//! The one interface to the service inside another.

/// A service that wraps an inner one, as every service this crate's layers
/// make does.
///
/// [`get_ref`](Self::get_ref) reaches the inner service through the
/// wrapper, [`into_inner`](Self::into_inner) takes it back; called on the
/// outermost service of a stack, one layer comes off at each call.
///
/// There is no `get_mut`: the wrapper may have polled the inner service
/// ready, and reaching in mutably behind it would break that readiness;
/// take the service back with [`into_inner`](Self::into_inner) instead.
///
/// # Example
///
/// ```
/// use http_resilience::{
///     attempt_timeout::AttemptTimeout, AttemptTimeoutLayer, DeadlineLayer, Wrapper,
/// };
/// use std::{convert::Infallible, time::Duration};
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let upstream = service_fn(|_: http::Request<()>| async {
///     Ok::<_, Infallible>(http::Response::new("from the upstream"))
/// });
/// let attempt = AttemptTimeoutLayer::new(Duration::from_secs(1));
/// let svc = DeadlineLayer::new(Duration::from_secs(2)).layer(attempt.layer(upstream));
///
/// // The attempt timeout, inside the deadline.
/// let inside: &AttemptTimeout<_> = svc.get_ref();
/// let _ = inside;
///
/// // Both layers taken off: the upstream as it was given, its response
/// // neither bounded nor boxed.
/// let upstream = svc.into_inner().into_inner();
/// let response = upstream.oneshot(http::Request::new(())).await.unwrap();
/// assert_eq!(*response.body(), "from the upstream");
/// # }
/// ```
pub trait Wrapper {
    /// The service it wraps.
    type Inner;

    /// A reference to the inner service.
    fn get_ref(&self) -> &Self::Inner;

    /// Consumes the wrapper, returning the inner service.
    fn into_inner(self) -> Self::Inner;
}
