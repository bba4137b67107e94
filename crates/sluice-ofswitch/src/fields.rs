//! Packet fields as OpenFlow matches them: a frame parsed into the
//! offsets of its headers ([`Parsed`]), the values of every OXM field of
//! the OpenFlow basic class packed into one fixed-layout key
//! ([`FullKey`]), and writes of a field back into the frame (set-field).
//!
//! Contract: reads a frame and the pipeline's metadata (in_port,
//! metadata, tunnel id); writes nothing but the key, except
//! [`write_field`], which rewrites the frame's bytes of one field, and
//! [`fix_checksums`] / [`fix_ipv4_header_checksum`], which rewrite the
//! checksums that cover them. Fields a frame does not have read as zero;
//! the prerequisites a flow's match must carry (an `eth_type` for IP
//! fields, an `ip_proto` for ports...) keep such zeros from matching
//! anything by accident, so fields with disjoint prerequisites share key
//! bytes (TCP/UDP/SCTP ports; ICMPv4/ICMPv6 type and code; ARP SPA/TPA
//! with the IPv4 addresses; ARP SHA/THA with the ND link-layer options).
//! VLAN_VID reads `0x1000 | vid` on a tagged frame and 0 on an untagged
//! one (OFPVID_PRESENT / OFPVID_NONE); IPV6_EXTHDR reads the `OFPIEH_*`
//! bits of the extension headers an IPv6 packet carries
//! (`sluice_openflow::ipv6_exthdr`).

use sluice_openflow::ipv6_exthdr as ieh;
use sluice_openflow::OxmField;

/// Bytes of a [`FullKey`].
pub const FULL_LEN: usize = 136;

/// Every basic field's value at a fixed place.
pub type FullKey = [u8; FULL_LEN];

/// Word `w` (bytes `8w..8w + 8`, little-endian) of a full key: how the
/// flow cache, the route-table template and the tables' layout read keys
/// and masks a word at a time.
#[inline(always)]
pub fn word(k: &FullKey, w: usize) -> u64 {
    u64::from_le_bytes(k[w * 8..w * 8 + 8].try_into().expect("8 bytes"))
}

/// The names of the basic fields whose key bytes lie in `off..off + len`
/// (for users reading what a table looks up; fields sharing bytes are
/// named together, as `Ipv4Dst|ArpTpa`).
pub fn names_in(off: usize, len: usize) -> Vec<String> {
    let mut out: Vec<(usize, String)> = Vec::new();
    for n in 0..40u8 {
        let f = OxmField::from_wire(sluice_openflow::oxm_class::OPENFLOW_BASIC, n);
        let Some((o, l)) = slot(f) else { continue };
        if o + l <= off || o >= off + len {
            continue;
        }
        match out.iter_mut().find(|(oo, _)| *oo == o) {
            Some((_, name)) => *name = format!("{name}|{f:?}"),
            None => out.push((o, format!("{f:?}"))),
        }
    }
    out.sort();
    out.into_iter().map(|(_, n)| n).collect()
}

/// Where a field lives in the [`FullKey`]: `(offset, length)`; `None` for
/// fields of other classes.
pub fn slot(f: OxmField) -> Option<(usize, usize)> {
    use OxmField::*;
    Some(match f {
        InPort => (0, 4),
        InPhyPort => (4, 4),
        Metadata => (8, 8),
        EthDst => (16, 6),
        EthSrc => (22, 6),
        EthType => (28, 2),
        VlanVid => (30, 2),
        VlanPcp => (32, 1),
        IpDscp => (33, 1),
        IpEcn => (34, 1),
        IpProto => (35, 1),
        Ipv4Src | ArpSpa => (36, 4),
        Ipv4Dst | ArpTpa => (40, 4),
        TcpSrc | UdpSrc | SctpSrc => (44, 2),
        TcpDst | UdpDst | SctpDst => (46, 2),
        Icmpv4Type | Icmpv6Type => (48, 1),
        Icmpv4Code | Icmpv6Code => (49, 1),
        ArpOp => (50, 2),
        ArpSha | Ipv6NdSll => (52, 6),
        ArpTha | Ipv6NdTll => (58, 6),
        Ipv6Src => (64, 16),
        Ipv6Dst => (80, 16),
        Ipv6Flabel => (96, 4),
        Ipv6NdTarget => (100, 16),
        MplsLabel => (116, 4),
        MplsTc => (120, 1),
        MplsBos => (121, 1),
        PbbIsid => (122, 3),
        Ipv6Exthdr => (125, 2),
        TunnelId => (128, 8),
        Other { .. } => return None,
    })
}

