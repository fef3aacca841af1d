//! The rate limit as a guard: every attempt asks the bucket of its call's
//! key for a slot, and its outcome tells what the server said.

use super::{bucket::Bucket, pass::RateLimitPass, RateLimitPolicy};
use crate::{
    guard::{sealed, Ask},
    key::AtHand,
    BoxError, RequestDeadline,
};
use std::task::{Context, Poll};

/// Every attempt of a call asks the bucket of the call's key (its first
/// attempt's) for a slot: it goes at once, waits for it within the call's
/// deadline, or is turned away with
/// [`RateLimited`](super::error::RateLimited), never sent; its response
/// tells the bucket what the server said of its limits.
impl sealed::Sealed for RateLimitPolicy {
    type Local = AtHand<Bucket>;
    type Pass = RateLimitPass;

    #[inline]
    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        RateLimitPass::new(self, local, request)
    }

    #[inline]
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

impl<T> sealed::SealedSettle<T> for RateLimitPolicy {
    #[inline]
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        pass.settle(outcome);
    }
}
