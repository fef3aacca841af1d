//! The time rules every form of the stack applies to a wait before another
//! attempt: the retry layer, the combined service and hedging call these
//! functions, and none keeps a copy of them.

use crate::{
    attempt_timeout::error::AttemptTimedOut, deadline::error::DeadlineExceeded,
    timer::saturating_after, BoxError, RequestDeadline, Stop,
};
use std::time::Duration;
use tokio::time::Instant;

/// The deadline of a call that starts at `now` with `budget`, and the
/// deadline the request brings, if any: the earlier of the two wins.
#[inline]
pub(crate) fn call_deadline(
    now: Instant,
    budget: Duration,
    inherited: Option<RequestDeadline>,
) -> RequestDeadline {
    earliest(inherited, RequestDeadline::after_from(now, budget))
}

/// The deadline in force when `own` meets the one a request already
/// carries, if any: the earlier wins, and on a tie the one already there
/// (and its budget) stays.
#[inline]
pub(crate) fn earliest(existing: Option<RequestDeadline>, own: RequestDeadline) -> RequestDeadline {
    existing.map_or(own, |existing| existing.min(own))
}

/// Whether an attempt runs until the call's `deadline` instead of its own
/// limit: the final attempt the retry can make (`on_final`), when the final
/// attempt is to use the deadline, and only when there is a deadline to run
/// until.
#[inline]
pub(crate) const fn runs_to_deadline(
    final_uses_deadline: bool,
    on_final: bool,
    deadline: Option<RequestDeadline>,
) -> bool {
    final_uses_deadline && on_final && deadline.is_some()
}

/// What ends an attempt when its time is up: its own limit, or the call's
/// deadline when that comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// The attempt's limit, of this length.
    Attempt(Duration),
    /// The call's deadline, of this budget.
    Deadline(Duration),
}

impl Expiry {
    /// The error the attempt ends with.
    pub(crate) fn into_error(self) -> BoxError {
        match self {
            Expiry::Attempt(limit) => AttemptTimedOut::new(limit).into(),
            Expiry::Deadline(budget) => DeadlineExceeded::new(budget).into(),
        }
    }
}

/// What ended an attempt whose end was `end` (as [`attempt_end`] gave it),
/// under the call's `deadline`: the deadline when the end is its instant.
#[inline]
pub(crate) fn expiry_at(end: Instant, limit: Duration, deadline: RequestDeadline) -> Expiry {
    if end >= deadline.instant() {
        Expiry::Deadline(deadline.budget())
    } else {
        Expiry::Attempt(limit)
    }
}

/// The end of an attempt that starts at `now` with `limit`, under the call's
/// `deadline` (if any): the earlier of its limit and the deadline, the
/// deadline winning a tie (it is the budget that ran out); the deadline alone
/// for a final attempt that may run until it (`to_deadline`). `Err` with the
/// deadline's budget when the deadline has already passed: the attempt is
/// not made.
#[inline]
pub(crate) fn attempt_end(
    now: Instant,
    limit: Duration,
    deadline: Option<RequestDeadline>,
    to_deadline: bool,
) -> Result<(Instant, Expiry), Duration> {
    let own = saturating_after(now, limit);
    match deadline {
        Some(deadline) if deadline.has_passed_at(now) => Err(deadline.budget()),
        Some(deadline) if to_deadline || deadline.instant() <= own => {
            Ok((deadline.instant(), Expiry::Deadline(deadline.budget())))
        }
        _ => Ok((own, Expiry::Attempt(limit))),
    }
}

/// Whether new work for a call (the resume of a response body) may start at
/// `now` under the call's `deadline`: never once the deadline has passed (at
/// its very instant it has), nor with less than `margin` left before it.
#[inline]
pub(crate) fn may_start(now: Instant, deadline: Option<RequestDeadline>, margin: Duration) -> bool {
    deadline
        .is_none_or(|deadline| !deadline.has_passed_at(now) && deadline.remaining_at(now) >= margin)
}

/// When the next attempt after a wait goes, or why it never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheduled {
    /// Wait this long (not at all when zero), then send the next attempt.
    After(Duration),
    /// The wait would reach the request's deadline: the outcome in hand is
    /// kept until this instant, the deadline, and returned then with
    /// [`Stop::DeadlinePassed`].
    Cut(Instant),
}

