//! Drives the mock server with a raw TCP client and checks what goes over the wire.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use http::{Method, Version};
use http_resilience_mock::{MockResponse, MockServer, Unresponsive};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout, Instant};

/// The most any step may take before the test fails instead of hanging.
const LIMIT: Duration = Duration::from_secs(5);

/// How long a client watches for bytes that must not arrive.
const QUIET: Duration = Duration::from_millis(200);

/// Awaits `future`, failing the test if it takes longer than [`LIMIT`].
async fn within<F: Future>(future: F) -> F::Output {
    timeout(LIMIT, future).await.expect("step timed out")
}

/// A response as parsed by the test client.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(field, _)| field.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// How a connection ended, as seen by the client.
#[derive(Debug)]
enum Ending {
    Eof,
    Error(io::Error),
}

/// A raw HTTP/1.1 client over one TCP connection.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    async fn connect(addr: SocketAddr) -> Self {
        let stream = within(TcpStream::connect(addr)).await.expect("connect");
        Self {
            stream,
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, raw: &[u8]) {
        within(self.stream.write_all(raw)).await.expect("write");
    }

    /// Reads more bytes into the buffer, returning how many arrived (0 at the end).
    async fn fill(&mut self) -> io::Result<usize> {
        let mut chunk = [0; 4096];
        let read = within(self.stream.read(&mut chunk)).await?;
        self.buf.extend_from_slice(&chunk[..read]);
        Ok(read)
    }

    /// Reads a response head, skipping interim (1xx) responses unless `keep_interim` is set.
    async fn read_head(&mut self, keep_interim: bool) -> (u16, Vec<(String, String)>) {
        loop {
            let mut fields = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Response::new(&mut fields);
            if let httparse::Status::Complete(len) = parsed.parse(&self.buf).expect("valid head") {
                let status = parsed.code.expect("status code");
                let headers = parsed
                    .headers
                    .iter()
                    .map(|field| {
                        let value = String::from_utf8(field.value.to_vec()).expect("utf-8");
                        (field.name.to_owned(), value)
                    })
                    .collect();
                self.buf.drain(..len);
                if keep_interim || !(100..200).contains(&status) {
                    return (status, headers);
                }
                continue;
            }
            assert_ne!(self.fill().await.expect("read head"), 0, "EOF inside head");
        }
    }

    /// Reads exactly `len` body bytes.
    async fn read_body(&mut self, len: usize) -> Vec<u8> {
        while self.buf.len() < len {
            assert_ne!(self.fill().await.expect("read body"), 0, "EOF inside body");
        }
        self.buf.drain(..len).collect()
    }

    /// Reads a complete response delimited by its `Content-Length`.
    async fn read_response(&mut self) -> Response {
        let (status, headers) = self.read_head(false).await;
        let mut response = Response {
            status,
            headers,
            body: Vec::new(),
        };
        let len = response
            .header("content-length")
            .expect("content-length")
            .parse()
            .expect("numeric content-length");
        response.body = self.read_body(len).await;
        response
    }

    /// Reads until the connection ends, returning the bytes that arrived and how it ended.
    async fn read_until_closed(&mut self) -> (Vec<u8>, Ending) {
        loop {
            match self.fill().await {
                Ok(0) => return (std::mem::take(&mut self.buf), Ending::Eof),
                Ok(_) => {}
                Err(error) => return (std::mem::take(&mut self.buf), Ending::Error(error)),
            }
        }
    }

    /// Checks that nothing arrives for [`QUIET`] and the connection stays open.
    async fn assert_silent(&mut self) {
        let mut chunk = [0; 64];
        let outcome = timeout(QUIET, self.stream.read(&mut chunk)).await;
        assert!(outcome.is_err(), "expected silence, got {outcome:?}");
    }
}

/// Asserts that a connection ended with a reset or, where the platform reports a reset
/// that way, a plain end of stream (on Linux a reset surfaces as `ConnectionReset`).
fn assert_reset_or_eof(ending: &Ending) {
    match ending {
        Ending::Eof => {}
        Ending::Error(error) => assert_eq!(error.kind(), io::ErrorKind::ConnectionReset),
    }
}

