//! Carrying commands out with runtime calls, and the answers' text: the
//! layouts of bmv2's `simple_switch_CLI` (`tools/runtime_CLI.py`,
//! `sswitch_CLI.py`) for dumps, lists and reads.

use std::collections::BTreeSet;

use sluice_engine::runtime::{Entry, EntryAction, FieldMatch, MatchKind, RtCode, RtError};
use sluice_engine::Switch;

use super::parse::py_float;
use super::{CmdError, Read, SharedWrite, Write};

type R = Result<String, CmdError>;

fn err<T>(m: impl Into<String>) -> Result<T, CmdError> {
    Err(CmdError(m.into()))
}

const DONE: R = Ok(String::new());

impl Read {
    /// Answers from the switch's state, which it cannot change.
    pub fn answer(&self, sw: &Switch) -> R {
        let p = sw.program();
        match self {
            Read::TableNumEntries { table } => Ok(format!("{}", sw.entry_count(*table))),
            Read::TableDump { table } => Ok(dump_table(sw, *table)),
            Read::TableDumpEntry { table, handle } => match sw.entry(*table, *handle) {
                Ok(e) => Ok(dump_entry(sw, *table, *handle, e)),
                Err(e) => err(format!("Invalid table operation ({})", e.message)),
            },
            Read::TableDumpEntryFromKey { table, key, priority } => match sw.find_entry(*table, key.clone(), *priority)
            {
                Ok(Some(h)) => match sw.entry(*table, h) {
                    Ok(e) => Ok(dump_entry(sw, *table, h, e)),
                    Err(_) => err("Invalid table operation (BAD_MATCH_KEY)"),
                },
                Ok(None) => err("Invalid table operation (BAD_MATCH_KEY)"),
                Err(e) => err(format!("Invalid table operation ({})", e.message)),
            },
            Read::TableInfo { table } => {
                let mut out = vec![table_str(sw, *table), "*".repeat(80)];
                out.extend(actions_str(sw, p.tables[*table].actions.iter().map(|a| *a as usize)));
                Ok(out.join("\n"))
            }
            Read::TableShowActions { table } => {
                Ok(actions_str(sw, p.tables[*table].actions.iter().map(|a| *a as usize)).join("\n"))
            }
            Read::DumpMember { profile, member } => dump_member(sw, *profile, *member)
                .ok_or_else(|| CmdError("Invalid table operation (INVALID_MBR_HANDLE)".into())),
            Read::DumpGroup { profile, group } => dump_group(sw, *profile, *group)
                .ok_or_else(|| CmdError("Invalid table operation (INVALID_GRP_HANDLE)".into())),
            Read::ActProfDump { profile } => Ok(dump_profile(sw, *profile)),
            Read::McDump => Ok(dump_mc(sw)),
            Read::MirroringGet { session } => match sw.mirror_session(*session) {
                // The CLI prints the Thrift struct: its fields in declaration order.
                Some(s) => Ok(format!(
                    "MirroringSessionConfig(port={}, mgid={})",
                    s.port.map_or("None".into(), |x| x.to_string()),
                    s.mgid.map_or("None".into(), |x| x.to_string())
                )),
                None => err("Invalid mirroring operation (SESSION_NOT_FOUND)"),
            },
            Read::CounterRead { name, counter, index, direct } => match direct {
                Some((tname, t)) => {
                    let (packets, bytes) = sw
                        .entry_counter_read(*t, *index as u32)
                        .map_err(|_| CmdError("Invalid counter operation (INVALID_ENTRY_HANDLE)".into()))?;
                    Ok(format!(
                        "this is the direct counter for table {tname}\n{name}[{index}]= ({bytes} bytes, {packets} packets)"
                    ))
                }
                None => match sw.counter_read(*counter, *index) {
                    Ok((packets, bytes)) => Ok(format!("{name}[{index}]= ({bytes} bytes, {packets} packets)")),
                    Err(_) => err("Invalid counter operation (INVALID_INDEX)"),
                },
            },
            Read::RegisterRead { name, register, index: Some(i) } => match sw.register_read(*register, *i) {
                Ok(v) => Ok(format!("{name}[{i}]= {v}")),
                Err(_) => err("Invalid register operation (INVALID_INDEX)"),
            },
            Read::RegisterRead { name, register, index: None } => Ok(format!(
                "{name}= {}",
                sw.register_values(*register).iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
            )),
            Read::MeterGetRates { meter, index } => {
                let cell = meter_cell(sw, *meter, *index)?;
                match sw.meter_rates(*meter, cell) {
                    Ok(rates) => Ok(rates
                        .iter()
                        .enumerate()
                        .map(|(k, (r, b))| format!("{k}: info rate = {}, burst size = {b}", py_float(*r)))
                        .collect::<Vec<_>>()
                        .join("\n")),
                    Err(_) => err("Invalid meter operation (INVALID_INDEX)"),
                }
            }
            Read::ShowTables => {
                let names = by_name(p.tables.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)));
                Ok(names.iter().map(|(_, t)| table_str(sw, *t)).collect::<Vec<_>>().join("\n"))
            }
            Read::ShowActions => Ok(actions_str(sw, 0..p.actions.len()).join("\n")),
            Read::ShowPvs => {
                let mut v: Vec<&(String, u32)> = p.vsets.iter().collect();
                v.sort();
                Ok(v.iter().map(|(n, w)| format!("{n:<30} [compressed bitwidth:{w}]")).collect::<Vec<_>>().join("\n"))
            }
            Read::PvsGet { vset } => {
                Ok(sw.vset_values(*vset).iter().map(|(x, _)| hexstr(x)).collect::<Vec<_>>().join("\n"))
            }
        }
    }
}

