//! What every form of the stack keeps for one call: the retry future, the
//! combined service and the hedge future all drive one [`Session`] with one
//! [`Parts`], so the numbering of attempts, the gates, the caller's report
//! and the end of a call exist once.

use crate::{
    body::lone_deadline,
    errors::AsError,
    extensions::{AttemptNumber, FinalAttempt},
    policy::{CallContext, CallEvent, Parts, Reason, RetryEvent, Verdict},
    telemetry::{self, names, CallSpan},
    Attempts, RequestDeadline, RetryReport, Stop,
};
use http::StatusCode;
use std::time::Duration;
use tokio::time::Instant;
use tracing::Span;

/// One call's bookkeeping: the attempts sent, the caller's report, and what
/// telemetry keeps of the call.
#[derive(Debug)]
pub(crate) struct Session {
    // Attempts sent so far, the current one included.
    attempts: u32,
    // The caller's report, if the request carried one.
    report: Option<RetryReport>,
    // What a subscriber or a listener wants of the call (boxed, so that a
    // call no one watches carries a pointer for it).
    watch: Option<Box<Watch>>,
}

/// What telemetry keeps of a watched call.
#[derive(Debug)]
struct Watch {
    // Whether a subscriber wants the call's span. The span itself is the
    // form's, which enters it at every poll and records the call's end on
    // it: a second handle here would cost a clone and a close per call.
    traced: bool,
    // What the call's span is to record, once the call has ended.
    ended: Option<Ended>,
    // The call, for a listener.
    context: Option<CallContext>,
    // When the call started, for a listener.
    called: Instant,
    // When the attempt in flight started, for a listener.
    started: Instant,
    hedge: bool,
    // The span of the attempt in flight, if anyone wants it (a hedge takes
    // each copy's away). Kept in place: the watch is boxed already.
    attempt: Option<Span>,
}

/// What a call's span records when the call ends.
#[derive(Debug, Clone, Copy)]
struct Ended {
    summary: Attempts,
    deadline: Option<RequestDeadline>,
    status: Option<StatusCode>,
}

// ===== impl Session =====

impl Session {
    /// The session of a call whose first attempt is `request`, and whose
    /// span is `span`: a [`FinalAttempt`] marker or an [`AttemptNumber`] it
    /// brings is removed (only the layer that decides the attempts knows
    /// which one is the last; one copied with the extensions of another
    /// request must not stretch or renumber every attempt), the attempt
    /// header is written for attempt 1, the caller's report, if the request
    /// carries one, is told of it, and the first attempt's span is made
    /// within the call's.
    #[inline(always)]
    pub(crate) fn begin<B, D>(
        parts: &Parts<D>,
        request: &mut http::Request<B>,
        span: &CallSpan,
    ) -> Self {
        let lone = lone_deadline(request.extensions());
        Self::begin_with(parts, request, span, lone.is_some())
    }

    /// [`begin`](Self::begin), for a caller that looked up already whether
    /// the request's one extension is a deadline (`lone`).
    #[inline(always)]
    pub(crate) fn begin_with<B, D>(
        parts: &Parts<D>,
        request: &mut http::Request<B>,
        span: &CallSpan,
        lone: bool,
    ) -> Self {
        // NOTE: most requests bring no extensions, or (under a
        // `DeadlineLayer`) the deadline alone; the map's own lookups are not
        // inlined, so those cases are told apart first, with one lookup.
        let report = if lone || request.extensions().is_empty() {
            None
        } else {
            request.extensions_mut().remove::<FinalAttempt>();
            request.extensions_mut().remove::<AttemptNumber>();
            request.extensions().get::<RetryReport>().cloned()
        };
        parts.number_attempt(request, 1);
        if let Some(report) = &report {
            report.record_attempt(1);
        }
        Self {
            attempts: 1,
            report,
            watch: Watch::of(parts, request, span),
        }
    }

    /// The session of a call that sends nothing (its deadline had passed):
    /// with a listener, it keeps the call's context for its end.
    pub(crate) fn unsent<B, D>(parts: &Parts<D>, request: &http::Request<B>) -> Self {
        let watch = parts.options.listener.as_ref().map(|_| {
            let now = Instant::now();
            Box::new(Watch {
                traced: false,
                ended: None,
                context: Some(CallContext::of(request)),
                called: now,
                started: now,
                hedge: false,
                attempt: None,
            })
        });
        Self {
            attempts: 1,
            report: None,
            watch,
        }
    }

