//! The route-table template of a flow table: one longest-prefix-match
//! lookup instead of tuple-space search, for tables shaped like an IPv4
//! route table.
//!
//! The shape: every entry but one matches the same fields with the same
//! values (say `eth_type=0x0800`, or `in_port=1,eth_type=0x0800`) plus a
//! prefix of the IPv4 address slot of the full key (`ipv4_dst`, or
//! `arp_tpa` whose slot it shares; `/0`, no address field, counts as a
//! prefix), no two entries with the same prefix, and priorities that
//! never fall as prefixes lengthen (a longer prefix's priority is at
//! least a shorter one's); the remaining entry, if any, matches
//! everything at a priority no higher than any prefix entry's (a
//! table-miss entry). In such a table the best entry for a packet is the
//! longest prefix its address matches when it has the shared values, else
//! the match-everything entry: entries of equal priority that overlap are
//! left unordered by the specification, so the longest one is a valid
//! answer, and a longer prefix never has a lower priority.
//!
//! Contract: reads the entries a table adds and removes (classifier id,
//! priority, pattern); keeps whether they still have the shape and, once
//! the table runs on it, a [`DirLpm`] of their prefixes whose records are
//! classifier ids + 1. A lookup costs a masked compare of the few key
//! words the shared fields cover and one array read (two past /24), at an
//! address known from the key, so a batch prefetches it. The table
//! decides when to run on it (see [`crate::table::FlowTable`]): it starts
//! once enough entries have the shape, and an added entry that breaks the
//! shape sends the table back to its classifier until it empties.
//!
//! Memory: the [`DirLpm`] has 2 × 64 MiB of top-level address space,
//! touched where routes are; each replica (worker) has its own copy. So
//! small tables keep the classifier.

use std::collections::{BTreeMap, HashMap};

use sluice_lookup::lpm::DirLpm;

use crate::fields::{word, FullKey, FULL_LEN};
use crate::table::Pattern;

/// Full-key offset of the address the prefixes are on (`ipv4_dst` and `arp_tpa`).
pub const PREFIX_AT: usize = 40;

/// How one entry's pattern relates to the shape.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    /// Matches every packet.
    All,
    /// A prefix of the address (and whatever else it matches: the shared
    /// part, see [`same_shared`]).
    Prefix { addr: u32, len: u32 },
    /// Anything else.
    Other,
}

fn kind(p: &Pattern) -> Kind {
    if (0..FULL_LEN / 8).all(|w| word(&p.mask, w) == 0) {
        return Kind::All;
    }
    let am = u32::from_be_bytes(p.mask[PREFIX_AT..PREFIX_AT + 4].try_into().expect("4 bytes"));
    let len = am.leading_ones();
    if am.checked_shl(len).unwrap_or(0) != 0 {
        return Kind::Other;
    }
    let addr = u32::from_be_bytes(p.value[PREFIX_AT..PREFIX_AT + 4].try_into().expect("4 bytes"));
    Kind::Prefix { addr, len }
}

/// Whether `p` matches what `shared` does outside the address bytes.
fn same_shared(p: &Pattern, shared: &Pattern) -> bool {
    let outside =
        |a: &FullKey, b: &FullKey| a[..PREFIX_AT] == b[..PREFIX_AT] && a[PREFIX_AT + 4..] == b[PREFIX_AT + 4..];
    outside(&p.mask, &shared.mask) && outside(&p.value, &shared.value)
}

/// The prefix mask of length `len` over 32 bits.
fn mask_of(len: u32) -> u32 {
    u32::MAX.checked_shl(32 - len).unwrap_or(0)
}

/// Tags an entry can have: a record holds the classifier id plus one in
/// its low [`ID_BITS`] bits and the tag above (below `DirLpm`'s group bit).
pub const TAGS: u8 = 128;
const ID_BITS: u32 = 24;
const ID_MASK: u32 = (1 << ID_BITS) - 1;

