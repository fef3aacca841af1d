//! Per-client configuration: how a client's policy is resolved from the
//! `[default]` section, its preset and its own fields, the message of every
//! validation error, and the layer it builds, on the paused clock.

#[path = "../support/mod.rs"]
mod support;

use http::{Request, Response, StatusCode};
use http_resilience::{
    breaker::CircuitState,
    config::ClientsConfig,
    key::PerKey,
    policy::{AnyRetryer, FixedDelay},
    Attempts, FailureKind,
};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use support::{guarded, shown};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

type Policy = http_resilience::config::ClientPolicy;

/// The defaults of the module docs: Reactor WebClient's policy, written out.
const DEFAULT: &str = r#"
[default]
deadline = "8s"
attempt_timeout = "3s"

[default.retry]
decoder = "statuses"
statuses = [503]
backoff = "fixed"
delay = "10ms"
max_delay = "1s"
max_attempts = 3
"#;

const fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

const fn secs(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// [`DEFAULT`] followed by `clients`, loaded and validated.
fn load(clients: &str) -> ClientsConfig {
    let text = format!("{DEFAULT}\n{clients}");
    ClientsConfig::from_toml_str(&text).unwrap_or_else(|err| panic!("{err}\n{text}"))
}

/// The message of the error that [`DEFAULT`] followed by `clients` fails
/// with, followed by the value refused, if any, in angle brackets
/// (`clients.x.retry.max_attempts must be at least 1 <0>`): the message
/// itself holds no value.
fn error(clients: &str) -> String {
    let text = format!("{DEFAULT}\n{clients}");
    match ClientsConfig::from_toml_str(&text) {
        Ok(config) => panic!("loaded, but should not have: {config:?}"),
        Err(err) => match err.setting().and_then(|setting| setting.value()) {
            Some(value) => format!("{err} <{value}>"),
            None => err.to_string(),
        },
    }
}

/// The retryer of `policy` as its `Debug` shows it (the one public view of
/// a built policy).
fn retryer(policy: &Policy) -> String {
    shown(policy.retry(), "retryer")
}

/// The `Debug` of the run-time choice of `fixed`: what [`retryer`] shows
/// for a policy that waits as `fixed` does.
fn fixed(fixed: FixedDelay) -> String {
    format!("{:?}", AnyRetryer::Fixed(fixed))
}

/// The setting `field` of the exponential backoff of `policy`.
fn exponential(policy: &Policy, field: &str) -> String {
    let retryer = retryer(policy);
    assert!(
        retryer.starts_with("Exponential("),
        "not an exponential backoff: {retryer}"
    );
    shown(policy.retry(), field)
}

/// The decoder of `policy` as its `Debug` shows it.
fn decoder(policy: &Policy) -> String {
    shown(policy.retry(), "decoder")
}

// ----- resolution -----

#[test]
fn client_inherits_default_fields() {
    let config = load("[clients.weather]\nattempt_timeout = \"2s\"");
    let policy = config.policy("weather").unwrap();
    assert_eq!(policy.deadline(), secs(8));
    assert_eq!(decoder(&policy), "Statuses({503})");
    assert_eq!(
        retryer(&policy),
        fixed(FixedDelay::new(ms(10), 2).with_max_delay(secs(1)))
    );
}

#[test]
fn client_field_overrides_default() {
    let config = load("[clients.weather]\nattempt_timeout = \"2s\"");
    assert_eq!(config.policy("weather").unwrap().attempt_timeout(), secs(2));
}

#[test]
fn nested_retry_field_overrides_only_itself() {
    let config = load("[clients.weather.retry]\nmax_attempts = 5");
    let policy = config.policy("weather").unwrap();
    assert_eq!(
        retryer(&policy),
        fixed(FixedDelay::new(ms(10), 4).with_max_delay(secs(1)))
    );
    assert_eq!(decoder(&policy), "Statuses({503})");
}

#[test]
fn preset_replaces_default() {
    let config = load(
        r#"
        [clients.weather]
        preset = "conservative"
        attempt_timeout = "2s"
        "#,
    );
    let policy = config.policy("weather").unwrap();
    // The preset's deadline, not the default's 8 s; the client's own timeout.
    assert_eq!(policy.deadline(), secs(10));
    assert_eq!(policy.attempt_timeout(), secs(2));
    assert!(decoder(&policy).starts_with("Transient("));
    assert_eq!(
        (
            exponential(&policy, "initial"),
            exponential(&policy, "max_attempts"),
            exponential(&policy, "jitter"),
        ),
        ("500ms".into(), "2".into(), "Full".into())
    );
}

#[test]
fn default_applies_over_its_own_preset() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default]
        preset = "reactor"
        deadline = "5s"
        "#,
    )
    .unwrap();
    let policy = config.policy("anything").unwrap();
    assert_eq!(policy.deadline(), secs(5));
    assert_eq!(policy.attempt_timeout(), secs(3));
    assert_eq!(decoder(&policy), "Statuses({503})");
    assert_eq!(retryer(&policy), fixed(FixedDelay::new(ms(10), 2)));
}

