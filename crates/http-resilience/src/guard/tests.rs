//! A guard of the tests' own, plugged into every form through the one
//! interface: it counts what the engine asks of it, and can hold attempts
//! back or turn them away.

use super::{sealed, Ask, GuardLayer};
use crate::{
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::{FixedDelay, StatusDecoder, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    AttemptTimeoutLayer, Attempts, BoxError, DeadlineLayer, RequestDeadline, ResiliencePolicy,
};
use http::{Request, Response};
use std::{
    convert::Infallible,
    fmt,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex,
    },
    task::{Context, Poll, Waker},
    time::Duration,
};
use tokio::time;
use tower::{ServiceBuilder, ServiceExt};

const MS: Duration = Duration::from_millis(1);

/// What the engine asked of the guard.
#[derive(Default)]
struct Counts {
    passes: AtomicU32,
    admitted: AtomicU32,
    settled: AtomicU32,
    // Passes dropped or released while holding an admission not settled.
    given_back: AtomicU32,
    // While set, every attempt waits until it is cleared.
    closed: AtomicBool,
    waiting: Mutex<Vec<Waker>>,
    // While set, every attempt is turned away.
    refusing: AtomicBool,
}

#[derive(Clone, Default)]
struct Counting(Arc<Counts>);

struct Pass {
    counts: Arc<Counts>,
    held: bool,
}

/// The error the guard turns attempts away with.
#[derive(Debug)]
struct TurnedAway;

impl fmt::Display for TurnedAway {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("turned away by the test's guard")
    }
}

impl std::error::Error for TurnedAway {}

impl Counting {
    fn count(&self, of: impl Fn(&Counts) -> &AtomicU32) -> u32 {
        of(&self.0).load(Ordering::SeqCst)
    }

    fn open(&self) {
        self.0.closed.store(false, Ordering::SeqCst);
        for waker in self.0.waiting.lock().unwrap().drain(..) {
            waker.wake();
        }
    }
}

impl Pass {
    fn try_admit(&mut self) -> Poll<Result<(), BoxError>> {
        if self.counts.refusing.load(Ordering::SeqCst) {
            return Poll::Ready(Err(TurnedAway.into()));
        }
        if self.counts.closed.load(Ordering::SeqCst) {
            return Poll::Pending;
        }
        self.counts.admitted.fetch_add(1, Ordering::SeqCst);
        self.held = true;
        Poll::Ready(Ok(()))
    }

    fn give_back(&mut self) {
        if std::mem::take(&mut self.held) {
            self.counts.given_back.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        self.give_back();
    }
}

impl sealed::Sealed for Counting {
    type Local = ();
    type Pass = Pass;

    fn pass_for<B>(&self, (): &mut (), _: &http::Request<B>) -> Pass {
        self.0.passes.fetch_add(1, Ordering::SeqCst);
        Pass {
            counts: Arc::clone(&self.0),
            held: false,
        }
    }

    fn admit(pass: &mut Pass, _: &mut Ask) -> Poll<Result<(), BoxError>> {
        pass.try_admit()
    }

    fn poll_admit(
        pass: &mut Pass,
        _: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        let asked = pass.try_admit();
        if asked.is_pending() {
            pass.counts.waiting.lock().unwrap().push(cx.waker().clone());
        }
        asked
    }

