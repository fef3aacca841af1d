//! The entries of a [`Registry`](super::Registry): a slab in no order, an
//! index from each key's hash to its place in the slab, and a clock hand
//! that picks what to evict.
//!
//! Every operation is O(1) whatever the number of entries: a lookup reads
//! the index; an insert pushes on the slab; a removal swaps the last entry
//! into the hole and moves its place in the index; making room examines at
//! most [`SAMPLE`] entries from the hand. No operation walks the map.
//!
//! NOTE: the index is std's hash table, so an insert is O(1) amortised: the
//! table grows (rehashing what it holds) while the map fills, and under
//! churn it doubles once more and then, now and then, clears the slots that
//! removals marked, in place; both are rare (after thousands of inserts at
//! a bound in the thousands) and bounded by twice the table that `max_keys`
//! entries need.

use super::KeyRef;
use super::Keyed;
use std::{
    collections::{hash_map::Entry, HashMap},
    hash::{BuildHasherDefault, Hasher},
    sync::{atomic::Ordering, Arc},
};

/// The entries examined to make room for one new key.
///
/// NOTE: enough that an open circuit or a key with calls in flight is kept
/// over a quiet one unless the fifteen examined with it are as busy; few
/// enough that making room costs about as much as a lookup, however many
/// keys are kept.
pub(super) const SAMPLE: usize = 16;

/// The entries of one policy.
pub(super) struct Map<T> {
    /// Every entry kept, with its key's hash, in no order.
    slots: Vec<Slot<T>>,
    /// Where the entries of each hash lie in `slots`.
    index: HashMap<u64, Place, BuildHasherDefault<Prehashed>>,
    /// Where the next search for room starts in `slots`.
    hand: usize,
}

struct Slot<T> {
    hash: u64,
    entry: Arc<T>,
}

/// The places in the slab of the entries of one hash: one, but for the rare
/// keys whose hashes collide.
#[derive(Debug, PartialEq, Eq)]
enum Place {
    One(usize),
    Many(Vec<usize>),
}

impl<T> Default for Map<T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            index: HashMap::default(),
            hand: 0,
        }
    }
}

// ===== impl Map =====

impl<T> Map<T> {
    /// The number of entries kept.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Every entry kept.
    pub(super) fn all(&self) -> Vec<Arc<T>> {
        self.slots
            .iter()
            .map(|slot| Arc::clone(&slot.entry))
            .collect()
    }
}

impl<T: Keyed> Map<T> {
    /// The entry of `key`, of hash `hash`, if kept.
    pub(super) fn find(&self, hash: u64, key: KeyRef<'_>) -> Option<&Arc<T>> {
        self.index
            .get(&hash)?
            .places()
            .iter()
            .map(|&at| &self.slots[at].entry)
            .find(|entry| entry.key().as_ref().matches(key))
    }

    /// Keeps `entry`, of hash `hash` (a key not kept yet).
    pub(super) fn insert(&mut self, hash: u64, entry: Arc<T>) {
        let at = self.slots.len();
        self.slots.push(Slot { hash, entry });
        match self.index.entry(hash) {
            Entry::Vacant(vacant) => {
                vacant.insert(Place::One(at));
            }
            Entry::Occupied(mut occupied) => occupied.get_mut().add(at),
        }
    }

    /// Makes room for one more entry at `now`, within `max_keys`: every
    /// idle entry among the [`SAMPLE`] from the hand goes, or, if none is,
    /// the one [`rank`] puts first among them.
    pub(super) fn make_room(&mut self, max_keys: usize, now: u64, idle: u64) {
        while !self.slots.is_empty() && self.slots.len() >= max_keys {
            self.evict_from_hand(now, idle);
        }
    }

