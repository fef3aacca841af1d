//! What the retry decides for one request, apart from the future that polls.

use super::RetryPolicy;
use crate::body::{lone_deadline, Pristine, TryCloneBody};
use crate::extensions::FinalAttempt;
use crate::policy::{Attempts, Decoder, Reason, RetryEvent, Retryer, Stop, Verdict, WaitSource};
use crate::{
    limits::{self, Scheduled},
    session::{whole_millis, Again, Session},
    telemetry::CallSpan,
    RequestDeadline,
};
use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};
use tokio::time::Instant;

/// The retry's state for one request: the retryer, the kept copy of the
/// request and the call's [`Session`]. After each attempt,
/// [`decide`](Self::decide) says what comes next.
pub(crate) struct RetryState<B, D, R> {
    policy: Arc<RetryPolicy<D, R>>,
    retryer: R,
    // A pristine copy of the request for the next attempt; `None` when the
    // body cannot be replayed.
    request: Option<Pristine<B>>,
    session: Session,
    // The verdict on the last attempt, once there is one.
    verdict: Verdict,
    // Whether the attempt in flight is the last one the retry can make.
    on_final: bool,
    // Whether that last attempt's request is marked `FinalAttempt` for the
    // layers below.
    marks_final: bool,
}

/// What comes after an attempt, the outcome left with the caller.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Decision {
    /// Wait this long (not at all when zero), then send
    /// [`next_request`](RetryState::next_request) on a ready service; the
    /// outcome is dropped.
    Retry(Duration),
    /// The wait would reach the request's deadline: the outcome is kept until
    /// that instant, then handed to [`at_deadline`](RetryState::at_deadline).
    Cut(Instant),
    /// The call is over: the outcome, with its report, goes to the caller.
    Return,
}

impl<B, D, R> RetryState<B, D, R> {
    /// The state of a call whose first attempt is `request`: its
    /// [`Session`] begun, a fresh retryer, and a kept copy of the request
    /// (none with retries off or one attempt allowed: a `ReplayBody` then
    /// buffers nothing). With `marks_final`, the last attempt's request is
    /// marked [`FinalAttempt`] for the layers below (the separate layers);
    /// without, the caller holds the deadline and reads
    /// [`on_final_attempt`](Self::on_final_attempt) (the combined service).
    #[inline(always)]
    pub(crate) fn begin(
        policy: Arc<RetryPolicy<D, R>>,
        request: &mut http::Request<B>,
        marks_final: bool,
        span: &CallSpan,
    ) -> Self
    where
        B: TryCloneBody,
        R: Retryer,
    {
        // NOTE: one lookup serves the session and the copy: the
        // deadline's, when it is the request's only extension (the common
        // case under a `DeadlineLayer`), which the session leaves as it is.
        let lone = lone_deadline(request.extensions());
        let session = Session::begin_with(policy.parts(), request, span, lone.is_some());
        let retryer = policy.start();
        let copy = if policy.is_enabled() && retryer.max_attempts() != Some(1) {
            Pristine::with_lone(request, lone)
        } else {
            None
        };
        let on_final = copy.is_none();
        if marks_final && on_final {
            request.extensions_mut().insert(FinalAttempt);
        }
        Self {
            policy,
            retryer,
            request: copy,
            session,
            verdict: Verdict::Accept,
            on_final,
            marks_final,
        }
    }

    /// The state of a call that sends nothing, `request`: its deadline had
    /// passed.
    pub(crate) fn unsent(policy: Arc<RetryPolicy<D, R>>, request: &http::Request<B>) -> Self
    where
        R: Retryer,
    {
        Self {
            retryer: policy.start(),
            session: Session::unsent(policy.parts(), request),
            policy,
            request: None,
            verdict: Verdict::Accept,
            on_final: true,
            marks_final: false,
        }
    }

    /// The number of attempts made so far.
    pub(crate) const fn attempts(&self) -> u32 {
        self.session.attempts()
    }

