use super::{
    error::{Mismatch, ResumeMismatch},
    Resume, ResumeLayer, ResumePolicy,
};
use crate::{errors, BoxError, FailureKind, RequestDeadline};
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use std::{
    collections::VecDeque,
    io,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};
use tower::{Layer, ServiceExt};

/// A body of scripted pieces: data, or an error.
#[derive(Debug, Default)]
struct Pieces(VecDeque<Result<Bytes, BoxError>>);

impl Pieces {
    fn data(mut self, data: &'static str) -> Self {
        self.0.push_back(Ok(Bytes::from_static(data.as_bytes())));
        self
    }

    fn reset(mut self) -> Self {
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        self.0.push_back(Err(reset.into()));
        self
    }
}

impl Body for Pieces {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.0.pop_front().map(|piece| piece.map(Frame::data)))
    }
}

/// A response of `status` with `headers` and `body`.
fn response(
    status: u16,
    headers: &[(&'static str, &'static str)],
    body: Pieces,
) -> Response<Pieces> {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    for (name, value) in headers {
        response
            .headers_mut()
            .append(*name, http::HeaderValue::from_static(value));
    }
    response
}

/// The headers of a file of ten bytes that may be resumed.
const FILE: &[(&str, &str)] = &[
    ("accept-ranges", "bytes"),
    ("etag", "\"v1\""),
    ("content-length", "10"),
];

/// The headers of every request an upstream received, in order.
type Seen = Arc<Mutex<Vec<HeaderMap>>>;

/// A service answering with `responses` in order, recording every request's
/// headers; an error once they are used up.
fn upstream(
    responses: Vec<Response<Pieces>>,
) -> (
    impl tower::Service<Request<String>, Response = Response<Pieces>, Error = BoxError> + Clone,
    Seen,
) {
    let queue = Arc::new(Mutex::new(VecDeque::from(responses)));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let svc = tower::service_fn(move |request: Request<String>| {
        record.lock().unwrap().push(request.headers().clone());
        let next = queue.lock().unwrap().pop_front();
        std::future::ready(next.ok_or_else(|| BoxError::from("no response scripted")))
    });
    (svc, seen)
}