#[test]
fn default_without_preset_applies_over_standard() {
    let config = ClientsConfig::from_toml_str("[default]\nattempt_timeout = \"1s\"").unwrap();
    let policy = config.policy("anything").unwrap();
    assert_eq!(policy.deadline(), secs(30));
    assert_eq!(policy.attempt_timeout(), secs(1));
    assert_eq!(
        (
            exponential(&policy, "initial"),
            exponential(&policy, "multiplier"),
            exponential(&policy, "jitter"),
        ),
        ("2s".into(), "2.0".into(), "Decorrelated".into())
    );
}

#[test]
fn unlisted_name_gets_the_default() {
    let config = load("[clients.weather]\nattempt_timeout = \"2s\"");
    let policy = config.policy("not-in-the-file").unwrap();
    assert_eq!(
        (policy.deadline(), policy.attempt_timeout()),
        (secs(8), secs(3))
    );
    assert_eq!(decoder(&policy), "Statuses({503})");
    assert_eq!(retryer(&policy), fixed(FixedDelay::new(ms(10), 2)));
}

#[test]
fn names_lists_clients_in_order() {
    let config = load("[clients.weather]\n[clients.payments]\n[clients.search]");
    assert_eq!(
        config.names().collect::<Vec<_>>(),
        ["payments", "search", "weather"]
    );
}

#[test]
fn changing_the_kind_drops_the_settings_that_belong_to_it() {
    // The standard preset's jitter and multiplier are not carried over to a
    // fixed delay, nor its decoder's settings to another decoder.
    let config = ClientsConfig::from_toml_str(
        r#"
        [default.retry]
        decoder = "statuses"
        statuses = [429, 503]
        retry_after = true

        [clients.payments.retry]
        decoder = "transient"
        backoff = "fixed"
        delay = "200ms"
        max_delay = "2s"
        "#,
    )
    .unwrap();
    let policy = config.policy("payments").unwrap();
    assert!(decoder(&policy).starts_with("Transient("));
    assert_eq!(
        retryer(&policy),
        fixed(FixedDelay::new(ms(200), 3).with_max_delay(secs(2)))
    );
}

#[test]
fn exponential_settings_take_their_defaults_after_a_change_of_backoff() {
    let config = load("[clients.search.retry]\nbackoff = \"exponential\"");
    let policy = config.policy("search").unwrap();
    assert_eq!(exponential(&policy, "multiplier"), "1.5");
    assert_eq!(exponential(&policy, "jitter"), "None");
    assert_eq!(
        (
            exponential(&policy, "initial"),
            exponential(&policy, "max_delay"),
        ),
        ("10ms".into(), "1s".into())
    );
}

// ----- validation -----

#[test]
fn rejects_attempt_timeout_above_the_deadline() {
    assert_eq!(
        error("[clients.x]\nattempt_timeout = \"10s\""),
        "clients.x.attempt_timeout must not exceed the deadline <10s>"
    );
}

#[test]
fn reports_a_combination_under_the_client() {
    // The client's deadline is below the attempt timeout it inherits: the
    // message says where that came from.
    assert_eq!(
        error("[clients.x]\ndeadline = \"2s\""),
        "clients.x.attempt_timeout inherited from [default] exceeds the deadline <3s>"
    );
}

