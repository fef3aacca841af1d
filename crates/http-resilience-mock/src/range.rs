//! Byte ranges (RFC 9110, section 14): a scripted `200` that serves ranges answers a
//! `Range: bytes=...` request with `206 Partial Content` and the part asked for, unless its
//! `If-Range` no longer matches.

use bytes::Bytes;
use http::header::{HeaderValue, CONTENT_RANGE, ETAG, IF_RANGE, LAST_MODIFIED, RANGE};
use http::{HeaderMap, Method};

use crate::response::MockResponse;

/// What the server sends for `script` to a request with `method` and `headers`: the script
/// itself, or, when it serves ranges ([`MockResponse::with_ranges`]) and the request asks
/// for one, the part asked for.
///
/// A range is served only for a `GET` (a `HEAD` gets the head it would) whose `Range` is one
/// `bytes=START-` or `bytes=START-END` and whose `If-Range`, if any, matches: an entity tag
/// compared strongly with the script's `ETag` (neither weak, the same bytes), or a date
/// equal to its `Last-Modified`. Any other `Range` is ignored, as RFC 9110 allows, and a
/// mismatched `If-Range` makes the server send the whole representation with the scripted
/// status. A start past the end of the body is answered `416 Range Not Satisfiable` with
/// `Content-Range: bytes */LENGTH`.
pub(crate) fn answer(script: MockResponse, method: &Method, headers: &HeaderMap) -> MockResponse {
    if !script.serves_ranges()
        || script.status() != 200
        || !(method == Method::GET || method == Method::HEAD)
    {
        return script;
    }
    let Some((start, end)) = headers.get(RANGE).and_then(parse_range) else {
        return script;
    };
    if !if_range_matches(headers.get(IF_RANGE), script.headers()) {
        return script;
    }
    let len = script.body().len() as u64;
    if start >= len {
        let unsatisfiable = script.with_status(416).with_body(Bytes::new());
        return unsatisfiable.with_header(CONTENT_RANGE.as_str(), &format!("bytes */{len}"));
    }
    let last = end.map_or(len - 1, |end| end.min(len - 1));
    let part = script.body().slice(to_index(start)..=to_index(last));
    script.with_status(206).with_body(part).with_header(
        CONTENT_RANGE.as_str(),
        &format!("bytes {start}-{last}/{len}"),
    )
}

/// The one range of `bytes=START-` or `bytes=START-END` (END at or after START), if the
/// value is exactly that.
fn parse_range(value: &HeaderValue) -> Option<(u64, Option<u64>)> {
    let spec = value.to_str().ok()?.trim().strip_prefix("bytes=")?;
    let (start, end) = spec.split_once('-')?;
    let start = parse_position(start)?;
    match end.trim() {
        "" => Some((start, None)),
        end => parse_position(end)
            .filter(|&end| end >= start)
            .map(|end| (start, Some(end))),
    }
}

/// A byte position: ASCII digits only.
fn parse_position(text: &str) -> Option<u64> {
    let text = text.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Whether `if_range` (absent: always) matches the representation's validators.
fn if_range_matches(if_range: Option<&HeaderValue>, headers: &HeaderMap) -> bool {
    let Some(if_range) = if_range else {
        return true;
    };
    let wanted = if_range.as_bytes();
    if wanted.starts_with(b"\"") || wanted.starts_with(b"W/") {
        // NOTE: If-Range compares entity tags strongly (RFC 9110, section 13.1.5): a weak
        // tag on either side never matches.
        let strong = |tag: &[u8]| tag.len() >= 2 && tag.starts_with(b"\"") && tag.ends_with(b"\"");
        return strong(wanted)
            && headers
                .get(ETAG)
                .is_some_and(|tag| strong(tag.as_bytes()) && tag.as_bytes() == wanted);
    }
    headers
        .get(LAST_MODIFIED)
        .is_some_and(|date| date.as_bytes() == wanted)
}

/// A position already known to be within a body held in memory.
fn to_index(position: u64) -> usize {
    usize::try_from(position).expect("a position within a body in memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(range: &str, if_range: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RANGE, HeaderValue::from_str(range).unwrap());
        if let Some(if_range) = if_range {
            headers.insert(IF_RANGE, HeaderValue::from_str(if_range).unwrap());
        }
        headers
    }

    fn served(range: &str, if_range: Option<&str>) -> MockResponse {
        let script = MockResponse::ok("0123456789")
            .with_etag("\"v1\"")
            .with_last_modified("Tue, 15 Nov 1994 08:12:31 GMT")
            .with_ranges();
        answer(script, &Method::GET, &request(range, if_range))
    }

    #[test]
    fn serves_the_range_asked_for() {
        let part = served("bytes=4-", None);
        assert_eq!(part.status(), 206);
        assert_eq!(part.body(), "456789");
        assert_eq!(part.headers()[CONTENT_RANGE], "bytes 4-9/10");
        let middle = served("bytes=2-3", Some("\"v1\""));
        assert_eq!(middle.body(), "23");
        assert_eq!(middle.headers()[CONTENT_RANGE], "bytes 2-3/10");
        let past_end = served("bytes=8-100", None);
        assert_eq!(past_end.headers()[CONTENT_RANGE], "bytes 8-9/10");
        let by_date = served("bytes=9-", Some("Tue, 15 Nov 1994 08:12:31 GMT"));
        assert_eq!(
            (by_date.status(), by_date.body().as_ref()),
            (206, &b"9"[..])
        );
    }

    #[test]
    fn a_mismatched_if_range_gets_the_whole_body() {
        for if_range in ["\"v2\"", "W/\"v1\"", "Wed, 16 Nov 1994 08:12:31 GMT"] {
            let whole = served("bytes=4-", Some(if_range));
            assert_eq!(whole.status(), 200, "{if_range}");
            assert_eq!(whole.body(), "0123456789");
            assert!(!whole.headers().contains_key(CONTENT_RANGE));
        }
    }

    #[test]
    fn other_ranges_are_ignored_and_a_start_past_the_end_is_refused() {
        for range in [
            "bytes=-3",
            "bytes=1-2,4-5",
            "items=1-",
            "bytes=5-2",
            "bytes=a-",
        ] {
            assert_eq!(served(range, None).status(), 200, "{range}");
        }
        let refused = served("bytes=10-", None);
        assert_eq!(refused.status(), 416);
        assert_eq!(refused.headers()[CONTENT_RANGE], "bytes */10");
        assert!(refused.body().is_empty());
    }

    #[test]
    fn only_a_script_that_serves_ranges_does() {
        let plain = MockResponse::ok("0123456789").with_etag("\"v1\"");
        let whole = answer(plain, &Method::GET, &request("bytes=4-", None));
        assert_eq!(whole.status(), 200);
        let post = MockResponse::ok("0123456789").with_ranges();
        assert_eq!(
            answer(post, &Method::POST, &request("bytes=4-", None)).status(),
            200
        );
    }
}
