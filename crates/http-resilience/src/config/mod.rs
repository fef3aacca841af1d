//! Per-client policies from a configuration file, in the manner of Spring
//! Cloud OpenFeign's `feign.client.config.<name>`.
//!
//! A [`ClientsConfig`] holds a `[default]` section, which every client
//! inherits field by field, and one `[clients.<name>]` section per named
//! client. [`ClientsConfig::policy`] resolves a name to a validated
//! [`ResiliencePolicy`], and [`ClientsConfig::layer`] to the layer that makes the
//! one service with its deadline, retry, circuit breaker and attempt timeout,
//! in the semantics of the canonical order.
//!
//! The types are serde types (feature `serde`), so the sections can sit in any
//! format serde reads, inside a larger configuration too;
//! [`ClientsConfig::from_toml_str`] (feature `toml`) reads and validates a TOML
//! text in one call.
//!
//! # Example
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{config::ClientsConfig, Attempts};
//! use std::{
//!     convert::Infallible,
//!     sync::{atomic::{AtomicU32, Ordering}, Arc},
//!     time::Duration,
//! };
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let config = ClientsConfig::from_toml_str(
//!     r#"
//!     [default]
//!     deadline = "8s"
//!     attempt_timeout = "3s"
//!
//!     [default.retry]
//!     decoder = "statuses"
//!     statuses = [503]
//!     backoff = "fixed"
//!     delay = "10ms"
//!     max_attempts = 3
//!
//!     [clients.weather]
//!     attempt_timeout = "2s"
//!     "#,
//! )?;
//!
//! let policy = config.policy("weather")?;
//! assert_eq!(policy.deadline(), Duration::from_secs(8)); // inherited
//! assert_eq!(policy.attempt_timeout(), Duration::from_secs(2)); // its own
//!
//! let calls = Arc::new(AtomicU32::new(0));
//! let svc = ServiceBuilder::new()
//!     .layer(config.layer("weather")?)
//!     .service_fn(move |_: Request<String>| {
//!         // A stand-in for the network: unavailable once, then fine.
//!         let status = if calls.fetch_add(1, Ordering::SeqCst) == 0 { 503 } else { 200 };
//!         async move { Ok::<_, Infallible>(Response::builder().status(status).body(String::new()).unwrap()) }
//!     });
//! let response = svc.oneshot(Request::new(String::new())).await?;
//! assert_eq!(response.status(), 200);
//! assert_eq!(Attempts::of(&response), 2);
//! # Ok(())
//! # }
//! ```
//!
#![doc = include_str!("format.md")]

mod breaker;
mod clients;
mod decoder;
mod error;
mod fields;
mod guards;
mod hedge;
mod origin;
mod overload;
mod propagate;
mod rate_limit;
mod resolve;
mod retry;
mod shared;
#[cfg(test)]
mod tests;
mod validate;
mod written;

pub use self::{
    clients::{ClientPolicy, ClientsConfig},
    error::ConfigError,
    guards::ClientGuards,
};
