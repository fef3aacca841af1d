//! A simulator that runs http-resilience's own layers against a modelled
//! upstream on tokio's paused clock, and reproduces published figures with
//! the strategies off and on.
//!
//! # What it runs
//!
//! Thousands of callers, each starting calls at random (an open load: a
//! failing upstream does not slow them down), call through **the library's
//! real layers**, unchanged: [`DeadlineLayer`], [`StatusRetryLayer`] and
//! [`AttemptTimeoutLayer`], the combined service ([`ResiliencePolicy`]), the
//! shared [`RetryBudget`], the circuit breaker ([`BreakerPolicy`]), overload
//! control's client-side throttling ([`Throttle`]) and hedging
//! ([`HedgeLayer`]). Below them is a modelled upstream, a `tower::Service`
//! with:
//!
//! - a capacity: servers that serve one request at a time, and a FIFO queue
//!   of bounded length, beyond which it answers 503 at once;
//! - a latency distribution: log-normal, with stragglers for hedging;
//! - failure modes on a schedule: a hard outage (every answer a 503), a
//!   brown-out (a share of answers 503), a capacity drop, and overload
//!   collapse (serving takes longer as the queue grows);
//! - the work of an abandoned attempt done all the same, as a real server
//!   does: it does not know that its client has given up.
//!
//! Everything runs on a current-thread runtime whose clock starts paused,
//! so minutes of traffic take seconds, and every draw comes from one seed:
//! the same seed gives the same figures, to the last digit.
//!
//! # Scenarios
//!
//! | scenario | published | strategies off | strategies on |
//! |---|---|---|---|
//! | [`Outage`] (`outage`) | three layers retrying 3 times: up to 64x (4³) at the deepest; a budget refilled by 10 % of a token per success: at most 1.1x | retries at every layer | each service's retries under a shared budget |
//! | [`Metastable`] (`metastable`) | after a trigger, the system stays down (Bronson et al., HotOS 2021) | retries alone | retries with a budget, client-side throttling and a breaker |
//! | [`Hedging`] (`hedging`) | the 99.9th percentile from 1,800 ms to 74 ms for 2 % more requests ("The Tail at Scale") | one request per call | a hedge at the 95th percentile |
//! | [`Throttling`] (`throttling`) | the client rejects `max(0, (requests − K·accepts) / (requests + 1))` (Google SRE book, "Handling Overload") | no throttling | K = 2 and K = 1.1 |
//!
//! Each scenario's [`Report`] prints its table beside the published figures
//! (with notes on where and why they differ) and draws a picture: offered
//! load, upstream load, goodput and a latency percentile over time, a panel
//! per strategy. The command line runs them:
//!
//! ```text
//! cargo run -p http-resilience-sim -- outage        # or metastable, hedging, throttling, all
//! cargo run -p http-resilience-sim -- all --seed 7 --out docs/sim
//! ```
//!
//! # Example
//!
//! ```
//! use http_resilience_sim::{Outage, Scenario};
//!
//! let outage = Outage::run(1);
//! // Every user's call during the outage made 4 x 4 x 4 attempts at the deepest service...
//! assert_eq!(outage.retries.outage.amplification(), 64.0);
//! // ...and at most 1.1 each with the shared budget.
//! assert!(outage.budgeted.outage.amplification() <= 1.1);
//! // The table beside the published figures (`Display` adds the sources and
//! // notes); `write_svg` draws the picture.
//! println!("{}", outage.report().table());
//!
//! // The command line finds the scenarios by name.
//! assert_eq!(Scenario::from_name("outage"), Some(Scenario::Outage));
//! ```
//!
//! [`DeadlineLayer`]: http_resilience::DeadlineLayer
//! [`StatusRetryLayer`]: http_resilience::StatusRetryLayer
//! [`AttemptTimeoutLayer`]: http_resilience::AttemptTimeoutLayer
//! [`ResiliencePolicy`]: http_resilience::ResiliencePolicy
//! [`RetryBudget`]: http_resilience::policy::RetryBudget
//! [`BreakerPolicy`]: http_resilience::breaker::BreakerPolicy
//! [`Throttle`]: http_resilience::overload::Throttle
//! [`HedgeLayer`]: http_resilience::hedge::HedgeLayer

mod hedging;
mod load;
mod metastable;
mod metrics;
mod outage;
mod plot;
mod report;
mod rng;
mod throttling;
mod upstream;

pub use self::{
    hedging::{Hedging, Tail},
    metastable::{Metastable, Recovery},
    outage::{Amplification, Outage, Phase},
    report::Report,
    throttling::{Throttled, Throttling},
};

use std::future::Future;

/// A scenario, by the name the command line gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Retry amplification during an outage ([`Outage`]).
    Outage,
    /// A metastable failure and its recovery ([`Metastable`]).
    Metastable,
    /// Hedging's tail ([`Hedging`]).
    Hedging,
    /// Client-side throttling ([`Throttling`]).
    Throttling,
}

impl Scenario {
    /// Every scenario, in the order `all` runs them.
    pub const ALL: [Self; 4] = [
        Self::Outage,
        Self::Metastable,
        Self::Hedging,
        Self::Throttling,
    ];

    /// The scenario's name: `outage`, `metastable`, `hedging`, `throttling`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Outage => "outage",
            Self::Metastable => "metastable",
            Self::Hedging => "hedging",
            Self::Throttling => "throttling",
        }
    }

    /// The scenario named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Runs the scenario with `seed` and returns its report.
    pub fn run(self, seed: u64) -> Report {
        match self {
            Self::Outage => Outage::run(seed).report().clone(),
            Self::Metastable => Metastable::run(seed).report().clone(),
            Self::Hedging => Hedging::run(seed).report().clone(),
            Self::Throttling => Throttling::run(seed).report().clone(),
        }
    }
}

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
