//! Where a value came from, for the messages of the checks that combine
//! values from several places.

use std::fmt;

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
