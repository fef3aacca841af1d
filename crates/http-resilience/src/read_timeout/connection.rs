//! Whether the request is out yet: its connection made and its body sent.

#[cfg(feature = "transport")]
use super::sent::Sending;
use std::task::Context;

/// Tells the read timeout when the wait for the head begins.
///
/// With hyper-util's client (feature `transport`), the connection is captured
/// through `capture_connection`: until the client has a connection for the
/// request, the time is spent connecting (bounded by the connect timeout), not
/// waiting for a read. The transport's client also watches the request's
/// body: until it is sent, the time is spent sending. Without them, the wait
/// begins at once.
pub(crate) struct Connection {
    #[cfg(feature = "transport")]
    capture: Option<hyper_util::client::legacy::connect::CaptureConnection>,
    #[cfg(feature = "transport")]
    sending: Option<Sending>,
}

impl Connection {
    /// Watches for the connection hyper-util's client picks for `request` when
    /// `after_connect` is set (and the `transport` feature is on); otherwise
    /// the wait for the head begins at once.
    pub(crate) fn new<B>(after_connect: bool, request: &mut http::Request<B>) -> Self {
        #[cfg(feature = "transport")]
        return Self {
            capture: after_connect
                .then(|| hyper_util::client::legacy::connect::capture_connection(request)),
            sending: None,
        };
        #[cfg(not(feature = "transport"))]
        {
            let _ = (after_connect, request);
            Self {}
        }
    }

    /// The same, also waiting for the request's body to be sent, as
    /// `sending` tells.
    #[cfg(feature = "transport")]
    pub(crate) fn with_sending(mut self, sending: Option<Sending>) -> Self {
        self.sending = sending;
        self
    }

    /// Whether the request is not out yet: the client is still connecting,
    /// or its body is still being sent (`cx` is then woken once it is).
    ///
    /// NOTE: no waker is needed for the connection: the client's response
    /// future is woken when its connection is ready, and the read timeout
    /// looks again on that poll. The body is sent by the connection's task,
    /// which wakes no one, hence the waker the body's watch keeps.
    pub(crate) fn is_sending(&self, cx: &mut Context<'_>) -> bool {
        #[cfg(feature = "transport")]
        {
            if let Some(capture) = &self.capture {
                if capture.connection_metadata().is_none() {
                    return true;
                }
            }
            if let Some(sending) = &self.sending {
                return !sending.poll_sent(cx);
            }
        }
        let _ = cx;
        false
    }

    /// Whether the request is out, looked at without waiting (for `Debug`).
    pub(crate) fn is_out(&self) -> bool {
        #[cfg(feature = "transport")]
        {
            let connected = (self.capture.as_ref())
                .is_none_or(|capture| capture.connection_metadata().is_some());
            connected && self.sending.as_ref().is_none_or(Sending::is_sent)
        }
        #[cfg(not(feature = "transport"))]
        true
    }
}
