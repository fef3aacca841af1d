//! gRPC outcomes, judged as gRPC's retry design (proposal A6) says.

use super::{
    super::grpc_wire::{grpc_code_name, parse_ascii_int, parse_status},
    Decoder, Reason, Verdict,
};
use crate::{errors::AsError, FailureKind, InvalidSetting};
use http::{HeaderMap, StatusCode};
use std::{fmt, time::Duration};

use super::super::grpc_wire::{GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS};

/// The gRPC code `UNAVAILABLE`, the one retried by default.
const UNAVAILABLE: i32 = 14;

/// Retries gRPC calls as gRPC's retry design (proposal A6) says.
///
/// - **The status** is read from `grpc-status` in the head of a
///   *trailers-only* response, the form a server uses when it ends a call
///   before sending anything. A code in the retryable set (by default
///   `UNAVAILABLE` only) is retried; `OK` is accepted; any other code is
///   returned as it is. A `grpc-status` that is not a number is returned as it
///   is too (gRPC clients read it as a failure, never as a reason to retry).
/// - **A response that brought headers** (HTTP 200 without `grpc-status` in
///   its head) is *committed*: the server has started to answer, and the call
///   is never retried, whatever its trailers say later.
/// - **An HTTP status other than 200** with no `grpc-status` (a proxy's 503)
///   is read as gRPC reads it (`http-grpc-status-mapping.md`: 429, 502, 503
///   and 504 are `UNAVAILABLE`, 400 `INTERNAL`, 401 `UNAUTHENTICATED`, 403
///   `PERMISSION_DENIED`, 404 `UNIMPLEMENTED`, anything else `UNKNOWN`), then
///   judged by its code.
/// - **Server pushback**: on a retryable code, a valid
///   `grpc-retry-pushback-ms` is the wait before the next attempt
///   ([`Verdict::server_delay`]); a negative or malformed value is the server
///   asking not to retry, and the call ends with that response. (A6 also
///   counts such a refusal against the retry throttling; here only outcomes
///   the decoder wants retried take a token from a
///   [`RetryBudget`](crate::policy::RetryBudget).)
/// - **Transport failures** keep the library's rules: a failure the upstream
///   cannot have acted on ([`FailureKind::is_before_send`]: never sent, or an
///   HTTP/2 stream refused unprocessed) is retried; any other is not, nor
///   is an open circuit ([`FailureKind::CircuitOpen`]).
///
/// Every gRPC call is a POST. A retry for a gRPC code is made whatever the
/// method, because configuring a code as retryable is the service owner's
/// word that the server sends it for calls it did not process (A6 leaves the
/// choice of codes to them for that reason); the caller's
/// [`Idempotency::NotIdempotent`](crate::policy::Idempotency) still forbids
/// it. The verdict's reason is [`Reason::GrpcStatus`].
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::{policy::{Decoder, GrpcDecoder}, BoxError};
/// use std::time::Duration;
///
/// let decoder = GrpcDecoder::default();
/// let judge = |response: Response<()>| Decoder::<(), BoxError>::decode(&decoder, &Ok(response));
/// let trailers_only = |code: &str| Response::builder().header("grpc-status", code);
///
/// assert!(judge(trailers_only("14").body(()).unwrap()).is_retry());
/// assert!(!judge(trailers_only("5").body(()).unwrap()).is_retry(), "NOT_FOUND");
/// let pushback = trailers_only("14").header("grpc-retry-pushback-ms", "250").body(()).unwrap();
/// assert_eq!(judge(pushback).server_delay(), Some(Duration::from_millis(250)));
/// let refused = trailers_only("14").header("grpc-retry-pushback-ms", "-1").body(()).unwrap();
/// assert!(!judge(refused).is_retry());
/// // Headers first: committed.
/// assert!(judge(Response::new(())).is_accept());
///
/// // Other codes, by number or as tonic's `Code`.
/// assert_eq!(GrpcDecoder::new(), GrpcDecoder::default(), "UNAVAILABLE only");
/// let decoder = GrpcDecoder::new().with_codes([14, 8])?;
/// assert!(decoder.is_retryable(8));
/// # Ok::<(), BoxError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrpcDecoder {
    /// Bit `c` is set when code `c` is retried.
    retryable: u32,
}

