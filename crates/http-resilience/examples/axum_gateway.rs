//! An axum gateway: every incoming request is forwarded to one upstream
//! through the three layers, its body streamed both ways.
//!
//! ```text
//! cargo run -p http-resilience --example axum_gateway
//! ```
//!
//! Copied into a project of its own (as `src/main.rs`), it needs, besides
//! the crates the README's "Use" section lists:
//!
//! ```toml
//! axum = "0.8"
//! http-resilience-mock = "0.1"
//! hyper-util = { version = "0.1", features = ["client-legacy", "http1", "tokio"] }
//! tower-http = { version = "0.6", features = ["trace", "request-id"] }
//! ```
//!
//! [`gateway`] builds an axum [`Router`] whose fallback handler takes the
//! incoming request, points it at the upstream (path and query kept), drops
//! the hop-by-hop headers and sends it through one shared client stack,
//! built once:
//!
//! ```text
//! DeadlineLayer (2 s)  ->  StatusRetryLayer (transient failures, twice, 10 ms apart)  ->  AttemptTimeoutLayer (1 s)  ->  hyper-util client
//! ```
//!
//! - The retried outcomes are [`TransientDecoder`]'s: 408, 429, 500, 502, 503
//!   and 504, and the failures the upstream cannot have acted on (a refused
//!   connection while it restarts, an HTTP/2 stream refused unprocessed).
//! - The incoming body is a stream. It is wrapped in [`ReplayBody`], which keeps
//!   what an attempt sends (up to 64 KiB) and hands what it has not read on to
//!   the next: an idempotent request (GET, PUT, DELETE, ...) that got a 503 is
//!   sent again with the same body, and a request of any method and size that
//!   never reached the upstream is sent again in full. A POST that got a 503 is
//!   not retried: the upstream may have acted on it.
//! - A response is passed through as it is, body streamed: an exhausted 503
//!   arrives as the upstream's last 503, with its headers and body.
//! - An error becomes `504 Gateway Timeout` when the deadline ran out, and
//!   `502 Bad Gateway` otherwise; the short text body names the kind of
//!   failure ([`FailureKind`]).
//!
//! - Around the router, on the inbound side, tower-http's layers: an
//!   `x-request-id` is set when the client sent none (`SetRequestIdLayer`),
//!   traced with the call (`TraceLayer`) and returned on the response
//!   (`PropagateRequestIdLayer`). They sit outside the client's retry: the id is
//!   forwarded upstream with the other headers, so every attempt of one call
//!   carries the same id, and there is one trace span per inbound call. (The
//!   retry layer's own `tracing` span already holds an event per attempt; a
//!   `TraceLayer` inside the retry would add a span per attempt.) tower-http's
//!   `Timeout` is not used for the limits: it polls its timer first and answers
//!   `408`, where the attempt timeout returns a typed error the retry policy
//!   can judge.
//!
//! The deadline also covers the response body. When it runs out while the body
//! is streamed, the head is already sent: the gateway can only cut the
//! response short, and the client sees a broken body, not a 504.
//!
//! `main` starts a scripted loopback upstream (the mock server) and two
//! gateways on `127.0.0.1:0`, makes a few calls with a hyper-util client,
//! prints what happened, and exits.

use axum::{
    body::Body,
    extract::{Request, State},
    response::{IntoResponse, Response},
    Router,
};
use bytes::Bytes;
use http::{
    header::{self, HeaderName},
    uri::{Authority, PathAndQuery, Scheme},
    HeaderMap, StatusCode, Uri,
};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    body::ReplayBody,
    policy::{FixedDelay, TransientDecoder},
    retry::RetryPolicy,
    transport::{self, HttpClient},
    BoxError, FailureKind, Resilience, ResiliencePolicy,
};
use http_resilience_mock::{MockResponse, MockServer};
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use std::{error::Error, io, net::SocketAddr, time::Duration};
use tokio::{net::TcpListener, time::Instant};
use tower::ServiceExt;
use tower_http::{
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};

/// The limit of every attempt in [`gateway`].
pub const ATTEMPT: Duration = Duration::from_secs(1);

/// The budget of every call in [`gateway`], waits and response body included.
pub const DEADLINE: Duration = Duration::from_secs(2);

/// The wait before each retry.
pub const RETRY_DELAY: Duration = Duration::from_millis(10);

/// How many times a transient failure is retried (three attempts in all).
pub const RETRIES: u32 = 2;

/// The header that carries a request's id: set on the inbound request when the
/// client sent none, forwarded upstream with every attempt, and returned.
pub const REQUEST_ID: &str = "x-request-id";

/// The outbound request body: the incoming stream, kept as it is sent so that
/// a retry can send it again.
pub type Outbound = ReplayBody<Body>;

