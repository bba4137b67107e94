//! The live loop over in-memory wires (`sluice_ports::memory`): batching,
//! counting, link loss and return, captures, changes reaching every
//! worker between batches, frames going up to the control plane. No
//! interface, no privilege; waits are for events, with a generous bound
//! that only catches a hang.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_dataplane::workers::Pool;
use sluice_dataplane::{Metrics, NullForward, Stop};
use sluice_live::{Live, LiveConfig, PortSpec, Up, UpSink};
use sluice_ports::memory::{MemoryWire, WireLink};

/// Waits for `done`, failing after a bound far above any machine's pace.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t = Instant::now();
    while !done() {
        assert!(t.elapsed() < Duration::from_secs(60), "{what}: not within 60 s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn frame(i: u32) -> Vec<u8> {
    // Distinct source addresses: flows spread over workers.
    let mut f = vec![0u8; 60];
    f[12] = 0x08;
    f[14] = 0x45;
    f[23] = 17;
    f[26..30].copy_from_slice(&i.to_be_bytes());
    f[30..34].copy_from_slice(&[10, 0, 0, 1]);
    f
}

struct Rig {
    a: MemoryWire,
    b: MemoryWire,
    pool: Pool<NullForward>,
    live: Live,
    stop: Stop,
}

fn rig(workers: usize, cfg: impl FnOnce(&mut LiveConfig), up: Option<UpSink<()>>) -> Rig {
    let (a, b) = (MemoryWire::new("a").unwrap(), MemoryWire::new("b").unwrap());
    let mut c = LiveConfig {
        ports: vec![PortSpec::parse("1@memory:a").unwrap(), PortSpec::parse("2@memory:b").unwrap()],
        memory: vec![a.clone(), b.clone()],
        workers,
        ..LiveConfig::default()
    };
    cfg(&mut c);
    let stop = Stop::new();
    let (pool, live) = sluice_live::start(NullForward::new(1, 2), &c, up, stop.clone()).unwrap();
    Rig { a, b, pool, live, stop }
}

impl Rig {
    fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.pool.io_metrics().get(name, labels).unwrap_or(0.0)
    }

    fn metrics(&self) -> Metrics {
        self.pool.io_metrics()
    }

    fn end(mut self) -> Live {
        self.stop.set();
        self.pool.stop_workers();
        self.live
    }
}

#[test]
fn frames_cross_in_batches_in_order_and_every_one_is_counted() {
    let r = rig(1, |_| {}, None);
    let sent: Vec<Vec<u8>> = (0..1000).map(frame).collect();
    for f in &sent {
        r.a.push(f);
    }
    let mut got = Vec::new();
    wait_for("1000 frames out of port 2", || {
        got.extend(r.b.take_sent());
        got.len() >= 1000
    });
    assert_eq!(got, sent, "one worker keeps the order of one port's frames");
    let m = r.metrics();
    assert_eq!(m.get("sluice_port_received_packets_total", &[("port", "1")]), Some(1000.0));
    assert_eq!(m.get("sluice_port_sent_packets_total", &[("port", "2")]), Some(1000.0));
    assert_eq!(m.get("sluice_port_sent_bytes_total", &[("port", "2")]), Some(60_000.0));
    let batches = m.get("sluice_worker_batches_total", &[("worker", "0")]).unwrap();
    assert!((8.0..=1000.0).contains(&batches), "1000 frames in {batches} batches (at most 128 a batch)");
    let live = r.end();
    let t = live.totals();
    assert_eq!((t.received, t.sent, t.batches), (1000, 1000, batches as u64));
    assert!(live.summary().contains("  b (memory): rx 0 pkts 0 bytes, tx 1000 pkts 60000 bytes"), "{}", live.summary());
}

