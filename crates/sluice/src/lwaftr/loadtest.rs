//! `sluice lwaftr loadtest`: the load generator of Snabb's lwAFTR
//! benchmarking (its `loadtest`). Replays IN.V4 into the IPv4 interface
//! and IN.V6 into the IPv6 interface in a loop (at a rate, or as fast as
//! the interfaces take them), counts what comes back on the other
//! interface, and prints per second and per direction what was sent,
//! what came back and the loss.
//!
//! One thread per interface: it sends that interface's frames and counts
//! the frames received on it (the output of the other direction).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_ports::afpacket::AfPacketPort;
use sluice_ports::{Port, RxBatch, VnetHdr};

/// What `loadtest` is started with.
#[derive(Debug, Clone)]
pub struct LoadtestArgs {
    pub in_v4: PathBuf,
    pub in_v6: PathBuf,
    pub v4: String,
    pub v6: String,
    /// Gbps of load per direction (frame bytes); as fast as possible when `None`.
    pub rate: Option<f64>,
    /// Seconds of load.
    pub duration: f64,
}

/// Counters of one interface, read by the reporting thread.
#[derive(Default)]
struct Side {
    tx_packets: AtomicU64,
    tx_bytes: AtomicU64,
    rx_packets: AtomicU64,
    rx_bytes: AtomicU64,
}

#[derive(Clone, Copy, Default)]
struct Snap {
    tx_packets: u64,
    tx_bytes: u64,
    rx_packets: u64,
    rx_bytes: u64,
}

impl Side {
    fn snap(&self) -> Snap {
        Snap {
            tx_packets: self.tx_packets.load(Ordering::Relaxed),
            tx_bytes: self.tx_bytes.load(Ordering::Relaxed),
            rx_packets: self.rx_packets.load(Ordering::Relaxed),
            rx_bytes: self.rx_bytes.load(Ordering::Relaxed),
        }
    }
}

fn read_pcap(p: &std::path::Path) -> Result<Vec<Vec<u8>>, String> {
    let frames = sluice_ports::pcapfile::read_frames(p)?;
    if frames.is_empty() {
        return Err(format!("{}: no frames", p.display()));
    }
    Ok(frames)
}

