//! The switch's state as a text a new switch can be started with: what
//! the CLI's `serialize_state FILE` (Thrift `bm_serialize_state`) writes
//! and `--restore-state FILE` reads back.
//!
//! What it holds is what bmv2's state dump holds: every table's entries
//! and default action, every action profile's members and groups, and the
//! rates of every meter cell (arrays and direct meters); not counters,
//! registers, multicast or mirroring, which bmv2 leaves out too. The text
//! is ours (bmv2's dump is its internal layout): a first line naming the
//! format, a line with the MD5 of the program it was taken from (a dump
//! restores only into the same program, as bmv2 checks), then
//! `simple_switch_CLI` commands that rebuild the state on a freshly loaded
//! program, readable and editable.
//!
//! Handles: members and groups keep theirs (a gap left by a deleted one is
//! filled by a placeholder made and removed again); entries are added
//! again in handle order and get handles 0, 1, 2...: the same unless
//! entries were deleted before (bmv2 restores the old handles, with their
//! version bits). Entries the program
//! itself holds (`const entries`) and entry timeouts are not written.

use std::fmt::Write as _;

use sluice_engine::runtime::{EntryAction, FieldMatch};
use sluice_engine::Switch;

use super::run;

/// The MD5 of a program's JSON text in lowercase hex, as a dump names its program.
pub fn config_md5(json: &str) -> String {
    use md5::{Digest as _, Md5};
    Md5::digest(json.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The first line of a state dump.
pub const FORMAT_LINE: &str = "sluice-state 1";

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    if b.is_empty() {
        s.push('0');
    }
    s
}

/// An action's data as the CLI's parameters, space separated.
fn params(sw: &Switch, action: u32, data: &[u8]) -> String {
    sw.unpack_action(action, data).iter().map(|p| hex(p)).collect::<Vec<_>>().join(" ")
}

/// A key field as the CLI reads it.
fn key_word(m: &FieldMatch) -> String {
    match m {
        FieldMatch::Exact(v) => hex(v),
        FieldMatch::Lpm(v, l) => format!("{}/{l}", hex(v)),
        FieldMatch::Ternary(v, mask) => format!("{}&&&{}", hex(v), hex(mask)),
        FieldMatch::Range(a, b) => format!("{}->{}", hex(a), hex(b)),
        FieldMatch::Valid(b) => if *b { "1" } else { "0" }.to_string(),
        FieldMatch::Optional(Some(v)) => hex(v),
        FieldMatch::Optional(None) => "*".to_string(),
    }
}

/// The state of `sw`, whose program's JSON has MD5 `md5` (lowercase hex).
pub fn serialize(sw: &Switch, md5: &str) -> String {
    let p = sw.program();
    let mut out = format!("{FORMAT_LINE}\n{md5}\n");
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    // Profiles first: entries name their members and groups.
    for (pi, prof) in p.profiles.iter().enumerate() {
        let name = &prof.name;
        let members: Vec<(u32, u32, Vec<u8>)> = sw.members(pi).map(|(h, a, d)| (h, a, d.to_vec())).collect();
        if let Some((_, a0, d0)) = members.first() {
            let mut holes = Vec::new();
            let mut at = 0;
            for (h, a, d) in &members {
                while at < *h {
                    line(format!(
                        "act_prof_create_member {name} {} {}",
                        p.actions[*a0 as usize].name,
                        params(sw, *a0, d0)
                    ));
                    holes.push(at);
                    at += 1;
                }
                line(format!("act_prof_create_member {name} {} {}", p.actions[*a as usize].name, params(sw, *a, d)));
                at += 1;
            }
            for h in holes {
                line(format!("act_prof_delete_member {name} {h}"));
            }
        }
        let groups: Vec<(u32, Vec<u32>)> = sw.groups(pi).map(|(h, g)| (h, g.iter().copied().collect())).collect();
        let mut holes = Vec::new();
        let mut at = 0;
        for (h, _) in &groups {
            while at <= *h {
                line(format!("act_prof_create_group {name}"));
                if at < *h {
                    holes.push(at);
                }
                at += 1;
            }
        }
        for h in holes {
            line(format!("act_prof_delete_group {name} {h}"));
        }
        for (g, ms) in &groups {
            for m in ms {
                line(format!("act_prof_add_member_to_group {name} {m} {g}"));
            }
        }
    }
    let prio = |t: usize, e: i32| if sw.table_has_priority(t) { format!(" {e}") } else { String::new() };
    for (t, tp) in p.tables.iter().enumerate() {
        if !tp.const_entries.is_empty() {
            continue;
        }
        for (_, e) in sw.entries(t) {
            let key: Vec<String> = e.key_as_added().iter().map(key_word).collect();
            let key = key.join(" ");
            line(match &e.action {
                EntryAction::Direct { action, data } => format!(
                    "table_add {} {} {key} => {}{}",
                    tp.name,
                    p.actions[*action as usize].name,
                    params(sw, *action, data),
                    prio(t, e.priority)
                ),
                EntryAction::Member(m) => format!("table_indirect_add {} {key} => {m}{}", tp.name, prio(t, e.priority)),
                EntryAction::Group(g) => {
                    format!("table_indirect_add_with_group {} {key} => {g}{}", tp.name, prio(t, e.priority))
                }
            });
        }
    }
    // Defaults that differ from the program's.
    for (t, tp) in p.tables.iter().enumerate() {
        let Some((a, d)) = sw.default_entry(t) else { continue };
        if tp.default_action.as_ref().is_some_and(|(a0, d0)| *a0 == a && d0[..] == *d) {
            continue;
        }
        let aname = &p.actions[a as usize].name;
        match tp.profile {
            None => line(format!("table_set_default {} {aname} {}", tp.name, params(sw, a, d))),
            Some(pi) => {
                // An indirect table's default is a member's action, copied:
                // a member with that action names it, or one is made for it.
                let pname = &p.profiles[pi as usize].name;
                match sw.members(pi as usize).find(|(_, ma, md)| *ma == a && *md == d) {
                    Some((m, _, _)) => line(format!("table_indirect_set_default {} {m}", tp.name)),
                    None => {
                        let free = (0..).find(|h| sw.member(pi as usize, *h).is_none()).unwrap_or(0);
                        line(format!("act_prof_create_member {pname} {aname} {}", params(sw, a, d)));
                        line(format!("table_indirect_set_default {} {free}", tp.name));
                        line(format!("act_prof_delete_member {pname} {free}"));
                    }
                }
            }
        }
    }
    for (m, mp) in p.meters.iter().enumerate() {
        let cells: Vec<(String, Vec<(f64, u32)>)> = if mp.is_direct {
            let Some(t) =
                p.tables.iter().position(|t| t.direct_meter.as_ref().is_some_and(|(mi, _)| *mi as usize == m))
            else {
                continue;
            };
            // Each entry's cell under the handle it gets back: entries are
            // added again in this order, from handle 0.
            let handles: Vec<u32> = sw.entries(t).map(|(h, _)| h).collect();
            handles
                .into_iter()
                .enumerate()
                .filter_map(|(k, h)| {
                    let cell = sw.meter_index(m, h).ok()?;
                    Some((k.to_string(), sw.meter_rates(m, cell).ok()?))
                })
                .collect()
        } else {
            (0..sw.meter_len(m)).filter_map(|i| Some((i.to_string(), sw.meter_rates(m, i).ok()?))).collect()
        };
        for (index, rates) in cells {
            if rates.is_empty() {
                continue;
            }
            let rates: Vec<String> = rates.iter().map(|(r, b)| format!("{r:?}:{b}")).collect();
            line(format!("meter_set_rates {} {index} {}", mp.name, rates.join(" ")));
        }
    }
    out
}

/// Restores a dump ([`serialize`]'s text) into `sw`, freshly loaded with
/// the program whose JSON has MD5 `md5`. Returns how many commands ran;
/// the error names the first line that failed.
pub fn restore(sw: &mut Switch, md5: &str, text: &str) -> Result<usize, String> {
    let mut lines = text.lines();
    if lines.next().map(str::trim) != Some(FORMAT_LINE) {
        return Err(format!("not a Sluice state dump (its first line is not \"{FORMAT_LINE}\")"));
    }
    if lines.next().map(str::trim) != Some(md5) {
        return Err("the state dump does not match the program (its MD5 differs)".into());
    }
    let mut n = 0;
    for (i, l) in lines.enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        run(sw, l).map_err(|e| format!("line {}: {l}: {e}", i + 3))?;
        n += 1;
    }
    Ok(n)
}
