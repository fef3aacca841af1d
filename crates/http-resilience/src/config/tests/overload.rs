//! The `overload` table: inheritance, what it builds, and what it refuses.

use super::{refused, ClientsConfig};
use crate::overload::{Limit, OverloadSettings};
use std::time::Duration;

/// The settings of client `name`'s overload control, if on.
fn settings_of(config: &ClientsConfig, name: &str) -> Option<OverloadSettings> {
    let policy = config.policy(name).unwrap();
    policy
        .guard()
        .overload
        .as_ref()
        .map(|policy| policy.settings())
}

#[test]
fn the_overload_table_is_inherited_field_by_field_and_enabled_false_turns_it_off() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.overload]
        max_in_flight = 64
        queue = 32

        [clients.waiting.overload]
        max_wait = "250ms"
        min_attempt = "50ms"

        [clients.adaptive.overload.adaptive]
        initial = 10
        max = 40

        [clients.throttled.overload.throttle]
        k = 1.5

        [clients.plain.overload]
        enabled = false

        [clients.preset]
        preset = "reactor"
        "#,
    )
    .unwrap();
    let anyone = settings_of(&config, "anyone").expect("[default] turns it on");
    assert_eq!(anyone.limit, Limit::Fixed(64));
    assert_eq!((anyone.max_queued, anyone.max_wait), (32, None));
    assert_eq!(anyone.throttle, None);

    let waiting = settings_of(&config, "waiting").unwrap();
    assert_eq!(waiting.limit, Limit::Fixed(64), "inherited");
    assert_eq!(waiting.max_wait, Some(Duration::from_millis(250)));
    assert_eq!(waiting.min_attempt, Duration::from_millis(50));

    let adaptive = settings_of(&config, "adaptive").unwrap();
    let Limit::Adaptive(limit) = adaptive.limit else {
        panic!("{:?}", adaptive.limit);
    };
    assert_eq!((limit.initial(), limit.min(), limit.max()), (10, 1, 40));
    assert_eq!(adaptive.max_queued, 32, "the queue is inherited");

    let throttled = settings_of(&config, "throttled").unwrap();
    let throttle = throttled.throttle.expect("a throttle");
    assert_eq!(
        (throttle.k(), throttle.window()),
        (1.5, Duration::from_secs(120))
    );

    assert!(settings_of(&config, "plain").is_none());
    assert!(
        settings_of(&config, "preset").is_none(),
        "a preset replaces [default]"
    );
}

#[test]
fn throttling_alone_and_off_for_an_inherited_throttle() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.overload.throttle]
        window = "30s"

        [clients.limited.overload]
        max_in_flight = 8
        throttle.enabled = false
        "#,
    )
    .unwrap();
    let anyone = settings_of(&config, "anyone").unwrap();
    assert_eq!(anyone.limit, Limit::Unbounded);
    assert_eq!(anyone.throttle.unwrap().window(), Duration::from_secs(30));
    let limited = settings_of(&config, "limited").unwrap();
    assert_eq!((limited.limit, limited.throttle), (Limit::Fixed(8), None));
}

#[test]
fn the_layer_of_a_file_applies_its_overload_control() {
    let config = ClientsConfig::from_toml_str("[clients.api.overload]\nmax_in_flight = 2").unwrap();
    let layer = config.layer("api").unwrap();
    let svc = tower::Layer::layer(
        &layer,
        tower::service_fn(|_: http::Request<String>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
        }),
    );
    let limit = svc.guard().overload.as_ref().map(|p| p.settings().limit);
    assert_eq!(limit, Some(Limit::Fixed(2)));
}

#[test]
fn invalid_overload_settings_name_their_path() {
    let cases = [
        (
            "[clients.x.overload]\nmax_in_flight = 0",
            "clients.x.overload.max_in_flight must be at least 1",
        ),
        (
            "[clients.x.overload]\nqueue = 4",
            "clients.x.overload.max_in_flight or an adaptive or a throttle table must be given: \
             overload control with no limit and no throttling does nothing",
        ),
        (
            "[clients.x.overload]\nmax_in_flight = 4\nadaptive.max = 10",
            "clients.x.overload.max_in_flight must not be given with an adaptive table: \
             a limit is fixed or adaptive",
        ),
        (
            "[clients.x.overload.adaptive]\nmin = 5\nmax = 4",
            "clients.x.overload.adaptive.max must be at least min",
        ),
        (
            "[clients.x.overload.adaptive]\nbackoff_ratio = 1.5",
            "clients.x.overload.adaptive.backoff_ratio must be within (0, 1)",
        ),
        (
            "[clients.x.overload.throttle]\nk = 0.5",
            "clients.x.overload.throttle.k must be a number of at least 1.0",
        ),
        (
            "[clients.x.overload.throttle]\nenabled = false\nk = 2.0",
            "clients.x.overload.throttle.k applies only to throttling, got enabled = false",
        ),
        (
            "[default.overload]\nmax_in_flight = 4\nmax_keys = 0",
            "default.overload.max_keys must be at least 1",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(refused(text), expected, "{text}");
    }
    let malformed = refused("[clients.x.overload]\nmax_in_flight = 4\nmax_wait = \"soon\"");
    assert!(
        malformed.starts_with("clients.x.overload.max_wait must be \"off\" or a duration"),
        "{malformed}"
    );
}
