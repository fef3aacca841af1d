//! A hyper-util client with a connect timeout, a read timeout between reads,
//! and no hidden retry (the transport limits of Reactor WebClient's policy).
//!
//! [`Builder`] configures hyper-util's legacy [`Client`] and wraps it in
//! [`ReadTimeout`]:
//!
//! - **connect timeout** (default 1000 ms, as in Reactor WebClient's policy): the limit on setting
//!   up one TCP connection. It does not bound name resolution or a TLS
//!   handshake done by an outer connector. A timeout is
//!   [`FailureKind::ConnectTimeout`](crate::FailureKind::ConnectTimeout).
//! - **read timeout** (default 10 s, OkHttp's default): the longest wait for the
//!   response head, from when the request's body is sent, or for the next body
//!   frame; not a limit on the whole body, nor on the upload.
//!   See [`read_timeout`] for what a read is.
//! - **no hidden retry**: hyper-util resends a request that was canceled before
//!   it was written to a pooled connection; that is turned off, so every
//!   attempt the server sees is one the retry policy made, and request counts
//!   are exact.
//! - **pool timer**: hyper-util's pool only evicts idle connections when it
//!   has a timer, so the builder always sets tokio's.
//! - **HTTP/2**: off by default (HTTP/1.1 only, as no TLS is negotiated
//!   here). [`Builder::http2_only`] speaks HTTP/2 on every connection, with
//!   prior knowledge (h2c) over plain TCP, or under a TLS connector that
//!   negotiated `h2`. A stream the server refuses unprocessed (`RST_STREAM`
//!   `REFUSED_STREAM`, or a `GOAWAY` below it) is
//!   [`FailureKind::Unprocessed`](crate::FailureKind::Unprocessed); hyper-util
//!   never resends it itself, whatever its hidden-retry switch says.
//! - **credentials in the URI**: the userinfo of a URI
//!   (`http://user:password@host/`) is taken out before the request reaches
//!   hyper-util, which would otherwise send no credentials, keep the userinfo
//!   in its pool's keys and log those keys in its `tracing` events, inside the
//!   layers' spans (and send it as the HTTP/2 `:authority`). It goes as
//!   `Authorization: Basic base64(user:password)`, as reqwest's request
//!   builder and curl send it: the user and the password percent-decoded, a
//!   missing password as an empty one, the header marked sensitive, and not
//!   at all when the request already has an `Authorization` header (the URI
//!   loses its userinfo all the same). The decoded bytes are sent as they
//!   are, UTF-8 or not (RFC 7617 leaves the character set to the two ends),
//!   and a `%` not followed by two hexadecimal digits stays a `%`.
//!
//! # Example
//!
//! Besides the crates the README's "Use" section lists, the example needs
//! `http-resilience-mock = "0.1"`, the loopback test server.
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::{BodyExt, Full};
//! use http_resilience::{transport::Builder, FailureKind};
//! use http_resilience_mock::{MockResponse, MockServer};
//! use std::time::Duration;
//! use tower::ServiceExt;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! // A loopback upstream that accepts the request and never answers.
//! let upstream = MockServer::start().await?;
//! upstream.enqueue(MockResponse::no_response());
//!
//! let client = Builder::new()
//!     .connect_timeout(Duration::from_millis(1000))
//!     .read_timeout(Duration::from_millis(100))
//!     .build_http::<Full<Bytes>>()?;
//!
//! let request = http::Request::get(upstream.uri("/value")).body(Full::default())?;
//! let err = client.oneshot(request).await.unwrap_err();
//! assert_eq!(FailureKind::of(&*err), FailureKind::ReadTimeout);
//! assert_eq!(upstream.request_count(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! [`Client`]: hyper_util::client::legacy::Client
//! [`ReadTimeout`]: crate::read_timeout::ReadTimeout

mod connect;
pub mod error;
mod respond;

pub use self::connect::{TcpConnector, TypedResolver, TypedTlsConnector};

