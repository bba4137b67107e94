//! Runs p4c STF tests with the semantics of p4c's bmv2 runner
//! (`../shared/conformance/p4c-stf/FORMAT.md`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sluice_engine::runtime::{Entry, EntryAction, FieldMatch, MatchKind};
use sluice_engine::Switch;
use sluice_stf::{StfCommand, StfLine};

fn find_by_suffix<'a>(names: impl Iterator<Item = (usize, &'a str)>, want: &str, what: &str) -> Result<usize, String> {
    let mut hits = Vec::new();
    for (i, n) in names {
        if n == want {
            return Ok(i);
        }
        if n.ends_with(want) {
            hits.push(i);
        }
    }
    match hits.len() {
        1 => Ok(hits[0]),
        0 => Err(format!("no {what} named \"{want}\"")),
        _ => Err(format!("{what} name \"{want}\" is ambiguous")),
    }
}

fn key_index(sw: &Switch, t: usize, given: &str) -> Result<usize, String> {
    let keys = &sw.program().tables[t].key;
    let g = sluice_stf::stack_index_to_brackets(given);
    let cands = [given.to_string(), g.clone()];
    for c in &cands {
        if let Some(i) = keys.iter().position(|k| k.name == *c) {
            return Ok(i);
        }
        for suf in ["$", ".$valid$"] {
            if let Some(i) = keys.iter().position(|k| k.name == format!("{c}{suf}")) {
                return Ok(i);
            }
        }
        if let Some(base) = c.strip_suffix(".valid") {
            if let Some(i) = keys.iter().position(|k| k.name == format!("{base}.$valid$")) {
                return Ok(i);
            }
        }
    }
    for c in &cands {
        let hits: Vec<usize> = keys
            .iter()
            .enumerate()
            .filter(|(_, k)| k.name.ends_with(&format!(".{c}")) || (c == "valid" && k.name.ends_with(".$valid$")))
            .map(|(i, _)| i)
            .collect();
        if hits.len() == 1 {
            return Ok(hits[0]);
        }
    }
    Err(format!("table {} has no key \"{given}\"", sw.program().tables[t].name))
}

fn action_of(sw: &Switch, t: usize, name: &str) -> Result<u32, String> {
    let tp = &sw.program().tables[t];
    let idx = find_by_suffix(
        tp.actions.iter().enumerate().map(|(i, a)| (i, sw.program().actions[*a as usize].name.as_str())),
        name,
        "action",
    )?;
    Ok(tp.actions[idx])
}

fn action_data(sw: &Switch, a: u32, params: &[(String, sluice_stf::Number)]) -> Result<Vec<u8>, String> {
    let ap = &sw.program().actions[a as usize];
    let mut values = Vec::new();
    for (pname, w) in &ap.params {
        let (_, n) = params
            .iter()
            .find(|(n, _)| n == pname)
            .ok_or_else(|| format!("action {} needs parameter \"{pname}\"", ap.name))?;
        values.push(n.to_bytes_wrapping(*w));
    }
    if params.len() != ap.params.len() {
        return Err(format!("action {} takes {} parameters, got {}", ap.name, ap.params.len(), params.len()));
    }
    sluice_engine::plan::pack_action_data(ap, &values)
}

fn run_add(
    sw: &mut Switch,
    table: &str,
    priority: Option<i64>,
    keys: &[(String, sluice_stf::KeyValue)],
    action: &str,
    params: &[(String, sluice_stf::Number)],
) -> Result<(), String> {
    let t = find_by_suffix(sw.program().tables.iter().enumerate().map(|(i, t)| (i, t.name.as_str())), table, "table")?;
    let tp = sw.program().tables[t].clone();
    let mut matches: Vec<FieldMatch> = tp
        .key
        .iter()
        .map(|k| match k.kind {
            MatchKind::Exact => FieldMatch::Exact(vec![0]),
            MatchKind::Lpm => FieldMatch::Lpm(vec![0], 0),
            MatchKind::Ternary => FieldMatch::Ternary(vec![0], vec![0]),
            MatchKind::Range => FieldMatch::Range(vec![0], vec![0xff; 64]),
            MatchKind::Valid => FieldMatch::Valid(false),
            MatchKind::Optional => FieldMatch::Optional(None),
        })
        .collect();
    for (kname, kv) in keys {
        let i = key_index(sw, t, kname)?;
        let k = &tp.key[i];
        let e = |x: sluice_stf::ValueError| format!("key {kname}: {}", x.message());
        matches[i] = match k.kind {
            MatchKind::Exact => FieldMatch::Exact(kv.to_exact(k.width).map_err(e)?),
            MatchKind::Valid => FieldMatch::Valid(kv.to_exact(1).map_err(e)?.iter().any(|b| *b != 0)),
            MatchKind::Lpm => {
                let (v, p) = kv.to_lpm_p4c(k.width).map_err(e)?;
                FieldMatch::Lpm(v, p)
            }
            MatchKind::Ternary => {
                let (v, m) = kv.to_ternary(k.width).map_err(e)?;
                FieldMatch::Ternary(v, m)
            }
            MatchKind::Optional => {
                let (v, m) = kv.to_ternary(k.width).map_err(e)?;
                if m.iter().all(|b| *b == 0) {
                    FieldMatch::Optional(None)
                } else {
                    FieldMatch::Optional(Some(v))
                }
            }
            MatchKind::Range => return Err("range keys cannot be set from STF".into()),
        };
    }
    let a = action_of(sw, t, action)?;
    let data = action_data(sw, a, params)?;
    let prio = if tp.match_type == "ternary" || tp.match_type == "range" {
        let p = priority.ok_or_else(|| format!("table {} needs a priority", tp.name))?;
        (10000 - p) as i32
    } else {
        0
    };
    // Installed as given: STF keys are built to the table's shape above.
    let action = EntryAction::Direct { action: a, data: data.into_boxed_slice() };
    let entry = Entry { matches, priority: prio, action, packets: 0, bytes: 0, timeout_ms: None, added_key: None };
    sw.install_entry(t, entry).map(|_| ()).map_err(|e| e.message)
}

