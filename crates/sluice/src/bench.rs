//! `sluice bench`: replays traffic from memory through the pipeline as fast as
//! possible and prints one line per second, in the spirit of Snabb's
//! `lwaftr bench`. With no program it runs the built-in router example with a
//! generated route table and generated 64-byte IPv4/UDP traffic.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_engine::Switch;

/// The router example, compiled by p4c, embedded so `sluice bench` needs no files.
pub const ROUTER_JSON: &str = include_str!("../../../examples/router.json");

/// Network address of built-in route `r`: consecutive /24s from 10.0.0.0
/// (up to 4M routes stay inside 10.0.0.0-73.255.255.0).
pub fn route_base(r: u32) -> u32 {
    (10u32 << 24).wrapping_add(r << 8)
}

/// Route-table commands for the built-in router: `routes` /24 routes over 16 next hops.
pub fn router_commands(routes: u32) -> String {
    let mut s = String::new();
    for nh in 1..=16u32 {
        s.push_str(&format!(
            "table_add RouterIngress.nexthop RouterIngress.forward {nh} => {} 02:00:00:00:00:{:02x} 00:5e:00:00:00:{:02x}\n",
            nh % 4,
            nh,
            nh
        ));
    }
    for r in 0..routes {
        let net = std::net::Ipv4Addr::from(route_base(r));
        s.push_str(&format!("table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop {net}/24 => {}\n", r % 16 + 1));
    }
    s
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// 64-byte IPv4/UDP frames (without FCS: 60 bytes on the wire buffer) to `n` destinations in the routes.
pub fn router_traffic(n: usize, routes: u32) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(n);
    let mut x: u32 = 0x1234_5678;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let r = x % routes.max(1);
        let mut p = vec![0u8; 60];
        p[0..6].copy_from_slice(&[0, 0x5e, 0, 0, 0, 0xfe]);
        p[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        p[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut p[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&46u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[192, 168, 0, 1]);
        ip[16..20].copy_from_slice(&(route_base(r) | ((x >> 24) | 1)).to_be_bytes());
        let c = csum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        p[34..36].copy_from_slice(&(1024 + (x & 0xff) as u16).to_be_bytes());
        p[36..38].copy_from_slice(&53u16.to_be_bytes());
        p[38..40].copy_from_slice(&26u16.to_be_bytes());
        out.push(p);
    }
    out
}

/// Builds the switch and traffic for a bench run.
pub fn setup(
    program: Option<&Path>,
    commands: Option<&Path>,
    pcap: Option<&Path>,
    routes: u32,
) -> Result<(Switch, Vec<Vec<u8>>), String> {
    match program {
        None => {
            let mut sw = sluice_engine::load_switch(ROUTER_JSON).map_err(|e| e.to_string())?;
            sw.set_mode(crate::default_mode()).map_err(|e| e.to_string())?;
            let failed = crate::apply_command_text(&mut sw, &router_commands(routes), "built-in routes", false);
            if failed > 0 {
                return Err("built-in route table failed to load".into());
            }
            Ok((sw, router_traffic(4096, routes)))
        }
        Some(p) => {
            let mut sw = crate::load(p)?;
            if let Some(c) = commands {
                crate::apply_commands(&mut sw, c, false)?;
            }
            let pcap = pcap.ok_or("--pcap TRAFFIC.pcap is required with a program")?;
            let pk: Vec<Vec<u8>> = crate::pcapio::read_pcap(pcap)?.into_iter().map(|(_, d)| d).collect();
            if pk.is_empty() {
                return Err(format!("{} holds no packets", pcap.display()));
            }
            Ok((sw, pk))
        }
    }
}

/// One worker's share of the bench traffic, replayed in batches of 32.
struct BenchIo {
    traffic: Vec<Vec<u8>>,
    next: usize,
    stop: Arc<AtomicBool>,
    /// Packets, wire bytes and packets sent by this worker.
    counts: Arc<[AtomicU64; 3]>,
    /// The CPU this worker pins itself to on its first batch (one worker per core).
    cpu: Option<usize>,
    /// Packets after which this worker stops by itself (`--packets`), so that
    /// instruction counts cover exactly that many packets.
    limit: Option<u64>,
}

impl crate::workers::WorkerIo for BenchIo {
    fn run_batch(&mut self, sw: &mut Switch) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        if let Some(cpu) = self.cpu.take() {
            pin_to_cpu(cpu);
        }
        let mut end = (self.next + 32).min(self.traffic.len());
        if let Some(limit) = self.limit {
            let left = limit.saturating_sub(self.counts[0].load(Ordering::Relaxed));
            if left == 0 {
                return false;
            }
            end = end.min(self.next + left as usize);
        }
        let batch = &self.traffic[self.next..end];
        self.next = if end == self.traffic.len() { 0 } else { end };
        let mut sent = 0;
        sw.process_batch(0, batch.iter().map(|p| p.as_slice()), &mut |_, _| sent += 1);
        // Wire size: frame + FCS + preamble/IFG (20 bytes) as network benchmarks count it.
        let bytes: u64 = batch.iter().map(|p| p.len() as u64 + 4 + 20).sum();
        self.counts[0].fetch_add(batch.len() as u64, Ordering::Relaxed);
        self.counts[1].fetch_add(bytes, Ordering::Relaxed);
        self.counts[2].fetch_add(sent, Ordering::Relaxed);
        true
    }
}