pub const ET_IPV4: u16 = 0x0800;
pub const ET_IPV6: u16 = 0x86dd;
pub const ET_ARP: u16 = 0x0806;
pub const ET_VLAN: u16 = 0x8100;
pub const ET_QINQ: u16 = 0x88a8;
pub const ET_MPLS: u16 = 0x8847;
pub const ET_MPLS_MC: u16 = 0x8848;
pub const ET_PBB: u16 = 0x88e7;

/// What layer 3 carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum L3 {
    #[default]
    None,
    Ipv4,
    Ipv6,
    Arp,
    Mpls,
}

/// Offsets of a frame's headers (see the module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct Parsed {
    /// Offset of the outermost VLAN tag (its TPID), if tagged.
    pub vlan: Option<usize>,
    /// Offset of the ethertype after the VLAN tags.
    pub eth_type_at: usize,
    pub eth_type: u16,
    /// Offset of the layer-3 header (or the MPLS label stack).
    pub l3: usize,
    pub kind: L3,
    /// Offset and protocol of the transport header, when it was reached
    /// (not for later fragments).
    pub l4: Option<(usize, u8)>,
    /// ND option offsets (source / target link-layer address values).
    pub nd_sll: Option<usize>,
    pub nd_tll: Option<usize>,
    /// Offset of the byte that names the transport protocol (IPv4's
    /// protocol, IPv6's last next-header field).
    pub proto_at: usize,
    /// IPv6: the IPV6_EXTHDR pseudo-field (the `OFPIEH_*` bits of the
    /// extension headers present).
    pub exthdr: u16,
}

/// Where an IPv6 extension header of type `next` stands in the order RFC
/// 8200 recommends (hop-by-hop, destination options before a routing
/// header, routing, fragment, authentication, ESP, destination options),
/// and its `OFPIEH_*` bit; `None` for anything else. `late`: a routing
/// header or a later one was seen already (destination options then
/// stand last).
fn exthdr_rank(next: u8, late: bool) -> Option<(u8, u16)> {
    Some(match next {
        0 => (0, ieh::HOP),
        60 if !late => (1, ieh::DEST),
        43 => (2, ieh::ROUTER),
        44 => (3, ieh::FRAG),
        51 => (4, ieh::AUTH),
        50 => (5, ieh::ESP),
        60 => (6, ieh::DEST),
        _ => return None,
    })
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(f.get(at..at + 2)?.try_into().ok()?))
}

/// Parses `f` (see [`Parsed`]); a frame too short for its headers stops
/// parsing where it ends (the fields beyond read as zero).
pub fn parse(f: &[u8]) -> Parsed {
    let mut p = Parsed::default();
    parse_into(f, &mut p);
    p
}

