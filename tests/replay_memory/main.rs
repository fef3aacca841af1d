//! The memory a `ReplayBody` holds whatever the sizes of the frames it keeps,
//! and the bytes a retry sends again, over real HTTP/1.1.
//!
//! ```text
//! cargo test --test replay_memory
//! ```
//!
//! # The buffer alone
//!
//! A body of [`CAP`] bytes (the default replay cap, the most a buffer keeps)
//! goes through a `ReplayBody` with a copy waiting, in frames of 1, 16, 4095,
//! 4096 and 65,536 bytes, and in 1-byte and 4 KiB frames in turn. Each frame
//! is a fresh allocation, made when the body is polled and dropped once it is
//! sent, as a connection's frames are; so the bytes in use above the level
//! before the first frame are what the buffer holds. Their peak, read after
//! every frame, must stay within the bound `ReplayBody`'s docs state
//! ([`documented_bound`]), and the copy must then replay the body exactly.
//!
//! # Through the gateway
//!
//! The same body, in 1-byte, 16-byte and 64 KiB frames, is sent as a chunked
//! PUT over HTTP/1.1 on loopback to the gateway of
//! `crates/http-resilience/examples/axum_gateway.rs` (the inbound body in a
//! `ReplayBody`, the retry layer, a hyper-util client), in front of the mock
//! upstream, which answers 503 once and then 200. The upstream must receive
//! the body twice, exactly.
//!
//! The upstream holds its 503 for [`HOLD`] after it has recorded the first
//! request. Meanwhile the gateway's buffer holds the whole body and nothing
//! moves: one thread runs the client, the gateway and the upstream, and each
//! of them waits for the 503. The bytes in use then, above those before the
//! call, count the buffer and everything else the call holds (the upstream's
//! copy of the body, the connections' buffers, the call's state): a coarse
//! check, under the documented bound plus [`ALLOWANCE`]. The exact check of
//! the bound is the one above. Nothing is timed: the hold only gives the
//! reading a window, and the limits of the gateway are far above the call.
//!
//! The binary has its own `main` (`harness = false`): the allocator must see
//! this test alone, not libtest's threads.

#[allow(dead_code)] // The example's demo: its `main` and what only it uses.
#[path = "../../crates/http-resilience/examples/axum_gateway.rs"]
pub mod gateway;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use http_resilience::body::{ReplayBody, TryCloneBody, DEFAULT_REPLAY_CAP};
use http_resilience_mock::{MockResponse, MockServer};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{
    alloc::System,
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::{pin, Pin},
    task::{Context, Poll, Waker},
    time::Duration,
};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The size of every body: the default cap, the most a buffer keeps.
const CAP: usize = DEFAULT_REPLAY_CAP;

/// The frame sizes the buffer alone is measured with, each a pattern the
/// frames follow in turn.
const ALONE: [&[usize]; 6] = [&[1], &[16], &[4095], &[4096], &[CAP], &[1, 4096]];

/// The frame sizes sent through the gateway.
const THROUGH: [&[usize]; 3] = [&[1], &[16], &[CAP]];

/// How long the upstream holds its 503 once it has the first request.
const HOLD: Duration = Duration::from_millis(500);

/// What the call holds besides the gateway's buffer, at most, while the
/// upstream holds its 503: the upstream's copy of the body (up to 128 KiB as
/// it grows), the connections' read and write buffers (up to hyper's
/// 408 KiB each, which a fast sender of small chunks fills), the call's
/// state. Measured at 140 to 410 KiB here, up to 600 KiB on a loaded
/// machine; when the buffer kept one `Bytes` per frame, a call of 1-byte
/// frames held 2.8 MiB.
const ALLOWANCE: i64 = 1536 * 1024;

/// The gateway's limits: far above what a call takes, so that a loaded
/// machine cannot end one.
const ATTEMPT: Duration = Duration::from_secs(30);
const DEADLINE: Duration = Duration::from_secs(60);

/// The guard on every await that could hang: above the gateway's limits.
const GUARD: Duration = Duration::from_secs(90);

