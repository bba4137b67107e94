//! Exact-match maps to `u32` values: [`OpenMap`], open addressing of keys
//! of up to 64 bits laid out so that generated code can probe it inline,
//! and [`ExactMap`], keys of any fixed length given as bytes, held in the
//! form that suits their length (a direct array, an [`OpenMap`], a hash
//! map).
//!
//! Contract ([`OpenMap`]; [`ExactMap`] inherits it for its forms):
//! - stores: distinct `u64` keys (every value, zero included, is a key),
//!   each with a value (any `u32` but [`EMPTY`]) and a record id (a
//!   second `u32` the owner sets with [`OpenMap::set_record`], 0 until
//!   then and again whenever the key's value changes);
//! - lookup cost: one multiplication, then a linear probe of 16-byte
//!   slots from the home slot; the load factor stays at most one half, at
//!   which a hit reads about 1.5 slots and a miss about 2.5 on average
//!   (one or two cache lines). Inserts are amortized O(1) (the slot array
//!   doubles when half full); removes shift the rest of a probe run back,
//!   so there are no tombstones and lookups never slow down with churn;
//! - concurrency: mutation takes `&mut self`. Readers through
//!   [`OpenMap::raw_parts`] (generated code) hold raw pointers that any
//!   insert, remove or record change may invalidate (growth moves the
//!   slots): the owner must rebuild them after every change and never
//!   change the map while such a reader runs. Threads that look up
//!   concurrently each need their own copy.
//!
//! Why not a general hash map: the exact tables of common programs (MAC
//! learning and forwarding on 48-bit addresses, per-source policers on
//! IPv4 addresses) are looked up on every packet. With a library map the
//! compiled pipeline had to call into the engine for each of them; this
//! map is a flat array of 16-byte slots probed linearly from a
//! multiplicative (Fibonacci) hash, which a dozen generated instructions
//! can walk. Keys come from the control plane, so a hash without flooding
//! resistance is safe.

use hashbrown::HashMap;

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
    /// The owner's record id for this key (the engine's hot record of the
    /// entry), 0 until the owner sets one. Why here: generated code then
    /// goes from the slot straight to the record, without a load of the
    /// value's record id in between. It also pads the slot to 16 bytes.
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

    /// Bytes of its slots (what a lookup may touch).
    pub fn slot_bytes(&self) -> usize {
        std::mem::size_of_val(self.slots.as_slice())
    }

    /// `(slots, slot count - 1, shift)` for generated code's probe.
    pub fn raw_parts(&self) -> (*const Slot, u64, u32) {
        (self.slots.as_ptr(), self.mask() as u64, self.shift)
    }
}

/// Reads a big-endian byte string as a `u128` (its low 128 bits).
#[inline]
fn be_to_u128(bytes: &[u8]) -> u128 {
    let mut v: u128 = 0;
    for b in bytes {
        v = (v << 8) | *b as u128;
    }
    v
}

/// Exact keys of one length, given as big-endian bytes, to `u32` values
/// (any but [`EMPTY`]), in the form that suits the key length: keys of up
/// to 2 bytes (when asked for) index a direct array, keys of up to 8 bytes
/// go into an [`OpenMap`], keys of up to 16 into a library hash map of one
/// `u128`, longer ones into a hash map of byte strings.
///
/// Keys of at most 16 bytes can also be given as the integer their bytes
/// read big-endian ([`ExactMap::get_int`]): no byte string to build on the
/// packet path. Record ids ([`OpenMap::set_record`]) are kept where
/// generated code reads them: in the direct array's parallel array of
/// records and in the open-addressing slots; the library maps have none.
/// Same contract as [`OpenMap`] otherwise (`&mut self` to change; readers
/// through [`ExactMap::layout`] must not outlive a change).
#[derive(Debug, Clone)]
pub struct ExactMap(Form);

