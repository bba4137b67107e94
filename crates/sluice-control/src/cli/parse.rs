//! Command lines to [`Command`]s: words, names, numbers, addresses and
//! match keys, read against the program the way bmv2's CLI reads them.

use std::collections::BTreeSet;

use sluice_engine::runtime::{CrcParams, Entry, EntryAction, FieldMatch, MatchKind, MirrorSession};
use sluice_engine::Switch;

use super::{CmdError, Command, Read, SharedWrite, Write};

type R<T> = Result<T, CmdError>;

fn err<T>(m: impl Into<String>) -> R<T> {
    Err(CmdError(m.into()))
}

/// Parses one line (see [`Command::parse`]).
pub(super) fn command(sw: &Switch, line: &str) -> R<Command> {
    let line = line.split('#').next().unwrap_or("").trim();
    if line.is_empty() {
        return Ok(Command::Nothing);
    }
    let toks: Vec<&str> = line.split_whitespace().collect();
    let (name, args) = (toks[0], &toks[1..]);
    let first = args.first().copied().unwrap_or("");
    let p = sw.program();
    let read = |r: Read| -> R<Command> { Ok(Command::Read(r)) };
    let write = |w: Write| -> R<Command> { Ok(Command::Write(w)) };
    let shared = |s: SharedWrite| -> R<Command> { Ok(Command::Shared(s)) };
    match name {
        "table_add" => write(table_add(sw, args)?),
        "table_indirect_add" => write(table_indirect_add(sw, args, false)?),
        "table_indirect_add_with_group" => write(table_indirect_add(sw, args, true)?),
        "table_set_default" => write(table_set_default(sw, args)?),
        "table_reset_default" | "table_indirect_reset_default" => {
            if args.len() != 1 {
                return err(format!("Wrong number of args, expected 1 but got {}", args.len()));
            }
            let table = self::table(sw, args[0])?;
            // Each form resets its kind of table only.
            let indirect = name == "table_indirect_reset_default";
            if sw.program().tables[table].profile.is_some() != indirect {
                return err("Invalid table operation (WRONG_TABLE_TYPE)");
            }
            write(Write::TableResetDefault { table })
        }
        "table_delete" => {
            let (table, handle) = table_and_handle(sw, args)?;
            write(Write::TableDelete { table, handle })
        }
        "table_modify" => {
            if args.len() < 3 {
                return err("usage: table_modify <table> <action> <handle> [params]");
            }
            let table = self::table(sw, args[0])?;
            let action = table_action(sw, table, args[1])?;
            let handle = num(args.get(2))?;
            let data = action_data(sw, action, &args[3..])?;
            write(Write::TableModify { table, handle, action, data })
        }
        "table_clear" => write(Write::TableClear { table: table(sw, first)? }),
        "table_num_entries" => read(Read::TableNumEntries { table: table(sw, first)? }),
        "table_dump" => read(Read::TableDump { table: table(sw, first)? }),
        "table_dump_entry" => {
            let (table, handle) = table_and_handle(sw, args)?;
            read(Read::TableDumpEntry { table, handle })
        }
        "table_dump_entry_from_key" => read(dump_entry_from_key(sw, args)?),
        "table_dump_member" | "act_prof_dump_member" | "table_dump_group" | "act_prof_dump_group" => {
            let profile =
                if name.starts_with("table_") { table_profile(sw, first)? } else { self::profile(sw, first)? };
            let h = num(args.get(1))?;
            if name.ends_with("_member") {
                read(Read::DumpMember { profile, member: h })
            } else {
                read(Read::DumpGroup { profile, group: h })
            }
        }
        "act_prof_dump" => read(Read::ActProfDump { profile: profile(sw, first)? }),
        "table_info" => read(Read::TableInfo { table: table(sw, first)? }),
        "table_show_actions" => read(Read::TableShowActions { table: table(sw, first)? }),
        "table_indirect_set_default" => {
            let table = self::table(sw, first)?;
            let member = num(args.get(1))?;
            let profile = p.tables[table].profile.ok_or_else(|| CmdError("Table is not indirect".into()))? as usize;
            write(Write::TableIndirectSetDefault { table, profile, member })
        }
        "table_indirect_set_default_with_group" => {
            err("table_indirect_set_default_with_group is not supported yet (a group as default action)")
        }
        "act_prof_create_member" => {
            if args.len() < 2 {
                return err("usage: act_prof_create_member <profile> <action> [params...]");
            }
            let profile = self::profile(sw, args[0])?;
            let action = action_by_name(sw, args[1])?;
            let data = action_data(sw, action, &args[2..])?;
            write(Write::ActProfCreateMember { profile, action, data })
        }
        "act_prof_delete_member" => {
            let profile = self::profile(sw, first)?;
            write(Write::ActProfDeleteMember { profile, member: num(args.get(1))? })
        }
        "act_prof_create_group" => write(Write::ActProfCreateGroup { profile: profile(sw, first)? }),
        "act_prof_delete_group" => {
            let profile = self::profile(sw, first)?;
            write(Write::ActProfDeleteGroup { profile, group: num(args.get(1))? })
        }
        "act_prof_add_member_to_group" | "act_prof_remove_member_from_group" => {
            let profile = self::profile(sw, first)?;
            let (member, group) = (num(args.get(1))?, num(args.get(2))?);
            write(Write::ActProfGroupMember { profile, member, group, add: name == "act_prof_add_member_to_group" })
        }
        "mc_mgrp_create" => write(Write::McMgrpCreate { mgid: num(args.first())? }),
        "mc_mgrp_destroy" => write(Write::McMgrpDestroy { mgid: num(args.first())? }),
        "mc_node_create" => {
            let rid = num(args.first())? as u16;
            let (ports, lags) = ports_and_lags(&args[1.min(args.len())..])?;
            write(Write::McNodeCreate { rid, ports, lags })
        }
        "mc_node_update" => {
            let node = num(args.first())?;
            if args.len() < 2 {
                return err("Insufficient number of args");
            }
            let (ports, lags) = ports_and_lags(&args[1..])?;
            write(Write::McNodeUpdate { node, ports, lags })
        }
        "mc_set_lag_membership" => {
            let lag = args.first().and_then(|a| a.parse::<u32>().ok());
            let Some(lag) = lag else {
                return err(if args.is_empty() { "Insufficient number of args" } else { "Bad format for lag index" });
            };
            if args.len() < 2 {
                return err("Insufficient number of args");
            }
            write(Write::McSetLagMembership { lag, ports: number_set(&args[1..], "lag")? })
        }
        "mc_node_associate" | "mc_node_dissociate" => {
            let (mgid, node) = (num(args.first())?, num(args.get(1))?);
            write(Write::McNodeAssociate { mgid, node, associate: name == "mc_node_associate" })
        }
        "mc_node_destroy" => write(Write::McNodeDestroy { node: num(args.first())? }),
        "mc_dump" => read(Read::McDump),
        "mirroring_add" | "mirroring_add_mc" => {
            let session = num(args.first())?;
            let v = num(args.get(1))?;
            let to = if name == "mirroring_add" {
                MirrorSession { port: Some(v), ..Default::default() }
            } else {
                MirrorSession { mgid: Some(v), ..Default::default() }
            };
            write(Write::MirroringAdd { session, to })
        }
        "mirroring_delete" => write(Write::MirroringDelete { session: num(args.first())? }),
        "mirroring_get" => read(Read::MirroringGet { session: num(args.first())? }),
        "counter_read" => {
            let index = num(args.get(1))? as usize;
            let counter = self::counter(sw, first)?;
            let cp = &p.counters[counter];
            // A direct counter is read through the entry of its table.
            let direct = if cp.is_direct {
                let tname = cp.binding.clone().unwrap_or_default();
                let t = self::table(sw, &tname)?;
                Some((tname, t))
            } else {
                None
            };
            read(Read::CounterRead { name: first.to_string(), counter, index, direct })
        }
        "counter_reset" => write(Write::CounterReset { counter: counter(sw, first)? }),
        "counter_write" => {
            let counter = self::counter(sw, first)?;
            let index = num(args.get(1))? as usize;
            let value = (num64(args.get(2))?, num64(args.get(3))?);
            write(Write::CounterWrite { counter, index, value })
        }
        "register_read" => {
            // The answer names the register as the command line does (a suffix stays a suffix).
            let register = self::register(sw, first)?;
            let index = match args.get(1) {
                Some(i) => Some(i.parse::<usize>().map_err(|_| CmdError(format!("Invalid index \"{i}\"")))?),
                None => None,
            };
            read(Read::RegisterRead { name: first.to_string(), register, index })
        }
        "register_write" => {
            let register = self::register(sw, first)?;
            let index = num(args.get(1))? as usize;
            let w = p.registers[register].width;
            let v = parse_value(args.get(2).copied().unwrap_or(""), w)?;
            shared(SharedWrite::RegisterWrite { register, index, value: be_to_u128(&v) })
        }
        "register_reset" => shared(SharedWrite::RegisterReset { register: register(sw, first)? }),
        "meter_set_rates" | "meter_array_set_rates" => {
            let meter = self::meter(sw, first)?;
            let (index, rest) =
                if name == "meter_set_rates" { (Some(num(args.get(1))?), &args[2..]) } else { (None, &args[1..]) };
            shared(SharedWrite::MeterSetRates { meter, index, rates: rates(rest) })
        }
        "meter_get_rates" => {
            let meter = self::meter(sw, first)?;
            read(Read::MeterGetRates { meter, index: num(args.get(1))? })
        }
        "pvs_add" | "pvs_remove" | "pvs_clear" => {
            let vset = self::vset(sw, first)?;
            if name == "pvs_clear" {
                return write(Write::PvsClear { vset });
            }
            let value = parse_value(args.get(1).copied().unwrap_or(""), p.vsets[vset].1)?;
            if name == "pvs_add" {
                write(Write::PvsAdd { vset, value })
            } else {
                write(Write::PvsRemove { vset, value })
            }
        }
        "set_crc16_parameters" | "set_crc32_parameters" => {
            if args.len() != 6 {
                return err(format!("usage: {name} <calc> <poly> <init> <xor> <reflect data> <reflect remainder>"));
            }
            let calc = resolve(p.calcs.iter().enumerate().map(|(i, c)| (i, c.name.as_str())), args[0], "calculation")?;
            let width = if name == "set_crc16_parameters" { 16 } else { 32 };
            let h = |s: &str| -> R<u64> {
                u64::from_str_radix(s.trim_start_matches("0x"), 16)
                    .map_err(|_| CmdError(format!("Invalid hex value \"{s}\"")))
            };
            let b = |s: &str| -> R<bool> {
                match s.to_ascii_lowercase().as_str() {
                    "true" | "1" => Ok(true),
                    "false" | "0" => Ok(false),
                    _ => err(format!("Invalid boolean \"{s}\"")),
                }
            };
            let params = CrcParams {
                width,
                polynomial: h(args[1])?,
                initial_remainder: h(args[2])?,
                final_xor_value: h(args[3])?,
                data_reflected: b(args[4])?,
                remainder_reflected: b(args[5])?,
            };
            write(Write::SetCrcParameters { calc, params })
        }
        "show_tables" => read(Read::ShowTables),
        "show_actions" => read(Read::ShowActions),
        "show_pvs" => read(Read::ShowPvs),
        "pvs_get" => read(Read::PvsGet { vset: vset(sw, first)? }),
        other => err(format!("Unknown command \"{other}\"")),
    }
}

