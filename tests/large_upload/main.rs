//! A 256 MiB upload sent again by a retry and by a hedge, through
//! `ReopenBody`, with the client's heap growing by less than 1 MiB; and a
//! body that comes out shorter when opened again, which ends the call with
//! the typed error, not retried.
//!
//! ```text
//! cargo test --test large_upload
//! ```
//!
//! # The body
//!
//! Generated as it is sent: [`SOURCE`] bytes drawn once from a seeded
//! generator, and a body of 16 KiB blocks, block `i` a copy of the slice of
//! them that starts at `i * STRIDE` (modulo [`SPAN`]), so that no two blocks
//! of a body are alike. Each block is a fresh allocation, dropped once it is
//! sent, as a file's blocks are read: a block kept anywhere shows in the heap
//! (a slice of the shared source would cost it nothing, kept or not). A
//! [`Pattern`] opens the body from its start every time it is asked to.
//!
//! # The upstream
//!
//! A small hyper server of this test's own, in a child process (this binary
//! again, with [`ROLE`] set), so that the counting allocator sees the client
//! alone. It reads every upload as it arrives and checks it byte for byte
//! against the pattern, keeping nothing of it; then answers 503 to a call's
//! first request and 200 to the next (`retry`), or holds the first copy's
//! answer until the second copy has arrived whole (`hedge`). It reports what
//! it received for each call: the length, whether every byte was the
//! pattern's, whether the body came whole, and whether it was sent with a
//! `Content-Length` or chunked.
//!
//! # The heap
//!
//! The bytes in use in this process are read every time the body yields a
//! frame, and once the call has ended; the peak, less the bytes in use
//! before the call, must stay under [`HEAP_LIMIT`]. Each stack makes a call
//! of [`WARM`] bytes first, unmeasured, which opens its connection and sets
//! up what is built once.
//!
//! The binary has its own `main` (`harness = false`): the allocator must see
//! this test alone, not libtest's threads.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Empty};
use http_resilience::{
    body::{BodyChanged, Reopen, ReopenBody},
    errors,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::{FeignDecoder, FixedDelay, StatusDecoder},
    retry::RetryPolicy,
    transport, AttemptTimeoutLayer, Attempts, BoxError, DeadlineLayer, FailureKind,
    ResiliencePolicy, RetryReport, StatusRetryLayer, Stop,
};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::{
    alloc::System,
    convert::Infallible,
    future::{ready, Ready},
    io::{BufRead, BufReader},
    net::SocketAddr,
    pin::Pin,
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicI64, AtomicU32, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::Instant;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The length of every measured upload: 256 MiB.
const LEN: u64 = 256 * 1024 * 1024;

/// The length of the unmeasured call each stack makes first.
const WARM: u64 = 4 * 1024 * 1024;

/// Where the short body ends when it is opened again: half-way.
const SHORT: u64 = LEN / 2;

/// The most the client's heap may grow by during a measured call.
const HEAP_LIMIT: i64 = 1024 * 1024;

/// The size of every frame the body yields. hyper queues at most 16 frames
/// on a connection before it writes them: 256 KiB at this size.
const BLOCK: usize = 16 * 1024;

/// The offsets the blocks start at are under this.
const SPAN: usize = 1024 * 1024;

/// The bytes drawn from the generator: every block of [`SPAN`] offsets fits.
const SOURCE: usize = SPAN + BLOCK;

/// How far apart consecutive blocks start in the source: odd, so that the
/// offsets go through all of [`SPAN`] before they repeat.
const STRIDE: u64 = 65_537;

/// The generator's seed.
const SEED: u64 = 0x5eed_0fb0_d1e5;

/// The environment variable that makes this binary the upstream.
const ROLE: &str = "LARGE_UPLOAD_UPSTREAM";

/// The stacks' limits: far above what a call takes, so that a loaded machine
/// cannot end one.
const ATTEMPT: Duration = Duration::from_secs(60);
const DEADLINE: Duration = Duration::from_secs(120);

/// The hedge's delay: the second copy starts while the first still sends
/// (on the machine this was written on, where a copy takes 50 ms to 0.3 s).
const HEDGE_DELAY: Duration = Duration::from_millis(50);

fn main() {
    if std::env::var_os(ROLE).is_some() {
        return upstream::run();
    }
    let upstream = Upstream::spawn();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let failures = runtime.block_on(async {
        let mut failures = Vec::new();
        failures.extend(retried(Form::Layers, upstream.addr).await);
        failures.extend(retried(Form::Combined, upstream.addr).await);
        failures.extend(hedged(upstream.addr).await);
        failures.extend(changed_on_reopening(upstream.addr).await);
        failures
    });
    assert!(failures.is_empty(), "{failures:#?}");
    println!("ok");
}

// ===== the body =====

/// The bytes every body is made of, drawn from a xorshift generator.
fn source() -> Bytes {
    let mut state = SEED;
    let mut bytes = Vec::with_capacity(SOURCE);
    while bytes.len() < SOURCE {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(SOURCE);
    Bytes::from(bytes)
}

/// The bytes of a body from `at` to the end of its block, at most `max`:
/// where they start in the source, and how many.
fn piece(at: u64, max: u64) -> (usize, usize) {
    let block = at / BLOCK as u64;
    let within = (at % BLOCK as u64) as usize;
    let start = (block * STRIDE % SPAN as u64) as usize + within;
    (start, (BLOCK - within).min(max as usize))
}

/// The peak of the bytes in use, read as the body yields its frames.
static PEAK: AtomicI64 = AtomicI64::new(0);

/// The bytes in use in the process.
fn in_use() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

/// Notes the bytes in use now in [`PEAK`].
fn sample() {
    PEAK.fetch_max(in_use(), Ordering::Relaxed);
}

/// Opens the pattern from its start: a body of `len` bytes, except that the
/// openings from the `short_from`th on (counting from 0) end at [`SHORT`]
/// while announcing `len`, as a source that changed would.
#[derive(Clone)]
struct Pattern {
    source: Bytes,
    len: u64,
    short_from: u32,
    opened: Arc<AtomicU32>,
}

impl Pattern {
    fn new(source: &Bytes, len: u64) -> Self {
        Self {
            source: source.clone(),
            len,
            short_from: u32::MAX,
            opened: Arc::default(),
        }
    }

    fn opened(&self) -> u32 {
        self.opened.load(Ordering::Relaxed)
    }
}

impl Reopen for Pattern {
    type Body = PatternBody;
    type Error = Infallible;
    type Future = Ready<Result<PatternBody, Infallible>>;

    fn reopen(&self) -> Self::Future {
        let n = self.opened.fetch_add(1, Ordering::Relaxed);
        ready(Ok(PatternBody {
            source: self.source.clone(),
            at: 0,
            announced: self.len,
            end: if n >= self.short_from {
                SHORT
            } else {
                self.len
            },
        }))
    }
}

/// The pattern from its start, in slices of the shared source.
struct PatternBody {
    source: Bytes,
    at: u64,
    announced: u64,
    end: u64,
}

impl Body for PatternBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        sample();
        if self.at >= self.end {
            return Poll::Ready(None);
        }
        let (start, n) = piece(self.at, self.end - self.at);
        self.at += n as u64;
        // NOTE: a fresh copy, as a file's blocks are read: a slice of the
        // source would cost the heap nothing even if it were kept.
        let frame = Bytes::copy_from_slice(&self.source[start..start + n]);
        Poll::Ready(Some(Ok(Frame::data(frame))))
    }

    fn is_end_stream(&self) -> bool {
        self.at >= self.end
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.announced.saturating_sub(self.at))
    }
}

