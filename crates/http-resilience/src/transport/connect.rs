//! Connectors that give connect failures a type: name resolution, TCP, TLS.

use crate::{
    transport::error::{DnsError, TcpError, TlsError},
    BoxError,
};
use hyper_util::client::legacy::connect::{
    dns::{GaiResolver, Name},
    HttpConnector,
};
use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};
use tower_service::Service;

/// A resolver whose failures are [`DnsError`]s naming the host.
///
/// hyper-util reports a failed lookup as an untyped "dns error"; wrapping the
/// resolver makes it a type that [`FailureKind::of`](crate::FailureKind::of)
/// recognises as [`FailureKind::Dns`](crate::FailureKind::Dns).
#[derive(Debug, Clone)]
pub struct TypedResolver<R = GaiResolver> {
    inner: R,
}

impl<R> TypedResolver<R> {
    /// Wraps `inner`.
    pub const fn new(inner: R) -> Self {
        Self { inner }
    }
}

/// The future of one of this module's connectors: the inner one's, its
/// failure given a type.
// NOTE: boxed, once per connection (or lookup), so that the connectors need
// no future type of their own.
type Typed<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<R> Service<Name> for TypedResolver<R>
where
    R: Service<Name>,
    R::Error: Into<BoxError>,
    R::Future: Send + 'static,
{
    type Response = R::Response;
    type Error = DnsError;
    type Future = Typed<R::Response, DnsError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|err| DnsError::new(String::new(), err.into()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let future = self.inner.call(name.clone());
        Box::pin(async move {
            future
                .await
                .map_err(|err| DnsError::new(name.as_str().to_owned(), err.into()))
        })
    }
}

/// The plain TCP connector of [`Builder`](super::Builder): hyper-util's
/// `HttpConnector` over a resolver whose failures are [`DnsError`]s naming
/// the host, its own failures marked as [`TcpError`]s, so that a TLS
/// connector around it can tell its own failures from those of the
/// connection beneath (see [`TypedTlsConnector`]).
#[derive(Debug, Clone)]
pub struct TcpConnector<R = GaiResolver> {
    inner: HttpConnector<TypedResolver<R>>,
}

impl<R> TcpConnector<R> {
    pub(crate) fn new(inner: HttpConnector<TypedResolver<R>>) -> Self {
        Self { inner }
    }
}

impl<R> Service<http::Uri> for TcpConnector<R>
where
    HttpConnector<TypedResolver<R>>: Service<http::Uri>,
    <HttpConnector<TypedResolver<R>> as Service<http::Uri>>::Error: Into<BoxError>,
    <HttpConnector<TypedResolver<R>> as Service<http::Uri>>::Future: Send + 'static,
{
    type Response = <HttpConnector<TypedResolver<R>> as Service<http::Uri>>::Response;
    type Error = TcpError;
    type Future = Typed<Self::Response, TcpError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(TcpError::new)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let future = self.inner.call(uri);
        Box::pin(async move { future.await.map_err(TcpError::new) })
    }
}

/// Wraps a TLS connector (one built over [`Builder::http_connector`]) so that
/// its own failures become [`TlsError`]s, while failures of the TCP
/// connection and name resolution beneath keep their types.
///
/// [`Builder::http_connector`]: super::Builder::http_connector
#[derive(Debug, Clone)]
pub struct TypedTlsConnector<C> {
    inner: C,
}

impl<C> TypedTlsConnector<C> {
    /// Wraps the TLS connector `inner`.
    pub const fn new(inner: C) -> Self {
        Self { inner }
    }
}

impl<C> Service<http::Uri> for TypedTlsConnector<C>
where
    C: Service<http::Uri>,
    C::Error: Into<BoxError>,
    C::Future: Send + 'static,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Typed<C::Response, BoxError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(mark_tls)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let future = self.inner.call(uri);
        Box::pin(async move { future.await.map_err(mark_tls) })
    }
}

/// A failure of the connector, as [`TlsError`] unless it came from the TCP
/// connection or name resolution beneath.
fn mark_tls<E: Into<BoxError>>(err: E) -> BoxError {
    let err = err.into();
    let beneath = crate::errors::chain(&*err).any(|e| e.is::<TcpError>() || e.is::<DnsError>());
    if beneath {
        err
    } else {
        TlsError::new(err).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_marking_keeps_failures_from_beneath() {
        let tcp: BoxError =
            TcpError::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)).into();
        assert!(mark_tls(tcp).is::<TcpError>());
        let handshake: BoxError = std::io::Error::from(std::io::ErrorKind::InvalidData).into();
        assert!(mark_tls(handshake).is::<TlsError>());
    }
}
