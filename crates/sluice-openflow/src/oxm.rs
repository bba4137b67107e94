//! OXM TLVs and `ofp_match` (OpenFlow 1.3.5, section 7.2.3): the basic
//! class's field numbers, lengths and maskability, reading and writing
//! match structures (permissive, so anything well-framed round-trips),
//! and [`prerequisite_ok`], the separate validation the switch applies
//! to a decoded match (lengths, masks, duplicates, prerequisites).

use crate::errors::{bad_match, OfError};
use crate::types::{oxm_class, Match, Oxm, OxmField};
use crate::wire::{Put, Reader};

/// `OFPVID_PRESENT`: set in VLAN_VID when a VLAN tag is present.
pub const OFPVID_PRESENT: u16 = 0x1000;
/// `OFPVID_NONE`: VLAN_VID value for "no VLAN tag".
pub const OFPVID_NONE: u16 = 0x0000;
/// `OFPMT_OXM`, the only match type of OpenFlow 1.3.
pub const OFPMT_OXM: u16 = 1;

/// The basic class's fields in `OFPXMT_OFB_*` order (index = number).
const BASIC: [OxmField; 40] = [
    OxmField::InPort,
    OxmField::InPhyPort,
    OxmField::Metadata,
    OxmField::EthDst,
    OxmField::EthSrc,
    OxmField::EthType,
    OxmField::VlanVid,
    OxmField::VlanPcp,
    OxmField::IpDscp,
    OxmField::IpEcn,
    OxmField::IpProto,
    OxmField::Ipv4Src,
    OxmField::Ipv4Dst,
    OxmField::TcpSrc,
    OxmField::TcpDst,
    OxmField::UdpSrc,
    OxmField::UdpDst,
    OxmField::SctpSrc,
    OxmField::SctpDst,
    OxmField::Icmpv4Type,
    OxmField::Icmpv4Code,
    OxmField::ArpOp,
    OxmField::ArpSpa,
    OxmField::ArpTpa,
    OxmField::ArpSha,
    OxmField::ArpTha,
    OxmField::Ipv6Src,
    OxmField::Ipv6Dst,
    OxmField::Ipv6Flabel,
    OxmField::Icmpv6Type,
    OxmField::Icmpv6Code,
    OxmField::Ipv6NdTarget,
    OxmField::Ipv6NdSll,
    OxmField::Ipv6NdTll,
    OxmField::MplsLabel,
    OxmField::MplsTc,
    OxmField::MplsBos,
    OxmField::PbbIsid,
    OxmField::TunnelId,
    OxmField::Ipv6Exthdr,
];

impl OxmField {
    /// The field for a wire class and field number: a basic field when
    /// the class is OpenFlow basic and the number known, else `Other`.
    pub fn from_wire(class: u16, field: u8) -> OxmField {
        if class == oxm_class::OPENFLOW_BASIC {
            if let Some(f) = BASIC.get(usize::from(field)) {
                return *f;
            }
        }
        OxmField::Other { class, field: field & 0x7f }
    }

    /// The OXM class on the wire.
    pub fn class(self) -> u16 {
        match self {
            OxmField::Other { class, .. } => class,
            _ => oxm_class::OPENFLOW_BASIC,
        }
    }

    /// The 7-bit field number on the wire.
    pub fn number(self) -> u8 {
        match self {
            OxmField::Other { field, .. } => field & 0x7f,
            f => BASIC.iter().position(|&b| b == f).map_or(0x7f, |i| i as u8),
        }
    }

