use super::{error::AttemptTimedOut, AttemptTimeoutLayer};
use crate::test_support::without_timers;
use crate::{deadline::error::DeadlineExceeded, RequestDeadline};
use http::{Request, Response};
use std::time::Duration;
use tokio::time;
use tokio_test::{assert_pending, assert_ready};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};
use tower_test::mock;

type Req = Request<()>;
type Resp = Response<&'static str>;

const LIMIT: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn times_out_with_the_limit() {
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(AttemptTimeoutLayer::new(LIMIT));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut fut = tokio_test::task::spawn(svc.call(Request::new(())));
    assert_pending!(fut.poll());
    let (_req, _send) = handle.next_request().await.unwrap();
    time::advance(LIMIT - Duration::from_millis(1)).await;
    assert_pending!(fut.poll());
    time::advance(Duration::from_millis(1)).await;
    let err = assert_ready!(fut.poll()).unwrap_err();
    assert_eq!(
        err.downcast_ref::<AttemptTimedOut>().unwrap().duration(),
        LIMIT
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn passes_a_timely_response_through() {
    let svc = ServiceBuilder::new()
        .layer(AttemptTimeoutLayer::new(LIMIT))
        .service_fn(|_: Req| async {
            time::sleep(Duration::from_millis(400)).await;
            Ok::<_, std::convert::Infallible>(Response::new("ok"))
        });
    let response = svc.oneshot(Request::new(())).await.unwrap();
    assert_eq!(*response.body(), "ok");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_response_ready_with_the_timer_wins() {
    // The inner service answers at exactly the limit: both timers fire in the
    // same tick, and the response is polled first.
    let svc = ServiceBuilder::new()
        .layer(AttemptTimeoutLayer::new(LIMIT))
        .service_fn(|_: Req| async {
            time::sleep(LIMIT).await;
            Ok::<_, std::convert::Infallible>(Response::new("just in time"))
        });
    let response = svc.oneshot(Request::new(())).await.unwrap();
    assert_eq!(*response.body(), "just in time");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_earlier_deadline_ends_the_attempt_with_the_deadline_error() {
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(AttemptTimeoutLayer::new(LIMIT));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_millis(200)));
    let mut fut = tokio_test::task::spawn(svc.call(request));
    assert_pending!(fut.poll());
    let _pending = handle.next_request().await.unwrap();
    time::advance(Duration::from_millis(200)).await;
    let err = assert_ready!(fut.poll()).unwrap_err();
    let exceeded = err
        .downcast_ref::<DeadlineExceeded>()
        .expect("the deadline's error");
    assert_eq!(exceeded.duration(), Duration::from_millis(200));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_later_deadline_leaves_the_attempt_limit_in_charge() {
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(AttemptTimeoutLayer::new(LIMIT));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_secs(8)));
    let mut fut = tokio_test::task::spawn(svc.call(request));
    assert_pending!(fut.poll());
    let _pending = handle.next_request().await.unwrap();
    time::advance(LIMIT).await;
    let err = assert_ready!(fut.poll()).unwrap_err();
    assert!(err.is::<AttemptTimedOut>(), "{err}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn does_not_send_when_the_deadline_has_passed() {
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(AttemptTimeoutLayer::new(LIMIT));
    handle.allow(1);
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_millis(10)));
    time::advance(Duration::from_millis(10)).await;
    assert_ready!(svc.poll_ready()).unwrap();
    let err = svc.call(request).await.unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_pending!(handle.poll_request(), "nothing was sent");
}

#[test]
fn futures_and_layers_print() {
    let layer = AttemptTimeoutLayer::new(LIMIT);
    assert_eq!(
        format!("{layer:?}"),
        "AttemptTimeoutLayer { limit: 500ms, final_uses_deadline: false }"
    );
}

#[test]
fn an_attempt_answered_at_once_never_touches_the_timer() {
    without_timers().block_on(async {
        let svc = AttemptTimeoutLayer::new(LIMIT).layer(tower::service_fn(|_: Req| async {
            Ok::<_, std::convert::Infallible>(Resp::new("ok"))
        }));
        assert_eq!(svc.oneshot(Request::new(())).await.unwrap().body(), &"ok");
    });
}

#[test]
#[should_panic(expected = "timers are disabled")]
fn an_attempt_left_pending_starts_the_timer() {
    // The counterpart of the test above: an answer after one pending poll.
    without_timers().block_on(async {
        let svc = AttemptTimeoutLayer::new(LIMIT).layer(tower::service_fn(|_: Req| async {
            tokio::task::yield_now().await;
            Ok::<_, std::convert::Infallible>(Resp::new("ok"))
        }));
        let _ = svc.oneshot(Request::new(())).await;
    });
}

/// Calls an `AttemptTimeout` whose inner service answers after one pending
/// poll, on a runtime without timers, with `deadline` on the request.
fn pending_once_under(deadline: RequestDeadline) {
    without_timers().block_on(async {
        let svc = AttemptTimeoutLayer::new(LIMIT).layer(tower::service_fn(|_: Req| async {
            tokio::task::yield_now().await;
            Ok::<_, std::convert::Infallible>(Resp::new("ok"))
        }));
        let mut request = Request::new(());
        request.extensions_mut().insert(deadline);
        assert_eq!(svc.oneshot(request).await.unwrap().body(), &"ok");
    });
}

/// The deadline a `DeadlineLayer` recorded on another request: what a handler
/// finds on its inbound request and copies onto the calls it makes.
fn recorded_by_a_deadline_layer(budget: Duration) -> RequestDeadline {
    let mut seen = None;
    let mut svc =
        crate::deadline::DeadlineLayer::new(budget).layer(tower::service_fn(|request: Req| {
            seen = RequestDeadline::of(&request);
            std::future::ready(Ok::<_, std::convert::Infallible>(Resp::new("ok")))
        }));
    drop(svc.call(Request::new(())));
    seen.expect("the deadline layer records its deadline")
}

#[test]
#[should_panic(expected = "timers are disabled")]
fn a_copied_deadline_before_the_limit_still_gets_the_attempts_timer() {
    // No `DeadlineLayer` is around this attempt: whatever layer recorded the
    // deadline, only the attempt's own timer can end it.
    let deadline = without_timers().block_on(async { recorded_by_a_deadline_layer(LIMIT / 2) });
    pending_once_under(deadline);
}

#[test]
#[should_panic(expected = "timers are disabled")]
fn a_deadline_no_layer_enforces_gets_the_attempts_timer() {
    let deadline = without_timers().block_on(async { RequestDeadline::after(LIMIT / 2) });
    pending_once_under(deadline);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_copied_deadline_ends_a_silent_attempt_with_the_deadlines_error() {
    let budget = Duration::from_millis(700);
    let deadline = recorded_by_a_deadline_layer(budget);
    let svc =
        AttemptTimeoutLayer::new(Duration::from_secs(10)).layer(tower::service_fn(|_: Req| {
            std::future::pending::<Result<Resp, std::convert::Infallible>>()
        }));
    let mut request = Request::new(());
    request.extensions_mut().insert(deadline);
    let start = time::Instant::now();
    let err = svc.oneshot(request).await.unwrap_err();
    assert_eq!(start.elapsed(), budget);
    assert_eq!(
        err.downcast_ref::<DeadlineExceeded>()
            .map(DeadlineExceeded::duration),
        Some(budget)
    );
}
