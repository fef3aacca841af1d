//! Error types.

use std::{error::Error, fmt};

/// A service config that gRPC would refuse: JSON that does not parse, a
/// field of the wrong type, or a value outside what gRPC's retry design
/// (proposal A6) allows.
///
/// It names the field by its path in the document and says what is wrong,
/// so that the message reads
/// `methodConfig[0].retryPolicy.maxAttempts: must be at least 2, got 1`.
///
/// # Example
///
/// ```
/// use http_resilience::grpc::ServiceConfig;
///
/// let err = ServiceConfig::from_json(r#"{"retryThrottling": {"maxTokens": 0, "tokenRatio": 0.1}}"#)
///     .unwrap_err();
/// assert_eq!(err.path(), "retryThrottling.maxTokens");
/// assert_eq!(err.to_string(), "retryThrottling.maxTokens: must be in (0, 1000], got 0");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidServiceConfig {
    path: String,
    problem: String,
}

// ===== impl InvalidServiceConfig =====

impl InvalidServiceConfig {
    /// The field at `path` (empty for the document itself) with `problem`
    /// (`must be ..., got ...`).
    pub fn new(path: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// The path of the field in the document (`methodConfig[0].timeout`);
    /// empty when the document as a whole is wrong (it is not JSON, or not
    /// an object).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong with it.
    pub fn problem(&self) -> &str {
        &self.problem
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
    fn the_message_names_the_path_or_the_document() {
        let field = InvalidServiceConfig::new("methodConfig[0].timeout", "is required");
        assert_eq!(field.to_string(), "methodConfig[0].timeout: is required");
        let whole = InvalidServiceConfig::new("", "must be a JSON object, got an array");
        assert_eq!(
            whole.to_string(),
            "service config: must be a JSON object, got an array"
        );
    }
}
