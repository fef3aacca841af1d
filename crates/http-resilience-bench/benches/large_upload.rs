//! A 256 MiB upload retried once (503, then 200) over loopback HTTP/1.1:
//! the heap's peak and the time of the call, for the body opened again from
//! a factory (`ReopenBody`) against the body buffered whole (a `ReplayBody`
//! with a cap of 256 MiB, and a `Full<Bytes>` of 256 MiB), side by side in
//! one run.
//!
//! Every variant sends the same bytes in 16 KiB frames, each a fresh
//! allocation filled by a copy, as a file's blocks read from the page cache
//! are (the `Full` body is one allocation of 256 MiB, filled the same way for
//! the call, as a body read into memory is), through
//! `DeadlineLayer -> StatusRetryLayer -> AttemptTimeoutLayer` over the
//! library's client, to the loopback upstream of the other benches in a
//! child process, which reads every body to its end and keeps none of it.
//! The bytes in use in this process (a counting allocator) are read at every
//! frame the body yields and once the call has ended; the peak is given
//! above the bytes in use before the body was made. The time runs from
//! making the body to the end of the call. The variants take turns,
//! [`ROUNDS`] times (`-- --rounds N` for more); the table gives the median
//! time and the largest peak.
//!
//! Run: `cargo bench -p http-resilience-bench --bench large_upload`; see
//! `BENCHMARKS.md`.

#[path = "support/server.rs"]
mod server;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    body::{Reopen, ReopenBody, ReplayBody, TryCloneBody},
    deadline::DeadlineLayer,
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, Attempts, BoxError,
};
use server::{Server, MODE, REQUEST_ID, UPLOAD};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{
    alloc::System,
    convert::Infallible,
    future::{ready, Ready},
    pin::Pin,
    sync::{
        atomic::{AtomicI64, AtomicU64, Ordering},
        OnceLock,
    },
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The length of the upload.
const LEN: usize = 256 * 1024 * 1024;

/// The size of every frame.
const FRAME: usize = 16 * 1024;

/// How many times each variant runs, unless `--rounds N` says otherwise.
const ROUNDS: usize = 3;

/// Far above what a call takes.
const ATTEMPT: Duration = Duration::from_secs(60);
const DEADLINE: Duration = Duration::from_secs(120);

/// The peak of the bytes in use, read as the bodies yield their frames.
static PEAK: AtomicI64 = AtomicI64::new(0);

/// A fresh id for every call, for the upstream's counter.
static CALLS: AtomicU64 = AtomicU64::new(0);

fn in_use() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

fn sample() {
    PEAK.fetch_max(in_use(), Ordering::Relaxed);
}

/// The byte at position `n` of the upload.
fn byte_at(n: usize) -> u8 {
    (n % 251) as u8
}

/// The bytes of the upload from `at`, `n` of them at most [`FRAME`]: a
/// slice of a buffer made once, since the pattern repeats every 251 bytes.
fn bytes_at(at: usize, n: usize) -> &'static [u8] {
    static SOURCE: OnceLock<Vec<u8>> = OnceLock::new();
    let source = SOURCE.get_or_init(|| (0..FRAME + 251).map(byte_at).collect());
    &source[at % 251..at % 251 + n]
}

// ===== the bodies =====

/// The upload in frames of [`FRAME`] bytes, each made when polled.
#[derive(Debug, Default)]
struct Frames {
    sent: usize,
}

impl Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let n = FRAME.min(LEN - self.sent);
        if n == 0 {
            return Poll::Ready(None);
        }
        // NOTE: a fresh allocation and a copy, as a file's block read from
        // the page cache.
        let frame = Bytes::copy_from_slice(bytes_at(self.sent, n));
        self.sent += n;
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.sent == LEN
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact((LEN - self.sent) as u64)
    }
}

/// Opens [`Frames`] from the start.
struct OpenFrames;

impl Reopen for OpenFrames {
    type Body = Frames;
    type Error = Infallible;
    type Future = Ready<Result<Frames, Infallible>>;

    fn reopen(&self) -> Self::Future {
        ready(Ok(Frames::default()))
    }
}

/// A body that reads the heap whenever it is polled; copies as its inner
/// body does.
struct Sampled<B> {
    inner: B,
}

