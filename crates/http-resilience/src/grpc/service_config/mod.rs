//! gRPC's service config: the JSON document grpc-go and grpc-java read for
//! per-method retries, hedging and timeouts, around a tonic `Channel`.
//!
//! [`ServiceConfig::from_json`] reads and checks the document;
//! [`ServiceConfigLayer`] builds, once, one stack per method config from the
//! library's parts, and sends every call through the stack of its method:
//!
//! - `retryPolicy`: [`GrpcLayer`](super::GrpcLayer)'s stack, with a
//!   [`RetryPolicy`] of [`GrpcDecoder`] (the `retryableStatusCodes`) and
//!   [`GrpcBackoff`] (`maxAttempts`, `initialBackoff`, `maxBackoff`,
//!   `backoffMultiplier`), sending `grpc-previous-rpc-attempts`, with
//!   deadline-aware scheduling as in [`presets::grpc`](crate::presets::grpc);
//! - `hedgingPolicy`: [`GrpcHedgeLayer`](super::GrpcHedgeLayer)'s stack, with
//!   a [`HedgePolicy`] of a fixed `hedgingDelay` and a [`GrpcDecoder`] whose
//!   codes are the `nonFatalStatusCodes`;
//! - neither, or a method no entry names: every call is sent once, under
//!   its entry's `timeout` if there is one and under the caller's
//!   `grpc-timeout` (inherited as its deadline and enforced); with no
//!   timeout in the entry, the layer writes no `grpc-timeout` of its own;
//! - `timeout`: the deadline of every call of the method, waits and
//!   response stream included; a timeout the caller sets with tonic's
//!   `Request::set_timeout` wins when it is the earlier one. A deadline
//!   overrun reaches the caller as `DEADLINE_EXCEEDED`;
//! - `retryThrottling`: one [`RetryBudget`] (A6's token bucket) shared by
//!   every retry and hedge the config makes, the budget `presets::grpc`
//!   uses. A retryable status takes a token and an accepted call puts
//!   `tokenRatio` back, as A6 says; for hedging, the library's engine takes
//!   the token when it sends a copy after the first rather than when a copy
//!   comes back with a non-fatal status, so a hedge the bucket cannot pay
//!   for is never sent.
//!
//! # Choosing the entry of a call
//!
//! A call's path, `/pkg.Svc/Method` (its last two segments, after any prefix
//! a tonic client's origin puts in front), picks the most specific name: the
//! entry naming the service and the method, else the one naming the service
//! alone, else the default entry `{}`, else none. A name may appear once in
//! the whole document, a `method` needs a `service`, and an entry takes a
//! `retryPolicy` or a `hedgingPolicy`, not both.
//!
//! # What is checked
//!
//! As A6 says, and where gRPC's clients (grpc-go, grpc-java) take a value A6
//! leaves open, as they take it, capped where the library documents it:
//!
//! | field | accepted | read as |
//! |---|---|---|
//! | `maxAttempts` | an integer of at least 2 | at most 5, A6's cap (more is read as 5, as gRPC's clients do) |
//! | `initialBackoff`, `maxBackoff` | positive durations | at most `maxBackoff` for `initialBackoff` (a maximum below the initial backoff makes every wait the maximum, as gRPC's formula gives it) |
//! | `backoffMultiplier` | any positive finite number | within the bounds past which no wait changes: at most `maxBackoff ÷ initialBackoff` (above, every wait after the first is `maxBackoff`), at least what makes the second wait under half a nanosecond (below, every wait after the first is zero) |
//! | `retryableStatusCodes`, `nonFatalStatusCodes` | codes (below); `retryableStatusCodes` not empty | |
//! | `hedgingDelay` | a duration of zero or more | |
//! | `timeout` | a positive duration | |
//! | `retryThrottling.maxTokens` | a number in `(0, 1000]` | in thousandths, as gRPC keeps it (digits past the third decimal ignored, as A6 says) |
//! | `retryThrottling.tokenRatio` | a number of at least 0.001 | in thousandths as `maxTokens`, and at most `maxTokens` (a success cannot put back more than the bucket holds) |
//!
//! Every duration is protobuf's JSON form (`"0.1s"`, `"1s"`,
//! `"2.000000001s"`), up to the 315,576,000,000 s (10,000 years) a protobuf
//! `Duration` holds; a longer one is refused (`must be at most
//! 315576000000s`), as both clients refuse it. Above `i64::MAX`
//! nanoseconds (about 292 years, the longest either client holds) a
//! duration is read as that cap, as grpc-java reads it (grpc-go refuses
//! it).
//!
//! Status codes are written as gRPC's clients accept them: the upper-case
//! names (`"UNAVAILABLE"`) or the numbers `0..=16`; `OK` is not a failure
//! and cannot be listed. Fields this library does not use (`waitForReady`,
//! `loadBalancingConfig`, ...) are ignored, as gRPC ignores fields it does
//! not know; a known field of the wrong type is an error. Every error is an
//! [`InvalidServiceConfig`] naming the field's path, in a message that is
//! the same for the same mistake; the value refused is
//! [`InvalidServiceConfig::value`].
//!
//! # Idempotency
//!
//! Every gRPC call is a POST, which the library never sends twice unless it
//! is marked safe to repeat. A service owner who gives a method a
//! `hedgingPolicy` declares it safe to send more than once (A6 asks exactly
//! that of hedged methods), so the hedged stack marks each of its calls
//! [`Idempotency::Idempotent`](crate::policy::Idempotency) unless the caller
//! marked it `NotIdempotent`, which wins: such a call is sent once. A retry
//! needs no mark: it is made only for the listed codes, which the service
//! owner lists because the server sends them for calls it did not process,
//! or for a call that never reached the server ([`GrpcDecoder`]'s rules).
//!
//! # Calls without a timeout
//!
//! A method without `timeout` gets no deadline of the layer's own: the
//! caller's, if any, holds. Its retries then have no deadline to cut a
//! server's pushback, so `grpc-retry-pushback-ms` is capped at 30 s there
//! ([`GrpcBackoff::with_max_pushback`]); with a timeout, the deadline bounds
//! it as in `presets::grpc`. With no deadline from the caller either, no
//! attempt sends a `grpc-timeout`: there is none to send.
//!
//! Every call, whatever its route, sends the time left before its deadline
//! (the earlier of the method's `timeout` and the caller's) as
//! `grpc-timeout`, and every successful call puts `tokenRatio` back in the
//! throttling bucket, as A6 counts every call of the channel.
//!
//! # Where it differs from gRPC's clients
//!
//! - **The throttling bucket is the layer's**: the services one
//!   [`ServiceConfigLayer`] makes share it, where A6 keeps one per channel.
//!   Make a layer per channel (per server) for a bucket each.
//! - **A hedge takes its token when it is sent**, as the library's hedging
//!   always does, where A6 takes one for each copy that fails: a slow but
//!   healthy server spends tokens on hedges, and a bucket at half sends no
//!   more hedges until successes refill it.
//! - **A hedge answered with a negative or malformed
//!   `grpc-retry-pushback-ms` ends the call** with that answer, where A6
//!   sends no more hedges but lets the copies in flight go on.
//! - **A call is judged at its response head**: a call whose headers came
//!   first and whose trailers then carry a failure counts as a success for
//!   the bucket.
//! - **A retry needs room before the deadline**: as in `presets::grpc`, a
//!   retry whose wait leaves less than 100 ms before the method's `timeout`
//!   is not made (deadline-aware scheduling), where gRPC would make it.
//! - **Durations need a digit on each side of a point** (`"1.5s"`, `"0.5s"`),
//!   where grpc-go and grpc-java also read `"1.s"` and `".5s"`.
//! - **A `timeout` of zero is refused**, where grpc-go applies it (every call
//!   of the method then fails at once with `DEADLINE_EXCEEDED`).
//! - **A negative or malformed `grpc-retry-pushback-ms` takes no token**: the
//!   call ends with that answer, as A6 says, but the bucket does not count it
//!   as a failure, where A6 and grpc-go do.
//!
//! # Example
//!
//! A6's example policy for the health service, its `Check` with a timeout
//! of its own, and the retry throttling:
//!
//! ```no_run
//! use http_resilience::grpc::ServiceConfigLayer;
//! use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
//! use tower::Layer;
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = r#"{
//!   "methodConfig": [{
//!     "name": [{"service": "grpc.health.v1.Health"}],
//!     "retryPolicy": {
//!       "maxAttempts": 4,
//!       "initialBackoff": "0.1s",
//!       "maxBackoff": "1s",
//!       "backoffMultiplier": 2,
//!       "retryableStatusCodes": ["UNAVAILABLE"]
//!     }
//!   }, {
//!     "name": [{"service": "grpc.health.v1.Health", "method": "Check"}],
//!     "timeout": "2s",
//!     "hedgingPolicy": {"maxAttempts": 2, "hedgingDelay": "0.05s"}
//!   }],
//!   "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
//! }"#;
//! let endpoint = tonic::transport::Channel::from_static("http://127.0.0.1:50051");
//! let layer = ServiceConfigLayer::from_json(config)?.with_authority(endpoint.uri())?;
//! let mut client = HealthClient::new(layer.layer(endpoint.connect_lazy()));
//! let reply = client.check(HealthCheckRequest { service: String::new() }).await?;
//! println!("{:?}", reply.into_inner().status());
//! # Ok(())
//! # }
//! ```

