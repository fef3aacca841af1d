//! Per-client policies from a configuration file, in the manner of Spring
//! Cloud OpenFeign's `feign.client.config.<name>`.
//!
//! A [`ClientsConfig`] holds a `[default]` section, which every client
//! inherits field by field, and one `[clients.<name>]` section per named
//! client. [`ClientsConfig::policy`] resolves a name to a validated
//! [`Resilience`], and [`ClientsConfig::layer`] to the layer that stacks the
//! deadline, the retry and the attempt timeout in the canonical order.
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
//! | `preset` | `"reactor"`, `"feign"`, `"standard"` or `"conservative"` | the base of the section (see [Resolution](#resolution)) |
//! | `deadline` | duration | the budget of the whole call |
//! | `attempt_timeout` | duration | the limit of each attempt; at most the deadline |
//! | `retry.decoder` | `"statuses"`, `"feign"` or `"transient"` | [`StatusDecoder`], [`FeignDecoder`] or [`TransientDecoder`] |
//! | `retry.statuses` | list of codes in `100..=599` | the statuses retried; `statuses` decoder only, and required by it |
//! | `retry.retry_after` | bool | read `Retry-After` on 429 and 503 ([`StatusDecoder::with_retry_after`]); `statuses` decoder only; default `false` |
//! | `retry.backoff` | `"fixed"`, `"exponential"` or `"feign"` | [`FixedDelay`], [`ExponentialBackoff`] or [`FeignRetryer`] |
//! | `retry.delay` | duration | fixed: the delay; exponential: the initial delay; feign: the period |
//! | `retry.max_delay` | duration | exponential: the cap; fixed: the cap on a delay the server asks for ([`FixedDelay::with_max_delay`]); feign: the maximum period |
//! | `retry.max_attempts` | integer ≥ 1 | attempts in all, the first included (fixed: retries = `max_attempts` − 1) |
//! | `retry.multiplier` | number ≥ 1.0 | exponential only; default 1.5 (as [`ExponentialBackoff::default`]) |
//! | `retry.jitter` | `"none"`, `"full"`, `"equal"` or `"decorrelated"` | exponential only; default `"none"` ([`Jitter`]) |
//! | `retry.seed` | integer | exponential only: fixes the jitter's random sequence ([`ExponentialBackoff::with_seed`]) |
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
//!    base's `multiplier`, `jitter` and `seed` are dropped (they belong to the
//!    exponential backoff) and take their defaults. `delay`, `max_delay` and
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
//! - a zero duration, and an `attempt_timeout` above the `deadline`;
//! - `max_attempts` of 0, a `multiplier` below 1, a `max_delay` below the
//!   `delay`;
//! - a status outside `100..=599`, an empty `statuses`, or the `statuses`
//!   decoder without `statuses`;
//! - a field written for another kind: `statuses` or `retry_after` with a
//!   decoder other than `"statuses"`; `multiplier`, `jitter` or `seed` with a
//!   backoff other than `"exponential"`. Such fields are errors where they are
//!   written; inherited ones are dropped, as said above;
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

use crate::{
    presets,
    retry::{
        AnyDecoder, AnyRetryer, ApacheDecoder, ExponentialBackoff, FeignDecoder, FeignRetryer,
        FixedDelay, InvalidStatus, Jitter, RetryPolicy, StatusDecoder, TransientDecoder,
    },
    InvalidSetting, Resilience, ResilienceLayer,
};
use serde::{
    de::{self, Deserializer, Visitor},
    Deserialize,
};
use std::{collections::BTreeMap, error::Error, fmt, marker::PhantomData, time::Duration};

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

/// One section: `[default]` or `[clients.<name>]`, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    preset: Option<Written<Preset>>,
    deadline: Option<Written<Duration>>,
    attempt_timeout: Option<Written<Duration>>,
    #[serde(default)]
    retry: RetrySection,
}

