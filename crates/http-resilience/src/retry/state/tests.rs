//! The retry's decisions, one outcome at a time, without a service.

use super::{Decision, RetryState};
use crate::extensions::FinalAttempt;
use crate::policy::{Attempts, RetryReport, Stop};
use crate::RequestDeadline;
use crate::{
    policy::{FixedDelay, RetryBudget, StatusDecoder, Verdict},
    retry::RetryPolicy,
};
use http::{Request, Response, StatusCode};
use std::{io, sync::Arc, time::Duration};

type Outcome = Result<Response<&'static str>, io::Error>;
type Policy = RetryPolicy<StatusDecoder, FixedDelay>;

const DELAY: Duration = Duration::from_millis(10);

/// 503 retried, twice, `DELAY` apart.
fn policy() -> Policy {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 2),
    )
}

/// The state of a call of `method` under `policy`, its request kept for
/// retries, with a report.
fn state(
    policy: Policy,
    request: Request<String>,
) -> (RetryState<String, StatusDecoder, FixedDelay>, RetryReport) {
    let report = RetryReport::new();
    let mut request = request;
    request.extensions_mut().insert(report.clone());
    let span = crate::telemetry::CallSpan::new(
        crate::telemetry::Form::Retry,
        crate::telemetry::Telemetry::DEFAULT,
        &request,
    );
    let state = RetryState::begin(Arc::new(policy), &mut request, true, &span);
    (state, report)
}

/// What comes after an attempt, with the outcome where the future keeps it.
#[derive(Debug)]
enum Next {
    Retry(Duration),
    Cut {
        until: tokio::time::Instant,
        outcome: Outcome,
    },
    Return(Outcome),
}

impl RetryState<String, StatusDecoder, FixedDelay> {
    /// Judges `outcome` as the retry future does.
    fn after(&mut self, mut outcome: Outcome) -> Next {
        let deadline = self.request_deadline();
        match self.decide(&mut outcome, deadline) {
            Decision::Return => Next::Return(outcome),
            Decision::Cut(until) => Next::Cut { until, outcome },
            Decision::Retry(wait) => Next::Retry(wait),
        }
    }
}

fn get() -> Request<String> {
    Request::get("/value").body(String::new()).unwrap()
}

fn status(code: u16) -> Outcome {
    Ok(Response::builder().status(code).body("answer").unwrap())
}

/// The summary an outcome carries, if any.
fn summary(outcome: &Outcome) -> Option<Attempts> {
    outcome
        .as_ref()
        .ok()
        .and_then(|response| response.extensions().get::<Attempts>().copied())
}

fn returned(next: Next) -> Outcome {
    match next {
        Next::Return(outcome) => outcome,
        other => panic!("expected the call to end, got {other:?}"),
    }
}

#[test]
fn a_503_is_retried_until_the_retryer_stops_and_the_last_comes_back_unchanged() {
    let (mut state, report) = state(policy(), get());
    for attempt in 2..=3 {
        assert!(matches!(state.after(status(503)), Next::Retry(wait) if wait == DELAY));
        let request = state.next_request();
        assert_eq!(request.uri(), "/value");
        assert_eq!(report.attempts(), attempt);
        assert_eq!(
            request.extensions().get::<FinalAttempt>().is_some(),
            attempt == 3,
            "only the last attempt is marked final"
        );
    }
    let outcome = returned(state.after(status(503)));
    assert_eq!(
        outcome.as_ref().unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    let summary = summary(&outcome).expect("news: three attempts");
    assert_eq!(
        (summary.get(), summary.stop(), summary.verdict()),
        (
            3,
            Stop::Exhausted,
            Verdict::retry(StatusCode::SERVICE_UNAVAILABLE)
        )
    );
    assert_eq!(report.summary(), Some(summary));
}

#[test]
fn a_first_attempt_accepted_ends_with_nothing_on_the_response() {
    let (mut state, report) = state(policy(), get());
    let outcome = returned(state.after(status(200)));
    assert_eq!(summary(&outcome), None);
    assert_eq!(report.summary().map(|s| s.stop()), Some(Stop::Accepted));
}

#[test]
fn a_failure_not_worth_retrying_ends_at_once() {
    let (mut state, _) = state(policy(), get());
    let outcome = returned(state.after(status(404)));
    let summary = summary(&outcome).unwrap();
    assert_eq!((summary.get(), summary.stop()), (1, Stop::Failed));
}

#[test]
fn the_reasons_not_to_retry_are_told_apart() {
    let post = Request::post("/orders").body("{}".to_owned()).unwrap();
    let cases: [(Policy, Request<String>, Stop); 3] = [
        (policy().disabled(), get(), Stop::Disabled),
        (policy(), post, Stop::NotIdempotent),
        (
            RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never()),
            get(),
            Stop::Exhausted,
        ),
    ];
    for (policy, request, stop) in cases {
        let (mut state, _) = state(policy, request);
        let outcome = returned(state.after(status(503)));
        assert_eq!(summary(&outcome).map(|s| s.stop()), Some(stop));
    }
}