/// The `DirLpm` record of entry `id` with `tag`.
fn record(id: u32, tag: u8) -> u32 {
    debug_assert!(id < ID_MASK && tag < TAGS);
    (id + 1) | (u32::from(tag) << ID_BITS)
}

/// A table's entries as the template sees them (see the module documentation).
#[derive(Debug, Clone, Default)]
pub struct PrefixShape {
    /// Whether some entry ever broke the shape (until the table empties).
    broken: bool,
    /// The pattern of a prefix entry, for the part they all share (none
    /// while there is none).
    shared: Option<Pattern>,
    /// Prefix entries by length: masked address → (classifier id,
    /// priority, tag).
    by_len: Vec<HashMap<u32, (u32, u16, u8)>>,
    /// Priorities of the prefix entries by length, with how many have each.
    priorities: Vec<BTreeMap<u16, u32>>,
    /// The match-everything entry: (classifier id, priority, tag).
    all: Option<(u32, u16, u8)>,
    /// Present while the table runs on the template.
    lpm: Option<Lpm>,
}

/// What lookups read.
#[derive(Debug, Clone)]
struct Lpm {
    dir: DirLpm,
    /// The shared part as (word index of the full key, mask, value) for
    /// every word it covers.
    words: Vec<(usize, u64, u64)>,
}

/// The words of the full key a lookup checks: every word the shared
/// part's mask covers outside the address, as (index, mask, value).
fn shared_words(shared: Option<&Pattern>) -> Vec<(usize, u64, u64)> {
    let Some(p) = shared else { return Vec::new() };
    let (mut m, mut v) = (*p.mask, *p.value);
    m[PREFIX_AT..PREFIX_AT + 4].fill(0);
    v[PREFIX_AT..PREFIX_AT + 4].fill(0);
    (0..FULL_LEN / 8).map(|w| (w, word(&m, w), word(&v, w))).filter(|x| x.1 != 0).collect()
}

impl PrefixShape {
    /// Whether the entries have the shape.
    pub fn holds(&self) -> bool {
        !self.broken
    }

    /// Whether the table runs on the template.
    pub fn running(&self) -> bool {
        self.lpm.is_some()
    }

    /// Number of prefix entries.
    pub fn prefixes(&self) -> usize {
        self.by_len.iter().map(HashMap::len).sum()
    }

    /// The lowest priority of a prefix entry and the highest.
    fn priority_range(&self) -> Option<(u16, u16)> {
        let lo = self.priorities.iter().filter_map(|m| m.keys().next()).min()?;
        let hi = self.priorities.iter().filter_map(|m| m.keys().next_back()).max()?;
        Some((*lo, *hi))
    }

    /// Notes entry `id` (classifier id) of `priority` and `pattern`, with
    /// `tag` (below [`TAGS`]: what lookups give with the id, see
    /// [`PrefixShape::lookup_tagged`]); false when it breaks the shape
    /// (then the template stops: the caller moves the table to its
    /// classifier).
    pub fn add(&mut self, id: u32, priority: u16, pattern: &Pattern, tag: u8) -> bool {
        if self.broken {
            return false;
        }
        let ok = match kind(pattern) {
            Kind::All => {
                let ok = self.all.is_none() && self.priority_range().is_none_or(|(lo, _)| priority <= lo);
                if ok {
                    self.all = Some((id, priority, tag));
                }
                ok
            }
            Kind::Prefix { addr, len } => self.add_prefix(id, priority, pattern, addr, len, tag),
            Kind::Other => false,
        };
        if !ok {
            *self = PrefixShape { broken: true, ..PrefixShape::default() };
        }
        ok
    }

