//! The sections as written: what a file holds, parsed as it is read.

use super::validate::at_most_a_day;
use crate::{policy::Jitter, propagate::TimeoutFormat, InvalidSetting};
use http::HeaderName;
use serde::{
    de::{self, Deserializer, Visitor},
    Deserialize,
};
use std::{fmt, marker::PhantomData, time::Duration};

/// One section: `[default]` or `[clients.<name>]`, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Section {
    pub(super) preset: Option<Written<Preset>>,
    pub(super) deadline: Option<Written<Duration>>,
    pub(super) attempt_timeout: Option<Written<Duration>>,
    pub(super) propagate: Option<Written<Propagate>>,
    pub(super) propagate_header: Option<Written<HeaderName>>,
    pub(super) propagate_format: Option<Written<TimeoutFormat>>,
    #[serde(default)]
    pub(super) retry: RetrySection,
    #[serde(default)]
    pub(super) breaker: BreakerSection,
    #[serde(default)]
    pub(super) hedge: HedgeSection,
    #[serde(default)]
    pub(super) overload: OverloadSection,
    #[serde(default)]
    pub(super) rate_limit: RateLimitSection,
}

/// The `retry` table of a section, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetrySection {
    pub(super) decoder: Option<Written<DecoderKind>>,
    pub(super) statuses: Option<Vec<u16>>,
    pub(super) retry_after: Option<bool>,
    pub(super) codes: Option<Vec<Written<GrpcCodeName>>>,
    pub(super) backoff: Option<Written<BackoffKind>>,
    pub(super) delay: Option<Written<Duration>>,
    pub(super) multiplier: Option<f64>,
    pub(super) max_delay: Option<Written<Duration>>,
    pub(super) max_attempts: Option<u32>,
    pub(super) jitter: Option<Written<Jitter>>,
    pub(super) seed: Option<u64>,
    pub(super) max_pushback: Option<Written<Duration>>,
    pub(super) min_attempt: Option<Written<DurationOrOff>>,
    #[serde(default)]
    pub(super) budget: BudgetSection,
    pub(super) attempt_header: Option<Written<HeaderOrOff>>,
    pub(super) previous_attempts_header: Option<Written<HeaderOrOff>>,
}

/// The `retry.budget` table of a section, as written: the arguments of
/// [`RetryBudget::new`](crate::policy::RetryBudget::new).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BudgetSection {
    pub(super) enabled: Option<bool>,
    pub(super) max_tokens: Option<u32>,
    pub(super) token_ratio: Option<f64>,
}

/// The `breaker` table of a section, as written: the settings named as the
/// [`BreakerPolicy`](crate::breaker::BreakerPolicy) setters' errors name
/// them, and a decoder of its own spelled as the retry's.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BreakerSection {
    pub(super) enabled: Option<bool>,
    pub(super) consecutive_failures: Option<u32>,
    pub(super) failure_ratio: Option<f64>,
    pub(super) sampling_window: Option<Written<Duration>>,
    pub(super) minimum_throughput: Option<u32>,
    pub(super) break_duration: Option<Written<Duration>>,
    pub(super) max_break_duration: Option<Written<Duration>>,
    pub(super) break_multiplier: Option<f64>,
    pub(super) break_jitter: Option<f64>,
    pub(super) half_open_probes: Option<u32>,
    pub(super) half_open_successes: Option<u32>,
    pub(super) ramp_duration: Option<Written<DurationOrOff>>,
    pub(super) ramp_steps: Option<u32>,
    pub(super) slow_call_threshold: Option<Written<DurationOrOff>>,
    pub(super) max_keys: Option<usize>,
    pub(super) idle_key_timeout: Option<Written<Duration>>,
    pub(super) decoder: Option<Written<DecoderKind>>,
    pub(super) statuses: Option<Vec<u16>>,
    pub(super) retry_after: Option<bool>,
    pub(super) codes: Option<Vec<Written<GrpcCodeName>>>,
    pub(super) seed: Option<u64>,
}

/// The `hedge` table of a section, as written: the
/// [`HedgePolicy`](crate::hedge::HedgePolicy) settings, named as its setters'
/// errors name them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct HedgeSection {
    pub(super) enabled: Option<bool>,
    pub(super) delay: Option<Written<Duration>>,
    pub(super) percentile: Option<f64>,
    pub(super) min_samples: Option<u64>,
    pub(super) window: Option<Written<Duration>>,
    pub(super) max_attempts: Option<u32>,
    pub(super) max_in_flight: Option<u32>,
    pub(super) on_attempt_timeout: Option<Written<DurationOrOff>>,
    pub(super) max_server_delay: Option<Written<Duration>>,
}

