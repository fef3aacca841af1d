//! Future types

use crate::{
    body::TryCloneBody,
    breaker::{Gate, Judges, NoBreaker},
    coop,
    deadline::{body::DeadlineBody, error::DeadlineExceeded},
    limits::{self, Expiry},
    overload::{Admission, Admit, NoOverload},
    policy::{Decoder, Retryer},
    propagate::{send_budget, time_left, TimeoutFormat},
    retry::{Decision, RetryState},
    telemetry,
    timer::{poll_timer, saturating_after},
    BoxError, RequestDeadline,
};
use http::HeaderName;
use pin_project_lite::pin_project;
use std::sync::Arc;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

pin_project! {
    /// Response future of [`Resilience`](super::Resilience): the deadline, the
    /// retries and the limit of each attempt in one state machine, with one
    /// timer for the call.
    ///
    /// The timer is due at what ends the current step: an attempt's limit
    /// (never past the deadline), a wait before the next attempt, or the
    /// deadline. It is made at the first step that must wait, inline, and
    /// moved (not made again) for every later step.
    pub struct ResponseFuture<S, B, D, R, G = NoBreaker, O = NoOverload>
    where
        S: Service<http::Request<B>>,
        G: Gate,
        O: Admit,
    {
        #[pin]
        state: State<S::Future, B>,
        #[pin]
        sleep: Option<Sleep>,
        call: Call<S, B, D, R, G, O>,
        span: Option<Box<tracing::Span>>,
    }
}

/// What the call keeps besides the attempt in flight and the timer.
pub(super) struct Call<S, B, D, R, G: Gate, O: Admit> {
    // The clone that makes every attempt after the first.
    service: S,
    pub(super) retry: RetryState<B, D, R>,
    deadline: RequestDeadline,
    limits: Limits,
    // The call's circuit, and the place of the attempt in flight.
    pub(super) pass: G::Pass,
    // The call's slots, and the slot of the attempt in flight.
    pub(super) slot: O::Pass,
}

/// The limit of every attempt, and whether the last one runs until the
/// deadline instead.
#[derive(Debug, Clone)]
pub(super) struct Limits {
    pub(super) attempt: Duration,
    pub(super) final_uses_deadline: bool,
    /// The header and format every attempt's budget is sent in, if it is.
    pub(super) budget_header: Option<Arc<(HeaderName, TimeoutFormat)>>,
}

impl Limits {
    /// Whether an attempt runs until the deadline, rather than its limit:
    /// the final one, when that is asked for.
    pub(super) const fn runs_to_deadline(&self, on_final: bool) -> bool {
        self.final_uses_deadline && on_final
    }

