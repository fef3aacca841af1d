//! The scripted server: accept loop, connection tasks and response writing.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{Method, StatusCode};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use crate::builder::{Limits, MockServerBuilder};
use crate::request::{RecordedRequest, RequestReader};
use crate::response::{Behaviour, MockResponse};

/// The interim response sent to a client that waits for `100 Continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// How long the accept loop backs off after a failed accept (e.g. too many open files).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// A scripted HTTP/1.1 or HTTP/2 server on a loopback port.
///
/// [`start`](Self::start) speaks HTTP/1.1, [`start_h2`](Self::start_h2) HTTP/2 over
/// cleartext TCP with prior knowledge (h2c, no upgrade). Responses are queued with [`enqueue`](Self::enqueue) and consumed one per request, in
/// order, whichever connection the request arrives on. When the queue is empty, a request
/// is answered with `500 Internal Server Error`, the header `x-mock: unscripted` and a short
/// body saying that no response was queued.
///
/// Connections are kept alive between requests (the client may pool them) unless the client
/// sends `Connection: close` (or speaks HTTP/1.0 without `Connection: keep-alive`), or the
/// scripted response carries `Connection: close`. A malformed request or a head over 64 KiB
/// closes the connection without a response and without being recorded. A body is read in
/// full whatever its length; its record keeps its first 16 MiB. A client that stays silent is let go after an idle timeout (see [Limits](Self#limits)).
///
/// Every wait (head delays, drip pauses, the idle timeout) uses tokio's timer, so it follows
/// tokio's clock, including paused time.
///
/// Dropping the server stops accepting and aborts every connection task, which closes every
/// connection; dropping does not need a runtime context.
///
/// # Processed and refused requests
///
/// [`requests`](Self::requests) and [`request_count`](Self::request_count) hold the requests
/// the server *processed*: read in full before the scripted behaviour was applied. A request
/// turned away unread over HTTP/2 ([`Behaviour::RefuseStream`],
/// [`Behaviour::GoAwayUnprocessed`]) is not among them; it is counted by
/// [`refused_count`](Self::refused_count) instead, so a test can tell "the request reached the
/// server" from "the server was asked and said no".
///
/// # Limits
///
/// A client, whether faulty or hostile, cannot make the server hold memory or a connection
/// without bound. The limits that can be changed are set on a [`MockServerBuilder`]:
///
/// - **Idle timeout**, 10 s by default ([`MockServerBuilder::idle_timeout`]): the longest the
///   server waits on the client. Over HTTP/1.1 a request head must arrive in full within it,
///   counted from when the server starts waiting for one (the connection was accepted, or the
///   previous response was written), and a request body must not pause for longer between two
///   reads; past it, the server closes the connection (FIN) without a response, and the
///   request is not recorded. Over HTTP/2 the client preface must arrive within it; a
///   connection on which no stream is being answered is closed once it has stayed so for that
///   long (a `GOAWAY` with `NO_ERROR`, then the close), and a request body that pauses for
///   longer has its stream reset with `CANCEL`, unrecorded. The server's own scripted waits
///   (head delays, drips, [`Behaviour::NoResponse`], [`Behaviour::StallAfterHead`]) never
///   count against it.
/// - **Recorded bodies**, 16 MiB each by default ([`MockServerBuilder::max_recorded_body`]):
///   a longer body is read in full and answered as scripted, but its [`RecordedRequest`]
///   keeps only its first bytes and says so
///   ([`is_body_truncated`](RecordedRequest::is_body_truncated),
///   [`body_len`](RecordedRequest::body_len)). A body at or under the limit is recorded whole,
///   as it always was.
/// - **Request heads** (HTTP/1.1): 64 KiB and 128 header fields; a longer head closes the
///   connection.
/// - **Frames** (HTTP/2): 16 KiB, the protocol's initial `SETTINGS_MAX_FRAME_SIZE`, which the
///   server keeps. A frame is read by its header and its payload passed on as it arrives, so a
///   longer frame is never buffered: it closes the connection with `GOAWAY`
///   `FRAME_SIZE_ERROR`.
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<State>,
    connections: Arc<Mutex<Option<JoinSet<()>>>>,
    accept: AbortHandle,
}

impl MockServer {
    /// Starts a server on `127.0.0.1` with a port chosen by the system.
    ///
    /// Must be called within a tokio runtime, which runs the accept loop and the connection
    /// tasks.
    ///
    /// # Errors
    ///
    /// Fails if the loopback listener cannot be bound.
    pub async fn start() -> io::Result<Self> {
        Self::builder().start().await
    }