impl Write {
    /// Makes the change on one replica. `first` is false on the replicas
    /// that keep no share of a written counter value (see
    /// `sluice_dataplane::workers::Change`); a lone switch passes `true`.
    pub fn apply(&self, sw: &mut Switch, first: bool) -> R {
        match self {
            Write::TableAdd { table, entry } => add_entry(sw, *table, entry.clone()),
            Write::TableIndirectAdd { table, profile, action, key, priority } => {
                match action {
                    EntryAction::Group(g) => match sw.group(*profile, *g) {
                        Some(members) if members.is_empty() => return err("Invalid table operation (EMPTY_GRP)"),
                        Some(_) => {}
                        None => return err("Invalid table operation (INVALID_GRP_HANDLE)"),
                    },
                    EntryAction::Member(m) => {
                        if sw.member(*profile, *m).is_none() {
                            return err("Invalid table operation (INVALID_MBR_HANDLE)");
                        }
                    }
                    EntryAction::Direct { .. } => {}
                }
                let matches = key.clone()?;
                let entry = Entry {
                    matches,
                    priority: *priority,
                    action: action.clone(),
                    packets: 0,
                    bytes: 0,
                    timeout_ms: None,
                    added_key: None,
                };
                add_entry(sw, *table, entry)
            }
            Write::TableResetDefault { table } => {
                sw.reset_default_entry(*table);
                DONE
            }
            Write::TableSetDefault { table, action, data } => {
                // A const default is refused by its code's name.
                sw.set_default_entry(*table, *action, data.clone())
                    .map_err(|e| CmdError(format!("Invalid table operation ({})", code_name(e.code))))?;
                DONE
            }
            Write::TableDelete { table, handle } => {
                sw.delete_entry(*table, *handle).map_err(table_error)?;
                DONE
            }
            Write::TableModify { table, handle, action, data } => {
                match sw.modify_entry_as_given(
                    *table,
                    *handle,
                    EntryAction::Direct { action: *action, data: data.clone() },
                ) {
                    Ok(()) => DONE,
                    Err(_) => err("Invalid table operation (INVALID_HANDLE)"),
                }
            }
            Write::TableClear { table } => {
                sw.clear_entries(*table);
                DONE
            }
            Write::TableIndirectSetDefault { table, profile, member } => {
                match sw.member(*profile, *member).map(|(a, d)| (a, Box::<[u8]>::from(d))) {
                    Some((a, d)) => {
                        sw.set_default_as_given(*table, a, d);
                        DONE
                    }
                    None => err("Invalid table operation (INVALID_MBR_HANDLE)"),
                }
            }
            Write::ActProfCreateMember { profile, action, data } => {
                let h = sw.add_member_as_given(*profile, *action, data.clone()).map_err(profile_error)?;
                Ok(format!("Member has been created with handle {h}"))
            }
            Write::ActProfDeleteMember { profile, member } => {
                sw.delete_member_as_given(*profile, *member).map_err(profile_error)?;
                DONE
            }
            Write::ActProfCreateGroup { profile } => {
                let h = sw.create_group(*profile).map_err(profile_error)?;
                Ok(format!("Group has been created with handle {h}"))
            }
            Write::ActProfDeleteGroup { profile, group } => {
                sw.delete_group_as_given(*profile, *group).map_err(profile_error)?;
                DONE
            }
            Write::ActProfGroupMember { profile, member, group, add } => {
                sw.group_member(*profile, *group, *member, *add).map_err(profile_error)?;
                DONE
            }
            Write::McMgrpCreate { mgid } => {
                sw.mc_group_create(*mgid);
                Ok(format!("Creating multicast group {mgid}"))
            }
            Write::McMgrpDestroy { mgid } => {
                sw.mc_group_destroy(*mgid).map_err(pre_error)?;
                DONE
            }
            Write::McNodeCreate { rid, ports, lags } => {
                let (pm, lm) = (port_map(ports), port_map(lags));
                let h = sw.mc_node_create(*rid, ports.clone(), lags.clone());
                Ok(format!(
                    "Creating node with rid {rid} , port map {pm} and lag map {lm}\nnode was created with handle {h}"
                ))
            }
            Write::McNodeUpdate { node, ports, lags } => {
                let (pm, lm) = (port_map(ports), port_map(lags));
                sw.mc_node_update(*node, ports.clone(), lags.clone()).map_err(pre_error)?;
                Ok(format!("Updating node {node} with port map {pm} and lag map {lm}"))
            }
            Write::McSetLagMembership { lag, ports } => {
                sw.mc_lag_set_membership(*lag, ports.clone()).map_err(pre_error)?;
                Ok(format!("Setting lag membership: {lag} <- {}", port_map(ports)))
            }
            Write::McNodeAssociate { mgid, node, associate } => {
                if sw.mc_node(*node).is_none() {
                    return err("Invalid PRE operation (INVALID_L1_HANDLE)");
                }
                let Some(present) = sw.mc_group(*mgid).map(|nodes| nodes.contains(node)) else {
                    return err("Invalid PRE operation (INVALID_MGID)");
                };
                // Associating an associated node, or dissociating one that is not, does nothing.
                if present != *associate {
                    sw.mc_node_associate(*mgid, *node, *associate).map_err(pre_error)?;
                }
                DONE
            }
            Write::McNodeDestroy { node } => {
                sw.mc_node_destroy(*node).map_err(pre_error)?;
                DONE
            }
            Write::MirroringAdd { session, to } => {
                sw.mirror_set(*session, to.clone());
                DONE
            }
            Write::MirroringDelete { session } => {
                sw.mirror_delete(*session)
                    .map_err(|_| CmdError("Invalid mirroring operation (SESSION_NOT_FOUND)".into()))?;
                DONE
            }
            Write::CounterReset { counter } => {
                sw.counter_reset(*counter);
                DONE
            }
            Write::CounterWrite { counter, index, value } => {
                let value = if first { *value } else { (0, 0) };
                match sw.counter_write(*counter, *index, value) {
                    Ok(()) => DONE,
                    Err(_) => err("Invalid counter operation (INVALID_INDEX)"),
                }
            }
            Write::PvsAdd { vset, value } => {
                if !sw.vset_values(*vset).iter().any(|(x, _)| x == value) {
                    sw.vset_add(*vset, value, None).map_err(|e| CmdError(e.message))?;
                }
                DONE
            }
            Write::PvsRemove { vset, value } => {
                sw.vset_remove(*vset, value).map_err(|e| CmdError(e.message))?;
                DONE
            }
            Write::PvsClear { vset } => {
                sw.vset_clear(*vset);
                DONE
            }
            Write::SetCrcParameters { calc, params } => {
                sw.set_crc_params(*calc, *params).map_err(|e| CmdError(format!("Invalid CRC operation ({e:?})")))?;
                DONE
            }
        }
    }
}

