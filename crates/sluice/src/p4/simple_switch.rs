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
use sluice_dataplane::Level;
use sluice_dataplane::NullForward;
use sluice_engine::{ExecMode, Switch};
use sluice_live::log::{FileLog, LogTarget};
pub use sluice_live::{Backend, LiveStats, PortSpec};
use sluice_live::{LiveConfig, TraceTaps, Up, UpSink};
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
    /// `--disable-swap`: once a program runs, no other replaces it.
    pub swap_disabled: bool,
    /// A `serialize_state` dump restored before the commands (`--restore-state`).
    pub restore_state: Option<PathBuf>,
    pub ports: Vec<PortSpec>,
    /// `--pcap DIR`: record `<iface>_in.pcap` and `<iface>_out.pcap`.
    pub pcap_dir: Option<PathBuf>,
    /// Where bmv2's per-packet log goes (`--log-console`, `--log-file`).
    pub log: Option<LogTarget>,
    /// The least level logged (`--log-level`, bmv2's default: trace).
    pub log_level: Option<Level>,
    /// bmv2's event stream (`--nanolog ADDR`).
    pub nanolog: Option<String>,
    /// Bytes of each received and sent frame logged at info level
    /// (`--dump-packet-data`; 0: none).
    pub dump_packet_data: usize,
    /// Where learning notifications are published (`--notifications-addr`;
    /// default `ipc:///tmp/bmv2-<device id>-notifications.ipc`, as bmv2).
    pub notifications: Option<String>,
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
    /// Over TLS (`--grpc-server-ssl` and its certificate options).
    pub grpc_tls: Option<sluice_p4runtime::Tls>,
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
    /// `--priority-queues N`: egress queues per port (1: no traffic
    /// manager until a queue depth or rate is set).
    pub priority_queues: usize,
}

