//! The hand-written reference: `examples/router.p4`'s logic written directly
//! in Rust, with no P4 engine underneath.
//!
//! Why: it is the ceiling every engine benchmark is compared with. The engine
//! runs the same program loaded from JSON; this file is what a careful
//! programmer would write by hand for the same behaviour, so the ratio
//! engine / reference says how much the P4 machinery costs.
//!
//! It is deliberately independent of `sluice-engine` (its own DIR-24-8, its
//! own next-hop array) and does per packet exactly what the P4 program does:
//! - parse Ethernet, then IPv4 (ethertype 0x0800) or IPv6 (0x86dd);
//! - verify the IPv4 header checksum when IHL is 5 (a bad one drops);
//! - count packets and bytes per ingress port (512 cells);
//! - TTL / hop limit <= 1 drops, otherwise decrement;
//! - longest-prefix match on the destination picks a next hop id (a miss
//!   marks the packet dropped and leaves the id 0);
//! - the next-hop table (exact on the id) sets the egress port and rewrites
//!   both MAC addresses; a miss drops;
//! - the IPv4 checksum is updated (incrementally, RFC 1624 eqn. 3, which gives
//!   the same value as recomputing it when the old one was verified);
//! - the frame is written to an output buffer and handed to `emit`.
//!
//! Batches are processed in two passes, as a hand-tuned data plane would:
//! the first reads every destination address and prefetches its DIR-24-8
//! slot, the second does the work, so the memory latency of big route tables
//! overlaps.
//!
//! The bench harness runs it for its comparison (see the crate doc), and
//! `sluice`'s criterion benchmark (`crates/sluice/benches/pipeline.rs`)
//! uses it too, so both compare with the same code.

use std::collections::HashMap;

/// Egress port value that means "drop" (v1model's `mark_to_drop`).
const DROP: u16 = 511;

/// One next hop: egress port and the two MAC addresses it writes.
#[derive(Clone, Copy)]
struct NextHop {
    port: u16,
    src: [u8; 6],
    dst: [u8; 6],
}

/// A DIR-24-8 IPv4 route table: one slot per /24, with 256-slot extension
/// groups for longer prefixes. A slot holds 0 (no route), a next hop id + 1
/// with the prefix length in bits 16..22, or `GROUP | group index`.
struct Dir24 {
    tbl24: Vec<u32>,
    tbl8: Vec<u32>,
}

const GROUP: u32 = 1 << 31;

impl Dir24 {
    fn new() -> Dir24 {
        // Advised into 2 MiB pages before anything is written, so the
        // kernel backs it with them: with 4 KiB pages a lookup at random in
        // 64 MiB misses the TLB too. (The helper is only the kernel hint,
        // no lookup logic. The engine's top level moves into huge pages
        // once its table is large.)
        let tbl24 = vec![0; 1 << 24];
        sluice_lookup::mem::advise_huge_pages(&tbl24);
        Dir24 { tbl24, tbl8: Vec::new() }
    }

    fn depth(slot: u32) -> u32 {
        (slot >> 16) & 0x7f
    }

    /// Adds routes; all at once, shortest prefixes first, so longer ones overwrite.
    fn build(&mut self, mut routes: Vec<(u32, u8, u16)>) {
        routes.sort_by_key(|r| r.1);
        for (net, len, nh) in routes {
            let len = u32::from(len.min(32));
            let net = if len == 0 { 0 } else { net & (u32::MAX << (32 - len)) };
            let val = (u32::from(nh) + 1) | (len << 16);
            if len <= 24 {
                let first = (net >> 8) as usize;
                let n = 1usize << (24 - len);
                for s in first..first + n {
                    let cur = self.tbl24[s];
                    if cur & GROUP != 0 {
                        let g = (cur & !GROUP) as usize * 256;
                        for e in &mut self.tbl8[g..g + 256] {
                            if Self::depth(*e) <= len {
                                *e = val;
                            }
                        }
                    } else {
                        self.tbl24[s] = val;
                    }
                }
            } else {
                let s = (net >> 8) as usize;
                let cur = self.tbl24[s];
                let g = if cur & GROUP != 0 {
                    (cur & !GROUP) as usize
                } else {
                    let g = self.tbl8.len() / 256;
                    self.tbl8.extend(std::iter::repeat_n(cur, 256));
                    self.tbl24[s] = GROUP | g as u32;
                    g
                };
                let first = g * 256 + (net & 0xff) as usize;
                for e in &mut self.tbl8[first..first + (1usize << (32 - len))] {
                    *e = val;
                }
            }
        }
    }

    #[inline(always)]
    fn prefetch(&self, addr: u32) {
        prefetch(&self.tbl24[(addr >> 8) as usize]);
    }

    /// The next hop id of the longest matching prefix.
    #[inline(always)]
    fn lookup(&self, addr: u32) -> Option<u16> {
        let mut v = self.tbl24[(addr >> 8) as usize];
        if v & GROUP != 0 {
            v = self.tbl8[(v & !GROUP) as usize * 256 + (addr & 0xff) as usize];
        }
        (v != 0).then(|| ((v & 0xffff) - 1) as u16)
    }
}

