//! No composition of the layers hangs or ends early: a property on tokio's
//! paused clock, over a scripted upstream.
//!
//! # What a case is
//!
//! - a stack: any subset of `DeadlineLayer`, `StatusRetryLayer`,
//!   `AttemptTimeoutLayer`, `PropagateDeadlineLayer` and
//!   `InheritDeadlineLayer`, in any order, each with its own settings;
//! - a request with no deadline, one inherited (as an inbound server records
//!   it), one copied from the deadline another stack's `DeadlineLayer`
//!   recorded, one already expired, or a timeout header for
//!   `InheritDeadlineLayer` to read;
//! - an upstream script, one step per attempt (the last repeats): after a
//!   latency, a response (200 or 503) whose body arrives or stalls after its
//!   first bytes, no answer at all, a failure before the request was sent (a
//!   refused connection) or after (a reset), or a failure to get ready for
//!   the attempt.
//!
//! # What must hold
//!
//! 1. The call, the reading of the response body included, ends no later
//!    than the smallest limit that applies to it, plus 1 ms (the timer's
//!    granularity). The limits that apply are worked out from the stack
//!    alone, the upstream being free to take forever (see [`Limits`]); a call
//!    to which no limit applies may run until the test's horizon.
//! 2. It never ends with a timeout error before the earliest limit of that
//!    kind that the stack or the request holds.
//! 3. Once it is over, nothing more reaches the upstream, and no attempt,
//!    response body or task is left alive, however far the clock moves.
//! 4. A call the retry layer ends because the upstream failed to get ready
//!    for a retry reports the retryable verdict that led to it.

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    policy::{AnyDecoder, FeignDecoder, FixedDelay, TransientDecoder},
    propagate::{InheritDeadlineLayer, PropagateDeadlineLayer, EXPECTED_RQ_TIMEOUT_MS},
    retry::{RetryPolicy, StatusRetryLayer},
    BoxError, FailureKind, RequestDeadline, RetryReport, Stop,
};
use http_resilience_mock::body::ScriptedBody;
use proptest::{collection::vec, option, prelude::*, sample::select};
use std::{
    io,
    pin::Pin,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::Instant;
use tower::{util::BoxCloneService, Layer, Service, ServiceExt};

/// How long a call may run when no limit applies to it.
const HORIZON: Duration = Duration::from_secs(3600);
/// How far the clock is moved after a call, to catch a stray attempt.
const LATER: Duration = Duration::from_secs(24 * 3600);
/// The timer's granularity on the paused clock.
const GRANULARITY: Duration = Duration::from_millis(1);

type BoxBody = UnsyncBoxBody<Bytes, BoxError>;
pub(crate) type Svc = BoxCloneService<Request<String>, Response<BoxBody>, BoxError>;

// ===== cases =====

/// One layer and its settings.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Part {
    Deadline(Duration),
    Retry {
        feign: bool,
        delay: Duration,
        retries: u32,
    },
    Attempt {
        limit: Duration,
        final_uses_deadline: bool,
    },
    Propagate {
        limit: Option<Duration>,
    },
    Inherit,
}

