use super::*;
use crate::{body::*, policy::*};
use crate::{Attempts, BoxError, RequestDeadline, RetryReport, Stop};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use std::time::Duration;
use tokio::time;
use tokio_test::{assert_pending, assert_ready};
use tower_test::mock;

type Req = Request<String>;
type Resp = Response<String>;

fn reactor_policy(delay: Duration) -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(delay, 2),
    )
}

fn request(body: &'static str) -> Req {
    Request::builder()
        .uri("/value")
        .body(body.to_owned())
        .unwrap()
}

/// The next request the mock receives, checked against what was sent.
async fn expect(handle: &mut mock::Handle<Req, Resp>, body: &str) -> mock::SendResponse<Resp> {
    let (req, send) = handle.next_request().await.expect("a request");
    assert_eq!(req.uri(), "/value");
    assert_eq!(req.body(), body);
    send
}

fn status(code: u16, body: &'static str) -> Resp {
    Response::builder()
        .status(code)
        .header("x-attempt-body", body)
        .body(body.to_owned())
        .unwrap()
}

type Reactor = RetryPolicy<StatusDecoder, FixedDelay>;

type Upstream = mock::Mock<Req, Resp>;

type Retrying = StatusRetry<Upstream, StatusDecoder, FixedDelay>;

/// The retry layer over a mock upstream.
fn spawn(policy: Reactor) -> (mock::Spawn<Retrying>, mock::Handle<Req, Resp>) {
    mock::spawn_layer(StatusRetryLayer::new(policy))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn retries_until_limit_and_returns_the_last_response_unchanged() {
    let (mut svc, mut handle) = spawn(reactor_policy(Duration::from_millis(10)));
    handle.allow(3);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut fut = tokio_test::task::spawn(svc.call(request("hello")));

    for n in 1..=3 {
        assert_pending!(fut.poll());
        expect(&mut handle, "hello")
            .await
            .send_response(status(503, ["first", "second", "third"][n - 1]));
        if n < 3 {
            assert_pending!(fut.poll(), "waits before attempt {}", n + 1);
            time::advance(Duration::from_millis(10)).await;
        }
    }
    let response = fut.await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["x-attempt-body"], "third");
    assert_eq!(*response.body(), "third");
    assert_eq!(Attempts::of(&response), 3);
    let report = response.extensions().get::<Attempts>().unwrap();
    assert_eq!(
        report.verdict(),
        Verdict::retry(StatusCode::SERVICE_UNAVAILABLE)
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn succeeds_after_retries() {
    let (mut svc, mut handle) = spawn(reactor_policy(Duration::from_millis(10)));
    handle.allow(3);
    assert_ready!(svc.poll_ready()).unwrap();
    let fut = svc.call(request(""));
    let server = async move {
        expect(&mut handle, "")
            .await
            .send_response(status(503, "a"));
        expect(&mut handle, "")
            .await
            .send_response(status(503, "b"));
        expect(&mut handle, "")
            .await
            .send_response(status(200, "ok"));
        handle
    };
    let (response, _handle) = tokio::join!(fut, server);
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(*response.body(), "ok");
    assert_eq!(Attempts::of(&response), 2 + 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn accepts_statuses_outside_the_set() {
    for code in [200, 404, 500] {
        let (mut svc, mut handle) = spawn(reactor_policy(Duration::from_millis(10)));
        handle.allow(1);
        assert_ready!(svc.poll_ready()).unwrap();
        let fut = svc.call(request(""));
        let server = async {
            expect(&mut handle, "")
                .await
                .send_response(status(code, "x"));
        };
        let (response, ()) = tokio::join!(fut, server);
        let response = response.unwrap();
        assert_eq!(response.status().as_u16(), code);
        assert_eq!(Attempts::of(&response), 1);
        assert_pending!(handle.poll_request(), "no second attempt for {code}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn returns_the_last_error_unchanged() {
    #[derive(Debug)]
    struct Boom(u32);
    impl std::fmt::Display for Boom {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "boom {}", self.0)
        }
    }
    impl std::error::Error for Boom {}

    let retry_errors = |outcome: &Result<Resp, BoxError>| match outcome {
        Err(_) => Verdict::retry("any error"),
        Ok(_) => Verdict::Accept,
    };
    let policy = RetryPolicy::new(retry_errors, FixedDelay::new(Duration::from_millis(5), 1));
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(StatusRetryLayer::new(policy));
    handle.allow(2);
    assert_ready!(svc.poll_ready()).unwrap();
    let report = RetryReport::new();
    let mut req = request("");
    req.extensions_mut().insert(report.clone());
    let fut = svc.call(req);
    let server = async {
        expect(&mut handle, "").await.send_error(Boom(1));
        expect(&mut handle, "").await.send_error(Boom(2));
    };
    let (result, ()) = tokio::join!(fut, server);
    let err = result.unwrap_err();
    assert_eq!(err.downcast_ref::<Boom>().map(|b| b.0), Some(2));
    assert_eq!(
        report.attempts(),
        2,
        "the caller's report saw both attempts"
    );
    let summary = report.summary().expect("the call is over");
    assert_eq!(summary.stop(), Stop::Exhausted);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_retry_waits_for_readiness() {
    let (mut svc, mut handle) = spawn(reactor_policy(Duration::from_millis(10)));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut fut = tokio_test::task::spawn(svc.call(request("")));
    assert_pending!(fut.poll());
    expect(&mut handle, "")
        .await
        .send_response(status(503, "a"));
    assert_pending!(fut.poll());
    time::advance(Duration::from_millis(10)).await;
    // The delay is over, but the clone is not ready: nothing is sent.
    assert_pending!(fut.poll());
    assert!(fut.enter(|_, f| format!("{f:?}")).contains("readying"));
    assert_pending!(handle.poll_request());
    handle.allow(1);
    assert!(fut.is_woken(), "readiness wakes the retry");
    assert_pending!(fut.poll());
    expect(&mut handle, "")
        .await
        .send_response(status(200, "ok"));
    assert_eq!(fut.await.unwrap().status(), StatusCode::OK);
}

#[test]
fn zero_delay_does_not_touch_the_timer() {
    // NOTE: a runtime without a timer: creating any tokio sleep would panic.
    crate::test_support::without_timers().block_on(async {
        let (mut svc, mut handle) = spawn(reactor_policy(Duration::ZERO));
        handle.allow(1);
        assert_ready!(svc.poll_ready()).unwrap();
        let mut fut = tokio_test::task::spawn(svc.call(request("")));
        assert_pending!(fut.poll());
        expect(&mut handle, "")
            .await
            .send_response(status(503, "a"));
        assert_pending!(fut.poll());
        // Straight to readiness: no backoff state.
        let state = fut.enter(|_, f| format!("{f:?}"));
        assert!(state.contains("readying"), "{state}");
        handle.allow(2);
        let server = async {
            expect(&mut handle, "")
                .await
                .send_response(status(503, "b"));
            expect(&mut handle, "")
                .await
                .send_response(status(200, "ok"));
        };
        let (response, ()) = tokio::join!(fut, server);
        assert_eq!(Attempts::of(&response.unwrap()), 3);
    });
}

#[test]
#[should_panic(expected = "timers are disabled")]
fn a_nonzero_delay_needs_the_timer() {
    // The counterpart of the test above: the same flow with a 1 ms delay does
    // create a timer, which this runtime cannot provide.
    crate::test_support::without_timers().block_on(async {
        let (mut svc, mut handle) = spawn(reactor_policy(Duration::from_millis(1)));
        handle.allow(1);
        assert_ready!(svc.poll_ready()).unwrap();
        let mut fut = tokio_test::task::spawn(svc.call(request("")));
        assert_pending!(fut.poll());
        expect(&mut handle, "")
            .await
            .send_response(status(503, "a"));
        let _ = fut.poll();
    });
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn nonzero_delay_waits_in_backoff() {
    let (mut svc, mut handle) = spawn(reactor_policy(Duration::from_millis(10)));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut fut = tokio_test::task::spawn(svc.call(request("")));
    assert_pending!(fut.poll());
    expect(&mut handle, "")
        .await
        .send_response(status(503, "a"));
    assert_pending!(fut.poll());
    let state = fut.enter(|_, f| format!("{f:?}"));
    assert!(state.contains("backoff"), "{state}");
    time::advance(Duration::from_millis(9)).await;
    assert_pending!(fut.poll());
    assert!(fut.enter(|_, f| format!("{f:?}")).contains("backoff"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn does_not_retry_a_body_that_cannot_be_replayed() {
    type Streamed = Request<SendOnce<Full<Bytes>>>;
    let (mut svc, mut handle) = mock::spawn_layer::<Streamed, Resp, _>(StatusRetryLayer::new(
        reactor_policy(Duration::from_millis(10)),
    ));
    handle.allow(3);
    assert_ready!(svc.poll_ready()).unwrap();
    let body = SendOnce::new(Full::new(Bytes::from_static(b"stream")));
    let fut = svc.call(Request::new(body));
    let server = async {
        let (_, send) = handle.next_request().await.unwrap();
        send.send_response(status(503, "only"));
    };
    let (response, ()) = tokio::join!(fut, server);
    let response = response.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(Attempts::of(&response), 1);
    assert_pending!(handle.poll_request());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn dropping_the_future_during_backoff_stops_the_call() {
    let (mut svc, mut handle) = spawn(reactor_policy(Duration::from_millis(10)));
    handle.allow(3);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut fut = tokio_test::task::spawn(svc.call(request("")));
    assert_pending!(fut.poll());
    expect(&mut handle, "")
        .await
        .send_response(status(503, "a"));
    assert_pending!(fut.poll());
    drop(fut);
    time::advance(Duration::from_secs(1)).await;
    assert_pending!(handle.poll_request(), "no attempt after the drop");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_request_gets_a_fresh_retryer() {
    // Feign's retryer counts its attempts itself: shared state would leave the
    // second request without retries.
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FeignRetryer::new(Duration::ZERO, Duration::ZERO, 3),
    );
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(StatusRetryLayer::new(policy));
    handle.allow(6);
    for _ in 0..2 {
        assert_ready!(svc.poll_ready()).unwrap();
        let fut = svc.call(request(""));
        let server = async {
            for _ in 0..3 {
                expect(&mut handle, "")
                    .await
                    .send_response(status(503, "x"));
            }
        };
        let (response, ()) = tokio::join!(fut, server);
        assert_eq!(Attempts::of(&response.unwrap()), 3);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn stops_retrying_once_the_request_deadline_has_passed() {
    // A deadline inherited by the request (no Deadline layer outside), and a
    // retryer that would go on: no attempt is made past the deadline, and no
    // wait outlasts it.
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(100), 10),
    );
    let (mut svc, mut handle) = spawn(policy);
    handle.allow(10);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut req = request("");
    req.extensions_mut()
        .insert(RequestDeadline::after(Duration::from_millis(250)));
    let start = time::Instant::now();
    let fut = svc.call(req);
    let server = async {
        for _ in 0..3 {
            expect(&mut handle, "")
                .await
                .send_response(status(503, "x"));
        }
    };
    let (response, ()) =
        tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(fut, server) })
            .await
            .expect("the retries stop");
    // Attempts at 0, 100 and 200 ms; the wait after the third would end at
    // 300 ms, past the deadline: it is cut at 250 ms, and the last 503 comes
    // back then.
    let response = response.unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(250));
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let attempts = response.extensions().get::<Attempts>().copied().unwrap();
    assert_eq!(attempts.get(), 3);
    assert_eq!(attempts.stop(), Stop::DeadlinePassed);
    assert!(attempts.verdict().is_retry());
    assert_pending!(handle.poll_request());
}

// ===== idempotency, replay, switches =====

mod safety {
    use super::super::*;
    use crate::{body::*, policy::*};
    use crate::{Attempts, BoxError, FailureKind, Stop};
    use http::{Method, Request, Response};
    use http_body_util::BodyExt;
    use std::time::Duration;
    use tower::{Layer, ServiceExt};
    use tower_test::mock;

    type Resp = Response<http_body_util::Empty<bytes::Bytes>>;

    fn unavailable() -> Resp {
        Response::builder()
            .status(503)
            .body(Default::default())
            .unwrap()
    }

    /// Calls `svc` with `request`, answering every attempt with `answer`, and
    /// returns the summary and how many attempts the upstream saw.
    async fn run<D, R, B>(
        policy: RetryPolicy<D, R>,
        request: Request<B>,
        answer: fn() -> Result<Resp, BoxError>,
    ) -> (Option<Attempts>, usize)
    where
        D: Decoder<http_body_util::Empty<bytes::Bytes>, BoxError> + Send + Sync + 'static,
        R: Retryer + Send + Sync + 'static,
        B: TryCloneBody + http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: std::fmt::Debug,
    {
        let (upstream, mut handle) = mock::pair::<Request<B>, Resp>();
        let svc = StatusRetryLayer::new(policy).layer(upstream);
        let report = crate::RetryReport::new();
        let mut request = request;
        request.extensions_mut().insert(report.clone());
        let server = tokio::spawn(async move {
            let mut seen = 0;
            while let Some((request, send)) = handle.next_request().await {
                seen += 1;
                // The upstream reads the whole body, as a server does.
                let _ = request.into_body().collect().await;
                match answer() {
                    Ok(response) => send.send_response(response),
                    Err(err) => send.send_error(err),
                }
            }
            seen
        });
        let _ = tokio::time::timeout(Duration::from_secs(60), svc.oneshot(request))
            .await
            .expect("the call ends");
        (report.summary(), server.await.unwrap())
    }

    fn post() -> Request<String> {
        Request::post("/orders").body("{}".to_owned()).unwrap()
    }

    fn reactor() -> RetryPolicy<StatusDecoder, FixedDelay> {
        RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::ZERO, 2),
        )
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_post_that_got_a_503_is_not_sent_again() {
        let (summary, seen) = run(reactor(), post(), || Ok(unavailable())).await;
        assert_eq!(seen, 1);
        assert_eq!(summary.unwrap().stop(), Stop::NotIdempotent);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_idempotency_key_or_the_callers_word_makes_a_post_retryable() {
        let mut keyed = post();
        keyed
            .headers_mut()
            .insert(IDEMPOTENCY_KEY, "order-17".parse().unwrap());
        let (summary, seen) = run(reactor(), keyed, || Ok(unavailable())).await;
        assert_eq!((seen, summary.unwrap().stop()), (3, Stop::Exhausted));

        let mut marked = post();
        marked.extensions_mut().insert(Idempotency::Idempotent);
        let (_, seen) = run(reactor(), marked, || Ok(unavailable())).await;
        assert_eq!(seen, 3);

        let mut get = Request::get("/").body(String::new()).unwrap();
        get.extensions_mut().insert(Idempotency::NotIdempotent);
        let (summary, seen) = run(reactor(), get, || Ok(unavailable())).await;
        assert_eq!((seen, summary.unwrap().stop()), (1, Stop::NotIdempotent));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn status_retries_can_skip_the_idempotency_rule() {
        let policy = reactor().statuses_need_idempotency(false);
        let (_, seen) = run(policy, post(), || Ok(unavailable())).await;
        assert_eq!(seen, 3);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_post_that_was_never_sent_is_retried() {
        let policy = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(Duration::ZERO, 2));
        let refused = || Err(std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into());
        let (summary, seen) = run(policy, post(), refused).await;
        assert_eq!(seen, 3);
        let summary = summary.unwrap();
        assert_eq!(summary.stop(), Stop::Exhausted);
        assert_eq!(
            summary.verdict(),
            Verdict::retry(FailureKind::ConnectRefused)
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_sent_post_is_retried_only_with_request_sent_retry_enabled() {
        let reset = || Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset).into());
        let apache = RetryPolicy::new(ApacheDecoder::new(), FixedDelay::new(Duration::ZERO, 3));
        let (summary, seen) = run(apache.clone(), post(), reset).await;
        assert_eq!((seen, summary.unwrap().stop()), (1, Stop::NotIdempotent));

        let (_, seen) = run(apache.clone().retry_sent_requests(true), post(), reset).await;
        assert_eq!(seen, 4, "3 retries");

        let get = Request::builder()
            .method(Method::GET)
            .body(String::new())
            .unwrap();
        let (_, seen) = run(apache, get, reset).await;
        assert_eq!(seen, 4, "a GET is idempotent");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_callers_word_beats_retry_sent_requests() {
        let reset = || Err(std::io::Error::from(std::io::ErrorKind::ConnectionReset).into());
        let apache = RetryPolicy::new(ApacheDecoder::new(), FixedDelay::new(Duration::ZERO, 3))
            .retry_sent_requests(true);
        let mut post = post();
        post.extensions_mut().insert(Idempotency::NotIdempotent);
        let (summary, seen) = run(apache, post, reset).await;
        assert_eq!((seen, summary.unwrap().stop()), (1, Stop::NotIdempotent));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_call_out_of_retries_reads_exhausted_even_with_an_empty_budget() {
        let budget = std::sync::Arc::new(RetryBudget::new(4, 0.1).unwrap());
        let policy = RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::ZERO, 1),
        )
        .map_options(|o| o.with_budget(budget.clone()));
        let get = || Request::get("/").body(String::new()).unwrap();
        // First call: its failure leaves 3 tokens of 4, above half: one retry;
        // that one fails too (2 left) and the retryer is spent.
        let (summary, seen) = run(policy.clone(), get(), || Ok(unavailable())).await;
        assert_eq!((seen, summary.unwrap().stop()), (2, Stop::Exhausted));
        // The next failure leaves 1 token, below half: the retry is refused.
        let (summary, seen) = run(policy, get(), || Ok(unavailable())).await;
        assert_eq!((seen, summary.unwrap().stop()), (1, Stop::BudgetExhausted));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn disabled_retries_return_the_first_outcome() {
        let get = Request::get("/").body(String::new()).unwrap();
        let (summary, seen) = run(reactor().disabled(), get, || Ok(unavailable())).await;
        assert_eq!((seen, summary.unwrap().stop()), (1, Stop::Disabled));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_streamed_body_is_replayed_from_its_buffer() {
        use http_resilience_mock::body::ScriptedBody;
        let body = ReplayBody::new(ScriptedBody::new().data("part one, ").data("part two"));
        let request = Request::put("/doc").body(body).unwrap();
        let (upstream, mut handle) = mock::pair::<Request<ReplayBody<ScriptedBody>>, Resp>();
        let svc = StatusRetryLayer::new(reactor()).layer(upstream);
        let server = tokio::spawn(async move {
            let mut bodies = Vec::new();
            for status in [503, 503, 200] {
                let (request, send) = handle.next_request().await.unwrap();
                bodies.push(request.into_body().collect().await.unwrap().to_bytes());
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Default::default())
                        .unwrap(),
                );
            }
            bodies
        });
        let response = svc.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let bodies = server.await.unwrap();
        assert_eq!(bodies, ["part one, part two"; 3]);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_body_over_the_replay_cap_is_not_retried() {
        use http_resilience_mock::body::ScriptedBody;
        let body = ReplayBody::with_cap(ScriptedBody::new().data("0123456789"), 4);
        let request = Request::put("/doc").body(body).unwrap();
        let (summary, seen) = run(reactor(), request, || Ok(unavailable())).await;
        assert_eq!((seen, summary.unwrap().stop()), (1, Stop::NotReplayable));
    }
}

/// One call under `policy` whose first attempt is answered with `code`.
async fn first_attempt_answered(policy: Reactor, code: u16) -> Resp {
    let (mut svc, mut handle) = spawn(policy);
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let fut = svc.call(request("x"));
    expect(&mut handle, "x")
        .await
        .send_response(status(code, "answer"));
    fut.await.unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_first_attempt_accepted_carries_no_summary() {
    let response = first_attempt_answered(reactor_policy(Duration::ZERO), 200).await;
    assert!(response.extensions().get::<Attempts>().is_none());
    assert_eq!(Attempts::of(&response), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_first_attempt_not_accepted_carries_its_summary() {
    let response = first_attempt_answered(reactor_policy(Duration::ZERO).disabled(), 503).await;
    let summary = response.extensions().get::<Attempts>().copied();
    assert_eq!(
        summary.map(|s| (s.get(), s.stop())),
        Some((1, Stop::Disabled))
    );
}

/// A body that counts its copies.
#[derive(Debug)]
struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Clone for Counted {
    fn clone(&self) -> Self {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(self.0.clone())
    }
}

/// Copies of the body made by a call whose attempts all answer 503, with
/// `retries` retries at zero delay, and the attempts the upstream saw.
async fn copies_for_503s(retries: u32) -> (usize, u32) {
    let copies = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let seen = attempts.clone();
    let upstream = tower::service_fn(move |request: Request<Counted>| {
        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // NOTE: the last attempt is marked, so the attempt timeout may use the deadline.
        let last = request
            .extensions()
            .get::<crate::extensions::FinalAttempt>()
            .is_some();
        let mut response = Response::new(last);
        *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        std::future::ready(Ok::<_, BoxError>(response))
    });
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::ZERO, retries),
    );
    let mut svc = tower_layer::Layer::layer(&StatusRetryLayer::new(policy), upstream);
    let response = tower::ServiceExt::oneshot(&mut svc, Request::new(Counted(copies.clone())))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(*response.body(), "the last attempt carries FinalAttempt");
    (
        copies.load(std::sync::atomic::Ordering::Relaxed),
        attempts.load(std::sync::atomic::Ordering::Relaxed),
    )
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_last_attempt_takes_the_kept_copy_instead_of_copying_it() {
    // One copy is kept at the first attempt; every retry but the last makes
    // a further copy, and the last sends the kept one.
    assert_eq!(copies_for_503s(1).await, (1, 2));
    assert_eq!(copies_for_503s(2).await, (2, 3));
    assert_eq!(copies_for_503s(4).await, (4, 5));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_readiness_failure_reports_the_last_verdict_and_why_it_stopped() {
    #[derive(Debug)]
    struct Unready;
    impl std::fmt::Display for Unready {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the upstream pool is closed")
        }
    }
    impl std::error::Error for Unready {}

    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&events);
    let policy = reactor_policy(Duration::from_millis(10)).map_options(|o| {
        o.with_listener(move |heard: &CallEvent<'_>| seen.lock().unwrap().push(heard.event))
    });
    let (mut svc, mut handle) = mock::spawn_layer::<Req, Resp, _>(StatusRetryLayer::new(policy));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let report = RetryReport::new();
    let mut req = request("");
    req.extensions_mut().insert(report.clone());
    let mut fut = tokio_test::task::spawn(svc.call(req));
    assert_pending!(fut.poll());
    expect(&mut handle, "")
        .await
        .send_response(status(503, "a"));
    // The clone that would send the retry fails to get ready.
    handle.send_error(Unready);
    let err = fut.await.unwrap_err();
    assert!(err.is::<Unready>(), "the readiness error itself: {err}");
    let summary = report.summary().expect("the call is over");
    assert_eq!(summary.get(), 1);
    assert_eq!(summary.stop(), Stop::NotReady);
    assert_eq!(
        summary.verdict(),
        Verdict::retry(StatusCode::SERVICE_UNAVAILABLE),
        "the verdict on the 503, not an acceptance"
    );
    let last = events.lock().unwrap().last().copied();
    assert!(
        matches!(last, Some(RetryEvent::Done { verdict, stop: Stop::NotReady, .. }) if verdict.is_retry()),
        "{last:?}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_final_attempt_marker_the_request_brings_is_not_passed_on() {
    // A marker copied from another request's extensions: the first of three
    // attempts is not the last, whatever it says.
    let (mut svc, mut handle) = spawn(reactor_policy(Duration::ZERO));
    handle.allow(1);
    assert_ready!(svc.poll_ready()).unwrap();
    let mut req = request("");
    req.extensions_mut().insert(crate::extensions::FinalAttempt);
    let fut = svc.call(req);
    let (sent, send) = handle.next_request().await.expect("the first attempt");
    assert_eq!(
        sent.extensions().get::<crate::extensions::FinalAttempt>(),
        None
    );
    send.send_response(status(200, "ok"));
    assert_eq!(fut.await.unwrap().status(), StatusCode::OK);
}
