//! The fault matrix: every fault a real HTTP/1.1
//! or HTTP/2 upstream produces, against GET, POST and POST with an `Idempotency-Key`,
//! through the reactor and the standard presets, with the outcome (an error kind
//! or a final status), the exact number of requests the server saw, and an
//! upper bound on the elapsed time. The matrix is the table in [`matrix`].
//!
//! Print it as a summary table (observed outcome and count per cell):
//!
//! ```text
//! cargo test --test fault_matrix -- --nocapture
//! ```
//!
//! # Invariants, checked on every cell
//!
//! - a POST without a key is processed by the server at most once (a failure
//!   before sending reaches it zero times, and a stream the server refused
//!   unprocessed is not processed, however often either is retried);
//! - the server never sees more requests (processed or refused) than the
//!   policy allows attempts, nor more than the attempts the retry layer
//!   reports;
//! - no request arrives once the caller has finished (both counts are taken
//!   again after a grace of [`GRACE`]);
//! - the call, body included, never takes longer than the deadline plus
//!   [`OVERRUN`].
//!
//! # Substitutions
//!
//! The presets' limits (reactor: 8 s in all, 3 s per attempt; standard: 30 s,
//! 10 s) would make this test slow, so both stacks keep their preset's
//! decoder, retryer and switches and take shorter limits:
//!
//! - limits: a deadline of [`DEADLINE`] (3 s) and attempts of [`ATTEMPT`]
//!   (1.5 s), over a transport with a read timeout of [`READ`] (500 ms) and
//!   a connect timeout of [`CONNECT`] (200 ms). The read timeout is well
//!   below the attempt limit, so a silent upstream is a read timeout here,
//!   never an attempt timeout. (Tighter limits, 2 s / 500 ms / 300 ms, flipped
//!   outcomes when three copies of this test ran at once on two cores: the
//!   attempt timeout beat the read timeout, whose clock starts later.)
//! - reactor: `presets::reactor().retry()` unchanged (503 only, two retries 10 ms
//!   apart, `Retry-After` ignored, not deadline-aware);
//! - standard: `presets::standard().retry()` with its switches, its decoder
//!   (transient statuses and connect failures, `Retry-After` read on 429 and
//!   503) and its deadline-aware margin (`MIN_USEFUL_ATTEMPT`, 500 ms) kept;
//!   only the backoff is replaced, since the preset's starts at 2 s: 10 ms
//!   initial, x2, 4 attempts, decorrelated jitter (as the preset) with a
//!   fixed seed. Its cap, also the cap on a delay the server asks for, is the
//!   scaled deadline (3 s), as the preset's cap is its deadline (30 s): a long
//!   `Retry-After` then meets deadline-aware scheduling as in the preset,
//!   where a cap far below the deadline would hide it.
//!
//! # HTTP/2 rows
//!
//! The rows named `h2 ...` run against `MockServer::start_h2` (HTTP/2 over
//! cleartext TCP, prior knowledge) with the same stacks over a client built
//! with `transport::Builder::http2_only(true)`. Their faults:
//!
//! - a refused stream: `RST_STREAM` with `REFUSED_STREAM` before the request
//!   is read (RFC 9113, section 8.7: not processed, safe to retry for any
//!   method); the connection stays up and the next attempt opens a new stream
//!   on it;
//! - a `GOAWAY` below the stream: the server announces a last stream under
//!   the request's and closes the connection; the next attempt connects
//!   again;
//! - a `GOAWAY` after processing: the request is read, then a `GOAWAY`
//!   covering it and a close, without a response; the request may have been
//!   acted on.
//!
//! The server counts the first two as *refused* (`refused_count`), apart from
//! the requests it processed (`request_count`); a cell states both. Both
//! refusals are [`FailureKind::Unprocessed`], a before-send kind: the
//! standard preset's decoder retries it for every method until its attempts
//! run out, while the reactor preset retries 503 only and returns it at once.
//!
//! Real clock and loopback only (127.0.0.1); every cell has its own server
//! and client, and all cells run at once. Each timing is at least 0.5 s from
//! the limit that would flip it, so a loaded machine does not flip an
//! outcome.

