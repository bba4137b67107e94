//! [`InlineMap`]: exact match of `u64` keys to small records stored in the
//! slots themselves, so that a hit costs one cache line.
//!
//! Contract:
//! - stores: distinct `u64` keys, every one but [`NO_KEY`], each with a
//!   record `V` (any `Copy` value);
//! - layout: a power of two of slots `(key, record)`, each aligned to 32
//!   bytes, so a slot of at most 32 bytes (a record of at most 24) never
//!   straddles two cache lines; probed linearly from a two-multiply hash;
//!   at most half full, so a hit usually reads its home slot's line and
//!   nothing else;
//! - batched lookups: [`InlineMap::prefetch`] starts loading a key's home
//!   slot, so a caller can prefetch a batch of keys, then look them up;
//! - removes shift the rest of a probe run back (no tombstones);
//! - concurrency: mutation takes `&mut self`; threads that look up
//!   concurrently each need their own copy (it is `Clone`).
//!
//! Why beside [`crate::exact::OpenMap`]: that map returns a `u32` index
//! into the caller's storage, a second dependent memory access per lookup.
//! For tables of millions of entries looked up on every packet (an
//! lwAFTR's softwires) each access is a cache miss; keeping the record in
//! the slot halves them.

use crate::exact::HASH_MUL;
use crate::lpm::prefetch_ptr;

/// The key that marks an empty slot (never a key).
pub const NO_KEY: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
#[repr(C, align(32))]
struct Slot<V> {
    key: u64,
    record: V,
}

/// The map (see the module documentation).
#[derive(Debug, Clone)]
pub struct InlineMap<V: Copy + Default> {
    slots: Vec<Slot<V>>,
    /// `64 - log2(slots.len())`.
    shift: u32,
    len: usize,
}

impl<V: Copy + Default> Default for InlineMap<V> {
    fn default() -> Self {
        InlineMap::with_slot_bits(4)
    }
}

impl<V: Copy + Default> InlineMap<V> {
    fn with_slot_bits(bits: u32) -> Self {
        let empty = Slot { key: NO_KEY, record: V::default() };
        let mut slots = Vec::with_capacity(1 << bits);
        // Asked before the slots are written, so the pages come huge from the start.
        crate::mem::advise_huge_pages(slots.spare_capacity_mut());
        slots.resize(1 << bits, empty);
        InlineMap { slots, shift: 64 - bits, len: 0 }
    }

    /// The home slot: the high bits of a multiply, xor-shift, multiply mix
    /// of the key. Why not one multiply (as [`crate::exact::OpenMap`]):
    /// keys built of two fields, such as an lwAFTR's `ipv4 << 16 | psid`
    /// over consecutive addresses and PSIDs, fall on a lattice that a
    /// single multiplicative hash folds into clusters (3.6 slots per hit at
    /// half load for a million such keys, against 1.46 with this mix).
    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        let h = key.wrapping_mul(HASH_MUL);
        ((h ^ (h >> 32)).wrapping_mul(HASH_MUL) >> self.shift) as usize
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline]
    fn find(&self, key: u64) -> Result<usize, usize> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let k = self.slots[i].key;
            if k == key {
                return Ok(i);
            }
            if k == NO_KEY {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The record of `key` (`None` for [`NO_KEY`], never a key).
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        if key == NO_KEY {
            return None;
        }
        self.find(key).ok().map(|i| &self.slots[i].record)
    }

    /// Starts loading the home slot of `key` and the slot after it (a
    /// hit's probe reads one or two slots at this load; the second is
    /// prefetched only when it is on another cache line). A hint: no
    /// effect on results.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        let home = self.home(key);
        let first = self.slots.as_ptr().wrapping_add(home) as usize;
        let next = self.slots.as_ptr().wrapping_add((home + 1) & self.mask()) as usize;
        prefetch_ptr(first as *const u8);
        if next / 64 != first / 64 {
            prefetch_ptr(next as *const u8);
        }
    }

    /// Sets the record of `key`; returns the old one.
    ///
    /// # Panics
    /// When `key` is [`NO_KEY`].
    pub fn insert(&mut self, key: u64, record: V) -> Option<V> {
        assert_ne!(key, NO_KEY, "NO_KEY marks empty slots");
        if let Ok(i) = self.find(key) {
            return Some(std::mem::replace(&mut self.slots[i].record, record));
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let i = self.find(key).expect_err("checked absent above");
        self.slots[i] = Slot { key, record };
        self.len += 1;
        None
    }

    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(self, InlineMap::with_slot_bits(bits));
        for s in old.slots.into_iter().filter(|s| s.key != NO_KEY) {
            let i = self.find(s.key).expect_err("keys are distinct");
            self.slots[i] = s;
            self.len += 1;
        }
    }

    /// Removes `key`; returns its record.
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if key == NO_KEY {
            return None;
        }
        let mut hole = self.find(key).ok()?;
        let record = self.slots[hole].record;
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.key == NO_KEY {
                break;
            }
            // `s` may fill the hole when the hole lies on its probe path.
            let h = self.home(s.key);
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = Slot { key: NO_KEY, record: V::default() };
        self.len -= 1;
        Some(record)
    }

    /// `(key, record)` of every entry.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> + '_ {
        self.slots.iter().filter(|s| s.key != NO_KEY).map(|s| (s.key, &s.record))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of its slots (what a lookup may touch).
    pub fn slot_bytes(&self) -> usize {
        std::mem::size_of_val(self.slots.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[derive(Debug, Clone, Copy, Default, PartialEq)]
    struct Rec {
        a: [u8; 16],
        b: u32,
    }

    #[test]
    fn a_record_slot_is_32_bytes_and_aligned() {
        assert_eq!(std::mem::size_of::<Slot<Rec>>(), 32);
        assert_eq!(std::mem::align_of::<Slot<Rec>>(), 32);
    }

    #[test]
    fn agrees_with_a_hash_map_through_inserts_and_removes() {
        let mut rng = crate::test_rng(7);
        let mut m: InlineMap<Rec> = InlineMap::default();
        let mut model: HashMap<u64, Rec> = HashMap::new();
        for step in 0..200_000u32 {
            // Keys from a small range, so inserts, replacements and removes mix.
            let key = u64::from(rng() % 5000) << 16 | 7;
            if rng().is_multiple_of(3) {
                assert_eq!(m.remove(key), model.remove(&key), "step {step}");
            } else {
                let r = Rec { a: [step as u8; 16], b: step };
                assert_eq!(m.insert(key, r), model.insert(key, r), "step {step}");
            }
            assert_eq!(m.len(), model.len());
        }
        for k in 0..5000u64 {
            let key = k << 16 | 7;
            assert_eq!(m.get(key), model.get(&key));
        }
        assert_eq!(m.iter().count(), model.len());
        assert_eq!(m.get(NO_KEY), None);
        assert_eq!(m.remove(NO_KEY), None);
    }

    #[test]
    #[should_panic(expected = "NO_KEY")]
    fn the_empty_marker_is_not_a_key() {
        InlineMap::<u32>::default().insert(NO_KEY, 1);
    }
}
