//! [`ResilientClient`]: reqwest's request builder in front of the layers.

use super::{Error, RequestBody, ReqwestService, ResilientRequestBuilder};
use crate::{body::DEFAULT_REPLAY_CAP, BoxError, RequestDeadline, RetryReport, Wrapper};
use bytes::Bytes;
use http::{Extensions, Method};
use reqwest::{IntoUrl, Url};
use std::{fmt, future::poll_fn};
use tower_layer::Layer;
use tower_service::Service;

/// A `reqwest::Client` behind a stack of the layers, with reqwest's own
/// request builder: `client.get(url).bearer_auth(token).send().await` gives
/// a `reqwest::Response`, retried and bounded as the stack says.
///
/// `S` is the stack over a [`ReqwestService`]; [`new`](Self::new) makes it
/// from any layer of one: the combined [`ResilienceLayer`](crate::ResilienceLayer)
/// (`presets::standard().layer()`), or the three layers in a
/// `tower::ServiceBuilder`, with a [`ReadTimeoutLayer`](crate::read_timeout::ReadTimeoutLayer)
/// below them for a limit on the gaps between reads. [`from_service`](Self::from_service)
/// takes a stack built some other way.
///
/// Every request is a reqwest request until it is sent: its body is then
/// wrapped in a [`RequestBody`], so that a retry can send it again (bytes
/// in memory always, a stream up to the [replay cap](Self::with_replay_cap)),
/// and a [`RetryReport`] is put in its extensions (unless it has one),
/// which the [`Error`] reads its attempt count from. A request's own
/// reqwest timeout (`RequestBuilder::timeout`) becomes its
/// [`RequestDeadline`]: the earlier of it and the stack's deadline ends the
/// call, the response body included.
///
/// See the [module docs](super) for an example.
///
/// # Clone
///
/// Each call runs on a clone of the stack, so `S` is `Clone`; the stacks of
/// this crate share their policy, budget and circuits between clones, and
/// reqwest's client is a handle to one pool. Clone the `ResilientClient`
/// itself to share it.
#[derive(Clone)]
pub struct ResilientClient<S> {
    client: reqwest::Client,
    inner: S,
    cap: usize,
}

// ===== impl ResilientClient =====

impl<S> ResilientClient<S> {
    /// Puts `layer` over a [`ReqwestService`] of `client`.
    ///
    /// The client should have neither a timeout nor retries of its own
    /// (`reqwest::retry::never()`): the layers bound and count every attempt.
    pub fn new<L>(client: reqwest::Client, layer: L) -> Self
    where
        L: Layer<ReqwestService, Service = S>,
    {
        let inner = layer.layer(ReqwestService::new(client.clone()));
        Self::from_service(client, inner)
    }

    /// Sends through `service`, a stack of `Service<http::Request<RequestBody>>`
    /// built some other way. `client` builds the requests (its default headers
    /// are the ones `service` sends only when `service` sends with it).
    pub const fn from_service(client: reqwest::Client, service: S) -> Self {
        Self {
            client,
            inner: service,
            cap: DEFAULT_REPLAY_CAP,
        }
    }

    /// Keeps up to `cap` bytes of a streamed request body for a retry
    /// (64 KiB, [`DEFAULT_REPLAY_CAP`], unless set). A stream that goes past
    /// the cap is sent once.
    #[must_use]
    pub const fn with_replay_cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }

    /// The reqwest client that builds the requests.
    pub const fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

impl<S> Wrapper for ResilientClient<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone> ResilientClient<S> {
    /// A `GET` request to `url`.
    pub fn get<U: IntoUrl>(&self, url: U) -> ResilientRequestBuilder<S> {
        self.request(Method::GET, url)
    }

    /// A `POST` request to `url`: sent again after it reached the upstream
    /// only with an `Idempotency-Key` header or an
    /// [`Idempotency`](crate::policy::Idempotency) extension.
    pub fn post<U: IntoUrl>(&self, url: U) -> ResilientRequestBuilder<S> {
        self.request(Method::POST, url)
    }

    /// A `PUT` request to `url`.
    pub fn put<U: IntoUrl>(&self, url: U) -> ResilientRequestBuilder<S> {
        self.request(Method::PUT, url)
    }

    /// A `PATCH` request to `url`: not idempotent, as `POST`.
    pub fn patch<U: IntoUrl>(&self, url: U) -> ResilientRequestBuilder<S> {
        self.request(Method::PATCH, url)
    }

    /// A `DELETE` request to `url`.
    pub fn delete<U: IntoUrl>(&self, url: U) -> ResilientRequestBuilder<S> {
        self.request(Method::DELETE, url)
    }

