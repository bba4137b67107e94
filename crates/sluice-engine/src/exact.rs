//! An open-addressing map from exact keys of up to 64 bits to entry
//! indexes, laid out so that generated code can probe it inline.
//!
//! Why not a general hash map: the exact tables of common programs (MAC
//! learning and forwarding on 48-bit addresses, per-source policers on
//! IPv4 addresses) are looked up on every packet. With a library map the
//! compiled pipeline had to call into the engine for each of them; this
//! map is a flat array of 16-byte slots probed linearly from a
//! multiplicative (Fibonacci) hash, which a dozen generated instructions
//! can walk. Keys come from the control plane, so a hash without flooding
//! resistance is safe; the load factor stays at most one half, so a probe
//! for a missing key ends at an empty slot after about two slots.

/// [`Slot::value`] of an empty slot.
pub const EMPTY: u32 = u32::MAX;

/// Multiplier of the slot hash: the high bits of `key * HASH_MUL` pick the
/// home slot (generated code computes the same).
pub const HASH_MUL: u64 = 0x9e37_79b9_7f4a_7c15;

/// One slot: `#[repr(C)]` because generated code reads `key` at offset 0
/// and `record` at offset 12 of 16-byte slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Slot {
    /// The key, meaningful only when `value` is not [`EMPTY`] (so every
    /// `u64`, zero included, can be a key).
    pub key: u64,
    /// The entry index, or [`EMPTY`].
    pub value: u32,
    /// The id of the entry's hot record (see `tables::HotEntry`), 0 until
    /// the owner sets one. Why here: generated code then goes from the
    /// slot straight to the record, without a load of the entry index's
    /// record id in between. It also pads the slot to 16 bytes.
    pub record: u32,
}

const EMPTY_SLOT: Slot = Slot { key: 0, value: EMPTY, record: 0 };
const _: () = assert!(std::mem::size_of::<Slot>() == 16);

/// The map (see the module documentation).
#[derive(Debug, Clone)]
pub struct OpenMap {
    /// A power of two of slots, at most half of them used.
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: the home slot is `(key * HASH_MUL) >> shift`.
    shift: u32,
    len: usize,
}

impl Default for OpenMap {
    fn default() -> Self {
        OpenMap::with_slot_bits(4)
    }
}

impl OpenMap {
    fn with_slot_bits(bits: u32) -> OpenMap {
        OpenMap { slots: vec![EMPTY_SLOT; 1 << bits], shift: 64 - bits, len: 0 }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (key.wrapping_mul(HASH_MUL) >> self.shift) as usize
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot holding `key`, if any.
    #[inline]
    fn find(&self, key: u64) -> Result<usize, usize> {
        let mask = self.mask();
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.value == EMPTY {
                return Err(i);
            }
            if s.key == key {
                return Ok(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        self.find(key).ok().map(|i| self.slots[i].value)
    }

    /// Sets `key` to `value` (which must not be [`EMPTY`]); returns the old value.
    pub fn insert(&mut self, key: u64, value: u32) -> Option<u32> {
        assert_ne!(value, EMPTY, "EMPTY marks free slots");
        if let Ok(i) = self.find(key) {
            let s = &mut self.slots[i];
            if s.value != value {
                s.record = 0;
            }
            return Some(std::mem::replace(&mut s.value, value));
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let i = self.find(key).expect_err("checked absent above");
        self.slots[i] = Slot { key, value, record: 0 };
        self.len += 1;
        None
    }

    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(self, OpenMap::with_slot_bits(bits));
        for s in old.slots.into_iter().filter(|s| s.value != EMPTY) {
            let i = self.find(s.key).expect_err("keys are distinct");
            self.slots[i] = s;
            self.len += 1;
        }
    }

    /// Removes `key`; returns its value. The slots after it in its probe
    /// run move back (backward-shift deletion), so lookups never need
    /// tombstones.
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        let mut hole = self.find(key).ok()?;
        let value = self.slots[hole].value;
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.value == EMPTY {
                break;
            }
            // `s` may fill the hole when the hole lies on its probe path
            // (from its home slot to `j`).
            let h = self.home(s.key);
            if (j.wrapping_sub(h) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = EMPTY_SLOT;
        self.len -= 1;
        Some(value)
    }

    /// Sets the hot record id of `key` (see [`Slot::record`]); no effect
    /// when `key` is absent.
    pub fn set_record(&mut self, key: u64, record: u32) {
        if let Ok(i) = self.find(key) {
            self.slots[i].record = record;
        }
    }

    /// The hot record id of `key` (0 when absent or never set).
    pub fn record(&self, key: u64) -> u32 {
        self.find(key).map_or(0, |i| self.slots[i].record)
    }

    /// `(key, value)` of every entry.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.slots.iter().filter(|s| s.value != EMPTY).map(|s| (s.key, s.value))
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `(slots, slot count - 1, shift)` for generated code's probe.
    pub fn raw_parts(&self) -> (*const Slot, u64, u32) {
        (self.slots.as_ptr(), self.mask() as u64, self.shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_a_library_map_through_inserts_and_removes() {
        let mut next = crate::lpm::test_rng(99);
        let mut ours = OpenMap::default();
        let mut theirs = std::collections::HashMap::new();
        // Few distinct keys (clusters, collisions, re-inserts) then many (growth).
        for round in 0..2 {
            let keys: u32 = if round == 0 { 64 } else { 1 << 16 };
            for _ in 0..200_000 {
                let k = u64::from(next() % keys) * 0x1_0000_0001;
                match next() % 3 {
                    0 | 1 => {
                        let v = next() % 1000;
                        assert_eq!(ours.insert(k, v), theirs.insert(k, v), "insert {k}");
                        // The record rides along with its slot through shifts and growth.
                        ours.set_record(k, v + 1);
                    }
                    _ => assert_eq!(ours.remove(k), theirs.remove(&k), "remove {k}"),
                }
                assert_eq!(ours.len(), theirs.len());
            }
            for k in 0..keys {
                let k = u64::from(k) * 0x1_0000_0001;
                assert_eq!(ours.get(k), theirs.get(&k).copied(), "get {k}");
                assert_eq!(ours.record(k), theirs.get(&k).map_or(0, |v| v + 1), "record of {k}");
            }
            let mut all: Vec<_> = ours.iter().collect();
            all.sort_unstable();
            let mut want: Vec<_> = theirs.iter().map(|(k, v)| (*k, *v)).collect();
            want.sort_unstable();
            assert_eq!(all, want);
            assert!(ours.len() * 2 <= ours.slots.len(), "load factor at most one half");
        }
    }
}
