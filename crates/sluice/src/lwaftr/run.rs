//! `sluice lwaftr run`: the lwAFTR on live interfaces as a node
//! (`sluice_node`), and the commands that talk to a running instance
//! through its control socket: `query` (its counters, as Snabb's `lwaftr
//! query`) and `config` (Snabb's `snabb config get|set|add|remove|
//! get-state` with `snabb-softwire-v3` paths), whose verbs
//! `sluice_lwaftr::control::ConfigServer` answers.

use std::io::Read;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use sluice_dataplane::Stop;
use sluice_live::{Backend, LiveConfig, PortSpec};
use sluice_lwaftr::control::ConfigServer;
use sluice_lwaftr::counters::Counters;
use sluice_lwaftr::{Lwaftr, Options};
use sluice_node::{Control, Node, NodeOptions, Server};

/// What `run` is started with.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    pub conf: PathBuf,
    /// `[af_packet:|af_xdp:]IFACE` of the external (IPv4) side.
    pub v4: Option<String>,
    /// `[af_packet:|af_xdp:]IFACE` of the internal (IPv6) side.
    pub v6: Option<String>,
    /// One interface carrying both sides.
    pub on_a_stick: Option<String>,
    pub workers: usize,
    /// Instance (`device`) of the configuration; the first when `None`.
    pub device: Option<String>,
    /// Queue of the instance; the first when `None`.
    pub queue: Option<u8>,
    /// The instance's name (its control socket answers to it too).
    pub name: Option<String>,
    /// Stop after this many seconds (else at SIGINT or SIGTERM).
    pub duration: Option<f64>,
    /// Print one CSV line per second: decapsulated and encapsulated Mpps and Gbps.
    pub verbose: bool,
    /// `--metrics ADDR`: Prometheus metrics over HTTP.
    pub metrics: Option<String>,
    /// `--gnmi ADDR`: the ports over gNMI.
    pub gnmi: Option<String>,
}

/// `PORT@[backend:]IFACE` for the live loop.
fn port_spec(port: u32, iface: &str) -> Result<PortSpec, String> {
    let spec = PortSpec::parse(&format!("{port}@{iface}"))?;
    if spec.backend == Backend::Tap {
        return Err(format!("{iface}: the lwAFTR runs on af_packet: or af_xdp: interfaces"));
    }
    Ok(spec)
}

/// Runs the lwAFTR until SIGINT or SIGTERM (or `--duration`), then prints
/// the non-zero counters and the ports' statistics.
pub fn run(a: &RunArgs) -> Result<(), String> {
    let conf = super::load_conf(&a.conf)?;
    let (ports, on_a_stick) = match (&a.v4, &a.v6, &a.on_a_stick) {
        (Some(v4), Some(v6), None) => (vec![port_spec(0, v4)?, port_spec(1, v6)?], false),
        (None, None, Some(i)) => (vec![port_spec(0, i)?], true),
        _ => return Err("give --v4 IFACE and --v6 IFACE, or --on-a-stick IFACE".into()),
    };
    let opts = Options { on_a_stick, ..Options::default() };
    let plane = Lwaftr::for_queue(&conf, a.device.as_deref(), a.queue, opts)?;
    let s = plane.settings();
    eprintln!(
        "lwaftr: {} softwires; external {} ({}), internal {} ({})",
        plane.binding_table().len(),
        s.external.queue.ip,
        ports[0].iface,
        s.internal.queue.ip,
        ports.get(1).map_or("on a stick", |p| p.iface.as_str()),
    );
    let cfg = LiveConfig { ports, offload: false, workers: a.workers.max(1), ..LiveConfig::default() };
    let node_opts = NodeOptions {
        kind: "lwaftr",
        name: a.name.clone(),
        duration: a.duration.map(Duration::from_secs_f64),
        metrics: a.metrics.clone(),
    };
    let server = ConfigServer::new(conf, a.device.clone(), a.queue, opts);
    let mut node = Node::start(plane, &cfg, None, &node_opts, vec![Box::new(server)])?;
    eprintln!("lwaftr: running with {} worker(s)", cfg.workers);
    if let Some(addr) = &a.gnmi {
        if let Err(e) = node.serve(sluice_gnmi::GnmiServer::new(addr)) {
            return Err(node.fail(e));
        }
    }
    if a.verbose {
        if let Err(e) = node.serve(Rates) {
            return Err(node.fail(e));
        }
    }
    let done = node.run();
    let counters = done.control.view(|d| sluice_lwaftr::control::format_counters(d.lw_counters(), None, false));
    println!("{}", counters.trim_end());
    done.result().map(|_| ())
}

