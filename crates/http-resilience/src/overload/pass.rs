//! A call's way through overload control: a slot at once, a wait in the
//! queue within its deadline, or a rejection; and the slot given back with
//! what the call's outcome says of the upstream's load. Both stack forms
//! (its [`GuardLayer<OverloadPolicy>`](crate::guard::GuardLayer) and the combined service)
//! drive this one type.

use super::{
    error::{Overloaded, Rejection},
    policy::Shared,
    slots::{Entry, Learns, Signal, Slots, Waiter},
    OverloadPolicy,
};
use crate::{
    deadline::error::DeadlineExceeded,
    errors::AsError,
    guard::Ask,
    key::{self, AtHand, Keyed},
    policy::grpc_status_of,
    BoxError, FailureKind, RequestDeadline,
};
use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};

/// One call's pass through the slots of its key.
pub(crate) struct OverloadPass {
    shared: Arc<Shared>,
    slots: Arc<Slots>,
    step: Step,
}

enum Step {
    /// No slot held, none asked for.
    Idle,
    /// Waiting in the queue until `end`, if bounded.
    Queued {
        waiter: Arc<Waiter>,
        end: Option<WaitEnd>,
        sleep: Option<Pin<Box<Sleep>>>,
    },
    /// Holding a slot since `at`, given with `in_flight` calls in flight;
    /// what its release `learns` from the outcome.
    Admitted {
        at: Instant,
        in_flight: u32,
        learns: Learns,
    },
}

/// When a wait for a slot ends, and how.
#[derive(Debug, Clone, Copy)]
struct WaitEnd {
    at: Instant,
    /// The call's deadline's budget when the wait ends at the deadline
    /// itself: the call then ends as its deadline ends it.
    deadline: Option<Duration>,
}

impl std::fmt::Debug for OverloadPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let step = match self.step {
            Step::Idle => "idle",
            Step::Queued { .. } => "queued",
            Step::Admitted { .. } => "admitted",
        };
        f.debug_struct("OverloadPass")
            .field("key", self.key())
            .field("step", &step)
            .finish()
    }
}

/// The gRPC code a server sheds load with.
const RESOURCE_EXHAUSTED: i32 = 8;

// ===== impl OverloadPass =====

impl OverloadPass {
    /// The pass of a call whose first attempt is `request`, through the
    /// slots of its key (the one `at_hand` keeps, when it is).
    pub(crate) fn new<B>(
        policy: &OverloadPolicy,
        at_hand: &mut AtHand<Slots>,
        request: &http::Request<B>,
    ) -> Self {
        let shared = &policy.shared;
        let lookup = key::Lookup {
            registry: &shared.registry,
            key_fn: shared.key_fn.as_deref(),
            room: shared.room(),
            now: || shared.nanos(Instant::now()),
            make: |key, now| shared.make(key, now),
        };
        Self {
            slots: key::entry_for(lookup, at_hand, request),
            shared: Arc::clone(shared),
            step: Step::Idle,
        }
    }

    /// Asks for a slot for the next attempt, under the call's deadline, at
    /// the instant `ask` gives: `Ready(Ok)` with one, `Pending` with a place
    /// in the queue, `Ready(Err)` turned away.
    pub(crate) fn try_admit(&mut self, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        debug_assert!(matches!(self.step, Step::Idle), "a slot asked for twice");
        let (deadline, now) = (ask.deadline(), ask.now());
        // NOTE: when the wait would end is worked out only for a call that
        // finds no free slot.
        let mut end = None;
        let room = || {
            end = self.wait_end(now, deadline);
            end.map(|end| end.at.saturating_duration_since(now))
        };
        let entry = self.slots.enter(
            self.shared.settings.max_queued,
            &self.shared.listener,
            now,
            room,
        );
        match entry {
            Entry::Admitted { in_flight, learns } => {
                self.step = Step::Admitted {
                    at: now,
                    in_flight,
                    learns,
                };
                Poll::Ready(Ok(()))
            }
            Entry::Queued(waiter) => {
                self.step = Step::Queued {
                    waiter,
                    end,
                    sleep: None,
                };
                Poll::Pending
            }
            Entry::Rejected(reason) => Poll::Ready(Err(self.rejection(reason))),
        }
    }