#[test]
fn rejects_zero_attempts() {
    assert_eq!(
        error("[clients.x.retry]\nmax_attempts = 0"),
        "clients.x.retry.max_attempts must be at least 1 <0>"
    );
}

#[test]
fn rejects_a_multiplier_below_one() {
    assert_eq!(
        error("[clients.weather.retry]\nbackoff = \"exponential\"\nmultiplier = 0.5"),
        "clients.weather.retry.multiplier must be at least 1.0 <0.5>"
    );
}

#[test]
fn rejects_a_max_delay_below_the_initial_delay() {
    assert_eq!(
        error(
            "[clients.x.retry]\nbackoff = \"exponential\"\ndelay = \"100ms\"\nmax_delay = \"50ms\""
        ),
        "clients.x.retry.max_delay must be at least the initial delay <50ms>"
    );
    assert_eq!(
        error("[clients.x.retry]\ndelay = \"2s\""),
        "clients.x.retry.max_delay must be at least the delay <1s>"
    );
}

#[test]
fn rejects_statuses_out_of_range() {
    assert_eq!(
        error("[clients.x.retry]\nstatuses = [503, 600]"),
        "clients.x.retry.statuses must be in 100..=599 <600>"
    );
}

#[test]
fn rejects_empty_or_missing_statuses() {
    assert_eq!(
        error("[clients.x.retry]\nstatuses = []"),
        "clients.x.retry.statuses must list at least one status <[]>"
    );
    assert_eq!(
        error("[clients.x]\npreset = \"standard\"\n[clients.x.retry]\ndecoder = \"statuses\""),
        "clients.x.retry.statuses must be given with decoder = \"statuses\""
    );
}

#[test]
fn rejects_statuses_with_another_decoder() {
    assert_eq!(
        error("[clients.x.retry]\ndecoder = \"feign\"\nstatuses = [503]"),
        "clients.x.retry.statuses applies only to decoder = \"statuses\""
    );
    assert_eq!(
        error("[clients.x]\npreset = \"standard\"\n[clients.x.retry]\nretry_after = true"),
        "clients.x.retry.retry_after applies only to decoder = \"statuses\""
    );
}

#[test]
fn rejects_exponential_settings_with_another_backoff() {
    for (field, value, kinds) in [
        ("multiplier", "2.0", "\"exponential\" or \"grpc\""),
        ("jitter", "\"full\"", "\"exponential\""),
        ("seed", "42", "\"exponential\" or \"grpc\""),
    ] {
        assert_eq!(
            error(&format!("[clients.x.retry]\n{field} = {value}")),
            format!("clients.x.retry.{field} applies only to backoff = {kinds}")
        );
    }
}

#[test]
fn rejects_zero_durations() {
    assert_eq!(
        error("[clients.x]\ndeadline = \"0s\""),
        "clients.x.deadline must be greater than zero <0s>"
    );
    assert_eq!(
        error("[clients.x]\nattempt_timeout = \"0ms\""),
        "clients.x.attempt_timeout must be greater than zero <0s>"
    );
    assert_eq!(
        error("[clients.x.retry]\nbackoff = \"exponential\"\ndelay = \"0ms\""),
        "clients.x.retry.delay must be greater than zero <0s>"
    );
    // A fixed delay of zero retries at once, as the apache preset does.
    let config = load("[clients.x.retry]\ndelay = \"0ms\"\n[clients.apache]\npreset = \"apache\"");
    let delay = |name: &str| {
        let policy = config.policy(name).unwrap();
        let retryer = retryer(&policy);
        assert!(retryer.starts_with("Fixed("), "{name}: {retryer}");
        shown(policy.retry(), "delay")
    };
    assert_eq!(delay("x"), format!("{:?}", Duration::ZERO));
    assert_eq!(delay("apache"), format!("{:?}", Duration::ZERO));
}

