//! The harness on `NullForward` (every frame on one port leaves on the
//! other), a counting reference, and the hand-written router on its own.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::*;
use sluice_dataplane::NullForward;

/// `n` 64-byte IPv4/UDP frames (60 bytes without FCS), one flow each (UDP
/// source ports 1024..), from 192.168.0.1 to 10.0.0.x with TTL 64 and a
/// valid header checksum.
fn udp_frames(n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
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
            ip[16..20].copy_from_slice(&[10, 0, 0, (i % 250) as u8 + 1]);
            let c = checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            p[34..36].copy_from_slice(&(1024 + i as u16).to_be_bytes());
            p[36..38].copy_from_slice(&53u16.to_be_bytes());
            p
        })
        .collect()
}

/// The internet checksum of `b` (its checksum field taken as it is).
fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Runs a bench into a buffer; returns its outcome and its text.
fn bench(w: Workload<NullForward>, o: &Options) -> (Result<Outcome, String>, String) {
    let mut out = Vec::new();
    let r = run_to(w, o, &mut out, false);
    (r, String::from_utf8(out).expect("text"))
}

/// The value of `key=` on the result line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

/// `(packets, sent, dropped)` of the summary lines.
fn summaries(text: &str) -> Vec<(u64, u64, u64)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("summary: "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let before = |word: &str| -> u64 {
                let i = w.iter().position(|x| *x == word).unwrap_or_else(|| panic!("no {word} in {l}"));
                w[i - 1].parse().expect("a count")
            };
            (w[0].parse().expect("packets"), before("sent,"), before("dropped"))
        })
        .collect()
}

/// With a packet limit, two workers run exactly that many packets between
/// them (each its part: 5001 and 5000), every one is counted once in the
/// summary, in the turn and in the replicas' own statistics (through the
/// report hook, once per worker), and the result line carries the
/// workload's fields.
#[test]
fn every_packet_is_counted_once_across_workers_and_replicas() {
    let mut w = Workload::new(NullForward::new(0, 1), udp_frames(1000), 0, "null");
    w.replica_report = Some(Arc::new(|dp: &NullForward| vec![format!("replica received {}", dp.stats().received)]));
    let o = Options { duration: 30.0, max_packets: Some(10_001), workers: 2, ..Options::default() };
    let (r, text) = bench(w, &o);
    let outcome = r.unwrap_or_else(|e| panic!("{e}:\n{text}"));
    assert_eq!(summaries(&text), vec![(10_001, 10_001, 0)], "{text}");
    let t = outcome.turns[0];
    assert_eq!((outcome.turns.len(), t.packets, t.sent, t.reference_mpps), (1, 10_001, 10_001, None));
    let mut parts: Vec<u64> =
        text.lines().filter_map(|l| l.strip_prefix("replica received ")).map(|n| n.parse().expect("a count")).collect();
    parts.sort();
    assert_eq!(parts, vec![5000, 5001], "{text}");
    assert!(
        text.starts_with("sluice bench: null (1000 packets in memory, - entries, 64 B average frame), 30 s, 2 worker(s), - pipelines\n"),
        "{text}"
    );
    let line = text.lines().find(|l| l.starts_with("result: ")).expect("a result line");
    assert_eq!(line, outcome.result_line);
    assert!(text.ends_with(&format!("{line}\n")), "the result line comes last:\n{text}");
    for (k, v) in [
        ("program", "null"),
        ("size", "64"),
        ("workers", "2"),
        ("entries", "-"),
        ("mode", "-"),
        ("reference_mpps", "-"),
    ] {
        assert_eq!(field(line, k), v, "{line}");
    }
    assert_eq!(field(line, "ratio"), "-");
    assert_eq!(field(line, "mpps"), format!("{:.3}", outcome.mpps));
    assert!(outcome.mpps > 0.0 && !line.contains("rounds="), "{line}");
}

/// Frames the data plane drops are counted as received and dropped, not sent.
#[test]
fn frames_the_data_plane_drops_are_counted_as_dropped() {
    let w = Workload::new(NullForward::new(0, 1), udp_frames(100), 7, "null");
    let o = Options { duration: 30.0, max_packets: Some(1000), ..Options::default() };
    let (r, text) = bench(w, &o);
    let t = r.unwrap_or_else(|e| panic!("{e}:\n{text}")).turns[0];
    assert_eq!((t.packets, t.sent), (1000, 0));
    assert_eq!(summaries(&text), vec![(1000, 0, 1000)], "{text}");
}

/// A reference that sends every frame.
struct Sender;

impl Reference for Sender {
    fn run_batch(&mut self, _port: u32, frames: &[Vec<u8>]) -> u64 {
        std::hint::black_box(frames.iter().map(|f| f.len() as u64).sum::<u64>());
        frames.len() as u64
    }
}

