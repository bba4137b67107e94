//! Reassembly of IPv4 and IPv6 fragments, the first stage after untagging
//! on each side (Snabb reassembles everything, whatever the destination).
//!
//! Contract: [`Reassembler::push`] reads one untagged frame already known
//! to be a fragment of its family; it keeps partial packets keyed by
//! (source, destination, ID), at most `max-packets` of them (a new one
//! evicts an old one when full) and at most `max-fragments-per-packet`
//! fragments each. A completed packet is left in [`Reassembler::packet`]:
//! Ethernet and L3 header of the first-arriving fragment; IPv4 with ID 0,
//! no flags, new total length and checksum; IPv6 with the fragment header
//! removed and the payload length set. Failures drop the partial packet.

use std::collections::HashMap;

use crate::frame::*;

/// Largest reassembled frame (Snabb's packet size).
pub const MAX_PACKET: usize = 10240;

/// What became of a fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Kept, its packet is not complete yet.
    Held,
    /// Its packet is complete: see [`Reassembler::packet`].
    Done,
    /// Its packet cannot be reassembled: dropped with its fragments.
    Invalid,
    /// Not a well-formed fragment (dropped, not counted by Snabb).
    Malformed,
}

type Key = [u8; 36];

#[derive(Debug, Clone)]
struct Partial {
    header: Vec<u8>,
    pieces: Vec<(usize, usize)>,
    data: Vec<u8>,
    final_end: Option<usize>,
    running: usize,
    highest: usize,
    next_header: u8,
}

/// A reassembly table for one family.
#[derive(Debug, Clone)]
pub struct Reassembler {
    v6: bool,
    max_frags: usize,
    max_packets: usize,
    table: HashMap<Key, Partial>,
    out: Vec<u8>,
    /// Partial packets evicted since the last call of [`Reassembler::take_evicted`].
    evicted: u64,
}

impl Reassembler {
    /// A table for IPv6 (`v6`) or IPv4 with the configured limits.
    pub fn new(v6: bool, max_frags: u32, max_packets: u32) -> Reassembler {
        Reassembler {
            v6,
            max_frags: max_frags.max(1) as usize,
            max_packets: max_packets as usize,
            table: HashMap::new(),
            out: Vec::new(),
            evicted: 0,
        }
    }

    /// An empty table with the same limits (for another replica).
    pub fn fresh(&self) -> Reassembler {
        Reassembler {
            v6: self.v6,
            max_frags: self.max_frags,
            max_packets: self.max_packets,
            table: HashMap::new(),
            out: Vec::new(),
            evicted: 0,
        }
    }

    /// The packet the last [`Outcome::Done`] completed.
    pub fn packet(&self) -> &[u8] {
        &self.out
    }

    /// Evictions since the last call.
    pub fn take_evicted(&mut self) -> u64 {
        std::mem::take(&mut self.evicted)
    }

    /// Takes fragment frame `f` (untagged; IPv4 with a checked length, or
    /// IPv6 whose next header is 44).
    pub fn push(&mut self, f: &[u8]) -> Outcome {
        let l3 = &f[ETH..];
        let mut key = [0u8; 36];
        let (hlen, start, data, more, nh) = if self.v6 {
            if l3.len() < IPV6 + 8 {
                return Outcome::Malformed;
            }
            let plen = usize::from(u16::from_be_bytes([l3[4], l3[5]]));
            if plen < 8 || IPV6 + plen > l3.len() {
                return Outcome::Malformed;
            }
            key[..32].copy_from_slice(&l3[8..40]);
            key[32..].copy_from_slice(&l3[44..48]);
            let off = u16::from_be_bytes([l3[42], l3[43]]);
            (IPV6, usize::from(off & 0xfff8), &l3[IPV6 + 8..IPV6 + plen], off & 1 != 0, l3[40])
        } else {
            let Some(h) = Ipv4::parse(l3) else { return Outcome::Malformed };
            if h.total > l3.len() || h.total < h.ihl {
                return Outcome::Malformed;
            }
            key[..8].copy_from_slice(&l3[12..20]);
            key[8..10].copy_from_slice(&l3[4..6]);
            (h.ihl, usize::from(h.frag & 0x1fff) * 8, &l3[h.ihl..h.total], h.frag & 0x2000 != 0, h.proto)
        };
        if !self.table.contains_key(&key) {
            if self.table.len() >= self.max_packets {
                if self.max_packets == 0 {
                    return Outcome::Invalid;
                }
                let victim = *self.table.keys().next().expect("table is full");
                self.table.remove(&victim);
                self.evicted += 1;
            }
            self.table.insert(
                key,
                Partial {
                    header: f[..ETH + hlen].to_vec(),
                    pieces: Vec::new(),
                    data: Vec::new(),
                    final_end: None,
                    running: 0,
                    highest: 0,
                    next_header: nh,
                },
            );
        }
        let p = self.table.get_mut(&key).expect("inserted above");
        let end = start + data.len();
        let bad =
            p.pieces.len() >= self.max_frags || (!more && p.final_end.is_some()) || p.header.len() + end > MAX_PACKET;
        if bad {
            self.table.remove(&key);
            return Outcome::Invalid;
        }
        p.pieces.push((start, end));
        if !more {
            p.final_end = Some(end);
        }
        if p.data.len() < end {
            p.data.resize(end, 0);
        }
        p.data[start..end].copy_from_slice(data);
        p.running += data.len();
        p.highest = p.highest.max(end);
        if p.final_end.is_none() || p.running != p.highest {
            return Outcome::Held;
        }
        let mut p = self.table.remove(&key).expect("present");
        p.pieces.sort_unstable();
        let mut at = 0;
        for &(s, e) in &p.pieces {
            if s != at {
                return Outcome::Invalid;
            }
            at = e;
        }
        if Some(at) != p.final_end {
            return Outcome::Invalid;
        }
        self.out.clear();
        self.out.extend_from_slice(&p.header);
        self.out.extend_from_slice(&p.data[..at]);
        let ip = &mut self.out[ETH..];
        if self.v6 {
            put16(ip, 4, at as u16);
            ip[6] = p.next_header;
        } else {
            put16(ip, 2, (hlen + at) as u16);
            put16(ip, 4, 0);
            put16(ip, 6, 0);
            set_ipv4_checksum(&mut ip[..hlen]);
        }
        Outcome::Done
    }
}
