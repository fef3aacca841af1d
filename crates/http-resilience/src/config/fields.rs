//! What a section resolves to: every field of a client with a value, each
//! part's own (the breaker's, the hedge's, overload control's) beside the
//! retry's. The tables' files apply a written section over these and build
//! the policies from them.

use super::{
    decoder::DecoderFields, origin::Origins, rate_limit::RateLimitFields, written::BackoffKind,
};
use crate::{breaker::BreakerSettings, policy::Jitter, propagate::TimeoutFormat};
use http::HeaderName;
use std::time::Duration;

/// Every field of a section with a value: a preset, or a section applied over
/// one. It is checked only when built into a policy.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fields {
    pub(super) deadline: Duration,
    pub(super) attempt_timeout: Duration,
    /// The header and the format of the budget sent on every attempt, if
    /// any.
    pub(super) propagate: Option<(HeaderName, TimeoutFormat)>,
    /// The retry's decoder.
    pub(super) decoder: DecoderFields,
    pub(super) backoff: BackoffKind,
    pub(super) delay: Duration,
    pub(super) max_delay: Duration,
    pub(super) max_attempts: u32,
    pub(super) multiplier: f64,
    pub(super) jitter: Jitter,
    pub(super) seed: Option<u64>,
    /// The cap on a server's pushback; `grpc` backoff only.
    pub(super) max_pushback: Option<Duration>,
    /// Deadline-aware scheduling: the least useful attempt time, if on.
    pub(super) min_attempt: Option<Duration>,
    /// The retry budget (tokens, ratio); every policy built gets a full
    /// bucket of its own.
    pub(super) budget: Option<(u32, f64)>,
    /// The attempt header a section wrote; `None` for the decoder's own
    /// (`grpc-previous-rpc-attempts` for the `grpc` decoder, none for the
    /// others).
    pub(super) attempt_header: Option<AttemptHeaderField>,
    /// The circuit breaker, on or off.
    pub(super) breaker: BreakerFields,
    /// Hedging instead of retries, on or off.
    pub(super) hedge: HedgeFields,
    /// Overload control, on or off.
    pub(super) overload: OverloadFields,
    /// The rate limit, on or off.
    pub(super) rate_limit: RateLimitFields,
    /// Where the values that checks combine came from, for their messages.
    pub(super) origins: Origins,
}

/// The circuit breaker of a section, with a value for every field.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct BreakerFields {
    /// Whether calls pass a breaker. When off, the other fields are kept
    /// (and checked), for a client that turns it on.
    pub(super) enabled: bool,
    pub(super) settings: BreakerSettings,
    /// What counts as a failure: `None` for the retry's decoder, as the
    /// client resolves it.
    pub(super) decoder: Option<DecoderFields>,
    pub(super) seed: Option<u64>,
}

/// The hedging of a section, with a value for every field.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct HedgeFields {
    /// Whether the client hedges. When off, the other fields are kept (and
    /// checked when a delay is known), for a client that turns it on.
    pub(super) enabled: bool,
    /// When the next copy goes; `None` until a section writes one.
    pub(super) delay: Option<DelayFields>,
    pub(super) max_attempts: u32,
    /// `None` for `max_attempts`: every copy may be in flight at once.
    pub(super) max_in_flight: Option<u32>,
    pub(super) on_attempt_timeout: Option<Duration>,
    pub(super) max_server_delay: Duration,
}

/// A hedge's delay: fixed, or a percentile of the latencies observed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum DelayFields {
    /// None written: only to check a hedge turned off.
    Never,
    Fixed(Duration),
    Percentile {
        percentile: f64,
        min_samples: u64,
        window: Duration,
    },
}

/// The overload control of a section, with a value for every field.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct OverloadFields {
    /// Whether attempts pass overload control. When off, the other fields
    /// are kept (and checked), for a client that turns it on.
    pub(super) enabled: bool,
    pub(super) limit: LimitFields,
    pub(super) queue: u32,
    pub(super) max_wait: Option<Duration>,
    pub(super) min_attempt: Option<Duration>,
    /// `K` and the window, when throttling is on.
    pub(super) throttle: Option<(f64, Duration)>,
    pub(super) max_keys: usize,
    pub(super) idle_key_timeout: Duration,
    pub(super) seed: Option<u64>,
}

/// The limit of calls in flight per key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum LimitFields {
    Unbounded,
    Fixed(u32),
    Adaptive(AdaptiveFields),
}

/// An adaptive limit's settings, as [`AdaptiveLimit`]'s setters take them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct AdaptiveFields {
    pub(super) initial: u32,
    pub(super) min: u32,
    pub(super) max: u32,
    pub(super) smoothing: Option<f64>,
    pub(super) tolerance: Option<f64>,
    pub(super) backoff_ratio: Option<f64>,
}

/// `retry.attempt_header` or `retry.previous_attempts_header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AttemptHeaderField {
    /// The number of each attempt, 1 for the first.
    This(HeaderName),
    /// The number of attempts before each one; none on the first.
    Previous(HeaderName),
    /// No attempt header, whatever the decoder sends by default.
    Off,
}
