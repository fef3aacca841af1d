//! The channel's endpoint given to the gRPC layers (`with_authority`), with
//! tonic clients made the usual way, `HealthClient::new(layer.layer(channel))`,
//! which send every call with its path alone: two servers on two loopback
//! ports, one answering `UNAVAILABLE`, behind one breaker and one overload
//! control shared by both stacks. Each endpoint gets a circuit and slots of
//! its own, so the failing server trips only its own circuit, the healthy
//! one's calls go on, and the errors name the endpoint they are about.
//!
//! Every form is checked: `GrpcLayer` (the breaker and overload control in
//! its policy), `GrpcHedgeLayer` and `ServiceConfigLayer` (both below the
//! layer, where they see the URI the layer filled in).

use super::{
    breaker::{breaker, key, origin, serve_health, Transport},
    check, guarded, quick, serve, Script, Step,
};
use http_resilience::{
    breaker::{error::CircuitOpen, BreakerPolicy, CircuitState},
    grpc::{GrpcHedgeLayer, GrpcLayer, InvalidEndpoint, ServiceConfigLayer},
    guard::GuardLayer,
    hedge::{HedgeDelay, HedgePolicy},
    key::PerKey,
    overload::{error::Overloaded, OverloadPolicy},
    policy::GrpcDecoder,
    BoxError,
};
use std::{error::Error as _, net::SocketAddr, time::Duration};
use tokio::net::TcpListener;
use tonic::{transport::Channel, Code, Status};
use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient};
use tower::{util::BoxCloneService, Layer, ServiceBuilder};

/// The three gRPC layers.
#[derive(Debug, Clone, Copy)]
enum Form {
    /// `GrpcLayer`, the breaker and overload control in its policy.
    Retries,
    /// `GrpcHedgeLayer` over the breaker and overload control.
    Hedging,
    /// `ServiceConfigLayer` (a retry policy for the health service) over
    /// the breaker and overload control.
    ServiceConfig,
}

const FORMS: [Form; 3] = [Form::Retries, Form::Hedging, Form::ServiceConfig];

/// A retry policy for the health service, with waits short enough for a
/// test.
const SERVICE_CONFIG: &str = r#"{"methodConfig": [{
    "name": [{"service": "grpc.health.v1.Health"}],
    "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.01s", "maxBackoff": "0.04s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
}]}"#;

/// The stack of `form` around `channel`, given `endpoint` as its channel's
/// endpoint, with `breaker` and `overload` (shared by every stack made with
/// them).
fn stack(
    form: Form,
    channel: Channel,
    endpoint: &http::Uri,
    breaker: &BreakerPolicy<GrpcDecoder>,
    overload: &OverloadPolicy,
) -> Transport {
    let respond = |response: http::Response<_>| response.map(tonic::body::Body::new);
    let guarded = || {
        BoxCloneService::new(
            ServiceBuilder::new()
                .layer(GuardLayer::new(overload.clone()))
                .layer(GuardLayer::new(breaker.clone()))
                .map_err(BoxError::from)
                .service(channel.clone()),
        )
    };
    match form {
        Form::Retries => {
            let policy = quick().with_guard((overload.clone(), breaker.clone()));
            let layer = GrpcLayer::new(policy).with_authority(endpoint).unwrap();
            let grpc = layer.layer(channel.clone());
            BoxCloneService::new(ServiceBuilder::new().map_response(respond).service(grpc))
        }
        Form::Hedging => {
            let delay = HedgeDelay::fixed(Duration::from_millis(50));
            let policy = HedgePolicy::new(GrpcDecoder::default(), delay, 2).unwrap();
            let layer = GrpcHedgeLayer::new(policy)
                .with_deadline(Duration::from_secs(10))
                .with_authority(endpoint)
                .unwrap();
            let grpc = layer.layer(guarded());
            BoxCloneService::new(ServiceBuilder::new().map_response(respond).service(grpc))
        }
        Form::ServiceConfig => {
            let layer = ServiceConfigLayer::from_json(SERVICE_CONFIG)
                .unwrap()
                .with_authority(endpoint)
                .unwrap();
            let grpc = layer.layer(guarded());
            BoxCloneService::new(ServiceBuilder::new().map_response(respond).service(grpc))
        }
    }
}

