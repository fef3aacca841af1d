//! The same retry policy twice, against a flaky loopback upstream: with
//! reqwest-middleware and reqwest-retry, and with this crate's
//! `ResilientClient`. Each scenario prints what each client did, so the
//! differences the README lists ("Coming from reqwest-retry") can be watched.
//!
//! ```text
//! cargo run -p http-resilience --example reqwest_retry
//! ```
//!
//! Copied into a project of its own (as `src/main.rs`), it needs, besides
//! the crates the README's "Use" section lists:
//!
//! ```toml
//! http-resilience-mock = "0.1"
//! reqwest = { version = "0.13", features = ["stream"] }
//! reqwest-middleware = "0.5"
//! reqwest-retry = "0.9"
//! tokio-stream = "0.1"
//! ```

use http_resilience::BoxError;
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use tokio::time::Instant;

/// reqwest-middleware with reqwest-retry's `RetryTransientMiddleware`.
mod with_reqwest_retry {
    use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
    use reqwest_retry::{policies::ExponentialBackoff, RetryTransientMiddleware};

    pub(crate) fn client() -> ClientWithMiddleware {
        // 3 retries; waits from 1 s, doubling, full jitter, at most 30 min.
        let retry_policy = ExponentialBackoff::builder().build_with_max_retries(3);
        ClientBuilder::new(reqwest::Client::new())
            .with(RetryTransientMiddleware::new_with_policy(retry_policy))
            .build()
    }
}

/// The same policy with this crate's `ResilientClient`.
mod with_http_resilience {
    use http_resilience::{
        policy::{ExponentialBackoff, Jitter, TransientDecoder},
        reqwest_client::{ReqwestService, ResilientClient},
        retry::RetryPolicy,
        BoxError, Resilience, ResiliencePolicy,
    };
    use std::time::Duration;

    pub(crate) type Client =
        ResilientClient<Resilience<ReqwestService, TransientDecoder, ExponentialBackoff>>;

    pub(crate) fn client() -> Result<Client, BoxError> {
        // 4 attempts in all (3 retries); waits from 1 s, doubling, full jitter, at most 30 min.
        let backoff =
            ExponentialBackoff::new(Duration::from_secs(1), 2.0, Duration::from_secs(1800), 4)?
                .with_jitter(Jitter::Full);
        let retry = RetryPolicy::new(TransientDecoder::new(), backoff);
        // 10 s per attempt, 30 s for the whole call: waits and the response body included.
        let policy =
            ResiliencePolicy::new(Duration::from_secs(30), Duration::from_secs(10), retry)?;
        // reqwest's own retries off: every attempt is one the policy counts.
        let reqwest = reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .build()?;
        Ok(ResilientClient::new(reqwest, policy.layer()))
    }
}

/// Two upstreams with the same script, one per client.
async fn upstreams(script: &[MockResponse]) -> Result<[MockServer; 2], BoxError> {
    let servers = [MockServer::start().await?, MockServer::start().await?];
    for server in &servers {
        script
            .iter()
            .for_each(|response| server.enqueue(response.clone()));
    }
    Ok(servers)
}

fn streamed() -> reqwest::Body {
    let chunks: Vec<Result<&'static str, std::io::Error>> = vec![Ok("{\"id\": "), Ok("7}")];
    reqwest::Body::wrap_stream(tokio_stream::iter(chunks))
}

async fn a_get_past_two_503s(
    middleware: &reqwest_middleware::ClientWithMiddleware,
    resilient: &with_http_resilience::Client,
) -> Result<(), BoxError> {
    println!("GET answered 503, 503, 200:");
    let script = [
        MockResponse::new(503),
        MockResponse::new(503),
        MockResponse::ok("ok"),
    ];
    let [a, b] = upstreams(&script).await?;
    let response = middleware.get(a.uri("/").to_string()).send().await?;
    println!(
        "  reqwest-retry:    {}, {} requests",
        response.status(),
        a.request_count()
    );
    let response = resilient.get(b.uri("/").to_string()).send().await?;
    let attempts = response
        .extensions()
        .get::<http_resilience::Attempts>()
        .map_or(1, |a| a.get());
    println!(
        "  http-resilience:  {}, {} requests ({attempts} attempts in the response's extensions)",
        response.status(),
        b.request_count()
    );
    Ok(())
}

