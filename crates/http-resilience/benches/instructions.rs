//! Calls one variant of the `overhead` bench a given number of times, and
//! nothing else, so that an instruction counter can tell what one call costs
//! without the noise of a shared machine's clock (issue 6, point 1).
//!
//! Run it under callgrind twice, with `N` calls and with none, and divide the
//! difference by `N`; `BENCHMARKS.md` has the loop over the variants:
//!
//! ```text
//! cargo bench -p http-resilience --bench instructions --no-run
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/deps/instructions-<hash> ours 20000
//! ```
//!
//! Variants: `bare`, `extension` (bare + deadline extension), `tower` and
//! `ours`, as in the `overhead` bench, each answered at once in process; and
//! the same over loopback HTTP/1.1, `net-bare` (hyper-util's client), `net-tower`,
//! `net-floor` and `net-ours`, against the `loopback` bench's server in a child
//! process (which callgrind does not follow, so only the caller's work is
//! counted). `net-floor` is what any stack with our semantics must do around
//! the client: record the deadline extension and run the attempt under one
//! `tokio::time::timeout` and the call under another. Every network variant
//! first makes `WARM_UP` requests, in the zero-call run too, so that the
//! connection and the pool are set up before the counted calls.

// NOTE: the shared modules also serve benches that use more of them.
#[path = "support/server.rs"]
#[allow(dead_code)]
mod server;
#[allow(dead_code)]
mod support;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body::Body;
use http_body_util::{BodyExt, Full};
use http_resilience::RequestDeadline;
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::{TokioExecutor, TokioTimer},
};
use std::{hint::black_box, process::ExitCode};
use support::{
    call, ok_service, ours, tower_nesting, with_deadline_extension, Req, ATTEMPT_LIMIT, CALL_LIMIT,
};
use tower::{BoxError, Service, ServiceExt};

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

/// A GET of `uri` with an empty `Full` body.
fn get(uri: &Uri) -> Req {
    let mut request = Request::new(Full::new(Bytes::new()));
    *request.uri_mut() = uri.clone();
    request
}

/// Reads a response body to its end.
async fn drain<T>(response: Response<T>) -> Result<(), BoxError>
where
    T: Body,
    T::Error: Into<BoxError>,
{
    response.into_body().collect().await.map_err(Into::into)?;
    Ok(())
}

/// One exchange through `svc`, its body read to the end.
async fn exchange<S, T>(svc: &mut S, uri: &Uri) -> Result<(), BoxError>
where
    S: Service<Req, Response = Response<T>>,
    S::Error: Into<BoxError>,
    T: Body,
    T::Error: Into<BoxError>,
{
    let svc = svc.ready().await.map_err(Into::into)?;
    drain(svc.call(get(uri)).await.map_err(Into::into)?).await
}

/// The floor of our semantics around `client`: a deadline extension, a
/// timeout for the attempt and one for the whole call (body included).
async fn floor_exchange(
    client: &mut Client<HttpConnector, Full<Bytes>>,
    uri: &Uri,
) -> Result<(), BoxError> {
    let call = async {
        let client = client.ready().await?;
        let mut request = get(uri);
        request
            .extensions_mut()
            .insert(RequestDeadline::after(CALL_LIMIT));
        let response = tokio::time::timeout(ATTEMPT_LIMIT, client.call(request)).await??;
        drain(response).await
    };
    tokio::time::timeout(CALL_LIMIT, call).await?
}

/// hyper-util's client as the `loopback` bench's bare variant sets it up.
fn client() -> Client<HttpConnector, Full<Bytes>> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .retry_canceled_requests(false)
        .build(connector)
}

/// Makes `WARM_UP` and then `calls` exchanges with the server, one after
/// another, through the variant named `variant` (`bare`, `tower`, `floor` or
/// `ours`).
async fn run_net(variant: &str, uri: &Uri, calls: u64) -> Result<(), BoxError> {
    macro_rules! exchanges {
        ($svc:expr) => {{
            let mut svc = $svc;
            for _ in 0..WARM_UP + calls {
                exchange(&mut svc, uri).await?;
            }
        }};
    }
    match variant {
        "bare" => exchanges!(client()),
        "tower" => exchanges!(tower_nesting(client())),
        "ours" => exchanges!(ours(client())),
        "floor" => {
            let mut client = client();
            for _ in 0..WARM_UP + calls {
                floor_exchange(&mut client, uri).await?;
            }
        }
        _ => return Err(format!("unknown variant net-{variant}").into()),
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
            "usage: instructions <bare|extension|tower|ours|net-bare|net-tower|net-floor|net-ours> \
             <calls> (see BENCHMARKS.md)"
        );
        return ExitCode::SUCCESS;
    };
    if let Some(net) = variant.strip_prefix("net-") {
        let server = server::Server::start();
        let uri: Uri = server.url("/").parse().expect("a URI");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime");
        return match rt.block_on(run_net(net, &uri, calls)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("{variant}: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let rt = support::runtime();
    rt.block_on(async {
        match variant.as_str() {
            "bare" => run(ok_service(), calls).await,
            "extension" => run(with_deadline_extension(ok_service()), calls).await,
            "tower" => run(tower_nesting(ok_service()), calls).await,
            "ours" => run(ours(ok_service()), calls).await,
            _ => {
                eprintln!("unknown variant {variant:?}");
                return ExitCode::FAILURE;
            }
        }
        ExitCode::SUCCESS
    })
}
