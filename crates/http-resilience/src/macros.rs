/// Generates `get_ref`, `get_mut` and `into_inner` for a wrapper whose inner
/// value lives in a field called `inner` of type `$inner`.
///
/// `define_inner_service_accessors!()` is the form for services (`S`);
/// `define_inner_service_accessors!(B, "body")` the one for bodies.
macro_rules! define_inner_service_accessors {
    () => {
        define_inner_service_accessors!(S, "service");
    };
    ($inner:ident, $what:literal) => {
        #[doc = concat!("Returns a reference to the inner ", $what, ".")]
        pub fn get_ref(&self) -> &$inner {
            &self.inner
        }

        #[doc = concat!("Returns a mutable reference to the inner ", $what, ".")]
        pub fn get_mut(&mut self) -> &mut $inner {
            &mut self.inner
        }

        #[doc = concat!("Consumes `self`, returning the inner ", $what, ".")]
        pub fn into_inner(self) -> $inner {
            self.inner
        }
    };
}

/// Generates the settings a retry policy and a hedging policy share, on a
/// policy whose shared parts live in a field called `parts`
/// ([`Parts`](crate::policy::Parts)): deadline-aware scheduling, the budget,
/// the listener, the attempt header, and their accessors. `$what` names an
/// attempt of the policy in the docs ("attempt", "copy").
macro_rules! define_policy_parts {
    ($what:literal) => {
        /// Deadline-aware scheduling: before waiting for another
        #[doc = concat!($what, ",")]
        /// checks that the wait plus `min_attempt` (the least time one needs
        /// to be useful) fits before the request's deadline. When it does
        /// not, no wait happens and no further one is sent
        /// ([`Stop::WouldMissDeadline`](crate::Stop::WouldMissDeadline)):
        /// the outcome in hand goes to the caller at once, instead of a
        /// deadline error later. This holds for a delay the server asked for
        /// too. Off by default (Reactor's contract is that the deadline cuts
        /// the wait); see the presets for which turn it on.
        #[must_use]
        pub fn deadline_aware(mut self, min_attempt: std::time::Duration) -> Self {
            self.parts.deadline_margin = Some(min_attempt);
            self
        }

        /// Shares `budget` between every call made with this policy (and
        /// every clone of its layer, and any other policy given the same
        /// `Arc`): each
        #[doc = concat!($what)]
        /// after the first is sent only while the budget allows it, and
        /// takes a token; each accepted outcome puts a fraction back. One the
        /// budget refuses ends the call with
        /// [`Stop::BudgetExhausted`](crate::Stop::BudgetExhausted).
        #[must_use]
        pub fn with_budget(mut self, budget: std::sync::Arc<crate::policy::RetryBudget>) -> Self {
            self.parts.budget = Some(budget);
            self
        }

        /// Tells `listener` of every
        #[doc = concat!($what)]
        /// after the first, of the end of every attempt, and of the end of
        /// every call, each with the call's context
        /// ([`CallEvent`](crate::policy::CallEvent)); a closure
        /// `|heard: &CallEvent<'_>| ...` is one.
        #[must_use]
        pub fn with_listener(
            mut self,
            listener: impl for<'a> crate::telemetry::Listener<crate::policy::CallEvent<'a>>,
        ) -> Self {
            self.parts.listener = Some(std::sync::Arc::new(listener));
            self
        }

        /// Sends the number of each
        #[doc = concat!($what)]
        /// (1 for the first) in the request header `name`, for the
        /// upstream's logs.
        #[must_use]
        pub fn with_attempt_header(mut self, name: http::HeaderName) -> Self {
            self.parts.attempt_header = Some(crate::policy::AttemptHeader::this(name));
            self
        }

        /// Sends the number of those sent before each
        #[doc = concat!($what)]
        /// in the request header `name`: 1 on the second, 2 on the third,
        /// and no header on the first (a value the request brings, copied
        /// from an inbound call, is removed there). This is gRPC's
        /// `grpc-previous-rpc-attempts`, which gRPC's retry design puts on
        /// every attempt after the first, hedged ones included, and which
        /// [`presets::grpc`](crate::presets::grpc) sends.
        #[must_use]
        pub fn with_previous_attempts_header(mut self, name: http::HeaderName) -> Self {
            self.parts.attempt_header = Some(crate::policy::AttemptHeader::previous(name));
            self
        }

        /// Makes the call's and every
        #[doc = concat!($what, "'s")]
        /// spans at `level` instead of `DEBUG` (see
        /// [`telemetry`](crate::telemetry)): at `INFO`, a service that logs
        /// at info level exports every call's spans.
        #[must_use]
        pub const fn with_span_level(mut self, level: tracing::Level) -> Self {
            self.parts.telemetry.level = level;
            self
        }

        /// Keeps the query in the spans' `url.full`. Off by default: a query
        /// often carries keys and signatures.
        #[must_use]
        pub const fn with_url_query_in_spans(mut self) -> Self {
            self.parts.telemetry.url_query = true;
            self
        }

        /// The least time a useful
        #[doc = concat!($what)]
        /// needs, when deadline-aware scheduling is on.
        pub const fn deadline_margin(&self) -> Option<std::time::Duration> {
            self.parts.deadline_margin
        }

        /// The name of the attempt header, if any.
        pub fn attempt_header(&self) -> Option<&http::HeaderName> {
            self.parts
                .attempt_header
                .as_ref()
                .map(crate::policy::AttemptHeader::name)
        }

        /// The decoder.
        pub const fn decoder(&self) -> &D {
            &self.parts.decoder
        }

        /// The parts the retry and the hedging policies share.
        pub(crate) const fn parts(&self) -> &crate::policy::Parts<D> {
            &self.parts
        }
    };
}
