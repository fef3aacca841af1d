//! Bad configuration and bad input (issue 7, point 5, begun): every fallible
//! constructor and the configuration loader get nonsense, and answer with a
//! typed error that names the problem, never a panic.

use http_resilience::{
    config::ClientsConfig,
    propagate::{parse_timeout, TimeoutFormat},
    retry::{
        retry_after, ExponentialBackoff, FixedDelay, RetryBudget, RetryOnHeader, RetryPolicy,
        StatusDecoder,
    },
    transport, InvalidSetting, Resilience,
};
use std::time::{Duration, SystemTime};

fn policy() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(StatusDecoder::new([503]), FixedDelay::never())
}

#[test]
fn status_codes_out_of_range_are_refused() {
    for code in [0, 99, 600, 999, u16::MAX] {
        let err = StatusDecoder::try_new([503, code]).unwrap_err();
        assert_eq!(err.code(), code);
    }
}

#[test]
fn nonsense_backoffs_are_refused_by_field() {
    let ms = Duration::from_millis;
    let cases: [(Duration, f64, Duration, u32, &str); 6] = [
        (ms(100), f64::NAN, ms(1000), 3, "multiplier"),
        (ms(100), f64::INFINITY, ms(1000), 3, "multiplier"),
        (ms(100), -2.0, ms(1000), 3, "multiplier"),
        (ms(100), 0.99, ms(1000), 3, "multiplier"),
        (ms(100), 2.0, ms(99), 3, "max_delay"),
        (ms(100), 2.0, ms(1000), 0, "max_attempts"),
    ];
    for (initial, multiplier, max, attempts, field) in cases {
        let err: InvalidSetting =
            ExponentialBackoff::try_new(initial, multiplier, max, attempts).unwrap_err();
        assert_eq!(err.field(), field, "{err}");
    }
    // Extreme but valid: huge delays never overflow while scheduling.
    let huge = ExponentialBackoff::try_new(Duration::MAX, 10.0, Duration::MAX, 3).unwrap();
    assert_eq!(huge.initial(), Duration::MAX);
}

#[test]
fn nonsense_budgets_are_refused() {
    for (tokens, ratio) in [
        (0, 0.5),
        (1001, 0.5),
        (10, 0.0),
        (10, -1.0),
        (10, 1.01),
        (10, f64::NAN),
    ] {
        assert!(RetryBudget::new(tokens, ratio).is_err(), "{tokens} {ratio}");
    }
}

#[test]
fn limits_that_do_not_fit_are_refused() {
    let secs = Duration::from_secs;
    for (deadline, attempt, field) in [
        (Duration::ZERO, secs(1), "deadline"),
        (secs(1), Duration::ZERO, "attempt_timeout"),
        (secs(1), secs(2), "attempt_timeout"),
    ] {
        let err = Resilience::try_new(deadline, attempt, policy()).unwrap_err();
        assert_eq!(err.field(), field, "{err}");
    }
}

#[test]
fn invalid_header_rules_are_refused() {
    for (name, value) in [
        ("", "x"),
        ("Upper", "x"),
        ("sp ace", "x"),
        ("x-ok", "bad\nvalue"),
    ] {
        assert!(
            RetryOnHeader::try_new(name, value).is_err(),
            "{name:?} {value:?}"
        );
    }
}

#[test]
fn zero_transport_limits_are_refused() {
    let zero = Duration::ZERO;
    for builder in [
        transport::Builder::new().connect_timeout(zero),
        transport::Builder::new().read_timeout(zero),
        transport::Builder::new().pool_idle_timeout(Some(zero)),
    ] {
        let err = builder.http_connector().unwrap_err();
        assert!(err.field().starts_with("transport."), "{err}");
    }
}

#[test]
fn nonsense_configuration_text_is_an_error_not_a_panic() {
    let texts = [
        "",
        "garbage",
        "[",
        "[default]\ndeadline = 5",
        "[default]\ndeadline = \"-5s\"",
        "[default]\ndeadline = \"99999999999999999999s\"",
        "[default.retry]\nmax_attempts = -1",
        "[default.retry]\nmultiplier = \"fast\"",
        "[default.retry]\nstatuses = [\"503\"]",
        "[clients]\nweather = 3",
        "[clients.\"\"]\ndeadline = \"1s\"",
        "[default]\npreset = \"nonsense\"",
        "\u{0}\u{1}\u{2}",
    ];
    for text in texts {
        // Any outcome but a panic; an error must say something.
        if let Err(err) = ClientsConfig::from_toml_str(text) {
            assert!(!err.to_string().is_empty(), "{text:?}");
        }
    }
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
        if let Ok(value) = http::HeaderValue::from_bytes(bytes) {
            let _ = parse_timeout(&value, TimeoutFormat::Millis);
            let _ = parse_timeout(&value, TimeoutFormat::Grpc);
            let mut headers = http::HeaderMap::new();
            headers.insert(http::header::RETRY_AFTER, value.clone());
            headers.insert(http::header::DATE, value);
            let _ = retry_after::delay(&headers, SystemTime::UNIX_EPOCH);
        }
    }
}
