//! The lwAFTR data plane: [`Lwaftr`] implements
//! `sluice_dataplane::DataPlane` with Snabb's stage order per side.
//!
//! Contract: reads frames arriving on [`EXTERNAL`] (IPv4) and [`INTERNAL`]
//! (IPv6), or both on port 0 on a stick (demultiplexed by VLAN tag when
//! the two sides' tags differ, else by EtherType: IPv4 and ARP go to the
//! external logic). Ingress per side: untag → reassemble → ingress filter
//! → ARP/NDP → echo → core ([`crate::core`]). Egress per side: core →
//! next hop (set MACs, or hold while unresolved) → egress filter →
//! fragment → tag → emit. Echo, ARP and NDP replies skip the next-hop
//! stage (their MACs are already right). Hairpinned packets (and ICMPv4
//! errors to managed addresses) wait in the hairpin queue until the
//! batch's input has run, as in Snabb. Filters are the configuration's
//! pflang filters ([`crate::filter`]) unless replaced by hooks. `tick`
//! sends ARP requests and NSs for unresolved next hops (at the first tick,
//! then every 3 s) and takes a MAC another replica learned. Writes the counters
//! ([`Counters`]), the reassembly tables, the next-hop state and hold
//! queues. Bad frames never panic: they are dropped and counted (in the
//! Snabb block where Snabb counts them, else in the extra block).
//! No allocation per packet on the encapsulation/decapsulation path, and
//! no copy of the packet carried: the core builds the new headers on the
//! stack and sends them and the received packet as two
//! parts ([`Emit::emit_parts`]), which the driver joins as it copies the
//! frame out. A stage that needs the frame whole (a configured egress
//! filter, the fragmenter, the hold queue of an unresolved next hop,
//! hairpinning) joins the parts first.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use sluice_dataplane::emit::joined;
use sluice_dataplane::{DataPlane, Emit, Metrics, Stats};

use crate::bt::BindingTable;
use crate::conf::{Config, NextHop as ConfNextHop, QueueSettings};
use crate::counters::Counters;
use crate::frag::{self, Fate};
use crate::frame::*;
use crate::icmp::{self, RateLimiter};
use crate::nd::{self, Arp, Ndp, NextHop};
use crate::reasm::{Outcome, Reassembler};
use crate::{EXTERNAL, INTERNAL};

/// A packet filter on an untagged frame: true = pass.
pub type FilterHook = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// One side of the lwAFTR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// External: IPv4, the internet.
    V4,
    /// Internal: IPv6, the B4s.
    V6,
}

/// The four filter hooks (pflang filters compiled elsewhere plug in here).
#[derive(Clone, Default)]
pub struct Filters {
    /// External ingress.
    pub v4_in: Option<FilterHook>,
    /// External egress.
    pub v4_out: Option<FilterHook>,
    /// Internal ingress.
    pub v6_in: Option<FilterHook>,
    /// Internal egress.
    pub v6_out: Option<FilterHook>,
}

/// How the plane runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// One port (0) carries both sides.
    pub on_a_stick: bool,
    /// Fragment IDs start at 0x4242 (IPv4) and 0x42424242 (IPv6), as in
    /// Snabb's check mode; else they start at a random value.
    pub deterministic_ids: bool,
    /// Time stands still at this value (ns) instead of following the clock.
    pub frozen_clock: Option<u64>,
}

/// The lwAFTR data plane.
pub struct Lwaftr {
    pub(crate) s: QueueSettings,
    pub(crate) ext_ip: u32,
    pub(crate) ext_mac: [u8; 6],
    pub(crate) int_ip: [u8; 16],
    pub(crate) int_mac: [u8; 6],
    pub(crate) bt: BindingTable,
    pub(crate) c: Counters,
    pub(crate) stats: Stats,
    pub(crate) nh4: NextHop<u32>,
    pub(crate) nh6: NextHop<[u8; 16]>,
    /// Next-hop MACs learned by any replica (bit 48 set = known), shared
    /// by all replicas: a reply reaches one worker only.
    learned: Arc<[AtomicU64; 2]>,
    reasm4: Reassembler,
    reasm6: Reassembler,
    pub(crate) rl4: RateLimiter,
    pub(crate) rl6: RateLimiter,
    frag_id4: u16,
    frag_id6: u32,
    filters: Filters,
    opts: Options,
    start: Instant,
    pub(crate) now: u64,
    /// Scratch: untagged input, local replies, fragments, tagged output's
    /// head (encapsulation and decapsulation build their headers on the
    /// stack; parts a stage reads whole are joined by `emit::joined`).
    ubuf: Vec<u8>,
    obuf: Vec<u8>,
    fbuf: Vec<u8>,
    tbuf: Vec<u8>,
    /// The hairpin queue: its first `hairpin_n` entries are waiting (the
    /// buffers beyond are kept for reuse).
    hairpin_q: Vec<(usize, Vec<u8>)>,
    hairpin_n: usize,
}

