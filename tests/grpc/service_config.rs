//! gRPC's service config through the public API, against the same scripted
//! tonic server as the other gRPC tests: the JSON a grpc-go or grpc-java
//! client reads, given to `ServiceConfigLayer`, and nothing else composed.

use super::{attempts, check, guarded, server, support::shown, Script, Step, UPLOAD};
use http_resilience::{
    grpc::{
        service_config::MethodPolicy, InvalidServiceConfig, ServiceConfig, ServiceConfigLayer,
        ServiceConfigured,
    },
    policy::{GrpcBackoff, GrpcDecoder, Idempotency, Retryer},
    propagate::TimeoutFormat,
    retry::RetryPolicy,
    Attempts,
};
use std::time::Duration;
use tokio::time::Instant;
use tonic::{transport::Channel, Code};
use tonic_health::pb::{
    health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest,
    HealthCheckResponse,
};
use tower::Layer;

/// The retry policy of grpc.io's retry guide (and of A6), for the health
/// service.
const RETRY_EXAMPLE: &str = r#"{
  "methodConfig": [{
    "name": [{"service": "grpc.health.v1.Health"}],
    "retryPolicy": {
      "maxAttempts": 4,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}"#;

/// A health client whose channel follows `json`, to a fresh server.
async fn health_client(
    json: &str,
    script: &std::sync::Arc<Script>,
) -> HealthClient<ServiceConfigured<Channel>> {
    let layer = ServiceConfigLayer::from_json(json).expect("a valid service config");
    HealthClient::new(layer.layer(server(script).await))
}

/// A unary call to `path` (served by the script, whatever the path), on a
/// channel that follows `json`.
async fn call_path(
    json: &str,
    script: &std::sync::Arc<Script>,
    path: &'static str,
    timeout: Option<Duration>,
) -> Result<tonic::Response<HealthCheckResponse>, tonic::Status> {
    let layer = ServiceConfigLayer::from_json(json).expect("a valid service config");
    let mut grpc = tonic::client::Grpc::new(layer.layer(server(script).await));
    let mut request = tonic::Request::new(HealthCheckRequest {
        service: "x".into(),
    });
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    guarded(async {
        grpc.ready().await.unwrap();
        grpc.unary(
            request,
            http::uri::PathAndQuery::from_static(path),
            tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default(),
        )
        .await
    })
    .await
}

fn previous_attempts(script: &Script) -> Vec<Option<String>> {
    script
        .seen()
        .into_iter()
        .map(|seen| seen.previous_attempts)
        .collect()
}

fn sent_timeouts(script: &Script) -> Vec<Duration> {
    let parse = |value: &str| TimeoutFormat::Grpc.parse(&value.parse().unwrap()).unwrap();
    script
        .seen()
        .iter()
        .map(|seen| parse(seen.timeout.as_deref().expect("grpc-timeout sent")))
        .collect()
}

// ===== retryPolicy =====

#[tokio::test]
async fn the_retry_example_of_grpcs_guide_retries_unavailable_until_ok() {
    let script = Script::new([Step::Status(14, None), Step::Status(14, None)]);
    let mut client = health_client(RETRY_EXAMPLE, &script).await;

    let response = guarded(client.check(check())).await.unwrap();

    assert_eq!(response.get_ref().status(), ServingStatus::Serving);
    assert_eq!(attempts(response.extensions()), 3);
    assert_eq!(
        previous_attempts(&script),
        [None, Some("1".to_owned()), Some("2".to_owned())]
    );
}

#[tokio::test]
async fn a_retried_method_without_a_timeout_sends_no_grpc_timeout_unless_the_caller_set_one() {
    let script = Script::new([Step::Status(14, None)]);
    let mut client = health_client(RETRY_EXAMPLE, &script).await;
    guarded(client.check(check())).await.unwrap();
    let sent: Vec<_> = script.seen().into_iter().map(|seen| seen.timeout).collect();
    assert_eq!(sent, [None, None], "no deadline anywhere, so none is sent");

    let script = Script::new([Step::Status(14, None)]);
    let mut client = health_client(RETRY_EXAMPLE, &script).await;
    let mut request = check();
    request.set_timeout(Duration::from_secs(5));
    guarded(client.check(request)).await.unwrap();
    let sent = sent_timeouts(&script);
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter().all(|left| *left <= Duration::from_secs(5)),
        "{sent:?}"
    );
}

#[tokio::test]
async fn the_retry_example_of_grpcs_guide_does_not_retry_a_code_it_does_not_list() {
    let script = Script::new([Step::Status(7, None)]);
    let mut client = health_client(RETRY_EXAMPLE, &script).await;

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(script.seen().len(), 1);
}

#[tokio::test]
async fn the_retry_example_of_grpcs_guide_stops_at_max_attempts() {
    let script = Script::new(std::iter::repeat_n(Step::Status(14, None), 6));
    let mut client = health_client(RETRY_EXAMPLE, &script).await;

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(status.message(), "scripted", "the server's own status");
    assert_eq!(script.seen().len(), 4);
}

// ===== hedgingPolicy =====

const HEDGE_EXAMPLE: &str = r#"{
  "methodConfig": [{
    "name": [{"service": "grpc.health.v1.Health", "method": "Check"}],
    "timeout": "10s",
    "hedgingPolicy": {
      "maxAttempts": 2,
      "hedgingDelay": "0.05s",
      "nonFatalStatusCodes": ["UNAVAILABLE"]
    }
  }]
}"#;

