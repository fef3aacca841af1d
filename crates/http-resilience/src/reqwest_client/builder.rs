//! [`ResilientRequestBuilder`]: reqwest's request builder, sent through the
//! layers.

use super::{client::execute, Error, RequestBody};
use crate::BoxError;
use bytes::Bytes;
use http::{Extensions, HeaderMap, HeaderName, HeaderValue};
use std::{fmt, time::Duration};
use tower_service::Service;

/// A request being built, to send through a
/// [`ResilientClient`](super::ResilientClient)'s stack.
///
/// The methods are reqwest's `RequestBuilder`'s, passed to it as they are;
/// [`map_reqwest`](Self::map_reqwest) reaches any other (`multipart`, or
/// `json` without this crate's feature). [`extension`](Self::extension) puts
/// a value in the request's extensions for the layers: an
/// [`Idempotency`](crate::policy::Idempotency), a
/// [`RequestDeadline`](crate::RequestDeadline), a
/// [`RetryReport`](crate::RetryReport), ...
///
/// See the [module docs](super) for an example.
#[must_use = "a request builder does nothing until it is sent"]
pub struct ResilientRequestBuilder<S> {
    builder: reqwest::RequestBuilder,
    service: S,
    extensions: Extensions,
    cap: usize,
}

// ===== impl ResilientRequestBuilder =====

impl<S> ResilientRequestBuilder<S> {
    pub(super) fn new(builder: reqwest::RequestBuilder, service: S, cap: usize) -> Self {
        Self {
            builder,
            service,
            extensions: Extensions::new(),
            cap,
        }
    }

    fn with(mut self, f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder) -> Self {
        self.builder = f(self.builder);
        self
    }

    /// Adds a header (`RequestBuilder::header`).
    pub fn header<K, V>(self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.with(|builder| builder.header(key, value))
    }

    /// Adds the headers of `headers`, replacing those of the same names
    /// (`RequestBuilder::headers`).
    pub fn headers(self, headers: HeaderMap) -> Self {
        self.with(|builder| builder.headers(headers))
    }

    /// HTTP basic authentication (`RequestBuilder::basic_auth`).
    pub fn basic_auth<U, P>(self, username: U, password: Option<P>) -> Self
    where
        U: fmt::Display,
        P: fmt::Display,
    {
        self.with(|builder| builder.basic_auth(username, password))
    }

    /// A bearer token (`RequestBuilder::bearer_auth`).
    pub fn bearer_auth<T: fmt::Display>(self, token: T) -> Self {
        self.with(|builder| builder.bearer_auth(token))
    }

    /// The body (`RequestBuilder::body`): bytes in memory are sent again by
    /// every attempt; a stream (`reqwest::Body::wrap_stream`) is kept up to
    /// the client's replay cap for a retry.
    pub fn body<T: Into<reqwest::Body>>(self, body: T) -> Self {
        self.with(|builder| builder.body(body))
    }

    /// The longest this call may take, waits and response body included: the
    /// request's [`RequestDeadline`](crate::RequestDeadline), counted from
    /// `send`. The stack's own deadline still applies; the earlier ends the
    /// call.
    pub fn timeout(self, timeout: Duration) -> Self {
        self.with(|builder| builder.timeout(timeout))
    }

    /// Query parameters (`RequestBuilder::query`; feature `reqwest-query`).
    #[cfg(feature = "reqwest-query")]
    #[cfg_attr(docsrs, doc(cfg(feature = "reqwest-query")))]
    pub fn query<T: serde::Serialize + ?Sized>(self, query: &T) -> Self {
        self.with(|builder| builder.query(query))
    }

    /// A form body (`RequestBuilder::form`; feature `reqwest-form`).
    #[cfg(feature = "reqwest-form")]
    #[cfg_attr(docsrs, doc(cfg(feature = "reqwest-form")))]
    pub fn form<T: serde::Serialize + ?Sized>(self, form: &T) -> Self {
        self.with(|builder| builder.form(form))
    }

    /// A JSON body (`RequestBuilder::json`; feature `reqwest-json`).
    #[cfg(feature = "reqwest-json")]
    #[cfg_attr(docsrs, doc(cfg(feature = "reqwest-json")))]
    pub fn json<T: serde::Serialize + ?Sized>(self, json: &T) -> Self {
        self.with(|builder| builder.json(json))
    }

    /// Calls `f` with reqwest's builder: any method reqwest offers, with the
    /// features the application turned on.
    ///
    /// ```no_run
    /// # fn with(client: http_resilience::reqwest_client::ResilientClient<http_resilience::reqwest_client::ReqwestService>) {
    /// let request = client
    ///     .post("http://127.0.0.1:8080/orders")
    ///     .map_reqwest(|builder| builder.header("x-trace", "on").body("{}"));
    /// # let _ = request;
    /// # }
    /// ```
    pub fn map_reqwest(
        self,
        f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Self {
        self.with(f)
    }

    /// Puts `value` in the request's extensions, where the layers read it.
    pub fn extension<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Sends the request through the stack.
    ///
    /// # Errors
    ///
    /// [`Error`] when the request could not be built (reqwest's builder
    /// error), when the last attempt failed in reqwest (the `reqwest::Error`
    /// is kept), or when the layers ended the call (the deadline, an attempt
    /// or read timeout, an open circuit, a body that could not be sent
    /// again). Statuses are not errors: a 503 the retries did not get past
    /// comes back as the response.
    pub async fn send<T>(self) -> Result<reqwest::Response, Error>
    where
        S: Service<http::Request<RequestBody>, Response = http::Response<T>>,
        S::Error: Into<BoxError>,
        T: http_body::Body + Send + Sync + 'static,
        T::Data: Into<Bytes>,
        T::Error: Into<BoxError>,
    {
        let request = self.builder.build().map_err(Error::unsent)?;
        execute(self.service, request, self.extensions, self.cap).await
    }
}

impl<S> fmt::Debug for ResilientRequestBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResilientRequestBuilder")
            .field("request", &self.builder)
            .field("extensions", &self.extensions.len())
            .finish_non_exhaustive()
    }
}