use crate::support;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    policy::{ExponentialBackoff, Jitter, IDEMPOTENCY_KEY},
    presets, transport, BoxError, FailureKind, ResiliencePolicy, RetryReport, Stop,
};
use http_resilience_mock::{MockResponse, MockServer, Unresponsive};
use std::{
    fmt,
    future::Future,
    time::{Duration, SystemTime},
};
use tokio::{task::JoinSet, time::Instant};
use tower::{util::BoxCloneService, Layer, ServiceExt};

/// The budget of every call.
const DEADLINE: Duration = Duration::from_secs(3);
/// The limit on every attempt.
const ATTEMPT: Duration = Duration::from_millis(1500);
/// The transport's longest wait for the head or the next body frame.
const READ: Duration = Duration::from_millis(500);
/// The transport's limit on setting up one TCP connection.
const CONNECT: Duration = Duration::from_millis(200);
/// How long the server is watched for stray requests after the call.
const GRACE: Duration = Duration::from_millis(150);
/// How far past the deadline a call may end (timer granularity, a loaded
/// machine).
const OVERRUN: Duration = Duration::from_millis(250);
/// The bound on the elapsed time of a row whose calls end within a read
/// timeout or a few short backoffs.
const QUICK: Duration = Duration::from_millis(1500);
/// The guard on every await that could hang: far above every limit.
const GUARD: Duration = Duration::from_secs(10);
/// The most attempts of each preset, the first included.
const REACTOR_ATTEMPTS: u32 = 3;
const STANDARD_ATTEMPTS: u32 = 4;
/// Responses queued per server: more than any policy's attempts, so an
/// unexpected extra attempt meets the fault too and shows in the count.
const QUEUED: usize = 8;

const fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

// ===== the matrix =====

