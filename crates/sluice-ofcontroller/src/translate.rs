//! OpenFlow 1.3 requests as OpenFlow 1.0 says them, and 1.0 packet-ins
//! as the library's version-neutral [`PacketIn`].
//!
//! Contract: pure functions. A 1.3 match translates when every field
//! has a 1.0 place (in_port, Ethernet addresses unmasked, VLAN id and
//! priority, ethertype, IP ToS from DSCP, IP protocol, IPv4 or ARP
//! addresses with prefix masks, ARP opcode, transport ports, ICMP type
//! and code); actions translate when 1.0 has them (output, VLAN id and
//! priority, pop VLAN, the Ethernet, IPv4, ToS and transport fields);
//! anything else is an error naming it. Port numbers map between the two
//! numbering spaces (1.0's reserved ports 0xfff8..0xffff are 1.3's
//! 0xfffffff8..0xffffffff).

use sluice_openflow::of10::{self, Action10, FlowMod10, Match10, Message10, PacketOut10};
use sluice_openflow::{Action, FlowMod, Instruction, Match, OxmField, PacketOut};

use crate::server::PacketIn;

/// A 1.3 port number in 1.0's 16 bits.
pub fn port32_to_10(p: u32) -> Result<u16, String> {
    if p >= 0xffff_fff8 {
        return Ok((p & 0xffff) as u16);
    }
    if p < u32::from(of10::port10::MAX) {
        return Ok(p as u16);
    }
    Err(format!("port {p} has no OpenFlow 1.0 number"))
}

/// A 1.0 port number as 1.3 numbers it.
pub fn port10_to_32(p: u16) -> u32 {
    if p >= 0xfff8 {
        0xffff_0000 | u32::from(p)
    } else {
        u32::from(p)
    }
}

fn be(v: &[u8]) -> u64 {
    v.iter().fold(0, |a, b| (a << 8) | u64::from(*b))
}

/// The 1.0 wildcard bits of an IPv4 prefix mask (how many low bits are
/// wildcarded), or an error for a mask that is not a prefix.
fn prefix_wild(mask: Option<&[u8]>) -> Result<u32, String> {
    let Some(m) = mask else { return Ok(0) };
    let m = be(m) as u32;
    let ones = m.leading_ones();
    if m.checked_shl(ones).unwrap_or(0) != 0 {
        return Err(format!("IPv4 mask {m:#x} is not a prefix"));
    }
    Ok(32 - ones)
}

