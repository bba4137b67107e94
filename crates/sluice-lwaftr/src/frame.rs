//! Bounds-checked reads and writes on untagged Ethernet frames, and the
//! checksums the lwAFTR computes.
//!
//! Contract: every reader returns `None` (or 0-length views) instead of
//! panicking on a short frame; writers take buffers the caller sized.
//! Nothing here allocates.

use sluice_hash::{csum16, csum16_add, csum16_finish};

/// Ethernet header length.
pub const ETH: usize = 14;
/// IPv6 fixed header length.
pub const IPV6: usize = 40;
/// EtherType of IPv4.
pub const ET_IPV4: u16 = 0x0800;
/// EtherType of ARP.
pub const ET_ARP: u16 = 0x0806;
/// EtherType of IPv6.
pub const ET_IPV6: u16 = 0x86dd;
/// EtherType of an 802.1Q tag.
pub const ET_VLAN: u16 = 0x8100;

/// Big-endian u16 at `at`, if in bounds.
#[inline]
pub fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Big-endian u32 at `at`, if in bounds.
#[inline]
pub fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// 16 bytes at `at`, if in bounds.
#[inline]
pub fn addr16(b: &[u8], at: usize) -> Option<[u8; 16]> {
    b.get(at..at + 16)?.try_into().ok()
}

/// The EtherType of an untagged frame.
#[inline]
pub fn ethertype(f: &[u8]) -> Option<u16> {
    be16(f, 12)
}

/// Writes `v` big-endian at `at` (the caller sized the buffer).
#[inline]
pub fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes `v` big-endian at `at`.
#[inline]
pub fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}

/// Sets the checksum of the IPv4 header `h` (its IHL's worth of bytes).
pub fn set_ipv4_checksum(h: &mut [u8]) {
    put16(h, 10, 0);
    let c = csum16(h);
    put16(h, 10, c);
}

/// ICMPv6 (or any upper layer over IPv6) checksum of `payload` between
/// `src` and `dst`, with next header `nh`, its checksum field counted as is.
pub fn ipv6_upper_checksum(src: &[u8], dst: &[u8], nh: u8, payload: &[u8]) -> u16 {
    let mut acc = csum16_add(0, src);
    acc = csum16_add(acc, dst);
    acc += payload.len() as u64;
    acc += u64::from(nh);
    csum16_finish(csum16_add(acc, payload))
}

/// Decrements the TTL of the IPv4 header `h` and patches its checksum
/// incrementally (RFC 1624), as Snabb does: the complement is taken on 32
/// bits, so a sum that goes below zero borrows from the ones above it (an
/// end-around borrow; with the complement on 16 bits, a header checksum
/// of 0xff00 or more came out one too high). A TTL of 0 stays 0. Returns
/// the new TTL.
pub fn decrement_ttl(h: &mut [u8]) -> u8 {
    let old = h[8];
    if old == 0 {
        return 0;
    }
    let new = old - 1;
    h[8] = new;
    let mut c = !u32::from(u16::from_be_bytes([h[10], h[11]]));
    c = c.wrapping_add(((i32::from(new) - i32::from(old)) << 8) as u32);
    c = (c & 0xffff).wrapping_add(c >> 16);
    c = (c & 0xffff).wrapping_add(c >> 16);
    put16(h, 10, !(c as u16));
    new
}

/// A parsed IPv4 header (of the L3 bytes given).
#[derive(Debug, Clone, Copy)]
pub struct Ipv4 {
    /// Header length in bytes.
    pub ihl: usize,
    /// Total length.
    pub total: usize,
    /// Protocol.
    pub proto: u8,
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Flags and fragment offset word.
    pub frag: u16,
}

impl Ipv4 {
    /// Parses the IPv4 header at the start of `l3` (at least 20 bytes,
    /// IHL ≥ 5 and within `l3`).
    pub fn parse(l3: &[u8]) -> Option<Ipv4> {
        if l3.len() < 20 || l3[0] >> 4 != 4 {
            return None;
        }
        let ihl = usize::from(l3[0] & 0x0f) * 4;
        if ihl < 20 || ihl > l3.len() {
            return None;
        }
        Some(Ipv4 {
            ihl,
            total: usize::from(be16(l3, 2)?),
            proto: l3[9],
            src: be32(l3, 12)?,
            dst: be32(l3, 16)?,
            frag: be16(l3, 6)?,
        })
    }

    /// Whether DF is set.
    pub fn df(&self) -> bool {
        self.frag & 0x4000 != 0
    }

    /// Whether this is a fragment (MF or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.frag & 0x3fff != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_decrement_matches_the_corpus() {
        // inet-ttl1-time-exceeded: TTL 1, checksum ed08 -> TTL 0, ee08.
        let mut h = [0u8; 20];
        h[8] = 1;
        h[10] = 0xed;
        h[11] = 0x08;
        assert_eq!(decrement_ttl(&mut h), 0);
        assert_eq!((h[10], h[11]), (0xee, 0x08));
        // inet-bound-encap: b508 -> b608.
        h[8] = 57;
        h[10] = 0xb5;
        h[11] = 0x08;
        assert_eq!(decrement_ttl(&mut h), 56);
        assert_eq!((h[10], h[11]), (0xb6, 0x08));
        assert!(be16(&h, 19).is_none());
        assert!(Ipv4::parse(&h[..10]).is_none());
    }

    /// The patched checksum is the header's checksum for every TTL and
    /// every checksum value, the ones from 0xff00 up included (where a
    /// decrement borrows past zero).
    #[test]
    fn ttl_decrement_keeps_the_header_checksum_valid() {
        let mut seed: u32 = 0x9e37_79b9;
        for i in 0..200_000u32 {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[4..8].copy_from_slice(&seed.to_be_bytes());
            h[8] = (i % 255) as u8 + 1;
            h[12..16].copy_from_slice(&i.to_be_bytes());
            h[16..20].copy_from_slice(&seed.rotate_left(7).to_be_bytes());
            set_ipv4_checksum(&mut h);
            decrement_ttl(&mut h);
            assert_eq!(csum16(&h), 0, "header {h:02x?}");
        }
    }
}
