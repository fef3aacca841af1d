//! The error of a [`ResilientClient`](super::ResilientClient) call.

use crate::{
    errors::{
        classified::{self, Reading, Signs},
        AsError,
    },
    policy::Attempts,
    BoxError, FailureKind, RetryReport,
};
use reqwest::{StatusCode, Url};
use std::{error::Error as StdError, fmt, sync::Once};

/// Why a call of a [`ResilientClient`](super::ResilientClient) failed: a
/// `reqwest::Error` when reqwest failed, the layers' error otherwise, and in
/// both cases how many attempts were made.
///
/// When the last attempt failed in reqwest (a refused connection, a reset,
/// a request that could not be built), that `reqwest::Error` is kept as it
/// is: [`reqwest`](Self::reqwest) lends it, [`into_reqwest`](Self::into_reqwest)
/// gives it back. Otherwise the error is one of the layers': the deadline
/// ([`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded)), the
/// attempt timeout ([`AttemptTimedOut`](crate::attempt_timeout::error::AttemptTimedOut)),
/// the read timeout ([`ReadTimedOut`](crate::read_timeout::error::ReadTimedOut)),
/// an open circuit ([`CircuitOpen`](crate::breaker::error::CircuitOpen)), a
/// request body that could not be sent again, ... [`source`](StdError::source)
/// lends it and [`kind`](Self::kind) names it.
///
/// The helpers answer as reqwest's own do, for both: [`is_timeout`](Self::is_timeout)
/// is also true for the layers' timeouts, [`is_connect`](Self::is_connect) for
/// every failure to connect; [`status`](Self::status) and [`url`](Self::url)
/// are reqwest's, with the request's URL when reqwest had none to give.
///
/// The error is its own first link in the `source()` chain; the failure
/// itself is its source. So [`FailureKind::of`] (through
/// [`AsError`](crate::errors::AsError)) and [`errors::find`](crate::errors::find)
/// see every error beneath, the layers' and reqwest's.
///
/// Retries that run out on an error return the last error, as the layers do;
/// [`attempts`](Self::attempts) says how many attempts led to it. (Errors that
/// are responses, a last 503, are not errors here: they come back as the
/// `reqwest::Response`, with the count in its extensions.)
///
/// # Example
///
/// ```no_run
/// use http_resilience::{presets, reqwest_client::ResilientClient, FailureKind};
///
/// # #[tokio::main]
/// # async fn main() {
/// let client = ResilientClient::new(reqwest::Client::new(), presets::reactor().layer());
/// match client.get("http://127.0.0.1:1/").send().await {
///     Ok(response) => println!("{}", response.status()),
///     Err(err) if err.is_connect() => println!("no upstream: {err}"),
///     Err(err) => println!("{} after {} attempts: {err}", FailureKind::of(&err), err.attempts()),
/// }
/// # }
/// ```
pub struct Error {
    inner: Box<Inner>,
}

struct Inner {
    source: Source,
    attempts: u32,
    summary: Option<Attempts>,
    url: Option<Url>,
}

enum Source {
    Reqwest(reqwest::Error),
    Layers(BoxError),
}

// ===== impl Error =====

impl Error {
    /// An error of the stack for a request to `url`, with what `report`
    /// recorded of the attempts.
    pub(super) fn new(error: BoxError, report: &RetryReport, url: Url) -> Self {
        let source = match error.downcast::<reqwest::Error>() {
            Ok(reqwest) => Source::Reqwest(*reqwest),
            Err(layers) => Source::Layers(layers),
        };
        Self::from_parts(source, report.attempts(), report.summary(), Some(url))
    }

    /// reqwest's error from before any attempt (the request could not be
    /// built).
    pub(super) fn unsent(error: reqwest::Error) -> Self {
        Self::from_parts(Source::Reqwest(error), 0, None, None)
    }

    fn from_parts(
        source: Source,
        attempts: u32,
        summary: Option<Attempts>,
        url: Option<Url>,
    ) -> Self {
        classify_reqwest();
        let inner = Inner {
            source,
            attempts,
            summary,
            url,
        };
        Self {
            inner: Box::new(inner),
        }
    }