use self::respond::{NamesNoResponse, NamesNoResponseFuture};
use crate::{
    read_timeout::{
        self,
        body::ReadTimeoutBody,
        connection::Connection,
        gap::Gap,
        sent::{self, SentBody},
    },
    timer::FAR_FUTURE,
    userinfo, BoxError, InvalidSetting,
};
use hyper::body::Incoming;
use hyper_util::{
    client::legacy::{
        connect::{dns::GaiResolver, Connect, HttpConnector},
        Client,
    },
    rt::{TokioExecutor, TokioTimer},
};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};
use tower_service::Service;

/// The client a [`Builder`] makes: hyper-util's client over the connector
/// `C` (plain TCP by default), sending request bodies of type `B`, with the
/// read timeout around it, and a connection the upstream closed without a
/// response reported as [`NoResponse`](error::NoResponse).
///
/// Its errors are [`BoxError`]s that
/// [`FailureKind::of`](crate::FailureKind::of) tells apart; its response
/// bodies are hyper's, each read within the read timeout.
///
/// A request whose URI carries credentials (`http://user:password@host/`)
/// goes without them in its URI and with them as `Authorization: Basic`,
/// unless it already has an `Authorization` header; see the
/// [module docs](self).
///
/// # Clone
///
/// Cheap: clones share hyper-util's connection pool, as the retry layers'
/// clones of the client do.
pub struct HttpClient<B, C = TcpConnector> {
    inner: NamesNoResponse<Client<C, SentBody<B>>>,
    read_timeout: Duration,
}

impl<B, C: Clone> Clone for HttpClient<B, C> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            read_timeout: self.read_timeout,
        }
    }
}

impl<B, C> fmt::Debug for HttpClient<B, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("read_timeout", &self.read_timeout)
            .finish_non_exhaustive()
    }
}

impl<B, C> Service<http::Request<B>> for HttpClient<B, C>
where
    C: Connect + Clone + Send + Sync + 'static,
    B: http_body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<ReadTimeoutBody<Incoming>>;
    type Error = BoxError;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Err(error) = userinfo::move_to_authorization(&mut request) {
            let error = Some(error.into());
            return ResponseFuture {
                state: State::Refused { error },
            };
        }
        // NOTE: the wait for the head starts once the client has a connection
        // and the body is sent, so that a slow upload is not a read timeout.
        let connection = Connection::new(true, &mut request);
        let (request, sending) = sent::watch(request);
        let connection = connection.with_sending(sending);
        let gap = Gap::new(self.read_timeout);
        let inner =
            read_timeout::future::ResponseFuture::new(self.inner.call(request), gap, connection);
        ResponseFuture {
            state: State::Sent { inner },
        }
    }
}

pin_project! {
    /// Response future of [`HttpClient`].
    pub struct ResponseFuture {
        #[pin]
        state: State,
    }
}

pin_project! {
    #[project = StateProj]
    enum State {
        /// Handed to hyper-util's client.
        Sent {
            #[pin]
            inner: read_timeout::future::ResponseFuture<
                NamesNoResponseFuture<hyper_util::client::legacy::ResponseFuture>,
            >,
        },
        /// Never sent: its URI could not be rebuilt without its userinfo.
        Refused { error: Option<BoxError> },
    }
}

impl Future for ResponseFuture {
    type Output = Result<http::Response<ReadTimeoutBody<Incoming>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Sent { inner } => inner.poll(cx),
            StateProj::Refused { error } => Poll::Ready(Err(error
                .take()
                .expect("ResponseFuture polled after completion"))),
        }
    }
}

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}

/// Builds a hyper-util client with the transport limits of this module.
///
/// Every client it builds sends the credentials of a URI
/// (`http://user:password@host/`) as `Authorization: Basic` and hands the
/// URI to hyper-util without them (see the [module docs](self)).
///
/// See the [module docs](self) for an example.
#[derive(Debug, Clone)]
pub struct Builder {
    connect_timeout: Duration,
    read_timeout: Duration,
    pool_idle_timeout: Option<Duration>,
    pool_max_idle_per_host: usize,
    http2_only: bool,
}

// ===== impl Builder =====

