//! Resolution: a section applied over its base, and the fields built into
//! a policy.

use super::{
    breaker::BreakerFields,
    hedge::HedgeFields,
    overload::OverloadFields,
    validate::{
        count_at_most, number_at_least, number_at_most, only_for, positive, MAX_ATTEMPTS,
        MAX_MULTIPLIER, MIN_GRPC_MULTIPLIER,
    },
    written::{
        BackoffKind, BudgetSection, DecoderKind, Preset, Propagate, RetrySection, Section,
        WrittenDecoder,
    },
    ClientPolicy,
};
use crate::{
    hedge::HedgePolicy,
    policy::{
        AnyDecoder, AnyRetryer, ApacheDecoder, ExponentialBackoff, FeignDecoder, FeignRetryer,
        FixedDelay, GrpcBackoff, GrpcDecoder, InvalidStatus, Jitter, RetryBudget, Retryer,
        StatusDecoder, TransientDecoder, GRPC_PREVIOUS_RPC_ATTEMPTS,
    },
    presets,
    propagate::{TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT},
    retry::RetryPolicy,
    InvalidSetting, ResiliencePolicy,
};
use http::HeaderName;
use std::{fmt, sync::Arc, time::Duration};

/// Every field of a section with a value: a preset, or a section applied over
/// one. It is checked only when built into a policy.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fields {
    pub(super) deadline: Duration,
    pub(super) attempt_timeout: Duration,
    /// The header and the format of the budget sent on every attempt, if
    /// any.
    pub(super) propagate: Option<(HeaderName, TimeoutFormat)>,
    /// The retry's decoder.
    pub(super) decoder: DecoderFields,
    pub(super) backoff: BackoffKind,
    pub(super) delay: Duration,
    pub(super) max_delay: Duration,
    pub(super) max_attempts: u32,
    pub(super) multiplier: f64,
    pub(super) jitter: Jitter,
    pub(super) seed: Option<u64>,
    /// The cap on a server's pushback; `grpc` backoff only.
    pub(super) max_pushback: Option<Duration>,
    /// Deadline-aware scheduling: the least useful attempt time, if on.
    pub(super) min_attempt: Option<Duration>,
    /// The retry budget (tokens, ratio); every policy built gets a full
    /// bucket of its own.
    pub(super) budget: Option<(u32, f64)>,
    /// The attempt header a section wrote; `None` for the decoder's own
    /// (`grpc-previous-rpc-attempts` for the `grpc` decoder, none for the
    /// others).
    pub(super) attempt_header: Option<AttemptHeaderField>,
    /// The circuit breaker, on or off.
    pub(super) breaker: BreakerFields,
    /// Hedging instead of retries, on or off.
    pub(super) hedge: HedgeFields,
    /// Overload control, on or off.
    pub(super) overload: OverloadFields,
    /// Where the values that checks combine came from, for their messages.
    pub(super) origins: Origins,
}

/// A client's policy and its hedging, if on.
pub(super) type Built = (ClientPolicy, Option<HedgePolicy<AnyDecoder>>);

/// `retry.attempt_header` or `retry.previous_attempts_header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum AttemptHeaderField {
    /// The number of each attempt, 1 for the first.
    This(HeaderName),
    /// The number of attempts before each one; none on the first.
    Previous(HeaderName),
    /// No attempt header, whatever the decoder sends by default.
    Off,
}

/// A decoder's kind and the settings that belong to it: the retry's, or the
/// breaker's own.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DecoderFields {
    pub(super) kind: DecoderKind,
    /// `None` where no section gave statuses; required by the `statuses`
    /// decoder.
    pub(super) statuses: Option<Vec<u16>>,
    pub(super) retry_after: bool,
    /// The gRPC codes retried; `None` for the `grpc` decoder's default.
    pub(super) codes: Option<Vec<i32>>,
}

