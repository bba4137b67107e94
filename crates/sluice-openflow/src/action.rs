//! Actions (`ofp_action_*`) and instructions (`ofp_instruction_*`) on
//! the wire (OpenFlow 1.3.5, sections 7.2.4 and 7.2.5): reading lists of
//! them from a bounded slice, with `BAD_ACTION` / `BAD_INSTRUCTION`
//! errors for unknown types and bad lengths, and writing them with every
//! length a multiple of 8.

use crate::errors::{bad_action, bad_instruction, error_type, OfError};
use crate::oxm::{get_oxm, put_oxm};
use crate::types::{Action, Instruction};
use crate::wire::{round8, Put, Reader};

/// `ofp_action_type`.
pub mod action_type {
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const PUSH_PBB: u16 = 26;
    pub const POP_PBB: u16 = 27;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `ofp_instruction_type`.
pub mod instruction_type {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

impl Action {
    /// The action's `ofp_action_type`.
    pub fn type_code(&self) -> u16 {
        use action_type as t;
        match self {
            Action::Output { .. } => t::OUTPUT,
            Action::CopyTtlOut => t::COPY_TTL_OUT,
            Action::CopyTtlIn => t::COPY_TTL_IN,
            Action::SetMplsTtl(_) => t::SET_MPLS_TTL,
            Action::DecMplsTtl => t::DEC_MPLS_TTL,
            Action::PushVlan(_) => t::PUSH_VLAN,
            Action::PopVlan => t::POP_VLAN,
            Action::PushMpls(_) => t::PUSH_MPLS,
            Action::PopMpls(_) => t::POP_MPLS,
            Action::SetQueue(_) => t::SET_QUEUE,
            Action::Group(_) => t::GROUP,
            Action::SetNwTtl(_) => t::SET_NW_TTL,
            Action::DecNwTtl => t::DEC_NW_TTL,
            Action::SetField(_) => t::SET_FIELD,
            Action::PushPbb(_) => t::PUSH_PBB,
            Action::PopPbb => t::POP_PBB,
            Action::Experimenter { .. } => t::EXPERIMENTER,
        }
    }
}

impl Instruction {
    /// The instruction's `ofp_instruction_type`.
    pub fn type_code(&self) -> u16 {
        use instruction_type as t;
        match self {
            Instruction::GotoTable(_) => t::GOTO_TABLE,
            Instruction::WriteMetadata { .. } => t::WRITE_METADATA,
            Instruction::WriteActions(_) => t::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => t::APPLY_ACTIONS,
            Instruction::ClearActions => t::CLEAR_ACTIONS,
            Instruction::Meter(_) => t::METER,
            Instruction::Experimenter { .. } => t::EXPERIMENTER,
        }
    }
}

/// Appends one action. Experimenter data is zero-padded so the length is
/// a multiple of 8 (decoding keeps the padding as data).
pub(crate) fn put_action(out: &mut Vec<u8>, a: &Action) {
    let start = out.len();
    out.u16(a.type_code());
    out.u16(0);
    match a {
        Action::Output { port, max_len } => {
            out.u32(*port);
            out.u16(*max_len);
            out.zeros(6);
        }
        Action::CopyTtlOut
        | Action::CopyTtlIn
        | Action::DecMplsTtl
        | Action::PopVlan
        | Action::DecNwTtl
        | Action::PopPbb => out.zeros(4),
        Action::SetMplsTtl(ttl) | Action::SetNwTtl(ttl) => {
            out.u8(*ttl);
            out.zeros(3);
        }
        Action::PushVlan(et) | Action::PushMpls(et) | Action::PopMpls(et) | Action::PushPbb(et) => {
            out.u16(*et);
            out.zeros(2);
        }
        Action::SetQueue(id) | Action::Group(id) => out.u32(*id),
        Action::SetField(o) => put_oxm(out, o),
        Action::Experimenter { experimenter, data } => {
            out.u32(*experimenter);
            out.extend_from_slice(data);
        }
    }
    out.pad8_from(start);
    out.patch_u16(start + 2, out.len() - start);
}

pub(crate) fn put_actions(out: &mut Vec<u8>, actions: &[Action]) {
    for a in actions {
        put_action(out, a);
    }
}

fn act_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type::BAD_ACTION, code, reason)
}

/// Reads a whole action list (all of `buf`).
pub(crate) fn get_actions(buf: &[u8]) -> Result<Vec<Action>, OfError> {
    let mut r = Reader::new(buf, (error_type::BAD_ACTION, bad_action::BAD_LEN));
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(get_action(&mut r)?);
    }
    Ok(v)
}

