//! The response future of [`Hedge`](super::Hedge).

use super::HedgePolicy;
use crate::{
    errors::AsError,
    limits::{self, Scheduled},
    retry::{Decoder, HedgeTrigger, Pristine, RetryEvent, TryCloneBody, Verdict},
    Attempts, RetryReport, Stop,
};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

/// One copy of the request in flight.
struct Inflight<F> {
    future: Pin<Box<F>>,
    number: u32,
    started: Instant,
    /// Whether its age has already started a hedge.
    past_limit: bool,
}

/// What a call that may still hedge keeps.
pub(super) struct Hedging<S, B> {
    pub(super) service: S,
    pub(super) pristine: Pristine<B>,
    /// When the next copy is due on the delay, if one is, and that delay.
    pub(super) next_at: Option<(Instant, Duration)>,
    /// A non-fatal outcome asks for the next copy at once.
    pub(super) at_once: Option<Verdict>,
    /// The request's deadline: no copy is sent at or after it.
    pub(super) deadline: Option<Instant>,
    pub(super) sleep: Option<Pin<Box<Sleep>>>,
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
        inflight: Vec<Inflight<S::Future>>,
        hedging: Option<Box<Hedging<S, B>>>,
        policy: Arc<HedgePolicy<D>>,
        sent: u32,
        kept: Option<Kept<S::Response, S::Error>>,
        // Why no further copy will be sent, once that is known.
        stop: Option<Stop>,
        // The caller's report, if the request carried one.
        report: Option<RetryReport>,
    }
}

impl<S, B, D> ResponseFuture<S, B, D>
where
    S: Service<http::Request<B>>,
{
    pub(super) fn new(
        first: S::Future,
        hedging: Option<Box<Hedging<S, B>>>,
        policy: Arc<HedgePolicy<D>>,
        stop: Option<Stop>,
        report: Option<RetryReport>,
    ) -> Self {
        Self {
            inflight: vec![Inflight {
                future: Box::pin(first),
                number: 1,
                started: Instant::now(),
                past_limit: false,
            }],
            hedging,
            policy,
            sent: 1,
            kept: None,
            stop,
            report,
        }
    }
}

impl<S, B, D> fmt::Debug for ResponseFuture<S, B, D>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("in_flight", &self.inflight.len())
            .field("sent", &self.sent)
            .field("stop", &self.stop)
            .finish_non_exhaustive()
    }
}

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
        loop {
            // The copies in flight, oldest first.
            let mut i = 0;
            while i < this.inflight.len() {
                let Poll::Ready(outcome) = this.inflight[i].future.as_mut().poll(cx) else {
                    i += 1;
                    continue;
                };
                let done = this.inflight.remove(i);
                let now = Instant::now();
                this.policy.delay().record(now - done.started, now);
                let verdict = this.policy.decoder().decode(&outcome);
                match verdict {
                    Verdict::Accept => {
                        if let Some(budget) = this.policy.budget() {
                            budget.record_success();
                        }
                        // NOTE: dropping the losers cancels them: the client
                        // closes their connections or resets their streams.
                        this.inflight.clear();
                        return Poll::Ready(end(
                            this.policy,
                            this.report.as_ref(),
                            *this.sent,
                            outcome,
                            verdict,
                            done.number,
                            Stop::Accepted,
                        ));
                    }
                    Verdict::Fail { .. } => {
                        // NOTE: only a response is a fatal answer. A copy that
                        // failed (its own time limit, a reset, a body it could
                        // not get because another copy went past the replay
                        // cap) says nothing the copies still in flight cannot
                        // improve on; the last one's failure is returned.
                        if outcome.is_err() && !this.inflight.is_empty() {
                            continue;
                        }
                        this.inflight.clear();
                        return Poll::Ready(end(
                            this.policy,
                            this.report.as_ref(),
                            *this.sent,
                            outcome,
                            verdict,
                            done.number,
                            Stop::Failed,
                        ));
                    }
                    Verdict::Retry { .. } => {
                        if let Some(hedging) = this.hedging.as_deref_mut() {
                            if let Err(stop) = schedule_next(hedging, this.policy, verdict, now) {
                                *this.stop = Some(stop);
                                *this.hedging = None;
                            }
                        }
                        *this.kept = Some(Kept {
                            outcome,
                            verdict,
                            number: done.number,
                        });
                    }
                }
            }

            // Another copy, if one is due and allowed.
            if let Some(hedging) = this.hedging.as_deref_mut() {
                let now = Instant::now();
                let trigger = due(hedging, this.inflight, this.policy, now);
                if let Some(trigger) = trigger {
                    match allowed(hedging, this.inflight.len(), *this.sent, this.policy, now) {
                        Allowed::Yes => match hedging.service.poll_ready(cx) {
                            Poll::Pending => return Poll::Pending,
                            Poll::Ready(Err(_)) => {
                                // NOTE: the copies in flight still answer; a
                                // service that cannot take another stops the
                                // hedging, not the call.
                                *this.stop = Some(Stop::NotReady);
                                *this.hedging = None;
                            }
                            Poll::Ready(Ok(())) => match hedging.pristine.next_attempt() {
                                None => {
                                    *this.stop = Some(Stop::NotReplayable);
                                    *this.hedging = None;
                                }
                                Some(mut request) => {
                                    *this.sent += 1;
                                    this.policy.number_attempt(&mut request, *this.sent);
                                    if let Some(report) = this.report {
                                        report.record_attempt(*this.sent);
                                    }
                                    consume(hedging, trigger, this.policy, now);
                                    if let Some(budget) = this.policy.budget() {
                                        budget.record_retryable_failure();
                                    }
                                    let future = hedging.service.call(request);
                                    this.inflight.push(Inflight {
                                        future: Box::pin(future),
                                        number: *this.sent,
                                        started: now,
                                        past_limit: false,
                                    });
                                    this.policy.tell(&RetryEvent::Hedge {
                                        attempt: *this.sent,
                                        trigger,
                                        in_flight: this.inflight.len() as u32,
                                    });
                                    continue;
                                }
                            },
                        },
                        // NOTE: the copies in flight were polled above, so
                        // the end of one wakes this call.
                        Allowed::Later => return Poll::Pending,
                        Allowed::Never(stop) => {
                            *this.stop = Some(stop);
                            *this.hedging = None;
                        }
                    }
                }
            }

            // NOTE: with nothing in flight, the call waits only for a copy
            // the server asked to be sent later.
            let waits = this
                .hedging
                .as_deref()
                .is_some_and(|hedging| next_due(hedging, this.inflight, this.policy).is_some());
            if this.inflight.is_empty() && !waits {
                let kept = this
                    .kept
                    .take()
                    .expect("a call with nothing in flight kept a non-fatal outcome");
                let stop = this.stop.unwrap_or(Stop::Exhausted);
                return Poll::Ready(end(
                    this.policy,
                    this.report.as_ref(),
                    *this.sent,
                    kept.outcome,
                    kept.verdict,
                    kept.number,
                    stop,
                ));
            }

            // Wait for the next copy to be due, if one will be.
            let Some(hedging) = this.hedging.as_deref_mut() else {
                return Poll::Pending;
            };
            let Some(at) = next_due(hedging, this.inflight, this.policy) else {
                return Poll::Pending;
            };
            let sleep = match &mut hedging.sleep {
                Some(sleep) => {
                    if sleep.deadline() != at {
                        sleep.as_mut().reset(at);
                    }
                    sleep
                }
                None => hedging.sleep.insert(Box::pin(tokio::time::sleep_until(at))),
            };
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
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
    sent: u32,
    policy: &HedgePolicy<D>,
    now: Instant,
) -> Allowed {
    if sent >= policy.max_attempts() {
        return Allowed::Never(Stop::Exhausted);
    }
    if hedging.deadline.is_some_and(|deadline| now >= deadline) {
        return Allowed::Never(Stop::DeadlinePassed);
    }
    if policy.budget().is_some_and(|budget| !budget.can_retry()) {
        return Allowed::Never(Stop::BudgetExhausted);
    }
    if in_flight >= policy.max_in_flight() as usize {
        return Allowed::Later;
    }
    Allowed::Yes
}

