//! ARP (external side) and NDP (internal side): answering requests for the
//! lwAFTR's own address, resolving a next hop given by IP, and holding
//! frames toward an unresolved next hop.
//!
//! Contract: the parsers read one untagged frame and say what it is; the
//! builders write whole untagged frames into the buffer given. A
//! [`NextHop`] holds the next hop's MAC (configured or learned) and, while
//! it is unknown, a bounded FIFO of frames ([`HOLD_MAX`]); frames leave it
//! in order once the MAC is learned. Requests go out at start and then
//! every [`RETRY_NS`] while unresolved (the caller's timer).

use std::collections::VecDeque;

use crate::frame::*;

/// Frames held per side while the next hop is unresolved (Snabb's link size).
pub const HOLD_MAX: usize = 1024;
/// Interval between two ARP requests or NSs.
pub const RETRY_NS: u64 = 3_000_000_000;

/// A side's next hop.
#[derive(Debug, Clone)]
pub struct NextHop<A> {
    /// The MAC, once known (or configured).
    pub mac: Option<[u8; 6]>,
    /// The address to resolve, if given by IP.
    pub ip: Option<A>,
    /// When the last request went out.
    pub last_request: Option<u64>,
    /// Frames waiting for the MAC, with the input index that caused them.
    pub held: VecDeque<(usize, Vec<u8>)>,
}

impl<A> NextHop<A> {
    /// A next hop with a known MAC.
    pub fn mac(mac: [u8; 6]) -> NextHop<A> {
        NextHop { mac: Some(mac), ip: None, last_request: None, held: VecDeque::new() }
    }

    /// A next hop to resolve.
    pub fn ip(ip: A) -> NextHop<A> {
        NextHop { mac: None, ip: Some(ip), last_request: None, held: VecDeque::new() }
    }

    /// Whether a request is due at `now`.
    pub fn request_due(&self, now: u64) -> bool {
        self.mac.is_none() && self.ip.is_some() && self.last_request.is_none_or(|t| now.saturating_sub(t) >= RETRY_NS)
    }

    /// Holds `frame`; false when the queue is full (the frame is dropped).
    pub fn hold(&mut self, idx: usize, frame: &[u8]) -> bool {
        if self.held.len() >= HOLD_MAX {
            return false;
        }
        self.held.push_back((idx, frame.to_vec()));
        true
    }
}

/// An ARP packet of interest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arp {
    /// A request: (sender MAC, sender IP, target IP).
    Request([u8; 6], u32, u32),
    /// A reply: (sender MAC, sender IP).
    Reply([u8; 6], u32),
    /// Another ARP packet.
    Other,
}

/// Parses an ARP frame (`None`: not ARP, or shorter than 42 bytes).
pub fn parse_arp(f: &[u8]) -> Option<Arp> {
    if ethertype(f)? != ET_ARP || f.len() < 42 {
        return None;
    }
    let a = &f[ETH..];
    if be16(a, 0)? != 1 || be16(a, 2)? != ET_IPV4 || a[4] != 6 || a[5] != 4 {
        return Some(Arp::Other);
    }
    let sha: [u8; 6] = a[8..14].try_into().ok()?;
    let spa = be32(a, 14)?;
    let tpa = be32(a, 24)?;
    Some(match be16(a, 6)? {
        1 => Arp::Request(sha, spa, tpa),
        2 => Arp::Reply(sha, spa),
        _ => Arp::Other,
    })
}

fn arp(out: &mut Vec<u8>, op: u16, eth_dst: [u8; 6], mac: [u8; 6], ip: u32, tha: [u8; 6], tpa: u32) {
    out.clear();
    out.extend_from_slice(&eth_dst);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ET_ARP.to_be_bytes());
    out.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    out.extend_from_slice(&op.to_be_bytes());
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ip.to_be_bytes());
    out.extend_from_slice(&tha);
    out.extend_from_slice(&tpa.to_be_bytes());
}

/// An ARP reply from (`mac`, `ip`) to the requester (`sha`, `spa`).
pub fn arp_reply(out: &mut Vec<u8>, mac: [u8; 6], ip: u32, sha: [u8; 6], spa: u32) {
    arp(out, 2, sha, mac, ip, sha, spa);
}

/// A broadcast ARP request from (`mac`, `ip`) for `target`.
pub fn arp_request(out: &mut Vec<u8>, mac: [u8; 6], ip: u32, target: u32) {
    arp(out, 1, [0xff; 6], mac, ip, [0; 6], target);
}

/// An NDP message of interest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ndp {
    /// A neighbor solicitation (valid hop limit, code and checksum) for
    /// `target`; `answerable` when nothing but the target forbids an
    /// answer (target not multicast, not from `::` to a solicited-node
    /// address, options well formed, no source link-layer option from `::`).
    Ns { target: [u8; 16], answerable: bool },
    /// A neighbor advertisement (valid as above): its target, its solicited
    /// flag, and the MAC it teaches (its target link-layer option, else the
    /// Ethernet source; `None` when its options are malformed).
    Na { target: [u8; 16], solicited: bool, mac: Option<[u8; 6]> },
    /// An invalid NDP message or one of another type (consumed).
    Other,
}

