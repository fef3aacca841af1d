//! Reading a response body after the call's deadline, as a handler that holds
//! the response while it does other work would: over a real hyper-util client
//! and the loopback mock server, on the real clock, for the three layers and
//! for the combined service. A frame read late fails the body; the end of a
//! body whose frames were all read in time does not.

use crate::support;

use bytes::Bytes;
use http::Request;
use http_body::Body;
use http_body_util::{BodyExt, Full};
use http_resilience::{
    deadline::error::DeadlineExceeded,
    policy::{FixedDelay, StatusDecoder},
    retry::RetryPolicy,
    transport, BoxError, ResiliencePolicy,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use support::{get, guarded, reactor_stack, Reactor};
use tower::{Layer, Service, ServiceExt};

/// The deadline of every call here; the late reads come well after it.
const DEADLINE: Duration = Duration::from_millis(300);
const LATE: Duration = Duration::from_millis(900);

fn three_layers() -> impl Service<
    Request<Full<Bytes>>,
    Response = http::Response<impl Body<Data = Bytes, Error = BoxError> + Unpin>,
    Error = BoxError,
> {
    reactor_stack(Reactor {
        total: DEADLINE,
        attempt: DEADLINE,
        ..Reactor::default()
    })
}

fn combined() -> impl Service<
    Request<Full<Bytes>>,
    Response = http::Response<impl Body<Data = Bytes, Error = BoxError> + Unpin>,
    Error = BoxError,
> {
    let client = transport::Builder::new()
        .build_http::<Full<Bytes>>()
        .expect("valid transport");
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 2),
    );
    ResiliencePolicy::new(DEADLINE, DEADLINE, policy)
        .expect("valid limits")
        .layer()
        .layer(client)
}

/// Two calls through `svc`: one whose body is read only after the deadline,
/// and one whose data is read at once and whose end is read after it.
async fn check<S, B>(mut svc: S)
where
    S: Service<Request<Full<Bytes>>, Response = http::Response<B>, Error = BoxError>,
    B: Body<Data = Bytes, Error = BoxError> + Unpin,
{
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::ok("held too long"));
    server.enqueue(MockResponse::ok("read in time"));

    let svc = svc.ready().await.unwrap();
    let response = guarded(svc.call(get(server.uri("/a")))).await.unwrap();
    tokio::time::sleep(LATE).await;
    let err = guarded(response.into_body().frame())
        .await
        .expect("a frame or an error")
        .expect_err("the data is read after the deadline");
    assert!(err.is::<DeadlineExceeded>(), "{err}");

    let svc = svc.ready().await.unwrap();
    let response = guarded(svc.call(get(server.uri("/b")))).await.unwrap();
    let mut body = response.into_body();
    let data = guarded(body.frame()).await.unwrap().unwrap();
    assert_eq!(data.into_data().unwrap(), "read in time");
    tokio::time::sleep(LATE).await;
    assert!(
        guarded(body.frame()).await.is_none(),
        "the end of a body read in time is not late"
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn the_three_layers_fail_a_late_frame_but_not_a_late_end() {
    check(three_layers()).await;
}

#[tokio::test]
async fn the_combined_fails_a_late_frame_but_not_a_late_end() {
    check(combined()).await;
}
