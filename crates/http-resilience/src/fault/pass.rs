//! A call's way through fault injection: each attempt counted and drawn
//! for, made to wait, answered, or failed as the transport would. Every
//! form (its [`GuardLayer`](crate::guard::GuardLayer), the combined
//! service, hedging) drives this one type.

use super::{
    inject::{Act, Template},
    policy::{Entry, Shared},
    trigger::draws,
    FaultKind, FaultPolicy, InjectedFault,
};
use crate::{
    body::AnswerBody,
    deadline::error::DeadlineExceeded,
    guard::Ask,
    key::{self, AtHand},
    BoxError, RequestDeadline,
};
use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{atomic::Ordering, Arc},
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};

/// One call's pass: `None` when the switch was off as the call began.
///
/// NOTE: boxed, so that a pass that is off is one word: the futures that
/// carry it stay the size they have without the guard, and moving them costs
/// no more.
pub(crate) struct FaultPass(Option<Box<On>>);

struct On {
    shared: Arc<Shared>,
    entry: Arc<Entry>,
    step: Step,
}

enum Step {
    /// Nothing pending.
    Idle,
    /// The fault's wait, until `at`, then `act`.
    Waiting {
        sleep: Pin<Box<Sleep>>,
        act: Act,
        /// The call's deadline's budget, when the wait ends at the deadline
        /// itself (the call then ends as its deadline ends it).
        deadline: Option<Duration>,
    },
    /// The attempt is kept from the upstream: the fault answers it.
    Answering(Act),
}

/// What a kept attempt is kept with, when the fault answers with a
/// response: the answer replaces it, and no one sees it.
#[derive(Debug)]
struct KeptForAnswer;

impl fmt::Display for KeptForAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("answered by fault injection")
    }
}

impl std::error::Error for KeptForAnswer {}

impl fmt::Debug for FaultPass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(on) = &self.0 else {
            return f.debug_tuple("FaultPass").field(&"off").finish();
        };
        let step = match on.step {
            Step::Idle => "idle",
            Step::Waiting { .. } => "waiting",
            Step::Answering(_) => "answering",
        };
        f.debug_struct("FaultPass")
            .field("key", key::Keyed::key(&*on.entry))
            .field("step", &step)
            .finish()
    }
}

// ===== impl FaultPass =====

impl FaultPass {
    /// The pass of a call whose first attempt is `request`: off, at the
    /// cost of one atomic load, while the switch is off.
    #[inline(always)]
    pub(super) fn new<B>(
        policy: &FaultPolicy,
        at_hand: &mut AtHand<Entry>,
        request: &http::Request<B>,
    ) -> Self {
        if !policy.switch.is_on() {
            return Self(None);
        }
        let shared = &policy.shared;
        let lookup = key::Lookup {
            registry: &shared.registry,
            key_fn: shared.key_fn.as_deref(),
            room: shared.room(),
            now: || shared.nanos(Instant::now()),
            make: |key, now| shared.make(key, now),
        };
        Self(Some(Box::new(On {
            entry: key::entry_for(lookup, at_hand, request),
            shared: Arc::clone(shared),
            step: Step::Idle,
        })))
    }

    /// Counts the next attempt and draws for it, under the call's
    /// `deadline`: `Ready(Ok)` to send it untouched, `Pending` for the
    /// fault's wait, `Ready(Err)` when the fault keeps it from the upstream.
    #[inline(always)]
    pub(super) fn admit(&mut self, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        match &mut self.0 {
            None => Poll::Ready(Ok(())),
            Some(on) => on.admit(ask),
        }
    }

    /// Waits out the fault's wait, after [`admit`](Self::admit) said
    /// `Pending` (or counts the attempt first, if it did not ask yet).
    pub(super) fn poll_admit(
        &mut self,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        let Some(on) = &mut self.0 else {
            return Poll::Ready(Ok(()));
        };
        if let Step::Idle = on.step {
            if let Poll::Ready(admitted) = on.admit(&mut Ask::new(deadline, None)) {
                return Poll::Ready(admitted);
            }
        }
        on.poll_wait(cx)
    }

