//! Scripted responses: what the server sends back, when, and how it misbehaves.

use std::error::Error;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONNECTION};
use http::HeaderMap;

/// The body that the head-only faults announce in their `Content-Length` and never send.
const PROMISED_BODY: &[u8] = b"body that is never sent";

/// The body of the response sent when no response was queued.
const UNSCRIPTED_BODY: &[u8] = b"no response was queued on the mock server\n";

/// How the server delivers (or fails to deliver) a [`MockResponse`].
///
/// Every behaviour but the HTTP/2 refusals ([`RefuseStream`](Self::RefuseStream),
/// [`GoAwayUnprocessed`](Self::GoAwayUnprocessed)) applies after the request head and body
/// have been read in full, so the request is recorded. The refusals turn the request away
/// unread: it is counted by [`MockServer::refused_count`](crate::MockServer::refused_count),
/// not recorded. Behaviours that end the connection (closing, resetting, going away, or never
/// answering) mean that connection serves no further request.
///
/// On an HTTP/2 server ([`MockServer::start_h2`](crate::MockServer::start_h2)) the socket
/// faults act on the whole connection, which may carry other streams: closing or resetting
/// it cuts them too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Behaviour {
    /// Writes the head and the whole body, then keeps the connection alive for the next
    /// request (unless the client or the scripted headers asked for `Connection: close`).
    Respond,
    /// Never answers. The socket stays open and idle until the client closes it or the
    /// server is dropped.
    NoResponse,
    /// Writes the head, whose `Content-Length` promises the body, then never writes the
    /// body. The socket stays open until the client closes it or the server is dropped.
    StallAfterHead,
    /// Writes the head, then the body `chunk` bytes at a time, waiting `pause` before each
    /// piece; the connection is then kept alive as with [`Behaviour::Respond`].
    ///
    /// A `chunk` of zero is treated as one.
    Drip {
        /// The number of body bytes written per piece.
        chunk: usize,
        /// The wait before each piece.
        pause: Duration,
    },
    /// Closes the connection cleanly (FIN) without writing anything.
    CloseBeforeResponse,
    /// Resets the connection (RST) without writing anything.
    ResetBeforeResponse,
    /// Writes the head, whose `Content-Length` promises the body, then closes the
    /// connection cleanly (FIN) without writing the body.
    CloseAfterHead,
    /// Writes the head, whose `Content-Length` announces the whole body, then the first
    /// `sent` bytes of the body (all of it if `sent` exceeds its length), then resets the
    /// connection (RST).
    ResetMidBody {
        /// The number of body bytes written before the reset.
        sent: usize,
    },
    /// Writes the head, whose `Content-Length` announces the whole body, then the first
    /// `sent` bytes of the body (all of it if `sent` exceeds its length), then closes the
    /// connection cleanly (FIN): to the client, a body cut short.
    CloseMidBody {
        /// The number of body bytes written before the close.
        sent: usize,
    },
    /// Writes the head, whose `Content-Length` announces the whole body, then the first
    /// `sent` bytes of the body (all of it if `sent` exceeds its length), then nothing more:
    /// a body that stalls part-way. The socket stays open until the client closes it or the
    /// server is dropped.
    StallMidBody {
        /// The number of body bytes written before the stall.
        sent: usize,
    },
    /// HTTP/2: answers the stream with `RST_STREAM` and the error code `REFUSED_STREAM`
    /// before reading its body. RFC 9113, section 8.7: the server did not process the
    /// request, so a client may retry it whatever its method. The connection stays open.
    ///
    /// On HTTP/1.1 there is no stream to refuse: the request is read and recorded, then the
    /// connection is closed without a response, as with
    /// [`CloseBeforeResponse`](Self::CloseBeforeResponse).
    RefuseStream,
    /// HTTP/2: answers the stream's `HEADERS` with a `GOAWAY` (error code `NO_ERROR`) whose
    /// last stream identifier is the highest one opened on the connection *before* this
    /// stream, then closes the connection. The request never reaches the server's request
    /// handling: RFC 9113, section 6.8, a client may retry it whatever its method.
    ///
    /// Streams opened earlier on the same connection and still open are cut by the close.
    /// On HTTP/1.1, as [`RefuseStream`](Self::RefuseStream).
    GoAwayUnprocessed,
    /// HTTP/2: reads and records the request, then sends a `GOAWAY` (error code `NO_ERROR`)
    /// whose last stream identifier covers this stream, and closes the connection without
    /// answering. The request may have been acted on: only an idempotent one may be retried.
    ///
    /// On HTTP/1.1, as [`CloseBeforeResponse`](Self::CloseBeforeResponse).
    GoAwayAfterProcessing,
}