/// Pins the calling thread to one CPU, so that a worker keeps its caches
/// and two workers never share a core; failure only costs speed.
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays in bounds for cpu < CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < libc::CPU_SETSIZE as usize {
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// Runs the benchmark and prints per-second and summary lines.
#[allow(clippy::too_many_arguments)]
pub fn run(
    program: Option<&Path>,
    commands: Option<&Path>,
    pcap: Option<&Path>,
    duration: f64,
    routes: u32,
    max_packets: Option<u64>,
    workers: usize,
) -> Result<(), String> {
    let (sw, traffic) = setup(program, commands, pcap, routes)?;
    let workers = workers.max(1);
    println!(
        "sluice bench: {} ({} packets in memory, {} routes), {duration} s, {workers} worker(s), {} pipelines",
        program.map_or("built-in router".to_string(), |p| p.display().to_string()),
        traffic.len(),
        if program.is_none() { routes.to_string() } else { "-".into() },
        match sw.mode() {
            sluice_engine::ExecMode::Compiled => "compiled",
            sluice_engine::ExecMode::Interpreted => "interpreted",
        }
    );
    // Flow-hashed distribution, as the live ports do it.
    let mut shares: Vec<Vec<Vec<u8>>> = vec![Vec::new(); workers];
    for p in traffic {
        shares[crate::workers::flow_hash(&p) as usize % workers].push(p);
    }
    if let Some(k) = shares.iter().position(|s| s.is_empty()) {
        return Err(format!("worker {k} gets no traffic: the traffic has too few flows for {workers} workers"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<Arc<[AtomicU64; 3]>> = (0..workers).map(|_| Arc::new(Default::default())).collect();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let io: Vec<Box<dyn crate::workers::WorkerIo>> = shares
        .into_iter()
        .zip(&counts)
        .enumerate()
        .map(|(k, (t, c))| {
            let cpu = (workers <= cpus).then_some(k);
            // The workers share `--packets` out: each stops after its part.
            let limit = max_packets.map(|m| m / workers as u64 + u64::from((k as u64) < m % workers as u64));
            Box::new(BenchIo { traffic: t, next: 0, stop: stop.clone(), counts: c.clone(), cpu, limit }) as Box<_>
        })
        .collect();
    let total = |i: usize| counts.iter().map(|c| c[i].load(Ordering::Relaxed)).sum::<u64>();
    let pool = crate::workers::Pool::start(sw, io)?;
    let start = Instant::now();
    let mut tick = start;
    let (mut last_p, mut last_b, mut last_sent) = (0u64, 0u64, 0u64);
    let end = Duration::from_secs_f64(duration);
    // On a terminal, a progress bar is redrawn in place between the per-second lines.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    loop {
        std::thread::sleep(Duration::from_millis(if max_packets.is_some() { 1 } else { 50 }));
        let now = Instant::now();
        let (pkts, bytes, sent) = (total(0), total(1), total(2));
        if tty {
            let frac = (now.duration_since(start).as_secs_f64() / duration).min(1.0);
            let filled = (frac * 30.0) as usize;
            print!("\r[{}{}] {:5.1}% {} packets", "#".repeat(filled), ".".repeat(30 - filled), frac * 100.0, pkts);
            std::io::Write::flush(&mut std::io::stdout()).ok();
        }
        if now.duration_since(tick) >= Duration::from_secs(1) {
            let dt = now.duration_since(tick).as_secs_f64();
            if tty {
                print!("\r{:60}\r", "");
            }
            println!(
                "{:6.1} s  {:7.3} Mpps  {:7.3} Gbps  sent {}  dropped {}",
                now.duration_since(start).as_secs_f64(),
                (pkts - last_p) as f64 / dt / 1e6,
                (bytes - last_b) as f64 * 8.0 / dt / 1e9,
                sent - last_sent,
                (pkts - last_p) - (sent - last_sent)
            );
            tick = now;
            last_p = pkts;
            last_b = bytes;
            last_sent = sent;
        }
        if now.duration_since(start) >= end || max_packets.is_some_and(|m| pkts >= m) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let dt = start.elapsed().as_secs_f64();
    pool.finish();
    let (pkts, bytes, sent) = (total(0), total(1), total(2));
    if tty {
        print!("\r{:60}\r", "");
    }
    println!(
        "summary: {pkts} packets in {dt:.2} s = {:.3} Mpps, {:.3} Gbps, {} sent, {} dropped",
        pkts as f64 / dt / 1e6,
        bytes as f64 * 8.0 / dt / 1e9,
        sent,
        pkts - sent
    );
    Ok(())
}
