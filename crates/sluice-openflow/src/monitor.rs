//! Flow monitors in both forms peers ask for them: OpenFlow 1.4's
//! FLOW_MONITOR multipart, and for OpenFlow 1.3 the ONF extension (an
//! experimenter multipart of experimenter 0x4f4e4600, type 1870) that
//! `ovs-ofctl -O OpenFlow13 monitor ... watch:` sends; and their flow
//! updates.
//!
//! Contract: pure functions. The two forms share their flag bits (initial,
//! add, removed, modify, instructions, own changes in full) and are read
//! into one [`FlowMonitorRequest`]; 1.4's ONLY_OWN bit is read as Open
//! vSwitch reads and `ovs-ofctl monitor` sends it, own changes in full
//! (as its NO_ABBREV).
//! - ONF: a 16-byte header (monitor id, flags, match length, out_port,
//!   table id, three zero bytes) and an OXM `ofp_match`; flags must ask
//!   for at least one of add, delete and modify and hold nothing unknown.
//! - 1.4: monitor id, out_port, out_group, flags, table id, command (add,
//!   modify, delete) and the `ofp_match`; unknown flags or command are
//!   FLOW_MONITOR_FAILED.
//!
//! An update entry is 8-byte aligned: a full one (initial, added, removed,
//! modified) is a 24-byte header, the flow's `ofp_match` and, when asked
//! for and the flow was not removed, its instructions (ONF: length, event,
//! reason, priority, idle and hard timeouts, match length, table id, pad,
//! cookie; 1.4: length, event, table id, reason, idle and hard timeouts,
//! priority, 4 zero bytes, cookie); an abbreviated one (a controller's own
//! change it did not ask to see in full) is the length, the event and the
//! change's xid. The ONF form has no initial event: initial flows are
//! reported as added.

use crate::errors::{bad_request, error_type};
use crate::oxm::{get_match, put_match};
use crate::wire::{Put, Reader};
use crate::{Instruction, Match, OfError};

/// The ONF experimenter id, and the flow monitor's multipart type.
pub const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;
pub const ONF_FLOW_MONITOR: u32 = 1870;

/// `onf_flow_monitor_flags` / `ofp_flow_monitor_flags` (the same bits;
/// ONLY_OWN is OpenFlow 1.4's alone, and read as Open vSwitch reads it:
/// own changes in full, as OWN).
pub mod monitor_flags {
    pub const INITIAL: u16 = 1 << 0;
    pub const ADD: u16 = 1 << 1;
    pub const DELETE: u16 = 1 << 2;
    pub const MODIFY: u16 = 1 << 3;
    /// 1.4's INSTRUCTIONS.
    pub const ACTIONS: u16 = 1 << 4;
    /// 1.4's NO_ABBREV.
    pub const OWN: u16 = 1 << 5;
    pub const ONLY_OWN: u16 = 1 << 6;
}

/// `ofp_flow_monitor_command` (OpenFlow 1.4; an ONF request always adds).
pub mod monitor_command {
    pub const ADD: u8 = 0;
    pub const MODIFY: u8 = 1;
    pub const DELETE: u8 = 2;
}

/// What happened to a flow, as an update tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateEvent {
    /// There when the monitor was made.
    Initial,
    Added,
    Removed,
    Modified,
}

impl UpdateEvent {
    /// Its number in OpenFlow 1.4 (`of14`) or in the ONF extension.
    pub fn code(self, of14: bool) -> u16 {
        match (self, of14) {
            (UpdateEvent::Initial, true) => 0,
            (UpdateEvent::Added, true) => 1,
            (UpdateEvent::Removed, true) => 2,
            (UpdateEvent::Modified, true) => 3,
            (UpdateEvent::Initial | UpdateEvent::Added, false) => 0,
            (UpdateEvent::Removed, false) => 1,
            (UpdateEvent::Modified, false) => 2,
        }
    }
}

/// The abbreviated event's number in OpenFlow 1.4 and in the ONF extension.
fn abbrev_code(of14: bool) -> u16 {
    if of14 {
        4
    } else {
        3
    }
}

/// One monitor a controller asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMonitorRequest {
    pub id: u32,
    pub flags: u16,
    /// Flows that output to this port only (`port::ANY`: any).
    pub out_port: u32,
    /// Flows that output to this group only (`group::ANY`: any; ONF: any).
    pub out_group: u32,
    /// One table, or 0xff for every table.
    pub table_id: u8,
    /// `monitor_command` (ONF: ADD).
    pub command: u8,
    pub matched: Match,
}