/// `table_add <table> <action> <match fields> => <action params> [priority]`.
fn table_add(sw: &Switch, args: &[&str]) -> R<Write> {
    let (head, tail) = split_arrow(args)?;
    let table = self::table(sw, head.first().copied().unwrap_or(""))?;
    let prio = table_is_prioritized(sw, table);
    if head.len() < 2 {
        return err("usage: table_add <table> <action> <match fields> => <action params> [priority]");
    }
    let action = table_action(sw, table, head[1])?;
    let np = sw.program().actions[action as usize].params.len();
    let (params, priority) = split_priority(tail, np, prio)?;
    let data = action_data(sw, action, params)?;
    let matches = parse_matches(sw, table, &head[2..])?;
    // An action profile's table takes members and groups (table_indirect_add).
    if sw.program().tables[table].profile.is_some() {
        return err("Invalid table operation (WRONG_TABLE_TYPE)");
    }
    let action = EntryAction::Direct { action, data };
    Ok(Write::TableAdd {
        table,
        entry: Entry { matches, priority, action, packets: 0, bytes: 0, timeout_ms: None, added_key: None },
    })
}

/// `table_indirect_add[_with_group] <table> <match fields> => <handle> [priority]`.
fn table_indirect_add(sw: &Switch, args: &[&str], group: bool) -> R<Write> {
    let (head, tail) = split_arrow(args)?;
    let table = self::table(sw, head.first().copied().unwrap_or(""))?;
    let prio = table_is_prioritized(sw, table);
    let (h, priority) = split_priority(tail, 1, prio)?;
    let h = num(h.first())?;
    let profile = sw.program().tables[table].profile.ok_or_else(|| CmdError("Table is not indirect".into()))? as usize;
    let action = if group { EntryAction::Group(h) } else { EntryAction::Member(h) };
    let key = parse_matches(sw, table, head.get(1..).unwrap_or(&[]));
    Ok(Write::TableIndirectAdd { table, profile, action, key, priority })
}