impl SharedWrite {
    /// Makes the change once, on the state every replica shares.
    pub fn apply(&self, sw: &mut Switch) -> R {
        match self {
            SharedWrite::RegisterWrite { register, index, value } => {
                match sw.register_write(*register, *index, *value) {
                    Ok(()) => DONE,
                    Err(_) => err("Invalid register operation (INVALID_INDEX)"),
                }
            }
            SharedWrite::RegisterReset { register } => {
                sw.register_reset(*register);
                DONE
            }
            SharedWrite::MeterSetRates { meter, index: Some(index), rates } => {
                let cell = meter_cell(sw, *meter, *index)?;
                sw.set_meter_rates(*meter, cell, rates.clone()?).map_err(|e| rates_error(sw, *meter, e))?;
                DONE
            }
            SharedWrite::MeterSetRates { meter, index: None, rates } => {
                let rates = rates.clone()?;
                for cell in 0..sw.meter_len(*meter) {
                    sw.set_meter_rates(*meter, cell, rates.clone()).map_err(|e| rates_error(sw, *meter, e))?;
                }
                DONE
            }
        }
    }
}

/// Installs an entry as the line gave it.
fn add_entry(sw: &mut Switch, t: usize, e: Entry) -> R {
    // `install_entry` also resets the entry's direct meter, as the typed API does.
    let h = sw.install_entry(t, e).map_err(table_error)?;
    Ok(format!("Entry has been added with handle {h}"))
}