/// The matrix: one row per fault, six cells per row (reactor, then standard;
/// GET, POST, POST with a key in each).
///
/// A cell is what one call must end with, the requests the server must see,
/// and why the retry layer made no further attempt ([`Stop`]):
///
/// - `status(503, 3, Exhausted)`: a final 503 (body read in full) after 3
///   requests;
/// - `error(K, 1, Failed)`: the error kind `K` after 1 request;
/// - `unsent(K, 4, Exhausted)`: the error `K` after 4 attempts, none of which
///   reached the server (for every other cell attempts equal requests);
/// - `refused(K, 4, Exhausted)`: the error `K` after 4 attempts, each of which
///   reached the HTTP/2 server and was refused there unprocessed: 0 processed,
///   4 refused;
/// - `body(K)`: a 200 head after 1 request (the head commits the call), then
///   reading the body fails with `K`;
/// - `retried(503, n)` and `cut(503, n)`: a status storm, see there.
///
/// `within` bounds the elapsed time, body included, of every cell of the row.
#[rustfmt::skip]
fn matrix() -> Vec<Row> {
    use {FailureKind::*, Stop::*};
    vec![
        //       fault                         how the upstream fails                                                     within               reactor: GET, POST, POST+key                 standard: GET, POST, POST+key
        // Before the request is sent: the reactor preset retries no error; the standard retries
        // connect failures for every method, until its 4 attempts run out.
        Row::new("connection refused",         Fault::NothingListens,                                                     QUICK,               [unsent(ConnectRefused, 1, Failed); 3],   [unsent(ConnectRefused, 4, Exhausted); 3]),
        Row::new("connect timeout",            Fault::FullBacklog,                                                        ms(2000),            [unsent(ConnectTimeout, 1, Failed); 3],   [unsent(ConnectTimeout, 4, Exhausted); 3]),
        // After the request was written: no preset retries these (the upstream may
        // have acted), and a head, once returned, commits the call.
        Row::new("reset before the head",      Fault::Script(MockResponse::reset_before_response),                        QUICK,               [error(ConnectionReset, 1, Failed); 3],   [error(ConnectionReset, 1, Failed); 3]),
        Row::new("close before the head",      Fault::Script(MockResponse::close_before_response),                        QUICK,               [error(ConnectionClosed, 1, Failed); 3],  [error(ConnectionClosed, 1, Failed); 3]),
        Row::new("reset mid-body",             Fault::Script(|| MockResponse::reset_mid_body("0123456789", 4)),           QUICK,               [body(ConnectionReset); 3],               [body(ConnectionReset); 3]),
        Row::new("close after the head",       Fault::Script(|| MockResponse::close_after_head(200)),                     QUICK,               [body(ConnectionClosed); 3],              [body(ConnectionClosed); 3]),
        Row::new("no response",                Fault::Script(MockResponse::no_response),                                  QUICK,               [error(ReadTimeout, 1, Failed); 3],       [error(ReadTimeout, 1, Failed); 3]),
        Row::new("stall after the head",       Fault::Script(|| MockResponse::stall_after_head(200)),                     QUICK,               [body(ReadTimeout); 3],                   [body(ReadTimeout); 3]),
        Row::new("drip slower than read gap",  Fault::Script(|| MockResponse::drip("abcdef", 1, ms(1500))),               QUICK,               [body(ReadTimeout); 3],                   [body(ReadTimeout); 3]),
        Row::new("drip past the deadline",     Fault::Script(|| MockResponse::drip("0123456789".repeat(6), 1, ms(100))),  DEADLINE + OVERRUN,  [body(Deadline); 3],                      [body(Deadline); 3]),
        // 503: the reactor preset retries it and ignores Retry-After. The standard reads Retry-After
        // (capped at 3 s): with 1 s waits the third retry would leave less than the 500 ms
        // a useful attempt needs; 2 minutes or 10^23 s never fit; past, garbage and
        // negative values fall back to the backoff.
        Row::new("503 storm",                  Fault::Script(|| MockResponse::new(503)),                                  QUICK,               retried(503, 3),                          retried(503, 4)),
        Row::new("503, Retry-After: 1",        Fault::Script(|| ra(503, "1")),                                            ms(2600),            retried(503, 3),                          cut(503, 3)),
        Row::new("503, Retry-After: date+2m",  Fault::Script(|| ra(503, &date(120))),                                     QUICK,               retried(503, 3),                          cut(503, 1)),
        Row::new("503, Retry-After: past",     Fault::Script(|| ra(503, &date(-600))),                                    QUICK,               retried(503, 3),                          retried(503, 4)),
        Row::new("503, Retry-After: garbage",  Fault::Script(|| ra(503, "soon, promise")),                                QUICK,               retried(503, 3),                          retried(503, 4)),
        Row::new("503, Retry-After: -5",       Fault::Script(|| ra(503, "-5")),                                           QUICK,               retried(503, 3),                          retried(503, 4)),
        Row::new("503, Retry-After: 10^23",    Fault::Script(|| ra(503, "99999999999999999999999")),                      QUICK,               retried(503, 3),                          cut(503, 1)),
        // 429: not retried by the reactor preset; as 503 for the standard.
        Row::new("429 storm",                  Fault::Script(|| MockResponse::new(429)),                                  QUICK,               [status(429, 1, Failed); 3],              retried(429, 4)),
        Row::new("429, Retry-After: 1",        Fault::Script(|| ra(429, "1")),                                            ms(2600),            [status(429, 1, Failed); 3],              cut(429, 3)),
        Row::new("429, Retry-After: date+2m",  Fault::Script(|| ra(429, &date(120))),                                     QUICK,               [status(429, 1, Failed); 3],              cut(429, 1)),
        Row::new("429, Retry-After: past",     Fault::Script(|| ra(429, &date(-600))),                                    QUICK,               [status(429, 1, Failed); 3],              retried(429, 4)),
        Row::new("429, Retry-After: garbage",  Fault::Script(|| ra(429, "soon, promise")),                                QUICK,               [status(429, 1, Failed); 3],              retried(429, 4)),
        Row::new("429, Retry-After: -5",       Fault::Script(|| ra(429, "-5")),                                           QUICK,               [status(429, 1, Failed); 3],              retried(429, 4)),
        Row::new("429, Retry-After: 10^23",    Fault::Script(|| ra(429, "99999999999999999999999")),                      QUICK,               [status(429, 1, Failed); 3],              cut(429, 1)),
        // HTTP/2. Refused unprocessed: safe for any method, so the standard retries even a
        // POST without a key, and the server processes none of the attempts.
        Row::new("h2 refused stream",          Fault::H2(MockResponse::refuse_stream),                                    QUICK,               [refused(Unprocessed, 1, Failed); 3],     [refused(Unprocessed, 4, Exhausted); 3]),
        Row::new("h2 GOAWAY, unprocessed",     Fault::H2(MockResponse::goaway_unprocessed),                               QUICK,               [refused(Unprocessed, 1, Failed); 3],     [refused(Unprocessed, 4, Exhausted); 3]),
        // Processed, then the connection goes away without a response: under hyper, the
        // stream fails with a broken pipe, a failure after sending that no preset retries.
        Row::new("h2 GOAWAY after processing", Fault::H2(MockResponse::goaway_after_processing),                          QUICK,               [error(ConnectionReset, 1, Failed); 3],   [error(ConnectionReset, 1, Failed); 3]),
        // The same statuses as over HTTP/1.1: streams on one connection.
        Row::new("h2 503 storm",               Fault::H2(|| MockResponse::new(503)),                                      QUICK,               retried(503, 3),                          retried(503, 4)),
    ]
}

