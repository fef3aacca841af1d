//! The response future of [`Hedge`](super::Hedge).

use super::HedgePolicy;
use crate::{
    body::{Pristine, TryCloneBody},
    errors::AsError,
    limits::{self, Scheduled},
    policy::{Decoder, HedgeTrigger, RetryEvent, Verdict},
    session::{Again, Session},
    telemetry, Attempts, RequestDeadline, Stop,
};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Duration,
};
use tokio::time::Instant;
use tower_service::Service;

/// One copy of the request in flight.
struct Inflight<F> {
    future: Pin<Box<F>>,
    number: u32,
    started: Instant,
    /// Whether its age has already started a hedge.
    past_limit: bool,
    /// Its span, if anyone wants it.
    span: Option<Box<tracing::Span>>,
}

/// What a call that may still hedge keeps.
pub(super) struct Hedging<S, B> {
    pub(super) service: S,
    pub(super) pristine: Pristine<B>,
    /// When the next copy is due on the delay, if one is, and that delay.
    pub(super) next_at: Option<(Instant, Duration)>,
    /// A non-fatal outcome asks for the next copy at once.
    pub(super) at_once: Option<Verdict>,
    /// No copy goes before this instant, whatever would start it: the
    /// server asked for a wait (`Retry-After`, gRPC's pushback).
    pub(super) held: Option<Instant>,
    /// The request's deadline: no copy is sent at or after it.
    pub(super) deadline: Option<RequestDeadline>,
    pub(super) sleep: crate::timer::LazySleep,
}

/// The best outcome so far that is not an answer: the last non-fatal one.
struct Kept<R, E> {
    outcome: Result<R, E>,
    verdict: Verdict,
    number: u32,
}

pin_project! {
    /// The response future of [`Hedge`](super::Hedge): every copy of the
    /// request in flight, and what is needed to send more.
    pub struct ResponseFuture<S, B, D>
    where
        S: Service<http::Request<B>>,
    {
        call: Call<S, B, D>,
        // The span of the whole call, when a subscriber wants it.
        span: Option<Box<tracing::Span>>,
    }
}

/// What a hedged call keeps between polls.
struct Call<S, B, D>
where
    S: Service<http::Request<B>>,
{
    inflight: Vec<Inflight<S::Future>>,
    hedging: Option<Box<Hedging<S, B>>>,
    policy: Arc<HedgePolicy<D>>,
    // The copies sent, their numbering and the caller's report.
    session: Session,
    kept: Option<Kept<S::Response, S::Error>>,
    // Why no further copy will be sent, once that is known.
    stop: Option<Stop>,
}

/// What trying to send a copy did.
enum Sent {
    /// A copy went: the copies in flight are polled again.
    One,
    /// None may go now; the call waits for a copy to end or the inner
    /// service to be ready, both of which wake it.
    Wait,
    /// None is due, or none will ever go again.
    Nothing,
}

impl<S, B, D> ResponseFuture<S, B, D>
where
    S: Service<http::Request<B>>,
{
    pub(super) fn new(
        (first, first_span): (S::Future, Option<Box<tracing::Span>>),
        hedging: Option<Box<Hedging<S, B>>>,
        policy: Arc<HedgePolicy<D>>,
        session: Session,
        stop: Option<Stop>,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        let call = Call {
            inflight: vec![Inflight {
                future: Box::pin(first),
                number: 1,
                started: Instant::now(),
                past_limit: false,
                span: first_span,
            }],
            hedging,
            policy,
            session,
            kept: None,
            stop,
        };
        Self { call, span }
    }
}

impl<S, B, D> fmt::Debug for ResponseFuture<S, B, D>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("in_flight", &self.call.inflight.len())
            .field("sent", &self.call.session.attempts())
            .field("stop", &self.call.stop)
            .finish_non_exhaustive()
    }
}

type Output<S, B> =
    Result<<S as Service<http::Request<B>>>::Response, <S as Service<http::Request<B>>>::Error>;

impl<S, B, D, T> Future for ResponseFuture<S, B, D>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: AsError,
    B: TryCloneBody,
    D: Decoder<T, S::Error>,
{
    type Output = Result<http::Response<T>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.as_deref().map(tracing::Span::enter);
        let output = ready!(this.call.run(cx));
        this.call.session.record_end_on(this.span.as_deref());
        Poll::Ready(output)
    }
}

