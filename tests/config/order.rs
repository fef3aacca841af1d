//! The order of a client's guards as the configuration builds them, seen
//! from outside on the paused clock: the rate limit comes before overload
//! control, so that a call waiting for its slot holds no slot of overload
//! control.

use http::{Request, Response};
use http_resilience::key::PerKey;
use http_resilience::{config::ClientsConfig, key::UpstreamKey, FailureKind};
use std::{convert::Infallible, time::Duration};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

fn request() -> Request<String> {
    Request::get("http://api.test/items")
        .body(String::new())
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_call_waiting_for_its_rate_limit_slot_holds_no_slot_of_overload_control() {
    // One call a second, and one call in flight with no queue.
    let config = ClientsConfig::from_toml_str(
        r#"
        [clients.api]
        deadline = "10s"
        attempt_timeout = "5s"

        [clients.api.rate_limit]
        calls = 1
        per = "1s"

        [clients.api.overload]
        max_in_flight = 1
        queue = 0
        "#,
    )
    .unwrap();
    let overload = config.policy("api").unwrap().guard().overload.clone();
    let overload = overload.expect("the client's overload control");
    let svc = ServiceBuilder::new()
        .layer(config.layer("api").unwrap())
        .service_fn(|_: Request<String>| async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        });
    let start = Instant::now();
    let first = tokio::spawn(svc.clone().oneshot(request()));
    let second = tokio::spawn(svc.clone().oneshot(request()));

    // The first is in flight; the second waits for its rate limit slot, a
    // second away, without taking the only slot of overload control.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let key = UpstreamKey::authority("http", "api.test", 80);
    assert_eq!(overload.state(&key).unwrap().in_flight, 1);
    first.await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        overload.state(&key).unwrap().in_flight,
        0,
        "waiting holds no slot"
    );

    // Its slot comes, and it takes the slot of overload control then.
    match second.await.unwrap() {
        Ok(response) => assert_eq!(response.status(), 200),
        Err(err) => panic!("{:?}: {err}", FailureKind::of(&*err)),
    }
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
}
