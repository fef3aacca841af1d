//! The ready-made decoders, outcome by outcome.

use super::{header::Part, *};
use crate::FailureKind;
use crate::{attempt_timeout::error::AttemptTimedOut, deadline::error::DeadlineExceeded, BoxError};
use http::StatusCode;
use std::{io, time::Duration};

type Outcome = Result<http::Response<()>, BoxError>;

fn response(status: u16) -> Outcome {
    Ok(http::Response::builder().status(status).body(()).unwrap())
}

fn with_header(status: u16, name: &str, value: &str) -> Outcome {
    Ok(http::Response::builder()
        .status(status)
        .header(name, value)
        .body(())
        .unwrap())
}

fn error(err: impl Into<BoxError>) -> Outcome {
    Err(err.into())
}

fn status(code: u16) -> StatusCode {
    StatusCode::from_u16(code).unwrap()
}

#[test]
fn status_decoder_retries_only_listed_statuses() {
    let decoder = StatusDecoder::new([503, 429]).unwrap();
    assert_eq!(decoder.decode(&response(503)), Verdict::retry(status(503)));
    assert_eq!(decoder.decode(&response(429)), Verdict::retry(status(429)));
    for code in [100, 200, 204, 302] {
        assert_eq!(decoder.decode(&response(code)), Verdict::Accept, "{code}");
    }
    for code in [400, 404, 500, 502, 504, 599] {
        assert_eq!(
            decoder.decode(&response(code)),
            Verdict::fail(status(code)),
            "{code}"
        );
    }
}

#[test]
fn status_decoder_fails_errors() {
    let decoder = StatusDecoder::new([503]).unwrap();
    let verdict = decoder.decode(&error(io::Error::from(io::ErrorKind::ConnectionRefused)));
    assert_eq!(verdict, Verdict::fail(Reason::Error));
}

#[test]
fn status_decoder_ignores_retry_after_unless_asked() {
    let paced = with_header(503, "retry-after", "3");
    let only_503 = StatusDecoder::new([503]).unwrap();
    assert_eq!(only_503.decode(&paced).server_delay(), None);
    let reading = only_503.with_retry_after();
    assert_eq!(
        reading.decode(&paced).server_delay(),
        Some(Duration::from_secs(3))
    );
    // A malformed value falls back to the backoff: a retry without delay.
    let garbage = reading.decode(&with_header(503, "retry-after", "soon"));
    assert_eq!(garbage, Verdict::retry(status(503)));
    // Only 429 and 503 are read.
    let other = StatusDecoder::new([500]).unwrap().with_retry_after();
    assert_eq!(
        other
            .decode(&with_header(500, "retry-after", "3"))
            .server_delay(),
        None
    );
}

#[test]
fn holds_both_ends_of_the_range() {
    let decoder = StatusDecoder::new([100, 599]).unwrap();
    let listed: Vec<u16> = decoder.statuses().map(|s| s.as_u16()).collect();
    assert_eq!(listed, [100, 599]);
    assert_eq!(format!("{decoder:?}"), "{100, 599}");
    assert_eq!(
        format!("{:?}", decoder.with_retry_after()),
        "{100, 599} with Retry-After"
    );
}

#[test]
fn rejects_codes_out_of_range() {
    assert_eq!(StatusDecoder::new([99]), Err(InvalidStatus::OutOfRange(99)));
    assert_eq!(
        StatusDecoder::new([503, 600]),
        Err(InvalidStatus::OutOfRange(600))
    );
    assert_eq!(
        InvalidStatus::OutOfRange(600).to_string(),
        "status code must be in 100..=599"
    );
    assert_eq!(InvalidStatus::OutOfRange(0).code(), Some(0));
}

#[test]
fn rejects_an_empty_set() {
    assert_eq!(StatusDecoder::new([]), Err(InvalidStatus::Empty));
    assert_eq!(InvalidStatus::Empty.code(), None);
    assert_eq!(
        InvalidStatus::Empty.to_string(),
        "statuses must list at least one status"
    );
}

#[test]
fn known_good_lists_match_the_checked_constructor() {
    assert_eq!(
        StatusDecoder::known_good(&TransientDecoder::STATUSES),
        StatusDecoder::new(TransientDecoder::STATUSES).unwrap()
    );
    assert_eq!(
        StatusDecoder::known_good(&[503]),
        StatusDecoder::new([503]).unwrap()
    );
}

#[test]
fn feign_retries_error_statuses_only_with_retry_after() {
    let feign = FeignDecoder::new();
    assert_eq!(feign.decode(&response(503)), Verdict::fail(status(503)));
    assert_eq!(
        feign.decode(&with_header(500, "retry-after", "1")),
        Verdict::retry(status(500)).after(Duration::from_secs(1))
    );
    assert_eq!(
        feign.decode(&with_header(404, "retry-after", "0")),
        Verdict::retry(status(404)).after(Duration::ZERO)
    );
    assert_eq!(
        feign.decode(&with_header(503, "retry-after", "later")),
        Verdict::fail(status(503))
    );
    assert_eq!(feign.decode(&response(200)), Verdict::Accept);
}

