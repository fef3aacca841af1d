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

/// The beginning of every retrying call, before its first attempt is sent,
/// as `begin_retry!(policy, request => retryer, copy, report, span);`, which
/// binds the four names: a marker the request brings removed (only the
/// retrying layer knows which attempt is the last; one copied with the
/// extensions of another request must not stretch every attempt), the
/// attempt header, the span, a fresh retryer, the kept copy of the request
/// (none with retries off or one attempt allowed: a `ReplayBody` then buffers
/// nothing) and the caller's report, told of the first attempt.
///
/// A macro rather than a function, and bindings rather than a tuple: the kept
/// copy of the request, the largest part of a call's state, is then built in
/// the caller's frame and moved once, into the call's future, where a
/// returned value would be moved again.
macro_rules! begin_retry {
    ($policy:expr, $request:expr => $retryer:ident, $copy:ident, $report:ident, $span:ident) => {
        let policy = &$policy;
        let request: &mut http::Request<_> = $request;
        // NOTE: most requests bring no extensions; the map's own lookups are
        // not inlined, so the empty case is told apart first.
        let bare = request.extensions().is_empty();
        if !bare {
            request
                .extensions_mut()
                .remove::<$crate::retry::FinalAttempt>();
        }
        policy.number_attempt(request, 1);
        let $span = tracing::debug_span!(
            "retry",
            method = %request.method(),
            path = request.uri().path(),
        );
        let $retryer = policy.start();
        let $copy = if policy.is_enabled()
            && $crate::retry::Retryer::max_attempts(&$retryer) != Some(1)
        {
            $crate::retry::Pristine::of(request)
        } else {
            None
        };
        let $report = if bare {
            None
        } else {
            request
                .extensions()
                .get::<$crate::retry::RetryReport>()
                .cloned()
        };
        if let Some(report) = &$report {
            report.record_attempt(1);
        }
    };
}
