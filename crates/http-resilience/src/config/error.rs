//! The error of a configuration that cannot be used.

use crate::InvalidSetting;
use std::{error::Error, fmt};

/// The error of a configuration that cannot be used: a text that cannot be
/// read, or a setting that makes no sense.
///
/// Its message names the full path of the setting and what is wrong with it,
/// the same for the same mistake whatever the value, as in
/// `clients.weather.retry.multiplier must be at least 1.0`; the value refused
/// is the [`setting`](Self::setting)'s [`value`](InvalidSetting::value). For
/// a text that cannot be read (bad TOML, an unknown key, a value of the wrong
/// type) it is the format's own message, with the line and the key: the same
/// for the same text.
#[derive(Debug)]
pub struct ConfigError {
    pub(super) kind: ErrorKind,
}

#[derive(Debug)]
pub(super) enum ErrorKind {
    #[cfg(feature = "toml")]
    Toml(toml::de::Error),
    Invalid(InvalidSetting),
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

    #[test]
    fn a_setting_reads_as_its_path_and_problem_and_keeps_its_value() {
        let setting = InvalidSetting::new("max_keys", "must be at most 1,000,000")
            .with_value("2000000")
            .within("clients.api.breaker");
        let err = ConfigError::from(setting.clone());
        assert_eq!(
            err.to_string(),
            "clients.api.breaker.max_keys must be at most 1,000,000"
        );
        assert_eq!(err.setting(), Some(&setting));
        assert_eq!(
            err.setting().and_then(InvalidSetting::value),
            Some("2000000")
        );
        assert_eq!(
            format!("{err:>57}"),
            "   clients.api.breaker.max_keys must be at most 1,000,000"
        );
    }

    #[cfg(feature = "toml")]
    #[test]
    fn unreadable_text_reads_as_the_formats_own_message_the_same_for_the_same_text() {
        let read = |text: &str| super::super::ClientsConfig::from_toml_str(text).unwrap_err();
        let err = read("[default]\nunknown = 1");
        assert!(err.setting().is_none());
        assert!(err.to_string().contains("unknown field `unknown`"), "{err}");
        assert_eq!(err.to_string(), read("[default]\nunknown = 1").to_string());
        assert!(!err.to_string().ends_with('\n'));
    }
}
