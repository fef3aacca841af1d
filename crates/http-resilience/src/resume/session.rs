//! What a resumable body keeps to continue (the request to send again, the
//! first response's validator and length, the bytes received so far), and the
//! rules: which first responses may be resumed, which failures, when, and
//! whether a partial response continues the body.

use super::{
    error::{Mismatch, ResumeMismatch},
    ResumePolicy,
};
use crate::{limits, BoxError, FailureKind, RequestDeadline};
use http::{
    header::{
        ACCEPT_RANGES, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, DATE, ETAG, IF_RANGE,
        LAST_MODIFIED, RANGE,
    },
    Extensions, HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri,
    Version,
};
use http_body::Body;
use std::{fmt, marker::PhantomData, time::Duration};

/// The request a response may be resumed for, kept from the call: the service
/// to send the ranged request on, and the parts of the request.
pub(crate) struct Origin<S, B> {
    service: S,
    uri: Uri,
    version: Version,
    headers: HeaderMap,
    extensions: Extensions,
    policy: ResumePolicy,
    _body: PhantomData<fn() -> B>,
}

/// A body being read under resumption: the [`Origin`], and what the first
/// response announced.
pub(crate) struct Session<S, B> {
    origin: Origin<S, B>,
    validator: Validator,
    total: Option<u64>,
    received: u64,
    /// Where the current part ends (its `Content-Range` END plus one), when
    /// the representation's length is unknown.
    part_end: Option<u64>,
    resumes: u32,
    cause: Option<BoxError>,
}

/// A strong validator of the first response, sent in `If-Range`.
#[derive(Debug, Clone)]
enum Validator {
    ETag(HeaderValue),
    LastModified(HeaderValue),
}

/// A `Content-Range` of bytes: `START-END/TOTAL`, or `START-END/*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ContentRange {
    start: u64,
    end: u64,
    total: Option<u64>,
}

// ===== impl Origin =====

impl<S, B: Body> Origin<S, B> {
    /// What a resume of `request`'s response needs, if it may ever be resumed:
    /// a `GET` without a body, under a policy that allows resumes. The service
    /// is cloned (by `service`) only then.
    pub(crate) fn of(
        request: &Request<B>,
        service: impl FnOnce() -> S,
        policy: ResumePolicy,
    ) -> Option<Self> {
        let eligible = policy.max_resumes() > 0
            && request.method() == Method::GET
            && request.body().is_end_stream();
        eligible.then(|| Self {
            service: service(),
            uri: request.uri().clone(),
            version: request.version(),
            headers: request.headers().clone(),
            extensions: request.extensions().clone(),
            policy,
            _body: PhantomData,
        })
    }
}

impl<S, B> Origin<S, B> {
    /// A session for the body of `response`, if it can be resumed: a `200`
    /// with `Accept-Ranges: bytes`, a strong validator, and no
    /// `Content-Encoding` (a range of an encoded representation is a range of
    /// its encoded bytes).
    pub(crate) fn session<T>(self, response: &Response<T>) -> Option<Session<S, B>> {
        let headers = response.headers();
        if response.status() != StatusCode::OK
            || headers.contains_key(CONTENT_ENCODING)
            || !has_token(headers, &ACCEPT_RANGES, "bytes")
        {
            return None;
        }
        let validator = Validator::of(headers)?;
        Some(Session {
            origin: self,
            validator,
            total: content_length(headers),
            received: 0,
            part_end: None,
            resumes: 0,
            cause: None,
        })
    }
}

// ===== impl Session =====

impl<S, B> Session<S, B> {
    /// The service to send the ranged request on.
    pub(crate) fn service(&mut self) -> &mut S {
        &mut self.origin.service
    }

    /// The resumes made so far.
    pub(crate) fn resumes(&self) -> u32 {
        self.resumes
    }

    /// The body bytes read so far.
    pub(crate) fn received(&self) -> u64 {
        self.received
    }

    /// The body bytes still to come, when the length is known.
    pub(crate) fn remaining(&self) -> Option<u64> {
        self.total.map(|total| total.saturating_sub(self.received))
    }