    fn add_prefix(&mut self, id: u32, priority: u16, pattern: &Pattern, addr: u32, len: u32, tag: u8) -> bool {
        if self.by_len.is_empty() {
            self.by_len = vec![HashMap::new(); 33];
            self.priorities = vec![BTreeMap::new(); 33];
        }
        match &self.shared {
            Some(shared) if !same_shared(pattern, shared) => return false,
            Some(_) => {}
            None => {
                // The first prefix entry (again): lookups check its fields.
                self.shared = Some(pattern.clone());
                if let Some(lpm) = &mut self.lpm {
                    lpm.words = shared_words(self.shared.as_ref());
                }
            }
        }
        let l = len as usize;
        let shorter_ok = self.priorities[..l].iter().all(|m| m.keys().next_back().is_none_or(|p| *p <= priority));
        let longer_ok = self.priorities[l + 1..].iter().all(|m| m.keys().next().is_none_or(|p| *p >= priority));
        let below_all = self.all.is_none_or(|(_, p, _)| p <= priority);
        if !(shorter_ok && longer_ok && below_all) || self.by_len[l].contains_key(&addr) {
            return false;
        }
        self.by_len[l].insert(addr, (id, priority, tag));
        *self.priorities[l].entry(priority).or_insert(0) += 1;
        if let Some(lpm) = &mut self.lpm {
            lpm.dir.insert(addr, len, id, record(id, tag));
        }
        true
    }

    /// Gives entry `id` of `pattern` (one [`PrefixShape::add`] accepted)
    /// a new tag.
    pub fn retag(&mut self, id: u32, pattern: &Pattern, tag: u8) {
        if self.broken {
            return;
        }
        match kind(pattern) {
            Kind::All => {
                if let Some(a) = self.all.as_mut().filter(|a| a.0 == id) {
                    a.2 = tag;
                }
            }
            Kind::Prefix { addr, len } => {
                let Some(e) = self.by_len.get_mut(len as usize).and_then(|m| m.get_mut(&addr)) else { return };
                if e.0 == id {
                    e.2 = tag;
                    if let Some(lpm) = &mut self.lpm {
                        lpm.dir.insert(addr, len, id, record(id, tag));
                    }
                }
            }
            Kind::Other => {}
        }
    }

    /// Forgets entry `id` of `priority` and `pattern` (one [`PrefixShape::add`] accepted).
    pub fn remove(&mut self, id: u32, pattern: &Pattern) {
        if self.broken {
            return;
        }
        match kind(pattern) {
            Kind::All => {
                if self.all.is_some_and(|(a, _, _)| a == id) {
                    self.all = None;
                }
            }
            Kind::Prefix { addr, len } => {
                let l = len as usize;
                let Some((_, priority, _)) = self.by_len.get_mut(l).and_then(|m| m.remove(&addr)) else { return };
                if let Some(n) = self.priorities[l].get_mut(&priority) {
                    *n -= 1;
                    if *n == 0 {
                        self.priorities[l].remove(&priority);
                    }
                }
                if let Some(lpm) = &mut self.lpm {
                    // Only the lengths some entry has (a route table has few).
                    let cover = (0..l).rev().filter(|s| !self.by_len[*s].is_empty()).find_map(|s| {
                        let a = addr & mask_of(s as u32);
                        self.by_len[s].get(&a).map(|(cid, _, tag)| (*cid, s as u32, record(*cid, *tag)))
                    });
                    lpm.dir.remove(addr, len, id, cover);
                }
                if self.prefixes() == 0 {
                    self.shared = None;
                }
            }
            Kind::Other => {}
        }
    }

    /// Starts answering lookups: builds the LPM structure of the prefix entries.
    pub fn start(&mut self) {
        if self.broken || self.lpm.is_some() {
            return;
        }
        // Started from `PREFIX_MIN` entries on (table.rs): a large table, where huge pages pay.
        let mut dir = DirLpm::new_huge(32);
        for (len, m) in self.by_len.iter().enumerate() {
            for (addr, (id, _, tag)) in m {
                dir.insert(*addr, len as u32, *id, record(*id, *tag));
            }
        }
        self.lpm = Some(Lpm { dir, words: shared_words(self.shared.as_ref()) });
    }

    /// The classifier id of the best entry for the packet of `full` (running only).
    #[inline]
    pub fn lookup(&self, full: &FullKey) -> Option<u32> {
        self.lookup_tagged(full).map(|(id, _)| id)
    }

