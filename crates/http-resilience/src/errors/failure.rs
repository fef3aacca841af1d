//! Telling failures apart.

use super::{
    chain,
    classified::{self, Reading, Signs},
    AsError,
};
use crate::{
    attempt_timeout::error::AttemptTimedOut,
    body::{BodyChanged, ReopenFailed},
    deadline::error::DeadlineExceeded,
};
use std::{error::Error, fmt, io};

/// What kind of failure an error is: one helper that classifies any error
/// coming out of the stack by walking its `source()` chain.
///
/// Errors are matched by type (`downcast_ref`), never by their text. The chain
/// is walked from the outermost error inwards; an `io::Error` is looked through
/// to the error it wraps.
///
/// # Example
///
/// ```
/// use http_resilience::{attempt_timeout::error::AttemptTimedOut, BoxError, FailureKind};
/// use std::time::Duration;
///
/// let err: BoxError = AttemptTimedOut::new(Duration::from_secs(3)).into();
/// assert_eq!(FailureKind::of(&*err), FailureKind::AttemptTimeout);
///
/// let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
/// assert_eq!(FailureKind::of(&*refused), FailureKind::ConnectRefused);
/// assert!(FailureKind::AttemptTimeout.is_timeout());
/// ```
///
/// Built by [`FailureKind::of`]. More kinds may be added: match with a
/// wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailureKind {
    /// The call's deadline passed
    /// ([`DeadlineExceeded`]).
    Deadline,
    /// One attempt took longer than its limit
    /// ([`AttemptTimedOut`]).
    AttemptTimeout,
    /// No data arrived from the upstream within the read timeout
    /// (the read timeout layer's `ReadTimedOut`).
    ReadTimeout,
    /// Setting up the TCP connection took longer than the connect timeout.
    ConnectTimeout,
    /// The upstream refused the connection.
    ConnectRefused,
    /// The host name did not resolve
    /// ([`DnsError`](crate::transport::error::DnsError), feature `transport`).
    Dns,
    /// The TLS handshake failed
    /// ([`TlsError`](crate::transport::error::TlsError), feature `transport`).
    Tls,
    /// Connecting failed in another way. The request was never sent.
    Connect,
    /// The connection closed before the request was written (hyper's
    /// "canceled"): the request was never sent.
    Unsent,
    /// The upstream turned the request away without processing it: over
    /// HTTP/2, a `RST_STREAM` with the error code `REFUSED_STREAM`, or a
    /// `GOAWAY` whose last stream identifier is below the request's stream
    /// (RFC 9113, section 8.7). The request may have been sent, but the
    /// upstream says it did not act on it.
    Unprocessed,
    /// The connection was reset (an `io::Error` of kind `ConnectionReset`,
    /// `ConnectionAborted` or `BrokenPipe`).
    ConnectionReset,
    /// The connection was closed before the response was complete.
    ConnectionClosed,
    /// Another transport failure (the upstream broke the protocol, for
    /// example).
    Transport,
    /// A circuit breaker turned the call away at once (the breaker's
    /// `CircuitOpen` error): the request was never sent. The ready-made
    /// decoders never retry it.
    CircuitOpen,
    /// Overload control turned the call away (its `Overloaded` error): no
    /// slot in time, or throttled; the request was never sent. The
    /// ready-made decoders never retry it.
    Overloaded,
    /// The rate limit turned the call away (its `RateLimited` error): over
    /// the key's rate with no time to wait for a slot, or paused by the
    /// server; the request was never sent. The ready-made decoders never
    /// retry it.
    RateLimited,
    /// The request body could not be produced as announced: a
    /// [`ReopenBody`](crate::body::ReopenBody) opened to another length than
    /// the one every attempt announces, or yielded fewer or more bytes
    /// ([`BodyChanged`]), or its factory failed ([`ReopenFailed`]). Part of
    /// the request may have been sent. Opening the body again would not mend
    /// it, so the ready-made decoders never retry it.
    RequestBody,
    /// Not a failure of the transport or of these layers (an error of the
    /// caller's own service, for example).
    Other,
}