    /// Polls for a slot: asks for one first if none is asked for yet, then
    /// waits in the queue until one is handed over or the wait ends.
    pub(crate) fn poll_admit(
        &mut self,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        if let Step::Idle = self.step {
            if let Poll::Ready(asked) = self.try_admit(&mut Ask::new(deadline, None)) {
                return Poll::Ready(asked);
            }
        }
        let Step::Queued { waiter, end, sleep } = &mut self.step else {
            return Poll::Ready(Ok(()));
        };
        if waiter.poll_set(cx.waker()) {
            self.admitted();
            return Poll::Ready(Ok(()));
        }
        let Some(end) = *end else {
            return Poll::Pending;
        };
        let sleep = sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(end.at)));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        Poll::Ready(Err(self.give_up(end)))
    }

    /// Gives the slot back with what `outcome` says of the upstream's load;
    /// the pass may ask for a slot again, for the next attempt.
    pub(crate) fn settle<T, E: AsError>(&mut self, outcome: &Result<http::Response<T>, E>) {
        if let Step::Admitted {
            at,
            in_flight,
            learns,
        } = self.step
        {
            self.step = Step::Idle;
            // NOTE: an outcome nothing learns from is not read, nor the clock.
            let learnt = (learns.anything()).then(|| (signal_of(outcome, at), Instant::now()));
            (self.slots).leave(&self.shared.listener, learnt, learns.wait, in_flight);
        }
    }

    /// Gives back the place in the queue or the slot the call holds, if
    /// any, counting for nothing: the call was dropped, or ended before its
    /// attempt's outcome was judged.
    pub(crate) fn release(&mut self) {
        match std::mem::replace(&mut self.step, Step::Idle) {
            Step::Idle => {}
            Step::Queued { waiter, .. } => {
                self.slots.cancel(&waiter);
            }
            Step::Admitted { in_flight, .. } => {
                (self.slots).leave(&self.shared.listener, None, false, in_flight);
            }
        }
    }

    /// The key of the call.
    pub(crate) fn key(&self) -> &crate::key::UpstreamKey {
        Keyed::key(&*self.slots)
    }

    /// When a wait for a slot that starts at `now` ends: at `min_attempt`
    /// before the deadline or after `max_wait`, whichever comes first; at
    /// the deadline itself when it comes first with no `min_attempt`.
    fn wait_end(&self, now: Instant, deadline: Option<RequestDeadline>) -> Option<WaitEnd> {
        let settings = &self.shared.settings;
        let by_deadline = deadline.map(|d| WaitEnd {
            at: d.instant().checked_sub(settings.min_attempt).unwrap_or(now),
            deadline: settings.min_attempt.is_zero().then(|| d.budget()),
        });
        let by_wait = settings.max_wait.map(|wait| WaitEnd {
            at: crate::timer::saturating_after(now, wait),
            deadline: None,
        });
        match (by_deadline, by_wait) {
            (Some(a), Some(b)) if b.at < a.at => Some(b),
            (Some(a), _) => Some(a),
            (None, b) => b,
        }
    }

    /// A queued call's slot was handed over.
    fn admitted(&mut self) {
        // NOTE: the slot was counted in flight when it was handed over; the
        // count the call is admitted with is read now. A call that waited
        // got its slot with every slot taken: its release learns from it.
        let at = Instant::now();
        let (_, in_flight, _, _) = self.slots.read(at);
        self.step = Step::Admitted {
            at,
            in_flight,
            learns: Learns::FROM_QUEUE,
        };
    }

    /// Leaves the queue at the end of the wait, with the error the call
    /// ends with.
    fn give_up(&mut self, end: WaitEnd) -> BoxError {
        let Step::Queued { waiter, .. } = std::mem::replace(&mut self.step, Step::Idle) else {
            unreachable!("gives up only while queued");
        };
        self.slots.cancel(&waiter);
        match end.deadline {
            Some(budget) => DeadlineExceeded::new(budget).into(),
            None => self.rejection(Rejection::WaitTooLong),
        }
    }

    fn rejection(&self, reason: Rejection) -> BoxError {
        Overloaded::new(self.key().clone(), reason).into()
    }
}

impl Drop for OverloadPass {
    fn drop(&mut self) {
        // NOTE: a pass whose last outcome was heard holds nothing, as most
        // do when dropped: only one that holds something gives it back.
        if !matches!(self.step, Step::Idle) {
            self.release();
        }
    }
}

/// What an attempt's outcome, for the slot given at `at`, says of the
/// upstream's load.
fn signal_of<T, E: AsError>(outcome: &Result<http::Response<T>, E>, at: Instant) -> Signal {
    match outcome {
        Ok(response) => {
            let status = response.status().as_u16();
            let shed = grpc_status_of(response.headers()) == Some(RESOURCE_EXHAUSTED);
            if status == 429 || status == 503 || shed {
                Signal::Overload
            } else {
                Signal::Accepted(at)
            }
        }
        Err(err) => match FailureKind::of(err) {
            FailureKind::AttemptTimeout | FailureKind::ReadTimeout => Signal::Overload,
            FailureKind::Deadline
            | FailureKind::CircuitOpen
            | FailureKind::Overloaded
            | FailureKind::RateLimited => Signal::Nothing,
            _ => Signal::Failed,
        },
    }
}
