//! Connectors that give connect failures a type: name resolution, TCP, TLS.

use crate::{
    transport::error::{DnsError, TcpError, TlsError},
    BoxError,
};
use hyper_util::client::legacy::connect::{
    dns::{GaiResolver, Name},
    HttpConnector,
};
use pin_project_lite::pin_project;
use std::{
    fmt,
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

impl<R> Service<Name> for TypedResolver<R>
where
    R: Service<Name>,
    R::Error: Into<BoxError>,
{
    type Response = R::Response;
    type Error = DnsError;
    type Future = ResolveFuture<R::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner
            .poll_ready(cx)
            .map_err(|err| DnsError::new(String::new(), err.into()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        ResolveFuture {
            future: self.inner.call(name.clone()),
            name,
        }
    }
}

pin_project! {
    /// Response future of [`TypedResolver`]: the inner resolver's, with a
    /// failure turned into a [`DnsError`] naming the host.
    pub struct ResolveFuture<F> {
        #[pin]
        future: F,
        name: Name,
    }
}

impl<F> fmt::Debug for ResolveFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResolveFuture")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ResolveFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, DnsError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let host = this.name;
        this.future
            .poll(cx)
            .map_err(|err| DnsError::new(host.as_str().to_owned(), err.into()))
    }
}

pin_project! {
    /// Response future of [`TcpConnector`]: the inner connector's, with a
    /// failure marked as a [`TcpError`].
    pub struct ConnectFuture<F> {
        #[pin]
        future: F,
    }
}

impl<F> fmt::Debug for ConnectFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectFuture").finish_non_exhaustive()
    }
}

impl<F, T, E> Future for ConnectFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, TcpError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().future.poll(cx).map_err(TcpError::new)
    }
}

/// The plain TCP connector of [`Builder`](super::Builder): hyper-util's
/// `HttpConnector` over a [`TypedResolver`], whose failures are marked as
/// [`TcpError`]s, so that a TLS connector around it can tell its own failures
/// from those of the connection beneath (see [`TypedTlsConnector`]).
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
{
    type Response = <HttpConnector<TypedResolver<R>> as Service<http::Uri>>::Response;
    type Error = TcpError;
    type Future = ConnectFuture<<HttpConnector<TypedResolver<R>> as Service<http::Uri>>::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(TcpError::new)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        ConnectFuture {
            future: self.inner.call(uri),
        }
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
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = TlsFuture<C::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(mark_tls)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        TlsFuture {
            future: self.inner.call(uri),
        }
    }
}

pin_project! {
    /// Response future of [`TypedTlsConnector`].
    pub struct TlsFuture<F> {
        #[pin]
        future: F,
    }
}

impl<F> fmt::Debug for TlsFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsFuture").finish_non_exhaustive()
    }
}

impl<F, T, E> Future for TlsFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().future.poll(cx).map_err(mark_tls)
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
