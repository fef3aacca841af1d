//! A loopback address whose connection attempts hang, for connect-timeout tests.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};

use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A loopback listener that never completes a client's connection attempt.
///
/// The listener has a backlog of zero and never accepts. On start it makes one connection
/// to itself, which fills the accept queue; the kernel then drops the SYN of every further
/// connection attempt, so a client's `connect` hangs (retransmitting its SYN) until the
/// client's own timeout fires. This is the behaviour of Linux; other systems may treat a
/// zero backlog differently.
///
/// The listener and the filler connection live as long as this value.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http_resilience_mock::Unresponsive;
/// use tokio::net::TcpStream;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let unresponsive = Unresponsive::start().await?;
/// let attempt = TcpStream::connect(unresponsive.addr());
/// let outcome = tokio::time::timeout(Duration::from_millis(200), attempt).await;
/// assert!(outcome.is_err(), "the connection attempt should still be pending");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Unresponsive {
    addr: SocketAddr,
    _listener: TcpListener,
    _filler: TcpStream,
}

impl Unresponsive {
    /// Binds a listener on `127.0.0.1` with a port chosen by the system and fills its accept
    /// queue.
    ///
    /// Must be called within a tokio runtime.
    ///
    /// # Errors
    ///
    /// Fails if the listener cannot be bound or the filler connection cannot be made.
    pub async fn start() -> io::Result<Self> {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        let listener = socket.listen(0)?;
        let addr = listener.local_addr()?;
        let filler = TcpStream::connect(addr).await?;
        Ok(Self {
            addr,
            _listener: listener,
            _filler: filler,
        })
    }

    /// Returns the address whose connection attempts hang.
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
}
