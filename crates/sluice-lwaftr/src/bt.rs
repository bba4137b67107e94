//! The binding table: which B4 owns which share of which IPv4 address.
//!
//! Contract: reads the configured softwires (and later additions and
//! removals); keeps per-address port-set parameters (psid-length,
//! reserved-ports-bit-count, how many softwires use the address) and the
//! softwires keyed by (ipv4, psid) → (b4-ipv6, br-address). Lookups never
//! allocate; both directions use the same table (encapsulation: the
//! destination address and port; decapsulation: the inner source address
//! and port, then the caller compares the B4 and BR addresses).
//!
//! Port-set arithmetic (RFC 7597 §5.1, as Snabb computes it): with k =
//! psid-length, a = reserved bits and m = 16 - k - a, `psid = (port >> m)
//! & (2^k - 1)`; when a > 0, ports below 2^a are reserved and match nothing.

use std::net::{Ipv4Addr, Ipv6Addr};

use sluice_lookup::exact::{OpenMap, HASH_MUL};
use sluice_lookup::lpm::prefetch_ptr;

use crate::conf::{PortSet, Softwire};

/// What a softwire lookup returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The B4's tunnel endpoint.
    pub b4: [u8; 16],
    /// The lwAFTR's tunnel endpoint for this softwire.
    pub br: [u8; 16],
    /// The softwire's IPv4 address (host order).
    pub ipv4: u32,
    /// Its PSID.
    pub psid: u16,
}

#[derive(Debug, Clone, Copy)]
struct AddrParams {
    k: u8,
    a: u8,
    /// Softwires using the address.
    users: u32,
}

/// The table (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct BindingTable {
    /// ipv4 → index into `addrs`.
    addr_index: OpenMap,
    addrs: Vec<AddrParams>,
    free_addrs: Vec<u32>,
    /// `ipv4 << 16 | psid` → index into `entries`.
    softwires: OpenMap,
    entries: Vec<Entry>,
    free_entries: Vec<u32>,
}

fn key(ipv4: u32, psid: u16) -> u64 {
    (u64::from(ipv4) << 16) | u64::from(psid)
}

impl BindingTable {
    /// A table holding `softwires` (in order; an error names the first
    /// inconsistent one).
    pub fn new(softwires: &[Softwire]) -> Result<BindingTable, String> {
        let mut bt = BindingTable::default();
        for s in softwires {
            bt.add(s)?;
        }
        Ok(bt)
    }

    /// Adds (or replaces) one softwire. Errors: a port set inconsistent
    /// with the other softwires of the same address, or a PSID out of range.
    pub fn add(&mut self, s: &Softwire) -> Result<(), String> {
        let PortSet { psid_length: k, reserved_ports_bit_count: a } = s.port_set;
        if u32::from(k) + u32::from(a) > 16 {
            return Err(format!("softwire {} psid {}: psid-length + reserved-ports-bit-count > 16", s.ipv4, s.psid));
        }
        if u32::from(s.psid) >= (1u32 << k) {
            return Err(format!("softwire {} psid {}: psid does not fit psid-length {k}", s.ipv4, s.psid));
        }
        let ip = u32::from(s.ipv4);
        let entry = Entry { b4: s.b4_ipv6.octets(), br: s.br_address.octets(), ipv4: ip, psid: s.psid };
        if let Some(ai) = self.addr_index.get(u64::from(ip)) {
            let p = self.addrs[ai as usize];
            if p.k != k || p.a != a {
                return Err(format!(
                    "softwire {} psid {}: port set differs from the other softwires of {}",
                    s.ipv4, s.psid, s.ipv4
                ));
            }
        }
        if let Some(i) = self.softwires.get(key(ip, s.psid)) {
            self.entries[i as usize] = entry;
            return Ok(());
        }
        let i = store(&mut self.entries, &mut self.free_entries, entry);
        self.softwires.insert(key(ip, s.psid), i);
        match self.addr_index.get(u64::from(ip)) {
            Some(ai) => self.addrs[ai as usize].users += 1,
            None => {
                let p = AddrParams { k, a, users: 1 };
                let ai = store(&mut self.addrs, &mut self.free_addrs, p);
                self.addr_index.insert(u64::from(ip), ai);
            }
        }
        Ok(())
    }

    /// Removes softwire (ipv4, psid); returns whether it existed.
    pub fn remove(&mut self, ipv4: Ipv4Addr, psid: u16) -> bool {
        let ip = u32::from(ipv4);
        let Some(i) = self.softwires.remove(key(ip, psid)) else { return false };
        self.free_entries.push(i);
        if let Some(ai) = self.addr_index.get(u64::from(ip)) {
            let p = &mut self.addrs[ai as usize];
            p.users -= 1;
            if p.users == 0 {
                self.addr_index.remove(u64::from(ip));
                self.free_addrs.push(ai);
            }
        }
        true
    }

    /// Number of softwires.
    pub fn len(&self) -> usize {
        self.softwires.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.softwires.is_empty()
    }

    /// The PSID `port` maps to on `ipv4`: `None` for an unknown address or
    /// a reserved port.
    #[inline]
    pub fn psid(&self, ipv4: u32, port: u16) -> Option<u16> {
        let ai = self.addr_index.get(u64::from(ipv4))?;
        let p = self.addrs[ai as usize];
        let m = 16 - u32::from(p.k) - u32::from(p.a);
        if p.a > 0 && u32::from(port) < (1u32 << p.a) {
            return None;
        }
        let mask = ((1u32 << p.k) - 1) as u16;
        Some(((u32::from(port) >> m) as u16) & mask)
    }