/// The `retry` table of a section, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RetrySection {
    decoder: Option<Written<DecoderKind>>,
    statuses: Option<Vec<u16>>,
    retry_after: Option<bool>,
    backoff: Option<Written<BackoffKind>>,
    delay: Option<Written<Duration>>,
    multiplier: Option<f64>,
    max_delay: Option<Written<Duration>>,
    max_attempts: Option<u32>,
    jitter: Option<Written<Jitter>>,
    seed: Option<u64>,
    min_attempt: Option<Written<MinAttempt>>,
}

/// Every field of a section with a value: a preset, or a section applied over
/// one. It is checked only when built into a policy.
#[derive(Debug, Clone, PartialEq)]
struct Fields {
    deadline: Duration,
    attempt_timeout: Duration,
    decoder: DecoderKind,
    /// `None` where no section gave statuses; required by the `statuses`
    /// decoder.
    statuses: Option<Vec<u16>>,
    retry_after: bool,
    backoff: BackoffKind,
    delay: Duration,
    max_delay: Duration,
    max_attempts: u32,
    multiplier: f64,
    jitter: Jitter,
    seed: Option<u64>,
    /// Deadline-aware scheduling: the least useful attempt time, if on.
    min_attempt: Option<Duration>,
}

/// A preset name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Preset {
    Reactor,
    Feign,
    Standard,
    Conservative,
    Apache,
}

/// A `retry.decoder` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecoderKind {
    Statuses,
    Feign,
    Transient,
    Apache,
}

/// A `retry.backoff` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BackoffKind {
    Fixed,
    Exponential,
    Feign,
}

/// A setting written as a string (a duration or a name), parsed as it is
/// deserialized.
///
/// NOTE: a string that does not parse is kept rather than failing the
/// deserializer, so that validation reports it under its full path
/// (`clients.weather.deadline`) whatever format it came from; a deserializer
/// error knows only its position in the text, and only some formats tell it.
#[derive(Debug, Clone, PartialEq)]
enum Written<T> {
    Parsed(T),
    Malformed {
        text: String,
        detail: Option<String>,
    },
}

/// A value that a setting writes as a string.
trait FromText: Sized {
    /// What the string must be, completing "must be ...".
    const EXPECTED: &'static str;

    /// The value, or what is wrong with the string when there is more to say
    /// than [`EXPECTED`](Self::EXPECTED).
    fn from_text(text: &str) -> Result<Self, Option<String>>;
}

/// The error of a configuration that cannot be used: a text that cannot be
/// read, or a setting that makes no sense.
///
/// Its message names the full path of the setting and the bad value, as in
/// `clients.weather.retry.multiplier must be >= 1.0, got 0.5`; for a text that
/// cannot be read (bad TOML, an unknown key, a value of the wrong type) it is
/// the format's own message, with the line and the key.
#[derive(Debug)]
pub struct ConfigError {
    kind: ErrorKind,
}

#[derive(Debug)]
enum ErrorKind {
    #[cfg(feature = "toml")]
    Toml(toml::de::Error),
    Invalid(InvalidSetting),
}

