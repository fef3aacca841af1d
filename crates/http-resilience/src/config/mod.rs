//! Per-client policies from a configuration file, in the manner of Spring
//! Cloud OpenFeign's `feign.client.config.<name>`.
//!
//! A [`ClientsConfig`] holds a `[default]` section, which every client
//! inherits field by field, and one `[clients.<name>]` section per named
//! client. [`ClientsConfig::policy`] resolves a name to a validated
//! [`ResiliencePolicy`], and [`ClientsConfig::layer`] to the layer that makes the
//! one service with its deadline, retry and attempt timeout, in the semantics
//! of the canonical order.
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
//! # The format
//!
//! Every section, `[default]` and each `[clients.<name>]`, has the same
//! fields, all optional:
//!
//! | field | value | meaning |
//! |---|---|---|
//! | `preset` | `"reactor"`, `"feign"`, `"standard"`, `"conservative"`, `"apache"` or `"grpc"` | the base of the section (see [Resolution](#resolution)) |
//! | `deadline` | duration | the budget of the whole call |
//! | `attempt_timeout` | duration | the limit of each attempt; at most the deadline |
//! | `retry.decoder` | `"statuses"`, `"feign"`, `"transient"`, `"apache"` or `"grpc"` | [`StatusDecoder`], [`FeignDecoder`], [`TransientDecoder`], [`ApacheDecoder`] or [`GrpcDecoder`]; `"grpc"` also sends `grpc-previous-rpc-attempts` |
//! | `retry.statuses` | list of codes in `100..=599` | the statuses retried; `statuses` decoder only, and required by it |
//! | `retry.retry_after` | bool | read `Retry-After` on 429 and 503 ([`StatusDecoder::with_retry_after`]); `statuses` decoder only; default `false` |
//! | `retry.codes` | list of gRPC code names (`"UNAVAILABLE"`, any case) | the gRPC codes retried; `grpc` decoder only; default `["UNAVAILABLE"]` |
//! | `retry.backoff` | `"fixed"`, `"exponential"`, `"feign"` or `"grpc"` | [`FixedDelay`], [`ExponentialBackoff`], [`FeignRetryer`] or [`GrpcBackoff`] |
//! | `retry.delay` | duration | fixed: the delay; exponential: the initial delay; feign: the period |
//! | `retry.max_delay` | duration | exponential: the cap; fixed: the cap on a delay the server asks for ([`FixedDelay::with_max_delay`]); feign: the maximum period |
//! | `retry.max_attempts` | integer ≥ 1 | attempts in all, the first included (fixed: retries = `max_attempts` − 1) |
//! | `retry.multiplier` | number ≥ 1.0 (grpc: > 0) | exponential and grpc only; default 1.5 (as [`ExponentialBackoff::default`]) |
//! | `retry.jitter` | `"none"`, `"full"`, `"equal"` or `"decorrelated"` | exponential only; default `"none"` ([`Jitter`]) |
//! | `retry.seed` | integer | exponential and grpc only: fixes the jitter's random sequence ([`ExponentialBackoff::with_seed`]) |
//! | `retry.max_pushback` | duration | grpc only: the cap on a server's `grpc-retry-pushback-ms` ([`GrpcBackoff::with_max_pushback`]); default none, the server's wait whole (up to `i32::MAX` ms, about 24.8 days, when the deadline allows) |
//! | `retry.min_attempt` | duration or `"off"` | deadline-aware scheduling: a retry whose wait plus this cannot fit before the deadline is not made ([`RetryPolicy::deadline_aware`](crate::retry::RetryPolicy::deadline_aware)); `"off"` turns off what a preset turned on |
//!
//! Durations are written for people and read by `humantime`: `"250ms"`, `"2s"`,
//! `"1m 30s"`.
//!
//! The presets, as these fields (the numbers of [`presets`](crate::presets)):
//!
//! | preset | `deadline` | `attempt_timeout` | `decoder` | `backoff` | `delay` | `max_delay` | `max_attempts` | other |
//! |---|---|---|---|---|---|---|---|---|
//! | `reactor` | 8s | 3s | statuses | fixed | 10ms | 1s | 3 | `statuses = [503]` |
//! | `feign` | 300s | 60s | feign | feign | 100ms | 1s | 5 | |
//! | `standard` | 30s | 10s | transient | exponential | 2s | 30s | 4 | `multiplier = 2.0`, `jitter = "decorrelated"`, `min_attempt = "500ms"` |
//! | `conservative` | 10s | 5s | transient | exponential | 500ms | 2s | 2 | `multiplier = 2.0`, `jitter = "full"`, `min_attempt = "500ms"` |
//! | `apache` | 60s | 10s | apache | fixed | 0s | 1s | 4 | |
//! | `grpc` | 30s | 30s | grpc | grpc | 100ms | 1s | 5 | `codes = ["UNAVAILABLE"]`, `multiplier = 2.0`, budget 10 / 0.1, `min_attempt = "100ms"` |
//!
//! The `grpc` preset brings gRPC's retry throttling ([`RetryBudget`]: 10
//! tokens, 0.1 back per success), which no field sets; a section built on it
//! keeps it, and every client gets a full bucket of its own.
//!
//! # Resolution
//!
//! A client's policy is resolved in three steps:
//!
//! 1. **The base.** If the client's section names a `preset`, the base is that
//!    preset, and the `[default]` section is **not** applied: the preset
//!    replaces the inherited settings. Otherwise the base is the `[default]`
//!    section, itself resolved as its own fields applied over the preset it
//!    names, or over the `standard` preset when it names none.
//! 2. **The client's fields** apply over the base, field by field, fields
//!    inside `retry` included: a client that writes only `retry.max_attempts`
//!    keeps every other retry setting of its base.
//! 3. **Settings that belong to a kind go with it.** When a section changes
//!    the `decoder`, the base's `statuses` and `retry_after` are dropped (they
//!    belong to the `statuses` decoder); when it changes the `backoff`, the
//!    base's `multiplier`, `jitter`, `seed` and `max_pushback` are dropped
//!    (they belong to the exponential or the grpc backoff) and take their
//!    defaults. `delay`, `max_delay` and
//!    `max_attempts` are shared by the three backoffs and always inherited.
//!
//! A name that has no section in the file gets the policy of the `[default]`
//! section, as in Spring; so does every name when the file has no clients. An
//! empty configuration gives every name the `standard` preset.
//!
//! # Validation
//!
//! [`ClientsConfig::from_toml_str`] validates the `[default]` section and every
//! client eagerly, so a file that loads resolves for every name;
//! [`ClientsConfig::validate`] does the same for a configuration deserialized
//! another way, and [`ClientsConfig::policy`] checks the one name it resolves.
//! A setting that makes no sense is reported with its full path and the bad
//! value, under `default.` for the default section and `clients.<name>.` for a
//! client, as in `clients.weather.retry.multiplier must be >= 1.0, got 0.5`:
//!
//! - a malformed duration, or an unknown `preset`, `decoder`, `backoff` or
//!   `jitter` name;
//! - a zero duration, and an `attempt_timeout` above the `deadline` (one
//!   inherited is named with where it came from: `clients.weather.attempt_timeout
//!   10s, inherited from preset standard, exceeds the deadline 1.5s`). The
//!   layers and [`ResiliencePolicy::new`](crate::ResiliencePolicy::new) take such a pair,
//!   and the deadline wins; in a file it is most often a client that
//!   shortened its deadline and forgot the limit it inherits, so it is
//!   refused there;
//! - with deadline-aware scheduling (`retry.min_attempt`), a `deadline` that
//!   leaves no room for any retry: the shortest first wait the retryer can
//!   draw plus `min_attempt` does not fit before it, so the policy would load
//!   and never retry;
//! - `max_attempts` of 0, a `multiplier` below 1, a `max_delay` below the
//!   `delay`;
//! - a status outside `100..=599`, an empty `statuses`, or the `statuses`
//!   decoder without `statuses`;
//! - a field written for another kind: `statuses` or `retry_after` with a
//!   decoder other than `"statuses"`; `jitter` with a backoff other than
//!   `"exponential"`, `multiplier` or `seed` with one other than
//!   `"exponential"` or `"grpc"`, `max_pushback` with one other than
//!   `"grpc"`. Such fields are errors where they are written; inherited ones
//!   are dropped, as said above;
//! - a `[clients.default]` section: the defaults go in `[default]`.
//!
//! The default section is validated on its own before any client that
//! inherits it, so a bad value inherited from it is reported under
//! `default.`. A problem that appears only in a client's combination (its own
//! `deadline` below an inherited `attempt_timeout`) is reported under the
//! client's path.
//!
//! Unknown keys are errors too. They are found while the text is read, so
//! the error is the format's own, which for TOML shows the line and the key.
//!
//! # Differences from Spring Cloud OpenFeign
//!
//! Spring merges `default` and the named client property by property, and a
//! client cannot opt out of `default`. Here a client's `preset` is that way
//! out: it starts from a known-good policy instead of the defaults.
//!
//! [`ApacheDecoder`]: crate::policy::ApacheDecoder
//! [`ExponentialBackoff`]: crate::policy::ExponentialBackoff
//! [`ExponentialBackoff::default`]: crate::policy::ExponentialBackoff::default
//! [`ExponentialBackoff::with_seed`]: crate::policy::ExponentialBackoff::with_seed
//! [`FeignDecoder`]: crate::policy::FeignDecoder
//! [`FeignRetryer`]: crate::policy::FeignRetryer
//! [`GrpcBackoff`]: crate::policy::GrpcBackoff
//! [`GrpcBackoff::with_max_pushback`]: crate::policy::GrpcBackoff::with_max_pushback
//! [`GrpcDecoder`]: crate::policy::GrpcDecoder
//! [`RetryBudget`]: crate::policy::RetryBudget
//! [`FixedDelay`]: crate::policy::FixedDelay
//! [`FixedDelay::with_max_delay`]: crate::policy::FixedDelay::with_max_delay
//! [`Jitter`]: crate::policy::Jitter
//! [`StatusDecoder`]: crate::policy::StatusDecoder
//! [`StatusDecoder::with_retry_after`]: crate::policy::StatusDecoder::with_retry_after
//! [`TransientDecoder`]: crate::policy::TransientDecoder

