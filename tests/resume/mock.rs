//! Against the mock server: a body cut part-way (reset, closed, stalled) arrives
//! whole through one ranged resume; a changed representation, the deadline,
//! weak validators, encodings and the limit on resumes each end the body as
//! documented.

use super::support::{get, guarded};
use super::{assert_same_bytes, pattern, read_to_end, resume_inside_retry, stack, Limits};
use http::StatusCode;
use http_resilience::{
    errors,
    resume::{
        error::{Mismatch, ResumeMismatch},
        ResumePolicy,
    },
    FailureKind,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;

/// The size of the file the mock serves.
const LEN: usize = 30_000;

/// Where its first response is cut: well within the loopback socket buffers,
/// so that every byte written before the cut reaches the client.
const CUT: usize = 10_000;

/// The mock's file: `body` with a strong `ETag` of `tag`, serving ranges.
fn file(body: &[u8], tag: &str) -> MockResponse {
    MockResponse::ok(body.to_vec()).with_etag(tag).with_ranges()
}

async fn start() -> MockServer {
    guarded(MockServer::start()).await.expect("start the mock")
}

#[tokio::test]
async fn a_body_reset_mid_way_arrives_whole_and_exact() {
    let server = start().await;
    let body = pattern(LEN);
    server.enqueue(file(&body, "\"v1\"").reset_after(CUT));
    server.enqueue(file(&body, "\"v1\""));

    let response = guarded(stack(Limits::default()).oneshot(get(server.uri("/file"))))
        .await
        .unwrap();
    assert!(response.body().get_ref().is_resumable());
    let (got, err) = guarded(read_to_end(response.into_body())).await;
    assert!(err.is_none(), "{err:?}");
    assert_same_bytes(&got, &body);

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(!requests[0].headers.contains_key("range"));
    assert_eq!(
        requests[1].headers["range"],
        format!("bytes={CUT}-").as_str()
    );
    assert_eq!(requests[1].headers["if-range"], "\"v1\"");
    assert_eq!(requests[1].uri, "/file");
}

#[tokio::test]
async fn a_body_closed_or_stalled_mid_way_is_resumed_too() {
    let server = start().await;
    let body = pattern(LEN);
    server.enqueue(file(&body, "\"v1\"").close_after(CUT));
    server.enqueue(file(&body, "\"v1\""));
    let (got, err) = fetch(&server, Limits::default()).await;
    assert!(err.is_none(), "closed: {err:?}");
    assert_same_bytes(&got, &body);

    // A silence of the upstream past the read timeout (250 ms, against a
    // deadline of 10 s) is healed the same way.
    server.enqueue(file(&body, "\"v1\"").stall_after(CUT));
    server.enqueue(file(&body, "\"v1\""));
    let limits = Limits {
        read: Duration::from_millis(250),
        ..Limits::default()
    };
    let (got, err) = fetch(&server, limits).await;
    assert!(err.is_none(), "stalled: {err:?}");
    assert_same_bytes(&got, &body);
    let ranges: Vec<_> = server
        .requests()
        .iter()
        .filter_map(|request| request.headers.get("range").cloned())
        .collect();
    assert_eq!(ranges, [format!("bytes={CUT}-"), format!("bytes={CUT}-")]);
}

/// Reads `/file` from `server` through the stack with `limits`.
async fn fetch(
    server: &MockServer,
    limits: Limits,
) -> (Vec<u8>, Option<http_resilience::BoxError>) {
    let response = guarded(stack(limits).oneshot(get(server.uri("/file"))))
        .await
        .unwrap();
    guarded(read_to_end(response.into_body())).await
}

#[tokio::test]
async fn a_changed_etag_fails_the_body_with_a_mismatch() {
    let server = start().await;
    let first = pattern(LEN);
    let changed = pattern(LEN + 1);
    server.enqueue(file(&first, "\"v1\"").reset_after(CUT));
    // The representation changed: the mock's If-Range no longer matches, and
    // it answers 200 with all of the new one.
    server.enqueue(file(&changed, "\"v2\""));

    let (got, err) = fetch(&server, Limits::default()).await;
    let err = err.expect("the body fails");
    assert_same_bytes(&got, &first[..CUT]);
    let mismatch = errors::find::<ResumeMismatch>(&*err).expect("a ResumeMismatch");
    assert_eq!(mismatch.mismatch(), &Mismatch::Status(StatusCode::OK));
    assert_eq!(mismatch.received(), CUT as u64);
    assert_eq!(
        FailureKind::of(&*err),
        FailureKind::ConnectionReset,
        "{err}"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].headers["if-range"], "\"v1\"");
}

