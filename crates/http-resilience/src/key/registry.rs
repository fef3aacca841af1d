//! State kept per key (an authority, or a key of the user's): the bounded
//! map every guard keeps, and the entry a service keeps at hand for the
//! authority it called last.

use super::{map::Map, KeyRef, UpstreamKey};
use crate::setting::InvalidSetting;
use std::{
    collections::hash_map::RandomState,
    fmt,
    hash::{BuildHasher, Hasher},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    },
    time::Duration,
};

/// The function that keys a request, given by the user.
pub(crate) type KeyFn = dyn Fn(&http::Uri, &http::HeaderMap) -> UpstreamKey + Send + Sync;

/// What a [`Registry`] keeps for one key.
pub(crate) trait Keyed: Sized {
    /// Its key.
    fn key(&self) -> &UpstreamKey;

    /// When it was last used, on the owner's clock.
    ///
    /// NOTE: read by eviction under the map's write lock; an entry that
    /// keeps it behind a lock of its own takes that lock second (map, then
    /// entry), never the other way round, and does not wait for it.
    fn last_used(&self) -> u64;

    /// Set once the entry is evicted from its map.
    fn evicted(&self) -> &AtomicBool;

    /// Whether the entry holds something worth keeping over a quiet one when
    /// room must be made at `now` (an open circuit, slots in use, a pause
    /// not over).
    fn is_busy(&self, now: u64) -> bool;

    /// Whether calls hold the entry now, so that it is not idle however long
    /// ago it was last used (slots with calls in flight or waiting; a
    /// circuit, whose calls settle on it evicted or not, never is).
    fn in_use(&self) -> bool {
        false
    }

    /// Whether this entry, still kept in its map, is the one of `key`.
    fn is_current(&self, key: KeyRef<'_>) -> bool {
        self.is_kept() && self.key().as_ref().matches(key)
    }

    /// Whether this entry is still kept in its map.
    fn is_kept(&self) -> bool {
        !self.evicted().load(Ordering::Relaxed)
    }
}

/// How many entries a map keeps, and how long an unused one counts as idle.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Room {
    pub(crate) max_keys: usize,
    pub(crate) idle: Duration,
}

impl Room {
    /// Checks a policy's `max_keys(max, idle)`: at least one key, and an
    /// idle time above zero. One rule and one message for every guard.
    pub(crate) fn check(max: usize, idle: Duration) -> Result<(), InvalidSetting> {
        if max == 0 {
            return Err(InvalidSetting::new("max_keys", "must be at least 1").with_value("0"));
        }
        if idle.is_zero() {
            let err = InvalidSetting::new("idle_key_timeout", "must be greater than zero");
            return Err(err.with_value("0s"));
        }
        Ok(())
    }
}

/// The entries of one policy, by key, at most [`Room::max_keys`] of them.
///
/// NOTE: the map is keyed by the hash of a key, so that a lookup hashes the
/// request's authority where it lies, with no owned key built; the entries
/// of one hash (almost always one) are told apart by their keys. A lookup
/// takes the read lock for the time of the lookup only; a new key takes the
/// write lock, for work that does not grow with the number of keys kept
/// (see [`Map`]).
///
/// # Eviction
///
/// A new key that finds the map full makes room by sampling, as Redis's
/// approximated LRU does: it examines the next [`SAMPLE`](map::SAMPLE) keys
/// from a clock hand and evicts every idle one among them (no call in
/// flight, none used for [`Room::idle`]); if none is, the one ranked first
/// among them: a quiet one (a closed circuit, slots with no call) before a
/// busy one, then the one used least recently. The hand then moves past
/// them, so that the next new keys examine others and the hand sweeps the
/// whole map in turn. What holds: the map never keeps more than
/// `max_keys`; a new key examines at most `SAMPLE` of them, however many are
/// kept; and a busy key that is not idle goes only when every key examined
/// with it is busy too. The key that goes is the least recently used of those examined, not
/// always of the whole map.
pub(crate) struct Registry<T> {
    hasher: RandomState,
    map: RwLock<Map<T>>,
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self {
            hasher: RandomState::new(),
            map: RwLock::new(Map::default()),
        }
    }
}

impl<T> fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.read().len())
            .finish_non_exhaustive()
    }
}

// ===== impl Registry =====

impl<T> Registry<T> {
    fn read(&self) -> RwLockReadGuard<'_, Map<T>> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Map<T>> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The number of entries kept.
    pub(crate) fn len(&self) -> usize {
        self.read().len()
    }

    /// Every entry kept (for a readout: it copies the whole map, under the
    /// read lock).
    pub(crate) fn all(&self) -> Vec<Arc<T>> {
        self.read().all()
    }
}

impl<T: Keyed> Registry<T> {
    /// The hash of `key`.
    pub(crate) fn hash(&self, key: KeyRef<'_>) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        key.hash_into(&mut hasher);
        hasher.finish()
    }

