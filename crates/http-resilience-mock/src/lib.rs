//! A scripted loopback HTTP/1.1 and HTTP/2 server, for testing clients against slow and faulty
//! peers.
//!
//! [`MockServer`] listens on `127.0.0.1` and answers each request with the next
//! [`MockResponse`] from a queue. A response can be delayed, dripped slowly, or replaced by a
//! socket fault ([`Behaviour`]): no answer at all, a head that promises a body that never
//! comes, a clean close or a reset before or in the middle of the response. Every request is
//! recorded ([`RecordedRequest`]) once its head and body have been read, so tests can check
//! what the client sent and how many attempts it made, and the server counts the connections
//! it accepted and those still open, so tests can check connection reuse and closure.
//!
//! [`MockServer::start_h2`] speaks HTTP/2 (cleartext, prior knowledge) with the same queue,
//! and adds the HTTP/2 refusals: `RST_STREAM` with `REFUSED_STREAM`, and a `GOAWAY` that
//! announces a last stream below the request's. A request turned away unread is counted
//! ([`MockServer::refused_count`]), not recorded.
//!
//! [`Unresponsive`] is an address whose connection attempts hang, for connect timeouts, and
//! [`vacant_addr`] one where they are refused, until [`MockServer::start_on`] starts a server
//! there (an upstream that restarts).
//!
//! All waits use tokio's clock, and dropping a server aborts all of its tasks. The server only
//! ever listens on loopback addresses.
//!
//! A client cannot make the server hold memory or a connection without bound: a silent
//! client is let go after an idle timeout, and every buffer has a ceiling.
//! [Limits](MockServer#limits) lists them, and [`MockServer::builder`] changes those that can
//! be changed.
//!
//! # Example
//!
//! ```
//! use http_resilience_mock::{MockResponse, MockServer};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tokio::net::TcpStream;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let server = MockServer::start().await?;
//! server.enqueue(MockResponse::ok("hello").with_header("x-demo", "1"));
//! assert_eq!(
//!     server.uri("/greeting").to_string(),
//!     format!("http://{}/greeting", server.addr()),
//! );
//!
//! let mut client = TcpStream::connect(server.addr()).await?;
//! client
//!     .write_all(b"GET /greeting HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
//!     .await?;
//! let mut response = String::new();
//! client.read_to_string(&mut response).await?;
//! assert!(response.starts_with("HTTP/1.1 200 OK\r\n"));
//! assert!(response.contains("\r\nx-demo: 1\r\n"));
//! assert!(response.ends_with("\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello"));
//!
//! assert_eq!(server.request_count(), 1);
//! assert_eq!(server.requests()[0].uri, "/greeting");
//! assert_eq!(server.connection_count(), 1);
//! # Ok(())
//! # }
//! ```
//!
//! # Faults
//!
//! Each example below drives the fault with the plainest client there is (a TCP stream, or
//! the `h2` crate's client); a real test points its HTTP client at [`MockServer::uri`]
//! instead.
//!
//! ## A refused connection, then an upstream that comes back
//!
//! ```
//! use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
//! use tokio::net::TcpStream;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let addr = vacant_addr()?;
//! let refused = TcpStream::connect(addr).await.unwrap_err();
//! assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
//!
//! let server = MockServer::start_on(addr).await?;
//! server.enqueue(MockResponse::ok("back"));
//! assert!(TcpStream::connect(addr).await.is_ok());
//! # Ok(())
//! # }
//! ```
//!
//! ## A stall: a head that promises a body that never comes
//!
//! [`MockResponse::no_response`] stalls before the head instead.
//!
//! ```
//! use http_resilience_mock::{MockResponse, MockServer};
//! use std::time::Duration;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tokio::net::TcpStream;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let server = MockServer::start().await?;
//! server.enqueue(MockResponse::stall_after_head(200));
//! let mut client = TcpStream::connect(server.addr()).await?;
//! client.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n").await?;
//!
//! let mut head = vec![0; 1024];
//! let n = client.read(&mut head).await?;
//! assert!(head[..n].starts_with(b"HTTP/1.1 200 OK\r\n"));
//! // The body the head announced never follows.
//! let more = tokio::time::timeout(Duration::from_millis(100), client.read(&mut head)).await;
//! assert!(more.is_err(), "still waiting for the body");
//! # Ok(())
//! # }
//! ```
//!
//! ## A dripped body
//!
//! ```
//! use http_resilience_mock::{MockResponse, MockServer};
//! use std::time::Duration;
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tokio::net::TcpStream;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let server = MockServer::start().await?;
//! server.enqueue(MockResponse::drip("abcd", 1, Duration::from_millis(20)));
//! let mut client = TcpStream::connect(server.addr()).await?;
//! let start = tokio::time::Instant::now();
//! client
//!     .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
//!     .await?;
//! let mut response = String::new();
//! client.read_to_string(&mut response).await?;
//! assert!(response.ends_with("\r\n\r\nabcd"));
//! // One byte every 20 ms: at least 80 ms for the four.
//! assert!(start.elapsed() >= Duration::from_millis(80));
//! # Ok(())
//! # }
//! ```
//!
//! ## A reset
//!
//! [`MockResponse::reset_mid_body`] resets after part of the body instead, and
//! [`MockResponse::close_before_response`] closes cleanly.
//!
//! ```
//! use http_resilience_mock::{MockResponse, MockServer};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tokio::net::TcpStream;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let server = MockServer::start().await?;
//! server.enqueue(MockResponse::reset_before_response());
//! let mut client = TcpStream::connect(server.addr()).await?;
//! client.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n").await?;
//! let mut buffer = [0; 64];
//! let err = client.read(&mut buffer).await.unwrap_err();
//! assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset);
//! assert_eq!(server.request_count(), 1, "read, then reset");
//! # Ok(())
//! # }
//! ```
//!
//! ## A body cut part-way, then the rest as a range
//!
//! [`MockResponse::with_ranges`] serves `Range: bytes=N-` as a static file server does;
//! [`MockResponse::reset_after`], [`close_after`](MockResponse::close_after) and
//! [`stall_after`](MockResponse::stall_after) cut a body after `n` of its bytes.
//!
//! ```
//! use http_resilience_mock::{MockResponse, MockServer};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! use tokio::net::TcpStream;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let server = MockServer::start().await?;
//! let file = || MockResponse::ok("0123456789").with_etag("\"v1\"").with_ranges();
//! server.enqueue(file().close_after(4));
//! server.enqueue(file());
//!
//! let mut client = TcpStream::connect(server.addr()).await?;
//! client.write_all(b"GET /file HTTP/1.1\r\nhost: localhost\r\n\r\n").await?;
//! let mut cut = String::new();
//! client.read_to_string(&mut cut).await?;
//! assert!(cut.contains("\r\ncontent-length: 10\r\n") && cut.ends_with("\r\n\r\n0123"));
//!
//! let mut client = TcpStream::connect(server.addr()).await?;
//! client
//!     .write_all(b"GET /file HTTP/1.1\r\nrange: bytes=4-\r\nif-range: \"v1\"\r\nconnection: close\r\n\r\n")
//!     .await?;
//! let mut rest = String::new();
//! client.read_to_string(&mut rest).await?;
//! assert!(rest.starts_with("HTTP/1.1 206 Partial Content\r\n"));
//! assert!(rest.contains("\r\ncontent-range: bytes 4-9/10\r\n") && rest.ends_with("\r\n\r\n456789"));
//! # Ok(())
//! # }
//! ```
//!
//! ## HTTP/2: a stream refused unprocessed, and a `GOAWAY`
//!
//! ```
//! use http_resilience_mock::{MockResponse, MockServer};
//! use tokio::net::TcpStream;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = MockServer::start_h2().await?;
//! server.enqueue(MockResponse::refuse_stream());
//! server.enqueue(MockResponse::goaway_unprocessed());
//!
//! let (client, connection) = h2::client::handshake(TcpStream::connect(server.addr()).await?).await?;
//! tokio::spawn(connection);
//! let request = || http::Request::get(server.uri("/")).body(()).unwrap();
//!
//! let mut client = client.ready().await?;
//! let (refused, _) = client.send_request(request(), true)?;
//! let err = refused.await.unwrap_err();
//! assert_eq!(err.reason(), Some(h2::Reason::REFUSED_STREAM));
//!
//! let mut client = client.ready().await?;
//! let (turned_away, _) = client.send_request(request(), true)?;
//! let err = turned_away.await.unwrap_err();
//! assert!(err.is_go_away(), "{err}");
//!
//! // Neither request was processed: both were counted, none recorded.
//! assert_eq!((server.refused_count(), server.request_count()), (2, 0));
//! # Ok(())
//! # }
//! ```

pub mod body;
mod builder;
mod http2;
mod range;
mod request;
mod response;
mod server;
mod unresponsive;

use std::net::SocketAddr;

pub use builder::MockServerBuilder;
pub use request::RecordedRequest;
pub use response::{Behaviour, InvalidHeader, MockResponse};
pub use server::MockServer;
pub use unresponsive::Unresponsive;

/// A loopback address where nothing listens: a connection to it is refused, until a server
/// starts there ([`MockServer::start_on`]).
///
/// The port is one the system handed out and that was released at once, so no other test of
/// this process is given it meanwhile unless the system runs out of ports.
///
/// # Errors
///
/// Fails if no loopback port can be bound.
pub fn vacant_addr() -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    listener.local_addr()
}

/// Builds an `http://` URI for a loopback address and a path with optional query.
#[track_caller]
fn loopback_uri(addr: SocketAddr, path_and_query: &str) -> http::Uri {
    let separator = if path_and_query.starts_with('/') {
        ""
    } else {
        "/"
    };
    let text = format!("http://{addr}{separator}{path_and_query}");
    match http::Uri::try_from(text.as_str()) {
        Ok(uri) => uri,
        Err(error) => panic!("invalid path and query {path_and_query:?}: {error}"),
    }
}
