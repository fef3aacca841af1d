//! The breaker as the combined service takes it: every attempt passes the
//! circuit of its call's key, and its outcome goes back to that circuit.

use super::{
    circuit::{Circuit, Ctx, Ticket},
    error::CircuitOpen,
    policy::Shared,
    registry, BreakerPolicy,
};
use crate::{
    keyed,
    policy::{AnyDecoder, Decoder},
    BoxError,
};
use std::sync::Arc;
use tokio::time::Instant;

mod sealed {
    pub trait Sealed {}
}

/// No circuit breaker: what the combined service has unless
/// [`ResiliencePolicy::with_breaker`](crate::ResiliencePolicy::with_breaker)
/// gives it one. It costs nothing: every step of the breaker compiles away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoBreaker;

/// A breaker chosen at run time: a [`BreakerPolicy`] judging with an
/// [`AnyDecoder`], or none. What
/// [`ResiliencePolicy::erase`](crate::ResiliencePolicy::erase) and the
/// configuration file give.
#[derive(Debug, Clone, Default)]
pub struct AnyBreaker(Option<BreakerPolicy<AnyDecoder>>);

/// What the combined service ([`Resilience`](crate::Resilience)) takes as
/// its circuit breaker: [`NoBreaker`], a [`BreakerPolicy`], or an
/// [`AnyBreaker`].
///
/// Every attempt of a call passes the circuit of the call's key (its first
/// attempt's), as it would pass a [`CircuitBreaker`](super::CircuitBreaker)
/// between the retry and the attempt timeout of the three layers: a refused
/// attempt is never sent and its outcome is the
/// [`CircuitOpen`] error; an attempt the attempt timeout ends counts as a
/// failure; one the deadline ends counts for nothing.
///
/// The trait is sealed: only this crate's types implement it.
pub trait Gate: sealed::Sealed + Clone {
    /// What one clone of the service keeps: the circuit of its last key.
    #[doc(hidden)]
    type Local: Clone + Default;

    /// What one call keeps: its circuit, and the place of the attempt in
    /// flight.
    #[doc(hidden)]
    type Pass;

    /// The pass of a call whose first attempt is `request`.
    #[doc(hidden)]
    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass;

    /// Admits the call's next attempt through its circuit, or turns it away.
    #[doc(hidden)]
    fn enter(pass: &mut Self::Pass) -> Result<(), CircuitOpen>;

    /// Gives back the place of an attempt admitted and not judged, counting
    /// for nothing.
    #[doc(hidden)]
    fn release(pass: &mut Self::Pass);
}

/// A [`Gate`] that judges outcomes of response body `T`.
///
/// Sealed, as [`Gate`] is.
pub trait Judges<T>: Gate {
    /// Counts the outcome of the attempt admitted last.
    #[doc(hidden)]
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>);
}

/// What one clone of a service keeps of a [`BreakerPolicy`]: the circuit
/// of its last key, and the scheme and authority of the request that found
/// it.
#[derive(Debug, Clone, Default)]
pub struct AtHand(keyed::AtHand<Circuit>);

impl AtHand {
    /// No circuit at hand yet.
    pub(crate) const EMPTY: Self = Self(keyed::AtHand::EMPTY);
}

/// A call's pass through a [`BreakerPolicy`]'s circuit.
pub struct BreakerPass<D> {
    shared: Arc<Shared<D>>,
    circuit: Arc<Circuit>,
    ticket: Option<Ticket>,
}

impl<D> std::fmt::Debug for BreakerPass<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BreakerPass")
            .field("key", self.circuit.key())
            .field("admitted", &self.ticket.is_some())
            .finish_non_exhaustive()
    }
}

/// The circuit of `request`'s key: the one at hand when it is that key's and
/// still kept, else the map's (made if none is), which becomes the one at
/// hand.
#[inline]
pub(crate) fn circuit_for<D, B>(
    shared: &Shared<D>,
    at_hand: &mut AtHand,
    request: &http::Request<B>,
) -> Arc<Circuit> {
    let ctx = Ctx::of(shared);
    let lookup = keyed::Lookup {
        registry: &shared.registry,
        key_fn: shared.key_fn.as_deref(),
        room: registry::room(ctx),
        now: || ctx.nanos(Instant::now()),
        make: Circuit::new,
    };
    keyed::entry_for(lookup, &mut at_hand.0, request)
}

// ===== impl NoBreaker =====

impl sealed::Sealed for NoBreaker {}

impl Gate for NoBreaker {
    type Local = ();
    type Pass = ();

    #[inline(always)]
    fn pass_for<B>(&self, (): &mut (), _: &http::Request<B>) {}

    #[inline(always)]
    fn enter((): &mut ()) -> Result<(), CircuitOpen> {
        Ok(())
    }

    #[inline(always)]
    fn release((): &mut ()) {}
}

impl<T> Judges<T> for NoBreaker {
    #[inline(always)]
    fn settle((): &mut (), _: &Result<http::Response<T>, BoxError>) {}
}

// ===== impl BreakerPolicy =====

impl<D> sealed::Sealed for BreakerPolicy<D> {}

impl<D> Gate for BreakerPolicy<D> {
    type Local = AtHand;
    type Pass = BreakerPass<D>;

    #[inline]
    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        BreakerPass {
            circuit: circuit_for(&self.shared, local, request),
            shared: Arc::clone(&self.shared),
            ticket: None,
        }
    }

    #[inline]
    fn enter(pass: &mut Self::Pass) -> Result<(), CircuitOpen> {
        pass.ticket = Some(pass.circuit.admit(Ctx::of(&pass.shared))?);
        Ok(())
    }

    #[inline]
    fn release(pass: &mut Self::Pass) {
        // NOTE: a ticket dropped unsettled counts for nothing (a probe's
        // place goes back).
        pass.ticket = None;
    }
}

impl<T, D: Decoder<T, BoxError>> Judges<T> for BreakerPolicy<D> {
    #[inline]
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        if let Some(ticket) = pass.ticket.take() {
            let shared = &*pass.shared;
            ticket.settle(Ctx::of(shared), shared.judge(outcome));
        }
    }
}

// ===== impl AnyBreaker =====

impl AnyBreaker {
    /// The breaker's policy, if there is one: its
    /// [`states`](BreakerPolicy::states) read the circuits.
    pub const fn policy(&self) -> Option<&BreakerPolicy<AnyDecoder>> {
        self.0.as_ref()
    }
}

impl sealed::Sealed for AnyBreaker {}

impl Gate for AnyBreaker {
    type Local = AtHand;
    type Pass = Option<BreakerPass<AnyDecoder>>;

    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        self.0
            .as_ref()
            .map(|policy| policy.pass_for(local, request))
    }

    fn enter(pass: &mut Self::Pass) -> Result<(), CircuitOpen> {
        pass.as_mut().map_or(Ok(()), BreakerPolicy::enter)
    }

    fn release(pass: &mut Self::Pass) {
        if let Some(pass) = pass {
            BreakerPolicy::release(pass);
        }
    }
}

impl<T> Judges<T> for AnyBreaker {
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        if let Some(pass) = pass {
            BreakerPolicy::settle(pass, outcome);
        }
    }
}

impl From<NoBreaker> for AnyBreaker {
    fn from(NoBreaker: NoBreaker) -> Self {
        Self(None)
    }
}

impl<D: Into<AnyDecoder> + Clone> From<BreakerPolicy<D>> for AnyBreaker {
    fn from(policy: BreakerPolicy<D>) -> Self {
        Self(Some(policy.erase()))
    }
}