    /// Whether the attempt kept back last is the fault's answer.
    pub(super) fn answers(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|on| matches!(on.step, Step::Answering(_)))
    }

    /// The outcome of the attempt kept back with `kept`: the fault's
    /// answer, made as a `T`, or `kept` itself.
    pub(super) fn answer<T: AnswerBody>(
        &mut self,
        kept: BoxError,
    ) -> Result<http::Response<T>, BoxError> {
        let Some(on) = &mut self.0 else {
            return Err(kept);
        };
        match std::mem::replace(&mut on.step, Step::Idle) {
            Step::Answering(Act::Respond(template)) => Ok(template.whole()),
            Step::Answering(Act::Cut(template, after)) => Ok(on.cut(&template, after)),
            _ => Err(kept),
        }
    }

    /// Drops what is pending: the call ended, or its attempt was settled.
    pub(super) fn release(&mut self) {
        if let Some(on) = &mut self.0 {
            on.step = Step::Idle;
        }
    }
}

// ===== impl On =====

impl On {
    /// Counts the attempt, draws for it, and starts the fault when it is
    /// picked.
    fn admit(&mut self, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        debug_assert!(matches!(self.step, Step::Idle), "an attempt counted twice");
        let shared = &*self.shared;
        // NOTE: the switch is read again for every attempt, so that turning
        // it off spares the attempts of calls already under way.
        if !shared.switch.is_on() {
            return Poll::Ready(Ok(()));
        }
        let now = ask.now();
        let n = self.entry.count(shared.nanos(now));
        let (pick, wait) = draws(self.entry.seed, n);
        if !shared.trigger.fires(n, pick) {
            return Poll::Ready(Ok(()));
        }
        self.entry.injected.fetch_add(1, Ordering::Relaxed);
        let fault = &shared.fault;
        let key = key::Keyed::key(&*self.entry);
        tracing::debug!(key = %key, fault = %fault.kind(), attempt = n, "fault injected");
        let act = fault.act().clone();
        let Some(latency) = fault.delay() else {
            return self.act(act);
        };
        self.wait(now, latency.at(wait), ask.deadline(), act)
    }

    /// Starts the wait of `latency` from `now`, cut at the call's
    /// `deadline`, before `act`.
    fn wait(
        &mut self,
        now: Instant,
        latency: Duration,
        deadline: Option<RequestDeadline>,
        act: Act,
    ) -> Poll<Result<(), BoxError>> {
        let end = crate::timer::saturating_after(now, latency);
        let (end, budget) = match deadline {
            Some(deadline) if deadline.instant() <= end => {
                (deadline.instant(), Some(deadline.budget()))
            }
            _ => (end, None),
        };
        if end <= now && budget.is_none() {
            return self.act(act);
        }
        self.step = Step::Waiting {
            sleep: Box::pin(tokio::time::sleep_until(end)),
            act,
            deadline: budget,
        };
        Poll::Pending
    }

    /// Polls the fault's wait; at its end, the fault.
    fn poll_wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        let Step::Waiting { sleep, .. } = &mut self.step else {
            return Poll::Ready(Ok(()));
        };
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let Step::Waiting { act, deadline, .. } = std::mem::replace(&mut self.step, Step::Idle)
        else {
            unreachable!("matched above");
        };
        match deadline {
            Some(budget) => Poll::Ready(Err(DeadlineExceeded::new(budget).into())),
            None => self.act(act),
        }
    }

    /// What the fault does once its wait, if any, is over.
    fn act(&mut self, act: Act) -> Poll<Result<(), BoxError>> {
        let kept: BoxError = match &act {
            Act::Pass => return Poll::Ready(Ok(())),
            Act::Respond(_) | Act::Cut(..) => KeptForAnswer.into(),
            Act::Fail(kind) => self.failure(*kind).into(),
        };
        self.step = Step::Answering(act);
        Poll::Ready(Err(kept))
    }

    fn failure(&self, kind: FaultKind) -> InjectedFault {
        InjectedFault::new(kind, key::Keyed::key(&*self.entry).clone())
    }

    /// The answer of `template` with its body cut after `after` bytes.
    fn cut<T: AnswerBody>(&self, template: &Template, after: usize) -> http::Response<T> {
        template.cut(after, self.failure(FaultKind::CutBody).into())
    }
}
