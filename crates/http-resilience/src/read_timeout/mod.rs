//! Bound every wait for data from the upstream: the wait for the response
//! head, and each wait between body frames.
//!
//! This is the transport's *read timeout*, what Reactor Netty calls
//! `responseTimeout`: the longest gap between reads while a response is
//! received, not a limit on the whole body. A response that keeps delivering
//! data may take longer in all; [`Deadline`](crate::deadline::Deadline) bounds
//! the whole.
//!
//! # What a read is
//!
//! hyper and hyper-util have no read timeout of their own, so this layer wraps
//! the client service (as [`transport::Builder`] does) and measures at the
//! level of HTTP messages:
//!
//! - **the head**: from the moment the request is out until the response head
//!   is ready. Setting up a connection is not a read: the connect timeout
//!   bounds it, and a slow connect is reported as a connect timeout, never as
//!   a read timeout. Sending the request's body is not a read either: the
//!   client of [`transport::Builder`] starts the wait once the body is sent,
//!   as Reactor Netty's `responseTimeout` starts once the request is written,
//!   so that an upload slower than the limit is not cut (an upstream that
//!   stops reading the body is bounded by the attempt's limit and the
//!   deadline). [`ReadTimeout::after_connect`], around one's own hyper-util
//!   client, waits for its connection but cannot watch a body it does not
//!   make: its wait includes sending the request. Around any other service
//!   the wait for the head starts when the response future is first polled.
//! - **each body frame**: from the moment a read of the body finds no frame
//!   ready until the next frame arrives. Time spent by the reader between two
//!   reads is not a gap.
//!
//! A timeout fails with [`ReadTimedOut`], which tells which of the two was
//! awaited. Unlike a limit on every socket read at the connector (the approach
//! of the `hyper-timeout` crate), an idle pooled connection is never closed by
//! this timer, and the error is typed rather than an `io::Error`.
//!
//! # Ties
//!
//! The inner future, and the inner body, are polled before the timer: a head
//! or a frame that is ready in the same poll in which the limit expires is
//! taken.
//!
//! # Differences from tower-http's timeouts
//!
//! tower-http's `ResponseBodyTimeoutLayer` is the same idle timer on the body
//! only; it does not cover the wait for the head, and its error is
//! tower-http's. `ReadTimeout` covers both with one error type that
//! [`FailureKind`](crate::FailureKind) recognises.
//!
//! # Example
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::read_timeout::{error::ReadTimedOut, ReadTimeoutLayer};
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let svc = ServiceBuilder::new()
//!     .layer(ReadTimeoutLayer::new(Duration::from_millis(250)))
//!     .service_fn(|_: Request<()>| async {
//!         // An upstream that accepts the request and never answers.
//!         std::future::pending::<Result<Response<String>, Infallible>>().await
//!     });
//!
//! let err = svc.oneshot(Request::new(())).await.unwrap_err();
//! assert!(err.is::<ReadTimedOut>());
//! # }
//! ```
//!
//! [`transport::Builder`]: crate::transport::Builder
//! [`ReadTimeout::after_connect`]: ReadTimeout::after_connect
//! [`ReadTimedOut`]: error::ReadTimedOut

pub mod body;
pub(crate) mod connection;
pub mod error;
pub mod future;
pub(crate) mod gap;
mod layer;
#[cfg(feature = "transport")]
pub(crate) mod sent;

pub use self::layer::ReadTimeoutLayer;

use self::{connection::Connection, future::ResponseFuture, gap::Gap};
use crate::{BoxError, Wrapper};
use std::{
    task::{Context, Poll},
    time::Duration,
};
use tower_service::Service;

/// Bounds every wait for data from the upstream.
///
/// See the [module docs](self) for an example.
#[derive(Debug, Clone, Copy)]
pub struct ReadTimeout<S> {
    inner: S,
    limit: Duration,
    after_connect: bool,
}

// ===== impl ReadTimeout =====

impl<S> ReadTimeout<S> {
    /// Wraps `inner`, allowing waits of at most `limit` for data.
    ///
    /// Every limit is accepted. With a zero limit any read that has to wait
    /// fails; a limit too long to count from now (`Duration::MAX`) is held to
    /// about thirty years, which is no limit in practice.
    pub const fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            after_connect: false,
        }
    }

    /// Wraps hyper-util's client `inner`, allowing waits of at most `limit`
    /// for data; the wait for the head starts only once the client has a
    /// connection for the request, so connecting is never a read. (It
    /// includes sending the request's body, which the client of
    /// [`transport::Builder`](crate::transport::Builder) does not count.)
    ///
    /// Around a service that is not hyper-util's legacy client the head would
    /// never be timed: use [`new`](Self::new) there.
    #[cfg(feature = "transport")]
    pub const fn after_connect(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            after_connect: true,
        }
    }
}

impl<S> Wrapper for ReadTimeout<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, T> Service<http::Request<B>> for ReadTimeout<S>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<body::ReadTimeoutBody<T>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let connection = Connection::new(self.after_connect, &mut request);
        ResponseFuture::new(self.inner.call(request), Gap::new(self.limit), connection)
    }
}

#[cfg(test)]
mod tests;