fn table_error(e: RtError) -> CmdError {
    CmdError(format!("Invalid table operation ({})", e.message))
}

fn profile_error(e: RtError) -> CmdError {
    CmdError(format!("Invalid action profile operation ({})", code_name(e.code)))
}

fn pre_error(e: RtError) -> CmdError {
    CmdError(format!("Invalid PRE operation ({})", code_name(e.code)))
}

/// bmv2's name of a runtime error code, as the CLI prints it.
fn code_name(c: RtCode) -> &'static str {
    match c {
        RtCode::InvalidMbrHandle => "INVALID_MBR_HANDLE",
        RtCode::InvalidGrpHandle => "INVALID_GRP_HANDLE",
        RtCode::MbrAlreadyInGrp => "MBR_ALREADY_IN_GRP",
        RtCode::MbrNotInGrp => "MBR_NOT_IN_GRP",
        RtCode::InvalidMgid => "INVALID_MGID",
        RtCode::InvalidL1Handle => "INVALID_L1_HANDLE",
        RtCode::DefaultActionIsConst => "DEFAULT_ACTION_IS_CONST",
        RtCode::DefaultEntryIsConst => "DEFAULT_ENTRY_IS_CONST",
        RtCode::InvalidActionName => "INVALID_ACTION_NAME",
        _ => "ERROR",
    }
}

/// A refused rate list as the CLI reports it: a direct meter's through
/// its table (`bm_mt_set_meter_rates`), an array's by the meter code.
fn rates_error(sw: &Switch, m: usize, e: RtError) -> CmdError {
    if sw.program().meters[m].is_direct {
        return CmdError("Invalid table operation (INVALID_METER_OPERATION)".into());
    }
    CmdError(match e.code {
        RtCode::InvalidInfoRateValue => "Invalid meter operation (INVALID_INFO_RATE_VALUE)".into(),
        RtCode::BadRatesList => "Invalid meter operation (BAD_RATES_LIST)".into(),
        _ => "Invalid meter operation (INVALID_INDEX)".into(),
    })
}

/// The cell of meter `m` a command's index names: the index itself for a
/// meter array, the entry behind a handle of the bound table for a direct meter.
fn meter_cell(sw: &Switch, m: usize, index: u32) -> Result<usize, CmdError> {
    sw.meter_index(m, index).map_err(|e| {
        CmdError(match e.code {
            RtCode::InvalidIndex => "Invalid meter operation (INVALID_INDEX)".into(),
            RtCode::InvalidName => e.message,
            _ => "Invalid table operation (INVALID_HANDLE)".into(),
        })
    })
}

/// `table_dump`: every entry, the profile behind an indirect table, the default entry.
fn dump_table(sw: &Switch, t: usize) -> String {
    let mut out = vec!["==========".to_string(), "TABLE ENTRIES".to_string()];
    for (h, e) in sw.entries(t) {
        out.push("*".repeat(10));
        out.push(dump_entry(sw, t, h, e));
    }
    if let Some(p) = sw.program().tables[t].profile {
        out.push(dump_profile(sw, p as usize));
    }
    out.push("==========".into());
    out.push("Dumping default entry".into());
    out.push(match sw.default_entry(t) {
        Some((a, d)) => action_str(sw, a, d),
        None => "EMPTY".into(),
    });
    out.push("==========".into());
    out.join("\n")
}