/// The `overload` table of a section, as written: the
/// [`OverloadPolicy`](crate::overload::OverloadPolicy) settings, named as its
/// setters' errors name them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OverloadSection {
    pub(super) enabled: Option<bool>,
    pub(super) max_in_flight: Option<u32>,
    #[serde(default)]
    pub(super) adaptive: AdaptiveSection,
    pub(super) queue: Option<u32>,
    pub(super) max_wait: Option<Written<DurationOrOff>>,
    pub(super) min_attempt: Option<Written<DurationOrOff>>,
    #[serde(default)]
    pub(super) throttle: ThrottleSection,
    pub(super) max_keys: Option<usize>,
    pub(super) idle_key_timeout: Option<Written<Duration>>,
    pub(super) seed: Option<u64>,
}

/// The `rate_limit` table of a section, as written: the
/// [`RateLimitPolicy`](crate::rate_limit::RateLimitPolicy) settings, named as
/// its setters' errors name them, and the fleet's Redis.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RateLimitSection {
    pub(super) enabled: Option<bool>,
    pub(super) calls: Option<u32>,
    pub(super) per: Option<Written<Duration>>,
    pub(super) burst: Option<u32>,
    pub(super) mode: Option<Written<RateLimitModeName>>,
    pub(super) max_wait: Option<Written<DurationOrOff>>,
    pub(super) min_attempt: Option<Written<DurationOrOff>>,
    pub(super) server_signals: Option<Vec<Written<SignalName>>>,
    pub(super) max_pause: Option<Written<Duration>>,
    pub(super) max_keys: Option<usize>,
    pub(super) idle_key_timeout: Option<Written<Duration>>,
    pub(super) redis_url: Option<String>,
    pub(super) redis_prefix: Option<String>,
    pub(super) lease_wait: Option<Written<Duration>>,
    pub(super) max_lease: Option<u32>,
    pub(super) fallback: Option<Written<FallbackName>>,
    pub(super) local_share: Option<f64>,
}

/// A `rate_limit.mode` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RateLimitModeName(pub(super) crate::rate_limit::RateLimitMode);

/// A `rate_limit.server_signals` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SignalName(pub(super) crate::rate_limit::Signal);

/// A `rate_limit.fallback` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FallbackName {
    Local,
    FailClosed,
}

/// The `overload.adaptive` table: an [`AdaptiveLimit`](crate::overload::AdaptiveLimit).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdaptiveSection {
    pub(super) initial: Option<u32>,
    pub(super) min: Option<u32>,
    pub(super) max: Option<u32>,
    pub(super) smoothing: Option<f64>,
    pub(super) tolerance: Option<f64>,
    pub(super) backoff_ratio: Option<f64>,
}

/// The `overload.throttle` table: a [`Throttle`](crate::overload::Throttle).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ThrottleSection {
    pub(super) enabled: Option<bool>,
    pub(super) k: Option<f64>,
    pub(super) window: Option<Written<Duration>>,
}

/// The decoder fields of a table (`retry` or `breaker`), as written.
#[derive(Debug, Clone, Copy)]
pub(super) struct WrittenDecoder<'a> {
    pub(super) decoder: Option<&'a Written<DecoderKind>>,
    pub(super) statuses: Option<&'a Vec<u16>>,
    pub(super) retry_after: Option<bool>,
    pub(super) codes: Option<&'a Vec<Written<GrpcCodeName>>>,
}

// ===== impl RetrySection =====

impl RetrySection {
    /// The decoder fields written.
    pub(super) fn written_decoder(&self) -> WrittenDecoder<'_> {
        WrittenDecoder {
            decoder: self.decoder.as_ref(),
            statuses: self.statuses.as_ref(),
            retry_after: self.retry_after,
            codes: self.codes.as_ref(),
        }
    }
}

// ===== impl BreakerSection =====

impl BreakerSection {
    /// The decoder fields written.
    pub(super) fn written_decoder(&self) -> WrittenDecoder<'_> {
        WrittenDecoder {
            decoder: self.decoder.as_ref(),
            statuses: self.statuses.as_ref(),
            retry_after: self.retry_after,
            codes: self.codes.as_ref(),
        }
    }
}

// ===== impl WrittenDecoder =====

impl WrittenDecoder<'_> {
    /// Whether no decoder field is written.
    pub(super) fn is_empty(&self) -> bool {
        self.decoder.is_none()
            && self.statuses.is_none()
            && self.retry_after.is_none()
            && self.codes.is_none()
    }
}

/// A preset name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Preset {
    Reactor,
    Feign,
    Standard,
    Conservative,
    Apache,
    Grpc,
}

/// A `propagate` name: a header and its format together, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Propagate {
    /// `x-envoy-expected-rq-timeout-ms` in milliseconds.
    Envoy,
    /// `grpc-timeout` in gRPC's format.
    Grpc,
    /// No budget sent.
    Off,
}

