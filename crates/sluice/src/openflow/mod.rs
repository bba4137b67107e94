//! The OpenFlow switch's commands: `sluice openflow` (the switch on live
//! interfaces, this file), `openflow-bench` (`bench.rs`, in memory against
//! the P4 router) and `openflow-flow-rate` (`flow_rate.rs`).
//!
//! `sluice openflow -i 1@veth1 -i 2@veth2 ... [--datapath-id ID]
//! [--controller tcp:IP:PORT]... [--listen ptcp:PORT[:IP]]... [--workers N]
//! [--fail-mode secure|standalone] [--inactivity-probe SECS] [--local NAME]
//! [--protocols OpenFlow10,OpenFlow13,OpenFlow14] [--queue PORT:QUEUE:max-rate=BPS]...`:
//! the switch runs as a node (`sluice_node`) whose one control server is
//! the OpenFlow agent, until SIGINT or SIGTERM.

pub mod bench;
pub mod flow_rate;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use sluice_live::{LiveConfig, PortSpec};
use sluice_node::{Node, NodeOptions};
use sluice_ofagent::{Agent, AgentConfig, FailMode};
use sluice_ofswitch::switch::{QueueConfig, LOCAL_LIVE_PORT};
use sluice_ofswitch::{OfSwitch, PortInfo};

/// The arguments of `sluice openflow`.
#[derive(Debug, Clone, clap::Args)]
pub struct OpenflowArgs {
    /// A port: `PORT@IFACE` (AF_PACKET), `PORT@af_xdp:IFACE` or `PORT@tap:NAME`; PORT is the OpenFlow port number (1-510).
    #[arg(short = 'i', long = "interface", required = true)]
    pub interfaces: Vec<String>,
    /// Datapath id (decimal, or hex with 0x); default: from the first port's MAC address.
    #[arg(long)]
    pub datapath_id: Option<String>,
    /// A controller to connect to, `tcp:IP:PORT` (reconnects with back-off).
    #[arg(long = "controller")]
    pub controllers: Vec<String>,
    /// Accept controller connections, `ptcp:PORT[:IP]` (default ptcp:6653:127.0.0.1 when no controller is given).
    #[arg(long = "listen")]
    pub listen: Vec<String>,
    /// Worker threads.
    #[arg(long, default_value_t = 1)]
    pub workers: usize,
    /// Carry virtio-net offload headers on AF_PACKET ports.
    #[arg(long)]
    pub offload: bool,
    /// Stop after this many seconds.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Walk the tables for every packet (no flow cache: slower, for comparison and debugging).
    #[arg(long)]
    pub no_flow_cache: bool,
    /// At exit, print the native code of the tables compiled to it (Cranelift IR).
    #[arg(long)]
    pub show_code: bool,
    /// Without a controller: `secure` keeps the flows and nothing else; `standalone` forwards as a MAC-learning switch after three inactivity probes without one (at once with no --controller), until one connects.
    #[arg(long, default_value = "secure")]
    pub fail_mode: String,
    /// The LOCAL port: a TAP interface of this name that Sluice creates, the switch's own interface to the host's network stack (Open vSwitch's bridge-local port).
    #[arg(long)]
    pub local: Option<String>,
    /// Seconds of silence on a connection before an echo request; three close it.
    #[arg(long, default_value_t = 5.0)]
    pub inactivity_probe: f64,
    /// Controller connections open at once; one more is closed as soon as it is accepted (counted and reported).
    #[arg(long, default_value_t = sluice_ofagent::agent::MAX_CONNECTIONS as u32, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Serve Prometheus metrics at http://ADDR/metrics (`HOST:PORT`, or `:PORT` for every address).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// The instance's name, for `sluice top NAME` (default: its PID).
    #[arg(long)]
    pub name: Option<String>,
    /// Serve gNMI at ADDR (`HOST:PORT`): the ports in the OpenConfig interfaces model (names, ids, status, counters; enable or disable by Set).
    #[arg(long, value_name = "ADDR")]
    pub gnmi: Option<String>,
    /// A port queue, `PORT:QUEUE[:min-rate=BPS,max-rate=BPS,depth=N]` (rates in bit/s, k/M/G suffixes; depth in packets, default 1000): flows send into it with `set_queue:QUEUE` (1.0: `enqueue:PORT:QUEUE`); it is shaped to its max-rate. Repeat for more queues.
    #[arg(long = "queue", value_name = "SPEC")]
    pub queues: Vec<String>,
    /// The OpenFlow versions spoken, comma-separated, as Open vSwitch's bridge `protocols`: OpenFlow10, OpenFlow13, OpenFlow14 (default all three).
    #[arg(long, default_value = "OpenFlow10,OpenFlow13,OpenFlow14")]
    pub protocols: String,
}

