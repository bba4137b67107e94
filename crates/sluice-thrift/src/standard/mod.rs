//! The `standard` service: tables, action profiles, counters, meters,
//! registers, parser value sets, program swap, ports and management; the
//! helpers and error codes every group shares here, each group's calls in
//! a file of its own (`tables.rs`, `profiles.rs`, `arrays.rs`, `device.rs`).

use md5::{Digest as _, Md5};
use sluice_control::device::Device;
use sluice_engine::runtime::{ConfigError, CrcParams, EntryAction, FieldMatch, MatchKind, Resource, RtCode, RtError};
use sluice_engine::Switch;
use thrift::protocol::TType;

use crate::wire::{bin_list, s, st, st_list, BadMessage, Fields, Val};
use crate::{code, Answer, Fault};

mod arrays;
mod device;
mod profiles;
mod tables;

/// bmv2's TableOperationErrorCode for a runtime error.
pub fn table_code(e: &RtError) -> i32 {
    match e.code {
        RtCode::TableFull => 1,
        RtCode::InvalidHandle => 2,
        RtCode::ExpiredHandle => 3,
        RtCode::AgeingDisabled => 6,
        RtCode::InvalidTableName => 7,
        RtCode::InvalidActionName => 8,
        RtCode::WrongTableType => 9,
        RtCode::InvalidMbrHandle => 10,
        RtCode::MbrStillUsed => 11,
        RtCode::MbrAlreadyInGrp => 12,
        RtCode::MbrNotInGrp => 13,
        RtCode::InvalidGrpHandle => 14,
        RtCode::GrpStillUsed => 15,
        RtCode::EmptyGrp => 16,
        RtCode::DuplicateEntry => 17,
        RtCode::BadMatchKey => 18,
        RtCode::BadRatesList | RtCode::InvalidInfoRateValue => 19, // INVALID_METER_OPERATION
        RtCode::DefaultActionIsConst => 20,
        RtCode::DefaultEntryIsConst => 21,
        RtCode::ImmutableTableEntries => 25,
        RtCode::BadActionData => 26,
        _ => 100,
    }
}

/// Counter, meter and register codes share their first two values
/// (INVALID_<KIND>_NAME 1, INVALID_INDEX 2); the last is ERROR.
fn array_code(e: &RtError, error: i32) -> i32 {
    match e.code {
        RtCode::InvalidName => 1,
        RtCode::InvalidIndex => 2,
        RtCode::BadRatesList => 3,
        RtCode::InvalidInfoRateValue => 4,
        _ => error,
    }
}

const INVALID_TABLE_NAME: Fault = Fault::Code(7);
const INVALID_ACTION_NAME: Fault = Fault::Code(8);
const WRONG_TABLE_TYPE: Fault = Fault::Code(9);
const INVALID_ACTION_PROFILE_NAME: Fault = Fault::Code(23);
const BAD_MATCH_KEY: Fault = Fault::Code(18);

fn table(sw: &Switch, args: &Fields, id: i16) -> Result<usize, Fault> {
    sw.index_of(Resource::Table, args.str(id, "table_name")?).ok_or(INVALID_TABLE_NAME)
}

fn profile(sw: &Switch, args: &Fields, id: i16) -> Result<usize, Fault> {
    sw.index_of(Resource::Profile, args.str(id, "act_prof_name")?).ok_or(INVALID_ACTION_PROFILE_NAME)
}

/// A table's action by name (the table's own action list decides).
fn table_action(sw: &Switch, t: usize, name: &str) -> Result<u32, Fault> {
    let p = sw.program();
    p.tables[t].actions.iter().copied().find(|a| p.actions[*a as usize].name == name).ok_or(INVALID_ACTION_NAME)
}

/// An action of the tables an action profile serves, by name.
fn profile_action(sw: &Switch, p: usize, name: &str) -> Result<u32, Fault> {
    let plan = sw.program();
    plan.tables
        .iter()
        .filter(|t| t.profile == Some(p as u32))
        .flat_map(|t| t.actions.iter().copied())
        .find(|a| plan.actions[*a as usize].name == name)
        .ok_or(INVALID_ACTION_NAME)
}