#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is a hint; the pointer comes from a live reference.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The router, hand-written.
pub struct ReferenceRouter {
    v4: Dir24,
    /// IPv6 routes by prefix length, longest first (the bench has few).
    v6: Vec<(u8, HashMap<u128, u16>)>,
    nexthops: Vec<Option<NextHop>>,
    /// `port_rx` packets and bytes per ingress port.
    pub port_rx: Vec<(u64, u64)>,
    out: Vec<u8>,
}

impl Default for ReferenceRouter {
    fn default() -> Self {
        Self::new()
    }
}

impl ReferenceRouter {
    /// An empty router (every packet is dropped until routes and next hops exist).
    pub fn new() -> ReferenceRouter {
        ReferenceRouter {
            v4: Dir24::new(),
            v6: Vec::new(),
            nexthops: vec![None; 1 << 16],
            port_rx: vec![(0, 0); 512],
            out: Vec::with_capacity(2048),
        }
    }

    /// Installs IPv4 routes `(network, prefix length, next hop id)`.
    pub fn add_ipv4_routes(&mut self, routes: Vec<(u32, u8, u16)>) {
        self.v4.build(routes);
    }

    /// Installs one IPv6 route.
    pub fn add_ipv6_route(&mut self, net: u128, len: u8, nh: u16) {
        let len = len.min(128);
        let masked = if len == 0 { 0 } else { net & (u128::MAX << (128 - u32::from(len))) };
        match self.v6.iter_mut().find(|(l, _)| *l == len) {
            Some((_, m)) => {
                m.insert(masked, nh);
            }
            None => {
                self.v6.push((len, HashMap::from([(masked, nh)])));
                self.v6.sort_by_key(|r| std::cmp::Reverse(r.0));
            }
        }
    }

    /// Installs next hop `id`: egress port and MAC rewrite.
    pub fn add_nexthop(&mut self, id: u16, port: u16, src: [u8; 6], dst: [u8; 6]) {
        self.nexthops[id as usize] = Some(NextHop { port: port & 0x1ff, src, dst });
    }

    fn lookup_v6(&self, addr: u128) -> Option<u16> {
        self.v6.iter().find_map(|(len, m)| {
            let k = if *len == 0 { 0 } else { addr & (u128::MAX << (128 - u32::from(*len))) };
            m.get(&k).copied()
        })
    }

    /// Processes packets that arrived together on `port`; `emit` gets each
    /// forwarded frame with its egress port.
    pub fn process_batch(&mut self, port: u32, batch: &[Vec<u8>], emit: &mut impl FnMut(u32, &[u8])) {
        for p in batch {
            if p.len() >= 34 && p[12] == 0x08 && p[13] == 0x00 {
                self.v4.prefetch(u32::from_be_bytes([p[30], p[31], p[32], p[33]]));
            }
        }
        for p in batch {
            self.process(port, p, emit);
        }
    }

    /// Processes one packet.
    #[inline]
    pub fn process(&mut self, port: u32, p: &[u8], emit: &mut impl FnMut(u32, &[u8])) {
        if let Some(c) = self.port_rx.get_mut(port as usize) {
            c.0 += 1;
            c.1 += p.len() as u64;
        }
        if p.len() < 14 {
            return; // no Ethernet header: neither IP header is valid, dropped
        }
        let ether_type = u16::from_be_bytes([p[12], p[13]]);
        // An LPM miss runs `drop()` and leaves the id 0; the next-hop table
        // then decides (its `forward` overrides the drop), as in the P4 code.
        let nexthop_id = match ether_type {
            0x0800 if p.len() >= 34 => {
                let ip = &p[14..34];
                if ip[0] & 0x0f == 5 && !ipv4_checksum_ok(ip) {
                    return; // checksum_error
                }
                if ip[8] <= 1 {
                    return;
                }
                self.v4.lookup(u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]])).unwrap_or_default()
            }
            0x86dd if p.len() >= 54 => {
                if p[21] <= 1 {
                    return;
                }
                let dst = u128::from_be_bytes(p[38..54].try_into().expect("16 bytes"));
                self.lookup_v6(dst).unwrap_or_default()
            }
            _ => return,
        };
        let Some(nh) = self.nexthops[nexthop_id as usize] else { return };
        if nh.port == DROP {
            return;
        }
        let out = &mut self.out;
        out.clear();
        out.extend_from_slice(p);
        out[0..6].copy_from_slice(&nh.dst);
        out[6..12].copy_from_slice(&nh.src);
        if ether_type == 0x0800 {
            let ip = &mut out[14..34];
            let old = u16::from_be_bytes([ip[8], ip[9]]);
            ip[8] -= 1;
            if ip[0] & 0x0f == 5 {
                let new = u16::from_be_bytes([ip[8], ip[9]]);
                let hc = u16::from_be_bytes([ip[10], ip[11]]);
                // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m')
                let mut s = u32::from(!hc) + u32::from(!old) + u32::from(new);
                s = (s & 0xffff) + (s >> 16);
                s = (s & 0xffff) + (s >> 16);
                ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
            }
        } else {
            out[21] -= 1;
        }
        emit(u32::from(nh.port), out);
    }
}

/// Whether an IPv4 header's checksum field equals the csum16 of its other fields.
#[inline(always)]
fn ipv4_checksum_ok(ip: &[u8]) -> bool {
    let mut s: u32 = 0;
    for (i, w) in ip.chunks_exact(2).enumerate() {
        if i != 5 {
            s += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
    }
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    !(s as u16) == u16::from_be_bytes([ip[10], ip[11]])
}