    /// The entry of `key` (of hash `hash`), if one is kept.
    pub(crate) fn find(&self, hash: u64, key: KeyRef<'_>) -> Option<Arc<T>> {
        self.read().find(hash, key).cloned()
    }

    /// The entry of `key`, made by `make` at `now()` (nanoseconds on the
    /// owner's clock), with room made for it within `room` as the
    /// [eviction rule](Registry#eviction) says, if none is kept.
    pub(crate) fn get_or_make(
        &self,
        key: KeyRef<'_>,
        now: impl FnOnce() -> u64,
        room: Room,
        make: impl FnOnce(UpstreamKey, u64) -> T,
    ) -> Arc<T> {
        let hash = self.hash(key);
        if let Some(entry) = self.find(hash, key) {
            return entry;
        }
        let now = now();
        let mut map = self.write();
        if let Some(entry) = map.find(hash, key) {
            return Arc::clone(entry);
        }
        map.make_room(room.max_keys, now, super::nanos(room.idle));
        let entry = Arc::new(make(UpstreamKey::from_ref(key), now));
        map.insert(hash, Arc::clone(&entry));
        entry
    }
}

/// What one clone of a service keeps of a keyed policy: the entry of its
/// last key, and the scheme and authority of the request that found it.
pub(crate) struct AtHand<T>(Option<Held<T>>);

impl<T> Default for AtHand<T> {
    fn default() -> Self {
        Self(None)
    }
}

impl<T> Clone for AtHand<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> fmt::Debug for AtHand<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AtHand").field(&self.0.is_some()).finish()
    }
}

struct Held<T> {
    entry: Arc<T>,
    scheme: Option<http::uri::Scheme>,
    authority: Option<http::uri::Authority>,
}

impl<T> Clone for Held<T> {
    fn clone(&self) -> Self {
        Self {
            entry: Arc::clone(&self.entry),
            scheme: self.scheme.clone(),
            authority: self.authority.clone(),
        }
    }
}

impl<T: Keyed> Held<T> {
    /// Whether the entry, still kept, is the one of `uri`'s authority key.
    ///
    /// NOTE: the same scheme and authority (compared as `http` compares
    /// them, without regard to case) always make the same key, so a request
    /// for the authority of the last one is served without parsing its host
    /// and port again.
    #[inline]
    fn serves(&self, uri: &http::Uri) -> bool {
        // NOTE: `http` compares an authority whatever its case, byte by
        // byte; the spelling of the last call is the common case, so it is
        // compared as it is first. A scheme compares as `http` compares it:
        // `http` and `https` as the tags they are parsed into, with no text
        // read.
        let authority = match (uri.authority(), &self.authority) {
            (Some(a), Some(b)) => a.as_str() == b.as_str() || a == b,
            (a, b) => a.is_none() && b.is_none(),
        };
        let scheme = uri.scheme() == self.scheme.as_ref();
        self.entry.is_kept() && authority && scheme
    }
}

/// How a [`Registry`] finds or makes the entry of a request's key.
pub(crate) struct Lookup<'a, T, N, M> {
    pub(crate) registry: &'a Registry<T>,
    pub(crate) key_fn: Option<&'a KeyFn>,
    pub(crate) room: Room,
    /// The owner's clock, read only when an entry is made.
    pub(crate) now: N,
    pub(crate) make: M,
}

/// The entry of `request`'s key (by `key_fn`, or its authority): the one at
/// hand when it is that key's and still kept, else the registry's (made if
/// none is), which becomes the one at hand.
#[inline]
pub(crate) fn entry_for<T, B, N, M>(
    lookup: Lookup<'_, T, N, M>,
    at_hand: &mut AtHand<T>,
    request: &http::Request<B>,
) -> Arc<T>
where
    T: Keyed,
    N: FnOnce() -> u64,
    M: FnOnce(UpstreamKey, u64) -> T,
{
    let Lookup {
        registry,
        key_fn,
        room,
        now,
        make,
    } = lookup;
    let uri = request.uri();
    let custom = match key_fn {
        None => match &at_hand.0 {
            Some(held) if held.serves(uri) => return Arc::clone(&held.entry),
            _ => None,
        },
        Some(key) => Some(key(uri, request.headers())),
    };
    let key = match &custom {
        Some(custom) => custom.as_ref(),
        None => KeyRef::of_uri(uri),
    };
    if let (Some(held), Some(_)) = (&at_hand.0, &custom) {
        if held.entry.is_current(key) {
            return Arc::clone(&held.entry);
        }
    }
    let entry = registry.get_or_make(key, now, room, make);
    at_hand.0 = Some(Held {
        entry: Arc::clone(&entry),
        scheme: uri.scheme().cloned(),
        authority: uri.authority().cloned(),
    });
    entry
}