    /// The span of the attempt in flight, entered while it is polled.
    pub(crate) fn attempt_span(&self) -> Option<&tracing::Span> {
        self.session.attempt_span()
    }

    /// Whether the attempt in flight is the last one the retry can make.
    pub(crate) const fn on_final_attempt(&self) -> bool {
        self.on_final
    }

    /// The deadline the kept request carries, if any.
    pub(crate) fn request_deadline(&self) -> Option<RequestDeadline> {
        self.request.as_ref().and_then(Pristine::deadline)
    }

    /// Whether a copy of the request is still kept for another attempt.
    pub(crate) fn can_replay(&self) -> bool {
        self.request.as_ref().is_some_and(|p| !p.is_taken())
    }

    /// The outcome of a call that the inner service's failure to get ready
    /// for the next attempt ends.
    pub(crate) fn not_ready<T, E>(&mut self, error: E) -> Result<http::Response<T>, E> {
        let mut outcome = Err(error);
        self.end(Stop::NotReady, None, &mut outcome);
        outcome
    }

    /// The outcome kept through a wait the request's deadline cut short.
    pub(crate) fn at_deadline<T, E>(
        &mut self,
        mut outcome: Result<http::Response<T>, E>,
    ) -> Result<http::Response<T>, E> {
        self.end(Stop::DeadlinePassed, None, &mut outcome);
        outcome
    }

    /// Tells the listener that the call ended with `output`, for the form
    /// that holds the call's deadline (see [`Session::finish`]).
    pub(crate) fn finish<T, E: crate::errors::AsError>(
        &self,
        output: &Result<http::Response<T>, E>,
    ) {
        self.session.finish(self.policy.parts(), output);
    }

    /// Records the end of the call, once it has ended, on its `span` (the
    /// form's, if anyone wants it).
    #[inline]
    pub(crate) fn record_end_on(&mut self, span: Option<&tracing::Span>) {
        self.session.record_end_on(span);
    }

    /// Ends the call through its session, with the outcome returned.
    fn stopped<T, E>(
        &mut self,
        stop: Stop,
        deadline: Option<RequestDeadline>,
        outcome: &mut Result<http::Response<T>, E>,
    ) -> Decision {
        self.end(stop, deadline, outcome);
        Decision::Return
    }

    /// Ends the call through its session.
    fn end<T, E>(
        &mut self,
        stop: Stop,
        deadline: Option<RequestDeadline>,
        outcome: &mut Result<http::Response<T>, E>,
    ) {
        let summary = Attempts::new(self.session.attempts())
            .with_verdict(self.verdict)
            .with_stop(stop);
        self.session
            .end(self.policy.parts(), summary, deadline, outcome);
    }
}

impl<B: TryCloneBody, D, R: Retryer> RetryState<B, D, R> {
    /// After the wait before a retry, with `kept`, the outcome that asked
    /// for it: `None` when the retry goes on (the outcome is dropped), or
    /// the outcome itself, ended `NotReplayable`, when the request can no
    /// longer be sent whole. An attempt left behind that is still sending
    /// the body (its answer came first) may read it past the replay cap
    /// during the wait; the outcome then stands, as it would have had the
    /// body been lost before the decision.
    pub(crate) fn after_wait<T, E>(
        &mut self,
        kept: Result<http::Response<T>, E>,
    ) -> Option<Result<http::Response<T>, E>> {
        if replayable(self.request.as_ref()) {
            return None;
        }
        let mut outcome = kept;
        self.end(Stop::NotReplayable, None, &mut outcome);
        Some(outcome)
    }