/// The words before and after `=>`.
fn split_arrow<'a>(args: &'a [&'a str]) -> R<(&'a [&'a str], &'a [&'a str])> {
    let arrow = args.iter().position(|a| *a == "=>").ok_or_else(|| CmdError("Missing \"=>\" in table_add".into()))?;
    Ok((&args[..arrow], &args[arrow + 1..]))
}

/// `table_set_default <table> <action> <action params>`.
fn table_set_default(sw: &Switch, args: &[&str]) -> R<Write> {
    if args.len() < 2 {
        return err("usage: table_set_default <table> <action> <action params>");
    }
    let table = self::table(sw, args[0])?;
    let action = table_action(sw, table, args[1])?;
    // (An indirect table's default is a member: its own command.)
    if sw.program().tables[table].profile.is_some() {
        return err("Invalid table operation (WRONG_TABLE_TYPE)");
    }
    let data = action_data(sw, action, &args[2..])?;
    Ok(Write::TableSetDefault { table, action, data })
}

/// `table_dump_entry_from_key <table> <match fields> [priority]`.
fn dump_entry_from_key(sw: &Switch, args: &[&str]) -> R<Read> {
    let table = self::table(sw, args.first().copied().unwrap_or(""))?;
    let mut keys = args.get(1..).unwrap_or(&[]);
    let mut priority = 0;
    if table_is_prioritized(sw, table) {
        let bad = || CmdError("Table is ternary, but could not extract a valid priority from args".into());
        let (last, rest) = keys.split_last().ok_or_else(bad)?;
        priority = last.parse().map_err(|_| bad())?;
        keys = rest;
    }
    let key = parse_matches(sw, table, keys)?;
    Ok(Read::TableDumpEntryFromKey { table, key, priority })
}

fn table_and_handle(sw: &Switch, args: &[&str]) -> R<(usize, u32)> {
    let t = table(sw, args.first().copied().unwrap_or(""))?;
    Ok((t, num(args.get(1))?))
}

/// Finds a name exactly or as the unique suffix after a `.`.
fn resolve<'a>(names: impl Iterator<Item = (usize, &'a str)>, want: &str, what: &str) -> R<usize> {
    let mut suffix = Vec::new();
    for (i, n) in names {
        if n == want {
            return Ok(i);
        }
        if n.ends_with(&format!(".{want}")) {
            suffix.push(i);
        }
    }
    match suffix.len() {
        1 => Ok(suffix[0]),
        0 => err(format!("Invalid {what} name ({want})")),
        _ => err(format!("Ambiguous {what} name ({want})")),
    }
}

