//! What a retry policy's listener hears: every event with the call's
//! context, the end of every attempt among them, and, for a closure, the
//! same as for a listener type of one's own.

use crate::{
    harness::{get, seed_policy, stack, status, Upstream, DEADLINE, DELAY, FORMS, LATENCY},
    hedge::{hedge_policy, hedged_call, HEDGE_DELAY},
    recorder::Recorder,
};
use http::{Method, StatusCode};
use http_resilience::{
    hedge::HedgeTrigger,
    policy::{CallContext, CallEvent, RetryEvent, Verdict, WaitSource},
    telemetry::Listener,
    Stop,
};
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

/// The call, as a listener is told of it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Context {
    method: Method,
    scheme: Option<String>,
    address: String,
    port: u16,
}

impl Context {
    fn of(call: &CallContext) -> Self {
        Self {
            method: call.method().clone(),
            scheme: call.scheme().map(str::to_owned),
            address: call.server_address().to_owned(),
            port: call.server_port(),
        }
    }

    /// The context of every call to `URI`.
    fn expected() -> Self {
        Self {
            method: Method::GET,
            scheme: Some("http".to_owned()),
            address: "api.test".to_owned(),
            port: 8080,
        }
    }
}

/// The end of an attempt, as heard.
#[derive(Debug, Clone, PartialEq, Eq)]
struct End {
    attempt: u32,
    verdict: Verdict,
    status: Option<StatusCode>,
    duration: Duration,
    error_type: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Heard {
    CallEvent(RetryEvent, Context),
    Attempt(End, Context),
}

impl Heard {
    /// What is kept of `heard`: every event but the end of a whole call,
    /// which the combined service alone tells of (so that both forms hear
    /// alike).
    fn of(heard: &CallEvent<'_>) -> Option<Self> {
        let context = Context::of(heard.call);
        Some(match heard.event {
            RetryEvent::AttemptEnd {
                attempt,
                verdict,
                status,
                duration,
                ..
            } => {
                let end = End {
                    attempt,
                    verdict,
                    status,
                    duration,
                    error_type: heard.event.error_type().map(str::to_owned),
                };
                Heard::Attempt(end, context)
            }
            RetryEvent::CallEnd { .. } => return None,
            event => Heard::CallEvent(event, context),
        })
    }
}

/// A listener that hears everything, in order.
#[derive(Clone, Default)]
struct Ears(Arc<Mutex<Vec<Heard>>>);

impl Ears {
    fn heard(&self) -> Vec<Heard> {
        self.0.lock().unwrap().clone()
    }
}

impl Listener<CallEvent<'_>> for Ears {
    fn on_event(&self, heard: &CallEvent<'_>) {
        self.0.lock().unwrap().extend(Heard::of(heard));
    }
}

fn unavailable() -> Verdict {
    Verdict::retry(StatusCode::SERVICE_UNAVAILABLE)
}

fn attempt(n: u32, verdict: Verdict, status: u16, error_type: Option<&str>) -> Heard {
    let end = End {
        attempt: n,
        verdict,
        status: Some(StatusCode::from_u16(status).unwrap()),
        duration: LATENCY,
        error_type: error_type.map(str::to_owned),
    };
    Heard::Attempt(end, Context::expected())
}

fn event(event: RetryEvent) -> Heard {
    Heard::CallEvent(event, Context::expected())
}

/// The retry after attempt `n`, which ended `elapsed` into the call.
fn retry(n: u32, elapsed: Duration) -> RetryEvent {
    RetryEvent::Retry {
        attempt: n,
        verdict: unavailable(),
        wait: DELAY,
        source: WaitSource::Backoff,
        remaining: Some(DEADLINE - elapsed),
    }
}

fn done(attempts: u32) -> RetryEvent {
    RetryEvent::Done {
        attempts,
        verdict: Verdict::Accept,
        stop: Stop::Accepted,
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_listener_hears_every_attempts_end_with_the_calls_context() {
    let expected = three_attempts();
    let mut heard = Vec::new();
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let ears = Ears::default();
        let upstream = Upstream::new(&recorder, [status(503), status(503), status(200)]);
        let policy = seed_policy().map_options(|o| o.with_listener(ears.clone()));
        assert_eq!(get(stack(form, policy, None, upstream)).await.unwrap(), 200);
        assert_eq!(ears.heard(), expected, "{form:?}");
        heard.push(ears.heard());
    }
    assert_eq!(heard[0], heard[1], "both forms");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_listener_hears_the_end_of_the_copies_that_ended() {
    let recorder = Recorder::default();
    let _guard = recorder.install();
    let ears = Ears::default();
    hedged_call(
        &recorder,
        hedge_policy().map_options(|o| o.with_listener(ears.clone())),
    )
    .await;
    let hedge = RetryEvent::Hedge {
        attempt: 2,
        trigger: HedgeTrigger::Delay(HEDGE_DELAY),
        in_flight: 2,
    };
    assert_eq!(
        ears.heard(),
        [
            event(hedge),
            attempt(2, Verdict::Accept, 200, None),
            event(done(2))
        ]
    );
}

/// The events of one call of [`seed_policy`] to 503, 503, 200.
fn three_attempts() -> [Heard; 6] {
    let second = LATENCY + DELAY + LATENCY;
    [
        attempt(1, unavailable(), 503, Some("503")),
        event(retry(1, LATENCY)),
        attempt(2, unavailable(), 503, Some("503")),
        event(retry(2, second)),
        attempt(3, Verdict::Accept, 200, None),
        event(done(3)),
    ]
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_closure_listener_hears_what_a_listener_type_hears() {
    let mut heard = Vec::new();
    for form in FORMS {
        let recorder = Recorder::default();
        let _guard = recorder.install();
        let events = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&events);
        let policy = seed_policy().map_options(|o| {
            o.with_listener(move |heard: &CallEvent<'_>| {
                into.lock().unwrap().extend(Heard::of(heard))
            })
        });
        let upstream = Upstream::new(&recorder, [status(503), status(503), status(200)]);
        assert_eq!(get(stack(form, policy, None, upstream)).await.unwrap(), 200);
        let events = events.lock().unwrap().clone();
        assert_eq!(events, three_attempts(), "{form:?}");
        heard.push(events);
    }
    assert_eq!(heard[0], heard[1], "both forms");
}
