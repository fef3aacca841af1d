//! Telemetry as the `telemetry` module docs describe it, through the public
//! API only: the spans `http_resilience.call` and `http_resilience.attempt`
//! (their fields, levels and parents) in both forms of the stack and in a
//! hedge, what a layer below sees (`AttemptNumber`, the attempt's span as
//! the current one), and what a listener hears. Read back with a recording
//! subscriber, on tokio's paused clock.
//!
//! Alone in its test binary, since `tracing` caches per call site whether
//! anyone listens, across threads: every test here installs a subscriber
//! that listens to everything.

mod below;
mod harness;
mod hedge;
mod listener;
mod recorder;
mod spans;
