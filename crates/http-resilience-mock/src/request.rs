//! Reading requests off a connection: head parsing, body framing and chunked decoding.

use std::io;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, EXPECT, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri, Version};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::builder::Limits;
use crate::response::has_token;

/// The largest request head (request line and header fields) accepted, in bytes.
const MAX_HEAD_LEN: usize = 64 * 1024;

/// The most header fields a request head may carry.
const MAX_HEADERS: usize = 128;

/// The longest chunk-size line (size and extensions) accepted, in bytes.
const MAX_CHUNK_LINE_LEN: usize = 4 * 1024;

/// How many bytes each read asks for at least.
const READ_SIZE: usize = 8 * 1024;

/// A request as the mock server received it.
///
/// Requests are recorded once their head and body have been read in full, before the
/// scripted response is applied.
///
/// A body is read in full whatever its length, but only its first bytes are kept, up to the
/// server's limit ([`MockServerBuilder::max_recorded_body`](crate::MockServerBuilder::max_recorded_body),
/// 16 MiB by default): a body cut in the record says so, through
/// [`is_body_truncated`](Self::is_body_truncated) and [`body_len`](Self::body_len), and is
/// never equal to the body that was sent.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordedRequest {
    /// The request method.
    pub method: Method,
    /// The request target as received, usually the path and query (`/items?page=2`).
    pub uri: Uri,
    /// The protocol version of the request line.
    pub version: Version,
    /// The header fields, in the order received.
    pub headers: HeaderMap,
    /// The body, with any chunked transfer coding removed: the whole of it, or its first
    /// bytes if it was longer than the server's recorded-body limit.
    pub body: Bytes,
    /// The length of the body as received, in bytes: `body.len()`, or more when the body was
    /// longer than the server's recorded-body limit and `body` holds only its first bytes.
    pub body_len: u64,
}

// ===== impl RecordedRequest =====

impl RecordedRequest {
    /// Records a request whose body has been read in full.
    pub(crate) fn new(
        method: Method,
        uri: Uri,
        version: Version,
        headers: HeaderMap,
        body: BodyRecord,
    ) -> Self {
        Self {
            method,
            uri,
            version,
            headers,
            body: body.kept.freeze(),
            body_len: body.len,
        }
    }

    /// Reports whether the body was longer than the server's recorded-body limit, so that
    /// [`body`](Self::body) holds only its first bytes ([`body_len`](Self::body_len) of them
    /// were received).
    pub fn is_body_truncated(&self) -> bool {
        self.body_len > self.body.len() as u64
    }
}

/// A request body as it is recorded: its first bytes, up to a limit, and its full length.
#[derive(Debug)]
pub(crate) struct BodyRecord {
    kept: BytesMut,
    len: u64,
    limit: usize,
}

// ===== impl BodyRecord =====

impl BodyRecord {
    /// An empty record that keeps at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            kept: BytesMut::new(),
            len: 0,
            limit,
        }
    }

    /// Counts `bytes` as received, keeping what fits under the limit.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        let room = self.limit - self.kept.len();
        self.kept.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.len += bytes.len() as u64;
    }
}

/// How the body of a request is delimited (RFC 9112, section 6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// A body of exactly this many bytes (zero when the request announces none).
    Length(u64),
    /// A body in the chunked transfer coding.
    Chunked,
}

/// A parsed request head, before its body has been read.
#[derive(Debug)]
pub(crate) struct RequestHead {
    method: Method,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    framing: Framing,
}

impl RequestHead {
    /// Returns the request method.
    pub(crate) fn method(&self) -> &Method {
        &self.method
    }

    /// Returns the request header fields.
    pub(crate) fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Reports whether the client waits for `100 Continue` before sending its body.
    pub(crate) fn expects_continue(&self) -> bool {
        self.version == Version::HTTP_11
            && self.framing != Framing::Length(0)
            && has_token(&self.headers, &EXPECT, "100-continue")
    }

    /// Reports whether the client allows the connection to serve another request.
    ///
    /// HTTP/1.1 connections persist unless `Connection: close` is sent; HTTP/1.0 ones only
    /// persist when `Connection: keep-alive` is sent.
    pub(crate) fn keep_alive(&self) -> bool {
        if has_token(&self.headers, &CONNECTION, "close") {
            return false;
        }
        self.version != Version::HTTP_10 || has_token(&self.headers, &CONNECTION, "keep-alive")
    }

    /// Combines the head with its body into a recorded request.
    pub(crate) fn into_recorded(self, body: BodyRecord) -> RecordedRequest {
        RecordedRequest::new(self.method, self.uri, self.version, self.headers, body)
    }
}