#[tokio::test]
async fn a_hedging_policy_takes_the_second_copy_when_the_first_is_silent() {
    let script = Script::new([Step::Silent]);
    let mut client = health_client(HEDGE_EXAMPLE, &script).await;

    // NOTE: the request carries no `Idempotency`: the hedging policy is the
    // service owner's word that the method may be sent twice.
    let start = Instant::now();
    let response = guarded(client.check(check())).await.unwrap();

    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(response.get_ref().status(), ServingStatus::Serving);
    let winner = response
        .extensions()
        .get::<Attempts>()
        .map(Attempts::winner);
    assert_eq!(winner, Some(2));
    assert_eq!(previous_attempts(&script), [None, Some("1".to_owned())]);
    let sent = sent_timeouts(&script);
    assert!(
        sent.iter()
            .all(|&left| left > Duration::ZERO && left <= Duration::from_secs(10)),
        "{sent:?}"
    );
}

#[tokio::test]
async fn a_call_its_caller_marks_not_idempotent_is_not_hedged() {
    let json = HEDGE_EXAMPLE.replace("\"10s\"", "\"0.5s\"");
    let script = Script::new([Step::Silent]);
    let mut client = health_client(&json, &script).await;

    let mut request = check();
    request.extensions_mut().insert(Idempotency::NotIdempotent);
    let status = guarded(client.check(request)).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(script.seen().len(), 1);
}

#[tokio::test]
async fn the_hedging_delay_holds_the_next_copy_back() {
    // A delay of 5 s and a timeout of 0.5 s: no second copy is ever due.
    let json = HEDGE_EXAMPLE
        .replace("\"0.05s\"", "\"5s\"")
        .replace("\"10s\"", "\"0.5s\"");
    let script = Script::new([Step::Silent]);
    let mut client = health_client(&json, &script).await;

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(script.seen().len(), 1);
}

