//! Credentials written in a request's URI (`http://user:password@host/`),
//! sent as `Authorization: Basic` and taken out of the URI before the
//! request reaches a connection pool, as reqwest's request builder and curl
//! do.
//!
//! hyper-util's client neither sends a URI's userinfo nor strips it: its pool
//! keys connections by scheme and authority, userinfo included, and logs
//! that key in its `tracing` events, inside the caller's spans; over HTTP/2
//! the authority goes out as `:authority`. Both transports of this crate
//! ([`transport::HttpClient`](crate::transport::HttpClient) and
//! [`reqwest_client::ReqwestService`](crate::reqwest_client::ReqwestService))
//! hand every request to [`move_to_authorization`] first.

use base64::{engine::general_purpose::STANDARD, Engine};
use http::{
    header::AUTHORIZATION,
    uri::{Authority, Parts},
    HeaderValue, Request, Uri,
};
use percent_encoding::percent_decode_str;

/// Takes the userinfo out of `request`'s URI, leaving `host[:port]` as its
/// authority, and, unless the request already has an `Authorization`
/// header, sends it as `Authorization: Basic base64(user:password)`: the
/// user and the password percent-decoded, a missing password as an empty
/// one (`user:`), the header marked sensitive. An empty userinfo
/// (`http://@host/`) is taken out and sends nothing.
///
/// The decoded bytes are sent as they are: RFC 7617 leaves their character
/// set to the two ends (UTF-8 is the usual one), so a user or password that
/// is not UTF-8 once decoded is neither refused nor altered, and a `%` not
/// followed by two hexadecimal digits stays a `%`, as `percent-encoding`
/// reads it. Nothing here panics.
///
/// # Errors
///
/// `http`'s error when the authority cannot be rebuilt without its
/// userinfo (the part after the last `@` of an authority `http` parsed is an
/// authority `http` parses, so this does not happen for a URI made by `http`),
/// or when the headers are at `http`'s limit and have no room for the
/// header. The request is then left as it was, and must not be sent.
pub(crate) fn move_to_authorization<B>(request: &mut Request<B>) -> Result<(), http::Error> {
    let Some((credentials, uri)) = split(request.uri())? else {
        return Ok(());
    };
    if let Some(header) = credentials {
        if !request.headers().contains_key(AUTHORIZATION) {
            request.headers_mut().try_insert(AUTHORIZATION, header)?;
        }
    }
    *request.uri_mut() = uri;
    Ok(())
}

/// The `Authorization` value of `uri`'s userinfo (none for an empty one) and
/// `uri` without it; `None` when it has none.
fn split(uri: &Uri) -> Result<Option<(Option<HeaderValue>, Uri)>, http::Error> {
    let Some((userinfo, host_port)) = uri
        .authority()
        .and_then(|authority| authority.as_str().rsplit_once('@'))
    else {
        return Ok(None);
    };
    let mut parts = Parts::from(uri.clone());
    parts.authority = Some(Authority::try_from(host_port)?);
    let stripped = Uri::from_parts(parts)?;
    let credentials = match userinfo {
        "" => None,
        _ => Some(basic(userinfo)?),
    };
    Ok(Some((credentials, stripped)))
}

