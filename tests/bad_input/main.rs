//! Bad configuration and bad input: every public
//! constructor and configuration path gets nonsense. Where a value makes no
//! sense the answer is a typed error that names the problem, and the tests
//! check which one; where every value has a meaning (a zero or a
//! `Duration::MAX` timeout) the value is taken without a panic and behaves as
//! documented. Nothing here may panic.
//!
//! Refused with a typed error:
//!
//! | constructor or path | error | test |
//! |---|---|---|
//! | `StatusDecoder::new` | `InvalidStatus::{OutOfRange, Empty}` | `status_codes_out_of_range_are_refused_by_code`, `an_empty_status_set_is_refused` |
//! | `ExponentialBackoff::new` | `InvalidSetting` (`multiplier`, `max_delay`, `max_attempts`) | `nonsense_backoffs_are_refused_by_field` |
//! | `RetryOnHeader::new` | `InvalidHeader` with `HeaderPart::{Name, Value}` | `invalid_header_names_are_refused_as_names`, `invalid_header_values_are_refused_as_values` |
//! | `RetryBudget::new` | `InvalidSetting` (`max_tokens`, `token_ratio`) | `nonsense_budgets_are_refused_by_field` |
//! | `Resilience::new` | `InvalidSetting` (`deadline`, `attempt_timeout`) | `limits_that_do_not_fit_are_refused_by_field` |
//! | `transport::Builder::{http_connector, build_http, build_http_with_resolver, build}` | `InvalidSetting` (`transport.*`) | `zero_transport_limits_are_refused_by_field` |
//! | `config::ClientsConfig::from_toml_str` (and so `validate`, `policy`, `layer`) | `ConfigError` with the setting's path | `nonsense_settings_in_a_file_are_refused_with_their_path`, `unreadable_configuration_text_is_an_error_not_a_panic` |
//! | `propagate::parse_timeout`, `propagate::inherit_deadline` | `InvalidTimeoutHeader` with a `TimeoutProblem` | `timeout_headers_are_refused_by_problem` |
//! | `retry::retry_after::RetryAfter::parse`, `retry_after::delay` | `InvalidRetryAfter` | `malformed_retry_after_is_refused`, `header_parsers_answer_every_byte_string` |
//!
//! Accepted, every value having a meaning (argument types that leave no
//! nonsense to refuse):
//!
//! | constructor | extreme values | test |
//! |---|---|---|
//! | `DeadlineLayer::new`, `Deadline::new` | zero, `Duration::MAX` | `a_zero_deadline_fails_at_once_without_calling`, `a_deadline_of_duration_max_is_no_deadline_in_practice` |
//! | `AttemptTimeoutLayer::new`, `AttemptTimeout::new` | zero, `Duration::MAX` | `attempt_timeouts_of_zero_and_duration_max` |
//! | `ReadTimeoutLayer::new`, `ReadTimeout::new`, `ReadTimeoutBody::new` | zero, `Duration::MAX` | `read_timeouts_of_zero_and_duration_max` |
//! | `RequestDeadline::{after, at}` | zero, `Duration::MAX`, an instant past | `request_deadlines_saturate` |
//! | `FixedDelay::{new, with_max_delay}`, `FeignRetryer::new`, `ExponentialBackoff` at its limits, `Backoff` | `Duration::MAX`, `u32::MAX`, 0 attempts, `f64::MAX` | `retryers_take_extreme_values` |
//! | `RetryPolicy::{deadline_aware, with_attempt_header}`, `StatusRetryLayer::new` | waits of `Duration::MAX` | `a_retry_wait_of_duration_max_is_cut_by_the_deadline`, `deadline_awareness_of_duration_max_makes_no_retry` |
//! | `PropagateDeadlineLayer::with_attempt_limit`, `format_timeout`, `InheritDeadlineLayer` | `Duration::MAX`, `u64::MAX` ms | `extreme_budgets_are_propagated_and_inherited` |
//! | headers written by `StatusRetry` and `PropagateDeadline` | a header map already full | `a_full_header_map_gets_no_extra_header_and_no_panic` |
//! | `transport::Builder::{connect_timeout, read_timeout, pool_idle_timeout}` | `Duration::MAX` | `a_pool_idle_timeout_of_duration_max_is_held_to_thirty_years` |
//! | `ReplayBody::with_cap` | 0, `usize::MAX` | `replay_caps_of_zero_and_usize_max` |
//! | `ClientsConfig` | a deadline of a billion years, `u32::MAX` attempts | `extreme_but_meaningful_settings_in_a_file_work` |
//!
//! The other public constructors take arguments whose types leave nothing to
//! refuse: `FeignDecoder::new`, `TransientDecoder::new`,
//! `ApacheDecoder::{new, never_retrying}`, `Or::new`, `RetryPolicy::new` and
//! its switches (`retry_sent_requests`, `statuses_need_idempotency`,
//! `disabled`, `with_budget`, `with_listener`), `StatusRetry::new`,
//! `Attempts::new`, `RetryReport::new`, `InvalidSetting::new`, the error types'
//! `new` for tests, `PropagateDeadlineLayer::{new, envoy, grpc}` and
//! `InheritDeadlineLayer::{new, envoy, grpc}`.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    attempt_timeout::{error::AttemptTimedOut, AttemptTimeoutLayer},
    config::ClientsConfig,
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    propagate::{
        error::TimeoutProblem, format_timeout, inherit_deadline, parse_timeout,
        InheritDeadlineLayer, PropagateDeadlineLayer, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS,
        GRPC_TIMEOUT,
    },
    read_timeout::{body::ReadTimeoutBody, error::ReadTimedOut, ReadTimeoutLayer},
    retry::{
        retry_after::{self, RetryAfter},
        AnyRetryer, ExponentialBackoff, FeignRetryer, FixedDelay, HeaderPart, InvalidStatus,
        Jitter, ReplayBody, RetryBudget, RetryOnHeader, RetryPolicy, Retryer, StatusDecoder,
        StatusRetryLayer, TryCloneBody,
    },
    transport, Attempts, BoxError, InvalidSetting, RequestDeadline, Resilience, Stop,
};
use http_resilience_mock::{body::ScriptedBody, MockResponse, MockServer};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex, Once,
    },
    time::{Duration, SystemTime},
};
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt};