/// The hook of a configured pflang filter (`None`: none, or one that
/// accepts everything).
fn compile_hook(expr: &Option<String>, path: &str) -> Result<Option<FilterHook>, String> {
    let Some(expr) = expr else { return Ok(None) };
    let f = crate::filter::Filter::compile(expr).map_err(|m| format!("/softwire-config/{path}: {m}"))?;
    if f.is_accept_all() {
        return Ok(None);
    }
    Ok(Some(Arc::new(move |frame: &[u8]| f.matches(frame))))
}

fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish()
}

impl Lwaftr {
    /// A plane for the first queue of the first instance of `conf`.
    pub fn new(conf: &Config, opts: Options) -> Result<Lwaftr, String> {
        Lwaftr::for_queue(conf, None, None, opts)
    }

    /// A plane for queue `queue` of instance `device` of `conf` (the first
    /// of each when `None`).
    pub fn for_queue(conf: &Config, device: Option<&str>, queue: Option<u8>, opts: Options) -> Result<Lwaftr, String> {
        let s = conf.queue_settings(device, queue)?;
        let bt = BindingTable::new(&conf.binding_table.softwires)?;
        let nh4 = match s.external.queue.next_hop {
            ConfNextHop::Mac(m) => NextHop::mac(m),
            ConfNextHop::Ip(ip) => NextHop::ip(u32::from(ip)),
        };
        let nh6 = match s.internal.queue.next_hop {
            ConfNextHop::Mac(m) => NextHop::mac(m),
            ConfNextHop::Ip(ip) => NextHop::ip(ip.octets()),
        };
        let (e, i) = (&s.external.common, &s.internal.common);
        let seed = random_seed();
        let (frag_id4, frag_id6) =
            if opts.deterministic_ids { (0x4242, 0x4242_4242) } else { (seed as u16, (seed >> 16) as u32) };
        Ok(Lwaftr {
            ext_ip: u32::from(s.external.queue.ip),
            ext_mac: s.external.queue.mac,
            int_ip: s.internal.queue.ip.octets(),
            int_mac: s.internal.queue.mac,
            bt,
            c: Counters::default(),
            stats: Stats::default(),
            nh4,
            nh6,
            learned: Arc::new([AtomicU64::new(0), AtomicU64::new(0)]),
            reasm4: Reassembler::new(false, e.reassembly.max_fragments_per_packet, e.reassembly.max_packets),
            reasm6: Reassembler::new(true, i.reassembly.max_fragments_per_packet, i.reassembly.max_packets),
            rl4: RateLimiter::new(e.error_rate_limiting.packets, e.error_rate_limiting.period),
            rl6: RateLimiter::new(i.error_rate_limiting.packets, i.error_rate_limiting.period),
            frag_id4,
            frag_id6,
            filters: Filters {
                v4_in: compile_hook(&e.ingress_filter, "external-interface/ingress-filter")?,
                v4_out: compile_hook(&e.egress_filter, "external-interface/egress-filter")?,
                v6_in: compile_hook(&i.ingress_filter, "internal-interface/ingress-filter")?,
                v6_out: compile_hook(&i.egress_filter, "internal-interface/egress-filter")?,
            },
            opts,
            start: Instant::now(),
            now: opts.frozen_clock.unwrap_or(0),
            s,
            ubuf: Vec::new(),
            obuf: Vec::new(),
            fbuf: Vec::new(),
            tbuf: Vec::new(),
            hairpin_q: Vec::new(),
            hairpin_n: 0,
        })
    }

    /// Replaces the filter hooks (by default those compiled from the
    /// configuration's pflang filters).
    pub fn set_filters(&mut self, f: Filters) {
        self.filters = f;
    }

    /// The binding table.
    pub fn binding_table(&self) -> &BindingTable {
        &self.bt
    }

    /// The binding table, to change (on every copy, through the node's
    /// control: `sluice_node::Control`).
    pub fn binding_table_mut(&mut self) -> &mut BindingTable {
        &mut self.bt
    }

    /// The current counters.
    pub fn lw_counters(&self) -> &Counters {
        &self.c
    }

    /// The settings the plane runs with.
    pub fn settings(&self) -> &QueueSettings {
        &self.s
    }

    fn tag_of(&self, side: Side) -> Option<u16> {
        match side {
            Side::V4 => self.s.external.queue.vlan_tag,
            Side::V6 => self.s.internal.queue.vlan_tag,
        }
    }

    fn port_of(&self, side: Side) -> u32 {
        match (self.opts.on_a_stick, side) {
            (true, _) | (false, Side::V4) => EXTERNAL,
            (false, Side::V6) => INTERNAL,
        }
    }

