//! The parser and validator, field by field.

use super::*;

/// The message `json` is refused with, followed by the value refused, if
/// any, in angle brackets: `maxAttempts: must be at least 2 <1>`.
fn refused(json: &str) -> String {
    match ServiceConfig::from_json(json) {
        Ok(config) => panic!("accepted: {json}\n{config:?}"),
        Err(err) => match err.value() {
            Some(value) => format!("{err} <{value}>"),
            None => err.to_string(),
        },
    }
}

#[test]
fn durations_take_protobufs_json_form_only() {
    use super::parse::{parse_duration, DurationError};
    let ok = parse_duration;
    assert_eq!(ok("0.1s"), Ok((false, Duration::from_millis(100))));
    assert_eq!(ok("1s"), Ok((false, Duration::from_secs(1))));
    assert_eq!(ok("2.000000001s"), Ok((false, Duration::new(2, 1))));
    assert_eq!(ok("-1.5s"), Ok((true, Duration::from_millis(1500))));
    assert_eq!(ok("0s"), Ok((false, Duration::ZERO)));
    assert_eq!(
        ok("315576000000.999999999s"),
        Ok((false, Duration::new(315_576_000_000, 999_999_999)))
    );
    for garbage in [
        "abc",
        "1",
        "s",
        ".5s",
        "1.s",
        "1.0000000001s",
        "+1s",
        " 1s",
        "1s ",
        "1S",
        "1e3s",
        "1ms",
        "--1s",
        "1.-5s",
    ] {
        assert_eq!(ok(garbage), Err(DurationError::Malformed), "{garbage:?}");
    }
    // In the form, but longer than a protobuf `Duration` holds.
    for long in [
        "315576000001s",
        "99999999999999999999999s",
        "-315576000001s",
    ] {
        assert_eq!(ok(long), Err(DurationError::TooLong), "{long:?}");
    }
}

/// A retry policy with one field replaced by `field` (JSON text).
fn retry_with(field: &str, value: &str) -> String {
    let mut fields = vec![
        ("maxAttempts", "4"),
        ("initialBackoff", "\"0.1s\""),
        ("maxBackoff", "\"1s\""),
        ("backoffMultiplier", "2"),
        ("retryableStatusCodes", "[\"UNAVAILABLE\"]"),
    ];
    for entry in &mut fields {
        if entry.0 == field {
            entry.1 = value;
        }
    }
    let body: Vec<String> = fields
        .iter()
        .map(|(name, value)| format!("\"{name}\": {value}"))
        .collect();
    format!(
        r#"{{"methodConfig": [{{"name": [{{"service": "s"}}], "retryPolicy": {{{}}}}}]}}"#,
        body.join(", ")
    )
}

#[test]
fn a_retry_policy_outside_a6s_rules_is_refused_with_its_path() {
    let at = "methodConfig[0].retryPolicy";
    for (field, value, message) in [
        ("maxAttempts", "1", "maxAttempts: must be at least 2 <1>"),
        ("maxAttempts", "2.5", "maxAttempts: must be an integer <2.5>"),
        ("maxAttempts", "\"4\"", "maxAttempts: must be a number, got a string"),
        ("initialBackoff", "\"0s\"", "initialBackoff: must be greater than 0s <\"0s\">"),
        ("initialBackoff", "\"-1s\"", "initialBackoff: must be greater than 0s <\"-1s\">"),
        ("maxBackoff", "\"abc\"", "maxBackoff: must be a duration such as \"1.5s\" (seconds, up to 9 decimals, then \"s\") <\"abc\">"),
        ("maxBackoff", "1", "maxBackoff: must be a duration string such as \"1.5s\", got a number"),
        ("backoffMultiplier", "0", "backoffMultiplier: must be greater than 0 <0>"),
        ("backoffMultiplier", "-2", "backoffMultiplier: must be greater than 0 <-2>"),
        ("retryableStatusCodes", "[]", "retryableStatusCodes: must name at least one code"),
        ("retryableStatusCodes", "\"UNAVAILABLE\"", "retryableStatusCodes: must be an array, got a string"),
        ("retryableStatusCodes", "[\"NOT_A_CODE\"]", "retryableStatusCodes[0]: is not a gRPC status code name <\"NOT_A_CODE\">"),
        ("retryableStatusCodes", "[14, \"unavailable\"]", "retryableStatusCodes[1]: is not a gRPC status code name (gRPC's names are upper case) <\"unavailable\">"),
        ("retryableStatusCodes", "[17]", "retryableStatusCodes[0]: must be a gRPC code in 0..=16 <17>"),
        ("retryableStatusCodes", "[\"OK\"]", "retryableStatusCodes: OK (0) is not a failure and cannot be retried"),
        ("retryableStatusCodes", "[true]", "retryableStatusCodes[0]: must be a status code name or number, got a boolean"),
    ] {
        assert_eq!(refused(&retry_with(field, value)), format!("{at}.{message}"), "{field} = {value}");
    }
}

