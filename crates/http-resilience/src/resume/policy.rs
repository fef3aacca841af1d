use std::time::Duration;

/// How many times a response body may be resumed, and how much of the call's
/// deadline a resume needs left.
///
/// See the [module docs](super) for an example.
///
/// # Example
///
/// ```
/// use http_resilience::resume::ResumePolicy;
/// use std::time::Duration;
///
/// let policy = ResumePolicy::new(2).with_min_remaining(Duration::from_millis(500));
/// assert_eq!(format!("{policy:?}"), "ResumePolicy { max_resumes: 2, min_remaining: 500ms }");
/// assert_eq!(ResumePolicy::default(), ResumePolicy::new(3));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResumePolicy {
    max_resumes: u32,
    min_remaining: Duration,
}

// ===== impl ResumePolicy =====

impl ResumePolicy {
    /// A policy that resumes a body at most `max_resumes` times (each ranged
    /// request counts, whatever its outcome), as long as the call's deadline
    /// has not passed. Zero resumes nothing: every body passes through as it
    /// is.
    pub const fn new(max_resumes: u32) -> Self {
        Self {
            max_resumes,
            min_remaining: Duration::ZERO,
        }
    }

    /// Resumes only while at least `min_remaining` is left before the call's
    /// deadline, the least time a ranged request needs to be of use; a body
    /// that fails with less left fails with its own error. Zero (the
    /// default) resumes until the deadline has passed.
    #[must_use]
    pub const fn with_min_remaining(mut self, min_remaining: Duration) -> Self {
        self.min_remaining = min_remaining;
        self
    }

    /// The most resumes of one body.
    pub(crate) const fn max_resumes(&self) -> u32 {
        self.max_resumes
    }

    /// The least time a resume needs left before the deadline.
    pub(crate) const fn min_remaining(&self) -> Duration {
        self.min_remaining
    }
}

impl Default for ResumePolicy {
    /// Three resumes, until the deadline.
    fn default() -> Self {
        Self::new(3)
    }
}