async fn a_post_that_got_a_503(
    middleware: &reqwest_middleware::ClientWithMiddleware,
    resilient: &with_http_resilience::Client,
) -> Result<(), BoxError> {
    println!("POST answered 503, then 201 (no Idempotency-Key):");
    let script = [MockResponse::new(503), MockResponse::new(201)];
    let [a, b] = upstreams(&script).await?;
    let response = middleware
        .post(a.uri("/orders").to_string())
        .body("{}")
        .send()
        .await?;
    println!(
        "  reqwest-retry:    {}, {} requests: sent again",
        response.status(),
        a.request_count()
    );
    let response = resilient
        .post(b.uri("/orders").to_string())
        .body("{}")
        .send()
        .await?;
    println!(
        "  http-resilience:  {}, {} request: not idempotent, not sent again",
        response.status(),
        b.request_count()
    );
    Ok(())
}

async fn a_streamed_upload(
    middleware: &reqwest_middleware::ClientWithMiddleware,
    resilient: &with_http_resilience::Client,
) -> Result<(), BoxError> {
    println!("PUT of a streamed body, answered 503, then 201:");
    let script = [MockResponse::new(503), MockResponse::new(201)];
    let [a, b] = upstreams(&script).await?;
    let outcome = middleware
        .put(a.uri("/objects/7").to_string())
        .body(streamed())
        .send()
        .await;
    println!(
        "  reqwest-retry:    {:?}, {} requests",
        outcome.map(|r| r.status()).map_err(|e| e.to_string()),
        a.request_count()
    );
    let response = resilient
        .put(b.uri("/objects/7").to_string())
        .body(streamed())
        .send()
        .await?;
    let bodies: Vec<_> = b
        .requests()
        .into_iter()
        .map(|request| request.body)
        .collect();
    println!(
        "  http-resilience:  {}, {} requests, bodies {bodies:?}",
        response.status(),
        b.request_count()
    );
    Ok(())
}

async fn a_retry_after(
    middleware: &reqwest_middleware::ClientWithMiddleware,
    resilient: &with_http_resilience::Client,
) -> Result<(), BoxError> {
    println!("GET answered 503 with Retry-After: 2, then 200:");
    let script = [
        MockResponse::new(503).with_header("retry-after", "2"),
        MockResponse::ok("ok"),
    ];
    let [a, b] = upstreams(&script).await?;
    let start = Instant::now();
    middleware.get(a.uri("/").to_string()).send().await?;
    println!(
        "  reqwest-retry:    retried after {:.1?}: its own backoff",
        start.elapsed()
    );
    let start = Instant::now();
    resilient.get(b.uri("/").to_string()).send().await?;
    println!(
        "  http-resilience:  retried after {:.1?}: the server's wait",
        start.elapsed()
    );
    Ok(())
}

async fn a_refused_connection(
    middleware: &reqwest_middleware::ClientWithMiddleware,
    resilient: &with_http_resilience::Client,
) -> Result<(), BoxError> {
    println!("GET to a port nobody listens on:");
    let url = format!("http://{}/", vacant_addr()?);
    let err = middleware.get(&url).send().await.unwrap_err();
    println!(
        "  reqwest-retry:    is_connect() = {}: {err}",
        err.is_connect()
    );
    let err = resilient.get(&url).send().await.unwrap_err();
    println!(
        "  http-resilience:  is_connect() = {}, {} after {} attempts",
        err.is_connect(),
        err.kind(),
        err.attempts()
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let middleware = with_reqwest_retry::client();
    let resilient = with_http_resilience::client()?;
    a_get_past_two_503s(&middleware, &resilient).await?;
    a_post_that_got_a_503(&middleware, &resilient).await?;
    a_streamed_upload(&middleware, &resilient).await?;
    a_retry_after(&middleware, &resilient).await?;
    a_refused_connection(&middleware, &resilient).await?;
    Ok(())
}