// ===== impl Call =====

impl<S, B, D, T> Call<S, B, D>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    B: TryCloneBody,
    D: Decoder<T, S::Error>,
{
    /// One poll of the call: the steps in order, until one of them waits or
    /// ends the call.
    fn run(&mut self, cx: &mut Context<'_>) -> Poll<Output<S, B>> {
        let call = self;
        loop {
            if let Some(output) = call.poll_copies(cx) {
                return Poll::Ready(output);
            }
            match call.send_due(cx) {
                Sent::One => continue,
                Sent::Wait => return Poll::Pending,
                Sent::Nothing => {}
            }
            if let Some(output) = call.end_if_idle() {
                return Poll::Ready(output);
            }
            ready!(call.sleep_until_due(cx));
        }
    }

    /// Polls the copies in flight, oldest first; the call's output once one
    /// of them ends it.
    fn poll_copies(&mut self, cx: &mut Context<'_>) -> Option<Output<S, B>> {
        let mut i = 0;
        while i < self.inflight.len() {
            let copy = &mut self.inflight[i];
            let polled = telemetry::poll_in(copy.span.as_deref(), copy.future.as_mut(), cx);
            let Poll::Ready(outcome) = polled else {
                i += 1;
                continue;
            };
            let done = self.inflight.remove(i);
            let copy = (done.span, done.number, Some(done.started));
            if let Some(output) = self.judge(outcome, copy) {
                return Some(output);
            }
        }
        None
    }

    /// Judges the outcome of copy `number`, started at `started`: the call's
    /// output when it ends the call.
    fn judge(
        &mut self,
        outcome: Output<S, B>,
        copy: (Option<Box<tracing::Span>>, u32, Option<Instant>),
    ) -> Option<Output<S, B>> {
        let now = Instant::now();
        let number = copy.1;
        if let Some(started) = copy.2 {
            self.policy.delay().record(now - started, now);
        }
        let verdict = self.policy.decoder().decode(&outcome);
        let ended = (copy.0.as_deref(), number, copy.2);
        self.session
            .end_copy(self.policy.parts(), ended, verdict, outcome.as_ref().ok());
        match verdict {
            Verdict::Accept => {
                self.policy.parts().record(verdict);
                Some(self.finish(outcome, verdict, number, Stop::Accepted))
            }
            // NOTE: only a response is a fatal answer. A copy that failed
            // (its own time limit, a reset, a body it could not get because
            // another copy went past the replay cap) says nothing the copies
            // still in flight cannot improve on; the last one's failure is
            // returned.
            Verdict::Fail { .. } if outcome.is_err() && !self.inflight.is_empty() => None,
            Verdict::Fail { .. } => Some(self.finish(outcome, verdict, number, Stop::Failed)),
            Verdict::Retry { .. } => {
                let scheduled = self
                    .hedging
                    .as_deref_mut()
                    .map(|hedging| schedule_next(hedging, &self.policy, verdict, now));
                if let Some(Err(stop)) = scheduled {
                    self.stop_hedging(stop);
                }
                self.kept = Some(Kept {
                    outcome,
                    verdict,
                    number,
                });
                None
            }
        }
    }

    /// Sends another copy if one is due and allowed.
    fn send_due(&mut self, cx: &mut Context<'_>) -> Sent {
        let Some(hedging) = self.hedging.as_deref_mut() else {
            return Sent::Nothing;
        };
        let now = Instant::now();
        let Some(trigger) = due(hedging, &self.inflight, &self.policy, now) else {
            return Sent::Nothing;
        };
        let allowed = allowed(
            hedging,
            self.inflight.len(),
            &self.session,
            &self.policy,
            now,
        );
        let ready = match allowed {
            Allowed::Yes => hedging.service.poll_ready(cx),
            Allowed::Later => return Sent::Wait,
            Allowed::Never(stop) => return self.stop_hedging(stop),
        };
        match ready {
            Poll::Pending => Sent::Wait,
            // NOTE: the copies in flight still answer; a service that cannot
            // take another stops the hedging, not the call.
            Poll::Ready(Err(_)) => self.stop_hedging(Stop::NotReady),
            Poll::Ready(Ok(())) => match hedging.pristine.next_attempt() {
                None => self.stop_hedging(Stop::NotReplayable),
                Some(request) => {
                    self.send(request, trigger, now);
                    Sent::One
                }
            },
        }
    }

    /// Sends `request` as the next copy, started by `trigger`.
    fn send(&mut self, mut request: http::Request<B>, trigger: HedgeTrigger, now: Instant) {
        let Some(hedging) = self.hedging.as_deref_mut() else {
            return;
        };
        let number = self.session.next(self.policy.parts(), &mut request);
        consume(hedging, &mut self.inflight, trigger, &self.policy, now);
        // NOTE: every copy after the first takes a token, as a retry does.
        self.policy.parts().spend();
        let span = self.session.take_attempt_span();
        let entered = telemetry::enter(span.as_deref());
        let future = hedging.service.call(request);
        drop(entered);
        self.inflight.push(Inflight {
            future: Box::pin(future),
            number,
            started: now,
            past_limit: false,
            span,
        });
        let event = RetryEvent::Hedge {
            attempt: number,
            trigger,
            in_flight: self.inflight.len() as u32,
        };
        tracing::debug!(%event, "hedge");
        self.session.tell(self.policy.parts(), &event);
    }

    /// The kept outcome, once nothing is in flight and no copy will be due.
    fn end_if_idle(&mut self) -> Option<Output<S, B>> {
        // NOTE: with nothing in flight, the call waits only for a copy the
        // server asked to be sent later.
        let waits = self
            .hedging
            .as_deref()
            .is_some_and(|hedging| next_due(hedging, &self.inflight, &self.policy).is_some());
        if !self.inflight.is_empty() || waits {
            return None;
        }
        let kept = self
            .kept
            .take()
            .expect("a call with nothing in flight kept a non-fatal outcome");
        let stop = self.stop.unwrap_or(Stop::Exhausted);
        Some(self.finish(kept.outcome, kept.verdict, kept.number, stop))
    }
}