mod breaker;
mod error;
mod resolve;
#[cfg(test)]
mod tests;
mod validate;
mod written;

pub use self::error::ConfigError;

#[cfg(feature = "toml")]
use self::error::ErrorKind;

use self::{
    resolve::Fields,
    written::{Preset, Section},
};
use crate::{
    breaker::AnyBreaker,
    policy::{AnyDecoder, AnyRetryer},
    InvalidSetting, ResilienceLayer, ResiliencePolicy,
};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The resilience policies of named clients: a `[default]` section and one
/// section per client.
///
/// See the [module docs](self) for the format, the resolution and an example.
/// [`Default`] is the empty configuration, which gives every name the
/// `standard` preset.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientsConfig {
    #[serde(default)]
    default: Section,
    #[serde(default)]
    clients: BTreeMap<String, Section>,
}

// ===== impl ClientsConfig =====

impl ClientsConfig {
    /// Reads a configuration from TOML and validates the default section and
    /// every client.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the text is not valid TOML or does not fit the
    /// format (an unknown key, a value of the wrong type), or when a setting
    /// makes no sense (see [Validation](self#validation)).
    #[cfg(feature = "toml")]
    #[cfg_attr(docsrs, doc(cfg(feature = "toml")))]
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|err| ConfigError {
            kind: ErrorKind::Toml(err),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the default section, then every client in name order, as
    /// [`policy`](Self::policy) would resolve them.
    ///
    /// [`from_toml_str`](Self::from_toml_str) calls it; a configuration
    /// deserialized another way (from a larger configuration, say) should be
    /// validated once it is loaded.
    ///
    /// # Errors
    ///
    /// The first [`ConfigError`] found (see [Validation](self#validation)).
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.default_fields()?;
        for name in self.names() {
            self.policy(name)?;
        }
        Ok(())
    }

