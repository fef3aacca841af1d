//! What a fault injector does to an attempt: make it wait, answer it, or
//! fail it as the transport would.

use super::Latency;
use crate::{
    body::AnswerBody,
    policy::{GRPC_RETRY_PUSHBACK_MS, GRPC_STATUS},
    FailureKind,
};
use bytes::Bytes;
use http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode, Version};
use std::{fmt, sync::Arc, time::Duration};

/// gRPC's message, beside its status.
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

/// What a [`FaultPolicy`](super::FaultPolicy) does to an attempt it picks:
/// make it wait, answer it in the upstream's place (a status with its
/// headers, or a body cut short), or fail it as the transport would; any of
/// them after a wait ([`after`](Self::after)).
///
/// # Example
///
/// ```
/// use http_resilience::fault::{Fault, Latency};
/// use std::time::Duration;
///
/// let slow = Fault::latency(Latency::uniform(Duration::from_millis(100), Duration::from_millis(300))?);
/// let shedding = Fault::unavailable(Duration::from_secs(2));
/// let refused = Fault::connect_refused();
/// let hanging = Fault::connect_timeout().after(Latency::fixed(Duration::from_secs(1)));
/// assert!(format!("{slow:?}").starts_with("Fault { kind: Latency,"));
/// assert!(format!("{shedding:?}").starts_with("Fault { kind: Answered, status: 503,"));
/// assert_eq!(format!("{refused:?}"), "Fault { kind: ConnectRefused, delay: None }");
/// assert!(format!("{hanging:?}").starts_with("Fault { kind: ConnectTimeout, delay: Some("));
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Clone)]
pub struct Fault {
    act: Act,
    delay: Option<Latency>,
}

/// What is done once the wait, if any, is over.
#[derive(Clone)]
pub(super) enum Act {
    /// The attempt goes on to the upstream.
    Pass,
    /// The attempt is answered with the response.
    Respond(Arc<Template>),
    /// The attempt is answered with the response, its body cut after this
    /// many bytes.
    Cut(Arc<Template>, usize),
    /// The attempt fails with the transport's failure of this kind.
    Fail(FaultKind),
}

/// The response an answer is made from: a fresh copy each time.
pub(super) struct Template {
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
    body: Bytes,
}

/// The kind of a [`Fault`], of an [`InjectedFault`](super::InjectedFault),
/// and the marker a response answered in the upstream's place carries in
/// its extensions.
///
/// More kinds may be added: match with a wildcard arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultKind {
    /// A wait before the attempt goes on.
    Latency,
    /// A response (a status, its headers and its body) in the upstream's
    /// place.
    ///
    /// NOTE: not named `Response` (nor `Status`): a variant of a common
    /// type's name makes the compiler write that type's whole path
    /// (`http::Response`) in the messages of every user of the crate.
    Answered,
    /// A response whose body fails part-way, as one whose connection
    /// closed: [`FailureKind::ConnectionClosed`].
    CutBody,
    /// A refused connection: [`FailureKind::ConnectRefused`].
    ConnectRefused,
    /// A connection reset before any byte of the response:
    /// [`FailureKind::ConnectionReset`].
    ConnectionReset,
    /// A connect timeout: [`FailureKind::ConnectTimeout`].
    ConnectTimeout,
    /// A connection closed before the request was sent:
    /// [`FailureKind::Unsent`].
    Unsent,
}

// ===== impl Fault =====

impl Fault {
    /// A wait of `latency` before the attempt goes on to the upstream.
    pub fn latency(latency: Latency) -> Self {
        Self::of(Act::Pass).after(latency)
    }

    /// An answer in the upstream's place: `response`'s status, version,
    /// headers and body (its extensions are not kept), made anew for every
    /// attempt answered.
    pub fn respond(response: http::Response<Bytes>) -> Self {
        Self::of(Act::Respond(Arc::new(Template::of(response))))
    }