/// `status` with `Retry-After: value`.
fn ra(status: u16, value: &str) -> MockResponse {
    MockResponse::new(status).with_header("retry-after", value)
}

/// An HTTP-date `offset` seconds from now (in the past when negative).
fn date(offset: i64) -> String {
    let now = SystemTime::now();
    let delta = Duration::from_secs(offset.unsigned_abs());
    httpdate::fmt_http_date(if offset >= 0 {
        now + delta
    } else {
        now - delta
    })
}

/// A storm of `code` through a policy that retries it, every attempt
/// answered: `attempts` requests for GET and for POST with a key (the retries
/// run out), one for a POST without a key (a status retry needs an
/// idempotent request).
const fn retried(code: u16, attempts: usize) -> [Cell; 3] {
    [
        status(code, attempts, Stop::Exhausted),
        status(code, 1, Stop::NotIdempotent),
        status(code, attempts, Stop::Exhausted),
    ]
}

/// As [`retried`], but deadline-aware scheduling stops the storm after
/// `attempts`: the wait the server asks for (capped at the retryer's
/// maximum) plus a useful attempt no longer fits before the deadline.
const fn cut(code: u16, attempts: usize) -> [Cell; 3] {
    [
        status(code, attempts, Stop::WouldMissDeadline),
        status(code, 1, Stop::NotIdempotent),
        status(code, attempts, Stop::WouldMissDeadline),
    ]
}

const fn status(code: u16, seen: usize, stop: Stop) -> Cell {
    Cell::new(Outcome::Status(code), seen, seen as u32, stop)
}

const fn error(kind: FailureKind, seen: usize, stop: Stop) -> Cell {
    Cell::new(Outcome::Error(kind), seen, seen as u32, stop)
}

/// A 200 head after one request: the head commits the call, so whatever the
/// body does next, the retry layer had accepted it.
const fn body(kind: FailureKind) -> Cell {
    Cell::new(Outcome::Body(kind), 1, 1, Stop::Accepted)
}

const fn unsent(kind: FailureKind, attempts: u32, stop: Stop) -> Cell {
    Cell::new(Outcome::Error(kind), 0, attempts, stop)
}

/// The error `K` after `attempts` requests that all reached an HTTP/2 server
/// and were all refused unprocessed: none processed.
const fn refused(kind: FailureKind, attempts: u32, stop: Stop) -> Cell {
    Cell {
        refused: attempts as usize,
        ..Cell::new(Outcome::Error(kind), 0, attempts, stop)
    }
}

