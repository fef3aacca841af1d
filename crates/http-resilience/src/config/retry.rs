//! The `retry` table: the backoff, the budget and the attempt header,
//! applied over their base field by field, and the retryer built from them.

use super::{
    fields::{AttemptHeaderField, Fields},
    origin::Origin,
    validate::{
        count_at_most, number_at_least, number_at_most, only_for, positive, MAX_ATTEMPTS,
        MAX_MULTIPLIER, MIN_GRPC_MULTIPLIER,
    },
    written::{BackoffKind, BudgetSection, RetrySection},
};
use crate::{
    policy::{AnyRetryer, ExponentialBackoff, FeignRetryer, FixedDelay, GrpcBackoff, Jitter},
    InvalidSetting,
};
use std::time::Duration;

/// The `multiplier` of an exponential backoff that does not give one.
pub(super) fn default_multiplier() -> f64 {
    ExponentialBackoff::default().multiplier()
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

    /// `base` with the kind of backoff written here, if one is: another kind
    /// starts from that kind's defaults.
    fn apply_backoff_kind(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
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
        Ok(base)
    }

    /// `base` with the backoff and its settings over it.
    fn apply_backoff(&self, base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        let mut base = self.apply_backoff_kind(base, path)?;
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

// ===== impl Fields =====

impl Fields {
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
                // NOTE: Feign's retryer counts whole milliseconds: a shorter
                // period would be a wait of zero.
                if self.delay < Duration::from_millis(1) {
                    let problem = "must be at least 1ms for the feign backoff";
                    let err = InvalidSetting::new("delay", problem);
                    return Err(err.with_value(format!("{:?}", self.delay)));
                }
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
pub(super) struct Schedule {
    pub(super) backoff: BackoffKind,
    pub(super) delay: Duration,
    pub(super) max_delay: Duration,
    pub(super) max_attempts: u32,
    pub(super) multiplier: f64,
    pub(super) jitter: Jitter,
    pub(super) max_pushback: Option<Duration>,
}

// ===== impl Schedule =====

impl Schedule {
    /// The fields that make `retryer`.
    pub(super) fn of(retryer: &AnyRetryer) -> Self {
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