/// The deadline the request brings.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Given {
    None,
    /// Recorded as an inbound server records it (`RequestDeadline::after`).
    Inherited(Duration),
    /// Copied from the request another stack's `DeadlineLayer` saw.
    Copied(Duration),
    /// Already past.
    Expired,
    /// Only a timeout header, for `InheritDeadlineLayer`.
    Header(Duration),
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Answer {
    Status { code: u16, stall_body: bool },
    Never,
    Refused,
    Reset,
    NotReady,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Step {
    pub(crate) latency: Duration,
    pub(crate) answer: Answer,
}

#[derive(Debug, Clone)]
struct Case {
    /// Outermost first.
    stack: Vec<Part>,
    given: Given,
    script: Vec<Step>,
}

// ===== strategies =====

/// Whole milliseconds in `range`, most often a multiple of 250 ms, so that
/// limits, latencies and waits often land on the same instant.
pub(crate) fn limit(range: std::ops::Range<u64>) -> impl Strategy<Value = Duration> {
    let grid = (range.start.div_ceil(250)..range.end.div_ceil(250))
        .prop_map(|n| Duration::from_millis(n * 250));
    prop_oneof![3 => grid, 1 => range.prop_map(Duration::from_millis)]
}

pub(crate) fn wait(max_ms: u64) -> impl Strategy<Value = Duration> {
    prop_oneof![1 => Just(Duration::ZERO), 3 => limit(0..max_ms)]
}

fn stack() -> impl Strategy<Value = Vec<Part>> {
    let deadline = limit(1..3000).prop_map(Part::Deadline);
    let retry =
        (any::<bool>(), wait(1500), 0u32..4).prop_map(|(feign, delay, retries)| Part::Retry {
            feign,
            delay,
            retries,
        });
    let attempt =
        (limit(1..3000), any::<bool>()).prop_map(|(limit, final_uses_deadline)| Part::Attempt {
            limit,
            final_uses_deadline,
        });
    let propagate = option::of(limit(1..3000)).prop_map(|limit| Part::Propagate { limit });
    (
        option::of(deadline),
        option::of(retry),
        option::of(attempt),
        option::of(propagate),
        option::of(Just(Part::Inherit)),
    )
        .prop_map(|(a, b, c, d, e)| [a, b, c, d, e].into_iter().flatten().collect::<Vec<_>>())
        .prop_shuffle()
}

fn given() -> impl Strategy<Value = Given> {
    prop_oneof![
        Just(Given::None),
        limit(1..3000).prop_map(Given::Inherited),
        limit(1..3000).prop_map(Given::Copied),
        Just(Given::Expired),
        limit(1..3000).prop_map(Given::Header),
    ]
}

pub(crate) fn step() -> impl Strategy<Value = Step> {
    let answer = prop_oneof![
        4 => (select(vec![200u16, 503]), any::<bool>())
            .prop_map(|(code, stall_body)| Answer::Status { code, stall_body }),
        1 => Just(Answer::Never),
        1 => Just(Answer::Refused),
        1 => Just(Answer::Reset),
        1 => Just(Answer::NotReady),
    ];
    (wait(2500), answer).prop_map(|(latency, answer)| Step { latency, answer })
}

fn case() -> impl Strategy<Value = Case> {
    (stack(), given(), vec(step(), 1..5)).prop_map(|(stack, given, script)| Case {
        stack,
        given,
        script,
    })
}

// ===== the limits that apply =====

/// The limits a case's stack and request put on a call, worked out from the
/// layers' documented rules with the upstream free to take forever. All
/// instants count from the start of the call.
///
/// - `DeadlineLayer`: the earlier of its budget and the deadline in force
///   ends the call there, the body included;
/// - `AttemptTimeoutLayer`: the earlier of its limit and the deadline in
///   force ends the attempt's head (a final attempt may run to the deadline);
/// - `InheritDeadlineLayer`: a timeout header becomes the deadline in force
///   when earlier; `PropagateDeadlineLayer` writes that header;
/// - `StatusRetryLayer`: at most `retries + 1` attempts, `delay` apart; no
///   wait outlasts the deadline in force, and no attempt starts after it, so
///   when every attempt is bounded by that deadline (a deadline or attempt
///   layer below), so is the whole.
struct Limits<'a> {
    stack: &'a [Part],
}

