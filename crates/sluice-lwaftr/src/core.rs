//! The lwAFTR core: encapsulation toward B4s, decapsulation with source
//! validation, hairpinning, the ICMP policies and the translation of
//! incoming ICMPv6 errors (Snabb's `lwaftr` app).
//!
//! Contract: reads untagged frames that passed reassembly, the ingress
//! filter, ARP/NDP and echo; writes the core's Snabb counters; frames leave
//! through the next-hop stage (`next_hop_out`) in two parts: the new
//! headers, built on the stack (encapsulation: Ethernet, IPv6 and the IPv4
//! header with its TTL decremented; decapsulation: Ethernet), then the rest
//! of the received packet, unchanged and not copied (generated ICMP
//! errors, a rare path, are built whole in their own buffer). Hairpinned packets and
//! ICMPv4 errors to managed addresses wait in the hairpin queue, which the
//! plane drains at the end of each batch (Snabb's order: all of a batch's
//! input first, then the hairpin queue). Lookup keys:
//! inet→B4 (destination address): TCP/UDP/other = destination port, echo
//! request = 0, echo reply = identifier, other ICMP = the quoted packet's
//! source port; B4→inet (inner source address): source port, echo request
//! = identifier, echo reply = 0, other ICMP = the quoted source port.

use sluice_hash::csum16;
use sluice_lookup::mem::copy_short;

use sluice_dataplane::emit::joined;
use sluice_dataplane::Emit;

use crate::frame::*;
use crate::icmp;
use crate::plane::{Lwaftr, Side};

impl Lwaftr {
    fn drop_v4_iface(&mut self, len: u64, hairpinned: bool) {
        if hairpinned {
            self.c.snabb.drop_all_ipv6_iface_bytes += len + 40;
            self.c.snabb.drop_all_ipv6_iface_packets += 1;
        } else {
            self.c.snabb.drop_all_ipv4_iface_bytes += len;
            self.c.snabb.drop_all_ipv4_iface_packets += 1;
        }
        self.stats.dropped += 1;
    }

    fn drop_v6_iface(&mut self, len: u64) {
        self.c.snabb.drop_all_ipv6_iface_bytes += len;
        self.c.snabb.drop_all_ipv6_iface_packets += 1;
        self.stats.dropped += 1;
    }

