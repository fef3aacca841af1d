//! A simulator for http-resilience (placeholder docs).

mod load;
mod metrics;
pub mod outage;
mod plot;
mod report;
mod rng;
mod upstream;

pub use report::Report;

use std::future::Future;

/// Runs `future` on a current-thread runtime whose clock starts paused:
/// every sleep of the callers, the upstream and the layers is virtual, and
/// the clock jumps to the next timer whenever every task waits.
pub(crate) fn simulate<F: Future>(future: impl FnOnce() -> F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    runtime.block_on(future())
}
