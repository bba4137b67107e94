//! The learning switch's address table: MAC address to port, one per
//! switch, whose slot for an address can be loaded ahead of the lookup.
//!
//! Contract: [`MacTable::insert`] and [`MacTable::get`] as a map of 48-bit
//! addresses to `u32` ports; [`MacTable::prefetch`] starts loading the
//! cache line where an address's probe begins (a hint, no effect on
//! results), so that a batch of packet-ins can have every lookup's load in
//! flight before the first lookup waits on one. Open addressing: 16-byte
//! slots probed linearly, at most half of them used (a hit reads about 1.5
//! slots, one cache line mostly); the home slot comes from the address
//! hashed with a key drawn per table (foldhash, hashbrown's default
//! hasher), so hosts that choose their MAC addresses cannot aim at one
//! probe run. Growth doubles the slots; there are no removals (a full
//! table is cleared by its owner).
//!
//! Why not hashbrown's map, which it replaces: a learning switch under
//! load hits a random address of a table far larger than the caches on
//! every packet-in, and a library map neither says where a key's slot is
//! before looking it up nor keeps key and value in one line (hashbrown
//! reads a control byte, then the entry: two misses in a row).

use std::hash::BuildHasher;

use hashbrown::DefaultHashBuilder;

/// A slot's key when it is empty (never a 48-bit address).
const EMPTY: u64 = u64::MAX;

#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Slot {
    mac: u64,
    port: u32,
}

const EMPTY_SLOT: Slot = Slot { mac: EMPTY, port: 0 };

/// See the module documentation.
pub struct MacTable {
    /// A power of two of slots, at most half of them used.
    slots: Vec<Slot>,
    len: usize,
    hasher: DefaultHashBuilder,
}

impl Default for MacTable {
    fn default() -> MacTable {
        MacTable { slots: vec![EMPTY_SLOT; 64], len: 0, hasher: DefaultHashBuilder::default() }
    }
}

/// The address's 6 bytes as one number.
#[inline]
pub fn mac_key(mac: &[u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[2..].copy_from_slice(mac);
    u64::from_be_bytes(b)
}

impl MacTable {
    #[inline]
    fn home(&self, mac: u64) -> usize {
        (self.hasher.hash_one(mac) as usize) & (self.slots.len() - 1)
    }

    /// The slot holding `mac`, or the empty slot ending its probe run.
    #[inline]
    fn find(&self, mac: u64) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(mac);
        loop {
            let s = self.slots[i].mac;
            if s == mac || s == EMPTY {
                return i;
            }
            i = (i + 1) & mask;
        }
    }

    /// Starts loading the line where `mac`'s probe begins.
    #[inline]
    pub fn prefetch(&self, mac: u64) {
        sluice_lookup::lpm::prefetch(&self.slots[self.home(mac)]);
    }

    /// The port learned for `mac`.
    #[inline]
    pub fn get(&self, mac: u64) -> Option<u32> {
        let s = self.slots[self.find(mac)];
        (s.mac != EMPTY).then_some(s.port)
    }

    /// Learns (or moves) `mac` on `port`.
    pub fn insert(&mut self, mac: u64, port: u32) {
        debug_assert!(mac < 1 << 48, "a 48-bit address");
        let i = self.find(mac);
        if self.slots[i].mac == mac {
            self.slots[i].port = port;
            return;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
            let i = self.find(mac);
            self.slots[i] = Slot { mac, port };
        } else {
            self.slots[i] = Slot { mac, port };
        }
        self.len += 1;
    }

    fn grow(&mut self) {
        let bigger = vec![EMPTY_SLOT; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        for s in old.into_iter().filter(|s| s.mac != EMPTY) {
            let i = self.find(s.mac);
            self.slots[i] = s;
        }
    }

    /// Whether `mac` is learned.
    pub fn contains(&self, mac: u64) -> bool {
        self.get(mac).is_some()
    }

    /// Addresses learned.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is learned.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Forgets every address (the slots are kept).
    pub fn clear(&mut self) {
        self.slots.fill(EMPTY_SLOT);
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learns_moves_and_grows_like_a_map() {
        let mut t = MacTable::default();
        let mut model = std::collections::HashMap::new();
        let mut x: u64 = 0x1234_5678;
        for n in 0..20_000u32 {
            // A mix of new addresses and ones seen before.
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let mac = (x >> 16) % if n % 3 == 0 { 500 } else { 1 << 48 };
            t.prefetch(mac);
            t.insert(mac, n);
            model.insert(mac, n);
        }
        assert_eq!(t.len(), model.len());
        for (mac, port) in &model {
            assert_eq!(t.get(*mac), Some(*port));
        }
        assert_eq!(t.get(1 << 47), model.get(&(1 << 47)).copied());
        assert!(t.slots.len() >= 2 * t.len(), "at most half full");
        t.clear();
        assert!(t.is_empty() && !t.contains(*model.keys().next().unwrap()));
        assert_eq!(mac_key(&[0x80, 0, 0, 0, 0, 1]), 0x8000_0000_0001);
    }
}
