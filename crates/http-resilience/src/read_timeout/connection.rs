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
    /// The upstream, to name in [`NoResponse`](crate::transport::NoResponse).
    #[cfg(feature = "transport")]
    authority: Option<http::uri::Authority>,
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
            authority: after_connect
                .then(|| request.uri().authority().cloned())
                .flatten(),
        };
        #[cfg(not(feature = "transport"))]
        {
            let _ = (after_connect, request);
            Self {}
        }
    }

    /// The client's error, renamed as Apache names it when the upstream
    /// closed the connection without any response: "HOST failed to respond".
    pub(crate) fn map_error(&self, error: crate::BoxError) -> crate::BoxError {
        #[cfg(feature = "transport")]
        if let Some(authority) = &self.authority {
            if crate::FailureKind::of(&*error) == crate::FailureKind::ConnectionClosed {
                return crate::transport::NoResponse::new(authority.to_string(), error).into();
            }
        }
        error
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