    /// Judges the outcome of the attempt just made and says what comes next,
    /// with the outcome left where it is: on `Return` it carries its report;
    /// otherwise the caller drops it (a `Cut` keeps it until the deadline, or
    /// drops it when a deadline of its own ends the call there). `deadline`
    /// is the request's.
    pub(crate) fn decide<T, E>(
        &mut self,
        outcome: &mut Result<http::Response<T>, E>,
        deadline: Option<RequestDeadline>,
    ) -> Decision
    where
        D: Decoder<T, E>,
    {
        let verdict = self.policy.decode(outcome);
        self.verdict = verdict;
        self.policy.record(verdict);
        self.session
            .end_attempt(self.policy.parts(), verdict, outcome.as_ref().ok());
        let (after, reason) = match verdict {
            Verdict::Retry { .. } if !self.policy.is_enabled() => {
                return self.stopped(Stop::Disabled, deadline, outcome)
            }
            Verdict::Retry { after, reason } => (after, reason),
            Verdict::Fail { .. } => return self.stopped(Stop::Failed, deadline, outcome),
            _ => return self.stopped(Stop::Accepted, deadline, outcome),
        };
        // NOTE: one clock read serves the decision and what it tells.
        let now = Instant::now();
        // NOTE: no wait outlasts the request's deadline, whatever layer
        // recorded it (or none): a wait that would reach it ends there, with
        // the outcome at hand. A `Deadline` layer outside, whose timer is due
        // at the same instant, ends the call with its own error instead.
        let wait = match self.wait(after, reason, deadline, now) {
            Ok(Scheduled::After(wait)) => wait,
            Ok(Scheduled::Cut(until)) => {
                tracing::debug!(
                    attempt = self.attempts(),
                    %verdict,
                    "the wait would reach the deadline: the outcome is kept until then"
                );
                return Decision::Cut(until);
            }
            Err(stop) => return self.stopped(stop, deadline, outcome),
        };
        self.announce(verdict, wait, deadline.map(|d| d.remaining_at(now)));
        Decision::Retry(wait)
    }

    /// Logs a retry decided on `verdict`, after `wait`, with `remaining`
    /// before the deadline, and tells the listener.
    fn announce(&self, verdict: Verdict, wait: Duration, remaining: Option<Duration>) {
        let source = match verdict.server_delay() {
            _ if wait.is_zero() => WaitSource::None,
            Some(_) => WaitSource::Server,
            None => WaitSource::Backoff,
        };
        tracing::debug!(
            attempt = self.attempts(),
            %verdict,
            wait_ms = whole_millis(wait),
            %source,
            remaining_ms = remaining.map(whole_millis),
            "retrying"
        );
        let event = RetryEvent::Retry {
            attempt: self.attempts(),
            verdict,
            wait,
            source,
            remaining,
        };
        self.session.tell(self.policy.parts(), &event);
    }

    /// The wait before a retry asked for with `reason` (and the server's
    /// `after`), with the policy on, or why none is made: the checks
    /// every form makes ([`Session::another`]) with the retry's own in
    /// their places: the request can be sent again; it is safe to repeat
    /// and the retryer gives a delay, or it was never sent (a guard turned
    /// it away) and waits as the guard said; then, with deadline-aware
    /// scheduling, the wait and a useful attempt fit; a wait that would
    /// reach the deadline is cut there ([`limits::schedule`]). `now` is the
    /// decision's instant.
    fn wait(
        &mut self,
        after: Option<Duration>,
        reason: Reason,
        deadline: Option<RequestDeadline>,
        now: Instant,
    ) -> Result<Scheduled, Stop> {
        let policy = &*self.policy;
        let mut again = RetryAgain {
            policy,
            retryer: &mut self.retryer,
            request: self.request.as_ref(),
            attempts: self.session.attempts(),
            after,
            reason,
        };
        let max = again.retryer.max_attempts();
        let wait = self
            .session
            .another(policy.parts(), max, deadline, now, &mut again)?;
        limits::schedule(
            wait,
            deadline.map(|d| d.instant()),
            policy.options().deadline_margin(),
            now,
        )
    }