    /// Sends frame `head` + `tail` out of `side`, tagged if the side is.
    fn wire<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, head: &[u8], tail: &[u8], emit: &mut E) {
        let (tag, port) = (self.tag_of(side), self.port_of(side));
        self.stats.transmitted += 1;
        wire_frame(tag, port, &mut self.tbuf, idx, head, tail, emit);
    }

    /// Egress after the next-hop stage: egress filter, fragmenter, tag;
    /// the frame is `head` then `tail` (empty when the frame is whole).
    pub(crate) fn egress<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, head: &[u8], tail: &[u8], emit: &mut E) {
        if tail.is_empty() {
            return self.egress_whole(side, idx, head, emit);
        }
        let len = head.len() + tail.len();
        let (mtu, filtered) = match side {
            Side::V4 => (self.s.external.common.mtu, self.filters.v4_out.is_some()),
            Side::V6 => (self.s.internal.common.mtu, self.filters.v6_out.is_some()),
        };
        // The first bytes after the Ethernet header: in the head, or at the
        // tail's start when the head is the Ethernet header alone.
        let l3 = match head.len() {
            n if n >= ETH + 6 => Some(&head[ETH..]),
            ETH => Some(tail),
            _ => None,
        };
        let Some(l3) = l3.filter(|l3| l3.len() >= 6 && !filtered && len <= ETH + usize::from(mtu)) else {
            // The filter and the fragmenter read the frame whole.
            return self.egress_joined(side, idx, head, tail, emit);
        };
        // Unfiltered and no longer than the MTU: check the length the
        // header says and send the parts.
        let valid = match (side, be16(head, 12)) {
            (Side::V4, Some(ET_IPV4)) => {
                len >= ETH + 20
                    && usize::from(l3[0] & 0x0f) * 4 >= 20
                    && usize::from(u16::from_be_bytes([l3[2], l3[3]])) == len - ETH
            }
            (Side::V6, Some(ET_IPV6)) => {
                len >= ETH + IPV6 && usize::from(u16::from_be_bytes([l3[4], l3[5]])) == len - ETH - IPV6
            }
            _ => true,
        };
        if !valid {
            self.c.extra.bad_length += 1;
            self.stats.dropped += 1;
            return;
        }
        match side {
            Side::V4 => self.c.snabb.out_ipv4_frag_not += 1,
            Side::V6 => self.c.snabb.out_ipv6_frag_not += 1,
        }
        self.wire(side, idx, head, tail, emit);
    }

    /// [`Lwaftr::egress`] of `head` + `tail` joined (for the stages that
    /// read a frame whole).
    #[cold]
    #[inline(never)]
    fn egress_joined<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, head: &[u8], tail: &[u8], emit: &mut E) {
        joined(head, tail, |f| self.egress_whole(side, idx, f, emit));
    }

    /// [`Lwaftr::egress`] of a whole frame `f`.
    fn egress_whole<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, f: &[u8], emit: &mut E) {
        let filter = match side {
            Side::V4 => &self.filters.v4_out,
            Side::V6 => &self.filters.v6_out,
        };
        if let Some(flt) = filter {
            if !flt(f) {
                self.c.extra.egress_filtered += 1;
                self.stats.dropped += 1;
                return;
            }
        }
        if f.len() < ETH {
            self.c.extra.malformed += 1;
            return;
        }
        match side {
            Side::V4 => {
                let mtu = self.s.external.common.mtu;
                if ethertype(f) == Some(ET_IPV4) && !frag::valid_v4(f) {
                    self.c.extra.bad_length += 1;
                    self.stats.dropped += 1;
                    return;
                }
                if ethertype(f) != Some(ET_IPV4) || !frag::too_big(f, mtu) {
                    self.c.snabb.out_ipv4_frag_not += 1;
                    self.wire(side, idx, f, &[], emit);
                    return;
                }
                let id = self.frag_id4.wrapping_add(1);
                let (tag, port) = (self.tag_of(side), self.port_of(side));
                let tbuf = &mut self.tbuf;
                let fate = frag::fragment_v4(f, mtu, id, &mut self.fbuf, &mut |p| {
                    wire_frame(tag, port, tbuf, idx, p, &[], emit)
                });
                match fate {
                    Fate::Fragments(n) => {
                        self.frag_id4 = id;
                        self.c.snabb.out_ipv4_frag += n as u64;
                        self.stats.transmitted += n as u64;
                    }
                    _ => {
                        self.c.extra.ipv4_df_too_big += 1;
                        self.stats.dropped += 1;
                    }
                }
            }
            Side::V6 => {
                let mtu = self.s.internal.common.mtu;
                if ethertype(f) == Some(ET_IPV6) && !frag::valid_v6(f) {
                    self.c.extra.bad_length += 1;
                    self.stats.dropped += 1;
                    return;
                }
                if ethertype(f) != Some(ET_IPV6) || !frag::too_big(f, mtu) {
                    self.c.snabb.out_ipv6_frag_not += 1;
                    self.wire(side, idx, f, &[], emit);
                    return;
                }
                let id = self.frag_id6.wrapping_add(1);
                let (tag, port) = (self.tag_of(side), self.port_of(side));
                let tbuf = &mut self.tbuf;
                let fate = frag::fragment_v6(f, mtu, id, &mut self.fbuf, &mut |p| {
                    wire_frame(tag, port, tbuf, idx, p, &[], emit)
                });
                match fate {
                    Fate::Fragments(n) => {
                        self.frag_id6 = id;
                        self.c.snabb.out_ipv6_frag += n as u64;
                        self.stats.transmitted += n as u64;
                    }
                    _ => {
                        self.c.extra.malformed += 1;
                        self.stats.dropped += 1;
                    }
                }
            }
        }
    }

    /// The next-hop stage for a frame the core sends out of `side` (`head`
    /// then `tail`, which may be empty): set the MACs (in `head`) and go
    /// on, or hold the frame, whole, while the next hop is unresolved.
    pub(crate) fn next_hop_out<E: Emit + ?Sized>(
        &mut self,
        side: Side,
        idx: usize,
        head: &mut [u8],
        tail: &[u8],
        emit: &mut E,
    ) {
        let (mac, own) = match side {
            Side::V4 => (self.nh4.mac, self.ext_mac),
            Side::V6 => (self.nh6.mac, self.int_mac),
        };
        match mac {
            Some(m) => {
                head[..6].copy_from_slice(&m);
                head[6..12].copy_from_slice(&own);
                self.egress(side, idx, head, tail, emit);
            }
            None => self.hold(side, idx, head, tail),
        }
    }

    /// Keeps `head` + `tail` until `side`'s next hop is known (or counts it
    /// dropped when the hold queue is full).
    #[cold]
    #[inline(never)]
    fn hold(&mut self, side: Side, idx: usize, head: &[u8], tail: &[u8]) {
        let mut whole = head.to_vec();
        whole.extend_from_slice(tail);
        let held = match side {
            Side::V4 => self.nh4.hold(idx, &whole),
            Side::V6 => self.nh6.hold(idx, &whole),
        };
        if !held {
            self.c.extra.hold_overflow += 1;
            self.stats.dropped += 1;
        }
    }

    /// Sends what waited for `side`'s next hop, now known; `idx` is the
    /// input that taught it.
    fn release<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, emit: &mut E) {
        let held = match side {
            Side::V4 => std::mem::take(&mut self.nh4.held),
            Side::V6 => std::mem::take(&mut self.nh6.held),
        };
        for (_, mut f) in held {
            self.next_hop_out(side, idx, &mut f, &[], emit);
        }
    }

    /// A frame arriving on `side` (still tagged).
    fn ingress<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, raw: &[u8], emit: &mut E) {
        match self.tag_of(side) {
            None => self.ingress_untagged(side, idx, raw, emit),
            Some(tag) => {
                let want = [0x81, 0x00, (tag >> 8) as u8 & 0x0f, tag as u8];
                if raw.len() < 16 || raw[12..16] != want {
                    self.c.extra.vlan_mismatch += 1;
                    self.stats.dropped += 1;
                    return;
                }
                let mut u = std::mem::take(&mut self.ubuf);
                u.clear();
                u.extend_from_slice(&raw[..12]);
                u.extend_from_slice(&raw[16..]);
                self.ingress_untagged(side, idx, &u, emit);
                self.ubuf = u;
            }
        }
    }

    fn ingress_untagged<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, f: &[u8], emit: &mut E) {
        if f.len() < ETH {
            self.c.extra.malformed += 1;
            self.stats.dropped += 1;
            return;
        }
        match side {
            Side::V4 => self.reassemble_v4(idx, f, emit),
            Side::V6 => self.reassemble_v6(idx, f, emit),
        }
    }

    fn reassemble_v4<E: Emit + ?Sized>(&mut self, idx: usize, f: &[u8], emit: &mut E) {
        if ethertype(f) != Some(ET_IPV4) {
            self.c.snabb.in_ipv4_frag_reassembly_unneeded += 1;
            return self.after_reasm(Side::V4, idx, f, emit);
        }
        let h = match Ipv4::parse(&f[ETH..]) {
            Some(h) if f.len() >= 34 && h.total >= h.ihl && h.total <= f.len() - ETH => h,
            _ => {
                self.c.extra.bad_length += 1;
                self.stats.dropped += 1;
                return;
            }
        };
        // Ethernet padding after the IPv4 packet is not part of it.
        let f = &f[..ETH + h.total];
        if !h.is_fragment() {
            self.c.snabb.in_ipv4_frag_reassembly_unneeded += 1;
            return self.after_reasm(Side::V4, idx, f, emit);
        }
        self.c.snabb.in_ipv4_frag_needs_reassembly += 1;
        let outcome = self.reasm4.push(f);
        self.c.snabb.drop_ipv4_frag_random_evicted += self.reasm4.take_evicted();
        self.reassembled(Side::V4, idx, outcome, emit);
    }

    fn reassemble_v6<E: Emit + ?Sized>(&mut self, idx: usize, f: &[u8], emit: &mut E) {
        if ethertype(f) != Some(ET_IPV6) || f.len() < ETH + IPV6 {
            self.c.snabb.in_ipv6_frag_reassembly_unneeded += 1;
            return self.after_reasm(Side::V6, idx, f, emit);
        }
        let plen = usize::from(u16::from_be_bytes([f[ETH + 4], f[ETH + 5]]));
        if ETH + IPV6 + plen > f.len() {
            self.c.extra.bad_length += 1;
            self.stats.dropped += 1;
            return;
        }
        let f = &f[..ETH + IPV6 + plen];
        if f[ETH + 6] != 44 {
            self.c.snabb.in_ipv6_frag_reassembly_unneeded += 1;
            return self.after_reasm(Side::V6, idx, f, emit);
        }
        self.c.snabb.in_ipv6_frag_needs_reassembly += 1;
        let outcome = self.reasm6.push(f);
        self.c.snabb.drop_ipv6_frag_random_evicted += self.reasm6.take_evicted();
        self.reassembled(Side::V6, idx, outcome, emit);
    }

    fn reassembled<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, outcome: Outcome, emit: &mut E) {
        match outcome {
            Outcome::Held => {}
            Outcome::Invalid => {
                match side {
                    Side::V4 => self.c.snabb.drop_ipv4_frag_invalid_reassembly += 1,
                    Side::V6 => self.c.snabb.drop_ipv6_frag_invalid_reassembly += 1,
                }
                self.stats.dropped += 1;
            }
            Outcome::Malformed => {
                self.c.extra.malformed += 1;
                self.stats.dropped += 1;
            }
            Outcome::Done => {
                let p = match side {
                    Side::V4 => {
                        self.c.snabb.in_ipv4_frag_reassembled += 1;
                        self.reasm4.packet().to_vec()
                    }
                    Side::V6 => {
                        self.c.snabb.in_ipv6_frag_reassembled += 1;
                        self.reasm6.packet().to_vec()
                    }
                };
                self.after_reasm(side, idx, &p, emit);
            }
        }
    }

    /// Ingress filter, ARP/NDP, echo, then the core.
    fn after_reasm<E: Emit + ?Sized>(&mut self, side: Side, idx: usize, f: &[u8], emit: &mut E) {
        let filter = match side {
            Side::V4 => &self.filters.v4_in,
            Side::V6 => &self.filters.v6_in,
        };
        if let Some(flt) = filter {
            if !flt(f) {
                self.c.extra.ingress_filtered += 1;
                self.stats.dropped += 1;
                return;
            }
        }
        match side {
            Side::V4 => {
                if let Some(a) = nd::parse_arp(f) {
                    return self.arp_in(idx, f, a, emit);
                }
                if icmp::is_echo_request_v4(f, self.ext_ip) {
                    let n = f.len() as u64;
                    self.c.snabb.in_icmpv4_echo_bytes += n;
                    self.c.snabb.in_icmpv4_echo_packets += 1;
                    let mut o = std::mem::take(&mut self.obuf);
                    o.clear();
                    o.extend_from_slice(f);
                    icmp::echo_reply_v4(&mut o);
                    self.c.snabb.out_icmpv4_echo_bytes += o.len() as u64;
                    self.c.snabb.out_icmpv4_echo_packets += 1;
                    self.egress(Side::V4, idx, &o, &[], emit);
                    self.obuf = o;
                    return;
                }
                self.inet_in(idx, f, false, emit);
            }
            Side::V6 => {
                if let Some(n) = nd::parse_ndp(f) {
                    return self.ndp_in(idx, f, n, emit);
                }
                if icmp::is_echo_request_v6(f, &self.int_ip) {
                    let n = f.len() as u64;
                    self.c.snabb.in_icmpv6_echo_bytes += n;
                    self.c.snabb.in_icmpv6_echo_packets += 1;
                    let mut o = std::mem::take(&mut self.obuf);
                    o.clear();
                    o.extend_from_slice(f);
                    icmp::echo_reply_v6(&mut o);
                    self.c.snabb.out_icmpv6_echo_bytes += o.len() as u64;
                    self.c.snabb.out_icmpv6_echo_packets += 1;
                    self.egress(Side::V6, idx, &o, &[], emit);
                    self.obuf = o;
                    return;
                }
                self.b4_in(idx, f, emit);
            }
        }
    }

    fn arp_in<E: Emit + ?Sized>(&mut self, idx: usize, f: &[u8], a: Arp, emit: &mut E) {
        let n = f.len() as u64;
        match a {
            Arp::Request(sha, spa, tpa) => {
                self.c.snabb.in_arp_request_bytes += n;
                self.c.snabb.in_arp_request_packets += 1;
                if tpa == self.ext_ip {
                    let mut o = std::mem::take(&mut self.obuf);
                    nd::arp_reply(&mut o, self.ext_mac, self.ext_ip, sha, spa);
                    self.c.snabb.out_arp_reply_bytes += o.len() as u64;
                    self.c.snabb.out_arp_reply_packets += 1;
                    self.egress(Side::V4, idx, &o, &[], emit);
                    self.obuf = o;
                }
            }
            Arp::Reply(sha, spa) => {
                self.c.snabb.in_arp_reply_bytes += n;
                self.c.snabb.in_arp_reply_packets += 1;
                // As Snabb's ARP app: a reply from the next hop always
                // (re)sets its MAC.
                if self.nh4.ip == Some(spa) {
                    self.nh4.mac = Some(sha);
                    self.share_mac(Side::V4, sha);
                    self.release(Side::V4, idx, emit);
                }
            }
            Arp::Other => {}
        }
    }

    fn ndp_in<E: Emit + ?Sized>(&mut self, idx: usize, f: &[u8], n: Ndp, emit: &mut E) {
        let len = f.len() as u64;
        match n {
            Ndp::Ns { target, answerable } => {
                self.c.snabb.in_ndp_ns_bytes += len;
                self.c.snabb.in_ndp_ns_packets += 1;
                if answerable && target == self.int_ip {
                    let mut o = std::mem::take(&mut self.obuf);
                    nd::na_reply(&mut o, self.int_mac, &self.int_ip, f);
                    self.c.snabb.out_ndp_na_bytes += o.len() as u64;
                    self.c.snabb.out_ndp_na_packets += 1;
                    self.egress(Side::V6, idx, &o, &[], emit);
                    self.obuf = o;
                }
            }
            Ndp::Na { target, solicited, mac } => {
                self.c.snabb.in_ndp_na_bytes += len;
                self.c.snabb.in_ndp_na_packets += 1;
                if self.nh6.mac.is_none() && solicited && self.nh6.ip == Some(target) {
                    if let Some(mac) = mac {
                        self.nh6.mac = Some(mac);
                        self.share_mac(Side::V6, mac);
                        self.release(Side::V6, idx, emit);
                    }
                }
            }
            Ndp::Other => self.c.extra.ndp_invalid += 1,
        }
    }

    /// On a stick: which side a frame of port 0 belongs to.
    fn demux(&self, raw: &[u8]) -> Option<Side> {
        let (t4, t6) = (self.s.external.queue.vlan_tag, self.s.internal.queue.vlan_tag);
        if let (Some(a), Some(b)) = (t4, t6) {
            if a != b {
                if be16(raw, 12)? != ET_VLAN {
                    return None;
                }
                let vid = be16(raw, 14)? & 0x0fff;
                return if vid == a {
                    Some(Side::V4)
                } else if vid == b {
                    Some(Side::V6)
                } else {
                    None
                };
            }
        }
        let et = match be16(raw, 12)? {
            ET_VLAN => be16(raw, 16)?,
            et => et,
        };
        Some(if et == ET_IPV4 || et == ET_ARP { Side::V4 } else { Side::V6 })
    }

    fn share_mac(&self, side: Side, mac: [u8; 6]) {
        let mut v = [0u8; 8];
        v[2..].copy_from_slice(&mac);
        self.learned[side as usize].store(u64::from_be_bytes(v) | 1 << 48, Ordering::Relaxed);
    }

    /// Takes a next-hop MAC another replica learned, and sends what waited for it.
    fn adopt_shared_macs<E: Emit + ?Sized>(&mut self, emit: &mut E) {
        for side in [Side::V4, Side::V6] {
            let unresolved = match side {
                Side::V4 => self.nh4.mac.is_none() && self.nh4.ip.is_some(),
                Side::V6 => self.nh6.mac.is_none() && self.nh6.ip.is_some(),
            };
            if !unresolved {
                continue;
            }
            let v = self.learned[side as usize].load(Ordering::Relaxed);
            if v >> 48 != 1 {
                continue;
            }
            let mac: [u8; 6] = v.to_be_bytes()[2..].try_into().expect("6 bytes");
            match side {
                Side::V4 => self.nh4.mac = Some(mac),
                Side::V6 => self.nh6.mac = Some(mac),
            }
            self.release(side, 0, emit);
        }
    }

    /// Sends the ARP request / NS due at `now` (the driver's tick clock).
    fn request_next_hops<E: Emit + ?Sized>(&mut self, now: u64, emit: &mut E) {
        if self.nh4.request_due(now) {
            self.nh4.last_request = Some(now);
            let target = self.nh4.ip.expect("due implies an ip");
            let mut o = std::mem::take(&mut self.obuf);
            nd::arp_request(&mut o, self.ext_mac, self.ext_ip, target);
            self.c.snabb.out_arp_request_bytes += o.len() as u64;
            self.c.snabb.out_arp_request_packets += 1;
            self.egress(Side::V4, 0, &o, &[], emit);
            self.obuf = o;
        }
        if self.nh6.request_due(now) {
            self.nh6.last_request = Some(now);
            let target = self.nh6.ip.expect("due implies an ip");
            let mut o = std::mem::take(&mut self.obuf);
            nd::ns_request(&mut o, self.int_mac, &self.int_ip, &target);
            self.c.snabb.out_ndp_ns_bytes += o.len() as u64;
            self.c.snabb.out_ndp_ns_packets += 1;
            self.egress(Side::V6, 0, &o, &[], emit);
            self.obuf = o;
        }
    }

    /// Batched binding-table lookups: guesses every frame's key (as the
    /// core would compute it for a plain TCP/UDP packet) and prefetches
    /// the address slots of all, then the softwire slots (which hold the
    /// softwires' records) of all, so that the memory accesses of a batch
    /// overlap. Hints only: the core does its own lookups.
    fn prefetch_batch(&self, port: u32, frames: &[&[u8]]) {
        let mut keys = [(0u32, 0u16); sluice_dataplane::BATCH];
        let n = frames.len().min(keys.len());
        for (k, raw) in keys.iter_mut().zip(frames) {
            let l2 = if be16(raw, 12) == Some(ET_VLAN) { 18 } else { 14 };
            let et = be16(raw, l2 - 2);
            let guess = match et {
                Some(ET_IPV4) if port == EXTERNAL => raw.get(l2..).and_then(|l3| {
                    let ihl = usize::from(*l3.first()? & 0x0f) * 4;
                    Some((be32(l3, 16)?, be16(l3, ihl + 2)?))
                }),
                Some(ET_IPV6) if port == INTERNAL || self.opts.on_a_stick => raw.get(l2 + IPV6..).and_then(|l3| {
                    let ihl = usize::from(*l3.first()? & 0x0f) * 4;
                    Some((be32(l3, 12)?, be16(l3, ihl)?))
                }),
                _ => None,
            };
            *k = guess.unwrap_or((0, 0));
            self.bt.prefetch_addr(k.0);
        }
        for &(ip, p) in &keys[..n] {
            self.bt.prefetch_softwire(ip, p);
        }
    }

    /// Queues a decapsulated packet (or an ICMPv4 error), `head` then
    /// `tail`, for the managed address it is sent to: it re-enters as if
    /// from the internet once the batch's input has run.
    pub(crate) fn defer_hairpin(&mut self, idx: usize, head: &[u8], tail: &[u8]) {
        if self.hairpin_n == self.hairpin_q.len() {
            self.hairpin_q.push((idx, Vec::new()));
        }
        let e = &mut self.hairpin_q[self.hairpin_n];
        e.0 = idx;
        e.1.clear();
        e.1.extend_from_slice(head);
        e.1.extend_from_slice(tail);
        self.hairpin_n += 1;
    }

    /// Runs the hairpin queue, including what running it adds.
    fn drain_hairpin<E: Emit + ?Sized>(&mut self, emit: &mut E) {
        let mut i = 0;
        while i < self.hairpin_n {
            let (idx, buf) = std::mem::take(&mut self.hairpin_q[i]);
            self.inet_in(idx, &buf, true, emit);
            self.hairpin_q[i] = (idx, buf);
            i += 1;
        }
        self.hairpin_n = 0;
    }

    fn clock(&mut self) {
        self.now = match self.opts.frozen_clock {
            Some(t) => t,
            None => self.start.elapsed().as_nanos() as u64,
        };
    }

    /// The external address, for messages.
    pub fn external_ip(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.ext_ip)
    }
}