/// One entry as `table_dump` and `table_dump_entry` print it: the handle
/// in hex, each key field under its CLI name (padded to the longest,
/// at least 20) with its kind in a 10-wide column and its value in hex of
/// the field's byte width, then the priority (tables with priorities),
/// the action and, for an entry with a timeout, its life.
fn dump_entry(sw: &Switch, t: usize, h: u32, e: &Entry) -> String {
    let tp = &sw.program().tables[t];
    let w = tp.key.iter().map(|k| k.cli_name.len()).max().unwrap_or(0).max(20);
    let mut out = vec![format!("Dumping entry {h:#x}"), "Match key:".to_string()];
    for (k, m) in tp.key.iter().zip(e.key_as_added()) {
        let kind = kind_name(k.kind).to_ascii_uppercase();
        out.push(format!("* {:<w$}: {kind:<10}{}", k.cli_name, match_value(m, k.width)));
    }
    if sw.table_has_priority(t) {
        out.push(format!("Priority: {}", e.priority));
    }
    out.push(entry_action_str(sw, &e.action));
    if let Some(timeout) = e.timeout_ms {
        let since = sw.entry_last_hit(t, h).map_or(0, |at| at.elapsed().as_millis());
        out.push(format!("Life: {since}ms since hit, timeout is {timeout}ms"));
    }
    out.join("\n")
}

/// `Action entry: NAME - P1, P2`, each parameter in hex as bmv2 returns
/// it (no leading zero bytes, see [`crate::bmv2_param_bytes`]).
fn action_str(sw: &Switch, action: u32, data: &[u8]) -> String {
    let params = sw.unpack_action(action, data);
    let params: Vec<String> = params.iter().map(|p| hexstr(crate::bmv2_param_bytes(p))).collect();
    format!("Action entry: {} - {}", sw.program().actions[action as usize].name, params.join(", "))
}

/// What an entry does: its action, `Index: member(M)` or `Index: group(G)`.
fn entry_action_str(sw: &Switch, a: &EntryAction) -> String {
    match a {
        EntryAction::Direct { action, data } => action_str(sw, *action, data),
        EntryAction::Member(m) => format!("Index: member({m})"),
        EntryAction::Group(g) => format!("Index: group({g})"),
    }
}

/// `Dumping member M` and its action, or `None` for no such member.
fn dump_member(sw: &Switch, p: usize, m: u32) -> Option<String> {
    let (a, d) = sw.member(p, m)?;
    Some(format!("Dumping member {m}\n{}", action_str(sw, a, d)))
}

/// `Dumping group G` and its members, or `None` for no such group.
fn dump_group(sw: &Switch, p: usize, g: u32) -> Option<String> {
    let members = sw.group(p, g)?.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ");
    Some(format!("Dumping group {g}\nMembers: [{members}]"))
}

/// `act_prof_dump`: every member, then every group (profiles with a selector).
fn dump_profile(sw: &Switch, p: usize) -> String {
    let mut out = vec!["==========".to_string(), "MEMBERS".to_string()];
    for (m, a, d) in sw.members(p) {
        out.push("*".repeat(10));
        out.push(format!("Dumping member {m}\n{}", action_str(sw, a, d)));
    }
    if sw.program().profiles[p].selector.is_some() {
        out.push("==========".into());
        out.push("GROUPS".into());
        for (g, _) in sw.groups(p) {
            if let Some(d) = dump_group(sw, p, g) {
                out.push("*".repeat(10));
                out.push(d);
            }
        }
    }
    out.join("\n")
}

/// A table as `show_tables` and `table_info` print it: the name in a
/// 30-wide column, its action profile and its key fields with kind and width.
fn table_str(sw: &Switch, t: usize) -> String {
    let p = sw.program();
    let tp = &p.tables[t];
    let imp = tp.profile.map_or("None", |x| p.profiles[x as usize].name.as_str());
    let mk = tp
        .key
        .iter()
        .map(|k| format!("{}({}, {})", k.cli_name, kind_name(k.kind), k.width))
        .collect::<Vec<_>>()
        .join(",\t");
    format!("{:<30} [implementation={imp}, mk={mk}]", tp.name)
}