impl Default for LiveOptions {
    fn default() -> LiveOptions {
        LiveOptions {
            program: None,
            mode: ExecMode::Compiled,
            commands: Vec::new(),
            swap_disabled: false,
            restore_state: None,
            ports: Vec::new(),
            pcap_dir: None,
            log: None,
            log_level: Some(Level::Trace),
            nanolog: None,
            notifications: None,
            dump_packet_data: 0,
            offload: true,
            workers: 1,
            null_forward: false,
            use_files: None,
            thrift_port: None,
            grpc_addr: None,
            grpc_tls: None,
            cpu_port: None,
            device_id: 0,
            profile: false,
            faults: None,
            metrics: None,
            name: None,
            priority_queues: 1,
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
    /// `--dp-grpc-server-addr`: packet I/O over gRPC instead of interfaces.
    pub dp_grpc_server_addr: Option<String>,
    pub priority_queues: Option<u32>,
    /// Notes for options accepted without an effect of their own.
    pub notes: Vec<String>,
    pub help: bool,
    /// `--version`, `--json-version`: print and exit.
    pub print: Option<String>,
}

/// The options text printed by `--help`.
pub const USAGE: &str = "\
usage: sluice simple_switch [options] <path to JSON config file> [-- target options]

Options of bmv2's simple_switch, simple_switch_grpc and psa_switch:
  -i, --interface PORT@IFACE   attach IFACE as PORT (repeatable; none: add ports later with
                               the CLI's port_add); IFACE may be af_packet:NAME (default) or
                               tap:NAME (Sluice creates the TAP interface)
  --thrift-port N              Thrift runtime server port (default 9090; simple_switch_CLI talks to it)
  --device-id N                device id (in event messages and the default addresses)
  --nanolog ADDR               bmv2's event stream (packet in/out, parser, tables, actions...)
                               published over nanomsg pub/sub on ipc://PATH or tcp://HOST:PORT
  --notifications-addr ADDR    learning (digests) and ageing notifications published over nanomsg pub/sub as
                               bmv2's (default ipc:///tmp/bmv2-<device id>-notifications.ipc;
                               the simple_switch form: simple_switch_grpc sends digests to P4Runtime)
  --log-console                per-packet log on standard output, as bmv2's
  --log-file PATH              per-packet log in PATH (rotated as NAME.1.EXT... at --log-file-max-size)
  --log-level L                trace (default), debug, info, warn, error or off
  --log-flush                  flush the log file after every batch of lines
  --log-file-max-size BYTES    rotate the log file at this size (default 5242880)
  --log-file-max-files N       rotated log files kept (default 3)
  --dump-packet-data N         log the first N bytes of each frame received and sent (level info)
  --packet-in ADDR             packet I/O over a nanomsg PAIR socket bound at ipc://PATH or
                               tcp://HOST:PORT instead of interfaces (-i is ignored), in bmv2's
                               message layout (PTF's nn platform: --device-socket 0-{1,2}@ADDR)
  --pcap [DIR]                 record every port's traffic in DIR/<iface>_in.pcap and _out.pcap
  --use-files WAIT             every interface X is the pair of files X_in.pcap (read) and
                               X_out.pcap (written), processed after WAIT seconds
  --restore-state FILE         start with the state a serialize_state dump holds (tables, action
                               profiles, meter rates), taken from the same program
  --no-p4                      start without a program: every packet is dropped
  --max-port-count N           at most N interfaces (default 512)
  --json FILE                  the program (same as the positional argument)
  -v, --version                print the version
  --json-version               print the newest BMv2 JSON version read
Refused, with the reason: --debugger, --debugger-addr,
  --load-modules, --drop-port other than 511
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
Target options after `--`:
  --grpc-server-addr ADDR      P4Runtime server address (default 0.0.0.0:9559 in the simple_switch_grpc form)
  --grpc-server-ssl            serve P4Runtime over TLS, with:
  --grpc-server-cert FILE      the server's certificate (PEM)
  --grpc-server-key FILE       its private key (PEM)
  --grpc-server-with-client-auth
                               require a client certificate signed by:
  --grpc-server-cacert FILE    the clients' CA (PEM)
  --dp-grpc-server-addr ADDR   packet I/O over gRPC (bmv2's p4.bm.DataplaneInterface) on ADDR instead
                               of interfaces (-i is ignored)
  --cpu-port N                 the CPU port (P4Runtime packet-in/out)
  --enable-swap                accepted: Sluice accepts a new program unless --disable-swap
  --disable-swap               refuse a program that would replace the running one (Thrift
                               load_new_config/swap_configs, P4Runtime pipeline changes)
  --drop-port 511              accepted (511 is the drop port)
  --priority-queues N          N strict-priority egress queues per port (priority chooses one)
  --max-mc-groups N, --max-l1-entries N, --max-l2-entries N
                               accepted with a note: Sluice's multicast tables grow as needed
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

/// Why an option of bmv2's that Sluice does not implement is refused.
fn refused(opt: &str) -> Option<&'static str> {
    Some(match opt {
        "--debugger" | "--debugger-addr" => {
            "Sluice has no bmv2 debugger (as a bmv2 built without --enable-debugger, which refuses it too)"
        }
        "--load-modules" => "extern modules (shared libraries for bmv2) cannot be loaded",
        _ => return None,
    })
}

/// Parses simple_switch's arguments (without the program name).
pub fn parse(args: &[String]) -> Result<SimpleSwitchArgs, String> {
    let mut out = SimpleSwitchArgs::default();
    let mut positional: Vec<String> = Vec::new();
    let mut no_p4 = false;
    let mut max_ports = 512usize;
    let mut packet_in = None::<String>;
    let (mut ssl, mut tls) = (false, sluice_p4runtime::Tls::default());
    let (mut log_console, mut log_file, mut log_flush) = (false, None::<PathBuf>, false);
    let (mut max_size, mut max_files) = (None::<u64>, None::<u32>);
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
        if let Some(why) = refused(opt) {
            return Err(format!("option {opt} is not supported: {why}"));
        }
        if target {
            match opt {
                "--grpc-server-addr" => out.grpc_server_addr = Some(val(&mut i)?),
                "--dp-grpc-server-addr" => out.dp_grpc_server_addr = Some(val(&mut i)?),
                "--grpc-server-ssl" => ssl = true,
                "--grpc-server-with-client-auth" => tls.client_auth = true,
                "--grpc-server-cert" => tls.cert = PathBuf::from(val(&mut i)?),
                "--grpc-server-key" => tls.key = PathBuf::from(val(&mut i)?),
                "--grpc-server-cacert" => tls.ca = Some(PathBuf::from(val(&mut i)?)),
                "--cpu-port" => out.cpu_port = Some(number(&val(&mut i)?, opt)?),
                "--enable-swap" => {}
                "--disable-swap" => out.live.swap_disabled = true,
                "--drop-port" => {
                    let p: u32 = number(&val(&mut i)?, opt)?;
                    if p != 511 {
                        return Err(format!(
                            "option --drop-port {p} is not supported: Sluice's drop port is 511 (bmv2's default)"
                        ));
                    }
                }
                "--priority-queues" => out.priority_queues = Some(number(&val(&mut i)?, opt)?),
                "--max-mc-groups" | "--max-l1-entries" | "--max-l2-entries" => {
                    let n: u32 = number(&val(&mut i)?, opt)?;
                    out.notes.push(format!("{opt} {n} accepted: Sluice's multicast tables grow as needed"));
                }
                _ => {
                    return Err(format!(
                        "unknown target option {raw} (see `sluice simple_switch --help` for those after `--`)"
                    ))
                }
            }
            i += 1;
            continue;
        }
        match opt {
            "-h" | "--help" => out.help = true,
            "-v" | "--version" => out.print = Some(env!("CARGO_PKG_VERSION").to_string()),
            "--json-version" => out.print = Some(sluice_json::MAX_JSON_VERSION.to_string()),
            "-i" | "--interface" => out.live.ports.push(PortSpec::parse(&val(&mut i)?)?),
            "--thrift-port" => out.thrift_port = Some(number(&val(&mut i)?, opt)?),
            "--device-id" => out.device_id = Some(number(&val(&mut i)?, opt)?),
            "--nanolog" => {
                let a = val(&mut i)?;
                sluice_nanomsg::Endpoint::parse(&a).map_err(|e| format!("option --nanolog: {e}"))?;
                out.live.nanolog = Some(a);
            }
            "--notifications-addr" => {
                let a = val(&mut i)?;
                sluice_nanomsg::Endpoint::parse(&a).map_err(|e| format!("option --notifications-addr: {e}"))?;
                out.live.notifications = Some(a);
            }
            "--packet-in" => {
                let a = val(&mut i)?;
                sluice_nanomsg::Endpoint::parse(&a).map_err(|e| format!("option --packet-in: {e}"))?;
                packet_in = Some(a);
            }
            "--log-console" => log_console = true,
            "--log-file" => log_file = Some(PathBuf::from(val(&mut i)?)),
            "--log-flush" => log_flush = true,
            "--dump-packet-data" => out.live.dump_packet_data = number(&val(&mut i)?, opt)?,
            "--log-file-max-size" => {
                let n: u64 = number(&val(&mut i)?, opt)?;
                if n == 0 {
                    return Err("option --log-file-max-size: the size must be above 0".into());
                }
                max_size = Some(n);
            }
            "--log-file-max-files" => max_files = Some(number(&val(&mut i)?, opt)?),
            "--log-level" | "-L" => {
                let l = val(&mut i)?;
                out.live.log_level =
                    Level::parse(&l).map_err(|e| format!("{e} (trace, debug, info, warn, error, off)"))?;
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
            "--restore-state" => out.live.restore_state = Some(PathBuf::from(val(&mut i)?)),
            "--max-port-count" => {
                let n: i64 = number(&val(&mut i)?, opt)?;
                if n < 0 {
                    return Err(format!("option --max-port-count: {n} is negative"));
                }
                max_ports = n as usize;
            }
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
    if out.help || out.print.is_some() {
        return Ok(out);
    }
    match (positional.len(), no_p4) {
        (0, true) => {}
        (1, false) => out.live.program = Some(PathBuf::from(&positional[0])),
        (0, false) => return Err("no JSON program given (or use --no-p4)".into()),
        (_, true) => return Err("--no-p4 and a JSON program were both given".into()),
        _ => return Err(format!("more than one JSON program given: {}", positional.join(", "))),
    }
    if out.live.ports.len() > max_ports {
        return Err(format!("{} interfaces given, more than --max-port-count {max_ports}", out.live.ports.len()));
    }
    let tls_given = tls != sluice_p4runtime::Tls::default();
    match (ssl, tls_given) {
        (true, _) if tls.cert.as_os_str().is_empty() || tls.key.as_os_str().is_empty() => {
            return Err("--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key".into())
        }
        (true, _) if tls.client_auth && tls.ca.is_none() => {
            return Err("--grpc-server-with-client-auth needs --grpc-server-cacert".into())
        }
        (true, _) => out.live.grpc_tls = Some(tls),
        (false, true) => {
            return Err(
                "--grpc-server-cert, -key, -cacert and -with-client-auth take effect with --grpc-server-ssl".into()
            )
        }
        (false, false) => {}
    }
    if let Some(addr) = out.dp_grpc_server_addr.clone() {
        if packet_in.is_some() {
            return Err("--packet-in and --dp-grpc-server-addr are exclusive".into());
        }
        if !out.live.ports.is_empty() {
            out.notes.push("--dp-grpc-server-addr: the interfaces given with -i are ignored".into());
        }
        out.live.ports = vec![PortSpec { port: 0, iface: addr, backend: Backend::Grpc }];
    }
    if let Some(addr) = packet_in {
        if out.live.use_files.is_some() {
            return Err("--use-files and --packet-in are exclusive".into());
        }
        if !out.live.ports.is_empty() {
            out.notes.push("--packet-in: the interfaces given with -i are ignored, as bmv2 ignores them".into());
        }
        out.live.ports = vec![PortSpec { port: 0, iface: addr, backend: Backend::PacketIn }];
    }
    if out.live.use_files.is_some() {
        for p in out.live.ports.iter_mut() {
            p.backend = Backend::Files;
        }
    }
    out.live.log = match (log_console, log_file) {
        (true, Some(_)) => return Err("--log-console and --log-file are exclusive".into()),
        (true, None) => Some(LogTarget::Stdout),
        (false, Some(path)) => {
            let mut f = FileLog::new(path);
            f.flush = log_flush;
            f.max_size = max_size.unwrap_or(f.max_size);
            f.max_files = max_files.unwrap_or(f.max_files);
            Some(LogTarget::File(f))
        }
        (false, None) => {
            if log_flush {
                out.notes.push("Ignoring --log-flush option because --log-file not specified".into());
            }
            None
        }
    };
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
    if let Some(p) = &a.print {
        println!("{p}");
        return Ok(());
    }
    for n in &a.notes {
        eprintln!("note: {n}");
    }
    // As bmv2: the Thrift server always runs (port 9090 by default).
    a.live.thrift_port = Some(a.thrift_port.unwrap_or(9090));
    a.live.grpc_addr = a.grpc_server_addr.clone().or_else(|| grpc.then(|| "0.0.0.0:9559".to_string()));
    a.live.cpu_port = a.cpu_port;
    a.live.device_id = a.device_id.unwrap_or(0);
    a.live.mode = mode;
    a.live.priority_queues = a.priority_queues.map_or(1, |n| n.max(1) as usize);
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
    if opts.priority_queues > 1 {
        sw.set_priority_queues(opts.priority_queues);
    }
    if let Some(path) = &opts.restore_state {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("state dump input file {} cannot be opened: {e}", path.display()))?;
        let n = sluice_control::cli::state::restore(&mut sw, &sluice_control::cli::state::config_md5(&json), &text)
            .map_err(|e| format!("--restore-state {}: {e}", path.display()))?;
        eprintln!("sluice: state restored from {} ({n} commands)", path.display());
    }
    for c in &opts.commands {
        let failed = crate::apply_commands(&mut sw, c, false)?;
        if failed > 0 {
            return Err(format!("{failed} command(s) of {} failed", c.display()));
        }
    }
    let mut taps = TraceTaps { device_id: opts.device_id, ..TraceTaps::default() };
    if let Some(target) = &opts.log {
        sluice_live::log::set_target(target.clone())?;
        taps.log_level = opts.log_level;
        if opts.dump_packet_data > 0 && opts.log_level.is_none_or(|l| l > Level::Info) {
            eprintln!(
                "sluice: warning: --dump-packet-data logs at level info, which the log level excludes: it is ignored"
            );
        }
        taps.dump_packet_data = opts.dump_packet_data;
    }
    if let Some(addr) = &opts.nanolog {
        let p = sluice_nanomsg::Publisher::bind(addr).map_err(|e| format!("--nanolog: {e}"))?;
        eprintln!("sluice: event stream (--nanolog) published on {}", p.address());
        taps.events = Some(Arc::new(p));
    }
    let mut cfg = LiveConfig {
        ports: opts.ports.clone(),
        pcap_dir: opts.pcap_dir.clone(),
        offload: opts.offload,
        workers: opts.workers.max(1),
        cpu_port: opts.cpu_port,
        profile: opts.profile,
        faults: opts.faults,
        memory: Vec::new(),
        trace: taps.clone(),
        channel: None,
    };
    if let Some(p) = opts.ports.iter().find(|p| p.backend == Backend::Grpc) {
        let channel =
            sluice_ports::channel::ChannelPorts::new(&p.iface).map_err(|e| format!("--dp-grpc-server-addr: {e}"))?;
        let local = sluice_p4runtime::dataplane::start(&p.iface, opts.device_id, channel.clone())?;
        eprintln!("sluice: packet I/O server (--dp-grpc-server-addr) listening on {local}");
        cfg.channel = Some(channel);
    }
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
        // (The ports of packet I/O over nanomsg or gRPC are the peer's business.)
        ports: opts
            .ports
            .iter()
            .filter(|p| !p.backend.carries_every_port())
            .map(|p| PortInfo { number: p.port, iface: p.iface.clone() })
            .collect(),
        // Pcap-file ports have no link to ask.
        link_up: if opts.use_files.is_some() { None } else { Some(sluice_ports::link_is_up) },
        swap_disabled: opts.swap_disabled,
        started_without_program: opts.program.is_none(),
    };
    let device = Arc::new(Device::new(node.control().clone(), json.into(), info, Some(events_rx)));
    if opts.grpc_addr.is_none() {
        start_notifications(&device, opts)?;
    }
    if let Some(port) = opts.thrift_port {
        node.serve(sluice_thrift::Thrift::new(device.clone(), port))?;
    }
    if let Some(addr) = &opts.grpc_addr {
        if let Err(e) = node.serve(sluice_p4runtime::P4Runtime::new(device.clone(), addr, opts.grpc_tls.clone())) {
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

/// Learning and ageing notifications for controllers on the Thrift API:
/// the device's digests become bmv2's `LEA|` messages, entries idle past
/// their TTL its `AGE|` messages, on a nanomsg publisher at
/// `--notifications-addr` (bmv2's default address when not given: a switch
/// that cannot bind the default one runs without, with a warning).
fn start_notifications(device: &Arc<Device>, opts: &LiveOptions) -> Result<(), String> {
    let given = opts.notifications.is_some();
    let addr = opts.notifications.clone().unwrap_or_else(|| device.notifications_address());
    let publisher = match sluice_nanomsg::Publisher::bind(&addr) {
        Ok(p) => Arc::new(p),
        Err(e) if given => return Err(format!("--notifications-addr: {e}")),
        Err(e) => {
            eprintln!("sluice: warning: learning notifications are not published ({e}); give --notifications-addr");
            return Ok(());
        }
    };
    eprintln!("sluice: learning and ageing notifications published on {}", publisher.address());
    device.set_notifications_address(publisher.address());
    let ageing = publisher.clone();
    if !device.start_learning(Box::new(move |m: &[u8]| publisher.publish([m]))) {
        return Err("learning notifications: the device's events are taken".into());
    }
    if !device.start_ageing(Box::new(move |m: &[u8]| ageing.publish([m]))) {
        return Err("ageing notifications: their thread could not start".into());
    }
    Ok(())
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
        assert_eq!(a.live.log, Some(LogTarget::Stdout));
        assert_eq!(a.live.log_level, Some(Level::Trace), "bmv2's default level");
        assert_eq!(a.live.program, Some(PathBuf::from("program.json")));
    }

    /// The command line bmv2's Mininet switch class builds (options after
    /// the JSON, the event stream on an ipc address), and the log options.
    #[test]
    fn mininet_and_log_options_parse() {
        let a = parse(&args(
            "-i 1@s1-eth1 -i 2@s1-eth2 --pcap --thrift-port 9090 --nanolog ipc:///tmp/bm-0-log.ipc \
             --device-id 0 simple_router.json --log-console",
        ))
        .unwrap();
        assert_eq!(a.live.nanolog.as_deref(), Some("ipc:///tmp/bm-0-log.ipc"));
        assert_eq!(a.live.log, Some(LogTarget::Stdout));
        assert_eq!(a.live.pcap_dir, Some(PathBuf::from(".")));
        assert_eq!(a.live.program, Some(PathBuf::from("simple_router.json")));
        let b = parse(&args(
            "--log-file /tmp/s1.log --log-flush --log-level debug --log-file-max-size 1000 --log-file-max-files 2 p.json",
        ))
        .unwrap();
        let want = FileLog { path: "/tmp/s1.log".into(), flush: true, max_size: 1000, max_files: 2 };
        assert_eq!(b.live.log, Some(LogTarget::File(want)));
        assert_eq!(b.live.log_level, Some(Level::Debug));
        let c = parse(&args("--log-level off --max-port-count 4 -i 1@a --no-p4")).unwrap();
        assert_eq!(c.live.log_level, None);
        assert!(c.live.log.is_none());
        let d = parse(&args("--no-p4 -- --enable-swap --drop-port 511 --max-mc-groups 10")).unwrap();
        assert!(d.live.ports.is_empty(), "no interface at all is a valid start");
        assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
        assert_eq!(parse(&args("--json-version")).unwrap().print.as_deref(), Some("2.23"));
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
    fn packet_io_over_nanomsg_or_grpc_replaces_the_interfaces() {
        let a = parse(&args("-i 1@veth0 --packet-in ipc:///tmp/s.ipc p.json")).unwrap();
        assert_eq!(
            a.live.ports,
            vec![PortSpec { port: 0, iface: "ipc:///tmp/s.ipc".into(), backend: Backend::PacketIn }]
        );
        assert!(a.notes.iter().any(|n| n.contains("ignored")), "{:?}", a.notes);
        let g = parse(&args("p.json -- --dp-grpc-server-addr 127.0.0.1:9560 --disable-swap")).unwrap();
        assert_eq!(g.live.ports, vec![PortSpec { port: 0, iface: "127.0.0.1:9560".into(), backend: Backend::Grpc }]);
        assert!(g.live.swap_disabled);
        let e = parse(&args("--packet-in ipc:///tmp/s.ipc p.json -- --dp-grpc-server-addr 127.0.0.1:1")).unwrap_err();
        assert!(e.contains("exclusive"), "{e}");
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
            ("--log-level loud p.json", "Invalid value loud for --log-level"),
            ("--log-console --log-file x p.json", "--log-console and --log-file are exclusive"),
            ("--nanolog inproc://x p.json", "option --nanolog"),
            ("--debugger p.json", "option --debugger is not supported: Sluice has no bmv2 debugger"),
            ("--packet-in ipc:///tmp/x --use-files 0 p.json", "--use-files and --packet-in are exclusive"),
            ("--packet-in udp://x p.json", "option --packet-in: udp://x: not a nanomsg address"),
            ("--restore-state", "option --restore-state needs a value"),
            ("p.json -- --grpc-server-ssl", "--grpc-server-ssl needs --grpc-server-cert and --grpc-server-key"),
            ("p.json -- --grpc-server-cert c.pem", "take effect with --grpc-server-ssl"),
            (
                "p.json -- --grpc-server-ssl --grpc-server-cert c --grpc-server-key k --grpc-server-with-client-auth",
                "needs --grpc-server-cacert",
            ),
            ("p.json -- --drop-port 255", "drop port is 511"),
            ("--max-port-count 1 -i 1@a -i 2@b p.json", "more than --max-port-count 1"),
            ("--log-file-max-size 0 --log-file l p.json", "above 0"),
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
