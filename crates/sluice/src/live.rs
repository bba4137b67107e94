//! Live ports: the switch attached to Linux interfaces.
//!
//! One thread polls every port, receives batches of up to 32 frames, runs
//! each frame to completion through the switch and sends what it emits; all
//! ports are flushed once per batch. Frames keep their virtio-net offload
//! header from input to output (see `sluice_ports`), so 64 KB TCP segments
//! cross the switch as one frame and the kernel segments them on the way out.
//! A segment that must leave through a port without offload is dropped and
//! counted (`gso_dropped`); a frame that only lacks its checksum gets it
//! computed in software.
//!
//! Memory invariant: buffers are allocated at start; the loop itself does
//! not allocate (except when `--log-console` traces or `--pcap` records).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapPacket, PcapWriter};
use sluice_engine::Switch;
use sluice_ports::afpacket::AfPacketPort;
use sluice_ports::tap::TapPort;
use sluice_ports::{complete_checksum, Port, RxBatch, VnetHdr, MAX_FRAME};

/// How a port is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// An AF_PACKET socket on an existing interface (the default).
    AfPacket,
    /// A TAP interface Sluice creates.
    Tap,
}

/// One `-i PORT@IFACE` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    pub port: u32,
    pub iface: String,
    pub backend: Backend,
}

impl PortSpec {
    /// Parses `PORT@IFACE`, `PORT@af_packet:IFACE` or `PORT@tap:NAME`.
    pub fn parse(s: &str) -> Result<PortSpec, String> {
        let (p, i) = s.split_once('@').ok_or_else(|| format!("interface \"{s}\" is not PORT@IFACE"))?;
        let port: u32 = p.parse().map_err(|_| format!("interface \"{s}\": \"{p}\" is not a port number"))?;
        if port >= 511 {
            return Err(format!("interface \"{s}\": port {port} is out of range (0-510; 511 is the drop port)"));
        }
        let (backend, iface) = match i.split_once(':') {
            Some(("tap", n)) => (Backend::Tap, n),
            Some(("af_packet", n)) => (Backend::AfPacket, n),
            Some((b, _)) => return Err(format!("interface \"{s}\": unknown backend \"{b}\" (af_packet, tap)")),
            None => (Backend::AfPacket, i),
        };
        if iface.is_empty() || iface.len() > 15 {
            return Err(format!("interface \"{s}\": \"{iface}\" is not a valid interface name"));
        }
        Ok(PortSpec { port, iface: iface.to_string(), backend })
    }
}