/// Applies an STF line that changes the switch's tables or the
/// replication engine (`add`, `setdefault`, a passed-through CLI command);
/// false for any other line (packets, expectations, checks: nothing done).
pub fn apply_table_command(sw: &mut Switch, command: &StfCommand) -> Result<bool, String> {
    match command {
        StfCommand::Add { table, priority, keys, action, params, .. } => {
            run_add(sw, table, *priority, keys, action, params)?
        }
        StfCommand::SetDefault { table, action, params } => {
            let t = find_by_suffix(
                sw.program().tables.iter().enumerate().map(|(i, t)| (i, t.name.as_str())),
                table,
                "table",
            )?;
            let a = action_of(sw, t, action)?;
            let d = action_data(sw, a, params)?;
            sw.set_default_as_given(t, a, d.into_boxed_slice());
        }
        StfCommand::Passthrough { command } => {
            sluice_control::cli::run(sw, command).map_err(|e| e.to_string())?;
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// Runs an STF test on the compiled program; `Ok(true)` when every expectation holds.
pub fn run_stf(program: &Path, test: &Path, trace: bool) -> Result<bool, String> {
    run_stf_with(program, test, trace, sluice_engine::ExecMode::Compiled)
}

/// [`run_stf`] with an explicit execution mode.
pub fn run_stf_with(program: &Path, test: &Path, trace: bool, mode: sluice_engine::ExecMode) -> Result<bool, String> {
    let mut sw = crate::load_with(program, mode)?;
    let text = std::fs::read_to_string(test).map_err(|e| format!("cannot read {}: {e}", test.display()))?;
    let lines: Vec<StfLine> = sluice_stf::parse(&text).map_err(|e| format!("{}: {e}", test.display()))?;
    let ports: BTreeSet<u32> = sluice_stf::ports(&lines);
    let mut expects: BTreeMap<u32, Vec<(usize, Option<sluice_stf::ExpectPattern>)>> = BTreeMap::new();
    let mut got: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    sw.set_trace(trace);
    let mut npkt = 0;
    for l in &lines {
        let where_ = format!("{}:{}", test.display(), l.line);
        match &l.command {
            StfCommand::Packet { port, data } => {
                npkt += 1;
                sw.process(*port, data, &mut |p, b| {
                    if ports.contains(&p) {
                        got.entry(p).or_default().push(b.to_vec());
                    }
                });
                if let Some(t) = sw.drain_trace() {
                    eprint!("packet #{npkt} ({where_}):\n{t}");
                }
            }
            StfCommand::Expect { port, pattern } => expects.entry(*port).or_default().push((l.line, pattern.clone())),
            other => {
                apply_table_command(&mut sw, other).map_err(|e| format!("{where_}: {e}"))?;
            }
        }
    }
    let mut ok = true;
    for p in &ports {
        let exp = expects.get(p).map(|v| v.as_slice()).unwrap_or(&[]);
        let out = got.get(p).map(|v| v.as_slice()).unwrap_or(&[]);
        if exp.len() != out.len() {
            ok = false;
            println!("port {p}: expected {} packets, got {}", exp.len(), out.len());
        }
        for (i, ((line, pat), pkt)) in exp.iter().zip(out.iter()).enumerate() {
            if let Some(pat) = pat {
                if let Some(why) = pat.describe_mismatch(pkt) {
                    ok = false;
                    let hex: String = pkt.iter().map(|b| format!("{b:02x}")).collect();
                    println!("port {p} packet {i} (expect at line {line}): {why}\n  expected {pat}\n  got      {hex}");
                }
            }
        }
    }
    if ok {
        println!("PASS {}", test.display());
    } else {
        println!("FAIL {}", test.display());
    }
    Ok(ok)
}