/// Where the values of the fields that checks combine came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Origins {
    pub(super) deadline: Origin,
    pub(super) attempt_timeout: Origin,
    pub(super) delay: Origin,
    pub(super) min_attempt: Origin,
    pub(super) break_duration: Origin,
    pub(super) max_break_duration: Origin,
    /// The breaker's ramp, or its lack of one.
    pub(super) ramp: Origin,
    /// The propagated budget's header and format, or their lack.
    pub(super) propagate: Origin,
    /// The retry budget, or its lack.
    pub(super) budget: Origin,
}

/// Where one value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// The section being checked.
    Here,
    /// The `[default]` section.
    Default,
    /// A preset.
    Preset(&'static str),
    /// Neither a section nor a preset: the setting's default (a breaker's,
    /// turned on over a base that has none).
    Builtin,
}

impl Origins {
    /// Every value from one place.
    pub(super) const fn all(origin: Origin) -> Self {
        Self {
            deadline: origin,
            attempt_timeout: origin,
            delay: origin,
            min_attempt: origin,
            break_duration: origin,
            max_break_duration: origin,
            ramp: origin,
            propagate: origin,
            budget: origin,
        }
    }

    /// The origins as a client section that inherits these fields sees them:
    /// what the `[default]` section set is inherited from it.
    pub(super) fn seen_from_a_client(self) -> Self {
        let from = |origin| match origin {
            Origin::Here => Origin::Default,
            other => other,
        };
        Self {
            deadline: from(self.deadline),
            attempt_timeout: from(self.attempt_timeout),
            delay: from(self.delay),
            min_attempt: from(self.min_attempt),
            break_duration: from(self.break_duration),
            max_break_duration: from(self.max_break_duration),
            ramp: from(self.ramp),
            propagate: from(self.propagate),
            budget: from(self.budget),
        }
    }
}

impl Origin {
    /// The place, as the subject of a message ("preset standard has no
    /// ramp"); `builtin` names a setting's default.
    pub(super) fn whose(self, builtin: &str) -> String {
        match self {
            Origin::Here => "the section".to_owned(),
            Origin::Default => "[default]".to_owned(),
            Origin::Preset(name) => format!("preset {name}"),
            Origin::Builtin => builtin.to_owned(),
        }
    }

    /// Where the value came from, to follow the setting's name in a message
    /// (`inherited from preset standard`); nothing for a value set in the
    /// section itself.
    pub(super) fn inherited(self) -> String {
        match self {
            Origin::Builtin => "by default".to_owned(),
            other => other.to_string().trim_start_matches(", ").to_owned(),
        }
    }
}

impl fmt::Display for Origin {
    /// Nothing for a value set in the section itself; otherwise where it was
    /// inherited from, to follow a setting's name in a message
    /// (`, inherited from [default]`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Here => Ok(()),
            Origin::Default => f.write_str(", inherited from [default]"),
            Origin::Preset(name) => write!(f, ", inherited from preset {name}"),
            Origin::Builtin => f.write_str(", the default"),
        }
    }
}

/// The `multiplier` of an exponential backoff that does not give one.
pub(super) fn default_multiplier() -> f64 {
    ExponentialBackoff::default().multiplier()
}

// ===== impl Section =====

impl Section {
    /// `base` with this section's fields over it; `path` is the section's.
    pub(super) fn apply(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        if let Some(deadline) = &self.deadline {
            base.deadline = deadline.get("deadline", path)?;
            base.origins.deadline = Origin::Here;
        }
        if let Some(timeout) = &self.attempt_timeout {
            base.attempt_timeout = timeout.get("attempt_timeout", path)?;
            base.origins.attempt_timeout = Origin::Here;
        }
        self.apply_propagate(&mut base, path)?;
        let base = self.retry.apply(base, &format!("{path}.retry"))?;
        let base = self.breaker.apply(base, &format!("{path}.breaker"))?;
        let base = self.hedge.apply(base, &format!("{path}.hedge"))?;
        self.overload.apply(base, &format!("{path}.overload"))
    }

