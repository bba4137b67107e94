//! Multi-worker correctness.
//!
//! * Every case of `../shared/conformance/bmv2/` through a pool of 3 workers
//!   (each packet to the worker its flow hash picks, one packet at a time so
//!   the result is deterministic) gives the same per-port output as bmv2, and
//!   the read-back commands see the counters of all workers merged and the
//!   registers shared.
//! * A table entry rewritten at a high rate while 2 workers forward traffic:
//!   every packet is handled by the old or the new entry, never a mix, and
//!   none is lost.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{case_dirs, check_expect_cli, shared};
use sluice_control::{cli, run_command};
use sluice_dataplane::workers::{flow_hash, Pool, WorkerIo};
use sluice_engine::Switch;
use sluice_node::Control;

type Outputs = Vec<(u32, Vec<u8>)>;

/// A worker fed one packet at a time through a channel; it answers with what the switch emitted.
struct ChannelIo {
    rx: mpsc::Receiver<(u32, Vec<u8>, mpsc::Sender<Outputs>)>,
}

impl WorkerIo<Switch> for ChannelIo {
    fn run_batch(&mut self, sw: &mut Switch) -> bool {
        match self.rx.recv_timeout(Duration::from_millis(1)) {
            Ok((port, pkt, reply)) => {
                let mut out = Vec::new();
                sw.process(port, &pkt, &mut |p, b| out.push((p, b.to_vec())));
                reply.send(out).is_ok()
            }
            Err(mpsc::RecvTimeoutError::Timeout) => true,
            Err(mpsc::RecvTimeoutError::Disconnected) => false,
        }
    }
}

fn run_case_with_workers(dir: &Path, n: usize) -> Result<(), String> {
    let name = dir.file_name().unwrap().to_string_lossy().to_string();
    let mut master = sluice::load(&dir.join("program.json"))?;
    // Commands go through the pool like a control plane's would; start-up ones straight to the master.
    let commands = std::fs::read_to_string(dir.join("commands.txt")).map_err(|e| e.to_string())?;
    let ports: BTreeSet<u32> = std::fs::read_to_string(dir.join("ports.txt"))
        .map_err(|e| e.to_string())?
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let mut txs = Vec::new();
    let mut ios: Vec<Box<dyn WorkerIo<Switch>>> = Vec::new();
    for _ in 0..n {
        let (tx, rx) = mpsc::channel();
        txs.push(tx);
        ios.push(Box::new(ChannelIo { rx }));
    }
    // Half the commands before the workers start, half through the pool after.
    let lines: Vec<&str> = commands.lines().collect();
    let (before, after) = lines.split_at(lines.len() / 2);
    for l in before {
        let _ = cli::run(&mut master, l);
    }
    let control = Control::new(Pool::start(master, ios)?, "p4", None);
    let mut pool = control.lock();
    for l in after {
        let _ = run_command(&mut pool, l);
    }
    let mut inputs: Vec<(std::time::Duration, usize, u32, Vec<u8>)> = Vec::new();
    for ent in std::fs::read_dir(dir.join("in")).map_err(|e| e.to_string())? {
        let ent = ent.map_err(|e| e.to_string())?;
        let fname = ent.file_name().to_string_lossy().to_string();
        let Some(port) = fname.strip_suffix(".pcap").and_then(|s| s.parse::<u32>().ok()) else { continue };
        for (ts, data) in sluice_ports::pcapfile::read_pcap(&ent.path())? {
            let seq = inputs.len();
            inputs.push((ts, seq, port, data));
        }
    }
    inputs.sort_by_key(|(ts, s, _, _)| (*ts, *s));
    let mut got: std::collections::BTreeMap<u32, Vec<Vec<u8>>> = std::collections::BTreeMap::new();
    for (_, _, port, data) in inputs {
        let (rtx, rrx) = mpsc::channel();
        let w = flow_hash(&data) as usize % n;
        txs[w].send((port, data, rtx)).map_err(|_| "worker ended".to_string())?;
        for (p, b) in rrx.recv().map_err(|_| "worker ended".to_string())? {
            if ports.contains(&p) {
                got.entry(p).or_default().push(b);
            }
        }
    }
    for p in &ports {
        let want: Vec<Vec<u8>> = sluice_ports::pcapfile::read_pcap(&dir.join(format!("out/{p}.pcap")))?
            .into_iter()
            .map(|(_, d)| d)
            .collect();
        let g = got.get(p).cloned().unwrap_or_default();
        if want != g {
            return Err(format!(
                "{name}: port {p}: {n} workers emitted {} packets, bmv2 {} (or they differ)",
                g.len(),
                want.len()
            ));
        }
    }
    let label = format!("{name} ({n} workers)");
    check_expect_cli(dir, &label, |cmd| run_command(&mut pool, cmd).unwrap_or_else(|e| e.to_string()))?;
    drop(txs);
    pool.stop_workers();
    Ok(())
}