/// A 1.3 match as a 1.0 `ofp_match`.
pub fn match_to_10(m: &Match) -> Result<Match10, String> {
    use of10::wildcards as w;
    let mut o = Match10 { wildcards: w::ALL, ..Match10::default() };
    for f in &m.fields {
        let v = &f.value;
        let unmasked = |name: &str| -> Result<(), String> {
            if f.mask.is_some() {
                return Err(format!("OpenFlow 1.0 cannot mask {name}"));
            }
            Ok(())
        };
        match f.field {
            OxmField::InPort => {
                unmasked("in_port")?;
                o.in_port = port32_to_10(be(v) as u32)?;
                o.wildcards &= !w::IN_PORT;
            }
            OxmField::EthDst | OxmField::EthSrc if v.len() == 6 => {
                unmasked("Ethernet addresses")?;
                let mac: [u8; 6] = v[..6].try_into().expect("6 bytes");
                if f.field == OxmField::EthDst {
                    o.dl_dst = mac;
                    o.wildcards &= !w::DL_DST;
                } else {
                    o.dl_src = mac;
                    o.wildcards &= !w::DL_SRC;
                }
            }
            OxmField::EthType => {
                o.dl_type = be(v) as u16;
                o.wildcards &= !w::DL_TYPE;
            }
            OxmField::VlanVid => {
                unmasked("the VLAN id")?;
                let vid = be(v) as u16;
                o.dl_vlan = if vid & 0x1000 != 0 { vid & 0x0fff } else { 0xffff };
                o.wildcards &= !w::DL_VLAN;
            }
            OxmField::VlanPcp => {
                o.dl_vlan_pcp = be(v) as u8;
                o.wildcards &= !w::DL_VLAN_PCP;
            }
            OxmField::IpDscp => {
                o.nw_tos = (be(v) as u8) << 2;
                o.wildcards &= !w::NW_TOS;
            }
            OxmField::IpProto => {
                o.nw_proto = be(v) as u8;
                o.wildcards &= !w::NW_PROTO;
            }
            OxmField::ArpOp => {
                o.nw_proto = be(v) as u8;
                o.wildcards &= !w::NW_PROTO;
            }
            OxmField::Ipv4Src | OxmField::ArpSpa => {
                o.nw_src = be(v) as u32;
                let bits = prefix_wild(f.mask.as_deref())?;
                o.wildcards = (o.wildcards & !(0x3f << w::NW_SRC_SHIFT)) | (bits << w::NW_SRC_SHIFT);
            }
            OxmField::Ipv4Dst | OxmField::ArpTpa => {
                o.nw_dst = be(v) as u32;
                let bits = prefix_wild(f.mask.as_deref())?;
                o.wildcards = (o.wildcards & !(0x3f << w::NW_DST_SHIFT)) | (bits << w::NW_DST_SHIFT);
            }
            OxmField::TcpSrc | OxmField::UdpSrc | OxmField::Icmpv4Type => {
                unmasked("transport ports")?;
                o.tp_src = be(v) as u16;
                o.wildcards &= !w::TP_SRC;
            }
            OxmField::TcpDst | OxmField::UdpDst | OxmField::Icmpv4Code => {
                unmasked("transport ports")?;
                o.tp_dst = be(v) as u16;
                o.wildcards &= !w::TP_DST;
            }
            other => return Err(format!("OpenFlow 1.0 has no match field {other:?}")),
        }
    }
    Ok(o)
}

/// 1.3 actions as 1.0 actions.
pub fn actions_to_10(actions: &[Action]) -> Result<Vec<Action10>, String> {
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        out.push(match a {
            Action::Output { port, max_len } => Action10::Output { port: port32_to_10(*port)?, max_len: *max_len },
            Action::PopVlan => Action10::StripVlan,
            Action::SetField(f) => {
                let v = &f.value;
                match f.field {
                    OxmField::EthSrc if v.len() == 6 => Action10::SetDlSrc(v[..6].try_into().expect("6 bytes")),
                    OxmField::EthDst if v.len() == 6 => Action10::SetDlDst(v[..6].try_into().expect("6 bytes")),
                    OxmField::VlanVid => Action10::SetVlanVid(be(v) as u16 & 0x0fff),
                    OxmField::VlanPcp => Action10::SetVlanPcp(be(v) as u8),
                    OxmField::Ipv4Src => Action10::SetNwSrc(be(v) as u32),
                    OxmField::Ipv4Dst => Action10::SetNwDst(be(v) as u32),
                    OxmField::IpDscp => Action10::SetNwTos((be(v) as u8) << 2),
                    OxmField::TcpSrc | OxmField::UdpSrc => Action10::SetTpSrc(be(v) as u16),
                    OxmField::TcpDst | OxmField::UdpDst => Action10::SetTpDst(be(v) as u16),
                    other => return Err(format!("OpenFlow 1.0 cannot set {other:?}")),
                }
            }
            other => return Err(format!("OpenFlow 1.0 has no action {other:?}")),
        });
    }
    Ok(out)
}

/// A 1.3 flow-mod as a 1.0 FLOW_MOD: table 0 only, its actions those of
/// one apply-actions (or write-actions) instruction.
pub fn flow_mod_to_10(fm: &FlowMod) -> Result<Message10, String> {
    if fm.table_id != 0 && fm.table_id != 0xff {
        return Err(format!("OpenFlow 1.0 has one table, not table {}", fm.table_id));
    }
    let mut actions = Vec::new();
    for i in &fm.instructions {
        match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) if actions.is_empty() => {
                actions = actions_to_10(a)?
            }
            other => return Err(format!("OpenFlow 1.0 has no instruction {other:?}")),
        }
    }
    Ok(Message10::FlowMod(FlowMod10 {
        matched: match_to_10(&fm.matched)?,
        cookie: fm.cookie,
        command: u16::from(fm.command),
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        priority: fm.priority,
        buffer_id: fm.buffer_id,
        out_port: if fm.out_port == sluice_openflow::port::ANY {
            of10::port10::NONE
        } else {
            port32_to_10(fm.out_port)?
        },
        // SEND_FLOW_REM and CHECK_OVERLAP have the same bits; 1.3's others have no 1.0 meaning.
        flags: fm.flags & 0x3,
        actions,
    }))
}