    /// The limit an attempt's budget is sent under: none for one that runs
    /// until the deadline.
    pub(super) const fn sent_limit(&self, on_final: bool) -> Option<Duration> {
        if self.runs_to_deadline(on_final) {
            None
        } else {
            Some(self.attempt)
        }
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B> {
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
        // Waiting until `until` before the next attempt; a wait that reaches
        // the deadline ends the call there.
        Waiting {
            until: Instant,
        },
        // Waiting for the inner service to be ready for the next attempt.
        Readying,
        // An attempt waits for a slot of its key, with its request. (Boxed,
        // so that the state stays small.)
        Queued {
            request: Option<Box<http::Request<B>>>,
        },
        // The circuit or overload control turned the attempt away: it was
        // never sent. Its error is judged once the task has cooperative
        // budget (`coop`), so that a caller spinning on it yields.
        // (Boxed, as the caller gets it, so that the state stays small.)
        Refused {
            error: Option<BoxError>,
        },
        // The deadline had passed before the call: the inner service was not
        // called.
        Expired,
        // The output has been returned.
        Done,
    }
}

/// What the caller gets.
type Output<T> = Result<http::Response<DeadlineBody<T>>, BoxError>;

/// An attempt's outcome, as the retry judges it.
type Outcome<T> = Result<http::Response<T>, BoxError>;

/// What a step of the call came to.
enum Step<O, T> {
    /// An attempt's outcome, for the retry to judge.
    Judge(O),
    /// The call is over, with this output.
    End(Output<T>),
    /// The next step is set: poll again.
    Again,
}

impl<S, B, D, R, G, O> ResponseFuture<S, B, D, R, G, O>
where
    S: Service<http::Request<B>>,
    G: Gate,
    O: Admit,
{
    /// The future of a call whose first attempt, `future`, was sent at
    /// `started`.
    #[inline(always)]
    pub(super) fn new(
        future: S::Future,
        started: Instant,
        call: Call<S, B, D, R, G, O>,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        let state = State::Called {
            future,
            at: started,
            ended: false,
        };
        Self::starting(state, call, span)
    }

    /// The future of a call that sent nothing: its deadline had passed.
    pub(super) fn expired(call: Call<S, B, D, R, G, O>) -> Self {
        Self::starting(State::Expired, call, None)
    }

    /// The future of a call whose first attempt was turned away (an open
    /// circuit, overload control) with `error`.
    pub(super) fn refused(
        error: BoxError,
        call: Call<S, B, D, R, G, O>,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        let error = Some(error);
        Self::starting(State::Refused { error }, call, span)
    }

    /// The future of a call whose first attempt, `request`, waits for a
    /// slot.
    pub(super) fn queued(
        request: http::Request<B>,
        call: Call<S, B, D, R, G, O>,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        let request = Some(Box::new(request));
        Self::starting(State::Queued { request }, call, span)
    }

    #[inline(always)]
    fn starting(
        state: State<S::Future, B>,
        call: Call<S, B, D, R, G, O>,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        Self {
            state,
            sleep: None,
            call,
            span,
        }
    }
}

impl<S, B, D, R, G: Gate, O: Admit> Call<S, B, D, R, G, O> {
    /// What a call keeps: the clone that makes every attempt after the
    /// first, the retry's state, the deadline and limits, and the passes of
    /// the breaker and overload control.
    #[inline(always)]
    pub(super) fn new(
        service: S,
        retry: RetryState<B, D, R>,
        deadline: RequestDeadline,
        limits: Limits,
        (pass, slot): (G::Pass, O::Pass),
    ) -> Self {
        Self {
            service,
            retry,
            deadline,
            limits,
            pass,
            slot,
        }
    }

    /// Takes `ready` (the service made ready for this call) and leaves the
    /// clone in its place.
    pub(super) fn swap_service(&mut self, ready: &mut S) {
        std::mem::swap(&mut self.service, ready);
    }

    /// Gives back whatever the call still holds in the breaker and overload
    /// control, counting for nothing: what a call its deadline (or any end
    /// before its outcome is judged) ends leaves, were its future kept.
    fn release(&mut self) {
        G::release(&mut self.pass);
        O::release(&mut self.slot);
    }

    /// Writes the attempt's budget in `request`, if it is sent: the time
    /// left at `now`, capped by the attempt's limit. `Err` when none is
    /// left to write.
    #[inline(always)]
    pub(super) fn stamp_budget(
        &self,
        request: &mut http::Request<B>,
        now: Instant,
    ) -> Result<(), ()> {
        let Some(header) = &self.limits.budget_header else {
            return Ok(());
        };
        let left = time_left(self.deadline, now);
        let limit = self.limits.sent_limit(self.retry.on_final_attempt());
        send_budget(request, &header.0, header.1, left, limit).map_err(|_| ())
    }
}

/// Whether the call's timer has fired at the deadline: the deadline then
/// wins over an outcome that is ready at the same instant, as a
/// `DeadlineLayer` outside a retry does.
fn deadline_fired(sleep: Pin<&mut Option<Sleep>>, deadline: Instant) -> bool {
    sleep
        .as_ref()
        .get_ref()
        .as_ref()
        .is_some_and(|timer| timer.deadline() == deadline && timer.is_elapsed())
}

impl<S, B, T, D, R, G, O> Future for ResponseFuture<S, B, D, R, G, O>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    B: TryCloneBody,
    D: Decoder<T, BoxError>,
    R: Retryer,
    G: Judges<T>,
    O: Admit,
{
    type Output = Result<http::Response<DeadlineBody<T>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.as_deref().map(tracing::Span::enter);
        let call = this.call;
        loop {
            let step = match this.state.as_mut().project() {
                StateProj::Called { future, at, ended } => {
                    ready!(call.poll_attempt(future, at, ended, this.sleep.as_mut(), cx))
                }
                StateProj::Waiting { until } => {
                    let until = *until;
                    ready!(poll_timer(this.sleep.as_mut(), until, cx));
                    if until >= call.deadline.instant() {
                        Step::End(Err(call.exceeded()))
                    } else {
                        this.state.set(State::Readying);
                        Step::Again
                    }
                }
                StateProj::Readying => {
                    ready!(call.poll_send(this.state.as_mut(), this.sleep.as_mut(), cx))
                }
                StateProj::Queued { request } => {
                    match ready!(call.poll_slot(this.sleep.as_mut(), cx)) {
                        Some(step) => step,
                        None => {
                            let request = *request
                                .take()
                                .expect("ResponseFuture polled after completion");
                            call.send(request, this.state.as_mut())
                        }
                    }
                }
                StateProj::Refused { error } => {
                    Step::Judge(Err(ready!(coop::poll_turned_away(error, cx))))
                }
                StateProj::Expired => Step::End(Err(call.exceeded())),
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            };
            let output = match step {
                Step::Again => continue,
                Step::End(output) => output,
                Step::Judge(outcome) => match call.judge(outcome, this.state.as_mut()) {
                    Some(output) => output,
                    None => continue,
                },
            };
            // NOTE: the call's slot and circuit place go back now, not when
            // its future is dropped (a finished future may be kept).
            call.release();
            call.retry.finish(&output);
            this.state.set(State::Done);
            return Poll::Ready(output);
        }
    }
}