/// [`parse`] into `p` (in place: a caller's copy of a returned [`Parsed`]
/// would read back what the parser just wrote, a costly stall).
pub fn parse_into(f: &[u8], p: &mut Parsed) {
    *p = Parsed::default();
    let Some(mut et) = be16(f, 12) else { return };
    let mut at = 12;
    while et == ET_VLAN || et == ET_QINQ {
        if p.vlan.is_none() {
            p.vlan = Some(at);
        }
        at += 4;
        match be16(f, at) {
            Some(e) => et = e,
            None => {
                p.eth_type_at = at;
                return;
            }
        }
    }
    p.eth_type_at = at;
    p.eth_type = et;
    p.l3 = at + 2;
    let l3 = p.l3;
    match et {
        ET_IPV4 if f.len() >= l3 + 20 => {
            p.kind = L3::Ipv4;
            let ihl = usize::from(f[l3] & 0x0f) * 4;
            let frag_off = be16(f, l3 + 6).unwrap_or(0) & 0x1fff;
            p.proto_at = l3 + 9;
            if ihl >= 20 && f.len() >= l3 + ihl && frag_off == 0 {
                p.l4 = Some((l3 + ihl, f[l3 + 9]));
            }
        }
        ET_IPV6 if f.len() >= l3 + 40 => {
            p.kind = L3::Ipv6;
            let mut next = f[l3 + 6];
            let mut off = l3 + 40;
            let mut later_fragment = false;
            p.proto_at = l3 + 6;
            let (mut rank, mut dests) = (0u8, 0u8);
            for _ in 0..8 {
                if next == 59 {
                    p.exthdr |= ieh::NONEXT;
                }
                if let Some((r, bit)) = exthdr_rank(next, rank >= 2) {
                    let repeated = p.exthdr & bit != 0 && !(bit == ieh::DEST && dests == 1);
                    if repeated {
                        p.exthdr |= ieh::UNREP;
                    }
                    if r < rank {
                        p.exthdr |= ieh::UNSEQ;
                    }
                    dests += u8::from(bit == ieh::DEST);
                    rank = rank.max(r);
                    p.exthdr |= bit;
                }
                // Each header passed over: its first byte names the next.
                match next {
                    0 | 43 | 60 => {
                        let (Some(&n), Some(&len)) = (f.get(off), f.get(off + 1)) else { break };
                        p.proto_at = off;
                        next = n;
                        off += (usize::from(len) + 1) * 8;
                    }
                    44 => {
                        let (Some(&n), Some(fo)) = (f.get(off), be16(f, off + 2)) else { break };
                        later_fragment = fo >> 3 != 0;
                        p.proto_at = off;
                        next = n;
                        off += 8;
                    }
                    51 => {
                        let (Some(&n), Some(&len)) = (f.get(off), f.get(off + 1)) else { break };
                        p.proto_at = off;
                        next = n;
                        off += (usize::from(len) + 2) * 4;
                    }
                    _ => break,
                }
            }
            if !later_fragment && off <= f.len() {
                p.l4 = Some((off, next));
                if next == 58 && f.len() >= off + 24 && (f[off] == 135 || f[off] == 136) {
                    let mut o = off + 24;
                    while o + 8 <= f.len() {
                        let (t, len) = (f[o], usize::from(f[o + 1]) * 8);
                        if len == 0 {
                            break;
                        }
                        if len == 8 {
                            match (f[off], t) {
                                (135, 1) => p.nd_sll = Some(o + 2),
                                (136, 2) => p.nd_tll = Some(o + 2),
                                _ => {}
                            }
                        }
                        o += len;
                    }
                }
            }
        }
        ET_ARP if f.len() >= l3 + 28 => p.kind = L3::Arp,
        ET_MPLS | ET_MPLS_MC if f.len() >= l3 + 4 => p.kind = L3::Mpls,
        _ => {}
    }
}

/// The pipeline's own fields (not in the frame).
#[derive(Debug, Clone, Copy, Default)]
pub struct Meta {
    pub in_port: u32,
    pub in_phy_port: u32,
    pub metadata: u64,
    pub tunnel_id: u64,
    /// The frame's TCP/UDP checksum is partial: it holds only the
    /// pseudo-header's sum, the rest to be completed on the way out (an
    /// offload header said so; see [`fix_checksums`]). Not a field.
    pub csum_partial: bool,
}