    /// The softwire serving (`ipv4`, `port`).
    #[inline]
    pub fn lookup(&self, ipv4: u32, port: u16) -> Option<&Entry> {
        let psid = self.psid(ipv4, port)?;
        let i = self.softwires.get(key(ipv4, psid))?;
        Some(&self.entries[i as usize])
    }

    /// The softwire (`ipv4`, `psid`) itself.
    pub fn get(&self, ipv4: Ipv4Addr, psid: u16) -> Option<(Ipv6Addr, Ipv6Addr)> {
        let i = self.softwires.get(key(u32::from(ipv4), psid))?;
        let e = &self.entries[i as usize];
        Some((Ipv6Addr::from(e.b4), Ipv6Addr::from(e.br)))
    }

    /// Starts loading the slot where `ipv4`'s port-set parameters live
    /// (first step of a batched lookup; a hint, no effect on results).
    #[inline]
    pub fn prefetch_addr(&self, ipv4: u32) {
        prefetch_home(&self.addr_index, u64::from(ipv4));
    }

    /// Starts loading the slot of the softwire serving (`ipv4`, `port`)
    /// (second step, once the address's parameters are likely cached).
    #[inline]
    pub fn prefetch_softwire(&self, ipv4: u32, port: u16) {
        if let Some(psid) = self.psid(ipv4, port) {
            prefetch_home(&self.softwires, key(ipv4, psid));
        }
    }

    /// Starts loading the record of the softwire serving (`ipv4`, `port`)
    /// (third step, once its slot is likely cached).
    #[inline]
    pub fn prefetch_entry(&self, ipv4: u32, port: u16) {
        if let Some(i) = self.psid(ipv4, port).and_then(|psid| self.softwires.get(key(ipv4, psid))) {
            prefetch_ptr(self.entries.as_ptr().wrapping_add(i as usize).cast());
        }
    }

    /// Whether any softwire has address `ipv4` (the hairpin test).
    #[inline]
    pub fn is_managed(&self, ipv4: u32) -> bool {
        self.addr_index.get(u64::from(ipv4)).is_some()
    }
}

/// Prefetches the home slot of `key` in `map` (never dereferenced here:
/// prefetching an address cannot fault).
#[inline(always)]
fn prefetch_home(map: &OpenMap, key: u64) {
    let (slots, _, shift) = map.raw_parts();
    let home = (key.wrapping_mul(HASH_MUL) >> shift) as usize;
    prefetch_ptr(slots.wrapping_add(home).cast());
}

/// Puts `item` in a slot of `items` freed earlier (listed in `free`), or at
/// the end; returns its index.
fn store<T>(items: &mut Vec<T>, free: &mut Vec<u32>, item: T) -> u32 {
    match free.pop() {
        Some(i) => {
            items[i as usize] = item;
            i
        }
        None => {
            items.push(item);
            (items.len() - 1) as u32
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sw(ip: &str, psid: u16, k: u8, a: u8, b4: &str) -> Softwire {
        Softwire {
            ipv4: ip.parse().unwrap(),
            psid,
            b4_ipv6: b4.parse().unwrap(),
            br_address: "8:9:a:b:c:d:e:f".parse().unwrap(),
            padding: 0,
            port_set: PortSet { psid_length: k, reserved_ports_bit_count: a },
        }
    }

    fn ip(s: &str) -> u32 {
        u32::from(s.parse::<Ipv4Addr>().unwrap())
    }

    #[test]
    fn psids_of_the_corpus_table() {
        let bt = BindingTable::new(&[
            sw("178.79.150.233", 80, 16, 0, "127:2:3:4:5:6:7:128"),
            sw("178.79.150.15", 0, 4, 0, "127:22:33:44:55:66:77:128"),
            sw("178.79.150.15", 1, 4, 0, "127:22:33:44:55:66:77:128"),
            sw("178.79.150.1", 0, 0, 0, "127:10:20:30:40:50:60:128"),
            sw("178.79.150.3", 4, 6, 0, "127:14:25:36:47:58:69:128"),
        ])
        .unwrap();
        assert_eq!(bt.psid(ip("178.79.150.233"), 80), Some(80));
        assert_eq!(bt.psid(ip("178.79.150.15"), 2300), Some(0));
        assert_eq!(bt.psid(ip("178.79.150.15"), 4096), Some(1));
        assert_eq!(bt.psid(ip("178.79.150.1"), 65535), Some(0));
        assert_eq!(bt.psid(ip("178.79.150.3"), 4096), Some(4));
        assert_eq!(bt.psid(ip("178.79.150.3"), 5119), Some(4));
        assert!(bt.lookup(ip("178.79.150.3"), 5120).is_none());
        assert!(bt.lookup(ip("178.79.150.233"), 81).is_none());
        assert!(bt.lookup(ip("1.2.3.4"), 80).is_none());
        assert!(bt.is_managed(ip("178.79.150.233")));
        assert!(!bt.is_managed(ip("178.79.150.234")));
    }

    #[test]
    fn reserved_ports_and_removal() {
        let mut bt = BindingTable::new(&[sw("10.0.0.1", 1, 6, 4, "::1")]).unwrap();
        // m = 6: psid 1 = ports 64..127; ports below 16 reserved.
        assert_eq!(bt.lookup(ip("10.0.0.1"), 64).map(|e| e.psid), Some(1));
        assert_eq!(bt.psid(ip("10.0.0.1"), 15), None);
        assert!(bt.add(&sw("10.0.0.1", 2, 5, 4, "::2")).is_err());
        assert!(bt.remove("10.0.0.1".parse().unwrap(), 1));
        assert!(!bt.is_managed(ip("10.0.0.1")));
        assert!(bt.lookup(ip("10.0.0.1"), 64).is_none());
        bt.add(&sw("10.0.0.1", 2, 5, 4, "::2")).unwrap();
        assert!(bt.is_managed(ip("10.0.0.1")));
    }
}