// ===== the test =====

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_fault_meets_the_matrix_and_the_invariants() {
    let rows = matrix();
    let mut cells = JoinSet::new();
    for (index, row) in rows.iter().enumerate() {
        for (column, (preset, method)) in COLUMNS.into_iter().enumerate() {
            let fault = row.fault;
            cells.spawn(async move { (index, column, run(preset, method, fault).await) });
        }
    }
    let mut observed = vec![[None, None, None, None, None, None]; rows.len()];
    let joined = guarded(async {
        while let Some(joined) = cells.join_next().await {
            let (index, column, cell) = joined.expect("a cell panicked");
            observed[index][column] = Some(cell);
        }
    })
    .await;
    joined.expect("the matrix hung past the guard");

    let mut failures = Vec::new();
    let mut summary = Summary::default();
    for (row, observed) in rows.iter().zip(&observed) {
        let observed = observed
            .iter()
            .map(|cell| cell.clone().expect("every cell ran"))
            .collect::<Vec<_>>();
        let expected = row.reactor.iter().chain(&row.standard);
        let mut line = Vec::new();
        for (((preset, method), expected), cell) in COLUMNS.into_iter().zip(expected).zip(&observed)
        {
            let at = format!("{} / {preset} / {method}", row.fault_name);
            let mut ok = true;
            for broken in cell.invariants(preset, method) {
                failures.push(format!("{at}: invariant: {broken}"));
                ok = false;
            }
            if (
                cell.outcome,
                cell.seen,
                cell.refused,
                cell.attempts,
                cell.stop,
            ) != (
                expected.outcome,
                expected.seen,
                expected.refused,
                expected.attempts,
                Some(expected.stop),
            ) {
                failures.push(format!(
                    "{at}: expected {expected} ({}), observed {cell} ({})",
                    expected.stop,
                    cell.stop.map_or("no summary".to_owned(), |s| s.to_string())
                ));
                ok = false;
            }
            if cell.elapsed > row.within {
                failures.push(format!(
                    "{at}: took {:?}, over the row's bound {:?}",
                    cell.elapsed, row.within
                ));
                ok = false;
            }
            line.push(format!("{}{cell}", if ok { "" } else { "!" }));
        }
        let slowest = observed.iter().map(|c| c.elapsed).max().unwrap_or_default();
        summary.push(row.fault_name, line, slowest);
    }
    println!("{summary}");
    assert!(
        failures.is_empty(),
        "{} cell(s) broke the matrix:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ===== rows, cells, outcomes =====

/// One fault and what each column must observe.
struct Row {
    fault_name: &'static str,
    fault: Fault,
    within: Duration,
    reactor: [Cell; 3],
    standard: [Cell; 3],
}

impl Row {
    fn new(
        fault_name: &'static str,
        fault: Fault,
        within: Duration,
        reactor: [Cell; 3],
        standard: [Cell; 3],
    ) -> Self {
        Self {
            fault_name,
            fault,
            within,
            reactor,
            standard,
        }
    }
}

/// How the upstream fails.
#[derive(Clone, Copy)]
enum Fault {
    /// Nothing listens on the port: connecting is refused.
    NothingListens,
    /// A listener whose accept queue is full: connecting hangs.
    FullBacklog,
    /// A mock server answering every request with this script.
    Script(fn() -> MockResponse),
    /// An HTTP/2 mock server answering every stream with this script.
    H2(fn() -> MockResponse),
}

/// What a call ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// A response with this status, whose body was read in full.
    Status(u16),
    /// An error of this kind instead of a response.
    Error(FailureKind),
    /// A 200 head, then reading the body failed with this kind.
    Body(FailureKind),
    /// A response with this status, then reading the body failed.
    BodyAfter(u16, FailureKind),
    /// The call or the body hung past the guard.
    Hung,
}

/// An expected cell.
#[derive(Debug, Clone, Copy)]
struct Cell {
    outcome: Outcome,
    /// Requests the server processed.
    seen: usize,
    /// Requests the (HTTP/2) server refused unprocessed.
    refused: usize,
    attempts: u32,
    stop: Stop,
}

impl Cell {
    const fn new(outcome: Outcome, seen: usize, attempts: u32, stop: Stop) -> Self {
        Self {
            outcome,
            seen,
            refused: 0,
            attempts,
            stop,
        }
    }
}

/// What one call did.
#[derive(Debug, Clone)]
struct Observed {
    outcome: Outcome,
    /// Requests the server processed when the call ended.
    seen: usize,
    /// Requests the server refused unprocessed when the call ended.
    refused: usize,
    /// Both counts after the grace.
    seen_later: usize,
    refused_later: usize,
    /// Attempts the retry layer reports.
    attempts: u32,
    stop: Option<Stop>,
    elapsed: Duration,
}

impl Observed {
    /// The invariants that this call broke.
    fn invariants(&self, preset: Preset, method: Kind) -> Vec<String> {
        let mut broken = Vec::new();
        if method == Kind::Post && self.seen > 1 {
            broken.push(format!(
                "a POST without a key was processed by the server {} times",
                self.seen
            ));
        }
        let allowed = preset.max_attempts();
        let arrived = self.seen + self.refused;
        if self.attempts > allowed || arrived > allowed as usize {
            broken.push(format!(
                "{} attempts, {} requests seen ({} refused): more than the {allowed} allowed",
                self.attempts, arrived, self.refused
            ));
        }
        if arrived > self.attempts as usize {
            broken.push(format!(
                "{arrived} requests seen ({} refused) for {} attempts",
                self.refused, self.attempts
            ));
        }
        if (self.seen_later, self.refused_later) != (self.seen, self.refused) {
            broken.push(format!(
                "{} request(s) arrived after the call ended",
                self.seen_later + self.refused_later - arrived
            ));
        }
        if self.elapsed > DEADLINE + OVERRUN {
            broken.push(format!(
                "took {:?}, past the deadline {DEADLINE:?} plus {OVERRUN:?}",
                self.elapsed
            ));
        }
        broken
    }
}

// ===== columns: presets and methods =====

/// The six columns, in the order of a row's cells.
const COLUMNS: [(Preset, Kind); 6] = [
    (Preset::Reactor, Kind::Get),
    (Preset::Reactor, Kind::Post),
    (Preset::Reactor, Kind::PostWithKey),
    (Preset::Standard, Kind::Get),
    (Preset::Standard, Kind::Post),
    (Preset::Standard, Kind::PostWithKey),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Preset {
    Reactor,
    Standard,
}

impl Preset {
    fn max_attempts(self) -> u32 {
        match self {
            Preset::Reactor => REACTOR_ATTEMPTS,
            Preset::Standard => STANDARD_ATTEMPTS,
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Preset::Reactor => "reactor",
            Preset::Standard => "standard",
        })
    }
}

/// The request of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Get,
    Post,
    PostWithKey,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Kind::Get => "GET",
            Kind::Post => "POST",
            Kind::PostWithKey => "POST+key",
        })
    }
}