/// Actions as `show_actions` lists them: sorted by name (one line per
/// name), each with its parameters and their widths.
fn actions_str(sw: &Switch, actions: impl Iterator<Item = usize>) -> Vec<String> {
    let p = sw.program();
    by_name(actions.map(|a| (p.actions[a].name.as_str(), a)))
        .iter()
        .map(|(name, a)| {
            let params = p.actions[*a].params.iter().map(|(n, w)| format!("{n}({w})")).collect::<Vec<_>>().join(",\t");
            format!("{name:<30} [{params}]")
        })
        .collect()
}

/// `mc_dump`: each multicast group with its nodes (handle, rid, ports,
/// lags), then the LAG section (Sluice has no LAG membership: empty).
fn dump_mc(sw: &Switch) -> String {
    let list = |s: &BTreeSet<u32>| s.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
    let mut out = vec!["==========".to_string(), "MC ENTRIES".to_string()];
    for (g, nodes) in sw.mc_groups() {
        out.push("*".repeat(10));
        out.push(format!("mgrp({g})"));
        for h in nodes {
            if let Some(n) = sw.mc_node(*h) {
                out.push(format!(
                    "  -> (L1h={h}, rid={}) -> (ports=[{}], lags=[{}])",
                    n.rid,
                    list(&n.ports),
                    list(&n.lags)
                ));
            }
        }
    }
    out.extend(["==========".to_string(), "LAGS".to_string()]);
    for (lag, ports) in sw.mc_lags() {
        out.push(format!("lag({lag}) -> ports=[{}]", list(ports)));
    }
    out.push("==========".to_string());
    out.join("\n")
}

/// Objects sorted by name, one per name (the CLI keeps them in a dict by
/// name: the last one of a name wins).
fn by_name<'a>(objects: impl Iterator<Item = (&'a str, usize)>) -> Vec<(&'a str, usize)> {
    let mut v: Vec<(&str, usize)> = objects.collect();
    v.sort_by(|a, b| a.0.cmp(b.0).then(b.1.cmp(&a.1)));
    v.dedup_by(|later, first| later.0 == first.0);
    v
}

/// Bytes as the CLI prints a value: two lowercase hex digits each, no separator.
fn hexstr(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A match kind as the JSON (and `show_tables`) names it.
fn kind_name(k: MatchKind) -> &'static str {
    match k {
        MatchKind::Exact => "exact",
        MatchKind::Lpm => "lpm",
        MatchKind::Ternary => "ternary",
        MatchKind::Range => "range",
        MatchKind::Valid => "valid",
        MatchKind::Optional => "optional",
    }
}

/// One match field's value as `table_dump` prints it. An optional field is
/// kept as bmv2 keeps it, a ternary match: full mask, or value and mask 0
/// for the wildcard.
fn match_value(m: &FieldMatch, width: u32) -> String {
    match m {
        FieldMatch::Exact(v) => hexstr(v),
        FieldMatch::Lpm(v, l) => format!("{}/{l}", hexstr(v)),
        FieldMatch::Ternary(v, mask) => format!("{} &&& {}", hexstr(v), hexstr(mask)),
        FieldMatch::Range(a, b) => format!("{} -> {}", hexstr(a), hexstr(b)),
        FieldMatch::Valid(b) => if *b { "01" } else { "00" }.to_string(),
        FieldMatch::Optional(Some(v)) => format!("{} &&& {}", hexstr(v), "ff".repeat(v.len())),
        FieldMatch::Optional(None) => {
            let zeros = "00".repeat((width.max(1)).div_ceil(8) as usize);
            format!("{zeros} &&& {zeros}")
        }
    }
}

/// Ports (or LAGs) as the CLI's port map: one digit per number up to the
/// largest, `1` where present, the lowest number rightmost; empty for none.
fn port_map(ports: &BTreeSet<u32>) -> String {
    match ports.last() {
        Some(&max) => (0..=max).rev().map(|p| if ports.contains(&p) { '1' } else { '0' }).collect(),
        None => String::new(),
    }
}
