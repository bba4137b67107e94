//! Live ports: any [`DataPlane`] attached to Linux interfaces.
//!
//! [`start`] opens every configured port once per worker (AF_PACKET
//! sockets joined in a PACKET_FANOUT group; one queue per worker of a
//! multi-queue TAP device or of an AF_XDP interface: either way a flow
//! stays on one worker and in order), starts a
//! [`Pool`] of workers, and gives each the packet loop of
//! [`packet_loop`]: poll the ports, receive up to [`BATCH`] frames, run
//! them through the data plane as one batch, send what it emits (a frame
//! emitted in two parts goes into the port's transmit buffer part by
//! part). `sluice bench` makes the same call, `DataPlane::process_batch_to`;
//! the replay and the STF runner make `process_batch`, the same data plane
//! code with the parts joined: what the lab measures is what the ports run.
//!
//! Frames keep their virtio-net offload header from input to output (see
//! `sluice_ports`), so 64 KB TCP segments cross the data plane as one frame
//! and the kernel segments them on the way out. A segment that must leave
//! through a port without offload is dropped and counted (`gso_dropped`);
//! a frame that only lacks its checksum gets it computed in software.
//!
//! Ports survive their interfaces: a port whose interface goes down is
//! reported once and counted, frames for it are dropped and counted while
//! the other ports keep forwarding, and it resumes when the interface is up
//! again; a port whose interface goes away is closed and opened anew when
//! an interface of that name is back (both checked every 100 ms).
//!
//! Memory invariant: buffers are allocated at start; the loop itself does
//! not allocate (except when tracing or when a port is opened again).

pub mod capture;
pub mod log;
mod packet_loop;

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_dataplane::workers::{Pool, WorkerIo};
use sluice_dataplane::{DataPlane, Level, Stop};
use sluice_nanomsg::Publisher;
use sluice_ports::afpacket::AfPacketPort;
use sluice_ports::afxdp::{AfXdpInterface, AfXdpPort};
use sluice_ports::channel::ChannelPorts;
use sluice_ports::faults::FaultyPort;
pub use sluice_ports::faults::{FaultCounts, Faults};
use sluice_ports::memory::MemoryWire;
use sluice_ports::packet_in::PacketInPort;
use sluice_ports::pcapfile::FilePort;
use sluice_ports::tap::TapPort;
use sluice_ports::{Port, PortStats};

pub use packet_loop::LiveStats;

/// How a port is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An AF_PACKET socket on an existing interface (the default).
    AfPacket,
    /// A TAP interface Sluice creates.
    Tap,
    /// An AF_XDP socket on queue 0 with Sluice's XDP program attached.
    AfXdp,
    /// bmv2's `--use-files`: frames come from `<iface>_in.pcap` and go to `<iface>_out.pcap`.
    Files,
    /// An in-memory wire of [`LiveConfig::memory`] (`PORT@memory:NAME`), for tests.
    Memory,
    /// bmv2's `--packet-in ADDR`: every port's frames over one nanomsg
    /// PAIR socket bound at the spec's `iface` (an address); the spec's
    /// port number is not used (each message names its port).
    PacketIn,
    /// bmv2's `--dp-grpc-server-addr ADDR`: every port's frames through
    /// [`LiveConfig::channel`], which the gRPC service feeds; the spec's
    /// `iface` names it in reports, its port number is not used.
    Grpc,
}

impl Backend {
    /// Whether one port object of this backend carries every port number.
    pub fn carries_every_port(self) -> bool {
        matches!(self, Backend::PacketIn | Backend::Grpc)
    }
}

/// One `-i PORT@IFACE` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub port: u32,
    pub iface: String,
    pub backend: Backend,
}

impl PortSpec {
    /// Parses `PORT@IFACE`, `PORT@af_packet:IFACE`, `PORT@af_xdp:IFACE` or `PORT@tap:NAME`.
    pub fn parse(s: &str) -> Result<PortSpec, String> {
        let (p, i) = s.split_once('@').ok_or_else(|| format!("interface \"{s}\" is not PORT@IFACE"))?;
        let port: u32 = p.parse().map_err(|_| format!("interface \"{s}\": \"{p}\" is not a port number"))?;
        if port >= 511 {
            return Err(format!("interface \"{s}\": port {port} is out of range (0-510; 511 is the drop port)"));
        }
        let (backend, iface) = match i.split_once(':') {
            Some(("tap", n)) => (Backend::Tap, n),
            Some(("af_packet", n)) => (Backend::AfPacket, n),
            Some(("af_xdp", n)) => (Backend::AfXdp, n),
            Some(("memory", n)) => (Backend::Memory, n),
            Some((b, _)) => return Err(format!("interface \"{s}\": unknown backend \"{b}\" (af_packet, af_xdp, tap)")),
            None => (Backend::AfPacket, i),
        };
        if iface.is_empty() || iface.len() > 15 {
            return Err(format!("interface \"{s}\": \"{iface}\" is not a valid interface name"));
        }
        Ok(PortSpec { port, iface: iface.to_string(), backend })
    }
}

