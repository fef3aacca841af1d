//! A scripted loopback HTTP/1.1 and HTTP/2 server for testing clients against slow and faulty
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
//! All waits use tokio's clock, and dropping a server aborts all of its tasks.
//!
//! # Examples
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

pub mod body;
mod http2;
mod request;
mod response;
mod server;
mod unresponsive;

use std::net::SocketAddr;

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