fn bad(reason: &str) -> OfError {
    OfError::new(error_type::BAD_REQUEST, bad_request::BAD_LEN, reason)
}

fn monitor_failed(code: u16, reason: &str) -> OfError {
    OfError::new(error_type::FLOW_MONITOR_FAILED, code, reason)
}

/// Reads one OpenFlow 1.4 monitor request from `r`.
pub(crate) fn get_monitor_request14(r: &mut Reader<'_>) -> Result<FlowMonitorRequest, OfError> {
    use crate::errors::flow_monitor_failed as fail;
    use monitor_flags as f;
    let id = r.u32("monitor id")?;
    let out_port = r.u32("out_port")?;
    let out_group = r.u32("out_group")?;
    let flags = r.u16("monitor flags")?;
    let table_id = r.u8("table_id")?;
    let command = r.u8("command")?;
    let matched = get_match(r)?;
    let known = f::INITIAL | f::ADD | f::DELETE | f::MODIFY | f::ACTIONS | f::OWN | f::ONLY_OWN;
    if flags & !known != 0 {
        return Err(monitor_failed(fail::BAD_FLAGS, "flow monitor flags"));
    }
    // ONLY_OWN is read as Open vSwitch reads it (and `ovs-ofctl monitor`
    // sends it): the connection's own changes in full, as NO_ABBREV.
    let flags = if flags & (f::OWN | f::ONLY_OWN) != 0 { (flags & !f::ONLY_OWN) | f::OWN } else { flags };
    if command > monitor_command::DELETE {
        return Err(monitor_failed(fail::BAD_COMMAND, "flow monitor command"));
    }
    Ok(FlowMonitorRequest { id, flags, out_port, out_group, table_id, command, matched })
}

/// Appends one OpenFlow 1.4 monitor request.
pub(crate) fn put_monitor_request14(out: &mut Vec<u8>, m: &FlowMonitorRequest) {
    out.u32(m.id);
    out.u32(m.out_port);
    out.u32(m.out_group);
    // Own changes in full, in the bit Open vSwitch uses for them.
    let flags = if m.flags & monitor_flags::OWN != 0 { m.flags | monitor_flags::ONLY_OWN } else { m.flags };
    out.u16(flags & !monitor_flags::OWN);
    out.u8(m.table_id);
    out.u8(m.command);
    put_match(out, &m.matched);
}

/// Decodes the body of an ONF flow monitor request.
pub fn decode_monitor_request(body: &[u8]) -> Result<FlowMonitorRequest, OfError> {
    let mut r = Reader::new(body, (error_type::BAD_REQUEST, bad_request::BAD_LEN));
    let id = r.u32("monitor id")?;
    let flags = r.u16("monitor flags")?;
    let _match_len = r.u16("match length")?;
    let out_port = r.u32("out_port")?;
    let table_id = r.u8("table_id")?;
    if r.bytes(3, "zeros")? != [0, 0, 0] {
        return Err(bad("flow monitor request: nonzero padding"));
    }
    use monitor_flags as f;
    let known = f::INITIAL | f::ADD | f::DELETE | f::MODIFY | f::ACTIONS | f::OWN;
    if flags & (f::ADD | f::DELETE | f::MODIFY) == 0 || flags & !known != 0 {
        // OFPMOFC_BAD_FLAGS in OpenFlow 1.4's terms; 1.3 has no such
        // error type, so the request is refused as a bad one.
        return Err(OfError::new(error_type::BAD_REQUEST, bad_request::EPERM, "flow monitor flags"));
    }
    let matched = get_match(&mut r)?;
    if !r.is_empty() {
        return Err(bad("flow monitor request longer than its match"));
    }
    Ok(FlowMonitorRequest {
        id,
        flags,
        out_port,
        out_group: crate::group::ANY,
        table_id,
        command: monitor_command::ADD,
        matched,
    })
}

/// Encodes a monitor request body (the peer's side, for tests and tools).
pub fn encode_monitor_request(m: &FlowMonitorRequest) -> Vec<u8> {
    let mut out = Vec::new();
    out.u32(m.id);
    out.u16(m.flags);
    let len_at = out.len();
    out.u16(0);
    out.u32(m.out_port);
    out.u8(m.table_id);
    out.zeros(3);
    let start = out.len();
    put_match(&mut out, &m.matched);
    let match_len = u16::from_be_bytes([out[start + 2], out[start + 3]]);
    out[len_at..len_at + 2].copy_from_slice(&match_len.to_be_bytes());
    out
}