/// The guard on every await that could hang.
const GUARD: Duration = Duration::from_secs(20);

/// Twenty-nine years: less than the thirty-year horizon that stands for
/// "never", more than any real call.
const ALMOST_NEVER: Duration = Duration::from_secs(86_400 * 365 * 29);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never())
}

fn response(status: u16) -> Response<String> {
    Response::builder()
        .status(status)
        .body(String::new())
        .unwrap()
}

// ===== refused with a typed error =====

#[test]
fn status_codes_out_of_range_are_refused_by_code() {
    for code in [0, 1, 99, 600, 999, 1000, u16::MAX] {
        let err = StatusDecoder::new([503, code]).unwrap_err();
        assert_eq!(err, InvalidStatus::OutOfRange(code));
        assert_eq!(err.code(), Some(code));
        assert!(err.to_string().contains(&code.to_string()), "{err}");
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
fn nonsense_backoffs_are_refused_by_field() {
    let cases: [(Duration, f64, Duration, u32, &str); 13] = [
        (ms(100), f64::NAN, ms(1000), 3, "multiplier"),
        (ms(100), -f64::NAN, ms(1000), 3, "multiplier"),
        (ms(100), f64::INFINITY, ms(1000), 3, "multiplier"),
        (ms(100), f64::NEG_INFINITY, ms(1000), 3, "multiplier"),
        (ms(100), -2.0, ms(1000), 3, "multiplier"),
        (ms(100), -0.0, ms(1000), 3, "multiplier"),
        (ms(100), 0.0, ms(1000), 3, "multiplier"),
        (ms(100), f64::MIN_POSITIVE, ms(1000), 3, "multiplier"),
        (ms(100), 0.99, ms(1000), 3, "multiplier"),
        (ms(100), 2.0, ms(99), 3, "max_delay"),
        (Duration::MAX, 2.0, Duration::ZERO, 3, "max_delay"),
        (ms(100), 2.0, ms(1000), 0, "max_attempts"),
        (Duration::ZERO, 1.0, Duration::ZERO, 0, "max_attempts"),
    ];
    for (initial, multiplier, max, attempts, field) in cases {
        let err: InvalidSetting =
            ExponentialBackoff::new(initial, multiplier, max, attempts).unwrap_err();
        assert_eq!(err.field(), field, "{err}");
        assert!(err.problem().starts_with("must be"), "{err}");
    }
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
        assert_eq!(err.part(), HeaderPart::Name, "{name:?}");
        assert_eq!(err.name(), name);
        assert!(err.to_string().contains("header name"), "{err}");
    }
}

#[test]
fn invalid_header_values_are_refused_as_values() {
    for value in ["bad\nvalue", "\r", "\0", "\u{1b}[31m", "\u{7f}"] {
        let err = RetryOnHeader::new("x-should-retry", value).unwrap_err();
        assert_eq!(err.part(), HeaderPart::Value, "{value:?}");
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
fn nonsense_budgets_are_refused_by_field() {
    for (tokens, ratio, field) in [
        (0, 0.5, "max_tokens"),
        (1001, 0.5, "max_tokens"),
        (u32::MAX, 0.5, "max_tokens"),
        (10, 0.0, "token_ratio"),
        (10, -0.0, "token_ratio"),
        (10, -1.0, "token_ratio"),
        (10, 0.0004, "token_ratio"),
        (10, 1.01, "token_ratio"),
        (10, f64::NAN, "token_ratio"),
        (10, f64::INFINITY, "token_ratio"),
        (10, f64::NEG_INFINITY, "token_ratio"),
    ] {
        let err = RetryBudget::new(tokens, ratio).unwrap_err();
        assert_eq!(err.field(), field, "{tokens} {ratio}: {err}");
    }
}

#[test]
fn limits_that_do_not_fit_are_refused_by_field() {
    let secs = Duration::from_secs;
    for (deadline, attempt, field) in [
        (Duration::ZERO, secs(1), "deadline"),
        (Duration::ZERO, Duration::ZERO, "deadline"),
        (secs(1), Duration::ZERO, "attempt_timeout"),
        (secs(1), secs(2), "attempt_timeout"),
        (secs(1), Duration::MAX, "attempt_timeout"),
        (
            Duration::from_nanos(1),
            Duration::from_nanos(2),
            "attempt_timeout",
        ),
    ] {
        let err = Resilience::new(deadline, attempt, policy()).unwrap_err();
        assert_eq!(err.field(), field, "{err}");
    }
    // The largest limits fit, and make a layer.
    let largest = Resilience::new(Duration::MAX, Duration::MAX, policy()).unwrap();
    let _layer = largest.layer();
}

#[test]
fn zero_transport_limits_are_refused_by_field() {
    let zero = Duration::ZERO;
    for (builder, field) in [
        (
            transport::Builder::new().connect_timeout(zero),
            "transport.connect_timeout",
        ),
        (
            transport::Builder::new().read_timeout(zero),
            "transport.read_timeout",
        ),
        (
            transport::Builder::new().pool_idle_timeout(Some(zero)),
            "transport.pool_idle_timeout",
        ),
    ] {
        let err = builder.http_connector().unwrap_err();
        assert_eq!(err.field(), field);
        let err = builder.build_http::<Full<Bytes>>().unwrap_err();
        assert_eq!(err.field(), field);
        let resolver = hyper_util::client::legacy::connect::dns::GaiResolver::new();
        let err = builder
            .build_http_with_resolver::<Full<Bytes>, _>(resolver)
            .unwrap_err();
        assert_eq!(err.field(), field);
        let connector = transport::Builder::new().http_connector().unwrap();
        let err = builder.build::<_, Full<Bytes>>(connector).unwrap_err();
        assert_eq!(err.field(), field);
    }
}

#[test]
fn nonsense_settings_in_a_file_are_refused_with_their_path() {
    let cases = [
        ("[default]\ndeadline = \"0s\"", "default.deadline"),
        ("[default]\ndeadline = \"-5s\"", "default.deadline"),
        (
            "[default]\ndeadline = \"99999999999999999999s\"",
            "default.deadline",
        ),
        (
            "[default]\ndeadline = \"1s\"\nattempt_timeout = \"2s\"",
            "default.attempt_timeout",
        ),
        ("[default]\npreset = \"nonsense\"", "default.preset"),
        (
            "[default.retry]\nmultiplier = nan",
            "default.retry.multiplier",
        ),
        (
            "[default.retry]\nmultiplier = inf",
            "default.retry.multiplier",
        ),
        (
            "[default.retry]\nmultiplier = -inf",
            "default.retry.multiplier",
        ),
        (
            "[default.retry]\nmultiplier = -1.0",
            "default.retry.multiplier",
        ),
        (
            "[default.retry]\nmultiplier = 0.5",
            "default.retry.multiplier",
        ),
        (
            "[default.retry]\nmax_attempts = 0",
            "default.retry.max_attempts",
        ),
        (
            "[default.retry]\ndelay = \"2s\"\nmax_delay = \"1s\"",
            "default.retry.max_delay",
        ),
        (
            "[default.retry]\ndecoder = \"statuses\"\nstatuses = []",
            "default.retry.statuses",
        ),
        (
            "[default.retry]\ndecoder = \"statuses\"\nstatuses = [99]",
            "default.retry.statuses",
        ),
        (
            "[default.retry]\ndecoder = \"statuses\"\nstatuses = [600]",
            "default.retry.statuses",
        ),
        (
            "[default.retry]\ndecoder = \"statuses\"",
            "default.retry.statuses",
        ),
        (
            "[default.retry]\nbackoff = \"fixed\"\nmultiplier = 2.0",
            "default.retry.multiplier",
        ),
        (
            "[default.retry]\nbackoff = \"feign\"\nmax_attempts = 0",
            "default.retry.max_attempts",
        ),
        ("[default.retry]\njitter = \"lots\"", "default.retry.jitter"),
        (
            "[default.retry]\nmin_attempt = \"soon\"",
            "default.retry.min_attempt",
        ),
        ("[clients.default]\ndeadline = \"1s\"", "clients.default"),
        (
            "[clients.\"eu.weather\"]\nattempt_timeout = \"1h\"",
            "clients.\"eu.weather\".attempt_timeout",
        ),
    ];
    for (text, field) in cases {
        let err = ClientsConfig::from_toml_str(text).unwrap_err();
        let setting = err
            .setting()
            .unwrap_or_else(|| panic!("{text:?}: not a setting: {err}"));
        assert_eq!(setting.field(), field, "{text:?}: {err}");
    }
}

#[test]
fn unreadable_configuration_text_is_an_error_not_a_panic() {
    let texts = [
        "garbage",
        "[",
        "[default]\ndeadline = 5",
        "[default.retry]\nmax_attempts = -1",
        "[default.retry]\nmax_attempts = 4294967296",
        "[default.retry]\nmultiplier = \"fast\"",
        "[default.retry]\nstatuses = [\"503\"]",
        "[default.retry]\nstatuses = [70000]",
        "[default.retry]\nseed = -1",
        "[clients]\nweather = 3",
        "[default]\nunknown = 1",
        "\u{0}\u{1}\u{2}",
    ];
    for text in texts {
        // The text itself cannot be read: the format's own message, no setting.
        let err = ClientsConfig::from_toml_str(text).unwrap_err();
        assert!(err.setting().is_none(), "{text:?}: {err}");
        assert!(!err.to_string().is_empty(), "{text:?}");
    }
    // Some texts read, and mean the standard preset for everyone.
    for text in ["", "[default]", "[clients.\"\"]\nattempt_timeout = \"1s\""] {
        let config = ClientsConfig::from_toml_str(text).unwrap();
        assert!(config.policy("anyone").is_ok(), "{text:?}");
    }
}

#[test]
fn timeout_headers_are_refused_by_problem() {
    use TimeoutFormat::{Grpc, Millis};
    let cases: [(&[u8], TimeoutFormat, TimeoutProblem); 14] = [
        (b"", Millis, TimeoutProblem::Empty),
        (b" \t ", Grpc, TimeoutProblem::Empty),
        (b"\xff\xfe", Millis, TimeoutProblem::NotAscii),
        (b"1 2", Millis, TimeoutProblem::Whitespace),
        (b"-1", Millis, TimeoutProblem::Negative),
        (b"-1S", Grpc, TimeoutProblem::Negative),
        (b"1.5", Millis, TimeoutProblem::NotANumber),
        (b"abc", Millis, TimeoutProblem::NotANumber),
        (b"18446744073709551616", Millis, TimeoutProblem::OutOfRange),
        (b"123456789S", Grpc, TimeoutProblem::TooManyDigits),
        (
            b"99999999999999999999999H",
            Grpc,
            TimeoutProblem::TooManyDigits,
        ),
        (b"S", Grpc, TimeoutProblem::NoDigits),
        (b"5", Grpc, TimeoutProblem::MissingUnit),
        (b"5s", Grpc, TimeoutProblem::UnknownUnit('s')),
    ];
    for (bytes, format, problem) in cases {
        let value = HeaderValue::from_bytes(bytes).unwrap();
        let err = parse_timeout(&value, format).unwrap_err();
        assert_eq!(err.problem(), problem, "{bytes:?}");
        // The same through the request path, which leaves the request alone.
        let mut request = Request::builder()
            .header(GRPC_TIMEOUT, value)
            .body(())
            .unwrap();
        let err = inherit_deadline(&mut request, &GRPC_TIMEOUT, format).unwrap_err();
        assert_eq!(err.problem(), problem, "{bytes:?}");
        assert_eq!(RequestDeadline::of(&request), None);
    }
}

#[test]
fn malformed_retry_after_is_refused() {
    for text in [
        "",
        "-1",
        "1.5",
        "soon",
        "Sun, 32 Foo 1994 99:99:99 GMT",
        "0x10",
    ] {
        let value = HeaderValue::from_str(text).unwrap();
        assert_eq!(
            RetryAfter::parse(&value),
            Err(retry_after::InvalidRetryAfter),
            "{text:?}"
        );
    }
    // A number too large for the clock asks for the longest wait; the
    // retryer caps it.
    let huge = HeaderValue::from_static("99999999999999999999999999");
    assert_eq!(
        RetryAfter::parse(&huge),
        Ok(RetryAfter::Delay(Duration::from_secs(u64::MAX)))
    );
}

#[test]
fn header_parsers_answer_every_byte_string() {
    let values: [&[u8]; 8] = [
        b"",
        b" ",
        b"-1",
        b"1e9",
        b"\xff\xfe",
        b"99999999999999999999999999H",
        b"1.5S",
        b"Sun, 32 Foo 1994 99:99:99 GMT",
    ];
    for bytes in values {
        let value = HeaderValue::from_bytes(bytes).unwrap();
        let _ = parse_timeout(&value, TimeoutFormat::Millis);
        let _ = parse_timeout(&value, TimeoutFormat::Grpc);
        let mut headers = HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, value.clone());
        headers.insert(http::header::DATE, value);
        let _ = retry_after::delay(&headers, SystemTime::UNIX_EPOCH);
    }
}

// ===== accepted, every value having a meaning =====

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_zero_deadline_fails_at_once_without_calling() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::ZERO))
        .service_fn(move |_: Request<String>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(response(200)) }
        });
    let err = svc.oneshot(Request::new(String::new())).await.unwrap_err();
    let exceeded = err
        .downcast_ref::<DeadlineExceeded>()
        .expect("the deadline");
    assert_eq!(exceeded.duration(), Duration::ZERO);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_deadline_of_duration_max_is_no_deadline_in_practice() {
    let seen = Arc::new(Mutex::new(None));
    let record = Arc::clone(&seen);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .service_fn(move |request: Request<String>| {
            *record.lock().unwrap() = RequestDeadline::of(&request);
            async {
                // An hour of (paused) time is nothing to this deadline.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"late"))))
            }
        });
    let response = tokio::time::timeout(Duration::from_secs(7200), svc.oneshot(Request::default()))
        .await
        .expect("guard")
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "late");
    let deadline = seen
        .lock()
        .unwrap()
        .expect("recorded for the layers inside");
    assert_eq!(deadline.budget(), Duration::MAX);
    assert!(deadline.remaining() > ALMOST_NEVER);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn attempt_timeouts_of_zero_and_duration_max() {
    // Zero: a response ready at once gets through, a wait does not.
    let ready = AttemptTimeoutLayer::new(Duration::ZERO).layer(tower::service_fn(
        |_: Request<String>| async { Ok::<_, Infallible>(response(200)) },
    ));
    assert_eq!(
        ready.oneshot(Request::default()).await.unwrap().status(),
        200
    );
    let waiting = AttemptTimeoutLayer::new(Duration::ZERO).layer(tower::service_fn(
        |_: Request<String>| async {
            tokio::time::sleep(ms(1)).await;
            Ok::<_, Infallible>(response(200))
        },
    ));
    let err = waiting.oneshot(Request::default()).await.unwrap_err();
    assert!(err.is::<AttemptTimedOut>(), "{err}");

    // `Duration::MAX`: an hour-long attempt is fine, with or without a deadline.
    let slow = || {
        tower::service_fn(|_: Request<String>| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, Infallible>(response(200))
        })
    };
    let alone = AttemptTimeoutLayer::new(Duration::MAX).layer(slow());
    let guarded =
        tokio::time::timeout(Duration::from_secs(7200), alone.oneshot(Request::default()));
    assert_eq!(guarded.await.expect("guard").unwrap().status(), 200);
    let stacked = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .layer(AttemptTimeoutLayer::new(Duration::MAX).final_attempt_uses_deadline())
        .service(slow());
    let guarded = tokio::time::timeout(
        Duration::from_secs(7200),
        stacked.oneshot(Request::default()),
    );
    assert_eq!(guarded.await.expect("guard").unwrap().status(), 200);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn read_timeouts_of_zero_and_duration_max() {
    let hour = Duration::from_secs(3600);
    let patient = ReadTimeoutBody::new(
        ScriptedBody::new().data("a").wait(hour).data("b"),
        Duration::MAX,
    );
    let body = tokio::time::timeout(2 * hour, patient.collect())
        .await
        .expect("guard")
        .unwrap();
    assert_eq!(body.to_bytes(), "ab");

    let impatient = ReadTimeoutBody::new(
        ScriptedBody::new().data("a").wait(ms(1)).data("b"),
        Duration::ZERO,
    );
    let err = impatient.collect().await.unwrap_err();
    assert!(err.is::<ReadTimedOut>(), "{err}");

    // The layer: a head an hour late is in time for `Duration::MAX`.
    let svc = ReadTimeoutLayer::new(Duration::MAX).layer(tower::service_fn(
        move |_: Request<()>| async move {
            tokio::time::sleep(hour).await;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        },
    ));
    let guarded = tokio::time::timeout(2 * hour, svc.oneshot(Request::new(())));
    assert_eq!(guarded.await.expect("guard").unwrap().status(), 200);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn request_deadlines_saturate() {
    let never = RequestDeadline::after(Duration::MAX);
    assert!(!never.is_expired());
    assert!(never.remaining() > ALMOST_NEVER);
    assert_eq!(never.budget(), Duration::MAX);

    let now = RequestDeadline::after(Duration::ZERO);
    assert!(now.is_expired());
    assert_eq!(now.remaining(), Duration::ZERO);
    assert_eq!(never.min(now), now);

    let start = Instant::now();
    tokio::time::advance(Duration::from_secs(1)).await;
    let past = RequestDeadline::at(start);
    assert!(past.is_expired());
    assert_eq!(
        (past.remaining(), past.budget()),
        (Duration::ZERO, Duration::ZERO)
    );
}

#[test]
fn retryers_take_extreme_values() {
    // A fixed delay of `Duration::MAX`, `u32::MAX` times.
    let mut fixed = FixedDelay::new(Duration::MAX, u32::MAX);
    assert_eq!(fixed.next_delay(1, None), Some(Duration::MAX));
    assert_eq!(fixed.next_delay(u32::MAX, None), Some(Duration::MAX));
    assert_eq!(Retryer::max_attempts(&fixed), Some(u32::MAX));
    let mut deaf = FixedDelay::new(ms(10), 1).with_max_delay(Duration::ZERO);
    assert_eq!(
        deaf.next_delay(1, Some(Duration::MAX)),
        Some(Duration::ZERO)
    );

    // Feign's retryer takes any numbers, as Feign does.
    let mut huge = FeignRetryer::new(Duration::MAX, Duration::MAX, u32::MAX);
    assert_eq!(
        huge.next_delay(1, None),
        Some(Duration::from_millis(u64::MAX))
    );
    assert_eq!(huge.next_delay(2, Some(Duration::MAX)), Some(Duration::MAX));
    let mut none = FeignRetryer::new(ms(100), Duration::ZERO, 0);
    assert_eq!(Retryer::max_attempts(&none), Some(1));
    assert_eq!(none.next_delay(1, None), None);
    let mut capped = FeignRetryer::new(ms(100), ms(10), 3);
    assert_eq!(capped.next_delay(1, None), Some(ms(10)));

    // Exponential backoff at the edge of what it accepts.
    for jitter in [
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
    ] {
        let backoff = ExponentialBackoff::new(Duration::MAX, 10.0, Duration::MAX, u32::MAX)
            .unwrap()
            .with_jitter(jitter)
            .with_seed(1);
        let mut retryer: AnyRetryer = backoff.for_request().into();
        for attempt in [1, 2, 1000, u32::MAX - 1] {
            let delay = retryer.next_delay(attempt, None).expect("below the limit");
            assert!(delay <= Duration::MAX, "{jitter:?}");
        }
        assert_eq!(retryer.next_delay(u32::MAX, None), None);
    }
    let mut steep = ExponentialBackoff::new(ms(1), f64::MAX, Duration::from_secs(1), 10)
        .unwrap()
        .for_request();
    assert_eq!(steep.next_delay(1, None), Some(ms(1)));
    assert_eq!(steep.next_delay(2, None), Some(Duration::from_secs(1)));
    let mut flat = ExponentialBackoff::new(Duration::ZERO, 1.0, Duration::ZERO, 2)
        .unwrap()
        .with_jitter(Jitter::Decorrelated);
    assert_eq!(flat.next_delay(1, None), Some(Duration::ZERO));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retry_wait_of_duration_max_is_cut_by_the_deadline() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::MAX, u32::MAX),
    )
    .with_attempt_header(HeaderName::from_static("x-attempt"));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(1)))
        .layer(StatusRetryLayer::new(policy))
        .service_fn(move |_: Request<String>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(response(503)) }
        });
    let start = Instant::now();
    let outcome = tokio::time::timeout(GUARD, svc.oneshot(Request::default()))
        .await
        .expect("guard");
    let err = outcome.unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_awareness_of_duration_max_makes_no_retry() {
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(ms(10), 2),
    )
    .deadline_aware(Duration::MAX);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .layer(StatusRetryLayer::new(policy))
        .service_fn(|_: Request<String>| async { Ok::<_, Infallible>(response(503)) });
    let response = svc.oneshot(Request::default()).await.unwrap();
    let attempts = response.extensions().get::<Attempts>().copied().unwrap();
    assert_eq!(
        (attempts.get(), attempts.stop()),
        (1, Stop::WouldMissDeadline)
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn extreme_budgets_are_propagated_and_inherited() {
    assert_eq!(
        format_timeout(Duration::MAX, TimeoutFormat::Grpc),
        "99999999H"
    );
    assert_eq!(
        format_timeout(Duration::MAX, TimeoutFormat::Millis),
        u64::MAX.to_string().as_str()
    );

    // Sent: a deadline of `Duration::MAX` and an attempt limit of
    // `Duration::MAX` give a header that reads back as thirty years or so.
    let seen = Arc::new(Mutex::new(None));
    let record = Arc::clone(&seen);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .layer(PropagateDeadlineLayer::grpc().with_attempt_limit(Duration::MAX))
        .service_fn(move |request: Request<String>| {
            *record.lock().unwrap() = request.headers().get(GRPC_TIMEOUT).cloned();
            async { Ok::<_, Infallible>(response(200)) }
        });
    svc.oneshot(Request::default()).await.unwrap();
    let sent = seen.lock().unwrap().clone().expect("the header is written");
    let budget = parse_timeout(&sent, TimeoutFormat::Grpc).unwrap();
    assert!(budget > ALMOST_NEVER, "{sent:?}");

    // Received: the largest values of both formats are held to the horizon.
    for (header, format, value) in [
        (
            EXPECTED_RQ_TIMEOUT_MS,
            TimeoutFormat::Millis,
            "18446744073709551615",
        ),
        (GRPC_TIMEOUT, TimeoutFormat::Grpc, "99999999H"),
    ] {
        let seen = Arc::new(Mutex::new(None));
        let record = Arc::clone(&seen);
        let svc = InheritDeadlineLayer::new(header.clone(), format).layer(tower::service_fn(
            move |request: Request<()>| {
                *record.lock().unwrap() = RequestDeadline::of(&request);
                async { Ok::<_, Infallible>(()) }
            },
        ));
        let request = Request::builder().header(header, value).body(()).unwrap();
        svc.oneshot(request).await.unwrap();
        let deadline = seen.lock().unwrap().expect("inherited");
        assert!(deadline.remaining() > ALMOST_NEVER, "{value}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_full_header_map_gets_no_extra_header_and_no_panic() {
    // Fill a header map until it takes no more names.
    let mut headers = HeaderMap::new();
    let mut n = 0u32;
    while headers
        .try_insert(
            HeaderName::try_from(format!("x-filler-{n}")).unwrap(),
            HeaderValue::from_static("1"),
        )
        .is_ok()
    {
        n += 1;
    }
    let attempt_header = HeaderName::from_static("x-attempt");
    let seen = Arc::new(Mutex::new(None));
    let record = Arc::clone(&seen);
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(ms(10), 1),
    )
    .with_attempt_header(attempt_header.clone());
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(5)))
        .layer(StatusRetryLayer::new(policy))
        .layer(PropagateDeadlineLayer::envoy())
        .service_fn(move |request: Request<String>| {
            let headers = request.headers();
            *record.lock().unwrap() = Some((
                headers.len(),
                headers.contains_key(&attempt_header),
                headers.contains_key(EXPECTED_RQ_TIMEOUT_MS),
            ));
            async { Ok::<_, Infallible>(response(200)) }
        });
    let mut request = Request::new(String::new());
    *request.headers_mut() = headers;
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        *seen.lock().unwrap(),
        Some((n as usize, false, false)),
        "the request arrives as it was, without the two headers"
    );
}