#[derive(Debug, Clone)]
enum Form {
    /// Keys of at most 2 bytes: arrays indexed by the key.
    Direct {
        /// Value per key, [`EMPTY`] where there is none.
        slots: Vec<u32>,
        /// Record id per key (0: none).
        records: Vec<u32>,
        /// Number of keys.
        count: usize,
    },
    /// Keys of at most 8 bytes: open addressing that generated code probes.
    Tiny(OpenMap),
    /// Keys of at most 16 bytes, as one integer (no pointer to chase, cheap hashing).
    Short(HashMap<u128, u32>),
    Long(HashMap<Box<[u8]>, u32>),
}

/// How an [`ExactMap`] holds its keys, for readers that probe it themselves.
#[derive(Debug, Clone, Copy)]
pub enum Layout<'a> {
    /// The key (as an integer) indexes `records`: the record id of each key
    /// (0 for no key or no record).
    Direct { records: &'a [u32] },
    /// Keys of up to 8 bytes, as integers, in open addressing.
    Open(&'a OpenMap),
    /// A library hash map: lookups go through [`ExactMap::get`].
    Hashed,
}

impl ExactMap {
    /// A map for keys of `key_len` bytes without a direct array: open
    /// addressing up to 8 bytes, else a hash map.
    pub fn hashed(key_len: usize) -> ExactMap {
        ExactMap(if key_len <= 8 {
            Form::Tiny(OpenMap::default())
        } else if key_len <= 16 {
            Form::Short(HashMap::new())
        } else {
            Form::Long(HashMap::new())
        })
    }

    /// A map for keys of `key_len` bytes, direct arrays (of `256^key_len`
    /// slots) for keys of up to 2 bytes, else as [`ExactMap::hashed`].
    pub fn new(key_len: usize) -> ExactMap {
        if key_len <= 2 {
            let n = 1 << (8 * key_len);
            ExactMap(Form::Direct { slots: vec![EMPTY; n], records: vec![0; n], count: 0 })
        } else {
            ExactMap::hashed(key_len)
        }
    }

    /// The value of key `k`.
    #[inline]
    pub fn get(&self, k: &[u8]) -> Option<u32> {
        match &self.0 {
            Form::Direct { slots, .. } => slots.get(be_to_u128(k) as usize).copied().filter(|h| *h != EMPTY),
            Form::Tiny(m) => m.get(be_to_u128(k) as u64),
            Form::Short(m) => m.get(&be_to_u128(k)).copied(),
            Form::Long(m) => m.get(k).copied(),
        }
    }

    /// Looks up a key given as an integer (its big-endian bytes); `None`
    /// for byte-string maps, whose keys are longer than an integer.
    #[inline]
    pub fn get_int(&self, k: u128) -> Option<Option<u32>> {
        match &self.0 {
            Form::Direct { slots, .. } => Some(slots.get(k as usize).copied().filter(|h| *h != EMPTY)),
            Form::Tiny(m) => Some(m.get(k as u64)),
            Form::Short(m) => Some(m.get(&k).copied()),
            Form::Long(_) => None,
        }
    }

    /// Sets key `k` to `v` (which must not be [`EMPTY`]); a key that does
    /// not fit a direct array is ignored. A changed value loses its record
    /// id.
    pub fn insert(&mut self, k: &[u8], v: u32) {
        match &mut self.0 {
            Form::Direct { slots, records, count } => {
                let at = be_to_u128(k) as usize;
                if let Some(slot) = slots.get_mut(at) {
                    if *slot == EMPTY {
                        *count += 1;
                    }
                    if *slot != v {
                        records[at] = 0;
                    }
                    *slot = v;
                }
            }
            Form::Tiny(m) => {
                m.insert(be_to_u128(k) as u64, v);
            }
            Form::Short(m) => {
                m.insert(be_to_u128(k), v);
            }
            Form::Long(m) => {
                m.insert(k.to_vec().into_boxed_slice(), v);
            }
        }
    }

    /// Removes key `k` (and its record id).
    pub fn remove(&mut self, k: &[u8]) {
        match &mut self.0 {
            Form::Direct { slots, records, count } => {
                let at = be_to_u128(k) as usize;
                if let Some(slot) = slots.get_mut(at) {
                    if *slot != EMPTY {
                        *count -= 1;
                    }
                    *slot = EMPTY;
                    records[at] = 0;
                }
            }
            Form::Tiny(m) => {
                m.remove(be_to_u128(k) as u64);
            }
            Form::Short(m) => {
                m.remove(&be_to_u128(k));
            }
            Form::Long(m) => {
                m.remove(k);
            }
        }
    }

    /// Calls `f(key as an integer, value)` for every key, when keys have
    /// at most 16 bytes (byte-string maps: no call).
    pub fn for_each_int(&self, mut f: impl FnMut(u128, u32)) {
        match &self.0 {
            Form::Direct { slots, .. } => {
                for (k, h) in slots.iter().enumerate() {
                    if *h != EMPTY {
                        f(k as u128, *h);
                    }
                }
            }
            Form::Tiny(m) => m.iter().for_each(|(k, h)| f(u128::from(k), h)),
            Form::Short(m) => m.iter().for_each(|(k, h)| f(*k, *h)),
            Form::Long(_) => {}
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        match &self.0 {
            Form::Direct { count, .. } => *count,
            Form::Tiny(m) => m.len(),
            Form::Short(m) => m.len(),
            Form::Long(m) => m.len(),
        }
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets the record id of key `k` where generated code reads it (direct
    /// arrays and open addressing; the hash maps have no such place).
    pub fn set_record(&mut self, k: &[u8], record: u32) {
        match &mut self.0 {
            Form::Direct { records, .. } => {
                if let Some(r) = records.get_mut(be_to_u128(k) as usize) {
                    *r = record;
                }
            }
            Form::Tiny(m) => m.set_record(be_to_u128(k) as u64, record),
            Form::Short(_) | Form::Long(_) => {}
        }
    }

    /// How the keys are held (see [`Layout`]).
    pub fn layout(&self) -> Layout<'_> {
        match &self.0 {
            Form::Direct { records, .. } => Layout::Direct { records },
            Form::Tiny(m) => Layout::Open(m),
            Form::Short(_) | Form::Long(_) => Layout::Hashed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_a_library_map_through_inserts_and_removes() {
        let mut next = crate::test_rng(99);
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

    #[test]
    fn every_form_of_exact_map_agrees_with_a_library_map() {
        let mut next = crate::test_rng(7);
        // 1 and 2 bytes: direct arrays; 6: open addressing; 12: one u128; 20: bytes.
        for (key_len, direct) in [(1usize, true), (2, true), (6, false), (12, false), (20, false)] {
            let mut ours = ExactMap::new(key_len);
            let mut theirs = std::collections::HashMap::new();
            assert_eq!(matches!(ours.layout(), Layout::Direct { .. }), direct, "{key_len}-byte keys");
            let key = |v: u32| {
                let mut k = vec![0u8; key_len];
                let b = v.to_be_bytes();
                let n = key_len.min(4);
                k[key_len - n..].copy_from_slice(&b[4 - n..]);
                k
            };
            for _ in 0..5000 {
                let k = key(next() % 300);
                if next().is_multiple_of(3) {
                    ours.remove(&k);
                    theirs.remove(&k);
                } else {
                    let v = next() % 1000;
                    ours.insert(&k, v);
                    ours.set_record(&k, v + 1);
                    theirs.insert(k, v);
                }
                assert_eq!(ours.len(), theirs.len());
            }
            for v in 0..300 {
                let k = key(v);
                let want = theirs.get(&k).copied();
                assert_eq!(ours.get(&k), want, "{key_len}-byte key {v}");
                if key_len <= 16 {
                    let int = k.iter().fold(0u128, |a, b| (a << 8) | u128::from(*b));
                    assert_eq!(ours.get_int(int), Some(want));
                }
                let record = match ours.layout() {
                    Layout::Direct { records } => Some(records[v as usize % records.len()]),
                    Layout::Open(m) => Some(m.record(u64::from(v))),
                    Layout::Hashed => None,
                };
                if let (Some(r), Some(w)) = (record, want) {
                    assert_eq!(r, w + 1, "record of {key_len}-byte key {v}");
                }
            }
            let mut all = Vec::new();
            ours.for_each_int(|k, v| all.push((k, v)));
            assert_eq!(all.len(), if key_len <= 16 { theirs.len() } else { 0 });
        }
    }
}
