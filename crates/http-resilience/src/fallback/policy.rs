//! The policy: which failures fall back, and the response built from each.

use super::body::FallbackBody;
use crate::{BoxError, FailureKind};
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use std::{error::Error, fmt, sync::Arc};

/// What builds a fallback's response from the failure.
type Build = dyn Fn(&Failure<'_>) -> http::Response<Bytes> + Send + Sync;

/// What names a failure, beside its kind and status.
type Predicate = dyn Fn(&Failure<'_>) -> bool + Send + Sync;

/// The failures a [`FallbackLayer`](super::FallbackLayer) answers, and the
/// response it answers each with. See the [module docs](super).
///
/// A failure falls back when it is named: an error of a
/// [`FailureKind`] given to [`on`](Self::on), a response of a status given
/// to [`on_status`](Self::on_status), or anything the predicate given to
/// [`when`](Self::when) says yes to. A policy that names nothing never
/// falls back.
///
/// Clones share everything: a clone costs a reference count.
///
/// # Example
///
/// ```
/// use bytes::Bytes;
/// use http::{Response, StatusCode};
/// use http_resilience::{fallback::FallbackPolicy, FailureKind};
///
/// let cached = Bytes::from_static(b"[]");
/// let policy = FallbackPolicy::new(move |_| Response::new(cached.clone()))
///     .on(FailureKind::Deadline)
///     .on(FailureKind::CircuitOpen)
///     .on_status(StatusCode::SERVICE_UNAVAILABLE)
///     .when(|failure| failure.status().is_some_and(|s| s.as_u16() == 504));
/// # let _ = policy;
/// ```
#[derive(Clone)]
pub struct FallbackPolicy(Arc<Named>);

/// What a policy names, and its builder.
#[derive(Clone)]
struct Named {
    build: Arc<Build>,
    kinds: Vec<FailureKind>,
    statuses: Vec<StatusCode>,
    predicate: Option<Arc<Predicate>>,
}

/// What a call came to, as a fallback reads it: an error, or a response's
/// head (its body unread).
#[derive(Clone, Copy)]
pub struct Failure<'a> {
    repr: Repr<'a>,
    kind: FailureKind,
}

#[derive(Clone, Copy)]
enum Repr<'a> {
    Error(&'a (dyn Error + Send + Sync + 'static)),
    Response {
        status: StatusCode,
        headers: &'a HeaderMap,
    },
}

/// The marker a fallback's response carries in its extensions: it says
/// what it replaced.
///
/// # Example
///
/// ```
/// use http_resilience::{fallback::FellBack, FailureKind};
///
/// # fn read(response: &http::Response<()>) {
/// if let Some(fell_back) = response.extensions().get::<FellBack>() {
///     println!("a fallback for {:?} / {:?}", fell_back.kind(), fell_back.status());
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct FellBack(Replaced);

#[derive(Clone)]
enum Replaced {
    Error(FailureKind, Arc<dyn Error + Send + Sync>),
    Response(StatusCode),
}

// ===== impl FallbackPolicy =====