/// Everything the live switch is started with.
#[derive(Debug, Clone, Default)]
pub struct LiveOptions {
    /// The program (`None`: `--no-p4`, every packet is dropped).
    pub program: Option<PathBuf>,
    /// CLI command files applied before traffic starts.
    pub commands: Vec<PathBuf>,
    pub ports: Vec<PortSpec>,
    /// `--pcap DIR`: record `<iface>_in.pcap` and `<iface>_out.pcap`.
    pub pcap_dir: Option<PathBuf>,
    /// Per-packet trace on standard error.
    pub trace: bool,
    /// Carry virtio-net offload headers (default on).
    pub offload: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Per-port capture files of `--pcap`.
struct Capture {
    rx: PcapWriter<BufWriter<File>>,
    tx: PcapWriter<BufWriter<File>>,
}

fn now_ts() -> std::time::Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

fn open_port(spec: &PortSpec, offload: bool) -> Result<Box<dyn Port>, String> {
    Ok(match spec.backend {
        Backend::AfPacket => Box::new(AfPacketPort::open(&spec.iface, offload, None).map_err(|e| e.to_string())?),
        Backend::Tap => Box::new(TapPort::open(&spec.iface, offload).map_err(|e| e.to_string())?),
    })
}

/// Counters of the live loop, printed at the end.
#[derive(Debug, Default, Clone, Copy)]
pub struct LiveStats {
    pub received: u64,
    pub sent: u64,
    /// Emitted to a port number no interface is attached to.
    pub no_port: u64,
    /// Offloaded segments that had to leave through a port without offload.
    pub gso_dropped: u64,
}

/// Runs the switch on live ports until SIGINT or SIGTERM.
pub fn run(opts: &LiveOptions) -> Result<LiveStats, String> {
    if opts.ports.is_empty() {
        return Err("no interfaces: give at least one -i PORT@IFACE".into());
    }
    let mut seen = BTreeMap::new();
    for p in &opts.ports {
        if let Some(prev) = seen.insert(p.port, &p.iface) {
            return Err(format!("port {} is given twice ({prev} and {})", p.port, p.iface));
        }
    }
    let mut sw: Option<Switch> = match &opts.program {
        Some(p) => Some(crate::load(p)?),
        None => None,
    };
    if let Some(sw) = sw.as_mut() {
        for c in &opts.commands {
            let failed = crate::apply_commands(sw, c, false)?;
            if failed > 0 {
                return Err(format!("{failed} command(s) of {} failed", c.display()));
            }
        }
        if opts.trace {
            sw.trace = Some(String::new());
        }
    }
    let mut ports: Vec<Box<dyn Port>> = Vec::new();
    let mut by_number = vec![usize::MAX; 512];
    for spec in &opts.ports {
        let p = open_port(spec, opts.offload)?;
        eprintln!(
            "port {}: {} via {}{}",
            spec.port,
            spec.iface,
            p.backend(),
            if p.offload() { " (offload headers on)" } else { "" }
        );
        by_number[spec.port as usize] = ports.len();
        ports.push(p);
    }
    let mut captures: Vec<Capture> = Vec::new();
    if let Some(dir) = &opts.pcap_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for spec in &opts.ports {
            let open = |suffix: &str| -> Result<PcapWriter<BufWriter<File>>, String> {
                let path = dir.join(format!("{}_{suffix}.pcap", spec.iface));
                let f = File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
                PcapWriter::new(BufWriter::new(f)).map_err(|e| format!("{}: {e}", path.display()))
            };
            captures.push(Capture { rx: open("in")?, tx: open("out")? });
        }
    }
    STOP.store(false, Ordering::Relaxed);
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    eprintln!(
        "sluice: forwarding on {} port(s){}",
        ports.len(),
        if sw.is_none() { " with no program loaded (--no-p4): every packet is dropped" } else { "" }
    );
    let mut pfds: Vec<libc::pollfd> =
        ports.iter().map(|p| libc::pollfd { fd: p.fd(), events: libc::POLLIN, revents: 0 }).collect();
    let mut batch = RxBatch::new(if opts.offload { MAX_FRAME } else { 16384 });
    let mut out_buf: Vec<u8> = Vec::with_capacity(4 * MAX_FRAME);
    let mut outs: Vec<(u32, usize, usize)> = Vec::with_capacity(64);
    let mut stats = LiveStats::default();
    let port_numbers: Vec<u32> = opts.ports.iter().map(|p| p.port).collect();
    let start = Instant::now();
    while !STOP.load(Ordering::Relaxed) {
        // SAFETY: `pfds` is a live array of pollfd.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, 100) };
        if r <= 0 {
            continue;
        }
        let mut dirty = false;
        for k in 0..pfds.len() {
            if pfds[k].revents == 0 {
                continue;
            }
            if pfds[k].revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                return Err(format!("{}: the interface went away", ports[k].name()));
            }
            // A few batches per port per round keep the ports fair.
            for _ in 0..8 {
                let n = ports[k].recv(&mut batch).map_err(|e| e.to_string())?;
                if n == 0 {
                    break;
                }
                stats.received += n as u64;
                for i in 0..n {
                    let (frame, vnet) = batch.frame(i);
                    if let Some(c) = captures.get_mut(k) {
                        let _ = c.rx.write_packet(&PcapPacket::new(now_ts(), frame.len() as u32, frame));
                    }
                    let Some(sw) = sw.as_mut() else { continue };
                    out_buf.clear();
                    outs.clear();
                    sw.process(port_numbers[k], frame, &mut |p, bytes| {
                        let s = out_buf.len();
                        out_buf.extend_from_slice(bytes);
                        outs.push((p, s, bytes.len()));
                    });
                    if let Some(t) = sw.trace.as_mut() {
                        eprint!("{t}");
                        t.clear();
                    }
                    for &(p, s, len) in &outs {
                        let Some(&dst) = by_number.get(p as usize).filter(|d| **d != usize::MAX) else {
                            stats.no_port += 1;
                            continue;
                        };
                        let o = &mut out_buf[s..s + len];
                        let v = vnet.shifted(len as isize - frame.len() as isize);
                        // Without offload on the way out: finish the checksum here; a segment cannot go.
                        let no_offload = !ports[dst].offload();
                        if no_offload && (v.is_gso() || (v.needs_csum() && !complete_checksum(o, &v))) {
                            stats.gso_dropped += 1;
                            continue;
                        }
                        let v = if ports[dst].offload() { v } else { VnetHdr::default() };
                        ports[dst].send(o, &v).map_err(|e| e.to_string())?;
                        stats.sent += 1;
                        dirty = true;
                        if let Some(c) = captures.get_mut(dst) {
                            let _ = c.tx.write_packet(&PcapPacket::new(now_ts(), len as u32, o));
                        }
                    }
                }
                if n < sluice_ports::BATCH {
                    break;
                }
            }
        }
        if dirty {
            for p in ports.iter_mut() {
                p.flush().map_err(|e| e.to_string())?;
            }
        }
    }
    for c in captures {
        for w in [c.rx, c.tx] {
            if let Err(e) = std::io::Write::flush(&mut w.into_writer()) {
                eprintln!("sluice: writing a --pcap file failed: {e}");
            }
        }
    }
    eprintln!(
        "sluice: stopped after {:.1} s: {} received, {} sent, {} to ports without an interface, {} offloaded segments dropped",
        start.elapsed().as_secs_f64(),
        stats.received,
        stats.sent,
        stats.no_port,
        stats.gso_dropped
    );
    for p in &ports {
        let s = p.stats();
        eprintln!(
            "  {} ({}): rx {} pkts {} bytes, tx {} pkts {} bytes, tx dropped {}",
            p.name(),
            p.backend(),
            s.rx_packets,
            s.rx_bytes,
            s.tx_packets,
            s.tx_bytes,
            s.tx_dropped
        );
    }
    Ok(stats)
}
