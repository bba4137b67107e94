//! `sluice simple_switch`: the v1model switch on live ports, with its
//! control planes.
//!
//! The packet loop, the workers and the ports are `sluice_live`'s, shared
//! by every data plane; this file loads the program, applies `--commands`,
//! starts the loop with the switch (or, with `--null-forward`, with no
//! pipeline at all), connects the loop's PacketIns and digests to the
//! device the Thrift and P4Runtime servers share, and prints the counters
//! (and, with `--profile`, where the time went) when SIGINT or SIGTERM
//! stops it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice_control::device::{Device, DeviceInfo, Event, EventSink, PortInfo};
use sluice_dataplane::workers::Pool;
use sluice_dataplane::{DataPlane, NullForward};
use sluice_engine::Switch;
pub use sluice_live::{Backend, LiveStats, PortSpec};
use sluice_live::{LiveConfig, Up, UpSink};

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
    /// Time every stage and print where the time went when stopped.
    pub profile: bool,
    /// `--inject-faults SPEC`: faults every port injects (users' own testing).
    pub faults: Option<sluice_live::Faults>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Waits for SIGINT or SIGTERM (or a worker that failed).
fn wait_for_stop(stop: &AtomicBool) {
    while !STOP.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the workers and prints the loop's report (and the profile, asked
/// of the workers while they still run).
fn finish<D: DataPlane>(
    pool: &mut Pool<D>,
    live: &sluice_live::Live,
    stop: &AtomicBool,
    profile: bool,
) -> Result<LiveStats, String> {
    let times = profile.then(|| pool.profile());
    stop.store(true, Ordering::Relaxed);
    pool.stop_workers();
    eprint!("{}", live.summary());
    if let Some(p) = times {
        eprint!("where the time went, per stage:\n{}", p.report());
    }
    match live.error() {
        Some(e) => Err(e),
        None => Ok(live.totals()),
    }
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
        Some(p) => crate::load(p)?,
        None => sluice_engine::load_switch(NO_PROGRAM).map_err(|e| format!("internal empty program: {e}"))?,
    };
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
    };
    STOP.store(false, Ordering::Relaxed);
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    if let Some(wait) = opts.use_files {
        eprintln!("sluice: --use-files: starting in {wait} s");
        std::thread::sleep(Duration::from_secs_f64(wait.max(0.0)));
    }
    let stop = Arc::new(AtomicBool::new(false));
    if opts.null_forward {
        let nf = NullForward::new(opts.ports[0].port, opts.ports[1].port);
        let (mut pool, live) = sluice_live::start(nf, &cfg, None, stop.clone())?;
        eprintln!(
            "sluice: null forwarder (no pipeline) between ports {} and {}",
            opts.ports[0].port, opts.ports[1].port
        );
        wait_for_stop(&stop);
        return finish(&mut pool, &live, &stop, opts.profile);
    }
    // The control servers hold a descriptor per client.
    crate::raise_descriptor_limit();
    let (events_tx, events_rx) = EventSink::channel();
    let up: UpSink<sluice_engine::runtime::Digest> = Arc::new(move |u| match u {
        Up::PacketIn(f) => events_tx.send(Event::PacketIn(f)),
        Up::Notification(d) => events_tx.send(Event::Digest(d)),
    });
    let (pool, live) = sluice_live::start(sw, &cfg, Some(up), stop.clone())?;
    let info = DeviceInfo {
        device_id: opts.device_id,
        thrift_port: opts.thrift_port,
        cpu_port: opts.cpu_port,
        ports: opts.ports.iter().map(|p| PortInfo { number: p.port, iface: p.iface.clone() }).collect(),
        // Pcap-file ports have no link to ask.
        link_up: if opts.use_files.is_some() { None } else { Some(sluice_ports::link_is_up) },
    };
    let device = Arc::new(Device::new(pool, json.into(), info, Some(events_rx)));
    if let Some(port) = opts.thrift_port {
        match sluice_thrift::serve(device.clone(), ("0.0.0.0", port)) {
            Ok(s) => eprintln!("sluice: Thrift runtime server listening on port {}", s.port),
            Err(e) => eprintln!("sluice: warning: the Thrift server could not start on port {port}: {e}"),
        }
    }
    if let Some(addr) = &opts.grpc_addr {
        if let Err(e) = crate::grpc::start(device.clone(), addr) {
            let mut pool = device.pool();
            let _ = finish(&mut pool, &live, &stop, false);
            return Err(e);
        }
    }
    eprintln!(
        "sluice: forwarding on {} port(s) with {} worker(s){}",
        opts.ports.len(),
        cfg.workers,
        if opts.program.is_none() { " and no program loaded (--no-p4): every packet is dropped" } else { "" }
    );
    wait_for_stop(&stop);
    let mut pool = device.pool();
    finish(&mut pool, &live, &stop, opts.profile)
}

/// The program `--no-p4` runs until a real one is loaded: it parses nothing
/// and drops every packet in ingress (`mark_to_drop`), as bmv2 does without a program.
const NO_PROGRAM: &str = include_str!("no_program.json");
