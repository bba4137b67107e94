//! The `sluice` command: one subcommand per job of each data plane (the P4
//! switch, the lwAFTR, the OpenFlow switch and controller), `soak` for all
//! of them and `top` to watch any running instance. The commands live in
//! the library, one folder per data plane.

use sluice::p4::{bench, replay, stf};
use sluice::{apply_commands, load_with};
use sluice_engine::ExecMode;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[global_allocator]
static ALLOCATOR: sluice::lwaftr::Allocator = sluice::lwaftr::Allocator;

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "A fast programmable software switch for BMv2 JSON programs (v1model and PSA), with an lwAFTR and OpenFlow"
)]
struct Cli {
    /// Run control pipelines in the plan interpreter instead of compiled native code.
    #[arg(long, global = true)]
    interpret: bool,
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
        /// Built-in example to run when no PROGRAM is given (generated configuration and traffic).
        #[arg(long, value_enum, default_value = "router")]
        example: sluice::p4::bench::Example,
        /// Table entries of the built-in example: routes (router, edge) or hosts (l2_learning).
        #[arg(long, alias = "routes", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=4_194_304))]
        entries: u32,
        /// Frame size in bytes on the wire, FCS included, of the built-in traffic.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(64..=9000))]
        size: u32,
        /// ACL rules of the built-in edge example.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(0..=4000))]
        acl: u32,
        /// Where the built-in routes lie: spread over the IPv4 space (as a
        /// real table; big tables then run from memory) or consecutive from
        /// 10.0.0.0 (a million routes then fit in L3).
        #[arg(long, value_enum, default_value = "spread")]
        route_layout: sluice::p4::bench::RouteLayout,
        /// Stop after this many packets (for instruction-count profiling).
        #[arg(long)]
        packets: Option<u64>,
        /// Worker threads, each with its share of the traffic by flow hash.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
        /// Do not run the hand-written reference router after the engine.
        #[arg(long)]
        no_reference: bool,
        /// The engine and the reference take turns this many times, each
        /// turn `--duration` seconds; the result is the median of the
        /// turns' figures. Why: on a shared machine the speed drifts
        /// within seconds, and alternating exposes both to the same drift.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Time each stage of the pipeline (cycles per packet, packets per
        /// call) and print where the time went after each turn.
        #[arg(long)]
        profile: bool,
        /// Faults injected into the traffic before it is replayed (as `--inject-faults` of the live ports: drop=P,dup=P,reorder=P,truncate=P,corrupt=P,seed=N); no reference run then.
        #[arg(long, value_name = "SPEC")]
        inject_faults: Option<sluice_ports::faults::Faults>,
        /// Egress queues per port, as simple_switch's --priority-queues: every packet goes through its port's queue (no rate is set, so none waits); measures what configured queues cost.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
        priority_queues: u32,
    },
    /// Watch a running Sluice instance live (rates per port, per worker and
    /// per stage, drops, updates per second), as `snabb top` does; reads the
    /// metrics its control socket serves.
    Top(sluice::top::TopArgs),
    /// Read simple_switch_CLI commands from standard input and print the answers.
    Cli {
        program: PathBuf,
        #[arg(long)]
        commands: Option<PathBuf>,
    },
    /// Load a program and report whether Sluice can run it.
    Check { program: PathBuf },
    /// Show what the specializer produced for each stage of a program (parser,
    /// checksums, tables, deparser, compiled pipelines with their code).
    Inspect {
        program: PathBuf,
        /// Table commands to apply first (table index choices depend on the entries).
        #[arg(long)]
        commands: Option<PathBuf>,
        /// Leave out the generated code listing.
        #[arg(long)]
        no_code: bool,
    },
    /// A data plane (the built-in router, the lwAFTR or the OpenFlow switch) forwarding from
    /// memory on every worker while its entries are rewritten at a fixed
    /// rate; fails if a packet was lost, left out of sequence or as a mix
    /// of two versions of its entry.
    Soak {
        /// The data plane: `router` (the P4 router example, its next hops rewritten), `lwaftr` (16 softwires, their B4 addresses rewritten) or `openflow` (the OpenFlow switch, 16 route flows rewritten by flow-mods).
        #[arg(long, default_value = "router", value_parser = ["router", "lwaftr", "openflow"])]
        data_plane: String,
        /// Seconds to run.
        #[arg(long, default_value_t = 10.0)]
        duration: f64,
        /// Worker threads, each with its share of the traffic by flow hash.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
        /// Entries rewritten per second (through the same pool changes the control planes use).
        #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
        updates_per_second: u32,
        /// /24 routes over the 16 next hops.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=4_194_304))]
        routes: u32,
    },
    /// The lightweight 4over6 AFTR (RFC 7596) with Snabb's `lwaftr` commands.
    Lwaftr {
        #[command(subcommand)]
        cmd: sluice::lwaftr::LwaftrCommand,
    },
    /// The OpenFlow switch in memory doing the built-in router's work (two
    /// tables and a group per next hop), measured against the P4 router on
    /// the same routes and traffic.
    #[command(name = "openflow-bench")]
    OpenflowBench {
        /// /24 routes (flows of table 1), over 16 next hops (groups).
        #[arg(long, alias = "routes", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=4_194_304))]
        entries: u32,
        /// Seconds each turn of each switch runs.
        #[arg(long, default_value_t = 5.0)]
        duration: f64,
        /// Worker threads, each with its share of the traffic by flow hash.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
        /// Where the routes lie (see `sluice bench --help`).
        #[arg(long, value_enum, default_value = "spread")]
        route_layout: sluice::p4::bench::RouteLayout,
        /// Turns the P4 router and the OpenFlow switch take, alternating;
        /// the result gives the medians.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
        rounds: u32,
        /// Packets of the traffic compared between the two before measuring.
        #[arg(long, default_value_t = 4096)]
        check: usize,
        /// The OpenFlow switch walks its tables for every packet (no flow cache).
        #[arg(long)]
        no_flow_cache: bool,
        /// Small tables are scanned instead of compiled to native code.
        #[arg(long)]
        no_table_code: bool,
        /// Print the native code of the compiled tables (Cranelift IR).
        #[arg(long)]
        show_code: bool,
    },
    /// An OpenFlow 1.0/1.3 controller running the shipped applications (learning switch, hub, fast reply, router).
    Controller(sluice::controller::ControllerArgs),
    /// cbench's OpenFlow controller benchmark (same options and output), OpenFlow 1.0 or 1.3.
    #[command(name = "ofbench", disable_version_flag = true)]
    Ofbench(sluice::controller::ofbench::OfbenchArgs),
    /// An OpenFlow 1.3 switch on live interfaces, driven by controllers or ovs-ofctl.
    Openflow(sluice::openflow::OpenflowArgs),
    /// Measure how fast an OpenFlow 1.3 switch takes flow-mods (adds, then deletes, with barriers).
    #[command(name = "openflow-flow-rate")]
    OpenflowFlowRate(sluice::openflow::flow_rate::FlowRateArgs),
    /// Run on live interfaces with bmv2 simple_switch's command line (see `sluice simple_switch --help`).
    #[command(name = "simple_switch", alias = "simple_switch_grpc", disable_help_flag = true)]
    SimpleSwitch {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Run a PSA program on live interfaces with bmv2 psa_switch's command line (simple_switch's options).
    #[command(name = "psa_switch", disable_help_flag = true)]
    PsaSwitch {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> ExitCode {
    // Invoked as `simple_switch`, `simple_switch_grpc` or `psa_switch` (a
    // symlink): bmv2's command line.
    let argv: Vec<String> = std::env::args().collect();
    let called = argv.first().and_then(|a| std::path::Path::new(a).file_name()).and_then(|n| n.to_str()).unwrap_or("");
    if matches!(called, "simple_switch" | "simple_switch_grpc" | "psa_switch") {
        let run = if called == "psa_switch" {
            sluice::p4::simple_switch::psa_switch(&argv[1..], ExecMode::Compiled)
        } else {
            sluice::p4::simple_switch::simple_switch(&argv[1..], called == "simple_switch_grpc", ExecMode::Compiled)
        };
        return match run {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{called}: {e}");
                ExitCode::from(2)
            }
        };
    }
    let cli = Cli::parse();
    let mode = if cli.interpret { ExecMode::Interpreted } else { ExecMode::Compiled };
    let r = match cli.cmd {
        Cmd::Replay { program, commands, ports, then, input, output, trace } => {
            replay(&program, mode, commands.as_deref(), ports.as_deref(), then.as_deref(), &input, &output, trace)
        }
        Cmd::Stf { program, test, trace } => match stf::run_stf_with(&program, &test, trace, mode) {
            Ok(true) => Ok(()),
            Ok(false) => return ExitCode::from(1),
            Err(e) => Err(e),
        },
        Cmd::Bench {
            program,
            commands,
            pcap,
            duration,
            example,
            entries,
            size,
            acl,
            route_layout,
            packets,
            workers,
            no_reference,
            rounds,
            profile,
            inject_faults,
            priority_queues,
        } => bench::run(&bench::BenchArgs {
            program: program.as_deref(),
            mode,
            commands: commands.as_deref(),
            pcap: pcap.as_deref(),
            example,
            entries,
            frame: size as usize,
            acl,
            layout: route_layout,
            duration,
            max_packets: packets,
            workers: workers as usize,
            no_reference,
            rounds: rounds as usize,
            profile,
            faults: inject_faults,
            priority_queues: priority_queues as usize,
        }),
        Cmd::Cli { program, commands } => (|| {
            use std::io::{BufRead, IsTerminal, Write};
            let mut sw = load_with(&program, mode)?;
            if let Some(c) = commands {
                apply_commands(&mut sw, &c, false)?;
            }
            let interactive = std::io::stdin().is_terminal();
            let mut failed = 0;
            let stdin = std::io::stdin();
            let mut lines = stdin.lock().lines();
            loop {
                if interactive {
                    print!("sluice> ");
                    std::io::stdout().flush().ok();
                }
                let Some(line) = lines.next() else { break };
                let line = line.map_err(|e| e.to_string())?;
                if matches!(line.trim(), "quit" | "exit" | "EOF") {
                    break;
                }
                match sluice_control::cli::run(&mut sw, &line) {
                    Ok(out) if !out.is_empty() => println!("{out}"),
                    Ok(_) => {}
                    Err(e) => {
                        failed += 1;
                        println!("Error: {e}");
                    }
                }
            }
            if failed > 0 && !interactive {
                return Err(format!("{failed} command(s) failed"));
            }
            Ok(())
        })(),
        Cmd::Check { program } => load_with(&program, mode).map(|sw| {
            println!(
                "{}: OK ({} tables, {} actions, {} parser states)",
                program.display(),
                sw.program().tables.len(),
                sw.program().actions.len(),
                sw.program().states.len()
            )
        }),
        Cmd::Lwaftr { cmd } => sluice::lwaftr::main(cmd),
        Cmd::Soak { data_plane, duration, workers, updates_per_second, routes } => {
            sluice::soak::run(&sluice::soak::SoakArgs {
                plane: match data_plane.as_str() {
                    "lwaftr" => sluice::soak::SoakPlane::Lwaftr,
                    "openflow" => sluice::soak::SoakPlane::Openflow,
                    _ => sluice::soak::SoakPlane::Router,
                },
                duration,
                workers: workers as usize,
                updates_per_second,
                routes,
                mode,
            })
        }
        Cmd::OpenflowBench {
            entries,
            duration,
            workers,
            route_layout,
            rounds,
            check,
            no_flow_cache,
            no_table_code,
            show_code,
        } => sluice::openflow::bench::run(&sluice::openflow::bench::OpenflowBenchArgs {
            entries,
            layout: route_layout,
            duration,
            workers: workers as usize,
            rounds: rounds as usize,
            check,
            flow_cache: !no_flow_cache,
            table_code: !no_table_code,
            show_code,
        }),
        Cmd::Controller(a) => sluice::controller::run(&a),
        Cmd::Ofbench(a) => sluice::controller::ofbench::run(&a),
        Cmd::Openflow(a) => sluice::openflow::run(&a),
        Cmd::OpenflowFlowRate(a) => sluice::openflow::flow_rate::run(&a),
        Cmd::SimpleSwitch { args } => sluice::p4::simple_switch::simple_switch(
            &args,
            argv.get(1).is_some_and(|a| a == "simple_switch_grpc"),
            mode,
        ),
        Cmd::PsaSwitch { args } => sluice::p4::simple_switch::psa_switch(&args, mode),
        Cmd::Top(a) => sluice::top::run(&a),
        Cmd::Inspect { program, commands, no_code } => (|| {
            let mut sw = load_with(&program, mode)?;
            if let Some(c) = commands {
                apply_commands(&mut sw, &c, false)?;
            }
            println!("{}: stages\n{}", program.display(), sw.stage_report());
            Ok(sw)
        })()
        .map(|sw| match sw.compiled() {
            Some(c) => {
                let s = &c.stats;
                println!(
                    "{}: compiled pipelines: {} table nodes; conditions {} inline, {} through the interpreter; \
                     actions {} inline, {} through the interpreter\n",
                    program.display(),
                    s.tables,
                    s.conditions_inline,
                    s.conditions_helper,
                    s.actions_inline,
                    s.actions_helper
                );
                if !no_code {
                    print!("{}", c.listing);
                }
            }
            None => println!("{}: interpreted (--interpret): nothing compiled", program.display()),
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