/// A response scripted on a [`MockServer`](crate::MockServer).
///
/// A response has a status code, header fields, a body, an optional delay before the head
/// is written, and a [`Behaviour`] that decides how (or whether) it reaches the client.
///
/// On the wire, the status line is `HTTP/1.1`, the code, and the code's canonical reason
/// phrase (empty for codes without one). Header fields are written with lowercase names,
/// grouped by name: each name where it was first added, its values in the order they were
/// added. A `Content-Length` field announcing the body length is
/// added automatically unless the scripted headers already carry `Content-Length` or
/// `Transfer-Encoding`, in which case they are written as given (which allows scripting a
/// lying length or a pre-encoded chunked body).
///
/// A response can also serve byte ranges ([`with_ranges`](Self::with_ranges)), as a static
/// file server does: a request with `Range: bytes=N-` then gets `206 Partial Content` with
/// the rest of the body, unless its `If-Range` no longer matches the scripted `ETag` or
/// `Last-Modified`, in which case it gets the whole body. With
/// [`reset_after`](Self::reset_after), [`close_after`](Self::close_after) or
/// [`stall_after`](Self::stall_after) a body fails part-way, for clients that resume it.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use http_resilience_mock::{Behaviour, MockResponse};
///
/// let slow = MockResponse::ok("done")
///     .with_header("content-type", "text/plain")
///     .with_head_delay(Duration::from_millis(50));
/// assert_eq!(slow.status(), 200);
/// assert_eq!(slow.behaviour(), Behaviour::Respond);
///
/// let unavailable = MockResponse::new(503).with_header("retry-after", "1");
/// assert_eq!(unavailable.headers()["retry-after"], "1");
/// assert!(unavailable.body().is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct MockResponse {
    status: u16,
    headers: HeaderMap,
    body: Bytes,
    head_delay: Duration,
    behaviour: Behaviour,
    ranges: bool,
}

impl MockResponse {
    /// Creates a response with the given status code and an empty body.
    ///
    /// The code is written as given; a value outside `100..=999` produces a malformed status
    /// line, which can serve to test a client's handling of unparsable responses.
    pub fn new(status: u16) -> Self {
        Self {
            status,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            head_delay: Duration::ZERO,
            behaviour: Behaviour::Respond,
            ranges: false,
        }
    }

    /// Creates a `200 OK` response with the given body.
    pub fn ok(body: impl Into<Bytes>) -> Self {
        Self::new(200).with_body(body)
    }

    /// Creates a response that is never answered: the request is read and recorded, and the
    /// connection then stays open and silent ([`Behaviour::NoResponse`]).
    pub fn no_response() -> Self {
        Self::new(200).with_behaviour(Behaviour::NoResponse)
    }

    /// Creates a response whose head is written, announcing a body that never follows
    /// ([`Behaviour::StallAfterHead`]).
    ///
    /// The announced `Content-Length` is the length of the scripted body: a short
    /// placeholder by default, replaceable with [`with_body`](Self::with_body).
    pub fn stall_after_head(status: u16) -> Self {
        Self::new(status)
            .with_body(Bytes::from_static(PROMISED_BODY))
            .with_behaviour(Behaviour::StallAfterHead)
    }

    /// Creates a `200 OK` response whose body is written `chunk` bytes at a time, with
    /// `pause` before each piece ([`Behaviour::Drip`]).
    pub fn drip(body: impl Into<Bytes>, chunk: usize, pause: Duration) -> Self {
        Self::ok(body).with_behaviour(Behaviour::Drip { chunk, pause })
    }

