//! The rule every writer of a budget follows: the combined service's and
//! the propagation layer's.

use super::TimeoutFormat;
use crate::RequestDeadline;
use http::HeaderName;
use std::time::Duration;
use tokio::time::Instant;

/// The time left at `now` before `deadline`, as [`send_budget`] writes it:
/// `None` for a deadline made from a budget of `Duration::MAX`, which is no
/// limit.
pub(crate) fn time_left(deadline: RequestDeadline, now: Instant) -> Option<Duration> {
    (deadline.budget() != Duration::MAX).then(|| deadline.remaining_at(now))
}

/// The deadline of an attempt has already passed: [`send_budget`] wrote
/// nothing, and the attempt must not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetSpent;

/// Writes in `header` the smaller of the time `left` before the deadline and
/// the attempt `limit`, replacing any value there; with neither, leaves the
/// header as it is.
///
/// The rule of every writer of a budget (this module's layer and the combined
/// stack of [`ResiliencePolicy::propagating`](crate::ResiliencePolicy::propagating)): a
/// budget left is written rounded up to at least the format's smallest unit
/// ([`TimeoutFormat::format`]); a deadline already passed (`left` of zero) is not
/// written, and the caller ends the attempt with the deadline's error instead
/// of sending it. A limit of `Duration::MAX` is no limit (a policy that has
/// none, as a gRPC service config's method without a timeout): none is
/// written for it, rather than a distant stand-in the upstream would take at
/// its word; [`time_left`] gives `None` for such a deadline.
///
/// # Errors
///
/// [`BudgetSpent`] when `left` is zero; the request is then left as it is.
pub(crate) fn send_budget<B>(
    request: &mut http::Request<B>,
    header: &HeaderName,
    format: TimeoutFormat,
    left: Option<Duration>,
    limit: Option<Duration>,
) -> Result<(), BudgetSpent> {
    if left.is_some_and(|left| left.is_zero()) {
        return Err(BudgetSpent);
    }
    let limit = limit.filter(|limit| *limit != Duration::MAX);
    let budget = match (left, limit) {
        (Some(left), Some(limit)) => Some(left.min(limit)),
        (left, limit) => left.or(limit),
    };
    if let Some(budget) = budget {
        // NOTE: a zero attempt limit (with a deadline still ahead, or none)
        // is written as the smallest unit: the attempt is still sent, as an
        // `AttemptTimeout` of zero sends it.
        let value = format.format(budget);
        // NOTE: `insert` would panic on a header map already at its largest
        // size; such a request goes on without the budget.
        if request.headers_mut().try_insert(header, value).is_err() {
            tracing::debug!(header = %header, "the header map is full: budget not sent");
        }
    }
    Ok(())
}
