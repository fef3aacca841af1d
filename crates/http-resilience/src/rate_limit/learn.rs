//! What a response says of the server's limits: a pause (`Retry-After` on a
//! 429 or 503, gRPC's pushback on `RESOURCE_EXHAUSTED`, a quota with nothing
//! remaining) or a pace (a quota with some remaining, spread over the time
//! to its reset). Every value is capped or ignored, never trusted whole.

use crate::policy::{grpc_status_of, retry_after};
use http::HeaderMap;
use std::time::{Duration, SystemTime};

/// A source of what the server says of its limits, which a
/// [`RateLimitPolicy`](super::RateLimitPolicy) may learn from
/// ([`ServerSignals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Signal {
    /// `Retry-After` (RFC 9110, section 10.2.3) on a 429 (RFC 6585) or a
    /// 503: seconds or an HTTP-date; pauses the key until then.
    RetryAfter,
    /// gRPC's `grpc-retry-pushback-ms` (proposal A6) on a response whose
    /// `grpc-status` is `RESOURCE_EXHAUSTED` (8); pauses the key for that
    /// many milliseconds (a negative value, which A6 reads as "do not
    /// retry", pauses nothing).
    GrpcPushback,
    /// The IETF httpapi working group's `RateLimit` and `RateLimit-Policy`
    /// fields (draft-ietf-httpapi-ratelimit-headers): `RateLimit:
    /// "default";r=50;t=30` (remaining 50 for 30 s; without `t`, the window
    /// `w` of the `RateLimit-Policy` of the same name), the dictionary of
    /// draft 07 (`limit=100, remaining=50, reset=30`), and the separate
    /// `RateLimit-Remaining` and `RateLimit-Reset` of the earlier drafts.
    RateLimitFields,
    /// The common `X-RateLimit-Remaining` and `X-RateLimit-Reset` (GitHub,
    /// Twitter, many others; `X-RateLimit-Limit` adds nothing to the pace):
    /// a reset in delta-seconds, or in seconds since the Unix epoch as
    /// GitHub sends it (a value of 10⁹ or more; 10¹² or more, milliseconds).
    XRateLimit,
}

/// The server signals a policy learns from; none by default.
///
/// ```
/// use http_resilience::rate_limit::{ServerSignals, Signal};
///
/// let signals = ServerSignals::NONE.with(Signal::RetryAfter).with(Signal::XRateLimit);
/// assert!(signals.contains(Signal::XRateLimit));
/// assert!(!signals.contains(Signal::GrpcPushback));
/// assert!(ServerSignals::ALL.contains(Signal::RateLimitFields));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ServerSignals(u8);

/// What one response said.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct Heard {
    /// A pause of every call to the key, for this long, and who asked.
    pub(crate) pause: Option<(Duration, Signal)>,
    /// A pace: calls spread at this interval, for this long.
    pub(crate) pace: Option<Spread>,
}

/// Calls spread over the time to a quota's reset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spread {
    pub(crate) interval: Duration,
    pub(crate) lasts: Duration,
    pub(crate) source: Signal,
}

/// The gRPC code a server sheds load with, and a quota is spent with.
const RESOURCE_EXHAUSTED: i32 = 8;

/// Seconds at or above which a reset is an instant since the Unix epoch
/// (2001-09-09): no quota window is 31 years long.
const EPOCH_SECONDS: f64 = 1e9;

/// At or above which an epoch reset is in milliseconds (2001-09-09 too).
const EPOCH_MILLIS: f64 = 1e12;

// ===== impl ServerSignals =====

impl ServerSignals {
    /// No signal: the limit is the policy's alone.
    pub const NONE: Self = Self(0);
    /// Every signal.
    pub const ALL: Self = Self(0b1111);

    /// These signals and `signal`.
    #[must_use]
    pub const fn with(self, signal: Signal) -> Self {
        Self(self.0 | bit(signal))
    }

    /// Whether `signal` is one of these.
    pub const fn contains(self, signal: Signal) -> bool {
        self.0 & bit(signal) != 0
    }