#[test]
fn bmv2_corpus_gives_the_same_output_with_several_workers() {
    let dirs = case_dirs(&shared().join("bmv2"));
    assert!(dirs.len() >= 20, "expected the bmv2 corpus, found {} cases", dirs.len());
    let failures: Vec<String> = dirs.iter().filter_map(|d| run_case_with_workers(d, 3).err()).collect();
    assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), dirs.len(), failures.join("\n"));
}

const MAC_A: [u8; 6] = [0x00, 0x5e, 0, 0, 0, 0xaa];
const MAC_B: [u8; 6] = [0x00, 0x5e, 0, 0, 0, 0xbb];

/// Replays router traffic and checks every output against the two possible entries.
struct CheckingIo {
    traffic: Vec<Vec<u8>>,
    next: usize,
    stop: Arc<AtomicBool>,
    /// inputs, outputs, port-1 outputs (entry A), port-2 outputs (entry B), mixed outputs.
    counts: Arc<[AtomicU64; 5]>,
}

impl WorkerIo<Switch> for CheckingIo {
    fn run_batch(&mut self, sw: &mut Switch) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let end = (self.next + 32).min(self.traffic.len());
        let batch = &self.traffic[self.next..end];
        self.next = if end == self.traffic.len() { 0 } else { end };
        let c = &self.counts;
        let frames: Vec<&[u8]> = batch.iter().map(|p| p.as_slice()).collect();
        sw.process_batch(0, &frames, &mut |_, port, out: &[u8]| {
            c[1].fetch_add(1, Ordering::Relaxed);
            let k = match (port, &out[0..6]) {
                (1, d) if d == MAC_A => 2,
                (2, d) if d == MAC_B => 3,
                _ => 4,
            };
            c[k].fetch_add(1, Ordering::Relaxed);
        });
        c[0].fetch_add(batch.len() as u64, Ordering::Relaxed);
        true
    }
}