/// The `multiplier` of an exponential backoff that does not give one.
fn default_multiplier() -> f64 {
    ExponentialBackoff::default().multiplier()
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
    pub fn policy(&self, name: &str) -> Result<Resilience<AnyDecoder, AnyRetryer>, ConfigError> {
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
            None => self.default_fields()?,
        };
        Ok(section.apply(base, &path)?.build(&path)?)
    }

    /// The layer for the client `name`: one call builds the deadline, the
    /// retry and the attempt timeout of its [`policy`](Self::policy), stacked
    /// in the canonical order.
    ///
    /// # Errors
    ///
    /// As [`policy`](Self::policy).
    pub fn layer(
        &self,
        name: &str,
    ) -> Result<ResilienceLayer<AnyDecoder, AnyRetryer>, ConfigError> {
        self.policy(name).map(Resilience::layer)
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

// ===== impl Section =====

impl Section {
    /// `base` with this section's fields over it; `path` is the section's.
    fn apply(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        if let Some(deadline) = &self.deadline {
            base.deadline = deadline.get("deadline", path)?;
        }
        if let Some(timeout) = &self.attempt_timeout {
            base.attempt_timeout = timeout.get("attempt_timeout", path)?;
        }
        self.retry.apply(base, &format!("{path}.retry"))
    }
}

// ===== impl RetrySection =====

impl RetrySection {
    /// `base` with these retry fields over it; `path` ends in `.retry`.
    fn apply(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        if let Some(decoder) = &self.decoder {
            let decoder = decoder.get("decoder", path)?;
            if decoder != base.decoder {
                // NOTE: these belong to the decoder being replaced.
                base.decoder = decoder;
                base.statuses = None;
                base.retry_after = false;
            }
        }
        let statuses_only = |field: &str, base: &Fields| {
            only_for(
                base.decoder == DecoderKind::Statuses,
                field,
                "decoder",
                DecoderKind::Statuses.name(),
                base.decoder.name(),
            )
            .map_err(|err| err.within(path))
        };
        if let Some(statuses) = &self.statuses {
            statuses_only("statuses", &base)?;
            base.statuses = Some(statuses.clone());
        }
        if let Some(retry_after) = self.retry_after {
            statuses_only("retry_after", &base)?;
            base.retry_after = retry_after;
        }

        if let Some(backoff) = &self.backoff {
            let backoff = backoff.get("backoff", path)?;
            if backoff != base.backoff {
                // NOTE: these belong to the backoff being replaced.
                base.backoff = backoff;
                base.multiplier = default_multiplier();
                base.jitter = Jitter::None;
                base.seed = None;
            }
        }
        if let Some(delay) = &self.delay {
            base.delay = delay.get("delay", path)?;
        }
        if let Some(max_delay) = &self.max_delay {
            base.max_delay = max_delay.get("max_delay", path)?;
        }
        if let Some(max_attempts) = self.max_attempts {
            base.max_attempts = max_attempts;
        }
        let exponential_only = |field: &str, base: &Fields| {
            only_for(
                base.backoff == BackoffKind::Exponential,
                field,
                "backoff",
                BackoffKind::Exponential.name(),
                base.backoff.name(),
            )
            .map_err(|err| err.within(path))
        };
        if let Some(multiplier) = self.multiplier {
            exponential_only("multiplier", &base)?;
            base.multiplier = multiplier;
        }
        if let Some(jitter) = &self.jitter {
            exponential_only("jitter", &base)?;
            base.jitter = jitter.get("jitter", path)?;
        }
        if let Some(min_attempt) = &self.min_attempt {
            base.min_attempt = min_attempt.get("min_attempt", path)?.0;
        }
        if let Some(seed) = self.seed {
            exponential_only("seed", &base)?;
            base.seed = Some(seed);
        }
        Ok(base)
    }
}

/// An error unless `applies`: `field` is written for another `kind` than the
/// one in force.
fn only_for(
    applies: bool,
    field: &str,
    kind: &str,
    wanted: &str,
    got: &str,
) -> Result<(), InvalidSetting> {
    if applies {
        return Ok(());
    }
    Err(InvalidSetting::new(
        field,
        format!("applies only to {kind} = {wanted:?}, got {kind} = {got:?}"),
    ))
}

// ===== impl Fields =====

impl Fields {
    /// The fields that build `policy`.
    fn of(policy: &Resilience<AnyDecoder, AnyRetryer>) -> Self {
        let retry = policy.retry();
        let (decoder, statuses, retry_after) = match retry.decoder() {
            AnyDecoder::Statuses(d) => (
                DecoderKind::Statuses,
                Some(d.statuses().map(|s| s.as_u16()).collect()),
                d.reads_retry_after(),
            ),
            AnyDecoder::Feign(_) => (DecoderKind::Feign, None, false),
            AnyDecoder::Apache(_) => (DecoderKind::Apache, None, false),
            // NOTE: `AnyDecoder` is non-exhaustive; the transient decoder is
            // the remaining one.
            _ => (DecoderKind::Transient, None, false),
        };
        let (backoff, delay, max_delay, max_attempts, multiplier, jitter) = match retry.retryer() {
            AnyRetryer::Fixed(r) => (
                BackoffKind::Fixed,
                r.delay(),
                r.max_delay(),
                r.retries().saturating_add(1),
                default_multiplier(),
                Jitter::None,
            ),
            AnyRetryer::Exponential(r) => (
                BackoffKind::Exponential,
                r.initial(),
                r.max_delay(),
                r.max_attempts(),
                r.multiplier(),
                r.jitter(),
            ),
            AnyRetryer::Feign(r) => (
                BackoffKind::Feign,
                r.period(),
                r.max_period(),
                r.configured_max_attempts(),
                default_multiplier(),
                Jitter::None,
            ),
        };
        Fields {
            deadline: policy.deadline(),
            attempt_timeout: policy.attempt_timeout(),
            decoder,
            statuses,
            retry_after,
            backoff,
            delay,
            max_delay,
            max_attempts,
            multiplier,
            jitter,
            seed: None,
            min_attempt: retry.deadline_margin(),
        }
    }

    /// The policy, checked; `path` is the section's, for errors.
    fn build(&self, path: &str) -> Result<Resilience<AnyDecoder, AnyRetryer>, InvalidSetting> {
        let retry_path = format!("{path}.retry");
        let within_retry = |err: InvalidSetting| err.within(&retry_path);
        let decoder = self.decoder().map_err(within_retry)?;
        let backoff = self.backoff().map_err(within_retry)?;
        let mut retry = RetryPolicy::new(decoder, backoff);
        if let Some(min_attempt) = self.min_attempt {
            retry = retry.deadline_aware(min_attempt);
        }
        Resilience::new(self.deadline, self.attempt_timeout, retry).map_err(|err| err.within(path))
    }

    fn decoder(&self) -> Result<AnyDecoder, InvalidSetting> {
        Ok(match self.decoder {
            DecoderKind::Feign => AnyDecoder::Feign(FeignDecoder::new()),
            DecoderKind::Transient => AnyDecoder::Transient(TransientDecoder::new()),
            DecoderKind::Apache => AnyDecoder::Apache(ApacheDecoder::new()),
            DecoderKind::Statuses => {
                let Some(statuses) = self.statuses.as_deref() else {
                    return Err(InvalidSetting::new(
                        "statuses",
                        "must be given with decoder = \"statuses\"",
                    ));
                };
                let decoder = StatusDecoder::new(statuses.iter().copied()).map_err(|err| {
                    let problem = match err {
                        InvalidStatus::OutOfRange(code) => {
                            format!("must be in 100..=599, got {code}")
                        }
                        _ => "must list at least one status, got []".to_owned(),
                    };
                    InvalidSetting::new("statuses", problem)
                })?;
                AnyDecoder::Statuses(if self.retry_after {
                    decoder.with_retry_after()
                } else {
                    decoder
                })
            }
        })
    }

    fn backoff(&self) -> Result<AnyRetryer, InvalidSetting> {
        positive("delay", self.delay)?;
        positive("max_delay", self.max_delay)?;
        if self.max_attempts == 0 {
            return Err(InvalidSetting::new(
                "max_attempts",
                "must be at least 1, got 0",
            ));
        }
        let max_delay_below = |what: &str| {
            InvalidSetting::new(
                "max_delay",
                format!(
                    "must be >= {what} ({:?}), got {:?}",
                    self.delay, self.max_delay
                ),
            )
        };
        Ok(match self.backoff {
            BackoffKind::Fixed => {
                if self.max_delay < self.delay {
                    return Err(max_delay_below("the delay"));
                }
                AnyRetryer::Fixed(
                    FixedDelay::new(self.delay, self.max_attempts.saturating_sub(1))
                        .with_max_delay(self.max_delay),
                )
            }
            BackoffKind::Feign => {
                if self.max_delay < self.delay {
                    return Err(max_delay_below("the period"));
                }
                AnyRetryer::Feign(FeignRetryer::new(
                    self.delay,
                    self.max_delay,
                    self.max_attempts,
                ))
            }
            BackoffKind::Exponential => {
                let backoff = ExponentialBackoff::new(
                    self.delay,
                    self.multiplier,
                    self.max_delay,
                    self.max_attempts,
                )?
                .with_jitter(self.jitter);
                AnyRetryer::Exponential(match self.seed {
                    Some(seed) => backoff.with_seed(seed),
                    None => backoff,
                })
            }
        })
    }
}

/// An error when `value` is zero.
fn positive(field: &str, value: Duration) -> Result<(), InvalidSetting> {
    if value.is_zero() {
        return Err(InvalidSetting::new(
            field,
            "must be greater than zero, got 0s",
        ));
    }
    Ok(())
}

// ===== impl Preset =====

impl Preset {
    /// The preset as the fields of a section: read off the policy that
    /// [`presets`](crate::presets) builds, so that its numbers exist once.
    fn fields(self) -> Fields {
        let policy = match self {
            Preset::Reactor => presets::reactor().erase(),
            Preset::Feign => presets::feign().erase(),
            Preset::Standard => presets::standard().erase(),
            Preset::Conservative => presets::conservative().erase(),
            Preset::Apache => presets::apache().erase(),
        };
        Fields::of(&policy)
    }
}

// ===== impl Written =====

impl<T: Clone> Written<T> {
    /// The parsed value, or the error for setting `field` of section `path`.
    fn get(&self, field: &str, path: &str) -> Result<T, InvalidSetting>
    where
        T: FromText,
    {
        match self {
            Written::Parsed(value) => Ok(value.clone()),
            Written::Malformed { text, detail } => {
                let mut problem = format!("must be {}, got {text:?}", T::EXPECTED);
                if let Some(detail) = detail {
                    problem.push_str(&format!(" ({detail})"));
                }
                Err(InvalidSetting::new(field, problem).within(path))
            }
        }
    }
}

impl<'de, T: FromText> Deserialize<'de> for Written<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(WrittenVisitor(PhantomData))
    }
}

