//! Resolution: a section applied over its base, and the fields built into
//! a policy.

use super::{
    decoder::DecoderFields,
    fields::{AttemptHeaderField, BreakerFields, Fields, HedgeFields, OverloadFields},
    origin::{Origin, Origins},
    rate_limit::RateLimitFields,
    retry::Schedule,
    validate::positive,
    written::{Preset, Section},
    ClientGuards, ClientPolicy,
};
use crate::{
    hedge::HedgePolicy,
    policy::{AnyDecoder, AnyRetryer, Jitter, RetryBudget, Retryer, GRPC_PREVIOUS_RPC_ATTEMPTS},
    presets,
    retry::RetryPolicy,
    InvalidSetting, ResiliencePolicy,
};
use std::{sync::Arc, time::Duration};

/// A client's policy and its hedging, if on.
pub(super) type Built = (ClientPolicy, Option<HedgePolicy<AnyDecoder>>);

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
        let mut base = self.overload.apply(base, &format!("{path}.overload"))?;
        let rate_limit = format!("{path}.rate_limit");
        self.rate_limit.apply(&mut base.rate_limit, &rate_limit)?;
        Ok(base)
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
            breaker: BreakerFields::of(policy.guard().breaker.as_ref(), &decoder),
            hedge: HedgeFields::off(),
            overload: OverloadFields::off(),
            rate_limit: RateLimitFields::off(),
            decoder,
            backoff: schedule.backoff,
            delay: schedule.delay,
            max_delay: schedule.max_delay,
            max_attempts: schedule.max_attempts,
            multiplier: schedule.multiplier,
            jitter: schedule.jitter,
            seed: None,
            max_pushback: schedule.max_pushback,
            min_attempt: retry.options().deadline_margin(),
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
        if hedge.is_some() && self.propagate.is_some() {
            // NOTE: the hedging stack (`HedgeLayer`) sends no budget, and a
            // client's policy does not expose the header to add one by hand.
            let problem = format!(
                "{} does not apply to a client that hedges: set propagate = \"off\"",
                self.origins.propagate.inherited()
            );
            return Err(InvalidSetting::new("propagate", problem.trim_start()).within(path));
        }
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
        self.budget_header_apart().map_err(|err| err.within(path))?;
        if !self.hedge.enabled {
            // NOTE: a client that hedges makes no retries.
            self.room_for_a_retry(&backoff)
                .map_err(|err| err.within(path))?;
        }
        let breaker = self.breaker(&decoder, path)?;
        let grpc = matches!(decoder, AnyDecoder::Grpc(_));
        let mut retry = RetryPolicy::new(decoder, backoff);
        if let Some(min_attempt) = self.min_attempt {
            retry = retry.map_options(|o| o.deadline_aware(min_attempt));
        }
        if let Some((tokens, ratio)) = self.budget {
            let budget = RetryBudget::new(tokens, ratio)
                .map_err(|err| err.within(&format!("{retry_path}.budget")))?;
            retry = retry.map_options(|o| o.with_budget(Arc::new(budget)));
        }
        retry = match &self.attempt_header {
            Some(AttemptHeaderField::This(name)) => {
                retry.map_options(|o| o.with_attempt_header(name.clone()))
            }
            Some(AttemptHeaderField::Previous(name)) => {
                retry.map_options(|o| o.with_previous_attempts_header(name.clone()))
            }
            None if grpc => {
                retry.map_options(|o| o.with_previous_attempts_header(GRPC_PREVIOUS_RPC_ATTEMPTS))
            }
            None | Some(AttemptHeaderField::Off) => retry,
        };
        let mut policy = ResiliencePolicy::new(self.deadline, self.attempt_timeout, retry)
            .map_err(|err| err.within(path))?;
        if let Some((header, format)) = &self.propagate {
            policy = policy.propagating(header.clone(), *format);
        }
        let overload = self.overload.build(&format!("{path}.overload"))?;
        let rate_limit = self.rate_limit.build(&format!("{path}.rate_limit"))?;
        Ok(policy.with_guard(ClientGuards {
            rate_limit,
            overload,
            breaker,
        }))
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

    /// An error when the budget's header is not one of its own: `off` (the
    /// word that turns a setting off), a header of the request's framing,
    /// `grpc-timeout` in another format than gRPC's, or the retry's attempt
    /// header, which one of the two would overwrite.
    fn budget_header_apart(&self) -> Result<(), InvalidSetting> {
        use crate::propagate::{TimeoutFormat, GRPC_TIMEOUT};
        use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TE, TRANSFER_ENCODING, UPGRADE};
        // The headers that frame the request: a budget there would break it.
        const FRAMING: [http::HeaderName; 6] = [
            CONTENT_LENGTH,
            TRANSFER_ENCODING,
            HOST,
            CONNECTION,
            TE,
            UPGRADE,
        ];
        let Some((header, format)) = &self.propagate else {
            return Ok(());
        };
        let refuse = |field: &str, problem: &str| {
            Err(InvalidSetting::new(field, problem).with_value(format!("{:?}", header.as_str())))
        };
        if header == "off" {
            return refuse(
                "propagate_header",
                "must be a header name: propagate = \"off\" sends none",
            );
        }
        if FRAMING.contains(header) {
            let problem = "must not be a header the request's framing uses";
            return refuse("propagate_header", problem);
        }
        // NOTE: gRPC servers fail a call whose `grpc-timeout` is malformed.
        if *header == GRPC_TIMEOUT && *format != TimeoutFormat::Grpc {
            return refuse("propagate_format", "must be \"grpc\" for grpc-timeout");
        }
        let attempt = match &self.attempt_header {
            Some(AttemptHeaderField::This(name) | AttemptHeaderField::Previous(name)) => Some(name),
            _ => None,
        };
        if attempt == Some(header) {
            return refuse("propagate_header", "must not be the retry's attempt header");
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
}

// ===== impl Preset =====

impl Preset {
    /// The preset as the fields of a section: read off the policy that
    /// [`presets`](crate::presets) builds, so that its numbers exist once.
    pub(super) fn fields(self) -> Fields {
        let (name, policy) = match self {
            Preset::Reactor => ("reactor", client_policy(presets::reactor())),
            Preset::Feign => ("feign", client_policy(presets::feign())),
            Preset::Standard => ("standard", client_policy(presets::standard())),
            Preset::Conservative => ("conservative", client_policy(presets::conservative())),
            Preset::Apache => ("apache", client_policy(presets::apache())),
            Preset::Grpc => ("grpc", client_policy(presets::grpc())),
        };
        let mut fields = Fields::of(&policy);
        fields.origins = Origins::all(Origin::Preset(name));
        if policy.guard().breaker.is_none() {
            // NOTE: the preset has no breaker: a section that turns one on
            // gets the breaker's defaults, not the preset's numbers.
            fields.origins.break_duration = Origin::Builtin;
            fields.origins.max_break_duration = Origin::Builtin;
            fields.origins.ramp = Origin::Builtin;
        }
        fields
    }
}

/// A preset as a client's policy: its decoder and retryer erased, its
/// guards the client's.
pub(super) fn client_policy<D, R, G>(preset: ResiliencePolicy<D, R, G>) -> ClientPolicy
where
    D: Into<AnyDecoder>,
    R: Into<AnyRetryer>,
    G: Into<ClientGuards> + Clone,
{
    let guards = preset.guard().clone().into();
    preset.erase().with_guard(guards)
}