#[test]
fn every_field_of_a_retry_policy_is_required() {
    let json = r#"{"methodConfig": [{"name": [{}], "retryPolicy": {"maxAttempts": 3}}]}"#;
    assert_eq!(
        refused(json),
        "methodConfig[0].retryPolicy.initialBackoff: is required"
    );
}

#[test]
fn a_retry_policy_is_built_as_written() {
    let config = ServiceConfig::from_json(&retry_with(
        "retryableStatusCodes",
        "[\"UNAVAILABLE\", 8, \"ABORTED\"]",
    ))
    .unwrap();
    let MethodPolicy::Retry(retry) = config.method_config("s", "m").unwrap().policy() else {
        panic!("a retry policy");
    };
    let backoff = retry.retryer();
    assert_eq!(backoff.max_attempts(), 4);
    assert_eq!(backoff.initial(), Duration::from_millis(100));
    assert_eq!(backoff.max_backoff(), Duration::from_secs(1));
    assert_eq!(backoff.multiplier(), 2.0);
    assert_eq!(
        retry.decoder().retryable_codes().collect::<Vec<_>>(),
        [8, 10, 14]
    );
    assert_eq!(
        retry.options().attempt_header().unwrap(),
        "grpc-previous-rpc-attempts"
    );
    assert!(retry.budget().is_none(), "no retryThrottling");
    let capped = ServiceConfig::from_json(&retry_with("maxAttempts", "100")).unwrap();
    let MethodPolicy::Retry(retry) = capped.methods()[0].policy() else {
        panic!("a retry policy");
    };
    assert_eq!(
        retry.retryer().max_attempts(),
        5,
        "A6 reads more than 5 as 5"
    );
    // A maximum below the initial backoff is valid in A6: every wait is
    // the maximum, as gRPC's formula gives it.
    let inverted = ServiceConfig::from_json(&retry_with("initialBackoff", "\"2s\"")).unwrap();
    let MethodPolicy::Retry(retry) = inverted.methods()[0].policy() else {
        panic!("a retry policy");
    };
    assert_eq!(retry.retryer().initial(), Duration::from_secs(1));
}

#[test]
fn a_hedging_policy_is_built_as_written() {
    let json = r#"{"methodConfig": [{"name": [{"service": "s"}], "timeout": "2.5s",
        "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.05s", "nonFatalStatusCodes": ["UNAVAILABLE"]}}]}"#;
    let config = ServiceConfig::from_json(json).unwrap();
    let method = config.method_config("s", "m").unwrap();
    assert_eq!(method.timeout(), Some(Duration::from_millis(2500)));
    let MethodPolicy::Hedge(hedge) = method.policy() else {
        panic!("a hedging policy");
    };
    assert_eq!(hedge.max_attempts(), 3);
    assert_eq!(format!("{:?}", hedge.delay()), "Fixed(50ms)");
    assert_eq!(hedge.decoder().retryable_codes().collect::<Vec<_>>(), [14]);
    assert_eq!(
        hedge.options().attempt_header().unwrap(),
        "grpc-previous-rpc-attempts"
    );
    // With no non-fatal codes and no delay: every status ends the call, and
    // the copies go at once.
    let json = r#"{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 2}}]}"#;
    let config = ServiceConfig::from_json(json).unwrap();
    let MethodPolicy::Hedge(hedge) = config.methods()[0].policy() else {
        panic!("a hedging policy");
    };
    assert_eq!(hedge.decoder().retryable_codes().count(), 0);
    assert_eq!(format!("{:?}", hedge.delay()), "Fixed(0ns)");
    // More than A6's cap of 5 copies is read as 5.
    let json = r#"{"methodConfig": [{"name": [{}], "hedgingPolicy": {"maxAttempts": 9}}]}"#;
    let config = ServiceConfig::from_json(json).unwrap();
    let MethodPolicy::Hedge(hedge) = config.methods()[0].policy() else {
        panic!("a hedging policy");
    };
    assert_eq!(hedge.max_attempts(), 5);
}

