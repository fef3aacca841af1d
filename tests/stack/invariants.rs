//! The stack's invariants, as properties: on tokio's
//! paused clock, with random upstream latencies, verdicts and delays, the
//! whole stack (`DeadlineLayer` -> `StatusRetryLayer` -> `AttemptTimeoutLayer`)
//! over a scripted upstream keeps every invariant exactly.
//!
//! # What a case is
//!
//! - a request: GET, PUT, DELETE, POST, or POST with an `Idempotency-Key`;
//! - a policy: a decoder (one that retries every retryable-looking outcome,
//!   or the library's transient, Feign or Apache decoder), a retryer (a fixed
//!   delay or exponential backoff, zero delays included, 1 to 6 attempts),
//!   deadline-aware scheduling on or off, and the `retry_sent_requests` and
//!   `statuses_need_idempotency` switches;
//! - a deadline (1 ms to 6 s) and an attempt timeout (1 ms to 4 s), with or
//!   without `final_attempt_uses_deadline`;
//! - a script, one step per attempt (the last step repeats): a latency (0 to
//!   3 s), then a status (200, 404, 429, 500, 502, 503) with an optional
//!   `Retry-After` (seconds, far too many seconds, or garbage), a failure
//!   before the request was sent (a refused connection), a failure after it
//!   was sent (a reset), or no answer at all;
//! - optionally, an instant (0 to 8 s) at which the caller drops the call.
//!
//! # The invariants
//!
//! 1. A request that may have reached the upstream and is not idempotent (a
//!    POST without a key) is never sent again, unless the policy says so:
//!    `retry_sent_requests`, or a status answer with
//!    `statuses_need_idempotency` off. "May have reached" is every attempt
//!    except one that ended with the failure before sending.
//! 2. The upstream sees at most the retryer's maximum of attempts, and
//!    exactly the count the caller reads: [`Attempts`] on a response, the
//!    [`RetryReport`] for an error. (A wait that would end at or after the
//!    deadline is cut there, and the deadline ends the call: no attempt is
//!    counted that the upstream did not see.)
//! 3. Once the call is over (or dropped), nothing more reaches the upstream
//!    and no attempt is left running, however far the clock is advanced.
//! 4. The call ends no later than the deadline plus 1 ms (the timer's
//!    granularity); when it ends with the deadline's error, it ends at or after
//!    the deadline; when it ends at the deadline with another outcome, that
//!    outcome was ready at the same instant (a tie, which the documented
//!    response-first rule gives to the outcome).
//!
//! Proptest shrinks a failure to a small case; failures are not persisted
//! (the tree stays clean): the seed is printed with the failure instead.
//!
//! The header parsers' "never panics on arbitrary bytes" properties for
//! `Retry-After` (`policy::retry_after::delay`) and the timeout headers
//! (`TimeoutFormat::parse`, both formats) live in the library's
//! `retry/properties.rs` and `propagate/properties.rs`; this file adds the one
//! path they miss: `propagate::inherit_deadline`, which turns a parsed value
//! into an instant.

use http::{Method, Request, Response};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    policy::{
        retry_after, AnyDecoder, AnyRetryer, ApacheDecoder, Decoder, ExponentialBackoff,
        FeignDecoder, FixedDelay, Jitter, Retryer, TransientDecoder, Verdict, IDEMPOTENCY_KEY,
    },
    propagate::{inherit_deadline, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT},
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, BoxError, FailureKind, RequestDeadline, RetryReport,
};
use proptest::{collection::vec, option, prelude::*, sample::select};
use std::{
    io,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::{Duration, SystemTime},
};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// How far the clock is advanced after a call, to catch a stray attempt.
const LATER: Duration = Duration::from_secs(24 * 3600);
/// The timer's granularity on the paused clock.
const GRANULARITY: Duration = Duration::from_millis(1);

// ===== cases =====

/// The request's method, and whether it carries an `Idempotency-Key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verb {
    Get,
    Put,
    Delete,
    Post,
    PostWithKey,
}

impl Verb {
    fn request(self, report: &RetryReport) -> Request<String> {
        let method = match self {
            Verb::Get => Method::GET,
            Verb::Put => Method::PUT,
            Verb::Delete => Method::DELETE,
            Verb::Post | Verb::PostWithKey => Method::POST,
        };
        let mut builder = Request::builder().method(method).uri("/value");
        if self == Verb::PostWithKey {
            builder = builder.header(IDEMPOTENCY_KEY, "order-17");
        }
        let mut request = builder.body("payload".to_owned()).unwrap();
        request.extensions_mut().insert(report.clone());
        request
    }

    /// RFC 9110's idempotent methods, and a POST with a key; written out here
    /// rather than asked of the library under test.
    fn is_idempotent(self) -> bool {
        self != Verb::Post
    }
}