fn request(kind: Kind, uri: http::Uri, report: &RetryReport) -> Request<Full<Bytes>> {
    let builder = Request::builder().uri(uri).extension(report.clone());
    let builder = match kind {
        Kind::Get => builder.method(Method::GET),
        Kind::Post => builder.method(Method::POST),
        Kind::PostWithKey => builder
            .method(Method::POST)
            .header(IDEMPOTENCY_KEY, "order-42"),
    };
    let body = match kind {
        Kind::Get => Full::default(),
        Kind::Post | Kind::PostWithKey => Full::from("{\"amount\":1}"),
    };
    builder.body(body).expect("a valid request")
}

// ===== running one cell =====

type Stack = BoxCloneService<Request<Full<Bytes>>, http::Response<support::Body>, BoxError>;

/// The preset's three layers (`ResiliencePolicy::layer`) over a real client with
/// this test's transport limits, its policy kept and its limits shortened
/// (see the module docs).
fn stack(preset: Preset, http2: bool) -> Stack {
    let client = transport::Builder::new()
        .connect_timeout(CONNECT)
        .read_timeout(READ)
        .http2_only(http2)
        .build_http::<Full<Bytes>>()
        .expect("valid transport");
    match preset {
        Preset::Reactor => {
            let retry = presets::reactor().retry().clone();
            assert_eq!(
                support::shown(&retry, "retries"),
                (REACTOR_ATTEMPTS - 1).to_string()
            );
            assert_eq!(
                support::shown(&retry, "deadline_margin"),
                "None",
                "not deadline-aware"
            );
            let resilience = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry).expect("valid limits");
            BoxCloneService::new(resilience.layer().layer(client))
        }
        Preset::Standard => {
            let retry = presets::standard().retry().clone();
            assert_eq!(
                support::shown(&retry, "max_attempts"),
                STANDARD_ATTEMPTS.to_string()
            );
            assert_eq!(
                support::shown(&retry, "jitter"),
                format!("{:?}", Jitter::Decorrelated)
            );
            assert_eq!(
                support::shown(&retry, "deadline_margin"),
                format!("{:?}", Some(Duration::from_millis(500))),
                "deadline-aware"
            );
            let retry = retry.map(
                |decoder| decoder,
                |_| {
                    ExponentialBackoff::new(ms(10), 2.0, DEADLINE, STANDARD_ATTEMPTS)
                        .expect("valid backoff")
                        .with_jitter(Jitter::Decorrelated)
                        .with_seed(1)
                },
            );
            let resilience = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry).expect("valid limits");
            BoxCloneService::new(resilience.layer().layer(client))
        }
    }
}

