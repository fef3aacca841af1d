use super::{
    error::{Phase, ReadTimedOut},
    ReadTimeoutLayer,
};
use http::{Request, Response};
use http_body_util::BodyExt;
use http_resilience_mock::body::ScriptedBody;
use std::{convert::Infallible, time::Duration};
use tokio::time;
use tower::{ServiceBuilder, ServiceExt};

const LIMIT: Duration = Duration::from_millis(250);

async fn call(
    head_delay: Duration,
    body: ScriptedBody,
) -> Result<Response<super::body::ReadTimeoutBody<ScriptedBody>>, crate::BoxError> {
    ServiceBuilder::new()
        .layer(ReadTimeoutLayer::new(LIMIT))
        .service_fn(move |_: Request<()>| {
            let body = body.clone();
            async move {
                time::sleep(head_delay).await;
                Ok::<_, Infallible>(Response::new(body))
            }
        })
        .oneshot(Request::new(()))
        .await
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_late_head_is_a_head_read_timeout() {
    let err = call(Duration::from_secs(5), ScriptedBody::new())
        .await
        .unwrap_err();
    let timed_out = err.downcast_ref::<ReadTimedOut>().unwrap();
    assert_eq!(timed_out.phase(), Phase::Head);
    assert_eq!(timed_out.duration(), LIMIT);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_gap_between_frames_is_a_body_read_timeout() {
    let body = ScriptedBody::new()
        .data("a")
        .wait(Duration::from_millis(300))
        .data("b");
    let mut body = call(Duration::ZERO, body).await.unwrap().into_body();
    assert!(body.frame().await.unwrap().is_ok());
    let err = body.frame().await.unwrap().unwrap_err();
    assert_eq!(
        err.downcast_ref::<ReadTimedOut>().unwrap().phase(),
        Phase::Body
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_steady_body_may_take_longer_than_the_limit_in_all() {
    let mut body = ScriptedBody::new();
    for _ in 0..10 {
        body = body.wait(Duration::from_millis(200)).data("x");
    }
    let start = time::Instant::now();
    let response = call(Duration::from_millis(200), body).await.unwrap();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(bytes, "xxxxxxxxxx");
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "8x the limit in all"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn time_spent_by_the_reader_is_not_a_gap() {
    let body = ScriptedBody::new().data("a").data("b");
    let mut body = call(Duration::ZERO, body).await.unwrap().into_body();
    assert!(body.frame().await.unwrap().is_ok());
    // The reader is busy elsewhere for longer than the limit.
    time::sleep(Duration::from_secs(1)).await;
    let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(second, "b");
}