/// Reads requests from a byte stream, keeping bytes read past one request for the next.
#[derive(Debug)]
pub(crate) struct RequestReader<R> {
    io: R,
    buf: BytesMut,
    limits: Limits,
}

impl<R: AsyncRead + Unpin> RequestReader<R> {
    /// Wraps a stream, whose client is held to `limits`.
    pub(crate) fn new(io: R, limits: Limits) -> Self {
        Self {
            io,
            buf: BytesMut::new(),
            limits,
        }
    }

    /// Returns the underlying stream, for writing responses.
    pub(crate) fn get_mut(&mut self) -> &mut R {
        &mut self.io
    }

    /// Reads the next request head, which must arrive in full within the idle timeout.
    ///
    /// Returns `Ok(None)` when the client closed the stream between requests.
    ///
    /// # Errors
    ///
    /// Fails on a read error, on a stream that ends inside a head, on a head longer than
    /// 64 KiB, on a head that is not a valid HTTP/1.x request, and with
    /// [`io::ErrorKind::TimedOut`] on a head that takes longer than the idle timeout.
    pub(crate) async fn read_head(&mut self) -> io::Result<Option<RequestHead>> {
        let limits = self.limits;
        timed_out_past(limits.within_idle(self.read_head_whenever()).await)
    }

    /// Reads the next request head, however long it takes.
    async fn read_head_whenever(&mut self) -> io::Result<Option<RequestHead>> {
        loop {
            if !self.buf.is_empty() {
                if let Some((head, len)) = parse_head(&self.buf)? {
                    self.buf.advance(len);
                    return Ok(Some(head));
                }
                if self.buf.len() >= MAX_HEAD_LEN {
                    return Err(invalid("request head too large"));
                }
            }
            if !self.fill(READ_SIZE).await? {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
        }
    }

    /// Reads the body that follows `head` in full, recording its first bytes up to the
    /// recorded-body limit.
    ///
    /// # Errors
    ///
    /// Fails on a read error, on a stream that ends inside the body, on malformed chunked
    /// coding, and with [`io::ErrorKind::TimedOut`] when the body pauses for longer than the
    /// idle timeout.
    pub(crate) async fn read_body(&mut self, head: &RequestHead) -> io::Result<BodyRecord> {
        let mut body = BodyRecord::new(self.limits.max_recorded_body);
        match head.framing {
            Framing::Length(len) => self.read_into(len, &mut body).await?,
            Framing::Chunked => self.read_chunked(&mut body).await?,
        }
        Ok(body)
    }

    /// Reads and discards everything until the client closes the stream or it fails.
    pub(crate) async fn discard_until_closed(&mut self) {
        loop {
            self.buf.clear();
            if !matches!(self.fill(READ_SIZE).await, Ok(true)) {
                return;
            }
        }
    }

    /// Reads more bytes into the buffer, returning `false` at the end of the stream.
    async fn fill(&mut self, at_least: usize) -> io::Result<bool> {
        self.buf.reserve(at_least.clamp(1, 64 * 1024));
        Ok(self.io.read_buf(&mut self.buf).await? != 0)
    }

    /// Reads more bytes of a body into the buffer, as [`fill`](Self::fill), waiting for them
    /// no longer than the idle timeout.
    async fn fill_body(&mut self, at_least: usize) -> io::Result<bool> {
        let limits = self.limits;
        timed_out_past(limits.within_idle(self.fill(at_least)).await)
    }

    /// Reads exactly `len` body bytes into `body`, a buffer's worth at a time.
    async fn read_into(&mut self, mut len: u64, body: &mut BodyRecord) -> io::Result<()> {
        while len > 0 {
            if self.buf.is_empty() {
                let wanted = usize::try_from(len).unwrap_or(usize::MAX);
                if !self.fill_body(wanted).await? {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            let n = usize::try_from(len).map_or(self.buf.len(), |len| len.min(self.buf.len()));
            body.push(&self.buf[..n]);
            self.buf.advance(n);
            len -= n as u64;
        }
        Ok(())
    }

    /// Reads one CRLF-terminated line of at most `max` bytes, returned without the CRLF.
    async fn read_line(&mut self, max: usize) -> io::Result<Bytes> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|pair| pair == b"\r\n") {
                if end > max {
                    return Err(invalid("line too long"));
                }
                let line = self.buf.split_to(end).freeze();
                self.buf.advance(2);
                return Ok(line);
            }
            if self.buf.len() > max + 1 {
                return Err(invalid("line too long"));
            }
            if !self.fill_body(READ_SIZE).await? {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Reads a body in the chunked transfer coding (RFC 9112, section 7.1), ignoring chunk
    /// extensions and skipping the trailer section.
    async fn read_chunked(&mut self, body: &mut BodyRecord) -> io::Result<()> {
        loop {
            let line = self.read_line(MAX_CHUNK_LINE_LEN).await?;
            let size = parse_chunk_size(&line)?;
            if size == 0 {
                break;
            }
            self.read_into(size, body).await?;
            if !self.read_line(0).await?.is_empty() {
                return Err(invalid("chunk data not followed by CRLF"));
            }
        }
        let mut trailer_len = 0;
        loop {
            let line = self.read_line(MAX_HEAD_LEN).await?;
            if line.is_empty() {
                return Ok(());
            }
            trailer_len += line.len() + 2;
            if trailer_len > MAX_HEAD_LEN {
                return Err(invalid("trailer section too large"));
            }
        }
    }
}

/// Parses a complete request head at the start of `buf`, returning it with its length.
///
/// Returns `Ok(None)` when more bytes are needed.
fn parse_head(buf: &[u8]) -> io::Result<Option<(RequestHead, usize)>> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut fields);
    let len = match request.parse(buf).map_err(invalid)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => return Ok(None),
    };
    if len > MAX_HEAD_LEN {
        return Err(invalid("request head too large"));
    }
    let (Some(method), Some(target), Some(minor)) = (request.method, request.path, request.version)
    else {
        return Err(invalid("incomplete request line"));
    };
    let method = Method::from_bytes(method.as_bytes()).map_err(invalid)?;
    let uri = Uri::try_from(target).map_err(invalid)?;
    let version = match minor {
        0 => Version::HTTP_10,
        1 => Version::HTTP_11,
        _ => return Err(invalid("unsupported HTTP version")),
    };
    let mut headers = HeaderMap::with_capacity(request.headers.len());
    for field in request.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(invalid)?;
        let value = HeaderValue::from_bytes(field.value).map_err(invalid)?;
        headers.append(name, value);
    }
    let framing = framing(&headers)?;
    let head = RequestHead {
        method,
        uri,
        version,
        headers,
        framing,
    };
    Ok(Some((head, len)))
}