    /// The propagated budget written, over `base`'s: `propagate` names a
    /// header and a format together (or `"off"`), and `propagate_header` or
    /// `propagate_format` written alone takes the other from the base.
    fn apply_propagate(&self, base: &mut Fields, path: &str) -> Result<(), InvalidSetting> {
        let preset = match &self.propagate {
            Some(written) => Some(written.get("propagate", path)?),
            None => None,
        };
        let header = match &self.propagate_header {
            Some(written) => Some(written.get("propagate_header", path)?),
            None => None,
        };
        let format = match &self.propagate_format {
            Some(written) => Some(written.get("propagate_format", path)?),
            None => None,
        };
        if preset.is_none() && header.is_none() && format.is_none() {
            return Ok(());
        }
        let inherited = match preset {
            Some(Propagate::Off) => {
                let field = if header.is_some() {
                    "propagate_header"
                } else if format.is_some() {
                    "propagate_format"
                } else {
                    base.propagate = None;
                    base.origins.propagate = Origin::Here;
                    return Ok(());
                };
                let problem = "applies only to a propagated budget, got propagate = \"off\"";
                return Err(InvalidSetting::new(field, problem).within(path));
            }
            Some(Propagate::Envoy) => Some((EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis)),
            Some(Propagate::Grpc) => Some((GRPC_TIMEOUT, TimeoutFormat::Grpc)),
            None => base.propagate.clone(),
        };
        let origin = base.origins.propagate;
        let missing = |field: &str, with: &str| {
            let problem = format!(
                "must be given with {with}: {} sends no budget to take it from",
                origin.whose("the default")
            );
            InvalidSetting::new(field, problem).within(path)
        };
        let propagate = match (header, format, inherited) {
            (Some(header), Some(format), _) => (header, format),
            (Some(header), None, Some((_, format))) => (header, format),
            (None, Some(format), Some((header, _))) => (header, format),
            (None, None, Some(both)) => both,
            (Some(_), None, None) => return Err(missing("propagate_format", "propagate_header")),
            (None, _, None) => return Err(missing("propagate_header", "propagate_format")),
        };
        base.propagate = Some(propagate);
        base.origins.propagate = Origin::Here;
        Ok(())
    }
}

// ===== impl RetrySection =====

impl RetrySection {
    /// `base` with these retry fields over it; `path` ends in `.retry`.
    pub(super) fn apply(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        base.decoder.apply(&self.written_decoder(), path)?;
        let mut base = self.apply_backoff(base, path)?;
        if let Some(min_attempt) = &self.min_attempt {
            base.min_attempt = min_attempt.get("min_attempt", path)?.0;
            base.origins.min_attempt = Origin::Here;
        }
        self.budget.apply(&mut base, &format!("{path}.budget"))?;
        self.apply_attempt_header(&mut base, path)?;
        Ok(base)
    }

    /// The attempt header written, over `base`'s: one of the two fields
    /// replaces whichever the base sends.
    fn apply_attempt_header(&self, base: &mut Fields, path: &str) -> Result<(), InvalidSetting> {
        let header = match (&self.attempt_header, &self.previous_attempts_header) {
            (None, None) => return Ok(()),
            (Some(_), Some(_)) => {
                let problem =
                    "must not be given with attempt_header: an attempt sends one or the other";
                return Err(InvalidSetting::new("previous_attempts_header", problem).within(path));
            }
            (Some(name), None) => match name.get("attempt_header", path)?.0 {
                Some(name) => AttemptHeaderField::This(name),
                None => AttemptHeaderField::Off,
            },
            (None, Some(name)) => match name.get("previous_attempts_header", path)?.0 {
                Some(name) => AttemptHeaderField::Previous(name),
                None => AttemptHeaderField::Off,
            },
        };
        base.attempt_header = Some(header);
        Ok(())
    }

