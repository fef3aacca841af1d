//! The parts a retry policy and a hedging policy share, so that their
//! settings are held, and applied, in one place.

use super::{CallOptions, Stop, Verdict};
use http::HeaderName;
use std::fmt;

/// The parts of a policy that the retry and the hedging policies share: the
/// decoder, and the options they set alike.
#[derive(Clone)]
pub(crate) struct Parts<D> {
    pub(crate) decoder: D,
    pub(crate) options: CallOptions,
}

// ===== impl Parts =====

impl<D> Parts<D> {
    pub(crate) const fn new(decoder: D) -> Self {
        Self {
            decoder,
            options: CallOptions::new(),
        }
    }

    /// The same parts with another decoder.
    pub(crate) fn map<D2>(self, decoder: impl FnOnce(D) -> D2) -> Parts<D2> {
        Parts {
            decoder: decoder(self.decoder),
            options: self.options,
        }
    }

    /// Writes the attempt header, if there is one, for attempt `n` (1 for
    /// the first).
    #[inline(always)]
    pub(crate) fn number_attempt<B>(&self, request: &mut http::Request<B>, n: u32) {
        if let Some(header) = &self.options.attempt_header {
            header.write(request, n);
        }
    }

    /// Whether the budget, if there is one, allows another attempt.
    pub(crate) fn budget_allows(&self) -> Result<(), Stop> {
        match &self.options.budget {
            Some(budget) if !budget.can_retry() => Err(Stop::BudgetExhausted),
            _ => Ok(()),
        }
    }

    /// Takes a token from the budget, if there is one, for an attempt sent
    /// while others are in flight (a hedge).
    pub(crate) fn spend(&self) {
        if let Some(budget) = &self.options.budget {
            budget.record_retryable_failure();
        }
    }

    /// Tells the budget of a verdict: a retryable one takes a token, an
    /// accepted one puts a fraction back.
    pub(crate) fn record(&self, verdict: Verdict) {
        if let Some(budget) = &self.options.budget {
            match verdict {
                // NOTE: an attempt a guard turned away was never sent;
                // waiting to send it again is no load on the upstream.
                Verdict::Retry { .. } if verdict.resends_unsent() => {}
                Verdict::Retry { .. } => budget.record_retryable_failure(),
                Verdict::Accept => budget.record_success(),
                _ => {}
            }
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for Parts<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parts")
            .field("decoder", &self.decoder)
            .field("options", &self.options)
            .finish()
    }
}

/// The request header that numbers each attempt, and what it counts: shared
/// by the retry and the hedging policies, so that every attempt either one
/// sends is numbered alike.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttemptHeader {
    name: HeaderName,
    numbering: AttemptNumbering,
}

/// What an attempt header counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AttemptNumbering {
    /// The number of this attempt, 1 for the first.
    This,
    /// The number of attempts before this one; absent on the first (gRPC's
    /// `grpc-previous-rpc-attempts`).
    Previous,
}

// ===== impl AttemptHeader =====

impl AttemptHeader {
    /// The number of each attempt, 1 for the first, in `name`.
    pub(crate) const fn this(name: HeaderName) -> Self {
        Self {
            name,
            numbering: AttemptNumbering::This,
        }
    }

    /// Whether it counts the attempts before each one, as
    /// [`previous`](Self::previous) makes it.
    #[cfg(test)]
    pub(crate) fn counts_previous(&self) -> bool {
        self.numbering == AttemptNumbering::Previous
    }

    /// The number of attempts before each one in `name`; none on the first.
    pub(crate) const fn previous(name: HeaderName) -> Self {
        Self {
            name,
            numbering: AttemptNumbering::Previous,
        }
    }

    /// The header's name.
    #[cfg(test)]
    pub(crate) const fn name(&self) -> &HeaderName {
        &self.name
    }

    /// Writes the header for attempt `n` (1 for the first), replacing any
    /// value the request brought.
    pub(crate) fn write<B>(&self, request: &mut http::Request<B>, n: u32) {
        let value = match self.numbering {
            AttemptNumbering::This => n,
            AttemptNumbering::Previous if n > 1 => n - 1,
            AttemptNumbering::Previous => {
                request.headers_mut().remove(&self.name);
                return;
            }
        };
        // NOTE: `try_insert` because `insert` panics on a header map already at
        // its largest size; such a request goes on without the header.
        if request
            .headers_mut()
            .try_insert(&self.name, http::HeaderValue::from(value))
            .is_err()
        {
            tracing::debug!(header = %self.name, "the header map is full: attempt number not sent");
        }
    }
}