    /// Creates a response that closes the connection cleanly (FIN) once the request has
    /// been read, without answering ([`Behaviour::CloseBeforeResponse`]).
    pub fn close_before_response() -> Self {
        Self::new(200).with_behaviour(Behaviour::CloseBeforeResponse)
    }

    /// Creates a response that resets the connection (RST) once the request has been read,
    /// without answering ([`Behaviour::ResetBeforeResponse`]).
    pub fn reset_before_response() -> Self {
        Self::new(200).with_behaviour(Behaviour::ResetBeforeResponse)
    }

    /// Creates a response whose head is written, announcing a body, after which the
    /// connection is closed cleanly (FIN) ([`Behaviour::CloseAfterHead`]).
    ///
    /// The announced `Content-Length` is the length of the scripted body: a short
    /// placeholder by default, replaceable with [`with_body`](Self::with_body).
    pub fn close_after_head(status: u16) -> Self {
        Self::new(status)
            .with_body(Bytes::from_static(PROMISED_BODY))
            .with_behaviour(Behaviour::CloseAfterHead)
    }

    /// Creates a `200 OK` response announcing the whole `body`, of which only the first
    /// `sent` bytes are written before the connection is reset ([`Behaviour::ResetMidBody`]).
    pub fn reset_mid_body(body: impl Into<Bytes>, sent: usize) -> Self {
        Self::ok(body).with_behaviour(Behaviour::ResetMidBody { sent })
    }

    /// Creates a response that refuses the HTTP/2 stream unread with `RST_STREAM`
    /// `REFUSED_STREAM` ([`Behaviour::RefuseStream`]).
    pub fn refuse_stream() -> Self {
        Self::new(200).with_behaviour(Behaviour::RefuseStream)
    }

    /// Creates a response that turns the HTTP/2 stream away unread with a `GOAWAY` below it,
    /// then closes the connection ([`Behaviour::GoAwayUnprocessed`]).
    pub fn goaway_unprocessed() -> Self {
        Self::new(200).with_behaviour(Behaviour::GoAwayUnprocessed)
    }

    /// Creates a response that reads and records the HTTP/2 request, then sends a `GOAWAY`
    /// covering its stream and closes the connection without answering
    /// ([`Behaviour::GoAwayAfterProcessing`]).
    pub fn goaway_after_processing() -> Self {
        Self::new(200).with_behaviour(Behaviour::GoAwayAfterProcessing)
    }

    /// Adds a header field, keeping any field of the same name already added.
    ///
    /// # Panics
    ///
    /// Panics if `name` is not a valid header name or `value` is not a valid header value.
    /// Both are written by the test author, so an invalid one is a programming error;
    /// [`try_with_header`](Self::try_with_header) reports it as an error instead.
    #[track_caller]
    pub fn with_header(self, name: &str, value: &str) -> Self {
        match self.try_with_header(name, value) {
            Ok(response) => response,
            Err(error) => panic!("MockResponse::with_header: {error}"),
        }
    }

