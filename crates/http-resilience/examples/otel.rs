//! Metrics in OpenTelemetry's terms (feature `otel`) and the library's
//! spans, for a retried call and a hedged call against an in-process
//! upstream: the spans as they close (tracing-subscriber's fmt), then every
//! metric the SDK's in-memory exporter holds. No collector, no network.
//!
//! The combined service takes the metrics in one call
//! (`ResiliencePolicy::with_metrics`); the hedging stack, a stack of layers,
//! has its call layer outermost and its hedging policy wired.
//!
//! ```text
//! cargo run -p http-resilience --example otel
//! ```
//!
//! Copied into a project of its own (as `src/main.rs`), it needs, besides
//! the crates the README's "Use" section lists:
//!
//! ```toml
//! opentelemetry = { version = "0.33", features = ["metrics"] }
//! opentelemetry_sdk = { version = "0.33", features = ["metrics", "testing"] }
//! tracing = "0.1"
//! tracing-subscriber = "0.3"
//! ```

use http::{Request, Response, StatusCode};
use http_resilience::{
    breaker::BreakerPolicy,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    otel::{Metrics, Observed},
    policy::{FixedDelay, RetryBudget, StatusDecoder, TransientDecoder},
    retry::RetryPolicy,
    BoxError, DeadlineLayer, ResiliencePolicy,
};
use opentelemetry::{metrics::MeterProvider as _, KeyValue};
use opentelemetry_sdk::metrics::{
    data::{AggregatedMetrics, Metric, MetricData},
    InMemoryMetricExporter, PeriodicReader, SdkMeterProvider,
};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{Service, ServiceBuilder, ServiceExt};
use tracing_subscriber::fmt::format::FmtSpan;

const MS: fn(u64) -> Duration = Duration::from_millis;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    // The library's spans are at DEBUG; each is printed when it closes,
    // with the fields it recorded.
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .with_target(false)
        .without_time()
        .init();

    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let metrics = Metrics::new(&provider.meter("otel-example"));

    println!("== a call retried: 503, 503, then 200");
    let retried = retried_call(&metrics.clone().with_budget_name("api")).await?;

    println!("\n== a hedged call: the first copy is slow, the hedge answers");
    hedged_call(&metrics).await?;

    // NOTE: the gauges read the breaker and the budget while the service
    // that holds them lives.
    provider.force_flush()?;
    drop(retried);
    println!("\n== metrics");
    let exported = exporter.get_finished_metrics()?;
    if let Some(last) = exported.last() {
        for metric in last.scope_metrics().flat_map(|scope| scope.metrics()) {
            print_metric(metric);
        }
    }
    provider.shutdown()?;
    Ok(())
}

/// The combined service with a breaker, wired with one call, around an
/// upstream that answers 503 twice, then 200; the service is returned, so
/// that its gauges read until it is dropped.
async fn retried_call(
    metrics: &Metrics,
) -> Result<impl Service<Request<String>> + Clone, BoxError> {
    let budget = Arc::new(RetryBudget::new(10, 0.1)?);
    let retry = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(MS(10), 2))
        .map_options(|options| options.with_budget(budget));
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry)?
        .with_guard(BreakerPolicy::new(StatusDecoder::new([503])?))
        .with_metrics(metrics);
    let calls = Arc::new(AtomicU32::new(0));
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service_fn(move |_: Request<String>| {
            let unavailable = calls.fetch_add(1, Ordering::Relaxed) < 2;
            async move {
                tokio::time::sleep(MS(20)).await;
                let mut response = Response::new(String::new());
                if unavailable {
                    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                }
                Ok::<_, Infallible>(response)
            }
        });
    let request = Request::get("http://api.test:8080/items").body(String::new())?;
    let response = svc.clone().oneshot(request).await?;
    println!("-> {}", response.status());
    Ok(svc)
}

/// A hedge after 50 ms, the call layer outermost, around an upstream whose
/// first answer takes a second.
async fn hedged_call(metrics: &Metrics) -> Result<(), BoxError> {
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(MS(50)), 2)?
        .with_metrics(metrics);
    let calls = Arc::new(AtomicU32::new(0));
    let svc = ServiceBuilder::new()
        .layer(metrics.layer())
        .layer(DeadlineLayer::new(Duration::from_secs(8)))
        .layer(HedgeLayer::new(policy))
        .service_fn(move |_: Request<String>| {
            let first = calls.fetch_add(1, Ordering::Relaxed) == 0;
            async move {
                tokio::time::sleep(if first {
                    Duration::from_secs(1)
                } else {
                    MS(20)
                })
                .await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        });
    let request = Request::get("http://api.test:8080/items").body(String::new())?;
    let response = svc.oneshot(request).await?;
    println!("-> {}", response.status());
    Ok(())
}

/// Prints a metric: its name and unit, then each point's attributes and
/// value (a histogram's count and sum).
fn print_metric(metric: &Metric) {
    println!("{} ({})", metric.name(), metric.unit());
    match metric.data() {
        AggregatedMetrics::U64(MetricData::Sum(sum)) => {
            for p in sum.data_points() {
                println!("  {{{}}} {}", pairs(p.attributes()), p.value());
            }
        }
        AggregatedMetrics::U64(MetricData::Histogram(h)) => {
            for p in h.data_points() {
                let (count, sum) = (p.count(), p.sum());
                println!("  {{{}}} count {count} sum {sum}", pairs(p.attributes()));
            }
        }
        AggregatedMetrics::F64(MetricData::Histogram(h)) => {
            for p in h.data_points() {
                let (count, sum) = (p.count(), p.sum());
                println!("  {{{}}} count {count} sum {sum:.3}", pairs(p.attributes()));
            }
        }
        AggregatedMetrics::F64(MetricData::Gauge(g)) => {
            for p in g.data_points() {
                println!("  {{{}}} {}", pairs(p.attributes()), p.value());
            }
        }
        AggregatedMetrics::U64(MetricData::Gauge(g)) => {
            for p in g.data_points() {
                println!("  {{{}}} {}", pairs(p.attributes()), p.value());
            }
        }
        other => println!("  {other:?}"),
    }
}

/// Attributes as `key=value, ...`.
fn pairs<'a>(attributes: impl Iterator<Item = &'a KeyValue>) -> String {
    let pairs: Vec<String> = attributes
        .map(|kv| format!("{}={}", kv.key, kv.value))
        .collect();
    pairs.join(", ")
}