// ===== impl FailureKind =====

impl FailureKind {
    /// Classifies `error` by walking its `source()` chain.
    ///
    /// The first error in the chain that is one of this crate's timeout types
    /// decides, and so does an error with which one of the crate's features
    /// turned the call away ([`CircuitOpen`](Self::CircuitOpen),
    /// [`Overloaded`](Self::Overloaded), [`RateLimited`](Self::RateLimited)). Otherwise an `io::Error` of kind `ConnectionRefused` is
    /// [`ConnectRefused`](Self::ConnectRefused), and one of kind `TimedOut`
    /// below a connect error of hyper-util's client is
    /// [`ConnectTimeout`](Self::ConnectTimeout). The typed errors of this
    /// crate's connectors are [`Dns`](Self::Dns) and [`Tls`](Self::Tls); any
    /// other connect error is [`Connect`](Self::Connect), and hyper's
    /// "canceled" (the request was never written) is [`Unsent`](Self::Unsent).
    /// An HTTP/2 error (`h2::Error`) that the upstream sent, either a reset
    /// with `REFUSED_STREAM` or a `GOAWAY` (which `h2` reports on a stream
    /// only when the stream is above the announced last stream), is
    /// [`Unprocessed`](Self::Unprocessed). After the connection is up, an `io::Error`
    /// of a reset kind is [`ConnectionReset`](Self::ConnectionReset), and
    /// hyper's "incomplete message" or "closed" (or an unexpected end of
    /// file) is [`ConnectionClosed`](Self::ConnectionClosed). Any other error
    /// of hyper, hyper-util or `std::io` is [`Transport`](Self::Transport).
    /// With the feature `reqwest`, a `reqwest::Error` is read the same way: a
    /// connect error is a connect kind, one while sending or reading the body,
    /// or decoding it, a transport kind. (The crate's reqwest glue registers
    /// this reading before it hands out such an error, and when one is passed
    /// here as itself; a `reqwest::Error` boxed in a process that never used
    /// the glue is read by the errors beneath it only.) A request body that could not be
    /// produced as announced ([`BodyChanged`], [`ReopenFailed`], which hyper
    /// keeps as the cause of its own error) is
    /// [`RequestBody`](Self::RequestBody), whatever error its factory gave.
    /// With the feature `fault`, a failure fault injection made
    /// (`fault::InjectedFault`) is the kind it stands for: a refused
    /// connection [`ConnectRefused`](Self::ConnectRefused), a body cut short
    /// [`ConnectionClosed`](Self::ConnectionClosed), and so on.
    ///
    /// It takes the error as one holds it: a `&BoxError` (what the layers
    /// return), a `&dyn Error`, or an error of hyper, hyper-util or
    /// `std::io` ([`AsError`]).
    ///
    /// ```
    /// use http_resilience::{deadline::error::DeadlineExceeded, BoxError, FailureKind};
    /// use std::time::Duration;
    ///
    /// let err: BoxError = DeadlineExceeded::new(Duration::from_secs(1)).into();
    /// assert_eq!(FailureKind::of(&err), FailureKind::Deadline);
    /// assert_eq!(FailureKind::of(&*err), FailureKind::Deadline);
    /// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    /// assert_eq!(FailureKind::of(&refused), FailureKind::ConnectRefused);
    /// ```
    pub fn of<E: AsError + ?Sized>(error: &E) -> Self {
        Self::of_error(error.as_error())
    }