    /// `base` with the backoff and its settings over it.
    fn apply_backoff(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        if let Some(backoff) = &self.backoff {
            let backoff = backoff.get("backoff", path)?;
            if backoff != base.backoff {
                // NOTE: these belong to the backoff being replaced.
                base.backoff = backoff;
                base.multiplier = default_multiplier();
                base.jitter = Jitter::None;
                base.seed = None;
                base.max_pushback = None;
            }
        }
        let backoffs = |field: &str, base: &Fields, wanted: &[BackoffKind]| {
            let names: Vec<_> = wanted.iter().map(|kind| kind.name()).collect();
            let applies = wanted.contains(&base.backoff);
            only_for(applies, field, "backoff", &names).map_err(|err| err.within(path))
        };
        const GROWING: &[BackoffKind] = &[BackoffKind::Exponential, BackoffKind::Grpc];
        if let Some(delay) = &self.delay {
            base.delay = delay.get("delay", path)?;
            base.origins.delay = Origin::Here;
        }
        if let Some(max_delay) = &self.max_delay {
            base.max_delay = max_delay.get("max_delay", path)?;
        }
        let within = |err: InvalidSetting| err.within(path);
        if let Some(max_attempts) = self.max_attempts {
            base.max_attempts =
                count_at_most("max_attempts", max_attempts, MAX_ATTEMPTS).map_err(within)?;
        }
        if let Some(multiplier) = self.multiplier {
            backoffs("multiplier", &base, GROWING)?;
            number_at_most("multiplier", multiplier, MAX_MULTIPLIER).map_err(within)?;
            if base.backoff == BackoffKind::Grpc {
                number_at_least("multiplier", multiplier, MIN_GRPC_MULTIPLIER).map_err(within)?;
            }
            base.multiplier = multiplier;
        }
        if let Some(jitter) = &self.jitter {
            backoffs("jitter", &base, &[BackoffKind::Exponential])?;
            base.jitter = jitter.get("jitter", path)?;
        }
        if let Some(seed) = self.seed {
            backoffs("seed", &base, GROWING)?;
            base.seed = Some(seed);
        }
        if let Some(max_pushback) = &self.max_pushback {
            backoffs("max_pushback", &base, &[BackoffKind::Grpc])?;
            base.max_pushback = Some(max_pushback.get("max_pushback", path)?);
        }
        Ok(base)
    }
}

// ===== impl BudgetSection =====

impl BudgetSection {
    /// The budget written, over `base`'s: `max_tokens` or `token_ratio`
    /// written alone takes the other from the base's budget; `enabled =
    /// false` turns it off. `path` ends in `.retry.budget`.
    fn apply(&self, base: &mut Fields, path: &str) -> Result<(), InvalidSetting> {
        if self.enabled == Some(false) {
            let field = match (self.max_tokens, self.token_ratio) {
                (None, None) => {
                    base.budget = None;
                    base.origins.budget = Origin::Here;
                    return Ok(());
                }
                (Some(_), _) => "max_tokens",
                (None, Some(_)) => "token_ratio",
            };
            let problem = "applies only to a budget, got enabled = false";
            return Err(InvalidSetting::new(field, problem).within(path));
        }
        if self.enabled.is_none() && self.max_tokens.is_none() && self.token_ratio.is_none() {
            return Ok(());
        }
        let origin = base.origins.budget;
        let missing = |field: &str, with: &str| {
            let problem = format!(
                "must be given with {with}: {} has no budget to take it from",
                origin.whose("the default")
            );
            InvalidSetting::new(field, problem).within(path)
        };
        let budget = match (self.max_tokens, self.token_ratio, base.budget) {
            (Some(tokens), Some(ratio), _) => (tokens, ratio),
            (Some(tokens), None, Some((_, ratio))) => (tokens, ratio),
            (None, Some(ratio), Some((tokens, _))) => (tokens, ratio),
            (None, None, Some(both)) => both,
            (Some(_), None, None) => return Err(missing("token_ratio", "max_tokens")),
            (None, Some(_), None) => return Err(missing("max_tokens", "token_ratio")),
            (None, None, None) => return Err(missing("max_tokens", "enabled = true")),
        };
        base.budget = Some(budget);
        base.origins.budget = Origin::Here;
        Ok(())
    }
}