fn get() -> Request<String> {
    Request::get("http://upstream/file")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_reset_body_is_resumed_from_where_it_failed() {
    let (svc, seen) = upstream(vec![
        response(200, FILE, Pieces::default().data("012").data("3").reset()),
        response(
            206,
            &[("etag", "\"v1\""), ("content-range", "bytes 4-9/10")],
            Pieces::default().data("456789"),
        ),
    ]);
    let svc = ResumeLayer::new(ResumePolicy::new(1)).layer(svc);
    let response = svc.oneshot(get()).await.unwrap();
    assert!(response.body().is_resumable());
    let mut body = std::pin::pin!(response.into_body());
    let mut all = Vec::new();
    while let Some(frame) = body.frame().await {
        all.extend_from_slice(&frame.unwrap().into_data().unwrap());
    }
    assert_eq!(all, b"0123456789");
    assert_eq!((body.resumes(), body.received()), (1, 10));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert!(!seen[0].contains_key("range"));
    assert_eq!(seen[1]["range"], "bytes=4-");
    assert_eq!(seen[1]["if-range"], "\"v1\"");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_ranged_request_keeps_the_first_ones_headers_and_deadline() {
    let (svc, seen) = upstream(vec![
        response(200, FILE, Pieces::default().data("01234").reset()),
        response(
            206,
            &[("content-range", "bytes 5-9/10")],
            Pieces::default().data("56789"),
        ),
    ]);
    let deadline = RequestDeadline::after(Duration::from_secs(5));
    let mut request = get();
    request.headers_mut().insert("x-key", "k".parse().unwrap());
    request.extensions_mut().insert(deadline);
    let deadlines = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&deadlines);
    let svc = Resume::new(
        tower::ServiceBuilder::new()
            .map_request(move |request: Request<String>| {
                record.lock().unwrap().push(RequestDeadline::of(&request));
                request
            })
            .service(svc),
        ResumePolicy::default(),
    );
    let response = svc.oneshot(request).await.unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "0123456789");
    assert_eq!(seen.lock().unwrap()[1]["x-key"], "k");
    assert_eq!(*deadlines.lock().unwrap(), [Some(deadline), Some(deadline)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_body_that_fails_past_the_deadline_is_not_resumed() {
    let (svc, seen) = upstream(vec![response(
        200,
        FILE,
        Pieces::default().data("0123").reset(),
    )]);
    let mut request = get();
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_secs(1)));
    let svc = Resume::new(svc, ResumePolicy::new(3));
    let response = svc.oneshot(request).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let err = response.into_body().collect().await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectionReset);
    assert!(err.downcast_ref::<io::Error>().is_some(), "as it is: {err}");
    assert_eq!(seen.lock().unwrap().len(), 1, "no ranged request");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_body_that_fails_without_the_time_a_resume_needs_is_not_resumed() {
    let (svc, seen) = upstream(vec![response(
        200,
        FILE,
        Pieces::default().data("0123").reset(),
    )]);
    let mut request = get();
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_secs(1)));
    let policy = ResumePolicy::new(3).with_min_remaining(Duration::from_millis(1001));
    let response = Resume::new(svc, policy).oneshot(request).await.unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    assert!(err.is::<io::Error>(), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 1, "no ranged request");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn only_transport_failures_are_resumed() {
    let mut own = Pieces::default().data("0123");
    own.0.push_back(Err("the caller's own error".into()));
    let (svc, seen) = upstream(vec![response(200, FILE, own)]);
    let response = Resume::new(svc, ResumePolicy::new(3))
        .oneshot(get())
        .await
        .unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    assert_eq!(err.to_string(), "the caller's own error");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_range_that_does_not_continue_the_body_fails_it() {
    let (svc, _) = upstream(vec![
        response(200, FILE, Pieces::default().data("0123").reset()),
        response(
            206,
            &[("content-range", "bytes 0-9/10")],
            Pieces::default().data("0123456789"),
        ),
    ]);
    let response = Resume::new(svc, ResumePolicy::new(3))
        .oneshot(get())
        .await
        .unwrap();
    let mut body = std::pin::pin!(response.into_body());
    assert_eq!(
        body.frame().await.unwrap().unwrap().into_data().unwrap(),
        "0123"
    );
    let err = body.frame().await.unwrap().unwrap_err();
    let mismatch = errors::find::<ResumeMismatch>(&*err).unwrap();
    assert_eq!(
        mismatch.mismatch(),
        &Mismatch::ContentRange {
            start: 4,
            total: Some(10),
            got: Some(http::HeaderValue::from_static("bytes 0-9/10")),
        }
    );
    assert_eq!(
        FailureKind::of(&*err),
        FailureKind::ConnectionReset,
        "the cause"
    );
    assert!(body.frame().await.is_none(), "the end after the error");
    assert!(body.is_end_stream());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn another_status_validator_or_an_encoding_is_a_mismatch() {
    let cases = [
        (
            200,
            &[("content-range", "bytes 4-9/10")][..],
            Mismatch::Status(StatusCode::OK),
        ),
        (
            206,
            &[("etag", "\"v2\""), ("content-range", "bytes 4-9/10")][..],
            Mismatch::Validator {
                expected: http::HeaderValue::from_static("\"v1\""),
                got: http::HeaderValue::from_static("\"v2\""),
            },
        ),
        (
            206,
            &[
                ("content-encoding", "gzip"),
                ("content-range", "bytes 4-9/10"),
            ][..],
            Mismatch::ContentEncoding(http::HeaderValue::from_static("gzip")),
        ),
    ];
    for (status, headers, expected) in cases {
        let (svc, _) = upstream(vec![
            response(200, FILE, Pieces::default().data("0123").reset()),
            response(status, headers, Pieces::default().data("456789")),
        ]);
        let response = Resume::new(svc, ResumePolicy::new(3))
            .oneshot(get())
            .await
            .unwrap();
        let err = response.into_body().collect().await.unwrap_err();
        let mismatch = err.downcast_ref::<ResumeMismatch>().unwrap();
        assert_eq!(mismatch.mismatch(), &expected);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_body_shorter_than_announced_is_a_length_mismatch() {
    let (svc, seen) = upstream(vec![response(200, FILE, Pieces::default().data("01234"))]);
    let response = Resume::new(svc, ResumePolicy::new(3))
        .oneshot(get())
        .await
        .unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    let mismatch = err.downcast_ref::<ResumeMismatch>().unwrap();
    assert_eq!(
        mismatch.mismatch(),
        &Mismatch::Length {
            expected: 10,
            got: 5
        }
    );
    assert_eq!(
        FailureKind::of(&*err),
        FailureKind::Other,
        "nothing to heal"
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "never resumed");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_healed_failure_is_not_the_cause_of_a_later_mismatch() {
    let (svc, _) = upstream(vec![
        response(200, FILE, Pieces::default().data("0123").reset()),
        response(
            206,
            &[("content-range", "bytes 4-9/10")],
            Pieces::default().data("45"),
        ),
    ]);
    let response = Resume::new(svc, ResumePolicy::new(3))
        .oneshot(get())
        .await
        .unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    let mismatch = err.downcast_ref::<ResumeMismatch>().unwrap();
    assert_eq!(
        mismatch.mismatch(),
        &Mismatch::Length {
            expected: 10,
            got: 6
        }
    );
    assert_eq!(FailureKind::of(&*err), FailureKind::Other, "{err}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_range_ending_at_the_largest_offset_is_a_mismatch() {
    let (svc, _) = upstream(vec![
        response(200, FILE, Pieces::default().data("0123").reset()),
        response(
            206,
            &[
                ("etag", "\"v1\""),
                ("content-range", "bytes 4-18446744073709551615/*"),
            ],
            Pieces::default().data("456789"),
        ),
    ]);
    let response = Resume::new(svc, ResumePolicy::new(1))
        .oneshot(get())
        .await
        .unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    let mismatch = errors::find::<ResumeMismatch>(&*err).expect("a mismatch");
    assert!(
        matches!(mismatch.mismatch(), Mismatch::ContentRange { start: 4, .. }),
        "{mismatch:?}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_request_with_no_room_for_the_range_ends_with_the_failure() {
    let (svc, seen) = upstream(vec![response(
        200,
        FILE,
        Pieces::default().data("0123").reset(),
    )]);
    let mut request = get();
    for n in 0.. {
        let name = http::HeaderName::try_from(format!("x-filler-{n}")).unwrap();
        let filler = http::HeaderValue::from_static("1");
        if request.headers_mut().try_insert(name, filler).is_err() {
            break;
        }
    }
    let response = Resume::new(svc, ResumePolicy::new(3))
        .oneshot(request)
        .await
        .unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectionReset);
    assert!(errors::find::<ResumeMismatch>(&*err).is_none(), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 1, "no ranged request was sent");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_error_of_a_ranged_request_ends_the_body() {
    let (svc, seen) = upstream(vec![response(
        200,
        FILE,
        Pieces::default().data("0123").reset(),
    )]);
    let response = Resume::new(svc, ResumePolicy::new(3))
        .oneshot(get())
        .await
        .unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    assert_eq!(err.to_string(), "no response scripted");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn bodies_that_cannot_be_resumed_pass_through() {
    let weak = &[("accept-ranges", "bytes"), ("etag", "W/\"v1\"")][..];
    let no_ranges = &[("etag", "\"v1\"")][..];
    let encoded = &[
        ("accept-ranges", "bytes"),
        ("etag", "\"v1\""),
        ("content-encoding", "gzip"),
    ][..];
    for (status, headers) in [(200, weak), (200, no_ranges), (200, encoded), (206, FILE)] {
        let (svc, seen) = upstream(vec![response(
            status,
            headers,
            Pieces::default().data("0123").reset(),
        )]);
        let response = Resume::new(svc, ResumePolicy::new(3))
            .oneshot(get())
            .await
            .unwrap();
        assert!(!response.body().is_resumable(), "{headers:?}");
        let err = response.into_body().collect().await.unwrap_err();
        assert!(err.is::<io::Error>(), "{err}");
        assert_eq!(seen.lock().unwrap().len(), 1);
    }
    // Neither a request with a body, nor one of another method, nor a policy
    // without resumes keeps anything for a resume.
    let (svc, _) = upstream(vec![]);
    let mut post = get();
    *post.method_mut() = http::Method::POST;
    let future = Resume::new(svc.clone(), ResumePolicy::new(3)).call_once(post);
    assert!(
        format!("{future:?}").contains("may_resume: false"),
        "{future:?}"
    );
    let with_body = Request::get("http://upstream/")
        .body("x".to_owned())
        .unwrap();
    let future = Resume::new(svc.clone(), ResumePolicy::new(3)).call_once(with_body);
    assert!(
        format!("{future:?}").contains("may_resume: false"),
        "{future:?}"
    );
    let future = Resume::new(svc.clone(), ResumePolicy::new(0)).call_once(get());
    assert!(
        format!("{future:?}").contains("may_resume: false"),
        "{future:?}"
    );
    let future = Resume::new(svc, ResumePolicy::new(3)).call_once(get());
    assert!(
        format!("{future:?}").contains("may_resume: true"),
        "{future:?}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn resumes_stop_at_the_policys_limit() {
    let part = |range: &'static str, data: &'static str| {
        response(
            206,
            &[("content-range", range)],
            Pieces::default().data(data).reset(),
        )
    };
    let (svc, seen) = upstream(vec![
        response(200, FILE, Pieces::default().data("01").reset()),
        part("bytes 2-9/10", "23"),
        part("bytes 4-9/10", "45"),
    ]);
    let response = Resume::new(svc, ResumePolicy::new(2))
        .oneshot(get())
        .await
        .unwrap();
    let err = response.into_body().collect().await.unwrap_err();
    assert!(err.is::<io::Error>(), "the last failure as it is: {err}");
    let seen = seen.lock().unwrap();
    let ranges: Vec<_> = seen
        .iter()
        .filter_map(|headers| headers.get("range"))
        .collect();
    assert_eq!(ranges, ["bytes=2-", "bytes=4-"]);
}

/// Helper trait to call a service once without waiting for readiness
/// (`tower::service_fn` is always ready).
trait CallOnce<R>: tower::Service<R> + Sized {
    fn call_once(mut self, request: R) -> Self::Future {
        self.call(request)
    }
}

impl<S: tower::Service<R>, R> CallOnce<R> for S {}

#[test]
fn debug_output_names_the_state() {
    let policy = ResumePolicy::new(1);
    assert!(format!("{:?}", ResumeLayer::new(policy)).contains("max_resumes: 1"));
}

// ===== a part of unknown total is held to its own Content-Range =====

/// The headers of a file sent chunked: resumable, its length unknown.
const CHUNKED_FILE: &[(&str, &str)] = &[("accept-ranges", "bytes"), ("etag", "\"v1\"")];

/// Reads `body` to its end: the bytes, and the error that ended it.
async fn drain<B>(body: B) -> (Vec<u8>, Option<BoxError>)
where
    B: Body<Data = Bytes, Error = BoxError>,
{
    let mut body = std::pin::pin!(body);
    let mut all = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => all.extend_from_slice(&frame.into_data().unwrap_or_default()),
            Err(err) => return (all, Some(err)),
        }
    }
    (all, None)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_part_longer_than_its_content_range_is_not_spliced() {
    // The 206 says it carries bytes 4-5 (2 bytes) but sends 6.
    let (svc, _) = upstream(vec![
        response(200, CHUNKED_FILE, Pieces::default().data("0123").reset()),
        response(
            206,
            &[("etag", "\"v1\""), ("content-range", "bytes 4-5/*")],
            Pieces::default().data("4567XY"),
        ),
    ]);
    let response = Resume::new(svc, ResumePolicy::new(3))
        .oneshot(get())
        .await
        .unwrap();
    let (bytes, err) = drain(response.into_body()).await;
    assert!(
        err.is_some(),
        "{} bytes spliced with no error: {:?}",
        bytes.len(),
        String::from_utf8_lossy(&bytes)
    );
}