/// Reads a [`Written`] from a string.
struct WrittenVisitor<T>(PhantomData<T>);

impl<T: FromText> Visitor<'_> for WrittenVisitor<T> {
    type Value = Written<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::EXPECTED)
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        Ok(match T::from_text(text) {
            Ok(value) => Written::Parsed(value),
            Err(detail) => Written::Malformed {
                text: text.to_owned(),
                detail,
            },
        })
    }
}

impl FromText for Duration {
    const EXPECTED: &'static str = "a duration such as \"250ms\", \"2s\" or \"1m 30s\"";

    fn from_text(text: &str) -> Result<Self, Option<String>> {
        humantime::parse_duration(text).map_err(|err| Some(err.to_string()))
    }
}

/// `retry.min_attempt`: a duration turns deadline-aware scheduling on,
/// `"off"` turns it off (it is on in the `standard` and `conservative`
/// presets, which a section may sit on).
#[derive(Debug, Clone, Copy, PartialEq)]
struct MinAttempt(Option<Duration>);

impl FromText for MinAttempt {
    const EXPECTED: &'static str = "\"off\" or a duration such as \"500ms\"";

    fn from_text(text: &str) -> Result<Self, Option<String>> {
        if text == "off" {
            return Ok(Self(None));
        }
        Duration::from_text(text).map(|d| Self(Some(d)))
    }
}