/// `Basic base64(user:password)` for `user[:password]`, each part
/// percent-decoded, marked sensitive.
fn basic(userinfo: &str) -> Result<HeaderValue, http::Error> {
    // NOTE: the first `:` separates the two (RFC 3986, section 3.2.1); a `:`
    // in the user is written `%3A`.
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let mut decoded: Vec<u8> = percent_decode_str(user).collect();
    decoded.push(b':');
    decoded.extend(percent_decode_str(password));
    let mut value = String::from("Basic ");
    STANDARD.encode_string(&decoded, &mut value);
    let mut header = HeaderValue::try_from(value)?;
    header.set_sensitive(true);
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moved(uri: &str) -> Request<()> {
        let mut request = Request::get(uri).body(()).unwrap();
        move_to_authorization(&mut request).unwrap();
        request
    }

    #[test]
    fn userinfo_becomes_a_sensitive_basic_header_and_leaves_the_uri() {
        let request = moved("http://user:s3cr3t-p%40ss@127.0.0.1:8080/x?y=1");
        assert_eq!(request.uri(), "http://127.0.0.1:8080/x?y=1");
        let header = &request.headers()[AUTHORIZATION];
        // `base64("user:s3cr3t-p@ss")`.
        assert_eq!(header, "Basic dXNlcjpzM2NyM3QtcEBzcw==");
        assert!(header.is_sensitive());
    }

    #[test]
    fn a_missing_password_is_an_empty_one_and_the_first_colon_separates() {
        // `base64("user:")`.
        assert_eq!(
            moved("http://user@h/").headers()[AUTHORIZATION],
            "Basic dXNlcjo="
        );
        // `base64("u:p:q")`.
        assert_eq!(
            moved("http://u:p:q@h/").headers()[AUTHORIZATION],
            "Basic dTpwOnE="
        );
        // `base64(":")`.
        assert_eq!(moved("http://:@h/").headers()[AUTHORIZATION], "Basic Og==");
    }

    #[test]
    fn the_last_at_sign_ends_the_userinfo_and_ipv6_hosts_keep_their_brackets() {
        let request = moved("http://a@b:c@[::1]:81/");
        assert_eq!(request.uri(), "http://[::1]:81/");
        // `base64("a@b:c")`.
        assert_eq!(request.headers()[AUTHORIZATION], "Basic YUBiOmM=");
    }

    #[test]
    fn bytes_that_are_not_utf8_or_not_an_encoding_are_sent_as_they_are() {
        // `%FF` decodes to the byte 0xFF; `%zz` is not an encoding and stays.
        let request = moved("http://%FF:%zz@h/");
        assert_eq!(request.uri(), "http://h/");
        // `base64([0xFF, b':', b'%', b'z', b'z'])`.
        assert_eq!(request.headers()[AUTHORIZATION], "Basic /zoleno=");
    }

    #[test]
    fn an_authorization_already_there_wins_and_the_uri_is_stripped_anyway() {
        let mut request = Request::get("http://user:pw@h/")
            .header(AUTHORIZATION, "Bearer t")
            .body(())
            .unwrap();
        move_to_authorization(&mut request).unwrap();
        assert_eq!(request.uri(), "http://h/");
        let values: Vec<_> = request.headers().get_all(AUTHORIZATION).iter().collect();
        assert_eq!(values, ["Bearer t"]);
    }

    #[test]
    fn headers_with_no_room_for_the_credentials_are_an_error_and_left_alone() {
        let mut request = Request::get("http://user:pw@h/").body(()).unwrap();
        for n in 0.. {
            let name = http::HeaderName::try_from(format!("x-filler-{n}")).unwrap();
            let filler = http::HeaderValue::from_static("1");
            if request.headers_mut().try_insert(name, filler).is_err() {
                break;
            }
        }
        let err = move_to_authorization(&mut request).unwrap_err();
        assert!(err.is::<http::header::MaxSizeReached>(), "{err}");
        assert_eq!(request.uri(), "http://user:pw@h/", "left as it was");
        assert!(!request.headers().contains_key(AUTHORIZATION));
    }

    #[test]
    fn an_empty_userinfo_is_taken_out_and_sends_nothing() {
        let request = moved("http://@h:1/");
        assert_eq!(request.uri(), "http://h:1/");
        assert!(request.headers().get(AUTHORIZATION).is_none());
    }

    #[test]
    fn a_uri_without_userinfo_is_left_alone() {
        for uri in ["http://h:1/a", "/path-only", "*"] {
            let request = moved(uri);
            assert_eq!(request.uri(), uri);
            assert!(request.headers().is_empty());
        }
    }
}