#[test]
fn rejects_a_malformed_duration_naming_path_and_text() {
    assert_eq!(
        error("[clients.weather]\nattempt_timeout = \"2 parsecs\""),
        "clients.weather.attempt_timeout must be a duration such as \"250ms\", \"2s\" or \
         \"1m 30s\" <\"2 parsecs\">"
    );
}

#[test]
fn rejects_unknown_names() {
    assert_eq!(
        error("[clients.x]\npreset = \"fegn\""),
        "clients.x.preset must be one of \"reactor\", \"feign\", \"standard\", \"conservative\", \
         \"apache\", \"grpc\" <\"fegn\">"
    );
    assert_eq!(
        error("[clients.x.retry]\ndecoder = \"5xx\""),
        "clients.x.retry.decoder must be one of \"statuses\", \"feign\", \"transient\", \
         \"apache\", \"grpc\" <\"5xx\">"
    );
    assert_eq!(
        error("[clients.x.retry]\nbackoff = \"linear\""),
        "clients.x.retry.backoff must be one of \"fixed\", \"exponential\", \"feign\", \
         \"grpc\" <\"linear\">"
    );
    assert_eq!(
        error("[clients.x.retry]\nbackoff = \"exponential\"\njitter = \"some\""),
        "clients.x.retry.jitter must be one of \"none\", \"full\", \"equal\", \
         \"decorrelated\" <\"some\">"
    );
}

#[test]
fn rejects_unknown_keys_naming_the_key() {
    let text = format!("{DEFAULT}\n[clients.weather.retry]\nmultiplyer = 2.0");
    let err = ClientsConfig::from_toml_str(&text).unwrap_err();
    assert!(err.setting().is_none());
    let message = err.to_string();
    assert!(message.contains("unknown field `multiplyer`"), "{message}");
    // TOML's message shows where.
    assert!(message.contains("multiplyer = 2.0"), "{message}");
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("multiplyer"))
        .unwrap();
    assert!(
        message.contains(&format!("line {line}, column 1")),
        "{message}"
    );

    let message = error("[client.weather]\ndeadline = \"1s\"");
    assert!(message.contains("unknown field `client`"), "{message}");
}

#[test]
fn reports_an_invalid_default_under_default() {
    let text = r#"
        [default.retry]
        max_attempts = 0

        [clients.weather]
        attempt_timeout = "2s"
    "#;
    let err = ClientsConfig::from_toml_str(text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "default.retry.max_attempts must be at least 1"
    );
    assert_eq!(
        err.setting().map(|s| s.field()),
        Some("default.retry.max_attempts")
    );
}

#[test]
fn rejects_a_client_named_default() {
    assert_eq!(
        error("[clients.default]\ndeadline = \"1s\""),
        "clients.default is not allowed: the defaults of every client go in [default]"
    );
}

#[test]
fn quotes_client_names_that_are_not_bare_keys() {
    assert_eq!(
        error("[clients.\"eu.weather\".retry]\nmax_attempts = 0"),
        "clients.\"eu.weather\".retry.max_attempts must be at least 1 <0>"
    );
}

#[test]
fn example_file_loads_and_validates() {
    let config = ClientsConfig::from_toml_str(include_str!(
        "../../crates/http-resilience/examples/clients.toml"
    ))
    .unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        config.names().collect::<Vec<_>>(),
        ["inventory", "payments", "search", "weather"]
    );
    for name in config.names() {
        config.layer(name).unwrap();
    }
}

