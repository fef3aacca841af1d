//! What a layer below the retry (or the hedge) sees of telemetry: the
//! `AttemptNumber` of each attempt, and the attempt's span as the current
//! span while its `call` runs and while its future is polled.

use crate::{
    harness::{
        call_and_attempts, get, seed_policy, send, stack, status, Seen, Upstream, FORMS, URI,
    },
    hedge::{hedge_policy, hedged_call, slow_then_fast},
    recorder::{Recorder, SpanData},
};
use http::Request;
use http_resilience::{
    extensions::AttemptNumber,
    hedge::HedgeLayer,
    policy::{FixedDelay, StatusDecoder},
    retry::RetryPolicy,
};
use std::time::Duration;
use tower::Layer;

/// What the upstream saw of attempt `span`, numbered `n`, of `call`, when
/// it answered (`replied`) or was dropped.
fn in_attempt(call: &SpanData, span: &SpanData, n: u32, replied: bool) -> Seen {
    let entered = vec![call.id, span.id];
    Seen {
        attempt: n,
        at_call: entered.clone(),
        at_poll: entered.clone(),
        at_reply: replied.then_some(entered),
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_layer_below_reads_the_attempt_number_and_runs_in_the_attempt_span() {
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(503), status(503), status(200)]);
        let svc = stack(form, seed_policy(), None, upstream.clone());
        assert_eq!(get(svc).await.unwrap(), 200);
        let (call, attempts) = call_and_attempts(&recorder);
        let expected: Vec<Seen> = (1..)
            .zip(&attempts)
            .map(|(n, span)| in_attempt(&call, span, n, true))
            .collect();
        assert_eq!(expected.len(), 3, "{form:?}");
        assert_eq!(upstream.seen(), expected, "{form:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_layer_below_a_hedge_reads_each_copys_number_and_span() {
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let upstream = hedged_call(&recorder, hedge_policy()).await;
    let (call, attempts) = call_and_attempts(&recorder);
    assert_eq!(
        upstream.seen(),
        [
            in_attempt(&call, &attempts[0], 1, false),
            in_attempt(&call, &attempts[1], 2, true),
        ]
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_number_the_request_brings_is_not_the_first_attempts() {
    let brought = || {
        let mut request = Request::get(URI).body(String::new()).unwrap();
        request.extensions_mut().insert(AttemptNumber::new(7));
        request
    };
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(503), status(200)]);
        let svc = stack(form, seed_policy(), None, upstream.clone());
        send(svc, brought()).await.unwrap();
        let numbers: Vec<u32> = upstream.seen().iter().map(|seen| seen.attempt).collect();
        assert_eq!(numbers, [1, 2], "{form:?}");
        let (_, attempts) = call_and_attempts(&recorder);
        assert_eq!(
            attempts[0].get("http.request.resend_count"),
            None,
            "{form:?}"
        );
    }
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let upstream = slow_then_fast(&recorder);
    let svc = HedgeLayer::new(hedge_policy()).layer(upstream.clone());
    send(svc, brought()).await.unwrap();
    let numbers: Vec<u32> = upstream.seen().iter().map(|seen| seen.attempt).collect();
    assert_eq!(numbers, [1, 2], "hedge");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn attempts_carry_no_number_unless_the_policy_asks_for_one() {
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let upstream = Upstream::new(&recorder, [status(503), status(503), status(200)]);
        let unnumbered = RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::from_millis(10), 2),
        );
        let svc = stack(form, unnumbered, None, upstream.clone());
        assert_eq!(get(svc).await.unwrap(), 200);
        let numbers: Vec<u32> = upstream.seen().iter().map(|seen| seen.attempt).collect();
        // NOTE: `AttemptNumber::of` reads a request without one as 1.
        assert_eq!(numbers, [1, 1, 1], "{form:?}");
    }
}
