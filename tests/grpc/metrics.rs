//! The call metrics of a hedged gRPC call over loopback.

use super::*;

/// Wired as `HedgePolicy::with_metrics` documents (`Metrics::layer`
/// outermost, around the `GrpcHedgeLayer`'s service) with a client made
/// with its channel's origin, a hedged call's `http_resilience.call.duration`
/// names the same upstream as its attempts' `http.client.request.duration`.
#[tokio::test]
async fn a_hedged_calls_duration_names_the_upstream_of_a_client_with_its_origin() {
    use http_resilience::{
        grpc::GrpcHedgeLayer,
        hedge::{HedgeDelay, HedgePolicy},
        otel::{Metrics, Observed},
    };
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::{
        data::{AggregatedMetrics, MetricData},
        InMemoryMetricExporter, PeriodicReader, SdkMeterProvider,
    };
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    let metrics = Metrics::new(&provider.meter("grpc"));

    let script = Script::new([]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    serve(listener, script.clone());
    let endpoint = Channel::from_shared(format!("http://{addr}")).unwrap();
    let policy = HedgePolicy::new(
        GrpcDecoder::default(),
        HedgeDelay::fixed(Duration::from_secs(5)),
        2,
    )
    .unwrap()
    .with_metrics(&metrics);
    let layer = GrpcHedgeLayer::new(policy)
        .with_authority(endpoint.uri())
        .unwrap();
    let svc = metrics.layer().layer(layer.layer(endpoint.connect_lazy()));
    // NOTE: the call is recorded outside the hedge layer, which puts the
    // endpoint on a path-only request: the client names its origin.
    let mut client = HealthClient::with_origin(svc, endpoint.uri().clone());
    guarded(client.check(check())).await.unwrap();

    provider.force_flush().unwrap();
    let exported = exporter.get_finished_metrics().unwrap();
    let address_of = |wanted: &str| -> Vec<(String, String)> {
        let mut found = Vec::new();
        for metric in exported
            .iter()
            .flat_map(|r| r.scope_metrics())
            .flat_map(|s| s.metrics())
            .filter(|m| m.name() == wanted)
        {
            if let AggregatedMetrics::F64(MetricData::Histogram(h)) = metric.data() {
                for p in h.data_points() {
                    let get = |key: &str| {
                        p.attributes()
                            .find(|kv| kv.key.as_str() == key)
                            .map_or("<none>".to_owned(), |kv| kv.value.to_string())
                    };
                    found.push((get("server.address"), get("server.port")));
                }
            }
        }
        found
    };
    let expected = vec![("127.0.0.1".to_owned(), addr.port().to_string())];
    assert_eq!(address_of("http.client.request.duration"), expected);
    assert_eq!(address_of("http_resilience.call.duration"), expected);
}