impl<S, B, D> Call<S, B, D>
where
    S: Service<http::Request<B>>,
{
    /// No further copy will be sent, for `stop`; the copies in flight go on.
    fn stop_hedging(&mut self, stop: Stop) -> Sent {
        self.stop = Some(stop);
        self.hedging = None;
        Sent::Nothing
    }

    /// Ready when the next copy is due; pending while none will be.
    fn sleep_until_due(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(hedging) = self.hedging.as_deref_mut() else {
            return Poll::Pending;
        };
        let Some(at) = next_due(hedging, &self.inflight, &self.policy) else {
            return Poll::Pending;
        };
        crate::timer::poll_until(&mut hedging.sleep, at, cx)
    }

    /// The outcome for the caller, with its report; every copy still in
    /// flight is dropped.
    fn finish<T>(
        &mut self,
        outcome: Result<http::Response<T>, S::Error>,
        verdict: Verdict,
        winner: u32,
        stop: Stop,
    ) -> Result<http::Response<T>, S::Error> {
        // NOTE: dropping the losers cancels them: the client closes their
        // connections or resets their streams.
        self.inflight.clear();
        let summary = Attempts::new(self.session.attempts())
            .with_verdict(verdict)
            .with_stop(stop)
            .with_winner(winner);
        let deadline = self.hedging.as_deref().and_then(|h| h.deadline);
        let mut outcome = outcome;
        self.session
            .end(self.policy.parts(), summary, deadline, &mut outcome);
        outcome
    }
}

/// A hedge's own checks before another copy: none, since the request was
/// kept and found safe to repeat before the first copy went, and a copy
/// waits for nothing but its turn.
struct HedgeAgain;

impl Again for HedgeAgain {
    fn wait(&mut self) -> Result<(Duration, bool), Stop> {
        Ok((Duration::ZERO, true))
    }
}

enum Allowed {
    Yes,
    /// Not while this many copies are in flight.
    Later,
    /// Never again in this call, for this reason.
    Never(Stop),
}

/// Whether another copy may be sent now.
fn allowed<S, B, D>(
    hedging: &Hedging<S, B>,
    in_flight: usize,
    session: &Session,
    policy: &HedgePolicy<D>,
    now: Instant,
) -> Allowed {
    let max = Some(policy.max_attempts());
    let gate = session.another(policy.parts(), max, hedging.deadline, now, &mut HedgeAgain);
    if let Err(stop) = gate {
        return Allowed::Never(stop);
    }
    if in_flight >= policy.max_in_flight() as usize {
        return Allowed::Later;
    }
    Allowed::Yes
}

