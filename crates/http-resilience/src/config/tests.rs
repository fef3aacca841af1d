//! The configuration: reading, resolution, validation and the presets.

use super::validate::client_path;
use super::written::{BackoffKind, DecoderKind, FromText, Preset, Written};
use super::ClientPolicy;
use super::*;
use crate::breaker::{BreakerPolicy, BreakerSettings};
use crate::policy::{AnyDecoder, AnyRetryer, Retryer};
use crate::presets;
use crate::InvalidSetting;
use std::time::Duration;

/// The erased preset and the one built from the table are the same policy.
fn assert_same(name: &str, built: &ClientPolicy, preset: &ClientPolicy) {
    assert_eq!(built.deadline(), preset.deadline(), "{name}: deadline");
    assert_eq!(
        built.attempt_timeout(),
        preset.attempt_timeout(),
        "{name}: attempt_timeout"
    );
    match (built.retry().decoder(), preset.retry().decoder()) {
        (AnyDecoder::Statuses(a), AnyDecoder::Statuses(b)) => assert_eq!(a, b, "{name}"),
        (AnyDecoder::Grpc(a), AnyDecoder::Grpc(b)) => assert_eq!(a, b, "{name}"),
        (AnyDecoder::Feign(_), AnyDecoder::Feign(_))
        | (AnyDecoder::Transient(_), AnyDecoder::Transient(_)) => {}
        (a, b) => panic!("{name}: decoder {a:?} against {b:?}"),
    }
    match (built.retry().retryer(), preset.retry().retryer()) {
        (AnyRetryer::Fixed(a), AnyRetryer::Fixed(b)) => assert_eq!(a, b, "{name}"),
        (AnyRetryer::Feign(a), AnyRetryer::Feign(b)) => assert_eq!(a, b, "{name}"),
        (AnyRetryer::Exponential(a), AnyRetryer::Exponential(b)) => {
            assert_eq!(a.initial(), b.initial(), "{name}: initial");
            assert_eq!(a.multiplier(), b.multiplier(), "{name}: multiplier");
            assert_eq!(a.max_delay(), b.max_delay(), "{name}: max_delay");
            assert_eq!(a.max_attempts(), b.max_attempts(), "{name}: max_attempts");
            assert_eq!(a.jitter(), b.jitter(), "{name}: jitter");
        }
        (AnyRetryer::Grpc(a), AnyRetryer::Grpc(b)) => {
            assert_eq!(a.initial(), b.initial(), "{name}: initial");
            assert_eq!(a.multiplier(), b.multiplier(), "{name}: multiplier");
            assert_eq!(a.max_backoff(), b.max_backoff(), "{name}: max_backoff");
            assert_eq!(a.max_attempts(), b.max_attempts(), "{name}: max_attempts");
            assert_eq!(a.max_pushback(), b.max_pushback(), "{name}: max_pushback");
        }
        (a, b) => panic!("{name}: retryer {a:?} against {b:?}"),
    }
    let budget = |policy: &ClientPolicy| {
        policy
            .retry()
            .budget()
            .map(|budget| (budget.max_tokens(), budget.token_ratio()))
    };
    assert_eq!(budget(built), budget(preset), "{name}: budget");
    assert_eq!(
        built.retry().options().deadline_margin(),
        preset.retry().options().deadline_margin(),
        "{name}: min_attempt"
    );
    assert_eq!(
        built.retry().options().attempt_header(),
        preset.retry().options().attempt_header(),
        "{name}: attempt header"
    );
    assert_eq!(
        breaker_of(built).map(|(settings, decoder)| (settings, format!("{decoder:?}"))),
        breaker_of(preset).map(|(settings, decoder)| (settings, format!("{decoder:?}"))),
        "{name}: breaker"
    );
}

/// The settings and the decoder of `policy`'s breaker, if it has one.
fn breaker_of(policy: &ClientPolicy) -> Option<(BreakerSettings, &AnyDecoder)> {
    let breaker = policy.guard().breaker.as_ref()?;
    Some((breaker.settings(), breaker.decoder()))
}

#[test]
fn preset_fields_build_the_presets() {
    let cases = [
        (
            Preset::Reactor,
            super::resolve::client_policy(presets::reactor()),
        ),
        (
            Preset::Feign,
            super::resolve::client_policy(presets::feign()),
        ),
        (
            Preset::Standard,
            super::resolve::client_policy(presets::standard()),
        ),
        (
            Preset::Conservative,
            super::resolve::client_policy(presets::conservative()),
        ),
        (Preset::Grpc, super::resolve::client_policy(presets::grpc())),
    ];
    for (preset, expected) in cases {
        let name = format!("{preset:?}");
        let built = preset.fields().build(&name).unwrap();
        assert_same(&name, &built, &expected);
    }
}

#[test]
fn preset_names_parse() {
    for (text, preset) in [
        ("reactor", Preset::Reactor),
        ("feign", Preset::Feign),
        ("standard", Preset::Standard),
        ("conservative", Preset::Conservative),
        ("grpc", Preset::Grpc),
    ] {
        assert_eq!(Preset::from_text(text), Some(preset));
    }
    assert_eq!(Preset::from_text("Reactor"), None);
}

#[test]
fn names_round_trip() {
    for kind in [
        DecoderKind::Statuses,
        DecoderKind::Feign,
        DecoderKind::Transient,
        DecoderKind::Grpc,
    ] {
        assert_eq!(DecoderKind::from_text(kind.name()), Some(kind));
    }
    for kind in [
        BackoffKind::Fixed,
        BackoffKind::Exponential,
        BackoffKind::Feign,
        BackoffKind::Grpc,
    ] {
        assert_eq!(BackoffKind::from_text(kind.name()), Some(kind));
    }
}

