//! `sluice simple_switch`: the P4 switch on live ports with bmv2's
//! command line, so that scripts written for bmv2 only change the
//! binary's path (`sluice simple_switch ...`, `sluice psa_switch ...`, or
//! the `sluice` binary invoked through a symlink named `simple_switch`,
//! `simple_switch_grpc` or `psa_switch`).
//!
//! Every option bmv2 documents is either honoured or refused with a
//! message: none is silently ignored.
//!
//! The run: the program is loaded and its `--commands` applied, then the
//! switch (or, with `--null-forward`, no pipeline at all) starts as a
//! node (`sluice_node`) on the live ports, its workers' PacketIns and
//! digests going to the device the Thrift and P4Runtime servers share;
//! it stops at SIGINT or SIGTERM and prints the node's report.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sluice_control::device::{Device, DeviceInfo, Event, EventSink, PortInfo};
use sluice_dataplane::NullForward;
use sluice_engine::{ExecMode, Switch};
pub use sluice_live::{Backend, LiveStats, PortSpec};
use sluice_live::{LiveConfig, Up, UpSink};
use sluice_node::{Node, NodeOptions};

/// Everything the live switch is started with.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The program (`None`: `--no-p4`, every packet is dropped).
    pub program: Option<PathBuf>,
    /// Compiled to native code, or interpreted (`sluice --interpret`).
    pub mode: ExecMode,
    /// CLI command files applied before traffic starts.
    pub commands: Vec<PathBuf>,
    pub ports: Vec<PortSpec>,
    /// `--pcap DIR`: record `<iface>_in.pcap` and `<iface>_out.pcap`.
    pub pcap_dir: Option<PathBuf>,
    /// Per-packet trace on standard error.
    pub trace: bool,
    /// Carry virtio-net offload headers (default on).
    pub offload: bool,
    /// Worker threads (AF_PACKET ports are shared through PACKET_FANOUT).
    pub workers: usize,
    /// No pipeline: every frame of one port goes out of the other (exactly
    /// two ports). The I/O ceiling the benchmark compares the switch with.
    pub null_forward: bool,
    /// bmv2's `--use-files WAIT`: every port is a pair of pcap files, read
    /// after waiting this many seconds.
    pub use_files: Option<f64>,
    /// Serve bmv2's Thrift runtime API on this port.
    pub thrift_port: Option<u16>,
    /// Serve P4Runtime on this address (`HOST:PORT`).
    pub grpc_addr: Option<String>,
    /// Frames sent to this port go to the P4Runtime client (PacketIn); PacketOut frames enter here.
    pub cpu_port: Option<u32>,
    pub device_id: u64,
    /// Time every stage and print where the time went when stopped.
    pub profile: bool,
    /// `--inject-faults SPEC`: faults every port injects (users' own testing).
    pub faults: Option<sluice_live::Faults>,
    /// `--metrics ADDR`: Prometheus metrics over HTTP.
    pub metrics: Option<String>,
    /// `--name NAME`: the instance's name for `sluice top`.
    pub name: Option<String>,
}

impl Default for LiveOptions {
    fn default() -> LiveOptions {
        LiveOptions {
            program: None,
            mode: ExecMode::Compiled,
            commands: Vec::new(),
            ports: Vec::new(),
            pcap_dir: None,
            trace: false,
            offload: true,
            workers: 1,
            null_forward: false,
            use_files: None,
            thrift_port: None,
            grpc_addr: None,
            cpu_port: None,
            device_id: 0,
            profile: false,
            faults: None,
            metrics: None,
            name: None,
        }
    }
}

/// The parsed command line.
#[derive(Debug, Clone, Default)]
pub struct SimpleSwitchArgs {
    pub live: LiveOptions,
    pub thrift_port: Option<u16>,
    pub device_id: Option<u64>,
    pub cpu_port: Option<u32>,
    pub grpc_server_addr: Option<String>,
    pub log_level: Option<String>,
    pub priority_queues: Option<u32>,
    pub help: bool,
}

