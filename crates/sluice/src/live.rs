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
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use pcap_file::pcap::{PcapPacket, PcapWriter};
use sluice_engine::device::{Device, DeviceInfo, Event, EventSink, PortInfo};
use sluice_engine::workers::Waker;
use sluice_engine::Switch;
use sluice_ports::afpacket::AfPacketPort;
use sluice_ports::afxdp::AfXdpPort;
use sluice_ports::tap::TapPort;
use sluice_ports::{complete_checksum, Port, PortStats, RxBatch, VnetHdr, MAX_FRAME};

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
            Some(("af_xdp", n)) => (Backend::AfXdp, n),
            Some((b, _)) => return Err(format!("interface \"{s}\": unknown backend \"{b}\" (af_packet, af_xdp, tap)")),
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
}

/// A port made of two pcap files (bmv2's `--use-files`): the input file is
/// read at start and replayed in order, sent frames are appended to the
/// output file.
struct FilePort {
    name: String,
    input: Vec<Vec<u8>>,
    next: usize,
    /// Polled for readability (a regular file always is) until the input ends.
    file: File,
    out: Option<PcapWriter<BufWriter<File>>>,
    stats: PortStats,
}

impl FilePort {
    fn open(iface: &str) -> Result<FilePort, String> {
        let in_path = PathBuf::from(format!("{iface}_in.pcap"));
        let input: Vec<Vec<u8>> = crate::pcapio::read_pcap(&in_path)?.into_iter().map(|(_, d)| d).collect();
        let file = File::open(&in_path).map_err(|e| format!("cannot open {}: {e}", in_path.display()))?;
        let out_path = format!("{iface}_out.pcap");
        let f = File::create(&out_path).map_err(|e| format!("cannot create {out_path}: {e}"))?;
        let out = PcapWriter::new(BufWriter::new(f)).map_err(|e| format!("{out_path}: {e}"))?;
        Ok(FilePort { name: iface.to_string(), input, next: 0, file, out: Some(out), stats: PortStats::default() })
    }
}

impl Port for FilePort {
    fn name(&self) -> &str {
        &self.name
    }

    fn backend(&self) -> &'static str {
        "pcap files"
    }

    fn offload(&self) -> bool {
        false
    }

    fn fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self.file)
    }

    fn recv(&mut self, batch: &mut RxBatch) -> std::io::Result<usize> {
        let mut frames = Vec::with_capacity(sluice_ports::BATCH);
        while frames.len() < sluice_ports::BATCH && self.next < self.input.len() {
            frames.push(self.input[self.next].as_slice());
            self.next += 1;
        }
        let n = batch.fill_from(&frames);
        for f in &frames[..n] {
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += f.len() as u64;
        }
        Ok(n)
    }

    fn send(&mut self, frame: &[u8], _vnet: &VnetHdr) -> std::io::Result<()> {
        if let Some(w) = self.out.as_mut() {
            w.write_packet(&PcapPacket::new(now_ts(), frame.len() as u32, frame)).map_err(std::io::Error::other)?;
        }
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += frame.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn finished(&self) -> bool {
        self.next >= self.input.len()
    }
}

