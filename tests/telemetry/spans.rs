//! The spans of a retried call, as the module docs of `telemetry` describe
//! them, in both forms of the stack.

use crate::{
    harness::{
        call_and_attempts, get, get_uri, normalized, request_fields, seed_policy, stack, status,
        string, text, with, Form, Reply, Upstream, DEADLINE, DELAY, FORMS, URL_FULL,
    },
    recorder::{Recorder, SpanData, Value},
};
use http::StatusCode;
use http_resilience::{
    guard::GuardLayer,
    policy::{FixedDelay, TransientDecoder},
    retry::RetryPolicy,
    FailureKind, StatusRetryLayer,
};
use std::time::Duration;
use tower::Layer;
use tracing::{Instrument, Level};

/// No field of `span` is recorded twice.
fn recorded_once(span: &SpanData) {
    let mut names = span.recorded_names();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(names.len(), before, "a field recorded twice: {span:#?}");
}

/// 503, 503, then 200 to `harness::URI` in `form`: the spans it made.
async fn retried_call(form: Form) -> Recorder {
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let upstream = Upstream::new(&recorder, [status(503), status(503), status(200)]);
    let svc = stack(form, seed_policy(), None, upstream.clone());
    assert_eq!(get(svc).await.unwrap(), StatusCode::OK, "{form:?}");
    assert_eq!(upstream.seen().len(), 3, "{form:?}");
    recorder
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retried_call_makes_a_call_span_and_a_child_span_per_attempt() {
    for form in FORMS {
        let recorder = retried_call(form).await;
        let (call, attempts) = call_and_attempts(&recorder);
        assert_eq!(attempts.len(), 3, "{form:?}");

        assert_eq!(call.level, Level::DEBUG, "{form:?}");
        assert_eq!(call.parent, None, "{form:?}: a root span");
        let expected = with(
            request_fields("internal"),
            [
                ("http_resilience.form", string("retry")),
                ("http_resilience.attempts", Value::I64(3)),
                ("http_resilience.stop", string("accepted")),
                (
                    "http_resilience.deadline_ms",
                    Value::I64(DEADLINE.as_millis() as i64),
                ),
                ("http.response.status_code", Value::I64(200)),
            ],
        );
        assert_eq!(call.fields(), expected, "{form:?}: the call");
        recorded_once(&call);
        assert!(call.closed, "{form:?}: the call span is closed");

        for (n, attempt) in attempts.iter().enumerate() {
            assert_eq!(attempt.level, Level::DEBUG, "{form:?}");
            let resend = (n > 0).then_some(("http.request.resend_count", Value::I64(n as i64)));
            let outcome: Vec<(&'static str, Value)> = if n < 2 {
                vec![
                    ("http.response.status_code", Value::I64(503)),
                    ("network.protocol.version", string("1.1")),
                    ("error.type", string("503")),
                    ("otel.status_code", string("ERROR")),
                ]
            } else {
                vec![
                    ("http.response.status_code", Value::I64(200)),
                    ("network.protocol.version", string("1.1")),
                ]
            };
            let expected = with(request_fields("client"), resend.into_iter().chain(outcome));
            assert_eq!(attempt.fields(), expected, "{form:?} attempt {}", n + 1);
            recorded_once(attempt);
            assert!(attempt.closed, "{form:?} attempt {} is closed", n + 1);
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn both_forms_make_the_same_spans() {
    let layers = normalized(&retried_call(Form::Layers).await);
    let combined = normalized(&retried_call(Form::Combined).await);
    assert_eq!(layers.len(), 4, "{layers:#?}");
    assert_eq!(layers, combined);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_without_a_deadline_records_no_budget() {
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let upstream = Upstream::new(&recorder, [status(503), status(200)]);
    let svc = StatusRetryLayer::new(seed_policy()).layer(upstream);
    assert_eq!(get(svc).await.unwrap(), StatusCode::OK);
    let (call, attempts) = call_and_attempts(&recorder);
    assert_eq!(attempts.len(), 2);
    assert_eq!(call.int("http_resilience.attempts"), Some(2));
    assert_eq!(
        call.get("http_resilience.deadline_ms"),
        None,
        "{:?}",
        call.fields()
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_its_limit_ends_records_attempt_timeout() {
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [Reply::Never]);
        let policy = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(DELAY, 2));
        let svc = stack(form, policy, Some(Duration::from_secs(1)), upstream);
        let error = get(svc).await.unwrap_err();
        assert_eq!(
            FailureKind::of(&*error),
            FailureKind::AttemptTimeout,
            "{form:?}"
        );
        let (call, attempts) = call_and_attempts(&recorder);
        assert_eq!(attempts.len(), 1, "{form:?}");
        let attempt = &attempts[0];
        assert_eq!(
            attempt.str("error.type"),
            Some("attempt_timeout"),
            "{form:?}"
        );
        assert_eq!(attempt.str("otel.status_code"), Some("ERROR"), "{form:?}");
        assert_eq!(attempt.get("http.response.status_code"), None, "{form:?}");
        assert_eq!(call.str("error.type"), Some("attempt_timeout"), "{form:?}");
        assert_eq!(call.str("otel.status_code"), Some("ERROR"), "{form:?}");
        assert_eq!(call.str("http_resilience.stop"), Some("failed"), "{form:?}");
        assert_eq!(call.int("http_resilience.attempts"), Some(1), "{form:?}");
        assert_eq!(call.get("http.response.status_code"), None, "{form:?}");
    }
}

/// `StatusDecoder` judges every error alike (`Reason::Error`), so the error
/// type of its attempts is `_OTHER`, as the docs say.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn under_the_status_decoder_an_error_is_of_the_other_type() {
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [Reply::Never]);
        let svc = stack(form, seed_policy(), Some(Duration::from_secs(1)), upstream);
        let error = get(svc).await.unwrap_err();
        assert_eq!(
            FailureKind::of(&*error),
            FailureKind::AttemptTimeout,
            "{form:?}"
        );
        let (call, attempts) = call_and_attempts(&recorder);
        assert_eq!(attempts[0].str("error.type"), Some("_OTHER"), "{form:?}");
        assert_eq!(call.str("error.type"), Some("_OTHER"), "{form:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_the_deadline_drops_records_no_outcome() {
    let mut runs = Vec::new();
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [Reply::Never]);
        // NOTE: the attempt limit is above the deadline, which ends the call.
        let svc = stack(form, seed_policy(), Some(DEADLINE * 2), upstream);
        let error = get(svc).await.unwrap_err();
        assert_eq!(FailureKind::of(&*error), FailureKind::Deadline, "{form:?}");
        let (_, attempts) = call_and_attempts(&recorder);
        assert_eq!(attempts.len(), 1, "{form:?}");
        let attempt = &attempts[0];
        assert_eq!(
            attempt.fields(),
            request_fields("client"),
            "{form:?}: no outcome"
        );
        assert!(
            attempt.closed,
            "{form:?}: the dropped attempt's span is closed"
        );
        runs.push(normalized(&recorder));
    }
    assert_eq!(runs[0], runs[1], "both forms");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn spans_are_made_at_the_policy_level() {
    for level in [
        Level::TRACE,
        Level::DEBUG,
        Level::INFO,
        Level::WARN,
        Level::ERROR,
    ] {
        for form in FORMS {
            let recorder = Recorder::default();
            let _guard = recorder.install();
            let upstream = Upstream::new(&recorder, [status(503), status(200)]);
            let policy = seed_policy().map_options(|o| o.with_span_level(level));
            assert_eq!(get(stack(form, policy, None, upstream)).await.unwrap(), 200);
            let (call, attempts) = call_and_attempts(&recorder);
            assert_eq!(attempts.len(), 2, "{form:?}");
            for span in std::iter::once(&call).chain(&attempts) {
                assert_eq!(span.level, level, "{form:?} {}", span.name);
            }
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_query_is_kept_only_when_the_policy_allows_it() {
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(503), status(200)]);
        let policy = seed_policy().map_options(|o| o.with_url_query_in_spans());
        assert_eq!(get(stack(form, policy, None, upstream)).await.unwrap(), 200);
        let (call, attempts) = call_and_attempts(&recorder);
        let kept = format!("{URL_FULL}?sig=abc");
        for span in std::iter::once(&call).chain(&attempts) {
            assert_eq!(
                span.str("url.full"),
                Some(kept.as_str()),
                "{form:?} {}",
                span.name
            );
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_port_is_the_schemes_when_the_uri_has_none() {
    for (uri, port, url) in [
        ("https://api.test/v1", 443, "https://api.test/v1"),
        ("http://api.test/v1?k=v", 80, "http://api.test/v1"),
    ] {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(200)]);
        let svc = stack(Form::Combined, seed_policy(), None, upstream);
        assert_eq!(get_uri(svc, uri).await.unwrap(), 200);
        let (call, attempts) = call_and_attempts(&recorder);
        for span in [&call, &attempts[0]] {
            assert_eq!(span.int("server.port"), Some(port), "{uri}");
            assert_eq!(span.str("server.address"), Some("api.test"), "{uri}");
            assert_eq!(span.str("url.full"), Some(url), "{uri}");
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_call_span_is_a_child_of_the_callers_span() {
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(503), status(200)]);
        let svc = stack(form, seed_policy(), None, upstream);
        let caller = tracing::info_span!("caller");
        let caller_id = caller.id().map(|id| id.into_u64());
        assert_eq!(get(svc).instrument(caller).await.unwrap(), 200);
        let (call, attempts) = call_and_attempts(&recorder);
        assert_eq!(call.parent, caller_id, "{form:?}");
        assert_eq!(attempts.len(), 2, "{form:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn retries_and_the_end_are_events_inside_the_call_span() {
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(503), status(503), status(503)]);
        assert_eq!(
            get(stack(form, seed_policy(), None, upstream))
                .await
                .unwrap(),
            503
        );
        let (call, _) = call_and_attempts(&recorder);
        let messages: Vec<(Option<u64>, Level, Value)> = recorder
            .events()
            .into_iter()
            .filter_map(|event| Some((event.span, event.level, event.get("message")?.clone())))
            .collect();
        let inside = |message: &str| (Some(call.id), Level::DEBUG, text(message));
        assert_eq!(
            messages,
            [inside("retrying"), inside("retrying"), inside("done")],
            "{form:?}"
        );
        let done = recorder.events().pop().unwrap();
        assert_eq!(done.get("attempts"), Some(&Value::U64(3)));
        assert_eq!(done.get("stop"), Some(&text("retries exhausted")));
        assert_eq!(call.str("http_resilience.stop"), Some("exhausted"));
        assert_eq!(call.str("error.type"), Some("503"));
        assert_eq!(call.int("http.response.status_code"), Some(503));
    }
}

/// A call overload control turns away: the call's span says so, with the
/// error's type, in both forms, and the two forms make the same spans.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_overload_control_turns_away_records_it_on_the_call_span() {
    use http::{Request, Response};
    use http_resilience::{overload::OverloadPolicy, DeadlineLayer, ResiliencePolicy};
    use tower::{ServiceBuilder, ServiceExt};

    let mut runs = Vec::new();
    for form in FORMS {
        let overload = OverloadPolicy::bulkhead(1).unwrap();
        // The only slot of the authority is held by a call of another stack
        // sharing the policy, which makes no spans.
        let holder =
            GuardLayer::new(overload.clone()).layer(tower::service_fn(|_: Request<String>| {
                std::future::pending::<Result<Response<String>, http_resilience::BoxError>>()
            }));
        let held = tokio::spawn(
            holder.oneshot(
                Request::get(crate::harness::URI)
                    .body(String::new())
                    .unwrap(),
            ),
        );
        tokio::task::yield_now().await;

        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(200)]);
        let policy = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(DELAY, 2));
        let svc = match form {
            Form::Layers => crate::harness::Svc::new(
                ServiceBuilder::new()
                    .layer(DeadlineLayer::new(DEADLINE))
                    .layer(StatusRetryLayer::new(policy))
                    .layer(GuardLayer::new(overload))
                    .service(upstream.clone()),
            ),
            Form::Combined => crate::harness::Svc::new(
                ResiliencePolicy::new(DEADLINE, DEADLINE, policy)
                    .unwrap()
                    .with_guard(overload)
                    .layer()
                    .layer(upstream.clone()),
            ),
        };
        let error = get(svc).await.unwrap_err();
        assert_eq!(
            FailureKind::of(&*error),
            FailureKind::Overloaded,
            "{form:?}"
        );
        assert!(upstream.seen().is_empty(), "{form:?}: never sent");
        let (call, _) = call_and_attempts(&recorder);
        assert_eq!(
            call.str("http_resilience.turned_away"),
            Some("overloaded"),
            "{form:?}"
        );
        assert_eq!(call.str("error.type"), Some("overloaded"), "{form:?}");
        assert_eq!(call.str("http_resilience.stop"), Some("failed"), "{form:?}");
        runs.push(normalized(&recorder));
        held.abort();
    }
    assert_eq!(runs[0], runs[1]);
}
