//! A counting upstream: a hyper server on a loopback port that records the
//! instant every request arrives, and answers `/429` with a 429 and
//! `Retry-After: 2`, anything else with a 200.
// NOTE: shared with the `quota` bench, which uses other parts of it.
#![allow(dead_code, unreachable_pub)]

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use std::{
    convert::Infallible,
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex},
};
use tokio::{net::TcpListener, task::JoinHandle, time::Instant};

/// One request as the upstream saw it.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub at: Instant,
    pub path: String,
}

/// The upstream, stopped on drop.
pub struct Upstream {
    pub addr: SocketAddr,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    accept: JoinHandle<()>,
}

impl Upstream {
    pub async fn start() -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&arrivals);
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = Arc::clone(&seen);
                let service = service_fn(move |request: Request<Incoming>| {
                    let seen = Arc::clone(&seen);
                    async move { Ok::<_, Infallible>(answer(&seen, &request)) }
                });
                tokio::spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            arrivals,
            accept,
        }
    }

    /// Every request so far, in the order they arrived.
    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }

    /// The URI of `path` on this upstream.
    pub fn uri(&self, path: &str) -> http::Uri {
        format!("http://{}{path}", self.addr).parse().unwrap()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Records `request` and answers it.
fn answer(seen: &Mutex<Vec<Arrival>>, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let status = if path == "/429" { 429 } else { 200 };
    // NOTE: the instant is taken as the response is made, so that the
    // instant `Retry-After` names is at least this one plus its seconds.
    seen.lock().unwrap().push(Arrival {
        at: Instant::now(),
        path,
    });
    Response::builder()
        .status(status)
        .header("retry-after", "2")
        .body(Full::new(Bytes::from_static(b"ok")))
        .unwrap()
}

/// The most arrivals in any window of `span` that starts at an arrival.
pub fn busiest(arrivals: &[Instant], span: std::time::Duration) -> usize {
    let mut sorted = arrivals.to_vec();
    sorted.sort();
    let mut end = 0;
    let mut most = 0;
    for (start, at) in sorted.iter().enumerate() {
        while end < sorted.len() && sorted[end] < *at + span {
            end += 1;
        }
        most = most.max(end - start);
    }
    most
}