    /// Adds a header field, keeping any field of the same name already added.
    ///
    /// # Errors
    ///
    /// Returns [`InvalidHeader`] if `name` is not a valid header name (as parsed by
    /// [`HeaderName`]) or `value` is not a valid header value (as parsed by [`HeaderValue`]).
    pub fn try_with_header(mut self, name: &str, value: &str) -> Result<Self, InvalidHeader> {
        let header_name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| InvalidHeader::new(name, HeaderPart::Name))?;
        let header_value = HeaderValue::from_str(value)
            .map_err(|_| InvalidHeader::new(name, HeaderPart::Value))?;
        self.headers.append(header_name, header_value);
        Ok(self)
    }

    /// Adds an `ETag` header field carrying `tag` as written: `"\"v1\""` for a strong entity
    /// tag, `"W/\"v1\""` for a weak one. A response that serves ranges
    /// ([`with_ranges`](Self::with_ranges)) compares a request's `If-Range` with it.
    ///
    /// # Panics
    ///
    /// As [`with_header`](Self::with_header), if `tag` is not a valid header value.
    #[track_caller]
    pub fn with_etag(self, tag: &str) -> Self {
        self.with_header("etag", tag)
    }

    /// Adds a `Last-Modified` header field carrying `date` as written (an HTTP date, such
    /// as `"Tue, 15 Nov 1994 08:12:31 GMT"`). A response that serves ranges compares a
    /// request's `If-Range` date with it, byte for byte.
    ///
    /// # Panics
    ///
    /// As [`with_header`](Self::with_header), if `date` is not a valid header value.
    #[track_caller]
    pub fn with_last_modified(self, date: &str) -> Self {
        self.with_header("last-modified", date)
    }

    /// Serves byte ranges of the body, as a static file server does, and says so with
    /// `Accept-Ranges: bytes`.
    ///
    /// A `200` that serves ranges answers a `GET` carrying `Range: bytes=START-` (or
    /// `bytes=START-END`) with `206 Partial Content`, the part asked for and
    /// `Content-Range: bytes START-END/LENGTH`; its behaviour then applies to that part
    /// (so [`reset_after`](Self::reset_after) counts the bytes of the part). When the
    /// request's `If-Range` does not match (an entity tag compared strongly with the
    /// scripted `ETag`, or a date compared with the scripted `Last-Modified`), the whole
    /// body is sent with the scripted status, as for a representation that changed. A start
    /// at or past the end of the body is answered `416 Range Not Satisfiable` with
    /// `Content-Range: bytes */LENGTH`. Any other `Range` (several ranges, a suffix range,
    /// another unit) is ignored, as RFC 9110 allows. The request is recorded as it came.
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
    /// let server = MockServer::start().await?;
    /// server.enqueue(MockResponse::ok("0123456789").with_etag("\"v1\"").with_ranges());
    /// let mut client = TcpStream::connect(server.addr()).await?;
    /// client
    ///     .write_all(b"GET / HTTP/1.1\r\nrange: bytes=4-\r\nif-range: \"v1\"\r\nconnection: close\r\n\r\n")
    ///     .await?;
    /// let mut response = String::new();
    /// client.read_to_string(&mut response).await?;
    /// assert!(response.starts_with("HTTP/1.1 206 Partial Content\r\n"));
    /// assert!(response.contains("\r\ncontent-range: bytes 4-9/10\r\n"));
    /// assert!(response.ends_with("\r\n\r\n456789"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_ranges(mut self) -> Self {
        if !self.ranges {
            self.ranges = true;
            self = self.with_header("accept-ranges", "bytes");
        }
        self
    }

    /// Writes the head and the first `sent` bytes of the body, then resets the connection
    /// (RST) ([`Behaviour::ResetMidBody`]).
    pub fn reset_after(self, sent: usize) -> Self {
        self.with_behaviour(Behaviour::ResetMidBody { sent })
    }

    /// Writes the head and the first `sent` bytes of the body, then closes the connection
    /// cleanly (FIN) ([`Behaviour::CloseMidBody`]).
    pub fn close_after(self, sent: usize) -> Self {
        self.with_behaviour(Behaviour::CloseMidBody { sent })
    }

    /// Writes the head and the first `sent` bytes of the body, then falls silent
    /// ([`Behaviour::StallMidBody`]).
    pub fn stall_after(self, sent: usize) -> Self {
        self.with_behaviour(Behaviour::StallMidBody { sent })
    }

    /// Replaces the body.
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets how long the server waits before writing the head.
    ///
    /// For [`Behaviour::CloseBeforeResponse`] and [`Behaviour::ResetBeforeResponse`], which
    /// write no head, the server waits this long before closing or resetting, and for
    /// [`Behaviour::RefuseStream`] before refusing. It has no effect on
    /// [`Behaviour::NoResponse`] nor on [`Behaviour::GoAwayUnprocessed`], which is sent as
    /// soon as the stream opens.
    pub fn with_head_delay(mut self, delay: Duration) -> Self {
        self.head_delay = delay;
        self
    }

    /// Sets how the response is delivered.
    pub fn with_behaviour(mut self, behaviour: Behaviour) -> Self {
        self.behaviour = behaviour;
        self
    }

    /// Returns the status code.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Returns the scripted header fields.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Returns the body.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Returns the delay before the head is written.
    pub fn head_delay(&self) -> Duration {
        self.head_delay
    }

    /// Returns how the response is delivered.
    pub fn behaviour(&self) -> Behaviour {
        self.behaviour
    }

    /// Reports whether the response serves byte ranges ([`with_ranges`](Self::with_ranges)).
    pub fn serves_ranges(&self) -> bool {
        self.ranges
    }

    /// Replaces the status code.
    pub(crate) fn with_status(mut self, status: u16) -> Self {
        self.status = status;
        self
    }

    /// Returns the response sent when the queue is empty: `500` with `x-mock: unscripted`
    /// and a body saying that no response was queued.
    pub(crate) fn unscripted() -> Self {
        let mut response = Self::new(500).with_body(Bytes::from_static(UNSCRIPTED_BODY));
        response.headers.insert(
            HeaderName::from_static("x-mock"),
            HeaderValue::from_static("unscripted"),
        );
        response
    }

    /// Reports whether the scripted headers ask for the connection to be closed.
    pub(crate) fn closes_connection(&self) -> bool {
        has_token(&self.headers, &CONNECTION, "close")
    }
}

