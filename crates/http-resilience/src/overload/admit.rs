//! Overload control as a guard: every attempt asks the slots of its call's
//! key for a place, and gives it back with its outcome.

use super::{pass::OverloadPass, slots::Slots, OverloadPolicy};
use crate::{
    guard::{sealed, Ask},
    key::AtHand,
    BoxError, RequestDeadline,
};
use std::task::{Context, Poll};

/// Every attempt of a call asks the slots of the call's key (its first
/// attempt's) for a place: it waits for one within the call's deadline, or
/// is turned away with [`Overloaded`](super::error::Overloaded), never sent;
/// its outcome goes back to the limit and the throttle.
impl sealed::Sealed for OverloadPolicy {
    type Local = AtHand<Slots>;
    type Pass = OverloadPass;

    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        OverloadPass::new(self, local, request)
    }

    fn admit(pass: &mut Self::Pass, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        pass.try_admit(ask)
    }

    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        pass.poll_admit(deadline, cx)
    }

    fn release(pass: &mut Self::Pass) {
        pass.release();
    }
}

impl<T> sealed::SealedSettle<T> for OverloadPolicy {
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        pass.settle(outcome);
    }
}