// ----- the layer -----

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn layer_composes_the_three_layers_for_a_name() {
    let config = load("[clients.weather]\nattempt_timeout = \"2s\"");
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let svc = ServiceBuilder::new()
        .layer(config.layer("weather").unwrap())
        .service_fn(move |_: Request<String>| {
            // 503 twice, then 200.
            let status = if counter.fetch_add(1, Ordering::SeqCst) < 2 {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::OK
            };
            async move {
                Ok::<_, Infallible>(
                    Response::builder()
                        .status(status)
                        .body(String::new())
                        .unwrap(),
                )
            }
        });

    let start = Instant::now();
    let response = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 3);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Two waits of the inherited fixed 10 ms.
    assert_eq!(start.elapsed(), ms(20));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn layer_applies_the_attempt_timeout_of_the_client() {
    let config =
        load("[clients.slow]\nattempt_timeout = \"2s\"\n[clients.slow.retry]\nmax_attempts = 1");
    let svc = ServiceBuilder::new()
        .layer(config.layer("slow").unwrap())
        .service_fn(|_: Request<String>| async {
            tokio::time::sleep(secs(5)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let start = Instant::now();
    let err = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap_err();
    assert!(
        err.is::<http_resilience::attempt_timeout::error::AttemptTimedOut>(),
        "{err}"
    );
    assert_eq!(start.elapsed(), secs(2));
}

#[test]
fn min_attempt_turns_deadline_awareness_on_and_off() {
    // `[default]` without a preset sits on `standard`, which is deadline
    // aware; a client can turn that off, and its own preset `seed` is not.
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.relaxed.retry]
        min_attempt = "off"

        [clients.strict.retry]
        min_attempt = "1s"
        "#,
    )
    .unwrap();
    let margin = |name: &str| shown(config.policy(name).unwrap().retry(), "deadline_margin");
    let ms = std::time::Duration::from_millis;
    assert_eq!(margin("other"), format!("{:?}", Some(ms(500))));
    assert_eq!(margin("relaxed"), "None");
    assert_eq!(margin("strict"), format!("{:?}", Some(ms(1000))));
    let err =
        ClientsConfig::from_toml_str("[default.retry]\nmin_attempt = \"soon\"\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("default.retry.min_attempt must be \"off\" or a duration"),
        "{err}"
    );
}

mod limits;
mod loopback;
mod order;
mod ranges;

#[test]
fn a_policy_that_can_never_retry_is_refused_with_the_fields_and_their_origins() {
    // Over the standard preset, a first wait of 2 s plus the least useful
    // attempt of 500 ms never fit in 2 s: every retry would stop with
    // "would miss the deadline".
    let err = ClientsConfig::from_toml_str(
        "[clients.weather]\ndeadline = \"2s\"\nattempt_timeout = \"500ms\"",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "clients.weather.deadline leaves no room for a retry: the first wait (of \
         retry.delay, inherited from preset standard) plus the least useful attempt \
         (retry.min_attempt, inherited from preset standard) do not fit before it; raise the \
         deadline, shorten retry.delay, or set retry.min_attempt = \"off\""
    );
    assert_eq!(err.setting().unwrap().value(), Some("2s"));
    // Each of the three ways out loads.
    for fix in [
        "deadline = \"3s\"",
        "deadline = \"2s\"\nretry.delay = \"1s\"",
        "deadline = \"2s\"\nretry.min_attempt = \"off\"",
    ] {
        let text = format!("[clients.weather]\nattempt_timeout = \"500ms\"\n{fix}");
        assert!(ClientsConfig::from_toml_str(&text).is_ok(), "{fix}");
    }
}

#[test]
fn an_inherited_attempt_timeout_over_the_deadline_names_where_it_came_from() {
    let err = ClientsConfig::from_toml_str("[clients.weather]\ndeadline = \"1.5s\"").unwrap_err();
    assert_eq!(
        err.to_string(),
        "clients.weather.attempt_timeout inherited from preset standard exceeds the deadline"
    );
    assert_eq!(err.setting().unwrap().value(), Some("10s"));
}

#[test]
fn a_resolved_policy_prints_its_settings() {
    let config = ClientsConfig::from_toml_str(
        "[clients.weather]\npreset = \"reactor\"\nretry.statuses = [502, 503]",
    )
    .unwrap();
    let printed = format!("{:?}", config.policy("weather").unwrap());
    for setting in [
        "deadline: 8s",
        "attempt_timeout: 3s",
        "502",
        "503",
        "delay: 10ms",
    ] {
        assert!(printed.contains(setting), "{setting} in {printed}");
    }
    assert!(
        !printed.contains("http_resilience::"),
        "no type names: {printed}"
    );
}

// ----- the breaker -----

/// An upstream that answers every request 503, and the count of requests it
/// saw.
fn unavailable() -> (
    impl tower::Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let upstream = tower::service_fn(move |_: Request<String>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async {
            Ok::<_, Infallible>(
                Response::builder()
                    .status(StatusCode::SERVICE_UNAVAILABLE)
                    .body(String::new())
                    .unwrap(),
            )
        }
    });
    (upstream, calls)
}