/// A 1.3 packet-out as a 1.0 PACKET_OUT.
pub fn packet_out_to_10(po: &PacketOut) -> Result<Message10, String> {
    Ok(Message10::PacketOut(PacketOut10 {
        buffer_id: po.buffer_id,
        in_port: port32_to_10(po.in_port)?,
        actions: actions_to_10(&po.actions)?,
        data: po.data.clone(),
    }))
}

/// A 1.3 packet-in as the neutral one (its in_port from the match).
pub fn packet_in_from_13(p: sluice_openflow::PacketIn) -> PacketIn {
    let in_port = p.matched.fields.iter().find(|f| f.field == OxmField::InPort).map_or(0, |f| be(&f.value) as u32);
    PacketIn {
        buffer_id: p.buffer_id,
        in_port,
        total_len: p.total_len,
        reason: p.reason,
        table_id: p.table_id,
        cookie: p.cookie,
        data: p.data,
    }
}

/// A 1.0 packet-in as the neutral one (table 0, cookie 0).
pub fn packet_in_from_10(p: of10::PacketIn10) -> PacketIn {
    PacketIn {
        buffer_id: p.buffer_id,
        in_port: port10_to_32(p.in_port),
        total_len: p.total_len,
        reason: p.reason,
        table_id: 0,
        cookie: 0,
        data: p.data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_openflow::Oxm;

    fn oxm(field: OxmField, value: &[u8], mask: Option<&[u8]>) -> Oxm {
        Oxm { field, value: value.to_vec(), mask: mask.map(<[u8]>::to_vec) }
    }

    #[test]
    fn matches_translate_with_prefix_wildcards_and_refuse_what_1_0_lacks() {
        let m = Match {
            fields: vec![
                oxm(OxmField::InPort, &[0, 0, 0, 3], None),
                oxm(OxmField::EthDst, &[2, 0, 0, 0, 0, 1], None),
                oxm(OxmField::EthType, &[8, 0], None),
                oxm(OxmField::Ipv4Dst, &[10, 1, 0, 0], Some(&[255, 255, 0, 0])),
                oxm(OxmField::IpProto, &[6], None),
                oxm(OxmField::TcpDst, &[0, 80], None),
            ],
        };
        let o = match_to_10(&m).unwrap();
        use of10::wildcards as w;
        assert_eq!(o.in_port, 3);
        assert_eq!(o.dl_dst, [2, 0, 0, 0, 0, 1]);
        assert_eq!((o.dl_type, o.nw_dst, o.nw_proto, o.tp_dst), (0x0800, 0x0a01_0000, 6, 80));
        assert_eq!((o.wildcards >> w::NW_DST_SHIFT) & 0x3f, 16, "a /16 wildcards 16 bits");
        assert_eq!(o.wildcards & (w::IN_PORT | w::DL_DST | w::DL_TYPE | w::NW_PROTO | w::TP_DST), 0);
        assert_ne!(o.wildcards & w::DL_SRC, 0);
        let bad = Match { fields: vec![oxm(OxmField::Ipv4Dst, &[10, 0, 0, 0], Some(&[255, 0, 255, 0]))] };
        assert!(match_to_10(&bad).unwrap_err().contains("prefix"));
        let v6 = Match { fields: vec![oxm(OxmField::Ipv6Src, &[0; 16], None)] };
        assert!(match_to_10(&v6).is_err());
        assert_eq!(port32_to_10(sluice_openflow::port::CONTROLLER), Ok(0xfffd));
        assert_eq!(port10_to_32(0xfffb), sluice_openflow::port::FLOOD);
        assert!(port32_to_10(70000).is_err());
    }
}