#[test]
fn durations_are_read_for_people() {
    assert_eq!(Duration::from_text("1m 30s"), Some(Duration::from_secs(90)));
    assert_eq!(
        Duration::from_text("250ms"),
        Some(Duration::from_millis(250))
    );
    let malformed = Written::<Duration>::Malformed("2 parsecs".into());
    let err = malformed.get("deadline", "clients.weather").unwrap_err();
    assert_eq!(
        err.to_string(),
        "clients.weather.deadline must be a duration such as \"250ms\", \"2s\" or \"1m 30s\""
    );
    assert_eq!(err.value(), Some("\"2 parsecs\""));
    // A number too large for the reader is out of range, not malformed.
    let huge = Duration::from_text("99999999999999999999s");
    assert_eq!(huge, Some(Duration::MAX));
    let err = Written::Parsed(Duration::MAX)
        .get("deadline", "default")
        .unwrap_err();
    assert_eq!(err.to_string(), "default.deadline must be at most 24h");
    assert_eq!(err.value(), Some("too large"));
}

#[test]
fn client_paths_quote_names_that_are_not_bare_keys() {
    assert_eq!(client_path("weather-eu_2"), "clients.weather-eu_2");
    assert_eq!(client_path("eu.weather"), "clients.\"eu.weather\"");
    assert_eq!(client_path(""), "clients.\"\"");
}

#[test]
fn empty_configuration_gives_the_standard_preset() {
    let config = ClientsConfig::default();
    config.validate().unwrap();
    assert_eq!(config.names().count(), 0);
    let policy = config.policy("anything").unwrap();
    assert_same(
        "standard",
        &policy,
        &super::resolve::client_policy(presets::standard()),
    );
}

/// The cells of the markdown table rows in `doc` whose first cell is one of
/// `names` in backticks, by name.
fn table_rows<'a>(doc: &'a str, names: &[&str]) -> Vec<(String, Vec<&'a str>)> {
    doc.lines()
        .filter_map(|line| line.strip_prefix("//! ").unwrap_or(line).strip_prefix("| "))
        .filter_map(|row| {
            let cells: Vec<&str> = row.trim_end_matches(" |").split(" | ").collect();
            let name = cells
                .first()?
                .strip_prefix("[`")
                .or(cells.first()?.strip_prefix('`'))?;
            let name = name.split('`').next()?;
            names.contains(&name).then(|| (name.to_owned(), cells))
        })
        .collect()
}

const PRESETS: [(&str, Preset); 6] = [
    ("reactor", Preset::Reactor),
    ("feign", Preset::Feign),
    ("standard", Preset::Standard),
    ("conservative", Preset::Conservative),
    ("apache", Preset::Apache),
    ("grpc", Preset::Grpc),
];

#[test]
fn the_docs_table_of_presets_as_fields_is_the_code() {
    let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
    let rows = table_rows(include_str!("format.md"), &names);
    assert_eq!(rows.len(), PRESETS.len(), "one row per preset: {rows:?}");
    for (name, cells) in rows {
        let preset = PRESETS.iter().find(|(n, _)| *n == name).unwrap().1;
        let fields = preset.fields();
        let duration = |cell: &str| Duration::from_text(cell).unwrap();
        assert_eq!(duration(cells[1]), fields.deadline, "{name}: deadline");
        assert_eq!(
            duration(cells[2]),
            fields.attempt_timeout,
            "{name}: attempt_timeout"
        );
        assert_eq!(cells[3], fields.decoder.kind.name(), "{name}: decoder");
        assert_eq!(cells[4], fields.backoff.name(), "{name}: backoff");
        assert_eq!(duration(cells[5]), fields.delay, "{name}: delay");
        assert_eq!(duration(cells[6]), fields.max_delay, "{name}: max_delay");
        assert_eq!(
            cells[7],
            fields.max_attempts.to_string(),
            "{name}: max_attempts"
        );
        let other = cells.get(8).copied().unwrap_or("");
        if let Some(statuses) = &fields.decoder.statuses {
            let written: Vec<String> = statuses.iter().map(u16::to_string).collect();
            assert!(
                other.contains(&format!("statuses = [{}]", written.join(", "))),
                "{name}: {other}"
            );
        }
        if let Some(codes) = &fields.decoder.codes {
            let written: Vec<String> = codes
                .iter()
                .map(|code| format!("{:?}", crate::policy::grpc_code_name(*code).unwrap()))
                .collect();
            assert!(
                other.contains(&format!("codes = [{}]", written.join(", "))),
                "{name}: {other}"
            );
        }
        if let Some((tokens, ratio)) = fields.budget {
            assert!(
                other.contains(&format!("`budget.max_tokens = {tokens}`"))
                    && other.contains(&format!("`budget.token_ratio = {ratio}`")),
                "{name}: {other}"
            );
        }
        if fields.backoff == BackoffKind::Grpc {
            assert!(
                other.contains(&format!("multiplier = {:?}", fields.multiplier)),
                "{name}: {other}"
            );
        }
        if fields.backoff == BackoffKind::Exponential {
            assert!(
                other.contains(&format!("multiplier = {:?}", fields.multiplier)),
                "{name}: {other}"
            );
            assert!(
                other.contains(&format!(
                    "jitter = {:?}",
                    format!("{:?}", fields.jitter).to_lowercase()
                )),
                "{name}: {other}"
            );
        }
        assert_eq!(
            other.contains("a breaker with the defaults"),
            fields.breaker.enabled,
            "{name}: {other}"
        );
        if fields.breaker.enabled {
            assert_eq!(fields.breaker.settings, BreakerPolicy::default().settings());
        }
        match fields.min_attempt {
            Some(min) => assert!(
                other.contains(&format!("min_attempt = \"{}ms\"", min.as_millis())),
                "{name}: {other}"
            ),
            None => assert!(!other.contains("min_attempt"), "{name}: {other}"),
        }
    }
}

