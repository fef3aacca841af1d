//! The circuit breaker in front of a real tonic channel, against a real
//! tonic server whose `Health/Check` answers a status the test sets: the
//! breaker judges gRPC codes with a `GrpcDecoder` (the codes it lists are
//! failures), trips after the configured failures, and the next call fails
//! at once without reaching the server; a server's `grpc-retry-pushback-ms`
//! on the tripping status lengthens the break.
//!
//! What a tonic caller gets for a call the circuit turned away: tonic knows
//! no `CircuitOpen`, so it reads the error as a `Status` with code
//! `UNKNOWN`, the error's text as its message, and the library's
//! `CircuitOpen` as its source. (The gRPC layer maps only deadline overruns
//! to a code of their own, `DEADLINE_EXCEEDED`.)
//!
//! The breaker keys its circuits by the request's authority, and a tonic
//! client built with `new` sends requests whose URI is a path alone (the
//! channel adds its origin below every layer here); `with_origin` gives the
//! requests their server's authority, and each server its own circuit. (The
//! gRPC layers' `with_authority` does the same for clients made with `new`:
//! see `endpoint.rs`.)

use super::{check, guarded};
use http_resilience::{
    breaker::{error::CircuitOpen, BreakerPolicy, CircuitState},
    grpc::GrpcLayer,
    guard::GuardLayer,
    key::{PerKey, UpstreamKey},
    policy::{GrpcBackoff, GrpcDecoder},
    presets, BoxError, ResiliencePolicy,
};
use std::{
    error::Error as _,
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::{net::TcpListener, time::Instant};
use tonic::{transport::Channel, Code, Status};
use tonic_health::pb::{
    health_check_response::ServingStatus,
    health_client::HealthClient,
    health_server::{Health, HealthServer},
    HealthCheckRequest, HealthCheckResponse,
};
use tower::{util::BoxCloneService, Layer, ServiceBuilder};

/// How long a circuit stays open: far longer than the calls that fail fast.
const PAUSE: Duration = Duration::from_secs(1);

/// The most a refused call may take on average (the issue: "well under a
/// millisecond"; this bound only catches a call that waits).
const FAST: Duration = Duration::from_millis(20);

/// A health service that answers every check with the code the test set
/// (`OK` serves) and, if set, a `grpc-retry-pushback-ms`, counting the
/// checks it saw.
#[derive(Debug)]
pub(super) struct Upstream {
    checks: AtomicUsize,
    code: Mutex<Code>,
    pushback: Mutex<Option<&'static str>>,
}

impl Upstream {
    pub(super) fn checks(&self) -> usize {
        self.checks.load(Ordering::SeqCst)
    }

    fn answer(&self, code: Code) {
        *self.code.lock().unwrap() = code;
    }
}

#[tonic::async_trait]
impl Health for Upstream {
    async fn check(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<HealthCheckResponse>, Status> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        match *self.code.lock().unwrap() {
            Code::Ok => Ok(tonic::Response::new(HealthCheckResponse {
                status: ServingStatus::Serving as i32,
            })),
            code => {
                let mut status = Status::new(code, "scripted by the test");
                if let Some(ms) = *self.pushback.lock().unwrap() {
                    let value = ms.parse().unwrap();
                    status
                        .metadata_mut()
                        .insert("grpc-retry-pushback-ms", value);
                }
                Err(status)
            }
        }
    }

    type WatchStream = tokio_stream::Empty<Result<HealthCheckResponse, Status>>;

    async fn watch(
        &self,
        _: tonic::Request<HealthCheckRequest>,
    ) -> Result<tonic::Response<Self::WatchStream>, Status> {
        Err(Status::unimplemented("not served"))
    }
}

/// A tonic server on a fresh loopback port answering `code`, and a lazy
/// channel to it.
pub(super) async fn serve_health(code: Code) -> (Arc<Upstream>, Channel, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = Arc::new(Upstream {
        checks: AtomicUsize::new(0),
        code: Mutex::new(code),
        pushback: Mutex::new(None),
    });
    let server = HealthServer::from_arc(Arc::clone(&service));
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(server)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await
            .unwrap();
    });
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_lazy();
    (service, channel, addr)
}

pub(super) fn origin(addr: SocketAddr) -> http::Uri {
    format!("http://{addr}").parse().unwrap()
}

pub(super) fn key(addr: SocketAddr) -> UpstreamKey {
    UpstreamKey::authority("http", &addr.ip().to_string(), addr.port())
}

/// A breaker that counts `codes` as failures, trips after `failures` of
/// them in a row, and stays open for [`PAUSE`].
pub(super) fn breaker(codes: &[Code], failures: u32) -> BreakerPolicy<GrpcDecoder> {
    BreakerPolicy::new(
        GrpcDecoder::new()
            .with_codes(codes.iter().copied())
            .unwrap(),
    )
    .consecutive_failures(failures)
    .and_then(|p| p.break_duration(PAUSE, PAUSE))
    .and_then(|p| p.break_growth(1.0, 0.0))
    .unwrap()
}