    /// [`of`](Self::of), for the error as a trait object.
    fn of_error(error: &(dyn Error + 'static)) -> Self {
        let mut clues = Clues::default();
        for err in chain(error) {
            if let Some(kind) = clues.read(err) {
                return kind;
            }
        }
        clues.kind()
    }

    /// Whether this kind is one of the timeouts (deadline, attempt, read or
    /// connect).
    pub const fn is_timeout(&self) -> bool {
        matches!(
            self,
            FailureKind::Deadline
                | FailureKind::AttemptTimeout
                | FailureKind::ReadTimeout
                | FailureKind::ConnectTimeout
        )
    }

    /// Whether the client turned the call away itself, before sending it: a
    /// circuit breaker ([`CircuitOpen`](Self::CircuitOpen)), overload
    /// control ([`Overloaded`](Self::Overloaded)) or the rate limit
    /// ([`RateLimited`](Self::RateLimited)). Sending it again at once
    /// would meet the same refusal, so the ready-made decoders never retry
    /// it, and it costs no retry budget token.
    pub const fn is_turned_away(&self) -> bool {
        matches!(
            self,
            FailureKind::CircuitOpen | FailureKind::Overloaded | FailureKind::RateLimited
        )
    }

    /// Whether the upstream cannot have acted on the request: it was never
    /// sent (connecting failed, or the connection closed before the request
    /// was written), or the upstream said it did not process it
    /// ([`Unprocessed`](Self::Unprocessed)), or the client turned it away
    /// itself ([`is_turned_away`](Self::is_turned_away)). Repeating the
    /// request is safe for any method.
    pub const fn is_before_send(&self) -> bool {
        matches!(
            self,
            FailureKind::CircuitOpen
                | FailureKind::Overloaded
                | FailureKind::RateLimited
                | FailureKind::ConnectTimeout
                | FailureKind::ConnectRefused
                | FailureKind::Dns
                | FailureKind::Tls
                | FailureKind::Connect
                | FailureKind::Unsent
                | FailureKind::Unprocessed
        )
    }
}

impl FailureKind {
    /// A short, stable, snake-case name of the kind, for a metric's or a
    /// span's `error.type`: `attempt_timeout`, `connect_refused`, ...
    pub const fn name(&self) -> &'static str {
        match self {
            FailureKind::Deadline => "deadline",
            FailureKind::AttemptTimeout => "attempt_timeout",
            FailureKind::ReadTimeout => "read_timeout",
            FailureKind::ConnectTimeout => "connect_timeout",
            FailureKind::ConnectRefused => "connect_refused",
            FailureKind::Dns => "dns",
            FailureKind::Tls => "tls",
            FailureKind::Connect => "connect",
            FailureKind::Unsent => "unsent",
            FailureKind::Unprocessed => "unprocessed",
            FailureKind::ConnectionReset => "connection_reset",
            FailureKind::ConnectionClosed => "connection_closed",
            FailureKind::Transport => "transport",
            FailureKind::CircuitOpen => "circuit_open",
            FailureKind::Overloaded => "overloaded",
            FailureKind::RateLimited => "rate_limited",
            FailureKind::RequestBody => "request_body",
            FailureKind::Other => "_OTHER",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            FailureKind::Deadline => "deadline exceeded",
            FailureKind::AttemptTimeout => "attempt timeout",
            FailureKind::ReadTimeout => "read timeout",
            FailureKind::ConnectTimeout => "connect timeout",
            FailureKind::ConnectRefused => "connection refused",
            FailureKind::Dns => "dns error",
            FailureKind::Tls => "tls error",
            FailureKind::Connect => "connect error",
            FailureKind::Unsent => "closed before the request was sent",
            FailureKind::Unprocessed => "refused unprocessed by the upstream",
            FailureKind::ConnectionReset => "connection reset",
            FailureKind::ConnectionClosed => "connection closed",
            FailureKind::Transport => "transport error",
            FailureKind::CircuitOpen => "circuit open",
            FailureKind::Overloaded => "overloaded",
            FailureKind::RateLimited => "rate limited",
            FailureKind::RequestBody => "request body error",
            FailureKind::Other => "other error",
        })
    }
}

/// What the links of a chain read so far say, when none decided the kind.
#[derive(Default)]
struct Clues {
    /// A transport's error was seen.
    transport: bool,
    /// What the transports' errors said, all together.
    signs: Signs,
}

// ===== impl Clues =====

