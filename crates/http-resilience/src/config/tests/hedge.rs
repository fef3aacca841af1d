//! The `hedge` table: inheritance, defaults, what it takes from the retry,
//! and what it refuses.

use super::{refused, ClientsConfig};
use crate::hedge::{HedgeDelay, HedgePolicy};
use crate::policy::AnyDecoder;
use std::{sync::Arc, time::Duration};

/// The hedge policy of client `name`.
fn hedge_of(config: &ClientsConfig, name: &str) -> Option<HedgePolicy<AnyDecoder>> {
    config.hedge(name).unwrap()
}

/// The delay, as its `Debug` spells every setting.
fn delay_of(policy: &HedgePolicy<AnyDecoder>) -> String {
    format!("{:?}", policy.delay())
}

#[test]
fn the_hedge_table_is_inherited_field_by_field_and_enabled_false_turns_it_off() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.hedge]
        delay = "50ms"
        max_attempts = 3

        [clients.narrow.hedge]
        max_in_flight = 2
        on_attempt_timeout = "200ms"

        [clients.adaptive.hedge]
        percentile = 90.0
        window = "30s"

        [clients.retrying.hedge]
        enabled = false

        [clients.plain]
        preset = "reactor"
        "#,
    )
    .unwrap();
    let anyone = hedge_of(&config, "anyone").expect("[default] hedges");
    assert_eq!(
        delay_of(&anyone),
        format!("{:?}", HedgeDelay::fixed(Duration::from_millis(50)))
    );
    assert_eq!((anyone.max_attempts(), anyone.max_in_flight()), (3, 3));
    assert_eq!(anyone.attempt_timeout(), None);
    assert_eq!(anyone.max_server_delay(), Duration::from_secs(1));

    let narrow = hedge_of(&config, "narrow").unwrap();
    assert_eq!((narrow.max_attempts(), narrow.max_in_flight()), (3, 2));
    assert_eq!(narrow.attempt_timeout(), Some(Duration::from_millis(200)));
    assert_eq!(delay_of(&narrow), delay_of(&anyone));

    let adaptive = hedge_of(&config, "adaptive").unwrap();
    let expected = HedgeDelay::percentile(90.0, 100, Duration::from_secs(30)).unwrap();
    assert_eq!(delay_of(&adaptive), format!("{expected:?}"));

    assert!(hedge_of(&config, "retrying").is_none());
    assert!(
        hedge_of(&config, "plain").is_none(),
        "a preset replaces [default]"
    );
}

#[test]
fn a_hedge_takes_the_retrys_decoder_budget_header_and_margin() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.search]
        preset = "grpc"
        retry.codes = ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
        hedge.delay = "20ms"
        "#,
    )
    .unwrap();
    let hedge = hedge_of(&config, "search").unwrap();
    let policy = config.policy("search").unwrap();
    let retry = policy.retry();
    match (hedge.decoder(), retry.decoder()) {
        (AnyDecoder::Grpc(a), AnyDecoder::Grpc(b)) => assert_eq!(a, b),
        (a, b) => panic!("{a:?} against {b:?}"),
    }
    assert_eq!(
        hedge.options().attempt_header().map(|name| name.as_str()),
        Some("grpc-previous-rpc-attempts")
    );
    assert_eq!(
        hedge.options().deadline_margin(),
        retry.options().deadline_margin()
    );
    let (hedged, retried) = (hedge.parts(), retry.parts());
    let budget = hedged.options.budget.as_ref().expect("the preset's budget");
    let retry_budget = retried.options.budget.as_ref().unwrap();
    assert_eq!(budget.max_tokens(), retry_budget.max_tokens());
    assert_eq!(budget.token_ratio(), retry_budget.token_ratio());
    // One bucket for the client: the hedge's is the retry's.
    assert!(Arc::ptr_eq(budget, retry_budget));
}

