//! The bounded map of circuits, by key.

use super::{
    circuit::{nanos, Circuit, Ctx},
    BreakerKey, CircuitState, KeyRef,
};
use std::{
    collections::{hash_map::RandomState, HashMap},
    hash::{BuildHasher, BuildHasherDefault, Hasher},
    sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
};
use tokio::time::Instant;

/// The circuits of one policy.
///
/// NOTE: the map is keyed by the hash of a key, so that a lookup hashes the
/// request's authority where it lies, with no owned key built; the circuits
/// of one hash (almost always one) are told apart by their keys. A lookup
/// takes the read lock for the time of the lookup only; a new key takes the
/// write lock.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    hasher: RandomState,
    map: RwLock<Map>,
}

#[derive(Debug, Default)]
struct Map {
    circuits: HashMap<u64, Vec<Arc<Circuit>>, BuildHasherDefault<Prehashed>>,
    len: usize,
}

// ===== impl Registry =====

impl Registry {
    /// The hash of `key`.
    pub(crate) fn hash(&self, key: KeyRef<'_>) -> u64 {
        let mut hasher = self.hasher.build_hasher();
        key.hash_into(&mut hasher);
        hasher.finish()
    }

    fn read(&self) -> RwLockReadGuard<'_, Map> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Map> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The circuit of `key` (of hash `hash`), if one is kept.
    pub(crate) fn find(&self, hash: u64, key: KeyRef<'_>) -> Option<Arc<Circuit>> {
        self.read().find(hash, key).cloned()
    }

    /// The circuit of `key`, made (and room made for it) if none is kept.
    pub(crate) fn get_or_insert(&self, key: KeyRef<'_>, ctx: Ctx<'_>) -> Arc<Circuit> {
        let hash = self.hash(key);
        if let Some(circuit) = self.find(hash, key) {
            return circuit;
        }
        let now = ctx.nanos(Instant::now());
        let mut map = self.write();
        if let Some(circuit) = map.find(hash, key) {
            return Arc::clone(circuit);
        }
        let settings = ctx.settings();
        if map.len >= settings.max_keys {
            let idle = nanos(settings.idle);
            map.evict(|circuit| now.saturating_sub(circuit.last_used()) >= idle);
        }
        if map.len >= settings.max_keys {
            map.evict_least_recent();
        }
        let circuit = Arc::new(Circuit::new(BreakerKey::from_ref(key), now));
        map.circuits
            .entry(hash)
            .or_default()
            .push(Arc::clone(&circuit));
        map.len += 1;
        circuit
    }

    /// The number of circuits kept.
    pub(crate) fn len(&self) -> usize {
        self.read().len
    }

    /// The state of every circuit kept.
    pub(crate) fn states(&self, base: Instant) -> Vec<(BreakerKey, CircuitState)> {
        let map = self.read();
        map.circuits
            .values()
            .flatten()
            .map(|circuit| (circuit.key().clone(), circuit.state(base)))
            .collect()
    }
}

// ===== impl Map =====

impl Map {
    fn find(&self, hash: u64, key: KeyRef<'_>) -> Option<&Arc<Circuit>> {
        self.circuits
            .get(&hash)?
            .iter()
            .find(|circuit| circuit.key().as_ref().matches(key))
    }

    /// Removes the circuits `gone` picks, marking them evicted for the
    /// services that keep one at hand.
    fn evict(&mut self, gone: impl Fn(&Circuit) -> bool) {
        let mut len = 0;
        self.circuits.retain(|_, circuits| {
            circuits.retain(|circuit| {
                let evicted = gone(circuit);
                if evicted {
                    circuit.evict();
                }
                !evicted
            });
            len += circuits.len();
            !circuits.is_empty()
        });
        self.len = len;
    }

    /// Removes the circuit used least recently, a closed one before any
    /// other.
    fn evict_least_recent(&mut self) {
        let victim = self
            .circuits
            .values()
            .flatten()
            .min_by_key(|circuit| (!circuit.is_closed(), circuit.last_used()))
            .map(Arc::clone);
        if let Some(victim) = victim {
            self.evict(|circuit| std::ptr::eq(circuit, &*victim));
        }
    }
}

/// A hasher for keys that are hashes already.
#[derive(Debug, Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }
}