#[tokio::test]
async fn a_non_fatal_code_sends_the_next_copy_at_once() {
    let json = HEDGE_EXAMPLE.replace("\"0.05s\"", "\"5s\"");
    let script = Script::new([Step::Status(14, None)]);
    let mut client = health_client(&json, &script).await;

    let start = Instant::now();
    let response = guarded(client.check(check())).await.unwrap();

    assert!(
        start.elapsed() < Duration::from_secs(4),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(response.get_ref().status(), ServingStatus::Serving);
    assert_eq!(script.seen().len(), 2);
}

// ===== timeout =====

#[tokio::test]
async fn a_timeout_ends_a_silent_call_with_deadline_exceeded() {
    let json = r#"{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}], "timeout": "0.3s"}]}"#;
    let script = Script::new([Step::Silent]);
    let mut client = health_client(json, &script).await;

    let start = Instant::now();
    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    let elapsed = start.elapsed();
    assert!(
        elapsed >= Duration::from_millis(300) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
    assert_eq!(script.seen().len(), 1);
    assert!(sent_timeouts(&script)[0] <= Duration::from_millis(300));
}

#[tokio::test]
async fn a_timeout_bounds_a_retried_method_too() {
    let json = RETRY_EXAMPLE.replacen(
        "\"retryPolicy\"",
        "\"timeout\": \"0.4s\",\n    \"retryPolicy\"",
        1,
    );
    let script = Script::new([Step::Silent]);
    let mut client = health_client(&json, &script).await;

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(script.seen().len(), 1);
    assert!(sent_timeouts(&script)[0] <= Duration::from_millis(400));
}

#[tokio::test]
async fn a_timeout_bounds_every_hedged_copy() {
    let json = HEDGE_EXAMPLE.replace("\"10s\"", "\"0.5s\"");
    let script = Script::new([Step::Silent, Step::Silent]);
    let mut client = health_client(&json, &script).await;

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(script.seen().len(), 2);
}

// ===== choosing the entry =====

/// Three entries that retry different codes: `{}` ABORTED, the health
/// service RESOURCE_EXHAUSTED, its `Check` UNAVAILABLE.
const LAYERED: &str = r#"{
  "methodConfig": [
    {"name": [{}],
     "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                     "backoffMultiplier": 1, "retryableStatusCodes": ["ABORTED"]}},
    {"name": [{"service": "grpc.health.v1.Health"}],
     "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                     "backoffMultiplier": 1, "retryableStatusCodes": ["RESOURCE_EXHAUSTED"]}},
    {"name": [{"service": "grpc.health.v1.Health", "method": "Check"}],
     "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                     "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}
  ]
}"#;

#[tokio::test]
async fn a_method_entry_wins_over_its_service_entry() {
    let script = Script::new([Step::Status(14, None)]);
    let mut client = health_client(LAYERED, &script).await;
    guarded(client.check(check())).await.unwrap();
    assert_eq!(script.seen().len(), 2, "Check retries UNAVAILABLE");

    let script = Script::new([Step::Status(8, None)]);
    let mut client = health_client(LAYERED, &script).await;
    let status = guarded(client.check(check())).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(script.seen().len(), 1, "not the service entry's code");
}

#[tokio::test]
async fn a_service_entry_wins_over_the_default_entry() {
    let script = Script::new([Step::Status(8, None)]);
    let mut client = health_client(LAYERED, &script).await;
    let request = HealthCheckRequest {
        service: String::new(),
    };
    guarded(client.watch(request)).await.unwrap();
    assert_eq!(script.seen().len(), 2, "Watch retries the service's code");

    let script = Script::new([Step::Status(10, None)]);
    let mut client = health_client(LAYERED, &script).await;
    let request = HealthCheckRequest {
        service: String::new(),
    };
    let status = guarded(client.watch(request)).await.unwrap_err();
    assert_eq!(status.code(), Code::Aborted);
    assert_eq!(script.seen().len(), 1, "not the default entry's code");
}

#[tokio::test]
async fn the_default_entry_serves_every_other_method() {
    let script = Script::new([Step::Status(10, None)]);
    call_path(LAYERED, &script, UPLOAD, None).await.unwrap();
    assert_eq!(script.seen().len(), 2, "the default entry retries ABORTED");

    let script = Script::new([Step::Status(14, None)]);
    let status = call_path(LAYERED, &script, UPLOAD, None).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.seen().len(), 1, "not Check's code");
}

#[tokio::test]
async fn a_method_no_entry_names_is_sent_once_under_the_callers_timeout() {
    let script = Script::new([Step::Status(14, None)]);
    let status = call_path(RETRY_EXAMPLE, &script, UPLOAD, None)
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    let seen = script.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].timeout, None, "no deadline, so no grpc-timeout");

    let script = Script::new([Step::Silent]);
    let timeout = Duration::from_millis(300);
    let status = call_path(RETRY_EXAMPLE, &script, UPLOAD, Some(timeout))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert!(sent_timeouts(&script)[0] <= timeout);
}

