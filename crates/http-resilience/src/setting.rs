//! The error for a setting that makes no sense.

use std::{error::Error, fmt};

/// A setting that makes no sense: a zero timeout, a multiplier below one, an
/// attempt limit above the deadline.
///
/// It names the setting and says what is wrong with it, so that the message
/// reads `multiplier must be >= 1.0, got 0.5`. The configuration loader puts
/// the path of the setting in front (`clients.weather.retry.multiplier ...`).
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
/// assert_eq!(err.to_string(), "multiplier must be >= 1.0, got 0.5");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSetting {
    field: String,
    problem: String,
}

// ===== impl InvalidSetting =====

impl InvalidSetting {
    /// A setting `field` with `problem` (`must be ..., got ...`).
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// The name, or path, of the setting.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// What is wrong with it.
    pub fn problem(&self) -> &str {
        &self.problem
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
    fn names_the_path_and_the_problem() {
        let err = InvalidSetting::new("multiplier", "must be >= 1.0, got 0.5")
            .within("retry")
            .within("clients.weather");
        assert_eq!(err.field(), "clients.weather.retry.multiplier");
        assert_eq!(
            err.to_string(),
            "clients.weather.retry.multiplier must be >= 1.0, got 0.5"
        );
    }
}