    /// [`PrefixShape::lookup`], with the entry's tag (read with the id,
    /// from the same slot).
    #[inline]
    pub fn lookup_tagged(&self, full: &FullKey) -> Option<(u32, u8)> {
        let lpm = self.lpm.as_ref()?;
        if lpm.words.iter().all(|&(w, m, v)| word(full, w) & m == v) {
            let addr = u32::from_be_bytes(full[PREFIX_AT..PREFIX_AT + 4].try_into().expect("4 bytes"));
            let r = lpm.dir.record(addr);
            if r != 0 {
                return Some(((r & ID_MASK) - 1, (r >> ID_BITS) as u8));
            }
        }
        self.all.map(|a| (a.0, a.2))
    }

    /// Starts loading what a lookup of `full` reads (running only; a hint).
    #[inline]
    pub fn prefetch(&self, full: &FullKey) {
        if let Some(lpm) = &self.lpm {
            let addr = u32::from_be_bytes(full[PREFIX_AT..PREFIX_AT + 4].try_into().expect("4 bytes"));
            lpm.dir.prefetch(addr, true);
        }
    }

    /// The classifier id of the entry of exactly `pattern` and `priority`.
    pub fn find(&self, pattern: &Pattern, priority: u16) -> Option<u32> {
        match kind(pattern) {
            Kind::All => self.all.filter(|a| a.1 == priority).map(|a| a.0),
            Kind::Prefix { addr, len } => {
                if !same_shared(pattern, self.shared.as_ref()?) {
                    return None;
                }
                self.by_len.get(len as usize)?.get(&addr).filter(|e| e.1 == priority).map(|e| e.0)
            }
            Kind::Other => None,
        }
    }

