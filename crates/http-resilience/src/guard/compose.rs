//! The guards that are made of others: none at all, one chosen at run time,
//! and two in a row.

use super::{sealed, Ask, Guard, Settle};
use crate::{BoxError, RequestDeadline};
use std::task::{ready, Context, Poll};

// ===== impl Guard for () =====

/// No guard: every step compiles away.
impl sealed::Sealed for () {
    type Local = ();
    type Pass = ();

    #[inline(always)]
    fn pass_for<B>(&self, (): &mut (), _: &http::Request<B>) {}

    #[inline(always)]
    fn admit((): &mut (), _: &mut Ask) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    #[inline(always)]
    fn poll_admit(
        (): &mut (),
        _: Option<RequestDeadline>,
        _: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    #[inline(always)]
    fn release((): &mut ()) {}
}

impl<T> sealed::SealedSettle<T> for () {
    #[inline(always)]
    fn settle((): &mut (), _: &Result<http::Response<T>, BoxError>) {}
}

// ===== impl Guard for Option =====

/// A guard chosen at run time (a configuration file's): `None` lets every
/// attempt through.
impl<G: Guard> sealed::Sealed for Option<G> {
    type Local = G::Local;
    type Pass = Option<G::Pass>;

    fn pass_for<B>(&self, local: &mut G::Local, request: &http::Request<B>) -> Self::Pass {
        self.as_ref().map(|guard| guard.pass_for(local, request))
    }

    fn admit(pass: &mut Self::Pass, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        pass.as_mut()
            .map_or(Poll::Ready(Ok(())), |pass| G::admit(pass, ask))
    }

    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        pass.as_mut().map_or(Poll::Ready(Ok(())), |pass| {
            G::poll_admit(pass, deadline, cx)
        })
    }

    fn release(pass: &mut Self::Pass) {
        if let Some(pass) = pass {
            G::release(pass);
        }
    }

    #[inline(always)]
    fn answers(pass: &Self::Pass) -> bool {
        pass.as_ref().is_some_and(G::answers)
    }
}

impl<T, G: Settle<T>> sealed::SealedSettle<T> for Option<G> {
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        if let Some(pass) = pass {
            G::settle(pass, outcome);
        }
    }

    #[inline(always)]
    fn answer(pass: &mut Self::Pass, kept: BoxError) -> Result<http::Response<T>, BoxError> {
        match pass {
            Some(pass) => G::answer(pass, kept),
            None => Err(kept),
        }
    }
}

// ===== impl Guard for (A, B) =====

/// Two guards in a row: `A` first, then `B` once `A` let the attempt
/// through. The pass keeps whether `A` did, so that a wait resumes where it
/// was, and so that an answer is asked of the guard that gave it: when `B`
/// answers in the upstream's place, `A` keeps what it holds and hears the
/// answer as the attempt's outcome.
impl<A: Guard, B: Guard> sealed::Sealed for (A, B) {
    type Local = (A::Local, B::Local);
    type Pass = (A::Pass, B::Pass, bool);

    #[inline]
    fn pass_for<R>(&self, local: &mut Self::Local, request: &http::Request<R>) -> Self::Pass {
        let outer = self.0.pass_for(&mut local.0, request);
        (outer, self.1.pass_for(&mut local.1, request), false)
    }

    #[inline]
    fn admit(pass: &mut Self::Pass, ask: &mut Ask) -> Poll<Result<(), BoxError>> {
        ready!(A::admit(&mut pass.0, ask))?;
        pass.2 = true;
        let inner = B::admit(&mut pass.1, ask);
        admit_inner::<A, B>(pass, inner)
    }

    fn poll_admit(
        pass: &mut Self::Pass,
        deadline: Option<RequestDeadline>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), BoxError>> {
        if !pass.2 {
            ready!(A::poll_admit(&mut pass.0, deadline, cx))?;
            pass.2 = true;
        }
        // NOTE: once `A` let the attempt through after a wait, `B` is polled
        // (it asks at the instant it reads now), not only asked: should it
        // make the attempt wait too, its wait must hold the task's waker.
        let inner = B::poll_admit(&mut pass.1, deadline, cx);
        admit_inner::<A, B>(pass, inner)
    }

    fn release(pass: &mut Self::Pass) {
        B::release(&mut pass.1);
        A::release(&mut pass.0);
        pass.2 = false;
    }

    #[inline(always)]
    fn answers(pass: &Self::Pass) -> bool {
        if pass.2 {
            B::answers(&pass.1)
        } else {
            A::answers(&pass.0)
        }
    }
}

/// What the inner guard of a pair said, once the outer let the attempt
/// through: a refusal gives back what the outer gave; an answer keeps it,
/// for the outer to hear the answer.
#[inline]
fn admit_inner<A: Guard, B: Guard>(
    pass: &mut (A::Pass, B::Pass, bool),
    inner: Poll<Result<(), BoxError>>,
) -> Poll<Result<(), BoxError>> {
    if let Poll::Ready(Err(_)) = &inner {
        if !B::answers(&pass.1) {
            A::release(&mut pass.0);
            pass.2 = false;
        }
    }
    inner
}

impl<T, A: Settle<T>, B: Settle<T>> sealed::SealedSettle<T> for (A, B) {
    #[inline]
    fn settle(pass: &mut Self::Pass, outcome: &Result<http::Response<T>, BoxError>) {
        B::settle(&mut pass.1, outcome);
        A::settle(&mut pass.0, outcome);
        pass.2 = false;
    }

    /// NOTE: `A` let the attempt through exactly when `B` kept it (a
    /// refusal of `B` cleared the mark); else `A` kept it.
    #[inline(always)]
    fn answer(pass: &mut Self::Pass, kept: BoxError) -> Result<http::Response<T>, BoxError> {
        if pass.2 {
            B::answer(&mut pass.1, kept)
        } else {
            A::answer(&mut pass.0, kept)
        }
    }
}
