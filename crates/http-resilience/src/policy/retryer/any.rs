//! The ready-made retryers as one type, chosen at run time.

#[cfg(feature = "grpc")]
use super::GrpcBackoff;
use super::{ExponentialBackoff, FeignRetryer, FixedDelay, Retryer};
use crate::InvalidSetting;
use std::time::Duration;

/// One of the ready-made retryers, chosen at run time (from a configuration
/// file, for example).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyRetryer {
    /// A fixed delay.
    Fixed(FixedDelay),
    /// Exponential backoff with jitter.
    Exponential(ExponentialBackoff),
    /// OpenFeign's retryer.
    Feign(FeignRetryer),
    /// gRPC's retry schedule.
    #[cfg(feature = "grpc")]
    Grpc(GrpcBackoff),
}

impl Retryer for AnyRetryer {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        match self {
            AnyRetryer::Fixed(r) => r.next_delay(attempts, server_delay),
            AnyRetryer::Exponential(r) => r.next_delay(attempts, server_delay),
            AnyRetryer::Feign(r) => r.next_delay(attempts, server_delay),
            #[cfg(feature = "grpc")]
            AnyRetryer::Grpc(r) => r.next_delay(attempts, server_delay),
        }
    }

    fn for_request(&self) -> Self {
        match self {
            AnyRetryer::Fixed(r) => AnyRetryer::Fixed(r.for_request()),
            AnyRetryer::Exponential(r) => AnyRetryer::Exponential(r.for_request()),
            AnyRetryer::Feign(r) => AnyRetryer::Feign(r.for_request()),
            #[cfg(feature = "grpc")]
            AnyRetryer::Grpc(r) => AnyRetryer::Grpc(r.for_request()),
        }
    }

    fn max_attempts(&self) -> Option<u32> {
        match self {
            AnyRetryer::Fixed(r) => r.max_attempts(),
            AnyRetryer::Exponential(r) => Retryer::max_attempts(r),
            AnyRetryer::Feign(r) => r.max_attempts(),
            #[cfg(feature = "grpc")]
            AnyRetryer::Grpc(r) => Retryer::max_attempts(r),
        }
    }

    fn with_max_attempts(self, max: u32) -> Result<Self, InvalidSetting> {
        Ok(match self {
            AnyRetryer::Fixed(r) => AnyRetryer::Fixed(r.with_max_attempts(max)?),
            AnyRetryer::Exponential(r) => AnyRetryer::Exponential(r.with_max_attempts(max)?),
            AnyRetryer::Feign(r) => AnyRetryer::Feign(r.with_max_attempts(max)?),
            #[cfg(feature = "grpc")]
            AnyRetryer::Grpc(r) => AnyRetryer::Grpc(r.with_max_attempts(max)?),
        })
    }
}

impl From<FixedDelay> for AnyRetryer {
    fn from(retryer: FixedDelay) -> Self {
        AnyRetryer::Fixed(retryer)
    }
}

impl From<ExponentialBackoff> for AnyRetryer {
    fn from(retryer: ExponentialBackoff) -> Self {
        AnyRetryer::Exponential(retryer)
    }
}

impl From<FeignRetryer> for AnyRetryer {
    fn from(retryer: FeignRetryer) -> Self {
        AnyRetryer::Feign(retryer)
    }
}

#[cfg(feature = "grpc")]
impl From<GrpcBackoff> for AnyRetryer {
    fn from(retryer: GrpcBackoff) -> Self {
        AnyRetryer::Grpc(retryer)
    }
}
