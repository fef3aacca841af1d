//! The key a guard keeps its state under.

use std::{
    fmt,
    hash::{Hash, Hasher},
    sync::Arc,
};

/// What a guard keeps its state under: by default the authority of the
/// request URI (scheme, host and port), or a key of one's own (the one a
/// guard's policy's `with_key` function gives).
///
/// Hosts and schemes compare without regard to ASCII case, as URIs do; a
/// port left out of the URI is the scheme's default (80 for `http`, 443 for
/// `https`, 0 for any other). Cloning a key copies a pointer.
///
/// # Example
///
/// ```
/// use http_resilience::key::UpstreamKey;
///
/// let uri: http::Uri = "http://Example.com/path".parse()?;
/// let key = UpstreamKey::of_uri(&uri);
/// assert_eq!(key, UpstreamKey::authority("http", "example.com", 80));
/// assert_eq!(key.to_string(), "http://example.com:80");
/// assert_eq!(UpstreamKey::custom("tenant-7").to_string(), "tenant-7");
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Clone)]
pub struct UpstreamKey(Arc<Repr>);

enum Repr {
    Authority {
        scheme: Box<str>,
        host: Box<str>,
        port: u16,
    },
    Custom(Box<str>),
}

/// A key seen without copying it: what a lookup in the key map compares.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyRef<'a> {
    Authority {
        scheme: &'a str,
        host: &'a str,
        port: u16,
    },
    Custom(&'a str),
}

// ===== impl UpstreamKey =====

impl UpstreamKey {
    /// The key of an authority: `scheme`, `host` and `port`.
    pub fn authority(scheme: &str, host: &str, port: u16) -> Self {
        Self::from_ref(KeyRef::Authority { scheme, host, port })
    }

    /// The authority of `uri`; a URI without one (`/path`) has the empty
    /// key, shown as `(no authority)`, which all such requests share.
    pub fn of_uri(uri: &http::Uri) -> Self {
        Self::from_ref(KeyRef::of_uri(uri))
    }

    /// A key of one's own (a route, a tenant).
    pub fn custom(key: impl Into<String>) -> Self {
        Self(Arc::new(Repr::Custom(key.into().into_boxed_str())))
    }

    /// The owned key of `key`, its scheme and host in lower case.
    pub(crate) fn from_ref(key: KeyRef<'_>) -> Self {
        Self(Arc::new(match key {
            KeyRef::Authority { scheme, host, port } => Repr::Authority {
                scheme: scheme.to_ascii_lowercase().into_boxed_str(),
                host: host.to_ascii_lowercase().into_boxed_str(),
                port,
            },
            KeyRef::Custom(key) => Repr::Custom(key.into()),
        }))
    }

    /// The key seen as a [`KeyRef`].
    pub(crate) fn as_ref(&self) -> KeyRef<'_> {
        match &*self.0 {
            Repr::Authority { scheme, host, port } => KeyRef::Authority {
                scheme,
                host,
                port: *port,
            },
            Repr::Custom(key) => KeyRef::Custom(key),
        }
    }

    /// The host of an authority key; `None` for a key of one's own.
    pub fn host(&self) -> Option<&str> {
        match &*self.0 {
            Repr::Authority { host, .. } => Some(host),
            Repr::Custom(_) => None,
        }
    }

    /// The port of an authority key; `None` for a key of one's own.
    pub fn port(&self) -> Option<u16> {
        match &*self.0 {
            Repr::Authority { port, .. } => Some(*port),
            Repr::Custom(_) => None,
        }
    }
}

impl PartialEq for UpstreamKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_ref().matches(other.as_ref())
    }
}

impl Eq for UpstreamKey {}

impl Hash for UpstreamKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_ref().hash_into(state);
    }
}

impl fmt::Display for UpstreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            // NOTE: a request whose URI is a path alone (a tonic client made
            // with `new`) says so, rather than `://:0`.
            Repr::Authority { scheme, host, port }
                if scheme.is_empty() && host.is_empty() && *port == 0 =>
            {
                f.pad("(no authority)")
            }
            Repr::Authority { scheme, host, port } => f.pad(&format!("{scheme}://{host}:{port}")),
            Repr::Custom(key) => f.pad(key),
        }
    }
}