/// A `retry.decoder` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DecoderKind {
    Statuses,
    Feign,
    Transient,
    Apache,
    Grpc,
}

/// A `retry.backoff` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BackoffKind {
    Fixed,
    Exponential,
    Feign,
    Grpc,
}

/// A setting written as a string (a duration or a name), parsed as it is
/// deserialized.
///
/// NOTE: a string that does not parse is kept rather than failing the
/// deserializer, so that validation reports it under its full path
/// (`clients.weather.deadline`) whatever format it came from; a deserializer
/// error knows only its position in the text, and only some formats tell it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Written<T> {
    Parsed(T),
    Malformed(String),
}

/// A value that a setting writes as a string.
pub(super) trait FromText: Sized {
    /// What the string must be, completing "must be ...".
    const EXPECTED: &'static str;

    /// The value, if the string is one.
    fn from_text(text: &str) -> Option<Self>;

    /// An error for setting `field` when the value is outside the range
    /// every setting of its type has; none by default.
    fn in_range(&self, field: &str) -> Result<(), InvalidSetting> {
        let _ = field;
        Ok(())
    }
}

// ===== impl Written =====

impl<T: Clone> Written<T> {
    /// The parsed value, or the error for setting `field` of section `path`.
    pub(super) fn get(&self, field: &str, path: &str) -> Result<T, InvalidSetting>
    where
        T: FromText,
    {
        match self {
            Written::Parsed(value) => {
                value.in_range(field).map_err(|err| err.within(path))?;
                Ok(value.clone())
            }
            Written::Malformed(text) => {
                let problem = format!("must be {}", T::EXPECTED);
                let err = InvalidSetting::new(field, problem).with_value(format!("{text:?}"));
                Err(err.within(path))
            }
        }
    }
}

impl<'de, T: FromText> Deserialize<'de> for Written<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(WrittenVisitor(PhantomData))
    }
}

/// Reads a [`Written`] from a string.
struct WrittenVisitor<T>(PhantomData<T>);

impl<T: FromText> Visitor<'_> for WrittenVisitor<T> {
    type Value = Written<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTED)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(match T::from_text(text) {
            Some(value) => Written::Parsed(value),
            None => Written::Malformed(text.to_owned()),
        })
    }
}

impl FromText for Duration {
    const EXPECTED: &'static str = "a duration such as \"250ms\", \"2s\" or \"1m 30s\"";

    /// NOTE: a number too large for the reader is read as the longest
    /// duration, so that it fails its setting's range (`must be at most
    /// 24h`) rather than reading as a malformed duration.
    fn from_text(text: &str) -> Option<Self> {
        match humantime::parse_duration(text) {
            Ok(duration) => Some(duration),
            Err(humantime::DurationError::NumberOverflow) => Some(Duration::MAX),
            Err(_) => None,
        }
    }

    /// Every duration is at most a day
    /// ([`MAX_DURATION`](super::validate::MAX_DURATION)).
    fn in_range(&self, field: &str) -> Result<(), InvalidSetting> {
        at_most_a_day(field, *self).map(drop)
    }
}

/// A setting that a duration turns on and `"off"` turns off, when its base
/// turned it on: `retry.min_attempt` (on in the `standard` and
/// `conservative` presets, which a section may sit on),
/// `breaker.ramp_duration` and `breaker.slow_call_threshold` (which a
/// `[default]` section may turn on).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct DurationOrOff(pub(super) Option<Duration>);

impl FromText for DurationOrOff {
    const EXPECTED: &'static str = "\"off\" or a duration such as \"500ms\"";

    fn from_text(text: &str) -> Option<Self> {
        if text == "off" {
            return Some(Self(None));
        }
        Duration::from_text(text).map(|d| Self(Some(d)))
    }

    fn in_range(&self, field: &str) -> Result<(), InvalidSetting> {
        self.0.map_or(Ok(()), |duration| duration.in_range(field))
    }
}

/// Whether `written` is a value other than `"off"`: written in a `breaker`
/// or `hedge` table, it turns the table's feature on (a malformed one is
/// refused before it matters).
pub(super) fn turns_on(written: &Option<Written<DurationOrOff>>) -> bool {
    !matches!(written, None | Some(Written::Parsed(DurationOrOff(None))))
}

/// An entry of `retry.codes`: a gRPC code by its canonical name
/// (`"UNAVAILABLE"`, in any case), as service configs write them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct GrpcCodeName(pub(super) i32);

impl FromText for GrpcCodeName {
    const EXPECTED: &'static str = "a gRPC code name such as \"UNAVAILABLE\"";

    fn from_text(text: &str) -> Option<Self> {
        crate::policy::grpc_code_by_name(text).map(Self)
    }
}