    /// An answer with `status`, no header and an empty body.
    pub fn status(status: StatusCode) -> Self {
        let mut response = http::Response::new(Bytes::new());
        *response.status_mut() = status;
        Self::respond(response)
    }

    /// A `503 Service Unavailable` with `Retry-After` in whole seconds
    /// (`retry_after` rounded up), as an upstream shedding load sends.
    pub fn unavailable(retry_after: Duration) -> Self {
        Self::with_retry_after(StatusCode::SERVICE_UNAVAILABLE, retry_after)
    }

    /// A `429 Too Many Requests` with `Retry-After` in whole seconds
    /// (`retry_after` rounded up).
    pub fn too_many_requests(retry_after: Duration) -> Self {
        Self::with_retry_after(StatusCode::TOO_MANY_REQUESTS, retry_after)
    }

    /// gRPC's `UNAVAILABLE` as a server ends a call before sending anything:
    /// a trailers-only response (HTTP 200, `content-type: application/grpc`,
    /// `grpc-status: 14` in its head, an empty body), with
    /// `grpc-retry-pushback-ms` when `pushback` is given (in milliseconds,
    /// rounded up, at most `i32::MAX`).
    pub fn grpc_unavailable(pushback: Option<Duration>) -> Self {
        let mut response = http::Response::new(Bytes::new());
        let headers = response.headers_mut();
        let grpc = HeaderValue::from_static("application/grpc");
        headers.insert(header::CONTENT_TYPE, grpc);
        headers.insert(GRPC_STATUS, HeaderValue::from_static("14"));
        headers.insert(GRPC_MESSAGE, HeaderValue::from_static("injected fault"));
        if let Some(pushback) = pushback {
            let millis = round_up(pushback, Duration::from_millis(1)).min(i32::MAX as u64);
            headers.insert(GRPC_RETRY_PUSHBACK_MS, HeaderValue::from(millis));
        }
        Self::respond(response)
    }

    /// An answer with `response` whose body fails after its first `after`
    /// bytes, as a body does whose connection closed part-way
    /// ([`InjectedFault`](super::InjectedFault), read as
    /// [`FailureKind::ConnectionClosed`]). A body type whose reads cannot
    /// fail (`Full`, `String`) ends there instead ([`AnswerBody::cut`]).
    pub fn cut_body(response: http::Response<Bytes>, after: usize) -> Self {
        Self::of(Act::Cut(Arc::new(Template::of(response)), after))
    }

    /// A refused connection ([`FailureKind::ConnectRefused`]): never sent.
    pub fn connect_refused() -> Self {
        Self::of(Act::Fail(FaultKind::ConnectRefused))
    }

    /// A connection reset before any byte of the response
    /// ([`FailureKind::ConnectionReset`]): the request may have been acted on.
    pub fn connection_reset() -> Self {
        Self::of(Act::Fail(FaultKind::ConnectionReset))
    }

    /// A connect timeout ([`FailureKind::ConnectTimeout`]): never sent. At
    /// once, unless a wait comes first ([`after`](Self::after)), as the
    /// connect timeout's would.
    pub fn connect_timeout() -> Self {
        Self::of(Act::Fail(FaultKind::ConnectTimeout))
    }

    /// A connection closed before the request was written
    /// ([`FailureKind::Unsent`]): never sent.
    pub fn unsent() -> Self {
        Self::of(Act::Fail(FaultKind::Unsent))
    }

    /// The same fault after a wait of `latency` (one wait: a later call
    /// replaces an earlier one). The wait, as every wait a guard makes, ends
    /// at the call's deadline with the deadline's error.
    #[must_use]
    pub fn after(mut self, latency: Latency) -> Self {
        self.delay = Some(latency);
        self
    }

    /// The kind of fault.
    pub(crate) fn kind(&self) -> FaultKind {
        match &self.act {
            Act::Pass => FaultKind::Latency,
            Act::Respond(_) => FaultKind::Answered,
            Act::Cut(..) => FaultKind::CutBody,
            Act::Fail(kind) => *kind,
        }
    }

