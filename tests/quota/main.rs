//! Quotas through the public API: the rate limit over loopback against
//! counting upstreams on the real clock, and one quota shared by processes
//! through a real Redis (Debian's `redis-server`, started by the tests; see
//! `redis.rs`).

#[path = "../support/mod.rs"]
mod support;

mod fleet;
mod fleet_run;
mod loopback;
mod redis;
mod upstream;

/// The tests whose figures a loaded machine could skew (a fleet of
/// processes, a paced burst measured at the server) take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
