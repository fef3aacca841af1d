//! The `rate_limit` table: inheritance, what it builds, and what it refuses.

use super::{refused, ClientsConfig};
use crate::rate_limit::{fleet::Fallback, RateLimitMode, RateLimitSettings, ServerSignals, Signal};
use std::time::Duration;

/// The settings of client `name`'s rate limit, if on.
fn settings_of(config: &ClientsConfig, name: &str) -> Option<RateLimitSettings> {
    let policy = config.policy(name).unwrap();
    policy
        .guard()
        .rate_limit
        .as_ref()
        .map(|limit| limit.settings())
}

#[test]
fn the_rate_limit_table_is_inherited_field_by_field_and_enabled_false_turns_it_off() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.rate_limit]
        calls = 100
        per = "1s"
        burst = 10

        [clients.strict.rate_limit]
        mode = "turn_away"

        [clients.learning.rate_limit]
        calls = 5
        server_signals = ["retry_after", "x_ratelimit"]
        max_pause = "30s"
        min_attempt = "50ms"

        [clients.plain.rate_limit]
        enabled = false

        [clients.preset]
        preset = "reactor"
        "#,
    )
    .unwrap();
    let anyone = settings_of(&config, "anyone").expect("[default] turns it on");
    assert_eq!(
        (anyone.calls, anyone.per, anyone.burst),
        (100, Duration::from_secs(1), 10)
    );
    assert_eq!(anyone.mode, RateLimitMode::Wait);
    assert_eq!(anyone.signals, ServerSignals::NONE);

    let strict = settings_of(&config, "strict").unwrap();
    assert_eq!((strict.calls, strict.burst), (100, 10), "inherited");
    assert_eq!(strict.mode, RateLimitMode::TurnAway);

    let learning = settings_of(&config, "learning").unwrap();
    assert_eq!((learning.calls, learning.burst), (5, 10));
    let signals = ServerSignals::NONE
        .with(Signal::RetryAfter)
        .with(Signal::XRateLimit);
    assert_eq!(learning.signals, signals);
    assert_eq!(learning.max_pause, Duration::from_secs(30));
    assert_eq!(learning.min_attempt, Duration::from_millis(50));

    assert!(settings_of(&config, "plain").is_none());
    assert!(
        settings_of(&config, "preset").is_none(),
        "a preset replaces [default]"
    );
    assert!(config.policy("anyone").unwrap().guard().overload.is_none());
}

#[test]
fn a_redis_url_makes_the_quota_the_fleets() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.billing.rate_limit]
        calls = 500
        redis_url = "redis://127.0.0.1:6399/"
        redis_prefix = "billing"
        lease_wait = "3ms"
        local_share = 0.25

        [clients.closed.rate_limit]
        calls = 500
        redis_url = "redis://127.0.0.1:6399/"
        fallback = "fail_closed"
        "#,
    )
    .unwrap();
    let billing = config.policy("billing").unwrap();
    let fleet = billing
        .guard()
        .rate_limit
        .as_ref()
        .unwrap()
        .fleet()
        .expect("a fleet");
    assert_eq!(fleet.prefix(), "billing");
    assert_eq!(fleet.lease_wait(), Duration::from_millis(3));
    assert_eq!(fleet.fallback(), Fallback::LocalShare(0.25));
    let closed = config.policy("closed").unwrap();
    let fleet = closed.guard().rate_limit.as_ref().unwrap().fleet().unwrap();
    assert_eq!(fleet.fallback(), Fallback::FailClosed);
}

#[test]
fn out_of_range_values_are_refused_naming_their_path() {
    let cases = [
        ("calls = 0", "clients.a.rate_limit.calls must be at least 1"),
        ("calls = 2000000", "clients.a.rate_limit.calls must be at most 1,000,000"),
        ("burst = 5", "clients.a.rate_limit.calls must be given: a rate limit needs its rate"),
        ("calls = 1\nburst = 0", "clients.a.rate_limit.burst must be at least 1"),
        ("calls = 1\nper = \"0s\"", "clients.a.rate_limit.per must be greater than zero"),
        ("calls = 1\nper = \"25h\"", "clients.a.rate_limit.per must be at most 24h"),
        ("calls = 1\nmode = \"drop\"", "clients.a.rate_limit.mode must be one of \"wait\", \"turn_away\""),
        (
            "calls = 1\nserver_signals = [\"everything\"]",
            "clients.a.rate_limit.server_signals must be one of \"retry_after\", \"grpc_pushback\", \"ratelimit\", \"x_ratelimit\"",
        ),
        ("calls = 1\nmax_pause = \"0s\"", "clients.a.rate_limit.max_pause must be greater than zero"),
        ("calls = 1\nmax_keys = 0", "clients.a.rate_limit.max_keys must be at least 1"),
        (
            "calls = 1\nlease_wait = \"5ms\"",
            "clients.a.rate_limit.lease_wait applies only to a fleet quota: give redis_url too",
        ),
        (
            "calls = 1\nredis_url = \"not a url\"",
            "clients.a.rate_limit.redis_url must be a Redis URL such as \"redis://127.0.0.1:6379/\"",
        ),
        (
            "calls = 1\nredis_url = \"redis://127.0.0.1/\"\nlease_wait = \"2s\"",
            "clients.a.rate_limit.lease_wait must be in (0, 1s]",
        ),
        (
            "calls = 1\nredis_url = \"redis://127.0.0.1/\"\nlocal_share = 1.5",
            "clients.a.rate_limit.local_share must be in (0, 1]",
        ),
        (
            "calls = 1\nredis_url = \"redis://127.0.0.1/\"\nfallback = \"fail_closed\"\nlocal_share = 0.5",
            "clients.a.rate_limit.local_share applies only to fallback = \"local\"",
        ),
        (
            "enabled = false\ncalls = 3",
            "clients.a.rate_limit.calls applies only to the rate limit, got enabled = false",
        ),
    ];
    for (table, message) in cases {
        let text = format!("[clients.a.rate_limit]\n{table}\n");
        assert_eq!(refused(&text), message, "{table}");
    }
}
