//! What every part of the crate reads of gRPC's wire, with or without the
//! `grpc` feature: a head's `grpc-status` (overload control reads
//! `RESOURCE_EXHAUSTED`, a verdict names its code).

use http::{HeaderMap, HeaderName};

/// `grpc-status`.
pub(crate) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// `grpc-retry-pushback-ms`: the server's word on when to retry, or not to.
#[cfg(any(feature = "grpc", feature = "fault"))]
pub(crate) const GRPC_RETRY_PUSHBACK_MS: HeaderName =
    HeaderName::from_static("grpc-retry-pushback-ms");

/// `grpc-previous-rpc-attempts`: how many attempts came before this one.
#[cfg(feature = "grpc")]
pub(crate) const GRPC_PREVIOUS_RPC_ATTEMPTS: HeaderName =
    HeaderName::from_static("grpc-previous-rpc-attempts");

/// The codes gRPC defines, by number, with their canonical names (those of
/// gRPC's `statuscodes.md`, which service configs use).
const CODE_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The canonical name of the gRPC code `code`, if gRPC defines it.
pub(crate) fn grpc_code_name(code: i32) -> Option<&'static str> {
    usize::try_from(code)
        .ok()
        .and_then(|i| CODE_NAMES.get(i).copied())
}

/// The gRPC code named `name` (`"UNAVAILABLE"`, in any case), if gRPC
/// defines it.
#[cfg(feature = "grpc")]
pub(crate) fn grpc_code_by_name(name: &str) -> Option<i32> {
    CODE_NAMES
        .iter()
        .position(|known| known.eq_ignore_ascii_case(name))
        .and_then(|i| i32::try_from(i).ok())
}

/// `grpc-status`, to look up by reference.
///
/// NOTE: a `static`, not the constant: a name looked up by value (or by a
/// reference to a constant, a temporary) is copied and dropped on every
/// lookup, a call through its bytes' vtable.
static GRPC_STATUS_NAME: HeaderName = GRPC_STATUS;

/// The gRPC code in a head's `grpc-status`, if it has a well-formed one.
pub(crate) fn grpc_status_of(headers: &HeaderMap) -> Option<i32> {
    parse_status(headers.get(&GRPC_STATUS_NAME)?.as_bytes())
}

/// A `grpc-status` value: `1*DIGIT` (gRPC's PROTOCOL-HTTP2.md), no sign,
/// so that `-0` is malformed rather than `OK`.
pub(crate) fn parse_status(bytes: &[u8]) -> Option<i32> {
    if bytes.first() == Some(&b'-') {
        return None;
    }
    parse_ascii_int(bytes)
}

/// A signed 32-bit decimal: an optional `-` and one or more ASCII digits,
/// nothing else (no sign `+`, no spaces), as gRPC writes its integers.
pub(crate) fn parse_ascii_int(bytes: &[u8]) -> Option<i32> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}