/// The library's error under a status a call turned away ended with.
fn cause<E: std::error::Error + 'static>(status: &Status) -> Option<&E> {
    let mut source = status.source();
    while let Some(err) = source {
        if let Some(found) = err.downcast_ref::<E>() {
            return Some(found);
        }
        source = err.source();
    }
    None
}

/// Calls `client` until a call is turned away by an open circuit (at most
/// five calls, each of a few attempts), and returns that call's status.
async fn until_open(client: &mut HealthClient<Transport>, form: Form) -> Status {
    for _ in 0..5 {
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "{form:?}: {status:?}");
        if cause::<CircuitOpen>(&status).is_some() {
            return status;
        }
    }
    panic!("{form:?}: the circuit never opened");
}

#[tokio::test]
async fn a_failing_endpoint_trips_only_its_own_circuit() {
    for form in FORMS {
        let (down, down_channel, down_addr) = serve_health(Code::Unavailable).await;
        let (up, up_channel, up_addr) = serve_health(Code::Ok).await;
        let breaker = breaker(&[Code::Unavailable], 2);
        let overload = OverloadPolicy::bulkhead(8).unwrap();
        let to = |channel, addr| {
            let transport = stack(form, channel, &origin(addr), &breaker, &overload);
            HealthClient::new(transport)
        };
        let mut to_down = to(down_channel, down_addr);
        let mut to_up = to(up_channel, up_addr);

        let status = until_open(&mut to_down, form).await;
        let open = cause::<CircuitOpen>(&status).unwrap();
        assert_eq!(open.key(), &key(down_addr), "{form:?}");
        assert_eq!(open.key().to_string(), format!("http://{down_addr}"));
        assert!(
            status.message().contains(&down_addr.to_string()),
            "{form:?}: the message names the endpoint: {status:?}"
        );
        let seen = down.checks();

        // The healthy server's calls go on, through the same breaker.
        for _ in 0..3 {
            let response = guarded(to_up.check(check())).await;
            let response = response.unwrap_or_else(|status| panic!("{form:?}: {status:?}"));
            assert_eq!(response.get_ref().status(), ServingStatus::Serving);
        }
        assert_eq!(up.checks(), 3, "{form:?}");
        assert_eq!(down.checks(), seen, "{form:?}: nothing sent while open");
        assert!(
            matches!(
                breaker.state(&key(down_addr)),
                Some(CircuitState::Open { .. })
            ),
            "{form:?}: {:?}",
            breaker.states()
        );
        assert_eq!(breaker.state(&key(up_addr)), Some(CircuitState::Closed));
        let mut keys: Vec<_> = overload.states().into_iter().map(|(key, _)| key).collect();
        keys.sort_by_key(ToString::to_string);
        let mut expected = vec![key(down_addr), key(up_addr)];
        expected.sort_by_key(ToString::to_string);
        assert_eq!(keys, expected, "{form:?}: overload control per endpoint");
    }
}

/// A server that never answers its first call and serves the others, and
/// its address.
async fn silent_once() -> (std::sync::Arc<Script>, Channel, SocketAddr) {
    let script = Script::new([Step::Silent]);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    serve(listener, script.clone());
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    (script, channel, addr)
}