/// A `list<BmMatchParam>` as field matches.
pub fn match_key(v: &[Val]) -> Result<Vec<FieldMatch>, Fault> {
    let mut out = Vec::with_capacity(v.len());
    for p in v {
        let Val::Struct(p) = p else {
            return Err(Fault::Bad("match_key must hold BmMatchParam structs".into()));
        };
        let ty = p.i32(1, "BmMatchParam.type")?;
        out.push(match ty {
            0 => FieldMatch::Exact(p.st(2, "BmMatchParam.exact")?.bin(1, "key")?.to_vec()),
            1 => {
                let l = p.st(3, "BmMatchParam.lpm")?;
                let plen = l.i32(2, "prefix_length")?;
                if plen < 0 {
                    return Err(BAD_MATCH_KEY);
                }
                FieldMatch::Lpm(l.bin(1, "key")?.to_vec(), plen as u32)
            }
            2 => {
                let t = p.st(4, "BmMatchParam.ternary")?;
                FieldMatch::Ternary(t.bin(1, "key")?.to_vec(), t.bin(2, "mask")?.to_vec())
            }
            3 => FieldMatch::Valid(p.st(5, "BmMatchParam.valid")?.bool(1, "key")?),
            4 => {
                let r = p.st(6, "BmMatchParam.range")?;
                FieldMatch::Range(r.bin(1, "start")?.to_vec(), r.bin(2, "end_")?.to_vec())
            }
            other => return Err(Fault::Bad(format!("unknown BmMatchParamType {other}"))),
        });
    }
    Ok(out)
}

/// Makes a match key fit the table's kinds where the CLI's encoding differs
/// from the engine's (an optional field arrives as ternary).
fn adapt_key(sw: &Switch, t: usize, key: Vec<FieldMatch>) -> Vec<FieldMatch> {
    key.into_iter()
        .zip(sw.program().tables[t].key.iter().map(|k| k.kind).chain(std::iter::repeat(MatchKind::Exact)))
        .map(|(m, kind)| match (kind, m) {
            (MatchKind::Optional, FieldMatch::Ternary(v, mask)) => {
                FieldMatch::Optional(mask.iter().any(|b| *b != 0).then_some(v))
            }
            (MatchKind::Optional, FieldMatch::Exact(v)) => FieldMatch::Optional(Some(v)),
            (_, m) => m,
        })
        .collect()
}

fn bm_match_param(m: &FieldMatch) -> Val {
    match m {
        FieldMatch::Exact(v) => st(vec![(1, Val::I32(0)), (2, st(vec![(1, Val::Bin(v.clone()))]))]),
        FieldMatch::Lpm(v, l) => {
            st(vec![(1, Val::I32(1)), (3, st(vec![(1, Val::Bin(v.clone())), (2, Val::I32(*l as i32))]))])
        }
        FieldMatch::Ternary(v, mk) => {
            st(vec![(1, Val::I32(2)), (4, st(vec![(1, Val::Bin(v.clone())), (2, Val::Bin(mk.clone()))]))])
        }
        FieldMatch::Valid(b) => st(vec![(1, Val::I32(3)), (5, st(vec![(1, Val::Bool(*b))]))]),
        FieldMatch::Range(a, b) => {
            st(vec![(1, Val::I32(4)), (6, st(vec![(1, Val::Bin(a.clone())), (2, Val::Bin(b.clone()))]))])
        }
        FieldMatch::Optional(v) => {
            let (v, mk) = match v {
                Some(v) => (v.clone(), vec![0xff; v.len()]),
                None => (Vec::new(), Vec::new()),
            };
            st(vec![(1, Val::I32(2)), (4, st(vec![(1, Val::Bin(v)), (2, Val::Bin(mk))]))])
        }
    }
}

/// An action's packed data as bmv2 returns it: each parameter without
/// leading zero bytes (see `sluice_control::bmv2_param_bytes`).
fn action_data(sw: &Switch, action: u32, data: &[u8]) -> Val {
    let params = sw.unpack_action(action, data);
    bin_list(params.iter().map(|p| sluice_control::bmv2_param_bytes(p).to_vec()).collect())
}

