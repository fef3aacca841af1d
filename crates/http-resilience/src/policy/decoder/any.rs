//! The ready-made decoders as one type, chosen at run time.

#[cfg(feature = "grpc")]
use super::GrpcDecoder;
use super::{ApacheDecoder, Decoder, FeignDecoder, StatusDecoder, TransientDecoder, Verdict};
use crate::errors::AsError;

/// One of the ready-made decoders, chosen at run time (from a configuration
/// file, for example).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyDecoder {
    /// Retries a set of statuses.
    Statuses(StatusDecoder),
    /// OpenFeign's default.
    Feign(FeignDecoder),
    /// The transient outcomes.
    Transient(TransientDecoder),
    /// Apache HttpClient's default.
    Apache(ApacheDecoder),
    /// gRPC's retry design.
    #[cfg(feature = "grpc")]
    Grpc(GrpcDecoder),
}

impl<B, E: AsError> Decoder<B, E> for AnyDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match self {
            AnyDecoder::Statuses(d) => d.decode(outcome),
            AnyDecoder::Feign(d) => d.decode(outcome),
            AnyDecoder::Transient(d) => d.decode(outcome),
            AnyDecoder::Apache(d) => d.decode(outcome),
            #[cfg(feature = "grpc")]
            AnyDecoder::Grpc(d) => d.decode(outcome),
        }
    }
}

impl From<StatusDecoder> for AnyDecoder {
    fn from(decoder: StatusDecoder) -> Self {
        AnyDecoder::Statuses(decoder)
    }
}

impl From<FeignDecoder> for AnyDecoder {
    fn from(decoder: FeignDecoder) -> Self {
        AnyDecoder::Feign(decoder)
    }
}

impl From<ApacheDecoder> for AnyDecoder {
    fn from(decoder: ApacheDecoder) -> Self {
        AnyDecoder::Apache(decoder)
    }
}

impl From<TransientDecoder> for AnyDecoder {
    fn from(decoder: TransientDecoder) -> Self {
        AnyDecoder::Transient(decoder)
    }
}

#[cfg(feature = "grpc")]
impl From<GrpcDecoder> for AnyDecoder {
    fn from(decoder: GrpcDecoder) -> Self {
        AnyDecoder::Grpc(decoder)
    }
}