/// What makes a copy due now, if anything: a non-fatal outcome, the delay,
/// or an attempt past its limit.
///
/// NOTE: nothing is marked used here: a copy due while the copies in flight
/// are at their most goes when one of them ends, so the trigger is used up
/// only when a copy is sent ([`consume`]).
fn due<S, B, D, F>(
    hedging: &Hedging<S, B>,
    inflight: &[Inflight<F>],
    policy: &HedgePolicy<D>,
    now: Instant,
) -> Option<HedgeTrigger> {
    if hedging.held.is_some_and(|held| now < held) {
        return None;
    }
    if let Some(verdict) = hedging.at_once {
        return Some(HedgeTrigger::NonFatal(verdict));
    }
    if let Some(limit) = policy.attempt_timeout() {
        if aged(inflight, limit, now).is_some() {
            return Some(HedgeTrigger::AttemptTimeout(limit));
        }
    }
    match hedging.next_at {
        Some((at, delay)) if now >= at => Some(HedgeTrigger::Delay(delay)),
        _ => None,
    }
}

/// Schedules the copy a non-fatal outcome asks for: at once, or after the
/// delay the server asked for, capped and cut at the request's deadline as a
/// retry's wait is ([`limits::schedule`]); or says why no copy will go.
fn schedule_next<S, B, D>(
    hedging: &mut Hedging<S, B>,
    policy: &HedgePolicy<D>,
    verdict: Verdict,
    now: Instant,
) -> Result<(), Stop> {
    let asked = verdict.server_delay();
    let wait = asked.map_or(Duration::ZERO, |asked| {
        limits::capped(asked, policy.max_server_delay())
    });
    let deadline = hedging.deadline.map(|d| d.instant());
    let until = match limits::schedule(wait, deadline, policy.options().deadline_margin(), now)? {
        Scheduled::After(_) if asked.is_none() => {
            hedging.at_once = Some(verdict);
            return Ok(());
        }
        Scheduled::After(wait) => crate::timer::saturating_after(now, wait),
        // NOTE: at the deadline no copy may go: the call then ends with the
        // outcome kept, as a retry's cut wait does.
        Scheduled::Cut(until) => until,
    };
    // NOTE: the server's wait holds every copy, whichever copy's outcome
    // would send one at once and in whatever order they ended.
    hedging.next_at = Some((until, wait));
    hedging.held = hedging.held.max(Some(until));
    Ok(())
}

/// Marks `trigger` as served by the copy just sent, and sets when the next
/// one is due on the delay (counted from this copy, as gRPC counts it).
fn consume<S, B, D, F>(
    hedging: &mut Hedging<S, B>,
    inflight: &mut [Inflight<F>],
    trigger: HedgeTrigger,
    policy: &HedgePolicy<D>,
    now: Instant,
) {
    match trigger {
        HedgeTrigger::NonFatal(_) => hedging.at_once = None,
        HedgeTrigger::AttemptTimeout(limit) => {
            if let Some(i) = aged(inflight, limit, now) {
                inflight[i].past_limit = true;
            }
        }
        HedgeTrigger::Delay(_) => {}
    }
    hedging.next_at = policy
        .delay()
        .get(now)
        .map(|delay| (crate::timer::saturating_after(now, delay), delay));
}

/// The first copy in flight whose age reached `limit` at `now` and has not
/// started a hedge yet.
fn aged<F>(inflight: &[Inflight<F>], limit: Duration, now: Instant) -> Option<usize> {
    inflight
        .iter()
        .position(|a| !a.past_limit && now >= crate::timer::saturating_after(a.started, limit))
}

/// The next instant a copy becomes due, if any will.
fn next_due<S, B, D, F>(
    hedging: &Hedging<S, B>,
    inflight: &[Inflight<F>],
    policy: &HedgePolicy<D>,
) -> Option<Instant> {
    let on_limit = policy.attempt_timeout().and_then(|limit| {
        inflight
            .iter()
            .filter(|a| !a.past_limit)
            .map(|a| crate::timer::saturating_after(a.started, limit))
            .min()
    });
    let earliest = match (hedging.next_at.map(|(at, _)| at), on_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    match (hedging.held, hedging.at_once) {
        // NOTE: a copy asked for at once waits only for the server's wait.
        (Some(held), Some(_)) => Some(held),
        (Some(held), None) => earliest.map(|at| at.max(held)),
        (None, _) => earliest,
    }
}
