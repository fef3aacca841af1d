//! Calls one variant of the `overhead` bench a given number of times, and
//! nothing else, so that an instruction counter can tell what one call costs
//! without the noise of a shared machine's clock.
//!
//! Run it under callgrind twice, with `N` calls and with none, and divide the
//! difference by `N`; `BENCHMARKS.md` has the loop over the variants:
//!
//! ```text
//! cargo bench -p http-resilience-bench --bench instructions --no-run
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/deps/instructions-<hash> ours 20000
//! ```
//!
//! Variants: `bare`, `extension` (bare + deadline extension), `copy` (bare +
//! the request copy a retry needs), `floor` (both), `tower`, `ours`,
//! `ours-combined`, `breaker` (bare + our closed circuit breaker),
//! `tower-resilience-breaker` (bare + tower-resilience's, closed),
//! `bulkhead`, `adaptive` and `throttle` (bare + overload control far from
//! its limit) and `ours-combined-bulkhead`, `no-guard` (bare + a guard
//! layer of no guard, `()`: the layer's own cost), `faults-none`,
//! `faults-off` and `faults-on` (bare + a guard layer of an optional fault
//! injection policy: none at run time, one switched off, one on at a rate of
//! 0, every attempt counted and drawn for and none answered),
//! `ours-combined-faults-none` and `-off` (the same among the combined
//! service's guards), `rate-limit` (bare + our rate
//! limit under its limit, the key known), `governor` and `governor-keyed`
//! (bare + governor's `RateLimiter::check`, direct, or keyed by authority)
//! and `tower-rate-limit` (bare + tower's `RateLimit`), as in the
//! `overhead` bench, each answered at once in
//! process; `flaky-hand`, `flaky-tower`, `flaky-ours` and
//! `flaky-ours-combined`, in process too, each call meeting 503, 503 and
//! then 200 (`hand` the loop of up to three calls, no timer, no copy); and the same over loopback HTTP/1.1, `net-bare` (hyper-util's
//! client), `net-floor`, `net-tower`, `net-ours` and `net-ours-combined`,
//! against the `loopback` bench's server in a child process (which callgrind
//! does not follow, so only the caller's work is counted). `net-floor` is what
//! any stack with our semantics must do around the client: copy the request
//! for a retry, record the deadline extension and run the attempt under one
//! `tokio::time::timeout` and the call under another. `net503-hand`,
//! `net503-floor`, `net503-tower`, `net503-ours` and `net503-ours-combined`
//! make calls that meet 503, 503 and then 200, at zero backoff (`hand` is up
//! to three raw calls, each body read; `floor` the same with a copy of each
//! request that may be retried, the deadline on every attempt, the two
//! timeouts, and each 503 dropped unread, as the retry layers do). Every
//! network variant first makes `WARM_UP` calls, in the
//! zero-call run too, so that the connection and the pool are set up before
//! the counted calls.

// NOTE: the shared modules also serve benches that use more of them.
#[path = "support/net.rs"]
#[allow(dead_code)]
mod net;
#[path = "support/rate_limit.rs"]
mod rate_limit;
#[path = "support/server.rs"]
#[allow(dead_code)]
mod server;
#[allow(dead_code)]
mod support;
#[path = "support/telemetry.rs"]
mod telemetry;

use bytes::Bytes;
use http::{Response, StatusCode, Uri};
use http_body::Body;
use http_body_util::Full;
use http_resilience::overload::{AdaptiveLimit, OverloadPolicy, Throttle};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use net::{bare_client as client, request as get};
use std::{
    hint::black_box,
    process::ExitCode,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
};
use support::{
    call, faults, flaky_service, ok_service, ours, ours_fused, ours_fused_breaker,
    ours_fused_bulkhead, ours_fused_faults, tower_nesting, with_breaker, with_deadline_extension,
    with_faults, with_no_guard, with_overload, with_request_copy, with_tower_resilience_breaker,
    Req, ATTEMPT_LIMIT, CALL_LIMIT, RETRIES,
};
use telemetry::{ours_fused_metrics, trace_everything};
use tower::{BoxError, Service};

/// Requests each network variant makes before the counted ones.
const WARM_UP: u64 = 64;

/// Makes `calls` calls of `svc`, one after another, each answered at once.
async fn run<S>(mut svc: S, calls: u64)
where
    S: Service<Req>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..calls {
        black_box(call(&mut svc).await.expect("the call succeeds"));
    }
}

