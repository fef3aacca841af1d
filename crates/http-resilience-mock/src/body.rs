//! Scripted response and request bodies for tests of body-aware layers.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::{
    collections::VecDeque,
    convert::Infallible,
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::Sleep;

/// One step of a [`ScriptedBody`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Wait this long (on tokio's clock) before the next step.
    Wait(Duration),
    /// Yield a data frame.
    Data(Bytes),
    /// Never yield anything again.
    Stall,
}

/// A body that plays a script of waits and data frames, then ends.
///
/// Waits use tokio's timer, so the script follows `tokio::time::pause()`.
///
/// # Example
///
/// ```
/// use http_body_util::BodyExt;
/// use http_resilience_mock::body::ScriptedBody;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let body = ScriptedBody::new()
///     .data("he")
///     .wait(Duration::from_millis(100))
///     .data("llo");
/// let bytes = body.collect().await.unwrap().to_bytes();
/// assert_eq!(bytes, "hello");
/// # }
/// ```
pub struct ScriptedBody {
    steps: VecDeque<Step>,
    sleep: Option<Pin<Box<Sleep>>>,
    hint: bool,
}

impl ScriptedBody {
    /// An empty script: the body ends at once.
    pub fn new() -> Self {
        Self {
            steps: VecDeque::new(),
            sleep: None,
            hint: true,
        }
    }

    /// Reports no size hint (as a stream of unknown length does), instead of
    /// the exact length of the script.
    #[must_use]
    pub fn without_size_hint(mut self) -> Self {
        self.hint = false;
        self
    }

    /// Appends a data frame.
    #[must_use]
    pub fn data(mut self, data: impl Into<Bytes>) -> Self {
        self.steps.push_back(Step::Data(data.into()));
        self
    }

    /// Appends a wait.
    #[must_use]
    pub fn wait(mut self, delay: Duration) -> Self {
        self.steps.push_back(Step::Wait(delay));
        self
    }

    /// Appends a stall: the body never yields anything after it.
    #[must_use]
    pub fn stall(mut self) -> Self {
        self.steps.push_back(Step::Stall);
        self
    }
}

impl Default for ScriptedBody {
    fn default() -> Self {
        Self::new()
    }
}

/// A clone plays the steps not yet played, starting afresh: a wait in
/// progress is not carried over. Cloning a body before it is read clones
/// the whole script.
impl Clone for ScriptedBody {
    fn clone(&self) -> Self {
        Self {
            steps: self.steps.clone(),
            sleep: None,
            hint: self.hint,
        }
    }
}

impl fmt::Debug for ScriptedBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScriptedBody")
            .field("steps", &self.steps)
            .field("waiting", &self.sleep.is_some())
            .finish()
    }
}

impl Body for ScriptedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        loop {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            match self.steps.pop_front() {
                None => return Poll::Ready(None),
                Some(Step::Data(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
                Some(Step::Wait(delay)) => self.sleep = Some(Box::pin(tokio::time::sleep(delay))),
                Some(Step::Stall) => {
                    self.steps.push_front(Step::Stall);
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.steps.is_empty() && self.sleep.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        let known: u64 = self
            .steps
            .iter()
            .map(|step| match step {
                Step::Data(data) => data.len() as u64,
                _ => 0,
            })
            .sum();
        if !self.hint || self.steps.contains(&Step::Stall) {
            SizeHint::new()
        } else {
            SizeHint::with_exact(known)
        }
    }
}