impl Clues {
    /// Reads one link of the chain: its kind, when the link decides it.
    ///
    /// NOTE: the core's own types first, then hyper's, hyper-util's and
    /// `std::io`'s, then the probes the features registered (see
    /// `classified`). Each link is of one type, so the order changes no
    /// result: it only spares the probes' reads for the links the core knows.
    fn read(&mut self, err: &(dyn Error + 'static)) -> Option<FailureKind> {
        let connecting = self.signs.connecting;
        let reading = own_kind(err)
            .map(Reading::Kind)
            .or_else(|| client_error(err))
            .or_else(|| err.downcast_ref().map(|io| io_reading(io, connecting)))
            .or_else(|| classified::read(err))?;
        match reading {
            Reading::Kind(kind) => Some(kind),
            Reading::Transport(signs) => {
                self.transport = true;
                self.signs.connecting |= signs.connecting;
                self.signs.closed |= signs.closed;
                self.signs.unsent |= signs.unsent;
                None
            }
        }
    }

    /// The kind the whole chain says, when no link decided it.
    fn kind(&self) -> FailureKind {
        if self.signs.connecting {
            FailureKind::Connect
        } else if self.signs.unsent {
            FailureKind::Unsent
        } else if self.signs.closed {
            FailureKind::ConnectionClosed
        } else if self.transport {
            FailureKind::Transport
        } else {
            FailureKind::Other
        }
    }
}

/// The kind of an error of this crate's own layers and bodies, if `err` is
/// one.
fn own_kind(err: &(dyn Error + 'static)) -> Option<FailureKind> {
    if err.is::<DeadlineExceeded>() {
        Some(FailureKind::Deadline)
    } else if err.is::<AttemptTimedOut>() {
        Some(FailureKind::AttemptTimeout)
    } else if err.is::<BodyChanged>() || err.is::<ReopenFailed>() {
        Some(FailureKind::RequestBody)
    } else {
        None
    }
}

/// What an `io::Error` of the chain says, below a connect error of the
/// links above it when `connecting`.
fn io_reading(io: &io::Error, connecting: bool) -> Reading {
    let closed = match io.kind() {
        io::ErrorKind::ConnectionRefused => return Reading::Kind(FailureKind::ConnectRefused),
        io::ErrorKind::TimedOut if connecting => return Reading::Kind(FailureKind::ConnectTimeout),
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
            if !connecting =>
        {
            return Reading::Kind(FailureKind::ConnectionReset)
        }
        io::ErrorKind::UnexpectedEof => !connecting,
        _ => false,
    };
    Reading::Transport(Signs {
        closed,
        ..Signs::default()
    })
}

/// What an error of hyper, hyper-util, `h2` or this crate's connectors says,
/// if `err` is one.
#[cfg(feature = "transport")]
fn client_error(err: &(dyn Error + 'static)) -> Option<Reading> {
    if let Some(h2) = err.downcast_ref::<h2::Error>() {
        return Some(if is_unprocessed(h2) {
            Reading::Kind(FailureKind::Unprocessed)
        } else {
            Reading::Transport(Signs::default())
        });
    }
    if let Some(client) = err.downcast_ref::<hyper_util::client::legacy::Error>() {
        return Some(Reading::Transport(Signs {
            connecting: client.is_connect(),
            ..Signs::default()
        }));
    }
    let hyper = err.downcast_ref::<hyper::Error>()?;
    Some(Reading::Transport(Signs {
        closed: hyper.is_incomplete_message() || hyper.is_closed(),
        unsent: hyper.is_canceled(),
        ..Signs::default()
    }))
}

/// Whether an HTTP/2 error says the upstream did not process the request.
///
/// NOTE: `h2` fails a stream with a remote `GOAWAY` only when the stream is
/// above the last stream the `GOAWAY` announces (or is opened after it);
/// streams at or below it fail later, when the connection closes, with an I/O
/// error. So any remote `GOAWAY` on a request means it was not processed,
/// whatever its error code.
#[cfg(feature = "transport")]
fn is_unprocessed(err: &h2::Error) -> bool {
    err.is_remote() && (err.is_go_away() || err.reason() == Some(h2::Reason::REFUSED_STREAM))
}

/// Without the `transport` feature no hyper error can be named.
#[cfg(not(feature = "transport"))]
fn client_error(_: &(dyn Error + 'static)) -> Option<Reading> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BoxError;
    use std::time::Duration;

    #[derive(Debug)]
    struct Wrapper(BoxError);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad("wrapper")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&*self.0)
        }
    }

    fn kind(err: impl Into<BoxError>) -> FailureKind {
        let err: BoxError = Wrapper(err.into()).into();
        FailureKind::of(&*err)
    }

    #[test]
    fn finds_the_layer_errors_below_wrappers() {
        let second = Duration::from_secs(1);
        assert_eq!(kind(DeadlineExceeded::new(second)), FailureKind::Deadline);
        assert_eq!(
            kind(AttemptTimedOut::new(second)),
            FailureKind::AttemptTimeout
        );
    }

    #[test]
    fn looks_inside_io_errors() {
        let wrapped = io::Error::other(AttemptTimedOut::new(Duration::from_secs(1)));
        assert_eq!(kind(wrapped), FailureKind::AttemptTimeout);
    }

    #[test]
    fn io_kinds_map_to_transport_kinds() {
        assert_eq!(
            kind(io::Error::from(io::ErrorKind::ConnectionRefused)),
            FailureKind::ConnectRefused
        );
        // A timeout of the socket outside a connect is not a connect timeout.
        assert_eq!(
            kind(io::Error::from(io::ErrorKind::TimedOut)),
            FailureKind::Transport
        );
        assert_eq!(
            kind(io::Error::from(io::ErrorKind::ConnectionReset)),
            FailureKind::ConnectionReset
        );
        assert_eq!(
            kind(io::Error::from(io::ErrorKind::BrokenPipe)),
            FailureKind::ConnectionReset
        );
        assert_eq!(
            kind(io::Error::from(io::ErrorKind::UnexpectedEof)),
            FailureKind::ConnectionClosed
        );
        assert_eq!(
            kind(io::Error::from(io::ErrorKind::InvalidData)),
            FailureKind::Transport
        );
    }

    #[test]
    #[cfg(feature = "transport")]
    fn only_remote_http2_refusals_are_unprocessed() {
        // A reason that did not come from the upstream (one `h2` or the caller
        // chose) proves nothing about what the upstream did.
        let local = h2::Error::from(h2::Reason::REFUSED_STREAM);
        assert_eq!(kind(local), FailureKind::Transport);
        assert!(FailureKind::Unprocessed.is_before_send());
        assert!(!FailureKind::Unprocessed.is_timeout());
        assert_eq!(
            FailureKind::Unprocessed.to_string(),
            "refused unprocessed by the upstream"
        );
    }

    #[test]
    fn request_body_errors_are_found_below_wrappers_and_never_before_send() {
        assert_eq!(kind(BodyChanged::new(10, 9)), FailureKind::RequestBody);
        // The factory's own error does not decide: the body's failure does.
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(kind(ReopenFailed::new(refused)), FailureKind::RequestBody);
        assert_eq!(
            kind(io::Error::other(BodyChanged::new(1, 2))),
            FailureKind::RequestBody
        );
        assert!(!FailureKind::RequestBody.is_before_send());
        assert!(!FailureKind::RequestBody.is_timeout());
        assert_eq!(FailureKind::RequestBody.name(), "request_body");
        assert_eq!(FailureKind::RequestBody.to_string(), "request body error");
    }

    #[test]
    fn unknown_errors_are_other() {
        assert_eq!(kind("something else"), FailureKind::Other);
    }

    #[test]
    fn kinds_display_as_phrases() {
        assert_eq!(FailureKind::ConnectTimeout.to_string(), "connect timeout");
        assert_eq!(format!("{:>8}", FailureKind::Other), "other error");
        assert!(FailureKind::ConnectRefused.is_before_send());
        assert!(!FailureKind::ReadTimeout.is_before_send());
    }
}