fn parse_controller(s: &str) -> Result<SocketAddr, String> {
    let rest = s.strip_prefix("tcp:").ok_or_else(|| format!("--controller {s}: expected tcp:IP:PORT"))?;
    let (ip, port) = rest.rsplit_once(':').ok_or_else(|| format!("--controller {s}: expected tcp:IP:PORT"))?;
    let ip: IpAddr = ip.trim_matches(['[', ']']).parse().map_err(|_| format!("--controller {s}: bad IP {ip}"))?;
    let port: u16 = port.parse().map_err(|_| format!("--controller {s}: bad port {port}"))?;
    Ok(SocketAddr::new(ip, port))
}

fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    let rest = s.strip_prefix("ptcp:").ok_or_else(|| format!("--listen {s}: expected ptcp:PORT[:IP]"))?;
    let (port, ip) = match rest.split_once(':') {
        Some((p, ip)) => (p, ip.trim_matches(['[', ']'])),
        None => (rest, "0.0.0.0"),
    };
    let port: u16 = port.parse().map_err(|_| format!("--listen {s}: bad port {port}"))?;
    let ip: IpAddr = ip.parse().map_err(|_| format!("--listen {s}: bad IP {ip}"))?;
    Ok(SocketAddr::new(ip, port))
}

fn parse_dpid(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("--datapath-id {s}: not a number"))
}

/// The MAC address of `iface` (zero when it cannot be read).
fn mac_of(iface: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    if let Ok(s) = std::fs::read_to_string(format!("/sys/class/net/{iface}/address")) {
        for (i, b) in s.trim().split(':').take(6).enumerate() {
            mac[i] = u8::from_str_radix(b, 16).unwrap_or(0);
        }
    }
    mac
}