pub mod error;
pub mod future;
mod layer;
mod parse;
#[cfg(test)]
mod tests;

pub use self::{
    error::InvalidServiceConfig,
    layer::{ServiceConfigLayer, ServiceConfigured},
};

use crate::{
    hedge::HedgePolicy,
    policy::{GrpcBackoff, GrpcDecoder, RetryBudget},
    retry::RetryPolicy,
};
use std::{collections::HashMap, fmt, sync::Arc, time::Duration};

/// A gRPC service config, read and checked; see the [module docs](self).
///
/// # Example
///
/// ```
/// use http_resilience::grpc::{service_config::MethodPolicy, ServiceConfig};
/// use std::time::Duration;
///
/// let config = ServiceConfig::from_json(r#"{"methodConfig": [
///     {"name": [{}], "timeout": "1.5s"},
///     {"name": [{"service": "pkg.Svc"}],
///      "retryPolicy": {"maxAttempts": 9, "initialBackoff": "0.1s", "maxBackoff": "1s",
///                      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE", 8]}}
/// ]}"#)?;
/// let other = config.method_config("pkg.Other", "M").unwrap();
/// assert_eq!(other.timeout(), Some(Duration::from_millis(1500)));
/// let MethodPolicy::Retry(retry) = config.method_config("pkg.Svc", "M").unwrap().policy() else {
///     unreachable!()
/// };
/// let shown = format!("{retry:?}");
/// assert!(shown.contains("max_attempts: 5,"), "A6's cap: {shown}");
/// assert!(shown.contains(r#"retryable_codes: ["RESOURCE_EXHAUSTED", "UNAVAILABLE"]"#), "{shown}");
/// # Ok::<(), http_resilience::grpc::InvalidServiceConfig>(())
/// ```
#[derive(Clone)]
pub struct ServiceConfig {
    methods: Vec<MethodConfig>,
    index: Index,
    throttling: Option<Arc<RetryBudget>>,
}