fn table(sw: &Switch, name: &str) -> R<usize> {
    resolve(sw.program().tables.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "table")
}

fn profile(sw: &Switch, name: &str) -> R<usize> {
    resolve(sw.program().profiles.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "action profile")
}

fn counter(sw: &Switch, name: &str) -> R<usize> {
    resolve(sw.program().counters.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "counter")
}

fn register(sw: &Switch, name: &str) -> R<usize> {
    resolve(sw.program().registers.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "register")
}

fn meter(sw: &Switch, name: &str) -> R<usize> {
    resolve(sw.program().meters.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "meter")
}

fn vset(sw: &Switch, name: &str) -> R<usize> {
    resolve(sw.program().vsets.iter().enumerate().map(|(i, v)| (i, v.0.as_str())), name, "parser value set")
}

/// The action profile of indirect table `name` (the `table_dump_member` family).
fn table_profile(sw: &Switch, name: &str) -> R<usize> {
    let t = table(sw, name)?;
    match sw.program().tables[t].profile {
        Some(p) => Ok(p as usize),
        None => err("Cannot run this command on non-indirect table"),
    }
}

fn action_by_name(sw: &Switch, name: &str) -> R<u32> {
    Ok(resolve(sw.program().actions.iter().enumerate().map(|(i, a)| (i, a.name.as_str())), name, "action")? as u32)
}

