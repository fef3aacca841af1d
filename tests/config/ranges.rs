//! Every setting of a file has a range: a value outside it is refused with
//! the setting's path and the bound in the message, the value apart; a
//! field beside `enabled = false` in a client's table, where it can do
//! nothing, is refused; and what looks odd but means something loads.

use http::{Request, Response};
use http_resilience::key::PerKey;
use http_resilience::{breaker::CircuitState, config::ClientsConfig};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{ServiceBuilder, ServiceExt};

/// The path, the message and the value `text` is refused with.
fn refused(text: &str) -> (String, String, Option<String>) {
    let err = match ClientsConfig::from_toml_str(text) {
        Ok(_) => panic!("loaded, but should not have:\n{text}"),
        Err(err) => err,
    };
    let setting = err
        .setting()
        .unwrap_or_else(|| panic!("not a setting: {err}\n{text}"));
    (
        setting.field().to_owned(),
        err.to_string(),
        setting.value().map(str::to_owned),
    )
}

#[test]
fn a_duration_over_a_day_is_refused_with_its_path_whatever_the_setting() {
    let over = "\"25h\"";
    let cases = [
        ("[clients.api]\ndeadline = {}", "clients.api.deadline"),
        (
            "[clients.api]\nattempt_timeout = {}",
            "clients.api.attempt_timeout",
        ),
        ("[clients.api.retry]\ndelay = {}", "clients.api.retry.delay"),
        (
            "[clients.api.retry]\nmax_delay = {}",
            "clients.api.retry.max_delay",
        ),
        (
            "[clients.api]\npreset = \"grpc\"\nretry.max_pushback = {}",
            "clients.api.retry.max_pushback",
        ),
        (
            "[clients.api.retry]\nmin_attempt = {}",
            "clients.api.retry.min_attempt",
        ),
        (
            "[clients.api.breaker]\nbreak_duration = {}",
            "clients.api.breaker.break_duration",
        ),
        (
            "[clients.api.breaker]\nmax_break_duration = {}",
            "clients.api.breaker.max_break_duration",
        ),
        (
            "[clients.api.breaker]\nsampling_window = {}",
            "clients.api.breaker.sampling_window",
        ),
        (
            "[clients.api.breaker]\nramp_duration = {}\nramp_steps = 2",
            "clients.api.breaker.ramp_duration",
        ),
        (
            "[clients.api.breaker]\nslow_call_threshold = {}",
            "clients.api.breaker.slow_call_threshold",
        ),
        (
            "[clients.api.breaker]\nidle_key_timeout = {}",
            "clients.api.breaker.idle_key_timeout",
        ),
        (
            "[clients.api.overload]\nmax_in_flight = 4\nmax_wait = {}",
            "clients.api.overload.max_wait",
        ),
        (
            "[clients.api.overload]\nmax_in_flight = 4\nmin_attempt = {}",
            "clients.api.overload.min_attempt",
        ),
        (
            "[clients.api.overload]\nmax_in_flight = 4\nidle_key_timeout = {}",
            "clients.api.overload.idle_key_timeout",
        ),
        (
            "[clients.api.overload.throttle]\nwindow = {}",
            "clients.api.overload.throttle.window",
        ),
        ("[clients.api.hedge]\ndelay = {}", "clients.api.hedge.delay"),
        (
            "[clients.api.hedge]\npercentile = 95.0\nwindow = {}",
            "clients.api.hedge.window",
        ),
        (
            "[clients.api.hedge]\ndelay = \"10ms\"\non_attempt_timeout = {}",
            "clients.api.hedge.on_attempt_timeout",
        ),
        (
            "[clients.api.hedge]\ndelay = \"10ms\"\nmax_server_delay = {}",
            "clients.api.hedge.max_server_delay",
        ),
    ];
    for (template, path) in cases {
        let text = template.replace("{}", over);
        assert_eq!(
            refused(&text),
            (
                path.to_owned(),
                format!("{path} must be at most 24h"),
                Some("90000s".to_owned())
            ),
            "{text}"
        );
        // A day itself is in range, whatever else the case needs.
        let at_the_bound = template.replace("{}", "\"24h\"");
        if let Err(err) = ClientsConfig::from_toml_str(&at_the_bound) {
            assert!(
                !err.to_string().ends_with("must be at most 24h"),
                "{at_the_bound}: {err}"
            );
        }
    }
}