    /// The value's length in bytes for basic fields (the mask, when
    /// present, has the same length); `None` for other classes.
    pub fn value_len(self) -> Option<usize> {
        use OxmField::*;
        Some(match self {
            InPort | InPhyPort => 4,
            Metadata | TunnelId => 8,
            EthDst | EthSrc | ArpSha | ArpTha | Ipv6NdSll | Ipv6NdTll => 6,
            EthType | VlanVid | TcpSrc | TcpDst | UdpSrc | UdpDst | SctpSrc | SctpDst | ArpOp | Ipv6Exthdr => 2,
            VlanPcp | IpDscp | IpEcn | IpProto | Icmpv4Type | Icmpv4Code | Icmpv6Type | Icmpv6Code | MplsTc
            | MplsBos => 1,
            Ipv4Src | Ipv4Dst | ArpSpa | ArpTpa | Ipv6Flabel | MplsLabel => 4,
            Ipv6Src | Ipv6Dst | Ipv6NdTarget => 16,
            PbbIsid => 3,
            Other { .. } => return None,
        })
    }

    /// Whether the specification allows a mask on this field (the
    /// "Mask" column of the OXM field table); `false` for other classes,
    /// whose rules the codec does not know.
    pub fn maskable(self) -> bool {
        use OxmField::*;
        matches!(
            self,
            Metadata
                | EthDst
                | EthSrc
                | VlanVid
                | Ipv4Src
                | Ipv4Dst
                | ArpSpa
                | ArpTpa
                | ArpSha
                | ArpTha
                | Ipv6Src
                | Ipv6Dst
                | Ipv6Flabel
                | PbbIsid
                | TunnelId
                | Ipv6Exthdr
        )
    }
}

impl Oxm {
    /// An exact-match TLV.
    pub fn exact(field: OxmField, value: Vec<u8>) -> Oxm {
        Oxm { field, value, mask: None }
    }

    /// A masked TLV.
    pub fn masked(field: OxmField, value: Vec<u8>, mask: Vec<u8>) -> Oxm {
        Oxm { field, value, mask: Some(mask) }
    }

    /// The 32-bit OXM header: class, field, hasmask, payload length
    /// (value plus mask; saturating at 255).
    pub fn header(&self) -> u32 {
        let len = self.value.len() + self.mask.as_ref().map_or(0, Vec::len);
        let len = u32::try_from(len.min(255)).unwrap_or(255);
        (u32::from(self.field.class()) << 16)
            | (u32::from(self.field.number()) << 9)
            | (u32::from(self.mask.is_some()) << 8)
            | len
    }
}

/// Appends one OXM TLV.
pub(crate) fn put_oxm(out: &mut Vec<u8>, o: &Oxm) {
    out.u32(o.header());
    let room = 255usize;
    let v = &o.value[..o.value.len().min(room)];
    out.extend_from_slice(v);
    if let Some(m) = &o.mask {
        out.extend_from_slice(&m[..m.len().min(room - v.len())]);
    }
}

/// Reads one OXM TLV. A masked TLV's payload splits into equal value and
/// mask halves (odd lengths are `bad_match::BAD_LEN`); value lengths are
/// not checked here (see [`prerequisite_ok`]).
pub(crate) fn get_oxm(r: &mut Reader<'_>) -> Result<Oxm, OfError> {
    let h = r.u32("OXM header")?;
    let class = (h >> 16) as u16;
    let field = ((h >> 9) & 0x7f) as u8;
    let hasmask = h & 0x100 != 0;
    let len = (h & 0xff) as usize;
    let payload = r.bytes(len, "OXM payload")?;
    let field = OxmField::from_wire(class, field);
    if hasmask {
        if !len.is_multiple_of(2) {
            return Err(OfError::new(
                crate::errors::error_type::BAD_MATCH,
                bad_match::BAD_LEN,
                "masked OXM with an odd length",
            ));
        }
        let (v, m) = payload.split_at(len / 2);
        Ok(Oxm::masked(field, v.to_vec(), m.to_vec()))
    } else {
        Ok(Oxm::exact(field, payload.to_vec()))
    }
}

/// Appends an `ofp_match` (type OXM) padded to 8 bytes.
pub(crate) fn put_match(out: &mut Vec<u8>, m: &Match) {
    let start = out.len();
    out.u16(OFPMT_OXM);
    out.u16(0);
    for o in &m.fields {
        put_oxm(out, o);
    }
    out.patch_u16(start + 2, out.len() - start);
    out.pad8_from(start);
}