// ===== impl GrpcDecoder =====

impl GrpcDecoder {
    /// A decoder that retries `UNAVAILABLE` only, as A6's example policy and
    /// gRPC's status-code guide advise; [`with_codes`](Self::with_codes)
    /// sets others.
    pub const fn new() -> Self {
        Self {
            retryable: 1 << UNAVAILABLE,
        }
    }

    /// A decoder that retries no code, only calls that never reached the
    /// server: a hedging policy with no `nonFatalStatusCodes`, for which
    /// every status but `OK` ends the call.
    #[cfg(feature = "grpc")]
    pub(crate) const fn none() -> Self {
        Self { retryable: 0 }
    }

    /// The same decoder retrying `codes` instead: numbers in `1..=16`, or
    /// tonic's `Code` values (which convert to their numbers).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `retryable_codes`) when `codes` is empty,
    /// holds `OK` (0), or a number gRPC does not define.
    pub fn with_codes<C: Into<i32>>(
        self,
        codes: impl IntoIterator<Item = C>,
    ) -> Result<Self, InvalidSetting> {
        let mut retryable = 0;
        for code in codes {
            let code = code.into();
            match grpc_code_name(code) {
                Some(_) if code != 0 => retryable |= 1 << code,
                Some(_) => {
                    return Err(InvalidSetting::new(
                        "retryable_codes",
                        "OK (0) is not a failure and cannot be retried",
                    ))
                }
                None => {
                    let err =
                        InvalidSetting::new("retryable_codes", "must be gRPC codes in 1..=16");
                    return Err(err.with_value(code.to_string()));
                }
            }
        }
        if retryable == 0 {
            return Err(InvalidSetting::new(
                "retryable_codes",
                "must name at least one code",
            ));
        }
        Ok(Self { retryable })
    }

    /// Whether the code `code` is retried.
    pub fn is_retryable(&self, code: impl Into<i32>) -> bool {
        u32::try_from(code.into())
            .ok()
            .and_then(|bit| 1_u32.checked_shl(bit))
            .is_some_and(|bit| self.retryable & bit != 0)
    }

    /// The codes retried, by number, lowest first.
    pub(crate) fn retryable_codes(&self) -> impl Iterator<Item = i32> + '_ {
        (1..=16).filter(|&code| self.is_retryable(code))
    }

    /// The verdict on a response head.
    pub(crate) fn decode_response<B>(&self, response: &http::Response<B>) -> Verdict {
        self.decode_head(response.status(), response.headers())
    }

    fn decode_head(&self, status: StatusCode, headers: &HeaderMap) -> Verdict {
        let code = match headers.get(GRPC_STATUS) {
            Some(value) => match parse_status(value.as_bytes()) {
                Some(0) => return Verdict::Accept,
                Some(code) => code,
                None => return Verdict::fail(Reason::Header("grpc-status")),
            },
            // NOTE: headers came first: the call is committed.
            None if status == StatusCode::OK => return Verdict::Accept,
            None => code_of_http_status(status),
        };
        if !self.is_retryable(code) {
            return Verdict::fail(Reason::GrpcStatus(code));
        }
        match headers.get(GRPC_RETRY_PUSHBACK_MS) {
            None => Verdict::retry(Reason::GrpcStatus(code)),
            Some(value) => match parse_ascii_int(value.as_bytes()) {
                Some(ms) if ms >= 0 => Verdict::retry(Reason::GrpcStatus(code))
                    .after(Duration::from_millis(ms.unsigned_abs().into())),
                _ => Verdict::fail(Reason::Header("grpc-retry-pushback-ms")),
            },
        }
    }
}