/// [`parse_into`] and then [`extract`], with a short way for the frames
/// most traffic is made of: untagged IPv4 with a 20-byte header, not a
/// later fragment (what both would find, written at once).
#[inline]
pub fn parse_extract(f: &[u8], m: &Meta, p: &mut Parsed, k: &mut FullKey) {
    const L3: usize = 14;
    // (ICMPv6 over IPv4 is left to them: they read it as ICMPv6.)
    if f.len() >= L3 + 24 && f[12..14] == ET_IPV4.to_be_bytes() && f[L3] == 0x45 && f[L3 + 9] != 58 {
        let proto = f[L3 + 9];
        let frag_off = u16::from_be_bytes([f[L3 + 6], f[L3 + 7]]) & 0x1fff;
        *p = Parsed {
            vlan: None,
            eth_type_at: 12,
            eth_type: ET_IPV4,
            l3: L3,
            kind: L3::Ipv4,
            l4: (frag_off == 0).then_some((L3 + 20, proto)),
            nd_sll: None,
            nd_tll: None,
            proto_at: L3 + 9,
            exthdr: 0,
        };
        let mut w = [[0u8; 8]; 6];
        w[0][0..4].copy_from_slice(&m.in_port.to_be_bytes());
        w[0][4..8].copy_from_slice(&m.in_phy_port.to_be_bytes());
        w[1] = m.metadata.to_be_bytes();
        w[2].copy_from_slice(&f[0..8]);
        w[3][0..6].copy_from_slice(&f[8..14]);
        w[4][1] = f[L3 + 1] >> 2;
        w[4][2] = f[L3 + 1] & 3;
        w[4][3] = proto;
        w[4][4..8].copy_from_slice(&f[L3 + 12..L3 + 16]);
        w[5][0..4].copy_from_slice(&f[L3 + 16..L3 + 20]);
        let mut icmp = [0u8; 2];
        if frag_off == 0 {
            match proto {
                6 | 17 | 132 => w[5][4..8].copy_from_slice(&f[L3 + 20..L3 + 24]),
                1 => icmp.copy_from_slice(&f[L3 + 20..L3 + 22]),
                _ => {}
            }
        }
        for (i, word) in w.iter().enumerate() {
            k[i * 8..i * 8 + 8].copy_from_slice(word);
        }
        k[48..50].copy_from_slice(&icmp);
        k[50..128].fill(0);
        k[128..136].copy_from_slice(&m.tunnel_id.to_be_bytes());
        return;
    }
    parse_into(f, p);
    extract(f, p, m, k);
}

/// Fills `k` with every field of frame `f` (parsed as `p`) and `m`.
#[inline]
pub fn extract(f: &[u8], p: &Parsed, m: &Meta, k: &mut FullKey) {
    // The first six words (ports, metadata, Ethernet, VLAN, IP and
    // transport fields: what lookups and the flow cache read most) are
    // put together in registers and stored whole: a word read back from
    // stores of its single bytes would wait for them (store forwarding
    // fails), on every packet.
    *k = [0; FULL_LEN];
    let mut w = [[0u8; 8]; 6];
    w[0][0..4].copy_from_slice(&m.in_port.to_be_bytes());
    w[0][4..8].copy_from_slice(&m.in_phy_port.to_be_bytes());
    w[1] = m.metadata.to_be_bytes();
    k[128..136].copy_from_slice(&m.tunnel_id.to_be_bytes());
    if f.len() >= 14 {
        extract_frame(f, p, k, &mut w);
    }
    for (i, word) in w.iter().enumerate() {
        k[i * 8..i * 8 + 8].copy_from_slice(word);
    }
}