/// Panic messages from every thread of this test binary, for the tests that
/// check that a background task did not panic.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn record_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // NOTE: `try_lock`, so that a panic while the list is held cannot
            // wait for itself.
            if let Ok(mut panics) = PANICS.try_lock() {
                panics.push(info.to_string());
            }
            previous(info);
        }));
    });
}

#[tokio::test]
async fn a_pool_idle_timeout_of_duration_max_is_held_to_thirty_years() {
    record_panics();
    let upstream = MockServer::start().await.unwrap();
    upstream.enqueue(MockResponse::ok("first"));
    upstream.enqueue(MockResponse::ok("second"));
    let client = transport::Builder::new()
        .connect_timeout(Duration::MAX)
        .read_timeout(Duration::MAX)
        .pool_idle_timeout(Some(Duration::MAX))
        .build_http::<Full<Bytes>>()
        .unwrap();
    for expected in ["first", "second"] {
        let request = Request::get(upstream.uri("/"))
            .body(Full::default())
            .unwrap();
        let call = async {
            let response = client.clone().oneshot(request).await?;
            Ok::<_, BoxError>(response.into_body().collect().await?.to_bytes())
        };
        let body = tokio::time::timeout(GUARD, call)
            .await
            .expect("guard")
            .unwrap();
        assert_eq!(body, expected);
        // NOTE: the pool's idle timer starts once a connection is back in the
        // pool, in a task of its own; this gives it time to run.
        tokio::time::sleep(ms(50)).await;
    }
    assert_eq!(upstream.connection_count(), 1, "the connection was pooled");
    let panics = PANICS.lock().unwrap().clone();
    assert!(
        !panics.iter().any(|panic| panic.contains("overflow")),
        "{panics:?}"
    );
}