// ===== impl DecoderFields =====

impl DecoderFields {
    /// The fields that make `decoder`.
    pub(super) fn of(decoder: &AnyDecoder) -> Self {
        let kind = |kind| Self {
            kind,
            statuses: None,
            retry_after: false,
            codes: None,
        };
        match decoder {
            AnyDecoder::Statuses(d) => Self {
                statuses: Some(d.statuses().map(|s| s.as_u16()).collect()),
                retry_after: d.reads_retry_after(),
                ..kind(DecoderKind::Statuses)
            },
            AnyDecoder::Feign(_) => kind(DecoderKind::Feign),
            AnyDecoder::Apache(_) => kind(DecoderKind::Apache),
            AnyDecoder::Grpc(d) => Self {
                codes: Some(d.retryable_codes().collect()),
                ..kind(DecoderKind::Grpc)
            },
            // NOTE: `AnyDecoder` is non-exhaustive; the transient decoder is
            // the remaining one.
            _ => kind(DecoderKind::Transient),
        }
    }

    /// These fields with `written` over them; `path` is the table's
    /// (`….retry` or `….breaker`).
    pub(super) fn apply(
        &mut self,
        written: &WrittenDecoder<'_>,
        path: &str,
    ) -> Result<(), InvalidSetting> {
        if let Some(kind) = written.decoder {
            let kind = kind.get("decoder", path)?;
            if kind != self.kind {
                // NOTE: these belong to the decoder being replaced.
                *self = Self {
                    kind,
                    statuses: None,
                    retry_after: false,
                    codes: None,
                };
            }
        }
        let only_for_kinds = |field: &str, kind: DecoderKind, wanted: DecoderKind| {
            only_for(kind == wanted, field, "decoder", &[wanted.name()])
                .map_err(|err| err.within(path))
        };
        if let Some(statuses) = written.statuses {
            only_for_kinds("statuses", self.kind, DecoderKind::Statuses)?;
            self.statuses = Some(statuses.clone());
        }
        if let Some(retry_after) = written.retry_after {
            only_for_kinds("retry_after", self.kind, DecoderKind::Statuses)?;
            self.retry_after = retry_after;
        }
        if let Some(codes) = written.codes {
            only_for_kinds("codes", self.kind, DecoderKind::Grpc)?;
            let codes = codes
                .iter()
                .map(|code| code.get("codes", path).map(|code| code.0))
                .collect::<Result<_, _>>()?;
            self.codes = Some(codes);
        }
        Ok(())
    }

    /// The decoder, checked; errors name the field alone.
    pub(super) fn build(&self) -> Result<AnyDecoder, InvalidSetting> {
        Ok(match self.kind {
            DecoderKind::Feign => AnyDecoder::Feign(FeignDecoder::new()),
            DecoderKind::Transient => AnyDecoder::Transient(TransientDecoder::new()),
            DecoderKind::Apache => AnyDecoder::Apache(ApacheDecoder::new()),
            DecoderKind::Grpc => AnyDecoder::Grpc(match &self.codes {
                Some(codes) => GrpcDecoder::new()
                    .with_codes(codes.iter().copied())
                    .map_err(|err| {
                        let setting = InvalidSetting::new("codes", err.problem().to_owned());
                        match err.value() {
                            Some(value) => setting.with_value(value),
                            None => setting,
                        }
                    })?,
                None => GrpcDecoder::default(),
            }),
            DecoderKind::Statuses => AnyDecoder::Statuses(self.statuses()?),
        })
    }

