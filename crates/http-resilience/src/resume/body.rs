//! The response body that continues with a ranged request where it failed.

use super::session::Session;
use crate::BoxError;
use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};
use tower_service::Service;

pin_project! {
    /// A response body that, when it fails part-way, is continued by a
    /// request for the rest (`Range: bytes=N-`, with `If-Range`), so that the
    /// caller reads one body.
    ///
    /// [`Resume`](super::Resume) wraps every response body in it. A body whose
    /// response cannot be resumed (see the [module docs](super)) passes
    /// through untouched, frames and errors alike. Otherwise every data frame
    /// is counted, and an error of the transport (a reset, a close, a read
    /// timeout) is healed, while resumes are left and the call's deadline
    /// allows, by sending the ranged request on a clone of the inner service
    /// (made ready first) and reading on from its `206`. A `206` that does not
    /// continue the body, or any other answer, fails the body with
    /// [`ResumeMismatch`](super::error::ResumeMismatch); the error of a
    /// failed ranged request, and a failure that is not healed, are returned
    /// as they are. After an error the body reports its end.
    ///
    /// See the [module docs](super) for an example.
    pub struct ResumeBody<S, B, T>
    where
        S: Service<http::Request<B>>,
    {
        #[pin]
        state: State<S::Future, T>,
        session: Option<Box<Session<S, B>>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, T> {
        // Reading a body: the first response's, or a resumed part's.
        Reading {
            #[pin]
            body: T,
        },
        // The failed body is gone; waiting for the service to be ready.
        Readying,
        // The ranged request is on its way.
        Calling {
            #[pin]
            future: F,
        },
        // The body failed, or ended.
        Done,
    }
}

/// What a read of the current body leads to.
enum Step<D> {
    /// Give this to the caller.
    Yield(Option<Result<Frame<D>, BoxError>>),
    /// Resume: the failure was taken to be healed.
    Resume,
}

// ===== impl ResumeBody =====

impl<S, B, T> ResumeBody<S, B, T>
where
    S: Service<http::Request<B>>,
{
    /// The body of a response that cannot be resumed, passed through as it
    /// is.
    pub(crate) fn passthrough(body: T) -> Self {
        Self {
            state: State::Reading { body },
            session: None,
        }
    }

    /// The body of a response that may be resumed under `session`.
    pub(crate) fn resumable(body: T, session: Session<S, B>) -> Self {
        Self {
            state: State::Reading { body },
            session: Some(Box::new(session)),
        }
    }

    /// Whether the body would be resumed should it fail: the request and its
    /// first response allow it.
    pub fn is_resumable(&self) -> bool {
        self.session.is_some()
    }

    /// How many ranged requests were sent for the rest of the body.
    pub fn resumes(&self) -> u32 {
        self.session.as_ref().map_or(0, |session| session.resumes())
    }

    /// The body bytes read so far, counted for a body that may be resumed
    /// (zero for one that passes through).
    pub fn received(&self) -> u64 {
        self.session
            .as_ref()
            .map_or(0, |session| session.received())
    }
}

impl<S, B, T> Body for ResumeBody<S, B, T>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    B: Default,
    T: Body,
    T::Error: Into<BoxError>,
{
    type Data = T::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        loop {
            let Some(session) = this.session.as_deref_mut() else {
                return poll_passthrough(this.state, cx);
            };
            match this.state.as_mut().project() {
                StateProj::Reading { body } => {
                    let polled = ready!(body.poll_frame(cx));
                    match read(session, polled) {
                        Step::Yield(frame) => {
                            if !matches!(frame, Some(Ok(_))) {
                                this.state.set(State::Done);
                            }
                            return Poll::Ready(frame);
                        }
                        Step::Resume => this.state.set(State::Readying),
                    }
                }
                StateProj::Readying => match ready!(session.service().poll_ready(cx)) {
                    Ok(()) => match session.ranged_request() {
                        Ok(request) => {
                            let future = session.service().call(request);
                            this.state.set(State::Calling { future });
                        }
                        Err(err) => return fail(this.state, err),
                    },
                    Err(err) => return fail(this.state, err.into()),
                },
                StateProj::Calling { future } => match ready!(future.poll(cx)) {
                    Ok(response) => match session.check(&response) {
                        Ok(()) => this.state.set(State::Reading {
                            body: response.into_body(),
                        }),
                        Err(mismatch) => return fail(this.state, mismatch.into()),
                    },
                    Err(err) => return fail(this.state, err.into()),
                },
                StateProj::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        // NOTE: a body that may be resumed has ended only with every byte
        // announced; before them, the next read reports the mismatch.
        let complete = || {
            self.session
                .as_ref()
                .is_none_or(|session| session.remaining().is_none_or(|left| left == 0))
        };
        match &self.state {
            State::Reading { body } => body.is_end_stream() && complete(),
            State::Readying | State::Calling { .. } => false,
            State::Done => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        let remaining = self
            .session
            .as_ref()
            .and_then(|session| session.remaining());
        match (&self.state, remaining) {
            (State::Done, _) => SizeHint::with_exact(0),
            (_, Some(remaining)) => SizeHint::with_exact(remaining),
            (State::Reading { body }, None) => body.size_hint(),
            (State::Readying | State::Calling { .. }, None) => SizeHint::default(),
        }
    }
}

/// A read of a body that is not resumed: the inner body's frames, its errors
/// boxed.
fn poll_passthrough<F, T>(
    state: Pin<&mut State<F, T>>,
    cx: &mut Context<'_>,
) -> Poll<Option<Result<Frame<T::Data>, BoxError>>>
where
    T: Body,
    T::Error: Into<BoxError>,
{
    match state.project() {
        StateProj::Reading { body } => body
            .poll_frame(cx)
            .map(|frame| frame.map(|result| result.map_err(Into::into))),
        // NOTE: a body passed through is never anything but read.
        _ => Poll::Ready(None),
    }
}

/// What a frame (or the end, or an error) of the current body means under
/// `session`: a data frame is counted, the end is checked against the
/// announced length, and an error is resumed when the session takes it.
fn read<S, B, D, E>(session: &mut Session<S, B>, polled: Option<Result<Frame<D>, E>>) -> Step<D>
where
    D: Buf,
    E: Into<BoxError>,
{
    let checked = match polled {
        Some(Ok(frame)) => {
            let bytes = frame.data_ref().map_or(0, Buf::remaining);
            session.count(bytes).map(|()| Some(frame))
        }
        None => session.end().map(|()| None),
        Some(Err(err)) => {
            return match session.try_resume(err.into()) {
                Ok(()) => Step::Resume,
                Err(err) => Step::Yield(Some(Err(err))),
            }
        }
    };
    Step::Yield(checked.map_err(Into::into).transpose())
}

/// Ends the body with `error`.
fn fail<F, T, D>(
    mut state: Pin<&mut State<F, T>>,
    error: BoxError,
) -> Poll<Option<Result<Frame<D>, BoxError>>> {
    state.set(State::Done);
    Poll::Ready(Some(Err(error)))
}

impl<S, B, T> fmt::Debug for ResumeBody<S, B, T>
where
    S: Service<http::Request<B>>,
    T: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("ResumeBody");
        match &self.state {
            State::Reading { body } => debug.field("body", body),
            State::Readying => debug.field("state", &"waiting for the service"),
            State::Calling { .. } => debug.field("state", &"requesting the rest"),
            State::Done => debug.field("state", &"done"),
        };
        debug
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}