/// `--verbose`: a CSV line a second of decapsulated and encapsulated
/// Mpps and Gbps (Snabb's `lwaftr run -v` columns).
struct Rates;

impl Server<Lwaftr> for Rates {
    fn name(&self) -> &'static str {
        "rates"
    }

    fn start(&mut self, _: &Control<Lwaftr>) -> Result<String, String> {
        println!("Time (s),Decap. MPPS,Decap. Gbps,Encap. MPPS,Encap. Gbps");
        Ok(String::new())
    }

    fn run(&mut self, control: &Control<Lwaftr>, stop: &Stop) {
        let started = Instant::now();
        let mut last = Counters::default();
        for second in 1u64.. {
            if stop.wait(Some(started + Duration::from_secs(second))) {
                return;
            }
            let c = control.read(|d| *d.lw_counters());
            let (n, o) = (&c.snabb, &last.snabb);
            println!(
                "{second},{:.6},{:.6},{:.6},{:.6}",
                (n.out_ipv4_packets - o.out_ipv4_packets) as f64 / 1e6,
                (n.out_ipv4_bytes - o.out_ipv4_bytes) as f64 * 8.0 / 1e9,
                (n.out_ipv6_packets - o.out_ipv6_packets) as f64 / 1e6,
                (n.out_ipv6_bytes - o.out_ipv6_bytes) as f64 * 8.0 / 1e9,
            );
            last = c;
        }
    }
}

/// Sends `req` to lwAFTR instance `who` (a PID or a name; the only running
/// one when `None`) and returns its answer.
pub fn request(who: Option<&str>, req: &str) -> Result<String, String> {
    let path = sluice_node::socket::find(who, Some("lwaftr"))?;
    sluice_node::socket::ask(&path, req)
}

/// `sluice lwaftr query [PID|NAME] [SUBSTRING]`: the running instance's
/// non-zero counters (every counter with `all`) whose names contain SUBSTRING.
pub fn query(who: Option<&str>, filter: Option<&str>, all: bool) -> Result<(), String> {
    let out = request(who, if all { "counters-all" } else { "counters" })?;
    for l in out.lines() {
        if filter.is_none_or(|f| l.split(':').next().is_some_and(|n| n.contains(f))) {
            println!("{l}");
        }
    }
    Ok(())
}

/// What `config` is given (Snabb's `snabb config` command line).
#[derive(Debug, Clone, Default)]
pub struct ConfigArgs {
    /// get, get-state, set, add or remove.
    pub verb: String,
    /// `-s`: the schema (snabb-softwire-v3, the only one served).
    pub schema: Option<String>,
    /// `-f`: yang or xpath.
    pub format: Option<String>,
    pub print_default: bool,
    /// PID or name of the instance.
    pub instance: String,
    pub path: String,
    /// The value of set and add (`None`: standard input).
    pub value: Option<String>,
}

/// `sluice lwaftr config VERB [-s SCHEMA] [-f FORMAT] [--print-default] ID PATH [VALUE]`:
/// Snabb's `snabb config`; prints what get and get-state return.
pub fn config(a: &ConfigArgs) -> Result<(), String> {
    if let Some(s) = a.schema.as_deref().filter(|s| *s != "snabb-softwire-v3") {
        return Err(format!("unsupported schema: {s} (Sluice's lwAFTR serves snabb-softwire-v3)"));
    }
    let mut line = a.verb.clone();
    if let Some(f) = &a.format {
        line.push_str(&format!(" --format {f}"));
    }
    if a.print_default {
        line.push_str(" --print-default");
    }
    line.push(' ');
    line.push_str(&a.path);
    if matches!(a.verb.as_str(), "set" | "add") {
        let value = match &a.value {
            Some(v) if v != "-" => v.clone(),
            _ => {
                let mut s = String::new();
                std::io::stdin().read_to_string(&mut s).map_err(|e| format!("standard input: {e}"))?;
                s
            }
        };
        line.push('\n');
        line.push_str(&value);
    }
    let path = sluice_node::socket::find(Some(&a.instance), None)
        .map_err(|_| format!("Could not connect to config leader socket on Snabb instance {:?}", a.instance))?;
    print!("{}", sluice_node::socket::ask(&path, &line)?);
    Ok(())
}