/// A bulkhead of one call shared by two stacks: a call that hangs holds the
/// slot of its own endpoint only. (Not for hedging: a hedge of the call that
/// hangs would want a second slot of its endpoint.)
#[tokio::test]
async fn a_call_in_flight_holds_only_its_own_endpoints_slot() {
    for form in [Form::Retries, Form::ServiceConfig] {
        let (script, held_channel, held_addr) = silent_once().await;
        let (up, up_channel, up_addr) = serve_health(Code::Ok).await;
        let breaker = breaker(&[Code::Unavailable], 2);
        let overload = OverloadPolicy::bulkhead(1).unwrap();
        let held = stack(form, held_channel, &origin(held_addr), &breaker, &overload);
        let mut to_held = HealthClient::new(held);
        let mut to_up = HealthClient::new(stack(
            form,
            up_channel,
            &origin(up_addr),
            &breaker,
            &overload,
        ));

        let mut holder = to_held.clone();
        let hanging = holder.check(check());
        tokio::pin!(hanging);
        let others = async {
            while script.seen().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            // The other endpoint has a slot of its own.
            let response = to_up.check(check()).await;
            let response = response.unwrap_or_else(|status| panic!("{form:?}: {status:?}"));
            assert_eq!(response.get_ref().status(), ServingStatus::Serving);
            assert_eq!(up.checks(), 1, "{form:?}");

            // A second call to the held endpoint is turned away, naming it.
            let status = to_held.check(check()).await.unwrap_err();
            assert_eq!(status.code(), Code::Unavailable, "{form:?}: {status:?}");
            let overloaded = cause::<Overloaded>(&status)
                .unwrap_or_else(|| panic!("{form:?}: turned away: {status:?}"));
            assert_eq!(overloaded.key(), &key(held_addr), "{form:?}");
            assert_eq!(script.seen().len(), 1, "{form:?}: never sent");
        };
        guarded(async {
            tokio::select! {
                outcome = &mut hanging => panic!("{form:?}: the silent call ended: {outcome:?}"),
                () = others => {}
            }
        })
        .await;
    }
}

/// A client made with `with_origin` names its upstream in every URI: the
/// layer's endpoint does not replace it.
#[tokio::test]
async fn a_call_that_names_its_upstream_keeps_it() {
    let (up, channel, addr) = serve_health(Code::Ok).await;
    let breaker = breaker(&[Code::Unavailable], 2);
    let overload = OverloadPolicy::bulkhead(8).unwrap();
    let elsewhere: http::Uri = "http://other.test:50051".parse().unwrap();
    for form in FORMS {
        let transport = stack(form, channel.clone(), &elsewhere, &breaker, &overload);
        let mut client = HealthClient::with_origin(transport, origin(addr));
        let response = guarded(client.check(check())).await;
        let response = response.unwrap_or_else(|status| panic!("{form:?}: {status:?}"));
        assert_eq!(response.get_ref().status(), ServingStatus::Serving);
    }
    assert_eq!(up.checks(), 3);
    let keys: Vec<_> = breaker.states().into_iter().map(|(key, _)| key).collect();
    assert_eq!(keys, [key(addr)]);
    let keys: Vec<_> = overload.states().into_iter().map(|(key, _)| key).collect();
    assert_eq!(keys, [key(addr)]);
}

#[test]
fn an_endpoint_without_scheme_or_authority_is_refused() {
    for uri in ["/grpc.health.v1.Health/Check", "127.0.0.1:50051"] {
        let uri: http::Uri = uri.parse().unwrap();
        let expected = InvalidEndpoint::new(uri.clone());
        let grpc = GrpcLayer::new(quick()).with_authority(&uri).unwrap_err();
        assert_eq!(grpc, expected);
        let delay = HedgeDelay::fixed(Duration::from_millis(50));
        let policy = HedgePolicy::new(GrpcDecoder::default(), delay, 2).unwrap();
        let hedge = GrpcHedgeLayer::new(policy)
            .with_authority(&uri)
            .unwrap_err();
        assert_eq!(hedge, expected);
        let config = ServiceConfigLayer::from_json(SERVICE_CONFIG).unwrap();
        assert_eq!(config.with_authority(&uri).unwrap_err(), expected);
        assert_eq!(
            expected.to_string(),
            "an endpoint needs a scheme and an authority"
        );
    }
}
