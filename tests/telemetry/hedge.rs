//! The spans of a hedged call: one per copy, the loser's closed without an
//! outcome, the winner named on the call's.

use crate::{
    harness::{
        call_and_attempts, get, request_fields, string, with, Reply, Upstream, DEADLINE, LATENCY,
    },
    recorder::{Recorder, Value},
};
use http::StatusCode;
use http_resilience::{
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::StatusDecoder,
    DeadlineLayer,
};
use std::time::Duration;
use tower::ServiceBuilder;
use tracing::Level;

/// The wait before the second copy.
pub(crate) const HEDGE_DELAY: Duration = Duration::from_millis(50);

/// Two copies at most, the second after [`HEDGE_DELAY`].
pub(crate) fn hedge_policy() -> HedgePolicy<StatusDecoder> {
    HedgePolicy::new(
        StatusDecoder::new([503]).unwrap(),
        HedgeDelay::fixed(HEDGE_DELAY),
        2,
    )
    .unwrap()
    .map_options(|options| options.with_attempt_number())
}

/// A first copy that would answer after a second, and a second that
/// answers after [`LATENCY`].
pub(crate) fn slow_then_fast(recorder: &Recorder) -> Upstream {
    Upstream::new(
        recorder,
        [
            Reply::After(Duration::from_secs(1), 200),
            Reply::After(LATENCY, 200),
        ],
    )
}

/// A hedged call under [`DEADLINE`], the second copy winning.
pub(crate) async fn hedged_call(
    recorder: &Recorder,
    policy: HedgePolicy<StatusDecoder>,
) -> Upstream {
    let upstream = slow_then_fast(recorder);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(DEADLINE))
        .layer(HedgeLayer::new(policy))
        .service(upstream.clone());
    let start = tokio::time::Instant::now();
    assert_eq!(get(svc).await.unwrap(), StatusCode::OK);
    assert_eq!(
        start.elapsed(),
        HEDGE_DELAY + LATENCY,
        "the second copy won"
    );
    upstream
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_call_makes_a_span_per_copy_and_names_the_winner() {
    let recorder = Recorder::default();
    let _guard = recorder.install();
    hedged_call(&recorder, hedge_policy()).await;
    let (call, attempts) = call_and_attempts(&recorder);
    assert_eq!(call.level, Level::DEBUG);
    let expected = with(
        request_fields("internal"),
        [
            ("http_resilience.form", string("hedge")),
            ("http_resilience.attempts", Value::I64(2)),
            ("http_resilience.stop", string("accepted")),
            (
                "http_resilience.deadline_ms",
                Value::I64(DEADLINE.as_millis() as i64),
            ),
            ("http_resilience.hedge.winner", Value::I64(2)),
            ("http.response.status_code", Value::I64(200)),
        ],
    );
    assert_eq!(call.fields(), expected, "the call");
    assert_eq!(attempts.len(), 2);
    let (loser, winner) = (&attempts[0], &attempts[1]);
    assert_eq!(
        loser.fields(),
        request_fields("client"),
        "the loser: no outcome"
    );
    assert!(loser.closed, "the loser's span is closed");
    let expected = with(
        request_fields("client"),
        [
            ("http.request.resend_count", Value::I64(1)),
            ("http.response.status_code", Value::I64(200)),
            ("network.protocol.version", string("1.1")),
        ],
    );
    assert_eq!(winner.fields(), expected, "the winner");
    assert!(winner.closed && call.closed);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedge_makes_its_spans_at_the_policy_level() {
    for level in [Level::TRACE, Level::INFO, Level::ERROR] {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        hedged_call(
            &recorder,
            hedge_policy().map_options(|o| o.with_span_level(level)),
        )
        .await;
        let (call, attempts) = call_and_attempts(&recorder);
        assert_eq!(attempts.len(), 2);
        for span in std::iter::once(&call).chain(&attempts) {
            assert_eq!(span.level, level, "{}", span.name);
        }
    }
}