impl FallbackPolicy {
    /// A policy that answers the failures it will be told to with the
    /// response `build` makes from each: its status, headers, extensions
    /// and body.
    pub fn new<F>(build: F) -> Self
    where
        F: Fn(&Failure<'_>) -> http::Response<Bytes> + Send + Sync + 'static,
    {
        Self(Arc::new(Named {
            build: Arc::new(build),
            kinds: Vec::new(),
            statuses: Vec::new(),
            predicate: None,
        }))
    }

    /// Falls back on an error of `kind` ([`FailureKind::of`]).
    #[must_use]
    pub fn on(mut self, kind: FailureKind) -> Self {
        Arc::make_mut(&mut self.0).kinds.push(kind);
        self
    }

    /// Falls back on a response with `status`: the call's last outcome, once
    /// the retries are spent.
    #[must_use]
    pub fn on_status(mut self, status: StatusCode) -> Self {
        Arc::make_mut(&mut self.0).statuses.push(status);
        self
    }

    /// Falls back on whatever `predicate` says yes to, beside the kinds and
    /// statuses named; it sees every outcome, errors and responses alike (a
    /// later call replaces an earlier predicate).
    #[must_use]
    pub fn when<F>(mut self, predicate: F) -> Self
    where
        F: Fn(&Failure<'_>) -> bool + Send + Sync + 'static,
    {
        Arc::make_mut(&mut self.0).predicate = Some(Arc::new(predicate));
        self
    }

    /// Whether `failure` falls back.
    fn covers(&self, failure: &Failure<'_>) -> bool {
        let named = &*self.0;
        let listed = match failure.repr {
            Repr::Error(_) => named.kinds.contains(&failure.kind),
            Repr::Response { status, .. } => named.statuses.contains(&status),
        };
        listed || named.predicate.as_ref().is_some_and(|p| p(failure))
    }

    /// The call's output for `outcome`: the fallback's response when it
    /// names the failure, else `outcome` unchanged.
    pub(super) fn judge<T>(
        &self,
        outcome: Result<http::Response<T>, BoxError>,
    ) -> Result<http::Response<FallbackBody<T>>, BoxError> {
        match outcome {
            Ok(response) => {
                let failure = Failure::of_response(response.status(), response.headers());
                if !self.covers(&failure) {
                    return Ok(response.map(FallbackBody::inner));
                }
                let built = (self.0.build)(&failure);
                // NOTE: the response replaced goes now, its body unread, so
                // that its connection is given back at once.
                let replaced = Replaced::Response(response.status());
                // NOTE: the attempts that came to the failure were made: the
                // answer keeps their count, unless the builder set its own.
                let attempts = response.extensions().get::<crate::Attempts>().copied();
                drop(response);
                let mut answered = answer(built, replaced);
                if let Some(attempts) = attempts {
                    answered.extensions_mut().get_or_insert(attempts);
                }
                Ok(answered)
            }
            Err(error) => {
                let failure = Failure::of_error(&*error);
                if !self.covers(&failure) {
                    return Err(error);
                }
                let (built, kind) = ((self.0.build)(&failure), failure.kind);
                Ok(answer(built, Replaced::Error(kind, Arc::from(error))))
            }
        }
    }
}

/// The fallback's response, `built`, marked with what it replaced.
fn answer<T>(built: http::Response<Bytes>, replaced: Replaced) -> http::Response<FallbackBody<T>> {
    tracing::debug!(replaced = %replaced, status = %built.status(), "fallback");
    let mut response = built.map(FallbackBody::fallback);
    response.extensions_mut().insert(FellBack(replaced));
    response
}

impl fmt::Debug for FallbackPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FallbackPolicy")
            .field("kinds", &self.0.kinds)
            .field("statuses", &self.0.statuses)
            .field("predicate", &self.0.predicate.is_some())
            .finish_non_exhaustive()
    }
}

// ===== impl Failure =====

impl<'a> Failure<'a> {
    fn of_error(error: &'a (dyn Error + Send + Sync + 'static)) -> Self {
        Self {
            repr: Repr::Error(error),
            kind: FailureKind::of(error),
        }
    }

    fn of_response(status: StatusCode, headers: &'a HeaderMap) -> Self {
        Self {
            repr: Repr::Response { status, headers },
            // NOTE: read only for an error.
            kind: FailureKind::Other,
        }
    }

    /// The kind of the error the call ended in, if it ended in one.
    pub fn kind(&self) -> Option<FailureKind> {
        matches!(self.repr, Repr::Error(_)).then_some(self.kind)
    }

    /// The error the call ended in, if it ended in one.
    pub fn error(&self) -> Option<&'a (dyn Error + Send + Sync + 'static)> {
        match self.repr {
            Repr::Error(error) => Some(error),
            Repr::Response { .. } => None,
        }
    }

    /// The status of the response the call ended in, if it ended in one.
    pub fn status(&self) -> Option<StatusCode> {
        match self.repr {
            Repr::Response { status, .. } => Some(status),
            Repr::Error(_) => None,
        }
    }

    /// The headers of the response the call ended in (a `Retry-After`,
    /// say), if it ended in one.
    pub fn headers(&self) -> Option<&'a HeaderMap> {
        match self.repr {
            Repr::Response { headers, .. } => Some(headers),
            Repr::Error(_) => None,
        }
    }
}

impl fmt::Debug for Failure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut t = f.debug_tuple("Failure");
        match self.repr {
            Repr::Error(_) => t.field(&self.kind),
            Repr::Response { status, .. } => t.field(&status),
        };
        t.finish()
    }
}

// ===== impl FellBack =====

impl FellBack {
    /// The kind of the error replaced, if an error was.
    pub fn kind(&self) -> Option<FailureKind> {
        match &self.0 {
            Replaced::Error(kind, _) => Some(*kind),
            Replaced::Response(_) => None,
        }
    }

    /// The error replaced, if an error was.
    pub fn error(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match &self.0 {
            Replaced::Error(_, error) => Some(&**error),
            Replaced::Response(_) => None,
        }
    }

    /// The status of the response replaced, if a response was.
    pub fn status(&self) -> Option<StatusCode> {
        match &self.0 {
            Replaced::Response(status) => Some(*status),
            Replaced::Error(..) => None,
        }
    }
}

impl fmt::Debug for FellBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FellBack")
            .field(&format_args!("{}", self.0))
            .finish()
    }
}

// ===== impl Replaced =====

impl fmt::Display for Replaced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Replaced::Error(kind, _) => f.write_str(kind.name()),
            Replaced::Response(status) => write!(f, "{}", status.as_u16()),
        }
    }
}