    /// Evicts at least one of the [`SAMPLE`] entries from the hand, and
    /// moves the hand past them.
    fn evict_from_hand(&mut self, now: u64, idle: u64) {
        let len = self.slots.len();
        let start = self.hand % len;
        let count = len.min(SAMPLE);
        let mut gone = [0; SAMPLE];
        let mut evicted = 0;
        let mut victim: Option<(usize, (bool, u64))> = None;
        for at in (start..start + count).map(|i| i % len) {
            let entry = &*self.slots[at].entry;
            if is_idle(entry, now, idle) {
                gone[evicted] = at;
                evicted += 1;
            } else {
                let ranked = rank(entry, now);
                if victim.is_none_or(|(_, best)| ranked < best) {
                    victim = Some((at, ranked));
                }
            }
        }
        if evicted == 0 {
            if let Some((at, _)) = victim {
                gone[0] = at;
                evicted = 1;
            }
        }
        self.hand = start + count;
        // NOTE: from the last place down, so that the entry each removal
        // moves into its hole is never one still to be removed.
        let gone = &mut gone[..evicted];
        gone.sort_unstable_by(|a, b| b.cmp(a));
        for &at in &*gone {
            self.remove(at);
        }
    }

    /// Removes the entry at `at`, marking it evicted for the services that
    /// keep it at hand; the last entry takes its place.
    fn remove(&mut self, at: usize) {
        let last = self.slots.len() - 1;
        let gone = self.slots.swap_remove(at);
        gone.entry.evicted().store(true, Ordering::Relaxed);
        if let Entry::Occupied(mut place) = self.index.entry(gone.hash) {
            if place.get_mut().remove(at) {
                place.remove();
            }
        }
        if at != last {
            let moved = self.slots[at].hash;
            if let Some(place) = self.index.get_mut(&moved) {
                place.moved(last, at);
            }
        }
    }
}

/// Whether `entry` is idle at `now`: no call holds it, and none used it for
/// `idle`.
fn is_idle<T: Keyed>(entry: &T, now: u64, idle: u64) -> bool {
    !entry.in_use() && now.saturating_sub(entry.last_used()) >= idle
}

/// The order in which entries that are not idle go: a quiet one before a
/// busy one, then the one used least recently.
fn rank<T: Keyed>(entry: &T, now: u64) -> (bool, u64) {
    (entry.is_busy(now), entry.last_used())
}

// ===== impl Place =====

impl Place {
    fn places(&self) -> &[usize] {
        match self {
            Place::One(at) => std::slice::from_ref(at),
            Place::Many(places) => places,
        }
    }

    fn add(&mut self, at: usize) {
        match self {
            Place::One(first) => *self = Place::Many(vec![*first, at]),
            Place::Many(places) => places.push(at),
        }
    }

    /// Forgets `at`: `true` when no place is left.
    fn remove(&mut self, at: usize) -> bool {
        match self {
            Place::One(only) => *only == at,
            Place::Many(places) => {
                places.retain(|&p| p != at);
                if let [only] = places[..] {
                    *self = Place::One(only);
                }
                false
            }
        }
    }