/// What one attempt ends with, after its latency.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    /// A response with this status and `Retry-After` value.
    Status(u16, Option<&'static str>),
    /// The connection was refused: the request never left.
    BeforeSend,
    /// The connection was reset after the request was written.
    AfterSend,
    /// No answer, ever.
    Hang,
}

#[derive(Debug, Clone)]
struct Step {
    latency: Duration,
    outcome: Outcome,
}

/// The decoder of a case.
#[derive(Debug, Clone)]
enum Judge {
    /// Retries every status from 429 up and every failure but the deadline,
    /// reading `Retry-After` on any of them: as many retries as any decoder
    /// could ask for.
    Eager,
    /// One of the library's decoders.
    Library(AnyDecoder),
}

impl<B> Decoder<B, BoxError> for Judge {
    fn decode(&self, outcome: &Result<Response<B>, BoxError>) -> Verdict {
        match (self, outcome) {
            (Judge::Library(decoder), outcome) => decoder.decode(outcome),
            (Judge::Eager, Ok(response)) if response.status().as_u16() >= 429 => {
                let verdict = Verdict::retry(response.status());
                match retry_after::delay(response.headers(), SystemTime::now()) {
                    Some(Ok(delay)) => verdict.after(delay),
                    _ => verdict,
                }
            }
            (Judge::Eager, Ok(_)) => Verdict::Accept,
            (Judge::Eager, Err(err)) => match FailureKind::of(&**err) {
                FailureKind::Deadline => Verdict::fail(FailureKind::Deadline),
                kind => Verdict::retry(kind),
            },
        }
    }
}

#[derive(Debug, Clone)]
struct Policy {
    decoder: Judge,
    retryer: AnyRetryer,
    deadline_aware: Option<Duration>,
    retry_sent_requests: bool,
    statuses_need_idempotency: bool,
}

#[derive(Debug, Clone)]
struct Case {
    verb: Verb,
    policy: Policy,
    deadline: Duration,
    attempt_timeout: Duration,
    final_uses_deadline: bool,
    script: Vec<Step>,
    drop_at: Option<Duration>,
}

// ===== strategies =====

fn ms(range: std::ops::Range<u64>) -> impl Strategy<Value = Duration> {
    range.prop_map(Duration::from_millis)
}

/// A duration in `range` milliseconds, most often a multiple of 250 ms, so
/// that sums of latencies, waits and limits often land on the same instant:
/// the ties between an outcome and a timer are where the rules are subtle.
fn limit(range: std::ops::Range<u64>) -> impl Strategy<Value = Duration> {
    let grid = (range.start.div_ceil(250)..range.end.div_ceil(250))
        .prop_map(|n| Duration::from_millis(n * 250));
    prop_oneof![3 => grid, 1 => ms(range)]
}

/// A wait or latency, zero about a quarter of the time.
fn wait(max_ms: u64) -> impl Strategy<Value = Duration> {
    prop_oneof![1 => Just(Duration::ZERO), 3 => limit(0..max_ms)]
}

fn verb() -> impl Strategy<Value = Verb> {
    select(vec![
        Verb::Get,
        Verb::Put,
        Verb::Delete,
        Verb::Post,
        Verb::PostWithKey,
    ])
}

