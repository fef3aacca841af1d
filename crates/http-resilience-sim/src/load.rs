//! The callers: thousands of them, each starting calls at random (a Poisson
//! process), whether or not its earlier calls have ended. The load is open:
//! a failing upstream does not slow the callers down, as it does not slow
//! down the users of a web service.

use crate::{
    metrics::{Bucket, Ended, Recorder},
    rng::Rng,
    upstream::{Model, Upstream, CALL_STARTED},
};
use http::{HeaderName, Request, Response};
use http_resilience::{BoxError, FailureKind};
use std::{future::Future, time::Duration};
use tokio::time::Instant;
use tower::{Service, ServiceExt};

/// The callers and how often they call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Load {
    /// The callers.
    pub(crate) callers: u32,
    /// The calls per second of all of them together.
    pub(crate) rate: f64,
    /// When the callers stop starting calls.
    pub(crate) until: Duration,
}

/// One run of a scenario's strategy, from `seed`: the upstream of `model`,
/// the client `stack` makes around it (drawing its own seeds from the
/// run's stream), and the callers of `load`, every call through the client.
/// Returns the record, in buckets of a second, once the callers have
/// stopped and `drain` more has passed.
pub(crate) async fn drive<S, B>(
    seed: u64,
    model: Model,
    load: Load,
    drain: Duration,
    stack: impl FnOnce(Upstream, &mut Rng) -> S,
) -> Vec<Bucket>
where
    S: Service<Request<String>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<BoxError>,
    S::Future: Send,
{
    let mut rng = Rng::new(seed);
    let recorder = Recorder::new(Duration::from_secs(1));
    let upstream = Upstream::new(model, rng.fork(), recorder.clone());
    let client = stack(upstream, &mut rng);
    run(load, &mut rng, &recorder, drain, move |request| {
        let client = client.clone();
        async move { classify(&client.oneshot(request).await.map_err(Into::into)) }
    })
    .await;
    recorder.buckets()
}

/// Runs the callers of `load`: each call is a request made by `call`,
/// recorded in `recorder` when it starts and when it ends. Returns when the
/// callers have stopped and `drain` more has passed, for the calls still in
/// flight to end.
async fn run<C, F>(load: Load, rng: &mut Rng, recorder: &Recorder, drain: Duration, call: C)
where
    C: Fn(Request<String>) -> F + Clone + Send + 'static,
    F: Future<Output = Ended> + Send + 'static,
{
    let mean_gap = f64::from(load.callers) / load.rate;
    let end = recorder.start() + load.until;
    for _ in 0..load.callers {
        let mut rng = rng.fork();
        let (recorder, call) = (recorder.clone(), call.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs_f64(rng.exponential(mean_gap))).await;
                if Instant::now() >= end {
                    return;
                }
                tokio::spawn(one_call(recorder.clone(), call.clone()));
            }
        });
    }
    tokio::time::sleep_until(end + drain).await;
}

async fn one_call<C, F>(recorder: Recorder, call: C)
where
    C: Fn(Request<String>) -> F,
    F: Future<Output = Ended>,
{
    let started = Instant::now();
    recorder.offered();
    let ended = call(request(&recorder, started)).await;
    recorder.ended(started, ended);
}

/// A GET request marked with the instant its call started.
pub(crate) fn request(recorder: &Recorder, started: Instant) -> Request<String> {
    let micros = started
        .saturating_duration_since(recorder.start())
        .as_micros();
    Request::get("http://upstream.sim/")
        .header(HeaderName::from_static(CALL_STARTED), micros.to_string())
        .body(String::new())
        .expect("a valid request")
}

/// The same call's request for the next service down: a new request (an
/// upstream never sees its caller's extensions, a deadline among them), with
/// the mark of the call that caused it.
pub(crate) fn forward<B>(inbound: &Request<B>) -> Request<String> {
    let mut request = Request::get("http://upstream.sim/")
        .body(String::new())
        .expect("a valid request");
    if let Some(started) = inbound.headers().get(CALL_STARTED) {
        request
            .headers_mut()
            .insert(HeaderName::from_static(CALL_STARTED), started.clone());
    }
    request
}

/// How a call through the layers ended: a 2xx, another response, turned
/// away by a guard (never sent), or an error.
pub(crate) fn classify<B>(outcome: &Result<http::Response<B>, BoxError>) -> Ended {
    match outcome {
        Ok(response) if response.status().is_success() => Ended::Good,
        Ok(_) => Ended::Rejected,
        Err(err) if FailureKind::of(&**err).is_turned_away() => Ended::TurnedAway,
        Err(_) => Ended::Failed,
    }
}