/// What a tonic client takes as its transport, whichever stack is under it.
pub(super) type Transport =
    BoxCloneService<http::Request<tonic::body::Body>, http::Response<tonic::body::Body>, BoxError>;

/// The breaker alone around the channel (the decoders judge `BoxError`,
/// hence the map).
pub(super) fn breaker_over(channel: Channel, breaker: &BreakerPolicy<GrpcDecoder>) -> Transport {
    BoxCloneService::new(
        ServiceBuilder::new()
            .layer(GuardLayer::new(breaker.clone()))
            .map_err(BoxError::from)
            .service(channel),
    )
}

/// gRPC's preset with waits short enough for a test.
fn quick() -> ResiliencePolicy<GrpcDecoder, GrpcBackoff> {
    presets::grpc().map_retry(|retry| {
        retry.map(
            |decoder| decoder,
            |_| {
                GrpcBackoff::new(5, Duration::from_millis(10), Duration::from_millis(40), 2.0)
                    .unwrap()
                    .with_seed(1)
            },
        )
    })
}

/// The status of a call the circuit of `addr` turned away: `UNAVAILABLE`
/// through the `GrpcLayer`, which reads the library's error; `UNKNOWN`,
/// tonic's own reading of an error it does not know, with the breaker alone.
#[track_caller]
fn assert_open_status(status: &Status, addr: SocketAddr, code: Code) -> CircuitOpen {
    assert_eq!(status.code(), code, "{status:?}");
    // NOTE: the gRPC layers' status names the upstream turned away from;
    // a status tonic makes of the error itself has the error's own words.
    let message = match code {
        Code::Unavailable => format!("circuit open for http://{addr}"),
        _ => "circuit open".to_owned(),
    };
    assert_eq!(status.message(), message, "the key is the error's, below");
    let open = status
        .source()
        .and_then(|source| source.downcast_ref::<CircuitOpen>())
        .unwrap_or_else(|| panic!("the library's error as the source: {status:?}"));
    assert_eq!(open.key(), &key(addr));
    open.clone()
}

#[tokio::test]
async fn unavailable_trips_the_circuit_and_the_next_calls_fail_fast_unseen_by_the_server() {
    let (upstream, channel, addr) = serve_health(Code::Unavailable).await;
    let breaker = breaker(&[Code::Unavailable, Code::ResourceExhausted], 3);
    let mut client = HealthClient::with_origin(breaker_over(channel, &breaker), origin(addr));

    for call in 1..=3 {
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable, "call {call}: {status:?}");
        assert_eq!(status.message(), "scripted by the test");
    }
    assert_eq!(upstream.checks(), 3);
    let Some(CircuitState::Open { until }) = breaker.state(&key(addr)) else {
        panic!("open after three UNAVAILABLE: {:?}", breaker.states());
    };

    // Open: calls fail at once and the server sees none of them.
    let start = Instant::now();
    for _ in 0..100 {
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_eq!(
            assert_open_status(&status, addr, Code::Unknown).retry_at(),
            until
        );
    }
    let each = start.elapsed() / 100;
    assert!(each < FAST, "{each:?} per refused call");
    assert_eq!(
        upstream.checks(),
        3,
        "no call reached the server while open"
    );

    // The server recovers; after the break, the probe closes the circuit.
    upstream.answer(Code::Ok);
    tokio::time::sleep_until(until + Duration::from_millis(50)).await;
    let response = guarded(client.check(check())).await.unwrap();
    assert_eq!(response.get_ref().status(), ServingStatus::Serving);
    assert_eq!(upstream.checks(), 4);
    assert_eq!(breaker.state(&key(addr)), Some(CircuitState::Closed));
}

#[tokio::test]
async fn resource_exhausted_counts_as_a_failure_only_when_the_decoder_lists_it() {
    // Listed: two in a row trip the circuit.
    let (upstream, channel, addr) = serve_health(Code::ResourceExhausted).await;
    let listed = breaker(&[Code::Unavailable, Code::ResourceExhausted], 2);
    let mut client = HealthClient::with_origin(breaker_over(channel, &listed), origin(addr));
    for _ in 0..2 {
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    }
    let status = guarded(client.check(check())).await.unwrap_err();
    assert_open_status(&status, addr, Code::Unknown);
    assert_eq!(upstream.checks(), 2);

    // Not listed (`UNAVAILABLE` only): the server answered, which is a
    // success for the breaker, however many times it says so.
    let (upstream, channel, addr) = serve_health(Code::ResourceExhausted).await;
    let unlisted = breaker(&[Code::Unavailable], 2);
    let mut client = HealthClient::with_origin(breaker_over(channel, &unlisted), origin(addr));
    for _ in 0..5 {
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    }
    assert_eq!(upstream.checks(), 5);
    assert_eq!(unlisted.state(&key(addr)), Some(CircuitState::Closed));
}