fn outcome() -> impl Strategy<Value = Outcome> {
    let status = select(vec![200u16, 404, 429, 500, 502, 503]);
    let retry_after = option::of(select(vec![
        "0",
        "1",
        "3",
        "120",
        "99999999999999999999",
        "soon",
        "-1",
    ]));
    prop_oneof![
        4 => (status, retry_after).prop_map(|(code, after)| Outcome::Status(code, after)),
        1 => Just(Outcome::BeforeSend),
        1 => Just(Outcome::AfterSend),
        1 => Just(Outcome::Hang),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (wait(3000), outcome()).prop_map(|(latency, outcome)| Step { latency, outcome })
}

fn retryer() -> impl Strategy<Value = AnyRetryer> {
    let jitter = select(vec![
        Jitter::None,
        Jitter::Full,
        Jitter::Equal,
        Jitter::Decorrelated,
    ]);
    prop_oneof![
        (wait(1000), 0u32..6, option::of(limit(0..5000))).prop_map(|(delay, retries, cap)| {
            let fixed = FixedDelay::new(delay, retries);
            match cap {
                Some(cap) => fixed.with_max_delay(cap).into(),
                None => fixed.into(),
            }
        }),
        (
            wait(500),
            1.0f64..3.0,
            limit(0..2000),
            1u32..7,
            jitter,
            any::<u64>()
        )
            .prop_map(|(initial, multiplier, extra, attempts, jitter, seed)| {
                ExponentialBackoff::new(initial, multiplier, initial + extra, attempts)
                    .expect("a valid backoff")
                    .with_jitter(jitter)
                    .with_seed(seed)
                    .into()
            }),
    ]
}

fn decoder() -> impl Strategy<Value = Judge> {
    prop_oneof![
        3 => Just(Judge::Eager),
        1 => Just(Judge::Library(TransientDecoder::new().into())),
        1 => Just(Judge::Library(FeignDecoder::new().into())),
        1 => Just(Judge::Library(ApacheDecoder::new().into())),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        decoder(),
        retryer(),
        option::of(limit(0..1000)),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(decoder, retryer, deadline_aware, retry_sent_requests, statuses_need_idempotency)| {
                Policy {
                    decoder,
                    retryer,
                    deadline_aware,
                    retry_sent_requests,
                    statuses_need_idempotency,
                }
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (
        verb(),
        policy(),
        limit(1..6000),
        limit(1..4000),
        any::<bool>(),
        vec(step(), 1..6),
        option::of(limit(0..8000)),
    )
        .prop_map(
            |(verb, policy, deadline, attempt_timeout, final_uses_deadline, script, drop_at)| {
                Case {
                    verb,
                    policy,
                    deadline,
                    attempt_timeout,
                    final_uses_deadline,
                    script,
                    drop_at,
                }
            },
        )
}

// ===== the scripted upstream =====

/// One attempt as the upstream saw it.
#[derive(Debug, Clone)]
struct Seen {
    outcome: Outcome,
    /// When the attempt's outcome was ready; `None` if it never was (it hung,
    /// or was cut short).
    ended: Option<Instant>,
}

/// What the upstream saw, shared with its clones.
#[derive(Debug, Default)]
struct Upstream {
    seen: Mutex<Vec<Seen>>,
    /// Attempts whose futures are still alive.
    running: AtomicUsize,
}

impl Upstream {
    fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn calls(&self) -> usize {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Counts an attempt as running for as long as its future lives.
struct Running(Arc<Upstream>);

impl Running {
    fn new(upstream: &Arc<Upstream>) -> Self {
        upstream.running.fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(upstream))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The answer of attempt `index`, after its latency.
async fn answer(
    upstream: Arc<Upstream>,
    index: usize,
    step: Step,
) -> Result<Response<String>, BoxError> {
    let _running = Running::new(&upstream);
    if !step.latency.is_zero() {
        tokio::time::sleep(step.latency).await;
    }
    let result = match step.outcome {
        Outcome::Status(code, after) => {
            let mut response = Response::builder().status(code);
            if let Some(after) = after {
                response = response.header(http::header::RETRY_AFTER, after);
            }
            Ok(response.body(String::new()).unwrap())
        }
        Outcome::BeforeSend => Err(io::Error::from(io::ErrorKind::ConnectionRefused).into()),
        Outcome::AfterSend => Err(io::Error::from(io::ErrorKind::ConnectionReset).into()),
        Outcome::Hang => std::future::pending().await,
    };
    upstream.seen.lock().unwrap_or_else(PoisonError::into_inner)[index].ended =
        Some(Instant::now());
    result
}

// ===== the check =====

/// Runs one case on a fresh paused runtime.
fn check(case: &Case) -> Result<(), TestCaseError> {
    crate::support::on_paused_clock(run(case))
}

async fn run(case: &Case) -> Result<(), TestCaseError> {
    let upstream = Arc::new(Upstream::default());
    let script = Arc::new(case.script.clone());
    let inner = {
        let upstream = Arc::clone(&upstream);
        tower::service_fn(move |_request: Request<String>| {
            let (index, step) = {
                let mut seen = upstream.seen.lock().unwrap_or_else(PoisonError::into_inner);
                // NOTE: the last step repeats for every later attempt.
                let step = script[seen.len().min(script.len() - 1)].clone();
                seen.push(Seen {
                    outcome: step.outcome.clone(),
                    ended: None,
                });
                (seen.len() - 1, step)
            };
            answer(Arc::clone(&upstream), index, step)
        })
    };

    let p = &case.policy;
    let max_attempts = p
        .retryer
        .max_attempts()
        .expect("every retryer here is bounded");
    let mut retry = RetryPolicy::new(p.decoder.clone(), p.retryer.clone())
        .retry_sent_requests(p.retry_sent_requests)
        .statuses_need_idempotency(p.statuses_need_idempotency);
    if let Some(margin) = p.deadline_aware {
        retry = retry.map_options(|o| o.deadline_aware(margin));
    }
    let mut attempt = AttemptTimeoutLayer::new(case.attempt_timeout);
    if case.final_uses_deadline {
        attempt = attempt.final_attempt_uses_deadline();
    }
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(case.deadline))
        .layer(StatusRetryLayer::new(retry))
        .layer(attempt)
        .service(inner);

    let report = RetryReport::new();
    let start = Instant::now();
    // NOTE: boxed, so that dropping it below drops the call itself.
    let mut call = Box::pin(svc.oneshot(case.verb.request(&report)));
    let result = match case.drop_at {
        Some(at) => tokio::select! {
            biased;
            result = &mut call => Some(result),
            () = tokio::time::sleep(at) => None,
        },
        None => Some(call.as_mut().await),
    };
    let end = Instant::now();
    // NOTE: counted before the drop, so that an attempt made while dropping
    // the call counts as one after it.
    let calls = upstream.calls();
    drop(call);

    // Invariant 3: nothing more reaches the upstream, nothing is left running.
    tokio::time::sleep(LATER).await;
    prop_assert_eq!(
        upstream.calls(),
        calls,
        "an attempt after the call was over"
    );
    prop_assert_eq!(
        upstream.running.load(Ordering::SeqCst),
        0,
        "an attempt still running after the call was over"
    );

    let seen = upstream.seen();
    // Invariant 1: a request that may have reached the upstream is sent
    // again only when it is idempotent or the policy allows it.
    if !case.verb.is_idempotent() && !p.retry_sent_requests {
        for (n, attempt) in seen.iter().enumerate().take(seen.len().saturating_sub(1)) {
            let unsent = attempt.ended.is_some() && attempt.outcome == Outcome::BeforeSend;
            let answered =
                attempt.ended.is_some() && matches!(attempt.outcome, Outcome::Status(..));
            prop_assert!(
                unsent || (answered && !p.statuses_need_idempotency),
                "attempt {} of a POST without a key may have reached the upstream ({:?}), \
                 and was sent again",
                n + 1,
                attempt
            );
        }
    }

    // Invariant 2: never more attempts than allowed, and the count the caller reads.
    prop_assert!(
        seen.len() <= max_attempts as usize,
        "{} attempts, at most {} allowed",
        seen.len(),
        max_attempts
    );
    let Some(result) = result else {
        // Dropped: the caller reads nothing; invariant 3 was checked above.
        prop_assert!(end - start <= case.deadline + GRANULARITY);
        return Ok(());
    };
    let made = seen.len() as u32;
    let kind = result.as_ref().err().map(|err| FailureKind::of(&**err));
    match &result {
        Ok(response) => prop_assert_eq!(Attempts::of(response), made),
        Err(_) if kind == Some(FailureKind::Deadline) => {
            // The deadline may cut the call at any point (the retry layer's
            // summary is then never written).
            let counted = report.attempts();
            prop_assert!(
                counted == made,
                "report says {}, the upstream saw {}",
                counted,
                made
            );
            if let Some(summary) = report.summary() {
                prop_assert_eq!(summary.get(), counted);
            }
        }
        Err(_) => {
            prop_assert_eq!(report.attempts(), made);
            prop_assert_eq!(report.summary().map(|s| s.get()), Some(made));
        }
    }

    // Invariant 4: the deadline holds, to the timer's granularity.
    let elapsed = end - start;
    prop_assert!(
        elapsed <= case.deadline + GRANULARITY,
        "the call took {:?}, the deadline is {:?}",
        elapsed,
        case.deadline
    );
    if kind == Some(FailureKind::Deadline) {
        prop_assert!(
            elapsed >= case.deadline,
            "a deadline error after {:?}, before the deadline {:?}",
            elapsed,
            case.deadline
        );
    } else if elapsed >= case.deadline {
        prop_assert!(
            seen.iter().any(|attempt| attempt.ended == Some(end)),
            "the call ended at the deadline ({:?}) with {:?}, and no attempt was ready then",
            elapsed,
            kind
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_stack_keeps_its_invariants(case in case()) {
        check(&case)?;
    }

    #[test]
    fn inheriting_a_deadline_from_arbitrary_bytes_never_panics(
        bytes in vec(any::<u8>(), 0..32),
        grpc in any::<bool>(),
        earlier in option::of(ms(0..100_000)),
    ) {
        let (header, format) = if grpc {
            (GRPC_TIMEOUT, TimeoutFormat::Grpc)
        } else {
            (EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis)
        };
        let Ok(value) = http::HeaderValue::from_bytes(&bytes) else {
            return Ok(());
        };
        let mut request = Request::builder().header(&header, value).body(()).unwrap();
        let existing = earlier.map(RequestDeadline::after);
        if let Some(existing) = existing {
            request.extensions_mut().insert(existing);
        }
        match inherit_deadline(&mut request, &header, format) {
            Ok(in_force) => {
                let in_force = in_force.expect("the header is there");
                prop_assert_eq!(RequestDeadline::of(&request), Some(in_force));
                if let Some(existing) = existing {
                    prop_assert!(in_force.instant() <= existing.instant());
                }
            }
            // A malformed value leaves the extensions as they were.
            Err(_) => prop_assert_eq!(RequestDeadline::of(&request), existing),
        }
    }
}