/// The client stack every forwarded request goes through.
type Stack = Resilience<HttpClient<Outbound>, TransientDecoder, FixedDelay>;

/// The gateway's state: where requests go, and the stack that sends them.
#[derive(Debug, Clone)]
struct Upstream {
    scheme: Scheme,
    authority: Authority,
    client: Stack,
}

/// Headers that belong to one connection, never forwarded (RFC 9110,
/// section 7.6.1), with `proxy-connection` and `keep-alive` as proxies have
/// long dropped them too.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// A gateway to `upstream` with the limits above: attempts of at most
/// [`ATTEMPT`], [`DEADLINE`] in all, transient failures retried [`RETRIES`]
/// times.
///
/// # Errors
///
/// As [`gateway_with`].
pub fn gateway(upstream: Uri) -> Result<Router, BoxError> {
    gateway_with(upstream, ATTEMPT, DEADLINE)
}

/// A gateway to `upstream` (its scheme and authority; its path is not used)
/// with other limits: attempts of at most `attempt`, `deadline` in all.
///
/// # Errors
///
/// When `upstream` has no scheme or authority, or a limit is zero. An
/// attempt limit longer than the deadline is taken: the deadline wins.
pub fn gateway_with(
    upstream: Uri,
    attempt: Duration,
    deadline: Duration,
) -> Result<Router, BoxError> {
    let retries = FixedDelay::new(RETRY_DELAY, RETRIES);
    gateway_with_retries(upstream, attempt, deadline, retries)
}

/// A gateway to `upstream` with other limits and another retry schedule (a
/// longer one rides out an upstream that restarts).
///
/// # Errors
///
/// As [`gateway_with`].
pub fn gateway_with_retries(
    upstream: Uri,
    attempt: Duration,
    deadline: Duration,
    retries: FixedDelay,
) -> Result<Router, BoxError> {
    let parts = upstream.into_parts();
    let (Some(scheme), Some(authority)) = (parts.scheme, parts.authority) else {
        return Err(
            "the upstream needs a scheme and an authority, as in http://127.0.0.1:8080".into(),
        );
    };
    let policy = RetryPolicy::new(TransientDecoder::new(), retries);
    let resilience = ResiliencePolicy::new(deadline, attempt, policy)?;
    let client = transport::Builder::new().build_http::<Outbound>()?;
    let client = tower::ServiceBuilder::new()
        .layer(resilience.layer())
        .service(client);
    let upstream = Upstream {
        scheme,
        authority,
        client,
    };
    // NOTE: outside the client's retry, on the inbound side: one id and one
    // trace span per inbound call, whatever number of attempts it takes.
    let request_id = HeaderName::from_static(REQUEST_ID);
    Ok(Router::new().fallback(forward).with_state(upstream).layer(
        tower::ServiceBuilder::new()
            .layer(SetRequestIdLayer::new(request_id.clone(), MakeRequestUuid))
            .layer(TraceLayer::new_for_http())
            .layer(PropagateRequestIdLayer::new(request_id)),
    ))
}

/// Serves `router` on a fresh loopback port, in a task of its own, until the
/// runtime ends; returns the address.
///
/// # Errors
///
/// When the port cannot be bound.
pub async fn spawn(router: Router) -> io::Result<SocketAddr> {
    let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// The handler: the incoming request, pointed at the upstream, through the
/// stack; the outcome back as a response.
async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    // NOTE: a fresh request, so that nothing of the inbound connection (axum's
    // and hyper's extensions) leaks into the outbound one.
    let mut outbound = http::Request::new(ReplayBody::new(body));
    *outbound.method_mut() = parts.method;
    *outbound.uri_mut() = upstream.uri(parts.uri.path_and_query());
    *outbound.headers_mut() = parts.headers;
    strip_hop_by_hop(outbound.headers_mut());
    // NOTE: hyper-util sets `host` from the URI when it is missing; the
    // client's `host` names the gateway, not the upstream.
    outbound.headers_mut().remove(header::HOST);

    match upstream.client.oneshot(outbound).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, Body::new(body))
        }
        Err(err) => failure(&*err),
    }
}

/// The response for a call that failed: 504 when the deadline ran out, 502
/// for every other failure.
fn failure(err: &(dyn Error + 'static)) -> Response {
    let kind = FailureKind::of(err);
    let status = match kind {
        FailureKind::Deadline => StatusCode::GATEWAY_TIMEOUT,
        _ => StatusCode::BAD_GATEWAY,
    };
    let reason = status.canonical_reason().unwrap_or("error");
    (status, format!("{reason}: {kind}\n")).into_response()
}

/// Removes the hop-by-hop headers, and those the `connection` header names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(&HOP_BY_HOP) {
        headers.remove(name);
    }
}

