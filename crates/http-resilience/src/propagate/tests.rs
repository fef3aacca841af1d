use super::{
    error::TimeoutProblem, inherit_deadline, InheritDeadlineLayer, PropagateDeadline,
    PropagateDeadlineLayer, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT,
};
use crate::{
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, RequestDeadline,
};
use http::{HeaderValue, Request, Response};
use std::{convert::Infallible, future::Future, time::Duration};
use tokio::time::{self, Instant};
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_test::mock;

type Req = Request<String>;
type Resp = Response<String>;

const BUDGET: Duration = Duration::from_secs(2);
const SLOW: Duration = Duration::from_millis(300);
const DELAY: Duration = Duration::from_millis(100);
/// The guard on every await that could hang, far above every budget here.
const TIMEOUT: Duration = Duration::from_secs(60);

use TimeoutFormat::{Grpc, Millis};

async fn guarded<F: Future>(future: F) -> F::Output {
    time::timeout(TIMEOUT, future)
        .await
        .expect("hung past the test guard")
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn parse(value: &str, format: TimeoutFormat) -> Result<Duration, String> {
    let value = HeaderValue::from_str(value).expect("a valid header value");
    format.parse(&value).map_err(|err| err.to_string())
}

/// A service that answers with the value of `header` it received, if any.
fn echo_header(
    header: http::HeaderName,
) -> impl tower::Service<Req, Response = Response<Option<HeaderValue>>, Error = Infallible> + Clone
{
    tower::service_fn(move |request: Req| {
        let seen = request.headers().get(&header).cloned();
        async move { Ok(Response::new(seen)) }
    })
}

fn with_deadline(budget: Duration) -> Req {
    let mut request = Request::new(String::new());
    request
        .extensions_mut()
        .insert(RequestDeadline::after(budget));
    request
}

// ===== formatting =====

#[test]
fn millis_are_whole_milliseconds_rounded_down() {
    let cases = [
        (ms(1500), "1500"),
        (Duration::from_secs(7200), "7200000"),
        (Duration::from_micros(1_500_999), "1500"),
        (Duration::from_nanos(1_999_999), "1"),
        (ms(2), "2"),
    ];
    for (budget, expected) in cases {
        assert_eq!(Millis.format(budget), expected, "{budget:?}");
    }
}

#[test]
fn millis_never_write_zero() {
    // Under one millisecond, rounded up to it: Envoy reads `0` as no timeout.
    let cases = [
        (Duration::from_nanos(1), "1"),
        (Duration::from_micros(1), "1"),
        (Duration::from_nanos(999_999), "1"),
        (ms(1), "1"),
        (Duration::ZERO, "1"),
    ];
    for (budget, expected) in cases {
        assert_eq!(Millis.format(budget), expected, "{budget:?}");
    }
    assert_eq!(Millis.smallest_unit(), ms(1));
}

#[test]
fn grpc_never_writes_zero_nor_more_than_eight_digits() {
    let cases = [
        (Duration::ZERO, "1n"),
        (Duration::from_nanos(1), "1n"),
        (Duration::from_micros(1), "1000n"),
        (Duration::from_nanos(999_999), "999999n"),
        (ms(1), "1000000n"),
        // Every switch to a coarser unit: the value stays at six digits or
        // more, and never above eight.
        (Duration::from_nanos(100_000_000), "100000u"),
        (Duration::from_nanos(99_999_999_999), "99999999u"),
        (Duration::from_micros(100_000_000), "100000m"),
        (ms(100_000_000), "100000S"),
        (Duration::from_secs(100_000_000), "1666666M"),
        (Duration::from_secs(6_000_000_000), "1666666H"),
    ];
    for (budget, expected) in cases {
        let value = Grpc.format(budget);
        assert_eq!(value, expected, "{budget:?}");
        assert!(value.len() <= 9, "{value:?}");
    }
    assert_eq!(Grpc.smallest_unit(), Duration::from_nanos(1));
}

#[test]
fn grpc_uses_the_finest_unit_that_fits_eight_digits() {
    let cases = [
        (Duration::from_nanos(1), "1n"),
        (Duration::from_micros(250), "250000n"),
        // The largest budget written in nanoseconds, and the first that is not.
        (Duration::from_nanos(99_999_999), "99999999n"),
        (Duration::from_nanos(100_000_000), "100000u"),
        (ms(1500), "1500000u"),
        // 123.456789123 s: 9 digits of microseconds do not fit, so it is
        // 123456 ms, 789123 ns rounded away.
        (Duration::new(123, 456_789_123), "123456m"),
        (Duration::from_secs(7200), "7200000m"),
        (Duration::from_secs(100_000), "100000S"),
        (Duration::from_secs(99_999_999), "99999999S"),
        (Duration::from_secs(100_000_000), "1666666M"),
        (Duration::from_secs(99_999_999 * 60 + 59), "99999999M"),
        (Duration::from_secs(100_000_000 * 60), "1666666H"),
    ];
    for (budget, expected) in cases {
        assert_eq!(Grpc.format(budget), expected, "{budget:?}");
    }
}

#[test]
fn enormous_budgets_saturate() {
    assert_eq!(Millis.format(Duration::MAX), "18446744073709551615");
    assert_eq!(Grpc.format(Duration::MAX), "99999999H");
    let largest_grpc = Duration::from_secs(99_999_999 * 3600);
    assert_eq!(
        Grpc.format(largest_grpc + Duration::from_secs(3600)),
        "99999999H"
    );
    assert_eq!(
        parse("99999999H", Grpc),
        Ok(largest_grpc),
        "the largest gRPC value is read without overflow"
    );
    assert_eq!(parse("18446744073709551615", Millis), Ok(ms(u64::MAX)));
}

// ===== parsing =====

#[test]
fn parses_both_formats() {
    assert_eq!(parse("1500", Millis), Ok(ms(1500)));
    assert_eq!(parse("0", Millis), Ok(Duration::ZERO));
    assert_eq!(parse("007", Millis), Ok(ms(7)));
    assert_eq!(parse("2H", Grpc), Ok(Duration::from_secs(7200)));
    assert_eq!(parse("3M", Grpc), Ok(Duration::from_secs(180)));
    assert_eq!(parse("4S", Grpc), Ok(Duration::from_secs(4)));
    assert_eq!(parse("1500m", Grpc), Ok(ms(1500)));
    assert_eq!(parse("1500000u", Grpc), Ok(ms(1500)));
    assert_eq!(parse("250000n", Grpc), Ok(Duration::from_micros(250)));
    assert_eq!(parse("0n", Grpc), Ok(Duration::ZERO));
    assert_eq!(parse("00000001S", Grpc), Ok(Duration::from_secs(1)));
}

#[test]
fn surrounding_whitespace_is_ignored() {
    assert_eq!(parse(" \t1500 ", Millis), Ok(ms(1500)));
    assert_eq!(parse("\t2S  ", Grpc), Ok(Duration::from_secs(2)));
}

#[test]
fn malformed_values_are_errors_that_name_the_problem() {
    let cases: &[(&[u8], TimeoutFormat, TimeoutProblem, &str)] = &[
        (
            b"",
            Millis,
            TimeoutProblem::Empty,
            r#"invalid timeout: empty"#,
        ),
        (
            b"  ",
            Grpc,
            TimeoutProblem::Empty,
            r#"invalid timeout: empty"#,
        ),
        (
            "15\u{e9}".as_bytes(),
            Millis,
            TimeoutProblem::NotAscii,
            r#"invalid timeout: not ASCII"#,
        ),
        (
            b"1 500",
            Millis,
            TimeoutProblem::Whitespace,
            r#"invalid timeout: whitespace inside the value"#,
        ),
        (
            b"15\tS",
            Grpc,
            TimeoutProblem::Whitespace,
            r#"invalid timeout: whitespace inside the value"#,
        ),
        (
            b"-5",
            Millis,
            TimeoutProblem::Negative,
            r#"invalid timeout: negative"#,
        ),
        (
            b"-5S",
            Grpc,
            TimeoutProblem::Negative,
            r#"invalid timeout: negative"#,
        ),
        (
            b"+5",
            Millis,
            TimeoutProblem::NotANumber,
            r#"invalid timeout: not a decimal integer"#,
        ),
        (
            b"1.5",
            Millis,
            TimeoutProblem::NotANumber,
            r#"invalid timeout: not a decimal integer"#,
        ),
        (
            b"1500ms",
            Millis,
            TimeoutProblem::NotANumber,
            r#"invalid timeout: not a decimal integer"#,
        ),
        (
            b"1.5S",
            Grpc,
            TimeoutProblem::NotANumber,
            r#"invalid timeout: not a decimal integer"#,
        ),
        (
            b"18446744073709551616",
            Millis,
            TimeoutProblem::OutOfRange,
            r#"invalid timeout: more milliseconds than a u64 holds"#,
        ),
        (
            b"123456789m",
            Grpc,
            TimeoutProblem::TooManyDigits,
            r#"invalid timeout: more than 8 digits"#,
        ),
        (
            b"000000001m",
            Grpc,
            TimeoutProblem::TooManyDigits,
            r#"invalid timeout: more than 8 digits"#,
        ),
        (
            b"99999999999999999999999n",
            Grpc,
            TimeoutProblem::TooManyDigits,
            r#"invalid timeout: more than 8 digits"#,
        ),
        (
            b"S",
            Grpc,
            TimeoutProblem::NoDigits,
            r#"invalid timeout: no digits before the unit"#,
        ),
        (
            b"1500",
            Grpc,
            TimeoutProblem::MissingUnit,
            r#"invalid timeout: missing unit, expected H, M, S, m, u or n"#,
        ),
        (
            b"2s",
            Grpc,
            TimeoutProblem::UnknownUnit('s'),
            r#"invalid timeout: unknown unit, expected H, M, S, m, u or n"#,
        ),
    ];
    for &(value, format, problem, message) in cases {
        let header = HeaderValue::from_bytes(value).expect("a valid header value");
        let err = format.parse(&header).unwrap_err();
        assert_eq!(err.problem(), problem, "{value:?} as {format:?}");
        assert_eq!(err.to_string(), message);
        assert_eq!(
            err.value(),
            value.escape_ascii().to_string(),
            "the value kept apart"
        );
    }
}

// ===== PropagateDeadline =====

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn each_attempt_carries_the_budget_left_when_it_starts() {
    let (upstream, mut handle) = mock::pair::<Req, Resp>();
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 1),
    );
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(BUDGET))
        .layer(StatusRetryLayer::new(policy))
        .layer(PropagateDeadlineLayer::envoy())
        .service(upstream);
    let start = Instant::now();
    let call = tokio::spawn(svc.oneshot(Request::new(String::new())));

    let (request, send) = guarded(handle.next_request()).await.unwrap();
    assert_eq!(request.headers()[EXPECTED_RQ_TIMEOUT_MS], "2000");
    time::advance(SLOW).await;
    send.send_response(Response::builder().status(503).body(String::new()).unwrap());

    let (request, send) = guarded(handle.next_request()).await.unwrap();
    let elapsed = start.elapsed();
    assert_eq!(elapsed, SLOW + DELAY);
    // Exactly the elapsed time less: 2000 - 400.
    assert_eq!(request.headers()[EXPECTED_RQ_TIMEOUT_MS], "1600");
    send.send_response(Response::new("ok".to_owned()));

    let response = guarded(call).await.unwrap().unwrap();
    assert_eq!(Attempts::of(&response), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_attempt_limit_caps_the_budget() {
    let svc = ServiceBuilder::new()
        .layer(PropagateDeadlineLayer::envoy().with_attempt_limit(ms(500)))
        .service(echo_header(EXPECTED_RQ_TIMEOUT_MS));

    // The limit is the smaller.
    let response = svc.clone().oneshot(with_deadline(BUDGET)).await.unwrap();
    assert_eq!(response.body().as_ref().unwrap(), "500");
    // The deadline is the smaller.
    let response = svc.clone().oneshot(with_deadline(ms(300))).await.unwrap();
    assert_eq!(response.body().as_ref().unwrap(), "300");
    // No deadline: the limit alone.
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.body().as_ref().unwrap(), "500");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_grpc_layer_writes_grpc_timeout() {
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(BUDGET))
        .layer(PropagateDeadlineLayer::grpc())
        .service(echo_header(GRPC_TIMEOUT));
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.body().get_ref().as_ref().unwrap(), "2000000u");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_deadline_or_limit_the_header_is_left_alone() {
    let svc = PropagateDeadlineLayer::envoy().layer(echo_header(EXPECTED_RQ_TIMEOUT_MS));

    let response = svc
        .clone()
        .oneshot(Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(response.body(), &None, "not added");

    let request = Request::builder()
        .header(EXPECTED_RQ_TIMEOUT_MS, "12345")
        .body(String::new())
        .unwrap();
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.body().as_ref().unwrap(), "12345", "kept as it was");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_budget_replaces_an_existing_header() {
    let all_values = tower::service_fn(|request: Req| async move {
        let all: Vec<HeaderValue> = request
            .headers()
            .get_all(EXPECTED_RQ_TIMEOUT_MS)
            .iter()
            .cloned()
            .collect();
        Ok::<_, Infallible>(Response::new(all))
    });
    let svc = PropagateDeadline::new(all_values, EXPECTED_RQ_TIMEOUT_MS, Millis);
    let mut request = with_deadline(ms(800));
    let headers = request.headers_mut();
    headers.insert(EXPECTED_RQ_TIMEOUT_MS, HeaderValue::from_static("12345"));
    headers.append(EXPECTED_RQ_TIMEOUT_MS, HeaderValue::from_static("678"));
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(
        response.into_body(),
        ["800"],
        "every earlier value replaced"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_expired_deadline_is_not_sent() {
    for layer in [
        PropagateDeadlineLayer::envoy(),
        PropagateDeadlineLayer::grpc(),
    ] {
        let (upstream, mut handle) = mock::pair::<Req, Resp>();
        let svc = layer.with_attempt_limit(BUDGET).layer(upstream);
        let request = with_deadline(ms(5));
        time::advance(ms(5)).await;
        let err = guarded(svc.oneshot(request)).await.unwrap_err();
        let exceeded = err.downcast_ref::<DeadlineExceeded>();
        assert_eq!(
            exceeded.map(DeadlineExceeded::duration),
            Some(ms(5)),
            "{err}"
        );
        // The service is gone, and no request reached the upstream.
        assert!(
            guarded(handle.next_request()).await.is_none(),
            "the upstream was not called"
        );
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_zero_attempt_limit_sends_the_smallest_unit() {
    let svc = PropagateDeadlineLayer::envoy()
        .with_attempt_limit(Duration::ZERO)
        .layer(echo_header(EXPECTED_RQ_TIMEOUT_MS));
    let response = svc.clone().oneshot(with_deadline(BUDGET)).await.unwrap();
    assert_eq!(response.body().as_ref().unwrap(), "1");
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.body().as_ref().unwrap(), "1");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn errors_pass_through_unchanged() {
    let (upstream, mut handle) = mock::pair::<Req, Resp>();
    let svc = PropagateDeadlineLayer::envoy().layer(upstream);
    let call = tokio::spawn(svc.oneshot(with_deadline(BUDGET)));
    let (_request, send) = guarded(handle.next_request()).await.unwrap();
    send.send_error(std::io::Error::other("refused"));
    let err = guarded(call).await.unwrap().unwrap_err();
    assert_eq!(err.to_string(), "refused");
}

// ===== inheriting =====

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_header_becomes_the_deadline() {
    let start = Instant::now();
    let mut request = Request::builder()
        .header(GRPC_TIMEOUT, "1500m")
        .body(())
        .unwrap();
    let deadline = inherit_deadline(&mut request, &GRPC_TIMEOUT, Grpc)
        .unwrap()
        .unwrap();
    assert_eq!(deadline.instant(), start + ms(1500));
    assert_eq!(deadline.budget(), ms(1500));
    assert_eq!(RequestDeadline::of(&request), Some(deadline));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_earlier_existing_deadline_wins_over_the_header() {
    let start = Instant::now();
    let mut request = Request::builder()
        .header(EXPECTED_RQ_TIMEOUT_MS, "2000")
        .body(())
        .unwrap();
    let existing = RequestDeadline::after(ms(700));
    request.extensions_mut().insert(existing);
    let in_force = inherit_deadline(&mut request, &EXPECTED_RQ_TIMEOUT_MS, Millis).unwrap();
    assert_eq!(in_force, Some(existing));
    assert_eq!(RequestDeadline::of(&request), Some(existing));
    assert_eq!(existing.instant(), start + ms(700));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_earlier_header_deadline_replaces_a_later_one() {
    let start = Instant::now();
    let mut request = Request::builder()
        .header(EXPECTED_RQ_TIMEOUT_MS, "700")
        .body(())
        .unwrap();
    request
        .extensions_mut()
        .insert(RequestDeadline::after(BUDGET));
    let in_force = inherit_deadline(&mut request, &EXPECTED_RQ_TIMEOUT_MS, Millis)
        .unwrap()
        .unwrap();
    assert_eq!(in_force.instant(), start + ms(700));
    assert_eq!(RequestDeadline::of(&request), Some(in_force));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_the_header_the_existing_deadline_stays() {
    let mut request = Request::new(());
    assert_eq!(
        inherit_deadline(&mut request, &EXPECTED_RQ_TIMEOUT_MS, Millis),
        Ok(None)
    );
    assert_eq!(RequestDeadline::of(&request), None);

    let existing = RequestDeadline::after(BUDGET);
    request.extensions_mut().insert(existing);
    assert_eq!(
        inherit_deadline(&mut request, &EXPECTED_RQ_TIMEOUT_MS, Millis),
        Ok(Some(existing))
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_malformed_header_is_an_error_and_changes_nothing() {
    let mut request = Request::builder()
        .header(GRPC_TIMEOUT, "15x")
        .body(())
        .unwrap();
    let err = inherit_deadline(&mut request, &GRPC_TIMEOUT, Grpc).unwrap_err();
    assert_eq!(err.problem(), TimeoutProblem::UnknownUnit('x'));
    assert_eq!(RequestDeadline::of(&request), None);

    let existing = RequestDeadline::after(BUDGET);
    request.extensions_mut().insert(existing);
    assert!(inherit_deadline(&mut request, &GRPC_TIMEOUT, Grpc).is_err());
    assert_eq!(RequestDeadline::of(&request), Some(existing));
}

/// A service that answers with the deadline its request carried.
fn echo_deadline(
) -> impl tower::Service<Request<()>, Response = Response<Option<RequestDeadline>>, Error = Infallible>
       + Clone {
    tower::service_fn(|request: Request<()>| async move {
        Ok(Response::new(RequestDeadline::of(&request)))
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_inherit_layer_records_the_deadline() {
    let start = Instant::now();
    let svc = ServiceBuilder::new()
        .layer(InheritDeadlineLayer::envoy())
        .service(echo_deadline());
    let request = Request::builder()
        .header(EXPECTED_RQ_TIMEOUT_MS, "1200")
        .body(())
        .unwrap();
    let response = svc.oneshot(request).await.unwrap();
    let deadline = response.into_body().expect("recorded");
    assert_eq!(deadline.instant(), start + ms(1200));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_inherit_layer_ignores_a_malformed_header() {
    let svc = ServiceBuilder::new()
        .layer(InheritDeadlineLayer::grpc())
        .service(echo_deadline());

    let request = Request::builder()
        .header(GRPC_TIMEOUT, "123456789S")
        .body(())
        .unwrap();
    let response = svc.clone().oneshot(request).await.unwrap();
    assert_eq!(response.into_body(), None, "served, without a deadline");

    let existing = RequestDeadline::after(BUDGET);
    let mut request = Request::builder()
        .header(GRPC_TIMEOUT, "soon")
        .body(())
        .unwrap();
    request.extensions_mut().insert(existing);
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.into_body(), Some(existing), "the deadline it had");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_stretched_final_attempt_advertises_the_whole_remaining_budget() {
    for (stretch, expected) in [(false, "500"), (true, "2000")] {
        let mut layer =
            PropagateDeadlineLayer::envoy().with_attempt_limit(Duration::from_millis(500));
        if stretch {
            layer = layer.final_attempt_uses_deadline();
        }
        let (upstream, mut handle) =
            tower_test::mock::pair::<http::Request<()>, http::Response<()>>();
        let svc = layer.layer(upstream);
        let mut request = http::Request::new(());
        request
            .extensions_mut()
            .insert(crate::RequestDeadline::after(Duration::from_secs(2)));
        request
            .extensions_mut()
            .insert(crate::extensions::FinalAttempt);
        let call = tokio::spawn(svc.oneshot(request));
        let (seen, send) = handle.next_request().await.unwrap();
        assert_eq!(
            seen.headers()["x-envoy-expected-rq-timeout-ms"],
            expected,
            "{stretch}"
        );
        send.send_response(http::Response::new(()));
        call.await.unwrap().unwrap();
    }
}

// ===== nonsense refused =====

#[test]
fn timeout_headers_are_refused_by_problem() {
    use TimeoutFormat::{Grpc, Millis};
    let cases: [(&[u8], TimeoutFormat, TimeoutProblem); 14] = [
        (b"", Millis, TimeoutProblem::Empty),
        (b" \t ", Grpc, TimeoutProblem::Empty),
        (b"\xff\xfe", Millis, TimeoutProblem::NotAscii),
        (b"1 2", Millis, TimeoutProblem::Whitespace),
        (b"-1", Millis, TimeoutProblem::Negative),
        (b"-1S", Grpc, TimeoutProblem::Negative),
        (b"1.5", Millis, TimeoutProblem::NotANumber),
        (b"abc", Millis, TimeoutProblem::NotANumber),
        (b"18446744073709551616", Millis, TimeoutProblem::OutOfRange),
        (b"123456789S", Grpc, TimeoutProblem::TooManyDigits),
        (
            b"99999999999999999999999H",
            Grpc,
            TimeoutProblem::TooManyDigits,
        ),
        (b"S", Grpc, TimeoutProblem::NoDigits),
        (b"5", Grpc, TimeoutProblem::MissingUnit),
        (b"5s", Grpc, TimeoutProblem::UnknownUnit('s')),
    ];
    for (bytes, format, problem) in cases {
        let value = HeaderValue::from_bytes(bytes).unwrap();
        let err = format.parse(&value).unwrap_err();
        assert_eq!(err.problem(), problem, "{bytes:?}");
        // The same through the request path, which leaves the request alone.
        let mut request = Request::builder()
            .header(GRPC_TIMEOUT, value)
            .body(())
            .unwrap();
        let err = inherit_deadline(&mut request, &GRPC_TIMEOUT, format).unwrap_err();
        assert_eq!(err.problem(), problem, "{bytes:?}");
        assert_eq!(RequestDeadline::of(&request), None);
    }
}