    fn statuses(&self) -> Result<StatusDecoder, InvalidSetting> {
        let Some(statuses) = self.statuses.as_deref() else {
            return Err(InvalidSetting::new(
                "statuses",
                "must be given with decoder = \"statuses\"",
            ));
        };
        let decoder = StatusDecoder::new(statuses.iter().copied()).map_err(|err| match err {
            InvalidStatus::OutOfRange(code) => {
                InvalidSetting::new("statuses", "must be in 100..=599").with_value(code.to_string())
            }
            _ => InvalidSetting::new("statuses", "must list at least one status").with_value("[]"),
        })?;
        Ok(if self.retry_after {
            decoder.with_retry_after()
        } else {
            decoder
        })
    }
}

// ===== impl Fields =====

impl Fields {
    /// The fields that build `policy`.
    pub(super) fn of(policy: &ClientPolicy) -> Self {
        let retry = policy.retry();
        let decoder = DecoderFields::of(retry.decoder());
        let schedule = Schedule::of(retry.retryer());
        Fields {
            deadline: policy.deadline(),
            attempt_timeout: policy.attempt_timeout(),
            propagate: policy.budget_header().cloned(),
            breaker: BreakerFields::of(policy.breaker(), &decoder),
            hedge: HedgeFields::off(),
            overload: OverloadFields::off(),
            decoder,
            backoff: schedule.backoff,
            delay: schedule.delay,
            max_delay: schedule.max_delay,
            max_attempts: schedule.max_attempts,
            multiplier: schedule.multiplier,
            jitter: schedule.jitter,
            seed: None,
            max_pushback: schedule.max_pushback,
            min_attempt: retry.deadline_margin(),
            budget: retry
                .budget()
                .map(|budget| (budget.max_tokens(), budget.token_ratio())),
            // NOTE: the one a preset sends is the `grpc` decoder's own, which
            // `build` adds back; read as a field, a section that changed the
            // decoder would keep sending it.
            attempt_header: None,
            origins: Origins::all(Origin::Here),
        }
    }

    /// The policy, checked with its hedging, with state of its own; `path`
    /// is the section's, for errors.
    pub(super) fn build(&self, path: &str) -> Result<ClientPolicy, InvalidSetting> {
        self.build_with_hedge(path, |policy| policy)
            .map(|(policy, _)| policy)
    }

    /// The policy and its hedging, if on, checked; `share` gives the policy
    /// its client's state (the breaker, overload control and the budget)
    /// before the hedge takes the retry's parts (its decoder, its budget,
    /// the same `Arc`, its attempt header and its deadline-aware margin).
    pub(super) fn build_with_hedge(
        &self,
        path: &str,
        share: impl FnOnce(ClientPolicy) -> ClientPolicy,
    ) -> Result<Built, InvalidSetting> {
        let policy = share(self.build_policy(path)?);
        let hedge = self
            .hedge
            .build(policy.retry().parts(), &format!("{path}.hedge"))?;
        Ok((policy, hedge))
    }

    /// The policy alone, checked.
    fn build_policy(&self, path: &str) -> Result<ClientPolicy, InvalidSetting> {
        let retry_path = format!("{path}.retry");
        let within_retry = |err: InvalidSetting| err.within(&retry_path);
        let decoder = self.decoder.build().map_err(within_retry)?;
        let backoff = self.backoff().map_err(within_retry)?;
        positive("deadline", self.deadline).map_err(|err| err.within(path))?;
        positive("attempt_timeout", self.attempt_timeout).map_err(|err| err.within(path))?;
        self.attempt_within_deadline()
            .map_err(|err| err.within(path))?;
        if !self.hedge.enabled {
            // NOTE: a client that hedges makes no retries.
            self.room_for_a_retry(&backoff)
                .map_err(|err| err.within(path))?;
        }
        let breaker = self.breaker(&decoder, path)?;
        let grpc = matches!(decoder, AnyDecoder::Grpc(_));
        let mut retry = RetryPolicy::new(decoder, backoff);
        if let Some(min_attempt) = self.min_attempt {
            retry = retry.deadline_aware(min_attempt);
        }
        if let Some((tokens, ratio)) = self.budget {
            let budget = RetryBudget::new(tokens, ratio)
                .map_err(|err| err.within(&format!("{retry_path}.budget")))?;
            retry = retry.with_budget(Arc::new(budget));
        }
        retry = match &self.attempt_header {
            Some(AttemptHeaderField::This(name)) => retry.with_attempt_header(name.clone()),
            Some(AttemptHeaderField::Previous(name)) => {
                retry.with_previous_attempts_header(name.clone())
            }
            None if grpc => retry.with_previous_attempts_header(GRPC_PREVIOUS_RPC_ATTEMPTS),
            None | Some(AttemptHeaderField::Off) => retry,
        };
        let mut policy = ResiliencePolicy::new(self.deadline, self.attempt_timeout, retry)
            .map_err(|err| err.within(path))?;
        if let Some((header, format)) = &self.propagate {
            policy = policy.propagating(header.clone(), *format);
        }
        let overload = self.overload.build(&format!("{path}.overload"))?;
        Ok(policy.with_breaker(breaker).with_overload(overload))
    }