#[test]
fn the_presets_docs_table_is_the_code() {
    let names: Vec<&str> = PRESETS.iter().map(|(name, _)| *name).collect();
    let rows = table_rows(include_str!("../presets.rs"), &names);
    assert_eq!(rows.len(), PRESETS.len(), "one row per preset: {rows:?}");
    // "3 s", "60 s", "5 min": the unit apart from the number.
    let duration = |cell: &str| Duration::from_text(&cell.replace(' ', "")).unwrap();
    for (name, cells) in rows {
        let fields = PRESETS.iter().find(|(n, _)| *n == name).unwrap().1.fields();
        assert_eq!(
            cells[2],
            (fields.max_attempts - 1).to_string(),
            "{name}: retries"
        );
        assert_eq!(
            duration(cells[4]),
            fields.attempt_timeout,
            "{name}: attempt"
        );
        assert_eq!(duration(cells[5]), fields.deadline, "{name}: deadline");
    }
}

#[test]
fn a_grpc_section_names_its_codes() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.orders]
        preset = "grpc"
        retry.codes = ["UNAVAILABLE", "resource_exhausted"]
        retry.max_attempts = 3
        "#,
    )
    .unwrap();
    let orders = config.policy("orders").unwrap();
    match orders.retry().decoder() {
        AnyDecoder::Grpc(decoder) => {
            assert_eq!(decoder.retryable_codes().collect::<Vec<_>>(), [8, 14]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(Retryer::max_attempts(orders.retry().retryer()), Some(3));
    assert_eq!(
        orders
            .retry()
            .options()
            .attempt_header()
            .map(|name| name.as_str()),
        Some("grpc-previous-rpc-attempts")
    );
    // One bucket for the client, however many times its policy is built.
    let again = config.policy("orders").unwrap();
    orders.retry().budget().unwrap().record_retryable_failure();
    assert_eq!(again.retry().budget().unwrap().tokens_milli(), 9_000);

    let typo = "[clients.typo]\npreset = \"grpc\"\nretry.codes = [\"SOON\"]\n";
    let err = ClientsConfig::from_toml_str(typo).unwrap_err();
    assert_eq!(
        err.to_string(),
        "clients.typo.retry.codes must be a gRPC code name such as \"UNAVAILABLE\""
    );
    let ok_code = "[clients.ok]\npreset = \"grpc\"\nretry.codes = [\"OK\"]\n";
    let err = ClientsConfig::from_toml_str(ok_code).unwrap_err();
    assert_eq!(
        err.to_string(),
        "clients.ok.retry.codes OK (0) is not a failure and cannot be retried"
    );
    let wrong = "[clients.wrong]\nretry.codes = [\"UNAVAILABLE\"]\n";
    let err = ClientsConfig::from_toml_str(wrong).unwrap_err();
    assert!(
        err.to_string().starts_with("clients.wrong.retry.codes"),
        "{err}"
    );
    assert!(err.to_string().contains("grpc"), "{err}");
}

#[test]
fn a_grpc_section_caps_the_pushback() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.orders]
        preset = "grpc"
        retry.max_pushback = "2s"
        "#,
    )
    .unwrap();
    let orders = config.policy("orders").unwrap();
    match orders.retry().retryer() {
        AnyRetryer::Grpc(backoff) => {
            assert_eq!(backoff.max_pushback(), Some(Duration::from_secs(2)));
        }
        other => panic!("{other:?}"),
    }
    // Without it, no cap, as in the preset.
    let plain = ClientsConfig::from_toml_str("[clients.plain]\npreset = \"grpc\"\n").unwrap();
    match plain.policy("plain").unwrap().retry().retryer() {
        AnyRetryer::Grpc(backoff) => assert_eq!(backoff.max_pushback(), None),
        other => panic!("{other:?}"),
    }

    let zero = "[clients.zero]\npreset = \"grpc\"\nretry.max_pushback = \"0s\"\n";
    assert_eq!(
        ClientsConfig::from_toml_str(zero).unwrap_err().to_string(),
        "clients.zero.retry.max_pushback must be greater than zero"
    );
    let wrong = "[clients.wrong]\npreset = \"standard\"\nretry.max_pushback = \"2s\"\n";
    assert_eq!(
        ClientsConfig::from_toml_str(wrong).unwrap_err().to_string(),
        "clients.wrong.retry.max_pushback applies only to backoff = \"grpc\""
    );
    // Inherited, it goes with the grpc backoff when a client changes it.
    let dropped = ClientsConfig::from_toml_str(
        r#"
        [default]
        preset = "grpc"
        retry.max_pushback = "2s"

        [clients.fixed]
        retry.backoff = "fixed"
        "#,
    )
    .unwrap();
    assert!(matches!(
        dropped.policy("fixed").unwrap().retry().retryer(),
        AnyRetryer::Fixed(_)
    ));
}

#[test]
fn a_short_grpc_deadline_is_judged_on_the_shortest_first_wait() {
    // The first wait is drawn between 80 and 120 ms; with the preset's
    // 100 ms of useful attempt, 180 ms always leaves room and 179 ms never
    // does, whatever the draw.
    for _ in 0..50 {
        let fits = "[clients.quick]\npreset = \"grpc\"\ndeadline = \"180ms\"\nattempt_timeout = \"180ms\"\n";
        assert!(ClientsConfig::from_toml_str(fits).is_ok());
        let short = "[clients.quick]\npreset = \"grpc\"\ndeadline = \"179ms\"\nattempt_timeout = \"179ms\"\n";
        let err = ClientsConfig::from_toml_str(short).unwrap_err().to_string();
        assert!(err.contains("leaves no room for a retry"), "{err}");
    }
}

// ----- the breaker -----

/// The settings of the breaker of `name` in `text`, which must have one.
fn breaker_settings(text: &str, name: &str) -> BreakerSettings {
    let config = ClientsConfig::from_toml_str(text).unwrap_or_else(|err| panic!("{err}"));
    let policy = config.policy(name).unwrap();
    match breaker_of(&policy) {
        Some((settings, _)) => settings,
        None => panic!("{name}: no breaker in {text}"),
    }
}

