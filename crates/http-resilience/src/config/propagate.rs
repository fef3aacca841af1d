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