/// The options text printed by `--help`.
pub const USAGE: &str = "\
usage: sluice simple_switch [options] <path to JSON config file> [-- target options]

Options of bmv2's simple_switch that Sluice accepts:
  -i, --interface PORT@IFACE   attach IFACE as PORT (repeatable); IFACE may be af_packet:NAME
                               (default) or tap:NAME (Sluice creates the TAP interface)
  --thrift-port N              Thrift runtime server port (default 9090; simple_switch_CLI talks to it)
  --device-id N                device id
  --log-console                print a per-packet trace on standard error
  --log-level L                trace, debug, info, warn, error or off (trace/debug print packet traces)
  --pcap [DIR]                 record every port's traffic in DIR/<iface>_in.pcap and _out.pcap
  --no-p4                      start without a program: every packet is dropped
  --cpu-port N                 the CPU port (for P4Runtime packet-in/out)
  --priority-queues N          accepted: Sluice has no egress queues, packets go to egress at once
  --use-files WAIT             every interface X is the pair of files X_in.pcap (read) and
                               X_out.pcap (written), processed after WAIT seconds
  --json FILE                  the program (same as the positional argument)
Sluice options:
  --metrics ADDR               serve Prometheus metrics at http://ADDR/metrics (HOST:PORT, or :PORT)
  --name NAME                  the instance's name, for `sluice top NAME` (default: its PID)
  --commands FILE              simple_switch_CLI commands applied before traffic starts (repeatable)
  --no-offload                 do not carry virtio-net offload headers (hosts must turn TSO/GSO off)
  --workers N                  worker threads (default 1); AF_PACKET ports are shared by flow hash
  --null-forward               no pipeline: frames of one of the two ports leave by the other
                               (the I/O ceiling bench/netns-router.sh compares with)
  --profile                    time every stage (receive, pipeline stages, send) and print
                               cycles per packet and packets per call when stopped
  --inject-faults SPEC         inject faults on every port, for testing what runs on Sluice:
                               SPEC is drop=P,dup=P,reorder=P,truncate=P,corrupt=P (received
                               frames), send-fail=P (sends, as a full ring), flap=UP/DOWN
                               (link schedule, e.g. 5s/1s), seed=N; P from 0 to 1, any subset
Target options after `--` (simple_switch_grpc):
  --grpc-server-addr ADDR      P4Runtime server address (default 0.0.0.0:9559 in the simple_switch_grpc form)
  --cpu-port N                 as above
";

fn value<'a>(args: &'a [String], i: &mut usize, opt: &str) -> Result<&'a str, String> {
    *i += 1;
    args.get(*i).map(|s| s.as_str()).ok_or_else(|| format!("option {opt} needs a value"))
}

fn number<T: std::str::FromStr>(v: &str, opt: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("option {opt}: \"{v}\" is not a valid number"))
}

/// Splits `--opt=value` into `("--opt", Some("value"))`.
fn split_eq(a: &str) -> (&str, Option<&str>) {
    match a.split_once('=') {
        Some((o, v)) if a.starts_with("--") => (o, Some(v)),
        _ => (a, None),
    }
}