/// An action of table `t` by name (the table's own action list decides among same-named actions).
fn table_action(sw: &Switch, t: usize, name: &str) -> R<u32> {
    let p = sw.program();
    let tp = &p.tables[t];
    let r = resolve(tp.actions.iter().map(|a| (*a as usize, p.actions[*a as usize].name.as_str())), name, "action");
    match r {
        Ok(a) => Ok(a as u32),
        Err(_) => err(format!("Invalid action name ({name}) for table {}", tp.name)),
    }
}

/// Action data from parameter words, each read against its parameter's width.
fn action_data(sw: &Switch, a: u32, params: &[&str]) -> R<Box<[u8]>> {
    let ap = &sw.program().actions[a as usize];
    if params.len() != ap.params.len() {
        return err(format!(
            "Action {} needs {} parameters, got {} (Invalid table operation (BAD_ACTION_DATA))",
            ap.name,
            ap.params.len(),
            params.len()
        ));
    }
    let values = params.iter().zip(&ap.params).map(|(s, (_, w))| parse_value(s, *w)).collect::<R<Vec<_>>>()?;
    sw.pack_action(a, &values).map_err(|e| CmdError(e.message))
}

/// A table's match key from one word per field (`v`, `v/len`, `v&&&mask`, `lo->hi`, `*`).
fn parse_matches(sw: &Switch, t: usize, keys: &[&str]) -> R<Vec<FieldMatch>> {
    let tp = &sw.program().tables[t];
    if keys.len() != tp.key.len() {
        return err(format!(
            "Table {} needs {} match fields, got {} (Invalid table operation (BAD_MATCH_KEY))",
            tp.name,
            tp.key.len(),
            keys.len()
        ));
    }
    let mut out = Vec::new();
    for (k, s) in tp.key.iter().zip(keys) {
        let w = k.width;
        out.push(match k.kind {
            MatchKind::Exact => FieldMatch::Exact(parse_value(s, w)?),
            MatchKind::Valid => FieldMatch::Valid(match *s {
                "1" | "true" | "True" => true,
                "0" | "false" | "False" => false,
                _ => return err(format!("Invalid valid-match value \"{s}\"")),
            }),
            MatchKind::Lpm => {
                let (v, l) = s
                    .split_once('/')
                    .ok_or_else(|| CmdError(format!("Invalid LPM value \"{s}\": expected value/prefix_length")))?;
                let l: u32 = l.parse().map_err(|_| CmdError(format!("Invalid prefix length \"{l}\"")))?;
                if l > w {
                    return err(format!("Prefix length {l} is larger than the field width {w} (BAD_MATCH_KEY)"));
                }
                FieldMatch::Lpm(parse_value(v, w)?, l)
            }
            MatchKind::Ternary => {
                let (v, m) = s
                    .split_once("&&&")
                    .ok_or_else(|| CmdError(format!("Invalid ternary value \"{s}\": expected value&&&mask")))?;
                FieldMatch::Ternary(parse_value(v, w)?, parse_value(m, w)?)
            }
            MatchKind::Range => {
                let (a, b) = s
                    .split_once("->")
                    .ok_or_else(|| CmdError(format!("Invalid range value \"{s}\": expected start->end")))?;
                FieldMatch::Range(parse_value(a, w)?, parse_value(b, w)?)
            }
            MatchKind::Optional => {
                if *s == "*" {
                    FieldMatch::Optional(None)
                } else {
                    FieldMatch::Optional(Some(parse_value(s, w)?))
                }
            }
        });
    }
    Ok(out)
}

/// Whether the CLI expects a priority after the action parameters.
fn table_is_prioritized(sw: &Switch, t: usize) -> bool {
    matches!(sw.program().tables[t].match_type.as_str(), "ternary" | "range") || sw.table_has_priority(t)
}