// ===== impl ServiceConfig =====

impl ServiceConfig {
    /// Reads a service config from its JSON text.
    ///
    /// # Errors
    ///
    /// [`InvalidServiceConfig`] when the text is not JSON, or a field is of
    /// the wrong type or breaks one of A6's rules (see
    /// [What is checked](self#what-is-checked)).
    pub fn from_json(json: &str) -> Result<Self, InvalidServiceConfig> {
        let value: serde_json::Value = serde_json::from_str(json)
            .map_err(|err| InvalidServiceConfig::new("", format!("not JSON: {err}")))?;
        let document = parse::document(&value)?;
        Ok(Self {
            methods: document.methods,
            index: document.index,
            throttling: document.throttling,
        })
    }

    /// The method configs, in the order of the document.
    pub fn methods(&self) -> &[MethodConfig] {
        &self.methods
    }

    /// The retry throttling every retry and hedge of the config shares, if
    /// the document has a `retryThrottling`.
    pub fn retry_throttling(&self) -> Option<&Arc<RetryBudget>> {
        self.throttling.as_ref()
    }

    /// The entry for `method` of `service` (`"pkg.Svc"`, `"M"`): the most
    /// specific name that matches, if any does.
    pub fn method_config(&self, service: &str, method: &str) -> Option<&MethodConfig> {
        self.index.select(service, method).map(|i| &self.methods[i])
    }

