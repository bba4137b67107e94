//! OpenFlow 1.3 requests as OpenFlow 1.0 says them, and 1.0 packet-ins
//! as the library's version-neutral [`PacketIn`].
//!
//! Contract: pure functions, on `sluice_openflow::translate10`'s matches,
//! actions and port numbers (what 1.0 cannot say is an error naming it).

use sluice_openflow::of10::{self, FlowMod10, Message10, PacketOut10};
pub use sluice_openflow::translate10::{actions_to_10_into, match_to_10, port10_to_32, port32_to_10};
use sluice_openflow::{FlowMod, Instruction, OxmField, PacketOut};

use crate::server::PacketIn;

/// A 1.3 flow-mod as a 1.0 FLOW_MOD: table 0 only, its actions those of
/// one apply-actions (or write-actions) instruction.
pub fn flow_mod_to_10(fm: &FlowMod) -> Result<Message10, String> {
    let mut out = FlowMod10::default();
    flow_mod_to_10_into(fm, &mut out)?;
    Ok(Message10::FlowMod(out))
}

/// [`flow_mod_to_10`] into `out`, whose action list is reused (cleared,
/// then filled): no allocation once it has grown. `out` is unspecified
/// after an error.
pub fn flow_mod_to_10_into(fm: &FlowMod, out: &mut FlowMod10) -> Result<(), String> {
    if fm.table_id != 0 && fm.table_id != 0xff {
        return Err(format!("OpenFlow 1.0 has one table, not table {}", fm.table_id));
    }
    out.actions.clear();
    let mut seen = false;
    for i in &fm.instructions {
        match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) if !seen => {
                seen = true;
                actions_to_10_into(a, &mut out.actions)?;
            }
            other => return Err(format!("OpenFlow 1.0 has no instruction {other:?}")),
        }
    }
    out.matched = match_to_10(&fm.matched)?;
    out.cookie = fm.cookie;
    out.command = u16::from(fm.command);
    out.idle_timeout = fm.idle_timeout;
    out.hard_timeout = fm.hard_timeout;
    out.priority = fm.priority;
    out.buffer_id = fm.buffer_id;
    out.out_port =
        if fm.out_port == sluice_openflow::port::ANY { of10::port10::NONE } else { port32_to_10(fm.out_port)? };
    // SEND_FLOW_REM and CHECK_OVERLAP have the same bits; 1.3's others have no 1.0 meaning.
    out.flags = fm.flags & 0x3;
    Ok(())
}

/// A 1.3 packet-out as a 1.0 PACKET_OUT.
pub fn packet_out_to_10(po: &PacketOut) -> Result<Message10, String> {
    let mut out = PacketOut10::default();
    packet_out_to_10_into(po, &mut out)?;
    Ok(Message10::PacketOut(out))
}

/// [`packet_out_to_10`] into `out`, whose action list and data are reused.
pub fn packet_out_to_10_into(po: &PacketOut, out: &mut PacketOut10) -> Result<(), String> {
    out.buffer_id = po.buffer_id;
    out.in_port = port32_to_10(po.in_port)?;
    out.actions.clear();
    actions_to_10_into(&po.actions, &mut out.actions)?;
    out.data.clear();
    out.data.extend_from_slice(&po.data);
    Ok(())
}

/// A 1.3 packet-in as the neutral one (its in_port from the match).
pub fn packet_in_from_13(p: sluice_openflow::PacketIn) -> PacketIn {
    let in_port = p
        .matched
        .fields
        .iter()
        .find(|f| f.field == OxmField::InPort)
        .map_or(0, |f| f.value.iter().fold(0, |a, b| (a << 8) | u32::from(*b)));
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
    use sluice_openflow::{Match, Oxm};

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
