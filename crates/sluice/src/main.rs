//! The `sluice` command: replay pcap files through a program, run p4c STF
//! tests, benchmark in memory, or drive the switch with CLI commands.

mod bench;
mod pcapio;
mod stf;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use sluice_engine::Switch;

#[derive(Parser)]
#[command(name = "sluice", version, about = "A fast programmable software switch for bmv2 (v1model) programs")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Replay DIR/<port>.pcap through a program and write DIR/<port>.pcap outputs.
    Replay {
        /// The BMv2 JSON program.
        program: PathBuf,
        /// simple_switch_CLI commands applied before any packet.
        #[arg(long)]
        commands: Option<PathBuf>,
        /// Ports that exist, e.g. "0 1 2" (packets to other ports vanish).
        #[arg(long)]
        ports: Option<String>,
        /// Read commands run after all traffic; their answers are printed.
        #[arg(long)]
        then: Option<PathBuf>,
        /// Input directory with <port>.pcap files.
        #[arg(long = "in")]
        input: PathBuf,
        /// Output directory for <port>.pcap files.
        #[arg(long = "out")]
        output: PathBuf,
        /// Print a per-packet trace on standard error.
        #[arg(long)]
        trace: bool,
    },
    /// Run a p4c STF test; exit status 0 only if every expectation holds.
    Stf {
        program: PathBuf,
        test: PathBuf,
        #[arg(long)]
        trace: bool,
    },
    /// Replay traffic from memory as fast as possible (built-in router and traffic by default).
    Bench {
        program: Option<PathBuf>,
        #[arg(long)]
        commands: Option<PathBuf>,
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// Seconds to run.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        /// Number of routes in the built-in route table.
        #[arg(long, default_value_t = 1000)]
        routes: u32,
    },
    /// Read simple_switch_CLI commands from standard input and print the answers.
    Cli {
        program: PathBuf,
        #[arg(long)]
        commands: Option<PathBuf>,
    },
    /// Load a program and report whether Sluice can run it.
    Check { program: PathBuf },
}

/// Loads a program file into a switch, with a message naming the file on failure.
pub fn load(path: &Path) -> Result<Switch, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    sluice_engine::load_switch(&text).map_err(|e| format!("{}: {e}", path.display()))
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
        match sw.command(line) {
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

fn replay(
    program: &Path,
    commands: Option<&Path>,
    ports: Option<&str>,
    then: Option<&Path>,
    input: &Path,
    output: &Path,
    trace: bool,
) -> Result<(), String> {
    let mut sw = load(program)?;
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
    let mut inputs: Vec<(std::time::Duration, usize, u32, Vec<u8>)> = Vec::new();
    let rd = std::fs::read_dir(input).map_err(|e| format!("cannot read {}: {e}", input.display()))?;
    let mut seq = 0;
    for ent in rd {
        let ent = ent.map_err(|e| e.to_string())?;
        let name = ent.file_name().to_string_lossy().to_string();
        let Some(stem) = name.strip_suffix(".pcap") else { continue };
        let Ok(port) = stem.parse::<u32>() else { continue };
        for (ts, data) in pcapio::read_pcap(&ent.path())? {
            inputs.push((ts, seq, port, data));
            seq += 1;
        }
    }
    inputs.sort_by_key(|(ts, s, _, _)| (*ts, *s));
    let mut outs: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
    if let Some(ps) = &port_set {
        for p in ps {
            outs.insert(*p, Vec::new());
        }
    }
    if trace {
        sw.trace = Some(String::new());
    }
    for (_, _, port, data) in &inputs {
        sw.process(*port, data, &mut |p, bytes| {
            if port_set.as_ref().is_none_or(|s| s.contains(&p)) {
                outs.entry(p).or_default().push(bytes.to_vec());
            }
        });
        if let Some(t) = sw.trace.as_mut() {
            eprint!("{t}");
            t.clear();
        }
    }
    std::fs::create_dir_all(output).map_err(|e| format!("cannot create {}: {e}", output.display()))?;
    for (p, pkts) in &outs {
        pcapio::write_pcap(&output.join(format!("{p}.pcap")), pkts)?;
    }
    if let Some(t) = then {
        let text = std::fs::read_to_string(t).map_err(|e| format!("cannot read {}: {e}", t.display()))?;
        for line in text.lines() {
            let l = line.trim();
            if l.is_empty() {
                continue;
            }
            println!("> {l}");
            match sw.command(l) {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Replay { program, commands, ports, then, input, output, trace } => {
            replay(&program, commands.as_deref(), ports.as_deref(), then.as_deref(), &input, &output, trace)
        }
        Cmd::Stf { program, test, trace } => match stf::run_stf(&program, &test, trace) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Cmd::Bench { program, commands, pcap, duration, routes } => {
            bench::run(program.as_deref(), commands.as_deref(), pcap.as_deref(), duration, routes)
        }
        Cmd::Cli { program, commands } => (|| {
            let mut sw = load(&program)?;
            if let Some(c) = commands {
                apply_commands(&mut sw, &c, false)?;
            }
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map_err(|e| e.to_string())?;
            let failed = apply_command_text(&mut sw, &text, "stdin", true);
            if failed > 0 {
                return Err(format!("{failed} command(s) failed"));
            }
            Ok(())
        })(),
        Cmd::Check { program } => load(&program).map(|sw| {
            println!(
                "{}: OK ({} tables, {} actions, {} parser states)",
                program.display(),
                sw.plan.tables.len(),
                sw.plan.actions.len(),
                sw.plan.states.len()
            )
        }),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e}");
            ExitCode::from(2)
        }
    }
}