/// [`extract`]'s frame fields: the first six words into `w`, the others
/// into `k`.
#[inline(always)]
fn extract_frame(f: &[u8], p: &Parsed, k: &mut FullKey, w: &mut [[u8; 8]; 6]) {
    w[2].copy_from_slice(&f[0..8]);
    w[3][0..4].copy_from_slice(&f[8..12]);
    w[3][4..6].copy_from_slice(&p.eth_type.to_be_bytes());
    if let Some(v) = p.vlan {
        if let Some(tci) = be16(f, v + 2) {
            w[3][6..8].copy_from_slice(&(0x1000 | (tci & 0x0fff)).to_be_bytes());
            w[4][0] = (tci >> 13) as u8;
        }
    }
    let l3 = p.l3;
    match p.kind {
        L3::Ipv4 => {
            w[4][1] = f[l3 + 1] >> 2;
            w[4][2] = f[l3 + 1] & 3;
            w[4][3] = f[l3 + 9];
            w[4][4..8].copy_from_slice(&f[l3 + 12..l3 + 16]);
            w[5][0..4].copy_from_slice(&f[l3 + 16..l3 + 20]);
        }
        L3::Ipv6 => {
            let tc = ((f[l3] & 0x0f) << 4) | (f[l3 + 1] >> 4);
            w[4][1] = tc >> 2;
            w[4][2] = tc & 3;
            k[125..127].copy_from_slice(&p.exthdr.to_be_bytes());
            k[96] = 0;
            k[97] = f[l3 + 1] & 0x0f;
            k[98..100].copy_from_slice(&f[l3 + 2..l3 + 4]);
            k[64..96].copy_from_slice(&f[l3 + 8..l3 + 40]);
            w[4][3] = p.l4.map_or(0, |(_, proto)| proto);
        }
        L3::Arp => {
            k[50..52].copy_from_slice(&f[l3 + 6..l3 + 8]);
            k[52..58].copy_from_slice(&f[l3 + 8..l3 + 14]);
            w[4][4..8].copy_from_slice(&f[l3 + 14..l3 + 18]);
            k[58..64].copy_from_slice(&f[l3 + 18..l3 + 24]);
            w[5][0..4].copy_from_slice(&f[l3 + 24..l3 + 28]);
        }
        L3::Mpls => {
            let e = u32::from_be_bytes(f[l3..l3 + 4].try_into().expect("4 bytes"));
            k[116..120].copy_from_slice(&(e >> 12).to_be_bytes());
            k[120] = ((e >> 9) & 7) as u8;
            k[121] = ((e >> 8) & 1) as u8;
        }
        L3::None => {
            if p.eth_type == ET_PBB && f.len() >= p.l3 + 4 {
                k[122..125].copy_from_slice(&f[p.l3 + 1..p.l3 + 4]);
            }
        }
    }
    if let Some((l4, proto)) = p.l4 {
        match proto {
            6 | 17 | 132 if f.len() >= l4 + 4 => w[5][4..8].copy_from_slice(&f[l4..l4 + 4]),
            1 | 58 if f.len() >= l4 + 2 => k[48..50].copy_from_slice(&f[l4..l4 + 2]),
            _ => {}
        }
        if proto == 58 && f.len() >= l4 + 24 && (f[l4] == 135 || f[l4] == 136) {
            k[100..116].copy_from_slice(&f[l4 + 8..l4 + 24]);
            if let Some(o) = p.nd_sll {
                k[52..58].copy_from_slice(&f[o..o + 6]);
            }
            if let Some(o) = p.nd_tll {
                k[58..64].copy_from_slice(&f[o..o + 6]);
            }
        }
    }
}

/// Recomputes the IPv4 header checksum and the TCP/UDP/ICMP checksum
/// (ICMPv6 too; SCTP's CRC-32C) of frame `f` after a field changed, the
/// pseudo-header with the protocol the IP header names now. With
/// `partial` (the frame's [`Meta::csum_partial`]) a TCP or UDP checksum
/// stays partial: the pseudo-header's sum alone, folded and not
/// complemented, what the kernel puts there for a port to complete (a
/// 64 KB segment's checksums are completed per segment from it).
pub fn fix_checksums(f: &mut [u8], p: &Parsed, partial: bool) {
    let l3 = p.l3;
    match p.kind {
        L3::Ipv4 => {
            let ihl = usize::from(f[l3] & 0x0f) * 4;
            if ihl < 20 || f.len() < l3 + ihl {
                return;
            }
            fix_ipv4_header_checksum(f, l3);
            let total = usize::from(be16(f, l3 + 2).unwrap_or(0));
            if let Some((l4, proto)) = p.l4 {
                let end = (l3 + total).min(f.len());
                if end > l4 {
                    // The pseudo-header names the protocol the header says
                    // now (a set-field may have changed it).
                    let mut pseudo = [0u8; 12];
                    pseudo[0..8].copy_from_slice(&f[l3 + 12..l3 + 20]);
                    pseudo[9] = f[p.proto_at];
                    pseudo[10..12].copy_from_slice(&((end - l4) as u16).to_be_bytes());
                    l4_checksum(f, l4, end, proto, &pseudo, partial);
                }
            }
        }
        L3::Ipv6 => {
            let plen = usize::from(be16(f, l3 + 4).unwrap_or(0));
            if let Some((l4, proto)) = p.l4 {
                let end = (l3 + 40 + plen).min(f.len());
                if end > l4 {
                    let mut pseudo = [0u8; 40];
                    pseudo[0..32].copy_from_slice(&f[l3 + 8..l3 + 40]);
                    pseudo[32..36].copy_from_slice(&((end - l4) as u32).to_be_bytes());
                    pseudo[39] = f.get(p.proto_at).copied().unwrap_or(proto);
                    l4_checksum(f, l4, end, proto, &pseudo, partial);
                }
            }
        }
        _ => {}
    }
}

