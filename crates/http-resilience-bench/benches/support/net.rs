//! What the benches that talk to the loopback server share on the calling
//! side: the bare client, the requests, reading a response, and the median.

use crate::server::{FLAKY, MODE, REQUEST_ID};
use crate::support::copy_request;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use http_resilience::RequestDeadline;
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::{TokioExecutor, TokioTimer},
};
use std::{pin::pin, time::Duration};
use tower::{BoxError, Service, ServiceExt};

/// The request type of every network bench.
pub(crate) type Req = Request<Full<Bytes>>;

/// hyper-util's legacy client with the settings `transport::Builder` uses
/// (no Nagle, no hidden resend, tokio's timer), minus its connect and read
/// timeouts: the "bare" variant.
pub(crate) fn bare_client() -> Client<HttpConnector, Full<Bytes>> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .retry_canceled_requests(false)
        .build(connector)
}

/// A GET of `uri` with an empty `Full` body (`Clone`, so both retry layers
/// replay it); with `flaky`, the headers that make the server answer 503, 503
/// and then 200 for that request id.
pub(crate) fn request(uri: &Uri, flaky: Option<u64>) -> Req {
    let mut request = Request::new(Full::new(Bytes::new()));
    *request.uri_mut() = uri.clone();
    if let Some(id) = flaky {
        let headers = request.headers_mut();
        headers.insert(MODE, HeaderValue::from_static(FLAKY));
        headers.insert(REQUEST_ID, HeaderValue::from(id));
    }
    request
}

/// Reads a response body to its end, frame by frame, keeping nothing; returns
/// the status.
pub(crate) async fn drain<T>(response: Response<T>) -> Result<StatusCode, BoxError>
where
    T: Body,
    T::Error: Into<BoxError>,
{
    let status = response.status();
    let mut body = pin!(response.into_body());
    while let Some(frame) = body.as_mut().frame().await {
        frame.map_err(Into::into)?;
    }
    Ok(status)
}

/// One call: waits for `svc` to be ready, sends `request` and reads the
/// response to its end; returns the status.
pub(crate) async fn exchange<S, T>(svc: &mut S, request: Req) -> Result<StatusCode, BoxError>
where
    S: Service<Req, Response = Response<T>>,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    let svc = svc.ready().await.map_err(Into::into)?;
    let response = svc.call(request).await.map_err(Into::into)?;
    drain(response).await
}

/// How [`hand_loop`] makes its calls.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HandLoop {
    /// Retries after the first attempt, at most.
    pub(crate) retries: u32,
    /// Read each 503's body to its end (as a careful hand loop does), or drop
    /// it unread (as both retry layers do).
    pub(crate) read_503_bodies: bool,
    /// `(attempt, call)`: the floor of our semantics. A copy of every
    /// attempt's request that may be followed by another is made before it is
    /// sent (what a retry must keep), every attempt's request carries the
    /// call's `RequestDeadline` (with the extension's three allocations) and
    /// runs under a `tokio::time::timeout(attempt)`, and the whole call, body
    /// included, under another `(call)`. `None`: no copy, no timers, no
    /// extension.
    pub(crate) limits: Option<(Duration, Duration)>,
}

/// Up to `1 + how.retries` raw calls on `svc`, until one is not a 503 (with
/// `flaky`, the server answers 503, 503 and then 200); the last response is
/// read to its end and its status returned. No retry logic: each attempt
/// builds its request afresh (the floor copies it as a retry would).
pub(crate) async fn hand_loop<S, T>(
    svc: &mut S,
    uri: &Uri,
    flaky: Option<u64>,
    how: HandLoop,
) -> Result<StatusCode, BoxError>
where
    S: Service<Req, Response = Response<T>>,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    let deadline = how.limits.map(|(_, call)| RequestDeadline::after(call));
    let call = async {
        let mut retries = 0;
        loop {
            let svc = svc.ready().await.map_err(Into::into)?;
            let mut request = request(uri, flaky);
            let response = match (deadline, how.limits) {
                (Some(deadline), Some((attempt, _))) => {
                    let kept = (retries < how.retries).then(|| copy_request(&request));
                    request.extensions_mut().insert(deadline);
                    let response = tokio::time::timeout(attempt, svc.call(request))
                        .await?
                        .map_err(Into::into)?;
                    drop(std::hint::black_box(kept));
                    response
                }
                _ => svc.call(request).await.map_err(Into::into)?,
            };
            let last =
                response.status() != StatusCode::SERVICE_UNAVAILABLE || retries == how.retries;
            if last {
                return drain(response).await;
            }
            if how.read_503_bodies {
                drain(response).await?;
            }
            retries += 1;
        }
    };
    match how.limits {
        Some((_, limit)) => tokio::time::timeout(limit, call).await?,
        None => call.await,
    }
}

/// The median of `values` (the mean of the middle two for an even count).
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}
