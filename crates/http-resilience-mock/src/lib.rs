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
/// The port is drawn at random outside the range the system hands out on its own (to a
/// `bind` to port 0 and to the local end of an outgoing connection; on Linux
/// `net.ipv4.ip_local_port_range`, elsewhere 49152–65535), and was free when drawn. So the
/// connections and the servers of other tests running meanwhile are not given it, and a
/// server can start there later; only a program that binds that very port can take it.
/// Where the system's range leaves no room, the port is one it hands out and released at once.
///
/// # Errors
///
/// Fails if no loopback port can be bound.
pub fn vacant_addr() -> std::io::Result<SocketAddr> {
    use std::hash::BuildHasher as _;
    let outside = ports_outside(ephemeral_ports());
    let random = std::collections::hash_map::RandomState::new();
    for draw in 0..VACANT_DRAWS {
        let Some(port) = pick(&outside, random.hash_one(draw)) else {
            break;
        };
        if let Ok(listener) = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)) {
            return listener.local_addr();
        }
    }
    let listener = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
    listener.local_addr()
}

/// How many ports [`vacant_addr`] tries before it takes one the system hands out.
const VACANT_DRAWS: u32 = 64;

/// The lowest port [`vacant_addr`] draws: below it lie the well-known and the
/// commonly configured ports.
const LOWEST_DRAWN: u16 = 10_000;

/// The ports the system hands out on its own, from `net.ipv4.ip_local_port_range`
/// on Linux, IANA's dynamic range elsewhere.
fn ephemeral_ports() -> std::ops::RangeInclusive<u16> {
    let configured = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| {
            let mut bounds = text.split_whitespace().map(str::parse::<u16>);
            Some(bounds.next()?.ok()?..=bounds.next()?.ok()?)
        });
    configured.unwrap_or(49_152..=65_535)
}

/// The ports at or above [`LOWEST_DRAWN`] outside `ephemeral`: the larger
/// stretch, below it or above it.
fn ports_outside(ephemeral: std::ops::RangeInclusive<u16>) -> std::ops::Range<u32> {
    let below = u32::from(LOWEST_DRAWN)..u32::from(*ephemeral.start());
    let above = u32::from(*ephemeral.end()) + 1..u32::from(u16::MAX) + 1;
    if below.len() >= above.len() {
        below
    } else {
        above
    }
}

/// The port `draw` picks in `ports`, none when `ports` is empty.
fn pick(ports: &std::ops::Range<u32>, draw: u64) -> Option<u16> {
    let len = u64::try_from(ports.len()).ok().filter(|&len| len > 0)?;
    let offset = u32::try_from(draw % len).ok()?;
    u16::try_from(ports.start + offset).ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vacant_port_lies_outside_the_ports_the_system_hands_out() {
        let ephemeral = ephemeral_ports();
        for _ in 0..20 {
            let addr = vacant_addr().unwrap();
            assert!(addr.ip().is_loopback());
            assert!(!ephemeral.contains(&addr.port()), "{addr} in {ephemeral:?}");
            assert!(addr.port() >= LOWEST_DRAWN, "{addr}");
        }
    }

    #[test]
    fn the_larger_stretch_outside_the_range_is_drawn_from() {
        assert_eq!(
            ports_outside(32_768..=60_999),
            10_000..32_768,
            "Linux's default"
        );
        assert_eq!(ports_outside(49_152..=65_535), 10_000..49_152, "IANA's");
        assert_eq!(ports_outside(12_000..=20_000), 20_001..65_536);
        assert!(ports_outside(1_024..=65_535).is_empty(), "no room");
    }

    #[test]
    fn a_draw_picks_a_port_in_the_stretch_or_none_when_it_is_empty() {
        let ports = 10_000..32_768;
        for draw in [0, 1, 22_767, 22_768, u64::MAX] {
            let port = u32::from(pick(&ports, draw).unwrap());
            assert!(ports.contains(&port), "{draw}: {port}");
        }
        assert_eq!(pick(&ports, 22_768), Some(10_000), "wraps around");
        assert_eq!(pick(&(65_536..65_536), 3), None);
        assert_eq!(pick(&ports_outside(1_024..=65_535), 3), None, "no room");
    }
}