/// Whether `name` in `text` has a breaker.
fn has_a_breaker(text: &str, name: &str) -> bool {
    let config = ClientsConfig::from_toml_str(text).unwrap_or_else(|err| panic!("{err}"));
    config
        .policy(name)
        .unwrap()
        .guard()
        .breaker
        .as_ref()
        .is_some()
}

/// The setting `text` is refused for.
fn refused_setting(text: &str) -> InvalidSetting {
    match ClientsConfig::from_toml_str(text) {
        Ok(_) => panic!("loaded, but should not have: {text}"),
        Err(err) => err
            .setting()
            .cloned()
            .unwrap_or_else(|| panic!("not a setting: {err}")),
    }
}

/// The message `text` is refused with.
fn refused(text: &str) -> String {
    match ClientsConfig::from_toml_str(text) {
        Ok(config) => panic!("loaded, but should not have: {config:?}"),
        Err(err) => err.to_string(),
    }
}

#[test]
fn the_standard_presets_breaker_is_read_off_presets_standard() {
    let fields = Preset::Standard.fields();
    let standard = presets::standard();
    assert!(fields.breaker.enabled);
    assert_eq!(fields.breaker.settings, standard.guard().settings());
    // It judges with the retry's decoder, and so follows it.
    assert_eq!(fields.breaker.decoder, None);
    assert_eq!(fields.breaker.seed, None);
    // No other preset has one.
    for (name, preset) in PRESETS {
        assert_eq!(
            preset.fields().breaker.enabled,
            name == "standard",
            "{name}"
        );
    }
    // An empty file is the standard preset, breaker included.
    assert_eq!(breaker_settings("", "anyone"), standard.guard().settings());
}

#[test]
fn a_client_inherits_the_breaker_field_by_field() {
    let text = r#"
        [default.breaker]
        consecutive_failures = 3
        failure_ratio = 0.5

        [clients.weather.breaker]
        break_duration = "10s"
        failure_ratio = 0.25
    "#;
    let standard = presets::standard().guard().settings();
    let weather = breaker_settings(text, "weather");
    assert_eq!(weather.consecutive_failures, 3, "from [default]");
    assert_eq!(weather.failure_ratio, 0.25, "its own over [default]'s");
    assert_eq!(weather.break_duration, Duration::from_secs(10), "its own");
    assert_eq!(
        (weather.sampling_window, weather.max_break_duration),
        (standard.sampling_window, standard.max_break_duration),
        "from the preset under [default]"
    );
    let other = breaker_settings(text, "other");
    assert_eq!((other.consecutive_failures, other.failure_ratio), (3, 0.5));
    assert_eq!(other.break_duration, standard.break_duration);
}

#[test]
fn a_clients_preset_replaces_the_default_breaker() {
    let text = r#"
        [default.breaker]
        consecutive_failures = 3

        [clients.search]
        preset = "standard"

        [clients.legacy]
        preset = "reactor"
    "#;
    assert_eq!(
        breaker_settings(text, "search"),
        presets::standard().guard().settings()
    );
    assert!(!has_a_breaker(text, "legacy"), "reactor has none");
}

