//! The loopback upstream of the `loopback` and `deadline_scale` benches: a
//! hyper HTTP/1.1 server in a child process on `127.0.0.1:0`.
//!
//! The bench binary runs itself again with [`SERVER_ARG`]; the child binds a
//! port, prints it on its stdout and serves until its stdin closes (the parent
//! is gone), [`LIFETIME`] passes, or it is killed. The parent holds a
//! [`Server`], whose `Drop` kills and reaps the child, also when a panic
//! unwinds.
//!
//! What the server answers depends on the request's [`MODE`] header:
//!
//! - none: 200 with the body `ok`;
//! - [`FLAKY`]: 503, 503 and then 200 for the same [`REQUEST_ID`] (a counter
//!   per id, dropped after the 200);
//! - [`HANG`]: never answers; the handler's future is dropped when the client
//!   closes the connection;
//! - [`CONNECTIONS`]: 200 with the number of connections accepted so far as
//!   the body, so that a bench can tell whether a client reused them;
//! - [`UPLOAD`]: reads the request body to its end, keeping none of it, then
//!   answers 503 and then 200 for the same [`REQUEST_ID`], with the number
//!   of body bytes received as the body.
//!
//! The child runs on a current-thread runtime: on two cores, the server gets
//! one and the calling bench the other.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use std::{
    collections::HashMap,
    convert::Infallible,
    io::{BufRead, BufReader, Read},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::net::TcpListener;

/// The argument that makes the bench binary a server.
pub(crate) const SERVER_ARG: &str = "--server";
/// The request header that selects what the server answers.
pub(crate) const MODE: &str = "x-bench-mode";
/// [`MODE`]: 503, 503, then 200 per [`REQUEST_ID`].
pub(crate) const FLAKY: &str = "flaky";
/// [`MODE`]: never answer.
pub(crate) const HANG: &str = "hang";
/// [`MODE`]: answer the number of connections accepted so far.
pub(crate) const CONNECTIONS: &str = "connections";
/// [`MODE`]: read the body, then 503 and then 200 per [`REQUEST_ID`].
pub(crate) const UPLOAD: &str = "upload";
/// The request header that keys the [`FLAKY`] and [`UPLOAD`] counters.
pub(crate) const REQUEST_ID: &str = "x-bench-request-id";
/// The child stops by itself after this long, whatever happens to the parent.
const LIFETIME: Duration = Duration::from_secs(900);

/// The number after `flag` on the command line (after `--` on `cargo bench`),
/// or `default`, kept within `1..=max`.
pub(crate) fn count_arg(flag: &str, default: usize, max: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|arg| arg == flag)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |n| {
            n.parse()
                .unwrap_or_else(|_| panic!("{flag} takes a number, got {n:?}"))
        })
        .clamp(1, max)
}

/// Runs the server and exits if this process was started with
/// [`SERVER_ARG`]; returns otherwise.
pub(crate) fn serve_if_asked() {
    if std::env::args().skip(1).any(|arg| arg == SERVER_ARG) {
        serve();
        std::process::exit(0);
    }
}

fn serve() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("a local address").port();
        println!("{port}");

        // NOTE: the parent holds the other end of stdin; end of file means it
        // is gone, even if it could not kill this process.
        let orphaned = tokio::task::spawn_blocking(|| {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
        });
        let state = Arc::new(State::default());
        tokio::select! {
            () = accept(listener, state) => {}
            _ = orphaned => {}
            () = tokio::time::sleep(LIFETIME) => {}
        }
    });
}

/// What the connections share.
#[derive(Default)]
struct State {
    /// Attempts seen per [`REQUEST_ID`] in [`FLAKY`] and [`UPLOAD`] modes.
    flaky: Mutex<HashMap<u64, u32>>,
    /// Connections accepted.
    accepted: AtomicU64,
}

async fn accept(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        state.accepted.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |request| answer(request, state.clone()));
            // NOTE: a connection the client drops (hung calls) ends in an
            // error here; nothing to report.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    state: Arc<State>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let mode = request.headers().get(MODE).map(|value| value.as_bytes());
    let status = match mode {
        Some(mode) if mode == CONNECTIONS.as_bytes() => {
            let accepted = state.accepted.load(Ordering::Relaxed).to_string();
            return Ok(Response::new(Full::new(Bytes::from(accepted))));
        }
        Some(mode) if mode == FLAKY.as_bytes() => fail_first(&request, &state, 2),
        Some(mode) if mode == UPLOAD.as_bytes() => {
            let status = fail_first(&request, &state, 1);
            let received = drain(request.into_body()).await.to_string();
            let mut response = Response::new(Full::new(Bytes::from(received)));
            *response.status_mut() = status;
            return Ok(response);
        }
        Some(mode) if mode == HANG.as_bytes() => std::future::pending().await,
        _ => StatusCode::OK,
    };
    let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
    *response.status_mut() = status;
    Ok(response)
}

/// 503 for the first `failures` requests of a [`REQUEST_ID`], then 200.
fn fail_first(request: &Request<Incoming>, state: &State, failures: u32) -> StatusCode {
    let id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok())
        .unwrap_or(0);
    let mut counts = state.flaky.lock().expect("the counter lock");
    let seen = counts.entry(id).or_insert(0);
    *seen += 1;
    if *seen <= failures {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        counts.remove(&id);
        StatusCode::OK
    }
}

/// Reads `body` to its end; the data bytes it had.
async fn drain(mut body: Incoming) -> u64 {
    use http_body_util::BodyExt;
    let mut received = 0;
    while let Some(Ok(frame)) = body.frame().await {
        received += frame.data_ref().map_or(0, Bytes::len) as u64;
    }
    received
}

// ===== impl Server =====

/// The child process serving on `127.0.0.1`; dropping it kills the child.
pub(crate) struct Server {
    child: Child,
    // NOTE: held only so that the child's stdin stays open while this lives.
    _stdin: ChildStdin,
    port: u16,
}

impl Server {
    /// Starts this binary again as a server and waits for its port.
    pub(crate) fn start() -> Self {
        let exe = std::env::current_exe().expect("the path of this bench binary");
        let mut child = Command::new(exe)
            .arg(SERVER_ARG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the server process");
        let stdin = child.stdin.take().expect("a piped stdin");
        let stdout = child.stdout.take().expect("a piped stdout");
        // NOTE: a guard from here on, so a bad port line still kills the child.
        let mut server = Self {
            child,
            _stdin: stdin,
            port: 0,
        };
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the server's port");
        server.port = line.trim().parse().expect("the server prints its port");
        server
    }

    /// `http://127.0.0.1:{port}{path}`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