// ===== impl Upstream =====

impl Upstream {
    /// The upstream URI for an incoming path and query.
    fn uri(&self, path_and_query: Option<&PathAndQuery>) -> Uri {
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(
            path_and_query
                .cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        );
        // NOTE: a scheme, an authority and a path always make a valid URI.
        Uri::from_parts(parts).expect("scheme, authority and path make a URI")
    }
}

// ===== the demo =====

/// The guard on every call of the demo: far above every limit.
#[cfg_attr(test, allow(dead_code))]
const GUARD: Duration = Duration::from_secs(10);

/// One call of the demo.
#[cfg_attr(test, allow(dead_code))]
struct Call<'a> {
    title: &'a str,
    gateway: SocketAddr,
    method: &'a str,
    path: &'a str,
    body: &'a str,
    script: Vec<MockResponse>,
}

#[cfg_attr(test, allow(dead_code))]
#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let upstream = MockServer::start().await?;
    let standard = spawn(gateway(upstream.uri("/"))?).await?;
    let tight = Duration::from_millis(500);
    let strict = spawn(gateway_with(upstream.uri("/"), tight, tight)?).await?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();

    println!("axum gateway demo");
    println!("  upstream  http://{} (scripted)", upstream.addr());
    println!(
        "  gateway   http://{standard}  attempt {ATTEMPT:?}, deadline {DEADLINE:?}, transient failures retried {RETRIES} times"
    );
    println!("  gateway   http://{strict}  attempt {tight:?}, deadline {tight:?} (the deadline ends the attempt)");

    let calls = [
        Call {
            title: "a flaky upstream: 503, 503, then 200",
            gateway: standard,
            method: "GET",
            path: "/value?id=7",
            body: "",
            script: vec![
                MockResponse::new(503),
                MockResponse::new(503),
                MockResponse::ok("ok"),
            ],
        },
        Call {
            title: "unavailable every time: the last 503 passes through",
            gateway: standard,
            method: "GET",
            path: "/value",
            body: "",
            script: (1..=3)
                .map(|n| MockResponse::new(503).with_body(format!("down {n}")))
                .collect(),
        },
        Call {
            title: "a POST with a body",
            gateway: standard,
            method: "POST",
            path: "/orders",
            body: r#"{"item":"tea","count":2}"#,
            script: vec![MockResponse::new(201).with_body("created")],
        },
        Call {
            title: "a PUT that got a 503 is sent again, same body",
            gateway: standard,
            method: "PUT",
            path: "/orders/7",
            body: r#"{"item":"tea","count":3}"#,
            script: vec![MockResponse::new(503), MockResponse::ok("updated")],
        },
        Call {
            title: "an upstream that never answers: the attempt timeout",
            gateway: standard,
            method: "GET",
            path: "/silent",
            body: "",
            script: vec![MockResponse::no_response()],
        },
        Call {
            title: "the same silence past the deadline",
            gateway: strict,
            method: "GET",
            path: "/silent",
            body: "",
            script: vec![MockResponse::no_response()],
        },
    ];

    for (n, call) in calls.into_iter().enumerate() {
        println!("\n{}. {}", n + 1, call.title);
        let before = upstream.request_count();
        for response in call.script {
            upstream.enqueue(response);
        }
        let uri = format!("http://{}{}", call.gateway, call.path);
        let request = http::Request::builder()
            .method(call.method)
            .uri(&uri)
            .body(Full::from(call.body))?;
        println!("   {} {uri}", call.method);
        let start = Instant::now();
        let outcome = tokio::time::timeout(GUARD, async {
            let response = client.request(request).await?;
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            Ok::<_, BoxError>((status, body))
        })
        .await??;
        let (status, body) = outcome;
        let elapsed = start.elapsed();
        let seen = &upstream.requests()[before..];
        println!(
            "   <- {status}, body {:?}, after {}ms",
            String::from_utf8_lossy(&body).trim_end(),
            elapsed.as_millis(),
        );
        let sent_bodies: Vec<_> = seen
            .iter()
            .map(|r| format!("{} bytes", r.body.len()))
            .collect();
        println!(
            "   the upstream saw {} request(s){}",
            seen.len(),
            if call.body.is_empty() {
                String::new()
            } else {
                let intact = seen.iter().all(|r| r.body == call.body.as_bytes());
                format!(
                    ", bodies {} ({})",
                    sent_bodies.join(", "),
                    if intact { "intact" } else { "CHANGED" }
                )
            }
        );
    }
    println!("\nSee README.md for what each layer does and why their order matters.");
    Ok(())
}