// ===== the stacks =====

/// The two forms of the retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `DeadlineLayer -> StatusRetryLayer -> AttemptTimeoutLayer -> client`.
    Layers,
    /// `ResiliencePolicy::new(..).layer()`.
    Combined,
}

type Upload = ReopenBody<Pattern>;

/// The library's client, its read timeout far above a call.
fn client() -> transport::HttpClient<Upload> {
    transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .read_timeout(ATTEMPT)
        .build_http()
        .expect("a client")
}

/// 503 retried twice, 10 ms apart.
fn retry_503() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).expect("a status"),
        FixedDelay::new(Duration::from_millis(10), 2),
    )
}

/// What a call gave: the status, the attempts, the body.
struct Answer {
    status: StatusCode,
    attempts: Option<Attempts>,
    body: Bytes,
}

/// A PUT of `body` for `call` in `mode` (`retry` or `hedge`) through `svc`,
/// its answer read whole, with a [`RetryReport`] in the request.
async fn upload<S, B>(
    svc: &S,
    addr: SocketAddr,
    call: &str,
    mode: &str,
    body: Upload,
    report: &RetryReport,
) -> Result<Answer, BoxError>
where
    S: Service<Request<Upload>, Response = Response<B>> + Clone,
    S::Error: Into<BoxError>,
    B: Body,
    B::Error: Into<BoxError>,
{
    let len = body.factory().len;
    let request = Request::put(format!("http://{addr}/upload/{call}/{mode}"))
        .header("x-len", len)
        .extension(report.clone())
        .body(body)?;
    let response = svc.clone().oneshot(request).await.map_err(Into::into)?;
    let status = response.status();
    let attempts = response.extensions().get::<Attempts>().copied();
    let body = response.into_body().collect().await.map_err(Into::into)?;
    Ok(Answer {
        status,
        attempts,
        body: body.to_bytes(),
    })
}