#[tokio::test]
async fn no_resume_past_the_deadline() {
    let server = start().await;
    let body = pattern(LEN);
    server.enqueue(file(&body, "\"v1\"").reset_after(CUT));
    server.enqueue(file(&body, "\"v1\"").with_head_delay(Duration::from_secs(5)));
    let limits = Limits {
        total: Duration::from_secs(1),
        ..Limits::default()
    };
    let started = Instant::now();
    let (got, err) = fetch(&server, limits).await;
    let err = err.expect("the body fails");
    // The resume was sent, and the deadline (1 s, against a second response
    // 5 s late and an attempt limit of 3 s) cut it: the body ends with the
    // deadline's error, at the deadline.
    assert_eq!(FailureKind::of(&*err), FailureKind::Deadline, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_same_bytes(&got, &body[..CUT]);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn no_resume_without_the_time_it_needs() {
    let server = start().await;
    let body = pattern(LEN);
    server.enqueue(file(&body, "\"v1\"").reset_after(CUT));
    server.enqueue(file(&body, "\"v1\""));
    // A resume needs 20 s left; the whole call has 10 s.
    let limits = Limits {
        policy: ResumePolicy::new(3).with_min_remaining(Duration::from_secs(20)),
        ..Limits::default()
    };
    let (got, err) = fetch(&server, limits).await;
    let err = err.expect("the body fails");
    assert_eq!(
        FailureKind::of(&*err),
        FailureKind::ConnectionReset,
        "{err}"
    );
    assert!(
        errors::find::<ResumeMismatch>(&*err).is_none(),
        "as it is: {err}"
    );
    assert_same_bytes(&got, &body[..CUT]);
    assert_eq!(server.request_count(), 1, "no ranged request");
}

#[tokio::test]
async fn weak_etags_are_not_trusted() {
    let server = start().await;
    let body = pattern(LEN);
    server.enqueue(file(&body, "W/\"v1\"").reset_after(CUT));
    server.enqueue(file(&body, "W/\"v1\""));
    let response = guarded(stack(Limits::default()).oneshot(get(server.uri("/file"))))
        .await
        .unwrap();
    assert!(!response.body().get_ref().is_resumable());
    let (got, err) = guarded(read_to_end(response.into_body())).await;
    let err = err.expect("the body fails");
    assert_eq!(
        FailureKind::of(&*err),
        FailureKind::ConnectionReset,
        "{err}"
    );
    assert!(
        errors::find::<ResumeMismatch>(&*err).is_none(),
        "as it is: {err}"
    );
    assert_same_bytes(&got, &body[..CUT]);
    assert_eq!(server.request_count(), 1, "no ranged request");
}

#[tokio::test]
async fn an_encoded_body_is_not_resumed() {
    let server = start().await;
    let body = pattern(LEN);
    let encoded = || file(&body, "\"v1\"").with_header("content-encoding", "gzip");
    server.enqueue(encoded().reset_after(CUT));
    server.enqueue(encoded());
    let (got, err) = fetch(&server, Limits::default()).await;
    let err = err.expect("the body fails");
    assert_eq!(
        FailureKind::of(&*err),
        FailureKind::ConnectionReset,
        "{err}"
    );
    assert_same_bytes(&got, &body[..CUT]);
    assert_eq!(server.request_count(), 1, "no ranged request");
}

#[tokio::test]
async fn the_number_of_resumes_is_bounded() {
    let server = start().await;
    let body = pattern(LEN);
    let step = 5_000;
    for _ in 0..3 {
        server.enqueue(file(&body, "\"v1\"").reset_after(step));
    }
    server.enqueue(file(&body, "\"v1\""));
    let limits = Limits {
        policy: ResumePolicy::new(2),
        ..Limits::default()
    };
    let (got, err) = fetch(&server, limits).await;
    // Two resumes, each cut again: the third failure is returned as it is.
    let err = err.expect("the body fails");
    assert_eq!(
        FailureKind::of(&*err),
        FailureKind::ConnectionReset,
        "{err}"
    );
    assert!(
        errors::find::<ResumeMismatch>(&*err).is_none(),
        "as it is: {err}"
    );
    assert_same_bytes(&got, &body[..3 * step]);
    let ranges: Vec<_> = server
        .requests()
        .iter()
        .map(|request| request.headers.get("range").cloned())
        .collect();
    assert_eq!(
        ranges,
        [
            None,
            Some(http::HeaderValue::from_static("bytes=5000-")),
            Some(http::HeaderValue::from_static("bytes=10000-"))
        ]
    );

    // The same policy heals two cuts.
    server.enqueue(file(&body, "\"v1\"").reset_after(step));
    server.enqueue(file(&body, "\"v1\"").reset_after(step));
    server.enqueue(file(&body, "\"v1\""));
    let (got, err) = fetch(&server, limits).await;
    assert!(err.is_none(), "{err:?}");
    assert_same_bytes(&got, &body);
}

#[tokio::test]
async fn the_order_decides_who_retries_a_ranged_request() {
    let server = start().await;
    let body = pattern(LEN);
    // Outside the retry, the ranged request is a call of the retry layer: its
    // 503 is retried, and the body arrives whole.
    server.enqueue(file(&body, "\"v1\"").reset_after(CUT));
    server.enqueue(MockResponse::new(503));
    server.enqueue(file(&body, "\"v1\""));
    let (got, err) = fetch(&server, Limits::default()).await;
    assert!(err.is_none(), "{err:?}");
    assert_same_bytes(&got, &body);
    assert_eq!(server.request_count(), 3);

    // Inside the retry, the ranged request is sent once: its 503 is not the
    // rest of the body.
    server.enqueue(file(&body, "\"v1\"").reset_after(CUT));
    server.enqueue(MockResponse::new(503));
    let response =
        guarded(resume_inside_retry(Limits::default()).oneshot(get(server.uri("/file"))))
            .await
            .unwrap();
    let (_, err) = guarded(read_to_end(response.into_body())).await;
    let err = err.expect("the body fails");
    let mismatch = errors::find::<ResumeMismatch>(&*err).expect("a ResumeMismatch");
    assert_eq!(
        mismatch.mismatch(),
        &Mismatch::Status(StatusCode::SERVICE_UNAVAILABLE)
    );
    assert_eq!(server.request_count(), 5);
}