    /// Counts `bytes` more of the body; more than announced is a mismatch.
    pub(crate) fn count(&mut self, bytes: usize) -> Result<(), ResumeMismatch> {
        self.received = self.received.saturating_add(bytes as u64);
        match self.total.or(self.part_end) {
            Some(total) if self.received > total => Err(self.length_mismatch(total)),
            _ => Ok(()),
        }
    }

    /// Checks the end of the body: an end before the announced length is a
    /// mismatch.
    pub(crate) fn end(&mut self) -> Result<(), ResumeMismatch> {
        match self.total.or(self.part_end) {
            Some(total) if self.received != total => Err(self.length_mismatch(total)),
            _ => Ok(()),
        }
    }

    /// Takes `error` to be healed by a resume, if it may be: a failure of the
    /// transport ([`is_resumable`]), with resumes left, bytes still to come,
    /// and time left before the call's deadline. Otherwise the error comes
    /// back, to be returned as it is.
    pub(crate) fn try_resume(&mut self, error: BoxError) -> Result<(), BoxError> {
        let deadline = self.origin.extensions.get::<RequestDeadline>().copied();
        let allowed = self.resumes < self.origin.policy.max_resumes()
            && self.remaining() != Some(0)
            && is_resumable(FailureKind::of(&*error))
            && limits::may_start(
                tokio::time::Instant::now(),
                deadline,
                self.origin.policy.min_remaining(),
            );
        if !allowed {
            return Err(error);
        }
        self.resumes += 1;
        self.cause = Some(error);
        Ok(())
    }

    /// The request for the rest of the body: the first request's method, URI,
    /// version, headers and extensions (the call's deadline among them), with
    /// `Range: bytes=RECEIVED-` and `If-Range` carrying the validator.
    ///
    /// # Errors
    ///
    /// When the first request's headers leave no room for the two (a map at
    /// `http`'s limit), the failure the resume was to heal: the body cannot
    /// be resumed, and ends as it would have without a resume.
    pub(crate) fn ranged_request(&mut self) -> Result<Request<B>, BoxError>
    where
        B: Default,
    {
        let mut request = Request::new(B::default());
        *request.uri_mut() = self.origin.uri.clone();
        *request.version_mut() = self.origin.version;
        *request.headers_mut() = self.origin.headers.clone();
        *request.extensions_mut() = self.origin.extensions.clone();
        let range = HeaderValue::try_from(format!("bytes={}-", self.received))
            .expect("digits make a header value");
        let headers = request.headers_mut();
        let written = headers
            .try_insert(RANGE, range)
            .and_then(|_| headers.try_insert(IF_RANGE, self.validator.value().clone()));
        match written {
            Ok(_) => Ok(request),
            Err(full) => Err(self.cause.take().unwrap_or_else(|| full.into())),
        }
    }

    /// Checks that `response` continues the body: a `206` without an encoding,
    /// with the same validator (when it has one), and a `Content-Range` from
    /// the bytes received to the end of a representation of the announced
    /// length.
    pub(crate) fn check<T>(&mut self, response: &Response<T>) -> Result<(), ResumeMismatch> {
        match self.mismatch(response.status(), response.headers()) {
            None => {
                // NOTE: healed; a later failure has a cause of its own.
                self.cause = None;
                Ok(())
            }
            Some(mismatch) => Err(self.error(mismatch)),
        }
    }

    fn mismatch(&mut self, status: StatusCode, headers: &HeaderMap) -> Option<Mismatch> {
        if status != StatusCode::PARTIAL_CONTENT {
            return Some(Mismatch::Status(status));
        }
        if let Some(coding) = headers.get(CONTENT_ENCODING) {
            return Some(Mismatch::ContentEncoding(coding.clone()));
        }
        let expected = self.validator.value();
        if let Some(got) = headers.get(self.validator.name()) {
            if got != expected {
                let (expected, got) = (expected.clone(), got.clone());
                return Some(Mismatch::Validator { expected, got });
            }
        }
        let got = headers.get(CONTENT_RANGE);
        match got.and_then(ContentRange::parse) {
            Some(range) if self.continues(range) => {
                self.total = self.total.or(range.total);
                // NOTE: with no length known, the part is held to its own
                // range: no more and no fewer bytes than it announced.
                self.part_end = range.end.checked_add(1);
                None
            }
            _ => Some(Mismatch::ContentRange {
                start: self.received,
                total: self.total,
                got: got.cloned(),
            }),
        }
    }

