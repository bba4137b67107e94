//! The `simple_switch_CLI` command language.
//!
//! One line in, one answer out, with the wording of bmv2's CLI where users
//! or scripts read it (`Entry has been added with handle 0`,
//! `cntr[0]= (640 bytes, 10 packets)`). Errors say what is wrong with the
//! line; the caller adds the line number.

use std::collections::BTreeSet;

use crate::plan::pack_action_data;
use crate::state::MirrorSession;
use crate::switch::Switch;
use crate::tables::{Entry, EntryAction, FieldMatch, MatchKind};

/// A command that could not be carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmdError(pub String);

impl std::fmt::Display for CmdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CmdError {}

type R = Result<String, CmdError>;

fn err<T>(m: impl Into<String>) -> Result<T, CmdError> {
    Err(CmdError(m.into()))
}

/// Finds a name exactly or as the unique suffix after a `.`.
fn resolve<'a>(names: impl Iterator<Item = (usize, &'a str)>, want: &str, what: &str) -> Result<usize, CmdError> {
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

/// Parses a number the way bmv2's CLI does (`int(s, 0)`), or a MAC / IPv4 / IPv6 address.
pub fn parse_value(s: &str, width: u32) -> Result<Vec<u8>, CmdError> {
    let nb = crate::value::nbytes(width.max(1));
    let bad = || CmdError(format!("Invalid value \"{s}\" for a {width}-bit field"));
    let mut out = vec![0u8; nb];
    if s.contains(':') && !s.starts_with("0x") {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() == 6 && parts.iter().all(|p| p.len() <= 2 && !p.is_empty()) && !s.contains("::") {
            let bytes: Vec<u8> =
                parts.iter().map(|p| u8::from_str_radix(p, 16)).collect::<Result<_, _>>().map_err(|_| bad())?;
            crate::tables::copy_right(&mut out, &bytes);
        } else {
            let a: std::net::Ipv6Addr = s.parse().map_err(|_| bad())?;
            crate::tables::copy_right(&mut out, &a.octets());
        }
    } else if s.matches('.').count() == 3 {
        let a: std::net::Ipv4Addr = s.parse().map_err(|_| bad())?;
        crate::tables::copy_right(&mut out, &a.octets());
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
        // Arbitrary length: accumulate into bytes.
        let mut acc = vec![0u8; nb.max(1) + 1];
        for c in digits.chars() {
            let d = c.to_digit(radix).ok_or_else(bad)?;
            let mut carry = d;
            for b in acc.iter_mut().rev() {
                let v = (*b as u32) * radix + carry;
                *b = v as u8;
                carry = v >> 8;
            }
            if carry != 0 {
                return err(format!("Value \"{s}\" is too large for a {width}-bit field"));
            }
        }
        if acc[0] != 0 {
            return err(format!("Value \"{s}\" is too large for a {width}-bit field"));
        }
        out.copy_from_slice(&acc[1..]);
        if neg {
            // two's complement within nb bytes
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
    crate::phv::mask_top(&mut check, width);
    if check != out && !s.starts_with('-') {
        return err(format!("Value \"{s}\" is too large for a {width}-bit field"));
    }
    crate::phv::mask_top(&mut out, width);
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

impl Switch {
    /// Runs one `simple_switch_CLI` command line and returns its output.
    pub fn command(&mut self, line: &str) -> R {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            return Ok(String::new());
        }
        let toks: Vec<&str> = line.split_whitespace().collect();
        let args = &toks[1..];
        match toks[0] {
            "table_add" => self.cmd_table_add(args, None),
            "table_set_default" => self.cmd_set_default(args),
            "table_delete" => {
                let (t, h) = self.table_and_handle(args)?;
                self.state.tables[t].delete(h).map_err(|e| CmdError(format!("Invalid table operation ({e})")))?;
                Ok(String::new())
            }
            "table_modify" => self.cmd_table_modify(args),
            "table_clear" => {
                let t = self.table(args.first().copied().unwrap_or(""))?;
                self.state.tables[t].clear();
                Ok(String::new())
            }
            "table_num_entries" => {
                let t = self.table(args.first().copied().unwrap_or(""))?;
                Ok(format!("{}", self.state.tables[t].len()))
            }
            "table_dump" => {
                let t = self.table(args.first().copied().unwrap_or(""))?;
                Ok(self.dump_table(t))
            }
            "table_dump_entry" => {
                let (t, h) = self.table_and_handle(args)?;
                self.state.tables[t].index_of(h).map_err(|e| CmdError(format!("Invalid table operation ({e})")))?;
                match self.state.tables[t].get(h) {
                    Some(e) => Ok(self.dump_entry(t, h, e)),
                    None => err("Invalid table operation (INVALID_HANDLE)"),
                }
            }
            "table_dump_entry_from_key" => self.cmd_dump_entry_from_key(args),
            "table_dump_member" | "act_prof_dump_member" | "table_dump_group" | "act_prof_dump_group" => {
                let p = if toks[0].starts_with("table_") {
                    self.table_profile(args.first().copied().unwrap_or(""))?
                } else {
                    self.profile(args.first().copied().unwrap_or(""))?
                };
                let h = num(args.get(1))?;
                if toks[0].ends_with("_member") {
                    self.dump_member(p, h)
                        .ok_or_else(|| CmdError("Invalid table operation (INVALID_MBR_HANDLE)".into()))
                } else {
                    self.dump_group(p, h).ok_or_else(|| CmdError("Invalid table operation (INVALID_GRP_HANDLE)".into()))
                }
            }
            "act_prof_dump" => {
                let p = self.profile(args.first().copied().unwrap_or(""))?;
                Ok(self.dump_profile(p))
            }
            "table_info" => {
                let t = self.table(args.first().copied().unwrap_or(""))?;
                let mut out = vec![self.table_str(t), "*".repeat(80)];
                out.extend(self.actions_str(self.plan.tables[t].actions.iter().map(|a| *a as usize)));
                Ok(out.join("\n"))
            }
            "table_show_actions" => {
                let t = self.table(args.first().copied().unwrap_or(""))?;
                Ok(self.actions_str(self.plan.tables[t].actions.iter().map(|a| *a as usize)).join("\n"))
            }
            "table_indirect_add" => self.cmd_table_add(args, Some(false)),
            "table_indirect_add_with_group" => self.cmd_table_add(args, Some(true)),
            "table_indirect_set_default" => {
                // The default becomes the member's action and data (copied: later
                // changes to the member do not follow, unlike bmv2).
                let t = self.table(args.first().copied().unwrap_or(""))?;
                let m = num(args.get(1))?;
                let p = self.plan.tables[t].profile.ok_or_else(|| CmdError("Table is not indirect".into()))? as usize;
                match self.state.profiles[p].members.get(m as usize) {
                    Some(Some((a, d))) => {
                        self.state.tables[t].default = Some((*a, d.clone()));
                        Ok(String::new())
                    }
                    _ => err("Invalid table operation (INVALID_MBR_HANDLE)"),
                }
            }
            "table_indirect_set_default_with_group" => {
                err("table_indirect_set_default_with_group is not supported yet (a group as default action)")
            }
            "act_prof_create_member" => {
                if args.len() < 2 {
                    return err("usage: act_prof_create_member <profile> <action> [params...]");
                }
                let p = self.profile(args[0])?;
                let a = self.action_by_name(args[1])?;
                let data = self.action_data(a, &args[2..])?;
                let h = self.state.profiles[p].add_member(a, data.into_boxed_slice());
                Ok(format!("Member has been created with handle {h}"))
            }
            "act_prof_delete_member" => {
                let p = self.profile(args.first().copied().unwrap_or(""))?;
                let h = num(args.get(1))?;
                if !self.state.profiles[p].delete_member(h) {
                    return err("Invalid action profile operation (INVALID_MBR_HANDLE)");
                }
                Ok(String::new())
            }
            "act_prof_create_group" => {
                let p = self.profile(args.first().copied().unwrap_or(""))?;
                let h = self.state.profiles[p].create_group();
                Ok(format!("Group has been created with handle {h}"))
            }
            "act_prof_delete_group" => {
                let p = self.profile(args.first().copied().unwrap_or(""))?;
                if !self.state.profiles[p].delete_group(num(args.get(1))?) {
                    return err("Invalid action profile operation (INVALID_GRP_HANDLE)");
                }
                Ok(String::new())
            }
            "act_prof_add_member_to_group" | "act_prof_remove_member_from_group" => {
                let p = self.profile(args.first().copied().unwrap_or(""))?;
                let (m, g) = (num(args.get(1))?, num(args.get(2))?);
                let ps = &mut self.state.profiles[p];
                if !matches!(ps.members.get(m as usize), Some(Some(_))) {
                    return err("Invalid action profile operation (INVALID_MBR_HANDLE)");
                }
                match ps.groups.get_mut(g as usize) {
                    Some(Some(grp)) => {
                        if toks[0] == "act_prof_add_member_to_group" {
                            if !grp.insert(m) {
                                return err("Invalid action profile operation (MBR_ALREADY_IN_GRP)");
                            }
                        } else if !grp.remove(&m) {
                            return err("Invalid action profile operation (MBR_NOT_IN_GRP)");
                        }
                        Ok(String::new())
                    }
                    _ => err("Invalid action profile operation (INVALID_GRP_HANDLE)"),
                }
            }
            "mc_mgrp_create" => {
                let g = num(args.first())?;
                self.state.pre.groups.entry(g).or_default();
                Ok(format!("Creating multicast group {g}"))
            }
            "mc_mgrp_destroy" => {
                let g = num(args.first())?;
                if self.state.pre.groups.remove(&g).is_none() {
                    return err("Invalid PRE operation (INVALID_MGID)");
                }
                Ok(String::new())
            }
            "mc_node_create" => {
                let rid = num(args.first())? as u16;
                let mut ports = BTreeSet::new();
                let mut lags = BTreeSet::new();
                let mut in_lags = false;
                for a in args.iter().skip(1) {
                    if *a == "|" {
                        in_lags = true;
                        continue;
                    }
                    let v = port_number(a)?;
                    if in_lags {
                        lags.insert(v);
                    } else {
                        ports.insert(v);
                    }
                }
                let (pm, lm) = (port_map(&ports), port_map(&lags));
                let h = self.state.pre.create_node(rid, ports, lags);
                Ok(format!(
                    "Creating node with rid {rid} , port map {pm} and lag map {lm}\nnode was created with handle {h}"
                ))
            }
            "mc_node_update" => {
                let h = num(args.first())?;
                let mut ports = BTreeSet::new();
                for a in args.iter().skip(1).take_while(|a| **a != "|") {
                    ports.insert(port_number(a)?);
                }
                match self.state.pre.nodes.get_mut(h as usize) {
                    Some(Some(n)) => {
                        n.ports = ports;
                        Ok(String::new())
                    }
                    _ => err("Invalid PRE operation (INVALID_L1_HANDLE)"),
                }
            }
            "mc_node_associate" | "mc_node_dissociate" => {
                let (g, h) = (num(args.first())?, num(args.get(1))?);
                if !matches!(self.state.pre.nodes.get(h as usize), Some(Some(_))) {
                    return err("Invalid PRE operation (INVALID_L1_HANDLE)");
                }
                let grp = match self.state.pre.groups.get_mut(&g) {
                    Some(x) => x,
                    None => return err("Invalid PRE operation (INVALID_MGID)"),
                };
                if toks[0] == "mc_node_associate" {
                    if !grp.contains(&h) {
                        grp.push(h);
                    }
                } else {
                    grp.retain(|x| *x != h);
                }
                Ok(String::new())
            }
            "mc_node_destroy" => {
                if !self.state.pre.destroy_node(num(args.first())?) {
                    return err("Invalid PRE operation (INVALID_L1_HANDLE)");
                }
                Ok(String::new())
            }
            "mc_dump" => Ok(self.dump_mc()),
            "mirroring_add" | "mirroring_add_mc" => {
                let s = num(args.first())?;
                let v = num(args.get(1))?;
                let e = self.state.mirror.entry(s).or_default();
                if toks[0] == "mirroring_add" {
                    *e = MirrorSession { port: Some(v), mgid: None };
                } else {
                    *e = MirrorSession { port: None, mgid: Some(v) };
                }
                Ok(String::new())
            }
            "mirroring_delete" => {
                if self.state.mirror.remove(&num(args.first())?).is_none() {
                    return err("Invalid mirroring operation (SESSION_NOT_FOUND)");
                }
                Ok(String::new())
            }
            "mirroring_get" => match self.state.mirror.get(&num(args.first())?) {
                // The CLI prints the Thrift struct: its fields in declaration order.
                Some(s) => Ok(format!(
                    "MirroringSessionConfig(port={}, mgid={})",
                    s.port.map_or("None".into(), |x| x.to_string()),
                    s.mgid.map_or("None".into(), |x| x.to_string())
                )),
                None => err("Invalid mirroring operation (SESSION_NOT_FOUND)"),
            },
            "counter_read" => self.cmd_counter_read(args),
            "counter_reset" => {
                let c = self.counter(args.first().copied().unwrap_or(""))?;
                for x in self.state.counters[c].iter_mut() {
                    *x = (0, 0);
                }
                Ok(String::new())
            }
            "counter_write" => {
                let c = self.counter(args.first().copied().unwrap_or(""))?;
                let i = num(args.get(1))? as usize;
                let (p, b) = (num64(args.get(2))?, num64(args.get(3))?);
                match self.state.counters[c].get_mut(i) {
                    Some(x) => {
                        *x = (p, b);
                        Ok(String::new())
                    }
                    None => err("Invalid counter operation (INVALID_INDEX)"),
                }
            }
            "register_read" => {
                // The answer names the register as the command line does (a suffix stays a suffix).
                let name = args.first().copied().unwrap_or("");
                let r = self.register(name)?;
                match args.get(1) {
                    Some(i) => {
                        let i: usize = i.parse().map_err(|_| CmdError(format!("Invalid index \"{i}\"")))?;
                        match self.state.registers.get(r, i) {
                            Some(v) => Ok(format!("{name}[{i}]= {v}")),
                            None => err("Invalid register operation (INVALID_INDEX)"),
                        }
                    }
                    None => Ok(format!(
                        "{name}= {}",
                        self.state.registers.values(r).iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
                    )),
                }
            }
            "register_write" => {
                let r = self.register(args.first().copied().unwrap_or(""))?;
                let i = num(args.get(1))? as usize;
                let w = self.plan.registers[r].width;
                let v = parse_value(args.get(2).copied().unwrap_or(""), w)?;
                if self.state.registers.set(r, i, crate::value::be_to_u128(&v)) {
                    Ok(String::new())
                } else {
                    err("Invalid register operation (INVALID_INDEX)")
                }
            }
            "register_reset" => {
                let r = self.register(args.first().copied().unwrap_or(""))?;
                self.state.registers.reset(r);
                Ok(String::new())
            }
            "meter_set_rates" | "meter_array_set_rates" => {
                let m = self.meter(args.first().copied().unwrap_or(""))?;
                let (idx, rest) = if toks[0] == "meter_set_rates" {
                    (Some(self.meter_cell(m, num(args.get(1))?)?), &args[2..])
                } else {
                    (None, &args[1..])
                };
                let mut rates = Vec::new();
                for r in rest {
                    let (a, b) = r
                        .split_once(':')
                        .ok_or_else(|| CmdError(format!("Invalid rate \"{r}\": expected rate:burst")))?;
                    let rate: f64 = a.parse().map_err(|_| CmdError(format!("Invalid rate \"{a}\"")))?;
                    let burst: u32 = b.parse().map_err(|_| CmdError(format!("Invalid burst size \"{b}\"")))?;
                    rates.push((rate, burst));
                }
                if rates.len() != 2 {
                    return err(format!("Invalid number of rates: expected 2, got {}", rates.len()));
                }
                let now = 0;
                match idx {
                    Some(i) => match self.state.meters.cell(m, i) {
                        Some(mut ms) => ms.set_rates(rates, now),
                        None => return err("Invalid meter operation (INVALID_INDEX)"),
                    },
                    None => {
                        for i in 0..self.state.meters.len(m) {
                            if let Some(mut ms) = self.state.meters.cell(m, i) {
                                ms.set_rates(rates.clone(), now);
                            }
                        }
                    }
                }
                Ok(String::new())
            }
            "meter_get_rates" => {
                let m = self.meter(args.first().copied().unwrap_or(""))?;
                let i = self.meter_cell(m, num(args.get(1))?)?;
                match self.state.meters.cell(m, i) {
                    Some(ms) => Ok(ms
                        .rates
                        .iter()
                        .enumerate()
                        .map(|(k, (r, b))| format!("{k}: info rate = {}, burst size = {b}", py_float(*r)))
                        .collect::<Vec<_>>()
                        .join("\n")),
                    None => err("Invalid meter operation (INVALID_INDEX)"),
                }
            }
            "pvs_add" | "pvs_remove" | "pvs_clear" => {
                let name = args.first().copied().unwrap_or("");
                let v = resolve(
                    self.plan.vsets.iter().enumerate().map(|(i, v)| (i, v.0.as_str())),
                    name,
                    "parser value set",
                )?;
                let w = self.plan.vsets[v].1;
                if toks[0] == "pvs_clear" {
                    self.state.vsets[v].clear();
                    return Ok(String::new());
                }
                let val = parse_value(args.get(1).copied().unwrap_or(""), w)?;
                let mask = vec![0xffu8; val.len()];
                if toks[0] == "pvs_add" {
                    if !self.state.vsets[v].iter().any(|(x, _)| *x == val) {
                        self.state.vsets[v].push((val, mask));
                    }
                } else {
                    self.state.vsets[v].retain(|(x, _)| *x != val);
                }
                Ok(String::new())
            }
            "set_crc16_parameters" | "set_crc32_parameters" => {
                if args.len() != 6 {
                    return err(format!(
                        "usage: {} <calc> <poly> <init> <xor> <reflect data> <reflect remainder>",
                        toks[0]
                    ));
                }
                let c = resolve(
                    self.plan.calcs.iter().enumerate().map(|(i, c)| (i, c.name.as_str())),
                    args[0],
                    "calculation",
                )?;
                let width = if toks[0] == "set_crc16_parameters" { 16 } else { 32 };
                let h = |s: &str| -> Result<u64, CmdError> {
                    u64::from_str_radix(s.trim_start_matches("0x"), 16)
                        .map_err(|_| CmdError(format!("Invalid hex value \"{s}\"")))
                };
                let b = |s: &str| -> Result<bool, CmdError> {
                    match s.to_ascii_lowercase().as_str() {
                        "true" | "1" => Ok(true),
                        "false" | "0" => Ok(false),
                        _ => err(format!("Invalid boolean \"{s}\"")),
                    }
                };
                let params = sluice_hash::CrcParams {
                    width,
                    polynomial: h(args[1])?,
                    initial_remainder: h(args[2])?,
                    final_xor_value: h(args[3])?,
                    data_reflected: b(args[4])?,
                    remainder_reflected: b(args[5])?,
                };
                self.state.calc_algos[c]
                    .set_crc_params(params)
                    .map_err(|e| CmdError(format!("Invalid CRC operation ({e:?})")))?;
                Ok(String::new())
            }
            "show_tables" => {
                let names = by_name(self.plan.tables.iter().enumerate().map(|(i, t)| (t.name.as_str(), i)));
                Ok(names.iter().map(|(_, t)| self.table_str(*t)).collect::<Vec<_>>().join("\n"))
            }
            "show_actions" => Ok(self.actions_str(0..self.plan.actions.len()).join("\n")),
            "show_pvs" => {
                let mut v: Vec<&(String, u32)> = self.plan.vsets.iter().collect();
                v.sort();
                Ok(v.iter().map(|(n, w)| format!("{n:<30} [compressed bitwidth:{w}]")).collect::<Vec<_>>().join("\n"))
            }
            "pvs_get" => {
                let name = args.first().copied().unwrap_or("");
                let v = resolve(
                    self.plan.vsets.iter().enumerate().map(|(i, v)| (i, v.0.as_str())),
                    name,
                    "parser value set",
                )?;
                Ok(self.state.vsets[v].iter().map(|(x, _)| hexstr(x)).collect::<Vec<_>>().join("\n"))
            }
            other => err(format!("Unknown command \"{other}\"")),
        }
    }

    fn table(&self, name: &str) -> Result<usize, CmdError> {
        resolve(self.plan.tables.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "table")
    }
    fn profile(&self, name: &str) -> Result<usize, CmdError> {
        resolve(self.plan.profiles.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "action profile")
    }
    fn counter(&self, name: &str) -> Result<usize, CmdError> {
        resolve(self.plan.counters.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "counter")
    }
    fn register(&self, name: &str) -> Result<usize, CmdError> {
        resolve(self.plan.registers.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "register")
    }
    /// The cell of meter `m` a command's index names: the index itself for a
    /// meter array, the entry behind a handle of the bound table for a direct meter.
    fn meter_cell(&self, m: usize, index: u32) -> Result<usize, CmdError> {
        self.meter_index(m, index).map_err(|e| {
            CmdError(match e.code {
                crate::runtime::RtCode::InvalidIndex => "Invalid meter operation (INVALID_INDEX)".into(),
                crate::runtime::RtCode::InvalidName => e.message,
                _ => "Invalid table operation (INVALID_HANDLE)".into(),
            })
        })
    }

    fn meter(&self, name: &str) -> Result<usize, CmdError> {
        resolve(self.plan.meters.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), name, "meter")
    }

    fn action_by_name(&self, name: &str) -> Result<u32, CmdError> {
        Ok(resolve(self.plan.actions.iter().enumerate().map(|(i, a)| (i, a.name.as_str())), name, "action")? as u32)
    }

    /// An action of table `t` by name (the table's own action list decides among same-named actions).
    fn table_action(&self, t: usize, name: &str) -> Result<u32, CmdError> {
        let tp = &self.plan.tables[t];
        let r = resolve(
            tp.actions.iter().map(|a| (*a as usize, self.plan.actions[*a as usize].name.as_str())),
            name,
            "action",
        );
        match r {
            Ok(a) => Ok(a as u32),
            Err(_) => err(format!("Invalid action name ({name}) for table {}", tp.name)),
        }
    }

    fn action_data(&self, a: u32, params: &[&str]) -> Result<Vec<u8>, CmdError> {
        let ap = &self.plan.actions[a as usize];
        if params.len() != ap.params.len() {
            return err(format!(
                "Action {} needs {} parameters, got {} (Invalid table operation (BAD_ACTION_DATA))",
                ap.name,
                ap.params.len(),
                params.len()
            ));
        }
        let values =
            params.iter().zip(&ap.params).map(|(s, (_, w))| parse_value(s, *w)).collect::<Result<Vec<_>, _>>()?;
        pack_action_data(ap, &values).map_err(CmdError)
    }

    fn parse_matches(&self, t: usize, keys: &[&str]) -> Result<Vec<FieldMatch>, CmdError> {
        let tp = &self.plan.tables[t];
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

    fn table_is_prioritized(&self, t: usize) -> bool {
        matches!(self.plan.tables[t].match_type.as_str(), "ternary" | "range") || self.state.tables[t].needs_priority
    }

    fn cmd_table_add(&mut self, args: &[&str], indirect: Option<bool>) -> R {
        let arrow =
            args.iter().position(|a| *a == "=>").ok_or_else(|| CmdError("Missing \"=>\" in table_add".into()))?;
        let head = &args[..arrow];
        let tail = &args[arrow + 1..];
        let t = self.table(head.first().copied().unwrap_or(""))?;
        let prio = self.table_is_prioritized(t);
        let (action, keys, priority) = match indirect {
            None => {
                if head.len() < 2 {
                    return err("usage: table_add <table> <action> <match fields> => <action params> [priority]");
                }
                let a = self.table_action(t, head[1])?;
                let np = self.plan.actions[a as usize].params.len();
                let (params, priority) = split_priority(tail, np, prio)?;
                let data = self.action_data(a, params)?;
                (EntryAction::Direct { action: a, data: data.into_boxed_slice() }, &head[2..], priority)
            }
            Some(group) => {
                let (h, priority) = split_priority(tail, 1, prio)?;
                let h = num(h.first())?;
                let p = self.plan.tables[t].profile.ok_or_else(|| CmdError("Table is not indirect".into()))? as usize;
                if group {
                    match self.state.profiles[p].groups.get(h as usize) {
                        Some(Some(g)) if g.is_empty() => return err("Invalid table operation (EMPTY_GRP)"),
                        Some(Some(_)) => {}
                        _ => return err("Invalid table operation (INVALID_GRP_HANDLE)"),
                    }
                    (EntryAction::Group(h), &head[1..], priority)
                } else {
                    if !matches!(self.state.profiles[p].members.get(h as usize), Some(Some(_))) {
                        return err("Invalid table operation (INVALID_MBR_HANDLE)");
                    }
                    (EntryAction::Member(h), &head[1..], priority)
                }
            }
        };
        let matches = self.parse_matches(t, keys)?;
        let e = Entry { matches, priority, action, packets: 0, bytes: 0, timeout_ms: None };
        // `install_entry` also resets the entry's direct meter, as the typed API does.
        let h = self.install_entry(t, e).map_err(|e| CmdError(format!("Invalid table operation ({})", e.message)))?;
        Ok(format!("Entry has been added with handle {h}"))
    }

    fn cmd_set_default(&mut self, args: &[&str]) -> R {
        if args.len() < 2 {
            return err("usage: table_set_default <table> <action> <action params>");
        }
        let t = self.table(args[0])?;
        if self.plan.tables[t].default_const {
            return err("Invalid table operation (DEFAULT_ACTION_IS_CONST)");
        }
        let a = self.table_action(t, args[1])?;
        let data = self.action_data(a, &args[2..])?;
        self.state.tables[t].default = Some((a, data.into_boxed_slice()));
        Ok(String::new())
    }

    fn table_and_handle(&self, args: &[&str]) -> Result<(usize, u32), CmdError> {
        let t = self.table(args.first().copied().unwrap_or(""))?;
        Ok((t, num(args.get(1))?))
    }

    fn cmd_table_modify(&mut self, args: &[&str]) -> R {
        if args.len() < 3 {
            return err("usage: table_modify <table> <action> <handle> [params]");
        }
        let t = self.table(args[0])?;
        let a = self.table_action(t, args[1])?;
        let h = num(args.get(2))?;
        let data = self.action_data(a, &args[3..])?;
        match self.state.tables[t].set_action(h, EntryAction::Direct { action: a, data: data.into_boxed_slice() }) {
            Ok(()) => Ok(String::new()),
            Err(_) => err("Invalid table operation (INVALID_HANDLE)"),
        }
    }

    fn cmd_counter_read(&mut self, args: &[&str]) -> R {
        let name = args.first().copied().unwrap_or("");
        let i = num(args.get(1))? as usize;
        // Direct counters are read through their table.
        let c = self.counter(name)?;
        let cp = &self.plan.counters[c];
        if cp.is_direct {
            let tname = cp.binding.clone().unwrap_or_default();
            let t = self.table(&tname)?;
            let e = self.state.tables[t]
                .get(i as u32)
                .ok_or_else(|| CmdError("Invalid counter operation (INVALID_ENTRY_HANDLE)".into()))?;
            return Ok(format!(
                "this is the direct counter for table {tname}\n{name}[{i}]= ({} bytes, {} packets)",
                e.bytes, e.packets
            ));
        }
        match self.state.counters[c].get(i) {
            Some((p, b)) => Ok(format!("{name}[{i}]= ({b} bytes, {p} packets)")),
            None => err("Invalid counter operation (INVALID_INDEX)"),
        }
    }

    fn dump_table(&self, t: usize) -> String {
        let mut out = vec!["==========".to_string(), "TABLE ENTRIES".to_string()];
        for (h, e) in self.state.tables[t].entries() {
            out.push("*".repeat(10));
            out.push(self.dump_entry(t, h, e));
        }
        if let Some(p) = self.plan.tables[t].profile {
            out.push(self.dump_profile(p as usize));
        }
        out.push("==========".into());
        out.push("Dumping default entry".into());
        out.push(match &self.state.tables[t].default {
            Some((a, d)) => self.action_entry(&EntryAction::Direct { action: *a, data: d.clone() }),
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
    fn dump_entry(&self, t: usize, h: u32, e: &Entry) -> String {
        let tp = &self.plan.tables[t];
        let w = tp.key.iter().map(|k| k.cli_name.len()).max().unwrap_or(0).max(20);
        let mut out = vec![format!("Dumping entry {h:#x}"), "Match key:".to_string()];
        for (k, m) in tp.key.iter().zip(&e.matches) {
            let kind = kind_name(k.kind).to_ascii_uppercase();
            out.push(format!("* {:<w$}: {kind:<10}{}", k.cli_name, match_value(m, k.width)));
        }
        if self.table_has_priority(t) {
            out.push(format!("Priority: {}", e.priority));
        }
        out.push(self.action_entry(&e.action));
        if let Some(timeout) = e.timeout_ms {
            let ts = &self.state.tables[t];
            let hit = ts.last_hit(h & 0x00ff_ffff);
            let since = if hit == 0 { 0 } else { self.instant_at(hit).elapsed().as_millis() };
            out.push(format!("Life: {since}ms since hit, timeout is {timeout}ms"));
        }
        out.join("\n")
    }

    /// What an entry does: `Action entry: NAME - P1, P2` (each parameter in
    /// hex of its byte width), `Index: member(M)` or `Index: group(G)`.
    fn action_entry(&self, a: &EntryAction) -> String {
        match a {
            EntryAction::Direct { action, data } => format!(
                "Action entry: {} - {}",
                self.plan.actions[*action as usize].name,
                self.unpack_action(*action, data).iter().map(|p| hexstr(p)).collect::<Vec<_>>().join(", ")
            ),
            EntryAction::Member(m) => format!("Index: member({m})"),
            EntryAction::Group(g) => format!("Index: group({g})"),
        }
    }

    /// `Dumping member M` and its action, or `None` for no such member.
    fn dump_member(&self, p: usize, m: u32) -> Option<String> {
        let (a, d) = self.state.profiles[p].members.get(m as usize)?.as_ref()?;
        let action = self.action_entry(&EntryAction::Direct { action: *a, data: d.clone() });
        Some(format!("Dumping member {m}\n{action}"))
    }

    /// `Dumping group G` and its members, or `None` for no such group.
    fn dump_group(&self, p: usize, g: u32) -> Option<String> {
        let grp = self.state.profiles[p].groups.get(g as usize)?.as_ref()?;
        let members = grp.iter().map(|m| m.to_string()).collect::<Vec<_>>().join(", ");
        Some(format!("Dumping group {g}\nMembers: [{members}]"))
    }

    /// `act_prof_dump`: every member, then every group (profiles with a selector).
    fn dump_profile(&self, p: usize) -> String {
        let ps = &self.state.profiles[p];
        let mut out = vec!["==========".to_string(), "MEMBERS".to_string()];
        for m in 0..ps.members.len() as u32 {
            if let Some(d) = self.dump_member(p, m) {
                out.push("*".repeat(10));
                out.push(d);
            }
        }
        if self.plan.profiles[p].selector.is_some() {
            out.push("==========".into());
            out.push("GROUPS".into());
            for g in 0..ps.groups.len() as u32 {
                if let Some(d) = self.dump_group(p, g) {
                    out.push("*".repeat(10));
                    out.push(d);
                }
            }
        }
        out.join("\n")
    }

    /// A table as `show_tables` and `table_info` print it: the name in a
    /// 30-wide column, its action profile and its key fields with kind and width.
    fn table_str(&self, t: usize) -> String {
        let tp = &self.plan.tables[t];
        let imp = tp.profile.map_or("None", |p| self.plan.profiles[p as usize].name.as_str());
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
    fn actions_str(&self, actions: impl Iterator<Item = usize>) -> Vec<String> {
        by_name(actions.map(|a| (self.plan.actions[a].name.as_str(), a)))
            .iter()
            .map(|(name, a)| {
                let params = self.plan.actions[*a]
                    .params
                    .iter()
                    .map(|(n, w)| format!("{n}({w})"))
                    .collect::<Vec<_>>()
                    .join(",\t");
                format!("{name:<30} [{params}]")
            })
            .collect()
    }

    /// `mc_dump`: each multicast group with its nodes (handle, rid, ports,
    /// lags), then the LAG section (Sluice has no LAG membership: empty).
    fn dump_mc(&self) -> String {
        let pre = &self.state.pre;
        let list = |s: &BTreeSet<u32>| s.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
        let mut out = vec!["==========".to_string(), "MC ENTRIES".to_string()];
        for (g, nodes) in &pre.groups {
            out.push("*".repeat(10));
            out.push(format!("mgrp({g})"));
            for h in nodes {
                if let Some(Some(n)) = pre.nodes.get(*h as usize) {
                    out.push(format!(
                        "  -> (L1h={h}, rid={}) -> (ports=[{}], lags=[{}])",
                        n.rid,
                        list(&n.ports),
                        list(&n.lags)
                    ));
                }
            }
        }
        out.extend(["==========".to_string(), "LAGS".to_string(), "==========".to_string()]);
        out.join("\n")
    }

    /// The action profile of indirect table `name` (the `table_dump_member` family).
    fn table_profile(&self, name: &str) -> Result<usize, CmdError> {
        let t = self.table(name)?;
        match self.plan.tables[t].profile {
            Some(p) => Ok(p as usize),
            None => err("Cannot run this command on non-indirect table"),
        }
    }

    /// `table_dump_entry_from_key <table> <match fields> [priority]`.
    fn cmd_dump_entry_from_key(&self, args: &[&str]) -> R {
        let t = self.table(args.first().copied().unwrap_or(""))?;
        let mut keys = args.get(1..).unwrap_or(&[]);
        let mut priority = 0;
        if self.table_is_prioritized(t) {
            let (last, rest) = keys
                .split_last()
                .ok_or_else(|| CmdError("Table is ternary, but could not extract a valid priority from args".into()))?;
            priority = last
                .parse()
                .map_err(|_| CmdError("Table is ternary, but could not extract a valid priority from args".into()))?;
            keys = rest;
        }
        let matches = self.parse_matches(t, keys)?;
        match self.find_entry(t, matches, priority) {
            Ok(Some(h)) => match self.state.tables[t].get(h) {
                Some(e) => Ok(self.dump_entry(t, h, e)),
                None => err("Invalid table operation (BAD_MATCH_KEY)"),
            },
            Ok(None) => err("Invalid table operation (BAD_MATCH_KEY)"),
            Err(e) => err(format!("Invalid table operation ({})", e.message)),
        }
    }
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
            let zeros = "00".repeat(crate::value::nbytes(width.max(1)));
            format!("{zeros} &&& {zeros}")
        }
    }
}

/// A port or LAG number of `mc_node_create` / `mc_node_update`. The answer
/// spells the numbers as a port map, one digit per number up to the
/// largest, so numbers are bounded (bmv2's maps hold 512 ports).
fn port_number(s: &str) -> Result<u32, CmdError> {
    match s.parse::<u32>() {
        Ok(v) if v <= MAX_PORT_NUMBER => Ok(v),
        Ok(_) => err(format!("Invalid port \"{s}\": port and LAG numbers go up to {MAX_PORT_NUMBER}")),
        Err(_) => err(format!("Invalid port \"{s}\"")),
    }
}

/// The largest port or LAG number a multicast node takes.
const MAX_PORT_NUMBER: u32 = 65535;

/// Ports (or LAGs) as the CLI's port map: one digit per number up to the
/// largest, `1` where present, the lowest number rightmost; empty for none.
fn port_map(ports: &BTreeSet<u32>) -> String {
    match ports.last() {
        Some(&max) => (0..=max).rev().map(|p| if ports.contains(&p) { '1' } else { '0' }).collect(),
        None => String::new(),
    }
}

fn split_priority<'a>(tail: &'a [&'a str], nparams: usize, prio: bool) -> Result<(&'a [&'a str], i32), CmdError> {
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

fn num(s: Option<&&str>) -> Result<u32, CmdError> {
    let s = s.ok_or_else(|| CmdError("Missing argument".into()))?;
    let v = parse_value(s, 32)?;
    Ok(crate::value::be_to_u128(&v) as u32)
}

fn num64(s: Option<&&str>) -> Result<u64, CmdError> {
    let s = s.ok_or_else(|| CmdError("Missing argument".into()))?;
    let v = parse_value(s, 64)?;
    Ok(crate::value::be_to_u128(&v) as u64)
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
    }

    #[test]
    fn floats_print_like_python() {
        assert_eq!(py_float(1000.0), "1000.0");
        assert_eq!(py_float(0.000001), "1e-06");
        assert_eq!(py_float(0.5), "0.5");
    }
}
