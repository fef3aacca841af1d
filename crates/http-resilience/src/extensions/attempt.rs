/// The number of the attempt a request is (2 for the first retry or hedge),
/// in the request extensions of every attempt after the first when the
/// policy asks for it
/// ([`CallOptions::with_attempt_number`](crate::policy::CallOptions::with_attempt_number)).
///
/// A layer of one's own below the retry (or the hedge, or the combined
/// service) reads it without a header: tower-http's `TraceLayer`, a metrics
/// layer. The first attempt carries none, so that a call that is never
/// retried allocates nothing for it, and [`AttemptNumber::of`] reads it as 1;
/// one a request brings (copied with the extensions of another request) is
/// removed before the first attempt, as a [`FinalAttempt`](super::FinalAttempt)
/// marker is.
///
/// # Example
///
/// ```
/// use http::Request;
/// use http_resilience::extensions::AttemptNumber;
///
/// let mut request = Request::new(());
/// assert_eq!(AttemptNumber::of(&request), 1);
/// request.extensions_mut().insert(AttemptNumber::new(3));
/// assert_eq!(AttemptNumber::of(&request), 3);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttemptNumber(u32);

impl AttemptNumber {
    /// Attempt `n` (1 for the first).
    pub const fn new(n: u32) -> Self {
        Self(n)
    }

    /// The number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The number of the attempt `request` is: its `AttemptNumber`, or 1.
    pub fn of<B>(request: &http::Request<B>) -> u32 {
        request
            .extensions()
            .get::<Self>()
            .map_or(1, |attempt| attempt.0)
    }
}