/// `FromText` for a closed set of names.
macro_rules! names {
    ($ty:ty, $expected:literal, { $($name:literal => $value:expr),* $(,)? }) => {
        impl FromText for $ty {
            const EXPECTED: &'static str = $expected;

            fn from_text(text: &str) -> Result<Self, Option<String>> {
                match text {
                    $($name => Ok($value),)*
                    _ => Err(None),
                }
            }
        }
    };
}

names!(Preset, "one of \"reactor\", \"feign\", \"standard\", \"conservative\", \"apache\"", {
    "reactor" => Preset::Reactor,
    "feign" => Preset::Feign,
    "standard" => Preset::Standard,
    "conservative" => Preset::Conservative,
    "apache" => Preset::Apache,
});

names!(DecoderKind, "one of \"statuses\", \"feign\", \"transient\", \"apache\"", {
    "statuses" => DecoderKind::Statuses,
    "feign" => DecoderKind::Feign,
    "transient" => DecoderKind::Transient,
    "apache" => DecoderKind::Apache,
});

names!(BackoffKind, "one of \"fixed\", \"exponential\", \"feign\"", {
    "fixed" => BackoffKind::Fixed,
    "exponential" => BackoffKind::Exponential,
    "feign" => BackoffKind::Feign,
});

names!(Jitter, "one of \"none\", \"full\", \"equal\", \"decorrelated\"", {
    "none" => Jitter::None,
    "full" => Jitter::Full,
    "equal" => Jitter::Equal,
    "decorrelated" => Jitter::Decorrelated,
});