/// Runs the switch (see the module documentation).
pub fn run(a: &OpenflowArgs) -> Result<(), String> {
    // A socket per controller connection: up to --max-connections of them.
    crate::raise_descriptor_limit();
    let mut ports: Vec<PortSpec> = a.interfaces.iter().map(|s| PortSpec::parse(s)).collect::<Result<_, _>>()?;
    if let Some(p) = ports.iter().find(|p| p.port == 0) {
        return Err(format!("-i {}@{}: OpenFlow port numbers start at 1", p.port, p.iface));
    }
    if let Some(name) = &a.local {
        // Checked as a port of the TAP backend would be.
        let spec =
            PortSpec::parse(&format!("{LOCAL_LIVE_PORT}@tap:{name}")).map_err(|e| format!("--local {name}: {e}"))?;
        if ports.iter().any(|p| p.iface == spec.iface) {
            return Err(format!("--local {name}: the interface is also given with -i"));
        }
        ports.push(spec);
    }
    let mut infos = BTreeMap::new();
    for p in &ports {
        // The local interface is OpenFlow's LOCAL port (live port 0).
        let number = if p.port == LOCAL_LIVE_PORT { sluice_openflow::port::LOCAL } else { p.port };
        infos.insert(
            number,
            PortInfo {
                name: p.iface.clone(),
                hw_addr: mac_of(&p.iface),
                config: 0,
                live: sluice_ports::link_is_up(&p.iface),
            },
        );
    }
    let datapath_id = match &a.datapath_id {
        Some(s) => parse_dpid(s)?,
        None => infos.values().next().map_or(1, |p| p.hw_addr.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b))),
    };
    let controllers = a.controllers.iter().map(|s| parse_controller(s)).collect::<Result<Vec<_>, _>>()?;
    let mut listen = a.listen.iter().map(|s| parse_listen(s)).collect::<Result<Vec<_>, _>>()?;
    if listen.is_empty() && controllers.is_empty() {
        listen.push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 6653));
    }
    let fail_mode = match a.fail_mode.as_str() {
        "secure" => FailMode::Secure,
        "standalone" => FailMode::Standalone,
        m => return Err(format!("--fail-mode {m}: expected secure or standalone")),
    };
    if !(a.inactivity_probe.is_finite() && (0.1..=3600.0).contains(&a.inactivity_probe)) {
        return Err(format!("--inactivity-probe {}: expected seconds from 0.1 to 3600", a.inactivity_probe));
    }
    let inactivity_probe = Duration::from_secs_f64(a.inactivity_probe);
    let versions = parse_protocols(&a.protocols)?;
    let mut sw = OfSwitch::new(infos);
    sw.set_flow_cache(!a.no_flow_cache);
    let queues = a.queues.iter().map(|s| QueueConfig::parse(s)).collect::<Result<Vec<_>, _>>()?;
    if !queues.is_empty() && a.offload {
        // A queued frame leaves later, without the offload header it came with.
        return Err("--queue and --offload do not go together: queued frames leave without offload headers".into());
    }
    sw.set_queues(queues).map_err(|e| format!("--queue: {e}"))?;
    // Packet-ins wait for the agent in a bounded channel; when it is full the workers drop them and count it.
    let (sink, notes) = sluice_ofagent::packet_in_channel();
    let cfg = LiveConfig { ports, offload: a.offload, workers: a.workers.max(1), ..LiveConfig::default() };
    let opts = NodeOptions {
        kind: "openflow",
        name: a.name.clone(),
        duration: a.duration.map(Duration::from_secs_f64),
        metrics: a.metrics.clone(),
    };
    let mut node = Node::start(sw, &cfg, Some(sink), &opts, Vec::new())?;
    // The local interface exists now: its address and link state.
    if let Some(name) = a.local.clone() {
        let (mac, up) = (mac_of(&name), sluice_ports::link_is_up(&name));
        node.control().lock().commit(move |d: &mut OfSwitch, _| {
            d.set_port_address(sluice_openflow::port::LOCAL, mac);
            d.set_port_live(sluice_openflow::port::LOCAL, up);
        });
    }
    let agent_cfg = AgentConfig {
        datapath_id,
        listen,
        controllers,
        dp_desc: format!("sluice openflow {datapath_id:016x}"),
        link_up: Some(sluice_ports::link_is_up),
        fail_mode,
        inactivity_probe,
        max_connections: a.max_connections as usize,
        versions,
    };
    if let Err(e) = node.serve(Agent::new(node.control().clone(), notes, agent_cfg)) {
        return Err(node.fail(e));
    }
    if let Some(addr) = &a.gnmi {
        if let Err(e) = node.serve(sluice_gnmi::GnmiServer::new(addr)) {
            return Err(node.fail(e));
        }
    }
    let done = node.run();
    let (c, tables, code) = done.control.view(|d| {
        let code = if a.show_code { d.code_listing() } else { String::new() };
        let c = d.counts();
        ((c.cache_hits, c.cache_misses, c.standalone), d.describe_tables(), code)
    });
    let (hits, misses, alone) = c;
    let alone =
        if alone > 0 { format!("; {alone} forwarded by the NORMAL port standing alone") } else { String::new() };
    eprintln!("openflow: flow cache: {hits} packets replayed a cached walk, {misses} walked the tables{alone}");
    for t in tables {
        eprintln!("openflow: {t}");
    }
    eprint!("{code}");
    done.result().map(|_| ())
}

/// The wire versions of a `--protocols` list (Open vSwitch's names).
fn parse_protocols(list: &str) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        v.push(match name {
            "OpenFlow10" => sluice_openflow::OFP10,
            "OpenFlow13" => sluice_openflow::OFP13,
            "OpenFlow14" => sluice_openflow::OFP14,
            other => {
                return Err(format!("--protocols: {other} is not spoken here (OpenFlow10, OpenFlow13, OpenFlow14)"))
            }
        });
    }
    if v.is_empty() {
        return Err("--protocols: no version given".into());
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}