impl Limits<'_> {
    /// When the head of a call entering `stack` at `start` comes back at the
    /// latest, with `deadline` in force and `header` in the request; `None`
    /// when nothing bounds it.
    fn head(
        stack: &[Part],
        start: Duration,
        deadline: Option<Duration>,
        header: Option<Duration>,
        retried: bool,
    ) -> Option<Duration> {
        let (part, rest) = stack.split_first()?;
        if deadline.is_some_and(|d| d <= start)
            && matches!(part, Part::Deadline(_) | Part::Attempt { .. })
        {
            return Some(start);
        }
        match *part {
            Part::Deadline(budget) => {
                let d = min(deadline, Some(start + budget));
                min(d, Self::head(rest, start, d, header, retried))
            }
            Part::Attempt {
                limit,
                final_uses_deadline,
            } => {
                let own = match deadline {
                    Some(d) if final_uses_deadline && retried => d,
                    d => min(d, Some(start + limit)).expect("a limit"),
                };
                min(
                    Some(own),
                    Self::head(rest, start, deadline, header, retried),
                )
            }
            Part::Propagate { limit } => {
                let left = deadline.map(|d| d.saturating_sub(start));
                let written = match (left, limit) {
                    (None, None) => header,
                    (left, limit) => min(left, limit),
                };
                Self::head(rest, start, deadline, written, retried)
            }
            Part::Inherit => {
                let d = min(deadline, header.map(|h| start + h));
                Self::head(rest, start, d, header, retried)
            }
            Part::Retry { delay, retries, .. } => {
                let enforced = deadline.filter(|_| {
                    rest.iter()
                        .any(|p| matches!(p, Part::Deadline(_) | Part::Attempt { .. }))
                });
                let mut at = start;
                let mut all = None;
                for n in 0..=retries {
                    match Self::head(rest, at, deadline, header, true) {
                        Some(end) if n == retries => all = Some(end),
                        Some(end) => at = end + delay,
                        None => break,
                    }
                }
                min(all, enforced)
            }
        }
    }

    /// When the whole call, body included, is over at the latest.
    fn call(
        &self,
        deadline: Option<Duration>,
        header: Option<Duration>,
        stalls: bool,
    ) -> Option<Duration> {
        let head = Self::head(self.stack, Duration::ZERO, deadline, header, false)?;
        if !stalls {
            return Some(head);
        }
        // A body that stalls ends at a `DeadlineLayer`'s instant: one outside
        // every retry counts from the call's start, one inside from its
        // attempt's, which is no later than the head.
        let mut inside_retry = false;
        let mut d = deadline;
        let mut body = None;
        for part in self.stack {
            match *part {
                Part::Retry { .. } => inside_retry = true,
                Part::Deadline(budget) => {
                    let from = if inside_retry { head } else { Duration::ZERO };
                    let own = min(d, Some(from + budget));
                    body = min(body, own);
                    if !inside_retry {
                        d = own;
                    }
                }
                _ => {}
            }
        }
        body.map(|b| b.max(head))
    }

    /// The earliest instant a deadline in this case could pass, and the
    /// shortest attempt limit.
    fn earliest(&self, given: Given) -> (Option<Duration>, Option<Duration>) {
        let mut deadline = match given {
            Given::None => None,
            Given::Inherited(d) | Given::Copied(d) | Given::Header(d) => Some(d),
            Given::Expired => Some(Duration::ZERO),
        };
        let mut attempt = None;
        for part in self.stack {
            match *part {
                Part::Deadline(budget) => deadline = min(deadline, Some(budget)),
                Part::Propagate { limit } => deadline = min(deadline, limit),
                Part::Attempt { limit, .. } => attempt = min(attempt, Some(limit)),
                _ => {}
            }
        }
        (deadline, attempt)
    }
}

