//! What a retry policy and a hedging policy set alike (see [`CallOptions`]).

use super::{AttemptHeader, CallListener, RetryBudget};
use crate::telemetry::{Listener, Telemetry};
use http::HeaderName;
use std::{fmt, sync::Arc, time::Duration};

/// What a [`RetryPolicy`](crate::retry::RetryPolicy) and a
/// [`HedgePolicy`](crate::hedge::HedgePolicy) set alike, for every attempt
/// after the first (a retry, or a hedged copy): deadline-aware scheduling,
/// the shared budget, the listener, the attempt header, and the spans.
///
/// A policy changes its options with `map_options`, which starts from the
/// options it has: a preset keeps what it set unless the closure changes
/// it. Every option is off by default; the policy's `Debug` shows them.
///
/// # Example
///
/// ```
/// use http_resilience::{
///     policy::{CallEvent, FixedDelay, RetryBudget, StatusDecoder},
///     retry::RetryPolicy,
/// };
/// use std::{sync::Arc, time::Duration};
///
/// let budget = Arc::new(RetryBudget::new(10, 0.1)?);
/// let policy = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::from_millis(10), 2))
///     .map_options(|options| {
///         options
///             .with_budget(budget)
///             .deadline_aware(Duration::from_millis(50))
///             .with_attempt_header(http::HeaderName::from_static("x-attempt"))
///             .with_listener(|heard: &CallEvent<'_>| println!("{}", heard.event))
///     });
/// let shown = format!("{policy:?}");
/// assert!(shown.contains("deadline_margin: Some(50ms)"), "{shown}");
/// assert!(shown.contains(r#"attempt_header: Some(AttemptHeader { name: "x-attempt""#), "{shown}");
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Clone)]
pub struct CallOptions {
    pub(crate) budget: Option<Arc<RetryBudget>>,
    pub(crate) listener: Option<Arc<CallListener>>,
    pub(crate) attempt_header: Option<AttemptHeader>,
    /// The least time a useful attempt needs (deadline-aware scheduling).
    pub(crate) deadline_margin: Option<Duration>,
    /// How the spans are made.
    pub(crate) telemetry: Telemetry,
    /// Whether every attempt after the first carries its `AttemptNumber`.
    pub(crate) number_attempts: bool,
}

// ===== impl CallOptions =====

impl CallOptions {
    /// Every option off.
    pub const fn new() -> Self {
        Self {
            budget: None,
            listener: None,
            attempt_header: None,
            deadline_margin: None,
            telemetry: Telemetry::DEFAULT,
            number_attempts: false,
        }
    }

    /// Deadline-aware scheduling: before waiting for another attempt (or
    /// copy), checks that the wait plus `min_attempt` (the least time one
    /// needs to be useful) fits before the request's deadline. When it does
    /// not, no wait happens and no further attempt is sent
    /// ([`Stop::WouldMissDeadline`](crate::Stop::WouldMissDeadline)): the
    /// outcome in hand goes to the caller at once, instead of a deadline
    /// error later. This holds for a delay the server asked for too. Off by
    /// default (Reactor's contract is that the deadline cuts the wait); see
    /// the presets for which turn it on.
    #[must_use]
    pub const fn deadline_aware(mut self, min_attempt: Duration) -> Self {
        self.deadline_margin = Some(min_attempt);
        self
    }

    /// Shares `budget` between every call made with the policy (and every
    /// clone of its layer, and any other policy given the same `Arc`): each
    /// attempt after the first is sent only while the budget allows it, and
    /// takes a token; each accepted outcome puts a fraction back. One the
    /// budget refuses ends the call with
    /// [`Stop::BudgetExhausted`](crate::Stop::BudgetExhausted).
    #[must_use]
    pub fn with_budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Tells `listener` of every attempt after the first, of the end of
    /// every attempt, and of the end of every call, each with the call's
    /// context ([`CallEvent`](super::CallEvent)); a closure
    /// `|heard: &CallEvent<'_>| ...` is one.
    #[must_use]
    pub fn with_listener(mut self, listener: impl for<'a> Listener<super::CallEvent<'a>>) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// Sends the number of each attempt (1 for the first) in the request
    /// header `name`, for the upstream's logs.
    #[must_use]
    pub fn with_attempt_header(mut self, name: HeaderName) -> Self {
        self.attempt_header = Some(AttemptHeader::this(name));
        self
    }

    /// Sends the number of those sent before each attempt in the request
    /// header `name`: 1 on the second, 2 on the third, and no header on the
    /// first (a value the request brings, copied from an inbound call, is
    /// removed there). This is gRPC's `grpc-previous-rpc-attempts`, which
    /// gRPC's retry design puts on every attempt after the first, hedged
    /// ones included, and which [`presets::grpc`](crate::presets::grpc)
    /// sends.
    #[must_use]
    pub fn with_previous_attempts_header(mut self, name: HeaderName) -> Self {
        self.attempt_header = Some(AttemptHeader::previous(name));
        self
    }

    /// Puts an [`AttemptNumber`](crate::extensions::AttemptNumber) in the
    /// request extensions of every attempt after the first, for a layer of
    /// one's own below (tower-http's `TraceLayer`, a metrics layer) to read
    /// without a header. Off by default: on a request that carries no other
    /// extension it costs the map of extensions, allocated for every
    /// attempt after the first.
    #[must_use]
    pub const fn with_attempt_number(mut self) -> Self {
        self.number_attempts = true;
        self
    }

    /// Makes the call's and every attempt's spans at `level` instead of
    /// `DEBUG` (see [`telemetry`](crate::telemetry)): at `INFO`, a service
    /// that logs at info level exports every call's spans.
    #[must_use]
    pub const fn with_span_level(mut self, level: tracing::Level) -> Self {
        self.telemetry.level = level;
        self
    }

    /// Keeps the query in the spans' `url.full`. Off by default: a query
    /// often carries keys and signatures.
    #[must_use]
    pub const fn with_url_query_in_spans(mut self) -> Self {
        self.telemetry.url_query = true;
        self
    }

    /// The least time a useful attempt needs, when deadline-aware
    /// scheduling is on.
    pub(crate) const fn deadline_margin(&self) -> Option<Duration> {
        self.deadline_margin
    }

    /// The name of the attempt header, if any.
    #[cfg(test)]
    pub(crate) fn attempt_header(&self) -> Option<&HeaderName> {
        self.attempt_header.as_ref().map(AttemptHeader::name)
    }
}

impl Default for CallOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallOptions")
            .field("deadline_margin", &self.deadline_margin)
            .field("budget", &self.budget)
            .field("listener", &self.listener.is_some())
            .field("attempt_header", &self.attempt_header)
            .field("attempt_number", &self.number_attempts)
            .finish_non_exhaustive()
    }
}