/// Where a cell sends its call; holds the server (or the socket) alive.
enum Upstream {
    /// A bound socket that does not listen: connecting is refused, and the
    /// port cannot be taken by another cell's server meanwhile.
    Refused {
        _socket: tokio::net::TcpSocket,
        addr: std::net::SocketAddr,
    },
    Unresponsive(Unresponsive),
    Server(MockServer),
}

impl Upstream {
    async fn start(fault: Fault) -> Self {
        match fault {
            Fault::NothingListens => {
                let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
                socket
                    .bind(([127, 0, 0, 1], 0).into())
                    .expect("a loopback port");
                let addr = socket.local_addr().expect("bound");
                Upstream::Refused {
                    _socket: socket,
                    addr,
                }
            }
            Fault::FullBacklog => Upstream::Unresponsive(
                guarded(Unresponsive::start())
                    .await
                    .expect("hung")
                    .expect("an unresponsive listener"),
            ),
            Fault::Script(script) | Fault::H2(script) => {
                let started = match fault {
                    Fault::H2(_) => guarded(MockServer::start_h2()).await,
                    _ => guarded(MockServer::start()).await,
                };
                let server = started.expect("hung").expect("a mock server");
                for _ in 0..QUEUED {
                    server.enqueue(script());
                }
                Upstream::Server(server)
            }
        }
    }

    fn uri(&self) -> http::Uri {
        let path = "/orders";
        match self {
            Upstream::Refused { addr, .. } => {
                format!("http://{addr}{path}").parse().expect("a uri")
            }
            Upstream::Unresponsive(unresponsive) => unresponsive.uri(path),
            Upstream::Server(server) => server.uri(path),
        }
    }

    /// Requests the server processed; a refused or unresponsive upstream sees none.
    fn request_count(&self) -> usize {
        match self {
            Upstream::Server(server) => server.request_count(),
            Upstream::Refused { .. } | Upstream::Unresponsive(_) => 0,
        }
    }

    /// Requests an HTTP/2 server refused unprocessed.
    fn refused_count(&self) -> usize {
        match self {
            Upstream::Server(server) => server.refused_count(),
            Upstream::Refused { .. } | Upstream::Unresponsive(_) => 0,
        }
    }
}

/// One call of `method` through `preset` against `fault`: the outcome, body
/// included, and the counts.
async fn run(preset: Preset, method: Kind, fault: Fault) -> Observed {
    let upstream = Upstream::start(fault).await;
    let svc = stack(preset, matches!(fault, Fault::H2(_)));
    let report = RetryReport::new();
    let request = request(method, upstream.uri(), &report);
    let started = Instant::now();
    let (outcome, attempts, stop) = match guarded(svc.oneshot(request)).await {
        None => (Outcome::Hung, report.attempts(), None),
        Some(Err(err)) => (
            Outcome::Error(FailureKind::of(&*err)),
            report.attempts(),
            report.summary().map(|s| s.stop()),
        ),
        Some(Ok(response)) => {
            let status = response.status().as_u16();
            // NOTE: the report, not the response: a response whose first
            // attempt was accepted carries no `Attempts`.
            let summary = report.summary();
            let attempts = summary.map_or(0, |s| s.get());
            let outcome = match guarded(response.into_body().collect()).await {
                None => Outcome::Hung,
                Some(Ok(_)) => Outcome::Status(status),
                Some(Err(err)) if status == 200 => Outcome::Body(FailureKind::of(&*err)),
                Some(Err(err)) => Outcome::BodyAfter(status, FailureKind::of(&*err)),
            };
            (outcome, attempts, summary.map(|s| s.stop()))
        }
    };
    let elapsed = started.elapsed();
    let seen = upstream.request_count();
    let refused = upstream.refused_count();
    // NOTE: the call took the stack (and its client) and dropped it when it
    // ended; anything still sent would arrive within the grace.
    tokio::time::sleep(GRACE).await;
    Observed {
        outcome,
        seen,
        refused,
        seen_later: upstream.request_count(),
        refused_later: upstream.refused_count(),
        attempts,
        stop,
        elapsed,
    }
}

