//! The error for a setting that makes no sense.

use std::{error::Error, fmt};

/// A setting that makes no sense: a zero timeout, a multiplier below one, an
/// attempt limit above the deadline.
///
/// It names the setting and says what is wrong with it in a phrase that is
/// the same for the same mistake, whatever the value: the message reads
/// `multiplier must be at least 1.0`, and the value that was refused is
/// [`value`](Self::value). The configuration loader puts the path of the
/// setting in front (`clients.weather.retry.multiplier ...`).
///
/// # Example
///
/// ```
/// use http_resilience::policy::ExponentialBackoff;
/// use std::time::Duration;
///
/// let err = ExponentialBackoff::new(Duration::from_millis(100), 0.5, Duration::from_secs(1), 5)
///     .unwrap_err();
/// assert_eq!(err.field(), "multiplier");
/// assert_eq!(err.to_string(), "multiplier must be at least 1.0");
/// assert_eq!(err.value(), Some("0.5"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSetting {
    field: String,
    problem: String,
    value: Option<String>,
}

// ===== impl InvalidSetting =====

impl InvalidSetting {
    /// A setting `field` with `problem`, a phrase that holds no value
    /// (`must be at least 1.0`); the value refused is kept beside it
    /// ([`value`](Self::value)).
    pub(crate) fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
            value: None,
        }
    }

    /// The same error, with the value that was refused, as written (a
    /// number, a duration such as `250ms`, a quoted text).
    #[must_use]
    pub(crate) fn with_value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// The name, or path, of the setting.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong with it, the same for the same mistake whatever the
    /// value.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// The value that was refused, when one setting's value is at fault
    /// (`None` for a setting that is missing, or one written where it does
    /// not apply).
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }

    /// The same error with `prefix.` in front of the field.
    #[must_use]
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    pub(crate) fn within(mut self, prefix: &str) -> Self {
        self.field = format!("{prefix}.{}", self.field);
        self
    }
}

impl fmt::Display for InvalidSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{} {}", self.field, self.problem))
    }
}

impl Error for InvalidSetting {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_path_and_the_problem_and_keeps_the_value_apart() {
        let err = InvalidSetting::new("multiplier", "must be at least 1.0")
            .with_value("0.5")
            .within("retry")
            .within("clients.weather");
        assert_eq!(err.field(), "clients.weather.retry.multiplier");
        assert_eq!(err.problem(), "must be at least 1.0");
        assert_eq!(err.value(), Some("0.5"));
        assert_eq!(
            err.to_string(),
            "clients.weather.retry.multiplier must be at least 1.0"
        );
        let missing = InvalidSetting::new("statuses", "must be given");
        assert_eq!(missing.value(), None);
        assert_eq!(format!("{missing:>25}"), "   statuses must be given");
    }
}
