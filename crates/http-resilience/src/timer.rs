//! The timer that `Deadline`, its body and `AttemptTimeout` make only when
//! they must wait.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};
use tokio::time::{Instant, Sleep};

/// A timer made at the first wait, boxed so that it can be handed on (from
/// the call's future to the response body) and does not grow the future.
pub(crate) type LazySleep = Option<Pin<Box<Sleep>>>;

/// Polls the timer in `slot`, first making it, due at `at`, if there is
/// none yet. A call answered at once never gets here, so it never touches
/// the timer.
pub(crate) fn poll_until(slot: &mut LazySleep, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
    slot.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)))
        .as_mut()
        .poll(cx)
}