    /// A `HEAD` request to `url`.
    pub fn head<U: IntoUrl>(&self, url: U) -> ResilientRequestBuilder<S> {
        self.request(Method::HEAD, url)
    }

    /// A request of `method` to `url`.
    pub fn request<U: IntoUrl>(&self, method: Method, url: U) -> ResilientRequestBuilder<S> {
        let builder = self.client.request(method, url);
        ResilientRequestBuilder::new(builder, self.inner.clone(), self.cap)
    }

    /// Sends `request` through the stack (reqwest's `Client::execute`): a
    /// request built with reqwest's own builder, from this client's
    /// [`client`](Self::client) (the stack sends with the reqwest client it
    /// was made with, so another client's settings would not apply).
    ///
    /// # Errors
    ///
    /// As [`ResilientRequestBuilder::send`].
    pub async fn execute<T>(&self, request: reqwest::Request) -> Result<reqwest::Response, Error>
    where
        S: Service<http::Request<RequestBody>, Response = http::Response<T>>,
        S::Error: Into<BoxError>,
        T: http_body::Body + Send + Sync + 'static,
        T::Data: Into<Bytes>,
        T::Error: Into<BoxError>,
    {
        let service = self.inner.clone();
        execute(service, request, Extensions::new(), self.cap).await
    }
}

impl<S> fmt::Debug for ResilientClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResilientClient")
            .field("replay_cap", &self.cap)
            .finish_non_exhaustive()
    }
}

/// Sends `request`, with `extensions` added, through `service`.
pub(super) async fn execute<S, T>(
    mut service: S,
    request: reqwest::Request,
    extensions: Extensions,
    cap: usize,
) -> Result<reqwest::Response, Error>
where
    S: Service<http::Request<RequestBody>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    T: http_body::Body + Send + Sync + 'static,
    T::Data: Into<Bytes>,
    T::Error: Into<BoxError>,
{
    let (request, report, url) = prepare(request, extensions, cap)?;
    let outcome = match poll_fn(|cx| service.poll_ready(cx)).await {
        Ok(()) => service.call(request).await,
        Err(err) => Err(err),
    };
    match outcome {
        Ok(response) => Ok(into_reqwest(response, url)),
        Err(err) => Err(Error::new(err.into(), &report, url)),
    }
}

/// The reqwest request as the stack takes it, the report of its attempts, and
/// its URL.
fn prepare(
    request: reqwest::Request,
    extensions: Extensions,
    cap: usize,
) -> Result<(http::Request<RequestBody>, RetryReport, Url), Error> {
    let url = request.url().clone();
    let timeout = request.timeout().copied();
    let request = http::Request::<reqwest::Body>::try_from(request).map_err(Error::unsent)?;
    let (mut parts, body) = request.into_parts();
    parts.extensions.extend(extensions);
    if let Some(timeout) = timeout {
        let own = RequestDeadline::after(timeout);
        let existing = parts.extensions.get::<RequestDeadline>().copied();
        parts
            .extensions
            .insert(crate::limits::earliest(existing, own));
    }
    let report = match parts.extensions.get::<RetryReport>() {
        Some(report) => report.clone(),
        None => {
            let report = RetryReport::new();
            parts.extensions.insert(report.clone());
            report
        }
    };
    let body = RequestBody::with_cap(body, cap);
    Ok((http::Request::from_parts(parts, body), report, url))
}

/// The stack's response as a `reqwest::Response`, its extensions kept, and
/// its URL the one the transport recorded (after redirects), or else `url`.
fn into_reqwest<T>(response: http::Response<T>, url: Url) -> reqwest::Response
where
    T: http_body::Body + Send + Sync + 'static,
    T::Data: Into<Bytes>,
    T::Error: Into<BoxError>,
{
    let (mut parts, body) = response.into_parts();
    // NOTE: a later insert wins, so the transport's URL, when the response
    // carries one, replaces the request's.
    let mut extensions = url_extension(url);
    extensions.extend(std::mem::take(&mut parts.extensions));
    parts.extensions = extensions;
    let body = reqwest::Body::wrap(body);
    reqwest::Response::from(http::Response::from_parts(parts, body))
}

/// Extensions holding `url` where `reqwest::Response::from` looks for it.
///
/// NOTE: reqwest keeps that type private; its `ResponseBuilderExt` is the
/// one way to set it.
pub(super) fn url_extension(url: Url) -> Extensions {
    use reqwest::ResponseBuilderExt;
    http::Response::builder()
        .url(url)
        .body(())
        .map(|response| response.into_parts().0.extensions)
        .unwrap_or_default()
}
