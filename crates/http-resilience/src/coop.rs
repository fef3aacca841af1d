//! What a call turned away spends: a unit of the task's cooperative budget.
//!
//! A call that the circuit breaker or overload control turns away completes
//! at its first poll, with no I/O and no timer that would spend tokio's
//! budget. A caller that calls again at once on that error would never
//! yield: on a current-thread runtime nothing else would run again (the
//! client's connection tasks, the calls that were admitted), however many
//! tasks spin. Every form's rejection goes through [`poll_turned_away`], so
//! such a loop yields once its budget is spent, as a loop over a socket
//! does.

use std::task::{ready, Context, Poll};

/// The error of a call turned away, taken from `error` once the task has
/// budget left; `Pending` (the task woken to run again after others) when it
/// has none. Outside a tokio runtime, or in a task tokio does not constrain,
/// the error comes at once.
///
/// # Panics
///
/// When `error` was taken already (the future polled after completion).
pub(crate) fn poll_turned_away<E>(error: &mut Option<E>, cx: &mut Context<'_>) -> Poll<E> {
    let budget = ready!(tokio::task::coop::poll_proceed(cx));
    budget.made_progress();
    Poll::Ready(error.take().expect("a future polled after completion"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_task_out_of_budget_yields_before_the_error() {
        let first_pending = std::future::poll_fn(|cx| {
            let pending = (0..1_000).find(|&n| poll_turned_away(&mut Some(n), cx).is_pending());
            Poll::Ready(pending)
        })
        .await;
        // NOTE: tokio's budget is 128 units per poll of a task.
        assert!(matches!(first_pending, Some(1..=128)), "{first_pending:?}");
    }

    #[test]
    fn outside_a_runtime_the_error_comes_at_once() {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for n in 0..1_000 {
            assert_eq!(poll_turned_away(&mut Some(n), &mut cx), Poll::Ready(n));
        }
    }
}