/// What a measured call took: its outcome, the peak growth of the heap, and
/// the wall-clock time.
struct Measured {
    outcome: Result<Answer, BoxError>,
    heap: i64,
    took: Duration,
}

/// Runs `call`, measuring the heap as [`sample`] reads it.
async fn measured(call: impl std::future::Future<Output = Result<Answer, BoxError>>) -> Measured {
    let before = in_use();
    PEAK.store(before, Ordering::Relaxed);
    let start = Instant::now();
    let outcome = call.await;
    let took = start.elapsed();
    sample();
    Measured {
        outcome,
        heap: PEAK.load(Ordering::Relaxed) - before,
        took,
    }
}

// ===== the cases =====

/// The retry of `form`: a 503, then a 200, the upload sent twice whole.
async fn retried(form: Form, addr: SocketAddr) -> Vec<String> {
    let source = source();
    match form {
        Form::Layers => {
            let svc = ServiceBuilder::new()
                .layer(DeadlineLayer::new(DEADLINE))
                .layer(StatusRetryLayer::new(retry_503()))
                .layer(AttemptTimeoutLayer::new(ATTEMPT))
                .service(client());
            // NOTE: a length learned from the first opening: the first
            // attempt's head went out before it, chunked.
            let framing = ["chunked", "length"];
            sent_twice(&svc, addr, "layers", "retry", &source, framing, |p| {
                ReopenBody::new(p)
            })
            .await
        }
        Form::Combined => {
            let policy = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry_503()).expect("a policy");
            let svc = policy.layer().layer(client());
            let framing = ["length", "length"];
            sent_twice(&svc, addr, "combined", "retry", &source, framing, |p| {
                let len = p.len;
                ReopenBody::with_length(p, len)
            })
            .await
        }
    }
}

/// A hedge: the first copy's answer held until the second copy, sent
/// [`HEDGE_DELAY`] later, has arrived whole and been answered.
async fn hedged(addr: SocketAddr) -> Vec<String> {
    let source = source();
    let policy = HedgePolicy::new(
        StatusDecoder::new([503]).expect("a status"),
        HedgeDelay::fixed(HEDGE_DELAY),
        2,
    )
    .expect("a hedging policy");
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(DEADLINE))
        .layer(HedgeLayer::new(policy))
        .service(client());
    // NOTE: opened at once, so the first copy knows its length too.
    let framing = ["length", "length"];
    let mut failures = Vec::new();
    let warm = ReopenBody::open(Pattern::new(&source, WARM))
        .await
        .expect("opened");
    warm_up(&svc, addr, "hedge-warm", "hedge", warm, &mut failures).await;
    let pattern = Pattern::new(&source, LEN);
    let body = ReopenBody::open(pattern.clone()).await.expect("opened");
    let report = RetryReport::new();
    let call = measured(upload(&svc, addr, "hedge", "hedge", body, &report)).await;
    let winner = call
        .outcome
        .as_ref()
        .ok()
        .and_then(|a| a.attempts)
        .map(|a| a.winner());
    if winner != Some(2) {
        failures.push(format!(
            "hedge: the winner was {winner:?}, not the second copy"
        ));
    }
    check_sent_twice("hedge", addr, call, &pattern, framing, &mut failures).await;
    failures
}

