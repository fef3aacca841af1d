//! The errors of the transport, each a type of its own, so that
//! [`FailureKind::of`](crate::FailureKind::of) tells them apart by type and
//! never by message.

use crate::{
    errors::{
        classified::{self, Classified},
        AsError,
    },
    BoxError, FailureKind,
};
use std::{error::Error, fmt, sync::Once};

/// Name resolution failed.
///
/// Its message is the same whatever the host; the host is
/// [`host`](Self::host).
#[derive(Debug)]
pub struct DnsError {
    host: String,
    source: BoxError,
}

impl DnsError {
    /// A failure to resolve `host`.
    pub(crate) fn new(host: String, source: BoxError) -> Self {
        static CLASSIFIED: Once = Once::new();
        classified::classify::<Self>(&CLASSIFIED);
        Self { host, source }
    }

    /// The host that did not resolve (empty when the resolver was not ready).
    pub fn host(&self) -> &str {
        &self.host
    }
}

impl fmt::Display for DnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.is_empty() {
            f.pad("dns resolver failed")
        } else {
            f.pad("dns resolution failed")
        }
    }
}

impl Error for DnsError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}

/// Setting up the TCP connection failed (the cause tells how: refused, timed
/// out, ...).
#[derive(Debug)]
pub struct TcpError(BoxError);

impl TcpError {
    /// A TCP failure caused by `source`.
    #[cfg(any(test, feature = "transport"))]
    pub(crate) fn new(source: impl Into<BoxError>) -> Self {
        Self(source.into())
    }
}

impl fmt::Display for TcpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("tcp connect failed")
    }
}

impl Error for TcpError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

/// The upstream closed the connection without sending any response, after
/// the request was sent: Apache HttpClient's `NoHttpResponseException`,
/// "HOST failed to respond". The cause is kept as the source.
///
/// Its message, `upstream failed to respond`, is the same whatever the
/// upstream; the upstream is [`host`](Self::host).
#[derive(Debug)]
pub struct NoResponse {
    host: String,
    source: BoxError,
}

impl NoResponse {
    /// `host` closed the connection without a response; `source` is the
    /// client's own error.
    pub(crate) fn new(host: String, source: BoxError) -> Self {
        Self { host, source }
    }

    /// The upstream, as `host:port`.
    pub fn host(&self) -> &str {
        &self.host
    }
}

impl fmt::Display for NoResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("upstream failed to respond")
    }
}

impl Error for NoResponse {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}

/// The TLS handshake (or another step of a connector above TCP) failed.
#[derive(Debug)]
pub struct TlsError(BoxError);

impl TlsError {
    /// A TLS failure caused by `source`.
    pub(crate) fn new(source: impl Into<BoxError>) -> Self {
        static CLASSIFIED: Once = Once::new();
        classified::classify::<Self>(&CLASSIFIED);
        Self(source.into())
    }
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("tls handshake failed")
    }
}

impl Error for TlsError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.0)
    }
}

impl Classified for DnsError {
    const KIND: FailureKind = FailureKind::Dns;
}

impl Classified for TlsError {
    const KIND: FailureKind = FailureKind::Tls;
}

/// `AsError` for the transport's errors, each looked at as itself.
macro_rules! as_error_itself {
    ($($error:ty),+ $(,)?) => {
        $(
            impl AsError for $error {
                fn as_error(&self) -> &(dyn Error + 'static) {
                    self
                }
            }
        )+
    };
}

as_error_itself!(DnsError, TcpError, NoResponse, TlsError);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_failed_and_the_accessors_where() {
        let dns = DnsError::new("upstream.test".into(), "no such host".into());
        assert_eq!(dns.to_string(), "dns resolution failed");
        assert_eq!(dns.host(), "upstream.test");
        assert_eq!(
            DnsError::new(String::new(), "x".into()).to_string(),
            "dns resolver failed"
        );
        assert_eq!(TcpError::new("x").to_string(), "tcp connect failed");
        assert_eq!(
            TlsError::new("bad certificate").to_string(),
            "tls handshake failed"
        );
        let none = NoResponse::new("127.0.0.1:8080".into(), "closed".into());
        assert_eq!(none.to_string(), "upstream failed to respond");
        assert_eq!(none.host(), "127.0.0.1:8080");
        assert_eq!(format!("{none:>27}"), " upstream failed to respond");
        assert_eq!(none.source().unwrap().to_string(), "closed");
    }
}
