//! The parts of a policy: what the retry layer, the combined service and
//! hedging judge an outcome with and schedule the next attempt by.
//!
//! - a [`Decoder`] turns one attempt's outcome into a typed [`Verdict`]:
//!   accept, retry (with the delay the server asked for, if it did), or fail,
//!   each with a [`Reason`]; closures are decoders;
//! - a [`Retryer`], fresh for every request, says whether another attempt is
//!   made and after how long ([`FixedDelay`], [`ExponentialBackoff`],
//!   [`FeignRetryer`], [`GrpcBackoff`]);
//! - a [`RetryBudget`] bounds the retries and hedges of every caller
//!   together; a [`Listener`](crate::telemetry::Listener) hears every
//!   [`RetryEvent`] of a call, as a [`CallEvent`];
//! - [`Attempts`] on a response and a [`RetryReport`] for an error say how a
//!   call went, with the [`Stop`] that ended it;
//! - [`is_idempotent`] and [`Idempotency`] say what may be sent again, and
//!   [`retry_after`] reads a server's `Retry-After`.
//!
//! This is OpenFeign's split between `ErrorDecoder` and `Retryer`, shared by
//! every middleware of the crate, as tower-http's `classify` is by its own.
//!
//! # Example
//!
//! ```
//! use http_resilience::policy::{Decoder, FixedDelay, Retryer, StatusDecoder};
//! use std::time::Duration;
//!
//! let decoder = StatusDecoder::new([503])?;
//! let unavailable = http::Response::builder().status(503).body(())?;
//! let verdict = decoder.decode(&Ok::<_, std::io::Error>(unavailable));
//! assert!(verdict.is_retry());
//!
//! let mut retryer = FixedDelay::new(Duration::from_millis(10), 2).for_request();
//! assert_eq!(retryer.next_delay(1, None), Some(Duration::from_millis(10)));
//! # Ok::<(), http_resilience::BoxError>(())
//! ```

mod budget;
mod decoder;
mod events;
mod grpc_wire;
mod options;
mod parts;
#[cfg(test)]
mod properties;
mod report;
pub mod retry_after;
mod retryer;
mod safety;
mod verdict;

pub use self::{
    budget::RetryBudget,
    decoder::{
        AnyDecoder, ApacheDecoder, Decoder, FeignDecoder, InvalidHeader, InvalidStatus, Or,
        Outcome, OutcomeDecoder, Reason, RetryOnHeader, StatusDecoder, TransientDecoder, Verdict,
    },
    events::{CallContext, CallEvent, HedgeTrigger, RetryEvent, WaitSource},
    options::CallOptions,
    report::{Attempts, RetryReport, Stop},
    retryer::{AnyRetryer, ExponentialBackoff, FeignRetryer, FixedDelay, Jitter, Retryer},
    safety::{is_idempotent, Idempotency, IDEMPOTENCY_KEY},
};

#[cfg(feature = "grpc")]
pub use self::{decoder::GrpcDecoder, retryer::GrpcBackoff};

pub(crate) use self::events::CallListener;
#[cfg(feature = "grpc")]
pub(crate) use self::grpc_wire::grpc_code_by_name;
#[cfg(feature = "grpc")]
pub(crate) use self::grpc_wire::GRPC_PREVIOUS_RPC_ATTEMPTS;
#[cfg(any(feature = "grpc", feature = "fault"))]
pub(crate) use self::grpc_wire::GRPC_RETRY_PUSHBACK_MS;
#[cfg(feature = "fault")]
pub(crate) use self::grpc_wire::GRPC_STATUS;
pub(crate) use self::grpc_wire::{grpc_code_name, grpc_status_of, parse_ascii_int};
pub(crate) use self::parts::{AttemptHeader, Parts};
pub(crate) use self::retryer::{Seeds, SplitMix64};