    /// Whether `range` is the rest of the body: from the bytes received to
    /// the end, of the announced length when there is one.
    fn continues(&self, range: ContentRange) -> bool {
        let end = match (self.total, range.total) {
            (Some(total), Some(theirs)) if total != theirs => return false,
            (Some(total), _) | (None, Some(total)) => Some(total),
            (None, None) => None,
        };
        range.start == self.received && end.is_none_or(|end| range.end.checked_add(1) == Some(end))
    }

    fn length_mismatch(&mut self, expected: u64) -> ResumeMismatch {
        let got = self.received;
        self.error(Mismatch::Length { expected, got })
    }

    /// The error for `mismatch`, caused by the failure being healed, if any.
    fn error(&mut self, mismatch: Mismatch) -> ResumeMismatch {
        let error = ResumeMismatch::new(mismatch, self.received);
        match self.cause.take() {
            Some(cause) => error.with_cause(cause),
            None => error,
        }
    }
}

impl<S, B> fmt::Debug for Session<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("uri", &self.origin.uri)
            .field("validator", &self.validator)
            .field("total", &self.total)
            .field("received", &self.received)
            .field("resumes", &self.resumes)
            .finish_non_exhaustive()
    }
}

// ===== impl Validator =====

impl Validator {
    /// The strong validator of a response with `headers`: its `ETag` when it
    /// is strong; with no `ETag`, its `Last-Modified` when that is strong,
    /// that is at least a second before the response's `Date` (RFC 9110,
    /// section 8.8.2.2). A client must not send a date in `If-Range` when the
    /// representation has an entity tag (section 13.1.5), so a weak `ETag`
    /// means no strong validator at all.
    fn of(headers: &HeaderMap) -> Option<Self> {
        if let Some(tag) = headers.get(ETAG) {
            return is_strong_tag(tag).then(|| Validator::ETag(tag.clone()));
        }
        let modified = headers.get(LAST_MODIFIED)?;
        let date = |value: &HeaderValue| httpdate::parse_http_date(value.to_str().ok()?).ok();
        let gap = date(headers.get(DATE)?)?
            .duration_since(date(modified)?)
            .ok()?;
        (gap >= Duration::from_secs(1)).then(|| Validator::LastModified(modified.clone()))
    }

    fn name(&self) -> HeaderName {
        match self {
            Validator::ETag(_) => ETAG,
            Validator::LastModified(_) => LAST_MODIFIED,
        }
    }

    fn value(&self) -> &HeaderValue {
        match self {
            Validator::ETag(value) | Validator::LastModified(value) => value,
        }
    }
}

// ===== impl ContentRange =====

impl ContentRange {
    /// `bytes START-END/TOTAL` or `bytes START-END/*`, with START at or before
    /// END and END before TOTAL.
    fn parse(value: &HeaderValue) -> Option<Self> {
        let text = value.to_str().ok()?.trim();
        // NOTE: range unit names are case-insensitive (RFC 9110, section 14.1).
        let unit = text.get(..6)?;
        if !unit.eq_ignore_ascii_case("bytes ") {
            return None;
        }
        let text = &text[6..];
        let (range, total) = text.split_once('/')?;
        let (start, end) = range.split_once('-')?;
        let (start, end) = (position(start)?, position(end)?);
        let total = match total {
            "*" => None,
            total => Some(position(total)?),
        };
        let valid = start <= end && total.is_none_or(|total| end < total);
        valid.then_some(Self { start, end, total })
    }
}

/// The failures of a body that a resume may heal: the connection reset or
/// closed before the end, no data within the read timeout, or another failure
/// of the transport (an HTTP/2 stream reset, a malformed chunk). Never the
/// deadline, a timeout of the attempt, or an error that is not the transport's
/// (the caller's own service's or body's, or a [`ResumeMismatch`]).
fn is_resumable(kind: FailureKind) -> bool {
    matches!(
        kind,
        FailureKind::ConnectionReset
            | FailureKind::ConnectionClosed
            | FailureKind::ReadTimeout
            | FailureKind::Transport
    )
}