fn split_priority<'a>(tail: &'a [&'a str], nparams: usize, prio: bool) -> R<(&'a [&'a str], i32)> {
    if prio {
        if tail.len() != nparams + 1 {
            return err(format!(
                "Expected {nparams} action parameters and a priority, got {} values (Invalid table operation (BAD_ACTION_DATA))",
                tail.len()
            ));
        }
        let p: i32 = tail[nparams].parse().map_err(|_| CmdError(format!("Invalid priority \"{}\"", tail[nparams])))?;
        Ok((&tail[..nparams], p))
    } else {
        Ok((tail, 0))
    }
}

/// `meter_set_rates`' `rate:burst` pairs: exactly two.
fn rates(words: &[&str]) -> R<Vec<(f64, u32)>> {
    if words.len() != 2 {
        return err(format!("Invalid number of rates, expected 2 but got {}", words.len()));
    }
    let mut rates = Vec::new();
    for r in words {
        let parsed = r.split_once(':').and_then(|(a, b)| Some((a.parse::<f64>().ok()?, b.parse::<u32>().ok()?)));
        rates.push(parsed.ok_or_else(|| CmdError("Error while parsing rates".into()))?);
    }
    Ok(rates)
}

/// A node's `<ports> [ | <lags> ]`, as the CLI reads them (no LAG list: none).
fn ports_and_lags(args: &[&str]) -> R<(BTreeSet<u32>, BTreeSet<u32>)> {
    let bar = args.iter().position(|a| *a == "|").unwrap_or(args.len());
    let lags = if bar < args.len() { &args[bar + 1..] } else { &[][..] };
    Ok((number_set(&args[..bar], "port")?, number_set(lags, "lag")?))
}

/// A list of port (or LAG) numbers; one given twice is refused, as the CLI does.
fn number_set(args: &[&str], what: &str) -> R<BTreeSet<u32>> {
    let mut set = BTreeSet::new();
    for a in args {
        let v = match a.parse::<i64>() {
            Ok(v) if v >= 0 => port_number(a)?,
            _ => return err(format!("'{a}' is not a valid {what} number")),
        };
        if !set.insert(v) {
            return err(format!("Found duplicate {what} number '{v}'"));
        }
    }
    Ok(set)
}

/// A port or LAG number of `mc_node_create` / `mc_node_update`. The answer
/// spells the numbers as a port map, one digit per number up to the
/// largest, so numbers are bounded (bmv2's maps hold 512 ports).
fn port_number(s: &str) -> R<u32> {
    match s.parse::<u32>() {
        Ok(v) if v <= MAX_PORT_NUMBER => Ok(v),
        Ok(_) => err(format!("Invalid port \"{s}\": port and LAG numbers go up to {MAX_PORT_NUMBER}")),
        Err(_) => err(format!("Invalid port \"{s}\"")),
    }
}

/// The largest port or LAG number a multicast node takes.
const MAX_PORT_NUMBER: u32 = 65535;

fn num(s: Option<&&str>) -> R<u32> {
    let s = s.ok_or_else(|| CmdError("Missing argument".into()))?;
    Ok(be_to_u128(&parse_value(s, 32)?) as u32)
}

fn num64(s: Option<&&str>) -> R<u64> {
    let s = s.ok_or_else(|| CmdError("Missing argument".into()))?;
    Ok(be_to_u128(&parse_value(s, 64)?) as u64)
}

/// A big-endian value's low 128 bits.
fn be_to_u128(bytes: &[u8]) -> u128 {
    bytes.iter().fold(0, |v, b| (v << 8) | u128::from(*b))
}

/// Bytes a value of `width` bits takes.
fn nbytes(width: u32) -> usize {
    width.div_ceil(8) as usize
}

/// Right-aligns `src` in `dst` (its last bytes when longer).
fn copy_right(dst: &mut [u8], src: &[u8]) {
    let n = src.len().min(dst.len());
    let at = dst.len() - n;
    dst.fill(0);
    dst[at..].copy_from_slice(&src[src.len() - n..]);
}

/// Clears the bits above the low `width` of a big-endian value.
fn mask_top(b: &mut [u8], width: u32) {
    let excess = (b.len() as u32 * 8).saturating_sub(width);
    let full = ((excess / 8) as usize).min(b.len());
    b[..full].fill(0);
    let rem = excess % 8;
    if rem > 0 && full < b.len() {
        b[full] &= 0xff >> rem;
    }
}

/// Parses a number the way bmv2's CLI does (`int(s, 0)`), or a MAC / IPv4 / IPv6 address.
pub fn parse_value(s: &str, width: u32) -> R<Vec<u8>> {
    let nb = nbytes(width.max(1));
    let bad = || CmdError(format!("Invalid value \"{s}\" for a {width}-bit field"));
    let too_large = || err(format!("Value \"{s}\" is too large for a {width}-bit field"));
    let mut out = vec![0u8; nb];
    if s.contains(':') && !s.starts_with("0x") {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() == 6 && parts.iter().all(|p| p.len() <= 2 && !p.is_empty()) && !s.contains("::") {
            let bytes: Vec<u8> =
                parts.iter().map(|p| u8::from_str_radix(p, 16)).collect::<Result<_, _>>().map_err(|_| bad())?;
            copy_right(&mut out, &bytes);
        } else {
            let a: std::net::Ipv6Addr = s.parse().map_err(|_| bad())?;
            copy_right(&mut out, &a.octets());
        }
    } else if s.matches('.').count() == 3 {
        let a: std::net::Ipv4Addr = s.parse().map_err(|_| bad())?;
        copy_right(&mut out, &a.octets());
    } else {
        let (neg, body) = match s.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, s),
        };
        let (radix, digits) = if let Some(d) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            (16, d)
        } else if let Some(d) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
            (2, d)
        } else if let Some(d) = body.strip_prefix("0o") {
            (8, d)
        } else {
            (10, body)
        };
        if digits.is_empty() {
            return Err(bad());
        }
        // Any length: digits accumulate into bytes, one spare byte to see overflow.
        let mut acc = vec![0u8; nb + 1];
        for c in digits.chars() {
            let d = c.to_digit(radix).ok_or_else(bad)?;
            let mut carry = d;
            for b in acc.iter_mut().rev() {
                let v = (*b as u32) * radix + carry;
                *b = v as u8;
                carry = v >> 8;
            }
            if carry != 0 {
                return too_large();
            }
        }
        if acc[0] != 0 {
            return too_large();
        }
        out.copy_from_slice(&acc[1..]);
        if neg {
            // Two's complement within the field's bytes.
            for b in out.iter_mut() {
                *b = !*b;
            }
            for b in out.iter_mut().rev() {
                let (v, c) = b.overflowing_add(1);
                *b = v;
                if !c {
                    break;
                }
            }
        }
    }
    let mut check = out.clone();
    mask_top(&mut check, width);
    if check != out && !s.starts_with('-') {
        return too_large();
    }
    mask_top(&mut out, width);
    Ok(out)
}

