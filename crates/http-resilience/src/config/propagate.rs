//! The propagated budget of a section: `propagate`, `propagate_header` and
//! `propagate_format`, applied over the base's.

use super::{
    fields::Fields,
    origin::Origin,
    written::{Propagate, Section},
};
use crate::{
    propagate::{TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT},
    InvalidSetting,
};
use http::HeaderName;

// ===== impl Section =====

impl Section {
    /// The propagated budget written, over `base`'s: `propagate` names a
    /// header and a format together (or `"off"`), and `propagate_header` or
    /// `propagate_format` written alone takes the other from the base.
    pub(super) fn apply_propagate(
        &self,
        base: &mut Fields,
        path: &str,
    ) -> Result<(), InvalidSetting> {
        let preset = self.propagate.as_ref().map(|w| w.get("propagate", path));
        let header = self
            .propagate_header
            .as_ref()
            .map(|w| w.get("propagate_header", path));
        let format = self
            .propagate_format
            .as_ref()
            .map(|w| w.get("propagate_format", path));
        let (preset, header, format) = (
            preset.transpose()?,
            header.transpose()?,
            format.transpose()?,
        );
        if preset.is_none() && header.is_none() && format.is_none() {
            return Ok(());
        }
        let inherited = match preset {
            Some(Propagate::Off) => {
                return turn_off(base, header.is_some(), format.is_some(), path)
            }
            Some(Propagate::Envoy) => Some((EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis)),
            Some(Propagate::Grpc) => Some((GRPC_TIMEOUT, TimeoutFormat::Grpc)),
            None => base.propagate.clone(),
        };
        let propagate = merge((header, format), inherited, base.origins.propagate, path)?;
        base.propagate = Some(propagate);
        base.origins.propagate = Origin::Here;
        Ok(())
    }
}

/// `propagate = "off"`: no budget sent, unless a header or a format is
/// written beside it, which is refused.
fn turn_off(
    base: &mut Fields,
    header: bool,
    format: bool,
    path: &str,
) -> Result<(), InvalidSetting> {
    let field = match (header, format) {
        (true, _) => "propagate_header",
        (false, true) => "propagate_format",
        (false, false) => {
            base.propagate = None;
            base.origins.propagate = Origin::Here;
            return Ok(());
        }
    };
    let problem = "applies only to a propagated budget, got propagate = \"off\"";
    Err(InvalidSetting::new(field, problem).within(path))
}

/// The header and format written, each taken from `inherited` (a preset or
/// the base's, set at `origin`) when it is not.
fn merge(
    written: (Option<HeaderName>, Option<TimeoutFormat>),
    inherited: Option<(HeaderName, TimeoutFormat)>,
    origin: Origin,
    path: &str,
) -> Result<(HeaderName, TimeoutFormat), InvalidSetting> {
    let missing = |field: &str, with: &str| {
        let problem = format!(
            "must be given with {with}: {} sends no budget to take it from",
            origin.whose("the default")
        );
        InvalidSetting::new(field, problem).within(path)
    };
    match (written, inherited) {
        ((Some(header), Some(format)), _) => Ok((header, format)),
        ((Some(header), None), Some((_, format))) => Ok((header, format)),
        ((None, Some(format)), Some((header, _))) => Ok((header, format)),
        ((None, None), Some(both)) => Ok(both),
        ((Some(_), None), None) => Err(missing("propagate_format", "propagate_header")),
        ((None, _), None) => Err(missing("propagate_header", "propagate_format")),
    }
}
