//! The marker of a retry's last attempt.

/// Marks the last attempt a [`StatusRetry`](crate::retry::StatusRetry) can
/// make (its retryer allows no more), in that attempt's request extensions.
///
/// [`AttemptTimeout`](crate::attempt_timeout::AttemptTimeout) with
/// [`final_attempt_uses_deadline`](crate::AttemptTimeoutLayer::final_attempt_uses_deadline)
/// lets such an attempt run until the deadline instead of its own limit: with
/// no retry left, cutting it short only turns a slow success into a failure
/// (linkerd drops its per-try timeout on the final attempt for this reason).
///
/// The marker speaks for the request it is on. `StatusRetry` removes one that
/// a request brings (copied with the extensions of another request, say)
/// before its first attempt, and marks only the attempts it knows to be its
/// last. Without a retry layer, a marker stretches an attempt to the deadline
/// in the same request and no further: the attempt timeout still enforces
/// that deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FinalAttempt;