/// Reports whether a comma-separated header field carries `token` (case-insensitively).
pub(crate) fn has_token(headers: &HeaderMap, name: &HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| item.trim().eq_ignore_ascii_case(token))
}

/// The error returned by [`MockResponse::try_with_header`] for an invalid header field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidHeader {
    name: String,
    part: HeaderPart,
}

/// Which part of a header field was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeaderPart {
    Name,
    Value,
}

impl InvalidHeader {
    fn new(name: &str, part: HeaderPart) -> Self {
        Self {
            name: name.to_owned(),
            part,
        }
    }

    /// Returns the header name as it was given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reports whether the name (rather than the value) was rejected.
    pub fn is_invalid_name(&self) -> bool {
        self.part == HeaderPart::Name
    }
}

impl fmt::Display for InvalidHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.part {
            HeaderPart::Name => write!(f, "invalid header name {:?}", self.name),
            HeaderPart::Value => write!(f, "invalid value for header {:?}", self.name),
        }
    }
}

impl Error for InvalidHeader {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_accumulate_in_order() {
        let response = MockResponse::new(200)
            .with_header("set-cookie", "a=1")
            .with_header("Set-Cookie", "b=2");
        let values: Vec<_> = response.headers().get_all("set-cookie").iter().collect();
        assert_eq!(values, ["a=1", "b=2"]);
    }

    #[test]
    fn invalid_header_name_is_reported() {
        let error = MockResponse::new(200)
            .try_with_header("bad name", "v")
            .unwrap_err();
        assert!(error.is_invalid_name());
        assert_eq!(error.name(), "bad name");
        assert_eq!(error.to_string(), "invalid header name \"bad name\"");
    }

    #[test]
    fn invalid_header_value_is_reported() {
        let error = MockResponse::new(200)
            .try_with_header("x-ok", "line\nbreak")
            .unwrap_err();
        assert!(!error.is_invalid_name());
        assert_eq!(error.to_string(), "invalid value for header \"x-ok\"");
    }

    #[test]
    #[should_panic(expected = "invalid header name")]
    fn with_header_panics_on_invalid_name() {
        let _ = MockResponse::new(200).with_header("", "v");
    }

    #[test]
    fn head_only_faults_promise_a_body() {
        assert!(!MockResponse::stall_after_head(200).body().is_empty());
        assert!(!MockResponse::close_after_head(200).body().is_empty());
    }

    #[test]
    fn connection_close_token_is_detected() {
        assert!(MockResponse::new(200)
            .with_header("connection", "upgrade, Close")
            .closes_connection());
        assert!(!MockResponse::new(200)
            .with_header("connection", "keep-alive")
            .closes_connection());
    }

    #[test]
    fn unscripted_response_is_marked() {
        let response = MockResponse::unscripted();
        assert_eq!(response.status(), 500);
        assert_eq!(response.headers()["x-mock"], "unscripted");
        assert!(!response.body().is_empty());
    }
}