    /// The number of attempts sent so far.
    pub(crate) const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Counts `request` as the next attempt: numbered (the attempt header
    /// and an [`AttemptNumber`]), told to the caller's report, and given its
    /// span within the span entered now (the call's). Returns its number.
    pub(crate) fn next<B, D>(&mut self, parts: &Parts<D>, request: &mut http::Request<B>) -> u32 {
        self.attempts = self.attempts.saturating_add(1);
        let n = self.attempts;
        parts.number_attempt(request, n);
        if parts.options.number_attempts {
            request.extensions_mut().insert(AttemptNumber::new(n));
        }
        if let Some(report) = &self.report {
            report.record_attempt(n);
        }
        if let Some(watch) = &mut self.watch {
            watch.attempt = telemetry::attempt_span(parts.options.telemetry, request, n);
            watch.started = Instant::now();
        }
        n
    }

    /// The span of the attempt in flight, entered while it is polled.
    #[inline(always)]
    pub(crate) fn attempt_span(&self) -> Option<&Span> {
        self.watch.as_ref()?.attempt.as_ref()
    }

    /// Takes the span of the attempt just begun or counted away, for a
    /// hedge, which keeps each copy's.
    #[inline(always)]
    pub(crate) fn take_attempt_span(&mut self) -> Option<Box<Span>> {
        self.watch.as_mut()?.attempt.take().map(Box::new)
    }

    /// Ends the attempt in flight with `verdict` on its outcome (`response`,
    /// when it is one): its span records it, a listener hears it.
    #[inline(always)]
    pub(crate) fn end_attempt<D, T>(
        &mut self,
        parts: &Parts<D>,
        verdict: Verdict,
        response: Option<&http::Response<T>>,
    ) {
        let Some(watch) = &mut self.watch else {
            return;
        };
        let (span, started) = (watch.attempt.take(), watch.started);
        self.end_copy(
            parts,
            (span.as_ref(), self.attempts, Some(started)),
            verdict,
            response,
        );
    }

    /// Ends copy `number` (with its `span`, started at `started`) with
    /// `verdict` on its outcome (`response`, when it is one): its span
    /// records it, a listener hears it.
    pub(crate) fn end_copy<D, T>(
        &self,
        parts: &Parts<D>,
        (span, number, started): (Option<&Span>, u32, Option<Instant>),
        verdict: Verdict,
        response: Option<&http::Response<T>>,
    ) {
        let status = response.map(http::Response::status);
        let version = response.map(http::Response::version);
        if let Some(span) = span {
            telemetry::record_outcome(span, verdict, status);
            if let Some(version) = version {
                telemetry::record_version(span, version);
            }
        }
        let (Some(listener), Some(watch)) = (&parts.options.listener, &self.watch) else {
            return;
        };
        let (Some(context), Some(started)) = (&watch.context, started) else {
            return;
        };
        let event = RetryEvent::AttemptEnd {
            attempt: number,
            verdict,
            status,
            duration: started.elapsed(),
            version,
        };
        listener.on_event(&CallEvent {
            call: context,
            event,
        });
    }

    /// Tells the listener, if there is one, that the call ended with
    /// `output`: for the form that holds the call's deadline (the combined
    /// service), which alone sees every end of its calls.
    pub(crate) fn finish<D, T, E: AsError>(
        &self,
        parts: &Parts<D>,
        output: &Result<http::Response<T>, E>,
    ) {
        let Some(listener) = &parts.options.listener else {
            return;
        };
        let Some((context, watch)) = self
            .watch
            .as_ref()
            .and_then(|watch| Some((watch.context.as_ref()?, watch)))
        else {
            return;
        };
        let event = RetryEvent::call_end(output, watch.called.elapsed());
        listener.on_event(&CallEvent {
            call: context,
            event,
        });
    }

    /// Tells the listener, if there is one, of `event`, with the call's
    /// context (a call whose policy has a listener always keeps one).
    pub(crate) fn tell<D>(&self, parts: &Parts<D>, event: &RetryEvent) {
        let Some(listener) = &parts.options.listener else {
            return;
        };
        if let Some(context) = self.watch.as_ref().and_then(|watch| watch.context.as_ref()) {
            listener.on_event(&CallEvent {
                call: context,
                event: *event,
            });
        }
    }

    /// Whether another attempt (or hedged copy) may go at `now`, and after
    /// what wait: the checks every form makes, in this order, with the
    /// form's own in their places: an attempt left within `max`; the
    /// request can be sent again ([`Again::sendable`]); the request's
    /// `deadline` has not passed; it may be repeated, and after what wait
    /// ([`Again::wait`]); and, unless the attempt was never sent, the budget
    /// allows it.
    pub(crate) fn another<D>(
        &self,
        parts: &Parts<D>,
        max: Option<u32>,
        deadline: Option<RequestDeadline>,
        now: Instant,
        form: &mut impl Again,
    ) -> Result<Duration, Stop> {
        self.attempts_left(max)?;
        form.sendable()?;
        deadline_open(deadline, now)?;
        let (wait, spends) = form.wait()?;
        if spends {
            parts.budget_allows()?;
        }
        Ok(wait)
    }

    /// Whether another attempt is within `max` (if there is a most).
    fn attempts_left(&self, max: Option<u32>) -> Result<(), Stop> {
        match max {
            Some(max) if self.attempts >= max => Err(Stop::Exhausted),
            _ => Ok(()),
        }
    }

    /// Ends the call with `summary`: logs it, tells the listener and the
    /// caller's report, keeps it for the call's span (which the form
    /// records it on: [`record_end_on`](Self::record_end_on)), and puts it on
    /// a response that has news in it.
    ///
    /// NOTE: the outcome is changed in place: it is the largest value of the
    /// call, and every move of it is a copy.
    pub(crate) fn end<T, E, D>(
        &mut self,
        parts: &Parts<D>,
        summary: Attempts,
        deadline: Option<RequestDeadline>,
        outcome: &mut Result<http::Response<T>, E>,
    ) {
        // NOTE: the fields are evaluated only when the event is enabled, so
        // the clock is not read for nothing.
        tracing::debug!(
            attempts = summary.get(),
            verdict = %summary.verdict(),
            stop = %summary.stop(),
            remaining_ms = deadline.map(|d| whole_millis(d.remaining())),
            "done"
        );
        self.tell(
            parts,
            &RetryEvent::Done {
                attempts: summary.get(),
                verdict: summary.verdict(),
                stop: summary.stop(),
            },
        );
        if let Some(watch) = self.watch.as_mut().filter(|watch| watch.traced) {
            let status = outcome.as_ref().ok().map(http::Response::status);
            watch.ended = Some(Ended {
                summary,
                deadline,
                status,
            });
        }
        if let Some(report) = &self.report {
            report.record_summary(summary);
        }
        // NOTE: a first attempt accepted, the common case, has nothing to
        // report and costs nothing (an extension allocates the map and the
        // value when the map is empty).
        if let Ok(response) = outcome {
            if summary.is_news() {
                response.extensions_mut().insert(summary);
            }
        }
    }
}

impl Session {
    /// Records the end of the call, once it has ended, on its `span` (the
    /// form's, if anyone wants it).
    #[inline]
    pub(crate) fn record_end_on(&mut self, span: Option<&Span>) {
        let Some(span) = span else {
            return;
        };
        if let Some(ended) = self.watch.as_mut().and_then(|watch| watch.ended.take()) {
            self.record_end(span, ended);
        }
    }