/// Parses simple_switch's arguments (without the program name).
pub fn parse(args: &[String]) -> Result<SimpleSwitchArgs, String> {
    let mut out = SimpleSwitchArgs::default();
    let mut positional: Vec<String> = Vec::new();
    let mut no_p4 = false;
    let mut i = 0;
    let mut target = false;
    while i < args.len() {
        let raw = args[i].as_str();
        if raw == "--" && !target {
            target = true;
            i += 1;
            continue;
        }
        let (opt, inline) = split_eq(raw);
        let val = |i: &mut usize| -> Result<String, String> {
            match inline {
                Some(v) => Ok(v.to_string()),
                None => value(args, i, opt).map(str::to_string),
            }
        };
        if target {
            match opt {
                "--grpc-server-addr" => out.grpc_server_addr = Some(val(&mut i)?),
                "--cpu-port" => out.cpu_port = Some(number(&val(&mut i)?, opt)?),
                _ => {
                    return Err(format!(
                        "unknown target option {raw} (after `--` Sluice accepts --grpc-server-addr and --cpu-port)"
                    ))
                }
            }
            i += 1;
            continue;
        }
        match opt {
            "-h" | "--help" => out.help = true,
            "-i" | "--interface" => out.live.ports.push(PortSpec::parse(&val(&mut i)?)?),
            "--thrift-port" => out.thrift_port = Some(number(&val(&mut i)?, opt)?),
            "--device-id" => out.device_id = Some(number(&val(&mut i)?, opt)?),
            "--log-console" => out.live.trace = true,
            "--log-level" | "-L" => {
                let l = val(&mut i)?;
                if !matches!(l.as_str(), "trace" | "debug" | "info" | "warn" | "error" | "off") {
                    return Err(format!("option {opt}: unknown level \"{l}\" (trace, debug, info, warn, error, off)"));
                }
                out.log_level = Some(l);
            }
            "--pcap" => {
                // bmv2 takes an optional directory: `--pcap`, `--pcap=DIR` or `--pcap DIR`.
                let dir = match inline {
                    Some(v) => v.to_string(),
                    None => match args.get(i + 1) {
                        Some(n) if !n.starts_with('-') && !n.ends_with(".json") => {
                            i += 1;
                            n.clone()
                        }
                        _ => ".".to_string(),
                    },
                };
                out.live.pcap_dir = Some(PathBuf::from(dir));
            }
            "--no-p4" => no_p4 = true,
            "--cpu-port" => out.cpu_port = Some(number(&val(&mut i)?, opt)?),
            "--priority-queues" => out.priority_queues = Some(number(&val(&mut i)?, opt)?),
            "--json" => positional.push(val(&mut i)?),
            "--commands" => out.live.commands.push(PathBuf::from(val(&mut i)?)),
            "--no-offload" => out.live.offload = false,
            "--null-forward" => out.live.null_forward = true,
            "--profile" => out.live.profile = true,
            "--metrics" => out.live.metrics = Some(val(&mut i)?),
            "--name" => out.live.name = Some(val(&mut i)?),
            "--inject-faults" => {
                let spec = val(&mut i)?;
                out.live.faults = Some(spec.parse().map_err(|e| format!("option --inject-faults: {e}"))?);
            }
            "--workers" => {
                let n: usize = number(&val(&mut i)?, opt)?;
                if !(1..=64).contains(&n) {
                    return Err(format!("option --workers: {n} is out of range (1-64)"));
                }
                out.live.workers = n;
            }
            "--use-files" => {
                let w: f64 = number(&val(&mut i)?, opt)?;
                out.live.use_files = Some(w);
            }
            o if o.starts_with('-') && o.len() > 1 => {
                return Err(format!("unknown option {raw} (see `sluice simple_switch --help`)"));
            }
            _ => positional.push(raw.to_string()),
        }
        i += 1;
    }
    if out.help {
        return Ok(out);
    }
    match (positional.len(), no_p4) {
        (0, true) => {}
        (1, false) => out.live.program = Some(PathBuf::from(&positional[0])),
        (0, false) => return Err("no JSON program given (or use --no-p4)".into()),
        (_, true) => return Err("--no-p4 and a JSON program were both given".into()),
        _ => return Err(format!("more than one JSON program given: {}", positional.join(", "))),
    }
    if out.live.use_files.is_some() {
        for p in out.live.ports.iter_mut() {
            p.backend = Backend::Files;
        }
    }
    if matches!(out.log_level.as_deref(), Some("trace" | "debug")) {
        out.live.trace = true;
    }
    if matches!(out.log_level.as_deref(), Some("info" | "warn" | "error" | "off")) {
        out.live.trace = false;
    }
    Ok(out)
}

