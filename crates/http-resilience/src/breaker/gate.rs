//! The breaker as a guard: every attempt passes the circuit of its call's
//! key, and its outcome goes back to that circuit.

use super::{
    circuit::{Circuit, Ticket},
    error::CircuitOpen,
    policy::Shared,
    registry, BreakerPolicy,
};
use crate::{
    guard::{sealed, Ask},
    key::{self, AtHand},
    policy::Decoder,
    BoxError, RequestDeadline,
};
use std::{
    sync::Arc,
    task::{Context, Poll},
};
use tokio::time::Instant;

/// A call's pass through a [`BreakerPolicy`]'s circuit.
pub(crate) struct BreakerPass<D> {
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
    at_hand: &mut AtHand<Circuit>,
    request: &http::Request<B>,
) -> Arc<Circuit> {
    let lookup = key::Lookup {
        registry: &shared.registry,
        key_fn: shared.key_fn.as_deref(),
        room: registry::room(shared.rules.settings()),
        now: || shared.rules.nanos(Instant::now()),
        make: Circuit::new,
    };
    key::entry_for(lookup, at_hand, request)
}

// ===== impl BreakerPolicy =====

/// Every attempt of a call passes the circuit of the call's key (its first
/// attempt's): a refused one is never sent and its outcome is the
/// [`CircuitOpen`] error; an attempt the attempt timeout ends counts as a
/// failure; one the deadline ends counts for nothing.
impl<D> sealed::Sealed for BreakerPolicy<D> {
    type Local = AtHand<Circuit>;
    type Pass = BreakerPass<D>;

    #[inline]
    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        BreakerPass {
            circuit: circuit_for(&self.shared, local, request),
            shared: Arc::clone(&self.shared),
            ticket: None,
        }
    }

    /// NOTE: always inlined: a closed circuit's admission is a load, a
    /// test and a store, which a call out (its frame, the ticket moved
    /// through the stack, the answer written back) would cost more than.
    #[inline(always)]
    fn admit(pass: &mut Self::Pass, _: &mut Ask) -> Poll<Result<(), BoxError>> {
        Poll::Ready(enter(pass).map_err(Into::into))
    }

    #[inline]
    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: Option<RequestDeadline>,
        _: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        // NOTE: a circuit never makes an attempt wait; asked again, it
        // answers as it would have.
        Self::admit(pass, &mut Ask::new(deadline, None))
    }

    #[inline]
    fn release(pass: &mut Self::Pass) {
        pass.release();
    }
}

impl<T, D: Decoder<T, BoxError>> sealed::SealedSettle<T> for BreakerPolicy<D> {
    #[inline]
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        if pass.ticket.is_none() {
            return;
        }
        // NOTE: judged before the ticket leaves the pass: a decoder that
        // panics leaves it there, and the pass's drop gives a probe's place
        // back.
        let judged = pass.shared.judge(outcome);
        if let Some(ticket) = pass.ticket.take() {
            ticket.settle(&pass.circuit, pass.shared.ctx(), judged);
        }
    }
}

/// Admits the call's next attempt through its circuit, or turns it away.
#[inline]
fn enter<D>(pass: &mut BreakerPass<D>) -> Result<(), CircuitOpen> {
    let ticket = pass.circuit.admit(pass.shared.ctx())?;
    // NOTE: a ticket still held (none is, as the engine settles or releases
    // every attempt before the next) would count for nothing.
    if let Some(held) = pass.ticket.replace(ticket) {
        held.release(&pass.circuit);
    }
    Ok(())
}

// ===== impl BreakerPass =====

impl<D> BreakerPass<D> {
    /// Ends the attempt let through last, if it holds a ticket still, with
    /// no outcome to count (a probe's place goes back).
    #[inline]
    fn release(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            ticket.release(&self.circuit);
        }
    }
}

impl<D> Drop for BreakerPass<D> {
    fn drop(&mut self) {
        // NOTE: a call dropped before its outcome counts for nothing, but
        // the ticket of a probe must give its place back.
        self.release();
    }
}