#[test]
fn feign_retries_io_errors_but_never_the_deadline() {
    let feign = FeignDecoder::new();
    let second = Duration::from_secs(1);
    assert_eq!(
        feign.decode(&error(io::Error::from(io::ErrorKind::ConnectionReset))),
        Verdict::retry(FailureKind::ConnectionReset)
    );
    assert_eq!(
        feign.decode(&error(AttemptTimedOut::new(second))),
        Verdict::retry(FailureKind::AttemptTimeout)
    );
    assert_eq!(
        feign.decode(&error(DeadlineExceeded::new(second))),
        Verdict::fail(FailureKind::Deadline)
    );
    assert_eq!(
        feign.decode(&error("not io")),
        Verdict::fail(FailureKind::Other)
    );
}

#[test]
fn transient_retries_the_consensus_statuses_and_connect_failures() {
    let transient = TransientDecoder::new();
    for code in TransientDecoder::STATUSES {
        assert!(transient.decode(&response(code)).is_retry(), "{code}");
    }
    for code in [400, 401, 404, 409, 501, 505] {
        assert_eq!(
            transient.decode(&response(code)),
            Verdict::fail(status(code))
        );
    }
    assert_eq!(
        transient
            .decode(&with_header(429, "retry-after", "4"))
            .server_delay(),
        Some(Duration::from_secs(4))
    );
    assert_eq!(
        transient.decode(&error(io::Error::from(io::ErrorKind::ConnectionRefused))),
        Verdict::retry(FailureKind::ConnectRefused)
    );
    // Sent, then failed: the upstream may have acted on it.
    assert_eq!(
        transient.decode(&error(io::Error::from(io::ErrorKind::ConnectionReset))),
        Verdict::fail(FailureKind::ConnectionReset)
    );
    assert_eq!(
        transient.decode(&error(AttemptTimedOut::new(Duration::from_secs(1)))),
        Verdict::fail(FailureKind::AttemptTimeout)
    );
}

#[test]
fn apache_retries_resets_and_closes_but_never_its_listed_kinds() {
    let apache = ApacheDecoder::new();
    assert_eq!(apache.decode(&response(503)), Verdict::Accept);
    assert_eq!(
        apache.decode(&error(io::Error::from(io::ErrorKind::ConnectionReset))),
        Verdict::retry(FailureKind::ConnectionReset)
    );
    assert_eq!(
        apache.decode(&error(io::Error::from(io::ErrorKind::UnexpectedEof))),
        Verdict::retry(FailureKind::ConnectionClosed)
    );
    for kind in ApacheDecoder::NEVER_RETRIED {
        assert!(!apache.retries(kind), "{kind}");
    }
    assert_eq!(
        apache.decode(&error(AttemptTimedOut::new(Duration::from_secs(1)))),
        Verdict::fail(FailureKind::AttemptTimeout)
    );
    assert!(!apache.retries(FailureKind::Deadline));
    let everything = ApacheDecoder::never_retrying([]);
    assert!(everything.retries(FailureKind::ReadTimeout));
    assert!(!everything.retries(FailureKind::Deadline));
}

#[test]
fn header_decoder_matches_ignoring_case() {
    let decoder = RetryOnHeader::new("x-should-retry", "true").unwrap();
    assert_eq!(
        decoder.decode(&with_header(500, "x-should-retry", "True")),
        Verdict::retry(Reason::Header("x-should-retry"))
    );
    assert_eq!(
        decoder.decode(&with_header(500, "x-should-retry", "false")),
        Verdict::Accept
    );
    assert_eq!(decoder.decode(&response(500)), Verdict::Accept);
    let err = RetryOnHeader::new("X-Upper", "true").unwrap_err();
    assert_eq!((err.part, err.name()), (Part::Name, "X-Upper"));
    assert_eq!(err.to_string(), "header name must be a lowercase token");
    let err = RetryOnHeader::new("bad name", "true").unwrap_err();
    assert_eq!(err.part, Part::Name);
    let err = RetryOnHeader::new("x-ok", "two\nlines").unwrap_err();
    assert_eq!((err.part, err.value()), (Part::Value, "two\nlines"));
    assert_eq!(
        err.to_string(),
        "header value must hold no control characters"
    );
}

