//! Taking a deadline over from an inbound request.

use super::{error::InvalidTimeoutHeader, TimeoutFormat};
use crate::{RequestDeadline, Wrapper};
use http::HeaderName;
use std::task::{Context, Poll};
use tower_service::Service;

/// Reads the timeout in `header` of `request` as a [`RequestDeadline`] and
/// records it in the request extensions, unless an earlier one is already
/// there; returns the deadline now in force.
///
/// - With the header, the deadline is its duration from now (tokio's clock).
///   A deadline already in the extensions that comes earlier (or at the same
///   instant) is kept; otherwise the header's replaces it.
/// - Without the header, nothing changes, and the deadline already there, if
///   any, is returned.
/// - With more than one value, the first is read.
///
/// # Errors
///
/// [`InvalidTimeoutHeader`] when the value does not match `format` (see
/// [`TimeoutFormat::parse`]); the extensions are then left unchanged.
///
/// # Example
///
/// ```
/// use http::Request;
/// use http_resilience::{
///     propagate::{inherit_deadline, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS},
///     RequestDeadline,
/// };
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let mut request = Request::builder()
///     .header("x-envoy-expected-rq-timeout-ms", "750")
///     .body(())
///     .unwrap();
/// let deadline = inherit_deadline(&mut request, &EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis)
///     .unwrap()
///     .expect("the header is there");
/// assert_eq!(deadline.remaining(), Duration::from_millis(750));
/// assert_eq!(RequestDeadline::of(&request), Some(deadline));
/// # }
/// ```
pub fn inherit_deadline<B>(
    request: &mut http::Request<B>,
    header: &HeaderName,
    format: TimeoutFormat,
) -> Result<Option<RequestDeadline>, InvalidTimeoutHeader> {
    let Some(value) = request.headers().get(header) else {
        return Ok(RequestDeadline::of(request));
    };
    let inherited = RequestDeadline::after(format.parse(value)?);
    let in_force = crate::limits::earliest(RequestDeadline::of(request), inherited);
    request.extensions_mut().insert(in_force);
    Ok(Some(in_force))
}

/// Records the deadline an inbound request carries in a header as its
/// [`RequestDeadline`], for a server stack.
///
/// Every request goes through [`inherit_deadline`]. A malformed header is
/// ignored (and logged with `tracing::debug!`): the request goes on with the
/// deadline it had, if any. The response, the error and the future are the
/// inner service's, unchanged.
///
/// See the [module docs](super) for an example.
#[derive(Debug, Clone)]
pub struct InheritDeadline<S> {
    inner: S,
    header: HeaderName,
    format: TimeoutFormat,
}

// ===== impl InheritDeadline =====

impl<S> InheritDeadline<S> {
    /// Wraps `inner`, reading the deadline from `header` in `format`.
    pub const fn new(inner: S, header: HeaderName, format: TimeoutFormat) -> Self {
        Self {
            inner,
            header,
            format,
        }
    }
}

impl<S> Wrapper for InheritDeadline<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<http::Request<B>> for InheritDeadline<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Err(error) = inherit_deadline(&mut request, &self.header, self.format) {
            tracing::debug!(header = %self.header, %error, "ignoring a malformed inbound timeout");
        }
        self.inner.call(request)
    }
}
