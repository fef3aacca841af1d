//! Time helpers: the horizon that stands for "never", and the one timer rule
//! every form follows: a timer is made only when a call must wait, and moved
//! (never made again) when the next instant it must fire changes
//! ([`poll_moved`]). `Deadline`, its body and `AttemptTimeout` keep theirs
//! boxed ([`poll_until`]), as hedging does for its next copy; the combined
//! service keeps one inline ([`poll_timer`]).

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};

/// About thirty years: the horizon that stands for "never" where a duration
/// does not fit an `Instant`, as tokio's own `Instant::far_future`.
pub(crate) const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `now + duration`, clamped to [`FAR_FUTURE`] ahead when the sum does not fit
/// an `Instant` (`Duration::MAX`, say): no call outlives that horizon.
pub(crate) fn saturating_after(now: Instant, duration: Duration) -> Instant {
    // NOTE: `now` is a reading of the monotonic clock, which counts from about
    // boot; thirty years more fit an `Instant` on every platform (tokio adds
    // the same to `Instant::now()` for every `timeout` too long to represent).
    now.checked_add(duration)
        .unwrap_or_else(|| now + FAR_FUTURE)
}

/// A timer made at the first wait, boxed so that it can be handed on (from
/// the call's future to the response body) and does not grow the future.
pub(crate) type LazySleep = Option<Pin<Box<Sleep>>>;

/// Polls the timer in `slot`, first making it, due at `at`, if there is
/// none yet. A call answered at once never gets here, so it never touches
/// the timer.
pub(crate) fn poll_until(slot: &mut LazySleep, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
    let timer = slot.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
    poll_moved(timer.as_mut(), at, cx)
}

/// Polls the inline timer in `sleep`, due at `at`: made on first use, and
/// moved (not made again) when it is due at another instant.
pub(crate) fn poll_timer(
    mut sleep: Pin<&mut Option<Sleep>>,
    at: Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    match sleep.as_mut().as_pin_mut() {
        Some(timer) => return poll_moved(timer, at, cx),
        None => sleep.set(Some(tokio::time::sleep_until(at))),
    }
    sleep
        .as_pin_mut()
        .expect("the timer was made above")
        .poll(cx)
}

/// Whether `timer`, if there is one, was due at `deadline` and has fired:
/// the one tie rule of every form. Once the deadline's own timer has fired,
/// the deadline ends the call, whatever else is ready in the same poll
/// (layers inside may have timers due at the same instant: an attempt limit
/// capped by the deadline, a wait cut by it; an outcome they gave would not
/// be the deadline's).
#[inline(always)]
pub(crate) fn deadline_fired(timer: Option<&Sleep>, deadline: Instant) -> bool {
    timer.is_some_and(|timer| timer.deadline() == deadline && timer.is_elapsed())
}

/// Polls `timer`, first moving it to `at` if it is due at another instant.
pub(crate) fn poll_moved(
    mut timer: Pin<&mut Sleep>,
    at: Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    if timer.deadline() != at {
        timer.as_mut().reset(at);
    }
    timer.poll(cx)
}