/// Decides how the body is delimited: by `Transfer-Encoding` when present (whose final
/// coding must then be chunked), otherwise by `Content-Length`, otherwise empty.
fn framing(headers: &HeaderMap) -> io::Result<Framing> {
    if headers.contains_key(TRANSFER_ENCODING) {
        let mut last_coding = None;
        for value in headers.get_all(TRANSFER_ENCODING).iter() {
            let text = value.to_str().map_err(invalid)?;
            let coding = text.split(',').map(str::trim).rfind(|c| !c.is_empty());
            last_coding = coding.or(last_coding);
        }
        return match last_coding {
            Some(coding) if coding.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
            _ => Err(invalid("request body is not chunked")),
        };
    }
    let mut length = None;
    for value in &headers.get_all(CONTENT_LENGTH) {
        let text = value.to_str().map_err(invalid)?;
        for item in text.split(',') {
            let item = item.trim();
            if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid("invalid content-length"));
            }
            let parsed: u64 = item
                .parse()
                .map_err(|_| invalid("content-length overflows"))?;
            if length.is_some_and(|known| known != parsed) {
                return Err(invalid("conflicting content-length values"));
            }
            length = Some(parsed);
        }
    }
    Ok(Framing::Length(length.unwrap_or(0)))
}

/// Parses the hexadecimal size at the start of a chunk-size line, before any extension.
fn parse_chunk_size(line: &[u8]) -> io::Result<u64> {
    let digits = line
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(invalid("invalid chunk size"));
    }
    digits
        .iter()
        .try_fold(0u64, |size, &digit| {
            let value = char::from(digit).to_digit(16)?;
            size.checked_mul(16)?.checked_add(u64::from(value))
        })
        .ok_or_else(|| invalid("chunk size overflows"))
}

/// The result of work cut at the idle timeout, `None` becoming [`io::ErrorKind::TimedOut`].
fn timed_out_past<T>(result: Option<io::Result<T>>) -> io::Result<T> {
    result.unwrap_or_else(|| Err(io::ErrorKind::TimedOut.into()))
}

/// Builds the error that closes a connection on a malformed request.
fn invalid(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, error)
}

#[cfg(test)]
mod tests {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;

    use super::*;

