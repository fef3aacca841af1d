//! The checks a setting must pass beyond its type, and the ranges of the
//! settings that the policies' own setters leave open.

use crate::InvalidSetting;
use std::time::Duration;

/// The longest duration any setting takes: a day, the bound Polly puts on
/// its own (`[Range(..., "1.00:00:00")]` on every `TimeSpan` it takes).
pub(super) const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// [`MAX_DURATION`] as the messages write it.
const MAX_DURATION_TEXT: &str = "24h";

/// The most attempts a retry makes, the first included.
pub(super) const MAX_ATTEMPTS: u64 = 100;

/// The most copies of a call a hedge sends, the first included: the hedging
/// policy's own bound.
pub(super) const MAX_HEDGED_ATTEMPTS: u64 = crate::hedge::MAX_COPIES as u64;

/// The largest multiplier of a growing wait: the retry's backoff, the
/// breaker's break.
pub(super) const MAX_MULTIPLIER: f64 = 10.0;

/// The smallest multiplier of the `grpc` backoff, which may shrink its
/// waits (below it, the third wait is under a hundredth of the first: no
/// backoff at all).
pub(super) const MIN_GRPC_MULTIPLIER: f64 = 0.1;

/// The largest factor of a tolerance or a throttle's `k`.
pub(super) const MAX_FACTOR: f64 = 10.0;

/// The most keys a breaker or overload control keeps: what bounds their
/// memory.
pub(super) const MAX_KEYS: u64 = 1_000_000;

/// The largest limit of calls in flight, or of calls queued, per key.
pub(super) const MAX_CALLS: u64 = 100_000;

/// The largest count of failures or of calls a breaker's rule waits for.
pub(super) const MAX_FAILURES: u64 = 10_000;

/// The largest `minimum_throughput` of a breaker.
pub(super) const MAX_THROUGHPUT: u64 = 1_000_000;

/// The largest count of probes, of successful probes, or of a ramp's
/// steps.
pub(super) const MAX_STEPS: u64 = 1_000;

/// The most latencies a percentile delay waits for.
pub(super) const MAX_SAMPLES: u64 = 100_000;

/// An error unless `applies`: `field` is written for another `kind` than the
/// one in force.
pub(super) fn only_for(
    applies: bool,
    field: &str,
    kind: &str,
    wanted: &[&str],
) -> Result<(), InvalidSetting> {
    if applies {
        return Ok(());
    }
    let wanted: Vec<String> = wanted.iter().map(|name| format!("{name:?}")).collect();
    Err(InvalidSetting::new(
        field,
        format!("applies only to {kind} = {}", wanted.join(" or ")),
    ))
}

/// An error when `value` is zero.
pub(super) fn positive(field: &str, value: Duration) -> Result<(), InvalidSetting> {
    if value.is_zero() {
        return Err(InvalidSetting::new(field, "must be greater than zero").with_value("0s"));
    }
    Ok(())
}

/// An error when `value` is above [`MAX_DURATION`].
pub(super) fn at_most_a_day(field: &str, value: Duration) -> Result<Duration, InvalidSetting> {
    if value > MAX_DURATION {
        let problem = format!("must be at most {MAX_DURATION_TEXT}");
        return Err(InvalidSetting::new(field, problem).with_value(duration_text(value)));
    }
    Ok(value)
}

/// An error when the count `value` is above `max`.
pub(super) fn count_at_most<T: Copy + Into<u64> + ToString>(
    field: &str,
    value: T,
    max: u64,
) -> Result<T, InvalidSetting> {
    if value.into() > max {
        let problem = format!("must be at most {}", thousands(max));
        return Err(InvalidSetting::new(field, problem).with_value(value.to_string()));
    }
    Ok(value)
}

/// An error when `value` (a count of keys, read as a `usize`) is above
/// [`MAX_KEYS`].
pub(super) fn keys_at_most(field: &str, value: usize) -> Result<usize, InvalidSetting> {
    let wide = u64::try_from(value).unwrap_or(u64::MAX);
    count_at_most(field, wide, MAX_KEYS).map(|_| value)
}