    /// The request for the next attempt, counted: a copy of the kept one, or
    /// the kept one itself for the last attempt the retryer allows (and
    /// whenever copying fails now), marked [`FinalAttempt`] when it is the
    /// last.
    ///
    /// # Panics
    ///
    /// When no copy is kept: an invariant of the retry, which asks for a
    /// request only after [`after`](Self::after) said [`Next::Retry`], and
    /// that checked the copy was there.
    pub(crate) fn next_request(&mut self) -> http::Request<B> {
        let next = self.session.attempts().saturating_add(1);
        let last = self.retryer.max_attempts() == Some(next);
        let copy = match self.request.as_ref() {
            Some(pristine) if !last => pristine.next_attempt(),
            _ => None,
        };
        let mut request = match copy {
            Some(copy) => copy,
            None => self
                .request
                .as_mut()
                .and_then(Pristine::take)
                .expect("a retry is decided only with a request to replay"),
        };
        self.on_final = last || !self.can_replay();
        if self.marks_final && self.on_final {
            request.extensions_mut().insert(FinalAttempt);
        }
        self.session.next(self.policy.parts(), &mut request);
        request
    }
}

/// An outcome kept through the wait before a retry (see
/// [`RetryState::after_wait`]), boxed: a wait is a slow path.
///
/// NOTE: the `Mutex` is never locked; it keeps the future that holds the
/// outcome `Sync` whatever the response body is (only `Send` is asked of
/// it), as `Sync` futures are asked for by `BoxCloneSyncService`.
pub(crate) struct Kept<O>(Box<Mutex<O>>);

impl<O> Kept<O> {
    /// Keeps `outcome`.
    pub(crate) fn new(outcome: O) -> Self {
        Self(Box::new(Mutex::new(outcome)))
    }

    /// The outcome kept.
    pub(crate) fn into_inner(self) -> O {
        self.0.into_inner().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether the kept copy of the request can still be sent whole.
fn replayable<B: TryCloneBody>(request: Option<&Pristine<B>>) -> bool {
    request
        .and_then(Pristine::kept)
        .is_some_and(|request| request.body().is_replayable())
}

/// The retry's own checks before another attempt.
struct RetryAgain<'a, B, D, R> {
    policy: &'a RetryPolicy<D, R>,
    retryer: &'a mut R,
    request: Option<&'a Pristine<B>>,
    attempts: u32,
    after: Option<Duration>,
    reason: Reason,
}

impl<B: TryCloneBody, D, R: Retryer> Again for RetryAgain<'_, B, D, R> {
    fn sendable(&mut self) -> Result<(), Stop> {
        replayable(self.request)
            .then_some(())
            .ok_or(Stop::NotReplayable)
    }

    /// NOTE: an attempt a guard turned away was never sent, so it is safe to
    /// send whatever its method, and no backoff or budget applies: it waits
    /// as long as the guard said (`after`: an open circuit's probe, say),
    /// and only with deadline-aware scheduling, which makes sure the wait
    /// and a useful attempt fit before the deadline.
    fn wait(&mut self) -> Result<(Duration, bool), Stop> {
        let (after, reason) = (self.after, self.reason);
        if (Verdict::Retry { after, reason }).resends_unsent() {
            if self.policy.options().deadline_margin().is_none() {
                return Err(Stop::Failed);
            }
            return Ok((after.unwrap_or(Duration::ZERO), false));
        }
        // NOTE: what `allows` reads (method, headers, the `Idempotency`
        // extension) is all in the kept copy, which `sendable` found.
        let request = self.request.and_then(Pristine::kept);
        if !request.is_some_and(|request| self.policy.allows(request, reason)) {
            return Err(Stop::NotIdempotent);
        }
        // NOTE: the budget is asked after the retryer, so that a call out of
        // retries reads `Exhausted`.
        let wait = self.retryer.next_delay(self.attempts, after);
        wait.map(|wait| (wait, true)).ok_or(Stop::Exhausted)
    }
}

#[cfg(test)]
mod tests;