/// The unmeasured call a stack makes first; its failures.
async fn warm_up<S, B>(
    svc: &S,
    addr: SocketAddr,
    call: &str,
    mode: &str,
    body: Upload,
    failures: &mut Vec<String>,
) where
    S: Service<Request<Upload>, Response = Response<B>> + Clone,
    S::Error: Into<BoxError>,
    B: Body,
    B::Error: Into<BoxError>,
{
    match upload(svc, addr, call, mode, body, &RetryReport::new()).await {
        Ok(answer) if answer.status == StatusCode::OK => {}
        Ok(answer) => failures.push(format!("{call}: {}", answer.status)),
        Err(err) => failures.push(format!("{call}: {}", errors::report(&*err))),
    }
}

/// A warm-up call, then the measured call of [`LEN`] bytes with the body
/// `wrap` makes of the pattern, checked to have reached the upstream twice
/// whole, with `framing`.
async fn sent_twice<S, B>(
    svc: &S,
    addr: SocketAddr,
    name: &str,
    mode: &str,
    source: &Bytes,
    framing: [&str; 2],
    wrap: impl Fn(Pattern) -> Upload,
) -> Vec<String>
where
    S: Service<Request<Upload>, Response = Response<B>> + Clone,
    S::Error: Into<BoxError>,
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut failures = Vec::new();
    let warm = wrap(Pattern::new(source, WARM));
    warm_up(
        svc,
        addr,
        &format!("{name}-warm"),
        mode,
        warm,
        &mut failures,
    )
    .await;
    let pattern = Pattern::new(source, LEN);
    let report = RetryReport::new();
    let call = measured(upload(
        svc,
        addr,
        name,
        mode,
        wrap(pattern.clone()),
        &report,
    ))
    .await;
    let attempts = call
        .outcome
        .as_ref()
        .ok()
        .and_then(|a| a.attempts)
        .map(|a| a.get());
    if attempts != Some(2) {
        failures.push(format!("{name}: {attempts:?} attempts, not 2"));
    }
    check_sent_twice(name, addr, call, &pattern, framing, &mut failures).await;
    failures
}

/// Checks a measured call that should have sent the upload twice: a 200
/// and "ok", two openings, the upstream's two whole and exact bodies with
/// `framing`, the heap's growth under [`HEAP_LIMIT`].
async fn check_sent_twice(
    name: &str,
    addr: SocketAddr,
    call: Measured,
    pattern: &Pattern,
    framing: [&str; 2],
    failures: &mut Vec<String>,
) {
    let seen = seen(addr, name, 2).await;
    println!(
        "{name}: {} MiB, opened {} times, upstream saw {seen:?}, heap peak +{} KiB, {:.2} s",
        LEN >> 20,
        pattern.opened(),
        call.heap / 1024,
        call.took.as_secs_f64(),
    );
    match &call.outcome {
        Ok(answer) if answer.status == StatusCode::OK && answer.body == "ok" => {}
        Ok(answer) => failures.push(format!("{name}: answered {}", answer.status)),
        Err(err) => failures.push(format!("{name}: {}", errors::report(&**err))),
    }
    if pattern.opened() != 2 {
        failures.push(format!("{name}: opened {} times, not 2", pattern.opened()));
    }
    let whole = |framing: &str| Seen::whole(LEN, framing);
    if seen != [whole(framing[0]), whole(framing[1])] {
        failures.push(format!("{name}: the upstream saw {seen:?}"));
    }
    if call.heap >= HEAP_LIMIT {
        failures.push(format!("{name}: the heap grew by {} bytes", call.heap));
    }
}

/// A body that comes out shorter when opened for the retry: the call ends
/// with `BodyChanged`, not retried, though its decoder (Feign's) retries
/// transport failures; the upstream saw the first request whole, and only
/// part of the second.
async fn changed_on_reopening(addr: SocketAddr) -> Vec<String> {
    let retry = RetryPolicy::new(
        FeignDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 2),
    );
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(DEADLINE))
        .layer(StatusRetryLayer::new(retry))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(client());
    let mut pattern = Pattern::new(&source(), LEN);
    pattern.short_from = 1;
    let report = RetryReport::new();
    let body = ReopenBody::with_length(pattern.clone(), LEN);
    let call = measured(upload(&svc, addr, "short", "retry", body, &report)).await;
    let seen = seen(addr, "short", 2).await;
    let summary = report.summary().map(|s| (s.get(), s.stop()));
    println!(
        "short: opened {} times, {summary:?}, upstream saw {seen:?}, {:.2} s",
        pattern.opened(),
        call.took.as_secs_f64()
    );
    let mut failures = Vec::new();
    match &call.outcome {
        Ok(answer) => failures.push(format!("short: answered {}", answer.status)),
        Err(err) => check_changed(&**err, &mut failures),
    }
    if (pattern.opened(), summary) != (2, Some((2, Stop::Failed))) {
        let opened = pattern.opened();
        failures.push(format!(
            "short: opened {opened} times, {summary:?}: retried"
        ));
    }
    match seen.as_slice() {
        [first, second] if *first == Seen::whole(LEN, "length") && !second.complete => {}
        _ => failures.push(format!("short: the upstream saw {seen:?}")),
    }
    failures
}

