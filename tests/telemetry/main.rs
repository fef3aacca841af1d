//! Telemetry: a `tracing` span per call and per attempt, and events, read back
//! with a small recording subscriber. Alone in its test binary, since
//! `tracing` caches per call site whether anyone listens, across threads.

use http::{Request, Response};
use http_resilience::{
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
};
use std::{
    fmt::Write as _,
    sync::{Arc, Mutex},
    time::Duration,
};
use tower::{Layer, ServiceExt};
use tower_test::mock;
use tracing::{
    field::{Field, Visit},
    span, Event, Metadata, Subscriber,
};

/// A subscriber that writes every span name and event, with its fields
/// and the span it is in, as one line of text.
#[derive(Clone, Default)]
struct Lines {
    lines: Arc<Mutex<Vec<String>>>,
    spans: Arc<Mutex<Vec<&'static str>>>,
    current: Arc<Mutex<Vec<u64>>>,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl Subscriber for Lines {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &span::Attributes<'_>) -> span::Id {
        let mut spans = self.spans.lock().unwrap();
        spans.push(span.metadata().name());
        let mut fields = Fields(format!("span {}", span.metadata().name()));
        span.record(&mut fields);
        self.lines.lock().unwrap().push(fields.0);
        span::Id::from_u64(spans.len() as u64)
    }

    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}

    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}

    fn event(&self, event: &Event<'_>) {
        let within = self.current.lock().unwrap().last().copied();
        let span = within.map_or("none", |id| self.spans.lock().unwrap()[id as usize - 1]);
        let mut fields = Fields(format!("event in {span}:"));
        event.record(&mut fields);
        self.lines.lock().unwrap().push(fields.0);
    }

    fn enter(&self, span: &span::Id) {
        self.current.lock().unwrap().push(span.into_u64());
    }

    fn exit(&self, _: &span::Id) {
        self.current.lock().unwrap().pop();
    }
}

#[test]
fn a_span_per_call_and_per_attempt_and_an_event_per_retry() {
    let subscriber = Lines::default();
    let lines = subscriber.lines.clone();
    let _guard = tracing::subscriber::set_default(subscriber);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async {
        let policy = RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::from_millis(10), 1),
        );
        let (upstream, mut handle) =
            mock::pair::<Request<()>, Response<http_body_util::Empty<bytes::Bytes>>>();
        let svc = StatusRetryLayer::new(policy).layer(upstream);
        let server = tokio::spawn(async move {
            while let Some((_, send)) = handle.next_request().await {
                send.send_response(
                    Response::builder()
                        .status(503)
                        .body(Default::default())
                        .unwrap(),
                );
            }
        });
        let request = Request::get("/items").body(()).unwrap();
        let _ = svc.oneshot(request).await.unwrap();
        server.abort();
    });
    let lines = lines.lock().unwrap().clone();
    let ours: Vec<&String> = lines
        .iter()
        .filter(|line| line.contains("http_resilience"))
        .collect();
    assert_eq!(ours.len(), 5, "{lines:#?}");
    let request = "http.request.method=GET server.address=\"\" server.port=80";
    assert_eq!(
        *ours[0],
        format!("span http_resilience.call otel.name=GET otel.kind=\"internal\" resilience.form=\"retry\" {request}")
    );
    let attempt =
        format!("span http_resilience.attempt otel.name=GET otel.kind=\"client\" {request}");
    assert_eq!(*ours[1], attempt);
    assert!(
        ours[2].starts_with("event in http_resilience.call: message=retrying attempt=1"),
        "{}",
        ours[2]
    );
    assert!(ours[2].contains("wait_ms=10 source=backoff"), "{}", ours[2]);
    assert_eq!(*ours[3], attempt);
    assert!(
        ours[4].starts_with("event in http_resilience.call: message=done attempts=2"),
        "{}",
        ours[4]
    );
    assert!(ours[4].contains("stop=retries exhausted"), "{}", ours[4]);
}
