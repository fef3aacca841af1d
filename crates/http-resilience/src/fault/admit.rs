//! Fault injection as a guard: every attempt is counted and drawn for, and
//! the fault, when it is picked, makes it wait, answers it, or fails it.

use super::{pass::FaultPass, policy::Entry, FaultPolicy};
use crate::{
    body::AnswerBody,
    guard::{sealed, Ask},
    key::AtHand,
    BoxError, RequestDeadline,
};
use std::task::{Context, Poll};

/// Every attempt of a call is counted under the call's key (its first
/// attempt's) and drawn for: one the policy picks waits (within the call's
/// deadline), and then goes on, or is kept from the upstream and answered
/// in its place, with a response or a transport's failure.
impl sealed::Sealed for FaultPolicy {
    type Local = AtHand<Entry>;
    type Pass = FaultPass;

    #[inline(always)]
    fn pass_for<B>(&self, local: &mut Self::Local, request: &http::Request<B>) -> Self::Pass {
        FaultPass::new(self, local, request)
    }

    #[inline(always)]
    fn admit(pass: &mut Self::Pass, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        pass.admit(ask)
    }

    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        pass.poll_admit(deadline, cx)
    }

    #[inline(always)]
    fn release(pass: &mut Self::Pass) {
        pass.release();
    }

    fn answers(pass: &Self::Pass) -> bool {
        pass.answers()
    }
}

/// The answers are made as the inner service's body type, so the policy
/// guards a service whose body this crate can make ([`AnswerBody`]).
impl<T: AnswerBody> sealed::SealedSettle<T> for FaultPolicy {
    #[inline(always)]
    fn settle(pass: &mut Self::Pass, _: &Result<http::Response<T>, BoxError>) {
        pass.release();
    }

    fn answer(pass: &mut Self::Pass, kept: BoxError) -> Result<http::Response<T>, BoxError> {
        pass.answer(kept)
    }
}
