//! Nonsense in a configuration file is refused with the setting's path;
//! extreme but meaningful settings work.

use crate::support;
use http::Request;
use http_resilience::config::ClientsConfig;
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
};
use tower::{ServiceBuilder, ServiceExt};

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
        (
            "[default]\npreset = \"grpc\"\nretry.max_pushback = \"0s\"",
            "default.retry.max_pushback",
        ),
        (
            "[default]\npreset = \"grpc\"\nretry.max_pushback = \"soon\"",
            "default.retry.max_pushback",
        ),
        (
            "[default.retry]\nmax_pushback = \"2s\"",
            "default.retry.max_pushback",
        ),
        (
            "[default.breaker]\nfailure_ratio = 0.0",
            "default.breaker.failure_ratio",
        ),
        (
            "[default.breaker]\nbreak_jitter = nan",
            "default.breaker.break_jitter",
        ),
        (
            "[default.breaker]\nbreak_multiplier = inf",
            "default.breaker.break_multiplier",
        ),
        (
            "[default.breaker]\nsampling_window = \"1ms\"",
            "default.breaker.sampling_window",
        ),
        (
            "[clients.x.breaker]\nmax_break_duration = \"1s\"",
            "clients.x.breaker.max_break_duration",
        ),
        (
            "[clients.x.breaker]\ndecoder = \"statuses\"",
            "clients.x.breaker.statuses",
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
        "[default.breaker]\nmax_keys = -1",
        "[default.breaker]\nenabled = \"yes\"",
        "[default.breaker]\nbreak_after = 3",
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

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn settings_at_the_ends_of_their_ranges_work() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default]
        deadline = "24h"
        attempt_timeout = "24h"

        [default.retry]
        decoder = "statuses"
        statuses = [503]
        backoff = "exponential"
        delay = "1ms"
        max_delay = "24h"
        multiplier = 10.0
        max_attempts = 100

        [default.breaker]
        consecutive_failures = 10000
        minimum_throughput = 1000000
        break_duration = "24h"
        max_break_duration = "24h"
        break_multiplier = 10.0
        half_open_probes = 1000
        half_open_successes = 1000
        max_keys = 1000000
        idle_key_timeout = "24h"
        sampling_window = "24h"

        [default.overload]
        max_in_flight = 100000
        queue = 100000
        max_wait = "24h"
        max_keys = 1000000
        "#,
    )
    .unwrap();
    let policy = config.policy("anyone").unwrap();
    assert_eq!(support::shown(policy.retry(), "max_attempts"), "100");
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
            async move { Ok::<_, Infallible>(support::empty(status)) }
        });
    let response = tokio::time::timeout(support::GUARD, svc.oneshot(Request::default()))
        .await
        .expect("guard")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