/// Three rounds: the data plane and the reference take three turns each,
/// in alternation, after the reference's batch-size tries; the result line
/// gives the medians of the turns' rates and of their ratios.
#[test]
fn rounds_alternate_the_data_plane_and_the_reference_and_report_medians() {
    let built = Arc::new(AtomicUsize::new(0));
    let mut w = Workload::new(NullForward::new(0, 1), udp_frames(512), 0, "null");
    w.entries = Some(12);
    w.mode = "plain".into();
    let b = built.clone();
    w.reference = Some(ReferenceRun::new("counting reference", udp_frames(512), 0, move || {
        b.fetch_add(1, Ordering::Relaxed);
        Sender
    }));
    let o = Options { duration: 0.1, workers: 2, rounds: 3, ..Options::default() };
    let (r, text) = bench(w, &o);
    let outcome = r.unwrap_or_else(|e| panic!("{e}:\n{text}"));
    // One instance per worker for each of the 4 tries and each of the 3 turns.
    assert_eq!(built.load(Ordering::Relaxed), 2 * (REFERENCE_BATCHES.len() + 3));
    let kinds: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            ["round ", "summary: ", "reference: ", "reference batch: "].into_iter().find(|p| l.starts_with(p))
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "reference batch: ",
            "round ",
            "summary: ",
            "reference: ",
            "round ",
            "summary: ",
            "reference: ",
            "round ",
            "summary: ",
            "reference: "
        ],
        "{text}"
    );
    assert_eq!(outcome.turns.len(), 3);
    for (t, (p, s, d)) in outcome.turns.iter().zip(summaries(&text)) {
        assert!(t.packets > 0 && t.packets == p && t.sent == s && d == 0, "{t:?}:\n{text}");
        assert!(t.reference_mpps.is_some_and(|m| m > 0.0), "{t:?}");
    }
    let engine: Vec<f64> = outcome.turns.iter().map(|t| t.mpps).collect();
    let refs: Vec<f64> = outcome.turns.iter().filter_map(|t| t.reference_mpps).collect();
    let ratios: Vec<f64> = engine.iter().zip(&refs).map(|(e, r)| e / r).collect();
    let mid = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    assert_eq!(outcome.mpps, mid(&engine));
    assert_eq!(outcome.reference_mpps, Some(mid(&refs)));
    assert_eq!(outcome.ratio, Some(mid(&ratios)));
    let line = &outcome.result_line;
    assert_eq!(field(line, "mpps"), format!("{:.3}", mid(&engine)));
    assert_eq!(field(line, "reference_mpps"), format!("{:.3}", mid(&refs)));
    assert_eq!(field(line, "ratio"), format!("{:.3}", mid(&ratios)));
    assert_eq!((field(line, "entries"), field(line, "mode"), field(line, "rounds")), ("12", "plain", "3"));
    let list = |v: &[f64]| v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" ");
    assert!(text.contains(&format!("turns: engine Mpps {}\n", list(&engine))), "{text}");
    assert!(text.contains(&format!("turns: reference Mpps {}\n", list(&refs))), "{text}");
    assert!(text.contains(&format!("turns: ratio {}\n", list(&ratios))), "{text}");
}

/// A check that fails ends the bench after the first line, before anything runs.
#[test]
fn a_failed_check_ends_the_bench_before_measuring() {
    let mut w = Workload::new(NullForward::new(0, 1), udp_frames(10), 0, "null");
    w.check = Some(Box::new(|dp: &mut NullForward| {
        let mut sent = 0;
        dp.process_batch(3, &[&[0u8; 60]], &mut |_, _, _| sent += 1);
        if sent == 0 {
            Err("port 3 forwards nothing".into())
        } else {
            Ok(())
        }
    }));
    let (r, text) = bench(w, &Options::default());
    assert_eq!(r.err().as_deref(), Some("port 3 forwards nothing"));
    assert_eq!(text.lines().count(), 1, "{text}");
}

/// More workers than flows: a worker would get nothing, which is an error;
/// so is a workload without traffic.
#[test]
fn traffic_too_thin_for_the_workers_is_an_error() {
    let w = Workload::new(NullForward::new(0, 1), vec![udp_frames(1)[0].clone(); 50], 0, "one flow");
    let (r, _) = bench(w, &Options { workers: 2, ..Options::default() });
    assert!(r.is_err_and(|e| e.contains("too few flows for 2 workers")));
    let (r, _) = bench(Workload::new(NullForward::new(0, 1), Vec::new(), 0, "none"), &Options::default());
    assert!(r.is_err_and(|e| e.contains("no traffic")));
}

/// `--profile`: the stage table follows the summary.
#[test]
fn profiling_prints_where_the_time_went() {
    let w = Workload::new(NullForward::new(0, 1), udp_frames(10), 0, "null");
    let (r, text) = bench(w, &Options { duration: 30.0, max_packets: Some(100), profile: true, ..Options::default() });
    r.unwrap_or_else(|e| panic!("{e}:\n{text}"));
    let after = text.split_once("summary: ").expect("a summary").1;
    assert!(after.contains("where the time went, per stage"), "{text}");
}

#[test]
fn median_of_odd_and_even_counts() {
    assert_eq!(median(&[]), None);
    assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
}