async fn start() -> MockServer {
    within(MockServer::start()).await.expect("start server")
}

#[tokio::test]
async fn get_is_answered_with_the_queued_response_and_recorded() {
    let server = start().await;
    server.enqueue(
        MockResponse::ok("hello")
            .with_header("x-one", "1")
            .with_header("content-type", "text/plain"),
    );
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"GET /items?page=2 HTTP/1.1\r\nHost: localhost\r\nX-Trace: abc\r\n\r\n")
        .await;

    let response = client.read_response().await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("x-one"), Some("1"));
    assert_eq!(response.header("content-type"), Some("text/plain"));
    assert_eq!(response.body, b"hello");

    assert_eq!(server.request_count(), 1);
    let request = &server.requests()[0];
    assert_eq!(request.method, Method::GET);
    assert_eq!(request.uri, "/items?page=2");
    assert_eq!(request.uri.query(), Some("page=2"));
    assert_eq!(request.version, Version::HTTP_11);
    assert_eq!(request.headers["x-trace"], "abc");
    assert_eq!(request.headers["host"], "localhost");
    assert!(request.body.is_empty());
}

#[tokio::test]
async fn post_body_with_content_length_is_recorded() {
    let server = start().await;
    server.enqueue(MockResponse::new(201));
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"POST /upload HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello")
        .await;
    client.send(b" world").await;

    let response = client.read_response().await;
    assert_eq!(response.status, 201);
    assert_eq!(response.header("content-length"), Some("0"));
    assert!(response.body.is_empty());
    let request = &server.requests()[0];
    assert_eq!(request.method, Method::POST);
    assert_eq!(request.uri, "/upload");
    assert_eq!(request.body, "hello world");
}

#[tokio::test]
async fn chunked_post_body_is_recorded_decoded() {
    let server = start().await;
    server.enqueue(MockResponse::ok("stored"));
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"POST /stream HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nchun")
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    client.send(b"\r\nb;ext=1\r\nked payload\r\n0\r\n").await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    client.send(b"x-checksum: 42\r\n\r\n").await;

    assert_eq!(client.read_response().await.body, b"stored");
    let request = &server.requests()[0];
    assert_eq!(request.headers["transfer-encoding"], "chunked");
    assert_eq!(request.body, "chunked payload");
}

#[tokio::test]
async fn keep_alive_connection_takes_responses_in_fifo_order() {
    let server = start().await;
    server.enqueue(MockResponse::new(503).with_body("first"));
    server.enqueue(MockResponse::ok("second"));
    let mut client = Client::connect(server.addr()).await;

    client.send(b"GET /1 HTTP/1.1\r\n\r\n").await;
    let first = client.read_response().await;
    client.send(b"GET /2 HTTP/1.1\r\n\r\n").await;
    let second = client.read_response().await;

    assert_eq!((first.status, first.body.as_slice()), (503, &b"first"[..]));
    assert_eq!(
        (second.status, second.body.as_slice()),
        (200, &b"second"[..])
    );
    let paths: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.uri.to_string())
        .collect();
    assert_eq!(paths, ["/1", "/2"]);
    assert_eq!(server.connection_count(), 1);
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let server = start().await;
    server.enqueue(MockResponse::ok("a"));
    server.enqueue(MockResponse::ok("b"));
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"GET /a HTTP/1.1\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi")
        .await;

    assert_eq!(client.read_response().await.body, b"a");
    assert_eq!(client.read_response().await.body, b"b");
    assert_eq!(server.requests()[1].body, "hi");
}

