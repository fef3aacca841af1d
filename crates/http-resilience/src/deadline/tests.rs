use super::{error::DeadlineExceeded, Deadline, DeadlineLayer};
use crate::test_support::without_timers;
use crate::RequestDeadline;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use http_resilience_mock::body::ScriptedBody;
use std::{convert::Infallible, time::Duration};
use tokio::time::{self, Instant};
use tokio_test::{assert_pending, assert_ready};
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_test::mock;

type Req = Request<()>;

const BUDGET: Duration = Duration::from_secs(2);

/// A service that reports the deadline it saw and answers with `body`.
fn echo_deadline(
    body: ScriptedBody,
) -> impl tower::Service<Req, Response = Response<ScriptedBody>, Error = Infallible> + Clone {
    tower::service_fn(move |request: Req| {
        let seen = RequestDeadline::of(&request);
        let body = body.clone();
        async move {
            let mut response = Response::new(body);
            response.extensions_mut().insert(seen);
            Ok(response)
        }
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn records_the_deadline_in_the_request() {
    let start = Instant::now();
    let svc = Deadline::new(echo_deadline(ScriptedBody::new()), BUDGET);
    let response = svc.oneshot(Request::new(())).await.unwrap();
    let seen = response
        .extensions()
        .get::<Option<RequestDeadline>>()
        .unwrap()
        .unwrap();
    assert_eq!(seen.instant(), start + BUDGET);
    assert_eq!(seen.budget(), BUDGET);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_earlier_inherited_deadline_wins() {
    let start = Instant::now();
    let svc = Deadline::new(echo_deadline(ScriptedBody::new()), BUDGET);
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_millis(700)));
    let response = svc.clone().oneshot(request).await.unwrap();
    let seen = response
        .extensions()
        .get::<Option<RequestDeadline>>()
        .unwrap()
        .unwrap();
    assert_eq!(seen.instant(), start + Duration::from_millis(700));

    // A later inherited deadline loses to the layer's own.
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_secs(60)));
    let response = svc.oneshot(request).await.unwrap();
    let seen = response
        .extensions()
        .get::<Option<RequestDeadline>>()
        .unwrap()
        .unwrap();
    assert_eq!(seen.instant(), start + BUDGET);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn fails_a_call_still_running_at_the_deadline() {
    let (mut svc, mut handle) =
        mock::spawn_layer::<Req, Response<ScriptedBody>, _>(DeadlineLayer::new(BUDGET));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut fut = tokio_test::task::spawn(svc.call(Request::new(())));
    assert_pending!(fut.poll());
    let _pending = handle.next_request().await.unwrap();
    time::advance(BUDGET - Duration::from_millis(1)).await;
    assert_pending!(fut.poll());
    time::advance(Duration::from_millis(1)).await;
    let err = assert_ready!(fut.poll()).unwrap_err();
    assert_eq!(
        err.downcast_ref::<DeadlineExceeded>().unwrap().duration(),
        BUDGET
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn bounds_the_body_too() {
    // The head comes at once; the body drips past the deadline.
    let body = ScriptedBody::new()
        .data("first ")
        .wait(Duration::from_millis(1500))
        .data("second ")
        .wait(Duration::from_millis(1500))
        .data("too late");
    let svc = Deadline::new(echo_deadline(body), BUDGET);
    let mut body = svc.oneshot(Request::new(())).await.unwrap().into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, Bytes::from_static(b"first "));
    let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(second, Bytes::from_static(b"second "));
    let err = body.frame().await.unwrap().unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert!(
        body.frame().await.is_none(),
        "the body ends after the error"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_body_read_in_time_is_complete() {
    let body = ScriptedBody::new()
        .data("a")
        .wait(Duration::from_millis(1900))
        .data("b");
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(BUDGET))
        .service(echo_deadline(body));
    let body = svc.oneshot(Request::new(())).await.unwrap().into_body();
    assert_eq!(body.collect().await.unwrap().to_bytes(), "ab");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_frame_read_late_fails_but_a_complete_body_ends() {
    // Every byte has arrived; the caller reads the body after the deadline.
    let svc = Deadline::new(echo_deadline(ScriptedBody::new().data("late")), BUDGET);
    let mut body = svc.oneshot(Request::new(())).await.unwrap().into_body();
    time::sleep(BUDGET).await;
    let err = body.frame().await.unwrap().unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");

    // The same body with its one frame read in time: its end, read late,
    // is the end of a complete body.
    let svc = Deadline::new(echo_deadline(ScriptedBody::new().data("in time")), BUDGET);
    let mut body = svc.oneshot(Request::new(())).await.unwrap().into_body();
    let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(frame, Bytes::from_static(b"in time"));
    time::sleep(BUDGET).await;
    assert!(body.frame().await.is_none(), "the end is not late");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_expired_inherited_deadline_fails_without_calling() {
    let (mut svc, mut handle) =
        mock::spawn_layer::<Req, Response<ScriptedBody>, _>(DeadlineLayer::new(BUDGET));
    handle.allow(1);
    let mut request = Request::new(());
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_millis(5)));
    time::advance(Duration::from_millis(5)).await;
    assert_ready!(svc.poll_ready()).unwrap();
    let err = svc.call(request).await.unwrap_err();
    assert_eq!(
        err.downcast_ref::<DeadlineExceeded>().unwrap().duration(),
        Duration::from_millis(5)
    );
    assert_pending!(handle.poll_request(), "nothing was sent");
}

#[test]
fn a_call_answered_at_once_never_touches_the_timer() {
    without_timers().block_on(async {
        let svc =
            DeadlineLayer::new(Duration::from_secs(1)).layer(tower::service_fn(|_: Req| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
            }));
        assert_eq!(svc.oneshot(Request::new(())).await.unwrap().status(), 200);
    });
}

#[test]
#[should_panic(expected = "timers are disabled")]
fn a_call_left_pending_starts_the_timer() {
    // The counterpart of the test above: an answer after one pending poll.
    without_timers().block_on(async {
        let svc =
            DeadlineLayer::new(Duration::from_secs(1)).layer(tower::service_fn(|_: Req| async {
                tokio::task::yield_now().await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
            }));
        let _ = svc.oneshot(Request::new(())).await;
    });
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_body_read_in_another_task_still_ends_at_the_deadline() {
    // The head takes a while, so the call arms its timer; the body takes it
    // over and is read in another task, which the timer must wake.
    let svc = DeadlineLayer::new(BUDGET).layer(tower::service_fn(|_: Req| async {
        time::sleep(Duration::from_millis(500)).await;
        Ok::<_, Infallible>(Response::new(ScriptedBody::new().data("a").stall()))
    }));
    let start = Instant::now();
    let body = svc.oneshot(Request::new(())).await.unwrap().into_body();
    let reader = tokio::spawn(async move {
        let mut body = body;
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(first, Bytes::from_static(b"a"));
        body.frame().await.unwrap().unwrap_err()
    });
    let err = time::timeout(BUDGET * 10, reader).await.unwrap().unwrap();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_eq!(start.elapsed(), BUDGET);
}

// ===== extremes =====

/// Twenty-nine years: less than the thirty-year horizon that stands for
/// "never", more than any real call.
const ALMOST_NEVER: Duration = Duration::from_secs(86_400 * 365 * 29);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn request_deadlines_saturate() {
    let never = RequestDeadline::after(Duration::MAX);
    assert!(!never.is_expired());
    assert!(never.remaining() > ALMOST_NEVER);
    assert_eq!(never.budget(), Duration::MAX);

    let now = RequestDeadline::after(Duration::ZERO);
    assert!(now.is_expired());
    assert_eq!(now.remaining(), Duration::ZERO);
    assert_eq!(never.min(now), now);

    let start = Instant::now();
    tokio::time::advance(Duration::from_secs(1)).await;
    let past = RequestDeadline::at(start);
    assert!(past.is_expired());
    assert_eq!(
        (past.remaining(), past.budget()),
        (Duration::ZERO, Duration::ZERO)
    );
}