#[test]
fn a_breaker_field_turns_the_breaker_on_over_a_base_without_one() {
    let text = r#"
        [default]
        preset = "reactor"

        [clients.plain]

        [clients.guarded.breaker]
        consecutive_failures = 2

        [clients.switched.breaker]
        enabled = true
    "#;
    assert!(!has_a_breaker(text, "plain"));
    let defaults = BreakerPolicy::default().settings();
    let guarded = breaker_settings(text, "guarded");
    assert_eq!(guarded.consecutive_failures, 2);
    assert_eq!(guarded.break_duration, defaults.break_duration);
    assert_eq!(breaker_settings(text, "switched"), defaults);
    // It judges with the reactor's decoder: 503 only.
    let config = ClientsConfig::from_toml_str(text).unwrap();
    match config
        .policy("guarded")
        .unwrap()
        .guard()
        .breaker
        .as_ref()
        .unwrap()
        .decoder()
    {
        AnyDecoder::Statuses(decoder) => {
            assert_eq!(
                decoder.statuses().map(|s| s.as_u16()).collect::<Vec<_>>(),
                [503]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn enabled_false_turns_an_inherited_breaker_off_and_keeps_its_settings() {
    let text = r#"
        [default.breaker]
        enabled = false
        consecutive_failures = 3

        [clients.on.breaker]
        enabled = true

        [clients.tuned.breaker]
        break_duration = "2s"

        [clients.off.breaker]
        enabled = false
    "#;
    assert!(!has_a_breaker(text, "anyone"));
    assert_eq!(breaker_settings(text, "on").consecutive_failures, 3);
    let tuned = breaker_settings(text, "tuned");
    assert_eq!(
        (tuned.consecutive_failures, tuned.break_duration),
        (3, Duration::from_secs(2))
    );
    assert!(!has_a_breaker(text, "off"));
    // Over the standard preset's breaker.
    assert!(!has_a_breaker("[clients.x.breaker]\nenabled = false", "x"));
    // The settings of a breaker that is off in [default] are checked all
    // the same.
    assert_eq!(
        refused("[default.breaker]\nenabled = false\nfailure_ratio = 2.0"),
        "default.breaker.failure_ratio must be in (0, 1]"
    );
    // In a client's section, where nothing inherits them, they are refused.
    assert_eq!(
        refused("[clients.x.breaker]\nenabled = false\nbreak_duration = \"2s\""),
        "clients.x.breaker.break_duration applies only to a breaker, got enabled = false"
    );
    assert!(!has_a_breaker(
        "[clients.x.breaker]\nenabled = false\nramp_duration = \"off\"",
        "x"
    ));
}

#[test]
fn the_breaker_judges_with_the_retry_decoder_unless_it_has_its_own() {
    let text = r#"
        [default.retry]
        decoder = "statuses"
        statuses = [503]

        [clients.follows.retry]
        statuses = [502, 503]

        [clients.own.breaker]
        statuses = [500, 503]
        retry_after = true

        [clients.grpc.breaker]
        decoder = "grpc"
        codes = ["UNAVAILABLE", "DEADLINE_EXCEEDED"]
    "#;
    let config = ClientsConfig::from_toml_str(text).unwrap();
    let decoder = |name: &str| {
        let policy = config.policy(name).unwrap();
        policy.guard().breaker.as_ref().unwrap().decoder().clone()
    };
    let statuses = |decoder: &AnyDecoder| match decoder {
        AnyDecoder::Statuses(d) => (
            d.statuses().map(|s| s.as_u16()).collect::<Vec<_>>(),
            d.reads_retry_after(),
        ),
        other => panic!("{other:?}"),
    };
    assert_eq!(statuses(&decoder("follows")), (vec![502, 503], false));
    assert_eq!(statuses(&decoder("own")), (vec![500, 503], true));
    // Its own decoder leaves the retry's alone.
    let own = config.policy("own").unwrap();
    assert_eq!(statuses(own.retry().decoder()), (vec![503], false));
    match decoder("grpc") {
        AnyDecoder::Grpc(d) => assert_eq!(d.retryable_codes().collect::<Vec<_>>(), [4, 14]),
        other => panic!("{other:?}"),
    }
    // A field of another kind is refused where it is written.
    assert_eq!(
        refused("[clients.x.breaker]\nstatuses = [503]"),
        "clients.x.breaker.statuses applies only to decoder = \"statuses\""
    );
    assert_eq!(
        refused("[clients.x.breaker]\ndecoder = \"statuses\""),
        "clients.x.breaker.statuses must be given with decoder = \"statuses\""
    );
    assert_eq!(
        refused("[clients.x.breaker]\ndecoder = \"grpc\"\ncodes = [\"OK\"]"),
        "clients.x.breaker.codes OK (0) is not a failure and cannot be retried"
    );
}

#[test]
fn a_breaker_seed_turns_the_breaker_on() {
    let text = "[default]\npreset = \"reactor\"\n[clients.x.breaker]\nseed = 7\n";
    assert!(has_a_breaker(text, "x"));
    let config = ClientsConfig::from_toml_str(text).unwrap();
    assert_eq!(
        config.clients["x"]
            .apply(Preset::Reactor.fields(), "clients.x")
            .unwrap()
            .breaker
            .seed,
        Some(7)
    );
}

#[test]
fn invalid_breaker_settings_name_their_path() {
    for (text, message) in [
        (
            "[clients.x.breaker]\nfailure_ratio = 1.5",
            "clients.x.breaker.failure_ratio must be in (0, 1]",
        ),
        (
            "[clients.x.breaker]\nfailure_ratio = nan",
            "clients.x.breaker.failure_ratio must be in (0, 1]",
        ),
        (
            "[default.breaker]\nconsecutive_failures = 0",
            "default.breaker.consecutive_failures must be at least 1",
        ),
        (
            "[clients.x.breaker]\nsampling_window = \"5ms\"",
            "clients.x.breaker.sampling_window must be at least 10ms",
        ),
        (
            "[clients.x.breaker]\nminimum_throughput = 0",
            "clients.x.breaker.minimum_throughput must be at least 1",
        ),
        (
            "[clients.x.breaker]\nbreak_duration = \"0s\"",
            "clients.x.breaker.break_duration must be above zero",
        ),
        (
            "[clients.x.breaker]\nbreak_duration = \"2s\"\nmax_break_duration = \"1s\"",
            "clients.x.breaker.max_break_duration must be at least the break duration",
        ),
        (
            "[clients.x.breaker]\nbreak_multiplier = 0.5",
            "clients.x.breaker.break_multiplier must be at least 1.0",
        ),
        (
            "[clients.x.breaker]\nbreak_jitter = 1.5",
            "clients.x.breaker.break_jitter must be in [0, 1]",
        ),
        (
            "[clients.x.breaker]\nhalf_open_probes = 0",
            "clients.x.breaker.half_open_probes must be at least 1",
        ),
        (
            "[clients.x.breaker]\nhalf_open_successes = 0",
            "clients.x.breaker.half_open_successes must be at least 1",
        ),
        (
            "[clients.x.breaker]\nmax_keys = 0",
            "clients.x.breaker.max_keys must be at least 1",
        ),
        (
            "[clients.x.breaker]\nidle_key_timeout = \"0s\"",
            "clients.x.breaker.idle_key_timeout must be greater than zero",
        ),
        (
            "[clients.x.breaker]\nramp_duration = \"10s\"\nramp_steps = 0",
            "clients.x.breaker.ramp_steps must be at least 1",
        ),
        (
            "[default.breaker]\nramp_duration = \"0s\"\nramp_steps = 4",
            "default.breaker.ramp_duration must be above zero",
        ),
        (
            "[clients.x.breaker]\nslow_call_threshold = \"0s\"",
            "clients.x.breaker.slow_call_threshold must be above zero",
        ),
        (
            "[default.breaker]\nenabled = false\nslow_call_threshold = \"0s\"",
            "default.breaker.slow_call_threshold must be above zero",
        ),
        (
            "[clients.x.breaker]\nramp_duration = \"off\"\nramp_steps = 4",
            "clients.x.breaker.ramp_steps applies only to a ramp, got ramp_duration = \"off\"",
        ),
    ] {
        assert_eq!(refused(text), message, "{text}");
    }
    let malformed = refused("[clients.x.breaker]\nbreak_duration = \"soon\"");
    assert!(
        malformed.starts_with(
            "clients.x.breaker.break_duration must be a duration such as \"250ms\", \"2s\" or \
             \"1m 30s\""
        ),
        "{malformed}"
    );
}

#[test]
fn an_inherited_break_cap_below_the_break_names_where_it_came_from() {
    // The cap of the standard preset, 60 s, under a break of two minutes.
    let err = refused_setting("[clients.x.breaker]\nbreak_duration = \"2m\"");
    assert_eq!(
        err.to_string(),
        "clients.x.breaker.max_break_duration inherited from preset standard \
         is below the break_duration"
    );
    assert_eq!(err.value(), Some("60s"));
    // A break from [default] over a client's own cap.
    let err = refused_setting(
        "[default.breaker]\nbreak_duration = \"30s\"\n\
         [clients.x.breaker]\nmax_break_duration = \"20s\"",
    );
    assert_eq!(
        err.to_string(),
        "clients.x.breaker.max_break_duration is below the break_duration, \
         inherited from [default]"
    );
    assert_eq!(err.value(), Some("20s"));
    // A preset with no breaker: the cap is the breaker's default.
    assert_eq!(
        refused("[clients.x]\npreset = \"reactor\"\nbreaker.break_duration = \"2m\""),
        "clients.x.breaker.max_break_duration by default is below the break_duration"
    );
}

#[test]
fn the_ramp_and_the_slow_call_rule_are_inherited_field_by_field() {
    let text = r#"
        [default.breaker]
        ramp_duration = "20s"
        ramp_steps = 4
        slow_call_threshold = "2s"

        [clients.steps.breaker]
        ramp_steps = 2

        [clients.longer.breaker]
        ramp_duration = "1m"
        slow_call_threshold = "500ms"

        [clients.off.breaker]
        ramp_duration = "off"
        slow_call_threshold = "off"

        [clients.fresh]
        preset = "standard"
    "#;
    let secs = Duration::from_secs;
    let steps = breaker_settings(text, "steps");
    assert_eq!(
        steps.ramp,
        Some((secs(20), 2)),
        "its steps, [default]'s duration"
    );
    assert_eq!(steps.slow_call_threshold, Some(secs(2)), "from [default]");
    let longer = breaker_settings(text, "longer");
    assert_eq!(
        longer.ramp,
        Some((secs(60), 4)),
        "its duration, [default]'s steps"
    );
    assert_eq!(longer.slow_call_threshold, Some(Duration::from_millis(500)));
    let off = breaker_settings(text, "off");
    assert_eq!((off.ramp, off.slow_call_threshold), (None, None));
    let anyone = breaker_settings(text, "anyone");
    assert_eq!(anyone.ramp, Some((secs(20), 4)));
    assert_eq!(anyone.slow_call_threshold, Some(secs(2)));
    let fresh = breaker_settings(text, "fresh");
    assert_eq!((fresh.ramp, fresh.slow_call_threshold), (None, None));
    // Off by default: the standard preset and a breaker turned on.
    let plain = breaker_settings("", "anyone");
    assert_eq!((plain.ramp, plain.slow_call_threshold), (None, None));
}

#[test]
fn an_off_value_does_not_turn_a_breaker_on_and_a_duration_does() {
    let text = r#"
        [default]
        preset = "reactor"

        [clients.off.breaker]
        ramp_duration = "off"
        slow_call_threshold = "off"

        [clients.slow.breaker]
        slow_call_threshold = "2s"

        [clients.ramped.breaker]
        ramp_duration = "10s"
        ramp_steps = 2
    "#;
    assert!(!has_a_breaker(text, "off"));
    let slow = breaker_settings(text, "slow");
    assert_eq!(slow.slow_call_threshold, Some(Duration::from_secs(2)));
    assert_eq!(slow.consecutive_failures, 5, "the breaker's defaults");
    let ramped = breaker_settings(text, "ramped");
    assert_eq!(ramped.ramp, Some((Duration::from_secs(10), 2)));
    assert_eq!(ramped.slow_call_threshold, None);
}

#[test]
fn half_a_ramp_names_the_missing_field_and_where_no_ramp_came_from() {
    assert_eq!(
        refused("[clients.x.breaker]\nramp_steps = 4"),
        "clients.x.breaker.ramp_duration must be given with ramp_steps: \
         preset standard has no ramp to take it from"
    );
    assert_eq!(
        refused("[default.breaker]\nramp_duration = \"10s\""),
        "default.breaker.ramp_steps must be given with ramp_duration: \
         preset standard has no ramp to take it from"
    );
    assert_eq!(
        refused(
            "[default.breaker]\nramp_duration = \"off\"\n\
             [clients.x.breaker]\nramp_duration = \"10s\""
        ),
        "clients.x.breaker.ramp_steps must be given with ramp_duration: \
         [default] has no ramp to take it from"
    );
    assert_eq!(
        refused("[clients.x]\npreset = \"reactor\"\nbreaker.ramp_steps = 2"),
        "clients.x.breaker.ramp_duration must be given with ramp_steps: \
         the breaker's default has no ramp to take it from"
    );
    // A ramp to take it from: a zero steps over [default]'s duration is
    // the setter's error.
    assert_eq!(
        refused(
            "[default.breaker]\nramp_duration = \"10s\"\nramp_steps = 4\n\
             [clients.x.breaker]\nramp_steps = 0"
        ),
        "clients.x.breaker.ramp_steps must be at least 1"
    );
    let malformed = refused("[clients.x.breaker]\nslow_call_threshold = \"soon\"");
    assert!(
        malformed.starts_with(
            "clients.x.breaker.slow_call_threshold must be \"off\" or a duration such as \
             \"500ms\""
        ),
        "{malformed}"
    );
}

#[test]
fn the_docs_table_of_breaker_defaults_is_the_code() {
    let defaults = BreakerPolicy::default().settings();
    let standard = presets::standard().guard().settings();
    assert_eq!(defaults, standard, "the standard preset has the defaults");
    let doc = include_str!("format.md");
    let default_of = |field: &str| {
        let row = doc
            .lines()
            .find(|line| line.starts_with(&format!("| `breaker.{field}` |")))
            .unwrap_or_else(|| panic!("no row for breaker.{field}"));
        let (_, default) = row
            .rsplit_once("default ")
            .unwrap_or_else(|| panic!("no default in {row}"));
        default.trim_end_matches(" |").to_owned()
    };
    let duration = |field: &str| Duration::from_text(&default_of(field)).unwrap();
    let number = |field: &str| default_of(field).parse::<f64>().unwrap();
    let count = |field: &str| default_of(field).parse::<u64>().unwrap();
    let s = defaults;
    assert_eq!(
        count("consecutive_failures"),
        u64::from(s.consecutive_failures)
    );
    assert_eq!(number("failure_ratio"), s.failure_ratio);
    assert_eq!(duration("sampling_window"), s.sampling_window);
    assert_eq!(count("minimum_throughput"), u64::from(s.minimum_throughput));
    assert_eq!(duration("break_duration"), s.break_duration);
    assert_eq!(duration("max_break_duration"), s.max_break_duration);
    assert_eq!(number("break_multiplier"), s.break_multiplier);
    assert_eq!(number("break_jitter"), s.break_jitter);
    assert_eq!(count("half_open_probes"), u64::from(s.half_open_probes));
    assert_eq!(
        count("half_open_successes"),
        u64::from(s.half_open_successes)
    );
    assert_eq!(count("max_keys"), s.max_keys as u64);
    assert_eq!(duration("idle_key_timeout"), s.idle_key_timeout);
    // Off: no ramp, no slow calls.
    let off = |field: &str| default_of(field) == "off";
    assert_eq!(off("ramp_duration"), s.ramp.is_none());
    assert_eq!(off("ramp_steps"), s.ramp.is_none());
    assert_eq!(off("slow_call_threshold"), s.slow_call_threshold.is_none());
}

/// The budget header and format of client `name`'s policy.
fn propagated(
    config: &ClientsConfig,
    name: &str,
) -> Option<(String, crate::propagate::TimeoutFormat)> {
    let policy = config.policy(name).unwrap();
    policy
        .budget_header()
        .map(|(header, format)| (header.as_str().to_owned(), *format))
}

#[test]
fn propagate_is_inherited_field_by_field_and_off_turns_it_off() {
    use crate::propagate::TimeoutFormat::{Grpc, Millis};
    let config = ClientsConfig::from_toml_str(
        r#"
        [default]
        propagate = "envoy"

        [clients.grpc]
        propagate = "grpc"

        [clients.renamed]
        propagate_header = "X-Timeout-Ms"

        [clients.reformatted]
        propagate_format = "grpc"

        [clients.both]
        propagate = "grpc"
        propagate_header = "x-grpc-budget"

        [clients.none]
        propagate = "off"

        [clients.fresh]
        preset = "reactor"
        propagate_header = "x-budget"
        propagate_format = "millis"
        "#,
    )
    .unwrap();
    let envoy = Some(("x-envoy-expected-rq-timeout-ms".to_owned(), Millis));
    assert_eq!(propagated(&config, "anyone"), envoy);
    assert_eq!(
        propagated(&config, "grpc"),
        Some(("grpc-timeout".to_owned(), Grpc))
    );
    assert_eq!(
        propagated(&config, "renamed"),
        Some(("x-timeout-ms".to_owned(), Millis))
    );
    assert_eq!(
        propagated(&config, "reformatted"),
        Some(("x-envoy-expected-rq-timeout-ms".to_owned(), Grpc))
    );
    assert_eq!(
        propagated(&config, "both"),
        Some(("x-grpc-budget".to_owned(), Grpc))
    );
    assert_eq!(propagated(&config, "none"), None);
    assert_eq!(
        propagated(&config, "fresh"),
        Some(("x-budget".to_owned(), Millis))
    );
    // No preset sends one.
    assert_eq!(propagated(&ClientsConfig::default(), "anyone"), None);
}

#[test]
fn invalid_propagate_settings_name_their_path_and_origin() {
    assert_eq!(
        refused("[clients.x]\npropagate_header = \"bad name\"\npropagate_format = \"millis\""),
        "clients.x.propagate_header must be a header name such as \"x-timeout-ms\""
    );
    assert_eq!(
        refused("[default]\npropagate = \"envoy\"\n[clients.x]\npropagate_format = \"seconds\""),
        "clients.x.propagate_format must be one of \"millis\", \"grpc\""
    );
    assert_eq!(
        refused("[default]\npropagate = \"istio\""),
        "default.propagate must be one of \"envoy\", \"grpc\", \"off\""
    );
    assert_eq!(
        refused("[clients.x]\npropagate_header = \"x-budget\""),
        "clients.x.propagate_format must be given with propagate_header: \
         preset standard sends no budget to take it from"
    );
    assert_eq!(
        refused(
            "[default]\npropagate = \"off\"\n\
             [clients.x]\npropagate_format = \"grpc\""
        ),
        "clients.x.propagate_header must be given with propagate_format: \
         [default] sends no budget to take it from"
    );
    assert_eq!(
        refused("[clients.x]\npropagate = \"off\"\npropagate_format = \"grpc\""),
        "clients.x.propagate_format applies only to a propagated budget, got propagate = \"off\""
    );
}

/// The budget (tokens, ratio) of client `name`'s policy.
fn budget_of(config: &ClientsConfig, name: &str) -> Option<(u32, f64)> {
    let policy = config.policy(name).unwrap();
    policy
        .retry()
        .budget()
        .map(|budget| (budget.max_tokens(), budget.token_ratio()))
}

#[test]
fn a_retry_budget_is_inherited_field_by_field_under_any_preset() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.retry.budget]
        max_tokens = 20
        token_ratio = 0.5

        [clients.fewer.retry.budget]
        max_tokens = 4

        [clients.off.retry.budget]
        enabled = false

        [clients.grpc]
        preset = "grpc"
        retry.budget.token_ratio = 0.2

        [clients.plain]
        preset = "feign"
        "#,
    )
    .unwrap();
    assert_eq!(budget_of(&config, "anyone"), Some((20, 0.5)));
    assert_eq!(budget_of(&config, "fewer"), Some((4, 0.5)));
    assert_eq!(budget_of(&config, "off"), None);
    assert_eq!(budget_of(&config, "grpc"), Some((10, 0.2)));
    assert_eq!(budget_of(&config, "plain"), None);
    // One bucket per client: the same one for every policy of a name; a
    // bucket of its own for each other client; one for every name without
    // a section, which all get [default]'s policy.
    let bucket = |name: &str| {
        let policy = config.policy(name).unwrap();
        policy.retry().parts().options.budget.clone().unwrap()
    };
    assert!(std::sync::Arc::ptr_eq(&bucket("fewer"), &bucket("fewer")));
    assert!(!std::sync::Arc::ptr_eq(&bucket("fewer"), &bucket("grpc")));
    assert!(std::sync::Arc::ptr_eq(
        &bucket("anyone"),
        &bucket("someone else")
    ));
    assert!(!std::sync::Arc::ptr_eq(&bucket("anyone"), &bucket("fewer")));
}

#[test]
fn invalid_retry_budgets_name_their_path_and_origin() {
    assert_eq!(
        refused("[clients.x.retry.budget]\nmax_tokens = 0\ntoken_ratio = 0.1"),
        "clients.x.retry.budget.max_tokens must be in 1..=1000"
    );
    assert_eq!(
        refused("[clients.x]\npreset = \"grpc\"\nretry.budget.token_ratio = 1.5"),
        "clients.x.retry.budget.token_ratio must be in 0.001..=1"
    );
    assert_eq!(
        refused("[default.retry.budget]\nmax_tokens = 10"),
        "default.retry.budget.token_ratio must be given with max_tokens: \
         preset standard has no budget to take it from"
    );
    assert_eq!(
        refused(
            "[default]\npreset = \"grpc\"\nretry.budget.enabled = false\n\
             [clients.x.retry.budget]\ntoken_ratio = 0.5"
        ),
        "clients.x.retry.budget.max_tokens must be given with token_ratio: \
         [default] has no budget to take it from"
    );
    assert_eq!(
        refused("[clients.x.retry.budget]\nenabled = false\nmax_tokens = 3"),
        "clients.x.retry.budget.max_tokens applies only to a budget, got enabled = false"
    );
    assert_eq!(
        refused("[clients.x.retry.budget]\nenabled = true"),
        "clients.x.retry.budget.max_tokens must be given with enabled = true: \
         preset standard has no budget to take it from"
    );
}

/// The attempt header of client `name`'s policy, and whether it counts the
/// attempts before.
fn attempt_header_of(config: &ClientsConfig, name: &str) -> Option<(String, bool)> {
    let policy = config.policy(name).unwrap();
    policy
        .retry()
        .parts()
        .options
        .attempt_header
        .as_ref()
        .map(|header| (header.name().as_str().to_owned(), header.counts_previous()))
}

#[test]
fn attempt_headers_are_inherited_and_replace_the_grpc_decoders_own() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.retry]
        attempt_header = "x-attempt"

        [clients.previous.retry]
        previous_attempts_header = "x-previous"

        [clients.grpc]
        preset = "grpc"

        [clients.grpc-numbered]
        preset = "grpc"
        retry.attempt_header = "x-attempt"

        [clients.plain]
        preset = "reactor"
        "#,
    )
    .unwrap();
    let this = |name: &str| Some((name.to_owned(), false));
    let previous = |name: &str| Some((name.to_owned(), true));
    assert_eq!(attempt_header_of(&config, "anyone"), this("x-attempt"));
    assert_eq!(
        attempt_header_of(&config, "previous"),
        previous("x-previous")
    );
    assert_eq!(
        attempt_header_of(&config, "grpc"),
        previous("grpc-previous-rpc-attempts")
    );
    assert_eq!(
        attempt_header_of(&config, "grpc-numbered"),
        this("x-attempt")
    );
    assert_eq!(attempt_header_of(&config, "plain"), None);
}

