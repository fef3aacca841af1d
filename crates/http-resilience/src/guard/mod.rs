//! Guards: what may admit, delay or turn away an attempt, and hears its
//! outcome: the circuit breaker ([`breaker`](crate::breaker)), overload
//! control ([`overload`](crate::overload)), and any guard of the crate to
//! come.
//!
//! Every form of the stack drives guards through the one [`Guard`]
//! interface:
//!
//! - the three layers' form puts each guard in a [`GuardLayer`] of its own
//!   between the retry and the attempt timeout, where it sees every
//!   attempt;
//! - the combined service takes them with
//!   [`ResiliencePolicy::with_guard`](crate::ResiliencePolicy::with_guard)
//!   and passes every attempt through them, in the order given;
//! - hedging puts a [`GuardLayer`] below the hedge, where it sees every
//!   copy.
//!
//! A guard keys its state by the request's [`UpstreamKey`](crate::key::UpstreamKey).
//! Before an attempt it lets it go, makes it wait (bounded by the request's
//! deadline), or turns it away with a typed error; an attempt turned away
//! was never sent. After the attempt, it hears the outcome. Guards compose:
//! a pair `(outer, inner)` is a guard that asks `outer` first, and `()` is no
//! guard at all, which costs nothing.
//!
//! # Example
//!
//! A circuit breaker and a bulkhead as layers of their own, in the order
//! the combined service would ask them:
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     breaker::BreakerPolicy, guard::GuardLayer, overload::OverloadPolicy,
//! };
//! use std::convert::Infallible;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let breaker = BreakerPolicy::default();
//! let svc = ServiceBuilder::new()
//!     .layer(GuardLayer::new(OverloadPolicy::bulkhead(8)?))
//!     .layer(GuardLayer::new(breaker.clone()))
//!     .service_fn(|_: Request<String>| async {
//!         Ok::<_, Infallible>(Response::new(String::from("ok")))
//!     });
//! let response = svc.oneshot(Request::get("http://api.test/").body(String::new())?).await?;
//! assert_eq!(response.body(), "ok");
//! assert_eq!(breaker.states().len(), 1);
//! # Ok(())
//! # }
//! ```

mod compose;
pub mod future;
mod layer;

pub use self::layer::{GuardLayer, Guarded};

pub(crate) mod sealed {
    use crate::{BoxError, RequestDeadline};
    use std::task::{Context, Poll};

    /// The engine's side of a guard: what every form of the stack calls.
    /// Crate-private, so that only this crate's types are guards.
    pub(crate) trait Sealed: Clone {
        /// What one clone of a service keeps: the state of the key it
        /// called last.
        type Local: Clone + Default;

        /// What one call keeps: its key's state, and what its attempt in
        /// flight holds. Dropped, it gives back what it holds, counting for
        /// nothing.
        type Pass;

        /// The pass of a call whose first attempt is `request`.
        fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass;

        /// Asks to let the call's next attempt through, under the call's
        /// `deadline`: `Ready(Ok)` to send it now, `Ready(Err)` when it is
        /// turned away, `Pending` when it must wait (then
        /// [`poll_admit`](Self::poll_admit) until it may go).
        fn admit(
            pass: &mut Self::Pass,
            deadline: Option<RequestDeadline>,
        ) -> Poll<Result<(), BoxError>>;

        /// Waits to let the attempt through, after [`admit`](Self::admit)
        /// said `Pending`; a wait the guard bounds (a queue's longest wait,
        /// the deadline less a useful attempt) ends in its error.
        fn poll_admit(
            pass: &mut Self::Pass,
            deadline: Option<RequestDeadline>,
            cx: &mut Context<'_>,
        ) -> Poll<Result<(), BoxError>>;

        /// Gives back what the pass holds (a place in a queue, a slot, a
        /// probe's place), counting for nothing: the call ended before its
        /// attempt's outcome was judged.
        fn release(pass: &mut Self::Pass);
    }

    /// The engine's side of a guard that hears the outcomes of attempts
    /// whose response body is `T`.
    pub(crate) trait SealedSettle<T>: Sealed {
        /// Hears the outcome of the attempt let through last, and gives
        /// back what it held.
        fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>);
    }
}

/// What may admit, delay or turn away an attempt: a
/// [`BreakerPolicy`](crate::breaker::BreakerPolicy), an
/// [`OverloadPolicy`](crate::overload::OverloadPolicy), an `Option` of a
/// guard (chosen at run time), a pair of guards, or `()` for none.
///
/// Every form of the stack drives it alike: before each attempt, the pass of
/// the call asks to be let through; after it, the outcome goes back
/// ([`Settle`]). An attempt turned away is never sent: its outcome is the
/// guard's error, which [`FailureKind`](crate::FailureKind) knows, which the
/// ready-made decoders do not retry and which costs no retry-budget token.
///
/// A pair `(A, B)` asks `A` first and `B` once `A` let the attempt through;
/// `B` turning it away gives back what `A` gave. So the guard that may make
/// an attempt wait should come before those that hold a place for it.
///
/// The trait is sealed: the guards are this crate's, and what the engine
/// calls of them is not public.
// NOTE: the engine's methods and the types they pass live on a crate-private
// supertrait, so that none of them is part of the public surface.
#[allow(private_bounds)]
pub trait Guard: sealed::Sealed {}

impl<G: sealed::Sealed> Guard for G {}

/// A [`Guard`] that hears the outcomes of attempts whose response body is
/// `T`.
///
/// Sealed, as [`Guard`] is.
#[allow(private_bounds)]
pub trait Settle<T>: Guard + sealed::SealedSettle<T> {}

impl<T, G: sealed::SealedSettle<T>> Settle<T> for G {}

#[cfg(test)]
mod tests;