#[test]
fn a_request_with_no_copy_kept_is_not_replayable() {
    let (mut state, _) = state(policy(), get());
    state.request = None;
    let outcome = returned(state.after(status(503)));
    assert_eq!(
        summary(&outcome).map(|s| s.stop()),
        Some(Stop::NotReplayable)
    );
}

#[test]
fn an_empty_budget_refuses_the_retry() {
    let budget = Arc::new(RetryBudget::new(2, 0.1).unwrap());
    let (mut state, _) = state(
        policy().map_options(|o| o.with_budget(Arc::clone(&budget))),
        get(),
    );
    // A full bucket of two: the first 503 leaves one token, half the bucket.
    let outcome = returned(state.after(status(503)));
    assert_eq!(
        summary(&outcome).map(|s| s.stop()),
        Some(Stop::BudgetExhausted)
    );
    assert!(!budget.can_retry());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_wait_that_would_outlast_the_deadline_is_cut_there() {
    let deadline = RequestDeadline::after(Duration::from_millis(5));
    let mut request = get();
    request.extensions_mut().insert(deadline);
    let (mut state, report) = state(policy(), request);
    let outcome = match state.after(status(503)) {
        Next::Cut { until, outcome } => {
            assert_eq!(until, deadline.instant());
            outcome
        }
        other => panic!("expected a cut wait, got {other:?}"),
    };
    let outcome = state.at_deadline(outcome);
    assert_eq!(
        outcome.as_ref().unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    let summary = summary(&outcome).unwrap();
    assert_eq!((summary.get(), summary.stop()), (1, Stop::DeadlinePassed));
    assert!(summary.verdict().is_retry());
    assert_eq!(report.summary(), Some(summary));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_aware_scheduling_refuses_a_wait_with_no_room_for_an_attempt() {
    let mut request = get();
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_millis(100)));
    let (mut state, _) = state(
        policy().map_options(|o| o.deadline_aware(Duration::from_millis(95))),
        request,
    );
    let outcome = returned(state.after(status(503)));
    assert_eq!(
        summary(&outcome).map(|s| s.stop()),
        Some(Stop::WouldMissDeadline)
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_deadline_passed_stops_the_retries() {
    let mut request = get();
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::ZERO));
    let (mut state, _) = state(policy(), request);
    let outcome = returned(state.after(status(503)));
    assert_eq!(
        summary(&outcome).map(|s| s.stop()),
        Some(Stop::DeadlinePassed)
    );
}

#[test]
fn a_readiness_failure_ends_with_the_last_verdict() {
    let (mut state, report) = state(policy(), get());
    assert!(matches!(state.after(status(503)), Next::Retry(_)));
    let error = state
        .not_ready::<&'static str, _>(io::Error::other("pool closed"))
        .unwrap_err();
    assert_eq!(error.to_string(), "pool closed");
    let summary = report.summary().unwrap();
    assert_eq!(summary.stop(), Stop::NotReady);
    assert!(summary.verdict().is_retry());
}

#[test]
fn an_error_outcome_is_judged_and_returned_unchanged() {
    let (mut state, report) = state(policy(), get());
    let outcome = returned(state.after(Err(io::Error::other("reset"))));
    assert_eq!(outcome.unwrap_err().to_string(), "reset");
    assert_eq!(report.summary().map(|s| s.stop()), Some(Stop::Failed));
}
