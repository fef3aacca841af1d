//! The server's signals read: each form, and a table of hostile values,
//! capped or ignored.

use super::*;
use http::HeaderValue;
use proptest::prelude::*;

const CAP: Duration = Duration::from_secs(60);

/// 2026-01-01T00:00:00Z.
const NOW_EPOCH: u64 = 1_767_225_600;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(NOW_EPOCH)
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(name, value)| {
            (
                http::HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            )
        })
        .collect()
}

fn heard(status: u16, pairs: &[(&'static str, &str)]) -> Heard {
    hear(ServerSignals::ALL, status, &headers(pairs), now(), CAP)
}

fn pause(secs: f64, source: Signal) -> Option<(Duration, Signal)> {
    Some((Duration::from_secs_f64(secs), source))
}

fn pace(interval: f64, lasts: f64, source: Signal) -> Option<Spread> {
    Some(Spread {
        interval: Duration::from_secs_f64(interval),
        lasts: Duration::from_secs_f64(lasts),
        source,
    })
}

#[test]
fn retry_after_pauses_a_429_or_a_503_only() {
    assert_eq!(
        heard(429, &[("retry-after", "2")]).pause,
        pause(2.0, Signal::RetryAfter)
    );
    assert_eq!(
        heard(503, &[("retry-after", "7")]).pause,
        pause(7.0, Signal::RetryAfter)
    );
    assert_eq!(heard(200, &[("retry-after", "2")]), Heard::default());
    assert_eq!(heard(500, &[("retry-after", "2")]), Heard::default());
    let date = httpdate::fmt_http_date(now() + Duration::from_secs(5));
    assert_eq!(
        heard(429, &[("retry-after", &date)]).pause,
        pause(5.0, Signal::RetryAfter)
    );
}

#[test]
fn grpc_pushback_pauses_resource_exhausted_only() {
    let exhausted = [("grpc-status", "8"), ("grpc-retry-pushback-ms", "1500")];
    assert_eq!(
        heard(200, &exhausted).pause,
        pause(1.5, Signal::GrpcPushback)
    );
    let unavailable = [("grpc-status", "14"), ("grpc-retry-pushback-ms", "1500")];
    assert_eq!(heard(200, &unavailable), Heard::default());
}

#[test]
fn the_ietf_fields_in_each_draft_form() {
    let latest = [("ratelimit", "\"default\";r=50;t=30")];
    assert_eq!(
        heard(200, &latest).pace,
        pace(0.6, 30.0, Signal::RateLimitFields)
    );
    let by_policy = [
        ("ratelimit", "\"day\";r=10"),
        (
            "ratelimit-policy",
            "\"hour\";q=100;w=3600, \"day\";q=1000;w=50",
        ),
    ];
    assert_eq!(
        heard(200, &by_policy).pace,
        pace(5.0, 50.0, Signal::RateLimitFields)
    );
    let dictionary = [("ratelimit", "limit=100, remaining=0, reset=12")];
    assert_eq!(
        heard(200, &dictionary).pause,
        pause(12.0, Signal::RateLimitFields)
    );
    let separate = [("ratelimit-remaining", "4"), ("ratelimit-reset", "2")];
    assert_eq!(
        heard(200, &separate).pace,
        pace(0.5, 2.0, Signal::RateLimitFields)
    );
    let two = [("ratelimit", "\"a\";r=100;t=10, \"b\";r=2;t=10")];
    assert_eq!(
        heard(200, &two).pace,
        pace(5.0, 10.0, Signal::RateLimitFields),
        "the slowest quota wins"
    );
}

#[test]
fn x_ratelimit_in_delta_seconds_and_epoch_seconds() {
    let delta = [("x-ratelimit-remaining", "0"), ("x-ratelimit-reset", "3")];
    assert_eq!(heard(200, &delta).pause, pause(3.0, Signal::XRateLimit));
    let github = NOW_EPOCH + 20;
    let epoch = [
        ("x-ratelimit-limit", "5000"),
        ("x-ratelimit-remaining", "10"),
        ("x-ratelimit-reset", &github.to_string()),
    ];
    assert_eq!(heard(200, &epoch).pace, pace(2.0, 20.0, Signal::XRateLimit));
    let millis = (NOW_EPOCH + 4) * 1000;
    let epoch_ms = [
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", &millis.to_string()),
    ];
    assert_eq!(heard(200, &epoch_ms).pause, pause(4.0, Signal::XRateLimit));
}

/// Nothing heard.
const NOTHING: Heard = Heard {
    pause: None,
    pace: None,
};

/// A pause of 60 s, the cap, asked by `source`.
fn capped(source: Signal) -> Heard {
    Heard {
        pause: pause(60.0, source),
        pace: None,
    }
}

#[test]
fn hostile_values_are_capped_or_ignored() {
    let past = (NOW_EPOCH - 100).to_string();
    let far = (NOW_EPOCH + 10 * 365 * 86_400).to_string();
    let pushback = |ms| vec![("grpc-status", "8"), ("grpc-retry-pushback-ms", ms)];
    let x = |r, t| vec![("x-ratelimit-remaining", r), ("x-ratelimit-reset", t)];
    let huge_remaining = Heard {
        pause: None,
        pace: Some(Spread {
            interval: Duration::from_secs(10) / u32::MAX,
            lasts: Duration::from_secs(10),
            source: Signal::XRateLimit,
        }),
    };
    let table: Vec<(Vec<(&'static str, &str)>, Heard)> = vec![
        (vec![("retry-after", "-5")], NOTHING),
        (vec![("retry-after", "soon")], NOTHING),
        (vec![("retry-after", "0")], NOTHING),
        (
            vec![("retry-after", "99999999999999999999999")],
            capped(Signal::RetryAfter),
        ),
        (pushback("-1"), NOTHING),
        (pushback("2147483647"), capped(Signal::GrpcPushback)),
        (pushback("1e3"), NOTHING),
        (x("-1", "5"), NOTHING),
        (x("3", "-5"), NOTHING),
        (x("lots", "5"), NOTHING),
        (x("0", "NaN"), NOTHING),
        (x("0", "inf"), NOTHING),
        (x("0", &past), NOTHING),
        (x("0", &far), capped(Signal::XRateLimit)),
        (x("0", "0"), NOTHING),
        (x("99999999999999999999999", "10"), huge_remaining),
        (x("1", "1e308"), NOTHING),
        (x("1", "1.5.5"), NOTHING),
        (vec![("ratelimit", "\"x\";r=-3;t=10")], NOTHING),
        (vec![("ratelimit", "\"x\";r=3;t=-10")], NOTHING),
        (vec![("ratelimit", ";;;,,,==;r=;t=")], NOTHING),
        (vec![("ratelimit", "\"x\";r=1")], NOTHING),
        (
            vec![("ratelimit", "\"x\";r=0;t=9999999999")],
            capped(Signal::RateLimitFields),
        ),
    ];
    for (pairs, expected) in table {
        assert_eq!(heard(429, &pairs), expected, "{pairs:?}");
    }
}

#[test]
fn only_the_signals_asked_for_are_read() {
    let all = headers(&[
        ("retry-after", "2"),
        ("x-ratelimit-remaining", "0"),
        ("x-ratelimit-reset", "5"),
    ]);
    let none = hear(ServerSignals::NONE, 429, &all, now(), CAP);
    assert_eq!(none, Heard::default());
    let retry_after = ServerSignals::NONE.with(Signal::RetryAfter);
    assert_eq!(
        hear(retry_after, 429, &all, now(), CAP).pause,
        pause(2.0, Signal::RetryAfter)
    );
    let both = hear(retry_after.with(Signal::XRateLimit), 429, &all, now(), CAP);
    assert_eq!(
        both.pause,
        pause(5.0, Signal::XRateLimit),
        "the longer pause"
    );
}

const NAMES: [&str; 10] = [
    "retry-after",
    "date",
    "grpc-status",
    "grpc-retry-pushback-ms",
    "ratelimit",
    "ratelimit-policy",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
];

/// A value a field may hold: any printable bytes, or a number (as a
/// reset or a remaining count is written, an epoch included), signed or
/// with a fraction.
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(0x20u8..0x7f, 0..40),
        (0u64..2_000_000_000_000).prop_map(|n| n.to_string().into_bytes()),
        (0u64..1_000_000).prop_map(|n| format!("-{n}").into_bytes()),
        (0u64..100_000, 0u64..1_000).prop_map(|(a, b)| format!("{a}.{b}").into_bytes()),
    ]
}

proptest! {
    /// Whatever bytes the server sends in any of the fields, reading them
    /// never panics, and no pause or pace is longer than the cap.
    #[test]
    fn parsing_never_panics_and_never_exceeds_the_cap(
        values in proptest::collection::vec((0..NAMES.len(), value()), 0..8),
        status in prop_oneof![Just(200u16), Just(429u16), Just(503u16)],
        cap_ms in 0u64..100_000,
    ) {
        let mut map = HeaderMap::new();
        for (name, bytes) in values {
            if let Ok(value) = HeaderValue::from_bytes(&bytes) {
                map.append(NAMES[name], value);
            }
        }
        let cap = Duration::from_millis(cap_ms);
        let heard = hear(ServerSignals::ALL, status, &map, now(), cap);
        if let Some((wait, _)) = heard.pause {
            prop_assert!(wait <= cap && !wait.is_zero());
        }
        if let Some(spread) = heard.pace {
            prop_assert!(spread.interval <= cap && spread.lasts <= cap);
        }
    }
}

// ===== a quota whose reset is past the cap =====

#[test]
fn a_quota_resetting_after_the_cap_is_spread_over_its_whole_window() {
    // GitHub: 5000 calls an hour; 4999 remain, the window resets in an
    // hour. Spread over the time to the reset, that is one call every
    // 3600 s / 4999 = 720 ms (held for at most the 60 s cap).
    let reset = (NOW_EPOCH + 3600).to_string();
    let github = [
        ("x-ratelimit-limit", "5000"),
        ("x-ratelimit-remaining", "4999"),
        ("x-ratelimit-reset", reset.as_str()),
    ];
    let spread = heard(200, &github).pace.expect("a pace");
    assert_eq!(
        spread.interval,
        Duration::from_secs(3600) / 4999,
        "calls spread over the 60 s cap instead of the hour to the reset"
    );
    assert_eq!(spread.lasts, CAP);
}