#[test]
fn a_hedging_policy_outside_a6s_rules_is_refused_with_its_path() {
    let with = |policy: &str| {
        refused(&format!(
            r#"{{"methodConfig": [{{"name": [{{}}], "hedgingPolicy": {policy}}}]}}"#
        ))
    };
    let at = "methodConfig[0].hedgingPolicy";
    for (policy, message) in [
        (r#"{"maxAttempts": 1}"#, "maxAttempts: must be at least 2 <1>"),
        (r#"{}"#, "maxAttempts: is required"),
        (r#"{"maxAttempts": 2, "hedgingDelay": "-1s"}"#, "hedgingDelay: must not be negative <\"-1s\">"),
        (r#"{"maxAttempts": 2, "hedgingDelay": "soon"}"#, "hedgingDelay: must be a duration such as \"1.5s\" (seconds, up to 9 decimals, then \"s\") <\"soon\">"),
        (r#"{"maxAttempts": 2, "nonFatalStatusCodes": ["NOT_A_CODE"]}"#, "nonFatalStatusCodes[0]: is not a gRPC status code name <\"NOT_A_CODE\">"),
        (r#"{"maxAttempts": 2, "nonFatalStatusCodes": {}}"#, "nonFatalStatusCodes: must be an array, got an object"),
    ] {
        assert_eq!(with(policy), format!("{at}.{message}"), "{policy}");
    }
    assert_eq!(with("[]"), format!("{at}: must be an object, got an array"));
}

#[test]
fn names_follow_the_service_config_rules() {
    for (json, message) in [
        (
            r#"{"methodConfig": [{"name": [{"service": "s", "method": "m"}], "retryPolicy": {"maxAttempts": 2, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]}, "hedgingPolicy": {"maxAttempts": 2}}]}"#,
            "methodConfig[0]: has both a retryPolicy and a hedgingPolicy; a method takes one or the other",
        ),
        (
            r#"{"methodConfig": [{"name": [{"service": "s"}]}, {"name": [{"service": "t"}, {"service": "s"}]}]}"#,
            "methodConfig[1].name[1]: duplicates the name at methodConfig[0].name[0]",
        ),
        (
            r#"{"methodConfig": [{"name": [{}, {}]}]}"#,
            "methodConfig[0].name[1]: duplicates the name at methodConfig[0].name[0]",
        ),
        (
            r#"{"methodConfig": [{"name": [{"method": "m"}]}]}"#,
            "methodConfig[0].name[0]: names a method but no service",
        ),
        (
            r#"{"methodConfig": [{"name": [{"service": 7}]}]}"#,
            "methodConfig[0].name[0].service: must be a string, got a number",
        ),
        (
            r#"{"methodConfig": [{"name": {"service": "s"}}]}"#,
            "methodConfig[0].name: must be an array, got an object",
        ),
        (
            r#"{"methodConfig": {"name": []}}"#,
            "methodConfig: must be an array, got an object",
        ),
        (
            r#"{"methodConfig": [{"name": [{}], "timeout": "0s"}]}"#,
            "methodConfig[0].timeout: must be greater than 0s <\"0s\">",
        ),
        (
            r#"{"methodConfig": [{"name": [{}], "timeout": 1.5}]}"#,
            "methodConfig[0].timeout: must be a duration string such as \"1.5s\", got a number",
        ),
        ("[]", "service config: must be a JSON object, got an array"),
    ] {
        assert_eq!(refused(json), message, "{json}");
    }
    assert!(refused("{").starts_with("service config: not JSON: "));
}

#[test]
fn throttling_outside_a6s_rules_is_refused_with_its_path() {
    let with = |body: &str| refused(&format!(r#"{{"retryThrottling": {body}}}"#));
    for (body, message) in [
        (r#"{"maxTokens": 0, "tokenRatio": 0.1}"#, "retryThrottling.maxTokens: must be in (0, 1000] <0>"),
        (r#"{"maxTokens": 1001, "tokenRatio": 0.1}"#, "retryThrottling.maxTokens: must be in (0, 1000] <1001>"),
        (r#"{"maxTokens": -5, "tokenRatio": 0.1}"#, "retryThrottling.maxTokens: must be in (0, 1000] <-5>"),
        (r#"{"maxTokens": 10, "tokenRatio": 0}"#, "retryThrottling.tokenRatio: must be greater than 0 <0>"),
        (r#"{"maxTokens": 10, "tokenRatio": 0.0001}"#, "retryThrottling.tokenRatio: must be at least 0.001 (gRPC keeps three decimals) <0.0001>"),
        (r#"{"maxTokens": "10", "tokenRatio": 0.1}"#, "retryThrottling.maxTokens: must be a number, got a string"),
        (r#"{"tokenRatio": 0.1}"#, "retryThrottling.maxTokens: is required"),
        ("true", "retryThrottling: must be an object, got a boolean"),
    ] {
        assert_eq!(with(body), message, "{body}");
    }
}

#[test]
fn throttling_is_one_bucket_for_every_policy() {
    let json = r#"{"retryThrottling": {"maxTokens": 1000, "tokenRatio": 2.5},
        "methodConfig": [
          {"name": [{"service": "r"}], "retryPolicy": {"maxAttempts": 2, "initialBackoff": "1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": [14]}},
          {"name": [{"service": "h"}], "hedgingPolicy": {"maxAttempts": 2}}]}"#;
    let config = ServiceConfig::from_json(json).unwrap();
    let bucket = config.retry_throttling().unwrap();
    assert_eq!((bucket.max_tokens(), bucket.token_ratio()), (1000, 2.5));
    let MethodPolicy::Retry(retry) = config.methods()[0].policy() else {
        panic!("a retry policy");
    };
    assert!(std::ptr::eq(retry.budget().unwrap(), &**bucket));
}

#[test]
fn throttling_reads_three_decimals_and_ignores_the_rest() {
    let bucket = |tokens: &str, ratio: &str| {
        let json =
            format!(r#"{{"retryThrottling": {{"maxTokens": {tokens}, "tokenRatio": {ratio}}}}}"#);
        let config = ServiceConfig::from_json(&json).unwrap();
        let bucket = config.retry_throttling().unwrap();
        // A bucket starts full: its tokens are `maxTokens`.
        (bucket.tokens_milli(), bucket.token_ratio())
    };
    assert_eq!(bucket("10.0006", "0.5466"), (10_000, 0.546));
    assert_eq!(bucket("1.005", "1.005"), (1_005, 1.005));
    assert_eq!(bucket("7", "0.0019"), (7_000, 0.001));
    let err =
        ServiceConfig::from_json(r#"{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.0009}}"#);
    assert_eq!(
        err.unwrap_err().to_string(),
        "retryThrottling.tokenRatio: must be at least 0.001 (gRPC keeps three decimals)"
    );
}

#[test]
fn the_most_specific_name_wins() {
    let json = r#"{"methodConfig": [
        {"name": [{}], "timeout": "1s"},
        {"name": [{"service": "pkg.Svc"}], "timeout": "2s"},
        {"name": [{"service": "pkg.Svc", "method": "M"}, {"service": "", "method": ""}], "timeout": "3s"}
    ], "unknownField": {"ignored": true}, "loadBalancingConfig": [{"round_robin": {}}]}"#;
    let err = ServiceConfig::from_json(json).unwrap_err();
    // `{"service": ""}` is `{}` again, as gRPC reads an empty service.
    assert_eq!(err.path(), "methodConfig[2].name[1]");
    let json = json.replace(r#", {"service": "", "method": ""}"#, "");
    let config = ServiceConfig::from_json(&json).unwrap();
    let timeout = |service, method| {
        config
            .method_config(service, method)
            .and_then(MethodConfig::timeout)
    };
    assert_eq!(timeout("pkg.Svc", "M"), Some(Duration::from_secs(3)));
    assert_eq!(timeout("pkg.Svc", "N"), Some(Duration::from_secs(2)));
    assert_eq!(timeout("pkg.Other", "M"), Some(Duration::from_secs(1)));
    assert_eq!(config.index_for_path("/pkg.Svc/M"), Some(2));
    assert_eq!(config.index_for_path("/pkg.Svc/N"), Some(1));
    assert_eq!(config.index_for_path("not a path"), Some(0));
    let none =
        ServiceConfig::from_json(r#"{"methodConfig": [{"name": [{"service": "a"}]}]}"#).unwrap();
    assert!(none.method_config("b", "m").is_none());
}

// ===== on the paused clock =====

mod timing {
    use super::super::ServiceConfigLayer;
    use std::{
        sync::{Arc, Mutex},
        time::Duration,
    };
    use tokio::time::Instant;
    use tower::{Layer, ServiceExt};

    /// A trailers-only response with `grpc-status: code`.
    pub(super) fn status(code: u8) -> http::Response<tonic::body::Body> {
        http::Response::builder()
            .header("content-type", "application/grpc")
            .header("grpc-status", code.to_string())
            .body(tonic::body::Body::empty())
            .unwrap()
    }

    fn check() -> http::Request<tonic::body::Body> {
        http::Request::post("/grpc.health.v1.Health/Check")
            .body(tonic::body::Body::empty())
            .unwrap()
    }

    /// When each call came, and the `grpc-timeout` it brought.
    pub(super) type Seen = Arc<Mutex<Vec<(Instant, Option<String>)>>>;

    /// A service that answers with `codes` in turn (then OK, or never when
    /// `then_silent`), recording in `seen` when each call came and its
    /// `grpc-timeout`.
    pub(super) fn upstream(
        codes: Vec<u8>,
        then_silent: bool,
        seen: &Seen,
    ) -> impl tower_service::Service<
        http::Request<tonic::body::Body>,
        Response = http::Response<tonic::body::Body>,
        Error = std::convert::Infallible,
        Future = impl Send,
    > + Clone {
        let record = Arc::clone(seen);
        tower::service_fn(move |request: http::Request<tonic::body::Body>| {
            let mut seen = record.lock().unwrap();
            let timeout = request
                .headers()
                .get("grpc-timeout")
                .map(|v| v.to_str().unwrap().to_owned());
            seen.push((Instant::now(), timeout));
            let code = codes.get(seen.len() - 1).copied();
            async move {
                match code {
                    Some(code) => Ok(status(code)),
                    None if then_silent => std::future::pending().await,
                    None => Ok(status(0)),
                }
            }
        })
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_retry_examples_waits_follow_its_backoff() {
        let layer = ServiceConfigLayer::from_json(
            r#"{"methodConfig": [{"name": [{"service": "grpc.health.v1.Health"}],
                "retryPolicy": {"maxAttempts": 4, "initialBackoff": "0.1s", "maxBackoff": "1s",
                                "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
        )
        .unwrap();
        let seen = Seen::default();
        let upstream = upstream(vec![14, 14, 14], false, &seen);

        let response = layer.layer(upstream).oneshot(check()).await.unwrap();

        assert_eq!(response.headers()["grpc-status"], "0");
        let seen = seen.lock().unwrap();
        let gaps: Vec<Duration> = seen.windows(2).map(|w| w[1].0 - w[0].0).collect();
        // 0.1 s, 0.2 s, 0.4 s, each within A6's ±20 %.
        let ms = Duration::from_millis;
        for (gap, base) in gaps.iter().zip([100, 200, 400]) {
            assert!(
                *gap >= ms(base * 8 / 10) && *gap <= ms(base * 12 / 10),
                "{gaps:?}"
            );
        }
        assert_eq!(gaps.len(), 3);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_timeout_ends_the_call_at_its_instant() {
        let layer = ServiceConfigLayer::from_json(
            r#"{"methodConfig": [{"name": [{}], "timeout": "1.5s"}]}"#,
        )
        .unwrap();
        let upstream = upstream(vec![], true, &Seen::default());
        let start = Instant::now();

        let err = layer.layer(upstream).oneshot(check()).await.unwrap_err();

        let status = err.downcast_ref::<tonic::Status>().expect("a tonic status");
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert_eq!(start.elapsed(), Duration::from_millis(1500));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_hedge_goes_out_after_the_hedging_delay() {
        let layer = ServiceConfigLayer::from_json(
            r#"{"methodConfig": [{"name": [{}], "timeout": "10s",
                "hedgingPolicy": {"maxAttempts": 3, "hedgingDelay": "0.25s"}}]}"#,
        )
        .unwrap();
        let seen = Seen::default();
        let upstream = upstream(vec![], true, &seen);
        let start = Instant::now();

        let err = layer.layer(upstream).oneshot(check()).await.unwrap_err();

        let status = err.downcast_ref::<tonic::Status>().expect("a tonic status");
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        let offsets: Vec<Duration> = seen
            .lock()
            .unwrap()
            .iter()
            .map(|(at, _)| *at - start)
            .collect();
        let ms = Duration::from_millis;
        assert_eq!(offsets, [ms(0), ms(250), ms(500)]);
    }
}

// ===== the channel's calls, every route =====

/// What every route does alike: the budget every successful call refills,
/// the deadline every call sends, the entry a prefixed path selects.
mod routes {
    use super::super::ServiceConfigLayer;
    use super::timing::{upstream, Seen};
    use crate::RequestDeadline;
    use std::{sync::Arc, time::Duration};
    use tokio::time::Instant;
    use tower::{Layer, ServiceExt};

    fn call(path: &str) -> http::Request<tonic::body::Body> {
        http::Request::post(path)
            .body(tonic::body::Body::empty())
            .unwrap()
    }

    /// A6: "Every outgoing RPC (regardless of service or method invoked)
    /// will change token_count": a success of a method with no policy, or
    /// named by no entry, puts tokenRatio back (grpc-go's
    /// `retryThrottler.successfulRPC()` runs for every finished stream).
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn successes_of_methods_without_a_policy_refill_the_throttling_bucket() {
        let layer = ServiceConfigLayer::from_json(
            r#"{"retryThrottling": {"maxTokens": 2, "tokenRatio": 1},
                "methodConfig": [
                  {"name": [{"service": "pkg.Svc", "method": "Retried"}],
                   "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                                   "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}},
                  {"name": [{"service": "pkg.Svc", "method": "Timed"}], "timeout": "5s"}]}"#,
        )
        .unwrap();
        let bucket = Arc::clone(layer.config().retry_throttling().unwrap());
        let seen = Seen::default();
        // One UNAVAILABLE: 2 tokens -> 1, not more than half: no retry.
        let svc = layer.layer(upstream(vec![14], false, &seen));
        let response = svc.clone().oneshot(call("/pkg.Svc/Retried")).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(bucket.tokens_milli(), 1000);
        // A successful call of a method named by no entry.
        svc.clone().oneshot(call("/pkg.Svc/Other")).await.unwrap();
        let after_unnamed = bucket.tokens_milli();
        // A successful call of a method whose entry has no policy.
        svc.clone().oneshot(call("/pkg.Svc/Timed")).await.unwrap();
        let after_timed = bucket.tokens_milli();
        assert_eq!(
            (after_unnamed, after_timed),
            (2000, 2000),
            "A6: every successful RPC adds tokenRatio"
        );
    }

    /// A6 takes a token for the failures a method retries: a method with no
    /// policy, or named by no entry, retries none, so a connection refused
    /// below it takes none.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn failures_of_methods_without_a_policy_take_no_token() {
        let layer = ServiceConfigLayer::from_json(
            r#"{"retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1},
                "methodConfig": [{"name": [{"service": "pkg.Svc", "method": "Timed"}], "timeout": "2s"}]}"#,
        )
        .unwrap();
        let bucket = Arc::clone(layer.config().retry_throttling().unwrap());
        for path in ["/pkg.Svc/Timed", "/pkg.Svc/Other"] {
            let svc = layer.layer(tower::service_fn(
                |_: http::Request<tonic::body::Body>| async {
                    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
                    Err::<http::Response<tonic::body::Body>, _>(refused)
                },
            ));
            svc.oneshot(call(path)).await.unwrap_err();
            assert_eq!(bucket.tokens_milli(), 10_000, "{path}");
        }
    }

    /// A deadline the caller moved onto the call (a `RequestDeadline`) is
    /// enforced by every route and sent as the time left, over a later
    /// `grpc-timeout` the caller wrote.
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn every_route_sends_the_deadline_it_enforces() {
        let layer = ServiceConfigLayer::from_json(
            r#"{"methodConfig": [{"name": [{"service": "pkg.Svc", "method": "Retried"}],
                "retryPolicy": {"maxAttempts": 2, "initialBackoff": "0.01s", "maxBackoff": "0.01s",
                                "backoffMultiplier": 1, "retryableStatusCodes": ["UNAVAILABLE"]}}]}"#,
        )
        .unwrap();
        let sent = |path: &'static str, header: Option<&'static str>| {
            let layer = layer.clone();
            async move {
                let seen = Seen::default();
                let svc = layer.layer(upstream(vec![], true, &seen));
                let mut request = call(path);
                request
                    .extensions_mut()
                    .insert(RequestDeadline::after(Duration::from_secs(1)));
                if let Some(header) = header {
                    request
                        .headers_mut()
                        .insert("grpc-timeout", header.parse().unwrap());
                }
                let start = Instant::now();
                let err = svc.oneshot(request).await.unwrap_err();
                let status = err.downcast_ref::<tonic::Status>().unwrap();
                assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
                assert_eq!(start.elapsed(), Duration::from_secs(1), "enforced");
                let sent = seen.lock().unwrap()[0].1.clone();
                sent
            }
        };
        // The retried route tells the server the second it has.
        assert_eq!(
            sent("/pkg.Svc/Retried", None).await.as_deref(),
            Some("1000000u")
        );
        assert_eq!(
            sent("/pkg.Svc/Retried", Some("10S")).await.as_deref(),
            Some("1000000u")
        );
        // So does a route with no policy.
        let unnamed = sent("/pkg.Svc/Other", None).await;
        let unnamed_with_header = sent("/pkg.Svc/Other", Some("10S")).await;
        assert_eq!(
            (unnamed.as_deref(), unnamed_with_header.as_deref()),
            (Some("1000000u"), Some("1000000u")),
            "the server should be told the deadline the call has"
        );
    }

    /// tonic's `Grpc::with_origin` keeps the origin's path as a prefix
    /// (`prepare_request`: `format!("{}{}", pnq.path(), path)`), so a client
    /// made with `with_origin(channel, "http://gw/api".parse()?)` sends
    /// `/api/pkg.Svc/M`; gRPC selects the entry by the call's method, not
    /// by the whole path.
    #[test]
    fn an_origin_path_prefix_does_not_hide_the_methods_entry() {
        let config = super::super::ServiceConfig::from_json(
            r#"{"methodConfig": [{"name": [{}], "timeout": "1s"},
                                 {"name": [{"service": "pkg.Svc", "method": "M"}], "timeout": "2s"}]}"#,
        )
        .unwrap();
        assert_eq!(config.index_for_path("/pkg.Svc/M"), Some(1));
        assert_eq!(config.index_for_path("/api/pkg.Svc/M"), Some(1));
    }
}