/// The hand-written router forwards to its next hop with the MACs
/// rewritten, the TTL decremented and the checksum still valid; drops a
/// bad checksum, an expiring TTL and a destination without a route.
#[test]
fn reference_router_forwards_rewrites_and_drops() {
    let mut r = ReferenceRouter::new();
    r.add_nexthop(3, 2, [2, 0, 0, 0, 0, 3], [0, 0x5e, 0, 0, 0, 3]);
    r.add_ipv4_routes(vec![(0x0a00_0000, 8, 3)]);
    let good = udp_frames(1).remove(0);
    let mut bad_sum = good.clone();
    bad_sum[24] ^= 1;
    let mut expiring = good.clone();
    expiring[22] = 1;
    let mut elsewhere = good.clone();
    elsewhere[30] = 11;
    let mut out = Vec::new();
    r.process_batch(5, &[good.clone(), bad_sum, expiring, elsewhere], &mut |port, f| out.push((port, f.to_vec())));
    assert_eq!(out.len(), 1, "only the first frame is forwarded");
    let (port, f) = &out[0];
    assert_eq!(*port, 2);
    assert_eq!(f[..12], [0, 0x5e, 0, 0, 0, 3, 2, 0, 0, 0, 0, 3]);
    assert_eq!(f[22], 63);
    assert_eq!(checksum(&f[14..34]), 0, "the header checksum stays valid");
    assert_eq!(f[34..], good[34..]);
    assert_eq!(r.port_rx[5], (4, 240));
    assert_eq!(Reference::run_batch(&mut r, 5, std::slice::from_ref(&good)), 1);
    // Its replay loop: whole passes over the frames, each counted on its port.
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.store(true, Ordering::Relaxed);
    });
    let n = r.replay(6, &[good.clone(), good.clone(), good], 2, &stop);
    stopper.join().unwrap();
    assert!(n > 0 && n.is_multiple_of(3), "{n} frames run");
    assert_eq!(r.port_rx[6].0, n);
}

/// Traffic on two ports at once, every worker replaying all of it (one
/// flow, two workers): the batches alternate between the ports, and the
/// frames out of each port are counted in their own class, frames and
/// bytes, in the per-second and summary lines of the workload's `Outputs`.
#[test]
fn two_ports_whole_traffic_and_output_classes() {
    let one = udp_frames(1)[0].clone();
    let mut w = Workload::new(NullForward::new(0, 1), vec![one.clone(); 10], 0, "two ports");
    w.more_traffic = vec![(1, vec![one; 10])];
    let line: LineFormat = Arc::new(|iv: &Interval<'_>| {
        format!(
            "out {} {} {} {} in {}",
            iv.out[0].packets, iv.out[0].bytes, iv.out[1].packets, iv.out[1].bytes, iv.received
        )
    });
    w.outputs = Some(Outputs {
        classes: 2,
        classify: Outputs::by_port,
        header: "header line".into(),
        line: line.clone(),
        summary: line,
    });
    let o = Options { duration: 30.0, max_packets: Some(2000), workers: 2, whole_traffic: true, ..Options::default() };
    let (r, text) = bench(w, &o);
    let r = r.unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(r.turns[0].packets, 2000, "{text}");
    assert!(text.contains("20 packets in memory"), "{text}");
    assert!(text.lines().nth(1) == Some("header line"), "{text}");
    let out = text.lines().rev().find(|l| l.starts_with("out ")).expect("a summary of the classes");
    let n: Vec<u64> = out.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    // Each worker alternates ports batch by batch: as many frames each way (within a batch per worker).
    assert_eq!(n[0] + n[2], 2000, "{out}");
    assert!(n[0].abs_diff(n[2]) <= 2 * 128, "{out}");
    assert_eq!((n[1], n[3], n[4]), (n[0] * 60, n[2] * 60, 2000), "{out}");
}

/// Through the receive ring, the data plane gets every frame of the
/// traffic with its own length and bytes: two passes over 300 frames of
/// different lengths emit exactly twice their bytes.
#[test]
fn the_receive_ring_hands_over_every_frame_as_stored() {
    let traffic: Vec<Vec<u8>> = udp_frames(300)
        .into_iter()
        .enumerate()
        .map(|(i, mut f)| {
            f.resize(60 + i % 200, i as u8);
            f
        })
        .collect();
    let total: u64 = traffic.iter().map(|f| f.len() as u64).sum();
    let mut w = Workload::new(NullForward::new(0, 1), traffic, 0, "ring");
    let line: LineFormat = Arc::new(|iv: &Interval<'_>| format!("out {} {}", iv.out[0].packets, iv.out[0].bytes));
    w.outputs = Some(Outputs { classes: 1, classify: |_, _| 0, header: "h".into(), line: line.clone(), summary: line });
    let o = Options { duration: 30.0, max_packets: Some(600), receive_ring: true, ..Options::default() };
    let (r, text) = bench(w, &o);
    r.unwrap_or_else(|e| panic!("{e}\n{text}"));
    let out = text.lines().rev().find(|l| l.starts_with("out ")).expect("a summary of the class");
    assert_eq!(out, format!("out 600 {}", 2 * total), "{text}");
}