#[tokio::test]
async fn empty_queue_answers_with_an_unscripted_500() {
    let server = start().await;
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    let response = client.read_response().await;
    assert_eq!(response.status, 500);
    assert_eq!(response.header("x-mock"), Some("unscripted"));
    assert!(!response.body.is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn no_response_stays_silent_but_counts_the_request() {
    let server = start().await;
    server.enqueue(MockResponse::no_response());
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET /slow HTTP/1.1\r\n\r\n").await;

    assert!(server.wait_for_requests(1, LIMIT).await);
    client.assert_silent().await;
    assert_eq!(server.request_count(), 1);
    assert_eq!(server.open_connections(), 1);
}

#[tokio::test]
async fn close_before_response_ends_the_stream() {
    let server = start().await;
    server.enqueue(MockResponse::close_before_response());
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    let (received, ending) = client.read_until_closed().await;
    assert!(received.is_empty());
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn reset_before_response_resets_the_connection() {
    let server = start().await;
    server.enqueue(MockResponse::reset_before_response());
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    let (received, ending) = client.read_until_closed().await;
    assert!(received.is_empty());
    assert_reset_or_eof(&ending);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn drip_delivers_the_whole_body_over_time() {
    let server = start().await;
    let pause = Duration::from_millis(20);
    server.enqueue(MockResponse::drip("0123456789", 3, pause));
    server.enqueue(MockResponse::ok("after"));
    let mut client = Client::connect(server.addr()).await;
    let started = Instant::now();
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    let response = client.read_response().await;
    assert_eq!(response.header("content-length"), Some("10"));
    assert_eq!(response.body, b"0123456789");
    // Four pieces, each preceded by a pause; sleeps never end early.
    assert!(started.elapsed() >= pause * 4);

    client.send(b"GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(client.read_response().await.body, b"after");
}

#[tokio::test]
async fn stall_after_head_sends_the_head_and_no_body() {
    let server = start().await;
    server.enqueue(MockResponse::stall_after_head(200).with_body("promised"));
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    let (status, headers) = client.read_head(false).await;
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-length".to_owned(), "8".to_owned())));
    assert!(client.buf.is_empty());
    client.assert_silent().await;
}

#[tokio::test]
async fn close_after_head_ends_the_stream_before_the_body() {
    let server = start().await;
    server.enqueue(MockResponse::close_after_head(502));
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    let (status, headers) = client.read_head(false).await;
    assert_eq!(status, 502);
    let promised = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map(|(_, value)| value.parse::<usize>().unwrap());
    assert!(promised.is_some_and(|len| len > 0));
    let (received, ending) = client.read_until_closed().await;
    assert!(received.is_empty());
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
}

#[tokio::test]
async fn reset_mid_body_sends_part_of_the_body_then_resets() {
    let server = start().await;
    server.enqueue(MockResponse::reset_mid_body("0123456789", 4));
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    let (status, headers) = client.read_head(false).await;
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-length".to_owned(), "10".to_owned())));
    let (received, ending) = client.read_until_closed().await;
    // Bytes written before the reset reach the client ahead of it on loopback.
    assert_eq!(received, b"0123");
    assert_reset_or_eof(&ending);
}

#[tokio::test]
async fn close_after_and_stall_after_cut_the_body_part_way() {
    let server = start().await;
    server.enqueue(MockResponse::ok("0123456789").close_after(3));
    server.enqueue(MockResponse::ok("0123456789").stall_after(6));
    let mut closed = Client::connect(server.addr()).await;
    closed.send(b"GET / HTTP/1.1\r\n\r\n").await;
    let (status, headers) = closed.read_head(false).await;
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-length".to_owned(), "10".to_owned())));
    let (received, ending) = closed.read_until_closed().await;
    assert_eq!(received, b"012");
    assert!(matches!(ending, Ending::Eof), "{ending:?}");

    let mut stalled = Client::connect(server.addr()).await;
    stalled.send(b"GET / HTTP/1.1\r\n\r\n").await;
    stalled.read_head(false).await;
    assert_eq!(stalled.read_body(6).await, b"012345");
    stalled.assert_silent().await;
}

#[tokio::test]
async fn a_response_that_serves_ranges_answers_the_rest_with_206() {
    let server = start().await;
    let script = || {
        MockResponse::ok("0123456789")
            .with_etag("\"v1\"")
            .with_ranges()
    };
    server.enqueue(script().reset_after(4));
    server.enqueue(script());
    let mut first = Client::connect(server.addr()).await;
    first.send(b"GET /file HTTP/1.1\r\n\r\n").await;
    let (status, headers) = first.read_head(false).await;
    assert_eq!(status, 200);
    assert!(headers.contains(&("accept-ranges".to_owned(), "bytes".to_owned())));
    assert!(headers.contains(&("etag".to_owned(), "\"v1\"".to_owned())));
    let (received, ending) = first.read_until_closed().await;
    assert_eq!(received, b"0123");
    assert_reset_or_eof(&ending);

    let mut rest = Client::connect(server.addr()).await;
    rest.send(b"GET /file HTTP/1.1\r\nrange: bytes=4-\r\nif-range: \"v1\"\r\n\r\n")
        .await;
    let response = rest.read_response().await;
    assert_eq!(response.status, 206);
    assert_eq!(response.header("content-range"), Some("bytes 4-9/10"));
    assert_eq!(response.header("content-length"), Some("6"));
    assert_eq!(response.body, b"456789");
    let recorded = server.requests();
    assert_eq!(
        recorded[1].headers["range"], "bytes=4-",
        "recorded as it came"
    );
}

#[tokio::test]
async fn a_mismatched_if_range_gets_the_whole_body_with_200() {
    let server = start().await;
    server.enqueue(
        MockResponse::ok("changed!")
            .with_etag("\"v2\"")
            .with_ranges(),
    );
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"GET / HTTP/1.1\r\nrange: bytes=4-\r\nif-range: \"v1\"\r\n\r\n")
        .await;
    let response = client.read_response().await;
    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-range"), None);
    assert_eq!(response.body, b"changed!");
}

#[tokio::test]
async fn head_delay_postpones_the_response() {
    let server = start().await;
    let delay = Duration::from_millis(100);
    server.enqueue(MockResponse::ok("late").with_head_delay(delay));
    let mut client = Client::connect(server.addr()).await;
    let started = Instant::now();
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    assert!(server.wait_for_requests(1, LIMIT).await);
    assert_eq!(client.read_response().await.body, b"late");
    assert!(started.elapsed() >= delay);
}

#[tokio::test]
async fn client_connection_close_is_honoured() {
    let server = start().await;
    server.enqueue(MockResponse::ok("bye"));
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
        .await;

    let response = client.read_response().await;
    assert_eq!(response.header("connection"), Some("close"));
    assert_eq!(response.body, b"bye");
    let (received, ending) = client.read_until_closed().await;
    assert!(received.is_empty());
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
}

#[tokio::test]
async fn scripted_connection_close_ends_the_connection_after_the_response() {
    let server = start().await;
    server.enqueue(MockResponse::ok("last").with_header("connection", "close"));
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;

    assert_eq!(client.read_response().await.body, b"last");
    let (_, ending) = client.read_until_closed().await;
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
}

#[tokio::test]
async fn head_request_gets_the_length_but_no_body() {
    let server = start().await;
    server.enqueue(MockResponse::ok("not sent"));
    server.enqueue(MockResponse::ok("next"));
    let mut client = Client::connect(server.addr()).await;
    client.send(b"HEAD / HTTP/1.1\r\n\r\n").await;

    let (status, headers) = client.read_head(false).await;
    assert_eq!(status, 200);
    assert!(headers.contains(&("content-length".to_owned(), "8".to_owned())));
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(client.read_response().await.body, b"next");
}

#[tokio::test]
async fn expect_continue_gets_an_interim_response() {
    let server = start().await;
    server.enqueue(MockResponse::ok("accepted"));
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"PUT /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
        .await;

    let (status, _) = client.read_head(true).await;
    assert_eq!(status, 100);
    client.send(b"abc").await;
    assert_eq!(client.read_response().await.body, b"accepted");
    assert_eq!(server.requests()[0].body, "abc");
}

#[tokio::test]
async fn malformed_request_closes_only_its_connection() {
    let server = start().await;
    server.enqueue(MockResponse::ok("fine"));
    let mut bad = Client::connect(server.addr()).await;
    bad.send(b"NOT HTTP AT ALL\r\n\r\n").await;
    let (received, _) = bad.read_until_closed().await;
    assert!(received.is_empty());

    let mut good = Client::connect(server.addr()).await;
    good.send(b"GET / HTTP/1.1\r\n\r\n").await;
    assert_eq!(good.read_response().await.body, b"fine");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn oversized_head_closes_the_connection() {
    let server = start().await;
    let mut client = Client::connect(server.addr()).await;
    let mut raw = b"GET / HTTP/1.1\r\nx-big: ".to_vec();
    raw.resize(raw.len() + 70 * 1024, b'a');
    // The server may close while the head is still being written; either way it ends.
    let _ = within(client.stream.write_all(&raw)).await;

    let (received, _) = client.read_until_closed().await;
    assert!(received.is_empty());
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn connection_counts_follow_accepts_and_closes() {
    let server = start().await;
    let first = Client::connect(server.addr()).await;
    let second = Client::connect(server.addr()).await;
    within(async {
        while server.open_connections() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(server.connection_count(), 2);

    drop(first);
    drop(second);
    within(async {
        while server.open_connections() > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(server.connection_count(), 2);
}

#[tokio::test]
async fn dropping_the_server_closes_open_connections() {
    let server = start().await;
    server.enqueue(MockResponse::no_response());
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\n\r\n").await;
    assert!(server.wait_for_requests(1, LIMIT).await);

    drop(server);
    let (received, ending) = client.read_until_closed().await;
    assert!(received.is_empty());
    assert_reset_or_eof(&ending);
}

#[tokio::test]
async fn wait_for_requests_gives_up_after_the_limit() {
    let server = start().await;
    assert!(server.wait_for_requests(0, QUIET).await);
    let started = Instant::now();
    assert!(!server.wait_for_requests(1, QUIET).await);
    assert!(started.elapsed() >= QUIET);
}

#[tokio::test]
async fn uri_points_at_the_loopback_port() {
    let server = start().await;
    let port = server.addr().port();
    assert!(server.addr().ip().is_loopback());
    assert_eq!(
        server.uri("/a/b?c=d").to_string(),
        format!("http://127.0.0.1:{port}/a/b?c=d")
    );
    assert_eq!(
        server.uri("plain").to_string(),
        format!("http://127.0.0.1:{port}/plain")
    );
}

#[tokio::test]
async fn unresponsive_address_makes_connect_hang() {
    let unresponsive = within(Unresponsive::start()).await.expect("start");
    assert!(unresponsive.addr().ip().is_loopback());
    assert_eq!(
        unresponsive.uri("/x").to_string(),
        format!("http://{}/x", unresponsive.addr())
    );
    for _ in 0..2 {
        let attempt = timeout(
            Duration::from_millis(300),
            TcpStream::connect(unresponsive.addr()),
        )
        .await;
        assert!(attempt.is_err(), "connect completed: {attempt:?}");
    }
}

#[tokio::test]
async fn an_upstream_that_goes_away_and_comes_back_on_its_address() {
    let addr = http_resilience_mock::vacant_addr().unwrap();
    let refused = tokio::net::TcpStream::connect(addr).await.unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    let first = MockServer::start_on(addr).await.unwrap();
    assert_eq!(first.addr(), addr);
    assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
    // Dropping the server stops it accepting: once its listener task has
    // ended (on the runtime's next turn), the address refuses again.
    drop(first);
    let refused_again = within(async {
        loop {
            match tokio::net::TcpStream::connect(addr).await {
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionRefused => break,
                _ => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    });
    refused_again.await;

    let again = MockServer::start_on(addr).await.unwrap();
    again.enqueue(MockResponse::ok("back"));
    assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
}

#[tokio::test]
async fn a_server_listens_on_loopback_only() {
    let elsewhere: std::net::SocketAddr = "0.0.0.0:0".parse().unwrap();
    let err = MockServer::start_on(elsewhere).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
}

// ===== the idle timeout =====

/// The idle timeout of the servers below: far below [`LIMIT`], which bounds every wait of
/// the tests, so that a loaded machine cannot flip an outcome.
const IDLE: Duration = Duration::from_millis(200);

async fn start_with_idle_timeout() -> MockServer {
    within(MockServer::builder().idle_timeout(IDLE).start())
        .await
        .expect("start server")
}

/// Waits until the server has no connection open.
async fn all_closed(server: &MockServer) {
    within(async {
        while server.open_connections() != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_silent_connection_is_closed_after_the_idle_timeout() {
    let server = start_with_idle_timeout().await;
    let mut client = Client::connect(server.addr()).await;

    let (bytes, ending) = client.read_until_closed().await;
    assert!(bytes.is_empty(), "{bytes:?}");
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
    all_closed(&server).await;
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn a_half_sent_head_is_closed_after_the_idle_timeout() {
    let server = start_with_idle_timeout().await;
    server.enqueue(MockResponse::ok("never"));
    let mut client = Client::connect(server.addr()).await;
    client.send(b"GET / HTTP/1.1\r\nhost: localhost\r\n").await;

    let (bytes, ending) = client.read_until_closed().await;
    assert!(bytes.is_empty(), "{bytes:?}");
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
    all_closed(&server).await;
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn a_body_that_pauses_past_the_idle_timeout_closes_the_connection() {
    let server = start_with_idle_timeout().await;
    server.enqueue(MockResponse::ok("never"));
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"POST / HTTP/1.1\r\ncontent-length: 10\r\n\r\nabc")
        .await;

    let (bytes, ending) = client.read_until_closed().await;
    assert!(bytes.is_empty(), "{bytes:?}");
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
    assert_eq!(
        server.request_count(),
        0,
        "a body cut short is not recorded"
    );
}

#[tokio::test]
async fn a_request_sent_in_time_is_served_then_the_idle_connection_closed() {
    let server = start_with_idle_timeout().await;
    server.enqueue(MockResponse::ok("in time"));
    let mut client = Client::connect(server.addr()).await;
    client
        .send(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .await;

    let response = client.read_response().await;
    assert_eq!(
        (response.status, &response.body[..]),
        (200, &b"in time"[..])
    );
    // Kept alive, then idle: the wait for the next head is bounded too.
    let (bytes, ending) = client.read_until_closed().await;
    assert!(bytes.is_empty(), "{bytes:?}");
    assert!(matches!(ending, Ending::Eof), "{ending:?}");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn scripted_silences_and_delays_outlast_the_idle_timeout() {
    let server = start_with_idle_timeout().await;
    server.enqueue(MockResponse::no_response());
    server.enqueue(MockResponse::stall_after_head(200));
    server.enqueue(MockResponse::ok("late").with_head_delay(IDLE * 2));
    let mut silent = Client::connect(server.addr()).await;
    silent.send(b"GET /silent HTTP/1.1\r\n\r\n").await;
    assert!(server.wait_for_requests(1, LIMIT).await);
    let mut stalled = Client::connect(server.addr()).await;
    stalled.send(b"GET /stalled HTTP/1.1\r\n\r\n").await;
    assert!(server.wait_for_requests(2, LIMIT).await);
    let mut late = Client::connect(server.addr()).await;
    late.send(b"GET /late HTTP/1.1\r\n\r\n").await;

    let response = late.read_response().await;
    assert_eq!(&response.body[..], b"late");
    assert_eq!(stalled.read_head(false).await.0, 200);
    // The server is the slow one: its silences last for as long as the client waits.
    tokio::time::sleep(IDLE * 2).await;
    silent.assert_silent().await;
    stalled.assert_silent().await;
}

#[tokio::test]
async fn the_idle_timeout_is_ten_seconds_by_default_and_can_be_switched_off() {
    assert_eq!(
        http_resilience_mock::MockServerBuilder::DEFAULT_IDLE_TIMEOUT,
        Duration::from_secs(10)
    );
    let server = within(MockServer::builder().idle_timeout(None).start())
        .await
        .unwrap();
    let _client = Client::connect(server.addr()).await;
    tokio::time::sleep(IDLE * 3).await;
    assert_eq!(server.open_connections(), 1);
}

// ===== the recorded-body limit =====

/// The recorded-body limit of the servers below.
const KEPT: usize = 1024;

async fn start_with_record_limit() -> MockServer {
    within(MockServer::builder().max_recorded_body(KEPT).start())
        .await
        .expect("start server")
}

/// `len` bytes that differ from one position to the next.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

#[tokio::test]
async fn a_body_over_the_record_limit_is_kept_in_part_and_flagged() {
    let server = start_with_record_limit().await;
    server.enqueue(MockResponse::ok("stored"));
    let body = pattern(4 * KEPT);
    let mut client = Client::connect(server.addr()).await;
    let head = format!(
        "POST /upload HTTP/1.1\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    client.send(&[head.as_bytes(), &body].concat()).await;

    // Read in full and answered as scripted.
    assert_eq!(&client.read_response().await.body[..], b"stored");
    let recorded = &server.requests()[0];
    assert_eq!(recorded.body, body[..KEPT]);
    assert!(recorded.is_body_truncated());
    assert_eq!(recorded.body_len, 4 * KEPT as u64);
}

#[tokio::test]
async fn a_chunked_body_over_the_record_limit_is_kept_in_part_and_flagged() {
    let server = start_with_record_limit().await;
    server.enqueue(MockResponse::ok("stored"));
    let body = pattern(3 * KEPT);
    let mut client = Client::connect(server.addr()).await;
    let mut raw = b"POST /upload HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
    for chunk in body.chunks(700) {
        raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        raw.extend_from_slice(chunk);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    client.send(&raw).await;

    assert_eq!(&client.read_response().await.body[..], b"stored");
    let recorded = &server.requests()[0];
    assert_eq!(recorded.body, body[..KEPT]);
    assert!(recorded.is_body_truncated());
    assert_eq!(recorded.body_len, 3 * KEPT as u64);
}

#[tokio::test]
async fn a_body_at_the_record_limit_is_recorded_whole() {
    let server = start_with_record_limit().await;
    server.enqueue(MockResponse::ok("stored"));
    let body = pattern(KEPT);
    let mut client = Client::connect(server.addr()).await;
    let head = format!("PUT / HTTP/1.1\r\ncontent-length: {KEPT}\r\n\r\n");
    client.send(&[head.as_bytes(), &body].concat()).await;

    client.read_response().await;
    let recorded = &server.requests()[0];
    assert_eq!(recorded.body, body);
    assert!(!recorded.is_body_truncated());
    assert_eq!(recorded.body_len, KEPT as u64);
}

#[tokio::test]
async fn bodies_are_recorded_up_to_16_mib_by_default() {
    const DEFAULT: usize = 16 * 1024 * 1024;
    assert_eq!(
        http_resilience_mock::MockServerBuilder::DEFAULT_MAX_RECORDED_BODY,
        DEFAULT
    );
    let server = start().await;
    server.enqueue(MockResponse::ok("whole"));
    server.enqueue(MockResponse::ok("cut"));
    let mut client = Client::connect(server.addr()).await;
    for (len, answer) in [(DEFAULT, &b"whole"[..]), (DEFAULT + 1, b"cut")] {
        let head = format!("POST / HTTP/1.1\r\ncontent-length: {len}\r\n\r\n");
        client.send(head.as_bytes()).await;
        client.send(&pattern(len)).await;
        assert_eq!(&client.read_response().await.body[..], answer);
    }

    let requests = server.requests();
    assert_eq!(requests[0].body.len(), DEFAULT);
    assert!(!requests[0].is_body_truncated());
    assert_eq!(requests[1].body.len(), DEFAULT);
    assert!(requests[1].is_body_truncated());
    assert_eq!(requests[1].body_len, DEFAULT as u64 + 1);
}

#[tokio::test]
async fn an_unprocessed_goaway_on_http1_ignores_the_head_delay() {
    let server = start().await;
    server.enqueue(MockResponse::goaway_unprocessed().with_head_delay(Duration::from_secs(3)));
    let mut client = TcpStream::connect(server.addr()).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let start = Instant::now();
    let mut read = Vec::new();
    let _ = timeout(LIMIT, client.read_to_end(&mut read)).await.unwrap();
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "closed after {:?}: the head delay was waited",
        start.elapsed()
    );
}
