//! The stacks with telemetry on, for the `instructions` bench alone.

use crate::support::{retry_503, Req, ATTEMPT_LIMIT, CALL_LIMIT};
use http::Response;
use http_resilience::{deadline::body::DeadlineBody, otel::Metrics, ResiliencePolicy};
use tower::Service;

/// `ours_fused` with OpenTelemetry metrics on: the listener on every
/// attempt and event, and the call layer outermost, into the SDK (a periodic
/// reader whose first export is a minute away, so that only the recording
/// is measured).
pub(crate) fn ours_fused_metrics<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<DeadlineBody<T>>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>> + Clone,
    S::Error: Into<tower::BoxError>,
{
    use opentelemetry::metrics::MeterProvider as _;
    let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(
            opentelemetry_sdk::metrics::PeriodicReader::builder(
                opentelemetry_sdk::metrics::InMemoryMetricExporter::default(),
            )
            .build(),
        )
        .build();
    let metrics = Metrics::new(&provider.meter("bench"));
    // NOTE: the provider lives as long as the bench process.
    std::mem::forget(provider);
    let retry = retry_503().map_options(|o| o.with_listener(metrics.clone()));
    let resilience =
        ResiliencePolicy::new(CALL_LIMIT, ATTEMPT_LIMIT, retry).expect("the limits fit together");
    let stack = tower::Layer::layer(&resilience.layer(), inner);
    tower::Layer::layer(&metrics.layer(), stack)
}

/// Installs, for the whole process, a subscriber that wants every span and
/// event at `DEBUG` (tracing-subscriber's registry, which keeps each span's
/// data and nothing more): the cost of the spans when they are on.
pub(crate) fn trace_everything() {
    use tracing_subscriber::layer::SubscriberExt as _;
    let subscriber =
        tracing_subscriber::registry().with(tracing_subscriber::filter::LevelFilter::DEBUG);
    tracing::subscriber::set_global_default(subscriber).expect("no subscriber yet");
}
