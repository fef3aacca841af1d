//! When a request is safe to send again (RFC 9110, section 9.2.2).

use http::{HeaderName, Method};

/// The header that makes a request idempotent by the caller's promise
/// (IETF draft `httpapi-idempotency-key-header`).
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The caller's word on whether one request is idempotent, as a request
/// extension; it overrides the method and the `Idempotency-Key` header.
///
/// It is a plain value, and it speaks for the operation of the request it is
/// on, exactly as an `Idempotency-Key` header does. A gateway forwarding the
/// same operation may copy it along with the other extensions; a handler that
/// makes a different call should build that request's extensions afresh (a
/// copied `Idempotent` would let a POST that got a 503 be sent again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Idempotency {
    /// Sending this request twice has the effect of sending it once.
    Idempotent,
    /// This request must not be sent twice (a GET with side effects, say).
    NotIdempotent,
}

/// Whether `request` may be sent twice with the effect of once: its
/// [`Idempotency`] extension if it has one, otherwise an idempotent method
/// or an `Idempotency-Key` header.
///
/// A request may be retried automatically when the upstream cannot have acted
/// on it (it was never sent: connecting failed; or an HTTP/2 upstream refused
/// it unprocessed, RFC 9113 section 8.7), or when acting on it twice is
/// the same as once: its method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT,
/// DELETE), it carries an `Idempotency-Key`, or the caller says so with an
/// [`Idempotency`] extension. Apache HttpClient's `DefaultHttpRequestRetryHandler`
/// follows the same rule; its `requestSentRetryEnabled` switch is
/// [`RetryPolicy::retry_sent_requests`](crate::retry::RetryPolicy::retry_sent_requests).
///
/// # Example
///
/// ```
/// use http::Request;
/// use http_resilience::policy::{is_idempotent, Idempotency};
///
/// assert!(is_idempotent(&Request::get("/").body(()).unwrap()));
/// assert!(!is_idempotent(&Request::post("/").body(()).unwrap()));
///
/// let keyed = Request::post("/").header("idempotency-key", "a1b2").body(()).unwrap();
/// assert!(is_idempotent(&keyed));
///
/// let mut marked = Request::post("/").body(()).unwrap();
/// marked.extensions_mut().insert(Idempotency::Idempotent);
/// assert!(is_idempotent(&marked));
/// ```
pub fn is_idempotent<B>(request: &http::Request<B>) -> bool {
    if let Some(said) = request.extensions().get::<Idempotency>() {
        return *said == Idempotency::Idempotent;
    }
    matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE | Method::PUT | Method::DELETE
    ) || request.headers().contains_key(IDEMPOTENCY_KEY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str) -> http::Request<()> {
        http::Request::builder().method(method).body(()).unwrap()
    }

    #[test]
    fn the_rfc_methods_are_idempotent() {
        for method in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
            assert!(is_idempotent(&request(method)), "{method}");
        }
        for method in ["POST", "PATCH", "CONNECT", "PURGE"] {
            assert!(!is_idempotent(&request(method)), "{method}");
        }
    }

    #[test]
    fn the_caller_overrides_both_ways() {
        let mut get = request("GET");
        get.extensions_mut().insert(Idempotency::NotIdempotent);
        assert!(!is_idempotent(&get));
        let mut keyed = request("PATCH");
        keyed
            .headers_mut()
            .insert(IDEMPOTENCY_KEY, "k".parse().unwrap());
        assert!(is_idempotent(&keyed));
        keyed.extensions_mut().insert(Idempotency::NotIdempotent);
        assert!(!is_idempotent(&keyed));
    }
}