    /// The wait before the fault, if any.
    pub(crate) const fn delay(&self) -> Option<Latency> {
        self.delay
    }

    const fn of(act: Act) -> Self {
        Self { act, delay: None }
    }

    fn with_retry_after(status: StatusCode, retry_after: Duration) -> Self {
        let mut response = http::Response::new(Bytes::new());
        *response.status_mut() = status;
        let seconds = round_up(retry_after, Duration::from_secs(1));
        let value = HeaderValue::from(seconds);
        response.headers_mut().insert(header::RETRY_AFTER, value);
        Self::respond(response)
    }

    /// What is done once the wait is over.
    pub(super) fn act(&self) -> &Act {
        &self.act
    }
}

impl fmt::Debug for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Fault");
        s.field("kind", &self.kind());
        if let Act::Respond(template) | Act::Cut(template, _) = &self.act {
            s.field("status", &template.status);
        }
        if let Act::Cut(_, after) = &self.act {
            s.field("after", after);
        }
        s.field("delay", &self.delay).finish()
    }
}

/// `duration` in whole `unit`s, rounded up.
fn round_up(duration: Duration, unit: Duration) -> u64 {
    let units = duration.as_nanos().div_ceil(unit.as_nanos());
    u64::try_from(units).unwrap_or(u64::MAX)
}

// ===== impl Template =====

impl Template {
    fn of(response: http::Response<Bytes>) -> Self {
        let (parts, body) = response.into_parts();
        Self {
            status: parts.status,
            version: parts.version,
            headers: parts.headers,
            body,
        }
    }

    /// A response of this template whose body is `body`, marked with
    /// `kind`.
    pub(super) fn response<T>(&self, body: T, kind: FaultKind) -> http::Response<T> {
        let mut response = http::Response::new(body);
        *response.status_mut() = self.status;
        *response.version_mut() = self.version;
        *response.headers_mut() = self.headers.clone();
        response.extensions_mut().insert(kind);
        response
    }

    /// The answer: the template's body whole.
    pub(super) fn whole<T: AnswerBody>(&self) -> http::Response<T> {
        self.response(T::whole(self.body.clone()), FaultKind::Answered)
    }

    /// The answer: the template's body cut after `after` bytes, then
    /// failing with `error`.
    pub(super) fn cut<T: AnswerBody>(
        &self,
        after: usize,
        error: crate::BoxError,
    ) -> http::Response<T> {
        let kept = self.body.slice(..after.min(self.body.len()));
        self.response(T::cut(kept, error), FaultKind::CutBody)
    }
}

// ===== impl FaultKind =====

impl FaultKind {
    /// A short, stable, snake-case name, for logs and metrics: `latency`,
    /// `answered`, `cut_body`, `connect_refused`, `connection_reset`,
    /// `connect_timeout`, `unsent`.
    pub const fn name(&self) -> &'static str {
        match self {
            FaultKind::Latency => "latency",
            FaultKind::Answered => "answered",
            FaultKind::CutBody => "cut_body",
            FaultKind::ConnectRefused => "connect_refused",
            FaultKind::ConnectionReset => "connection_reset",
            FaultKind::ConnectTimeout => "connect_timeout",
            FaultKind::Unsent => "unsent",
        }
    }

    /// The kind of failure a fault of this kind stands for, when it is one.
    pub const fn reads_as(&self) -> Option<FailureKind> {
        match self {
            FaultKind::Latency | FaultKind::Answered => None,
            FaultKind::CutBody => Some(FailureKind::ConnectionClosed),
            FaultKind::ConnectRefused => Some(FailureKind::ConnectRefused),
            FaultKind::ConnectionReset => Some(FailureKind::ConnectionReset),
            FaultKind::ConnectTimeout => Some(FailureKind::ConnectTimeout),
            FaultKind::Unsent => Some(FailureKind::Unsent),
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}
