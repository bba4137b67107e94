//! The P4 switch's commands: loading a program and its commands, the
//! pcap replay, the STF runner, the in-memory bench and the switch on live
//! ports with bmv2's command line (`simple_switch`, `simple_switch_grpc`,
//! `psa_switch`).

pub mod bench;
pub mod simple_switch;
pub mod stf;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use sluice_dataplane::BATCH;
use sluice_engine::{ExecMode, Switch};

/// Loads a program file into a switch compiled to native code, with a
/// message naming the file on failure.
pub fn load(path: &Path) -> Result<Switch, String> {
    load_with(path, ExecMode::Compiled)
}

/// [`load`] with an explicit execution mode (tests run both).
pub fn load_with(path: &Path, mode: ExecMode) -> Result<Switch, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut sw = sluice_engine::load_switch(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if mode != sw.mode() {
        sw.set_mode(mode).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(sw)
}

/// Applies a commands file; errors are reported with their line number.
pub fn apply_commands(sw: &mut Switch, path: &Path, echo: bool) -> Result<usize, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(apply_command_text(sw, &text, &path.display().to_string(), echo))
}

/// Applies command lines; returns the number of failed lines (reported on stderr).
pub fn apply_command_text(sw: &mut Switch, text: &str, source: &str, echo: bool) -> usize {
    let mut failed = 0;
    for (i, line) in text.lines().enumerate() {
        match sluice_control::cli::run(sw, line) {
            Ok(out) => {
                if echo && !out.is_empty() {
                    println!("{out}");
                }
            }
            Err(e) => {
                failed += 1;
                eprintln!("{source}:{}: {e}", i + 1);
            }
        }
    }
    failed
}

/// Injects every packet of `input/<port>.pcap` in global timestamp order and
/// collects what each port emitted (only ports in `port_set`, when given).
pub fn run_inputs(
    sw: &mut Switch,
    input: &Path,
    port_set: Option<&BTreeSet<u32>>,
    trace: bool,
) -> Result<BTreeMap<u32, Vec<Vec<u8>>>, String> {
    let mut inputs: Vec<(std::time::Duration, usize, u32, Vec<u8>)> = Vec::new();
    let rd = std::fs::read_dir(input).map_err(|e| format!("cannot read {}: {e}", input.display()))?;
    let mut seq = 0;
    for ent in rd {
        let ent = ent.map_err(|e| e.to_string())?;
        let name = ent.file_name().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".pcap") else { continue };
        let Ok(port) = stem.parse::<u32>() else { continue };
        for (ts, data) in sluice_ports::pcapfile::read_pcap(&ent.path())? {
            inputs.push((ts, seq, port, data));
            seq += 1;
        }
    }
    inputs.sort_by_key(|(ts, s, _, _)| (*ts, *s));
    let mut outs: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    if let Some(ps) = port_set {
        for p in ps {
            outs.insert(*p, Vec::new());
        }
    }
    if trace {
        sw.set_trace(true);
    }
    // Consecutive packets of one port go through the packet loop as one
    // batch: each still runs to completion before the next, in order.
    let mut frames: Vec<&[u8]> = Vec::with_capacity(BATCH);
    let mut rest = inputs.as_slice();
    while let Some((_, _, port, _)) = rest.first() {
        let n = rest.iter().take(BATCH).take_while(|(_, _, p, _)| p == port).count();
        frames.clear();
        frames.extend(rest[..n].iter().map(|(_, _, _, d)| d.as_slice()));
        sw.process_batch(*port, &frames, &mut |_, p, bytes: &[u8]| {
            if port_set.is_none_or(|s| s.contains(&p)) {
                outs.entry(p).or_default().push(bytes.to_vec());
            }
        });
        if let Some(t) = sw.drain_trace() {
            eprint!("{t}");
        }
        rest = &rest[n..];
    }
    Ok(outs)
}

/// Replays `input/<port>.pcap` through a program into `output/<port>.pcap`.
#[allow(clippy::too_many_arguments)]
pub fn replay(
    program: &Path,
    mode: ExecMode,
    commands: Option<&Path>,
    ports: Option<&str>,
    then: Option<&Path>,
    input: &Path,
    output: &Path,
    trace: bool,
) -> Result<(), String> {
    let mut sw = load_with(program, mode)?;
    if let Some(c) = commands {
        apply_commands(&mut sw, c, false)?;
    }
    let port_set: Option<BTreeSet<u32>> = match ports {
        Some(p) => Some(
            p.split_whitespace()
                .map(|x| x.parse::<u32>().map_err(|_| format!("--ports: \"{x}\" is not a port number")))
                .collect::<Result<_, _>>()?,
        ),
        None => None,
    };
    let outs = run_inputs(&mut sw, input, port_set.as_ref(), trace)?;
    std::fs::create_dir_all(output).map_err(|e| format!("cannot create {}: {e}", output.display()))?;
    for (p, pkts) in &outs {
        sluice_ports::pcapfile::write_pcap(&output.join(format!("{p}.pcap")), pkts)?;
    }
    if let Some(t) = then {
        let text = std::fs::read_to_string(t).map_err(|e| format!("cannot read {}: {e}", t.display()))?;
        for line in text.lines() {
            let l = line.trim();
            if l.is_empty() {
                continue;
            }
            println!("> {l}");
            match sluice_control::cli::run(&mut sw, l) {
                Ok(o) => {
                    if !o.is_empty() {
                        println!("{o}");
                    }
                }
                Err(e) => println!("Error: {e}"),
            }
        }
    }
    Ok(())
}
