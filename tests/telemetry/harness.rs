//! What the telemetry tests share: a scripted upstream that notes what it
//! saw in every `call` (the attempt number, the current span, the spans
//! entered), the two forms of the stack, and a guarded call.

use crate::recorder::{Recorder, SpanData, Value};
use http::{Request, Response, StatusCode};
use http_resilience::{
    deadline::body::DeadlineBody,
    extensions::AttemptNumber,
    policy::{Decoder, FixedDelay, Retryer, StatusDecoder},
    retry::RetryPolicy,
    AttemptTimeoutLayer, BoxError, DeadlineLayer, ResiliencePolicy, StatusRetryLayer,
};
use std::{
    collections::BTreeMap,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};
use tower::{util::BoxCloneService, Service, ServiceBuilder, ServiceExt};

/// The URI of every call: credentials and a query, both kept out of
/// `url.full` by default.
pub(crate) const URI: &str = "http://me:secret@api.test:8080/v1/items?sig=abc";

/// `url.full` of [`URI`].
pub(crate) const URL_FULL: &str = "http://REDACTED:REDACTED@api.test:8080/v1/items";

/// The deadline of every call in both forms, and each attempt's limit.
pub(crate) const DEADLINE: Duration = Duration::from_secs(8);
pub(crate) const ATTEMPT: Duration = Duration::from_secs(3);

/// The upstream's latency, and the wait between attempts.
pub(crate) const LATENCY: Duration = Duration::from_millis(50);
pub(crate) const DELAY: Duration = Duration::from_millis(10);

/// The guard on every call: far above every limit under test (virtual time).
const GUARD: Duration = Duration::from_secs(60);

pub(crate) const CALL: &str = "http_resilience.call";
pub(crate) const ATTEMPT_SPAN: &str = "http_resilience.attempt";

/// The seed's policy: 503 only, two retries 10 ms apart; every attempt
/// after the first numbered for the layers below.
pub(crate) fn seed_policy() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 2),
    )
    .map_options(|options| options.with_attempt_number())
}

/// One answer of the upstream, by the order of the calls.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Reply {
    /// This status after this long.
    After(Duration, u16),
    /// No answer, ever.
    Never,
}

/// `status` after [`LATENCY`].
pub(crate) const fn status(status: u16) -> Reply {
    Reply::After(LATENCY, status)
}

/// What the upstream saw of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    /// `AttemptNumber::of` the request.
    pub(crate) attempt: u32,
    /// The spans entered during `call`, outermost first: the last is the
    /// current span.
    pub(crate) at_call: Vec<u64>,
    /// The spans entered when its future was first polled.
    pub(crate) at_poll: Vec<u64>,
    /// The spans entered when it answered, if it did.
    pub(crate) at_reply: Option<Vec<u64>>,
}

/// A scripted upstream: the `n`th call gets the `n`th reply.
#[derive(Clone)]
pub(crate) struct Upstream {
    script: Arc<[Reply]>,
    seen: Arc<Mutex<Vec<Seen>>>,
    recorder: Recorder,
}

impl Upstream {
    pub(crate) fn new(recorder: &Recorder, script: impl Into<Arc<[Reply]>>) -> Self {
        Self {
            script: script.into(),
            seen: Arc::default(),
            recorder: recorder.clone(),
        }
    }

    /// What it saw, one entry per call.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Service<Request<String>> for Upstream {
    type Response = Response<String>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<String>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<String>) -> Self::Future {
        let n = {
            let mut seen = self.seen.lock().unwrap();
            seen.push(Seen {
                attempt: AttemptNumber::of(&request),
                at_call: self.recorder.entered(),
                at_poll: Vec::new(),
                at_reply: None,
            });
            seen.len() - 1
        };
        let reply = *self
            .script
            .get(n)
            .unwrap_or_else(|| panic!("call {} is past the script", n + 1));
        let (seen, recorder) = (Arc::clone(&self.seen), self.recorder.clone());
        Box::pin(async move {
            seen.lock().unwrap()[n].at_poll = recorder.entered();
            let Reply::After(latency, status) = reply else {
                return std::future::pending().await;
            };
            tokio::time::sleep(latency).await;
            seen.lock().unwrap()[n].at_reply = Some(recorder.entered());
            Ok(Response::builder()
                .status(status)
                .body(String::new())
                .unwrap())
        })
    }
}