#[test]
fn or_takes_the_first_retry() {
    let decoder = Or::new(
        StatusDecoder::new([503]).unwrap(),
        RetryOnHeader::new("x-should-retry", "true").unwrap(),
    );
    assert_eq!(decoder.decode(&response(503)), Verdict::retry(status(503)));
    assert_eq!(
        decoder.decode(&with_header(500, "x-should-retry", "true")),
        Verdict::retry(Reason::Header("x-should-retry"))
    );
    // Neither retries: the first verdict stands.
    assert_eq!(decoder.decode(&response(500)), Verdict::fail(status(500)));
    assert_eq!(decoder.decode(&response(200)), Verdict::Accept);
    // A failure from the second stands over the first's accept.
    let apache_first = Or::new(ApacheDecoder::new(), TransientDecoder::new());
    assert_eq!(
        apache_first.decode(&response(501)),
        Verdict::fail(status(501))
    );
}

// ===== nonsense refused =====

#[test]
fn status_codes_out_of_range_are_refused_by_code() {
    for code in [0, 1, 99, 600, 999, 1000, u16::MAX] {
        let err = StatusDecoder::new([503, code]).unwrap_err();
        assert_eq!(err, InvalidStatus::OutOfRange(code));
        assert_eq!(err.code(), Some(code));
        assert_eq!(
            err.to_string(),
            "status code must be in 100..=599",
            "whatever the code"
        );
    }
    // The ends of the range are statuses.
    let ends = StatusDecoder::new([100, 599]).unwrap();
    assert_eq!(ends.statuses().count(), 2);
}

#[test]
fn an_empty_status_set_is_refused() {
    assert_eq!(StatusDecoder::new([]), Err(InvalidStatus::Empty));
    assert_eq!(StatusDecoder::new(Vec::new()), Err(InvalidStatus::Empty));
    assert_eq!(InvalidStatus::Empty.code(), None);
}

#[test]
fn invalid_header_names_are_refused_as_names() {
    for name in [
        "",
        "Upper",
        "X-Should-Retry",
        "sp ace",
        "x:y",
        "tab\t",
        "é",
        "x\n",
    ] {
        let err = RetryOnHeader::new(name, "true").unwrap_err();
        assert_eq!(err.part, Part::Name, "{name:?}");
        assert_eq!(err.name(), name);
        assert!(err.to_string().contains("header name"), "{err}");
    }
}

#[test]
fn invalid_header_values_are_refused_as_values() {
    for value in ["bad\nvalue", "\r", "\0", "\u{1b}[31m", "\u{7f}"] {
        let err = RetryOnHeader::new("x-should-retry", value).unwrap_err();
        assert_eq!(err.part, Part::Value, "{value:?}");
        assert_eq!((err.name(), err.value()), ("x-should-retry", value));
    }
    // An empty value is a value, and so are tabs and bytes beyond ASCII.
    for value in ["", "\ttrue", "é"] {
        assert!(
            RetryOnHeader::new("x-should-retry", value).is_ok(),
            "{value:?}"
        );
    }
}

#[test]
fn no_ready_made_decoder_retries_an_open_circuit() {
    use crate::breaker::error::CircuitOpen;
    use crate::key::UpstreamKey;
    let open = || {
        error(CircuitOpen::new(
            UpstreamKey::custom("a"),
            tokio::time::Instant::now(),
        ))
    };
    let fail = Verdict::fail(FailureKind::CircuitOpen);
    assert_eq!(TransientDecoder::new().decode(&open()), fail);
    assert_eq!(FeignDecoder::new().decode(&open()), fail);
    assert_eq!(ApacheDecoder::new().decode(&open()), fail);
    assert_eq!(
        ApacheDecoder::never_retrying([]).decode(&open()),
        fail,
        "not even when every kind is allowed"
    );
    assert_eq!(GrpcDecoder::default().decode(&open()), fail);
    assert!(!StatusDecoder::new([503])
        .unwrap()
        .decode(&open())
        .is_retry());
}

#[test]
fn no_ready_made_decoder_retries_a_request_body_that_changed_or_failed_to_open() {
    use crate::body::{BodyChanged, ReopenFailed};
    // NOTE: the factory's error is one every decoder but the status one would
    // retry on its own, and a reset one Apache's and Feign's would.
    let failures = [
        || error(BodyChanged::new(1024, 1000)),
        || {
            error(ReopenFailed::new(io::Error::from(
                io::ErrorKind::ConnectionRefused,
            )))
        },
        || error(io::Error::other(BodyChanged::new(5, 6))),
    ];
    let fail = Verdict::fail(FailureKind::RequestBody);
    for outcome in failures {
        let decoders: [AnyDecoder; 6] = [
            TransientDecoder::new().into(),
            FeignDecoder::new().into(),
            ApacheDecoder::new().into(),
            ApacheDecoder::never_retrying([]).into(),
            GrpcDecoder::default().into(),
            StatusDecoder::new([503]).unwrap().into(),
        ];
        for decoder in &decoders[..5] {
            assert_eq!(decoder.decode(&outcome()), fail, "{decoder:?}");
        }
        assert!(!decoders[5].decode(&outcome()).is_retry());
    }
    assert!(!ApacheDecoder::never_retrying([]).retries(FailureKind::RequestBody));
}