    /// The names of the clients that have a section, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.clients.keys().map(String::as_str)
    }

    /// The policy of the client `name`, resolved as the
    /// [module docs](self#resolution) say. A name without a section gets the
    /// policy of the default section.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a setting the policy is made from makes no sense;
    /// never for a configuration that [`validate`](Self::validate) accepted.
    pub fn policy(
        &self,
        name: &str,
    ) -> Result<ResiliencePolicy<AnyDecoder, AnyRetryer, AnyBreaker>, ConfigError> {
        let Some(section) = self.clients.get(name) else {
            return Ok(self.default_fields()?.build("default")?);
        };
        let path = client_path(name);
        if name == "default" {
            return Err(InvalidSetting::new(
                path,
                "is not allowed: the defaults of every client go in [default]",
            )
            .into());
        }
        let base = match &section.preset {
            Some(preset) => preset.get("preset", &path)?.fields(),
            None => {
                let mut fields = self.default_fields()?;
                fields.origins = fields.origins.seen_from_a_client();
                fields
            }
        };
        Ok(section.apply(base, &path)?.build(&path)?)
    }

    /// The layer for the client `name`: one call builds the deadline, the
    /// retry and the attempt timeout of its [`policy`](Self::policy), with the
    /// semantics of the three layers in the canonical order
    /// ([`ResiliencePolicy::layer`]).
    ///
    /// # Errors
    ///
    /// As [`policy`](Self::policy).
    pub fn layer(
        &self,
        name: &str,
    ) -> Result<ResilienceLayer<AnyDecoder, AnyRetryer, AnyBreaker>, ConfigError> {
        self.policy(name).map(ResiliencePolicy::layer)
    }

    /// The default section resolved over its base, and checked on its own.
    fn default_fields(&self) -> Result<Fields, InvalidSetting> {
        let base = match &self.default.preset {
            Some(preset) => preset.get("preset", "default")?,
            None => Preset::Standard,
        };
        let fields = self.default.apply(base.fields(), "default")?;
        fields.build("default")?;
        Ok(fields)
    }
}

/// `clients.<name>`, with the name quoted as a TOML key when it is not a bare
/// one (`clients."eu.weather"`).
fn client_path(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if bare {
        format!("clients.{name}")
    } else {
        format!("clients.{name:?}")
    }
}