/// Walks NDP options from `at` in `icmp`: `None` when one is malformed (length
/// 0 or past the end), else the options as (type, body) pairs via `each`.
fn options(icmp: &[u8], mut at: usize, each: &mut dyn FnMut(u8, &[u8]) -> bool) -> bool {
    while at < icmp.len() {
        if at + 2 > icmp.len() {
            return false;
        }
        let len = usize::from(icmp[at + 1]) * 8;
        if len == 0 || at + len > icmp.len() {
            return false;
        }
        if !each(icmp[at], &icmp[at..at + len]) {
            return false;
        }
        at += len;
    }
    true
}

/// Parses an NDP frame (`None`: not ICMPv6 types 133..=137).
pub fn parse_ndp(f: &[u8]) -> Option<Ndp> {
    if ethertype(f)? != ET_IPV6 || f.len() < ETH + IPV6 + 4 {
        return None;
    }
    let ip = &f[ETH..];
    if ip[6] != 58 {
        return None;
    }
    let ty = ip[IPV6];
    if !(133..=137).contains(&ty) {
        return None;
    }
    let plen = usize::from(be16(ip, 4)?);
    if IPV6 + plen > ip.len() || plen < 24 || ip[7] != 255 || ip[IPV6 + 1] != 0 {
        return Some(Ndp::Other);
    }
    let icmp = &ip[IPV6..IPV6 + plen];
    if ipv6_upper_checksum(&ip[8..24], &ip[24..40], 58, icmp) != 0 {
        return Some(Ndp::Other);
    }
    let target = addr16(icmp, 8)?;
    let src_unspecified = ip[8..24] == [0; 16];
    match ty {
        135 => {
            let dst = &ip[24..40];
            let to_solicited_node = dst[..13] == [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff];
            let opts_ok = options(icmp, 24, &mut |t, _| !(t == 1 && src_unspecified));
            let answerable = target[0] != 0xff && !(src_unspecified && to_solicited_node) && opts_ok;
            Some(Ndp::Ns { target, answerable })
        }
        136 => {
            let mut tll: Option<[u8; 6]> = None;
            let ok = options(icmp, 24, &mut |t, body| {
                if t != 2 {
                    return true;
                }
                if body.len() != 8 {
                    return false;
                }
                if tll.is_none() {
                    tll = body[2..8].try_into().ok();
                }
                true
            });
            let src: [u8; 6] = f[6..12].try_into().ok()?;
            let mac = if ok { Some(tll.unwrap_or(src)) } else { tll };
            Some(Ndp::Na { target, solicited: icmp[4] & 0x40 != 0, mac })
        }
        _ => Some(Ndp::Other),
    }
}

/// The ICMPv6 part of an NS or NA the lwAFTR sends.
struct NdpMsg<'a> {
    ty: u8,
    flags: u8,
    target: &'a [u8; 16],
    /// Option type: 1 = source, 2 = target link-layer address.
    opt: u8,
}

fn ndp(out: &mut Vec<u8>, eth_dst: [u8; 6], mac: [u8; 6], src: &[u8; 16], dst: &[u8; 16], m: NdpMsg) {
    out.clear();
    out.extend_from_slice(&eth_dst);
    out.extend_from_slice(&mac);
    out.extend_from_slice(&ET_IPV6.to_be_bytes());
    out.extend_from_slice(&[0x60, 0, 0, 0, 0, 32, 58, 255]);
    out.extend_from_slice(src);
    out.extend_from_slice(dst);
    out.extend_from_slice(&[m.ty, 0, 0, 0, m.flags, 0, 0, 0]);
    out.extend_from_slice(m.target);
    out.extend_from_slice(&[m.opt, 1]);
    out.extend_from_slice(&mac);
    let c = ipv6_upper_checksum(src, dst, 58, &out[ETH + IPV6..]);
    put16(out, ETH + IPV6 + 2, c);
}

/// The solicited NA (Router|Solicited, target link-layer option) answering
/// the NS frame `ns` for our `ip`.
pub fn na_reply(out: &mut Vec<u8>, mac: [u8; 6], ip: &[u8; 16], ns: &[u8]) {
    let eth_dst: [u8; 6] = ns[6..12].try_into().expect("checked frame");
    let mut dst: [u8; 16] = ns[ETH + 8..ETH + 24].try_into().expect("checked frame");
    if dst == [0; 16] {
        dst = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    }
    ndp(out, eth_dst, mac, ip, &dst, NdpMsg { ty: 136, flags: 0xc0, target: ip, opt: 2 });
}

/// An NS from (`mac`, `ip`) for `target`, to its solicited-node address.
pub fn ns_request(out: &mut Vec<u8>, mac: [u8; 6], ip: &[u8; 16], target: &[u8; 16]) {
    let eth_dst = [0x33, 0x33, 0xff, target[13], target[14], target[15]];
    let mut dst = [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 0];
    dst[13..].copy_from_slice(&target[13..]);
    ndp(out, eth_dst, mac, ip, &dst, NdpMsg { ty: 135, flags: 0, target, opt: 1 });
}