    fn release(pass: &mut Pass) {
        pass.give_back();
    }
}

impl<T> sealed::SealedSettle<T> for Counting {
    fn settle(pass: &mut Pass, _: &Result<http::Response<T>, BoxError>) {
        if std::mem::take(&mut pass.held) {
            pass.counts.settled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// An upstream that answers 503 twice, then 200, counting its calls.
fn flaky(
    calls: &Arc<AtomicU32>,
) -> impl Fn(Request<String>) -> std::future::Ready<Result<Response<String>, Infallible>> + Clone {
    let calls = Arc::clone(calls);
    move |_| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let status = if n < 2 { 503 } else { 200 };
        std::future::ready(Ok(Response::builder()
            .status(status)
            .body(String::new())
            .unwrap()))
    }
}

fn retry() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(10 * MS, 2),
    )
}

fn get() -> Request<String> {
    Request::get("http://api.test/")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_of_its_own_sees_every_attempt_of_the_three_layers() {
    let (guard, calls) = (Counting::default(), Arc::new(AtomicU32::new(0)));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(8)))
        .layer(StatusRetryLayer::new(retry()))
        .layer(GuardLayer::new(guard.clone()))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service_fn(flaky(&calls));
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(
        (response.status().as_u16(), Attempts::of(&response)),
        (200, 3)
    );
    let counts = [
        guard.count(|c| &c.passes),
        guard.count(|c| &c.admitted),
        guard.count(|c| &c.settled),
        guard.count(|c| &c.given_back),
    ];
    assert_eq!(counts, [3, 3, 3, 0], "a pass per attempt, each settled");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_of_its_own_sees_every_attempt_of_the_combined_service() {
    let (guard, calls) = (Counting::default(), Arc::new(AtomicU32::new(0)));
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry())
        .unwrap()
        .with_guard(guard.clone());
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service_fn(flaky(&calls));
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(
        (response.status().as_u16(), Attempts::of(&response)),
        (200, 3)
    );
    let counts = [
        guard.count(|c| &c.passes),
        guard.count(|c| &c.admitted),
        guard.count(|c| &c.settled),
        guard.count(|c| &c.given_back),
    ];
    assert_eq!(
        counts,
        [1, 3, 3, 0],
        "one pass per call, each attempt settled"
    );
}

/// Holds a call back until the guard opens, then lets it through; then
/// holds one back past its deadline, which ends it unsent.
async fn holds_back<S, B>(svc: S, guard: &Counting, calls: &Arc<AtomicU32>, form: &str)
where
    S: tower::Service<Request<String>, Response = Response<B>, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    guard.0.closed.store(true, Ordering::SeqCst);
    let call = tokio::spawn(svc.clone().oneshot(get()));
    time::sleep(Duration::from_secs(1)).await;
    assert_eq!(calls.load(Ordering::SeqCst), 0, "{form}: held back");
    guard.open();
    let response = call.await.unwrap().unwrap();
    assert_eq!(response.status(), 200, "{form}");
    assert_eq!(calls.load(Ordering::SeqCst), 3, "{form}");

    guard.0.closed.store(true, Ordering::SeqCst);
    let Err(err) = svc.oneshot(get()).await else {
        panic!("{form}: held back past its deadline, the call ends");
    };
    assert_eq!(
        crate::FailureKind::of(&*err),
        crate::FailureKind::Deadline,
        "{form}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3, "{form}: never sent");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_that_holds_attempts_back_delays_them_within_the_deadline_in_both_forms() {
    let (guard, calls) = (Counting::default(), Arc::new(AtomicU32::new(0)));
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry())
        .unwrap()
        .with_guard(guard.clone());
    let combined = ServiceBuilder::new()
        .layer(policy.layer())
        .service_fn(flaky(&calls));
    holds_back(combined, &guard, &calls, "combined").await;

    let (guard, calls) = (Counting::default(), Arc::new(AtomicU32::new(0)));
    let layers = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(8)))
        .layer(StatusRetryLayer::new(retry()))
        .layer(GuardLayer::new(guard.clone()))
        .service_fn(flaky(&calls));
    holds_back(layers, &guard, &calls, "three layers").await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_that_turns_attempts_away_keeps_them_unsent_in_both_forms() {
    let guard = Counting::default();
    guard.0.refusing.store(true, Ordering::SeqCst);
    let calls = Arc::new(AtomicU32::new(0));
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry())
        .unwrap()
        .with_guard(guard.clone());
    let combined = ServiceBuilder::new()
        .layer(policy.layer())
        .service_fn(flaky(&calls));
    let err = combined.oneshot(get()).await.unwrap_err();
    assert!(crate::errors::find::<TurnedAway>(&*err).is_some(), "{err}");
    let layers = ServiceBuilder::new()
        .layer(StatusRetryLayer::new(retry()))
        .layer(GuardLayer::new(guard.clone()))
        .service_fn(flaky(&calls));
    let err = layers.oneshot(get()).await.unwrap_err();
    assert!(crate::errors::find::<TurnedAway>(&*err).is_some(), "{err}");
    assert_eq!(calls.load(Ordering::SeqCst), 0, "never sent");
    assert_eq!(guard.count(|c| &c.admitted), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_of_its_own_below_a_hedge_sees_every_copy_and_gets_the_losers_back() {
    let guard = Counting::default();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(50 * MS), 2).unwrap();
    let svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(policy))
        .layer(GuardLayer::new(guard.clone()))
        .service_fn(move |_: Request<String>| {
            let first = counted.fetch_add(1, Ordering::SeqCst) == 0;
            async move {
                let latency = if first { Duration::from_secs(10) } else { MS };
                time::sleep(latency).await;
                Ok::<_, Infallible>(Response::new(String::from(if first {
                    "slow"
                } else {
                    "fast"
                })))
            }
        });
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(response.body(), "fast");
    let counts = [
        guard.count(|c| &c.passes),
        guard.count(|c| &c.admitted),
        guard.count(|c| &c.settled),
        guard.count(|c| &c.given_back),
    ];
    assert_eq!(
        counts,
        [2, 2, 1, 1],
        "the winner settled, the loser given back"
    );
}

