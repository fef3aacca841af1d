//! What every guard that keeps its state per upstream offers the same way.

use super::UpstreamKey;
use crate::InvalidSetting;
use std::time::Duration;

/// A guard's policy that keeps its state per [`UpstreamKey`]: the circuit
/// breaker, overload control, the rate limit and fault injection. Each
/// chooses its key, bounds its map and reports its state the same way,
/// through this trait; import it to call these methods.
///
/// # Example
///
/// ```
/// # #[cfg(feature = "breaker")] {
/// use http_resilience::breaker::{BreakerPolicy, CircuitState};
/// use http_resilience::key::{PerKey, UpstreamKey};
/// use std::time::Duration;
///
/// // One circuit per tenant, at most 1,000 of them.
/// let policy = BreakerPolicy::default()
///     .with_key(|_uri, headers| match headers.get("x-tenant") {
///         Some(tenant) => UpstreamKey::custom(tenant.to_str().unwrap_or("?")),
///         None => UpstreamKey::custom("shared"),
///     })
///     .max_keys(1_000, Duration::from_secs(300))
///     .expect("both above zero");
///
/// // No call went through yet: no circuit is kept.
/// assert_eq!(policy.state(&UpstreamKey::custom("tenant-7")), None::<CircuitState>);
/// assert!(policy.states().is_empty());
/// # }
/// ```
pub trait PerKey: Sized {
    /// What the guard keeps under each key, as it reports it.
    type State;

    /// Keys the guard's state by `key` instead of the request's authority:
    /// per route, per tenant. It sees the request's URI and headers.
    ///
    /// The key it makes is built for every call (an allocation); the
    /// authority key is not.
    #[must_use]
    fn with_key<F>(self, key: F) -> Self
    where
        F: Fn(&http::Uri, &http::HeaderMap) -> UpstreamKey + Send + Sync + 'static;

    /// Keeps the state of at most `max` keys. A new key beyond it makes room
    /// by sampling (an approximate LRU, as Redis's): the next 16 entries of a
    /// clock hand that sweeps them all in turn are examined, and those among
    /// them unused for `idle` go, or else the one used least recently among
    /// them. Whatever `max`, a new key costs the same; each guard's page says
    /// which entries it keeps longest.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `max` or `idle` is zero.
    fn max_keys(self, max: usize, idle: Duration) -> Result<Self, InvalidSetting>;

    /// The state kept under `key`, if any is.
    fn state(&self, key: &UpstreamKey) -> Option<Self::State>;

    /// The state kept under every key, for a health endpoint.
    fn states(&self) -> Vec<(UpstreamKey, Self::State)>;
}