/// Under retries, in the two ways a gRPC stack can take a breaker: below the
/// `GrpcLayer` (inside its attempt limit, so a hanging server never trips
/// it), and given to the `GrpcLayer`'s policy (`with_guard(breaker)`: between the
/// retry and the attempt limit, where an attempt that times out counts).
#[tokio::test]
async fn a_retried_call_trips_the_circuit_and_its_next_attempt_fails_fast() {
    for form in ["GrpcLayer over a breaker's GuardLayer", "with_breaker"] {
        let (upstream, channel, addr) = serve_health(Code::Unavailable).await;
        let breaker = breaker(&[Code::Unavailable], 3);
        let respond = |response: http::Response<_>| response.map(tonic::body::Body::new);
        let transport: Transport = if form == "with_breaker" {
            let grpc = GrpcLayer::new(quick().with_guard(breaker.clone())).layer(channel);
            BoxCloneService::new(ServiceBuilder::new().map_response(respond).service(grpc))
        } else {
            let grpc = GrpcLayer::new(quick()).layer(breaker_over(channel, &breaker));
            BoxCloneService::new(ServiceBuilder::new().map_response(respond).service(grpc))
        };
        let mut client = HealthClient::with_origin(transport, origin(addr));

        // Three attempts meet UNAVAILABLE and trip the circuit; the fourth
        // is turned away, and its error is the call's outcome.
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_open_status(&status, addr, Code::Unavailable);
        assert_eq!(upstream.checks(), 3, "{form}");

        let start = Instant::now();
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_open_status(&status, addr, Code::Unavailable);
        assert!(
            start.elapsed() < Duration::from_millis(200),
            "{form}: {:?}",
            start.elapsed()
        );
        assert_eq!(upstream.checks(), 3, "{form}: nothing sent while open");
    }
}

#[tokio::test]
async fn tonic_clients_without_an_origin_share_one_circuit_across_servers() {
    let (down, down_channel, down_addr) = serve_health(Code::Unavailable).await;
    let (up, up_channel, up_addr) = serve_health(Code::Ok).await;
    let breaker = breaker(&[Code::Unavailable], 1);

    // `new`: every request's URI is its path; every server has the empty key.
    let mut to_down = HealthClient::new(breaker_over(down_channel.clone(), &breaker));
    let mut to_up = HealthClient::new(breaker_over(up_channel.clone(), &breaker));
    let status = guarded(to_down.check(check())).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    let status = guarded(to_up.check(check())).await.unwrap_err();
    assert_eq!(status.code(), Code::Unknown, "{status:?}");
    let open = status
        .source()
        .and_then(|source| source.downcast_ref::<CircuitOpen>())
        .expect("the library's error as the source");
    assert_eq!(open.key().to_string(), "(no authority)");
    assert_eq!(status.message(), "circuit open");
    assert_eq!(
        (down.checks(), up.checks()),
        (1, 0),
        "the healthy server was cut off"
    );

    // `with_origin`: a circuit per server; the healthy one is untouched.
    let mut to_down =
        HealthClient::with_origin(breaker_over(down_channel, &breaker), origin(down_addr));
    let mut to_up = HealthClient::with_origin(breaker_over(up_channel, &breaker), origin(up_addr));
    let status = guarded(to_down.check(check())).await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(matches!(
        breaker.state(&key(down_addr)),
        Some(CircuitState::Open { .. })
    ));
    let response = guarded(to_up.check(check())).await.unwrap();
    assert_eq!(response.get_ref().status(), ServingStatus::Serving);
    assert_eq!((down.checks(), up.checks()), (2, 1));
    assert_eq!(breaker.state(&key(up_addr)), Some(CircuitState::Closed));
}

#[tokio::test]
async fn a_pushback_from_the_server_lengthens_the_break() {
    let (upstream, channel, addr) = serve_health(Code::Unavailable).await;
    *upstream.pushback.lock().unwrap() = Some("3000");
    // A break of 200 ms of its own, a cap far above the pushback.
    let breaker = BreakerPolicy::new(GrpcDecoder::default())
        .consecutive_failures(1)
        .and_then(|p| p.break_duration(Duration::from_millis(200), Duration::from_secs(10)))
        .and_then(|p| p.break_growth(1.0, 0.0))
        .unwrap();
    let mut client = HealthClient::with_origin(breaker_over(channel, &breaker), origin(addr));

    let before = Instant::now();
    let status = guarded(client.check(check())).await.unwrap_err();
    let after = Instant::now();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(
        status.metadata().get("grpc-retry-pushback-ms").unwrap(),
        "3000"
    );
    let Some(CircuitState::Open { until }) = breaker.state(&key(addr)) else {
        panic!("open: {:?}", breaker.states());
    };
    assert!(
        until >= before + Duration::from_secs(3) && until <= after + Duration::from_secs(4),
        "open for {:?}",
        until - before
    );

    // Past the breaker's own 200 ms, the circuit is still open.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let status = guarded(client.check(check())).await.unwrap_err();
    assert_open_status(&status, addr, Code::Unknown);
    assert_eq!(upstream.checks(), 1);
}
