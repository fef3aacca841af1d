//! The rules every circuit of a policy follows: its settings, validated,
//! and what a circuit makes of one call's outcome.

use crate::policy::{Reason, Verdict};
use std::time::Duration;

/// The settings of a breaker, validated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Settings {
    pub(crate) consecutive: u32,
    pub(crate) ratio: f64,
    pub(crate) window: Duration,
    pub(crate) min_throughput: u32,
    pub(crate) break_base: Duration,
    pub(crate) break_max: Duration,
    pub(crate) multiplier: f64,
    pub(crate) jitter: f64,
    pub(crate) probes: u32,
    pub(crate) successes: u32,
    pub(crate) max_keys: usize,
    pub(crate) idle: Duration,
    /// After the probes: the ramp, if any.
    pub(crate) ramp: Option<Ramp>,
    /// A success that took at least this long is a failure, if set.
    pub(crate) slow: Option<Duration>,
}

/// The ramp after the probes: `steps` steps over `duration`, step `k` (from
/// zero) letting `k + 1` in `steps` calls through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ramp {
    pub(crate) duration: Duration,
    pub(crate) steps: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            consecutive: 5,
            ratio: 0.1,
            window: Duration::from_secs(30),
            min_throughput: 100,
            break_base: Duration::from_secs(5),
            break_max: Duration::from_secs(60),
            multiplier: 2.0,
            jitter: 0.1,
            probes: 1,
            successes: 1,
            max_keys: 1024,
            idle: Duration::from_secs(300),
            ramp: None,
            slow: None,
        }
    }
}

/// What a circuit makes of one call's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Judged {
    Success,
    Failure(Verdict),
    /// Neither: another breaker's rejection.
    Ignored,
}

/// What a circuit makes of `verdict` on an outcome (an error when
/// `is_error`): see the policy's docs.
pub(crate) fn judge(verdict: Verdict, is_error: bool) -> Judged {
    // NOTE: a call turned away below (an open circuit, overload control)
    // never reached the upstream.
    if let Some(Reason::Failure(kind)) = verdict.reason() {
        if kind.is_turned_away() {
            return Judged::Ignored;
        }
    }
    match verdict {
        Verdict::Retry { .. } => Judged::Failure(verdict),
        Verdict::Fail { .. } if is_error => Judged::Failure(verdict),
        _ => Judged::Success,
    }
}

/// `judged`, for a call that took `took` while slow calls count from
/// `threshold`: a success that slow is a failure (see the policy's docs).
pub(crate) fn judge_timed(judged: Judged, took: Duration, threshold: Duration) -> Judged {
    match judged {
        Judged::Success if took >= threshold => Judged::Failure(Verdict::fail("slow call")),
        other => other,
    }
}