    /// A frame from the internet (or hairpinned: a decapsulated packet or a
    /// generated ICMPv4 error to a managed address).
    pub(crate) fn inet_in<E: Emit + ?Sized>(&mut self, idx: usize, f: &[u8], hairpinned: bool, emit: &mut E) {
        let len = f.len() as u64;
        if ethertype(f) != Some(ET_IPV4) {
            self.c.snabb.drop_misplaced_not_ipv4_bytes += len;
            self.c.snabb.drop_misplaced_not_ipv4_packets += 1;
            return self.drop_v4_iface(len, hairpinned);
        }
        let l3 = &f[ETH..];
        let Some(h) = Ipv4::parse(l3) else {
            self.c.extra.malformed += 1;
            return self.drop_v4_iface(len, hairpinned);
        };
        if !hairpinned {
            self.c.snabb.in_ipv4_bytes += len;
            self.c.snabb.in_ipv4_packets += 1;
        }
        let port = if h.proto == 1 {
            if !self.s.external.common.allow_incoming_icmp {
                self.c.snabb.drop_in_by_policy_icmpv4_bytes += len;
                self.c.snabb.drop_in_by_policy_icmpv4_packets += 1;
                return self.drop_v4_iface(len, hairpinned);
            }
            let icmp = &l3[h.ihl..h.total.clamp(h.ihl, l3.len())];
            if csum16(icmp) != 0 {
                self.c.snabb.drop_bad_checksum_icmpv4_bytes += len;
                self.c.snabb.drop_bad_checksum_icmpv4_packets += 1;
                return self.drop_v4_iface(len, hairpinned);
            }
            match icmp.first() {
                Some(8) => Some(0),
                Some(0) => be16(icmp, 4),
                _ => icmp.get(8).and_then(|b| be16(icmp, 8 + usize::from(b & 0x0f) * 4)),
            }
        } else {
            be16(l3, h.ihl + 2)
        };
        let Some(port) = port else {
            self.c.extra.malformed += 1;
            return self.drop_v4_iface(len, hairpinned);
        };
        let Some(sw) = self.bt.lookup(h.dst, port) else {
            self.c.snabb.drop_no_dest_softwire_ipv4_bytes += len;
            self.c.snabb.drop_no_dest_softwire_ipv4_packets += 1;
            if !self.s.external.common.generate_icmp_errors {
                self.c.snabb.drop_out_by_policy_icmpv4_packets += 1;
            } else if h.proto == 1 {
                self.c.snabb.drop_in_by_rfc7596_icmpv4_bytes += len;
                self.c.snabb.drop_in_by_rfc7596_icmpv4_packets += 1;
            } else {
                self.icmpv4_error(idx, 3, 1, 0, l3, emit);
            }
            return self.drop_v4_iface(len, hairpinned);
        };
        // Encapsulate: IPv6 header in front of the IPv4 packet, TTL - 1.
        // The head: Ethernet, IPv6 and the IPv4 header (its TTL and
        // checksum change); the tail: the rest of the packet, as received.
        let mut head = [0u8; ETH + IPV6 + 60];
        copy_short(&mut head[ETH + IPV6..ETH + IPV6 + h.ihl], &l3[..h.ihl]);
        let head = &mut head[..ETH + IPV6 + h.ihl];
        let rest = &l3[h.ihl..];
        let ttl = decrement_ttl(&mut head[ETH + IPV6..]);
        let mtu = usize::from(self.s.internal.common.mtu);
        if ttl == 0 || (l3.len() + IPV6 > mtu && h.df()) {
            return self.not_encapsulated(idx, ttl, mtu, &head[ETH + IPV6..], rest, len, hairpinned, emit);
        }
        put16(head, 12, ET_IPV6);
        let tos = u32::from(l3[1]);
        put32(head, ETH, (6 << 28) | (tos << 20) | (self.s.flow_label & 0xf_ffff));
        put16(head, ETH + 4, l3.len() as u16);
        head[ETH + 6] = 4;
        head[ETH + 7] = 255;
        head[ETH + 8..ETH + 24].copy_from_slice(&sw.br);
        head[ETH + 24..ETH + 40].copy_from_slice(&sw.b4);
        self.c.snabb.out_ipv6_bytes += (head.len() + rest.len()) as u64;
        self.c.snabb.out_ipv6_packets += 1;
        self.next_hop_out(Side::V6, idx, head, rest, emit);
    }

    /// An IPv4 packet not encapsulated: its TTL ran out (`ttl` is 0 after
    /// the decrement) or it is too big for the internal MTU with DF set.
    /// Counted and dropped, with the ICMPv4 error the configuration asks
    /// for (quoting the packet, `ip_header` then `rest`, TTL decremented).
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn not_encapsulated<E: Emit + ?Sized>(
        &mut self,
        idx: usize,
        ttl: u8,
        mtu: usize,
        ip_header: &[u8],
        rest: &[u8],
        len: u64,
        hairpinned: bool,
        emit: &mut E,
    ) {
        let gen = self.s.external.common.generate_icmp_errors;
        let (ty, code, word) = if ttl == 0 {
            self.c.snabb.drop_ttl_zero_ipv4_bytes += len;
            self.c.snabb.drop_ttl_zero_ipv4_packets += 1;
            (11, 0, 0)
        } else {
            self.c.snabb.drop_over_mtu_but_dont_fragment_ipv4_bytes += len;
            self.c.snabb.drop_over_mtu_but_dont_fragment_ipv4_packets += 1;
            (3, 4, (mtu - IPV6) as u32 & 0xffff)
        };
        if gen {
            joined(ip_header, rest, |quote| self.icmpv4_error(idx, ty, code, word, quote, emit));
        } else {
            self.c.snabb.drop_out_by_policy_icmpv4_packets += 1;
        }
        self.drop_v4_iface(len, hairpinned);
    }

