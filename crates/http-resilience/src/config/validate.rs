//! The checks a setting must pass beyond its type.

use crate::InvalidSetting;
use std::time::Duration;

/// An error unless `applies`: `field` is written for another `kind` than the
/// one in force.
pub(super) fn only_for(
    applies: bool,
    field: &str,
    kind: &str,
    wanted: &[&str],
    got: &str,
) -> Result<(), InvalidSetting> {
    if applies {
        return Ok(());
    }
    let wanted: Vec<String> = wanted.iter().map(|name| format!("{name:?}")).collect();
    Err(InvalidSetting::new(
        field,
        format!(
            "applies only to {kind} = {}, got {kind} = {got:?}",
            wanted.join(" or ")
        ),
    ))
}

/// An error when `value` is zero.
pub(super) fn positive(field: &str, value: Duration) -> Result<(), InvalidSetting> {
    if value.is_zero() {
        return Err(InvalidSetting::new(
            field,
            "must be greater than zero, got 0s",
        ));
    }
    Ok(())
}