fn get_action(r: &mut Reader<'_>) -> Result<Action, OfError> {
    use action_type as t;
    let typ = r.u16("action type")?;
    let len = usize::from(r.u16("action length")?);
    if len < 8 || !len.is_multiple_of(8) {
        return Err(act_err(bad_action::BAD_LEN, format!("action {typ}: length {len}")));
    }
    let mut b = r.sub(len - 4, "action body")?;
    let fixed = |want: usize| {
        if len == want {
            Ok(())
        } else {
            Err(act_err(bad_action::BAD_LEN, format!("action {typ}: length {len}, not {want}")))
        }
    };
    let a = match typ {
        t::OUTPUT => {
            fixed(16)?;
            let port = b.u32("port")?;
            let max_len = b.u16("max_len")?;
            Action::Output { port, max_len }
        }
        t::COPY_TTL_OUT => fixed(8).map(|_| Action::CopyTtlOut)?,
        t::COPY_TTL_IN => fixed(8).map(|_| Action::CopyTtlIn)?,
        t::DEC_MPLS_TTL => fixed(8).map(|_| Action::DecMplsTtl)?,
        t::POP_VLAN => fixed(8).map(|_| Action::PopVlan)?,
        t::DEC_NW_TTL => fixed(8).map(|_| Action::DecNwTtl)?,
        t::POP_PBB => fixed(8).map(|_| Action::PopPbb)?,
        t::SET_MPLS_TTL => fixed(8).and_then(|_| b.u8("ttl")).map(Action::SetMplsTtl)?,
        t::SET_NW_TTL => fixed(8).and_then(|_| b.u8("ttl")).map(Action::SetNwTtl)?,
        t::PUSH_VLAN => fixed(8).and_then(|_| b.u16("ethertype")).map(Action::PushVlan)?,
        t::PUSH_MPLS => fixed(8).and_then(|_| b.u16("ethertype")).map(Action::PushMpls)?,
        t::POP_MPLS => fixed(8).and_then(|_| b.u16("ethertype")).map(Action::PopMpls)?,
        t::PUSH_PBB => fixed(8).and_then(|_| b.u16("ethertype")).map(Action::PushPbb)?,
        t::SET_QUEUE => fixed(8).and_then(|_| b.u32("queue_id")).map(Action::SetQueue)?,
        t::GROUP => fixed(8).and_then(|_| b.u32("group_id")).map(Action::Group)?,
        t::SET_FIELD => {
            let o = get_oxm(&mut b).map_err(|e| act_err(bad_action::BAD_SET_LEN, e.reason))?;
            let oxm_len = 4 + o.value.len() + o.mask.as_ref().map_or(0, Vec::len);
            fixed(round8(4 + oxm_len))?;
            Action::SetField(o)
        }
        t::EXPERIMENTER => {
            let experimenter = b.u32("experimenter")?;
            Action::Experimenter { experimenter, data: b.rest().to_vec() }
        }
        _ => return Err(act_err(bad_action::BAD_TYPE, format!("unknown action type {typ}"))),
    };
    Ok(a)
}

/// Appends one instruction.
pub(crate) fn put_instruction(out: &mut Vec<u8>, i: &Instruction) {
    let start = out.len();
    out.u16(i.type_code());
    out.u16(0);
    match i {
        Instruction::GotoTable(t) => {
            out.u8(*t);
            out.zeros(3);
        }
        Instruction::WriteMetadata { metadata, mask } => {
            out.zeros(4);
            out.u64(*metadata);
            out.u64(*mask);
        }
        Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
            out.zeros(4);
            put_actions(out, a);
        }
        Instruction::ClearActions => out.zeros(4),
        Instruction::Meter(id) => out.u32(*id),
        Instruction::Experimenter { experimenter, data } => {
            out.u32(*experimenter);
            out.extend_from_slice(data);
        }
    }
    out.pad8_from(start);
    out.patch_u16(start + 2, out.len() - start);
}

pub(crate) fn put_instructions(out: &mut Vec<u8>, is: &[Instruction]) {
    for i in is {
        put_instruction(out, i);
    }
}

fn inst_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type::BAD_INSTRUCTION, code, reason)
}

/// Reads a whole instruction list (all of `buf`).
pub(crate) fn get_instructions(buf: &[u8]) -> Result<Vec<Instruction>, OfError> {
    use instruction_type as t;
    let mut r = Reader::new(buf, (error_type::BAD_INSTRUCTION, bad_instruction::BAD_LEN));
    let mut v = Vec::new();
    while !r.is_empty() {
        let typ = r.u16("instruction type")?;
        let len = usize::from(r.u16("instruction length")?);
        if len < 8 || !len.is_multiple_of(8) {
            return Err(inst_err(bad_instruction::BAD_LEN, format!("instruction {typ}: length {len}")));
        }
        let mut b = r.sub(len - 4, "instruction body")?;
        let fixed = |want: usize| {
            if len == want {
                Ok(())
            } else {
                Err(inst_err(bad_instruction::BAD_LEN, format!("instruction {typ}: length {len}, not {want}")))
            }
        };
        v.push(match typ {
            t::GOTO_TABLE => fixed(8).and_then(|_| b.u8("table_id")).map(Instruction::GotoTable)?,
            t::WRITE_METADATA => {
                fixed(24)?;
                b.skip(4, "pad")?;
                let metadata = b.u64("metadata")?;
                let mask = b.u64("metadata_mask")?;
                Instruction::WriteMetadata { metadata, mask }
            }
            t::WRITE_ACTIONS | t::APPLY_ACTIONS => {
                b.skip(4, "pad")?;
                let a = get_actions(b.rest())?;
                if typ == t::WRITE_ACTIONS {
                    Instruction::WriteActions(a)
                } else {
                    Instruction::ApplyActions(a)
                }
            }
            t::CLEAR_ACTIONS => fixed(8).map(|_| Instruction::ClearActions)?,
            t::METER => fixed(8).and_then(|_| b.u32("meter_id")).map(Instruction::Meter)?,
            t::EXPERIMENTER => {
                let experimenter = b.u32("experimenter")?;
                Instruction::Experimenter { experimenter, data: b.rest().to_vec() }
            }
            _ => return Err(inst_err(bad_instruction::UNKNOWN_INST, format!("unknown instruction type {typ}"))),
        });
    }
    Ok(v)
}