    /// Sends an ICMPv4 error about IPv4 packet `quote` to its source,
    /// tunnelled when that source is a B4.
    pub(crate) fn icmpv4_error<E: Emit + ?Sized>(
        &mut self,
        idx: usize,
        ty: u8,
        code: u8,
        word: u32,
        quote: &[u8],
        emit: &mut E,
    ) {
        let Some(dst) = be32(quote, 12) else {
            self.c.extra.malformed += 1;
            return;
        };
        if !self.rl4.allow(self.now) {
            self.c.extra.icmpv4_rate_limited += 1;
            return;
        }
        let mut e = Vec::new();
        icmp::icmpv4_error(&mut e, self.ext_ip, dst, ty, code, word, quote);
        self.c.snabb.out_icmpv4_error_bytes += e.len() as u64;
        self.c.snabb.out_icmpv4_error_packets += 1;
        // Tunnelled to a B4 whether or not hairpinning is on (this is not
        // hairpinning), through the hairpin queue.
        if self.bt.is_managed(dst) {
            self.defer_hairpin(idx, &e, &[]);
        } else {
            self.c.snabb.out_ipv4_bytes += e.len() as u64;
            self.c.snabb.out_ipv4_packets += 1;
            self.next_hop_out(Side::V4, idx, &mut e, &[], emit);
        }
    }

    /// A frame from a B4.
    pub(crate) fn b4_in<E: Emit + ?Sized>(&mut self, idx: usize, f: &[u8], emit: &mut E) {
        let len = f.len() as u64;
        if ethertype(f) != Some(ET_IPV6) || f.len() < ETH + IPV6 {
            self.c.snabb.drop_misplaced_not_ipv6_bytes += len;
            self.c.snabb.drop_misplaced_not_ipv6_packets += 1;
            return self.drop_v6_iface(len);
        }
        self.c.snabb.in_ipv6_bytes += len;
        self.c.snabb.in_ipv6_packets += 1;
        let l3 = &f[ETH..];
        match l3[6] {
            4 => {}
            58 => {
                if !self.s.internal.common.allow_incoming_icmp {
                    self.c.snabb.drop_in_by_policy_icmpv6_bytes += len;
                    self.c.snabb.drop_in_by_policy_icmpv6_packets += 1;
                    return self.drop_v6_iface(len);
                }
                return self.icmpv6_in(idx, f, emit);
            }
            _ => {
                self.c.snabb.drop_unknown_protocol_ipv6_bytes += len;
                self.c.snabb.drop_unknown_protocol_ipv6_packets += 1;
                return self.drop_v6_iface(len);
            }
        }
        let inner = &l3[IPV6..];
        let key = Ipv4::parse(inner).and_then(|h| {
            let port = if h.proto == 1 {
                match inner.get(h.ihl) {
                    Some(8) => be16(inner, h.ihl + 4),
                    Some(0) => Some(0),
                    _ => inner.get(h.ihl + 8).and_then(|b| be16(inner, h.ihl + 8 + usize::from(b & 0x0f) * 4)),
                }
            } else {
                be16(inner, h.ihl)
            };
            port.map(|p| (h, p))
        });
        let Some((h, port)) = key else {
            self.c.extra.malformed += 1;
            return self.drop_v6_iface(len);
        };
        let sw = self.bt.lookup(h.src, port);
        let valid = sw.is_some_and(|s| s.b4 == l3[8..24] && s.br == l3[24..40]);
        if !valid {
            self.c.snabb.drop_no_source_softwire_ipv6_bytes += len;
            self.c.snabb.drop_no_source_softwire_ipv6_packets += 1;
            if !self.s.internal.common.generate_icmp_errors {
                self.c.snabb.drop_out_by_policy_icmpv6_packets += 1;
            } else {
                let src: [u8; 16] = match sw {
                    Some(s) => s.br,
                    None => l3[24..40].try_into().expect("checked length"),
                };
                let dst: [u8; 16] = l3[8..24].try_into().expect("checked length");
                let mut e = Vec::new();
                icmp::icmpv6_error(&mut e, &src, &dst, 1, 5, 0, l3);
                if self.rl6.allow(self.now) {
                    self.c.snabb.out_icmpv6_error_bytes += e.len() as u64;
                    self.c.snabb.out_icmpv6_error_packets += 1;
                    self.c.snabb.out_ipv6_bytes += e.len() as u64;
                    self.c.snabb.out_ipv6_packets += 1;
                    self.next_hop_out(Side::V6, idx, &mut e, &[], emit);
                } else {
                    self.c.snabb.drop_over_rate_limit_icmpv6_bytes += e.len() as u64;
                    self.c.snabb.drop_over_rate_limit_icmpv6_packets += 1;
                }
            }
            return self.drop_v6_iface(len);
        }
        // Decapsulate: the inner packet behind a new Ethernet header (sent
        // as two parts; whole into the hairpin queue).
        let mut head = [0u8; ETH];
        put16(&mut head, 12, ET_IPV4);
        let bytes = (ETH + inner.len()) as u64;
        if self.s.hairpinning && self.bt.is_managed(h.dst) {
            self.c.snabb.hairpin_ipv4_bytes += bytes;
            self.c.snabb.hairpin_ipv4_packets += 1;
            self.defer_hairpin(idx, &head, inner);
        } else {
            self.c.snabb.out_ipv4_bytes += bytes;
            self.c.snabb.out_ipv4_packets += 1;
            self.next_hop_out(Side::V4, idx, &mut head, inner, emit);
        }
    }