// ===== impl Call =====

impl<S, B, T, D, R, G, O> Call<S, B, D, R, G, O>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    B: TryCloneBody,
    D: Decoder<T, BoxError>,
    R: Retryer,
    G: Judges<T>,
    O: Admit,
{
    /// Polls the attempt in flight against its end: its outcome, the
    /// attempt timeout, or the deadline, which ends the call.
    #[inline(always)]
    fn poll_attempt(
        &mut self,
        future: Pin<&mut S::Future>,
        at: &mut Instant,
        ended: &mut bool,
        mut sleep: Pin<&mut Option<Sleep>>,
        cx: &mut Context<'_>,
    ) -> Poll<Step<Outcome<T>, T>> {
        if deadline_fired(sleep.as_mut(), self.deadline.instant()) {
            return Poll::Ready(Step::End(Err(self.exceeded())));
        }
        // NOTE: the response is polled first, so a response ready in the
        // same poll as an attempt's limit counts.
        let polled = telemetry::poll_in(self.retry.attempt_span(), future, cx);
        if let Poll::Ready(outcome) = polled {
            return Poll::Ready(Step::Judge(outcome.map_err(Into::into)));
        }
        if !*ended {
            let to_deadline = self.limits.runs_to_deadline(self.retry.on_final_attempt());
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

    /// Readies the inner service and sends the next attempt, within the
    /// deadline.
    #[inline(always)]
    fn poll_send(
        &mut self,
        state: Pin<&mut State<S::Future, B>>,
        mut sleep: Pin<&mut Option<Sleep>>,
        cx: &mut Context<'_>,
    ) -> Poll<Step<Outcome<T>, T>> {
        let deadline = self.deadline;
        if deadline_fired(sleep.as_mut(), deadline.instant()) {
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
        if deadline.has_passed_at(Instant::now()) {
            return Poll::Ready(Step::End(Err(self.exceeded())));
        }
        // NOTE: numbered before it asks for a slot, so that an attempt
        // turned away counts as one, as under an `OverloadLayer` between the
        // three layers' retry and attempt timeout.
        let request = self.retry.next_request();
        Poll::Ready(self.admit(request, state))
    }

    /// Asks for a slot for `request`, the next attempt: sends it, parks it
    /// until a slot comes, or judges the rejection.
    #[inline(always)]
    fn admit(
        &mut self,
        request: http::Request<B>,
        mut state: Pin<&mut State<S::Future, B>>,
    ) -> Step<Outcome<T>, T> {
        match O::try_admit(&mut self.slot, self.deadline) {
            Admission::Now => self.send(request, state),
            Admission::Queued => {
                let request = Some(Box::new(request));
                state.set(State::Queued { request });
                Step::Again
            }
            Admission::Refused(error) => refuse(error, state),
        }
    }

    /// Waits for a slot for the next attempt, within the deadline: `None`
    /// once it has one, else the step the call takes instead.
    #[inline(always)]
    fn poll_slot(
        &mut self,
        mut sleep: Pin<&mut Option<Sleep>>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Step<Outcome<T>, T>>> {
        let deadline = self.deadline;
        if deadline_fired(sleep.as_mut(), deadline.instant())
            || deadline.has_passed_at(Instant::now())
        {
            return Poll::Ready(Some(Step::End(Err(self.exceeded()))));
        }
        match O::poll_admit(&mut self.slot, deadline, cx) {
            Poll::Ready(Ok(())) => Poll::Ready(None),
            // NOTE: turned away at the end of its wait, whose timer spent
            // the task's budget already.
            Poll::Ready(Err(error)) => Poll::Ready(Some(Step::Judge(Err(error)))),
            Poll::Pending => {
                // NOTE: the wait for a slot is bounded by the deadline too.
                ready!(poll_timer(sleep, deadline.instant(), cx));
                Poll::Ready(Some(Step::End(Err(self.exceeded()))))
            }
        }
    }

    /// Sends `request` as the next attempt, which has its slot: its budget
    /// written, through the circuit.
    #[inline(always)]
    fn send(
        &mut self,
        mut request: http::Request<B>,
        mut state: Pin<&mut State<S::Future, B>>,
    ) -> Step<Outcome<T>, T> {
        let now = Instant::now();
        if self.stamp_budget(&mut request, now).is_err() {
            return Step::End(Err(self.exceeded()));
        }
        if let Err(open) = G::enter(&mut self.pass) {
            // NOTE: the attempt is numbered but never sent, as under a
            // `CircuitBreaker` between the three layers' retry and attempt
            // timeout; the readiness is left for the next call.
            return refuse(open.into(), state);
        }
        let span = self.retry.attempt_span();
        let future = telemetry::send_in(span, || self.service.call(request));
        state.set(State::Called {
            future,
            at: now,
            ended: false,
        });
        Step::Again
    }

    /// Judges an attempt's outcome: sets the next step, or gives the call's
    /// output.
    #[inline(always)]
    fn judge(
        &mut self,
        mut outcome: Result<http::Response<T>, BoxError>,
        mut state: Pin<&mut State<S::Future, B>>,
    ) -> Option<Output<T>> {
        let deadline = self.deadline;
        G::settle(&mut self.pass, &outcome);
        O::settle(&mut self.slot, &outcome);
        let next = match self.retry.decide(&mut outcome, Some(deadline)) {
            Decision::Return => return Some(outcome.map(|r| with_deadline(r, deadline))),
            Decision::Retry(wait) if wait.is_zero() => State::Readying,
            Decision::Retry(wait) => State::Waiting {
                until: saturating_after(Instant::now(), wait),
            },
            // NOTE: the wait reaches the deadline, which ends the call
            // there; the outcome in hand is dropped now rather than held.
            Decision::Cut(until) => State::Waiting { until },
        };
        // NOTE: the discarded outcome (and its unread body) is dropped before
        // the next attempt.
        drop(outcome);
        state.set(next);
        None
    }
}

/// Turns the attempt away with `error`: judged from the `Refused` state,
/// once the task's cooperative budget allows.
fn refuse<F, B, O, T>(error: BoxError, mut state: Pin<&mut State<F, B>>) -> Step<O, T> {
    state.set(State::Refused { error: Some(error) });
    Step::Again
}

impl<S, B, D, R, G: Gate, O: Admit> Call<S, B, D, R, G, O> {
    /// The error of a call its deadline ended.
    fn exceeded(&self) -> BoxError {
        DeadlineExceeded::new(self.deadline.budget()).into()
    }
}

fn with_deadline<T>(
    response: http::Response<T>,
    deadline: RequestDeadline,
) -> http::Response<DeadlineBody<T>> {
    response.map(|body| DeadlineBody::new(body, deadline))
}

impl<S, B, D, R, G, O> fmt::Debug for ResponseFuture<S, B, D, R, G, O>
where
    S: Service<http::Request<B>>,
    G: Gate,
    O: Admit,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Waiting { .. } => "waiting",
            State::Readying => "readying",
            State::Queued { .. } => "waiting for a slot",
            State::Refused { .. } => "turned away",
            State::Expired => "deadline already passed",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("attempts", &self.call.retry.attempts())
            .field("deadline", &self.call.deadline)
            .finish_non_exhaustive()
    }
}