/// `BmActionEntry` for an action and its packed data.
fn action_entry(sw: &Switch, a: &EntryAction) -> Val {
    match a {
        EntryAction::Direct { action, data } => st(vec![
            (1, Val::I32(1)),
            (2, s(sw.program().actions[*action as usize].name.clone())),
            (3, action_data(sw, *action, data)),
        ]),
        EntryAction::Member(m) => st(vec![(1, Val::I32(2)), (4, Val::I32(*m as i32))]),
        EntryAction::Group(g) => st(vec![(1, Val::I32(3)), (5, Val::I32(*g as i32))]),
    }
}

/// `BmMtEntry` for one entry.
fn mt_entry(sw: &Switch, t: usize, handle: u32) -> Option<Val> {
    let e = sw.entry(t, handle).ok()?;
    let priority = if sw.table_has_priority(t) { e.priority } else { -1 };
    let mut f = vec![
        (1, st_list(e.key_as_added().iter().map(bm_match_param).collect())),
        (2, st(vec![(1, Val::I32(priority))])),
        (3, Val::I32(handle as i32)),
        (4, action_entry(sw, &e.action)),
    ];
    if let Some(ms) = e.timeout_ms {
        f.push((5, st(vec![(1, Val::I32(ms as i32)), (2, Val::I32(0))])));
    }
    Some(st(f))
}

fn default_entry(sw: &Switch, t: usize) -> Val {
    match sw.default_entry(t) {
        Some((a, d)) => action_entry(sw, &EntryAction::Direct { action: a, data: d.into() }),
        None => st(vec![(1, Val::I32(0))]),
    }
}

fn counter_value(packets: u64, bytes: u64) -> Val {
    st(vec![(1, Val::I64(bytes as i64)), (2, Val::I64(packets as i64))])
}

fn rates(v: &[Val]) -> Result<Vec<(f64, u32)>, Fault> {
    v.iter()
        .map(|r| match r {
            Val::Struct(r) => {
                let burst = r.i32(2, "burst_size")?;
                Ok((r.f64(1, "units_per_micros")?, burst.max(0) as u32))
            }
            _ => Err(Fault::Bad("rates must hold BmMeterRateConfig structs".into())),
        })
        .collect()
}

fn rates_val(r: &[(f64, u32)]) -> Val {
    st_list(r.iter().map(|(rate, burst)| st(vec![(1, Val::F64(*rate)), (2, Val::I32(*burst as i32))])).collect())
}

fn handle(args: &Fields, id: i16, what: &str) -> Result<u32, Fault> {
    Ok(args.i32(id, what)? as u32)
}

fn options_priority(args: &Fields, id: i16) -> i32 {
    args.opt_st(id).and_then(|o| o.opt_i32(1)).unwrap_or(0)
}

/// The cell of a meter that a direct meter's table/entry names.
fn direct_meter(sw: &Switch, t: usize, h: u32) -> Result<(usize, usize), Fault> {
    let Some((m, _)) = sw.program().tables[t].direct_meter else {
        return Err(Fault::Code(5)); // METERS_DISABLED
    };
    let cell = sw.meter_index(m as usize, h).map_err(|e| Fault::Code(table_code(&e)))?;
    Ok((m as usize, cell))
}

/// Runs one call of the `standard` service, in the file of its group
/// (each answers a method it does not have with the service's error).
pub fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let direct = ["bm_mt_read_counter", "bm_mt_reset_counters", "bm_mt_write_counter", "bm_mt_set_meter_rates"];
    if method.starts_with("bm_mt_act_prof_") {
        profiles::call(dev, method, a)
    } else if direct.contains(&method)
        || method == "bm_mt_get_meter_rates"
        || ["bm_counter_", "bm_meter_", "bm_register_"].iter().any(|p| method.starts_with(p))
    {
        arrays::call(dev, method, a)
    } else if method.starts_with("bm_mt_") {
        tables::call(dev, method, a)
    } else {
        device::call(dev, method, a)
    }
}