/// How the live loop runs.
#[derive(Debug, Clone, Default)]
pub struct LiveConfig {
    pub ports: Vec<PortSpec>,
    /// `--pcap DIR`: record `<iface>_in.pcap` and `<iface>_out.pcap`.
    pub pcap_dir: Option<PathBuf>,
    /// Carry virtio-net offload headers.
    pub offload: bool,
    /// Worker threads.
    pub workers: usize,
    /// Frames sent to this port go up to the control plane (PacketIn).
    pub cpu_port: Option<u32>,
    /// Time each stage (receive, the data plane's stages, send) from the start.
    pub profile: bool,
    /// Faults to inject on every port (`--inject-faults`).
    pub faults: Option<Faults>,
    /// The in-memory wires `memory:NAME` ports name (tests of the loop).
    pub memory: Vec<MemoryWire>,
    /// Where the per-packet trace goes (nowhere by default: untraced).
    pub trace: TraceTaps,
    /// The ports a `grpc` port ([`Backend::Grpc`]) takes its frames from.
    pub channel: Option<ChannelPorts>,
}

/// Where the workers' per-packet trace goes (see
/// `sluice_dataplane::trace`). A worker traces its batches only while
/// somebody wants them: a log at info level or finer, or a subscriber to
/// the event stream (asked once per batch); otherwise the data plane runs
/// untraced, at full speed.
#[derive(Debug, Clone, Default)]
pub struct TraceTaps {
    /// Per-packet log lines at this level and above go to the log
    /// ([`log::set_target`]), as `[time] [bmv2] [L] [thread TID] line`.
    pub log_level: Option<Level>,
    /// bmv2's event stream (`--nanolog`).
    pub events: Option<Arc<Publisher>>,
    /// The device id the event messages carry.
    pub device_id: u64,
    /// Bytes of each frame received and sent logged in hex at level info
    /// (`Received packet of length L on port P: HEX`, `Sending packet
    /// ...`), as bmv2's `--dump-packet-data`; 0: none.
    pub dump_packet_data: usize,
}

impl TraceTaps {
    /// Whether a batch run now should be traced.
    pub fn wanted(&self) -> bool {
        // (Frames dumped are logged at info: the trace is on then too.)
        self.log_level.is_some_and(|l| l <= Level::Info) || self.events.as_ref().is_some_and(|p| p.has_subscribers())
    }
}

/// Something the loop sends up to the control plane.
#[derive(Debug, Clone)]
pub enum Up<N> {
    /// A frame the data plane sent to the CPU port.
    PacketIn(Vec<u8>),
    /// A notification of the data plane (a digest...).
    Notification(N),
}

/// Where the loop sends [`Up`] events; returns false when the event was
/// dropped (a full queue: the sink must never block a worker).
pub type UpSink<N> = Arc<dyn Fn(Up<N>) -> bool + Send + Sync>;

/// One configured port as every worker opens it (again, after its
/// interface came back): worker `w` takes queue `w` of a multi-queue
/// backend.
struct Opener {
    spec: PortSpec,
    offload: bool,
    /// PACKET_FANOUT group of an AF_PACKET port shared by several workers.
    fanout: Option<u16>,
    workers: usize,
    /// The XDP program and map of an AF_XDP port's interface, shared by
    /// its workers' sockets (attached again when the interface was re-created).
    xdp: Mutex<Option<Arc<AfXdpInterface>>>,
    /// Faults to inject (each worker's port draws its own, seeded by port and worker).
    faults: Option<Faults>,
    /// The wire of a memory port.
    wire: Option<MemoryWire>,
    /// The channel of a `grpc` port.
    channel: Option<ChannelPorts>,
}

impl Opener {
    /// Whether the port's interface is there and up, to open it again
    /// (a TAP device is Sluice's own: opening it creates it).
    fn iface_up(&self) -> bool {
        match self.spec.backend {
            Backend::Tap | Backend::PacketIn | Backend::Grpc => true,
            Backend::Memory => self.wire.as_ref().is_some_and(|w| w.link() == sluice_ports::memory::WireLink::Up),
            _ => sluice_ports::link_is_up(&self.spec.iface),
        }
    }