#[test]
fn the_docs_table_of_hedge_defaults_is_the_code() {
    let doc = include_str!("../format.md");
    let default_of = |field: &str| {
        let row = doc
            .lines()
            .find(|line| line.starts_with(&format!("| `hedge.{field}` |")))
            .unwrap_or_else(|| panic!("no row for hedge.{field}"));
        let (_, default) = row
            .rsplit_once("default ")
            .unwrap_or_else(|| panic!("no default in {row}"));
        default.trim_end_matches(" |").to_owned()
    };
    let config = ClientsConfig::from_toml_str("[default.hedge]\npercentile = 95.0").unwrap();
    let hedge = hedge_of(&config, "anyone").unwrap();
    let samples: u64 = default_of("min_samples").parse().unwrap();
    let window = humantime::parse_duration(&default_of("window")).unwrap();
    let expected = HedgeDelay::percentile(95.0, samples, window).unwrap();
    assert_eq!(delay_of(&hedge), format!("{expected:?}"));
    assert_eq!(
        default_of("max_attempts").parse::<u32>().unwrap(),
        hedge.max_attempts()
    );
    assert_eq!(default_of("max_in_flight"), "`max_attempts`");
    assert_eq!(hedge.max_in_flight(), hedge.max_attempts());
    assert_eq!(default_of("on_attempt_timeout"), "off");
    assert_eq!(hedge.attempt_timeout(), None);
    let max = humantime::parse_duration(&default_of("max_server_delay")).unwrap();
    assert_eq!(hedge.max_server_delay(), max);
}

#[test]
fn the_combined_layer_refuses_a_client_that_hedges() {
    let config = ClientsConfig::from_toml_str(
        "[clients.search]\nhedge.delay = \"50ms\"\n[clients.batch]\nretry.max_attempts = 2",
    )
    .unwrap();
    let err = config.layer("search").unwrap_err().to_string();
    assert!(
        err.starts_with("clients.search.hedge is on: the client hedges instead of retrying"),
        "{err}"
    );
    assert!(config.layer("batch").is_ok());
    assert!(
        config.policy("search").is_ok(),
        "its policy is the rest of its stack"
    );
}

#[test]
fn invalid_hedge_settings_name_their_path() {
    let cases = [
        (
            "[clients.x.hedge]\ndelay = \"50ms\"\npercentile = 90.0",
            "clients.x.hedge.percentile must not be given with delay: a hedge waits one or the other",
        ),
        (
            "[clients.x.hedge]\ndelay = \"50ms\"\nmin_samples = 10",
            "clients.x.hedge.min_samples applies only to a percentile delay (percentile = ...)",
        ),
        (
            "[default.hedge]\ndelay = \"50ms\"\n[clients.x.hedge]\nwindow = \"1s\"",
            "clients.x.hedge.window applies only to a percentile delay (percentile = ...)",
        ),
        (
            "[clients.x.hedge]\nmax_attempts = 3",
            "clients.x.hedge.delay must be given to hedge (or percentile): nothing inherited has one",
        ),
        (
            "[clients.x.hedge]\nenabled = true",
            "clients.x.hedge.delay must be given to hedge (or percentile): nothing inherited has one",
        ),
        (
            "[clients.x.hedge]\ndelay = \"50ms\"\nmax_attempts = 0",
            "clients.x.hedge.max_attempts must be at least 1",
        ),
        (
            "[clients.x.hedge]\ndelay = \"50ms\"\nmax_in_flight = 0",
            "clients.x.hedge.max_in_flight must be at least 1",
        ),
        (
            "[default.hedge]\npercentile = 100.0",
            "default.hedge.percentile must be within (0, 100)",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(refused(text), expected, "{text}");
    }
    let malformed = refused("[clients.x.hedge]\ndelay = \"50ms\"\non_attempt_timeout = \"soon\"");
    assert!(
        malformed.starts_with(
            "clients.x.hedge.on_attempt_timeout must be \"off\" or a duration such as \"500ms\""
        ),
        "{malformed}"
    );
}

#[test]
fn a_hedge_turned_off_in_default_is_turned_on_by_a_client_with_its_settings() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.hedge]
        enabled = false
        delay = "30ms"

        [clients.on.hedge]
        enabled = true

        [clients.off-again.hedge]
        on_attempt_timeout = "off"
        "#,
    )
    .unwrap();
    assert!(hedge_of(&config, "anyone").is_none());
    let on = hedge_of(&config, "on").unwrap();
    assert_eq!(
        delay_of(&on),
        format!("{:?}", HedgeDelay::fixed(Duration::from_millis(30)))
    );
    assert!(
        hedge_of(&config, "off-again").is_none(),
        "an \"off\" turns nothing on"
    );
}

#[test]
fn a_client_that_hedges_is_not_refused_for_leaving_no_room_for_a_retry() {
    let retrying = "[clients.x]\ndeadline = \"1s\"\nattempt_timeout = \"1s\"";
    assert!(refused(retrying).starts_with("clients.x.deadline leaves no room for a retry"));
    let hedging = format!("{retrying}\nhedge.delay = \"50ms\"");
    let config = ClientsConfig::from_toml_str(&hedging).unwrap();
    assert!(hedge_of(&config, "x").is_some());
}