/// Formats a float as Python's `repr` does (bmv2's CLI is Python).
pub fn py_float(x: f64) -> String {
    if x != 0.0 && (x.abs() < 1e-4 || x.abs() >= 1e16) {
        let s = format!("{x:e}");
        // Rust: 1e-6 -> Python: 1e-06
        if let Some((m, e)) = s.split_once('e') {
            let (sign, digits) = if let Some(d) = e.strip_prefix('-') { ("-", d) } else { ("+", e) };
            return format!("{m}e{sign}{digits:0>2}");
        }
        s
    } else {
        let s = format!("{x:?}");
        if s.contains('.') || s.contains('e') {
            s
        } else {
            format!("{s}.0")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_like_the_bmv2_cli() {
        assert_eq!(parse_value("10.0.0.1", 32).unwrap(), vec![10, 0, 0, 1]);
        assert_eq!(parse_value("00:aa:00:00:00:01", 48).unwrap(), vec![0, 0xaa, 0, 0, 0, 1]);
        assert_eq!(parse_value("0x0800", 16).unwrap(), vec![8, 0]);
        assert_eq!(parse_value("511", 9).unwrap(), vec![1, 0xff]);
        assert!(parse_value("512", 9).is_err());
        assert_eq!(parse_value("2001:db8::1", 128).unwrap()[..4], [0x20, 0x01, 0x0d, 0xb8]);
        assert!(parse_value("zz", 8).is_err());
        assert_eq!(parse_value("-1", 12).unwrap(), vec![0x0f, 0xff]);
        assert_eq!(parse_value("0", 0).unwrap(), vec![0]);
    }

    #[test]
    fn floats_print_like_python() {
        assert_eq!(py_float(1000.0), "1000.0");
        assert_eq!(py_float(0.000001), "1e-06");
        assert_eq!(py_float(0.5), "0.5");
    }
}
