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
//! # The format
//!
//! Every section, `[default]` and each `[clients.<name>]`, has the same
//! fields, all optional:
//!
//! | field | value | meaning |
//! |---|---|---|
//! | `preset` | `"reactor"`, `"feign"`, `"standard"`, `"conservative"`, `"apache"` or `"grpc"` | the base of the section (see [Resolution](#resolution)) |
//! | `deadline` | duration in (0, 24h] | the budget of the whole call |
//! | `attempt_timeout` | duration in (0, 24h] | the limit of each attempt; at most the deadline |
//! | `propagate` | `"envoy"`, `"grpc"` or `"off"` | sends every attempt's budget upstream ([`ResiliencePolicy::propagating`](crate::ResiliencePolicy::propagating)): `"envoy"` is `propagate_header = "x-envoy-expected-rq-timeout-ms"` with `propagate_format = "millis"`, `"grpc"` is `"grpc-timeout"` with `"grpc"`; `"off"` turns off one inherited; default off |
//! | `propagate_header` | header name | the header of the budget; over `propagate`, or alone over the one inherited (see [The propagated budget](#the-propagated-budget)) |
//! | `propagate_format` | `"millis"` or `"grpc"` | how the budget is written ([`TimeoutFormat::Millis`], [`TimeoutFormat::Grpc`]); as `propagate_header` |
//! | `retry.decoder` | `"statuses"`, `"feign"`, `"transient"`, `"apache"` or `"grpc"` | [`StatusDecoder`], [`FeignDecoder`], [`TransientDecoder`], [`ApacheDecoder`] or [`GrpcDecoder`]; `"grpc"` also sends `grpc-previous-rpc-attempts` |
//! | `retry.statuses` | list of codes in `100..=599` | the statuses retried; `statuses` decoder only, and required by it |
//! | `retry.retry_after` | bool | read `Retry-After` on 429 and 503 ([`StatusDecoder::with_retry_after`]); `statuses` decoder only; default `false` |
//! | `retry.codes` | list of gRPC code names (`"UNAVAILABLE"`, any case) | the gRPC codes retried; `grpc` decoder only; default `["UNAVAILABLE"]` |
//! | `retry.backoff` | `"fixed"`, `"exponential"`, `"feign"` or `"grpc"` | [`FixedDelay`], [`ExponentialBackoff`], [`FeignRetryer`] or [`GrpcBackoff`] |
//! | `retry.delay` | duration in (0, 24h] (fixed: [0, 24h]) | fixed: the delay; exponential: the initial delay; feign: the period |
//! | `retry.max_delay` | duration in [`delay`, 24h], above zero | exponential: the cap; fixed: the cap on a delay the server asks for ([`FixedDelay::with_max_delay`]); feign: the maximum period |
//! | `retry.max_attempts` | integer in `1..=100` (grpc: `2..=100`) | attempts in all, the first included (fixed: retries = `max_attempts` − 1) |
//! | `retry.multiplier` | number in [1, 10] (grpc: [0.1, 10]) | exponential and grpc only; default 1.5 (as [`ExponentialBackoff::default`]) |
//! | `retry.jitter` | `"none"`, `"full"`, `"equal"` or `"decorrelated"` | exponential only; default `"none"` ([`Jitter`]) |
//! | `retry.seed` | integer | exponential and grpc only: fixes the jitter's random sequence ([`ExponentialBackoff::with_seed`]) |
//! | `retry.max_pushback` | duration in (0, 24h] | grpc only: the cap on a server's `grpc-retry-pushback-ms` ([`GrpcBackoff::with_max_pushback`]); default none, the server's wait whole (up to `i32::MAX` ms, about 24.8 days, when the deadline allows) |
//! | `retry.budget.max_tokens` | integer in `1..=1000` | gRPC's retry throttling ([`RetryBudget`]): the tokens of the bucket, full at first; with `token_ratio` (one written alone takes the other from the budget inherited); any decoder and preset; default none (10 under the `grpc` preset) |
//! | `retry.budget.token_ratio` | number in `0.001..=1` | the tokens each accepted outcome puts back; with `max_tokens`; default none (0.1 under the `grpc` preset) |
//! | `retry.budget.enabled` | bool | `false` turns off one inherited (with no other `budget` field beside it) |
//! | `retry.attempt_header` | header name or `"off"` | sends the number of each attempt, 1 for the first ([`CallOptions::with_attempt_header`](crate::policy::CallOptions::with_attempt_header)); `"off"` sends none, whatever the base sent; default none |
//! | `retry.previous_attempts_header` | header name or `"off"` | sends the number of attempts before each one, none on the first ([`CallOptions::with_previous_attempts_header`](crate::policy::CallOptions::with_previous_attempts_header)); `"off"` as above; default `grpc-previous-rpc-attempts` with the `grpc` decoder, none with the others |
//! | `retry.min_attempt` | duration in [0, 24h], or `"off"` | deadline-aware scheduling: a retry whose wait plus this cannot fit before the deadline is not made ([`CallOptions::deadline_aware`](crate::policy::CallOptions::deadline_aware)); `"off"` turns off what a preset turned on |
//! | `breaker.enabled` | bool | whether every attempt passes a circuit breaker per authority ([`BreakerPolicy`]; see [The breaker](#the-breaker)); `false` turns off one inherited; a `breaker` table that writes any other field turns it on (a value `"off"` apart); on in the `standard` preset, off in the others |
//! | `breaker.consecutive_failures` | integer in `1..=10000` | a closed circuit trips after this many failures in a row; default 5 |
//! | `breaker.failure_ratio` | number in (0, 1] | a closed circuit also trips when this share of the calls over the window failed; default 0.1 |
//! | `breaker.sampling_window` | duration in [10ms, 24h] | the sliding window of the ratio; default 30s |
//! | `breaker.minimum_throughput` | integer in `1..=1000000` | the fewest calls ended in the window for the ratio to trip; default 100 |
//! | `breaker.break_duration` | duration in (0, 24h] | how long a circuit stays open after a first trip; default 5s |
//! | `breaker.max_break_duration` | duration in [`break_duration`, 24h] | the cap of a break, grown on repeated trips or asked for by the server (`Retry-After`, gRPC pushback); default 60s |
//! | `breaker.break_multiplier` | number in [1, 10] | the growth of the break on each trip that follows before the circuit closes; default 2.0 |
//! | `breaker.break_jitter` | number in [0, 1] | up to this share of the break more, at random; default 0.1 |
//! | `breaker.half_open_probes` | integer in `1..=1000` | calls let through at once after the break; default 1 |
//! | `breaker.half_open_successes` | integer in `1..=1000` | successful probes that close the circuit (more than `half_open_probes`: the probes go that many at a time until this many have succeeded); default 1 |
//! | `breaker.ramp_duration` | duration in (0, 24h], or `"off"` | after the probes, the circuit ramps up for this long before it closes, letting a growing share of the calls through ([`BreakerPolicy::ramp`]); `"off"` turns off one inherited; default off |
//! | `breaker.ramp_steps` | integer in `1..=1000` | the ramp's steps, of equal length: step `k` lets `k` in `ramp_steps` calls through; with `ramp_duration` (see [The breaker](#the-breaker)); default off |
//! | `breaker.slow_call_threshold` | duration in (0, 24h], or `"off"` | a success that took at least this long counts as a failure ([`BreakerPolicy::slow_calls`]); `"off"` turns off one inherited; default off |
//! | `breaker.max_keys` | integer in `1..=1000000` | circuits kept at most; default 1024 |
//! | `breaker.idle_key_timeout` | duration in (0, 24h] | a circuit with no outcome for this long is the first evicted when a new key needs room; default 5m |
//! | `breaker.decoder`, `breaker.statuses`, `breaker.retry_after`, `breaker.codes` | as in `retry` | what counts as a failure (see [`BreakerPolicy`]); by default the retry's decoder |
//! | `breaker.seed` | integer | fixes the random sequence of the breaks' jitter ([`BreakerPolicy::with_seed`]) |
//! | `overload.enabled` | bool | whether every attempt passes overload control per authority ([`OverloadPolicy`]; see [Overload control](#overload-control)); `false` turns off one inherited; an `overload` table that writes any other field turns it on (a value `"off"` apart); off in every preset |
//! | `overload.max_in_flight` | integer in `1..=100000` | a bulkhead: at most this many attempts in flight per key ([`OverloadPolicy::bulkhead`]) |
//! | `overload.adaptive.initial`, `.min`, `.max` | integers in `1..=100000`, `min ≤ initial ≤ max` | an adaptive limit instead ([`AdaptiveLimit::new`]); a table that writes any of its fields makes the limit adaptive; defaults 20, 1, 1000 |
//! | `overload.adaptive.smoothing`, `.tolerance`, `.backoff_ratio` | numbers in (0, 1], [1, 10], (0, 1) | [`AdaptiveLimit::with_smoothing`], [`with_tolerance`](crate::overload::AdaptiveLimit::with_tolerance), [`with_backoff_ratio`](crate::overload::AdaptiveLimit::with_backoff_ratio); defaults 0.2, 1.5, 0.9 |
//! | `overload.queue` | integer in `0..=100000` | attempts that may wait for a slot per key ([`OverloadPolicy::with_queue`]); default 0 |
//! | `overload.max_wait` | duration in (0, 24h], or `"off"` | the longest wait for a slot ([`OverloadPolicy::with_max_wait`]); default the call's deadline |
//! | `overload.min_attempt` | duration in [0, 24h], or `"off"` | an attempt that would get its slot with less than this left before its deadline gives up at once ([`OverloadPolicy::with_min_attempt`]); default none |
//! | `overload.throttle.k`, `.window` | number in [1, 10], duration in [10ms, 24h] | client-side throttling ([`Throttle`]); writing either turns it on; defaults 2 and 2m |
//! | `overload.throttle.enabled` | bool | `true` turns throttling on with the defaults, `false` turns off one inherited |
//! | `overload.max_keys`, `overload.idle_key_timeout` | integer in `1..=1000000`, duration in (0, 24h] | keys kept at most, and when one is idle ([`OverloadPolicy::max_keys`]); defaults 1024, 5m |
//! | `overload.seed` | integer | fixes the random sequence of the throttle's rejections ([`OverloadPolicy::with_seed`]) |
//! | `rate_limit.enabled` | bool | whether every attempt passes a rate limit per authority ([`RateLimitPolicy`]; see [The rate limit](#the-rate-limit)); `false` turns off one inherited; a `rate_limit` table that writes any other field turns it on (a value `"off"` apart); off in every preset |
//! | `rate_limit.calls` | integer in `1..=1000000` | the calls allowed per `per`, per key; required to turn the limit on |
//! | `rate_limit.per` | duration in (0, 24h] | the period of `calls`; default 1s |
//! | `rate_limit.burst` | integer in `1..=1000000` | the calls that may go at once after a quiet spell ([`RateLimitPolicy::with_burst`]); default 1 |
//! | `rate_limit.mode` | `"wait"` or `"turn_away"` | what a call over the limit does ([`RateLimitMode`]); default `"wait"` |
//! | `rate_limit.max_wait` | duration in (0, 24h], or `"off"` | the longest wait for a slot ([`RateLimitPolicy::with_max_wait`]); default the call's deadline |
//! | `rate_limit.min_attempt` | duration in [0, 24h], or `"off"` | a call whose slot would leave less than this before its deadline is turned away at once ([`RateLimitPolicy::with_min_attempt`]); default none |
//! | `rate_limit.server_signals` | list of `"retry_after"`, `"grpc_pushback"`, `"ratelimit"`, `"x_ratelimit"` | what the limit learns from the server ([`Signal`]); default none |
//! | `rate_limit.max_pause` | duration in (0, 24h] | the cap on a pause or pace a server sets ([`RateLimitPolicy::with_max_pause`]); default 60s |
//! | `rate_limit.max_keys`, `rate_limit.idle_key_timeout` | integer in `1..=1000000`, duration in (0, 24h] | keys kept at most, and when one is idle ([`RateLimitPolicy::max_keys`]); defaults 1024, 5m |
//! | `rate_limit.redis_url` | a Redis URL (`"redis://host:6379/"`) | makes the quota the fleet's, kept in that Redis ([`RateLimitPolicy::with_fleet`], feature `redis`; without it, an error) |
//! | `rate_limit.redis_prefix` | string | the prefix of the quota's Redis keys ([`FleetQuota::with_prefix`]); default `http-resilience` |
//! | `rate_limit.lease_wait` | duration in (0, 1s] | the longest wait for a lease before falling back ([`FleetQuota::with_lease_wait`]); default 5ms |
//! | `rate_limit.max_lease` | integer in `1..=1000000` | the most tokens leased at once ([`FleetQuota::with_max_lease`]); default a twentieth of `calls` |
//! | `rate_limit.fallback`, `rate_limit.local_share` | `"local"` or `"fail_closed"`; number in (0, 1] | what the calls do while Redis is away ([`Fallback`]): a local share of the quota (default 0.1), or turned away |
//! | `hedge.enabled` | bool | whether the client hedges instead of retrying ([`HedgePolicy`]; see [Hedging](#hedging)); `false` turns off one inherited; a `hedge` table that writes any other field turns it on (a value `"off"` apart); off in every preset |
//! | `hedge.delay` | duration in [0, 24h] | another copy after this long with no outcome ([`HedgeDelay::fixed`], gRPC's `hedgingDelay`); this or `percentile` is required to hedge |
//! | `hedge.percentile` | number in (0, 100) | instead of `delay`: the delay is this percentile of the latencies observed ([`HedgeDelay::percentile`]) |
//! | `hedge.min_samples` | integer in `0..=100000` | percentile only: the latencies needed before the percentile is used; default 100 |
//! | `hedge.window` | duration in (0, 24h] | percentile only: how long a latency counts; default 10s |
//! | `hedge.max_attempts` | integer in `1..=10` | copies in all, the first included; default 2 |
//! | `hedge.max_in_flight` | integer in `1..=10` | copies in flight at once ([`HedgePolicy::with_max_in_flight`]); default `max_attempts` |
//! | `hedge.on_attempt_timeout` | duration in [0, 24h], or `"off"` | another copy when one is this old, which goes on ([`HedgePolicy::hedge_on_attempt_timeout`]); default off |
//! | `hedge.max_server_delay` | duration in [0, 24h] | the cap on a delay the server asks for before the next copy ([`HedgePolicy::with_max_server_delay`]); default 1s |
//!
//! Durations are written for people and read by `humantime`: `"250ms"`, `"2s"`,
//! `"1m 30s"`.
//!
//! **Ranges.** Every setting takes the range its row gives, and a value
//! outside it is refused (see [Validation](#validation)) with a message that
//! names its path and the bound, the value apart
//! ([`InvalidSetting::value`]): `clients.api.breaker.break_duration must be
//! at most 24h`. No duration is longer than a day, the bound Polly puts on
//! every duration it takes: a circuit open for longer, a wait for a slot or
//! a backoff beyond it, is a mistake in a file (a policy built in code takes
//! any duration its setters take). The counts bound what a client holds:
//! `max_keys` its circuits and slots (memory), `max_in_flight` and `queue`
//! its calls, `max_attempts` the calls one call makes (the `grpc` backoff
//! makes 5 at most, as gRPC's clients do; `hedge.max_attempts` 10, as
//! Polly's hedging).
//!
//! The presets, as these fields (the numbers of [`presets`](crate::presets)):
//!
//! | preset | `deadline` | `attempt_timeout` | `decoder` | `backoff` | `delay` | `max_delay` | `max_attempts` | other |
//! |---|---|---|---|---|---|---|---|---|
//! | `reactor` | 8s | 3s | statuses | fixed | 10ms | 1s | 3 | `statuses = [503]` |
//! | `feign` | 300s | 60s | feign | feign | 100ms | 1s | 5 | |
//! | `standard` | 30s | 10s | transient | exponential | 2s | 30s | 4 | `multiplier = 2.0`, `jitter = "decorrelated"`, `min_attempt = "500ms"`, a breaker with the defaults |
//! | `conservative` | 10s | 5s | transient | exponential | 500ms | 2s | 2 | `multiplier = 2.0`, `jitter = "full"`, `min_attempt = "500ms"` |
//! | `apache` | 60s | 10s | apache | fixed | 0s | 1s | 4 | |
//! | `grpc` | 30s | 30s | grpc | grpc | 100ms | 1s | 5 | `codes = ["UNAVAILABLE"]`, `multiplier = 2.0`, `budget.max_tokens = 10`, `budget.token_ratio = 0.1`, `min_attempt = "100ms"` |
//!
//! The `grpc` preset brings gRPC's retry throttling ([`RetryBudget`]: 10
//! tokens, 0.1 back per success); a section built on it keeps it unless it
//! writes `retry.budget`, and any other section may write one. A client has
//! one bucket, whatever is built for it and however often (see [One client,
//! one state](#one-client-one-state)), and a budget is never shared between
//! clients: two clients with the same settings drain two buckets. A budget
//! in a file throttles one client's retries, not an upstream's; share one
//! `Arc<RetryBudget>` in code
//! ([`CallOptions::with_budget`](crate::policy::CallOptions::with_budget),
//! through [`ResiliencePolicy::map_retry`](crate::ResiliencePolicy::map_retry))
//! for that.
//!
//! # The propagated budget
//!
//! With `propagate`, or `propagate_header` and `propagate_format`, every
//! attempt sends its budget upstream: the time left before the deadline
//! when it starts, capped by the attempt timeout. The two fields are
//! inherited one by one: a section that writes one keeps the other from
//! the base, and one with nothing to inherit writes both (the one missing
//! is an error, under its path, naming where the lack came from: no preset
//! sends a budget). `propagate` sets both at once, and a field written
//! beside it applies over it (`propagate = "grpc"` with `propagate_header =
//! "x-budget"` writes gRPC's format in `x-budget`); `propagate = "off"`
//! turns off an inherited one, with neither field beside it.
//!
//! `retry.attempt_header` and `retry.previous_attempts_header` are the one
//! attempt header of the retry: a section writes one or the other, and the
//! one it writes replaces the one it inherits, the `grpc` decoder's
//! `grpc-previous-rpc-attempts` too. Either written `"off"` sends no attempt
//! header, the `grpc` decoder's included, in that section and the clients
//! that inherit from it.
//!
//! ```
//! use http_resilience::config::ClientsConfig;
//!
//! let config = ClientsConfig::from_toml_str(
//!     r#"
//!     [default]
//!     propagate = "envoy"
//!     retry.attempt_header = "x-attempt"
//!
//!     [clients.search]
//!     preset = "grpc"
//!     propagate = "grpc"
//!     retry.budget.max_tokens = 20 # token_ratio 0.1 from the preset
//!     "#,
//! )?;
//! let weather = config.policy("weather")?; // [default]'s
//! assert_eq!(weather.retry().options().attempt_header().unwrap(), "x-attempt");
//! let search = config.policy("search")?; // the preset's
//! assert_eq!(search.retry().options().attempt_header().unwrap(), "grpc-previous-rpc-attempts");
//!
//! let err = ClientsConfig::from_toml_str("[clients.x]\npropagate_header = \"x budget\"").unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "clients.x.propagate_header must be a header name such as \"x-timeout-ms\"",
//! );
//! assert_eq!(err.setting().unwrap().value(), Some("\"x budget\""));
//! # Ok::<(), http_resilience::BoxError>(())
//! ```
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
//!    inside `retry` and `breaker` included: a client that writes only
//!    `retry.max_attempts` keeps every other retry setting of its base.
//! 3. **Settings that belong to a kind go with it.** When a section changes
//!    the `decoder`, the base's `statuses` and `retry_after` are dropped (they
//!    belong to the `statuses` decoder); when it changes the `backoff`, the
//!    base's `multiplier`, `jitter`, `seed` and `max_pushback` are dropped
//!    (they belong to the exponential or the grpc backoff) and take their
//!    defaults. `delay`, `max_delay` and
//!    `max_attempts` are shared by the three backoffs and always inherited.
//!    The breaker's own `decoder` takes its settings along in the same way.
//!
//! A name that has no section in the file gets the policy of the `[default]`
//! section, as in Spring; so does every name when the file has no clients. An
//! empty configuration gives every name the `standard` preset.
//!
//! # The breaker
//!
//! The `breaker` table sets the circuit breaker that every attempt passes,
//! between the retry and the attempt timeout
//! ([`ResiliencePolicy::with_guard`](crate::ResiliencePolicy::with_guard)):
//! one circuit per authority, which fails calls at once with
//! [`FailureKind::CircuitOpen`](crate::FailureKind::CircuitOpen) while it is
//! open.
//!
//! - **Whether there is one.** The `standard` preset has one, with the
//!   defaults of the table above ([`BreakerPolicy::default`]: .NET's standard
//!   handler, and five failures in a row); the other presets have none. A
//!   section inherits its base's breaker, or its base's lack of one; a
//!   `breaker` table that writes any field but `enabled` turns it on (the
//!   fields it does not write take their defaults when the base had none),
//!   unless all it writes is `"off"`;
//!   `enabled = false` turns it off. `[default]` with `enabled = false`
//!   keeps its other fields (they are still checked), and the clients under
//!   it that turn the breaker on get them; in a client's section, which
//!   nothing inherits, a field beside `enabled = false` is refused
//!   (`clients.x.breaker.break_duration applies only to a breaker, got
//!   enabled = false`), as in the `overload` and `hedge` tables.
//! - **What counts as a failure.** The retry's decoder, as the client
//!   resolves it: a client that changes `retry.statuses` changes what its
//!   breaker counts. A `breaker` table that writes `decoder`, `statuses`,
//!   `retry_after` or `codes` gives the breaker a decoder of its own from then
//!   on: it starts from that section's retry decoder, the fields written apply
//!   over it as they do in `retry`, and the clients under the section inherit
//!   it field by field.
//! - **The ramp and slow calls.** Both are off by default, in the
//!   `standard` preset too. `ramp_duration` and `ramp_steps` make one ramp:
//!   a section that writes one of them keeps the other from the ramp it
//!   inherits, and one with no ramp to inherit writes both (the one
//!   missing is an error, under its path). `ramp_duration = "off"` turns
//!   off an inherited ramp (with no `ramp_steps` beside it), and
//!   `slow_call_threshold = "off"` an inherited slow-call rule, as
//!   `enabled = false` turns off the whole breaker.
//! - **The circuits.** A client has one breaker, whose circuits every
//!   policy, layer and hedge built for it share (see [One client, one
//!   state](#one-client-one-state)); [`Resilience::guard`](crate::Resilience::guard)
//!   on the service a layer makes reads them, as the policy's
//!   [`BreakerPolicy::states`](crate::breaker::BreakerPolicy::states) does.
//!
//! ```
//! use http_resilience::{config::ClientsConfig, key::UpstreamKey};
//! use std::time::Duration;
//!
//! let config = ClientsConfig::from_toml_str(
//!     r#"
//!     [default.breaker]
//!     consecutive_failures = 3
//!
//!     [clients.search.breaker]
//!     break_duration = "10s"
//!     slow_call_threshold = "2s"
//!
//!     [clients.batch.breaker]
//!     enabled = false
//!     "#,
//! )?;
//! let search = config.policy("search")?;
//! let settings = search.guard().breaker.as_ref().expect("a breaker").settings();
//! assert_eq!(settings.consecutive_failures, 3); // from [default]
//! assert_eq!(settings.break_duration, Duration::from_secs(10)); // its own
//! assert_eq!(settings.failure_ratio, 0.1); // from the standard preset
//! assert_eq!(settings.slow_call_threshold, Some(Duration::from_secs(2)));
//! assert_eq!(settings.ramp, None); // off by default
//! assert!(config.policy("batch")?.guard().breaker.is_none());
//!
//! // A key of its own is code: the file's breaker takes one and goes back.
//! let mut guards = search.guard().clone();
//! guards.breaker = guards.breaker.map(|b| b.with_key(|uri, _| UpstreamKey::custom(uri.path())));
//! let search = search.with_guard(guards);
//! assert_eq!(search.guard().breaker.as_ref().unwrap().settings(), settings);
//! # Ok::<(), http_resilience::BoxError>(())
//! ```
//!
//! The key function and the listener of a [`BreakerPolicy`] are code, not
//! settings: the breaker's policy from [`ClientsConfig::policy`] takes them
//! ([`BreakerPolicy::with_key`], [`BreakerPolicy::with_listener`]) and goes
//! back in the client's [`ClientGuards`], given with
//! [`with_guard`](crate::ResiliencePolicy::with_guard), as above.
//!
//! # Overload control
//!
//! The `overload` table sets the overload control every attempt passes,
//! between the retry and the breaker
//! ([`ResiliencePolicy::with_guard`](crate::ResiliencePolicy::with_guard),
//! see [`overload`](crate::overload)): a limit of attempts in flight per
//! authority, fixed (`max_in_flight`) or adaptive (an `adaptive` table, not
//! both), a queue, and throttling (a `throttle` table); one of the three is
//! needed. It is inherited field by field, as `breaker` is, and off in every
//! preset. A client has one overload control, whose slots every policy,
//! layer and hedge built for it share (see [One client, one
//! state](#one-client-one-state)).
//!
//! ```
//! use http_resilience::{config::ClientsConfig, overload::Limit};
//!
//! let config = ClientsConfig::from_toml_str(
//!     r#"
//!     [default.overload]
//!     max_in_flight = 64
//!     queue = 64
//!
//!     [clients.search.overload.adaptive]
//!     max = 200
//!
//!     [clients.batch.overload.throttle]
//!     k = 1.5
//!     "#,
//! )?;
//! let search = config.policy("search")?;
//! let settings = search.guard().overload.as_ref().expect("overload control").settings();
//! assert!(matches!(settings.limit, Limit::Adaptive(limit) if limit.max() == 200));
//! assert_eq!(settings.max_queued, 64); // from [default]
//! let batch = config.policy("batch")?.guard().overload.as_ref().unwrap().settings();
//! assert_eq!(batch.limit, Limit::Fixed(64));
//! assert_eq!(batch.throttle.map(|t| t.k()), Some(1.5));
//! # Ok::<(), http_resilience::BoxError>(())
//! ```
//!
//! # Hedging
//!
//! A `hedge` table makes the client hedge instead of retrying, as a gRPC
//! method has a retry policy or a hedging policy: while no copy of a call
//! has answered, another is sent after `delay` (see [`hedge`](crate::hedge)).
//! The hedge judges with the client's retry decoder (its `Retry` verdicts
//! are gRPC's non-fatal codes), draws on its `retry.budget`, sends its
//! `retry.attempt_header` and follows its `retry.min_attempt`; the `retry`
//! table's backoff and `max_attempts` do not apply. The table is inherited
//! field by field, as `breaker` is.
//!
//! [`ClientsConfig::hedge`] gives the [`HedgePolicy`], and the client's
//! [`policy`](ClientsConfig::policy) the rest of its stack: the deadline
//! outside, overload control, the breaker and the attempt timeout for each
//! copy inside.
//! [`ClientsConfig::layer`] refuses a client that hedges, since the
//! combined service retries.
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     breaker::CircuitBreakerLayer, config::ClientsConfig, hedge::HedgeLayer,
//!     overload::OverloadLayer, AttemptTimeoutLayer, Attempts, DeadlineLayer,
//! };
//! use std::{convert::Infallible, sync::{atomic::{AtomicU32, Ordering}, Arc}, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let config = ClientsConfig::from_toml_str(
//!     r#"
//!     [clients.search]
//!     deadline = "2s"
//!     attempt_timeout = "1s"
//!     hedge.delay = "50ms"
//!     hedge.max_attempts = 3
//!     "#,
//! )?;
//! let policy = config.policy("search")?;
//! let hedge = config.hedge("search")?.expect("search hedges");
//! assert!(config.layer("search").is_err());
//!
//! let calls = Arc::new(AtomicU32::new(0));
//! let svc = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(policy.deadline()))
//!     .layer(HedgeLayer::new(hedge))
//!     .option_layer(policy.guard().overload.clone().map(OverloadLayer::new))
//!     .option_layer(policy.guard().breaker.clone().map(CircuitBreakerLayer::new))
//!     .layer(AttemptTimeoutLayer::new(policy.attempt_timeout()))
//!     .service_fn(move |_: Request<String>| {
//!         // A stand-in for the network: the first copy is slow.
//!         let slow = calls.fetch_add(1, Ordering::SeqCst) == 0;
//!         async move {
//!             if slow {
//!                 tokio::time::sleep(Duration::from_millis(500)).await;
//!             }
//!             Ok::<_, Infallible>(Response::new(String::new()))
//!         }
//!     });
//! let response = svc.oneshot(Request::new(String::new())).await?;
//! assert_eq!(response.extensions().get::<Attempts>().map(Attempts::winner), Some(2));
//! # Ok(())
//! # }
//! ```
//!
//! # Validation
//!
//! [`ClientsConfig::from_toml_str`] validates the `[default]` section and every
//! client eagerly, so a file that loads resolves for every name;
//! [`ClientsConfig::validate`] does the same for a configuration deserialized
//! another way, and [`ClientsConfig::policy`] checks the one name it resolves.
//! A setting that makes no sense is reported with its full path, under
//! `default.` for the default section and `clients.<name>.` for a client, in
//! a message that is the same for the same mistake whatever the value, as in
//! `clients.weather.retry.multiplier must be at least 1.0`; the value refused
//! is [`InvalidSetting::value`] (`0.5`), through [`ConfigError::setting`]:
//!
//! - a malformed duration, or an unknown `preset`, `decoder`, `backoff` or
//!   `jitter` name;
//! - a value outside its range (see [Ranges](#the-format)): a duration over
//!   a day, a count or a factor above its bound (`clients.x.breaker.max_keys
//!   must be at most 1,000,000`); a number too large to read is a value out
//!   of range, not a malformed one;
//! - a zero duration, and an `attempt_timeout` above the `deadline` (one
//!   inherited is named with where it came from: `clients.weather.attempt_timeout
//!   inherited from preset standard exceeds the deadline`). The
//!   layers and [`ResiliencePolicy::new`](crate::ResiliencePolicy::new) take such a pair,
//!   and the deadline wins; in a file it is most often a client that
//!   shortened its deadline and forgot the limit it inherits, so it is
//!   refused there;
//! - with deadline-aware scheduling (`retry.min_attempt`), a `deadline` that
//!   leaves no room for any retry: the shortest first wait the retryer can
//!   draw plus `min_attempt` does not fit before it, so the policy would load
//!   and never retry (a client that hedges is not checked for it: it makes
//!   no retries);
//! - `max_attempts` of 0, a `multiplier` below 1, a `max_delay` below the
//!   `delay`;
//! - a status outside `100..=599`, an empty `statuses`, or the `statuses`
//!   decoder without `statuses`;
//! - a malformed header name (`propagate_header`, `retry.attempt_header`,
//!   `retry.previous_attempts_header`), an unknown `propagate` or
//!   `propagate_format` name, half a propagated budget with none to take
//!   the other half from (`clients.x.propagate_format must be given with
//!   propagate_header: preset standard sends no budget to take it from`),
//!   and a field beside `propagate = "off"`;
//! - in `retry.budget`, what [`RetryBudget::new`] refuses (a `max_tokens`
//!   outside `1..=1000`, a `token_ratio` outside `0.001..=1`), half a budget
//!   with none to take the other half from (named with where the lack came
//!   from, as for the ramp below), and a field beside `enabled = false`;
//! - `retry.attempt_header` and `retry.previous_attempts_header` in one
//!   section;
//! - in `breaker`, what the [`BreakerPolicy`] setters refuse, in their
//!   words: a `failure_ratio` outside (0, 1], a `sampling_window` under 10ms,
//!   a count of 0 (`ramp_steps` too), a zero `break_duration`,
//!   `idle_key_timeout`, `ramp_duration` or `slow_call_threshold`, a
//!   `break_multiplier` below 1, a `break_jitter` outside [0, 1], and a
//!   `max_break_duration` below the `break_duration` (one inherited is named
//!   with where it came from: `clients.search.breaker.max_break_duration
//!   inherited from preset standard is below the break_duration`);
//! - in `breaker`, half a ramp: a `ramp_duration` or a `ramp_steps` with no
//!   ramp to take the other from, named with where the lack of one came
//!   from (`clients.search.breaker.ramp_steps must be given with
//!   ramp_duration: preset standard has no ramp to take it from`), and a
//!   `ramp_steps` beside `ramp_duration = "off"`;
//! - in `overload`, what the [`OverloadPolicy`], [`AdaptiveLimit`] and
//!   [`Throttle`] setters refuse, under their paths
//!   (`clients.x.overload.adaptive.max must be at least min`),
//!   `max_in_flight` beside an `adaptive` table, a table turned on with no
//!   limit and no throttling, and `k` or `window` beside `throttle.enabled =
//!   false`;
//! - in `hedge`, what the [`HedgePolicy`] setters refuse (a `max_attempts`
//!   or `max_in_flight` of 0, a `percentile` outside (0, 100), a zero
//!   `window`), `delay` and `percentile` in one section, `min_samples` or
//!   `window` with a fixed delay, and a hedge turned on with no delay
//!   written or inherited;
//! - a field written for another kind: `statuses` or `retry_after` with a
//!   decoder other than `"statuses"` (in `retry`, or in `breaker` against the
//!   decoder it judges with); `jitter` with a backoff other than
//!   `"exponential"`, `multiplier` or `seed` with one other than
//!   `"exponential"` or `"grpc"`, `max_pushback` with one other than
//!   `"grpc"`. Such fields are errors where they are written; inherited ones
//!   are dropped, as said above;
//! - in a client's `breaker`, `overload`, `rate_limit` or `hedge` table, a field beside
//!   `enabled = false` (in `[default]` such fields are kept for the clients
//!   that turn the table on);
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
//! # One client, one state
//!
//! What a client's policy remembers (the breaker's circuits, overload
//! control's slots and the tokens of the retry budget) exists once per
//! client name: every [`ClientsConfig::policy`], [`ClientsConfig::layer`]
//! and [`ClientsConfig::hedge`] for that name, however many times each is
//! called, and every clone of the configuration, share it. A breaker
//! tripped through a layer is open in the policy's
//! [`states`](crate::breaker::BreakerPolicy::states), and the calls in
//! flight through one stack count against the limit of another built for
//! the same client. The state is made the first time a name is built (by
//! [`ClientsConfig::validate`], for the names with a section); every name
//! without a section gets the `[default]` section's policy and shares one
//! state, so the configuration holds one state per section, whatever names
//! it is asked for.
//!
//! A configuration read twice from the same text is two configurations with
//! two states; so are the parts a policy's own setters remake (a
//! [`BreakerPolicy::with_key`] breaker has circuits of its own).
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{breaker::CircuitState, config::ClientsConfig};
//! use std::convert::Infallible;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let config = ClientsConfig::from_toml_str(
//!     "[clients.api.breaker]\nconsecutive_failures = 1\n[clients.api.retry]\nmax_attempts = 1",
//! )?;
//! let svc = ServiceBuilder::new()
//!     .layer(config.layer("api")?)
//!     .service_fn(|_: Request<String>| async {
//!         Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
//!     });
//! let request = Request::builder().uri("http://api.test/").body(String::new())?;
//! svc.oneshot(request).await?;
//! // The policy built apart sees the circuit the layer tripped.
//! let policy = config.policy("api")?;
//! let states = policy.guard().breaker.as_ref().expect("a breaker").states();
//! assert!(matches!(states[..], [(_, CircuitState::Open { .. })]));
//! # Ok(())
//! # }
//! ```
//!
//! # The rate limit
//!
//! The `rate_limit` table sets the rate limit every attempt passes, first of
//! the guards, before overload control and the breaker (see
//! [`rate_limit`](crate::rate_limit)): `calls` per `per`, a `burst`, a wait
//! bounded by the deadline or a refusal at once, and what is learned from
//! the server. It is inherited field by field, as `overload` is, and off in
//! every preset; with a `redis_url` (feature `redis`) the quota is the
//! fleet's. A client has one rate limit, whose buckets every policy, layer
//! and hedge built for it share.
//!
//! ```
//! use http_resilience::{config::ClientsConfig, rate_limit::RateLimitMode};
//! use std::time::Duration;
//!
//! let config = ClientsConfig::from_toml_str(
//!     r#"
//!     [default.rate_limit]
//!     calls = 100
//!     burst = 10
//!     server_signals = ["retry_after", "ratelimit", "x_ratelimit"]
//!
//!     [clients.batch.rate_limit]
//!     mode = "turn_away"
//!     "#,
//! )?;
//! let batch = config.policy("batch")?;
//! let settings = batch.guard().rate_limit.as_ref().expect("a rate limit").settings();
//! assert_eq!((settings.calls, settings.per, settings.burst), (100, Duration::from_secs(1), 10));
//! assert_eq!(settings.mode, RateLimitMode::TurnAway);
//! # Ok::<(), http_resilience::BoxError>(())
//! ```
//!
//! # Differences from Spring Cloud OpenFeign
//!
//! Spring merges `default` and the named client property by property, and a
//! client cannot opt out of `default`. Here a client's `preset` is that way
//! out: it starts from a known-good policy instead of the defaults.
//!
//! [`ApacheDecoder`]: crate::policy::ApacheDecoder
//! [`ResiliencePolicy`]: crate::ResiliencePolicy
//! [`InvalidSetting::value`]: crate::InvalidSetting::value
//! [`BreakerPolicy`]: crate::breaker::BreakerPolicy
//! [`BreakerPolicy::default`]: crate::breaker::BreakerPolicy::default
//! [`BreakerPolicy::ramp`]: crate::breaker::BreakerPolicy::ramp
//! [`BreakerPolicy::slow_calls`]: crate::breaker::BreakerPolicy::slow_calls
//! [`BreakerPolicy::with_key`]: crate::breaker::BreakerPolicy::with_key
//! [`BreakerPolicy::with_listener`]: crate::breaker::BreakerPolicy::with_listener
//! [`BreakerPolicy::with_seed`]: crate::breaker::BreakerPolicy::with_seed
//! [`ExponentialBackoff`]: crate::policy::ExponentialBackoff
//! [`ExponentialBackoff::default`]: crate::policy::ExponentialBackoff::default
//! [`ExponentialBackoff::with_seed`]: crate::policy::ExponentialBackoff::with_seed
//! [`FeignDecoder`]: crate::policy::FeignDecoder
//! [`FeignRetryer`]: crate::policy::FeignRetryer
//! [`GrpcBackoff`]: crate::policy::GrpcBackoff
//! [`GrpcBackoff::with_max_pushback`]: crate::policy::GrpcBackoff::with_max_pushback
//! [`GrpcDecoder`]: crate::policy::GrpcDecoder
//! [`RetryBudget`]: crate::policy::RetryBudget
//! [`RetryBudget::new`]: crate::policy::RetryBudget::new
//! [`TimeoutFormat::Grpc`]: crate::propagate::TimeoutFormat::Grpc
//! [`TimeoutFormat::Millis`]: crate::propagate::TimeoutFormat::Millis
//! [`FixedDelay`]: crate::policy::FixedDelay
//! [`HedgePolicy`]: crate::hedge::HedgePolicy
//! [`RateLimitPolicy`]: crate::rate_limit::RateLimitPolicy
//! [`RateLimitPolicy::with_burst`]: crate::rate_limit::RateLimitPolicy::with_burst
//! [`RateLimitPolicy::with_max_wait`]: crate::rate_limit::RateLimitPolicy::with_max_wait
//! [`RateLimitPolicy::with_min_attempt`]: crate::rate_limit::RateLimitPolicy::with_min_attempt
//! [`RateLimitPolicy::with_max_pause`]: crate::rate_limit::RateLimitPolicy::with_max_pause
//! [`RateLimitPolicy::max_keys`]: crate::rate_limit::RateLimitPolicy::max_keys
//! [`RateLimitPolicy::with_fleet`]: crate::rate_limit::RateLimitPolicy::with_fleet
//! [`RateLimitMode`]: crate::rate_limit::RateLimitMode
//! [`Signal`]: crate::rate_limit::Signal
//! [`FleetQuota::with_prefix`]: crate::rate_limit::fleet::FleetQuota::with_prefix
//! [`FleetQuota::with_lease_wait`]: crate::rate_limit::fleet::FleetQuota::with_lease_wait
//! [`FleetQuota::with_max_lease`]: crate::rate_limit::fleet::FleetQuota::with_max_lease
//! [`Fallback`]: crate::rate_limit::fleet::Fallback
//! [`OverloadPolicy`]: crate::overload::OverloadPolicy
//! [`OverloadPolicy::bulkhead`]: crate::overload::OverloadPolicy::bulkhead
//! [`OverloadPolicy::with_queue`]: crate::overload::OverloadPolicy::with_queue
//! [`OverloadPolicy::with_max_wait`]: crate::overload::OverloadPolicy::with_max_wait
//! [`OverloadPolicy::with_min_attempt`]: crate::overload::OverloadPolicy::with_min_attempt
//! [`OverloadPolicy::max_keys`]: crate::overload::OverloadPolicy::max_keys
//! [`OverloadPolicy::with_seed`]: crate::overload::OverloadPolicy::with_seed
//! [`AdaptiveLimit`]: crate::overload::AdaptiveLimit
//! [`AdaptiveLimit::new`]: crate::overload::AdaptiveLimit::new
//! [`AdaptiveLimit::with_smoothing`]: crate::overload::AdaptiveLimit::with_smoothing
//! [`Throttle`]: crate::overload::Throttle
//! [`HedgeDelay::fixed`]: crate::hedge::HedgeDelay::fixed
//! [`HedgeDelay::percentile`]: crate::hedge::HedgeDelay::percentile
//! [`HedgePolicy::hedge_on_attempt_timeout`]: crate::hedge::HedgePolicy::hedge_on_attempt_timeout
//! [`HedgePolicy::with_max_in_flight`]: crate::hedge::HedgePolicy::with_max_in_flight
//! [`HedgePolicy::with_max_server_delay`]: crate::hedge::HedgePolicy::with_max_server_delay
//! [`FixedDelay::with_max_delay`]: crate::policy::FixedDelay::with_max_delay
//! [`Jitter`]: crate::policy::Jitter
//! [`StatusDecoder`]: crate::policy::StatusDecoder
//! [`StatusDecoder::with_retry_after`]: crate::policy::StatusDecoder::with_retry_after
//! [`TransientDecoder`]: crate::policy::TransientDecoder

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