/// Checks that `err` is the typed error of a body of [`SHORT`] bytes where
/// [`LEN`] were announced.
fn check_changed(err: &(dyn std::error::Error + 'static), failures: &mut Vec<String>) {
    println!("short: {}", errors::report(err));
    if FailureKind::of(err) != FailureKind::RequestBody {
        failures.push(format!(
            "short: {} is not a request body error",
            FailureKind::of(err)
        ));
    }
    let changed = errors::find::<BodyChanged>(err).map(|c| (c.expected(), c.got()));
    if changed != Some((LEN, SHORT)) {
        failures.push(format!(
            "short: no BodyChanged below {}",
            errors::report(err)
        ));
    }
}

// ===== what the upstream saw =====

/// What the upstream received in one request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    len: u64,
    exact: bool,
    complete: bool,
    framing: String,
}

impl Seen {
    fn whole(len: u64, framing: &str) -> Self {
        Self {
            len,
            exact: true,
            complete: true,
            framing: framing.to_owned(),
        }
    }

    /// Parses a line of the upstream's report: `LEN EXACT COMPLETE FRAMING`.
    fn parse(line: &str) -> Option<Self> {
        let mut words = line.split(' ');
        Some(Self {
            len: words.next()?.parse().ok()?,
            exact: words.next()?.parse().ok()?,
            complete: words.next()?.parse().ok()?,
            framing: words.next()?.to_owned(),
        })
    }
}