/// Recomputes the checksum of the IPv4 header at `l3` of frame `f` (one
/// under an MPLS label stack too).
pub fn fix_ipv4_header_checksum(f: &mut [u8], l3: usize) {
    let Some(&b) = f.get(l3) else { return };
    let ihl = usize::from(b & 0x0f) * 4;
    if ihl < 20 || f.len() < l3 + ihl {
        return;
    }
    f[l3 + 10..l3 + 12].copy_from_slice(&[0, 0]);
    let c = sluice_hash::csum16(&f[l3..l3 + ihl]);
    f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
}

/// Decrements the TTL (at least 2) of the IPv4 header at `l3` of frame
/// `f` and updates its checksum incrementally (RFC 1624, equation 3).
#[inline]
pub fn dec_ipv4_ttl(f: &mut [u8], l3: usize) {
    let old = u16::from_be_bytes([f[l3 + 8], f[l3 + 9]]);
    let new = old - 0x100;
    f[l3 + 8] -= 1;
    let hc = u16::from_be_bytes([f[l3 + 10], f[l3 + 11]]);
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    f[l3 + 10..l3 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

fn l4_checksum(f: &mut [u8], l4: usize, end: usize, proto: u8, pseudo: &[u8], partial: bool) {
    use sluice_hash::{csum16_add, csum16_finish};
    if proto == 132 {
        // SCTP: CRC-32C of the packet with its checksum zero, no
        // pseudo-header, little-endian on the wire.
        if end >= l4 + 12 {
            f[l4 + 8..l4 + 12].copy_from_slice(&[0; 4]);
            let c = sluice_hash::crc32c(&f[l4..end]);
            f[l4 + 8..l4 + 12].copy_from_slice(&c.to_le_bytes());
        }
        return;
    }
    let at = match proto {
        6 => 16,
        17 => 6,
        1 | 58 => 2,
        _ => return,
    };
    if end < l4 + at + 2 {
        return;
    }
    // UDP over IPv4 with no checksum keeps none.
    if proto == 17 && pseudo.len() == 12 && f[l4 + 6] == 0 && f[l4 + 7] == 0 {
        return;
    }
    f[l4 + at..l4 + at + 2].copy_from_slice(&[0, 0]);
    if partial && (proto == 6 || proto == 17) {
        let c = !csum16_finish(csum16_add(0, pseudo));
        f[l4 + at..l4 + at + 2].copy_from_slice(&c.to_be_bytes());
        return;
    }
    let mut acc = 0;
    if proto != 1 {
        acc = csum16_add(acc, pseudo);
    }
    acc = csum16_add(acc, &f[l4..end]);
    let mut c = csum16_finish(acc);
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    f[l4 + at..l4 + at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Writes `value` (the field's bytes, big-endian) into frame `f` parsed as
/// `p`; returns false when the frame lacks the field (then nothing
/// changes). Checksums are the caller's to fix ([`fix_checksums`]).
pub fn write_field(f: &mut [u8], p: &Parsed, field: OxmField, value: &[u8]) -> bool {
    use OxmField::*;
    let l3 = p.l3;
    let put = |f: &mut [u8], at: usize, v: &[u8]| -> bool {
        match f.get_mut(at..at + v.len()) {
            Some(d) => {
                d.copy_from_slice(v);
                true
            }
            None => false,
        }
    };
    let l4 = p.l4.map(|(o, _)| o);
    match (field, p.kind) {
        (EthDst, _) if value.len() == 6 => put(f, 0, value),
        (EthSrc, _) if value.len() == 6 => put(f, 6, value),
        (EthType, _) if value.len() == 2 => put(f, p.eth_type_at, value),
        (VlanVid, _) if value.len() == 2 => match p.vlan {
            Some(v) => {
                let tci = be16(f, v + 2).unwrap_or(0);
                let vid = u16::from_be_bytes([value[0], value[1]]) & 0x0fff;
                put(f, v + 2, &((tci & 0xf000) | vid).to_be_bytes())
            }
            None => false,
        },
        (VlanPcp, _) if value.len() == 1 => match p.vlan {
            Some(v) => {
                let tci = be16(f, v + 2).unwrap_or(0);
                put(f, v + 2, &((tci & 0x1fff) | (u16::from(value[0] & 7) << 13)).to_be_bytes())
            }
            None => false,
        },
        (IpDscp, L3::Ipv4) => {
            let b = (f[l3 + 1] & 3) | (value[0] << 2);
            put(f, l3 + 1, &[b])
        }
        (IpEcn, L3::Ipv4) => {
            let b = (f[l3 + 1] & !3) | (value[0] & 3);
            put(f, l3 + 1, &[b])
        }
        (IpDscp | IpEcn, L3::Ipv6) => {
            let tc = ((f[l3] & 0x0f) << 4) | (f[l3 + 1] >> 4);
            let tc = if field == IpDscp { (tc & 3) | (value[0] << 2) } else { (tc & !3) | (value[0] & 3) };
            f[l3] = (f[l3] & 0xf0) | (tc >> 4);
            f[l3 + 1] = (f[l3 + 1] & 0x0f) | (tc << 4);
            true
        }
        (IpProto, L3::Ipv4 | L3::Ipv6) => put(f, p.proto_at, value),
        (Ipv4Src, L3::Ipv4) => put(f, l3 + 12, value),
        (Ipv4Dst, L3::Ipv4) => put(f, l3 + 16, value),
        (Ipv6Src, L3::Ipv6) => put(f, l3 + 8, value),
        (Ipv6Dst, L3::Ipv6) => put(f, l3 + 24, value),
        (Ipv6Flabel, L3::Ipv6) if value.len() == 4 => {
            f[l3 + 1] = (f[l3 + 1] & 0xf0) | (value[1] & 0x0f);
            put(f, l3 + 2, &value[2..4])
        }
        (TcpSrc | UdpSrc | SctpSrc, _) => l4.is_some_and(|o| put(f, o, value)),
        (TcpDst | UdpDst | SctpDst, _) => l4.is_some_and(|o| put(f, o + 2, value)),
        (Icmpv4Type | Icmpv6Type, _) => l4.is_some_and(|o| put(f, o, value)),
        (Icmpv4Code | Icmpv6Code, _) => l4.is_some_and(|o| put(f, o + 1, value)),
        (Ipv6NdTarget, L3::Ipv6) => l4.is_some_and(|o| put(f, o + 8, value)),
        (Ipv6NdSll, _) => p.nd_sll.is_some_and(|o| put(f, o, value)),
        (Ipv6NdTll, _) => p.nd_tll.is_some_and(|o| put(f, o, value)),
        (ArpOp, L3::Arp) => put(f, l3 + 6, value),
        (ArpSha, L3::Arp) => put(f, l3 + 8, value),
        (ArpSpa, L3::Arp) => put(f, l3 + 14, value),
        (ArpTha, L3::Arp) => put(f, l3 + 18, value),
        (ArpTpa, L3::Arp) => put(f, l3 + 24, value),
        (MplsLabel | MplsTc | MplsBos, L3::Mpls) if !value.is_empty() => {
            let mut e = u32::from_be_bytes(f[l3..l3 + 4].try_into().expect("4 bytes"));
            let v = value.iter().fold(0u32, |a, b| (a << 8) | u32::from(*b));
            e = match field {
                MplsLabel => (e & 0xfff) | ((v & 0xf_ffff) << 12),
                MplsTc => (e & !(7 << 9)) | ((v & 7) << 9),
                _ => (e & !(1 << 8)) | ((v & 1) << 8),
            };
            put(f, l3, &e.to_be_bytes())
        }
        (PbbIsid, _) if p.eth_type == ET_PBB && value.len() == 3 => put(f, l3 + 1, value),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4() -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ET_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[15] = 0xb8; // DSCP 46, ECN 0
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&53u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        // A non-zero checksum: UDP over IPv4 with checksum 0 carries none.
        f[40..42].copy_from_slice(&[0xff, 0xff]);
        let p = parse(&f);
        fix_checksums(&mut f, &p, false);
        f
    }

    #[test]
    fn fields_of_a_udp_frame() {
        let f = udp4();
        let p = parse(&f);
        let mut k = [0; FULL_LEN];
        extract(&f, &p, &Meta { in_port: 7, ..Meta::default() }, &mut k);
        let get = |fl| {
            let (o, l) = slot(fl).unwrap();
            k[o..o + l].to_vec()
        };
        assert_eq!(get(OxmField::InPort), vec![0, 0, 0, 7]);
        assert_eq!(get(OxmField::EthType), vec![8, 0]);
        assert_eq!(get(OxmField::IpDscp), vec![46]);
        assert_eq!(get(OxmField::IpProto), vec![17]);
        assert_eq!(get(OxmField::Ipv4Dst), vec![10, 0, 0, 2]);
        assert_eq!(get(OxmField::UdpDst), vec![0, 53]);
        assert_eq!(get(OxmField::VlanVid), vec![0, 0]);
    }

    /// The short way of [`parse_extract`] finds what the general parser
    /// and extractor find, for the frames it takes and those it leaves
    /// to them (every protocol, fragments, options, short frames, other
    /// versions), over a stale key and parse of another frame.
    #[test]
    fn parse_extract_agrees_with_parse_and_extract() {
        let meta = Meta { in_port: 3, in_phy_port: 4, metadata: 0x1122, tunnel_id: 0x99, csum_partial: false };
        let mut frames = Vec::new();
        for proto in [1u8, 6, 17, 132, 47, 58] {
            for frag in [0u16, 0x2000, 0x0001, 0x4000] {
                for ver_ihl in [0x45u8, 0x46, 0x65, 0x44] {
                    for len in [34usize, 36, 37, 38, 42, 60, 64] {
                        let mut f = udp4();
                        f.resize(len, 0);
                        f[14] = ver_ihl;
                        f[23] = proto;
                        f[20..22].copy_from_slice(&frag.to_be_bytes());
                        frames.push(f);
                    }
                }
            }
        }
        let mut tagged = udp4();
        tagged.splice(12..12, [0x81, 0x00, 0x20, 0x05]);
        frames.push(tagged);
        let mut v6 = udp4();
        v6[12..14].copy_from_slice(&ET_IPV6.to_be_bytes());
        v6.resize(80, 0x11);
        frames.push(v6);
        let mut stale_p = parse(&frames[frames.len() - 2]);
        let mut stale_k = [0xa5; FULL_LEN];
        for f in &frames {
            let want_p = parse(f);
            let mut want_k = [0; FULL_LEN];
            extract(f, &want_p, &meta, &mut want_k);
            parse_extract(f, &meta, &mut stale_p, &mut stale_k);
            assert_eq!(format!("{stale_p:?}"), format!("{want_p:?}"), "parse of {f:02x?}");
            assert_eq!(stale_k, want_k, "key of {f:02x?}");
        }
    }

    #[test]
    fn set_field_rewrites_and_checksums_follow() {
        let mut f = udp4();
        let p = parse(&f);
        assert!(write_field(&mut f, &p, OxmField::Ipv4Dst, &[192, 168, 1, 1]));
        assert!(write_field(&mut f, &p, OxmField::UdpDst, &[0, 80]));
        fix_checksums(&mut f, &p, false);
        assert_eq!(sluice_hash::csum16(&f[14..34]), 0, "IPv4 header checksum");
        let mut pseudo = vec![];
        pseudo.extend_from_slice(&f[26..34]);
        pseudo.extend_from_slice(&[0, 17, 0, 26]);
        pseudo.extend_from_slice(&f[34..60]);
        assert_eq!(sluice_hash::csum16(&pseudo), 0, "UDP checksum");
        assert!(!write_field(&mut f, &p, OxmField::VlanVid, &[0x10, 5]), "no tag to rewrite");
        assert!(!write_field(&mut f, &p, OxmField::Ipv6Src, &[0; 16]));
    }
}
