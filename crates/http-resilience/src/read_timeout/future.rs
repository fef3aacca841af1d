//! Future types

use super::{
    body::ReadTimeoutBody,
    connection::Connection,
    error::{Phase, ReadTimedOut},
    gap::Gap,
};
use crate::BoxError;
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};

pin_project! {
    /// Response future of [`ReadTimeout`](super::ReadTimeout).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        Waiting {
            #[pin]
            response: F,
            gap: Gap,
            connection: Connection,
        },
        Done,
    }
}

// ===== impl ResponseFuture =====

impl<F> ResponseFuture<F> {
    pub(crate) fn new(response: F, gap: Gap, connection: Connection) -> Self {
        Self {
            state: State::Waiting {
                response,
                gap,
                connection,
            },
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<ReadTimeoutBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        let output = match state.as_mut().project() {
            StateProj::Waiting {
                response,
                gap,
                connection,
            } => {
                let limit = gap.limit();
                // NOTE: the response is polled first, so a head that arrives
                // in the same poll as the timer is taken.
                if let Poll::Ready(result) = response.poll(cx) {
                    result
                        .map(|response| response.map(|body| ReadTimeoutBody::new(body, limit)))
                        .map_err(Into::into)
                } else if connection.is_sending(cx) {
                    return Poll::Pending;
                } else {
                    ready!(gap.poll_expired(cx));
                    Err(ReadTimedOut::new(limit, Phase::Head).into())
                }
            }
            StateProj::Done => panic!("ResponseFuture polled after completion"),
        };
        // Drops the client's future (and with it the attempt) at once.
        state.set(State::Done);
        Poll::Ready(output)
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("ResponseFuture");
        match &self.state {
            State::Waiting {
                gap, connection, ..
            } => debug
                .field("limit", &gap.limit())
                .field("sent", &connection.is_out()),
            State::Done => debug.field("state", &"done"),
        }
        .finish_non_exhaustive()
    }
}