impl Drop for FilePort {
    fn drop(&mut self) {
        if let Some(w) = self.out.take() {
            if let Err(e) = std::io::Write::flush(&mut w.into_writer()) {
                eprintln!("sluice: writing {}_out.pcap failed: {e}", self.name);
            }
        }
    }
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

/// What a worker leaves behind: its counters and each port's `(name, backend, stats)`.
type WorkerReport = (LiveStats, Vec<(String, &'static str, PortStats)>);

/// One worker's ports and buffers: polls its ports, runs each frame to
/// completion and sends what the switch emits.
struct LiveIo {
    ports: Vec<Box<dyn Port>>,
    port_numbers: Vec<u32>,
    by_number: Vec<usize>,
    pfds: Vec<libc::pollfd>,
    batch: RxBatch,
    out_buf: Vec<u8>,
    outs: Vec<(u32, usize, usize)>,
    captures: Option<Arc<Mutex<Vec<Capture>>>>,
    /// Per port index: its capture in `captures` (ports added later have none).
    capture_of: Vec<Option<usize>>,
    /// How ports added at run time are opened: offload headers, fanout group base, workers.
    offload: bool,
    fanout_base: Option<u16>,
    stats: LiveStats,
    /// Where the worker leaves its counters when it ends.
    report: Arc<Mutex<Vec<WorkerReport>>>,
    error: Arc<Mutex<Option<String>>>,
    null_forward: bool,
    /// The CPU port and where its frames (and digests) go.
    cpu_port: Option<u32>,
    events: Option<EventSink>,
    /// Written by the control plane to cut the poll short.
    wake: Arc<std::os::fd::OwnedFd>,
}

impl Drop for LiveIo {
    fn drop(&mut self) {
        let ports = self.ports.iter().map(|p| (p.name().to_string(), p.backend(), p.stats())).collect();
        if let Ok(mut r) = self.report.lock() {
            r.push((self.stats, ports));
        }
    }
}

impl LiveIo {
    /// Runs one frame that arrived on port index `k` (the CPU port has
    /// none: `usize::MAX`) and sends what the switch emits. Returns whether
    /// anything was sent.
    fn handle_frame(
        &mut self,
        sw: &mut Switch,
        k: usize,
        port: u32,
        frame: &[u8],
        vnet: &VnetHdr,
    ) -> Result<bool, String> {
        let mut sent = false;
        if let (Some(c), Some(Some(ci))) = (self.captures.as_ref(), self.capture_of.get(k)) {
            if let Ok(mut c) = c.lock() {
                let _ = c[*ci].rx.write_packet(&PcapPacket::new(now_ts(), frame.len() as u32, frame));
            }
        }
        self.out_buf.clear();
        self.outs.clear();
        let (out_buf, outs) = (&mut self.out_buf, &mut self.outs);
        if self.null_forward {
            out_buf.extend_from_slice(frame);
            outs.push((self.port_numbers[1 - k], 0, frame.len()));
        } else {
            sw.process(port, frame, &mut |p, bytes| {
                let s = out_buf.len();
                out_buf.extend_from_slice(bytes);
                outs.push((p, s, bytes.len()));
            });
        }
        if let Some(t) = sw.trace.as_mut() {
            eprint!("{t}");
            t.clear();
        }
        if !sw.state.digests.is_empty() {
            for d in sw.state.digests.drain(..) {
                if let Some(ev) = &self.events {
                    ev.send(Event::Digest(d));
                }
            }
        }
        for &(p, s, len) in &self.outs {
            if Some(p) == self.cpu_port {
                if let Some(ev) = &self.events {
                    ev.send(Event::PacketIn(self.out_buf[s..s + len].to_vec()));
                }
                continue;
            }
            let Some(&dst) = self.by_number.get(p as usize).filter(|d| **d != usize::MAX) else {
                self.stats.no_port += 1;
                continue;
            };
            let o = &mut self.out_buf[s..s + len];
            let v = vnet.shifted(len as isize - frame.len() as isize);
            // Without offload on the way out: finish the checksum here; a segment cannot go.
            let no_offload = !self.ports[dst].offload();
            if no_offload && (v.is_gso() || (v.needs_csum() && !complete_checksum(o, &v))) {
                self.stats.gso_dropped += 1;
                continue;
            }
            let v = if no_offload { VnetHdr::default() } else { v };
            self.ports[dst].send(o, &v).map_err(|e| e.to_string())?;
            self.stats.sent += 1;
            sent = true;
            if let (Some(c), Some(Some(ci))) = (self.captures.as_ref(), self.capture_of.get(dst)) {
                if let Ok(mut c) = c.lock() {
                    let _ = c[*ci].tx.write_packet(&PcapPacket::new(now_ts(), len as u32, o));
                }
            }
        }
        Ok(sent)
    }

    fn fail(&self, e: String) -> bool {
        if let Ok(mut x) = self.error.lock() {
            x.get_or_insert(e);
        }
        STOP.store(true, Ordering::Relaxed);
        false
    }
}

impl crate::workers::WorkerIo for LiveIo {
    fn inject(&mut self, sw: &mut Switch, port: u32, frame: &[u8]) {
        match self.handle_frame(sw, usize::MAX, port, frame, &VnetHdr::default()) {
            Ok(true) => {
                let failed = self.ports.iter_mut().map(|p| p.flush()).find_map(Result::err);
                if let Some(e) = failed {
                    self.fail(e.to_string());
                }
            }
            Ok(false) => {}
            Err(e) => {
                self.fail(e);
            }
        }
    }

    fn add_port(&mut self, number: u32, iface: &str) -> Result<(), String> {
        if number >= 511 {
            return Err(format!("port {number} is out of range (0-510)"));
        }
        if self.port_numbers.contains(&number) {
            return Err(format!("port {number} exists"));
        }
        let fanout = self.fanout_base.map(|b| b.wrapping_add(number as u16));
        let port = AfPacketPort::open(iface, self.offload, fanout).map_err(|e| e.to_string())?;
        let fd = port.fd();
        self.ports.push(Box::new(port));
        self.port_numbers.push(number);
        self.capture_of.push(None);
        // The wake-up descriptor stays last.
        let at = self.pfds.len() - 1;
        self.pfds.insert(at, libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
        self.by_number[number as usize] = self.ports.len() - 1;
        eprintln!("port {number}: {iface} via af_packet (added at run time)");
        Ok(())
    }

    fn remove_port(&mut self, number: u32) -> Result<(), String> {
        let Some(k) = self.port_numbers.iter().position(|p| *p == number) else {
            return Err(format!("no port {number}"));
        };
        if self.null_forward {
            return Err("--null-forward needs its two ports".into());
        }
        self.ports.remove(k);
        self.port_numbers.remove(k);
        self.capture_of.remove(k);
        self.pfds.remove(k);
        self.by_number.fill(usize::MAX);
        for (i, p) in self.port_numbers.iter().enumerate() {
            self.by_number[*p as usize] = i;
        }
        Ok(())
    }

    fn waker(&self) -> Option<Waker> {
        let fd = self.wake.clone();
        Some(Arc::new(move || {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to an eventfd this closure keeps open.
            unsafe { libc::write(std::os::fd::AsRawFd::as_raw_fd(&*fd), (&one as *const u64).cast(), 8) };
        }))
    }

    fn run_batch(&mut self, sw: &mut Switch) -> bool {
        if STOP.load(Ordering::Relaxed) {
            return false;
        }
        // A short timeout: control messages and the stop flag are seen within 1 ms.
        // SAFETY: `pfds` is a live array of pollfd.
        let r = unsafe { libc::poll(self.pfds.as_mut_ptr(), self.pfds.len() as libc::nfds_t, 1) };
        if r <= 0 {
            return true;
        }
        let mut dirty = false;
        let nports = self.ports.len();
        if self.pfds[nports].revents != 0 {
            // The control plane woke us: reset the eventfd; its message is handled after this batch.
            let mut v: u64 = 0;
            // SAFETY: reads 8 bytes into a live u64 from our eventfd.
            unsafe { libc::read(self.pfds[nports].fd, (&mut v as *mut u64).cast(), 8) };
        }
        for k in 0..nports {
            if self.pfds[k].revents == 0 {
                continue;
            }
            if self.pfds[k].revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                return self.fail(format!("{}: the interface went away", self.ports[k].name()));
            }
            // A few batches per port per round keep the ports fair.
            for _ in 0..8 {
                let n = match self.ports[k].recv(&mut self.batch) {
                    Ok(n) => n,
                    Err(e) => return self.fail(e.to_string()),
                };
                if n == 0 {
                    if self.ports[k].finished() {
                        // poll skips negative descriptors.
                        self.pfds[k].fd = -1;
                        if self.pfds[..nports].iter().all(|p| p.fd < 0) {
                            eprintln!("sluice: every input file has been replayed");
                        }
                    }
                    break;
                }
                self.stats.received += n as u64;
                for i in 0..n {
                    let batch = std::mem::replace(&mut self.batch, RxBatch::new(0));
                    let (frame, vnet) = batch.frame(i);
                    let ok = self.handle_frame(sw, k, self.port_numbers[k], frame, vnet);
                    self.batch = batch;
                    match ok {
                        Ok(sent) => dirty |= sent,
                        Err(e) => return self.fail(e),
                    }
                }
                if n < sluice_ports::BATCH {
                    break;
                }
            }
        }
        if dirty {
            for p in self.ports.iter_mut() {
                if let Err(e) = p.flush() {
                    return self.fail(e.to_string());
                }
            }
        }
        true
    }
}

/// Runs the switch on live ports until SIGINT or SIGTERM.
pub fn run(opts: &LiveOptions) -> Result<LiveStats, String> {
    if opts.ports.is_empty() {
        return Err("no interfaces: give at least one -i PORT@IFACE".into());
    }
    let workers = opts.workers.max(1);
    if opts.null_forward && opts.ports.len() != 2 {
        return Err("--null-forward needs exactly two interfaces".into());
    }
    let mut seen = BTreeMap::new();
    for p in &opts.ports {
        if let Some(prev) = seen.insert(p.port, &p.iface) {
            return Err(format!("port {} is given twice ({prev} and {})", p.port, p.iface));
        }
        if workers > 1 && p.backend != Backend::AfPacket {
            return Err(format!(
                "port {} ({}): TAP and AF_XDP ports run with one worker only (multi-queue is not supported yet): use --workers 1",
                p.port, p.iface
            ));
        }
    }
    let json: String = match &opts.program {
        Some(p) => std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?,
        // --no-p4: an empty program drops every packet until one is loaded.
        None => NO_PROGRAM.to_string(),
    };
    let mut sw: Switch = match &opts.program {
        Some(p) => crate::load(p)?,
        None => sluice_engine::load_switch(NO_PROGRAM).map_err(|e| format!("internal empty program: {e}"))?,
    };
    let (events_tx, events_rx) = EventSink::channel();
    for c in &opts.commands {
        let failed = crate::apply_commands(&mut sw, c, false)?;
        if failed > 0 {
            return Err(format!("{failed} command(s) of {} failed", c.display()));
        }
    }
    if opts.trace {
        sw.trace = Some(String::new());
    }
    let mut by_number = vec![usize::MAX; 512];
    for (i, spec) in opts.ports.iter().enumerate() {
        by_number[spec.port as usize] = i;
    }
    let captures = match &opts.pcap_dir {
        None => None,
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let mut v = Vec::new();
            for spec in &opts.ports {
                let open = |suffix: &str| -> Result<PcapWriter<BufWriter<File>>, String> {
                    let path = dir.join(format!("{}_{suffix}.pcap", spec.iface));
                    let f = File::create(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
                    PcapWriter::new(BufWriter::new(f)).map_err(|e| format!("{}: {e}", path.display()))
                };
                v.push(Capture { rx: open("in")?, tx: open("out")? });
            }
            Some(Arc::new(Mutex::new(v)))
        }
    };
    STOP.store(false, Ordering::Relaxed);
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    if let Some(wait) = opts.use_files {
        eprintln!("sluice: --use-files: starting in {wait} s");
        std::thread::sleep(std::time::Duration::from_secs_f64(wait.max(0.0)));
    }
    let report = Arc::new(Mutex::new(Vec::new()));
    let error = Arc::new(Mutex::new(None));
    let mut ios: Vec<Box<dyn crate::workers::WorkerIo>> = Vec::new();
    // One PACKET_FANOUT group per interface when several workers share it.
    let group_base = (std::process::id() as u16).wrapping_mul(31);
    for w in 0..workers {
        let mut ports: Vec<Box<dyn Port>> = Vec::new();
        for spec in opts.ports.iter() {
            let fanout = (workers > 1).then(|| group_base.wrapping_add(spec.port as u16));
            let p: Box<dyn Port> = match spec.backend {
                Backend::AfPacket => {
                    Box::new(AfPacketPort::open(&spec.iface, opts.offload, fanout).map_err(|e| e.to_string())?)
                }
                Backend::Tap => Box::new(TapPort::open(&spec.iface, opts.offload).map_err(|e| e.to_string())?),
                Backend::Files => Box::new(FilePort::open(&spec.iface)?),
                Backend::AfXdp => {
                    let x = AfXdpPort::open(&spec.iface).map_err(|e| e.to_string())?;
                    eprintln!("port {}: XDP program attached to {} in {} mode", spec.port, spec.iface, x.mode());
                    Box::new(x)
                }
            };
            if w == 0 {
                eprintln!(
                    "port {}: {} via {}{}{}",
                    spec.port,
                    spec.iface,
                    p.backend(),
                    if p.offload() { " (offload headers on)" } else { "" },
                    if workers > 1 { format!(", fanout over {workers} workers") } else { String::new() }
                );
            }
            ports.push(p);
        }
        // SAFETY: plain system call; the descriptor is owned right away.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `efd` is a fresh descriptor nobody else owns.
        let wake = Arc::new(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(efd) });
        let mut pfds: Vec<libc::pollfd> =
            ports.iter().map(|p| libc::pollfd { fd: p.fd(), events: libc::POLLIN, revents: 0 }).collect();
        pfds.push(libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 });
        ios.push(Box::new(LiveIo {
            ports,
            port_numbers: opts.ports.iter().map(|p| p.port).collect(),
            by_number: by_number.clone(),
            pfds,
            batch: RxBatch::new(if opts.offload { MAX_FRAME } else { 16384 }),
            out_buf: Vec::with_capacity(4 * MAX_FRAME),
            outs: Vec::with_capacity(64),
            captures: captures.clone(),
            capture_of: (0..opts.ports.len()).map(|i| captures.as_ref().map(|_| i)).collect(),
            offload: opts.offload,
            fanout_base: (workers > 1).then_some(group_base),
            stats: LiveStats::default(),
            report: report.clone(),
            error: error.clone(),
            null_forward: opts.null_forward,
            cpu_port: opts.cpu_port,
            events: Some(events_tx.clone()),
            wake,
        }));
    }
    let start = Instant::now();
    let pool = crate::workers::Pool::start(sw, ios)?;
    let info = DeviceInfo {
        device_id: opts.device_id,
        thrift_port: opts.thrift_port,
        cpu_port: opts.cpu_port,
        ports: opts.ports.iter().map(|p| PortInfo { number: p.port, iface: p.iface.clone() }).collect(),
    };
    let device = Arc::new(Device::new(pool, json.into(), info, Some(events_rx)));
    if let Some(port) = opts.thrift_port {
        match sluice_thrift::serve(device.clone(), ("0.0.0.0", port)) {
            Ok(s) => eprintln!("sluice: Thrift runtime server listening on port {}", s.port),
            Err(e) => eprintln!("sluice: warning: the Thrift server could not start on port {port}: {e}"),
        }
    }
    if let Some(addr) = &opts.grpc_addr {
        crate::grpc::start(device.clone(), addr)?;
    }
    eprintln!(
        "sluice: forwarding on {} port(s) with {} worker(s){}",
        opts.ports.len(),
        workers,
        if opts.program.is_none() { " and no program loaded (--no-p4): every packet is dropped" } else { "" }
    );
    while !STOP.load(Ordering::Relaxed) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(device.stop());
    if let Some(c) = captures {
        let v = std::mem::take(&mut *c.lock().map_err(|_| "a worker panicked")?);
        for c in v {
            for w in [c.rx, c.tx] {
                if let Err(e) = std::io::Write::flush(&mut w.into_writer()) {
                    eprintln!("sluice: writing a --pcap file failed: {e}");
                }
            }
        }
    }
    let mut total = LiveStats::default();
    let report = report.lock().map_err(|_| "a worker panicked")?;
    for (s, _) in report.iter() {
        total.received += s.received;
        total.sent += s.sent;
        total.no_port += s.no_port;
        total.gso_dropped += s.gso_dropped;
    }
    eprintln!(
        "sluice: stopped after {:.1} s: {} received, {} sent, {} to ports without an interface, {} offloaded segments dropped",
        start.elapsed().as_secs_f64(),
        total.received,
        total.sent,
        total.no_port,
        total.gso_dropped
    );
    for (w, (_, ports)) in report.iter().enumerate() {
        for (name, backend, s) in ports {
            eprintln!(
                "  {name} ({backend}{}): rx {} pkts {} bytes, tx {} pkts {} bytes, tx dropped {}",
                if workers > 1 { format!(", worker {w}") } else { String::new() },
                s.rx_packets,
                s.rx_bytes,
                s.tx_packets,
                s.tx_bytes,
                s.tx_dropped
            );
        }
    }
    if let Some(e) = error.lock().map_err(|_| "a worker panicked")?.take() {
        return Err(e);
    }
    Ok(total)
}

/// The program `--no-p4` runs until a real one is loaded: it parses nothing
/// and drops every packet in ingress (`mark_to_drop`), as bmv2 does without a program.
const NO_PROGRAM: &str = include_str!("no_program.json");