fn main() {
    let bound = documented_bound(CAP);
    println!("replay buffer of a {CAP}-byte body, cap {CAP}: documented bound {bound} bytes");
    let mut failures = Vec::new();
    for pattern in ALONE {
        let (frames, peak) = held_by_the_buffer(pattern);
        println!("  alone, frames of {pattern:?} bytes: {frames} frames, peak held {peak} bytes");
        if peak > bound {
            failures.push(format!("{pattern:?}: held {peak} bytes, over {bound}"));
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    failures.extend(runtime.block_on(through_the_gateway(bound)));
    assert!(failures.is_empty(), "{failures:#?}");
    println!("ok");
}

/// The bound `ReplayBody`'s docs state, on 64-bit targets.
fn documented_bound(cap: usize) -> i64 {
    (cap + cap / 16 + 4352) as i64
}

/// The byte at position `n` of every body.
fn byte_at(n: usize) -> u8 {
    (n % 251) as u8
}

/// The whole body, as the upstream must receive it.
fn expected() -> Bytes {
    (0..CAP).map(byte_at).collect()
}

/// The bytes in use in the process.
fn in_use() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

// ===== the buffer alone =====

/// Sends the body, in frames of `pattern`, through a `ReplayBody` with a
/// copy waiting; the number of frames and the peak of the bytes in use above
/// those before the first frame.
fn held_by_the_buffer(pattern: &'static [usize]) -> (usize, i64) {
    let whole = expected();
    let mut original = ReplayBody::new(Frames::new(pattern));
    let copy = original.try_clone_body().expect("nothing read yet");
    let mut cx = Context::from_waker(Waker::noop());
    let (mut frames, mut peak) = (0, 0);
    let before = in_use();
    loop {
        match Pin::new(&mut original).poll_frame(&mut cx) {
            // NOTE: dropped at once, as a connection drops what it has sent.
            Poll::Ready(Some(frame)) => drop(frame.expect("a data frame")),
            Poll::Ready(None) => break,
            Poll::Pending => unreachable!("the frames are always ready"),
        }
        frames += 1;
        peak = peak.max(in_use() - before);
    }
    drop(original);
    let replayed = ready_now(copy.collect()).expect("replayable").to_bytes();
    assert!(replayed == whole, "{pattern:?}: the replay differs");
    (frames, peak)
}

/// Runs a future that is ready at once.
fn ready_now<F: Future>(future: F) -> F::Output {
    match pin!(future).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("a complete buffer plays at once"),
    }
}

// ===== through the gateway =====

/// Every case of [`THROUGH`], each after the same call unmeasured (it opens
/// the connections, sets up what is built once, and grows the connections'
/// buffers to what such a body makes them); the failures.
async fn through_the_gateway(bound: i64) -> Vec<String> {
    let upstream = guarded(MockServer::start()).await.expect("an upstream");
    let router = gateway::gateway_with(upstream.uri("/"), ATTEMPT, DEADLINE).expect("a gateway");
    let addr = guarded(gateway::spawn(router)).await.expect("a port");
    let client: Client<HttpConnector, Frames> = Client::builder(TokioExecutor::new()).build_http();
    let whole = expected();
    let mut failures = Vec::new();
    for pattern in THROUGH {
        put(&client, &upstream, addr, pattern).await;
        let (held, seen) = put(&client, &upstream, addr, pattern).await;
        let exact = seen.len() == 2 && seen.iter().all(|body| *body == whole);
        let sizes: Vec<usize> = seen.iter().map(Bytes::len).collect();
        println!(
            "  through the gateway, frames of {pattern:?} bytes: upstream bodies {sizes:?} ({}), \
             held during the 503 {held} bytes",
            if exact { "exact" } else { "CHANGED" },
        );
        if !exact {
            failures.push(format!(
                "{pattern:?}: the upstream received {sizes:?} bytes"
            ));
        }
        if held > bound + ALLOWANCE {
            failures.push(format!("{pattern:?}: the call held {held} bytes"));
        }
    }
    failures
}

/// A PUT of the body in frames of `pattern` through the gateway, answered
/// 503 (held for [`HOLD`]) and then 200; the bytes in use while the 503 is
/// held, above those before the call, and the bodies the upstream received.
async fn put(
    client: &Client<HttpConnector, Frames>,
    upstream: &MockServer,
    gateway: SocketAddr,
    pattern: &'static [usize],
) -> (i64, Vec<Bytes>) {
    let earlier = upstream.request_count();
    upstream.enqueue(MockResponse::new(503).with_head_delay(HOLD));
    upstream.enqueue(MockResponse::ok("ok"));
    let request = Request::put(format!("http://{gateway}/objects/7"))
        .body(Frames::new(pattern))
        .expect("a request");
    let before = in_use();
    let call = tokio::spawn(client.request(request));
    assert!(
        upstream.wait_for_requests(earlier + 1, GUARD).await,
        "the first attempt never arrived"
    );
    let held = in_use() - before;
    let response = guarded(call).await.expect("the call").expect("a response");
    let status = response.status();
    let answer = guarded(response.into_body().collect())
        .await
        .expect("the body")
        .to_bytes();
    assert_eq!(status, StatusCode::OK, "retried after the 503: {answer:?}");
    assert_eq!(answer, "ok");
    let seen = upstream.requests()[earlier..]
        .iter()
        .map(|request| request.body.clone())
        .collect();
    (held, seen)
}

/// Awaits `future` under [`GUARD`], failing the test if it hangs.
async fn guarded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .expect("the call hung past the test guard")
}

// ===== Frames =====

/// A body of [`CAP`] bytes in frames whose sizes follow a pattern in turn
/// (the last one cut short). Each frame is made when polled, in an
/// allocation of its own; the length is unknown, so it goes out chunked.
#[derive(Debug)]
struct Frames {
    pattern: &'static [usize],
    frames: usize,
    sent: usize,
}

impl Frames {
    fn new(pattern: &'static [usize]) -> Self {
        Self {
            pattern,
            frames: 0,
            sent: 0,
        }
    }
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let size = self.pattern[self.frames % self.pattern.len()].min(CAP - self.sent);
        if size == 0 {
            return Poll::Ready(None);
        }
        let frame: Vec<u8> = (self.sent..self.sent + size).map(byte_at).collect();
        self.frames += 1;
        self.sent += size;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(frame)))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent == CAP
    }
}