// ===== impl DecoderKind =====

impl DecoderKind {
    /// The name as written in a file.
    const fn name(self) -> &'static str {
        match self {
            DecoderKind::Statuses => "statuses",
            DecoderKind::Feign => "feign",
            DecoderKind::Transient => "transient",
            DecoderKind::Apache => "apache",
        }
    }
}

// ===== impl BackoffKind =====

impl BackoffKind {
    /// The name as written in a file.
    const fn name(self) -> &'static str {
        match self {
            BackoffKind::Fixed => "fixed",
            BackoffKind::Exponential => "exponential",
            BackoffKind::Feign => "feign",
        }
    }
}

// ===== impl ConfigError =====

impl ConfigError {
    /// The setting that makes no sense, its [`field`](InvalidSetting::field)
    /// being the full path (`clients.weather.retry.multiplier`); `None` when
    /// the text itself could not be read.
    pub fn setting(&self) -> Option<&InvalidSetting> {
        match &self.kind {
            #[cfg(feature = "toml")]
            ErrorKind::Toml(_) => None,
            ErrorKind::Invalid(setting) => Some(setting),
        }
    }
}

impl From<InvalidSetting> for ConfigError {
    /// A setting that makes no sense, its field being its full path.
    fn from(setting: InvalidSetting) -> Self {
        Self {
            kind: ErrorKind::Invalid(setting),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            #[cfg(feature = "toml")]
            ErrorKind::Toml(err) => f.pad(err.to_string().trim_end()),
            ErrorKind::Invalid(setting) => fmt::Display::fmt(setting, f),
        }
    }
}