/// What makes a copy due now, if anything: a non-fatal outcome, the delay,
/// or an attempt past its limit.
fn due<S, B, D, F>(
    hedging: &mut Hedging<S, B>,
    inflight: &mut [Inflight<F>],
    policy: &HedgePolicy<D>,
    now: Instant,
) -> Option<HedgeTrigger> {
    if let Some(verdict) = hedging.at_once {
        return Some(HedgeTrigger::NonFatal(verdict));
    }
    if let Some(limit) = policy.attempt_timeout() {
        for attempt in inflight.iter_mut().filter(|a| !a.past_limit) {
            if now >= crate::timer::saturating_after(attempt.started, limit) {
                attempt.past_limit = true;
                return Some(HedgeTrigger::AttemptTimeout(limit));
            }
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
    match limits::schedule(wait, hedging.deadline, policy.deadline_margin(), now)? {
        Scheduled::After(_) if asked.is_none() => hedging.at_once = Some(verdict),
        Scheduled::After(wait) => {
            hedging.next_at = Some((crate::timer::saturating_after(now, wait), wait));
        }
        // NOTE: at the deadline no copy may go: the call then ends with the
        // outcome kept, as a retry's cut wait does.
        Scheduled::Cut(until) => hedging.next_at = Some((until, wait)),
    }
    Ok(())
}

/// Marks `trigger` as served by the copy just sent, and sets when the next
/// one is due on the delay (counted from this copy, as gRPC counts it).
fn consume<S, B, D>(
    hedging: &mut Hedging<S, B>,
    trigger: HedgeTrigger,
    policy: &HedgePolicy<D>,
    now: Instant,
) {
    if let HedgeTrigger::NonFatal(_) = trigger {
        hedging.at_once = None;
    }
    hedging.next_at = policy
        .delay()
        .get(now)
        .map(|delay| (crate::timer::saturating_after(now, delay), delay));
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
    match (hedging.next_at.map(|(at, _)| at), on_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The outcome for the caller, with its report.
fn end<T, E, D>(
    policy: &HedgePolicy<D>,
    report: Option<&RetryReport>,
    sent: u32,
    outcome: Result<http::Response<T>, E>,
    verdict: Verdict,
    winner: u32,
    stop: Stop,
) -> Result<http::Response<T>, E> {
    let attempts = Attempts::new(sent)
        .with_verdict(verdict)
        .with_stop(stop)
        .with_winner(winner);
    let news = sent > 1 || !verdict.is_accept();
    if let Some(report) = report {
        report.record_summary(attempts);
    }
    if news {
        policy.tell(&RetryEvent::Done {
            attempts: sent,
            verdict,
            stop,
        });
    }
    outcome.map(|mut response| {
        if news {
            response.extensions_mut().insert(attempts);
        }
        response
    })
}
