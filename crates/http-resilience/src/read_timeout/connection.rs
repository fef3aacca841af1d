//! Whether the client has a connection for the request yet.

/// Tells the read timeout when the wait for the head begins.
///
/// With hyper-util's client (feature `transport`), the connection is captured
/// through `capture_connection`: until the client has a connection for the
/// request, the time is spent connecting (bounded by the connect timeout), not
/// waiting for a read. Without it, the wait begins at once.
pub(crate) struct Connection {
    #[cfg(feature = "transport")]
    capture: Option<hyper_util::client::legacy::connect::CaptureConnection>,
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
        };
        #[cfg(not(feature = "transport"))]
        {
            let _ = (after_connect, request);
            Self {}
        }
    }

    /// Whether the client is still connecting.
    ///
    /// NOTE: no waker is needed for the change: the client's response future
    /// is woken when its connection is ready, and the read timeout looks again
    /// on that poll.
    pub(crate) fn is_connecting(&self) -> bool {
        #[cfg(feature = "transport")]
        if let Some(capture) = &self.capture {
            return capture.connection_metadata().is_none();
        }
        false
    }
}
