//! A `reqwest::Client` as a tower service, under the layers (feature
//! `reqwest`).
//!
//! [`ReqwestService`] takes an `http::Request<B>` of any `Sync` body `B` (a
//! [`ReplayBody`](crate::body::ReplayBody) or a
//! [`ReopenBody`](crate::body::ReopenBody) included), sends it with the
//! client, and answers an `http::Response<reqwest::Body>` or a
//! [`BoxError`] whose source is the `reqwest::Error`. The decoders and
//! [`FailureKind::of`](crate::FailureKind::of) read reqwest's failures: a
//! connect failure is a connect kind (refused, timed out), a failure while
//! sending or reading is a transport kind.
//!
//! # How it differs from reqwest's own retries
//!
//! reqwest's `retry` module retries without backoff or `Retry-After`, and
//! reqwest-retry ignores `Retry-After`, streaming bodies and a deadline over
//! the body. Under these layers the client should do neither: build it with
//! no timeout of its own (the layers' deadline and attempt timeout bound the
//! call, the body included) and with its retries off
//! (`reqwest::retry::never()`), so that every attempt is one the retry layer
//! counts.
//!
//! # Example
//!
//! ```no_run
//! use http_resilience::{presets, reqwest_client::ReqwestService, BoxError};
//! use tower::{Layer, ServiceExt};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), BoxError> {
//! let client = reqwest::Client::builder().retry(reqwest::retry::never()).build()?;
//! let svc = presets::standard().layer().layer(ReqwestService::new(client));
//! let request = http::Request::get("http://127.0.0.1:8080/value").body(String::new())?;
//! let response = svc.oneshot(request).await?;
//! println!("{}", response.status());
//! # Ok(())
//! # }
//! ```

use crate::BoxError;
use bytes::Bytes;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};
use tower_service::Service;

/// A `reqwest::Client` as a `Service<http::Request<B>>`; see the
/// [module docs](self).
#[derive(Clone)]
pub struct ReqwestService {
    client: reqwest::Client,
}

impl ReqwestService {
    /// Sends requests with `client`.
    pub const fn new(client: reqwest::Client) -> Self {
        Self { client }
    }

    /// The client.
    pub const fn get_ref(&self) -> &reqwest::Client {
        &self.client
    }
}

impl fmt::Debug for ReqwestService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReqwestService").finish_non_exhaustive()
    }
}

impl<B> Service<http::Request<B>> for ReqwestService
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<reqwest::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // NOTE: reqwest's client is always ready: it queues inside.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let client = self.client.clone();
        let request = request.map(reqwest::Body::wrap);
        Box::pin(async move {
            let request = reqwest::Request::try_from(request)?;
            let response = client.execute(request).await?;
            Ok(http::Response::from(response))
        })
    }
}