    /// Records the call's end on its span: the attempts, why it stopped, its
    /// outcome, its budget, a hedge's winner, a guard's rejection.
    fn record_end(&self, span: &Span, ended: Ended) {
        let Ended {
            summary,
            deadline,
            status,
        } = ended;
        span.record(names::ATTEMPTS, i64::from(summary.get()));
        span.record(names::STOP, summary.stop().name());
        if let Some(deadline) = deadline {
            let budget = telemetry::int(whole_millis(deadline.budget()));
            span.record(names::DEADLINE_MS, budget);
        }
        if self.watch.as_ref().is_some_and(|watch| watch.hedge) {
            span.record(names::HEDGE_WINNER, i64::from(summary.winner()));
        }
        let verdict = summary.verdict();
        if let Some(Reason::Failure(kind)) = verdict.reason() {
            if kind.is_turned_away() {
                span.record(names::TURNED_AWAY, kind.name());
            }
        }
        telemetry::record_outcome(span, verdict, status);
    }
}

/// What a form of the stack checks of its own before another attempt, in
/// the places [`Session::another`] leaves for it.
pub(crate) trait Again {
    /// Whether the request can be sent again (a copy of it is kept).
    fn sendable(&mut self) -> Result<(), Stop> {
        Ok(())
    }

    /// Whether it may be repeated, and after what wait; and whether the
    /// attempt spends a budget token (one a guard turned away, never sent,
    /// does not).
    fn wait(&mut self) -> Result<(Duration, bool), Stop>;
}

/// Whether the request's `deadline`, if it has one, is still ahead at `now`.
fn deadline_open(deadline: Option<RequestDeadline>, now: Instant) -> Result<(), Stop> {
    match deadline {
        Some(deadline) if deadline.has_passed_at(now) => Err(Stop::DeadlinePassed),
        _ => Ok(()),
    }
}

/// `duration` in whole milliseconds for the logs, at most `u64::MAX`.
pub(crate) fn whole_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

// ===== impl Watch =====

impl Watch {
    /// What to keep of a call whose first attempt is `request`, when a
    /// subscriber wants its span or the policy has a listener.
    #[inline(always)]
    fn of<B, D>(
        parts: &Parts<D>,
        request: &http::Request<B>,
        call: &CallSpan,
    ) -> Option<Box<Self>> {
        // NOTE: the one check a call no one watches makes.
        if parts.options.listener.is_none()
            && !tracing::level_enabled!(parts.options.telemetry.level)
        {
            return None;
        }
        let attempt = {
            let _entered = call.enter();
            telemetry::attempt_span(parts.options.telemetry, request, 1)
        };
        let traced = call.wanted().is_some();
        if !traced && attempt.is_none() && parts.options.listener.is_none() {
            return None;
        }
        let now = Instant::now();
        Some(Box::new(Self {
            context: parts
                .options
                .listener
                .as_ref()
                .map(|_| CallContext::of(request)),
            called: now,
            started: now,
            hedge: call.is_hedge(),
            traced,
            ended: None,
            attempt,
        }))
    }
}