impl FromText for HeaderName {
    const EXPECTED: &'static str = "a header name such as \"x-timeout-ms\"";

    fn from_text(text: &str) -> Option<Self> {
        HeaderName::from_bytes(text.as_bytes()).ok()
    }
}

/// An attempt header a section sends, or `"off"`: none, whatever its base
/// sent (the `grpc` decoder's `grpc-previous-rpc-attempts` included).
///
/// NOTE: `off` is a valid header name too; no client sends a header of that
/// name, so the word means what it means in the other settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HeaderOrOff(pub(super) Option<HeaderName>);

impl FromText for HeaderOrOff {
    const EXPECTED: &'static str = "\"off\" or a header name such as \"x-attempt\"";

    fn from_text(text: &str) -> Option<Self> {
        if text == "off" {
            return Some(Self(None));
        }
        HeaderName::from_text(text).map(|name| Self(Some(name)))
    }
}

/// `FromText` for a closed set of names.
macro_rules! names {
    ($ty:ty, $expected:literal, { $($name:literal => $value:expr),* $(,)? }) => {
        impl FromText for $ty {
            const EXPECTED: &'static str = $expected;

            fn from_text(text: &str) -> Option<Self> {
                match text {
                    $($name => Some($value),)*
                    _ => None,
                }
            }
        }
    };
}

names!(Preset, "one of \"reactor\", \"feign\", \"standard\", \"conservative\", \"apache\", \"grpc\"", {
    "reactor" => Preset::Reactor,
    "feign" => Preset::Feign,
    "standard" => Preset::Standard,
    "conservative" => Preset::Conservative,
    "apache" => Preset::Apache,
    "grpc" => Preset::Grpc,
});

names!(Propagate, "one of \"envoy\", \"grpc\", \"off\"", {
    "envoy" => Propagate::Envoy,
    "grpc" => Propagate::Grpc,
    "off" => Propagate::Off,
});

names!(TimeoutFormat, "one of \"millis\", \"grpc\"", {
    "millis" => TimeoutFormat::Millis,
    "grpc" => TimeoutFormat::Grpc,
});

names!(DecoderKind, "one of \"statuses\", \"feign\", \"transient\", \"apache\", \"grpc\"", {
    "statuses" => DecoderKind::Statuses,
    "feign" => DecoderKind::Feign,
    "transient" => DecoderKind::Transient,
    "apache" => DecoderKind::Apache,
    "grpc" => DecoderKind::Grpc,
});

names!(BackoffKind, "one of \"fixed\", \"exponential\", \"feign\", \"grpc\"", {
    "fixed" => BackoffKind::Fixed,
    "exponential" => BackoffKind::Exponential,
    "feign" => BackoffKind::Feign,
    "grpc" => BackoffKind::Grpc,
});

names!(Jitter, "one of \"none\", \"full\", \"equal\", \"decorrelated\"", {
    "none" => Jitter::None,
    "full" => Jitter::Full,
    "equal" => Jitter::Equal,
    "decorrelated" => Jitter::Decorrelated,
});

names!(RateLimitModeName, "one of \"wait\", \"turn_away\"", {
    "wait" => RateLimitModeName(crate::rate_limit::RateLimitMode::Wait),
    "turn_away" => RateLimitModeName(crate::rate_limit::RateLimitMode::TurnAway),
});

names!(SignalName, "one of \"retry_after\", \"grpc_pushback\", \"ratelimit\", \"x_ratelimit\"", {
    "retry_after" => SignalName(crate::rate_limit::Signal::RetryAfter),
    "grpc_pushback" => SignalName(crate::rate_limit::Signal::GrpcPushback),
    "ratelimit" => SignalName(crate::rate_limit::Signal::RateLimitFields),
    "x_ratelimit" => SignalName(crate::rate_limit::Signal::XRateLimit),
});

names!(FallbackName, "one of \"local\", \"fail_closed\"", {
    "local" => FallbackName::Local,
    "fail_closed" => FallbackName::FailClosed,
});

// ===== impl DecoderKind =====

impl DecoderKind {
    /// The name as written in a file.
    pub(super) const fn name(self) -> &'static str {
        match self {
            DecoderKind::Statuses => "statuses",
            DecoderKind::Feign => "feign",
            DecoderKind::Transient => "transient",
            DecoderKind::Apache => "apache",
            DecoderKind::Grpc => "grpc",
        }
    }
}

// ===== impl BackoffKind =====

impl BackoffKind {
    /// The name as written in a file.
    pub(super) const fn name(self) -> &'static str {
        match self {
            BackoffKind::Fixed => "fixed",
            BackoffKind::Exponential => "exponential",
            BackoffKind::Feign => "feign",
            BackoffKind::Grpc => "grpc",
        }
    }
}
