//! The breaker for gRPC calls: failures are judged by their status codes.

use super::BreakerPolicy;
use crate::policy::GrpcDecoder;

/// `UNAVAILABLE`: the server is down or draining.
const UNAVAILABLE: i32 = 14;
/// `RESOURCE_EXHAUSTED`: the server is shedding load (gRPC's 429).
const RESOURCE_EXHAUSTED: i32 = 8;

impl BreakerPolicy<GrpcDecoder> {
    /// The defaults, judging gRPC calls by their codes: `UNAVAILABLE` and
    /// `RESOURCE_EXHAUSTED` are failures, as are transport errors and
    /// attempts that time out; every other code is the server's answer (a
    /// `NOT_FOUND` is no outage), and counts as a success. The codes are
    /// read from a trailers-only response's headers, where a gRPC server
    /// puts an error status; a status that comes in the trailers of a
    /// streamed body is not seen. (A tonic client made with `new` sends
    /// path-only URIs, which have no authority to key on: see the
    /// [`grpc`](crate::grpc) module.)
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::breaker::BreakerPolicy;
    ///
    /// let policy = BreakerPolicy::grpc();
    /// assert!(format!("{policy:?}")
    ///     .contains(r#"decoder: GrpcDecoder { retryable_codes: ["RESOURCE_EXHAUSTED", "UNAVAILABLE"] }"#));
    /// ```
    pub fn grpc() -> Self {
        let decoder = GrpcDecoder::new()
            .with_codes([UNAVAILABLE, RESOURCE_EXHAUSTED])
            .expect("two codes gRPC defines, neither OK");
        Self::new(decoder)
    }
}