/// A guard of the tests' own that stands for the upstream: it answers the
/// attempts it is given in the upstream's place, with a 503 (or, with
/// `refusing_connections`, a refused connection), and lets the others
/// through.
#[derive(Clone)]
struct Answering {
    // How many attempts it still answers.
    left: Arc<AtomicU32>,
    refusing_connections: bool,
}

struct AnswerPass {
    left: Arc<AtomicU32>,
    refusing_connections: bool,
    answering: bool,
}

/// What the answering guard keeps an attempt from the upstream with.
#[derive(Debug)]
struct Kept;

impl fmt::Display for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("answered by the test's guard")
    }
}

impl std::error::Error for Kept {}

impl Answering {
    fn first(n: u32) -> Self {
        Self {
            left: Arc::new(AtomicU32::new(n)),
            refusing_connections: false,
        }
    }
}

impl sealed::Sealed for Answering {
    type Local = ();
    type Pass = AnswerPass;

    fn pass_for<B>(&self, (): &mut (), _: &http::Request<B>) -> AnswerPass {
        AnswerPass {
            left: Arc::clone(&self.left),
            refusing_connections: self.refusing_connections,
            answering: false,
        }
    }

    fn admit(pass: &mut AnswerPass, _: &mut Ask) -> Poll<Result<(), BoxError>> {
        let take = |left: u32| left.checked_sub(1);
        pass.answering = pass
            .left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, take)
            .is_ok();
        Poll::Ready(if pass.answering {
            Err(Kept.into())
        } else {
            Ok(())
        })
    }

    fn poll_admit(
        pass: &mut AnswerPass,
        deadline: Option<RequestDeadline>,
        _: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        Self::admit(pass, &mut Ask::new(deadline, None))
    }

    fn release(pass: &mut AnswerPass) {
        pass.answering = false;
    }

    fn answers(pass: &AnswerPass) -> bool {
        pass.answering
    }
}

impl<T: Default> sealed::SealedSettle<T> for Answering {
    fn settle(_: &mut AnswerPass, _: &Result<http::Response<T>, BoxError>) {}

    fn answer(pass: &mut AnswerPass, kept: BoxError) -> Result<http::Response<T>, BoxError> {
        if !std::mem::take(&mut pass.answering) {
            return Err(kept);
        }
        if pass.refusing_connections {
            return Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into());
        }
        Ok(Response::builder().status(503).body(T::default()).unwrap())
    }
}

