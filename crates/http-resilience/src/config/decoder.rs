//! The decoder fields of a table (`retry`, or `breaker` for a decoder of
//! its own): applied over their base, and built into a decoder.

use super::{
    validate::only_for,
    written::{DecoderKind, WrittenDecoder},
};
use crate::{
    policy::{
        AnyDecoder, ApacheDecoder, FeignDecoder, GrpcDecoder, InvalidStatus, StatusDecoder,
        TransientDecoder,
    },
    InvalidSetting,
};

/// A decoder's kind and the settings that belong to it: the retry's, or the
/// breaker's own.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct DecoderFields {
    pub(super) kind: DecoderKind,
    /// `None` where no section gave statuses; required by the `statuses`
    /// decoder.
    pub(super) statuses: Option<Vec<u16>>,
    pub(super) retry_after: bool,
    /// The gRPC codes retried; `None` for the `grpc` decoder's default.
    pub(super) codes: Option<Vec<i32>>,
}

// ===== impl DecoderFields =====

impl DecoderFields {
    /// The fields that make `decoder`.
    pub(super) fn of(decoder: &AnyDecoder) -> Self {
        let kind = |kind| Self {
            kind,
            statuses: None,
            retry_after: false,
            codes: None,
        };
        match decoder {
            AnyDecoder::Statuses(d) => Self {
                statuses: Some(d.statuses().map(|s| s.as_u16()).collect()),
                retry_after: d.reads_retry_after(),
                ..kind(DecoderKind::Statuses)
            },
            AnyDecoder::Feign(_) => kind(DecoderKind::Feign),
            AnyDecoder::Apache(_) => kind(DecoderKind::Apache),
            AnyDecoder::Grpc(d) => Self {
                codes: Some(d.retryable_codes().collect()),
                ..kind(DecoderKind::Grpc)
            },
            // NOTE: `AnyDecoder` is non-exhaustive; the transient decoder is
            // the remaining one.
            _ => kind(DecoderKind::Transient),
        }
    }

    /// These fields with `written` over them; `path` is the table's
    /// (`….retry` or `….breaker`).
    pub(super) fn apply(
        &mut self,
        written: &WrittenDecoder<'_>,
        path: &str,
    ) -> Result<(), InvalidSetting> {
        if let Some(kind) = written.decoder {
            let kind = kind.get("decoder", path)?;
            if kind != self.kind {
                // NOTE: these belong to the decoder being replaced.
                *self = Self {
                    kind,
                    statuses: None,
                    retry_after: false,
                    codes: None,
                };
            }
        }
        let only_for_kinds = |field: &str, kind: DecoderKind, wanted: DecoderKind| {
            only_for(kind == wanted, field, "decoder", &[wanted.name()])
                .map_err(|err| err.within(path))
        };
        if let Some(statuses) = written.statuses {
            only_for_kinds("statuses", self.kind, DecoderKind::Statuses)?;
            self.statuses = Some(statuses.clone());
        }
        if let Some(retry_after) = written.retry_after {
            only_for_kinds("retry_after", self.kind, DecoderKind::Statuses)?;
            self.retry_after = retry_after;
        }
        if let Some(codes) = written.codes {
            only_for_kinds("codes", self.kind, DecoderKind::Grpc)?;
            let codes = codes
                .iter()
                .map(|code| code.get("codes", path).map(|code| code.0))
                .collect::<Result<_, _>>()?;
            self.codes = Some(codes);
        }
        Ok(())
    }

    /// The decoder, checked; errors name the field alone.
    pub(super) fn build(&self) -> Result<AnyDecoder, InvalidSetting> {
        Ok(match self.kind {
            DecoderKind::Feign => AnyDecoder::Feign(FeignDecoder::new()),
            DecoderKind::Transient => AnyDecoder::Transient(TransientDecoder::new()),
            DecoderKind::Apache => AnyDecoder::Apache(ApacheDecoder::new()),
            DecoderKind::Grpc => AnyDecoder::Grpc(match &self.codes {
                Some(codes) => GrpcDecoder::new()
                    .with_codes(codes.iter().copied())
                    .map_err(|err| {
                        let setting = InvalidSetting::new("codes", err.problem().to_owned());
                        match err.value() {
                            Some(value) => setting.with_value(value),
                            None => setting,
                        }
                    })?,
                None => GrpcDecoder::default(),
            }),
            DecoderKind::Statuses => AnyDecoder::Statuses(self.statuses()?),
        })
    }

    fn statuses(&self) -> Result<StatusDecoder, InvalidSetting> {
        let Some(statuses) = self.statuses.as_deref() else {
            return Err(InvalidSetting::new(
                "statuses",
                "must be given with decoder = \"statuses\"",
            ));
        };
        let decoder = StatusDecoder::new(statuses.iter().copied()).map_err(|err| match err {
            InvalidStatus::OutOfRange(code) => {
                InvalidSetting::new("statuses", "must be in 100..=599").with_value(code.to_string())
            }
            _ => InvalidSetting::new("statuses", "must list at least one status").with_value("[]"),
        })?;
        Ok(if self.retry_after {
            decoder.with_retry_after()
        } else {
            decoder
        })
    }
}