    /// reqwest's error, when the failure was reqwest's.
    pub fn reqwest(&self) -> Option<&reqwest::Error> {
        match &self.inner.source {
            Source::Reqwest(err) => Some(err),
            Source::Layers(_) => None,
        }
    }

    /// reqwest's error, when the failure was reqwest's; otherwise the error
    /// itself back.
    pub fn into_reqwest(self) -> Result<reqwest::Error, Self> {
        match self.inner.source {
            Source::Reqwest(err) => Ok(err),
            Source::Layers(_) => Err(self),
        }
    }

    /// The failure itself: the `reqwest::Error`, or the layers' error; the
    /// error's [`source`](StdError::source).
    fn failure(&self) -> &(dyn StdError + 'static) {
        match &self.inner.source {
            Source::Reqwest(err) => err,
            Source::Layers(err) => &**err,
        }
    }

    /// What kind of failure this is ([`FailureKind::of`]).
    pub fn kind(&self) -> FailureKind {
        FailureKind::of(self.failure())
    }

    /// Whether a timeout ended the call: reqwest's (`reqwest::Error::is_timeout`),
    /// or one of the layers' (the deadline, the attempt timeout, the read
    /// timeout, a connect timeout).
    pub fn is_timeout(&self) -> bool {
        self.reqwest().is_some_and(reqwest::Error::is_timeout) || self.kind().is_timeout()
    }

    /// Whether connecting failed (`reqwest::Error::is_connect`, or a connect
    /// kind of [`FailureKind`]): the request was never sent.
    pub fn is_connect(&self) -> bool {
        let kind = self.kind();
        self.reqwest().is_some_and(reqwest::Error::is_connect)
            || matches!(
                kind,
                FailureKind::ConnectRefused
                    | FailureKind::ConnectTimeout
                    | FailureKind::Connect
                    | FailureKind::Dns
                    | FailureKind::Tls
            )
    }

    /// The status reqwest's error carries, if any (`reqwest::Error::status`;
    /// reqwest gives one only from `Response::error_for_status`). A status the
    /// retries did not get past is no error here: it comes back as the
    /// response.
    pub fn status(&self) -> Option<StatusCode> {
        self.reqwest().and_then(reqwest::Error::status)
    }

    /// The URL reqwest's error names, or else the URL of the request.
    pub fn url(&self) -> Option<&Url> {
        self.reqwest()
            .and_then(reqwest::Error::url)
            .or(self.inner.url.as_ref())
    }

    /// How many attempts the retry layer started (1 when it made no retry),
    /// as a [`RetryReport`] in the request recorded them; 0 when no retry
    /// layer saw the call: the request could not be built, the stack has no
    /// retry layer, or the service failed before the first attempt.
    pub fn attempts(&self) -> u32 {
        self.inner.attempts
    }

    /// The retry layer's summary of the call (the count, the last verdict,
    /// why it stopped), when the retry layer saw the call end; `None` when
    /// the call was ended around it (by the deadline of the separate
    /// [`DeadlineLayer`](crate::DeadlineLayer), for one).
    pub fn summary(&self) -> Option<Attempts> {
        self.inner.summary
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("Error");
        match &self.inner.source {
            Source::Reqwest(err) => debug.field("reqwest", err),
            Source::Layers(err) => debug.field("layers", err),
        };
        debug
            .field("attempts", &self.inner.attempts)
            .field("url", &self.inner.url.as_ref().map(Url::as_str))
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // NOTE: the count is `attempts()`; the message is the same whatever
        // it is, so that one failure groups as one in logs.
        f.pad("request failed")
    }
}

impl StdError for Error {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(self.failure())
    }
}

impl AsError for Error {
    fn as_error(&self) -> &(dyn StdError + 'static) {
        self
    }
}

impl AsError for reqwest::Error {
    fn as_error(&self) -> &(dyn StdError + 'static) {
        classify_reqwest();
        self
    }
}

