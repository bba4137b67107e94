//! The `standard` service: tables, action profiles, counters, meters,
//! registers, parser value sets, program swap, ports and management.

use md5::{Digest as _, Md5};
use sluice_control::device::Device;
use sluice_engine::runtime::{ConfigError, CrcParams, EntryAction, FieldMatch, MatchKind, Resource, RtCode, RtError};
use sluice_engine::Switch;
use thrift::protocol::TType;

use crate::wire::{bin_list, s, st, st_list, BadMessage, Fields, Val};
use crate::{code, Answer, Fault};

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
        RtCode::BadRatesList => 19,
        RtCode::DefaultActionIsConst => 20,
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

/// `BmActionEntry` for an action and its packed data.
fn action_entry(sw: &Switch, a: &EntryAction) -> Val {
    match a {
        EntryAction::Direct { action, data } => st(vec![
            (1, Val::I32(1)),
            (2, s(sw.program().actions[*action as usize].name.clone())),
            (3, bin_list(sw.unpack_action(*action, data))),
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
        (1, st_list(e.matches.iter().map(bm_match_param).collect())),
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

/// Runs one call of the `standard` service.
pub fn call(dev: &Device, method: &str, a: &Fields) -> Answer {
    let tc = code(table_code);
    let mut pool = dev.pool();
    let sw = pool.view();
    match method {
        // ---- match tables
        "bm_mt_get_num_entries" => {
            let t = table(sw, a, 2)?;
            Ok(Some(Val::I64(sw.entry_count(t) as i64)))
        }
        "bm_mt_clear_entries" => {
            let t = table(sw, a, 2)?;
            let reset = a.bool(3, "reset_default_entry").unwrap_or(false);
            pool.commit(move |sw, _| {
                sw.clear_entries(t);
                if reset {
                    sw.reset_default_entry(t);
                }
            });
            Ok(None)
        }
        "bm_mt_add_entry" => {
            let t = table(sw, a, 2)?;
            let key = adapt_key(sw, t, match_key(a.list(3, "match_key")?)?);
            let act = table_action(sw, t, a.str(4, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(5, "action_data")?).map_err(&tc)?;
            let prio = options_priority(a, 6);
            let action = EntryAction::Direct { action: act, data };
            let h = pool.apply(move |sw, _| sw.add_entry(t, key.clone(), action.clone(), prio)).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_indirect_add_entry" | "bm_mt_indirect_ws_add_entry" => {
            let t = table(sw, a, 2)?;
            if sw.program().tables[t].profile.is_none() {
                return Err(WRONG_TABLE_TYPE);
            }
            let key = adapt_key(sw, t, match_key(a.list(3, "match_key")?)?);
            let h = handle(a, 4, "handle")?;
            let action =
                if method == "bm_mt_indirect_add_entry" { EntryAction::Member(h) } else { EntryAction::Group(h) };
            if let EntryAction::Group(g) = action {
                let p = sw.program().tables[t].profile.unwrap_or(0) as usize;
                if sw.group(p, g).is_some_and(|m| m.is_empty()) {
                    return Err(Fault::Code(16)); // EMPTY_GRP
                }
            }
            let prio = options_priority(a, 5);
            let h = pool.apply(move |sw, _| sw.add_entry(t, key.clone(), action.clone(), prio)).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_set_default_action" => {
            let t = table(sw, a, 2)?;
            let act = table_action(sw, t, a.str(3, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(4, "action_data")?).map_err(&tc)?;
            pool.apply(move |sw, _| sw.set_default_entry(t, act, data.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_reset_default_entry" | "bm_mt_indirect_reset_default_entry" => {
            let t = table(sw, a, 2)?;
            if sw.program().tables[t].default_const {
                return Err(Fault::Code(20));
            }
            pool.commit(move |sw, _| sw.reset_default_entry(t));
            Ok(None)
        }
        "bm_mt_indirect_set_default_member" => {
            let t = table(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            let p = sw.program().tables[t].profile.ok_or(WRONG_TABLE_TYPE)? as usize;
            let Some((act, data)) = sw.member(p, m).map(|(a, d)| (a, Box::<[u8]>::from(d))) else {
                return Err(Fault::Code(10));
            };
            pool.apply(move |sw, _| sw.set_default_entry(t, act, data.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_indirect_ws_set_default_group" => {
            Err(Fault::Internal("a group as default action is not supported by Sluice".into()))
        }
        "bm_mt_delete_entry" | "bm_mt_indirect_delete_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            pool.apply(move |sw, _| sw.delete_entry(t, h)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_modify_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let act = table_action(sw, t, a.str(4, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(5, "action_data")?).map_err(&tc)?;
            let action = EntryAction::Direct { action: act, data };
            pool.apply(move |sw, _| sw.modify_entry(t, h, action.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_indirect_modify_entry" | "bm_mt_indirect_ws_modify_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let x = handle(a, 4, "handle")?;
            let action =
                if method == "bm_mt_indirect_modify_entry" { EntryAction::Member(x) } else { EntryAction::Group(x) };
            pool.apply(move |sw, _| sw.modify_entry(t, h, action.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_set_entry_ttl" | "bm_mt_indirect_set_entry_ttl" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let ms = a.i32(4, "timeout_ms")?.max(0) as u32;
            pool.apply(move |sw, _| sw.set_entry_ttl(t, h, ms)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_get_entries" => {
            let Some(t) = sw.index_of(Resource::Table, a.str(2, "table_name")?) else {
                return Ok(Some(st_list(Vec::new())));
            };
            Ok(Some(pool.read(|sw| {
                let handles: Vec<u32> = sw.entries(t).map(|(h, _)| h).collect();
                st_list(handles.into_iter().filter_map(|h| mt_entry(sw, t, h)).collect())
            })))
        }
        "bm_mt_get_entry" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            sw.entry(t, h).map_err(|e| Fault::Code(table_code(&e)))?;
            Ok(Some(pool.read(|sw| mt_entry(sw, t, h)).ok_or(Fault::Code(2))?))
        }
        "bm_mt_get_default_entry" => {
            let Some(t) = sw.index_of(Resource::Table, a.str(2, "table_name")?) else {
                return Ok(Some(st(vec![(1, Val::I32(0))])));
            };
            Ok(Some(default_entry(sw, t)))
        }
        "bm_mt_get_entry_from_key" => {
            let t = table(sw, a, 2)?;
            let key = match_key(a.list(3, "match_key")?)?;
            if key.is_empty() {
                return Ok(Some(st(vec![
                    (1, st_list(Vec::new())),
                    (2, st(vec![(1, Val::I32(-1))])),
                    (3, Val::I32(-1)),
                    (4, default_entry(sw, t)),
                ])));
            }
            let key = adapt_key(sw, t, key);
            let h = sw.find_entry(t, key, options_priority(a, 4)).map_err(&tc)?.ok_or(BAD_MATCH_KEY)?;
            Ok(Some(pool.read(|sw| mt_entry(sw, t, h)).ok_or(Fault::Code(2))?))
        }

        // ---- action profiles
        "bm_mt_act_prof_add_member" => {
            let p = profile(sw, a, 2)?;
            let act = profile_action(sw, p, a.str(3, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(4, "action_data")?).map_err(&tc)?;
            let h = pool.apply(move |sw, _| sw.add_member(p, act, data.clone())).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_act_prof_modify_member" => {
            let p = profile(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            let act = profile_action(sw, p, a.str(4, "action_name")?)?;
            let data = sw.pack_action(act, &a.bin_list(5, "action_data")?).map_err(&tc)?;
            pool.apply(move |sw, _| sw.modify_member(p, m, act, data.clone())).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_delete_member" => {
            let p = profile(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            pool.apply(move |sw, _| sw.delete_member(p, m)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_create_group" => {
            let p = profile(sw, a, 2)?;
            if sw.program().profiles[p].selector.is_none() {
                return Err(Fault::Code(24)); // NO_ACTION_PROFILE_SELECTION
            }
            let h = pool.apply(move |sw, _| sw.create_group(p)).map_err(&tc)?;
            Ok(Some(Val::I32(h as i32)))
        }
        "bm_mt_act_prof_delete_group" => {
            let p = profile(sw, a, 2)?;
            let g = handle(a, 3, "grp_handle")?;
            pool.apply(move |sw, _| sw.delete_group(p, g)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_add_member_to_group" | "bm_mt_act_prof_remove_member_from_group" => {
            let p = profile(sw, a, 2)?;
            let m = handle(a, 3, "mbr_handle")?;
            let g = handle(a, 4, "grp_handle")?;
            let add = method == "bm_mt_act_prof_add_member_to_group";
            pool.apply(move |sw, _| sw.group_member(p, g, m, add)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_act_prof_get_members" | "bm_mt_act_prof_get_member" => {
            let p = profile(sw, a, 2)?;
            let one = (method == "bm_mt_act_prof_get_member").then(|| handle(a, 3, "mbr_handle")).transpose()?;
            let mut out = Vec::new();
            for (h, act, data) in sw.members(p) {
                if one.is_some_and(|x| x != h) {
                    continue;
                }
                out.push(st(vec![
                    (1, Val::I32(h as i32)),
                    (2, s(sw.program().actions[act as usize].name.clone())),
                    (3, bin_list(sw.unpack_action(act, data))),
                ]));
            }
            match one {
                Some(_) => out.pop().map(Some).ok_or(Fault::Code(10)),
                None => Ok(Some(st_list(out))),
            }
        }
        "bm_mt_act_prof_get_groups" | "bm_mt_act_prof_get_group" => {
            let p = profile(sw, a, 2)?;
            let one = (method == "bm_mt_act_prof_get_group").then(|| handle(a, 3, "grp_handle")).transpose()?;
            let mut out = Vec::new();
            for (h, members) in sw.groups(p) {
                if one.is_some_and(|x| x != h) {
                    continue;
                }
                out.push(st(vec![
                    (1, Val::I32(h as i32)),
                    (2, Val::List(TType::I32, members.iter().map(|m| Val::I32(*m as i32)).collect())),
                ]));
            }
            match one {
                Some(_) => out.pop().map(Some).ok_or(Fault::Code(14)),
                None => Ok(Some(st_list(out))),
            }
        }

        // ---- direct counters and meters
        "bm_mt_read_counter" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            if !sw.program().tables[t].with_counters {
                return Err(Fault::Code(4)); // COUNTERS_DISABLED
            }
            pool.read(|sw| sw.entry_counter_read(t, h).map(|(p, b)| counter_value(p, b)))
                .map(Some)
                .map_err(|_| Fault::Code(2))
        }
        "bm_mt_reset_counters" => {
            let t = table(sw, a, 2)?;
            if !sw.program().tables[t].with_counters {
                return Err(Fault::Code(4));
            }
            pool.commit(move |sw, _| sw.entry_counters_reset(t));
            Ok(None)
        }
        "bm_mt_write_counter" => {
            let t = table(sw, a, 2)?;
            let h = handle(a, 3, "entry_handle")?;
            let v = a.st(4, "value")?;
            let (bytes, packets) = (v.i64(1, "bytes")? as u64, v.i64(2, "packets")? as u64);
            if !sw.program().tables[t].with_counters {
                return Err(Fault::Code(4));
            }
            pool.apply(move |sw, first| sw.entry_counter_write(t, h, if first { (packets, bytes) } else { (0, 0) }))
                .map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_set_meter_rates" => {
            let t = table(sw, a, 2)?;
            let (m, cell) = direct_meter(sw, t, handle(a, 3, "entry_handle")?)?;
            let r = rates(a.list(4, "rates")?)?;
            pool.change_shared(|sw| sw.set_meter_rates(m, cell, r)).map_err(&tc)?;
            Ok(None)
        }
        "bm_mt_get_meter_rates" => {
            let t = table(sw, a, 2)?;
            let (m, cell) = direct_meter(sw, t, handle(a, 3, "entry_handle")?)?;
            Ok(Some(rates_val(&sw.meter_rates(m, cell).map_err(&tc)?)))
        }

        // ---- counter, meter and register arrays
        "bm_counter_read" | "bm_counter_reset_all" | "bm_counter_write" => {
            let c = sw.index_of(Resource::Counter, a.str(2, "counter_name")?).ok_or(Fault::Code(1))?;
            let cc = code(|e| array_code(e, 3));
            match method {
                "bm_counter_read" => {
                    let i = a.i32(3, "index")?.max(-1) as usize;
                    let v = pool.read(|sw| sw.counter_read(c, i)).map_err(|_| Fault::Code(2))?;
                    Ok(Some(counter_value(v.0, v.1)))
                }
                "bm_counter_reset_all" => {
                    pool.commit(move |sw, _| sw.counter_reset(c));
                    Ok(None)
                }
                _ => {
                    let i = a.i32(3, "index")?.max(-1) as usize;
                    let v = a.st(4, "value")?;
                    let (bytes, packets) = (v.i64(1, "bytes")? as u64, v.i64(2, "packets")? as u64);
                    pool.apply(move |sw, first| sw.counter_write(c, i, if first { (packets, bytes) } else { (0, 0) }))
                        .map_err(cc)?;
                    Ok(None)
                }
            }
        }
        "bm_meter_array_set_rates" | "bm_meter_set_rates" | "bm_meter_get_rates" => {
            let m = sw.index_of(Resource::Meter, a.str(2, "meter_array_name")?).ok_or(Fault::Code(1))?;
            let mc = code(|e| array_code(e, 6));
            match method {
                "bm_meter_array_set_rates" => {
                    let r = rates(a.list(3, "rates")?)?;
                    pool.change_shared(|sw| (0..sw.meter_len(m)).try_for_each(|i| sw.set_meter_rates(m, i, r.clone())))
                        .map_err(mc)?;
                    Ok(None)
                }
                "bm_meter_set_rates" => {
                    let i = sw.meter_index(m, a.i32(3, "index")? as u32).map_err(&mc)?;
                    let r = rates(a.list(4, "rates")?)?;
                    pool.change_shared(|sw| sw.set_meter_rates(m, i, r)).map_err(mc)?;
                    Ok(None)
                }
                _ => {
                    let i = sw.meter_index(m, a.i32(3, "index")? as u32).map_err(&mc)?;
                    Ok(Some(rates_val(&sw.meter_rates(m, i).map_err(mc)?)))
                }
            }
        }
        "bm_register_read"
        | "bm_register_read_all"
        | "bm_register_write"
        | "bm_register_write_range"
        | "bm_register_reset" => {
            let r = sw.index_of(Resource::Register, a.str(2, "register_array_name")?).ok_or(Fault::Code(1))?;
            let rc = code(|e| array_code(e, 3));
            match method {
                "bm_register_read" => {
                    let v = sw.register_read(r, a.i32(3, "idx")?.max(-1) as usize).map_err(rc)?;
                    Ok(Some(Val::I64(v as i64)))
                }
                "bm_register_read_all" => Ok(Some(Val::List(
                    TType::I64,
                    sw.register_values(r).into_iter().map(|v| Val::I64(v as i64)).collect(),
                ))),
                "bm_register_write" => {
                    let i = a.i32(3, "index")?.max(-1) as usize;
                    let v = a.i64(4, "value")? as u64 as u128;
                    pool.change_shared(|sw| sw.register_write(r, i, v)).map_err(rc)?;
                    Ok(None)
                }
                "bm_register_write_range" => {
                    let (s0, e0) = (a.i32(3, "start_index")?, a.i32(4, "end_index")?);
                    let v = a.i64(5, "value")? as u64 as u128;
                    if s0 < 0 || e0 < s0 || e0 as usize >= sw.register_len(r) {
                        return Err(Fault::Code(2));
                    }
                    pool.change_shared(|sw| (s0..=e0).try_for_each(|i| sw.register_write(r, i as usize, v)))
                        .map_err(rc)?;
                    Ok(None)
                }
                _ => {
                    pool.change_shared(|sw| sw.register_reset(r));
                    Ok(None)
                }
            }
        }

        // ---- parser value sets
        "bm_parse_vset_add" | "bm_parse_vset_remove" | "bm_parse_vset_get" | "bm_parse_vset_clear" => {
            let v = sw.index_of(Resource::ValueSet, a.str(2, "parse_vset_name")?).ok_or(Fault::Code(1))?;
            let pc = |_: RtError| Fault::Code(2);
            match method {
                "bm_parse_vset_add" => {
                    let val = a.bin(3, "value")?.to_vec();
                    pool.try_change(move |sw, _| sw.vset_add(v, &val, None)).map_err(pc)?;
                }
                "bm_parse_vset_remove" => {
                    let val = a.bin(3, "value")?.to_vec();
                    pool.try_change(move |sw, _| sw.vset_remove(v, &val)).map_err(pc)?;
                }
                "bm_parse_vset_clear" => {
                    pool.change(move |sw, _| sw.vset_clear(v));
                }
                _ => return Ok(Some(bin_list(sw.vset_values(v).iter().map(|(x, _)| x.clone()).collect()))),
            }
            pool.flush();
            Ok(None)
        }

        // ---- learning: Sluice sends digests to P4Runtime only; these are accepted and have no effect.
        "bm_learning_ack" | "bm_learning_ack_buffer" | "bm_learning_set_timeout" | "bm_learning_set_buffer_size" => {
            Ok(None)
        }

        // ---- program swap, ports, management
        "bm_load_new_config" => {
            let json = a.str(1, "config_str")?.to_string();
            drop(pool);
            dev.stage(&json).map_err(|e| Fault::Internal(format!("the new program cannot be loaded: {e}")))?;
            Ok(None)
        }
        "bm_swap_configs" => {
            drop(pool);
            match dev.swap_staged() {
                Ok(true) => Ok(None),
                Ok(false) => Err(Fault::Code(3)), // NO_ONGOING_SWAP
                Err(e) => Err(Fault::Internal(e)),
            }
        }
        "bm_dev_mgr_add_port" => {
            let iface = a.str(1, "iface_name")?.to_string();
            let port = a.i32(2, "port_num")?;
            drop(pool);
            if !(0..511).contains(&port) {
                return Err(Fault::Code(1));
            }
            dev.add_port(port as u32, &iface).map_err(|e| {
                eprintln!("sluice: port_add {iface} {port}: {e}");
                Fault::Code(1)
            })?;
            Ok(None)
        }
        "bm_dev_mgr_remove_port" => {
            let port = a.i32(1, "port_num")?;
            drop(pool);
            dev.remove_port(port.max(0) as u32).map_err(|e| {
                eprintln!("sluice: port_remove {port}: {e}");
                Fault::Code(1)
            })?;
            Ok(None)
        }
        "bm_dev_mgr_show_ports" => Ok(Some(st_list(
            dev.ports()
                .iter()
                .map(|p| {
                    st(vec![
                        (1, Val::I32(p.number as i32)),
                        (2, s(p.iface.clone())),
                        (3, Val::Bool(dev.info.link_up.is_none_or(|up| up(&p.iface)))),
                        (4, Val::Map(TType::String, TType::String, Vec::new())),
                    ])
                })
                .collect(),
        ))),
        "bm_mgmt_get_info" => Ok(Some(st(vec![
            (1, Val::I64(dev.info.device_id as i64)),
            (2, Val::I32(dev.info.thrift_port.map_or(0, i32::from))),
            (3, s(format!("ipc:///tmp/bmv2-{}-notifications.ipc", dev.info.device_id))),
        ]))),
        "bm_set_crc16_custom_parameters" | "bm_set_crc32_custom_parameters" => {
            let name = a.str(2, "calc_name")?;
            let c = sw.program().calcs.iter().position(|c| c.name == name).ok_or(Fault::Code(1))?;
            let width = if method.contains("crc16") { 16 } else { 32 };
            let cfg = a.st(3, "config")?;
            let num = |id: i16, what: &str| -> Result<u64, BadMessage> {
                if width == 16 {
                    Ok(u64::from(cfg.i16(id, what)? as u16))
                } else {
                    Ok(u64::from(cfg.i32(id, what)? as u32))
                }
            };
            let params = CrcParams {
                width,
                polynomial: num(1, "polynomial")?,
                initial_remainder: num(2, "initial_remainder")?,
                final_xor_value: num(3, "final_xor_value")?,
                data_reflected: cfg.bool(4, "data_reflected")?,
                remainder_reflected: cfg.bool(5, "remainder_reflected")?,
            };
            // Refused parameters change nothing, and go to no worker.
            pool.apply(move |sw, _| sw.set_crc_params(c, params)).map_err(|e| match e {
                ConfigError::WrongTypeCalculation => Fault::Code(2),
                _ => Fault::Code(3), // INVALID_CONFIG
            })?;
            Ok(None)
        }
        "bm_reset_state" => {
            // In place: every worker takes a copy of one state as loaded,
            // so they share its registers and meters as replicas do.
            let loaded = std::sync::Arc::new(sw.loaded_state().map_err(|e| Fault::Internal(e.to_string()))?);
            pool.commit(move |sw, _| sw.restore_state(&loaded));
            Ok(None)
        }
        "bm_get_config" => Ok(Some(s(dev.program().json.to_string()))),
        "bm_get_config_md5" => Ok(Some(Val::Bin(Md5::digest(dev.program().json.as_bytes()).to_vec()))),
        "bm_get_id_from_name" => {
            let ty = a.i32(2, "resource_type")?;
            let name = a.str(3, "resource_name")?;
            let p = sw.program();
            let id = match ty {
                0 => p.tables.iter().find(|x| x.name == name).map(|x| x.id as i32),
                1 => p.profiles.iter().position(|x| x.name == name).map(|i| i as i32),
                2 => p.counters.iter().position(|x| x.name == name).map(|i| i as i32),
                3 => p.meters.iter().position(|x| x.name == name).map(|i| i as i32),
                4 => p.registers.iter().position(|x| x.name == name).map(|i| i as i32),
                5 => p.learn_lists.iter().find(|(_, (n, _))| n == name).map(|(id, _)| *id as i32),
                _ => return Err(Fault::Code(0)), // INVALID_RESOURCE_TYPE
            };
            id.map(|i| Some(Val::I32(i))).ok_or(Fault::Code(1))
        }
        "bm_serialize_state" => Ok(Some(s(String::new()))),
        _ => Err(Fault::Unknown(format!("standard:{method} is not a method of the standard service"))),
    }
}
