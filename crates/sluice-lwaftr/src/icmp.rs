//! ICMP the lwAFTR generates: ICMPv4 and ICMPv6 errors, echo replies to
//! its own addresses, and the error rate limiter.
//!
//! Contract: builders write a whole untagged Ethernet frame into the
//! buffer given (cleared first) with zero MAC addresses (the next-hop
//! stage sets them) and return nothing else; echo replies rewrite a copy
//! of the request in place (MACs swapped: they skip the next-hop stage).
//! Quotes are bounded: an ICMPv4 error's IPv4 packet is at most 576 bytes,
//! an ICMPv6 error's IPv6 packet at most 1280.

use sluice_hash::csum16;

use crate::frame::*;

/// Largest IPv4 packet of a generated ICMPv4 error.
pub const ICMPV4_MAX: usize = 576;
/// Largest IPv6 packet of a generated ICMPv6 error.
pub const ICMPV6_MAX: usize = 1280;

/// Builds an ICMPv4 error `type`/`code` from `src` to `dst`, with `word`
/// as the 4 bytes after the checksum, quoting `quote` (an IPv4 packet from
/// its header).
pub fn icmpv4_error(out: &mut Vec<u8>, src: u32, dst: u32, ty: u8, code: u8, word: u32, quote: &[u8]) {
    let q = quote.len().min(ICMPV4_MAX - 28);
    let total = 28 + q;
    out.clear();
    out.resize(ETH + total, 0);
    put16(out, 12, ET_IPV4);
    let ip = &mut out[ETH..];
    ip[0] = 0x45;
    put16(ip, 2, total as u16);
    ip[8] = 255;
    ip[9] = 1;
    put32(ip, 12, src);
    put32(ip, 16, dst);
    set_ipv4_checksum(&mut ip[..20]);
    let icmp = &mut ip[20..];
    icmp[0] = ty;
    icmp[1] = code;
    put32(icmp, 4, word);
    icmp[8..].copy_from_slice(&quote[..q]);
    let c = csum16(icmp);
    put16(icmp, 2, c);
}

/// Builds an ICMPv6 error `type`/`code` from `src` to `dst` quoting
/// `quote` (an IPv6 packet from its header).
pub fn icmpv6_error(out: &mut Vec<u8>, src: &[u8; 16], dst: &[u8; 16], ty: u8, code: u8, word: u32, quote: &[u8]) {
    let q = quote.len().min(ICMPV6_MAX - IPV6 - 8);
    let plen = 8 + q;
    out.clear();
    out.resize(ETH + IPV6 + plen, 0);
    put16(out, 12, ET_IPV6);
    let ip = &mut out[ETH..];
    ip[0] = 0x60;
    put16(ip, 4, plen as u16);
    ip[6] = 58;
    ip[7] = 255;
    ip[8..24].copy_from_slice(src);
    ip[24..40].copy_from_slice(dst);
    let (hdr, icmp) = ip.split_at_mut(IPV6);
    icmp[0] = ty;
    icmp[1] = code;
    put32(icmp, 4, word);
    icmp[8..].copy_from_slice(&quote[..q]);
    let c = ipv6_upper_checksum(&hdr[8..24], &hdr[24..40], 58, icmp);
    put16(icmp, 2, c);
}

/// Whether untagged frame `f` is an ICMPv4 echo request to `ip`.
pub fn is_echo_request_v4(f: &[u8], ip: u32) -> bool {
    if ethertype(f) != Some(ET_IPV4) {
        return false;
    }
    let l3 = &f[ETH..];
    match Ipv4::parse(l3) {
        Some(h) => {
            h.proto == 1
                && h.dst == ip
                && h.total >= h.ihl + 8
                && l3.len() >= h.total
                && l3[h.ihl] == 8
                && l3[h.ihl + 1] == 0
        }
        None => false,
    }
}