#[test]
fn table_updates_under_traffic_are_atomic_per_packet_and_lose_nothing() {
    let mut master = sluice_engine::load_switch(sluice::p4::bench::ROUTER_JSON).unwrap();
    cli::run(&mut master, "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 7").unwrap();
    let added = cli::run(
        &mut master,
        "table_add RouterIngress.nexthop RouterIngress.forward 7 => 1 02:00:00:00:00:01 00:5e:00:00:00:aa",
    )
    .unwrap();
    let handle: u32 =
        added.rsplit(' ').next().unwrap().trim().parse().unwrap_or_else(|_| panic!("handle in {added:?}"));
    let traffic = sluice::p4::bench::router_traffic(1024, 1000, sluice::p4::bench::RouteLayout::Consecutive);
    let workers = 2;
    let mut shares = vec![Vec::new(); workers];
    for p in traffic {
        shares[flow_hash(&p) as usize % workers].push(p);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<[AtomicU64; 5]> = Arc::new(Default::default());
    let ios: Vec<Box<dyn WorkerIo<Switch>>> = shares
        .into_iter()
        .map(|t| Box::new(CheckingIo { traffic: t, next: 0, stop: stop.clone(), counts: counts.clone() }) as Box<_>)
        .collect();
    let control = Control::new(Pool::start(master, ios).unwrap(), "p4", None);
    let mut pool = control.lock();
    for i in 0..4000 {
        let line = if i % 2 == 0 {
            format!("table_modify RouterIngress.nexthop RouterIngress.forward {handle} 2 02:00:00:00:00:02 00:5e:00:00:00:bb")
        } else {
            format!("table_modify RouterIngress.nexthop RouterIngress.forward {handle} 1 02:00:00:00:00:01 00:5e:00:00:00:aa")
        };
        run_command(&mut pool, &line).unwrap();
        if i % 64 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    // The counters the workers keep are merged on read.
    let read = run_command(&mut pool, "counter_read RouterIngress.port_rx 0").unwrap();
    stop.store(true, Ordering::Relaxed);
    pool.stop_workers();
    let master = pool.view();
    let c: Vec<u64> = counts.iter().map(|x| x.load(Ordering::Relaxed)).collect();
    assert_eq!(c[4], 0, "{} packets were forwarded with a mix of the old and the new entry", c[4]);
    assert_eq!(c[0], c[1], "{} packets in, {} out: packets were lost", c[0], c[1]);
    assert!(c[2] > 0 && c[3] > 0, "both entries should have forwarded traffic: A {} B {}", c[2], c[3]);
    // "RouterIngress.port_rx[0]= (B bytes, P packets)"
    let pkts: u64 =
        read.split(", ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    assert!(pkts > 0, "merged counter read saw no packets: {read}");
    assert_eq!(master.counter_read(0, 0).unwrap().0, c[0], "merged port counter after the workers ended");
}

/// In one batch of commands, a direct meter configured right after its entry
/// was added keeps its rates on every worker (the add reaches the workers
/// before the shared meter is set).
#[test]
fn a_batch_that_adds_an_entry_then_sets_its_direct_meter_keeps_the_rates() {
    let path = shared().join("p4c-bench/pins_wbb/pins_wbb.json");
    let master = sluice::load(&path).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    struct Idle(Arc<AtomicBool>);
    impl WorkerIo<Switch> for Idle {
        fn run_batch(&mut self, _: &mut Switch) -> bool {
            std::thread::sleep(Duration::from_micros(100));
            !self.0.load(Ordering::Relaxed)
        }
    }
    let ios: Vec<Box<dyn WorkerIo<Switch>>> = (0..2).map(|_| Box::new(Idle(stop.clone())) as Box<_>).collect();
    let control = Control::new(Pool::start(master, ios).unwrap(), "p4", None);
    let mut pool = control.lock();
    let t = "ingress.acl_wbb_ingress.acl_wbb_ingress_table";
    let m = "ingress.acl_wbb_ingress.acl_wbb_ingress_meter";
    let add = format!("table_add {t} NoAction 1&&&1 0&&&0 0&&&0 0&&&0 0&&&0 => 10");
    let set = format!("meter_set_rates {m} 0 0.5:100 1.5:200");
    let answers = sluice_control::run_commands(&mut pool, &[&add, &set]);
    assert!(answers.iter().all(|a| a.is_ok()), "{answers:?}");
    let rates = run_command(&mut pool, &format!("meter_get_rates {m} 0")).unwrap();
    assert!(rates.contains("burst size = 100"), "the workers' table_add reset the meter set after it: {rates}");
    stop.store(true, Ordering::Relaxed);
    pool.stop_workers();
}

/// A worker that runs its packets once, in batches of 50 at switch time 0
/// (so that no meter refills), counts what the switch emits and stops.
struct OnceIo {
    packets: Vec<Vec<u8>>,
    emitted: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
}

impl WorkerIo<Switch> for OnceIo {
    fn run_batch(&mut self, sw: &mut Switch) -> bool {
        let mut n = 0;
        for batch in self.packets.chunks(50) {
            let frames: Vec<&[u8]> = batch.iter().map(|p| p.as_slice()).collect();
            sw.process_batch_at(0, &frames, 0, &mut |_, _, _| n += 1);
        }
        self.emitted.fetch_add(n, Ordering::Relaxed);
        self.done.fetch_add(1, Ordering::Relaxed);
        false
    }
}

/// Packets of the edge example that pass its policer when `workers` workers
/// each send 1000 packets (60 bytes, one source) with the policer's peak
/// burst at 12 000 bytes and time held still.
fn edge_packets_passed_by_a_policer(workers: usize) -> u64 {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/edge.json");
    let mut master = sluice::load(&path).unwrap();
    let setup = sluice::p4::bench::edge_acl_commands(10)
        + &sluice::p4::bench::edge_route_commands(16, sluice::p4::bench::RouteLayout::Consecutive);
    for line in setup.lines() {
        cli::run(&mut master, line).unwrap_or_else(|e| panic!("{line}: {e:?}"));
    }
    cli::run(&mut master, "meter_set_rates EdgeIngress.policer 0 0.000001:6000 0.000001:12000").unwrap();
    let traffic = sluice::p4::bench::router_traffic(1000 * workers, 16, sluice::p4::bench::RouteLayout::Consecutive);
    assert!(traffic.iter().all(|p| p.len() == 60));
    let (emitted, done) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let ios: Vec<Box<dyn WorkerIo<Switch>>> = traffic
        .chunks(1000)
        .map(|c| {
            Box::new(OnceIo { packets: c.to_vec(), emitted: emitted.clone(), done: done.clone() })
                as Box<dyn WorkerIo<Switch>>
        })
        .collect();
    let pool = Pool::start(master, ios).unwrap();
    while done.load(Ordering::Relaxed) < workers as u64 {
        std::thread::sleep(Duration::from_millis(1));
    }
    pool.finish();
    emitted.load(Ordering::Relaxed)
}

/// One worker colours exactly as one shared bucket would: 12 000 bytes of
/// peak burst pass 200 packets of 60 bytes, the rest are red and dropped.
/// Two workers metering the same cell colour green from tokens they lease
/// from it (so that they do not hand its cache line over per packet), yet
/// never pass more than the bucket holds, and leave unused at most each
/// worker's lease (a sixteenth of the burst, 12 packets).
#[test]
fn workers_sharing_a_meter_cell_never_pass_more_than_its_burst() {
    assert_eq!(edge_packets_passed_by_a_policer(1), 200);
    let two = edge_packets_passed_by_a_policer(2);
    assert!((200 - 2 * 13..=200).contains(&two), "two workers passed {two} packets");
}

/// bmv2's `reset_state` (Thrift `bm_reset_state`, as `simple_switch_CLI`
/// sends it) on a device with two workers: every worker forgets the
/// entries and registers, keeps its program, and the workers and the
/// master still share the registers afterwards.
#[test]
fn thrift_reset_state_reaches_every_worker_and_the_registers_stay_shared() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/edge.json");
    let json = std::fs::read_to_string(&path).unwrap();
    let master = sluice::load(&path).unwrap();
    let mut txs = Vec::new();
    let mut ios: Vec<Box<dyn WorkerIo<Switch>>> = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = mpsc::channel();
        txs.push(tx);
        ios.push(Box::new(ChannelIo { rx }));
    }
    let control = Control::new(Pool::start(master, ios).unwrap(), "p4", None);
    let dev = sluice_control::device::Device::new(control, json.into(), Default::default(), None);
    let cmd = |c: &str| run_command(&mut dev.pool(), c).unwrap_or_else(|e| panic!("{c}: {e}"));
    cmd("act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop 2 00:00:00:00:00:01 00:00:00:00:00:02");
    cmd("table_indirect_add EdgeIngress.routes 10.0.0.0/8 => 0");
    cmd("register_write EdgeIngress.last_len 7 99");
    // An IPv4/TCP packet to 10.0.1.2, `len` bytes long, on `port`, through worker `w`: the ports it left on.
    let send = |w: usize, port: u32, len: usize| -> Vec<u32> {
        let mut pkt = vec![0u8; len];
        pkt[12..14].copy_from_slice(&[0x08, 0x00]);
        pkt[14] = 0x45;
        pkt[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        pkt[22..24].copy_from_slice(&[64, 6]);
        pkt[26..34].copy_from_slice(&[10, 0, 0, 1, 10, 0, 1, 2]);
        pkt[46] = 0x50;
        let (rtx, rrx) = mpsc::channel();
        txs[w].send((port, pkt, rtx)).unwrap();
        rrx.recv().unwrap().into_iter().map(|(p, _)| p).collect()
    };
    assert_eq!((send(0, 1, 60), send(1, 1, 60)), (vec![2], vec![2]), "both workers route before the reset");
    let answer = sluice_thrift::call(&dev, "standard", "bm_reset_state", &Default::default());
    assert!(answer.is_ok(), "bm_reset_state: {answer:?}");
    // No route any more: the packet goes nowhere.
    assert_eq!((send(0, 1, 60), send(1, 1, 60)), (vec![], vec![]), "both workers forgot the route");
    assert_eq!(cmd("register_read EdgeIngress.last_len 7"), "EdgeIngress.last_len[7]= 0");
    // Each worker writes a register cell; the master reads both.
    send(0, 5, 70);
    send(1, 6, 80);
    assert_eq!(cmd("register_read EdgeIngress.last_len 5"), "EdgeIngress.last_len[5]= 70");
    assert_eq!(cmd("register_read EdgeIngress.last_len 6"), "EdgeIngress.last_len[6]= 80");
    assert_eq!(cmd("table_num_entries EdgeIngress.routes"), "0");
    drop(txs);
}