    /// Whether any signal is read.
    pub(crate) const fn any(self) -> bool {
        self.0 != 0
    }
}

const fn bit(signal: Signal) -> u8 {
    match signal {
        Signal::RetryAfter => 1,
        Signal::GrpcPushback => 2,
        Signal::RateLimitFields => 4,
        Signal::XRateLimit => 8,
    }
}

// ===== impl Signal =====

impl Signal {
    /// A short name, for metrics and logs: `retry_after`, `grpc_pushback`,
    /// `ratelimit`, `x_ratelimit`.
    pub const fn name(&self) -> &'static str {
        match self {
            Signal::RetryAfter => "retry_after",
            Signal::GrpcPushback => "grpc_pushback",
            Signal::RateLimitFields => "ratelimit",
            Signal::XRateLimit => "x_ratelimit",
        }
    }
}

/// What a response of `status` with `headers`, read at `now` (the wall
/// clock, for the dates and epochs), says through `signals`; every wait
/// capped at `cap`.
pub(crate) fn hear(
    signals: ServerSignals,
    status: u16,
    headers: &HeaderMap,
    now: SystemTime,
    cap: Duration,
) -> Heard {
    let mut heard = Heard::default();
    if signals.contains(Signal::RetryAfter) && matches!(status, 429 | 503) {
        if let Some(Ok(wait)) = retry_after::delay(headers, now) {
            heard.longer_pause(wait.min(cap), Signal::RetryAfter);
        }
    }
    if signals.contains(Signal::GrpcPushback) {
        if let Some(wait) = pushback(headers) {
            heard.longer_pause(wait.min(cap), Signal::GrpcPushback);
        }
    }
    if signals.contains(Signal::RateLimitFields) {
        for quota in ratelimit_fields(headers, now) {
            heard.quota(quota, cap, Signal::RateLimitFields);
        }
    }
    if signals.contains(Signal::XRateLimit) {
        if let Some(quota) = remaining_and_reset(headers, "x-ratelimit-", now) {
            heard.quota(quota, cap, Signal::XRateLimit);
        }
    }
    heard
}

// ===== impl Heard =====

impl Heard {
    /// Keeps the longer of this pause and the one heard already; a pause of
    /// zero is none.
    fn longer_pause(&mut self, wait: Duration, source: Signal) {
        if wait.is_zero() {
            return;
        }
        if self.pause.is_none_or(|(kept, _)| wait > kept) {
            self.pause = Some((wait, source));
        }
    }

    /// What a quota with `remaining` calls until `reset` says: a pause when
    /// none remain, else the calls spread over the time left; the slowest
    /// pace heard wins.
    fn quota(&mut self, Quota { remaining, reset }: Quota, cap: Duration, source: Signal) {
        let lasts = reset.min(cap);
        if lasts.is_zero() {
            return;
        }
        if remaining == 0 {
            return self.longer_pause(lasts, source);
        }
        let interval = (reset / u32::try_from(remaining).unwrap_or(u32::MAX)).min(cap);
        if self.pace.is_none_or(|kept| interval > kept.interval) {
            self.pace = Some(Spread {
                interval,
                lasts,
                source,
            });
        }
    }
}

/// A quota as a server states it: the calls remaining, and when it resets.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Quota {
    remaining: u64,
    reset: Duration,
}

/// gRPC's pushback, on a response that is `RESOURCE_EXHAUSTED`.
fn pushback(headers: &HeaderMap) -> Option<Duration> {
    if grpc_status_of(headers) != Some(RESOURCE_EXHAUSTED) {
        return None;
    }
    let value = headers.get("grpc-retry-pushback-ms")?;
    let millis = crate::policy::parse_ascii_int(value.as_bytes())?;
    u64::try_from(millis).ok().map(Duration::from_millis)
}

