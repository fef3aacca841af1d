//! Error types.

use std::{error::Error, fmt};

/// An endpoint given to a gRPC layer
/// ([`GrpcLayer::with_authority`](super::GrpcLayer::with_authority) and its
/// siblings) that names no upstream: a URI without a scheme or without an
/// authority (`/pkg.Svc/Method`, `127.0.0.1:50051`).
///
/// # Example
///
/// ```
/// use http_resilience::{grpc::GrpcLayer, presets};
///
/// let uri: http::Uri = "127.0.0.1:50051".parse()?;
/// let err = GrpcLayer::new(presets::grpc()).with_authority(&uri).unwrap_err();
/// assert_eq!(err.to_string(), "an endpoint needs a scheme and an authority");
/// assert_eq!(err.uri(), &uri);
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidEndpoint {
    uri: http::Uri,
}

// ===== impl InvalidEndpoint =====

impl InvalidEndpoint {
    /// The error for `uri`, which lacks a scheme or an authority.
    pub const fn new(uri: http::Uri) -> Self {
        Self { uri }
    }

    /// The URI that was given.
    pub const fn uri(&self) -> &http::Uri {
        &self.uri
    }
}

impl fmt::Display for InvalidEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("an endpoint needs a scheme and an authority")
    }
}

impl Error for InvalidEndpoint {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_stable_and_the_uri_an_accessor() {
        let uri = http::Uri::from_static("/grpc.health.v1.Health/Check");
        let err = InvalidEndpoint::new(uri.clone());
        assert_eq!(
            err.to_string(),
            "an endpoint needs a scheme and an authority"
        );
        assert_eq!(format!("{err:>45}").trim_start(), err.to_string());
        assert_eq!(err.uri(), &uri);
    }
}