    fn open(&self, worker: usize) -> io::Result<Box<dyn Port>> {
        let port = self.open_backend(worker)?;
        Ok(match self.faults {
            Some(f) => {
                let seed = f.seed ^ (u64::from(self.spec.port) << 32) ^ worker as u64;
                let slot = if self.offload { sluice_ports::MAX_FRAME } else { packet_loop::FRAME };
                Box::new(FaultyPort::new(port, Faults { seed, ..f }, slot))
            }
            None => port,
        })
    }

    fn open_backend(&self, worker: usize) -> io::Result<Box<dyn Port>> {
        let iface = &self.spec.iface;
        Ok(match self.spec.backend {
            Backend::AfPacket => Box::new(AfPacketPort::open(iface, self.offload, self.fanout)?),
            Backend::Tap if self.workers == 1 => Box::new(TapPort::open(iface, self.offload)?),
            Backend::Tap => {
                let mut q = TapPort::open_queues(iface, self.offload, 1)?;
                Box::new(q.pop().ok_or_else(|| io::Error::other("no TAP queue"))?)
            }
            Backend::Files => Box::new(FilePort::open(iface).map_err(io::Error::other)?),
            Backend::PacketIn => Box::new(PacketInPort::bind(iface)?),
            Backend::Grpc => match &self.channel {
                Some(c) => Box::new(c.port()),
                None => return Err(io::Error::other(format!("{iface}: no channel for its frames"))),
            },
            Backend::Memory => match &self.wire {
                Some(w) => Box::new(w.port()),
                None => return Err(io::Error::other(format!("no in-memory wire {iface}"))),
            },
            Backend::AfXdp => {
                let mut xdp = self.xdp.lock().unwrap_or_else(|e| e.into_inner());
                // SAFETY: a NUL-terminated name; the call only reads it.
                let now = std::ffi::CString::new(iface.as_str())
                    .map(|c| unsafe { libc::if_nametoindex(c.as_ptr()) })
                    .unwrap_or(0);
                let att = match xdp.as_ref().filter(|a| a.ifindex() == now) {
                    Some(a) => a.clone(),
                    None => {
                        let a = AfXdpInterface::attach(iface, self.workers)?;
                        log::report(format!(
                            "port {}: XDP program attached to {iface} in {} mode",
                            self.spec.port,
                            a.mode()
                        ));
                        *xdp = Some(a.clone());
                        a
                    }
                };
                Box::new(AfXdpPort::open_queue(&att, worker)?)
            }
        })
    }
}

