//! Overload control as the combined service takes it: every attempt asks
//! the slots of its call's key for a place, and gives it back with its
//! outcome.

use super::{
    pass::{Admission, OverloadAtHand, OverloadPass},
    OverloadPolicy,
};
use crate::{BoxError, RequestDeadline};
use std::task::{Context, Poll};

mod sealed {
    pub trait Sealed {}
}

/// No overload control: what the combined service has unless
/// [`ResiliencePolicy::with_overload`](crate::ResiliencePolicy::with_overload)
/// gives it some. It costs nothing: every step compiles away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoOverload;

/// What the combined service ([`Resilience`](crate::Resilience)) takes as
/// its overload control: [`NoOverload`] or an [`OverloadPolicy`].
///
/// Every attempt of a call asks the slots of the call's key (its first
/// attempt's) for a place, as it would pass an
/// [`Overload`](super::Overload) between the three layers' retry and the
/// circuit breaker (or the attempt timeout): it waits for one within the
/// call's deadline, or is turned away with
/// [`Overloaded`](super::error::Overloaded), never sent; its outcome goes
/// back to the limit and the throttle.
///
/// The trait is sealed: only this crate's types implement it.
pub trait Admit: sealed::Sealed + Clone {
    /// What one clone of the service keeps: the slots of its last key.
    #[doc(hidden)]
    type Local: Clone + Default;

    /// What one call keeps: its key's slots, and the place of its attempt.
    #[doc(hidden)]
    type Pass;

    /// The pass of a call whose first attempt is `request`.
    #[doc(hidden)]
    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass;

    /// Asks for a place for the call's next attempt.
    #[doc(hidden)]
    fn try_admit(pass: &mut Self::Pass, deadline: RequestDeadline) -> Admission;

    /// Asks for a place, or waits for the one asked for.
    #[doc(hidden)]
    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: RequestDeadline,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>>;

    /// Gives the place of the attempt admitted last back, with its outcome.
    #[doc(hidden)]
    fn settle<T>(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>);

    /// Gives back a place in the queue or a slot not settled, counting for
    /// nothing.
    #[doc(hidden)]
    fn release(pass: &mut Self::Pass);
}

impl sealed::Sealed for NoOverload {}

impl Admit for NoOverload {
    type Local = ();
    type Pass = ();

    #[inline(always)]
    fn pass_for<B>(&self, (): &mut (), _: &http::Request<B>) {}

    #[inline(always)]
    fn try_admit((): &mut (), _: RequestDeadline) -> Admission {
        Admission::Now
    }

    #[inline(always)]
    fn poll_admit(
        (): &mut (),
        _: RequestDeadline,
        _: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    #[inline(always)]
    fn settle<T>((): &mut (), _: &Result<http::Response<T>, BoxError>) {}

    #[inline(always)]
    fn release((): &mut ()) {}
}

impl sealed::Sealed for OverloadPolicy {}

impl Admit for OverloadPolicy {
    type Local = OverloadAtHand;
    type Pass = OverloadPass;

    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        OverloadPass::new(self, local, request)
    }

    fn try_admit(pass: &mut Self::Pass, deadline: RequestDeadline) -> Admission {
        pass.try_admit(Some(deadline))
    }

    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: RequestDeadline,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        pass.poll_admit(Some(deadline), cx)
    }

    fn settle<T>(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        pass.settle(outcome);
    }

    fn release(pass: &mut Self::Pass) {
        pass.release();
    }
}

/// Overload control chosen at run time: an [`OverloadPolicy`], or none. What
/// [`ResiliencePolicy::erase`](crate::ResiliencePolicy::erase) and the
/// configuration file give.
#[derive(Debug, Clone, Default)]
pub struct AnyOverload(Option<OverloadPolicy>);

impl AnyOverload {
    /// The policy, if there is one: its
    /// [`states`](OverloadPolicy::states) read the slots.
    pub const fn policy(&self) -> Option<&OverloadPolicy> {
        self.0.as_ref()
    }
}

impl From<NoOverload> for AnyOverload {
    fn from(NoOverload: NoOverload) -> Self {
        Self(None)
    }
}

impl From<OverloadPolicy> for AnyOverload {
    fn from(policy: OverloadPolicy) -> Self {
        Self(Some(policy))
    }
}

impl sealed::Sealed for AnyOverload {}

impl Admit for AnyOverload {
    type Local = OverloadAtHand;
    type Pass = Option<OverloadPass>;

    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        self.0
            .as_ref()
            .map(|policy| OverloadPass::new(policy, local, request))
    }

    fn try_admit(pass: &mut Self::Pass, deadline: RequestDeadline) -> Admission {
        match pass {
            Some(pass) => pass.try_admit(Some(deadline)),
            None => Admission::Now,
        }
    }

    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: RequestDeadline,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        match pass {
            Some(pass) => pass.poll_admit(Some(deadline), cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn settle<T>(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        if let Some(pass) = pass {
            pass.settle(outcome);
        }
    }

    fn release(pass: &mut Self::Pass) {
        if let Some(pass) = pass {
            pass.release();
        }
    }
}
