//! Fragmentation of what leaves: IPv4 to the external MTU, IPv6 (with a
//! fragment header) to the internal MTU, as Snabb's fragmenters cut.
//!
//! Contract: reads one untagged frame; writes each piece into the scratch
//! buffer given and hands it to `each`. Counting (frag / frag-not) and the
//! fragment-ID counters are the caller's. IPv4: every fragment copies the
//! whole header, non-last payloads are `(mtu - ihl)` rounded down to 8.
//! IPv6: only the fixed header is unfragmentable, non-last payloads are
//! `(mtu - 48)` rounded down to 8.

use crate::frame::*;

/// What the IPv4 fragmenter did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Fits: sent as is.
    Whole,
    /// Cut into this many fragments.
    Fragments(usize),
    /// Too big with DF set, or malformed: dropped.
    Dropped,
}

/// Whether frame `f` needs cutting for `mtu` (L3 bytes).
pub fn too_big(f: &[u8], mtu: u16) -> bool {
    f.len() > ETH + usize::from(mtu)
}

/// Cuts IPv4 frame `f` (too big for `mtu`) into fragments with ID `id`.
pub fn fragment_v4(f: &[u8], mtu: u16, id: u16, buf: &mut Vec<u8>, each: &mut dyn FnMut(&[u8])) -> Fate {
    let l3 = &f[ETH.min(f.len())..];
    let Some(h) = Ipv4::parse(l3) else { return Fate::Dropped };
    if h.df() || h.total > l3.len() || h.total <= h.ihl {
        return Fate::Dropped;
    }
    let per = (usize::from(mtu).saturating_sub(h.ihl)) & !7;
    if per == 0 {
        return Fate::Dropped;
    }
    let payload = &l3[h.ihl..h.total];
    let base_off = usize::from(h.frag & 0x1fff) * 8;
    let orig_mf = h.frag & 0x2000;
    let mut start = 0;
    let mut n = 0;
    while start < payload.len() {
        let len = per.min(payload.len() - start);
        let last = start + len == payload.len();
        buf.clear();
        buf.extend_from_slice(&f[..ETH + h.ihl]);
        buf.extend_from_slice(&payload[start..start + len]);
        let ip = &mut buf[ETH..];
        put16(ip, 2, (h.ihl + len) as u16);
        put16(ip, 4, id);
        let mf = if last { orig_mf } else { 0x2000 };
        put16(ip, 6, (h.frag & 0xc000) | mf | (((base_off + start) / 8) as u16 & 0x1fff));
        set_ipv4_checksum(&mut ip[..h.ihl]);
        each(buf);
        n += 1;
        start += len;
    }
    Fate::Fragments(n)
}

/// Cuts IPv6 frame `f` (too big for `mtu`) into fragments with ID `id`.
pub fn fragment_v6(f: &[u8], mtu: u16, id: u32, buf: &mut Vec<u8>, each: &mut dyn FnMut(&[u8])) -> Fate {
    if f.len() < ETH + IPV6 {
        return Fate::Dropped;
    }
    let per = (usize::from(mtu).saturating_sub(IPV6 + 8)) & !7;
    if per == 0 {
        return Fate::Dropped;
    }
    let nh = f[ETH + 6];
    let payload = &f[ETH + IPV6..];
    let mut start = 0;
    let mut n = 0;
    while start < payload.len() {
        let len = per.min(payload.len() - start);
        let last = start + len == payload.len();
        buf.clear();
        buf.extend_from_slice(&f[..ETH + IPV6]);
        buf.extend_from_slice(&[nh, 0, 0, 0, 0, 0, 0, 0]);
        buf.extend_from_slice(&payload[start..start + len]);
        let ip = &mut buf[ETH..];
        put16(ip, 4, (8 + len) as u16);
        ip[6] = 44;
        put16(ip, IPV6 + 2, (start as u16 & 0xfff8) | u16::from(!last));
        put32(ip, IPV6 + 4, id);
        each(buf);
        n += 1;
        start += len;
    }
    Fate::Fragments(n)
}