/// `sluice psa_switch ARGS`: bmv2's psa_switch, whose command line is
/// simple_switch's; the program must be a PSA one (as psa_switch, which
/// cannot run a v1model program).
pub fn psa_switch(args: &[String], mode: ExecMode) -> Result<(), String> {
    let a = parse(args)?;
    if let (Some(p), false) = (&a.live.program, a.help) {
        let text = std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let model = sluice_json::load_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
        if !sluice_engine::plan::is_psa(&model) {
            return Err(format!(
                "{}: not a PSA program (no egress parser and deparser and no psa_ingress_output_metadata): \
                 run v1model programs with simple_switch",
                p.display()
            ));
        }
    }
    simple_switch(args, false, mode)
}

/// `sluice simple_switch ARGS`: the bmv2 command line on live ports.
/// `grpc`: invoked as `simple_switch_grpc`, which serves P4Runtime on
/// 0.0.0.0:9559 unless told otherwise.
pub fn simple_switch(args: &[String], grpc: bool, mode: ExecMode) -> Result<(), String> {
    let mut a = parse(args)?;
    if a.help {
        print!("{USAGE}");
        return Ok(());
    }
    // As bmv2: the Thrift server always runs (port 9090 by default).
    a.live.thrift_port = Some(a.thrift_port.unwrap_or(9090));
    a.live.grpc_addr = a.grpc_server_addr.clone().or_else(|| grpc.then(|| "0.0.0.0:9559".to_string()));
    a.live.cpu_port = a.cpu_port;
    a.live.device_id = a.device_id.unwrap_or(0);
    a.live.mode = mode;
    if let Some(n) = a.priority_queues {
        eprintln!("note: --priority-queues {n} accepted; Sluice has no egress queues (packets go to egress at once)");
    }
    run(&a.live).map(|_| ())
}

/// Runs the switch on live ports until SIGINT or SIGTERM.
pub fn run(opts: &LiveOptions) -> Result<LiveStats, String> {
    if opts.null_forward && opts.ports.len() != 2 {
        return Err("--null-forward needs exactly two interfaces".into());
    }
    let json: String = match &opts.program {
        Some(p) => std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?,
        // --no-p4: an empty program drops every packet until one is loaded.
        None => NO_PROGRAM.to_string(),
    };
    let mut sw: Switch = match &opts.program {
        Some(p) => crate::load_with(p, opts.mode)?,
        None => sluice_engine::load_switch(NO_PROGRAM).map_err(|e| format!("internal empty program: {e}"))?,
    };
    if sw.mode() != opts.mode {
        sw.set_mode(opts.mode).map_err(|e| e.to_string())?;
    }
    for c in &opts.commands {
        let failed = crate::apply_commands(&mut sw, c, false)?;
        if failed > 0 {
            return Err(format!("{failed} command(s) of {} failed", c.display()));
        }
    }
    if opts.trace {
        sw.set_trace(true);
    }
    let cfg = LiveConfig {
        ports: opts.ports.clone(),
        pcap_dir: opts.pcap_dir.clone(),
        offload: opts.offload,
        workers: opts.workers.max(1),
        cpu_port: opts.cpu_port,
        profile: opts.profile,
        faults: opts.faults,
        memory: Vec::new(),
    };
    if let Some(wait) = opts.use_files {
        eprintln!("sluice: --use-files: starting in {wait} s");
        std::thread::sleep(Duration::from_secs_f64(wait.max(0.0)));
    }
    let node_opts = NodeOptions { kind: "p4", name: opts.name.clone(), duration: None, metrics: opts.metrics.clone() };
    if opts.null_forward {
        let nf = NullForward::new(opts.ports[0].port, opts.ports[1].port);
        let node = Node::start(nf, &cfg, None, &NodeOptions { kind: "null-forward", ..node_opts }, Vec::new())?;
        eprintln!(
            "sluice: null forwarder (no pipeline) between ports {} and {}",
            opts.ports[0].port, opts.ports[1].port
        );
        return node.run().result();
    }
    // The control servers hold a descriptor per client.
    crate::raise_descriptor_limit();
    let (events_tx, events_rx) = EventSink::channel();
    let up: UpSink<sluice_engine::runtime::Digest> = Arc::new(move |u| match u {
        Up::PacketIn(f) => events_tx.send(Event::PacketIn(f)),
        Up::Notification(d) => events_tx.send(Event::Digest(d)),
    });
    let mut node = Node::start(sw, &cfg, Some(up), &node_opts, Vec::new())?;
    let info = DeviceInfo {
        device_id: opts.device_id,
        thrift_port: opts.thrift_port,
        cpu_port: opts.cpu_port,
        ports: opts.ports.iter().map(|p| PortInfo { number: p.port, iface: p.iface.clone() }).collect(),
        // Pcap-file ports have no link to ask.
        link_up: if opts.use_files.is_some() { None } else { Some(sluice_ports::link_is_up) },
    };
    let device = Arc::new(Device::new(node.control().clone(), json.into(), info, Some(events_rx)));
    if let Some(port) = opts.thrift_port {
        node.serve(sluice_thrift::Thrift::new(device.clone(), port))?;
    }
    if let Some(addr) = &opts.grpc_addr {
        if let Err(e) = node.serve(sluice_p4runtime::P4Runtime::new(device.clone(), addr)) {
            return Err(node.fail(e));
        }
    }
    eprintln!(
        "sluice: forwarding on {} port(s) with {} worker(s){}",
        opts.ports.len(),
        cfg.workers,
        if opts.program.is_none() { " and no program loaded (--no-p4): every packet is dropped" } else { "" }
    );
    node.run().result()
}