/// Makes `calls` calls of `svc` over `flaky_service`, each meeting 503, 503
/// and then 200 (`counter` reset before each).
async fn run_flaky<S, T>(mut svc: S, counter: &AtomicU32, calls: u64)
where
    S: Service<Req, Response = Response<T>>,
    S::Error: std::fmt::Debug,
{
    for _ in 0..calls {
        counter.store(0, Ordering::Relaxed);
        let response = call(&mut svc).await.expect("the call succeeds");
        assert_eq!(response.status(), StatusCode::OK, "503, 503, then 200");
        black_box(response);
    }
}

/// The in-process retry path, variant `variant` (`flaky-` stripped): `hand`
/// (the hand-written loop of up to three calls), `tower`, `ours` or
/// `ours-combined`.
async fn flaky(variant: &str, calls: u64) -> Result<(), BoxError> {
    let counter = Arc::new(AtomicU32::new(0));
    let inner = flaky_service(Arc::clone(&counter));
    match variant {
        "hand" => {
            let mut svc = inner;
            for _ in 0..calls {
                counter.store(0, Ordering::Relaxed);
                let response = support::hand_loop(&mut svc)
                    .await
                    .expect("the call succeeds");
                assert_eq!(response.status(), StatusCode::OK, "503, 503, then 200");
                black_box(response);
            }
        }
        "tower" => run_flaky(tower_nesting(inner), &counter, calls).await,
        "ours" => run_flaky(ours(inner), &counter, calls).await,
        "ours-combined" => run_flaky(ours_fused(inner), &counter, calls).await,
        _ => return Err(format!("unknown in-process retry variant {variant:?}").into()),
    }
    Ok(())
}

/// One call through `svc`, the body read to the end; it must end in a 200.
async fn exchange<S, T>(svc: &mut S, uri: &Uri, flaky: Option<u64>) -> Result<(), BoxError>
where
    S: Service<Req, Response = Response<T>>,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    ok(net::exchange(svc, get(uri, flaky)).await?)
}

fn ok(status: StatusCode) -> Result<(), BoxError> {
    match status {
        StatusCode::OK => Ok(()),
        other => Err(format!("the call ended in {other}").into()),
    }
}

/// A hand loop on `client` (see [`net::hand_loop`]), each 503 read; with
/// `floor`, the floor of our semantics instead (the copy, the deadline on every
/// attempt, the two timeouts, each 503 dropped unread). It must end in a 200.
async fn hand_loop(
    client: &mut Client<HttpConnector, Full<Bytes>>,
    uri: &Uri,
    flaky: Option<u64>,
    floor: bool,
) -> Result<(), BoxError> {
    let how = net::HandLoop {
        retries: RETRIES,
        read_503_bodies: !floor,
        limits: floor.then_some((ATTEMPT_LIMIT, CALL_LIMIT)),
    };
    ok(net::hand_loop(client, uri, flaky, how).await?)
}

/// Makes `WARM_UP` and then `calls` calls to the server, one after another,
/// through the variant named `variant` (`bare`, `hand`, `floor`, `tower` or
/// `ours`); with `flaky`, each call meets 503, 503 and then 200.
async fn run_net(variant: &str, uri: &Uri, calls: u64, flaky: bool) -> Result<(), BoxError> {
    let mut ids = (1..).map(|id| flaky.then_some(id));
    macro_rules! calls {
        (|$id:ident| $call:expr) => {{
            for $id in ids.by_ref().take((WARM_UP + calls) as usize) {
                $call.await?;
            }
        }};
    }
    match variant {
        "bare" | "hand" => {
            let mut client = client();
            calls!(|id| hand_loop(&mut client, uri, id, false))
        }
        "floor" => {
            let mut client = client();
            calls!(|id| hand_loop(&mut client, uri, id, true))
        }
        "tower" => {
            let mut svc = tower_nesting(client());
            calls!(|id| exchange(&mut svc, uri, id))
        }
        "ours" => {
            let mut svc = ours(client());
            calls!(|id| exchange(&mut svc, uri, id))
        }
        "ours-combined" => {
            let mut svc = ours_fused(client());
            calls!(|id| exchange(&mut svc, uri, id))
        }
        "ours-combined-breaker" => {
            let mut svc = ours_fused_breaker(client());
            calls!(|id| exchange(&mut svc, uri, id))
        }
        _ => return Err(format!("unknown network variant {variant:?}").into()),
    }
    Ok(())
}