#[test]
fn a_circuit_open_forever_is_refused_as_out_of_range_not_as_malformed() {
    // u64::MAX seconds, and more than humantime can count: both out of range.
    let (path, message, value) =
        refused("[clients.api.breaker]\nbreak_duration = \"18446744073709551615s\"");
    assert_eq!(path, "clients.api.breaker.break_duration");
    assert_eq!(
        message,
        "clients.api.breaker.break_duration must be at most 24h"
    );
    assert_eq!(value.as_deref(), Some("18446744073709551615s"));
    let (_, message, value) = refused("[default]\ndeadline = \"99999999999999999999999s\"");
    assert_eq!(message, "default.deadline must be at most 24h");
    assert_eq!(value.as_deref(), Some("too large"));
}

#[test]
fn a_count_or_a_factor_over_its_bound_is_refused_with_its_path_and_the_bound() {
    let cases = [
        (
            "[clients.api.retry]\nmax_attempts = 101",
            "clients.api.retry.max_attempts",
            "100",
            "101",
        ),
        (
            "[clients.api.breaker]\nconsecutive_failures = 10001",
            "clients.api.breaker.consecutive_failures",
            "10,000",
            "10001",
        ),
        (
            "[clients.api.breaker]\nminimum_throughput = 1000001",
            "clients.api.breaker.minimum_throughput",
            "1,000,000",
            "1000001",
        ),
        (
            "[clients.api.breaker]\nhalf_open_probes = 1001",
            "clients.api.breaker.half_open_probes",
            "1,000",
            "1001",
        ),
        (
            "[clients.api.breaker]\nhalf_open_successes = 1001",
            "clients.api.breaker.half_open_successes",
            "1,000",
            "1001",
        ),
        (
            "[clients.api.breaker]\nramp_duration = \"1s\"\nramp_steps = 1001",
            "clients.api.breaker.ramp_steps",
            "1,000",
            "1001",
        ),
        (
            "[clients.api.breaker]\nmax_keys = 9223372036854775807",
            "clients.api.breaker.max_keys",
            "1,000,000",
            "9223372036854775807",
        ),
        (
            "[clients.api.breaker]\nbreak_multiplier = 11.0",
            "clients.api.breaker.break_multiplier",
            "10.0",
            "11.0",
        ),
        (
            "[clients.api.retry]\nbackoff = \"exponential\"\nmultiplier = 1e308",
            "clients.api.retry.multiplier",
            "10.0",
            "1e308",
        ),
        (
            "[clients.api.overload]\nmax_in_flight = 100001",
            "clients.api.overload.max_in_flight",
            "100,000",
            "100001",
        ),
        (
            "[clients.api.overload]\nmax_in_flight = 4\nqueue = 100001",
            "clients.api.overload.queue",
            "100,000",
            "100001",
        ),
        (
            "[clients.api.overload.adaptive]\nmax = 100001",
            "clients.api.overload.adaptive.max",
            "100,000",
            "100001",
        ),
        (
            "[clients.api.overload.adaptive]\ntolerance = 11.0",
            "clients.api.overload.adaptive.tolerance",
            "10.0",
            "11.0",
        ),
        (
            "[clients.api.overload]\nmax_in_flight = 4\nmax_keys = 9223372036854775807",
            "clients.api.overload.max_keys",
            "1,000,000",
            "9223372036854775807",
        ),
        (
            "[clients.api.overload.throttle]\nk = 11.0",
            "clients.api.overload.throttle.k",
            "10.0",
            "11.0",
        ),
        (
            "[clients.api.hedge]\ndelay = \"10ms\"\nmax_attempts = 11",
            "clients.api.hedge.max_attempts",
            "10",
            "11",
        ),
        (
            "[clients.api.hedge]\ndelay = \"10ms\"\nmax_in_flight = 11",
            "clients.api.hedge.max_in_flight",
            "10",
            "11",
        ),
        (
            "[clients.api.hedge]\npercentile = 95.0\nmin_samples = 100001",
            "clients.api.hedge.min_samples",
            "100,000",
            "100001",
        ),
    ];
    for (text, path, bound, value) in cases {
        assert_eq!(
            refused(text),
            (
                path.to_owned(),
                format!("{path} must be at most {bound}"),
                Some(value.to_owned())
            ),
            "{text}"
        );
    }
    // The grpc backoff may shrink its waits, down to a tenth.
    assert_eq!(
        refused("[clients.api]\npreset = \"grpc\"\nretry.multiplier = 1e-300"),
        (
            "clients.api.retry.multiplier".to_owned(),
            "clients.api.retry.multiplier must be at least 0.1".to_owned(),
            Some("1e-300".to_owned())
        )
    );
    ClientsConfig::from_toml_str("[clients.api]\npreset = \"grpc\"\nretry.multiplier = 0.1")
        .unwrap();
}