/// A flow as an update reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowUpdate<'a> {
    pub event: UpdateEvent,
    /// The `ofp_flow_removed_reason` of a deleted flow, else 0.
    pub reason: u16,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub table_id: u8,
    pub cookie: u64,
    pub matched: &'a Match,
    /// Included when the monitor asked for actions (never for a deletion).
    pub instructions: Option<&'a [Instruction]>,
}

/// Appends a full update entry, in OpenFlow 1.4's form (`of14`) or the
/// ONF extension's.
pub fn put_flow_update(out: &mut Vec<u8>, u: &FlowUpdate<'_>, of14: bool) {
    let start = out.len();
    out.u16(0);
    out.u16(u.event.code(of14));
    if of14 {
        out.u8(u.table_id);
        out.u8(u.reason as u8);
        out.u16(u.idle_timeout);
        out.u16(u.hard_timeout);
        out.u16(u.priority);
        out.zeros(4);
        out.u64(u.cookie);
        put_match(out, u.matched);
        if let Some(is) = u.instructions {
            crate::action::put_instructions(out, is);
        }
        out.patch_u16(start, out.len() - start);
        return;
    }
    out.u16(u.reason);
    out.u16(u.priority);
    out.u16(u.idle_timeout);
    out.u16(u.hard_timeout);
    let match_len_at = out.len();
    out.u16(0);
    out.u8(u.table_id);
    out.zeros(1);
    out.u64(u.cookie);
    let m = out.len();
    put_match(out, u.matched);
    let match_len = u16::from_be_bytes([out[m + 2], out[m + 3]]);
    out[match_len_at..match_len_at + 2].copy_from_slice(&match_len.to_be_bytes());
    if let Some(is) = u.instructions {
        crate::action::put_instructions(out, is);
    }
    out.patch_u16(start, out.len() - start);
}

/// Appends an abbreviated update: a controller's own change, by its xid.
pub fn put_abbrev_update(out: &mut Vec<u8>, xid: u32, of14: bool) {
    out.u16(8);
    out.u16(abbrev_code(of14));
    out.u32(xid);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Oxm, OxmField};

    #[test]
    fn requests_round_trip_and_bad_flags_are_refused() {
        let m = FlowMonitorRequest {
            id: 7,
            flags: monitor_flags::INITIAL | monitor_flags::ADD | monitor_flags::ACTIONS,
            out_port: crate::port::ANY,
            out_group: crate::group::ANY,
            table_id: 0xff,
            command: monitor_command::ADD,
            matched: Match { fields: vec![Oxm { field: OxmField::InPort, value: vec![0, 0, 0, 1], mask: None }] },
        };
        let b = encode_monitor_request(&m);
        assert_eq!(b.len() % 8, 0);
        assert_eq!(decode_monitor_request(&b).unwrap(), m);
        let mut only_actions = b.clone();
        only_actions[4..6].copy_from_slice(&monitor_flags::ACTIONS.to_be_bytes());
        assert!(decode_monitor_request(&only_actions).is_err());
        assert!(decode_monitor_request(&b[..10]).is_err());
    }

    #[test]
    fn updates_are_aligned_and_say_their_length() {
        let m = Match { fields: vec![Oxm { field: OxmField::InPort, value: vec![0, 0, 0, 1], mask: None }] };
        let ins = [Instruction::ClearActions];
        for of14 in [false, true] {
            let mut out = Vec::new();
            put_flow_update(
                &mut out,
                &FlowUpdate {
                    event: UpdateEvent::Added,
                    reason: 0,
                    priority: 5,
                    idle_timeout: 0,
                    hard_timeout: 0,
                    table_id: 0,
                    cookie: 9,
                    matched: &m,
                    instructions: Some(&ins),
                },
                of14,
            );
            assert_eq!(usize::from(u16::from_be_bytes([out[0], out[1]])), out.len());
            assert_eq!(out.len() % 8, 0);
            assert_eq!(out.len(), 24 + 16 + 8);
            assert_eq!(u16::from_be_bytes([out[2], out[3]]), if of14 { 1 } else { 0 });
            put_abbrev_update(&mut out, 3, of14);
            assert_eq!(out.len() % 8, 0);
        }
    }
}