fn main() -> ExitCode {
    server::serve_if_asked();
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let (Some(variant), Some(Ok(calls))) = (args.next(), args.next().map(|n| n.parse::<u64>()))
    else {
        // NOTE: `cargo bench` with no arguments runs every bench; this one
        // then only says how to use it.
        eprintln!(
            "usage: instructions <variant> <calls>, the variant one of bare, extension, \
             copy, floor, tower, ours, ours-spans, ours-combined, ours-combined-breaker, \
             flaky-{{hand,tower,ours,ours-combined}}, \
             ours-combined-bulkhead, ours-combined-faults-{{none,off}}, ours-combined-spans, \
             ours-combined-metrics, breaker, bulkhead, adaptive, throttle, no-guard, \
             faults-{{none,off,on}}, rate-limit, governor, governor-keyed, tower-rate-limit, \
             tower-resilience-breaker, net-{{bare,floor,tower,ours,ours-combined,ours-combined-breaker}}, \
             net503-{{hand,floor,tower,ours,ours-combined,ours-combined-breaker}}; \
             an in-process variant ending in -headers sends three headers \
             (see BENCHMARKS.md)"
        );
        return ExitCode::SUCCESS;
    };
    // NOTE: `-headers` after an in-process variant sends a request that carries
    // three headers (`bare-headers` is its baseline).
    let variant = match variant.strip_suffix("-headers") {
        Some(plain) => {
            support::WITH_HEADERS.store(true, std::sync::atomic::Ordering::Relaxed);
            plain.to_owned()
        }
        None => variant,
    };
    let net = (variant.strip_prefix("net-").map(|v| (v, false)))
        .or_else(|| variant.strip_prefix("net503-").map(|v| (v, true)));
    if let Some((net, flaky)) = net {
        let server = server::Server::start();
        let uri: Uri = server.url("/").parse().expect("a URI");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        return match rt.block_on(run_net(net, &uri, calls, flaky)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{variant}: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let rt = support::runtime();
    if let Some(variant) = variant.strip_prefix("flaky-") {
        return match rt.block_on(flaky(variant, calls)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("flaky-{variant}: {error}");
                ExitCode::FAILURE
            }
        };
    }
    rt.block_on(async {
        match variant.as_str() {
            "bare" => run(ok_service(), calls).await,
            "extension" => run(with_deadline_extension(ok_service()), calls).await,
            "copy" => run(with_request_copy(ok_service()), calls).await,
            "floor" => {
                let floor = with_request_copy(with_deadline_extension(ok_service()));
                run(floor, calls).await
            }
            "tower" => run(tower_nesting(ok_service()), calls).await,
            "ours" => run(ours(ok_service()), calls).await,
            "ours-combined" => run(ours_fused(ok_service()), calls).await,
            "ours-combined-breaker" => run(ours_fused_breaker(ok_service()), calls).await,
            "ours-combined-bulkhead" => run(ours_fused_bulkhead(ok_service()), calls).await,
            "bulkhead" => {
                let bulkhead = OverloadPolicy::bulkhead(1024)
                    .expect("a limit")
                    .with_queue(1024);
                run(with_overload(ok_service(), bulkhead), calls).await
            }
            "adaptive" => {
                let adaptive = OverloadPolicy::adaptive(AdaptiveLimit::default());
                run(with_overload(ok_service(), adaptive), calls).await
            }
            "throttle" => {
                let throttle = OverloadPolicy::throttling(Throttle::default());
                run(with_overload(ok_service(), throttle), calls).await
            }
            "ours-combined-faults-none" => run(ours_fused_faults(ok_service(), None), calls).await,
            "ours-combined-faults-off" => {
                run(ours_fused_faults(ok_service(), Some(faults(false))), calls).await
            }
            "no-guard" => run(with_no_guard(ok_service()), calls).await,
            "faults-none" => run(with_faults(ok_service(), None), calls).await,
            "faults-off" => run(with_faults(ok_service(), Some(faults(false))), calls).await,
            "faults-on" => run(with_faults(ok_service(), Some(faults(true))), calls).await,
            "ours-combined-metrics" => run(ours_fused_metrics(ok_service()), calls).await,
            "ours-combined-spans" => {
                trace_everything();
                run(ours_fused(ok_service()), calls).await
            }
            "ours-spans" => {
                trace_everything();
                run(ours(ok_service()), calls).await
            }
            "breaker" => run(with_breaker(ok_service()), calls).await,
            "rate-limit" => run(rate_limit::with_rate_limit(ok_service()), calls).await,
            "governor" => run(rate_limit::with_governor(ok_service(), false), calls).await,
            "governor-keyed" => run(rate_limit::with_governor(ok_service(), true), calls).await,
            "tower-rate-limit" => run(rate_limit::with_tower_rate_limit(ok_service()), calls).await,
            "tower-resilience-breaker" => {
                run(with_tower_resilience_breaker(ok_service()), calls).await
            }
            _ => {
                eprintln!("unknown variant {variant:?}");
                return ExitCode::FAILURE;
            }
        }
        ExitCode::SUCCESS
    })
}