/// Sends `frames` in a loop into `port` (at `rate` bytes per second when
/// given) until `stop`, counting what it sent and what it received.
fn drive(
    mut port: AfPacketPort,
    frames: Vec<Vec<u8>>,
    rate: Option<f64>,
    side: Arc<Side>,
    stop: Arc<AtomicBool>,
    stop_tx: Arc<AtomicBool>,
) -> Result<(), String> {
    let vnet = VnetHdr::default();
    let mut batch = RxBatch::new(16384);
    let start = Instant::now();
    let mut sent_bytes = 0u64;
    let mut next = 0;
    while !stop.load(Ordering::Relaxed) {
        if !stop_tx.load(Ordering::Relaxed) {
            let budget = match rate {
                Some(r) => (r * start.elapsed().as_secs_f64()) as u64,
                None => u64::MAX,
            };
            let mut n = 0;
            while n < 64 && sent_bytes < budget {
                let f = &frames[next];
                next = (next + 1) % frames.len();
                if port.send(f, &vnet).is_ok() {
                    n += 1;
                    sent_bytes += f.len() as u64;
                }
            }
            let before = port.stats();
            port.flush().map_err(|e| format!("{}: {e}", port.name()))?;
            let after = port.stats();
            side.tx_packets.store(after.tx_packets, Ordering::Relaxed);
            side.tx_bytes.store(after.tx_bytes, Ordering::Relaxed);
            if n == 0 && before.tx_packets == after.tx_packets {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        loop {
            let got = port.recv(&mut batch).map_err(|e| format!("{}: {e}", port.name()))?;
            if got == 0 {
                break;
            }
            let bytes: usize = (0..got).map(|i| batch.frame(i).0.len()).sum();
            side.rx_packets.fetch_add(got as u64, Ordering::Relaxed);
            side.rx_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        }
        if stop_tx.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    Ok(())
}

/// One direction's line for one interval.
fn line(name: &str, tx: (u64, u64), rx: (u64, u64), secs: f64) -> String {
    let lost = tx.0.saturating_sub(rx.0);
    let pct = if tx.0 > 0 { lost as f64 * 100.0 / tx.0 as f64 } else { 0.0 };
    format!(
        "  {name}: TX {} packets ({:.6} MPPS), {} bytes ({:.6} Gbps); RX {} packets ({:.6} MPPS), {} bytes ({:.6} Gbps); \
         Loss: {lost} packets ({pct:.3}%)",
        tx.0,
        tx.0 as f64 / secs / 1e6,
        tx.1,
        tx.1 as f64 * 8.0 / secs / 1e9,
        rx.0,
        rx.0 as f64 / secs / 1e6,
        rx.1,
        rx.1 as f64 * 8.0 / secs / 1e9,
    )
}

/// Runs the load for `duration` seconds, printing one block per second and a summary.
pub fn loadtest(a: &LoadtestArgs) -> Result<(), String> {
    let f4 = read_pcap(&a.in_v4)?;
    let f6 = read_pcap(&a.in_v6)?;
    let p4 = AfPacketPort::open(&a.v4, false, None).map_err(|e| format!("{}: {e}", a.v4))?;
    let p6 = AfPacketPort::open(&a.v6, false, None).map_err(|e| format!("{}: {e}", a.v6))?;
    let s4 = Arc::new(Side::default());
    let s6 = Arc::new(Side::default());
    let stop = Arc::new(AtomicBool::new(false));
    let stop_tx = Arc::new(AtomicBool::new(false));
    let rate = a.rate.map(|g| g * 1e9 / 8.0);
    match a.rate {
        Some(g) => println!("Applying {g:.6} Gbps of load per direction."),
        None => println!("Applying as much load as the interfaces take."),
    }
    let mut threads = Vec::new();
    for (port, frames, side) in [(p4, f4, s4.clone()), (p6, f6, s6.clone())] {
        let (stop, stop_tx) = (stop.clone(), stop_tx.clone());
        threads.push(
            std::thread::Builder::new()
                .name("loadtest".into())
                .spawn(move || drive(port, frames, rate, side, stop, stop_tx))
                .map_err(|e| e.to_string())?,
        );
    }
    let start = Instant::now();
    let mut last = (Snap::default(), Snap::default());
    let mut t = 1.0;
    while t <= a.duration + 1e-9 {
        let wait = Duration::from_secs_f64(t).saturating_sub(start.elapsed());
        std::thread::sleep(wait);
        let now = (s4.snap(), s6.snap());
        let (d4, d6) = (diff(now.0, last.0), diff(now.1, last.1));
        println!("Time {t:.0} s:");
        println!(
            "{}",
            line("IPv4 -> IPv6 (encapsulation)", (d4.tx_packets, d4.tx_bytes), (d6.rx_packets, d6.rx_bytes), 1.0)
        );
        println!(
            "{}",
            line("IPv6 -> IPv4 (decapsulation)", (d6.tx_packets, d6.tx_bytes), (d4.rx_packets, d4.rx_bytes), 1.0)
        );
        last = now;
        t += 1.0;
    }
    // Stop sending, then let the last frames in flight arrive.
    stop_tx.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    for th in threads {
        th.join().map_err(|_| "a load thread panicked".to_string())??;
    }
    let (e4, e6) = (s4.snap(), s6.snap());
    let secs = a.duration.max(1e-9);
    println!("Total over {:.0} s:", a.duration);
    println!(
        "{}",
        line("IPv4 -> IPv6 (encapsulation)", (e4.tx_packets, e4.tx_bytes), (e6.rx_packets, e6.rx_bytes), secs)
    );
    println!(
        "{}",
        line("IPv6 -> IPv4 (decapsulation)", (e6.tx_packets, e6.tx_bytes), (e4.rx_packets, e4.rx_bytes), secs)
    );
    Ok(())
}

fn diff(a: Snap, b: Snap) -> Snap {
    Snap {
        tx_packets: a.tx_packets - b.tx_packets,
        tx_bytes: a.tx_bytes - b.tx_bytes,
        rx_packets: a.rx_packets - b.rx_packets,
        rx_bytes: a.rx_bytes - b.rx_bytes,
    }
}