    /// Starts an HTTP/2 server on `127.0.0.1` with a port chosen by the system.
    ///
    /// It speaks HTTP/2 over cleartext TCP and expects the client to know it in advance (h2c
    /// with prior knowledge: the connection starts with the HTTP/2 preface, no `Upgrade`).
    /// Requests share the queue, the recording and the connection counts of an HTTP/1.1
    /// server, one scripted response per stream, taken in the order the streams are opened.
    /// A stream the HTTP/2 layer rejects before the server sees it (a malformed request, reset
    /// with `PROTOCOL_ERROR`) takes no scripted response and is neither recorded nor counted.
    /// The scripted headers are sent as given, less the fields HTTP/2 forbids
    /// (`Connection`, `Keep-Alive`, `Transfer-Encoding`, ...), with `content-length` added as
    /// on HTTP/1.1; a status outside `100..=999` is sent as `500`.
    ///
    /// Must be called within a tokio runtime.
    ///
    /// # Errors
    ///
    /// Fails if the loopback listener cannot be bound.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience_mock::{MockResponse, MockServer};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let server = MockServer::start_h2().await?;
    /// server.enqueue(MockResponse::refuse_stream());
    /// server.enqueue(MockResponse::ok("second try"));
    /// // An HTTP/2 client with prior knowledge (hyper's `http2_only`, for example) gets
    /// // RST_STREAM(REFUSED_STREAM) for its first request and "second try" for the next.
    /// assert_eq!(server.refused_count(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start_h2() -> io::Result<Self> {
        Self::builder().start_h2().await
    }

    /// Starts an HTTP/1.1 server on a chosen loopback address: typically one where nothing
    /// listened until now, so that a client was refused there first, as by an upstream that
    /// restarts (see [`vacant_addr`](crate::vacant_addr)).
    ///
    /// Dropping the server stops it accepting (once its tasks have ended, on the runtime's next
    /// turn): the address refuses connections again, and a new server can start on it. A test
    /// can so script an upstream that goes away and comes back.
    ///
    /// Must be called within a tokio runtime.
    ///
    /// # Errors
    ///
    /// Fails with [`io::ErrorKind::InvalidInput`] if `addr` is not a loopback address (this
    /// server only ever listens on the machine itself), and if the listener cannot be bound
    /// (the port is taken, say).
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
    /// use tokio::net::TcpStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let addr = vacant_addr()?;
    /// let refused = TcpStream::connect(addr).await.unwrap_err();
    /// assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    ///
    /// // The upstream is back.
    /// let server = MockServer::start_on(addr).await?;
    /// server.enqueue(MockResponse::ok("back"));
    /// assert!(TcpStream::connect(addr).await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start_on(addr: SocketAddr) -> io::Result<Self> {
        Self::builder().start_on(addr).await
    }

    /// Starts an HTTP/2 server (as [`start_h2`](Self::start_h2)) on a chosen loopback address
    /// (as [`start_on`](Self::start_on)).
    ///
    /// # Errors
    ///
    /// As [`start_on`](Self::start_on).
    pub async fn start_h2_on(addr: SocketAddr) -> io::Result<Self> {
        Self::builder().start_h2_on(addr).await
    }

    /// Returns a builder, to start a server whose [limits](Self#limits) differ from the
    /// defaults.
    pub fn builder() -> MockServerBuilder {
        MockServerBuilder::new()
    }

    pub(crate) async fn start_at(
        protocol: Protocol,
        addr: SocketAddr,
        limits: Limits,
    ) -> io::Result<Self> {
        if !addr.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the mock server listens on loopback addresses only, not {addr}"),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::new(limits));
        let connections = Arc::new(Mutex::new(Some(JoinSet::new())));
        let accept = tokio::spawn(accept_loop(
            protocol,
            listener,
            Arc::clone(&state),
            Arc::clone(&connections),
        ))
        .abort_handle();
        Ok(Self {
            addr,
            state,
            connections,
            accept,
        })
    }

    /// Returns the address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Returns an `http://127.0.0.1:PORT` URI for the given path and query.
    ///
    /// A missing leading `/` is added.
    ///
    /// # Panics
    ///
    /// Panics if `path_and_query` is not a valid URI path and query, a programming error in
    /// the test that calls it.
    #[track_caller]
    pub fn uri(&self, path_and_query: &str) -> http::Uri {
        crate::loopback_uri(self.addr, path_and_query)
    }

    /// Queues a response; each request consumes the oldest queued response.
    pub fn enqueue(&self, response: MockResponse) {
        lock(&self.state.queue).push_back(response);
    }

    /// Returns how many requests have been received in full (head and body): the requests
    /// the server processed (see [Processed and refused requests](Self#processed-and-refused-requests)).
    pub fn request_count(&self) -> usize {
        self.state.requests.borrow().len()
    }

    /// Returns how many HTTP/2 requests were turned away unread, by `RST_STREAM`
    /// `REFUSED_STREAM` or by a `GOAWAY` below their stream; they are not in
    /// [`requests`](Self::requests). Always zero on an HTTP/1.1 server.
    pub fn refused_count(&self) -> usize {
        self.state.refused.load(Ordering::SeqCst)
    }

    /// Returns the requests received in full so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests.borrow().clone()
    }

    /// Returns how many connections have been accepted so far.
    pub fn connection_count(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// Returns how many accepted connections are still open.
    ///
    /// A connection stays open until the server closes or resets it (by a scripted behaviour,
    /// a malformed request or `Connection: close`), until the client closes it, or until the
    /// server is dropped.
    pub fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` requests have been received in full, for at most `within`.
    ///
    /// Returns whether the count was reached in time.
    pub async fn wait_for_requests(&self, n: usize, within: Duration) -> bool {
        let mut updates = self.state.requests.subscribe();
        let reached = tokio::time::timeout(within, updates.wait_for(|all| all.len() >= n)).await;
        matches!(reached, Ok(Ok(_)))
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept.abort();
        // Taking the set under the lock stops the accept loop from spawning into it, should
        // it still be running; dropping the set aborts every connection task.
        let connections = lock(&self.connections).take();
        drop(connections);
    }
}

/// The protocol a server speaks on every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    Http1,
    Http2,
}

/// The state shared by the server handle, the accept loop and the connection tasks.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) limits: Limits,
    queue: Mutex<VecDeque<MockResponse>>,
    requests: watch::Sender<Vec<RecordedRequest>>,
    accepted: AtomicUsize,
    open: AtomicUsize,
    refused: AtomicUsize,
}

impl State {
    fn new(limits: Limits) -> Self {
        Self {
            limits,
            queue: Mutex::default(),
            requests: watch::Sender::new(Vec::new()),
            accepted: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            refused: AtomicUsize::new(0),
        }
    }

    pub(crate) fn record(&self, request: RecordedRequest) {
        self.requests.send_modify(|all| all.push(request));
    }

    /// Counts a request turned away unread.
    pub(crate) fn refuse(&self) {
        self.refused.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn next_response(&self) -> MockResponse {
        lock(&self.queue)
            .pop_front()
            .unwrap_or_else(MockResponse::unscripted)
    }
}

/// Counts a connection as open for as long as it lives, including when its task is aborted.
#[derive(Debug)]
pub(crate) struct OpenConnection(Arc<State>);

impl OpenConnection {
    fn new(state: Arc<State>) -> Self {
        state.open.fetch_add(1, Ordering::SeqCst);
        Self(state)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What happens to a connection once a response has been dealt with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Serve the next request.
    KeepAlive,
    /// Close cleanly (FIN).
    Close,
    /// Drop the socket as it is (after a reset was armed).
    Abandon,
    /// Stay open without writing until the client closes.
    Idle,
}

/// Locks a mutex, ignoring poisoning: every critical section leaves its data consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(
    protocol: Protocol,
    listener: TcpListener,
    state: Arc<State>,
    connections: Arc<Mutex<Option<JoinSet<()>>>>,
) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _peer)) => stream,
            Err(_) => {
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        state.accepted.fetch_add(1, Ordering::SeqCst);
        let open = OpenConnection::new(Arc::clone(&state));
        let mut slot = lock(&connections);
        let Some(set) = slot.as_mut() else {
            return;
        };
        while set.try_join_next().is_some() {}
        let state = Arc::clone(&state);
        match protocol {
            Protocol::Http1 => set.spawn(serve(stream, state, open)),
            Protocol::Http2 => set.spawn(crate::http2::serve(stream, state, open)),
        };
    }
}

/// Serves one connection until it ends; any I/O error or malformed request ends it.
async fn serve(stream: TcpStream, state: Arc<State>, _open: OpenConnection) {
    // Without Nagle's algorithm, drip pieces and split writes leave immediately.
    let _ = stream.set_nodelay(true);
    let mut reader = RequestReader::new(stream, state.limits);
    match serve_requests(&mut reader, &state).await {
        Ok(After::Close) => {
            let _ = reader.get_mut().shutdown().await;
        }
        Ok(After::Idle) => reader.discard_until_closed().await,
        Ok(After::KeepAlive | After::Abandon) | Err(_) => {}
    }
}

/// Reads requests and applies scripted responses until one ends the connection.
async fn serve_requests(reader: &mut RequestReader<TcpStream>, state: &State) -> io::Result<After> {
    while let Some(head) = reader.read_head().await? {
        if head.expects_continue() {
            reader.get_mut().write_all(CONTINUE).await?;
        }
        let body = reader.read_body(&head).await?;
        let keep_alive = head.keep_alive();
        let head_only = head.method() == Method::HEAD;
        let response = crate::range::answer(state.next_response(), head.method(), head.headers());
        state.record(head.into_recorded(body));
        let after = respond(reader.get_mut(), &response, head_only, keep_alive).await?;
        if after != After::KeepAlive {
            return Ok(after);
        }
    }
    Ok(After::KeepAlive)
}

/// Applies a scripted response to the connection.
async fn respond(
    stream: &mut TcpStream,
    response: &MockResponse,
    head_only: bool,
    client_keep_alive: bool,
) -> io::Result<After> {
    let keep_alive = client_keep_alive && !response.closes_connection();
    let body: &[u8] = if head_only { &[] } else { response.body() };
    let behaviour = response.behaviour();
    let undelayed = matches!(
        behaviour,
        Behaviour::NoResponse | Behaviour::GoAwayUnprocessed
    );
    if !undelayed && !response.head_delay().is_zero() {
        tokio::time::sleep(response.head_delay()).await;
    }
    act(stream, response, body, keep_alive).await
}

/// Writes what `response`'s behaviour says (its head, all or part of `body`,
/// a reset) and says what becomes of the connection.
async fn act(
    stream: &mut TcpStream,
    response: &MockResponse,
    body: &[u8],
    keep_alive: bool,
) -> io::Result<After> {
    let after_body = if keep_alive {
        After::KeepAlive
    } else {
        After::Close
    };
    match response.behaviour() {
        Behaviour::Respond => {
            let mut message = encode_head(response, !keep_alive);
            message.extend_from_slice(body);
            stream.write_all(&message).await?;
            Ok(after_body)
        }
        Behaviour::NoResponse => Ok(After::Idle),
        Behaviour::StallAfterHead => {
            stream.write_all(&encode_head(response, false)).await?;
            Ok(After::Idle)
        }
        // NOTE: the HTTP/2 refusals have no HTTP/1.1 counterpart; the nearest is a close
        // without a response (the request was read, so it is recorded).
        Behaviour::CloseBeforeResponse
        | Behaviour::RefuseStream
        | Behaviour::GoAwayUnprocessed
        | Behaviour::GoAwayAfterProcessing => Ok(After::Close),
        Behaviour::ResetBeforeResponse => {
            arm_reset(stream)?;
            Ok(After::Abandon)
        }
        Behaviour::CloseAfterHead => {
            stream.write_all(&encode_head(response, false)).await?;
            Ok(After::Close)
        }
        partial => act_on_body(stream, response, body, (partial, keep_alive)).await,
    }
}

/// [`act`] for the behaviours that send the body in parts: a drip, or a
/// body cut part-way.
async fn act_on_body(
    stream: &mut TcpStream,
    response: &MockResponse,
    body: &[u8],
    (behaviour, keep_alive): (Behaviour, bool),
) -> io::Result<After> {
    match behaviour {
        Behaviour::Drip { chunk, pause } => {
            stream
                .write_all(&encode_head(response, !keep_alive))
                .await?;
            for piece in body.chunks(chunk.max(1)) {
                tokio::time::sleep(pause).await;
                stream.write_all(piece).await?;
            }
            Ok(if keep_alive {
                After::KeepAlive
            } else {
                After::Close
            })
        }
        Behaviour::ResetMidBody { sent } => {
            write_part(stream, response, body, sent).await?;
            arm_reset(stream)?;
            Ok(After::Abandon)
        }
        Behaviour::CloseMidBody { sent } => {
            write_part(stream, response, body, sent).await?;
            Ok(After::Close)
        }
        Behaviour::StallMidBody { sent } => {
            write_part(stream, response, body, sent).await?;
            Ok(After::Idle)
        }
        // NOTE: every other behaviour is `act`'s own.
        _ => Ok(After::Close),
    }
}

/// Writes the head, announcing the whole body, and the first `sent` bytes of `body`.
async fn write_part(
    stream: &mut TcpStream,
    response: &MockResponse,
    body: &[u8],
    sent: usize,
) -> io::Result<()> {
    let mut message = encode_head(response, false);
    message.extend_from_slice(&body[..sent.min(body.len())]);
    stream.write_all(&message).await
}

/// Makes closing the socket reset the connection (RST) instead of finishing it (FIN).
pub(crate) fn arm_reset(stream: &TcpStream) -> io::Result<()> {
    // NOTE: `set_linger` is deprecated because a non-zero linger makes closing the socket
    // block the thread until unsent data is delivered. A zero linger never blocks: closing
    // discards unsent data and sends RST at once, which is exactly the fault simulated here.
    // (`TcpStream::set_zero_linger` says the same, but is newer than the workspace's minimum
    // tokio version.)
    #[allow(deprecated)]
    stream.set_linger(Some(Duration::ZERO))
}

/// Encodes the status line and header fields, adding `Content-Length` unless the scripted
/// headers frame the body themselves, and `Connection: close` when `announce_close` is set
/// and the scripted headers do not mention `Connection`.
fn encode_head(response: &MockResponse, announce_close: bool) -> Vec<u8> {
    let status = response.status();
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
        .unwrap_or("");
    let headers = response.headers();
    let mut head = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
    for (name, value) in headers {
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value.as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    if !headers.contains_key(CONTENT_LENGTH) && !headers.contains_key(TRANSFER_ENCODING) {
        let len = response.body().len();
        head.extend_from_slice(format!("content-length: {len}\r\n").as_bytes());
    }
    if announce_close && !headers.contains_key(CONNECTION) {
        head.extend_from_slice(b"connection: close\r\n");
    }
    head.extend_from_slice(b"\r\n");
    head
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::time::timeout;

    use super::*;

    const LIMIT: Duration = Duration::from_secs(5);

    #[test]
    fn head_lists_scripted_headers_and_content_length() {
        let response = MockResponse::new(404)
            .with_header("X-A", "1")
            .with_header("x-a", "2")
            .with_body("nope");
        let head = String::from_utf8(encode_head(&response, false)).unwrap();
        assert_eq!(
            head,
            "HTTP/1.1 404 Not Found\r\nx-a: 1\r\nx-a: 2\r\ncontent-length: 4\r\n\r\n"
        );
    }

    #[test]
    fn head_keeps_scripted_framing_and_announces_close() {
        let response = MockResponse::new(299)
            .with_header("content-length", "10")
            .with_body("short");
        let head = String::from_utf8(encode_head(&response, true)).unwrap();
        assert_eq!(
            head,
            "HTTP/1.1 299 \r\ncontent-length: 10\r\nconnection: close\r\n\r\n"
        );
    }

    #[test]
    fn empty_body_announces_zero_length() {
        let head = String::from_utf8(encode_head(&MockResponse::new(204), false)).unwrap();
        assert!(head.contains("\r\ncontent-length: 0\r\n"), "{head}");
    }

    #[tokio::test]
    async fn dropping_the_server_ends_every_task_and_connection() {
        let server = MockServer::start().await.unwrap();
        server.enqueue(MockResponse::no_response());
        let mut idle = TcpStream::connect(server.addr()).await.unwrap();
        let mut waiting = TcpStream::connect(server.addr()).await.unwrap();
        waiting.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        assert!(server.wait_for_requests(1, LIMIT).await);
        // Let the accept loop take the idle connection too.
        timeout(LIMIT, async {
            while server.open_connections() < 2 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();

        let state = Arc::clone(&server.state);
        let runtime = tokio::runtime::Handle::current();
        drop(server);

        for client in [&mut idle, &mut waiting] {
            let mut buf = [0; 16];
            let read = timeout(LIMIT, client.read(&mut buf)).await.unwrap();
            assert!(matches!(read, Ok(0)) || read.is_err(), "{read:?}");
        }
        timeout(LIMIT, async {
            while state.open.load(Ordering::SeqCst) != 0 || runtime.metrics().num_alive_tasks() != 0
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
    }

    #[test]
    fn dropping_the_server_outside_the_runtime_aborts_its_tasks() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(MockServer::start()).unwrap();
        let state = Arc::clone(&server.state);
        // The client stays connected, so only the abort can end the connection task.
        let _client = runtime.block_on(async {
            let client = TcpStream::connect(server.addr()).await.unwrap();
            timeout(LIMIT, async {
                while state.open.load(Ordering::SeqCst) == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await
            .unwrap();
            client
        });
        drop(server);
        runtime.block_on(async {
            timeout(LIMIT, async {
                while state.open.load(Ordering::SeqCst) != 0
                    || tokio::runtime::Handle::current()
                        .metrics()
                        .num_alive_tasks()
                        != 0
                {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await
            .unwrap();
        });
    }
}