impl fmt::Debug for UpstreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UpstreamKey({self})")
    }
}

// ===== impl KeyRef =====

impl<'a> KeyRef<'a> {
    /// The authority of `uri`, borrowed from it.
    pub(crate) fn of_uri(uri: &'a http::Uri) -> Self {
        let scheme = uri.scheme_str().unwrap_or("");
        let port = uri.port_u16().unwrap_or_else(|| default_port(scheme));
        KeyRef::Authority {
            scheme,
            host: uri.host().unwrap_or(""),
            port,
        }
    }

    /// Whether two keys are the same key (scheme and host in any case).
    pub(crate) fn matches(self, other: KeyRef<'_>) -> bool {
        match (self, other) {
            (
                KeyRef::Authority { scheme, host, port },
                KeyRef::Authority {
                    scheme: s,
                    host: h,
                    port: p,
                },
            ) => port == p && same_text(scheme, s) && same_text(host, h),
            (KeyRef::Custom(a), KeyRef::Custom(b)) => a == b,
            _ => false,
        }
    }

    /// Feeds the key to `state`, the same for every spelling that
    /// [`matches`](Self::matches), without copying it.
    pub(crate) fn hash_into<H: Hasher>(self, state: &mut H) {
        match self {
            KeyRef::Authority { scheme, host, port } => {
                state.write_u8(0);
                write_lowercase(state, scheme);
                write_lowercase(state, host);
                state.write_u16(port);
            }
            KeyRef::Custom(key) => {
                state.write_u8(1);
                state.write(key.as_bytes());
                state.write_u8(0xff);
            }
        }
    }
}

/// Writes `text` in lower case, and its end.
fn write_lowercase<H: Hasher>(state: &mut H, text: &str) {
    for byte in text.bytes() {
        state.write_u8(byte.to_ascii_lowercase());
    }
    state.write_u8(0xff);
}

/// The port a URI without one means.
fn default_port(scheme: &str) -> u16 {
    if scheme.eq_ignore_ascii_case("http") {
        80
    } else if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        0
    }
}

/// Whether two schemes or hosts are the same, whatever their case.
///
/// NOTE: one spelling is the common case (a client calls a host as it
/// always writes it), so bytes equal as they are are checked first.
fn same_text(a: &str, b: &str) -> bool {
    a == b || a.eq_ignore_ascii_case(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;

    fn hash(key: KeyRef<'_>) -> u64 {
        let mut hasher = DefaultHasher::new();
        key.hash_into(&mut hasher);
        hasher.finish()
    }

    #[test]
    fn a_path_alone_says_it_has_no_authority() {
        let key = UpstreamKey::of_uri(&http::Uri::from_static("/pkg.Svc/Method"));
        assert_eq!(key, UpstreamKey::authority("", "", 0));
        assert_eq!(key.to_string(), "(no authority)");
        assert_eq!(format!("{key:>16}"), "  (no authority)");
    }

    #[test]
    fn spellings_of_one_authority_are_one_key() {
        let a: http::Uri = "HTTP://Example.COM/x".parse().unwrap();
        let b: http::Uri = "http://example.com:80/y".parse().unwrap();
        assert!(KeyRef::of_uri(&a).matches(KeyRef::of_uri(&b)));
        assert_eq!(hash(KeyRef::of_uri(&a)), hash(KeyRef::of_uri(&b)));
        let other: http::Uri = "http://example.com:8080/".parse().unwrap();
        assert!(!KeyRef::of_uri(&a).matches(KeyRef::of_uri(&other)));
        let https: http::Uri = "https://example.com/".parse().unwrap();
        assert_eq!(UpstreamKey::of_uri(&https).port(), Some(443));
        assert!(!UpstreamKey::custom("http://example.com:80")
            .as_ref()
            .matches(KeyRef::of_uri(&b)));
    }
}