// ===== reqwest's errors in FailureKind =====

/// Registers how [`FailureKind::of`] reads a `reqwest::Error` in a chain:
/// a transport's error, one of connecting when reqwest says so
/// (`reqwest::Error::is_connect`); the errors beneath (hyper-util's,
/// `io::Error`) still decide when they say more.
///
/// NOTE: reqwest's errors are made by reqwest, not here, so the glue
/// registers them before it can hand one out: in every call of
/// [`ReqwestService`](super::ReqwestService) (whose constructor stays a
/// `const fn`), in this error's constructors, and when one is looked at
/// through [`AsError`]. After the first, each costs one atomic load.
pub(super) fn classify_reqwest() {
    static CLASSIFIED: Once = Once::new();
    classified::register::<reqwest::Error>(&CLASSIFIED, read_reqwest);
}

/// The probe of `reqwest::Error`.
fn read_reqwest(err: &(dyn StdError + 'static)) -> Option<Reading> {
    let reqwest = err.downcast_ref::<reqwest::Error>()?;
    Some(Reading::Transport(Signs {
        connecting: reqwest.is_connect(),
        ..Signs::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{deadline::error::DeadlineExceeded, errors, Stop};
    use std::time::Duration;

    fn url() -> Url {
        Url::parse("http://upstream.test/orders").unwrap()
    }

    #[test]
    fn the_layers_error_is_its_source() {
        let report = RetryReport::new();
        let deadline: BoxError = DeadlineExceeded::new(Duration::from_secs(2)).into();
        let err = Error::new(deadline, &report, url());
        assert!(err.reqwest().is_none());
        assert!(err.kind() == FailureKind::Deadline && err.is_timeout() && !err.is_connect());
        assert_eq!(FailureKind::of(&err), FailureKind::Deadline);
        assert!(errors::find::<DeadlineExceeded>(&err).is_some());
        assert_eq!(err.url(), Some(&url()));
        assert_eq!(err.status(), None);
        assert_eq!(err.summary(), None);
        assert!(err.into_reqwest().is_err());
    }

    #[test]
    fn reqwests_errors_are_transport_errors_as_one_holds_them() {
        let unbuilt = || reqwest::Client::new().get("not a url").build().unwrap_err();
        // Looked at as itself, boxed, or below this error: reqwest's error
        // is read wherever it is, and it is no connect error.
        assert_eq!(FailureKind::of(&unbuilt()), FailureKind::Transport);
        let boxed: BoxError = unbuilt().into();
        assert_eq!(FailureKind::of(&boxed), FailureKind::Transport);
        let err = Error::unsent(unbuilt());
        assert_eq!(err.kind(), FailureKind::Transport);
        assert!(!err.is_connect() && err.reqwest().is_some());
        assert!(read_reqwest(&std::io::Error::other("not reqwest's")).is_none());
    }

    #[test]
    fn the_message_is_the_same_whatever_the_attempts() {
        let report = RetryReport::new();
        let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
        let err = Error::new(refused, &report, url());
        assert_eq!(err.to_string(), "request failed");
        assert!(err.is_connect());
        let report = RetryReport::new();
        report.record_summary(Attempts::new(1).with_stop(Stop::Failed));
        let other: BoxError = "broken".into();
        let err = Error::new(other, &report, url());
        assert_eq!(err.to_string(), "request failed");
        assert_eq!(err.attempts(), 1);
        assert_eq!(err.summary().map(|s| s.stop()), Some(Stop::Failed));
        report.record_summary(Attempts::new(3).with_stop(Stop::Exhausted));
        let other: BoxError = "broken".into();
        let err = Error::new(other, &report, url());
        assert_eq!(err.to_string(), "request failed");
        assert_eq!(err.attempts(), 3);
        assert_eq!(format!("{err:>17}"), "   request failed");
        assert_eq!(
            errors::report(&err).to_string(),
            "other error: request failed: broken"
        );
    }
}