#[test]
fn a_link_that_goes_down_or_away_drops_and_counts_until_it_is_back() {
    let r = rig(1, |_| {}, None);
    r.b.set_link(WireLink::Down);
    wait_for("port 2 seen down", || r.metric("sluice_port_up", &[("port", "2")]) == 0.0);
    for i in 0..100 {
        r.a.push(&frame(i));
    }
    wait_for("100 frames dropped for the link", || {
        r.metric("sluice_dropped_packets_total", &[("reason", "link_down")]) == 100.0
    });
    assert!(r.b.take_sent().is_empty());
    r.b.set_link(WireLink::Up);
    wait_for("port 2 back", || r.metric("sluice_port_up", &[("port", "2")]) == 1.0);
    for i in 0..50 {
        r.a.push(&frame(i));
    }
    let mut n = 0;
    wait_for("50 frames after the link came back", || {
        n += r.b.take_sent().len();
        n == 50
    });
    // Gone: the port is closed, and opened anew once the wire is up.
    r.b.set_link(WireLink::Gone);
    wait_for("port 2 gone", || r.metric("sluice_port_up", &[("port", "2")]) == 0.0);
    r.b.set_link(WireLink::Up);
    wait_for("port 2 opened again", || r.metric("sluice_port_up", &[("port", "2")]) == 1.0);
    r.a.push(&frame(7));
    wait_for("a frame through the new port", || r.b.take_sent().len() == 1);
    let m = r.metrics();
    assert!(m.get("sluice_link_changes_total", &[]).unwrap() >= 4.0, "{}", m.to_text());
    // The counts of the port's first life are kept.
    assert_eq!(m.get("sluice_port_sent_packets_total", &[("port", "2")]), Some(51.0));
    r.end();
}

#[test]
fn captures_record_what_each_port_received_and_sent() {
    let dir = std::env::temp_dir().join(format!("sluice-live-captures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.clone();
    let r = rig(1, move |c| c.pcap_dir = Some(d), None);
    for i in 0..20 {
        r.a.push(&frame(i));
    }
    wait_for("20 frames out", || {
        r.b.queued() == 0 && r.metric("sluice_port_sent_packets_total", &[("port", "2")]) == 20.0
    });
    r.end();
    let read = |n: &str| -> Vec<Vec<u8>> {
        sluice_ports::pcapfile::read_pcap(&dir.join(n)).unwrap().into_iter().map(|(_, f)| f).collect()
    };
    let want: Vec<Vec<u8>> = (0..20).map(frame).collect();
    assert_eq!(read("a_in.pcap"), want);
    assert_eq!(read("b_out.pcap"), want);
    assert!(read("a_out.pcap").is_empty() && read("b_in.pcap").is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_change_reaches_every_worker_and_no_frame_after_it_sees_the_old_state() {
    let r = rig(2, |_| {}, None);
    for i in 0..400 {
        r.a.push(&frame(i));
    }
    wait_for("400 frames forwarded by two workers", || {
        r.metric("sluice_port_sent_packets_total", &[("port", "2")]) == 400.0
    });
    let mut pool = r.pool;
    // Port 1's frames now go to port 3, which has no interface.
    pool.change(|d, _| *d = NullForward::new(1, 3));
    pool.flush();
    for i in 0..400 {
        r.a.push(&frame(i));
    }
    let rig = Rig { pool, ..r };
    wait_for("400 frames to a port without an interface", || {
        rig.metric("sluice_dropped_packets_total", &[("reason", "no_port")]) == 400.0
    });
    assert_eq!(rig.metric("sluice_port_sent_packets_total", &[("port", "2")]), 400.0, "a frame saw the old state");
    let m = rig.metrics();
    let per_worker: Vec<f64> =
        ["0", "1"].iter().map(|w| m.get("sluice_worker_received_packets_total", &[("worker", w)]).unwrap()).collect();
    assert_eq!(per_worker.iter().sum::<f64>(), 800.0);
    rig.end();
}

#[test]
fn frames_for_the_cpu_port_go_up_and_a_full_queue_is_counted() {
    let taken = Arc::new(AtomicUsize::new(0));
    let t = taken.clone();
    // Takes ten events, then is full.
    let up: UpSink<()> = Arc::new(move |u| match u {
        Up::PacketIn(f) => {
            assert_eq!(f.len(), 60);
            t.fetch_add(1, Ordering::Relaxed) < 10
        }
        Up::Notification(()) => true,
    });
    let r = rig(1, |c| c.cpu_port = Some(2), Some(up));
    for i in 0..50 {
        r.a.push(&frame(i));
    }
    wait_for("50 frames handed up", || taken.load(Ordering::Relaxed) == 50);
    wait_for("40 counted as dropped", || {
        r.metric("sluice_dropped_packets_total", &[("reason", "control_queue_full")]) == 40.0
    });
    assert!(r.b.take_sent().is_empty(), "frames for the CPU port left through its interface");
    r.end();
}
