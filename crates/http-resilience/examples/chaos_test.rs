//! A service's own tests, made flaky on purpose: a shop whose prices come
//! from a catalog service, tested while fault injection slows the catalog
//! down, sheds its load and refuses its connections.
//!
//! ```text
//! cargo run -p http-resilience --example chaos_test
//! ```
//!
//! The shop (an axum service) asks the catalog for a price through one
//! client stack, outermost first:
//!
//! ```text
//! FallbackLayer (the last price seen, for a read that accepts it)
//!   -> ResiliencePolicy::layer() (1 s in all, 150 ms an attempt, transient failures retried twice)
//!     -> GuardLayer((latency, shedding, refusing)) (fault injection, off unless switched on)
//!       -> hyper-util client
//! ```
//!
//! The faults stand for the catalog: below the retry, every attempt may be
//! slowed down (a fifth of them, by 20 to 200 ms: now and then past the
//! attempt's limit), answered with a 503 in the catalog's place (a third),
//! or refused (a tenth), each drawn from a seed of its own. One
//! [`FaultSwitch`] turns them all on and off: in production it stays off
//! and costs one atomic load per attempt; a test turns it on.
//!
//! `main` runs the shop's tests, each a plain function that panics when the
//! shop misbehaves, against a catalog and a shop on `127.0.0.1:0`, and
//! prints what the faults did:
//!
//! - with the switch off, every price is fresh and no fault is counted;
//! - with it on, every price still comes back (`200`), fresh after the
//!   retries or the last price seen; none is a `5xx`;
//! - with it on, a write (a `POST`, which does not accept a fallback, and
//!   is not sent again after a 503) gets the failure as it is.

use axum::{
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::get,
    Router,
};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use http_resilience::{
    fallback::{AcceptFallback, FallbackLayer, FallbackPolicy, FellBack},
    fault::{Fault, FaultPolicy, FaultSwitch, Latency},
    guard::GuardLayer,
    key::PerKey,
    policy::{FixedDelay, TransientDecoder},
    retry::RetryPolicy,
    transport, BoxError, FailureKind, ResiliencePolicy,
};
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::net::TcpListener;
use tower::{util::BoxCloneSyncService, ServiceBuilder, ServiceExt};

/// The body the faults answer with below the retry: the client's own can
/// only come from a connection, so it is boxed.
type Boxed = UnsyncBoxBody<Bytes, BoxError>;

/// The catalog client every handler of the shop shares.
type Catalog = BoxCloneSyncService<Request<Full<Bytes>>, Response<Boxed>, BoxError>;

/// The shop's state.
#[derive(Clone)]
struct Shop {
    catalog: Catalog,
    catalog_addr: SocketAddr,
    /// The last price the catalog gave, the fallback's answer.
    last_price: Arc<Mutex<Bytes>>,
}

/// The faults that stand for a flaky catalog, and the switch that turns
/// them on.
struct Chaos {
    switch: FaultSwitch,
    latency: FaultPolicy,
    shedding: FaultPolicy,
    refusing: FaultPolicy,
}

impl Chaos {
    fn new() -> Result<Self, BoxError> {
        let switch = FaultSwitch::new(false);
        let ms = Duration::from_millis;
        let slow = Fault::latency(Latency::uniform(ms(20), ms(200))?);
        Ok(Self {
            latency: FaultPolicy::at_rate(0.2, slow)?
                .with_seed(1)
                .with_switch(switch.clone()),
            shedding: FaultPolicy::at_rate(0.33, Fault::unavailable(Duration::ZERO))?
                .with_seed(2)
                .with_switch(switch.clone()),
            refusing: FaultPolicy::at_rate(0.1, Fault::connect_refused())?
                .with_seed(3)
                .with_switch(switch.clone()),
            switch,
        })
    }

    /// What each policy has injected so far.
    fn injected(&self) -> [u64; 3] {
        [&self.latency, &self.shedding, &self.refusing].map(|policy| {
            policy
                .states()
                .iter()
                .map(|(_, state)| state.injected)
                .sum()
        })
    }
}

/// The shop's client of the catalog: the last price seen for a read that
/// falls back, the catalog's limits and retries, the faults, the client.
fn catalog_client(chaos: &Chaos, last_price: Arc<Mutex<Bytes>>) -> Result<Catalog, BoxError> {
    let fallback = FallbackPolicy::new(move |_| Response::new(last_price.lock().unwrap().clone()))
        .on(FailureKind::Deadline)
        .on(FailureKind::ConnectRefused)
        .on(FailureKind::AttemptTimeout)
        .on_status(StatusCode::SERVICE_UNAVAILABLE);
    let retry = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 2),
    );
    let limits = ResiliencePolicy::new(Duration::from_secs(1), Duration::from_millis(150), retry)?;
    let faults = (
        chaos.latency.clone(),
        (chaos.shedding.clone(), chaos.refusing.clone()),
    );
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_millis(500))
        .build_http::<Full<Bytes>>()?;
    Ok(ServiceBuilder::new()
        .boxed_clone_sync()
        .map_response(|r: Response<_>| r.map(BodyExt::boxed_unsync))
        .layer(FallbackLayer::new(fallback))
        .layer(limits.layer())
        .layer(GuardLayer::new(faults))
        .map_response(|r: Response<_>| r.map(BodyExt::boxed_unsync))
        .service(client))
}

/// What a handler of the shop answers.
type Answer = (StatusCode, HeaderMap, String);