#[tokio::test(flavor = "current_thread")]
async fn replay_caps_of_zero_and_usize_max() {
    let nothing_kept = ReplayBody::with_cap(Full::new(Bytes::from_static(b"abc")), 0);
    let copy = nothing_kept
        .try_clone_body()
        .expect("nothing read yet, so nothing lost");
    assert_eq!(
        nothing_kept.collect().await.unwrap().to_bytes(),
        "abc",
        "the original is still sent"
    );
    assert!(!copy.is_replayable(), "but none of it was kept");

    let everything = ReplayBody::with_cap(ScriptedBody::new().data("ab").data("c"), usize::MAX);
    let copy = everything.try_clone_body().expect("nothing spoiled yet");
    assert_eq!(everything.collect().await.unwrap().to_bytes(), "abc");
    assert_eq!(copy.collect().await.unwrap().to_bytes(), "abc");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn extreme_but_meaningful_settings_in_a_file_work() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default]
        deadline = "1000000000years"
        attempt_timeout = "1000000000years"

        [default.retry]
        decoder = "statuses"
        statuses = [503]
        backoff = "exponential"
        delay = "1ms"
        max_delay = "1000000000years"
        multiplier = 1.7976931348623157e308
        max_attempts = 4294967295
        "#,
    )
    .unwrap();
    let policy = config.policy("anyone").unwrap();
    assert_eq!(policy.retry().retryer().max_attempts(), Some(u32::MAX));
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = ServiceBuilder::new()
        .layer(config.layer("anyone").unwrap())
        .service_fn(move |_: Request<String>| {
            let status = if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                503
            } else {
                200
            };
            async move { Ok::<_, Infallible>(response(status)) }
        });
    let response = tokio::time::timeout(GUARD, svc.oneshot(Request::default()))
        .await
        .expect("guard")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