// NOTE: the message already carries the TOML error's text, so it is not
// repeated as a source.
impl Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::presets;

    /// The erased preset and the one built from the table are the same policy.
    fn assert_same(
        name: &str,
        built: &Resilience<AnyDecoder, AnyRetryer>,
        preset: &Resilience<AnyDecoder, AnyRetryer>,
    ) {
        assert_eq!(built.deadline(), preset.deadline(), "{name}: deadline");
        assert_eq!(
            built.attempt_timeout(),
            preset.attempt_timeout(),
            "{name}: attempt_timeout"
        );
        match (built.retry().decoder(), preset.retry().decoder()) {
            (AnyDecoder::Statuses(a), AnyDecoder::Statuses(b)) => assert_eq!(a, b, "{name}"),
            (AnyDecoder::Feign(_), AnyDecoder::Feign(_))
            | (AnyDecoder::Transient(_), AnyDecoder::Transient(_)) => {}
            (a, b) => panic!("{name}: decoder {a:?} against {b:?}"),
        }
        match (built.retry().retryer(), preset.retry().retryer()) {
            (AnyRetryer::Fixed(a), AnyRetryer::Fixed(b)) => assert_eq!(a, b, "{name}"),
            (AnyRetryer::Feign(a), AnyRetryer::Feign(b)) => assert_eq!(a, b, "{name}"),
            (AnyRetryer::Exponential(a), AnyRetryer::Exponential(b)) => {
                assert_eq!(a.initial(), b.initial(), "{name}: initial");
                assert_eq!(a.multiplier(), b.multiplier(), "{name}: multiplier");
                assert_eq!(a.max_delay(), b.max_delay(), "{name}: max_delay");
                assert_eq!(a.max_attempts(), b.max_attempts(), "{name}: max_attempts");
                assert_eq!(a.jitter(), b.jitter(), "{name}: jitter");
            }
            (a, b) => panic!("{name}: retryer {a:?} against {b:?}"),
        }
    }

    #[test]
    fn preset_fields_build_the_presets() {
        let cases = [
            (Preset::Reactor, presets::reactor().erase()),
            (Preset::Feign, presets::feign().erase()),
            (Preset::Standard, presets::standard().erase()),
            (Preset::Conservative, presets::conservative().erase()),
        ];
        for (preset, expected) in cases {
            let name = format!("{preset:?}");
            let built = preset.fields().build(&name).unwrap();
            assert_same(&name, &built, &expected);
        }
    }

    #[test]
    fn preset_names_parse() {
        for (text, preset) in [
            ("reactor", Preset::Reactor),
            ("feign", Preset::Feign),
            ("standard", Preset::Standard),
            ("conservative", Preset::Conservative),
        ] {
            assert_eq!(Preset::from_text(text), Ok(preset));
        }
        assert_eq!(Preset::from_text("Reactor"), Err(None));
    }

    #[test]
    fn names_round_trip() {
        for kind in [
            DecoderKind::Statuses,
            DecoderKind::Feign,
            DecoderKind::Transient,
        ] {
            assert_eq!(DecoderKind::from_text(kind.name()), Ok(kind));
        }
        for kind in [
            BackoffKind::Fixed,
            BackoffKind::Exponential,
            BackoffKind::Feign,
        ] {
            assert_eq!(BackoffKind::from_text(kind.name()), Ok(kind));
        }
    }

    #[test]
    fn durations_are_read_for_people() {
        assert_eq!(Duration::from_text("1m 30s"), Ok(Duration::from_secs(90)));
        assert_eq!(Duration::from_text("250ms"), Ok(Duration::from_millis(250)));
        let malformed = Written::<Duration>::Malformed {
            text: "2 parsecs".into(),
            detail: Duration::from_text("2 parsecs").unwrap_err(),
        };
        // NOTE: the detail is humantime's own message.
        let detail = humantime::parse_duration("2 parsecs").unwrap_err();
        assert_eq!(
            malformed
                .get("deadline", "clients.weather")
                .unwrap_err()
                .to_string(),
            format!(
                "clients.weather.deadline must be a duration such as \"250ms\", \"2s\" or \
                 \"1m 30s\", got \"2 parsecs\" ({detail})"
            )
        );
    }

    #[test]
    fn client_paths_quote_names_that_are_not_bare_keys() {
        assert_eq!(client_path("weather-eu_2"), "clients.weather-eu_2");
        assert_eq!(client_path("eu.weather"), "clients.\"eu.weather\"");
        assert_eq!(client_path(""), "clients.\"\"");
    }

    #[test]
    fn empty_configuration_gives_the_standard_preset() {
        let config = ClientsConfig::default();
        config.validate().unwrap();
        assert_eq!(config.names().count(), 0);
        let policy = config.policy("anything").unwrap();
        assert_same("standard", &policy, &presets::standard().erase());
    }
}