    /// An error when the attempt timeout exceeds the deadline. The layers
    /// take such a pair (the deadline wins); a file refuses it.
    fn attempt_within_deadline(&self) -> Result<(), InvalidSetting> {
        let o = self.origins;
        if self.attempt_timeout > self.deadline {
            // NOTE: a value inherited is named with where it came from; one
            // set here needs no more than `ResiliencePolicy::new` says.
            let problem = if o.attempt_timeout == Origin::Here {
                "must not exceed the deadline".to_owned()
            } else {
                format!(
                    "{} exceeds the deadline{}",
                    o.attempt_timeout.inherited(),
                    o.deadline
                )
                .trim_start()
                .to_owned()
            };
            let err = InvalidSetting::new("attempt_timeout", problem);
            return Err(err.with_value(format!("{:?}", self.attempt_timeout)));
        }
        Ok(())
    }

    /// With deadline-aware scheduling, an error when no retry can ever be
    /// made: even after a first attempt answered at once, the shortest first
    /// wait the retryer can draw plus the least useful attempt does not fit
    /// before the deadline, so every retry would stop with "would miss the
    /// deadline". Such a policy loads and then silently never retries.
    fn room_for_a_retry(&self, backoff: &AnyRetryer) -> Result<(), InvalidSetting> {
        let Some(min_attempt) = self.min_attempt else {
            return Ok(());
        };
        if self.max_attempts < 2 {
            return Ok(());
        }
        let first_wait = match backoff {
            AnyRetryer::Exponential(r) => match r.jitter() {
                Jitter::Full => Duration::ZERO,
                Jitter::Equal => r.initial() / 2,
                _ => r.initial(),
            },
            // NOTE: the lowest the jitter can draw, so that whether a file
            // loads does not depend on a random draw.
            AnyRetryer::Grpc(r) => r.shortest_first_wait(),
            other => other.for_request().next_delay(1, None).unwrap_or_default(),
        };
        let needed = first_wait.saturating_add(min_attempt);
        if needed <= self.deadline {
            return Ok(());
        }
        let o = self.origins;
        let problem = format!(
            "{} leaves no room for a retry: the first wait (of retry.delay{}) plus the least \
             useful attempt (retry.min_attempt{}) do not fit before it; raise the deadline, \
             shorten retry.delay, or set retry.min_attempt = \"off\"",
            o.deadline.inherited(),
            o.delay,
            o.min_attempt
        );
        let err = InvalidSetting::new("deadline", problem.trim_start());
        Err(err.with_value(format!("{:?}", self.deadline)))
    }

