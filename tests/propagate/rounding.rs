//! Budgets under the smallest unit of their format, on the paused clock: a
//! live budget is never sent as `0` (which Envoy reads as no timeout at all)
//! but rounded up to that unit, and a budget already spent is not sent: the
//! attempt ends with the deadline's error. Both forms of the stack: the three
//! layers with a `PropagateDeadlineLayer`, and the combined service
//! (`ResiliencePolicy::propagating`, `GrpcLayer`).

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, Response};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::error::DeadlineExceeded,
    grpc::GrpcLayer,
    policy::{FixedDelay, StatusDecoder},
    presets,
    propagate::{
        InheritDeadlineLayer, PropagateDeadlineLayer, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS,
        GRPC_TIMEOUT,
    },
    retry::{RetryPolicy, StatusRetryLayer},
    BoxError, RequestDeadline, ResiliencePolicy,
};
use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};
use tower::{util::BoxCloneService, Layer, ServiceBuilder, ServiceExt};
use tower_test::mock;

use crate::support::guarded;

/// The attempt limit of every stack here: far above every budget.
const ATTEMPT: Duration = Duration::from_secs(5);

/// What the upstream saw of each request: the budget header, if any.
type Seen = Arc<Mutex<Vec<Option<HeaderValue>>>>;

/// An upstream that answers 200 at once and records `header`.
fn recording(header: HeaderName) -> (Seen, Upstream) {
    let seen = Seen::default();
    let record = Arc::clone(&seen);
    let upstream = tower::service_fn(move |request: Request<Full<Bytes>>| {
        record
            .lock()
            .unwrap()
            .push(request.headers().get(&header).cloned());
        std::future::ready(Ok::<_, Infallible>(Response::new(String::new())))
    });
    (seen, BoxCloneService::new(upstream))
}

fn policy() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 1),
    )
}

type Client = BoxCloneService<Request<Full<Bytes>>, Response<String>, BoxError>;

/// The retry and attempt layers of the three, with no `DeadlineLayer`: the
/// request brings its deadline, copied from an inbound one.
fn three_layers(header: &HeaderName, format: TimeoutFormat, upstream: Upstream) -> Client {
    let svc = ServiceBuilder::new()
        .layer(StatusRetryLayer::new(policy()))
        .layer(PropagateDeadlineLayer::new(header.clone(), format).with_attempt_limit(ATTEMPT))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(upstream);
    BoxCloneService::new(svc)
}

/// The combined service, sending the budget itself; its own deadline is long, so
/// the request's is the one in force.
fn combined(header: &HeaderName, format: TimeoutFormat, upstream: Upstream) -> Client {
    let svc = ResiliencePolicy::new(ATTEMPT, ATTEMPT, policy())
        .unwrap()
        .propagating(header.clone(), format)
        .layer()
        .layer(upstream)
        .map_response(|response| response.map(|body| body.get_ref().clone()));
    BoxCloneService::new(svc)
}

type Upstream = BoxCloneService<Request<Full<Bytes>>, Response<String>, Infallible>;

type Form = fn(&HeaderName, TimeoutFormat, Upstream) -> Client;

const FORMS: [(&str, Form); 2] = [("three layers", three_layers), ("combined", combined)];

