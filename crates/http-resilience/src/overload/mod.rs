//! Overload control per authority: a bulkhead, an adaptive concurrency
//! limit, and client-side throttling.
//!
//! (Module docs to come.)

mod admit;
pub mod error;
mod events;
mod limit;
mod pass;
mod policy;
mod service;
mod slots;
mod throttle;

pub(crate) use self::pass::Admission;
pub use self::{
    admit::{Admit, NoOverload},
    error::{Overloaded, Rejection},
    events::{OverloadEvent, OverloadListener},
    limit::{AdaptiveLimit, Limit},
    policy::{OverloadPolicy, OverloadSettings, OverloadState},
    service::{Overload, OverloadLayer, ResponseFuture},
    throttle::Throttle,
};

#[cfg(test)]
mod tests;
