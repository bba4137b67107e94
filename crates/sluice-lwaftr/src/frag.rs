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

/// Whether IPv4 frame `f` has the length its header says (what Snabb's
/// fragmenter requires of every IPv4 frame, cut or not).
pub fn valid_v4(f: &[u8]) -> bool {
    f.len() >= ETH + 20
        && usize::from(f[ETH] & 0x0f) * 4 >= 20
        && usize::from(u16::from_be_bytes([f[ETH + 2], f[ETH + 3]])) == f.len() - ETH
}

/// Whether IPv6 frame `f` has the length its header says.
pub fn valid_v6(f: &[u8]) -> bool {
    f.len() >= ETH + IPV6 && usize::from(u16::from_be_bytes([f[ETH + 4], f[ETH + 5]])) == f.len() - ETH - IPV6
}

/// Cuts IPv4 frame `f` (valid, too big for `mtu`) into fragments with ID
/// `id`, as Snabb does: a piece is `mtu - ihl` bytes, rounded down to 8
/// unless it is the last; offsets count from this packet's start, MF is
/// set on all but the last piece, the other flags are kept. DF set: dropped.
pub fn fragment_v4(f: &[u8], mtu: u16, id: u16, buf: &mut Vec<u8>, each: &mut dyn FnMut(&[u8])) -> Fate {
    let l3 = &f[ETH.min(f.len())..];
    let Some(h) = Ipv4::parse(l3) else { return Fate::Dropped };
    if h.df() {
        return Fate::Dropped;
    }
    let flags = h.frag & 0xe000;
    let header = ETH + h.ihl;
    let total = f.len() - header;
    let room = (ETH + usize::from(mtu)).saturating_sub(header);
    if room < 8 {
        return Fate::Dropped;
    }
    let (mut offset, mut n) = (0, 0);
    while offset < total {
        let (len, mf) = if offset + room < total { (room & !7, 0x2000) } else { (total - offset, 0) };
        buf.clear();
        buf.extend_from_slice(&f[..header]);
        buf.extend_from_slice(&f[header + offset..header + offset + len]);
        let ip = &mut buf[ETH..];
        put16(ip, 2, (h.ihl + len) as u16);
        put16(ip, 4, id);
        put16(ip, 6, ((flags & !0x2000) | mf) | ((offset / 8) as u16 & 0x1fff));
        set_ipv4_checksum(&mut ip[..h.ihl]);
        each(buf);
        n += 1;
        offset += len;
    }
    Fate::Fragments(n)
}

/// Cuts IPv6 frame `f` (valid, too big for `mtu`) into fragments with ID
/// `id`, as Snabb does: a fragment header after the fixed header, pieces
/// of `mtu - 48` bytes rounded down to 8 unless last.
pub fn fragment_v6(f: &[u8], mtu: u16, id: u32, buf: &mut Vec<u8>, each: &mut dyn FnMut(&[u8])) -> Fate {
    let header = ETH + IPV6;
    if f.len() < header {
        return Fate::Dropped;
    }
    let room = (ETH + usize::from(mtu)).saturating_sub(header + 8);
    if room < 8 {
        return Fate::Dropped;
    }
    let nh = f[ETH + 6];
    let total = f.len() - header;
    let (mut offset, mut n) = (0, 0);
    while offset < total {
        let (len, more) = if offset + room < total { (room & !7, 1) } else { (total - offset, 0) };
        buf.clear();
        buf.extend_from_slice(&f[..header]);
        buf.extend_from_slice(&[nh, 0, 0, 0, 0, 0, 0, 0]);
        buf.extend_from_slice(&f[header + offset..header + offset + len]);
        let ip = &mut buf[ETH..];
        put16(ip, 4, (8 + len) as u16);
        ip[6] = 44;
        put16(ip, IPV6 + 2, (offset as u16 & 0xfff8) | more);
        put32(ip, IPV6 + 4, id);
        each(buf);
        n += 1;
        offset += len;
    }
    Fate::Fragments(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(payload: usize, flags: u16) -> Vec<u8> {
        let mut f = vec![0u8; ETH + 20 + payload];
        put16(&mut f, 12, ET_IPV4);
        f[ETH] = 0x45;
        put16(&mut f, ETH + 2, (20 + payload) as u16);
        put16(&mut f, ETH + 6, flags);
        for (i, b) in f[ETH + 20..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }

    #[test]
    fn ipv4_pieces_follow_snabbs_arithmetic() {
        // mtu 576: room 556; 1000 bytes -> 552 (rounded) + 448.
        let mut sizes = Vec::new();
        let mut buf = Vec::new();
        let f = v4(1000, 0);
        assert!(valid_v4(&f));
        let fate = fragment_v4(&f, 576, 7, &mut buf, &mut |p| {
            sizes.push((p.len() - ETH - 20, u16::from_be_bytes([p[20], p[21]])))
        });
        assert_eq!(fate, Fate::Fragments(2));
        assert_eq!(sizes, vec![(552, 0x2000), (448, 69)]);
        // 1110 bytes: 552, then 558 left which fits the 556-byte room? No:
        // 552 + 556 < 1110, so 552 + 552 + 6.
        sizes.clear();
        fragment_v4(&v4(1110, 0), 576, 7, &mut buf, &mut |p| sizes.push((p.len() - ETH - 20, 0)));
        assert_eq!(sizes.iter().map(|s| s.0).collect::<Vec<_>>(), vec![552, 552, 6]);
        // 1107 bytes: after 552, 555 are left: less than the room, one last piece.
        sizes.clear();
        fragment_v4(&v4(1107, 0), 576, 7, &mut buf, &mut |p| sizes.push((p.len() - ETH - 20, 0)));
        assert_eq!(sizes.iter().map(|s| s.0).collect::<Vec<_>>(), vec![552, 555]);
        assert_eq!(fragment_v4(&v4(1000, 0x4000), 576, 7, &mut buf, &mut |_| {}), Fate::Dropped);
    }
}