fn match_err(code: u16, reason: &str) -> OfError {
    OfError::new(crate::errors::error_type::BAD_MATCH, code, reason)
}

/// Reads an `ofp_match` and its padding from `r`.
pub(crate) fn get_match(r: &mut Reader<'_>) -> Result<Match, OfError> {
    let short = |_| match_err(bad_match::BAD_LEN, "match runs past its container");
    let typ = r.u16("match type").map_err(short)?;
    let len = usize::from(r.u16("match length").map_err(short)?);
    if typ != OFPMT_OXM {
        return Err(match_err(bad_match::BAD_TYPE, "match type is not OXM"));
    }
    if len < 4 {
        return Err(match_err(bad_match::BAD_LEN, "match length below 4"));
    }
    let body = r.bytes(len - 4, "match").map_err(short)?;
    r.skip(crate::wire::round8(len) - len, "match padding").map_err(short)?;
    let mut or = Reader::new(body, (crate::errors::error_type::BAD_MATCH, bad_match::BAD_LEN));
    let mut fields = Vec::new();
    while !or.is_empty() {
        fields.push(get_oxm(&mut or)?);
    }
    Ok(Match { fields })
}

/// One prerequisite condition on an earlier field.
enum Cond {
    /// The field is present with one of these (exact) values.
    OneOf(OxmField, &'static [u64]),
    /// The field is present (any value).
    Present(OxmField),
    /// VLAN_VID is present and matches "a VLAN tag" (OFPVID_PRESENT set
    /// in both value and mask).
    VlanTagged,
}

const IP: &[u64] = &[0x0800, 0x86dd];
const IPV4: &[u64] = &[0x0800];
const IPV6: &[u64] = &[0x86dd];
const ARP: &[u64] = &[0x0806];
const MPLS: &[u64] = &[0x8847, 0x8848];

/// The OXM prerequisites of OpenFlow 1.3.5 (table 12), as data: every
/// condition listed for a field must hold on fields that precede it.
/// Prerequisites chain: TCP_SRC needs IP_PROTO=6, whose own entry needs
/// an IP eth_type.
const PREREQS: &[(OxmField, &[Cond])] = {
    use Cond::*;
    use OxmField::*;
    &[
        (InPhyPort, &[Present(InPort)]),
        (VlanPcp, &[VlanTagged]),
        (IpDscp, &[OneOf(EthType, IP)]),
        (IpEcn, &[OneOf(EthType, IP)]),
        (IpProto, &[OneOf(EthType, IP)]),
        (Ipv4Src, &[OneOf(EthType, IPV4)]),
        (Ipv4Dst, &[OneOf(EthType, IPV4)]),
        (TcpSrc, &[OneOf(IpProto, &[6])]),
        (TcpDst, &[OneOf(IpProto, &[6])]),
        (UdpSrc, &[OneOf(IpProto, &[17])]),
        (UdpDst, &[OneOf(IpProto, &[17])]),
        (SctpSrc, &[OneOf(IpProto, &[132])]),
        (SctpDst, &[OneOf(IpProto, &[132])]),
        (Icmpv4Type, &[OneOf(EthType, IPV4), OneOf(IpProto, &[1])]),
        (Icmpv4Code, &[OneOf(EthType, IPV4), OneOf(IpProto, &[1])]),
        (ArpOp, &[OneOf(EthType, ARP)]),
        (ArpSpa, &[OneOf(EthType, ARP)]),
        (ArpTpa, &[OneOf(EthType, ARP)]),
        (ArpSha, &[OneOf(EthType, ARP)]),
        (ArpTha, &[OneOf(EthType, ARP)]),
        (Ipv6Src, &[OneOf(EthType, IPV6)]),
        (Ipv6Dst, &[OneOf(EthType, IPV6)]),
        (Ipv6Flabel, &[OneOf(EthType, IPV6)]),
        (Icmpv6Type, &[OneOf(EthType, IPV6), OneOf(IpProto, &[58])]),
        (Icmpv6Code, &[OneOf(EthType, IPV6), OneOf(IpProto, &[58])]),
        (Ipv6NdTarget, &[OneOf(Icmpv6Type, &[135, 136])]),
        (Ipv6NdSll, &[OneOf(Icmpv6Type, &[135])]),
        (Ipv6NdTll, &[OneOf(Icmpv6Type, &[136])]),
        (MplsLabel, &[OneOf(EthType, MPLS)]),
        (MplsTc, &[OneOf(EthType, MPLS)]),
        (MplsBos, &[OneOf(EthType, MPLS)]),
        (PbbIsid, &[OneOf(EthType, &[0x88e7])]),
        (Ipv6Exthdr, &[OneOf(EthType, IPV6)]),
    ]
};

/// A big-endian value of up to 8 bytes as an integer.
fn be(v: &[u8]) -> u64 {
    v.iter().fold(0u64, |a, &b| (a << 8) | u64::from(b))
}

fn cond_holds(c: &Cond, earlier: &[Oxm]) -> bool {
    let find = |f: OxmField| earlier.iter().find(|o| o.field == f);
    match c {
        Cond::Present(f) => find(*f).is_some(),
        Cond::OneOf(f, vals) => find(*f).is_some_and(|o| o.mask.is_none() && vals.contains(&be(&o.value))),
        Cond::VlanTagged => find(OxmField::VlanVid).is_some_and(|o| {
            let v = be(&o.value) as u16;
            let m = o.mask.as_deref().map_or(0xffff, |m| be(m) as u16);
            v & m & OFPVID_PRESENT != 0
        }),
    }
}

/// Validates a decoded match the way a switch must before using it:
/// basic fields must be known (`BAD_FIELD`), have the spec's value and
/// mask lengths (`BAD_LEN`), carry masks only where maskable
/// (`BAD_MASK`), set no value bits outside the mask (`BAD_WILDCARDS`),
/// appear once (`DUP_FIELD`) and follow their prerequisites
/// (`BAD_PREREQ`; a prerequisite must appear before the field that
/// needs it, as the spec requires). Fields of other classes are only
/// checked for duplicates. All errors are of type `BAD_MATCH`.
pub fn prerequisite_ok(m: &Match) -> Result<(), OfError> {
    for (i, o) in m.fields.iter().enumerate() {
        let earlier = &m.fields[..i];
        if earlier.iter().any(|e| e.field == o.field) {
            return Err(match_err(bad_match::DUP_FIELD, &format!("{:?} appears twice", o.field)));
        }
        let Some(len) = o.field.value_len() else {
            if o.field.class() == oxm_class::OPENFLOW_BASIC {
                return Err(match_err(bad_match::BAD_FIELD, &format!("unknown basic field {}", o.field.number())));
            }
            continue;
        };
        if o.value.len() != len || o.mask.as_ref().is_some_and(|m| m.len() != len) {
            return Err(match_err(bad_match::BAD_LEN, &format!("{:?}: wrong length", o.field)));
        }
        if let Some(mask) = &o.mask {
            if !o.field.maskable() {
                return Err(match_err(bad_match::BAD_MASK, &format!("{:?} is not maskable", o.field)));
            }
            if o.value.iter().zip(mask).any(|(v, m)| v & !m != 0) {
                return Err(match_err(
                    bad_match::BAD_WILDCARDS,
                    &format!("{:?}: value bits outside the mask", o.field),
                ));
            }
        }
        if let Some((_, conds)) = PREREQS.iter().find(|(f, _)| *f == o.field) {
            if !conds.iter().all(|c| cond_holds(c, earlier)) {
                return Err(match_err(bad_match::BAD_PREREQ, &format!("{:?}: prerequisite not met", o.field)));
            }
        }
    }
    Ok(())
}