    /// A stream that yields its bytes one at a time, to exercise partial reads.
    struct Trickle<'a>(&'a [u8]);

    impl AsyncRead for Trickle<'_> {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some((&first, rest)) = self.0.split_first() {
                buf.put_slice(&[first]);
                self.0 = rest;
            }
            Poll::Ready(Ok(()))
        }
    }

    async fn read_one(input: &[u8]) -> io::Result<Option<RecordedRequest>> {
        let mut reader = RequestReader::new(Trickle(input), Limits::default());
        let Some(head) = reader.read_head().await? else {
            return Ok(None);
        };
        let body = reader.read_body(&head).await?;
        Ok(Some(head.into_recorded(body)))
    }

    #[tokio::test]
    async fn parses_a_head_delivered_byte_by_byte() {
        let request = read_one(b"GET /a?b=c HTTP/1.1\r\nHost: x\r\nX-Two: 1\r\nx-two: 2\r\n\r\n")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(request.method, Method::GET);
        assert_eq!(request.uri, "/a?b=c");
        assert_eq!(request.version, Version::HTTP_11);
        assert_eq!(request.headers.get_all("x-two").iter().count(), 2);
        assert!(request.body.is_empty());
    }

    #[tokio::test]
    async fn decodes_chunked_body_with_extensions_and_trailers() {
        let input = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n\
            5;name=value\r\nhello\r\n1A\r\n, chunked world, in parts!\r\n\
            0\r\nx-trailer: 1\r\n\r\n";
        let request = read_one(input).await.unwrap().unwrap();
        assert_eq!(request.body, "hello, chunked world, in parts!");
    }

    #[tokio::test]
    async fn rejects_chunk_without_crlf_after_data() {
        let input = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n";
        let error = read_one(input).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    }

    #[tokio::test]
    async fn rejects_invalid_chunk_sizes() {
        for size in ["", "+5", "zz", "fffffffffffffffffffff"] {
            let input = format!("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\n");
            let error = read_one(input.as_bytes()).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "size {size:?}");
        }
    }

    #[tokio::test]
    async fn rejects_conflicting_content_lengths() {
        let input = b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd";
        assert!(read_one(input).await.is_err());
    }

    #[tokio::test]
    async fn rejects_non_chunked_transfer_encoding() {
        let input = b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n";
        assert!(read_one(input).await.is_err());
    }

    #[test]
    fn only_a_final_chunked_coding_frames_the_body() {
        let framing_of = |raw: &[u8]| parse_head(raw).map(|head| head.map(|(h, _)| h.framing));
        let chunked =
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert_eq!(framing_of(chunked).unwrap(), Some(Framing::Chunked));
        assert!(
            framing_of(b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n").is_err()
        );
        let both = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
        assert_eq!(framing_of(both).unwrap(), Some(Framing::Chunked));
    }

    #[test]
    fn a_record_keeps_the_first_bytes_up_to_its_limit() {
        let mut record = BodyRecord::new(5);
        for piece in [&b"abc"[..], b"defg", b"", b"hij"] {
            record.push(piece);
        }
        let request = parse_head(b"POST / HTTP/1.1\r\n\r\n").unwrap().unwrap().0;
        let recorded = request.into_recorded(record);
        assert_eq!(recorded.body, "abcde");
        assert_eq!(recorded.body_len, 10);
        assert!(recorded.is_body_truncated());

        let mut lengths_only = BodyRecord::new(0);
        lengths_only.push(b"abc");
        assert_eq!(lengths_only.kept.len(), 0);
        assert_eq!(lengths_only.len, 3);
    }

    #[test]
    fn any_content_length_is_read() {
        let framing_of = |raw: &[u8]| parse_head(raw).map(|head| head.map(|(h, _)| h.framing));
        let huge = b"POST / HTTP/1.1\r\nContent-Length: 100000000000\r\n\r\n";
        assert_eq!(
            framing_of(huge).unwrap(),
            Some(Framing::Length(100_000_000_000))
        );
        let overflow = b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n";
        assert!(framing_of(overflow).is_err());
    }

    #[tokio::test]
    async fn reports_truncated_body_as_unexpected_eof() {
        let input = b"POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc";
        let error = read_one(input).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn clean_close_between_requests_is_not_an_error() {
        assert!(read_one(b"").await.unwrap().is_none());
    }

    #[tokio::test]
    async fn rejects_garbage() {
        assert!(read_one(b"\x00\x01 nonsense\r\n\r\n").await.is_err());
    }

    #[test]
    fn keep_alive_follows_version_and_connection_header() {
        let head = |raw: &[u8]| parse_head(raw).unwrap().unwrap().0;
        assert!(head(b"GET / HTTP/1.1\r\n\r\n").keep_alive());
        assert!(!head(b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").keep_alive());
        assert!(!head(b"GET / HTTP/1.0\r\n\r\n").keep_alive());
        assert!(head(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive());
    }
}
