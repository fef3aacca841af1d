//! The rate limit on the paused clock.