/// Turns a copy of an ICMPv4 echo request into its reply: MACs and
/// addresses swapped, flags cleared, TTL 64, type 0, checksums recomputed.
pub fn echo_reply_v4(f: &mut [u8]) {
    swap_macs(f);
    let l3 = &mut f[ETH..];
    let ihl = usize::from(l3[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([l3[2], l3[3]])).clamp(ihl, l3.len());
    for i in 0..4 {
        l3.swap(12 + i, 16 + i);
    }
    put16(l3, 6, 0);
    l3[8] = 64;
    set_ipv4_checksum(&mut l3[..ihl]);
    let icmp = &mut l3[ihl..total];
    icmp[0] = 0;
    put16(icmp, 2, 0);
    let c = csum16(icmp);
    put16(icmp, 2, c);
}

/// Whether untagged frame `f` is an ICMPv6 echo request to `ip`.
pub fn is_echo_request_v6(f: &[u8], ip: &[u8; 16]) -> bool {
    ethertype(f) == Some(ET_IPV6)
        && f.len() >= ETH + IPV6 + 8
        && be16(f, ETH + 4).is_some_and(|p| usize::from(p) >= 8 && ETH + IPV6 + usize::from(p) <= f.len())
        && f[ETH + 6] == 58
        && &f[ETH + 24..ETH + 40] == ip
        && f[ETH + IPV6] == 128
        && f[ETH + IPV6 + 1] == 0
}

/// Turns a copy of an ICMPv6 echo request into its reply: MACs and
/// addresses swapped, hop limit 64, type 129, checksum recomputed.
pub fn echo_reply_v6(f: &mut [u8]) {
    swap_macs(f);
    let l3 = &mut f[ETH..];
    for i in 0..16 {
        l3.swap(8 + i, 24 + i);
    }
    l3[7] = 64;
    let plen = usize::from(u16::from_be_bytes([l3[4], l3[5]])).min(l3.len() - IPV6);
    let (hdr, rest) = l3.split_at_mut(IPV6);
    let icmp = &mut rest[..plen];
    icmp[0] = 129;
    put16(icmp, 2, 0);
    let c = ipv6_upper_checksum(&hdr[8..24], &hdr[24..40], 58, icmp);
    put16(icmp, 2, c);
}

/// Swaps the destination and source MAC addresses of `f`.
pub fn swap_macs(f: &mut [u8]) {
    for i in 0..6 {
        f.swap(i, 6 + i);
    }
}

/// At most `packets` errors per window of `period` seconds, a window
/// starting with the first error after the previous one ended.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    packets: u32,
    period_ns: u64,
    window: Option<u64>,
    sent: u32,
}

impl RateLimiter {
    /// `packets` per `period` seconds.
    pub fn new(packets: u32, period: u32) -> RateLimiter {
        RateLimiter { packets, period_ns: u64::from(period.max(1)) * 1_000_000_000, window: None, sent: 0 }
    }

    /// Whether one more error may go at `now_ns`.
    pub fn allow(&mut self, now_ns: u64) -> bool {
        match self.window {
            Some(start) if now_ns.saturating_sub(start) < self.period_ns => {}
            _ => {
                self.window = Some(now_ns);
                self.sent = 0;
            }
        }
        if self.sent < self.packets {
            self.sent += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limiter_windows() {
        let mut r = RateLimiter::new(2, 1);
        assert!(r.allow(0) && r.allow(10));
        assert!(!r.allow(20));
        assert!(r.allow(1_000_000_000));
    }

    #[test]
    fn icmpv4_error_is_bounded() {
        let mut out = Vec::new();
        icmpv4_error(&mut out, 1, 2, 3, 1, 0, &[0u8; 2000]);
        assert_eq!(out.len(), ETH + ICMPV4_MAX);
        icmpv6_error(&mut out, &[0; 16], &[1; 16], 1, 5, 0, &[0u8; 2000]);
        assert_eq!(out.len(), ETH + ICMPV6_MAX);
    }
}
