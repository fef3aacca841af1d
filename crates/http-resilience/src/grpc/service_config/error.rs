//! Error types.

use std::{error::Error, fmt};

/// A service config that gRPC would refuse: JSON that does not parse, a
/// field of the wrong type, or a value outside what gRPC's retry design
/// (proposal A6) allows.
///
/// It names the field by its path in the document and says what is wrong in
/// a phrase that is the same for the same mistake, whatever the value, so
/// that the message reads
/// `methodConfig[0].retryPolicy.maxAttempts: must be at least 2`; the value
/// refused, in JSON, is [`value`](Self::value).
///
/// # Example
///
/// ```
/// use http_resilience::grpc::ServiceConfig;
///
/// let err = ServiceConfig::from_json(r#"{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}"#)
///     .unwrap_err();
/// assert_eq!(err.path(), "retryThrottling.maxTokens");
/// assert_eq!(err.to_string(), "retryThrottling.maxTokens: must be in (0, 1000]");
/// assert_eq!(err.value(), Some("0"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidServiceConfig {
    path: String,
    problem: String,
    value: Option<String>,
}

// ===== impl InvalidServiceConfig =====

impl InvalidServiceConfig {
    /// The field at `path` (empty for the document itself) with `problem`,
    /// a phrase that holds no value (`must be at least 2`); the value goes in
    /// [`with_value`](Self::with_value).
    pub(crate) fn new(path: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            problem: problem.into(),
            value: None,
        }
    }

    /// The same error, with the value that was refused, in JSON (`1`,
    /// `"0.1"`).
    #[must_use]
    pub(crate) fn with_value(mut self, value: impl Into<String>) -> Self {
        self.value = Some(value.into());
        self
    }

    /// The path of the field in the document (`methodConfig[0].timeout`);
    /// empty when the document as a whole is wrong (it is not JSON, or not
    /// an object).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong with it, the same for the same mistake whatever the
    /// value.
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// The value that was refused, in JSON (as `serde_json` writes it), when
    /// one value is at fault (`None` for a field that is missing, of the wrong
    /// type, or a rule between fields).
    pub fn value(&self) -> Option<&str> {
        self.value.as_deref()
    }
}

impl fmt::Display for InvalidServiceConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.pad(&format!("service config: {}", self.problem))
        } else {
            f.pad(&format!("{}: {}", self.path, self.problem))
        }
    }
}

impl Error for InvalidServiceConfig {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_path_or_the_document_and_keeps_the_value_apart() {
        let field = InvalidServiceConfig::new("methodConfig[0].timeout", "is required");
        assert_eq!(field.to_string(), "methodConfig[0].timeout: is required");
        assert_eq!(field.value(), None);
        let whole = InvalidServiceConfig::new("", "must be a JSON object, got an array");
        assert_eq!(
            whole.to_string(),
            "service config: must be a JSON object, got an array"
        );
        let attempts = |value: &str| {
            InvalidServiceConfig::new(
                "methodConfig[0].retryPolicy.maxAttempts",
                "must be at least 2",
            )
            .with_value(value)
        };
        assert_eq!(
            attempts("1").to_string(),
            "methodConfig[0].retryPolicy.maxAttempts: must be at least 2"
        );
        assert_eq!(attempts("1").to_string(), attempts("0").to_string());
        assert_eq!(attempts("0").value(), Some("0"));
        assert_eq!(attempts("0").problem(), "must be at least 2");
        assert_eq!(
            format!("{:>24}", field),
            "methodConfig[0].timeout: is required"
        );
    }
}