/// The header each form sends for a request whose deadline is `budget` away.
async fn sent_for(budget: Duration, header: &HeaderName, format: TimeoutFormat) -> Vec<String> {
    let mut sent = Vec::new();
    for (name, form) in FORMS {
        let (seen, upstream) = recording(header.clone());
        let svc = form(header, format, upstream);
        let mut request = Request::new(Full::default());
        request
            .extensions_mut()
            .insert(RequestDeadline::after(budget));
        guarded(svc.oneshot(request))
            .await
            .unwrap_or_else(|err| panic!("{name}, {budget:?}: {err}"));
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{name}: one attempt");
        let value = seen[0].clone().expect("the budget is sent");
        sent.push(value.to_str().unwrap().to_owned());
    }
    sent
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_live_budget_under_a_millisecond_is_sent_as_one_millisecond() {
    for budget in [
        Duration::from_nanos(1),
        Duration::from_micros(1),
        Duration::from_micros(999),
        Duration::from_millis(1),
    ] {
        let sent = sent_for(budget, &EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis).await;
        assert_eq!(sent, ["1", "1"], "{budget:?}: never 0, rounded up to 1 ms");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_live_budget_is_sent_in_grpc_to_the_nanosecond() {
    for (budget, expected) in [
        (Duration::from_nanos(1), "1n"),
        (Duration::from_micros(1), "1000n"),
        (Duration::from_micros(999), "999000n"),
        (Duration::from_millis(1), "1000000n"),
    ] {
        let sent = sent_for(budget, &GRPC_TIMEOUT, TimeoutFormat::Grpc).await;
        assert_eq!(sent, [expected, expected], "{budget:?}");
    }
}

/// An inbound server that takes the deadline over from `grpc-timeout` and
/// sends one request through `client` with it; what the upstream saw.
async fn inbound_then_outbound(
    inbound_timeout: &'static str,
    client: Client,
) -> Result<(), BoxError> {
    let server = ServiceBuilder::new()
        .layer(InheritDeadlineLayer::grpc())
        .service_fn(move |inbound: Request<()>| {
            let client = client.clone();
            async move {
                let mut outbound = Request::new(Full::default());
                if let Some(deadline) = RequestDeadline::of(&inbound) {
                    outbound.extensions_mut().insert(deadline);
                }
                client.oneshot(outbound).await.map(drop)
            }
        });
    let inbound = Request::builder()
        .header(GRPC_TIMEOUT, inbound_timeout)
        .body(())
        .unwrap();
    guarded(server.oneshot(inbound)).await
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_inbound_grpc_timeout_of_one_nanosecond_is_never_sent_as_zero() {
    for (header, format, expected) in [
        (EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis, "1"),
        (GRPC_TIMEOUT, TimeoutFormat::Grpc, "1n"),
    ] {
        for (name, form) in FORMS {
            let (seen, upstream) = recording(header.clone());
            let client = form(&header, format, upstream);
            inbound_then_outbound("1n", client)
                .await
                .unwrap_or_else(|err| panic!("{name}, {header}: {err}"));
            let seen = seen.lock().unwrap().clone();
            assert_eq!(seen.len(), 1, "{name}, {header}");
            assert_eq!(
                seen[0].as_ref().map(|v| v.to_str().unwrap()),
                Some(expected),
                "{name}, {header}"
            );
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_inbound_grpc_timeout_of_one_nanosecond_through_the_grpc_layer() {
    let (upstream, mut handle) =
        mock::pair::<Request<tonic::body::Body>, Response<tonic::body::Body>>();
    let svc = GrpcLayer::new(presets::grpc()).layer(upstream);
    // As tonic sends a timeout set with `Request::set_timeout`.
    let request = Request::builder()
        .header(GRPC_TIMEOUT, "1n")
        .body(Full::<Bytes>::default())
        .unwrap();
    let call = tokio::spawn(svc.oneshot(request));
    let (sent, respond) = guarded(handle.next_request()).await.unwrap();
    assert_eq!(sent.headers()[GRPC_TIMEOUT], "1n", "not 0n");
    respond.send_response(
        Response::builder()
            .header("grpc-status", "0")
            .body(tonic::body::Body::empty())
            .unwrap(),
    );
    guarded(call).await.unwrap().unwrap();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_expired_budget_is_not_sent_and_ends_with_the_deadline_error() {
    for (header, format) in [
        (EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis),
        (GRPC_TIMEOUT, TimeoutFormat::Grpc),
    ] {
        for (name, form) in FORMS {
            // A deadline copied onto the request, spent by the time it goes.
            let (seen, upstream) = recording(header.clone());
            let svc = form(&header, format, upstream);
            let mut request = Request::new(Full::default());
            let copied = Duration::from_millis(5);
            request
                .extensions_mut()
                .insert(RequestDeadline::after(copied));
            tokio::time::advance(copied).await;
            let err = guarded(svc.oneshot(request)).await.unwrap_err();
            assert_eq!(
                err.downcast_ref::<DeadlineExceeded>()
                    .map(DeadlineExceeded::duration),
                Some(copied),
                "{name}, {header}: {err}"
            );
            assert_eq!(seen.lock().unwrap().len(), 0, "{name}, {header}: not sent");

            // An inbound `grpc-timeout` of zero, taken over by a handler.
            let (seen, upstream) = recording(header.clone());
            let client = form(&header, format, upstream);
            let err = inbound_then_outbound("0n", client).await.unwrap_err();
            assert!(
                err.downcast_ref::<DeadlineExceeded>().is_some(),
                "{name}, {header}: {err}"
            );
            assert_eq!(seen.lock().unwrap().len(), 0, "{name}, {header}: not sent");
        }
    }
}

/// The retry and the propagation alone (no attempt timeout inside, which
/// would refuse a spent deadline too): the spent budget is still not sent.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_expired_budget_is_not_sent_without_an_attempt_timeout_inside() {
    for (header, format) in [
        (EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis),
        (GRPC_TIMEOUT, TimeoutFormat::Grpc),
    ] {
        let (seen, upstream) = recording(header.clone());
        let svc = ServiceBuilder::new()
            .layer(StatusRetryLayer::new(policy()))
            .layer(PropagateDeadlineLayer::new(header.clone(), format))
            .service(upstream.map_err(BoxError::from));
        let mut request = Request::new(Full::default());
        request
            .extensions_mut()
            .insert(RequestDeadline::after(Duration::from_millis(5)));
        tokio::time::advance(Duration::from_millis(5)).await;
        let outcome = guarded(svc.oneshot(request)).await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen, [], "{header}: the upstream got no request");
        let err = outcome.expect_err("the deadline's error");
        assert!(err.downcast_ref::<DeadlineExceeded>().is_some(), "{err}");
    }
}
