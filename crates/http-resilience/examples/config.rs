//! Per-client configuration: loads `examples/clients.toml`, prints the policy
//! every client resolves to, then the message of a configuration that makes
//! no sense.
//!
//! ```text
//! cargo run -p http-resilience --example config
//! ```
//!
//! Copied into a project of its own, it reads `clients.toml` from beside
//! it: copy `examples/clients.toml` too.

use http_resilience::config::{ClientPolicy, ClientsConfig};
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

/// One client's policy: its limits, then its retry policy and its breaker
/// as their `Debug` shows them (the one public view of a built policy's
/// settings).
fn print_policy(name: &str, policy: &ClientPolicy) {
    println!(
        "{name}\n  {} per attempt, {} in all",
        human(policy.attempt_timeout()),
        human(policy.deadline())
    );
    println!("  retry   {:?}", policy.retry());
    match policy.guard().breaker.as_ref() {
        Some(breaker) => println!("  breaker {breaker:?}\n"),
        None => println!("  no breaker\n"),
    }
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