/// The smaller of two optional instants, where `None` is "never".
fn min(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

// ===== the scripted upstream =====

#[derive(Debug, Default)]
pub(crate) struct Books {
    calls: Mutex<usize>,
    /// Attempts whose futures are alive.
    running: AtomicUsize,
    /// Response bodies alive.
    bodies: AtomicUsize,
}

/// The header by which a request asks the upstream for a lag of that many
/// milliseconds on top of the script's latency.
pub(crate) const LAG_MS: &str = "x-lag-ms";

/// The lag `request` asks for (`LAG_MS`), none when it asks for none.
fn lag_of<B>(request: &Request<B>) -> Duration {
    let ms = request.headers().get(LAG_MS).map(|v| {
        let text = v.to_str().expect("a lag in ASCII digits");
        text.parse().expect("a lag in milliseconds")
    });
    Duration::from_millis(ms.unwrap_or(0))
}

#[derive(Debug, Clone)]
pub(crate) struct Upstream {
    pub(crate) script: Arc<Vec<Step>>,
    pub(crate) books: Arc<Books>,
}

impl Upstream {
    fn step(&self, n: usize) -> Step {
        self.script[n.min(self.script.len() - 1)]
    }

    pub(crate) fn calls(&self) -> usize {
        *self
            .books
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Counts a value as alive for as long as it lives.
struct Alive(Arc<Books>, fn(&Books) -> &AtomicUsize);

impl Alive {
    fn new(books: &Arc<Books>, counter: fn(&Books) -> &AtomicUsize) -> Self {
        counter(books).fetch_add(1, Ordering::SeqCst);
        Self(Arc::clone(books), counter)
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        (self.1)(&self.0).fetch_sub(1, Ordering::SeqCst);
    }
}

/// A response body counted while alive.
struct Counted {
    body: ScriptedBody,
    _alive: Alive,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Pin::new(&mut self.body).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Service<Request<String>> for Upstream {
    type Response = Response<BoxBody>;
    type Error = BoxError;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Response<BoxBody>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        if self.step(self.calls()).answer == Answer::NotReady {
            return Poll::Ready(Err(io::Error::other("the upstream's pool is closed").into()));
        }
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<String>) -> Self::Future {
        let lag = lag_of(&request);
        let step = {
            let mut calls = self
                .books
                .calls
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            *calls += 1;
            self.step(*calls - 1)
        };
        let books = Arc::clone(&self.books);
        Box::pin(async move {
            let _running = Alive::new(&books, |b| &b.running);
            let latency = step.latency + lag;
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            match step.answer {
                Answer::Status { code, stall_body } => {
                    let mut body = ScriptedBody::new().data("ok");
                    if stall_body {
                        body = body.stall();
                    }
                    let body = Counted {
                        body,
                        _alive: Alive::new(&books, |b| &b.bodies),
                    };
                    Ok(Response::builder()
                        .status(code)
                        .body(body.boxed_unsync())
                        .unwrap())
                }
                Answer::Never => std::future::pending().await,
                Answer::Refused | Answer::NotReady => {
                    Err(io::Error::from(io::ErrorKind::ConnectionRefused).into())
                }
                Answer::Reset => Err(io::Error::from(io::ErrorKind::ConnectionReset).into()),
            }
        })
    }
}

// ===== building a stack =====

pub(crate) fn boxed<S, B>(svc: S) -> Svc
where
    S: Service<Request<String>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    BoxCloneService::new(
        svc.map_response(|response: Response<B>| {
            response.map(|b| b.map_err(Into::into).boxed_unsync())
        })
        .map_err(Into::into),
    )
}

/// `parts` around `inner`, the first outermost.
fn build(parts: &[Part], inner: Svc) -> Svc {
    parts.iter().rev().fold(inner, |svc, part| match *part {
        Part::Deadline(budget) => boxed(DeadlineLayer::new(budget).layer(svc)),
        Part::Retry {
            feign,
            delay,
            retries,
        } => {
            let decoder: AnyDecoder = if feign {
                FeignDecoder::new().into()
            } else {
                TransientDecoder::new().into()
            };
            let policy = RetryPolicy::new(decoder, FixedDelay::new(delay, retries));
            boxed(StatusRetryLayer::new(policy).layer(svc))
        }
        Part::Attempt {
            limit,
            final_uses_deadline,
        } => {
            let mut layer = AttemptTimeoutLayer::new(limit);
            if final_uses_deadline {
                layer = layer.final_attempt_uses_deadline();
            }
            boxed(layer.layer(svc))
        }
        Part::Propagate { limit } => {
            let mut layer = PropagateDeadlineLayer::envoy();
            if let Some(limit) = limit {
                layer = layer.with_attempt_limit(limit);
            }
            boxed(layer.layer(svc))
        }
        Part::Inherit => boxed(InheritDeadlineLayer::envoy().layer(svc)),
    })
}

/// The deadline a `DeadlineLayer` of `budget` records on a request, as a
/// handler finds it on its inbound request.
pub(crate) async fn recorded(budget: Duration) -> RequestDeadline {
    let seen = Arc::new(Mutex::new(None));
    let saw = Arc::clone(&seen);
    let svc = DeadlineLayer::new(budget).layer(tower::service_fn(move |request: Request<()>| {
        *saw.lock().unwrap() = RequestDeadline::of(&request);
        std::future::ready(Ok::<_, BoxError>(Response::new(http_body_util::Empty::<
            Bytes,
        >::new())))
    }));
    let _ = svc.oneshot(Request::new(())).await;
    let deadline = seen.lock().unwrap().take();
    deadline.expect("recorded")
}

// ===== the check =====

fn check(case: &Case) -> Result<(), TestCaseError> {
    crate::support::on_paused_clock(run(case))
}

async fn run(case: &Case) -> Result<(), TestCaseError> {
    let upstream = Upstream {
        script: Arc::new(case.script.clone()),
        books: Arc::default(),
    };
    let svc = build(&case.stack, BoxCloneService::new(upstream.clone()));

    let report = RetryReport::new();
    let mut request = Request::new("payload".to_owned());
    request.extensions_mut().insert(report.clone());
    let (deadline, header) = match case.given {
        Given::None => (None, None),
        Given::Inherited(d) => {
            request.extensions_mut().insert(RequestDeadline::after(d));
            (Some(d), None)
        }
        Given::Copied(d) => {
            request.extensions_mut().insert(recorded(d).await);
            (Some(d), None)
        }
        Given::Expired => {
            request
                .extensions_mut()
                .insert(RequestDeadline::at(Instant::now()));
            (Some(Duration::ZERO), None)
        }
        Given::Header(h) => {
            let value = HeaderValue::from(u64::try_from(h.as_millis()).unwrap());
            request.headers_mut().insert(EXPECTED_RQ_TIMEOUT_MS, value);
            (None, Some(h))
        }
    };

    let start = Instant::now();
    let call = async {
        let response = svc.oneshot(request).await?;
        response.into_body().collect().await?;
        Ok::<_, BoxError>(())
    };
    let mut call = Box::pin(call);
    let result = tokio::select! {
        biased;
        result = &mut call => Some(result),
        () = tokio::time::sleep(HORIZON) => None,
    };
    let elapsed = start.elapsed();
    let calls = upstream.calls();
    drop(call);

    // 3. Nothing more reaches the upstream; nothing is left alive.
    tokio::time::sleep(LATER).await;
    prop_assert_eq!(
        upstream.calls(),
        calls,
        "an attempt after the call was over"
    );
    prop_assert_eq!(
        upstream.books.running.load(Ordering::SeqCst),
        0,
        "an attempt left running"
    );
    prop_assert_eq!(
        upstream.books.bodies.load(Ordering::SeqCst),
        0,
        "a response body left alive"
    );
    prop_assert_eq!(
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        0,
        "a task left behind"
    );

    // 1. The call ends by the smallest limit that applies.
    let limits = Limits { stack: &case.stack };
    let stalls = case.script.iter().any(|step| {
        matches!(
            step.answer,
            Answer::Status {
                stall_body: true,
                ..
            }
        )
    });
    if let Some(bound) = limits.call(deadline, header, stalls) {
        prop_assert!(
            result.is_some() && elapsed <= bound + GRANULARITY,
            "the call took {:?} (over: {}), its limits end it by {:?}",
            elapsed,
            result.is_some(),
            bound
        );
    }
    let Some(result) = result else {
        return Ok(());
    };

    // 2. No timeout error before its limit.
    if let Err(err) = &result {
        let (earliest_deadline, shortest_attempt) = limits.earliest(case.given);
        match FailureKind::of(&**err) {
            FailureKind::Deadline => prop_assert!(
                earliest_deadline.is_some_and(|d| elapsed + GRANULARITY >= d),
                "a deadline error after {:?}; the earliest deadline is {:?}",
                elapsed,
                earliest_deadline
            ),
            FailureKind::AttemptTimeout => prop_assert!(
                shortest_attempt.is_some_and(|a| elapsed >= a),
                "an attempt timeout after {:?}; the shortest limit is {:?}",
                elapsed,
                shortest_attempt
            ),
            _ => {}
        }
    }

    // 4. A readiness failure reports the verdict that led to the retry.
    if let Some(summary) = report.summary() {
        if summary.stop() == Stop::NotReady {
            prop_assert!(
                summary.verdict().is_retry(),
                "the readiness failure reports {:?}",
                summary.verdict()
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_composition_hangs_or_ends_early(case in case()) {
        check(&case)?;
    }
}

/// The gateway pattern that once hung: a deadline copied from another
/// stack's request, a retry and a long attempt limit, no `DeadlineLayer`,
/// and an upstream that never answers.
#[test]
fn a_copied_deadline_under_a_retry_and_a_long_attempt_limit() {
    let case = Case {
        stack: vec![
            Part::Retry {
                feign: false,
                delay: Duration::from_millis(10),
                retries: 2,
            },
            Part::Attempt {
                limit: Duration::from_secs(10),
                final_uses_deadline: false,
            },
        ],
        given: Given::Copied(Duration::from_millis(1500)),
        script: vec![Step {
            latency: Duration::ZERO,
            answer: Answer::Never,
        }],
    };
    check(&case).unwrap();
}

/// A readiness failure before the retry of a 503.
#[test]
fn a_readiness_failure_after_a_503() {
    let case = Case {
        stack: vec![Part::Retry {
            feign: false,
            delay: Duration::ZERO,
            retries: 2,
        }],
        given: Given::None,
        script: vec![
            Step {
                latency: Duration::ZERO,
                answer: Answer::Status {
                    code: 503,
                    stall_body: false,
                },
            },
            Step {
                latency: Duration::ZERO,
                answer: Answer::NotReady,
            },
        ],
    };
    check(&case).unwrap();
}