impl Default for GrpcDecoder {
    /// [`GrpcDecoder::new`]: `UNAVAILABLE` only.
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for GrpcDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.retryable_codes().filter_map(grpc_code_name).collect();
        f.debug_struct("GrpcDecoder")
            .field("retryable_codes", &names)
            .finish()
    }
}

impl<B, E: AsError> Decoder<B, E> for GrpcDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match outcome {
            Ok(response) => self.decode_response(response),
            Err(err) => match FailureKind::of(err.as_error()) {
                kind if kind.is_turned_away() => Verdict::fail(kind),
                kind if kind.is_before_send() => Verdict::retry(kind),
                kind => Verdict::fail(kind),
            },
        }
    }
}

/// The gRPC code of an HTTP status that came without `grpc-status`, as
/// gRPC's `http-grpc-status-mapping.md` gives it.
fn code_of_http_status(status: StatusCode) -> i32 {
    match status.as_u16() {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502 | 503 | 504 => UNAVAILABLE,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{policy::grpc_code_by_name, BoxError};

    fn judge(decoder: &GrpcDecoder, response: http::Response<()>) -> Verdict {
        Decoder::<(), BoxError>::decode(decoder, &Ok(response))
    }

    fn trailers_only(code: &str) -> http::response::Builder {
        http::Response::builder().header(GRPC_STATUS, code)
    }

    #[test]
    fn trailers_only_codes_are_judged_by_the_set() {
        let decoder = GrpcDecoder::default();
        let verdict = judge(&decoder, trailers_only("14").body(()).unwrap());
        assert_eq!(verdict, Verdict::retry(Reason::GrpcStatus(14)));
        for code in ["1", "2", "4", "5", "8", "13", "16", "99"] {
            let verdict = judge(&decoder, trailers_only(code).body(()).unwrap());
            let number = code.parse().unwrap();
            assert_eq!(verdict, Verdict::fail(Reason::GrpcStatus(number)), "{code}");
        }
        assert!(judge(&decoder, trailers_only("0").body(()).unwrap()).is_accept());
    }

    #[test]
    fn a_configured_set_replaces_the_default() {
        let decoder = GrpcDecoder::new().with_codes([8, 10]).unwrap();
        assert!(judge(&decoder, trailers_only("8").body(()).unwrap()).is_retry());
        assert!(judge(&decoder, trailers_only("10").body(()).unwrap()).is_retry());
        assert!(!judge(&decoder, trailers_only("14").body(()).unwrap()).is_retry());
        assert_eq!(decoder.retryable_codes().collect::<Vec<_>>(), [8, 10]);
        assert_eq!(
            format!("{decoder:?}"),
            r#"GrpcDecoder { retryable_codes: ["RESOURCE_EXHAUSTED", "ABORTED"] }"#
        );
    }

    #[test]
    fn nonsense_sets_are_refused() {
        for (codes, message) in [
            (vec![], "retryable_codes must name at least one code"),
            (
                vec![14, 0],
                "retryable_codes OK (0) is not a failure and cannot be retried",
            ),
            (vec![17], "retryable_codes must be gRPC codes in 1..=16"),
            (vec![-1], "retryable_codes must be gRPC codes in 1..=16"),
        ] {
            let err = GrpcDecoder::new().with_codes(codes).unwrap_err();
            assert_eq!(err.to_string(), message);
        }
        assert!(!GrpcDecoder::default().is_retryable(-3));
        assert!(!GrpcDecoder::default().is_retryable(40));
    }

    #[test]
    fn a_response_with_headers_first_is_committed() {
        let decoder = GrpcDecoder::default();
        let headers_first = http::Response::builder()
            .header("content-type", "application/grpc")
            .body(())
            .unwrap();
        assert!(judge(&decoder, headers_first).is_accept());
    }

    #[test]
    fn a_malformed_status_is_returned_as_it_is() {
        let decoder = GrpcDecoder::default();
        for value in ["", "x", "14 ", "+14", "1.4", "99999999999"] {
            let verdict = judge(&decoder, trailers_only(value).body(()).unwrap());
            assert_eq!(
                verdict,
                Verdict::fail(Reason::Header("grpc-status")),
                "{value:?}"
            );
        }
    }

    /// `grpc-status` is `1*DIGIT` (gRPC's PROTOCOL-HTTP2.md); a sign
    /// makes it malformed, and `-0` must not read as `OK`.
    #[test]
    fn a_signed_status_is_malformed_not_ok() {
        let decoder = GrpcDecoder::default();
        for value in ["-0", "-00", "-14"] {
            let verdict = judge(&decoder, trailers_only(value).body(()).unwrap());
            assert_eq!(
                verdict,
                Verdict::fail(Reason::Header("grpc-status")),
                "{value:?}"
            );
        }
        let mut head = http::HeaderMap::new();
        head.insert(GRPC_STATUS, http::HeaderValue::from_static("-0"));
        assert_eq!(crate::policy::grpc_status_of(&head), None);
    }

    #[test]
    fn http_statuses_without_grpc_status_are_read_as_grpc_does() {
        let decoder = GrpcDecoder::default();
        for (status, code) in [
            (429, 14),
            (502, 14),
            (503, 14),
            (504, 14),
            (400, 13),
            (401, 16),
            (403, 7),
            (404, 12),
            (500, 2),
        ] {
            let response = http::Response::builder().status(status).body(()).unwrap();
            let verdict = judge(&decoder, response);
            assert_eq!(verdict.reason(), Some(Reason::GrpcStatus(code)), "{status}");
            assert_eq!(verdict.is_retry(), code == 14, "{status}");
        }
        // `grpc-status` in the head wins over the HTTP status.
        let response = trailers_only("5").status(503).body(()).unwrap();
        assert_eq!(
            judge(&decoder, response),
            Verdict::fail(Reason::GrpcStatus(5))
        );
    }

    #[test]
    fn pushback_sets_the_wait_or_forbids_the_retry() {
        let decoder = GrpcDecoder::default();
        let with = |code: &str, pushback: &str| {
            let response = trailers_only(code)
                .header(GRPC_RETRY_PUSHBACK_MS, pushback)
                .body(())
                .unwrap();
            judge(&decoder, response)
        };
        assert_eq!(with("14", "0").server_delay(), Some(Duration::ZERO));
        assert_eq!(
            with("14", "1500").server_delay(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            with("14", "2147483647").server_delay(),
            Some(Duration::from_millis(2_147_483_647))
        );
        for refusal in ["-1", "-2147483648", "soon", "", "1e3", "+5", "2147483648"] {
            assert_eq!(
                with("14", refusal),
                Verdict::fail(Reason::Header("grpc-retry-pushback-ms")),
                "{refusal:?}"
            );
        }
        // Pushback does not make a code retryable.
        assert_eq!(with("5", "10"), Verdict::fail(Reason::GrpcStatus(5)));
    }

    #[test]
    fn transport_failures_keep_the_library_rules() {
        let decoder = GrpcDecoder::default();
        let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
        let verdict = Decoder::<(), BoxError>::decode(&decoder, &Err(refused));
        assert_eq!(verdict, Verdict::retry(FailureKind::ConnectRefused));
        let reset: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionReset).into();
        let verdict = Decoder::<(), BoxError>::decode(&decoder, &Err(reset));
        assert!(!verdict.is_retry(), "{verdict}");
    }

    #[test]
    fn names_round_trip() {
        for code in 0..=16 {
            let name = grpc_code_name(code).unwrap();
            assert_eq!(grpc_code_by_name(name), Some(code));
            assert_eq!(grpc_code_by_name(&name.to_ascii_lowercase()), Some(code));
        }
        assert_eq!(grpc_code_name(17), None);
        assert_eq!(grpc_code_name(-1), None);
        assert_eq!(grpc_code_by_name("SOON"), None);
    }
}
