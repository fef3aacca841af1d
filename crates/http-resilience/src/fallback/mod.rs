//! A fallback: a response built from the failure (a cached or default
//! body), for the failures one names and the requests that opt in.
//!
//! A [`FallbackPolicy`] names the failures that fall back (by
//! [`FailureKind`](crate::FailureKind): the deadline, an open circuit,
//! overload, a refused connection; by the status of the last response: a
//! 503 once the retries are spent; or by a predicate over the outcome) and
//! builds the response from the [`Failure`]. Its body is made in memory
//! ([`FallbackBody`], which is the inner service's body
//! for every other response), and it carries a [`FellBack`] in its
//! extensions, which says what it replaced, and the replaced response's
//! [`Attempts`](crate::Attempts), so that the retries made still count.
//!
//! # Opting in
//!
//! **A request falls back only when it carries [`AcceptFallback`] in its
//! extensions.** Every other request gets its failure as it is, whatever
//! the policy names: a write that failed must not read as one that
//! succeeded, so a fallback is the caller's choice, request by request. A
//! client whose every request accepts one inserts the marker in a layer of
//! its own (`ServiceBuilder::map_request`).
//!
//! # Where it goes
//!
//! Outside the whole stack, so that it sees the call's outcome once the
//! retries, hedges and guards are done with it, whichever form the stack
//! takes:
//!
//! ```text
//! FallbackLayer -> DeadlineLayer -> StatusRetryLayer -> [guards] -> AttemptTimeoutLayer -> client
//! FallbackLayer -> ResiliencePolicy::layer()                                              -> client
//! FallbackLayer -> DeadlineLayer -> HedgeLayer       -> [guards] -> AttemptTimeoutLayer -> client
//! ```
//!
//! It reads the response's head only: a body that fails later is not
//! replaced.
//!
//! # Example
//!
//! A cached body for a request that opted in, when the upstream is still
//! shedding load after the retries; the failure itself for one that did
//! not.
//!
//! ```
//! use bytes::Bytes;
//! use http::{Request, Response, StatusCode};
//! use http_body_util::{BodyExt, Full};
//! use http_resilience::{
//!     fallback::{AcceptFallback, FallbackLayer, FallbackPolicy, FellBack},
//!     presets,
//! };
//! use std::convert::Infallible;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let cached = Bytes::from_static(b"[\"cached\"]");
//! let fallback = FallbackPolicy::new(move |_| Response::new(cached.clone()))
//!     .on_status(StatusCode::SERVICE_UNAVAILABLE);
//! let svc = ServiceBuilder::new()
//!     .layer(FallbackLayer::new(fallback))
//!     .layer(presets::reactor().layer())
//!     .service_fn(|_: Request<Full<Bytes>>| async {
//!         // A stand-in for the network: an upstream shedding load.
//!         let response = Response::builder().status(503).body(Full::new(Bytes::new()));
//!         Ok::<_, Infallible>(response.unwrap())
//!     });
//!
//! let opted_in = Request::get("http://api.test/items")
//!     .extension(AcceptFallback)
//!     .body(Full::default())?;
//! let response = svc.clone().oneshot(opted_in).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! let replaced = response.extensions().get::<FellBack>().unwrap().status();
//! assert_eq!(replaced, Some(StatusCode::SERVICE_UNAVAILABLE));
//! assert_eq!(response.into_body().collect().await?.to_bytes(), "[\"cached\"]");
//!
//! let not_opted_in = Request::get("http://api.test/items").body(Full::default())?;
//! let response = svc.oneshot(not_opted_in).await?;
//! assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
//! # Ok(())
//! # }
//! ```

pub mod body;
pub mod future;
mod layer;
mod policy;

pub use self::{
    layer::FallbackLayer,
    policy::{Failure, FallbackPolicy, FellBack},
};

use self::{body::FallbackBody, future::ResponseFuture};
use crate::{BoxError, Wrapper};
use std::task::{Context, Poll};
use tower_service::Service;

/// The marker a request carries in its extensions to accept a fallback:
/// without it, a [`Fallback`] passes every outcome on as it is.
///
/// See the [module docs](self) for an example.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AcceptFallback;

/// Answers the failures its policy names with the policy's response, for
/// the requests that carry [`AcceptFallback`]; every other outcome passes
/// as it is.
///
/// See the [module docs](self) for an example.
#[derive(Debug, Clone)]
pub struct Fallback<S> {
    inner: S,
    policy: FallbackPolicy,
}

// ===== impl Fallback =====

impl<S> Fallback<S> {
    /// Wraps `inner`, falling back as `policy` says.
    pub const fn new(inner: S, policy: FallbackPolicy) -> Self {
        Self { inner, policy }
    }

    /// The policy.
    pub const fn policy(&self) -> &FallbackPolicy {
        &self.policy
    }
}

impl<S> Wrapper for Fallback<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, T> Service<http::Request<B>> for Fallback<S>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<FallbackBody<T>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // NOTE: a request that did not opt in costs a look in its
        // extensions, and keeps nothing of the policy.
        let accepts = request.extensions().get::<AcceptFallback>().is_some();
        let policy = accepts.then(|| self.policy.clone());
        ResponseFuture::new(self.inner.call(request), policy)
    }
}

#[cfg(test)]
mod tests;