/// An error when the number `value` is above `max`, or infinite.
pub(super) fn number_at_most(field: &str, value: f64, max: f64) -> Result<f64, InvalidSetting> {
    if value > max {
        let problem = format!("must be at most {max:?}");
        return Err(InvalidSetting::new(field, problem).with_value(format!("{value:?}")));
    }
    Ok(value)
}

/// An error when the number `value` is below `min`.
pub(super) fn number_at_least(field: &str, value: f64, min: f64) -> Result<f64, InvalidSetting> {
    if value < min {
        let problem = format!("must be at least {min:?}");
        return Err(InvalidSetting::new(field, problem).with_value(format!("{value:?}")));
    }
    Ok(value)
}

/// A duration as a value in a message: `250ms`, `90s`; one that no text
/// could write (a number of seconds too large for the reader) as `too
/// large`.
pub(super) fn duration_text(value: Duration) -> String {
    if value == Duration::MAX {
        return "too large".to_owned();
    }
    format!("{value:?}")
}

/// `n` with its thousands apart, as the docs write the bounds: `1,000,000`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Whether `path` (a table's, such as `clients.x.breaker`) is in a client's
/// section rather than `[default]`: nothing inherits from a client.
///
/// NOTE: the paths are this module's own, `default` and [`client_path`]'s.
pub(super) fn is_client(path: &str) -> bool {
    path.starts_with("clients.")
}

/// `clients.<name>`, with the name quoted as a TOML key when it is not a bare
/// one (`clients."eu.weather"`).
pub(super) fn client_path(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        format!("clients.{name}")
    } else {
        format!("clients.{name:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_messages_hold_the_bound_and_keep_the_value_apart() {
        let err = at_most_a_day("break_duration", Duration::from_secs(90_000)).unwrap_err();
        assert_eq!(err.to_string(), "break_duration must be at most 24h");
        assert_eq!(err.value(), Some("90000s"));
        assert_eq!(at_most_a_day("x", MAX_DURATION), Ok(MAX_DURATION));
        let err = at_most_a_day("deadline", Duration::MAX).unwrap_err();
        assert_eq!(err.value(), Some("too large"));

        let err = count_at_most("max_attempts", 101_u32, MAX_ATTEMPTS).unwrap_err();
        assert_eq!(err.to_string(), "max_attempts must be at most 100");
        assert_eq!(err.value(), Some("101"));
        let err = keys_at_most("max_keys", usize::MAX).unwrap_err();
        assert_eq!(err.to_string(), "max_keys must be at most 1,000,000");
        assert_eq!(err.value(), Some(usize::MAX.to_string().as_str()));
        assert_eq!(keys_at_most("max_keys", 1_000_000), Ok(1_000_000));

        let err = number_at_most("multiplier", 1e308, MAX_MULTIPLIER).unwrap_err();
        assert_eq!(err.to_string(), "multiplier must be at most 10.0");
        let err = number_at_most("k", f64::INFINITY, MAX_FACTOR).unwrap_err();
        assert_eq!(err.value(), Some("inf"));
        let err = number_at_least("multiplier", 1e-300, MIN_GRPC_MULTIPLIER).unwrap_err();
        assert_eq!(err.to_string(), "multiplier must be at least 0.1");
        assert_eq!(err.value(), Some("1e-300"));
    }

    #[test]
    fn other_messages_hold_no_value() {
        let err = positive("deadline", Duration::ZERO).unwrap_err();
        assert_eq!(err.to_string(), "deadline must be greater than zero");
        assert_eq!(err.value(), Some("0s"));
        let err = only_for(false, "jitter", "backoff", &["exponential"]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "jitter applies only to backoff = \"exponential\""
        );
        assert_eq!(err.value(), None);
        assert_eq!(thousands(100), "100");
        assert_eq!(thousands(10_000), "10,000");
    }
}
