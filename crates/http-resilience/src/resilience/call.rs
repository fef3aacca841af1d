//! What one call of the combined service keeps besides the attempt in
//! flight and the timer, and the steps its future takes.

use crate::{
    body::TryCloneBody,
    deadline::{body::DeadlineBody, error::DeadlineExceeded},
    guard::{Ask, Guard, Settle},
    limits::{self, Expiry},
    policy::{Decoder, Retryer},
    propagate::{send_budget, time_left, TimeoutFormat},
    retry::{Decision, Kept, RetryState},
    telemetry,
    timer::{deadline_fired, poll_timer, saturating_after},
    BoxError, RequestDeadline,
};
use http::HeaderName;
use pin_project_lite::pin_project;
use std::{
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

pin_project! {
    #[project = StateProj]
    pub(super) enum State<F, B, O> {
        // An attempt is in flight until its end, its limit or the deadline:
        // `at` is its start until it first waits, and from then its end
        // (`ended` says which), so that an attempt answered at once
        // never works its end out.
        Called {
            #[pin]
            future: F,
            at: Instant,
            ended: bool,
        },
        // Waiting until `until` before the next attempt, with the outcome
        // that asked for it, returned if the body is lost meanwhile (boxed:
        // a wait is a slow path); a wait that reaches the deadline ends the
        // call there.
        Waiting {
            until: Instant,
            outcome: Option<Kept<O>>,
        },
        // Waiting for the inner service to be ready for the next attempt.
        Readying,
        // An attempt waits for the guard to let it through, with its
        // request. (Boxed, so that the state stays small.)
        Queued {
            request: Option<Box<http::Request<B>>>,
        },
        // The guard kept an attempt from the upstream: it was never sent;
        // its outcome is the guard's refusal or answer. (Boxed, as the
        // caller gets it, so that the state stays small.)
        Refused {
            error: Option<BoxError>,
        },
        // The deadline had passed before the attempt could be sent.
        Expired,
        // The output has been returned.
        Done,
    }
}

/// What the caller gets.
pub(super) type Output<T> = Result<http::Response<DeadlineBody<T>>, BoxError>;

/// An attempt's outcome, as the retry judges it.
pub(super) type Outcome<T> = Result<http::Response<T>, BoxError>;

/// What a step of the call came to.
pub(super) enum Step<T> {
    /// An attempt's outcome, for the retry to judge.
    Judge(Outcome<T>),
    /// The call is over, with this output.
    End(Output<T>),
    /// The next step is set: poll again.
    Again,
}

/// What the call keeps besides the attempt in flight and the timer.
pub(super) struct Call<S, B, D, R, G: Guard> {
    // The service that sends every attempt: the one made ready for the
    // call, then readied again before each later attempt.
    service: S,
    retry: RetryState<B, D, R>,
    deadline: RequestDeadline,
    limits: Arc<Limits>,
    // The call's pass through the guard.
    pass: G::Pass,
}

/// The time limits of a call: its budget, the limit of every attempt, and
/// whether the last one runs until the deadline instead. Shared by the layer,
/// its services and their calls behind one `Arc`, so that neither a service
/// nor a call's future carries them by value.
#[derive(Debug)]
pub(crate) struct Limits {
    /// The budget of every call: its deadline is this long after it starts
    /// (or the caller's own, when that is earlier).
    pub(crate) deadline: Duration,
    /// The limit of every attempt.
    pub(crate) attempt: Duration,
    pub(crate) final_uses_deadline: bool,
    /// The header and format every attempt's budget is sent in, if it is.
    pub(crate) budget_header: Option<(HeaderName, TimeoutFormat)>,
}

impl Limits {
    /// Whether an attempt runs until the call's `deadline`, rather than its
    /// limit ([`limits::runs_to_deadline`]).
    const fn runs_to_deadline(&self, on_final: bool, deadline: RequestDeadline) -> bool {
        limits::runs_to_deadline(self.final_uses_deadline, on_final, Some(deadline))
    }
}

// ===== impl Call =====

impl<S, B, D, R, G: Guard> Call<S, B, D, R, G> {
    /// What a call keeps: the service made ready for it, the retry's state,
    /// the deadline and limits, and its pass through the guard.
    #[inline(always)]
    pub(super) fn new(
        service: S,
        retry: RetryState<B, D, R>,
        deadline: RequestDeadline,
        limits: Arc<Limits>,
        pass: G::Pass,
    ) -> Self {
        Self {
            service,
            retry,
            deadline,
            limits,
            pass,
        }
    }

    /// The attempts made so far.
    pub(super) const fn attempts(&self) -> u32 {
        self.retry.attempts()
    }

    /// The call's deadline.
    pub(super) const fn deadline(&self) -> RequestDeadline {
        self.deadline
    }

    /// The error of a call its deadline ended.
    pub(super) fn exceeded(&self) -> BoxError {
        DeadlineExceeded::new(self.deadline.budget()).into()
    }

    /// Ends the call with `output`: what the guard still holds goes back
    /// now, not when the future is dropped (a finished future may be
    /// kept), the retry hears the end, and the call's `span` records it.
    pub(super) fn end<T>(&mut self, output: &Output<T>, span: Option<&tracing::Span>) {
        G::release(&mut self.pass);
        self.retry.finish(output);
        self.retry.record_end_on(span);
    }

    /// Writes the attempt's budget in `request`, if it is sent: the time
    /// left at `now`, capped by the attempt's limit. `Err` when none is
    /// left to write.
    #[inline(always)]
    fn stamp_budget(&self, request: &mut http::Request<B>, now: Instant) -> Result<(), ()> {
        let Some(header) = &self.limits.budget_header else {
            return Ok(());
        };
        let left = time_left(self.deadline, now);
        let on_final = self.retry.on_final_attempt();
        let stretched = self.limits.runs_to_deadline(on_final, self.deadline);
        let limit = (!stretched).then_some(self.limits.attempt);
        send_budget(request, &header.0, header.1, left, limit).map_err(|_| ())
    }
}

impl<S, B, D, R, G> Call<S, B, D, R, G>
where
    S: Service<http::Request<B>>,
    B: TryCloneBody,
    G: Guard,
{
    /// Passes `request`, the next attempt (the first included), through the
    /// guard at `now`: the state it is sent in, waits in, or was turned
    /// away in. `ready` is the service made ready for the call's first
    /// attempt, which sends it; a later attempt goes on the call's own
    /// service, made ready before it.
    ///
    /// NOTE: the attempt is numbered before it asks, so that one turned away
    /// counts as an attempt, as under a guard's layer between the three
    /// layers' retry and attempt timeout.
    #[inline(always)]
    pub(super) fn admit<O>(
        &mut self,
        request: http::Request<B>,
        now: Instant,
        ready: Option<&mut S>,
    ) -> State<S::Future, B, O> {
        match G::admit(
            &mut self.pass,
            &mut Ask::new(Some(self.deadline), Some(now)),
        ) {
            Poll::Ready(Ok(())) => self.send(request, now, ready),
            Poll::Ready(Err(error)) => State::Refused { error: Some(error) },
            Poll::Pending => {
                // NOTE: an attempt that waits is sent by the call's own
                // service: the ready one goes with the call, and the clone
                // stays, to be made ready for the next call.
                if let Some(ready) = ready {
                    std::mem::swap(&mut self.service, ready);
                }
                State::Queued {
                    request: Some(Box::new(request)),
                }
            }
        }
    }

    /// Sends `request`, which the guard let through, at `now`, with its
    /// budget written, on `ready` if given, else on the call's own service.
    #[inline(always)]
    fn send<O>(
        &mut self,
        mut request: http::Request<B>,
        now: Instant,
        ready: Option<&mut S>,
    ) -> State<S::Future, B, O> {
        if self.stamp_budget(&mut request, now).is_err() {
            return State::Expired;
        }
        let service = ready.unwrap_or(&mut self.service);
        let entered = telemetry::enter(self.retry.attempt_span());
        let future = service.call(request);
        drop(entered);
        State::Called {
            future,
            at: now,
            ended: false,
        }
    }
}

impl<S, B, T, D, R, G> Call<S, B, D, R, G>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    B: TryCloneBody,
    D: Decoder<T, BoxError>,
    R: Retryer,
    G: Settle<T>,
{
    /// Polls the attempt in flight against its end: its outcome, the
    /// attempt timeout, or the deadline, which ends the call.
    #[inline(always)]
    pub(super) fn poll_attempt(
        &mut self,
        future: Pin<&mut S::Future>,
        at: &mut Instant,
        ended: &mut bool,
        sleep: Pin<&mut Option<Sleep>>,
        cx: &mut Context<'_>,
    ) -> Poll<Step<T>> {
        if deadline_fired(sleep.as_ref().get_ref().as_ref(), self.deadline.instant()) {
            return Poll::Ready(Step::End(Err(self.exceeded())));
        }
        // NOTE: the response is polled first, so a response ready in the
        // same poll as an attempt's limit counts.
        let polled = telemetry::poll_in(self.retry.attempt_span(), future, cx);
        if let Poll::Ready(outcome) = polled {
            return Poll::Ready(Step::Judge(outcome.map_err(Into::into)));
        }
        if !*ended {
            let on_final = self.retry.on_final_attempt();
            let to_deadline = self.limits.runs_to_deadline(on_final, self.deadline);
            let end =
                limits::attempt_end(*at, self.limits.attempt, Some(self.deadline), to_deadline);
            let Ok((end, _)) = end else {
                return Poll::Ready(Step::End(Err(self.exceeded())));
            };
            (*at, *ended) = (end, true);
        }
        ready!(poll_timer(sleep, *at, cx));
        // NOTE: an attempt the deadline ends has the deadline itself as its
        // end (`limits::attempt_end`), so the instant says which limit it was.
        Poll::Ready(
            match limits::expiry_at(*at, self.limits.attempt, self.deadline) {
                Expiry::Deadline(_) => Step::End(Err(self.exceeded())),
                ends @ Expiry::Attempt(_) => Step::Judge(Err(ends.into_error())),
            },
        )
    }

    /// The step after a wait that ended at `until`, with the outcome `kept`
    /// through it: the deadline ends the call when the wait reached it, the
    /// outcome does when the body was lost meanwhile, else the service is
    /// readied.
    pub(super) fn after_wait(
        &mut self,
        until: Instant,
        kept: Option<Kept<Outcome<T>>>,
        mut state: Pin<&mut State<S::Future, B, Outcome<T>>>,
    ) -> Step<T> {
        if until >= self.deadline.instant() {
            return Step::End(Err(self.exceeded()));
        }
        if let Some(outcome) = kept.and_then(|kept| self.retry.after_wait(kept.into_inner())) {
            return Step::End(outcome.map(|r| with_deadline(r, self.deadline)));
        }
        state.set(State::Readying);
        Step::Again
    }

    /// Readies the service and passes the next attempt through the guard,
    /// within the deadline.
    #[inline(always)]
    pub(super) fn poll_send(
        &mut self,
        mut state: Pin<&mut State<S::Future, B, Outcome<T>>>,
        sleep: Pin<&mut Option<Sleep>>,
        cx: &mut Context<'_>,
    ) -> Poll<Step<T>> {
        let deadline = self.deadline;
        if deadline_fired(sleep.as_ref().get_ref().as_ref(), deadline.instant()) {
            return Poll::Ready(Step::End(Err(self.exceeded())));
        }
        let Poll::Ready(ready) = self.service.poll_ready(cx) else {
            // NOTE: a service that never gets ready is still bounded by the
            // deadline.
            ready!(poll_timer(sleep, deadline.instant(), cx));
            return Poll::Ready(Step::End(Err(self.exceeded())));
        };
        if let Err(error) = ready {
            let outcome = self.retry.not_ready(error.into());
            return Poll::Ready(Step::End(outcome.map(|r| with_deadline(r, deadline))));
        }
        let now = Instant::now();
        if deadline.has_passed_at(now) {
            return Poll::Ready(Step::End(Err(self.exceeded())));
        }
        let request = self.retry.next_request();
        state.set(self.admit(request, now, None));
        Poll::Ready(Step::Again)
    }

    /// Waits for the guard to let the parked attempt through, within the
    /// deadline: `None` once it may go, else the step the call takes
    /// instead.
    #[inline(always)]
    pub(super) fn poll_queued(
        &mut self,
        sleep: Pin<&mut Option<Sleep>>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Step<T>>> {
        let deadline = self.deadline;
        if deadline_fired(sleep.as_ref().get_ref().as_ref(), deadline.instant())
            || deadline.has_passed_at(Instant::now())
        {
            return Poll::Ready(Some(Step::End(Err(self.exceeded()))));
        }
        match G::poll_admit(&mut self.pass, Some(deadline), cx) {
            Poll::Ready(Ok(())) => Poll::Ready(None),
            // NOTE: kept back at the end of its wait, whose timer spent
            // the task's budget already.
            Poll::Ready(Err(kept)) => Poll::Ready(Some(Step::Judge(self.kept(kept)))),
            Poll::Pending => {
                // NOTE: the wait for the guard is bounded by the deadline too.
                ready!(poll_timer(sleep, deadline.instant(), cx));
                Poll::Ready(Some(Step::End(Err(self.exceeded()))))
            }
        }
    }

    /// The outcome of an attempt the guard kept from the upstream with
    /// `kept`: its refusal, or the answer the guard gives in the upstream's
    /// place ([`Settle::answer`]).
    #[inline(always)]
    pub(super) fn kept(&mut self, kept: BoxError) -> Outcome<T> {
        G::answer(&mut self.pass, kept)
    }

    /// Sends `request`, which waited for the guard and may go now.
    pub(super) fn send_parked(
        &mut self,
        request: http::Request<B>,
        mut state: Pin<&mut State<S::Future, B, Outcome<T>>>,
    ) -> Step<T> {
        state.set(self.send(request, Instant::now(), None));
        Step::Again
    }

    /// Judges an attempt's outcome: sets the next step, or gives the call's
    /// output.
    #[inline(always)]
    pub(super) fn judge(
        &mut self,
        mut outcome: Outcome<T>,
        mut state: Pin<&mut State<S::Future, B, Outcome<T>>>,
    ) -> Option<Output<T>> {
        let deadline = self.deadline;
        G::settle(&mut self.pass, &outcome);
        let next = match self.retry.decide(&mut outcome, Some(deadline)) {
            Decision::Return => return Some(outcome.map(|r| with_deadline(r, deadline))),
            Decision::Retry(wait) if wait.is_zero() => State::Readying,
            Decision::Retry(wait) => State::Waiting {
                until: saturating_after(Instant::now(), wait),
                outcome: Some(Kept::new(outcome)),
            },
            // NOTE: the wait reaches the deadline, which ends the call
            // there; the outcome in hand is dropped now rather than held.
            Decision::Cut(until) => State::Waiting {
                until,
                outcome: None,
            },
        };
        // NOTE: a discarded outcome not kept through a wait (and its unread
        // body) is dropped before the next attempt.
        state.set(next);
        None
    }
}

/// `response` with its body bounded by the call's `deadline`.
fn with_deadline<T>(
    response: http::Response<T>,
    deadline: RequestDeadline,
) -> http::Response<DeadlineBody<T>> {
    response.map(|body| DeadlineBody::new(body, deadline))
}
