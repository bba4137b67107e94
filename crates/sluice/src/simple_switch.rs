//! The `simple_switch` command line, so that scripts written for bmv2 only
//! change the binary's path (`sluice simple_switch ...`, or the `sluice`
//! binary invoked through a symlink named `simple_switch` or
//! `simple_switch_grpc`).
//!
//! Every option bmv2 documents is either honoured or refused with a
//! message: none is silently ignored.

use std::path::PathBuf;

use crate::live::{LiveOptions, PortSpec};

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
    let mut out = SimpleSwitchArgs {
        live: LiveOptions { offload: true, workers: 1, ..Default::default() },
        ..Default::default()
    };
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
            p.backend = crate::live::Backend::Files;
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
        assert_eq!(
            a.live.ports[1],
            PortSpec { port: 2, iface: "veth3".into(), backend: crate::live::Backend::AfPacket }
        );
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
        assert_eq!(a.live.ports[0].backend, crate::live::Backend::Tap);
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