    /// The entry at `from` now lies at `to`.
    fn moved(&mut self, from: usize, to: usize) {
        match self {
            Place::One(at) => *at = to,
            Place::Many(places) => {
                for at in places.iter_mut().filter(|at| **at == from) {
                    *at = to;
                }
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::UpstreamKey;
    use std::sync::atomic::{AtomicBool, AtomicU64};

    /// An entry whose use and business the test sets.
    struct Entry {
        key: UpstreamKey,
        last_used: AtomicU64,
        busy: AtomicBool,
        in_use: AtomicBool,
        evicted: AtomicBool,
    }

    impl Keyed for Entry {
        fn key(&self) -> &UpstreamKey {
            &self.key
        }

        fn last_used(&self) -> u64 {
            self.last_used.load(Ordering::Relaxed)
        }

        fn evicted(&self) -> &AtomicBool {
            &self.evicted
        }

        fn is_busy(&self, _: u64) -> bool {
            self.busy.load(Ordering::Relaxed)
        }

        fn in_use(&self) -> bool {
            self.in_use.load(Ordering::Relaxed)
        }
    }

    fn entry(name: &str, last_used: u64) -> Arc<Entry> {
        Arc::new(Entry {
            key: UpstreamKey::custom(name.to_owned()),
            last_used: AtomicU64::new(last_used),
            busy: AtomicBool::new(false),
            in_use: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
        })
    }

    /// Keeps `entry` under `hash`, making room within `max` at `now`.
    fn keep(map: &mut Map<Entry>, max: usize, hash: u64, entry: &Arc<Entry>, now: u64) {
        map.make_room(max, now, IDLE);
        map.insert(hash, Arc::clone(entry));
    }

    const IDLE: u64 = 1_000_000;

    /// Every entry kept is found at its place, and the index holds no more.
    fn check(map: &Map<Entry>) {
        for slot in &map.slots {
            let found = map.find(slot.hash, slot.entry.key.as_ref());
            assert!(found.is_some_and(|f| Arc::ptr_eq(f, &slot.entry)));
            assert!(!slot.entry.evicted.load(Ordering::Relaxed));
        }
        let places: usize = map.index.values().map(|p| p.places().len()).sum();
        assert_eq!(places, map.slots.len());
    }

    #[test]
    fn churn_keeps_the_bound_and_the_index() {
        let mut map = Map::default();
        let mut made = Vec::new();
        for n in 0..5_000u64 {
            let e = entry(&format!("k{n}"), n);
            // NOTE: a hash of one of eight values, so that most keys share
            // their hash with others.
            keep(&mut map, 100, n % 8, &e, n);
            made.push((n % 8, e));
            assert!(map.len() <= 100);
            check(&map);
        }
        let evicted = made
            .iter()
            .filter(|(_, e)| e.evicted.load(Ordering::Relaxed));
        assert_eq!(evicted.count(), 5_000 - 100);
        for (hash, e) in &made {
            let kept = map.find(*hash, e.key.as_ref()).is_some();
            assert_eq!(kept, !e.evicted.load(Ordering::Relaxed));
        }
    }

    #[test]
    fn a_busy_entry_outlives_quiet_ones() {
        let mut map = Map::default();
        let open = entry("open", 0);
        open.busy.store(true, Ordering::Relaxed);
        keep(&mut map, 64, 0, &open, 0);
        for n in 1..10_000u64 {
            keep(&mut map, 64, n, &entry(&format!("k{n}"), n), n);
        }
        assert!(!open.evicted.load(Ordering::Relaxed));
        assert_eq!(map.len(), 64);
    }

    #[test]
    fn the_least_recently_used_of_those_examined_goes() {
        let mut map = Map::default();
        let (a, b, c) = (entry("a", 3), entry("b", 1), entry("c", 2));
        for (hash, e) in [(1, &a), (2, &b), (3, &c)] {
            keep(&mut map, 3, hash, e, 3);
        }
        keep(&mut map, 3, 4, &entry("d", 4), 4);
        assert!(b.evicted.load(Ordering::Relaxed));
        assert!(!a.evicted.load(Ordering::Relaxed) && !c.evicted.load(Ordering::Relaxed));
        check(&map);
    }

    #[test]
    fn every_idle_entry_examined_goes_but_not_one_in_use() {
        let mut map = Map::default();
        let held = entry("held", 0);
        held.in_use.store(true, Ordering::Relaxed);
        held.busy.store(true, Ordering::Relaxed);
        keep(&mut map, 4, 0, &held, 0);
        for n in 1..4 {
            keep(&mut map, 4, n, &entry(&format!("k{n}"), 0), 0);
        }
        keep(&mut map, 4, 9, &entry("new", 2 * IDLE), 2 * IDLE);
        assert_eq!(map.len(), 2, "the three idle ones went");
        assert!(!held.evicted.load(Ordering::Relaxed));
        check(&map);
    }

    #[test]
    fn a_new_key_examines_a_bounded_sample() {
        let mut map = Map::default();
        for n in 0..1_000u64 {
            keep(&mut map, 1_000, n, &entry(&format!("k{n}"), 0), 0);
        }
        // All idle: one new key evicts the idle ones it examines, no more.
        keep(&mut map, 1_000, 5_000, &entry("new", 2 * IDLE), 2 * IDLE);
        assert_eq!(map.len(), 1_000 - SAMPLE + 1);
        check(&map);
    }
}
