//! The upstream of a gRPC layer's calls, for the requests that name none.

use super::error::InvalidEndpoint;
use http::uri::{Authority, PathAndQuery, Scheme};

/// The scheme and authority of a channel's endpoint, given to every request
/// whose URI has no authority.
///
/// A tonic client made with `new(channel)` sends its calls with the path
/// alone (`/pkg.Svc/Method`); the channel puts its own origin on them below
/// every layer. Without this, the layers above the channel (the breaker,
/// overload control, the spans' `server.address`) see no upstream, and every
/// channel's calls share one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    scheme: Scheme,
    authority: Authority,
}

// ===== impl Endpoint =====

impl Endpoint {
    /// The scheme and authority of `uri` (its path, if any, is not used).
    pub(crate) fn of(uri: &http::Uri) -> Result<Self, InvalidEndpoint> {
        match (uri.scheme(), uri.authority()) {
            (Some(scheme), Some(authority)) => Ok(Self {
                scheme: scheme.clone(),
                authority: authority.clone(),
            }),
            _ => Err(InvalidEndpoint::new(uri.clone())),
        }
    }

    /// Gives `request` the endpoint's scheme and authority when its URI has
    /// no authority; a request that names its upstream keeps its URI.
    ///
    /// NOTE: tonic's `Channel` sets the scheme and authority of every request
    /// to its endpoint's (or its `origin`'s) whatever they were, so the URI
    /// written here is the one the channel would send anyway.
    pub(crate) fn fill<B>(&self, request: &mut http::Request<B>) {
        if request.uri().authority().is_some() {
            return;
        }
        let mut parts = request.uri().clone().into_parts();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        if parts.path_and_query.is_none() {
            parts.path_and_query = Some(PathAndQuery::from_static("/"));
        }
        // NOTE: a scheme, an authority and a path always make a URI; were it
        // refused, the request would keep the URI it came with.
        if let Ok(uri) = http::Uri::from_parts(parts) {
            *request.uri_mut() = uri;
        }
    }
}

/// Gives `request` the scheme and authority of `endpoint`, if there is one
/// (see [`Endpoint::fill`]).
pub(crate) fn fill<B>(endpoint: Option<&Endpoint>, request: &mut http::Request<B>) {
    if let Some(endpoint) = endpoint {
        endpoint.fill(request);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(uri: &'static str) -> http::Request<()> {
        http::Request::post(uri).body(()).unwrap()
    }

    #[test]
    fn a_path_gets_the_endpoint() {
        let endpoint = Endpoint::of(&http::Uri::from_static("http://10.0.0.7:50051")).unwrap();
        let mut call = request("/grpc.health.v1.Health/Check?x=1");
        endpoint.fill(&mut call);
        assert_eq!(
            call.uri(),
            "http://10.0.0.7:50051/grpc.health.v1.Health/Check?x=1"
        );
    }

    #[test]
    fn a_full_uri_keeps_its_own() {
        let endpoint = Endpoint::of(&http::Uri::from_static("http://10.0.0.7:50051")).unwrap();
        let mut call = request("https://other.test/pkg.Svc/M");
        endpoint.fill(&mut call);
        assert_eq!(call.uri(), "https://other.test/pkg.Svc/M");
    }

    #[test]
    fn the_endpoint_path_is_not_used() {
        let endpoint = Endpoint::of(&http::Uri::from_static("https://api.test/prefix")).unwrap();
        let mut call = request("/pkg.Svc/M");
        endpoint.fill(&mut call);
        assert_eq!(call.uri(), "https://api.test/pkg.Svc/M");
    }

    #[test]
    fn a_uri_without_scheme_or_authority_is_refused() {
        for uri in ["/pkg.Svc/M", "10.0.0.7:50051"] {
            let uri: http::Uri = uri.parse().unwrap();
            assert_eq!(Endpoint::of(&uri), Err(InvalidEndpoint::new(uri.clone())));
        }
    }

    #[test]
    fn no_endpoint_leaves_the_request_alone() {
        let mut call = request("/pkg.Svc/M");
        fill(None, &mut call);
        assert_eq!(call.uri(), "/pkg.Svc/M");
    }
}