    /// An ICMPv6 message from a B4 (not NDP, not an echo to us):
    /// translated to an ICMPv4 error to the quoted packet's source.
    fn icmpv6_in<E: Emit + ?Sized>(&mut self, idx: usize, f: &[u8], emit: &mut E) {
        let len = f.len() as u64;
        let icmp = &f[ETH + IPV6..];
        let (ty, code) = (icmp.first().copied(), icmp.get(1).copied());
        let (code4, word) = match (ty, code) {
            (Some(2), Some(0)) => (4, be32(icmp, 4).unwrap_or(0).wrapping_sub(40) & 0xffff),
            (Some(2), _) => {
                self.c.snabb.drop_too_big_type_but_not_code_icmpv6_bytes += len;
                self.c.snabb.drop_too_big_type_but_not_code_icmpv6_packets += 1;
                return self.drop_v6_iface(len);
            }
            (Some(1), _) | (Some(4), _) | (Some(3), Some(0)) => (1, 0),
            (Some(3), _) => {
                self.c.snabb.drop_over_time_but_not_hop_limit_icmpv6_bytes += len;
                self.c.snabb.drop_over_time_but_not_hop_limit_icmpv6_packets += 1;
                return self.drop_v6_iface(len);
            }
            _ => {
                self.c.snabb.drop_unknown_protocol_icmpv6_bytes += len;
                self.c.snabb.drop_unknown_protocol_icmpv6_packets += 1;
                return self.drop_v6_iface(len);
            }
        };
        let quote = icmp.get(8 + IPV6..).unwrap_or(&[]);
        if quote.len() < 20 {
            self.c.extra.malformed += 1;
            self.stats.dropped += 1;
            return;
        }
        self.icmpv4_error(idx, 3, code4, word, quote, emit);
    }
}