// ===== configs refused =====

/// The health service's entry with `policy` in it.
fn entry(policy: &str) -> String {
    format!(
        r#"{{"methodConfig": [{{"name": [{{"service": "grpc.health.v1.Health"}}], {policy}}}]}}"#
    )
}

/// The retry example's policy with `field` set to `value` (JSON text).
fn retry_policy(field: &str, value: &str) -> String {
    let fields = [
        ("maxAttempts", "4"),
        ("initialBackoff", "\"0.1s\""),
        ("maxBackoff", "\"1s\""),
        ("backoffMultiplier", "2"),
        ("retryableStatusCodes", "[\"UNAVAILABLE\"]"),
    ];
    let fields: Vec<String> = fields
        .iter()
        .map(|&(name, default)| {
            let value = if name == field { value } else { default };
            format!("\"{name}\": {value}")
        })
        .collect();
    entry(&format!("\"retryPolicy\": {{{}}}", fields.join(", ")))
}

#[test]
fn configs_grpc_would_refuse_are_refused_with_the_fields_path() {
    let retry = "methodConfig[0].retryPolicy";
    let cases = [
        (
            retry_policy("maxAttempts", "1"),
            format!("{retry}.maxAttempts: must be at least 2"),
        ),
        (
            retry_policy("initialBackoff", "\"0s\""),
            format!("{retry}.initialBackoff: must be greater than 0s"),
        ),
        (
            retry_policy("initialBackoff", "\"-1s\""),
            format!("{retry}.initialBackoff: must be greater than 0s"),
        ),
        (
            retry_policy("maxBackoff", "\"abc\""),
            format!(
                "{retry}.maxBackoff: must be a duration such as \"1.5s\" \
                 (seconds, up to 9 decimals, then \"s\")"
            ),
        ),
        (
            retry_policy("backoffMultiplier", "0"),
            format!("{retry}.backoffMultiplier: must be greater than 0"),
        ),
        (
            retry_policy("retryableStatusCodes", "[\"NOT_A_CODE\"]"),
            format!("{retry}.retryableStatusCodes[0]: is not a gRPC status code name"),
        ),
        (
            retry_policy("retryableStatusCodes", "[]"),
            format!("{retry}.retryableStatusCodes: must name at least one code"),
        ),
        (
            retry_policy("maxAttempts", "\"four\""),
            format!("{retry}.maxAttempts: must be a number, got a string"),
        ),
        (
            entry(r#""retryPolicy": {}, "hedgingPolicy": {"maxAttempts": 2}"#),
            "methodConfig[0]: has both a retryPolicy and a hedgingPolicy; \
             a method takes one or the other"
                .to_owned(),
        ),
        (
            r#"{"methodConfig": [{"name": [{"service": "a"}]}, {"name": [{"service": "a"}]}]}"#
                .to_owned(),
            "methodConfig[1].name[0]: duplicates the name at methodConfig[0].name[0]".to_owned(),
        ),
        (
            r#"{"methodConfig": [{"name": [{"method": "Check"}]}]}"#.to_owned(),
            "methodConfig[0].name[0]: names a method but no service".to_owned(),
        ),
        (
            r#"{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}"#.to_owned(),
            "retryThrottling.maxTokens: must be in (0, 1000]".to_owned(),
        ),
        (
            r#"{"retryThrottling": {"maxTokens": 1001, "tokenRatio": 0.1}}"#.to_owned(),
            "retryThrottling.maxTokens: must be in (0, 1000]".to_owned(),
        ),
        (
            r#"{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0}}"#.to_owned(),
            "retryThrottling.tokenRatio: must be greater than 0".to_owned(),
        ),
        (
            r#"{"methodConfig": [{"name": "grpc.health.v1.Health"}]}"#.to_owned(),
            "methodConfig[0].name: must be an array, got a string".to_owned(),
        ),
        (
            entry(r#""timeout": 5"#),
            "methodConfig[0].timeout: must be a duration string such as \"1.5s\", got a number"
                .to_owned(),
        ),
    ];
    for (json, message) in cases {
        let err = ServiceConfigLayer::from_json(&json).unwrap_err();
        assert_eq!(err.to_string(), message, "{json}");
    }
    // The examples themselves load.
    for json in [RETRY_EXAMPLE, HEDGE_EXAMPLE, LAYERED] {
        ServiceConfigLayer::from_json(json).unwrap();
    }
}

#[tokio::test]
async fn retry_throttling_stops_retries_once_half_the_bucket_is_gone() {
    // Two tokens: one retryable failure leaves one, which is not more than
    // half, so the call ends with the server's UNAVAILABLE.
    let json = RETRY_EXAMPLE.replacen(
        "{\n  \"methodConfig\"",
        "{\n  \"retryThrottling\": {\"maxTokens\": 2, \"tokenRatio\": 0.5},\n  \"methodConfig\"",
        1,
    );
    let script = Script::new([Step::Status(14, None), Step::Status(14, None)]);
    let mut client = health_client(&json, &script).await;

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.seen().len(), 1);
}

#[tokio::test]
async fn retry_throttling_holds_back_hedged_copies_too() {
    // Two tokens; every copy after the first takes one, as a retry does.
    // The first call's second copy leaves one, which is not more than half:
    // the next call sends no second copy.
    let json = HEDGE_EXAMPLE.replacen(
        "{\n  \"methodConfig\"",
        "{\n  \"retryThrottling\": {\"maxTokens\": 2, \"tokenRatio\": 0.5},\n  \"methodConfig\"",
        1,
    );
    let script = Script::new(std::iter::repeat_n(Step::Status(14, None), 3));
    let mut client = health_client(&json, &script).await;

    let status = guarded(client.check(check())).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.seen().len(), 2, "the first call is hedged");

    let status = guarded(client.check(check())).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(script.seen().len(), 3, "the second is throttled");
}