fn get(uri: &str) -> Request<String> {
    Request::get(uri).body(String::new()).unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_breaker_section_opens_the_circuit_after_its_failures() {
    // One attempt per call, so that every call is one outcome.
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.flaky]
        preset = "reactor"
        retry.max_attempts = 1

        [clients.flaky.breaker]
        consecutive_failures = 3
        break_duration = "10s"
        "#,
    )
    .unwrap();
    let (upstream, calls) = unavailable();
    let svc = ServiceBuilder::new()
        .layer(config.layer("flaky").unwrap())
        .service(upstream);

    for call in 1..=3 {
        let response = guarded(svc.clone().oneshot(get("http://flaky.test/")))
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "call {call}"
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // Three failures in a row: the fourth call fails at once, unsent.
    let err = guarded(svc.clone().oneshot(get("http://flaky.test/")))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "nothing sent while open");
    let states = svc.guard().breaker.as_ref().unwrap().states();
    match states.as_slice() {
        [(key, CircuitState::Open { until })] => {
            assert_eq!(key.to_string(), "http://flaky.test:80");
            // The configured break, with up to the default 10 % of jitter.
            let open_for = *until - Instant::now();
            assert!(open_for >= secs(10) && open_for <= secs(11), "{open_for:?}");
        }
        other => panic!("one open circuit, got {other:?}"),
    }

    // After the break, one probe goes; its 503 opens the circuit again.
    tokio::time::advance(secs(11)).await;
    let response = guarded(svc.clone().oneshot(get("http://flaky.test/")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    let states = svc.guard().breaker.as_ref().unwrap().states();
    assert!(
        matches!(states.as_slice(), [(_, CircuitState::Open { .. })]),
        "{states:?}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_default_breaker_is_inherited_and_enabled_false_turns_it_off() {
    // `[default]` sits on the standard preset, whose breaker trips after five
    // failures in a row; it judges with the 503 of `[default.retry]`.
    let config = load(
        r#"
        [default.breaker]
        consecutive_failures = 4

        [clients.guarded.retry]
        max_attempts = 1

        [clients.unguarded.retry]
        max_attempts = 1

        [clients.unguarded.breaker]
        enabled = false
        "#,
    );
    let policy = config.policy("guarded").unwrap();
    let breaker = policy.guard().breaker.as_ref().unwrap();
    assert_eq!(
        shown(breaker, "consecutive_failures"),
        "4",
        "from [default]"
    );
    assert_eq!(
        shown(breaker, "break_duration"),
        "5s",
        "from the standard preset"
    );
    assert!(config
        .policy("unguarded")
        .unwrap()
        .guard()
        .breaker
        .as_ref()
        .is_none());

    for (name, sent) in [("guarded", 4), ("unguarded", 10)] {
        let (upstream, calls) = unavailable();
        let svc = ServiceBuilder::new()
            .layer(config.layer(name).unwrap())
            .service(upstream);
        let mut open = 0;
        for _ in 0..10 {
            match guarded(svc.clone().oneshot(get("http://upstream.test/"))).await {
                Ok(response) => assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE),
                Err(err) => {
                    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
                    open += 1;
                }
            }
        }
        assert_eq!(calls.load(Ordering::SeqCst), sent, "{name}");
        assert_eq!(open, 10 - sent, "{name}");
    }
}

/// An upstream that answers every request 200 after `delay`, and the count
/// of requests it saw.
fn answering_after(
    delay: Duration,
) -> (
    impl tower::Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
    Arc<AtomicU32>,
) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let upstream = tower::service_fn(move |_: Request<String>| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            tokio::time::sleep(delay).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    });
    (upstream, calls)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_slow_call_threshold_opens_the_circuit_on_slow_successes() {
    // The upstream answers 200 after a second: a success for the retry,
    // slow for `sluggish`'s breaker, and not for `patient`'s.
    let config = ClientsConfig::from_toml_str(
        r#"
        [default]
        preset = "reactor"

        [default.breaker]
        consecutive_failures = 2
        break_duration = "10s"

        [clients.sluggish.breaker]
        slow_call_threshold = "500ms"

        [clients.patient.breaker]
        slow_call_threshold = "2s"
        "#,
    )
    .unwrap();

    let (upstream, calls) = answering_after(secs(1));
    let svc = ServiceBuilder::new()
        .layer(config.layer("sluggish").unwrap())
        .service(upstream);
    for call in 1..=2 {
        let response = guarded(svc.clone().oneshot(get("http://slow.test/")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "call {call}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    // Two slow successes in a row: the third call fails at once, unsent.
    let started = Instant::now();
    let err = guarded(svc.clone().oneshot(get("http://slow.test/")))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "nothing sent while open");
    assert_eq!(Instant::now(), started, "turned away without waiting");
    let states = svc.guard().breaker.as_ref().unwrap().states();
    assert!(
        matches!(states.as_slice(), [(_, CircuitState::Open { .. })]),
        "{states:?}"
    );

    // Under a threshold above the upstream's second, the same calls pass.
    let (upstream, calls) = answering_after(secs(1));
    let svc = ServiceBuilder::new()
        .layer(config.layer("patient").unwrap())
        .service(upstream);
    for call in 1..=5 {
        let response = guarded(svc.clone().oneshot(get("http://slow.test/")))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "call {call}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

/// An upstream that takes 1s to answer 503 to the first request and answers
/// 200 at once to the others, and the `(header, value)` pairs of `names` that
/// each request brought (`None` for one absent).
#[allow(clippy::type_complexity)]
fn recording(
    names: &'static [&'static str],
) -> (
    impl tower::Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
    Arc<std::sync::Mutex<Vec<Vec<Option<String>>>>>,
) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let upstream = tower::service_fn(move |request: Request<String>| {
        let values = names
            .iter()
            .map(|name| {
                request
                    .headers()
                    .get(*name)
                    .map(|value| value.to_str().unwrap().to_owned())
            })
            .collect();
        let first = {
            let mut seen = record.lock().unwrap();
            seen.push(values);
            seen.len() == 1
        };
        async move {
            let status = if first {
                tokio::time::sleep(secs(1)).await;
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::OK
            };
            Ok::<_, Infallible>(
                Response::builder()
                    .status(status)
                    .body(String::new())
                    .unwrap(),
            )
        }
    });
    (upstream, seen)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_attempt_header_and_the_propagated_budget_arrive_as_configured() {
    let config = load(
        r#"
        [clients.envoy]
        deadline = "2s"
        attempt_timeout = "1500ms"
        propagate = "envoy"
        retry.attempt_header = "x-attempt"

        [clients.grpc]
        deadline = "2s"
        attempt_timeout = "1500ms"
        propagate_header = "x-budget"
        propagate_format = "grpc"
        retry.previous_attempts_header = "grpc-previous-rpc-attempts"
        "#,
    );

    let names = &["x-envoy-expected-rq-timeout-ms", "x-attempt"];
    let (upstream, seen) = recording(names);
    let svc = ServiceBuilder::new()
        .layer(config.layer("envoy").unwrap())
        .service(upstream);
    let response = guarded(svc.oneshot(get("http://envoy.test/")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let some = |value: &str| Some(value.to_owned());
    // The first attempt's budget is its limit; the second starts 1s + 10ms
    // in, with 990ms left of the deadline.
    assert_eq!(
        *seen.lock().unwrap(),
        [vec![some("1500"), some("1")], vec![some("990"), some("2")]]
    );

    let names = &[
        "x-budget",
        "grpc-previous-rpc-attempts",
        "x-envoy-expected-rq-timeout-ms",
    ];
    let (upstream, seen) = recording(names);
    let svc = ServiceBuilder::new()
        .layer(config.layer("grpc").unwrap())
        .service(upstream);
    let response = guarded(svc.oneshot(get("http://grpc.test/")))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        *seen.lock().unwrap(),
        [
            vec![some("1500000u"), None, None],
            vec![some("990000u"), some("1"), None]
        ]
    );
}