    /// The index of the entry for a request path (`/pkg.Svc/Method`).
    pub(super) fn index_for_path(&self, path: &str) -> Option<usize> {
        self.index.select_path(path)
    }
}

impl fmt::Debug for ServiceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceConfig")
            .field("methods", &self.methods)
            .field("retry_throttling", &self.throttling)
            .finish()
    }
}

/// One entry of `methodConfig`: the methods it names, their timeout, and
/// their policy.
#[derive(Debug, Clone)]
pub struct MethodConfig {
    names: Vec<MethodName>,
    timeout: Option<Duration>,
    policy: MethodPolicy,
}

// ===== impl MethodConfig =====

impl MethodConfig {
    /// The names the entry applies to.
    pub fn names(&self) -> &[MethodName] {
        &self.names
    }

    /// The deadline of every call of these methods, if `timeout` is given.
    pub const fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The policy: a retry, a hedge, or neither.
    pub const fn policy(&self) -> &MethodPolicy {
        &self.policy
    }
}

/// A `name` of a method config: a method of a service, every method of a
/// service, or (neither given, `{}`) every method.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MethodName {
    service: Option<String>,
    method: Option<String>,
}

// ===== impl MethodName =====

impl MethodName {
    /// The service (`"pkg.Svc"`), if the name gives one.
    pub fn service(&self) -> Option<&str> {
        self.service.as_deref()
    }

    /// The method (`"Method"`), if the name gives one.
    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }
}

/// What a method config does with a call besides its timeout.
#[derive(Debug, Clone)]
pub enum MethodPolicy {
    /// `retryPolicy`: attempts one after another.
    Retry(RetryPolicy<GrpcDecoder, GrpcBackoff>),
    /// `hedgingPolicy`: copies sent while none has answered.
    Hedge(HedgePolicy<GrpcDecoder>),
    /// Neither: every call is sent once.
    None,
}

/// Which entry a call's service and method select, most specific first.
#[derive(Debug, Clone, Default)]
struct Index {
    services: HashMap<String, ServiceEntries>,
    default: Option<usize>,
}

/// The entries naming one service: the whole of it, and its methods.
#[derive(Debug, Clone, Default)]
struct ServiceEntries {
    all: Option<usize>,
    methods: HashMap<String, usize>,
}

// ===== impl Index =====

impl Index {
    /// Records that `name` selects entry `i`. The parser refuses a name
    /// given twice, so nothing is replaced.
    fn insert(&mut self, name: &MethodName, i: usize) {
        let Some(service) = &name.service else {
            self.default = Some(i);
            return;
        };
        let entries = self.services.entry(service.clone()).or_default();
        match &name.method {
            Some(method) => {
                entries.methods.insert(method.clone(), i);
            }
            None => entries.all = Some(i),
        }
    }

    fn select(&self, service: &str, method: &str) -> Option<usize> {
        let entries = self.services.get(service);
        let exact = entries.and_then(|entries| entries.methods.get(method).copied());
        exact
            .or_else(|| entries.and_then(|entries| entries.all))
            .or(self.default)
    }

    /// The entry for a request path: its last two segments,
    /// `/service/method` (after any prefix a tonic client's origin puts in
    /// front); a path of another shape gets the default entry only.
    fn select_path(&self, path: &str) -> Option<usize> {
        let mut segments = path.rsplitn(3, '/');
        match (segments.next(), segments.next(), segments.next()) {
            (Some(method), Some(service), Some(_)) if !service.is_empty() => {
                self.select(service, method)
            }
            _ => self.default,
        }
    }
}