/// What every worker leaves behind: its counters and each port's
/// `(number, name, backend, stats)`.
type WorkerReport = (LiveStats, Vec<(u32, String, &'static str, PortStats)>);

/// The running loop's shared parts, for the report at the end (a
/// worker's fatal error is the loop's [`Stop::error`]).
pub struct Live {
    report: Arc<Mutex<Vec<WorkerReport>>>,
    started: Instant,
    workers: usize,
}

impl Live {
    /// Every worker's counters summed (after the workers stopped).
    pub fn totals(&self) -> LiveStats {
        let r = self.report.lock().unwrap_or_else(|e| e.into_inner());
        r.iter().fold(LiveStats::default(), |a, (s, _)| a.plus(s))
    }

    /// The end-of-run report: totals, then each port of each worker. The
    /// reports the workers queued are written first ([`log::flush`]).
    pub fn summary(&self) -> String {
        log::flush();
        let t = self.totals();
        let mut s = format!(
            "sluice: stopped after {:.1} s: {} received, {} sent, {} dropped by the data plane, {} to ports without \
             an interface, {} offloaded segments dropped, {} to ports whose link was down, {} link changes, {} events \
             dropped\n",
            self.started.elapsed().as_secs_f64(),
            t.received,
            t.sent,
            t.program_dropped,
            t.no_port,
            t.gso_dropped,
            t.link_dropped,
            t.link_changes,
            t.up_dropped,
        );
        let r = self.report.lock().unwrap_or_else(|e| e.into_inner());
        for (w, (_, ports)) in r.iter().enumerate() {
            for (_, name, backend, p) in ports {
                s.push_str(&format!(
                    "  {name} ({backend}{}): rx {} pkts {} bytes, tx {} pkts {} bytes, tx dropped {}, \
                     kernel dropped {}\n",
                    if self.workers > 1 { format!(", worker {w}") } else { String::new() },
                    p.rx_packets,
                    p.rx_bytes,
                    p.tx_packets,
                    p.tx_bytes,
                    p.tx_dropped,
                    p.rx_dropped
                ));
                if p.rx_invalid > 0 {
                    s.push_str(&format!("    {} messages could not be read as frames\n", p.rx_invalid));
                }
                if !p.faults.is_empty() {
                    s.push_str(&format!("    {}\n", p.faults));
                }
            }
        }
        s
    }
}

/// Opens the ports of `cfg` (none is fine: ports can be added while
/// running) for every worker and starts the workers on replicas of `dp`. Events for the control plane go to `up`; the workers
/// stop when `stop` is set (then stop the pool, and read [`Live`]); a
/// worker that meets a fatal error sets it, with the error.
pub fn start<D: DataPlane>(
    dp: D,
    cfg: &LiveConfig,
    up: Option<UpSink<D::Notification>>,
    stop: Stop,
) -> Result<(Pool<D>, Live), String> {
    let workers = cfg.workers.max(1);
    let mut seen = BTreeMap::new();
    for p in &cfg.ports {
        if let Some(prev) = seen.insert(p.port, &p.iface) {
            return Err(format!("port {} is given twice ({prev} and {})", p.port, p.iface));
        }
        if workers > 1 && p.backend == Backend::Files {
            return Err(format!("port {} ({}): pcap file ports run with one worker: use --workers 1", p.port, p.iface));
        }
        if workers > 1 && p.backend.carries_every_port() {
            return Err(format!("{}: packet I/O over nanomsg or gRPC runs with one worker: use --workers 1", p.iface));
        }
        if p.backend.carries_every_port() && cfg.faults.is_some() {
            return Err(format!("{}: faults are not injected into packet I/O over nanomsg or gRPC", p.iface));
        }
    }
    let mut ifaces = BTreeMap::new();
    for p in &cfg.ports {
        if let Some(prev) = ifaces.insert(p.iface.as_str(), p.port) {
            return Err(format!("interface {} is given twice (ports {prev} and {})", p.iface, p.port));
        }
    }
    let captures = match &cfg.pcap_dir {
        None => None,
        // (Packet I/O over nanomsg or gRPC has no interface to name files after.)
        Some(dir) => {
            let named: Vec<PortSpec> = cfg.ports.iter().filter(|p| !p.backend.carries_every_port()).cloned().collect();
            Some(Arc::new(capture::Captures::create(dir, &named)?))
        }
    };
    // One PACKET_FANOUT group per interface when several workers share it.
    let fanout_base = (workers > 1).then(|| (std::process::id() as u16).wrapping_mul(31));
    let openers: Vec<Arc<Opener>> = cfg
        .ports
        .iter()
        .map(|spec| {
            Arc::new(Opener {
                spec: spec.clone(),
                offload: cfg.offload,
                fanout: fanout_base.map(|b| b.wrapping_add(spec.port as u16)),
                workers,
                xdp: Mutex::new(None),
                faults: cfg.faults,
                wire: cfg.memory.iter().find(|w| w.name() == spec.iface).cloned(),
                channel: (spec.backend == Backend::Grpc).then(|| cfg.channel.clone()).flatten(),
            })
        })
        .collect();
    let report = Arc::new(Mutex::new(Vec::new()));
    let board = Arc::new(packet_loop::LinkBoard::default());
    let mut ios: Vec<Box<dyn WorkerIo<D>>> = Vec::new();
    for w in 0..workers {
        let mut ports = Vec::new();
        for o in &openers {
            let p = o.open(w).map_err(|e| {
                log::flush();
                format!("port {} ({}): {e}", o.spec.port, o.spec.iface)
            })?;
            if w == 0 {
                let spread = match o.spec.backend {
                    _ if workers == 1 => String::new(),
                    Backend::AfPacket => format!(", fanout over {workers} workers"),
                    _ => format!(", one queue per worker ({workers})"),
                };
                let port = match o.spec.backend.carries_every_port() {
                    true => "every port".to_string(),
                    false => format!("port {}", o.spec.port),
                };
                log::report(format!(
                    "{port}: {} via {}{}{spread}",
                    o.spec.iface,
                    p.backend(),
                    if p.offload() { " (offload headers on)" } else { "" },
                ));
            }
            ports.push((o.clone(), p));
        }
        let io = packet_loop::LiveIo::new(
            ports,
            packet_loop::Shared {
                captures: captures.clone(),
                report: report.clone(),
                stop: stop.clone(),
                board: board.clone(),
                up: up.clone(),
            },
            cfg,
            fanout_base,
            w,
        )?;
        ios.push(Box::new(io));
    }
    // What opening the ports reported comes before what follows.
    log::flush();
    let mut dp = dp;
    dp.set_profiling(cfg.profile);
    let pool = Pool::start(dp, ios)?;
    let mut pool = pool;
    if cfg.profile {
        // The replicas inherit the master's setting; the workers' own clocks start now.
        pool.set_profiling(true);
    }
    Ok((pool, Live { report, started: Instant::now(), workers }))
}