/// The retry policy of the only method config of `json`.
fn retry_of(json: &str) -> RetryPolicy<GrpcDecoder, GrpcBackoff> {
    let config = ServiceConfig::from_json(json).unwrap_or_else(|err| panic!("{err}\n{json}"));
    match config.methods()[0].policy() {
        MethodPolicy::Retry(retry) => retry.clone(),
        other => panic!("not a retry policy: {other:?}"),
    }
}

/// The waits of `backoff` for four attempts, with a fixed jitter.
fn waits(backoff: GrpcBackoff) -> Vec<Option<Duration>> {
    let mut retryer = backoff.with_seed(7).for_request();
    (1..=4).map(|n| retryer.next_delay(n, None)).collect()
}

#[test]
fn the_same_mistake_reads_the_same_whatever_the_value_which_is_kept_apart() {
    let cases = [
        ("maxAttempts", ["1", "0", "-3"]),
        ("initialBackoff", ["\"0s\"", "\"-1s\"", "\"-0.5s\""]),
        ("backoffMultiplier", ["0", "-2", "-0.5"]),
        ("maxBackoff", ["\"abc\"", "\"1ms\"", "\"1.5\""]),
    ];
    for (field, values) in cases {
        let errors: Vec<InvalidServiceConfig> = values
            .iter()
            .map(|value| ServiceConfig::from_json(&retry_policy(field, value)).unwrap_err())
            .collect();
        for (err, value) in errors.iter().zip(values) {
            assert_eq!(err.to_string(), errors[0].to_string(), "{field} = {value}");
            assert_eq!(err.value(), Some(value), "{field}: the value apart");
        }
    }
}

