//! The binding table: which B4 owns which share of which IPv4 address.
//!
//! Contract: reads the configured softwires (and later additions and
//! removals); keeps per-address port-set parameters (psid-length,
//! reserved-ports-bit-count, how many softwires use the address) and the
//! softwires keyed by (ipv4, psid) → (b4-ipv6, br-address), each record in
//! its own hash slot (one cache line per lookup). Lookups never allocate;
//! both directions use the same table (encapsulation: the destination
//! address and port; decapsulation: the inner source address and port,
//! then the caller compares the B4 and BR addresses).
//!
//! Port-set arithmetic (RFC 7597 §5.1, as Snabb computes it): with k =
//! psid-length, a = reserved bits and m = 16 - k - a, `psid = (port >> m)
//! & (2^k - 1)`; when a > 0, ports below 2^a are reserved and match nothing.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use sluice_lookup::exact::{OpenMap, HASH_MUL};
use sluice_lookup::inline::InlineMap;
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

/// A softwire's record, kept in its slot of the softwire map (so that a
/// lookup reads one cache line): its B4 and the index of its BR address.
#[derive(Debug, Clone, Copy, Default)]
struct Binding {
    b4: [u8; 16],
    br: u32,
}

/// An address's port-set parameters and user count, packed in the `u32`
/// value of its address-map slot (read with the slot, no second access):
/// psid-length in bits 0-4, reserved-ports-bit-count in bits 5-9, the
/// number of softwires using the address above.
#[derive(Debug, Clone, Copy)]
struct AddrParams(u32);

impl AddrParams {
    fn new(k: u8, a: u8, users: u32) -> AddrParams {
        AddrParams(u32::from(k) | (u32::from(a) << 5) | (users << 10))
    }
    fn k(self) -> u32 {
        self.0 & 0x1f
    }
    fn a(self) -> u32 {
        (self.0 >> 5) & 0x1f
    }
    fn users(self) -> u32 {
        self.0 >> 10
    }
}

/// The table (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct BindingTable {
    /// ipv4 → its [`AddrParams`].
    addrs: OpenMap,
    /// `ipv4 << 16 | psid` → the softwire's [`Binding`].
    softwires: InlineMap<Binding>,
    /// The BR addresses softwires name (few: usually one), by index. An
    /// address stays listed once added (bounded by the distinct addresses
    /// ever configured).
    brs: Vec<[u8; 16]>,
    br_index: HashMap<[u8; 16], u32>,
}

/// Slot bytes below which the table is taken to stay in the core's cache
/// (a quarter of the smallest per-core L2 of the machines Sluice targets,
/// 1 MiB, leaving room for the frames and the rest of the plane).
pub const CACHED_BYTES: usize = 256 << 10;

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
        let params = self.addrs.get(u64::from(ip)).map(AddrParams);
        if let Some(p) = params {
            if p.k() != u32::from(k) || p.a() != u32::from(a) {
                return Err(format!(
                    "softwire {} psid {}: port set differs from the other softwires of {}",
                    s.ipv4, s.psid, s.ipv4
                ));
            }
        }
        let br = s.br_address.octets();
        let br = *self.br_index.entry(br).or_insert_with(|| {
            self.brs.push(br);
            (self.brs.len() - 1) as u32
        });
        let existed = self.softwires.insert(key(ip, s.psid), Binding { b4: s.b4_ipv6.octets(), br }).is_some();
        if !existed {
            let users = params.map_or(0, AddrParams::users) + 1;
            self.addrs.insert(u64::from(ip), AddrParams::new(k, a, users).0);
        }
        Ok(())
    }

    /// Removes softwire (ipv4, psid); returns whether it existed.
    pub fn remove(&mut self, ipv4: Ipv4Addr, psid: u16) -> bool {
        let ip = u32::from(ipv4);
        if self.softwires.remove(key(ip, psid)).is_none() {
            return false;
        }
        if let Some(p) = self.addrs.get(u64::from(ip)).map(AddrParams) {
            if p.users() <= 1 {
                self.addrs.remove(u64::from(ip));
            } else {
                self.addrs.insert(u64::from(ip), p.0 - (1 << 10));
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
    #[inline(always)]
    pub fn psid(&self, ipv4: u32, port: u16) -> Option<u16> {
        let p = AddrParams(self.addrs.get(u64::from(ipv4))?);
        let (k, a) = (p.k(), p.a());
        if a > 0 && u32::from(port) < (1u32 << a) {
            return None;
        }
        let m = 16 - k - a;
        let mask = ((1u32 << k) - 1) as u16;
        Some(((u32::from(port) >> m) as u16) & mask)
    }

    /// The softwire serving (`ipv4`, `port`). Inlined: the caller keeps
    /// the fields it reads in registers instead of a copy of the entry.
    #[inline(always)]
    pub fn lookup(&self, ipv4: u32, port: u16) -> Option<Entry> {
        let psid = self.psid(ipv4, port)?;
        let b = self.softwires.get(key(ipv4, psid))?;
        Some(Entry { b4: b.b4, br: self.brs[b.br as usize], ipv4, psid })
    }

    /// The softwire (`ipv4`, `psid`) itself.
    pub fn get(&self, ipv4: Ipv4Addr, psid: u16) -> Option<(Ipv6Addr, Ipv6Addr)> {
        let b = self.softwires.get(key(u32::from(ipv4), psid))?;
        Some((Ipv6Addr::from(b.b4), Ipv6Addr::from(self.brs[b.br as usize])))
    }

    /// Whether batched lookups should prefetch: the slots a lookup may
    /// touch outgrow [`CACHED_BYTES`]. Below that they stay cached between
    /// batches and a prefetch pass is pure cost (it hashes every key once
    /// more: measured at a third of the lookup's time on a 12-softwire
    /// table).
    pub fn worth_prefetching(&self) -> bool {
        self.addrs.slot_bytes() + self.softwires.slot_bytes() > CACHED_BYTES
    }

    /// Starts loading the slot where `ipv4`'s port-set parameters live
    /// (first step of a batched lookup; a hint, no effect on results).
    #[inline]
    pub fn prefetch_addr(&self, ipv4: u32) {
        let (slots, _, shift) = self.addrs.raw_parts();
        let home = (u64::from(ipv4).wrapping_mul(HASH_MUL) >> shift) as usize;
        prefetch_ptr(slots.wrapping_add(home).cast());
    }

    /// Starts loading the slot of the softwire serving (`ipv4`, `port`),
    /// which holds its record (second step, once the address's parameters
    /// are likely cached).
    #[inline]
    pub fn prefetch_softwire(&self, ipv4: u32, port: u16) {
        if let Some(psid) = self.psid(ipv4, port) {
            self.softwires.prefetch(key(ipv4, psid));
        }
    }

    /// Whether any softwire has address `ipv4` (the hairpin test).
    #[inline]
    pub fn is_managed(&self, ipv4: u32) -> bool {
        self.addrs.get(u64::from(ipv4)).is_some()
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