/// The growth of a backoff: `initial × multiplier^(attempts − 1)`, capped
/// at `max`, for any multiplier and however large the result. The retryers
/// and the circuit breaker's break grow by it.
pub(crate) fn grown(initial: Duration, multiplier: f64, attempts: u32, max: Duration) -> Duration {
    // NOTE: zero grows to zero, even where the power is infinite (0 × inf
    // is NaN).
    if initial.is_zero() {
        return Duration::ZERO;
    }
    let exponent = i32::try_from(attempts.saturating_sub(1)).unwrap_or(i32::MAX);
    // NOTE: `u128 as f64` rounds to the nearest float; it cannot fail.
    let nanos = (initial.as_nanos() as f64 * multiplier.powi(exponent)).round();
    // NOTE: an overflow to infinity (or NaN) compares as not less.
    if nanos.partial_cmp(&(max.as_nanos() as f64)) != Some(std::cmp::Ordering::Less) {
        return max;
    }
    // NOTE: below 2^64 ns (some 584 years) the cast is exact; beyond, a
    // `u64` cannot hold the nanoseconds, so the delay goes through seconds.
    if nanos < u64::MAX as f64 {
        Duration::from_nanos(nanos as u64)
    } else {
        Duration::try_from_secs_f64(nanos / 1e9).map_or(max, |delay| delay.min(max))
    }
}

/// The jitter of a backoff: `duration × factor`, never above `max` and never
/// panicking, however large `duration` is (`max` for a product no
/// `Duration` holds).
pub(crate) fn scale(duration: Duration, factor: f64, max: Duration) -> Duration {
    Duration::try_from_secs_f64(duration.as_secs_f64() * factor)
        .unwrap_or(max)
        .min(max)
}

/// A delay the server asked for, capped at `max`.
pub(crate) fn capped(asked: Duration, max: Duration) -> Duration {
    asked.min(max)
}

/// Schedules a `wait` before another attempt against the request's
/// `deadline`:
///
/// - with deadline-aware scheduling (`min_attempt`, the least time a useful
///   attempt needs), a wait that leaves less than `min_attempt` before the
///   deadline is not made at all: [`Stop::WouldMissDeadline`];
/// - a wait that would reach the deadline (at or after it: a tie is a cut) is
///   cut there ([`Scheduled::Cut`]); a zero wait is never cut, since the
///   next attempt goes at once;
/// - any other wait is made as it is.
pub(crate) fn schedule(
    wait: Duration,
    deadline: Option<Instant>,
    min_attempt: Option<Duration>,
    now: Instant,
) -> Result<Scheduled, Stop> {
    let Some(deadline) = deadline else {
        return Ok(Scheduled::After(wait));
    };
    if let Some(min) = min_attempt {
        if deadline.saturating_duration_since(now) < wait.saturating_add(min) {
            return Err(Stop::WouldMissDeadline);
        }
    }
    if !wait.is_zero() && saturating_after(now, wait) >= deadline {
        return Ok(Scheduled::Cut(deadline));
    }
    Ok(Scheduled::After(wait))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[tokio::test(start_paused = true)]
    async fn a_wait_is_made_cut_or_given_up() {
        let now = Instant::now();
        let deadline = Some(now + MS(1000));
        assert_eq!(
            schedule(MS(10), None, None, now),
            Ok(Scheduled::After(MS(10)))
        );
        assert_eq!(
            schedule(Duration::MAX, None, Some(MS(1)), now),
            Ok(Scheduled::After(Duration::MAX)),
            "with no deadline nothing is cut"
        );
        assert_eq!(
            schedule(MS(999), deadline, None, now),
            Ok(Scheduled::After(MS(999)))
        );
        assert_eq!(
            schedule(MS(1000), deadline, None, now),
            Ok(Scheduled::Cut(now + MS(1000))),
            "a wait that ends at the deadline is cut"
        );
        assert_eq!(
            schedule(Duration::MAX, deadline, None, now),
            Ok(Scheduled::Cut(now + MS(1000)))
        );
        assert_eq!(
            schedule(Duration::ZERO, Some(now), None, now),
            Ok(Scheduled::After(Duration::ZERO)),
            "a zero wait is not cut"
        );
        assert_eq!(
            schedule(MS(600), deadline, Some(MS(500)), now),
            Err(Stop::WouldMissDeadline)
        );
        assert_eq!(
            schedule(MS(500), deadline, Some(MS(500)), now),
            Ok(Scheduled::After(MS(500))),
            "a wait and an attempt that just fit are made"
        );
        assert_eq!(capped(Duration::MAX, MS(5)), MS(5));
        let call = RequestDeadline::after_from(now, MS(1000));
        assert!(may_start(now, None, Duration::MAX));
        assert!(may_start(now, Some(call), MS(1000)), "just fits");
        assert!(!may_start(now, Some(call), MS(1001)));
        assert!(
            !may_start(now + MS(1000), Some(call), Duration::ZERO),
            "at the deadline"
        );
        assert_eq!(capped(MS(1), MS(5)), MS(1));
    }
}
