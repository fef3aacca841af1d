//! Per-client configuration: loads `examples/clients.toml`, prints the policy
//! every client resolves to, then the message of a configuration that makes
//! no sense.
//!
//! ```text
//! cargo run -p http-resilience --example config
//! ```

use http_resilience::{
    config::{ClientPolicy, ClientsConfig},
    policy::{AnyDecoder, AnyRetryer, Retryer},
};
use std::time::Duration;

fn main() {
    let config = ClientsConfig::from_toml_str(include_str!("clients.toml"))
        .unwrap_or_else(|err| panic!("examples/clients.toml: {err}"));

    println!("Clients of examples/clients.toml:\n");
    for name in config.names() {
        let policy = config.policy(name).expect("validated when loaded");
        print_policy(name, &policy);
    }
    // Any other name gets the [default] section, as in Spring.
    let policy = config.policy("any-other").expect("validated when loaded");
    print_policy("(any other)", &policy);

    // A configuration that makes no sense is refused when it is loaded, with
    // the path of the setting in the message and the bad value apart.
    let bad = r#"
        [default]
        deadline = "8s"
        attempt_timeout = "3s"

        [clients.weather]
        attempt_timeout = "10s"
    "#;
    match ClientsConfig::from_toml_str(bad) {
        Ok(_) => unreachable!("an attempt timeout above the deadline is refused"),
        Err(err) => {
            let value = err.setting().and_then(|setting| setting.value());
            println!(
                "A bad configuration is refused:\n  {err} (got {})",
                value.unwrap_or("?")
            );
        }
    }
}

/// One client's policy, readably.
fn print_policy(name: &str, policy: &ClientPolicy) {
    println!(
        "{name}\n  {} per attempt, {} in all",
        human(policy.attempt_timeout()),
        human(policy.deadline())
    );
    let decoder = match policy.retry().decoder() {
        AnyDecoder::Statuses(statuses) => format!("the statuses {statuses:?}"),
        AnyDecoder::Feign(_) => "OpenFeign's default (error statuses with Retry-After)".into(),
        AnyDecoder::Transient(_) => "the transient outcomes (408, 429, 5xx, connect)".into(),
        other => format!("{other:?}"),
    };
    println!("  retries {decoder}");
    let backoff = match policy.retry().retryer() {
        AnyRetryer::Fixed(fixed) => format!(
            "fixed {}, at most {} attempts",
            human(fixed.delay()),
            fixed.retries() + 1
        ),
        AnyRetryer::Exponential(exp) => format!(
            "exponential from {}, x {}, up to {}, {} jitter, at most {} attempts",
            human(exp.initial()),
            exp.multiplier(),
            human(exp.max_delay()),
            format!("{:?}", exp.jitter()).to_lowercase(),
            exp.max_attempts()
        ),
        AnyRetryer::Feign(_) => "OpenFeign's Retryer.Default arithmetic".into(),
        other => format!("{other:?}"),
    };
    println!("  backoff {backoff}");
    match policy.guard().breaker.as_ref() {
        Some(breaker) => {
            let s = breaker.settings();
            println!(
                "  breaker opens after {} failures in a row, or {} % of at least {} calls over {}, for {} (at most {})",
                s.consecutive_failures,
                s.failure_ratio * 100.0,
                s.minimum_throughput,
                human(s.sampling_window),
                human(s.break_duration),
                human(s.max_break_duration)
            );
            if let Some((duration, steps)) = s.ramp {
                println!("  then ramps up over {} in {steps} steps", human(duration));
            }
            if let Some(threshold) = s.slow_call_threshold {
                println!(
                    "  a success slower than {} counts as a failure",
                    human(threshold)
                );
            }
        }
        None => println!("  no breaker"),
    }
    // One draw of the waits, as a request would see them with no Retry-After.
    let mut retryer = policy.retry().retryer().for_request();
    let waits: Vec<String> = (1..)
        .map_while(|attempt| retryer.next_delay(attempt, None))
        .map(human)
        .collect();
    println!("  waits   {}\n", waits.join(", "));
}

/// A duration as a file would write it, to the millisecond: `1s 500ms`,
/// `5m`, `150ms`.
fn human(duration: Duration) -> String {
    let total_ms = duration.as_millis();
    if total_ms == 0 {
        return "0s".into();
    }
    let (minutes, rest) = (total_ms / 60_000, total_ms % 60_000);
    let (seconds, millis) = (rest / 1000, rest % 1000);
    let parts: Vec<String> = [(minutes, "m"), (seconds, "s"), (millis, "ms")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    parts.join(" ")
}