/// Awaits `future` under [`GUARD`]; `None` if it hung.
async fn guarded<F: Future>(future: F) -> Option<F::Output> {
    tokio::time::timeout(GUARD, future).await.ok()
}

// ===== the summary =====

/// Short names, so that a row fits on one line.
fn short(kind: FailureKind) -> &'static str {
    match kind {
        FailureKind::Deadline => "deadline",
        FailureKind::AttemptTimeout => "attempt-timeout",
        FailureKind::ReadTimeout => "read-timeout",
        FailureKind::ConnectTimeout => "connect-timeout",
        FailureKind::ConnectRefused => "refused",
        FailureKind::Dns => "dns",
        FailureKind::Tls => "tls",
        FailureKind::Connect => "connect",
        FailureKind::Unsent => "unsent",
        FailureKind::Unprocessed => "unprocessed",
        FailureKind::ConnectionReset => "reset",
        FailureKind::ConnectionClosed => "closed",
        FailureKind::Transport => "transport",
        _ => "other",
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Status(status) => write!(f, "{status}"),
            Outcome::Error(kind) => f.write_str(short(*kind)),
            Outcome::Body(kind) => write!(f, "body:{}", short(*kind)),
            Outcome::BodyAfter(status, kind) => write!(f, "{status}+body:{}", short(*kind)),
            Outcome::Hung => f.write_str("hung"),
        }
    }
}

/// `outcome xN` (N requests processed), `rM` when M were refused, and the
/// attempts when they differ from both together.
fn label(outcome: Outcome, seen: usize, refused: usize, attempts: u32) -> String {
    let mut label = format!("{outcome} x{seen}");
    if refused > 0 {
        label.push_str(&format!(" r{refused}"));
    }
    if seen + refused != attempts as usize {
        label.push_str(&format!("/{attempts}try"));
    }
    label
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&label(self.outcome, self.seen, self.refused, self.attempts))
    }
}

impl fmt::Display for Observed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&label(self.outcome, self.seen, self.refused, self.attempts))
    }
}

#[derive(Default)]
struct Summary {
    lines: Vec<(&'static str, Vec<String>, Duration)>,
}

impl Summary {
    fn push(&mut self, fault: &'static str, cells: Vec<String>, slowest: Duration) {
        self.lines.push((fault, cells, slowest));
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const FAULT: usize = 26;
        const CELL: usize = 23;
        writeln!(
            f,
            "\nfault matrix, HTTP/1.1 (h2 rows: HTTP/2, prior knowledge): deadline {DEADLINE:?}, attempt {ATTEMPT:?}, read {READ:?}, connect {CONNECT:?}"
        )?;
        writeln!(
            f,
            "xN: requests the server processed; rN: requests it refused unprocessed (HTTP/2); \
             /Mtry: attempts, when fewer reached the server; \
             body:K: a 200 head, then the body failed with K; !: differs from the table"
        )?;
        write!(f, "{:FAULT$}", "fault")?;
        for (preset, method) in COLUMNS {
            write!(f, " | {:CELL$}", format!("{preset} {method}"))?;
        }
        writeln!(f, " | slowest")?;
        for (fault, cells, slowest) in &self.lines {
            write!(f, "{fault:FAULT$}")?;
            for cell in cells {
                write!(f, " | {cell:CELL$}")?;
            }
            writeln!(f, " | {} ms", slowest.as_millis())?;
        }
        Ok(())
    }
}
