//! What the switch supports, in one place: the action, instruction, group
//! and meter band types it runs, the fields it matches and sets, and how a
//! port's link is described.
//!
//! Contract: the agent's FEATURES_REPLY and its table, group and meter
//! features replies are generated from these lists, and the flow-mod and
//! group-mod checks (`control`) refuse what they do not list, so what the
//! switch reports is what it does. A new action or field is added here
//! and in the pipeline together.

use sluice_openflow::action::{action_type as at, instruction_type as it};
use sluice_openflow::multipart::meter_band_type;
use sluice_openflow::{group_type, oxm_class, Action, OxmField};

/// The action types a flow, a bucket or a packet-out may use (every
/// OpenFlow 1.3 action but experimenter actions).
pub const ACTION_TYPES: &[u16] = &[
    at::OUTPUT,
    at::COPY_TTL_OUT,
    at::COPY_TTL_IN,
    at::SET_MPLS_TTL,
    at::DEC_MPLS_TTL,
    at::PUSH_VLAN,
    at::POP_VLAN,
    at::PUSH_MPLS,
    at::POP_MPLS,
    at::SET_QUEUE,
    at::GROUP,
    at::SET_NW_TTL,
    at::DEC_NW_TTL,
    at::SET_FIELD,
    at::PUSH_PBB,
    at::POP_PBB,
];

/// The instruction types a flow may carry.
pub const INSTRUCTION_TYPES: &[u16] =
    &[it::GOTO_TABLE, it::WRITE_METADATA, it::WRITE_ACTIONS, it::APPLY_ACTIONS, it::CLEAR_ACTIONS, it::METER];

/// The group types the group table holds.
pub const GROUP_TYPES: &[u8] = &[group_type::ALL, group_type::SELECT, group_type::INDIRECT, group_type::FF];

/// `ofp_group_capabilities`: select buckets by weight and by liveness,
/// groups in buckets (chaining) with loops refused.
pub const GROUP_CAPABILITIES: u32 = 0b1111;

/// The meter band types (drop, DSCP remark).
pub const METER_BAND_TYPES: &[u16] = &[meter_band_type::DROP, meter_band_type::DSCP_REMARK];

/// The bitmap of `types` (bit N for type N), as features replies carry them.
pub fn bitmap(types: impl IntoIterator<Item = u16>) -> u32 {
    types.into_iter().filter(|t| *t < 32).fold(0, |m, t| m | 1 << t)
}

/// Whether the switch runs actions of `a`'s type.
pub fn runs_action(a: &Action) -> bool {
    ACTION_TYPES.contains(&a.type_code())
}

/// The OpenFlow basic fields a flow may match (every one of OpenFlow 1.3).
pub fn match_fields() -> impl Iterator<Item = OxmField> {
    (0u8..=39).map(|f| OxmField::from_wire(oxm_class::OPENFLOW_BASIC, f))
}

/// Whether a set-field action may write `field`: a packet field the
/// switch keeps (not the pipeline's own in_port, in_phy_port, metadata, nor
/// the IPv6 extension header flags, which only describe the packet).
pub fn settable(field: OxmField) -> bool {
    crate::fields::slot(field).is_some()
        && !matches!(field, OxmField::InPort | OxmField::InPhyPort | OxmField::Metadata | OxmField::Ipv6Exthdr)
}

/// `ofp_port_features` bits for the speeds OpenFlow names (full duplex).
mod speed_bit {
    pub const MB10_HD: u32 = 1 << 0;
    pub const MB10_FD: u32 = 1 << 1;
    pub const MB100_HD: u32 = 1 << 2;
    pub const MB100_FD: u32 = 1 << 3;
    pub const GB1_HD: u32 = 1 << 4;
    pub const GB1_FD: u32 = 1 << 5;
    pub const GB10_FD: u32 = 1 << 6;
    pub const GB40_FD: u32 = 1 << 7;
    pub const GB100_FD: u32 = 1 << 8;
    pub const TB1_FD: u32 = 1 << 9;
    pub const OTHER: u32 = 1 << 10;
}

/// A port's current features and speed as OpenFlow describes them, from
/// the link's speed in Mbit/s and duplex as the kernel reports them
/// (`None`: unknown, as for a link that is down): the feature bit of that
/// speed (OTHER for one OpenFlow has no bit for), and the speed in kbit/s.
pub fn link_features(speed: Option<(u32, bool)>) -> (u32, u32) {
    use speed_bit as b;
    let Some((mbps, full)) = speed.filter(|(m, _)| *m > 0) else { return (0, 0) };
    let bit = match (mbps, full) {
        (10, false) => b::MB10_HD,
        (10, true) => b::MB10_FD,
        (100, false) => b::MB100_HD,
        (100, true) => b::MB100_FD,
        (1000, false) => b::GB1_HD,
        (1000, true) => b::GB1_FD,
        (10_000, _) => b::GB10_FD,
        (40_000, _) => b::GB40_FD,
        (100_000, _) => b::GB100_FD,
        (1_000_000, _) => b::TB1_FD,
        _ => b::OTHER,
    };
    (bit, mbps.saturating_mul(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bitmaps_and_link_features() {
        assert_eq!(bitmap([0, 25, 27]), 1 | 1 << 25 | 1 << 27);
        assert_eq!(bitmap(ACTION_TYPES.iter().copied()) & (1 << at::POP_VLAN | 1 << at::SET_FIELD), 1 << 18 | 1 << 25);
        assert_eq!(link_features(Some((10_000, true))), (1 << 6, 10_000_000));
        assert_eq!(link_features(Some((1000, false))), (1 << 4, 1_000_000));
        assert_eq!(link_features(Some((2500, true))), (1 << 10, 2_500_000));
        assert_eq!(link_features(None), (0, 0));
        assert!(settable(OxmField::EthDst) && !settable(OxmField::InPort) && !settable(OxmField::Metadata));
        assert_eq!(match_fields().count(), 40);
    }
}
