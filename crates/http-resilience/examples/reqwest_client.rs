//! A `reqwest::Client` under the standard preset, against a flaky loopback
//! upstream: first with reqwest's own request builder (`ResilientClient`),
//! then as a tower service (`ReqwestService`).
//!
//! ```text
//! cargo run -p http-resilience --example reqwest_client
//! ```
//!
//! Copied into a project of its own (as `src/main.rs`), it needs, besides
//! the crates the README's "Use" section lists:
//!
//! ```toml
//! http-resilience-mock = "0.1"
//! reqwest = "0.13"
//! ```

use http_body_util::BodyExt;
use http_resilience::{
    policy::CallEvent,
    presets,
    reqwest_client::{ReqwestService, ResilientClient},
    Attempts, BoxError,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use tower::{Layer, ServiceExt};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let upstream = MockServer::start().await?;
    for _ in 0..2 {
        upstream.enqueue(MockResponse::new(503).with_header("retry-after", "0"));
        upstream.enqueue(MockResponse::ok("fresh weather"));
    }

    // The client retries nothing and times nothing out: the layers do both.
    let client = reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .build()?;
    // The attempt limit first: the preset's 10 s would not fit a 5 s deadline.
    let policy = presets::standard()
        .with_attempt_timeout(Duration::from_secs(2))?
        .with_deadline(Duration::from_secs(5))?
        .map_retry(|retry| {
            retry.map_options(|o| {
                o.with_listener(|heard: &CallEvent<'_>| println!("  {}", heard.event))
            })
        });

    println!("GET {} with reqwest's builder", upstream.uri("/weather"));
    let resilient = ResilientClient::new(client.clone(), policy.clone().layer());
    let response = resilient
        .get(upstream.uri("/weather").to_string())
        .query(&[("city", "Lyon")])
        .send()
        .await?;
    let attempts = response
        .extensions()
        .get::<Attempts>()
        .map_or(1, Attempts::get);
    println!(
        "{} from {} after {attempts} attempt(s)",
        response.status(),
        response.url()
    );
    println!("{:?}", response.text().await?);

    println!("GET {} as a tower service", upstream.uri("/weather"));
    let svc = policy.layer().layer(ReqwestService::new(client));
    let request = http::Request::get(upstream.uri("/weather")).body(String::new())?;
    let response = svc.oneshot(request).await?;
    let status = response.status();
    let attempts = Attempts::of(&response);
    let body = response.into_body().collect().await?.to_bytes();
    println!("{status} after {attempts} attempt(s): {body:?}");
    println!("the upstream saw {} request(s)", upstream.request_count());
    Ok(())
}