#[test]
fn the_same_mistake_reads_the_same_whatever_the_value() {
    let message = |text: &str| refused(text).1;
    assert_eq!(
        message("[clients.api.breaker]\nbreak_duration = \"25h\""),
        message("[clients.api.breaker]\nbreak_duration = \"18446744073709551615s\""),
    );
    assert_eq!(
        message("[clients.api.retry]\nmax_attempts = 0"),
        message("[clients.api.retry]\nmax_attempts = 0\n[clients.other]\ndeadline = \"1s\""),
    );
    let (_, one, first) = refused("[clients.api.overload.adaptive]\nmin = 5\ninitial = 5\nmax = 4");
    let (_, other, second) =
        refused("[clients.api.overload.adaptive]\nmin = 50\ninitial = 50\nmax = 7");
    assert_eq!(one, other);
    assert_eq!(
        (first.as_deref(), second.as_deref()),
        (Some("4"), Some("7"))
    );
}

#[test]
fn a_field_beside_enabled_false_in_a_client_is_refused_and_kept_in_default() {
    let cases = [
        ("breaker", "consecutive_failures = 3", "a breaker"),
        ("overload", "max_in_flight = 3", "overload control"),
        ("hedge", "delay = \"10ms\"", "hedging"),
    ];
    for (table, field, what) in cases {
        let text = format!("[clients.api.{table}]\nenabled = false\n{field}");
        let name = field.split(' ').next().unwrap();
        let path = format!("clients.api.{table}.{name}");
        assert_eq!(
            refused(&text),
            (
                path.clone(),
                format!("{path} applies only to {what}, got enabled = false"),
                None
            ),
        );
        // In [default], the fields wait for the clients that turn it on.
        let text = format!(
            "[default.{table}]\nenabled = false\n{field}\n[clients.on.{table}]\nenabled = true"
        );
        let config = ClientsConfig::from_toml_str(&text).unwrap_or_else(|err| panic!("{err}"));
        let on = match table {
            "breaker" => config
                .policy("on")
                .unwrap()
                .guard()
                .breaker
                .as_ref()
                .is_some(),
            "overload" => config
                .policy("on")
                .unwrap()
                .guard()
                .overload
                .as_ref()
                .is_some(),
            _ => config.hedge("on").unwrap().is_some(),
        };
        assert!(on, "{text}");
    }
    // `"off"` beside `enabled = false` says the same thing twice: it loads.
    ClientsConfig::from_toml_str("[clients.api.breaker]\nenabled = false\nramp_duration = \"off\"")
        .unwrap();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn more_successes_than_probes_close_the_circuit_after_that_many_probes() {
    // One probe at a time, two to succeed: the probes go one after the
    // other, and the second closes the circuit.
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.api]
        retry.max_attempts = 1
        breaker.consecutive_failures = 1
        breaker.break_duration = "1s"
        breaker.break_jitter = 0.0
        breaker.half_open_probes = 1
        breaker.half_open_successes = 2
        "#,
    )
    .unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = ServiceBuilder::new()
        .layer(config.layer("api").unwrap())
        .service_fn(move |_: Request<String>| {
            let status = if counter.fetch_add(1, Ordering::SeqCst) == 0 {
                503
            } else {
                200
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
    let call = || {
        let request = Request::builder()
            .uri("http://api.test/")
            .body(String::new())
            .unwrap();
        tokio::time::timeout(Duration::from_secs(20), svc.clone().oneshot(request))
    };
    let state = || {
        let policy = config.policy("api").unwrap();
        let states = policy.guard().breaker.as_ref().unwrap().states();
        assert_eq!(states.len(), 1, "{states:?}");
        states[0].1
    };
    assert_eq!(call().await.unwrap().unwrap().status(), 503);
    assert!(
        matches!(state(), CircuitState::Open { .. }),
        "{:?}",
        state()
    );
    tokio::time::advance(Duration::from_millis(1001)).await;
    assert_eq!(call().await.unwrap().unwrap().status(), 200);
    assert_eq!(state(), CircuitState::HalfOpen, "one success of two");
    assert_eq!(call().await.unwrap().unwrap().status(), 200);
    assert_eq!(state(), CircuitState::Closed);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}