/// The two forms of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `DeadlineLayer -> StatusRetryLayer -> AttemptTimeoutLayer`.
    Layers,
    /// `ResiliencePolicy::new(..).layer()`.
    Combined,
}

pub(crate) const FORMS: [Form; 2] = [Form::Layers, Form::Combined];

pub(crate) type Svc = BoxCloneService<Request<String>, Response<DeadlineBody<String>>, BoxError>;

/// `upstream` under `policy` in `form`, with [`DEADLINE`] and [`ATTEMPT`]
/// (or `attempt`, when given).
pub(crate) fn stack<D, R>(
    form: Form,
    policy: RetryPolicy<D, R>,
    attempt: Option<Duration>,
    upstream: Upstream,
) -> Svc
where
    D: Decoder<String, BoxError> + Send + Sync + 'static,
    R: Retryer + Send + Sync + 'static,
{
    let attempt = attempt.unwrap_or(ATTEMPT);
    match form {
        Form::Layers => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(DeadlineLayer::new(DEADLINE))
                .layer(StatusRetryLayer::new(policy))
                .layer(AttemptTimeoutLayer::new(attempt))
                .service(upstream),
        ),
        Form::Combined => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(
                    ResiliencePolicy::new(DEADLINE, attempt, policy)
                        .unwrap()
                        .layer(),
                )
                .service(upstream),
        ),
    }
}

/// A GET of [`URI`] through `svc`, under the guard: the status, or the error.
pub(crate) async fn get<S, B>(svc: S) -> Result<StatusCode, BoxError>
where
    S: Service<Request<String>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    get_uri(svc, URI).await
}

/// A GET of `uri` through `svc`, under the guard.
pub(crate) async fn get_uri<S, B>(svc: S, uri: &str) -> Result<StatusCode, BoxError>
where
    S: Service<Request<String>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    send(svc, Request::get(uri).body(String::new()).unwrap()).await
}

/// `request` through `svc`, under the guard.
pub(crate) async fn send<S, B>(svc: S, request: Request<String>) -> Result<StatusCode, BoxError>
where
    S: Service<Request<String>, Response = Response<B>>,
    S::Error: Into<BoxError>,
{
    tokio::time::timeout(GUARD, svc.oneshot(request))
        .await
        .expect("the call hung past the test guard")
        .map(|response| response.status())
        .map_err(Into::into)
}

/// The one call span and the attempt spans, checked to be children of it.
pub(crate) fn call_and_attempts(recorder: &Recorder) -> (SpanData, Vec<SpanData>) {
    let calls = recorder.named(CALL);
    assert_eq!(calls.len(), 1, "one call span: {calls:#?}");
    let call = calls.into_iter().next().unwrap();
    let attempts = recorder.named(ATTEMPT_SPAN);
    for attempt in &attempts {
        assert_eq!(
            attempt.parent,
            Some(call.id),
            "a child of the call: {attempt:#?}"
        );
    }
    (call, attempts)
}

/// The library's spans, with their ids replaced by their order among them,
/// so that two runs can be compared.
pub(crate) fn normalized(recorder: &Recorder) -> Vec<SpanData> {
    let ours: Vec<SpanData> = recorder
        .spans()
        .into_iter()
        .filter(|span| span.name.starts_with("http_resilience."))
        .collect();
    let position = |id: u64| {
        ours.iter()
            .position(|span| span.id == id)
            .map_or(0, |at| at as u64 + 1)
    };
    ours.iter()
        .map(|span| span.renumbered(position(span.id), span.parent.map(position)))
        .collect()
}

/// A value given with `%` or `?`.
pub(crate) fn text(value: &str) -> Value {
    Value::Text(value.to_owned())
}

/// A string value.
pub(crate) fn string(value: &str) -> Value {
    Value::Str(value.to_owned())
}

/// The request attributes both spans carry, for [`URI`].
pub(crate) fn request_fields(kind: &str) -> BTreeMap<&'static str, Value> {
    BTreeMap::from([
        ("otel.name", text("GET")),
        ("otel.kind", string(kind)),
        ("http.request.method", text("GET")),
        ("server.address", string("api.test")),
        ("server.port", Value::I64(8080)),
        ("url.full", text(URL_FULL)),
    ])
}

/// `fields` and `more`.
pub(crate) fn with(
    mut fields: BTreeMap<&'static str, Value>,
    more: impl IntoIterator<Item = (&'static str, Value)>,
) -> BTreeMap<&'static str, Value> {
    fields.extend(more);
    fields
}