/// A strong entity tag: a quoted string, not marked `W/`.
fn is_strong_tag(tag: &HeaderValue) -> bool {
    let tag = tag.as_bytes();
    tag.len() >= 2 && tag.starts_with(b"\"") && tag.ends_with(b"\"")
}

/// The announced `Content-Length`, if it is one number.
fn content_length(headers: &HeaderMap) -> Option<u64> {
    let mut values = headers.get_all(CONTENT_LENGTH).iter();
    let first = values.next()?;
    values
        .next()
        .is_none()
        .then(|| position(first.to_str().ok()?))?
}

/// A byte position or length: ASCII digits only.
fn position(text: &str) -> Option<u64> {
    let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    digits.then(|| text.parse().ok())?
}

/// Whether a comma-separated header field carries `token`
/// (case-insensitively).
fn has_token(headers: &HeaderMap, name: &HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|item| item.trim().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &'static str) -> Option<ContentRange> {
        ContentRange::parse(&HeaderValue::from_static(text))
    }

    #[test]
    fn content_ranges_are_read_strictly() {
        assert_eq!(
            range("bytes 10-29/30"),
            Some(ContentRange {
                start: 10,
                end: 29,
                total: Some(30)
            })
        );
        assert_eq!(range("bytes 0-4/*").unwrap().total, None);
        for bad in [
            "bytes 10-9/30",
            "bytes 10-30/30",
            "bytes */30",
            "items 0-1/2",
            "bytes -1/2",
            "bytes 0-1",
            "bytes +0-1/2",
        ] {
            assert_eq!(range(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_range_unit_is_read_in_any_case() {
        // RFC 9110, section 14.1: range unit names are case-insensitive.
        for text in ["Bytes 4-9/10", "BYTES 4-9/10"] {
            assert_eq!(
                range(text),
                Some(ContentRange {
                    start: 4,
                    end: 9,
                    total: Some(10)
                }),
                "{text}"
            );
        }
    }

    fn headers(fields: &[(&'static str, &'static str)]) -> HeaderMap {
        fields
            .iter()
            .map(|(name, value)| {
                (
                    HeaderName::from_static(name),
                    HeaderValue::from_static(value),
                )
            })
            .collect()
    }

    #[test]
    fn only_strong_validators_are_taken() {
        let tag = Validator::of(&headers(&[("etag", "\"v1\"")])).unwrap();
        assert_eq!(tag.value(), "\"v1\"");
        assert_eq!(tag.name(), ETAG);
        assert!(Validator::of(&headers(&[("etag", "W/\"v1\"")])).is_none());
        assert!(Validator::of(&headers(&[("etag", "v1")])).is_none());
        let modified = "Tue, 15 Nov 1994 08:12:31 GMT";
        let weak_date = [("last-modified", modified), ("date", modified)];
        assert!(Validator::of(&headers(&weak_date)).is_none(), "too recent");
        assert!(Validator::of(&headers(&[("last-modified", modified)])).is_none());
        let later = [
            ("last-modified", modified),
            ("date", "Tue, 15 Nov 1994 08:12:32 GMT"),
        ];
        let date = Validator::of(&headers(&later)).unwrap();
        assert_eq!(
            (date.name(), date.value()),
            (LAST_MODIFIED, &HeaderValue::from_static(modified))
        );
        let both = [("etag", "W/\"v1\""), later[0], later[1]];
        assert!(
            Validator::of(&headers(&both)).is_none(),
            "no date where there is a tag"
        );
    }

    #[test]
    fn lengths_and_tokens_are_read_exactly() {
        assert_eq!(
            content_length(&headers(&[("content-length", "30")])),
            Some(30)
        );
        assert_eq!(content_length(&headers(&[("content-length", "3 0")])), None);
        let twice = headers(&[("content-length", "30"), ("content-length", "30")]);
        assert_eq!(content_length(&twice), None);
        assert!(has_token(
            &headers(&[("accept-ranges", "none, Bytes")]),
            &ACCEPT_RANGES,
            "bytes"
        ));
        assert!(!has_token(
            &headers(&[("accept-ranges", "none")]),
            &ACCEPT_RANGES,
            "bytes"
        ));
    }
}