    /// A line saying what the template holds, for users (see `describe`
    /// of the table).
    pub fn describe(&self) -> String {
        let lens: Vec<String> = self
            .by_len
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.is_empty())
            .map(|(l, m)| format!("/{l}: {}", m.len()))
            .collect();
        format!(
            "longest-prefix match on the IPv4 address slot ({} prefixes: {}){}",
            self.prefixes(),
            lens.join(", "),
            if self.all.is_some() { ", then the match-everything entry" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_openflow::{Match, Oxm, OxmField};

    fn route(net: [u8; 4], len: u32) -> Pattern {
        let m = mask_of(len).to_be_bytes();
        Pattern::of(&Match {
            fields: vec![
                Oxm { field: OxmField::EthType, value: vec![8, 0], mask: None },
                Oxm { field: OxmField::Ipv4Dst, value: net.to_vec(), mask: Some(m.to_vec()) },
            ],
        })
    }

    fn key(ip: [u8; 4], eth_type: u16) -> FullKey {
        let mut k = [0u8; FULL_LEN];
        k[28..30].copy_from_slice(&eth_type.to_be_bytes());
        k[PREFIX_AT..PREFIX_AT + 4].copy_from_slice(&ip);
        k
    }

    #[test]
    fn longest_prefix_then_the_match_everything_entry() {
        let mut s = PrefixShape::default();
        assert!(s.add(0, 0, &Pattern::of(&Match::default()), 0));
        assert!(s.add(1, 8, &route([10, 0, 0, 0], 8), 0));
        assert!(s.add(2, 24, &route([10, 1, 2, 0], 24), 5));
        assert!(s.add(3, 32, &route([10, 1, 2, 3], 32), 0));
        s.start();
        assert_eq!(s.lookup_tagged(&key([10, 1, 2, 4], 0x800)), Some((2, 5)), "the tag comes with the id");
        assert_eq!(s.lookup(&key([10, 1, 2, 3], 0x800)), Some(3));
        assert_eq!(s.lookup(&key([10, 1, 2, 4], 0x800)), Some(2));
        assert_eq!(s.lookup(&key([10, 9, 2, 4], 0x800)), Some(1));
        assert_eq!(s.lookup(&key([11, 1, 2, 3], 0x800)), Some(0));
        assert_eq!(s.lookup(&key([10, 1, 2, 3], 0x806)), Some(0), "the shared eth_type is checked");
        // Added while running; removed with the next shorter route taking over.
        assert!(s.add(4, 16, &route([10, 1, 0, 0], 16), 0));
        assert_eq!(s.lookup(&key([10, 1, 9, 9], 0x800)), Some(4));
        s.retag(4, &route([10, 1, 0, 0], 16), 9);
        assert_eq!(s.lookup_tagged(&key([10, 1, 9, 9], 0x800)), Some((4, 9)), "a new tag reaches the slots");
        s.remove(2, &route([10, 1, 2, 0], 24));
        assert_eq!(s.lookup_tagged(&key([10, 1, 2, 4], 0x800)), Some((4, 9)), "the covering entry with its tag");
        assert_eq!(s.lookup(&key([10, 1, 2, 3], 0x800)), Some(3));
        assert_eq!(s.find(&route([10, 1, 0, 0], 16), 16), Some(4));
        assert_eq!(s.find(&route([10, 1, 0, 0], 16), 17), None);
        assert_eq!(s.find(&route([10, 1, 2, 0], 24), 24), None);
        assert_eq!(s.find(&Pattern::of(&Match::default()), 0), Some(0));
        // Every prefix removed, then one of other shared fields added: they
        // are what lookups check.
        for (id, net, len) in [(1, [10, 0, 0, 0], 8), (3, [10, 1, 2, 3], 32), (4, [10, 1, 0, 0], 16)] {
            s.remove(id, &route(net, len));
        }
        assert_eq!(s.prefixes(), 0);
        let mut arp = route([10, 0, 0, 0], 8);
        arp.value[29] = 6;
        assert!(s.add(5, 8, &arp, 0));
        assert_eq!(s.lookup(&key([10, 1, 2, 3], 0x806)), Some(5));
        assert_eq!(s.lookup(&key([10, 1, 2, 3], 0x800)), Some(0));
    }

    #[test]
    fn what_breaks_the_shape() {
        let fresh = || {
            let mut s = PrefixShape::default();
            assert!(s.add(1, 24, &route([10, 1, 2, 0], 24), 0));
            s
        };
        assert!(!fresh().add(2, 23, &route([10, 1, 2, 128], 25), 0), "a longer prefix of lower priority");
        assert!(!fresh().add(2, 25, &route([10, 1, 0, 0], 16), 0), "a shorter prefix of higher priority");
        assert!(!fresh().add(2, 30, &route([10, 1, 2, 0], 24), 0), "the same prefix twice");
        assert!(!fresh().add(2, 30, &Pattern::of(&Match::default()), 0), "a match-everything entry above a prefix");
        let udp = Pattern::of(&Match {
            fields: vec![
                Oxm { field: OxmField::EthType, value: vec![8, 0], mask: None },
                Oxm { field: OxmField::IpProto, value: vec![17], mask: None },
            ],
        });
        assert!(!fresh().add(2, 1, &udp, 0), "another field");
        let arp = Pattern::of(&Match {
            fields: vec![
                Oxm { field: OxmField::EthType, value: vec![8, 6], mask: None },
                Oxm { field: OxmField::ArpTpa, value: vec![10, 1, 2, 0], mask: Some(vec![255, 255, 255, 0]) },
            ],
        });
        assert!(!fresh().add(2, 24, &arp, 0), "another shared value");
        let holes = route([10, 0, 0, 0], 8);
        let mut holes = holes.clone();
        holes.mask[PREFIX_AT + 2] = 0xff;
        holes.value[PREFIX_AT + 2] = 5;
        assert!(!fresh().add(2, 24, &holes, 0), "a mask that is not a prefix");
        let mut s = fresh();
        assert!(s.add(2, 24, &route([10, 1, 3, 0], 24), 0), "same length and priority");
        assert!(s.add(3, 16, &route([10, 2, 0, 0], 16), 0), "shorter and lower");
        assert!(s.holds());
        assert!(!s.add(4, 3, &udp, 0));
        assert!(!s.holds() && !s.add(5, 24, &route([10, 1, 4, 0], 24), 0), "broken until emptied");
    }
}
