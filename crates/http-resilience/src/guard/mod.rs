//! Guards: what may admit, delay, turn away or answer an attempt, and hears
//! its outcome: the circuit breaker ([`breaker`](crate::breaker)), overload
//! control ([`overload`](crate::overload)), fault injection
//! ([`fault`](crate::fault)), and any guard of the crate to come.
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
//! was never sent. A guard that stands for the upstream may instead answer
//! the attempt itself, with a response or a transport's error, which every
//! form judges as the upstream's outcome ([`Settle`]). After the attempt,
//! it hears the outcome. Guards compose:
//! a pair `(outer, inner)` is a guard that asks `outer` first, and `()` is no
//! guard at all, which costs nothing.
//!
//! # Example
//!
//! A circuit breaker and a bulkhead as layers of their own, in the order
//! the combined service would ask them:
//!
//! ```
//! use http_resilience::key::PerKey;
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

/// What an attempt asks the guards with: its call's deadline, and the
/// instant it asks at, read at most once for every guard of a stack.
///
/// NOTE: the combined service has the instant at hand already (it reads the
/// clock to send the attempt); a guard's layer leaves it unread, and the
/// first guard that needs it reads the clock, so that a guard that never
/// does (a closed circuit) costs no read.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    deadline: Option<crate::RequestDeadline>,
    now: Option<tokio::time::Instant>,
}

impl Ask {
    /// An attempt under `deadline`, asking at `now` when it is known.
    #[inline(always)]
    pub(crate) const fn new(
        deadline: Option<crate::RequestDeadline>,
        now: Option<tokio::time::Instant>,
    ) -> Self {
        Self { deadline, now }
    }

    /// The call's deadline, if it has one.
    #[inline(always)]
    pub(crate) const fn deadline(&self) -> Option<crate::RequestDeadline> {
        self.deadline
    }

    /// The instant the attempt asks at: the clock is read the first time.
    #[inline(always)]
    pub(crate) fn now(&mut self) -> tokio::time::Instant {
        *self.now.get_or_insert_with(tokio::time::Instant::now)
    }
}

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
        /// deadline, at the instant `ask` gives: `Ready(Ok)` to send it now,
        /// `Ready(Err)` when it is turned away, `Pending` when it must wait
        /// (then [`poll_admit`](Self::poll_admit) until it may go).
        fn admit(pass: &mut Self::Pass, ask: &mut super::Ask) -> Poll<Result<(), BoxError>>;

        /// Waits to let the attempt through, after [`admit`](Self::admit)
        /// said `Pending`, or asks first (at the instant it reads now) when
        /// the pass has not asked yet; a wait keeps the task's waker, and a
        /// wait the guard bounds (a queue's longest wait, the deadline less
        /// a useful attempt) ends in its error.
        fn poll_admit(
            pass: &mut Self::Pass,
            deadline: Option<RequestDeadline>,
            cx: &mut Context<'_>,
        ) -> Poll<Result<(), BoxError>>;

        /// Gives back what the pass holds (a place in a queue, a slot, a
        /// probe's place), counting for nothing: the call ended before its
        /// attempt's outcome was judged.
        fn release(pass: &mut Self::Pass);

        /// Whether the error the last [`admit`](Self::admit) or
        /// [`poll_admit`](Self::poll_admit) gave stands for an answer the
        /// guard gives in the upstream's place
        /// ([`SealedSettle::answer`]) rather than a refusal. The guards
        /// asked before it then keep what they hold, to hear the answer as
        /// the attempt's outcome; a refusal gives it back.
        ///
        /// NOTE: `false` for every guard that only turns attempts away, so
        /// that the check compiles away.
        #[inline(always)]
        fn answers(pass: &Self::Pass) -> bool {
            let _ = pass;
            false
        }
    }

    /// The engine's side of a guard that hears the outcomes of attempts
    /// whose response body is `T`.
    pub(crate) trait SealedSettle<T>: Sealed {
        /// Hears the outcome of the attempt let through last, and gives
        /// back what it held.
        fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>);

        /// The outcome of the attempt that [`admit`](Sealed::admit) or
        /// [`poll_admit`](Sealed::poll_admit) kept from the upstream with
        /// the error `kept`: that error, for a refusal (the default), or the
        /// answer the guard gives in the upstream's place.
        #[inline(always)]
        fn answer(pass: &mut Self::Pass, kept: BoxError) -> Result<http::Response<T>, BoxError> {
            let _ = pass;
            Err(kept)
        }
    }
}

/// What may admit, delay or turn away an attempt: a
/// [`BreakerPolicy`](crate::breaker::BreakerPolicy), an
/// [`OverloadPolicy`](crate::overload::OverloadPolicy), a
/// [`FaultPolicy`](crate::fault::FaultPolicy) (which may also answer it), an
/// `Option` of a guard (chosen at run time), a pair of guards, or `()` for
/// none.
///
/// Every form of the stack drives it alike: before each attempt, the pass of
/// the call asks to be let through; after it, the outcome goes back
/// ([`Settle`]). An attempt turned away is never sent: its outcome is the
/// guard's error, which [`FailureKind`](crate::FailureKind) knows, which the
/// ready-made decoders do not retry and which costs no retry-budget token.
///
/// A pair `(A, B)` asks `A` first and `B` once `A` let the attempt through;
/// `B` turning it away gives back what `A` gave, `B` answering it lets `A`
/// hear the answer as the attempt's outcome. So the guard that may make an
/// attempt wait should come before those that hold a place for it, and one
/// that stands for the upstream comes last.
///
/// The trait is sealed: the guards are this crate's, and what the engine
/// calls of them is not public.
// NOTE: the engine's methods and the types they pass live on a crate-private
// supertrait, so that none of them is part of the public surface.
#[allow(private_bounds)]
pub trait Guard: sealed::Sealed {}

impl<G: sealed::Sealed> Guard for G {}

/// A [`Guard`] that hears the outcomes of attempts whose response body is
/// `T`, and may answer an attempt in the upstream's place.
///
/// Sealed, as [`Guard`] is.
///
/// # Answers
///
/// A guard that stands for the upstream (a fault injector) keeps the
/// attempt from it as a refusal does, and then gives the attempt's outcome
/// itself: a response whose body it makes as a `T`, or a transport's error.
/// Every form asks the guard for the outcome of an attempt it kept back,
/// judges what it gives as it would the upstream's outcome, and lets every
/// guard hear it. A guard that never answers gives the refusal back
/// unchanged, which costs nothing.
#[allow(private_bounds)]
pub trait Settle<T>: Guard + sealed::SealedSettle<T> {}

impl<T, G: sealed::SealedSettle<T>> Settle<T> for G {}

#[cfg(test)]
mod tests;