/// An upstream that answers 200, counting its calls.
fn healthy(
    calls: &Arc<AtomicU32>,
) -> impl Fn(Request<String>) -> std::future::Ready<Result<Response<String>, Infallible>> + Clone {
    let calls = Arc::clone(calls);
    move |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(Response::new(String::from("upstream"))))
    }
}

/// What the counting guard heard: passes, admitted, settled, given back.
fn heard(guard: &Counting) -> [u32; 4] {
    [
        guard.count(|c| &c.passes),
        guard.count(|c| &c.admitted),
        guard.count(|c| &c.settled),
        guard.count(|c| &c.given_back),
    ]
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_that_answers_stands_for_the_upstream_in_both_forms() {
    let (counting, calls) = (Counting::default(), Arc::new(AtomicU32::new(0)));
    let pair = (counting.clone(), Answering::first(2));
    let layers = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(8)))
        .layer(StatusRetryLayer::new(retry()))
        .layer(GuardLayer::new(pair))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service_fn(healthy(&calls));
    let response = layers.oneshot(get()).await.unwrap();
    assert_eq!(
        (response.status().as_u16(), Attempts::of(&response)),
        (200, 3),
        "three layers: two answers of the guard's, retried, then the upstream's"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "only the third was sent");
    assert_eq!(
        heard(&counting),
        [3, 3, 3, 0],
        "the guard before it heard every answer"
    );

    let (counting, calls) = (Counting::default(), Arc::new(AtomicU32::new(0)));
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry())
        .unwrap()
        .with_guard((counting.clone(), Answering::first(2)));
    let combined = ServiceBuilder::new()
        .layer(policy.layer())
        .service_fn(healthy(&calls));
    let response = combined.oneshot(get()).await.unwrap();
    assert_eq!(
        (response.status().as_u16(), Attempts::of(&response)),
        (200, 3),
        "combined"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "combined: only the third was sent"
    );
    assert_eq!(
        heard(&counting),
        [1, 3, 3, 0],
        "combined: every answer heard"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_answers_with_a_transport_error_that_the_decoder_judges_as_the_real_one() {
    let calls = Arc::new(AtomicU32::new(0));
    let refusing = Answering {
        left: Arc::new(AtomicU32::new(1)),
        refusing_connections: true,
    };
    let policy = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(10 * MS, 2));
    let svc = ServiceBuilder::new()
        .layer(StatusRetryLayer::new(policy))
        .layer(GuardLayer::new(refusing))
        .service_fn(healthy(&calls));
    let response = svc.oneshot(get()).await.unwrap();
    // NOTE: a refused connection was never sent: the transient decoder
    // retries it, as it would one of the transport's.
    assert_eq!(
        (response.status().as_u16(), Attempts::of(&response)),
        (200, 2)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_guard_that_answers_below_a_hedge_answers_a_copy() {
    let (counting, calls) = (Counting::default(), Arc::new(AtomicU32::new(0)));
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(50 * MS), 2).unwrap();
    let svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(policy))
        .layer(GuardLayer::new((counting.clone(), Answering::first(1))))
        .service_fn(healthy(&calls));
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(
        response.body(),
        "upstream",
        "the answered 503 was not fatal"
    );
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(heard(&counting), [2, 2, 2, 0]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_inner_refusal_gives_back_what_the_outer_guard_of_a_pair_holds() {
    let counting = Counting::default();
    let refusing = Counting::default();
    refusing.0.refusing.store(true, Ordering::SeqCst);
    let calls = Arc::new(AtomicU32::new(0));
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new((counting.clone(), refusing)))
        .service_fn(healthy(&calls));
    let err = svc.oneshot(get()).await.unwrap_err();
    assert!(crate::errors::find::<TurnedAway>(&*err).is_some(), "{err}");
    assert_eq!(heard(&counting), [1, 1, 0, 1], "given back, not settled");
}