/// `<prefix>remaining` and `<prefix>reset`, when both are well formed.
fn remaining_and_reset(headers: &HeaderMap, prefix: &str, now: SystemTime) -> Option<Quota> {
    let field = |name: &str| {
        let mut full = String::with_capacity(prefix.len() + name.len());
        full.push_str(prefix);
        full.push_str(name);
        headers.get(full.as_str())?.to_str().ok().map(str::trim)
    };
    let remaining = count(field("remaining")?)?;
    let reset = reset(field("reset")?, now)?;
    Some(Quota { remaining, reset })
}

/// The quotas the IETF fields state, in any of the draft's forms.
fn ratelimit_fields(headers: &HeaderMap, now: SystemTime) -> Vec<Quota> {
    let mut quotas = Vec::new();
    if let Some(separate) = remaining_and_reset(headers, "ratelimit-", now) {
        quotas.push(separate);
    }
    let Some(field) = headers.get("ratelimit").and_then(|v| v.to_str().ok()) else {
        return quotas;
    };
    let policies = headers
        .get("ratelimit-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut dictionary = (None, None);
    for member in field.split(',') {
        let params: Vec<(&str, &str)> = member.split(';').filter_map(param).collect();
        match params.as_slice() {
            [("remaining", r)] => dictionary.0 = count(r),
            [("reset", t)] => dictionary.1 = seconds(t),
            _ => quotas.extend(item_quota(member, &params, policies)),
        }
    }
    if let (Some(remaining), Some(reset)) = dictionary {
        quotas.push(Quota { remaining, reset });
    }
    quotas
}

/// The quota of one item of `RateLimit` (`"name";r=..;t=..`): its own `t`,
/// or the window `w` of the policy of the same name.
fn item_quota(member: &str, params: &[(&str, &str)], policies: &str) -> Option<Quota> {
    let value = |key: &str| params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let remaining = count(value("r")?)?;
    let reset = match value("t") {
        Some(t) => seconds(t)?,
        None => {
            let name = member.split(';').next()?.trim();
            policy_window(policies, name)?
        }
    };
    Some(Quota { remaining, reset })
}

/// The window `w` of the policy `name` in `RateLimit-Policy`.
fn policy_window(policies: &str, name: &str) -> Option<Duration> {
    policies.split(',').find_map(|member| {
        let mut parts = member.split(';');
        if parts.next()?.trim() != name {
            return None;
        }
        parts
            .filter_map(param)
            .find(|(k, _)| *k == "w")
            .and_then(|(_, w)| seconds(w))
    })
}

/// A `key=value` parameter, trimmed.
fn param(text: &str) -> Option<(&str, &str)> {
    let (key, value) = text.split_once('=')?;
    Some((key.trim(), value.trim()))
}

/// A count: ASCII digits alone (a sign, a fraction or anything else is not
/// one); one too large for `u64` is the largest.
fn count(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().unwrap_or(u64::MAX))
}

/// Non-negative delta-seconds, a fraction allowed (`1.5`).
fn seconds(text: &str) -> Option<Duration> {
    let value = decimal(text)?;
    Duration::try_from_secs_f64(value).ok()
}

/// A reset: delta-seconds, or an instant since the Unix epoch in seconds
/// (at least [`EPOCH_SECONDS`]) or milliseconds (at least
/// [`EPOCH_MILLIS`]); an instant already past is none.
fn reset(text: &str, now: SystemTime) -> Option<Duration> {
    let value = decimal(text)?;
    if value < EPOCH_SECONDS {
        return Duration::try_from_secs_f64(value).ok();
    }
    let seconds = if value >= EPOCH_MILLIS {
        value / 1000.0
    } else {
        value
    };
    let at = SystemTime::UNIX_EPOCH.checked_add(Duration::try_from_secs_f64(seconds).ok()?)?;
    at.duration_since(now).ok().filter(|wait| !wait.is_zero())
}

/// A non-negative decimal: digits, and at most one `.` followed by digits.
fn decimal(text: &str) -> Option<f64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, "0"));
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) {
        return None;
    }
    text.parse().ok().filter(|value: &f64| value.is_finite())
}

#[cfg(test)]
#[path = "learn_tests.rs"]
mod tests;