/// The default connect timeout: 1000 ms, as in Reactor WebClient's policy.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(1000);
/// The default read timeout: 10 s, OkHttp's default.
const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time an idle pooled connection is kept: 90 s, hyper-util's.
const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

impl Builder {
    /// A builder with the defaults: a connect timeout of 1000 ms (Reactor
    /// WebClient's), a read timeout of 10 s (OkHttp's), idle pooled
    /// connections kept 90 s (hyper-util's).
    pub fn new() -> Self {
        Self {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            read_timeout: DEFAULT_READ_TIMEOUT,
            pool_idle_timeout: Some(DEFAULT_POOL_IDLE_TIMEOUT),
            pool_max_idle_per_host: usize::MAX,
            http2_only: false,
        }
    }

    /// The limit on setting up one TCP connection; `Duration::MAX` lets
    /// connecting take as long as the operating system allows.
    #[must_use]
    pub fn connect_timeout(mut self, limit: Duration) -> Self {
        self.connect_timeout = limit;
        self
    }

    /// The longest wait for the response head or for the next body frame. A
    /// limit too long to count from now (`Duration::MAX`) is held to about
    /// thirty years, which no read outlives.
    #[must_use]
    pub fn read_timeout(mut self, limit: Duration) -> Self {
        self.read_timeout = limit;
        self
    }

    /// How long an idle pooled connection is kept; `None` keeps it until the
    /// server closes it. A limit above about thirty years is held to thirty
    /// years (hyper-util's pool would overflow the clock with
    /// `Duration::MAX`), which is the same as `None` in practice.
    #[must_use]
    pub fn pool_idle_timeout(mut self, limit: Option<Duration>) -> Self {
        self.pool_idle_timeout = limit;
        self
    }

    /// The most idle connections kept per host; `0` disables pooling.
    #[must_use]
    pub fn pool_max_idle_per_host(mut self, max: usize) -> Self {
        self.pool_max_idle_per_host = max;
        self
    }

    /// Speaks HTTP/2 only (hyper-util's `http2_only`); off by default.
    ///
    /// Over plain `http://` this is HTTP/2 with prior knowledge (h2c): the
    /// client starts every connection with the HTTP/2 preface, so the upstream
    /// must expect it. Under a TLS connector the upstream must accept `h2`.
    /// All requests to one host then share one connection, one stream each.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body_util::Full;
    /// use http_resilience::transport::Builder;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), http_resilience::InvalidSetting> {
    /// let client = Builder::new().http2_only(true).build_http::<Full<Bytes>>()?;
    /// # let _ = client;
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn http2_only(mut self, enabled: bool) -> Self {
        self.http2_only = enabled;
        self
    }

    /// A plain TCP connector with the connect timeout, for use with
    /// [`build`](Self::build) under a TLS connector.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] if the configuration makes no sense (a zero
    /// limit).
    ///
    /// Unlike the connector of [`build_http`](Self::build_http), it accepts
    /// `https://` URIs, since the TLS connector around it handles them.
    ///
    /// Wrap the TLS connector built over it in [`TypedTlsConnector`] to give its
    /// handshake failures a type.
    pub fn http_connector(&self) -> Result<TcpConnector, InvalidSetting> {
        self.connector(GaiResolver::new(), false)
    }

    fn connector<R>(
        &self,
        resolver: R,
        enforce_http: bool,
    ) -> Result<TcpConnector<R>, InvalidSetting> {
        self.validate()?;
        let mut connector = HttpConnector::new_with_resolver(TypedResolver::new(resolver));
        let limit = self.connect_timeout;
        connector.set_connect_timeout((limit != Duration::MAX).then_some(limit));
        connector.set_nodelay(true);
        connector.enforce_http(enforce_http);
        Ok(TcpConnector::new(connector))
    }

    /// Builds a client for plain `http://` URIs.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] if the configuration makes no sense (a zero
    /// limit).
    pub fn build_http<B>(&self) -> Result<HttpClient<B>, InvalidSetting>
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send,
    {
        self.build_http_with_resolver(GaiResolver::new())
    }