/// `GET /price/{item}`: the catalog's price, or the last one seen.
async fn price(State(shop): State<Shop>, Path(item): Path<String>) -> Answer {
    let uri = format!("http://{}/price/{item}", shop.catalog_addr);
    let request = Request::get(uri)
        .extension(AcceptFallback)
        .body(Full::default());
    let outcome = shop
        .catalog
        .oneshot(request.expect("a valid request"))
        .await;
    let failed = |what: String| (StatusCode::BAD_GATEWAY, HeaderMap::new(), what);
    let response = match outcome {
        Ok(response) if response.status().is_success() => response,
        Ok(response) => return failed(response.status().to_string()),
        Err(err) => return failed(FailureKind::of(&err).to_string()),
    };
    let cached = response.extensions().get::<FellBack>().is_some();
    let Ok(body) = response.into_body().collect().await else {
        return failed(String::from("the body broke off"));
    };
    let body = body.to_bytes();
    if !cached {
        *shop.last_price.lock().unwrap() = body.clone();
    }
    let mut headers = HeaderMap::new();
    let source = if cached { "cached" } else { "fresh" };
    headers.insert("x-price-source", source.parse().expect("a header value"));
    (
        StatusCode::OK,
        headers,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

/// `POST /price/{item}`: a write through the catalog, which never accepts a
/// fallback.
async fn set_price(State(shop): State<Shop>, Path(item): Path<String>) -> impl IntoResponse {
    let uri = format!("http://{}/price/{item}", shop.catalog_addr);
    let request = Request::post(uri).body(Full::new(Bytes::from("43")));
    match shop
        .catalog
        .oneshot(request.expect("a valid request"))
        .await
    {
        Ok(response) => (response.status(), String::new()),
        Err(err) => (StatusCode::BAD_GATEWAY, FailureKind::of(&err).to_string()),
    }
}

/// Serves `router` on a loopback port of its own.
async fn serve(router: Router) -> Result<SocketAddr, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, router).await });
    Ok(addr)
}

/// What a test saw of the shop's answers.
#[derive(Debug, Default)]
struct Seen {
    fresh: u32,
    cached: u32,
    failed: u32,
}

/// Asks the shop for `n` prices.
async fn ask(shop: SocketAddr, n: u32) -> Result<Seen, BoxError> {
    let client = plain_client();
    let mut seen = Seen::default();
    for i in 0..n {
        let uri = format!("http://{shop}/price/item-{}", i % 7).parse()?;
        let response = client
            .clone()
            .oneshot(Request::get::<http::Uri>(uri).body(Full::default())?)
            .await?;
        match (response.status(), response.headers().get("x-price-source")) {
            (StatusCode::OK, Some(source)) if source == "cached" => seen.cached += 1,
            (StatusCode::OK, _) => seen.fresh += 1,
            _ => seen.failed += 1,
        }
    }
    Ok(seen)
}

/// A plain client for the tests, outside the shop.
fn plain_client() -> transport::HttpClient<Full<Bytes>> {
    transport::Builder::new().build_http().expect("a client")
}

/// Every price is fresh while the switch is off, and nothing is injected.
async fn prices_are_fresh_without_chaos(shop: SocketAddr, chaos: &Chaos) -> Result<(), BoxError> {
    chaos.switch.turn_off();
    let seen = ask(shop, 50).await?;
    println!("switch off: {seen:?}, injected {:?}", chaos.injected());
    assert_eq!((seen.fresh, seen.cached, seen.failed), (50, 0, 0));
    assert_eq!(chaos.injected(), [0, 0, 0]);
    Ok(())
}

/// With the catalog slow, shedding load and refusing connections, every
/// price still comes back: fresh after the retries, or the last one seen.
async fn prices_survive_a_flaky_catalog(shop: SocketAddr, chaos: &Chaos) -> Result<(), BoxError> {
    chaos.switch.turn_on();
    let seen = ask(shop, 100).await?;
    let [slowed, shed, refused] = chaos.injected();
    println!("switch on:  {seen:?}, slowed {slowed}, shed {shed}, refused {refused}");
    assert_eq!(seen.failed, 0, "no price request failed");
    assert_eq!(seen.fresh + seen.cached, 100);
    assert!(seen.fresh > seen.cached, "the retries saved most of them");
    assert!(
        shed > 0 && refused > 0 && slowed > 0,
        "the faults were injected"
    );
    Ok(())
}

/// A write does not accept a fallback, and a `POST` is not sent again after
/// a 503: the shop reports the failure instead of pretending it went
/// through.
async fn a_write_gets_the_failure_itself(shop: SocketAddr, chaos: &Chaos) -> Result<(), BoxError> {
    chaos.switch.turn_on();
    let client = plain_client();
    let mut failures = 0;
    for _ in 0..30 {
        let uri: http::Uri = format!("http://{shop}/price/item-1").parse()?;
        let request = Request::post(uri).body(Full::default())?;
        let response = client.clone().oneshot(request).await?;
        failures += u32::from(!response.status().is_success());
    }
    chaos.switch.turn_off();
    println!("writes:     {failures} of 30 reported failed, none answered from a cache");
    assert!(failures > 0, "some writes failed, and the shop said so");
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let catalog = Router::new().route(
        "/price/{item}",
        get(|| async { "42" }).post(|| async { StatusCode::NO_CONTENT }),
    );
    let catalog_addr = serve(catalog).await?;
    let chaos = Chaos::new()?;
    let last_price = Arc::new(Mutex::new(Bytes::from_static(b"42")));
    let shop = Shop {
        catalog: catalog_client(&chaos, Arc::clone(&last_price))?,
        catalog_addr,
        last_price,
    };
    let router = Router::new()
        .route("/price/{item}", get(price).post(set_price))
        .with_state(shop);
    let shop = serve(router).await?;

    prices_are_fresh_without_chaos(shop, &chaos).await?;
    prices_survive_a_flaky_catalog(shop, &chaos).await?;
    a_write_gets_the_failure_itself(shop, &chaos).await?;
    println!("the shop's tests pass with the catalog made flaky");
    Ok(())
}
