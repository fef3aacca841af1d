//! The configuration: reading, resolution, validation and the presets.

use super::written::{BackoffKind, DecoderKind, FromText, Written};
use super::*;
use crate::breaker::AnyBreaker;
use crate::policy::{AnyDecoder, AnyRetryer, Retryer};
use crate::presets;
use std::time::Duration;

/// The erased preset and the one built from the table are the same policy.
fn assert_same(
    name: &str,
    built: &ResiliencePolicy<AnyDecoder, AnyRetryer, AnyBreaker>,
    preset: &ResiliencePolicy<AnyDecoder, AnyRetryer, AnyBreaker>,
) {
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
    let budget = |policy: &ResiliencePolicy<AnyDecoder, AnyRetryer, AnyBreaker>| {
        policy
            .retry()
            .budget()
            .map(|budget| (budget.max_tokens(), budget.token_ratio()))
    };
    assert_eq!(budget(built), budget(preset), "{name}: budget");
    assert_eq!(
        built.retry().deadline_margin(),
        preset.retry().deadline_margin(),
        "{name}: min_attempt"
    );
    assert_eq!(
        built.retry().attempt_header(),
        preset.retry().attempt_header(),
        "{name}: attempt header"
    );
}

#[test]
fn preset_fields_build_the_presets() {
    let cases = [
        (Preset::Reactor, presets::reactor().erase()),
        (Preset::Feign, presets::feign().erase()),
        (Preset::Standard, presets::standard().erase()),
        (Preset::Conservative, presets::conservative().erase()),
        (Preset::Grpc, presets::grpc().erase()),
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
        assert_eq!(Preset::from_text(text), Ok(preset));
    }
    assert_eq!(Preset::from_text("Reactor"), Err(None));
}

#[test]
fn names_round_trip() {
    for kind in [
        DecoderKind::Statuses,
        DecoderKind::Feign,
        DecoderKind::Transient,
        DecoderKind::Grpc,
    ] {
        assert_eq!(DecoderKind::from_text(kind.name()), Ok(kind));
    }
    for kind in [
        BackoffKind::Fixed,
        BackoffKind::Exponential,
        BackoffKind::Feign,
        BackoffKind::Grpc,
    ] {
        assert_eq!(BackoffKind::from_text(kind.name()), Ok(kind));
    }
}

#[test]
fn durations_are_read_for_people() {
    assert_eq!(Duration::from_text("1m 30s"), Ok(Duration::from_secs(90)));
    assert_eq!(Duration::from_text("250ms"), Ok(Duration::from_millis(250)));
    let malformed = Written::<Duration>::Malformed {
        text: "2 parsecs".into(),
        detail: Duration::from_text("2 parsecs").unwrap_err(),
    };
    // NOTE: the detail is humantime's own message.
    let detail = humantime::parse_duration("2 parsecs").unwrap_err();
    assert_eq!(
        malformed
            .get("deadline", "clients.weather")
            .unwrap_err()
            .to_string(),
        format!(
            "clients.weather.deadline must be a duration such as \"250ms\", \"2s\" or \
             \"1m 30s\", got \"2 parsecs\" ({detail})"
        )
    );
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
    assert_same("standard", &policy, &presets::standard().erase());
}

/// The cells of the markdown table rows in `doc` whose first cell is one of
/// `names` in backticks, by name.
fn table_rows<'a>(doc: &'a str, names: &[&str]) -> Vec<(String, Vec<&'a str>)> {
    doc.lines()
        .filter_map(|line| line.strip_prefix("//! | "))
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
    let rows = table_rows(include_str!("mod.rs"), &names);
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
                other.contains(&format!("budget {tokens} / {ratio}")),
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
        orders.retry().attempt_header().map(|name| name.as_str()),
        Some("grpc-previous-rpc-attempts")
    );
    // Every client gets its own bucket.
    let other = config.policy("orders").unwrap();
    orders.retry().budget().unwrap().record_retryable_failure();
    assert_eq!(other.retry().budget().unwrap().tokens_milli(), 10_000);

    let typo = "[clients.typo]\npreset = \"grpc\"\nretry.codes = [\"SOON\"]\n";
    let err = ClientsConfig::from_toml_str(typo).unwrap_err();
    assert_eq!(
        err.to_string(),
        "clients.typo.retry.codes must be a gRPC code name such as \"UNAVAILABLE\", got \"SOON\""
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
        "clients.zero.retry.max_pushback must be greater than zero, got 0s"
    );
    let wrong = "[clients.wrong]\npreset = \"standard\"\nretry.max_pushback = \"2s\"\n";
    assert_eq!(
        ClientsConfig::from_toml_str(wrong).unwrap_err().to_string(),
        "clients.wrong.retry.max_pushback applies only to backoff = \"grpc\", \
         got backoff = \"exponential\""
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
