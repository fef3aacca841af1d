//! Request bodies that can be sent again.

use bytes::Bytes;
use http_body_util::{Empty, Full};

/// A request body that may be copied for another attempt.
///
/// [`StatusRetry`](super::StatusRetry) keeps a copy of the request for a retry
/// only when its body returns `Some` here. A body that cannot be copied (a
/// stream, such as hyper's `Incoming`) still goes through the layer, but its
/// request is attempted once: its outcome is returned whatever the verdict.
///
/// Implemented for the in-memory bodies (`Full`, `Empty`, `String`,
/// `Vec<u8>`, `Bytes`, `&'static str`, `&'static [u8]`, `()`), which are always
/// copied, and for the boxed and streaming bodies of `http-body-util` and hyper,
/// which never are. A body type of one's own implements it in a few lines;
/// a `Clone` body simply returns `Some(self.clone())`.
///
/// # Example
///
/// ```
/// use http_resilience::retry::TryCloneBody;
///
/// #[derive(Clone)]
/// struct Json(String);
///
/// impl TryCloneBody for Json {
///     fn try_clone_body(&self) -> Option<Self> {
///         Some(self.clone())
///     }
/// }
///
/// assert!(Json("{}".into()).try_clone_body().is_some());
/// ```
pub trait TryCloneBody: Sized {
    /// A copy of the body that sends the same bytes, or `None` when it cannot
    /// be replayed.
    fn try_clone_body(&self) -> Option<Self>;
}

/// Implements [`TryCloneBody`] by cloning.
macro_rules! clone_body {
    ($($ty:ty),* $(,)?) => {
        $(
            impl TryCloneBody for $ty {
                fn try_clone_body(&self) -> Option<Self> {
                    Some(self.clone())
                }
            }
        )*
    };
}

clone_body!((), String, Vec<u8>, Bytes, &'static str, &'static [u8]);

impl<D: Clone> TryCloneBody for Full<D> {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
}

impl<D> TryCloneBody for Empty<D> {
    fn try_clone_body(&self) -> Option<Self> {
        Some(Empty::new())
    }
}

impl<D, E> TryCloneBody for http_body_util::combinators::BoxBody<D, E> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

impl<D, E> TryCloneBody for http_body_util::combinators::UnsyncBoxBody<D, E> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

#[cfg(feature = "transport")]
impl TryCloneBody for hyper::body::Incoming {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

/// A copy of `request` for another attempt, if its body can be replayed.
pub(crate) fn try_clone_request<B: TryCloneBody>(
    request: &http::Request<B>,
) -> Option<http::Request<B>> {
    let body = request.body().try_clone_body()?;
    let mut copy = http::Request::new(body);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    Some(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    struct Marker(u8);

    #[test]
    fn copies_every_part_of_the_request() {
        let request = http::Request::builder()
            .method("PUT")
            .uri("http://example.test/a?b=c")
            .version(http::Version::HTTP_2)
            .header("x-one", "1")
            .extension(Marker(7))
            .body(Full::new(Bytes::from_static(b"payload")))
            .unwrap();
        let copy = try_clone_request(&request).expect("a Full body is replayable");
        assert_eq!(copy.method(), "PUT");
        assert_eq!(copy.uri(), "http://example.test/a?b=c");
        assert_eq!(copy.version(), http::Version::HTTP_2);
        assert_eq!(copy.headers()["x-one"], "1");
        assert_eq!(copy.extensions().get::<Marker>(), Some(&Marker(7)));
    }

    #[test]
    fn boxed_bodies_are_not_replayed() {
        use http_body_util::BodyExt;
        let body = Full::new(Bytes::from_static(b"x"))
            .map_err(|never| match never {})
            .boxed_unsync();
        let request: http::Request<
            http_body_util::combinators::UnsyncBoxBody<Bytes, std::io::Error>,
        > = http::Request::new(body);
        assert!(try_clone_request(&request).is_none());
    }
}