/// What the upstream received for `call`, in order of arrival, once it has
/// recorded `count` requests (or after 20 s).
async fn seen(addr: SocketAddr, call: &str, count: usize) -> Vec<Seen> {
    let client = transport::Builder::new()
        .build_http::<Empty<Bytes>>()
        .expect("a client");
    let start = Instant::now();
    loop {
        let request = Request::get(format!("http://{addr}/seen/{call}"))
            .body(Empty::new())
            .expect("a request");
        let response = client.clone().oneshot(request).await.expect("the report");
        let text = response
            .into_body()
            .collect()
            .await
            .expect("read")
            .to_bytes();
        let text = String::from_utf8_lossy(&text);
        let seen: Vec<Seen> = text.lines().filter_map(Seen::parse).collect();
        if seen.len() >= count || start.elapsed() > Duration::from_secs(20) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ===== the upstream's process =====

/// The upstream, this binary again in a child process; ended when dropped.
struct Upstream {
    child: Child,
    addr: SocketAddr,
}

impl Upstream {
    fn spawn() -> Self {
        let mut child = Command::new(std::env::current_exe().expect("this binary"))
            .env(ROLE, "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the upstream's process");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("its output");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("its address");
        let addr = line.trim().parse().expect("an address");
        Self { child, addr }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

mod upstream {
    //! The upstream: checks every upload against the pattern as it arrives.

    use super::{piece, source, Seen, LEN};
    use bytes::Bytes;
    use http::{Request, Response, StatusCode};
    use http_body_util::{BodyExt, Full};
    use hyper::body::Incoming;
    use hyper_util::rt::TokioIo;
    use std::{
        collections::HashMap,
        convert::Infallible,
        io::Write,
        sync::{Arc, Mutex},
        time::Duration,
    };

    /// What the upstream keeps: the requests each call has had, and what
    /// each one brought.
    #[derive(Default)]
    struct State {
        arrived: HashMap<String, usize>,
        seen: HashMap<String, Vec<Seen>>,
    }

    type Shared = Arc<Mutex<State>>;

    /// Serves until this process's input closes (the test ended).
    pub(super) fn run() {
        std::thread::spawn(|| {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            std::process::exit(0);
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(serve());
    }

    async fn serve() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let mut out = std::io::stdout();
        writeln!(out, "{}", listener.local_addr().expect("its address")).expect("written");
        out.flush().expect("flushed");
        let source = source();
        let state = Shared::default();
        loop {
            let (stream, _) = listener.accept().await.expect("a connection");
            let (state, source) = (state.clone(), source.clone());
            let service = hyper::service::service_fn(move |request| {
                handle(state.clone(), source.clone(), request)
            });
            tokio::spawn(async move {
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                let _ = connection.await;
            });
        }
    }

    async fn handle(
        state: Shared,
        source: Bytes,
        request: Request<Incoming>,
    ) -> Result<Response<Full<Bytes>>, Infallible> {
        let path: Vec<String> = request.uri().path().split('/').map(str::to_owned).collect();
        Ok(match path.as_slice() {
            [_, seen, call] if seen == "seen" => report(&state, call),
            [_, upload, call, mode] if upload == "upload" => {
                let nth = arrive(&state, call);
                let seen = receive(&source, request).await;
                record(&state, call, seen);
                answer(&state, call, mode, nth).await
            }
            _ => respond(StatusCode::NOT_FOUND, ""),
        })
    }

    /// Counts a request of `call` in; its number, from 1.
    fn arrive(state: &Shared, call: &str) -> usize {
        let mut state = state.lock().expect("the state");
        let arrived = state.arrived.entry(call.to_owned()).or_default();
        *arrived += 1;
        *arrived
    }

    fn record(state: &Shared, call: &str, seen: Seen) {
        let mut state = state.lock().expect("the state");
        state.seen.entry(call.to_owned()).or_default().push(seen);
    }

    fn report(state: &Shared, call: &str) -> Response<Full<Bytes>> {
        let state = state.lock().expect("the state");
        let lines: String = state
            .seen
            .get(call)
            .into_iter()
            .flatten()
            .map(|seen| {
                format!(
                    "{} {} {} {}\n",
                    seen.len, seen.exact, seen.complete, seen.framing
                )
            })
            .collect();
        respond(StatusCode::OK, lines)
    }

    /// Reads the body as it arrives, checking every byte against the
    /// pattern, keeping none of it.
    async fn receive(source: &Bytes, request: Request<Incoming>) -> Seen {
        let expected: u64 = request
            .headers()
            .get("x-len")
            .and_then(|len| len.to_str().ok()?.parse().ok())
            .unwrap_or(LEN);
        let framing = match request.headers().contains_key(http::header::CONTENT_LENGTH) {
            true => "length",
            false => "chunked",
        };
        let mut body = request.into_body();
        let (mut len, mut exact) = (0, true);
        let complete = loop {
            match body.frame().await {
                None => break true,
                Some(Err(_)) => break false,
                Some(Ok(frame)) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    exact &= matches(source, len, &data);
                    len += data.len() as u64;
                }
            }
        };
        Seen {
            len,
            exact: exact && (len == expected || !complete),
            complete,
            framing: framing.to_owned(),
        }
    }

    /// Whether `data`, found at `at` in a body, is the pattern's.
    fn matches(source: &Bytes, mut at: u64, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            let (start, n) = piece(at, data.len() as u64);
            if data[..n] != source[start..start + n] {
                return false;
            }
            at += n as u64;
            data = &data[n..];
        }
        true
    }

    /// A call's first request gets a 503 (`retry`, with `Retry-After: 0`,
    /// which Feign's decoder retries), or a 200 held until the second copy
    /// has been received (`hedge`); every other, a 200.
    async fn answer(state: &Shared, call: &str, mode: &str, nth: usize) -> Response<Full<Bytes>> {
        match (mode, nth) {
            ("retry", 1) => {
                let mut response = respond(StatusCode::SERVICE_UNAVAILABLE, "again");
                let after = http::HeaderValue::from_static("0");
                response
                    .headers_mut()
                    .insert(http::header::RETRY_AFTER, after);
                response
            }
            ("hedge", 1) => {
                for _ in 0..6000 {
                    let received = state
                        .lock()
                        .expect("the state")
                        .seen
                        .get(call)
                        .map_or(0, Vec::len);
                    if received >= 2 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                tokio::time::sleep(Duration::from_secs(2)).await;
                respond(StatusCode::OK, "late")
            }
            _ => respond(StatusCode::OK, "ok"),
        }
    }

    fn respond(status: StatusCode, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(body.into()));
        *response.status_mut() = status;
        response
    }
}