impl<B: TryCloneBody> TryCloneBody for Sampled<B> {
    fn try_clone_body(&self) -> Option<Self> {
        let inner = self.inner.try_clone_body()?;
        Some(Self { inner })
    }

    fn is_replayable(&self) -> bool {
        self.inner.is_replayable()
    }
}

impl<B: Body + Unpin> Body for Sampled<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        sample();
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

// ===== the calls =====

/// What one call took.
struct Run {
    heap: i64,
    took: Duration,
}

/// Makes a body with `make`, and sends it through the three layers to
/// `server`, which answers 503 and then 200: the heap's peak above the bytes
/// in use before, and the time from making the body to the end of the call.
async fn run<B>(server: &Server, make: impl FnOnce() -> B) -> Run
where
    B: Body + TryCloneBody + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let client = transport::Builder::new()
        .read_timeout(ATTEMPT)
        .build_http::<Sampled<B>>()
        .expect("a client");
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).expect("a status"),
        FixedDelay::new(Duration::ZERO, 2),
    );
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(DEADLINE))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(client);
    let before = in_use();
    PEAK.store(before, Ordering::Relaxed);
    let start = Instant::now();
    let request = Request::put(server.url("/upload"))
        .header(MODE, UPLOAD)
        .header(REQUEST_ID, CALLS.fetch_add(1, Ordering::Relaxed))
        .body(Sampled { inner: make() })
        .expect("a request");
    let response = svc.oneshot(request).await.expect("the call");
    assert_eq!(response.status(), StatusCode::OK, "retried after the 503");
    assert_eq!(Attempts::of(&response), 2);
    let received = response.into_body().collect().await.expect("read");
    assert_eq!(received.to_bytes(), LEN.to_string(), "sent whole");
    let took = start.elapsed();
    sample();
    Run {
        heap: PEAK.load(Ordering::Relaxed) - before,
        took,
    }
}

/// The three variants' names.
const VARIANTS: [&str; 3] = [
    "`ReopenBody` (factory)",
    "`ReplayBody`, cap 256 MiB",
    "`Full<Bytes>` of 256 MiB",
];

async fn run_variant(server: &Server, variant: usize) -> Run {
    match variant {
        0 => run(server, || ReopenBody::with_length(OpenFrames, LEN as u64)).await,
        1 => run(server, || ReplayBody::with_cap(Frames::default(), LEN)).await,
        _ => {
            run(server, || {
                let mut whole = Vec::with_capacity(LEN);
                while whole.len() < LEN {
                    let n = FRAME.min(LEN - whole.len());
                    whole.extend_from_slice(bytes_at(whole.len(), n));
                }
                Full::new(Bytes::from(whole))
            })
            .await
        }
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn main() {
    server::serve_if_asked();
    let server = Server::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let rounds = server::count_arg("--rounds", ROUNDS, 31);
    let mut runs: Vec<Vec<Run>> = (0..VARIANTS.len()).map(|_| Vec::new()).collect();
    runtime.block_on(async {
        // NOTE: one call unmeasured first, for what is set up once.
        run_variant(&server, 0).await;
        for _ in 0..rounds {
            for (variant, runs) in runs.iter_mut().enumerate() {
                runs.push(run_variant(&server, variant).await);
            }
        }
    });
    println!("256 MiB upload, 503 then 200 (sent twice), {rounds} rounds\n");
    println!("| body | heap peak above before | time per call (median) | throughput |");
    println!("|---|---:|---:|---:|");
    for (name, runs) in VARIANTS.iter().zip(runs) {
        let heap = runs.iter().map(|run| run.heap).max().unwrap_or_default();
        let took = median(runs.iter().map(|run| run.took).collect());
        let mib_per_s = 2.0 * (LEN >> 20) as f64 / took.as_secs_f64();
        let heap = match heap {
            ..=0x10_0000 => format!("{:.0} KiB", heap as f64 / 1024.0),
            _ => format!("{:.1} MiB", heap as f64 / 1024.0 / 1024.0),
        };
        println!(
            "| {name} | {heap} | {:.0} ms | {mib_per_s:.0} MiB/s |",
            took.as_secs_f64() * 1e3
        );
    }
}
