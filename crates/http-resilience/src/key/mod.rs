//! The upstream key: what the guards (the circuit breaker, overload control,
//! fault injection) keep their state under, and the bounded map they keep it
//! in.
//!
//! A request's key is by default the authority of its URI (scheme, host and
//! port: [`UpstreamKey::of_uri`]), or a key of one's own that a policy's
//! `with_key` function gives ([`UpstreamKey::custom`]). Each guard keeps one
//! entry per key in a map of at most `max_keys` entries, whose insert and
//! eviction cost the same however many keys are kept; a service keeps the
//! entry of the key it called last at hand, so that a run of calls to one
//! upstream never looks in the map.
//!
//! # Example
//!
//! ```
//! use http_resilience::key::UpstreamKey;
//!
//! let uri: http::Uri = "https://API.example.com/v1/items".parse()?;
//! let key = UpstreamKey::of_uri(&uri);
//! assert_eq!(key, UpstreamKey::authority("https", "api.example.com", 443));
//! assert_eq!(key.to_string(), "https://api.example.com:443");
//! assert_eq!(key.host(), Some("api.example.com"));
//! # Ok::<(), http_resilience::BoxError>(())
//! ```

mod clock;
mod kept;
mod map;
mod per_key;
mod registry;
mod upstream;

pub use self::{per_key::PerKey, upstream::UpstreamKey};

pub(crate) use self::{
    clock::{nanos, Clock},
    kept::Kept,
    registry::{entry_for, AtHand, KeyFn, Keyed, Lookup, Registry, Room},
    upstream::KeyRef,
};