/// Emits `head` + `tail` (`head` at least the Ethernet header) on `port`,
/// with an 802.1Q tag `tag` if given (the tagged head built in `tbuf`).
fn wire_frame<E: Emit + ?Sized>(
    tag: Option<u16>,
    port: u32,
    tbuf: &mut Vec<u8>,
    idx: usize,
    head: &[u8],
    tail: &[u8],
    emit: &mut E,
) {
    match tag {
        None if tail.is_empty() => emit.emit(idx, port, head),
        None => emit.emit_parts(idx, port, head, tail),
        Some(tag) => {
            tbuf.clear();
            tbuf.extend_from_slice(&head[..12]);
            tbuf.extend_from_slice(&[0x81, 0x00, (tag >> 8) as u8 & 0x0f, tag as u8]);
            tbuf.extend_from_slice(&head[12..]);
            emit.emit_parts(idx, port, tbuf, tail);
        }
    }
}

impl DataPlane for Lwaftr {
    type Notification = ();
    type Counters = Counters;

    fn process_batch<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E) {
        self.process_batch_to(port, frames, emit);
    }

    fn process_batch_to<E: Emit + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E) {
        self.clock();
        if frames.len() > 1 && self.bt.worth_prefetching() {
            self.prefetch_batch(port, frames);
        }
        for (i, raw) in frames.iter().enumerate() {
            self.stats.received += 1;
            let side = match (self.opts.on_a_stick, port) {
                (true, 0) => self.demux(raw),
                (false, EXTERNAL) => Some(Side::V4),
                (false, INTERNAL) => Some(Side::V6),
                _ => {
                    self.c.extra.wrong_port += 1;
                    self.stats.dropped += 1;
                    continue;
                }
            };
            match side {
                Some(side) => self.ingress(side, i, raw, emit),
                None => {
                    // On a stick: a tag of neither side, or no tag.
                    self.c.extra.vlan_mismatch += 1;
                    self.stats.dropped += 1;
                }
            }
        }
        self.drain_hairpin(emit);
    }

    fn replica(&self, _workers: usize) -> Result<Lwaftr, String> {
        let seed = random_seed();
        Ok(Lwaftr {
            s: self.s.clone(),
            ext_ip: self.ext_ip,
            ext_mac: self.ext_mac,
            int_ip: self.int_ip,
            int_mac: self.int_mac,
            bt: self.bt.clone(),
            c: Counters::default(),
            stats: Stats::default(),
            nh4: NextHop { held: Default::default(), ..self.nh4.clone() },
            nh6: NextHop { held: Default::default(), ..self.nh6.clone() },
            learned: self.learned.clone(),
            reasm4: self.reasm4.fresh(),
            reasm6: self.reasm6.fresh(),
            rl4: self.rl4.clone(),
            rl6: self.rl6.clone(),
            frag_id4: if self.opts.deterministic_ids { self.frag_id4 } else { seed as u16 },
            frag_id6: if self.opts.deterministic_ids { self.frag_id6 } else { (seed >> 16) as u32 },
            filters: self.filters.clone(),
            opts: self.opts,
            start: self.start,
            now: self.now,
            ubuf: Vec::new(),
            obuf: Vec::new(),
            fbuf: Vec::new(),
            tbuf: Vec::new(),
            hairpin_q: Vec::new(),
            hairpin_n: 0,
        })
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    fn counters(&self) -> Counters {
        self.c
    }

    fn merge_counters(&mut self, replicas: &[Counters]) {
        self.c = Counters::sum(replicas);
    }

    /// Every counter under its own family: Snabb's by their names
    /// (`in-ipv4-packets` is `sluice_lwaftr_in_ipv4_packets_total`), then
    /// Sluice's own block; and the softwires in the binding table.
    fn metrics(&self, to: &mut Metrics) {
        for (name, v) in self.c.snabb.iter() {
            to.counter(
                &format!("sluice_lwaftr_{name}_total"),
                "An lwAFTR counter of Snabb's (softwire-state).",
                &[],
                v,
            );
        }
        for (name, v) in self.c.extra.iter() {
            let name = name.strip_prefix("sluice-").unwrap_or(name);
            to.counter(&format!("sluice_lwaftr_{name}_total"), "An lwAFTR counter of Sluice's own.", &[], v);
        }
        to.gauge("sluice_lwaftr_softwires", "Softwires in the binding table.", &[], self.bt.len() as f64);
    }

    /// Ticks are needed only while a next hop is unresolved (requests to
    /// repeat, a MAC another replica may have learned); resolved, the
    /// worker may sleep until input comes.
    fn tick_interval(&self) -> Option<std::time::Duration> {
        let unresolved =
            (self.nh4.ip.is_some() && self.nh4.mac.is_none()) || (self.nh6.ip.is_some() && self.nh6.mac.is_none());
        unresolved.then_some(std::time::Duration::from_millis(10))
    }

    /// Requests for unresolved next hops (at the first tick, then every 3 s
    /// of the driver's clock `now_ns`), and frames released by a MAC
    /// another replica learned. The rate limiters keep the plane's own
    /// clock (read once per batch).
    fn tick<E: FnMut(u32, &[u8]) + ?Sized>(&mut self, now_ns: u64, emit: &mut E) {
        self.clock();
        let now = self.opts.frozen_clock.unwrap_or(now_ns);
        let mut e = |_: usize, p: u32, f: &[u8]| emit(p, f);
        self.adopt_shared_macs(&mut e);
        self.request_next_hops(now, &mut e);
        self.drain_hairpin(&mut e);
    }
}