    pub(super) fn backoff(&self) -> Result<AnyRetryer, InvalidSetting> {
        if self.backoff != BackoffKind::Fixed {
            // NOTE: a fixed delay of zero retries at once, as the `apache`
            // preset does; a growing one must start somewhere.
            positive("delay", self.delay)?;
        }
        positive("max_delay", self.max_delay)?;
        if self.max_attempts == 0 {
            return Err(InvalidSetting::new("max_attempts", "must be at least 1").with_value("0"));
        }
        let max_delay_below = |what: &str| {
            InvalidSetting::new("max_delay", format!("must be at least {what}"))
                .with_value(format!("{:?}", self.max_delay))
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
            BackoffKind::Exponential => AnyRetryer::Exponential(self.exponential()?),
            BackoffKind::Grpc => AnyRetryer::Grpc(self.grpc()?),
        })
    }

    fn exponential(&self) -> Result<ExponentialBackoff, InvalidSetting> {
        let backoff = ExponentialBackoff::new(
            self.delay,
            self.multiplier,
            self.max_delay,
            self.max_attempts,
        )?
        .with_jitter(self.jitter);
        Ok(match self.seed {
            Some(seed) => backoff.with_seed(seed),
            None => backoff,
        })
    }

    fn grpc(&self) -> Result<GrpcBackoff, InvalidSetting> {
        let mut backoff = GrpcBackoff::new(
            self.max_attempts,
            self.delay,
            self.max_delay,
            self.multiplier,
        )?;
        if let Some(max_pushback) = self.max_pushback {
            positive("max_pushback", max_pushback)?;
            backoff = backoff.with_max_pushback(max_pushback);
        }
        Ok(match self.seed {
            Some(seed) => backoff.with_seed(seed),
            None => backoff,
        })
    }
}

/// A retryer's fields.
struct Schedule {
    backoff: BackoffKind,
    delay: Duration,
    max_delay: Duration,
    max_attempts: u32,
    multiplier: f64,
    jitter: Jitter,
    max_pushback: Option<Duration>,
}

impl Schedule {
    fn of(retryer: &AnyRetryer) -> Self {
        let plain = |backoff, delay, max_delay, max_attempts| Self {
            backoff,
            delay,
            max_delay,
            max_attempts,
            multiplier: default_multiplier(),
            jitter: Jitter::None,
            max_pushback: None,
        };
        match retryer {
            AnyRetryer::Fixed(r) => plain(
                BackoffKind::Fixed,
                r.delay(),
                r.max_delay(),
                r.retries().saturating_add(1),
            ),
            AnyRetryer::Feign(r) => plain(
                BackoffKind::Feign,
                r.period(),
                r.max_period(),
                r.configured_max_attempts(),
            ),
            AnyRetryer::Exponential(r) => Self {
                multiplier: r.multiplier(),
                jitter: r.jitter(),
                ..plain(
                    BackoffKind::Exponential,
                    r.initial(),
                    r.max_delay(),
                    r.max_attempts(),
                )
            },
            AnyRetryer::Grpc(r) => Self {
                multiplier: r.multiplier(),
                max_pushback: r.max_pushback(),
                ..plain(
                    BackoffKind::Grpc,
                    r.initial(),
                    r.max_backoff(),
                    r.max_attempts(),
                )
            },
        }
    }
}

// ===== impl Preset =====

impl Preset {
    /// The preset as the fields of a section: read off the policy that
    /// [`presets`](crate::presets) builds, so that its numbers exist once.
    pub(super) fn fields(self) -> Fields {
        let (name, policy) = match self {
            Preset::Reactor => ("reactor", presets::reactor().erase()),
            Preset::Feign => ("feign", presets::feign().erase()),
            Preset::Standard => ("standard", presets::standard().erase()),
            Preset::Conservative => ("conservative", presets::conservative().erase()),
            Preset::Apache => ("apache", presets::apache().erase()),
            Preset::Grpc => ("grpc", presets::grpc().erase()),
        };
        let mut fields = Fields::of(&policy);
        fields.origins = Origins::all(Origin::Preset(name));
        if policy.breaker().policy().is_none() {
            // NOTE: the preset has no breaker: a section that turns one on
            // gets the breaker's defaults, not the preset's numbers.
            fields.origins.break_duration = Origin::Builtin;
            fields.origins.max_break_duration = Origin::Builtin;
            fields.origins.ramp = Origin::Builtin;
        }
        fields
    }
}