#[test]
fn durations_longer_than_a_protobuf_duration_are_refused_as_out_of_range() {
    let too_long = "\"315576000001s\"";
    let hedge = |delay: &str| {
        entry(&format!(
            r#""hedgingPolicy": {{"maxAttempts": 2, "hedgingDelay": {delay}}}"#
        ))
    };
    let retry = "methodConfig[0].retryPolicy";
    let cases = [
        (
            retry_policy("initialBackoff", too_long),
            format!("{retry}.initialBackoff"),
        ),
        (
            retry_policy("maxBackoff", "\"99999999999999999999999s\""),
            format!("{retry}.maxBackoff"),
        ),
        (
            entry(&format!(r#""timeout": {too_long}"#)),
            "methodConfig[0].timeout".to_owned(),
        ),
        (
            hedge(too_long),
            "methodConfig[0].hedgingPolicy.hedgingDelay".to_owned(),
        ),
    ];
    for (json, path) in cases {
        let err = ServiceConfig::from_json(&json).unwrap_err();
        assert_eq!(err.path(), path);
        assert_eq!(
            err.to_string(),
            format!(
                "{path}: must be at most 315576000000s \
                 (10 000 years, the most a protobuf Duration holds)"
            ),
            "a range, not a format: {json}"
        );
    }
    // The longest a protobuf Duration holds still reads.
    ServiceConfig::from_json(&entry(r#""timeout": "315576000000.999999999s""#)).unwrap();
}

#[test]
fn durations_past_what_grpcs_clients_hold_are_read_at_that_cap() {
    // i64::MAX nanoseconds, about 292 years: grpc-java's cap.
    let cap = Duration::new(9_223_372_036, 854_775_807);
    let timeout_of = |timeout: &str| {
        let json = entry(&format!(r#""timeout": "{timeout}""#));
        ServiceConfig::from_json(&json).unwrap().methods()[0].timeout()
    };
    assert_eq!(timeout_of("9223372036.854775807s"), Some(cap));
    assert_eq!(
        timeout_of("9223372036.854775806s"),
        Some(cap - Duration::from_nanos(1))
    );
    assert_eq!(timeout_of("9223372037s"), Some(cap));
    assert_eq!(timeout_of("315576000000s"), Some(cap));
    let retry = retry_of(&retry_policy("maxBackoff", "\"315576000000s\""));
    assert_eq!(shown(&retry, "max_backoff"), format!("{cap:?}"));
}

#[test]
fn a_multiplier_past_what_changes_a_wait_is_read_at_that_bound() {
    // 0.1 s to 1 s: from a multiplier of 10 on, every wait after the first
    // is the maximum.
    // The same settings as with 10 (and so the same waits).
    let huge = retry_of(&retry_policy("backoffMultiplier", "1e308"));
    let ten = retry_of(&retry_policy("backoffMultiplier", "10"));
    assert_eq!(shown(&huge, "multiplier"), "10.0");
    assert_eq!(format!("{huge:?}"), format!("{ten:?}"));
    assert_eq!(
        format!("{huge:?}"),
        format!("{:?}", retry_of(&retry_policy("backoffMultiplier", "1000")))
    );
    // Below what makes the second wait under half a nanosecond, every wait
    // after the first is zero, whatever the multiplier.
    let tiny = retry_of(&retry_policy("backoffMultiplier", "1e-300"));
    let multiplier: f64 = shown(&tiny, "multiplier").parse().unwrap();
    assert!(multiplier > 1e-300 && multiplier < 1e-8, "{multiplier}");
    // The document's schedule, built in code from the multiplier read: the
    // same settings, and so the same waits.
    let backoff = GrpcBackoff::new(
        4,
        Duration::from_millis(100),
        Duration::from_secs(1),
        multiplier,
    )
    .unwrap();
    assert_eq!(shown(&tiny, "retryer"), format!("{backoff:?}"));
    let waits = waits(backoff);
    assert!(waits[0].unwrap() >= Duration::from_millis(80), "{waits:?}");
    assert_eq!(waits[1..3], [Some(Duration::ZERO), Some(Duration::ZERO)]);
    assert_eq!(waits[3], None, "four attempts in all");
    // Within the bounds, the multiplier is the document's.
    assert_eq!(
        shown(
            &retry_of(&retry_policy("backoffMultiplier", "0.5")),
            "multiplier"
        ),
        "0.5"
    );
    assert_eq!(
        shown(
            &retry_of(&retry_policy("backoffMultiplier", "2")),
            "multiplier"
        ),
        "2.0"
    );
}