#[test]
fn off_turns_off_an_inherited_attempt_header_and_the_grpc_decoders_own() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.retry]
        attempt_header = "x-attempt"

        [clients.quiet.retry]
        attempt_header = "off"

        [clients.grpc-quiet]
        preset = "grpc"
        retry.previous_attempts_header = "off"

        [clients.grpc-kept]
        preset = "grpc"
        retry.max_attempts = 3
        "#,
    )
    .unwrap();
    assert_eq!(
        attempt_header_of(&config, "anyone"),
        Some(("x-attempt".to_owned(), false))
    );
    assert_eq!(attempt_header_of(&config, "quiet"), None);
    assert_eq!(attempt_header_of(&config, "grpc-quiet"), None);
    assert_eq!(
        attempt_header_of(&config, "grpc-kept"),
        Some(("grpc-previous-rpc-attempts".to_owned(), true))
    );

    // Inherited: a client under a section that turned it off sends none, and
    // one that changes its decoder to the grpc decoder does not get it back.
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.retry]
        attempt_header = "off"

        [clients.grpc-decoder.retry]
        decoder = "grpc"
        "#,
    )
    .unwrap();
    assert_eq!(attempt_header_of(&config, "grpc-decoder"), None);
}

#[test]
fn invalid_attempt_headers_name_their_path() {
    assert_eq!(
        refused(
            "[clients.x.retry]\nattempt_header = \"x-attempt\"\n\
             previous_attempts_header = \"grpc-previous-rpc-attempts\""
        ),
        "clients.x.retry.previous_attempts_header must not be given with attempt_header: \
         an attempt sends one or the other"
    );
    assert_eq!(
        refused("[default.retry]\nattempt_header = \"x attempt\""),
        "default.retry.attempt_header must be \"off\" or a header name such as \"x-attempt\""
    );
    assert_eq!(
        refused("[clients.x.retry]\nprevious_attempts_header = \"\""),
        "clients.x.retry.previous_attempts_header must be \"off\" or a header name such as \"x-attempt\""
    );
}

mod hedge;
mod overload;
mod rate_limit;
mod refusals;
