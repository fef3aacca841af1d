//! Configuring a server before it starts: the limits it holds its clients to.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::server::{MockServer, Protocol};

/// Builds a [`MockServer`] whose limits differ from the defaults.
///
/// [`MockServer::start`] and its siblings start a server with the defaults; a builder from
/// [`MockServer::builder`] changes them first, then starts the server the same four ways.
/// See [Limits](MockServer#limits) for what each limit bounds.
///
/// # Example
///
/// ```
/// use http_resilience_mock::{MockResponse, MockServer};
/// use std::time::Duration;
/// use tokio::io::AsyncReadExt;
/// use tokio::net::TcpStream;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let server = MockServer::builder()
///     .idle_timeout(Duration::from_millis(100))
///     .start()
///     .await?;
///
/// // A client that connects and says nothing is let go after 100 ms.
/// let mut silent = TcpStream::connect(server.addr()).await?;
/// let mut buffer = [0; 16];
/// assert_eq!(silent.read(&mut buffer).await?, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until a server is started with it"]
pub struct MockServerBuilder {
    limits: Limits,
}

impl MockServerBuilder {
    /// How long the server waits on a silent client by default: 10 seconds.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

    /// How many bytes of each request body are recorded by default: 16 MiB.
    pub const DEFAULT_MAX_RECORDED_BODY: usize = 16 * 1024 * 1024;

    /// Creates a builder with the default limits.
    pub fn new() -> Self {
        Self {
            limits: Limits::default(),
        }
    }

    /// Sets how long the server waits on a client that sends nothing, or too little, before
    /// it closes the connection; `None` waits for ever. The default is
    /// [`DEFAULT_IDLE_TIMEOUT`](Self::DEFAULT_IDLE_TIMEOUT).
    ///
    /// The limit bounds the client's part only, never the server's scripted slowness: a
    /// [`Behaviour::NoResponse`](crate::Behaviour::NoResponse) or
    /// [`Behaviour::StallAfterHead`](crate::Behaviour::StallAfterHead) stays silent for as
    /// long as the client waits, and head delays and drip pauses run in full. See
    /// [Limits](MockServer#limits) for what is counted on each protocol.
    ///
    /// # Paused time
    ///
    /// The wait follows tokio's clock. On a paused clock, tokio moves time forward to the
    /// next timer whenever the runtime has nothing else to do, which over real sockets can
    /// happen while a client's bytes are still on their way; a test on paused time that keeps
    /// connections open across long virtual waits passes `None`.
    pub fn idle_timeout(mut self, timeout: impl Into<Option<Duration>>) -> Self {
        self.limits.idle_timeout = timeout.into();
        self
    }

    /// Sets how many bytes of each request body are recorded; the default is
    /// [`DEFAULT_MAX_RECORDED_BODY`](Self::DEFAULT_MAX_RECORDED_BODY).
    ///
    /// A longer body is still read in full, and the request answered as scripted, but its
    /// [`RecordedRequest`](crate::RecordedRequest) keeps only the first `limit` bytes: its
    /// [`is_body_truncated`](crate::RecordedRequest::is_body_truncated) is then `true`, and
    /// its [`body_len`](crate::RecordedRequest::body_len) holds the length received. A limit
    /// of zero records the lengths of bodies alone.
    ///
    /// The limit applies to each request: the server keeps every request it processed, so
    /// a test that sends many long bodies holds up to `limit` bytes for each of them.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience_mock::{MockResponse, MockServer};
    /// use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// use tokio::net::TcpStream;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let server = MockServer::builder().max_recorded_body(4).start().await?;
    /// server.enqueue(MockResponse::ok("stored"));
    /// let mut client = TcpStream::connect(server.addr()).await?;
    /// client
    ///     .write_all(b"PUT / HTTP/1.1\r\ncontent-length: 10\r\nconnection: close\r\n\r\n0123456789")
    ///     .await?;
    /// let mut response = String::new();
    /// client.read_to_string(&mut response).await?;
    /// assert!(response.ends_with("stored"));
    ///
    /// let recorded = &server.requests()[0];
    /// assert_eq!(recorded.body, "0123");
    /// assert!(recorded.is_body_truncated());
    /// assert_eq!(recorded.body_len, 10);
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_recorded_body(mut self, limit: usize) -> Self {
        self.limits.max_recorded_body = limit;
        self
    }

    /// Starts an HTTP/1.1 server on `127.0.0.1`, as [`MockServer::start`].
    ///
    /// # Errors
    ///
    /// Fails if the loopback listener cannot be bound.
    pub async fn start(self) -> io::Result<MockServer> {
        MockServer::start_at(Protocol::Http1, any_port(), self.limits).await
    }

    /// Starts an HTTP/2 server on `127.0.0.1`, as [`MockServer::start_h2`].
    ///
    /// # Errors
    ///
    /// Fails if the loopback listener cannot be bound.
    pub async fn start_h2(self) -> io::Result<MockServer> {
        MockServer::start_at(Protocol::Http2, any_port(), self.limits).await
    }

    /// Starts an HTTP/1.1 server on a chosen loopback address, as [`MockServer::start_on`].
    ///
    /// # Errors
    ///
    /// As [`MockServer::start_on`].
    pub async fn start_on(self, addr: SocketAddr) -> io::Result<MockServer> {
        MockServer::start_at(Protocol::Http1, addr, self.limits).await
    }

    /// Starts an HTTP/2 server on a chosen loopback address, as [`MockServer::start_h2_on`].
    ///
    /// # Errors
    ///
    /// As [`MockServer::start_on`].
    pub async fn start_h2_on(self, addr: SocketAddr) -> io::Result<MockServer> {
        MockServer::start_at(Protocol::Http2, addr, self.limits).await
    }
}

impl Default for MockServerBuilder {
    fn default() -> Self {
        Self::new()
    }
}

/// `127.0.0.1` with a port chosen by the system.
fn any_port() -> SocketAddr {
    (std::net::Ipv4Addr::LOCALHOST, 0).into()
}

/// The limits a server holds its clients to, shared by all of its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// How long the server waits on a silent client; `None` for ever.
    pub(crate) idle_timeout: Option<Duration>,
    /// How many bytes of each request body are recorded.
    pub(crate) max_recorded_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            idle_timeout: Some(MockServerBuilder::DEFAULT_IDLE_TIMEOUT),
            max_recorded_body: MockServerBuilder::DEFAULT_MAX_RECORDED_BODY,
        }
    }
}

impl Limits {
    /// Runs `work` for at most the idle timeout: `None` past it.
    pub(crate) async fn within_idle<F: Future>(self, work: F) -> Option<F::Output> {
        match self.idle_timeout {
            None => Some(work.await),
            Some(limit) => tokio::time::timeout(limit, work).await.ok(),
        }
    }
}