/// The program `--no-p4` runs until a real one is loaded: it parses nothing
/// and drops every packet in ingress (`mark_to_drop`), as bmv2 does without a program.
const NO_PROGRAM: &str = include_str!("no_program.json");

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn a_tutorial_command_line_parses() {
        let a = parse(&args("-i 1@veth1 -i 2@veth3 --thrift-port 9090 --log-console program.json")).unwrap();
        assert_eq!(a.live.ports.len(), 2);
        assert_eq!(a.live.ports[1], PortSpec { port: 2, iface: "veth3".into(), backend: Backend::AfPacket });
        assert_eq!(a.thrift_port, Some(9090));
        assert!(a.live.trace);
        assert_eq!(a.live.program, Some(PathBuf::from("program.json")));
    }

    #[test]
    fn the_grpc_form_and_pcap_directory_parse() {
        let a = parse(&args(
            "--device-id 1 -i 1@tap:t0 --pcap /tmp/p --no-p4 -- --grpc-server-addr 0.0.0.0:9559 --cpu-port 255",
        ))
        .unwrap();
        assert_eq!(a.grpc_server_addr.as_deref(), Some("0.0.0.0:9559"));
        assert_eq!(a.cpu_port, Some(255));
        assert_eq!(a.live.pcap_dir, Some(PathBuf::from("/tmp/p")));
        assert_eq!(a.live.ports[0].backend, Backend::Tap);
        assert_eq!(a.live.program, None);
        let b = parse(&args("--pcap p.json")).unwrap();
        assert_eq!(b.live.pcap_dir, Some(PathBuf::from(".")));
        assert_eq!(b.live.program, Some(PathBuf::from("p.json")));
    }

    #[test]
    fn bad_command_lines_are_refused_with_a_reason() {
        for (line, want) in [
            ("--frobnicate p.json", "unknown option --frobnicate"),
            ("-i 1veth p.json", "is not PORT@IFACE"),
            ("-i 600@veth0 p.json", "out of range"),
            ("--thrift-port x p.json", "not a valid number"),
            ("-i 1@a -i 1@b p.json", ""),
            ("p.json -- --bogus", "unknown target option --bogus"),
            ("", "no JSON program"),
            ("a.json b.json", "more than one"),
            ("--use-files x p.json", "not a valid number"),
            ("--log-level loud p.json", "unknown level"),
        ] {
            match parse(&args(line)) {
                Err(e) => assert!(e.contains(want), "{line}: {e}"),
                Ok(a) => {
                    // Duplicate ports are refused when the switch starts.
                    assert!(want.is_empty() && a.live.ports.len() == 2, "{line} was accepted");
                }
            }
        }
    }
}