    /// Builds a client for plain `http://` URIs that resolves names with
    /// `resolver` (a `tower::Service<Name>`; hyper-util's `GaiResolver` by
    /// default). Its failures become [`DnsError`](error::DnsError)s.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] if the configuration makes no sense (a zero
    /// limit).
    pub fn build_http_with_resolver<B, R>(
        &self,
        resolver: R,
    ) -> Result<HttpClient<B, TcpConnector<R>>, InvalidSetting>
    where
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        TcpConnector<R>: hyper_util::client::legacy::connect::Connect + Clone,
    {
        let connector = self.connector(resolver, true)?;
        self.build(connector)
    }

    /// Builds a client over `connector` (a TLS connector wrapping
    /// [`http_connector`](Self::http_connector), for example).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] if the configuration makes no sense (a zero
    /// limit).
    pub fn build<C, B>(&self, connector: C) -> Result<HttpClient<B, C>, InvalidSetting>
    where
        C: Connect + Clone,
        B: http_body::Body + Send + 'static,
        B::Data: Send,
    {
        self.validate()?;
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(self.pool_idle_timeout.map(|limit| limit.min(FAR_FUTURE)))
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .retry_canceled_requests(false)
            .http2_only(self.http2_only)
            .build(connector);
        Ok(HttpClient {
            inner: NamesNoResponse::new(client),
            read_timeout: self.read_timeout,
        })
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        let zero = |field: &str, value: Option<Duration>| match value {
            Some(limit) if limit.is_zero() => Err(InvalidSetting::new(
                format!("transport.{field}"),
                "must be greater than zero",
            )
            .with_value("0s")),
            _ => Ok(()),
        };
        zero("connect_timeout", Some(self.connect_timeout))?;
        zero("read_timeout", Some(self.read_timeout))?;
        zero("pool_idle_timeout", self.pool_idle_timeout)
    }
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_limits_are_rejected_by_name() {
        let err = Builder::new()
            .read_timeout(Duration::ZERO)
            .http_connector()
            .unwrap_err();
        assert_eq!(err.field(), "transport.read_timeout");
        assert_eq!(
            err.to_string(),
            "transport.read_timeout must be greater than zero"
        );
        let err = Builder::new()
            .connect_timeout(Duration::ZERO)
            .http_connector()
            .unwrap_err();
        assert_eq!(err.field(), "transport.connect_timeout");
        let err = Builder::new()
            .pool_idle_timeout(Some(Duration::ZERO))
            .http_connector()
            .unwrap_err();
        assert_eq!(err.field(), "transport.pool_idle_timeout");
    }

    #[test]
    fn defaults_are_valid() {
        assert!(Builder::default().http_connector().is_ok());
        assert!(Builder::new()
            .connect_timeout(Duration::MAX)
            .pool_idle_timeout(None)
            .http_connector()
            .is_ok());
    }

    // ===== nonsense refused =====

    use crate::transport;
    use bytes::Bytes;
    use http_body_util::Full;

    #[test]
    fn zero_transport_limits_are_refused_by_field() {
        let zero = Duration::ZERO;
        for (builder, field) in [
            (
                transport::Builder::new().connect_timeout(zero),
                "transport.connect_timeout",
            ),
            (
                transport::Builder::new().read_timeout(zero),
                "transport.read_timeout",
            ),
            (
                transport::Builder::new().pool_idle_timeout(Some(zero)),
                "transport.pool_idle_timeout",
            ),
        ] {
            let err = builder.http_connector().unwrap_err();
            assert_eq!(err.field(), field);
            let err = builder.build_http::<Full<Bytes>>().unwrap_err();
            assert_eq!(err.field(), field);
            let resolver = hyper_util::client::legacy::connect::dns::GaiResolver::new();
            let err = builder
                .build_http_with_resolver::<Full<Bytes>, _>(resolver)
                .unwrap_err();
            assert_eq!(err.field(), field);
            let connector = transport::Builder::new().http_connector().unwrap();
            let err = builder.build::<_, Full<Bytes>>(connector).unwrap_err();
            assert_eq!(err.field(), field);
        }
    }
}
