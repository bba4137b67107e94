//! Robustness: no packet, program text or command line makes Sluice panic.
//!
//! Every program of the corpora (`../shared/conformance/bmv2`, `p4c-stf`,
//! `p4c-bench`) and of `examples/` is loaded once per test, configured (its
//! `commands.txt` or STF CLI lines, then a few generated entries for every
//! table that is still empty, so that packets reach actions), and fed
//!
//! * random byte strings of 0..200 bytes,
//! * corpus packets truncated at every length,
//! * corpus packets with random bit flips,
//! * random command lines built from the program's own names,
//!
//! on random ports; every emitted packet must be at most 512 bytes longer than
//! its input. Mutated program texts must load or fail with a located, non-empty
//! error; that test runs in a child process under a memory limit, so that a
//! program asking for absurd amounts of memory can neither take the machine
//! down nor hide behind an abort.
//!
//! Runs are deterministic; set `SLUICE_ROBUSTNESS_SEED=<n>` to explore other
//! inputs. Every corpus program gets them, including one whose own P4 code
//! loops for ever on some packets (bmv2 hangs on them; Sluice stops the
//! action and drops the packet); the tests at the end reproduce each engine
//! bug these properties found.

mod common;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

use common::{case_dirs, case_files, shared};
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use sluice_control::cli;
use sluice_engine::runtime::MatchKind;
use sluice_engine::Switch;

/// Emitted packets may grow by at most this many bytes (added headers).
const GROWTH: usize = 512;
/// Proptest cases per program for the random-bytes and bit-flip properties.
const PACKET_CASES: u32 = 4000;
/// Proptest cases per program for the random command lines.
const COMMAND_CASES: u32 = 1000;
/// Corpus packets per program that are truncated at every length.
const TRUNCATED_PER_PROGRAM: usize = 16;
/// Mutated program texts (all programs together).
const JSON_CASES: u32 = 8000;

// ---------------------------------------------------------------- corpus

struct Program {
    /// `bmv2/counter`, `p4c-stf/arith-bmv2`, `examples/router`, ...
    name: String,
    json: String,
    /// CLI lines applied before any packet (errors ignored).
    commands: String,
    /// `(port, bytes)` packets meant for this program.
    packets: Vec<(u32, Vec<u8>)>,
}

struct Corpus {
    programs: Vec<Program>,
    /// A sample of all corpus packets, fed to programs that have none.
    pool: Vec<(u32, Vec<u8>)>,
}

fn examples() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    assert!(p.is_dir(), "examples not found at {}", p.display());
    p
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

/// Packets of `in/<port>.pcap` of a bmv2 case.
fn pcap_inputs(dir: &Path) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let input = dir.join("in");
    if !input.is_dir() {
        return out;
    }
    for f in case_files(&input) {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let Some(port) = name.strip_suffix(".pcap").and_then(|s| s.parse::<u32>().ok()) else { continue };
        for (_, data) in sluice_ports::pcapfile::read_pcap(&f).unwrap_or_else(|e| panic!("{e}")) {
            out.push((port, data));
        }
    }
    out
}

fn corpus() -> &'static Corpus {
    static C: OnceLock<Corpus> = OnceLock::new();
    C.get_or_init(|| {
        let sh = shared();
        let mut programs = Vec::new();
        let bmv2 = case_dirs(&sh.join("bmv2"));
        assert!(bmv2.len() >= 20, "expected the bmv2 corpus, found {} cases", bmv2.len());
        for d in &bmv2 {
            let n = d.file_name().unwrap().to_string_lossy().to_string();
            let cmds = d.join("commands.txt");
            programs.push(Program {
                name: format!("bmv2/{n}"),
                json: read(&d.join("program.json")),
                commands: if cmds.exists() { read(&cmds) } else { String::new() },
                packets: pcap_inputs(d),
            });
        }
        // The v1model and the PSA programs of p4c's STF tests.
        for (corpus, min) in [("p4c-stf", 100), ("p4c-stf-psa", 15)] {
            let stf = case_dirs(&sh.join(corpus));
            assert!(stf.len() >= min, "expected the {corpus} corpus, found {} tests", stf.len());
            for d in &stf {
                let n = d.file_name().unwrap().to_string_lossy().to_string();
                let json = d.join(format!("{n}.json"));
                assert!(json.exists(), "{} is missing", json.display());
                let mut commands = String::new();
                let cmds = d.join("commands.txt");
                if cmds.exists() {
                    commands.push_str(&read(&cmds));
                }
                let mut packets = Vec::new();
                let stf_file = d.join(format!("{n}.stf"));
                if stf_file.exists() {
                    let lines =
                        sluice_stf::parse(&read(&stf_file)).unwrap_or_else(|e| panic!("{}: {e}", stf_file.display()));
                    for l in lines {
                        match l.command {
                            sluice_stf::StfCommand::Packet { port, data } => packets.push((port, data)),
                            sluice_stf::StfCommand::Passthrough { command } => {
                                commands.push_str(&command);
                                commands.push('\n');
                            }
                            _ => {}
                        }
                    }
                }
                programs.push(Program { name: format!("{corpus}/{n}"), json: read(&json), commands, packets });
            }
        }
        for n in ["router", "edge", "l2_learning"] {
            // The bmv2 corpus has a case for each example, with traffic and entries.
            let case = sh.join(format!("bmv2/sluice_{n}"));
            let cmds = case.join("commands.txt");
            programs.push(Program {
                name: format!("examples/{n}"),
                json: read(&examples().join(format!("{n}.json"))),
                commands: if cmds.exists() { read(&cmds) } else { String::new() },
                packets: pcap_inputs(&case),
            });
        }
        let bench = case_dirs(&sh.join("p4c-bench"));
        assert!(bench.len() >= 5, "expected the p4c-bench programs, found {}", bench.len());
        for d in &bench {
            let n = d.file_name().unwrap().to_string_lossy().to_string();
            programs.push(Program {
                name: format!("p4c-bench/{n}"),
                json: read(&d.join(format!("{n}.json"))),
                commands: String::new(),
                packets: Vec::new(),
            });
        }
        let mut all: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut seen = BTreeSet::new();
        for p in &programs {
            for (port, pkt) in &p.packets {
                if seen.insert(pkt.clone()) {
                    all.push((*port, pkt.clone()));
                }
            }
        }
        assert!(all.len() >= 100, "expected corpus packets, found {}", all.len());
        let step = all.len().div_ceil(256);
        let pool = all.into_iter().step_by(step).collect();
        Corpus { programs, pool }
    })
}

/// A few distinct packets of a program (or of the pool), spread over its traffic.
fn sample_packets(c: &Corpus, p: &Program, n: usize) -> Vec<(u32, Vec<u8>)> {
    let src = if p.packets.is_empty() { &c.pool } else { &p.packets };
    let mut distinct: Vec<&(u32, Vec<u8>)> = Vec::new();
    let mut seen = BTreeSet::new();
    for x in src {
        if seen.insert(&x.1) {
            distinct.push(x);
        }
    }
    let step = distinct.len().div_ceil(n).max(1);
    // Offset by the name so programs without traffic do not all get the same packets.
    let off = if p.packets.is_empty() { p.name.len() % step } else { 0 };
    distinct.into_iter().skip(off).step_by(step).take(n).cloned().collect()
}

fn seed() -> u64 {
    std::env::var("SLUICE_ROBUSTNESS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x51u64)
}

/// splitmix64, for generated table entries.
struct Mix(u64);

impl Mix {
    fn new(s: &str) -> Mix {
        Mix(s.bytes().fold(seed() ^ 0x9e37_79b9_7f4a_7c15, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)))
    }
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A random `width`-bit value in hex.
fn rand_hex(r: &mut Mix, width: u32) -> String {
    let digits = width.max(1).div_ceil(4) as usize;
    let top_bits = width.max(1) - 4 * (digits as u32 - 1);
    let mut s = String::from("0x");
    for i in 0..digits {
        let mut d = r.next() as u32 & 0xf;
        if i == 0 {
            d &= (1 << top_bits) - 1;
        }
        write!(s, "{d:x}").unwrap();
    }
    s
}

fn max_hex(width: u32) -> String {
    let digits = width.max(1).div_ceil(4) as usize;
    let top_bits = width.max(1) - 4 * (digits as u32 - 1);
    format!("0x{:x}{}", (1u32 << top_bits) - 1, "f".repeat(digits - 1))
}

/// The match part of a generated entry: catch-all for `variant` 0, random otherwise.
fn key_tokens(sw: &Switch, t: usize, r: &mut Mix, variant: usize) -> String {
    let mut out = Vec::new();
    for k in &sw.program().tables[t].key {
        let w = k.width;
        out.push(match (k.kind, variant) {
            (MatchKind::Exact, 0) => "0".to_string(),
            (MatchKind::Exact, _) => rand_hex(r, w),
            (MatchKind::Lpm, 0) => "0/0".to_string(),
            (MatchKind::Lpm, _) => format!("{}/{}", rand_hex(r, w), r.below(w as usize + 1)),
            (MatchKind::Ternary, 0) => "0&&&0".to_string(),
            (MatchKind::Ternary, _) => format!("{}&&&{}", rand_hex(r, w), rand_hex(r, w)),
            (MatchKind::Range, 0) => format!("0->{}", max_hex(w)),
            (MatchKind::Range, _) => format!("{}->{}", rand_hex(r, w), max_hex(w)),
            (MatchKind::Valid, _) => if r.below(2) == 0 { "1" } else { "0" }.to_string(),
            (MatchKind::Optional, 0) => "*".to_string(),
            (MatchKind::Optional, _) => rand_hex(r, w),
        });
    }
    out.join(" ")
}

fn param_tokens(sw: &Switch, a: u32, r: &mut Mix) -> String {
    sw.program().actions[a as usize].params.iter().map(|(_, w)| rand_hex(r, *w)).collect::<Vec<_>>().join(" ")
}

/// Number in an answer like "Member has been created with handle 3".
fn handle_of(answer: &str) -> Option<String> {
    answer.split_whitespace().last().filter(|h| h.parse::<u32>().is_ok()).map(str::to_string)
}

/// Adds a catch-all entry and two random ones to every table that is still empty,
/// through the CLI (errors ignored: some programs restrict what can be added).
/// Returns the number of entries added.
fn populate(sw: &mut Switch, name: &str) -> usize {
    let mut r = Mix::new(name);
    let mut added = 0;
    for t in 0..sw.program().tables.len() {
        if sw.entry_count(t) != 0 || sw.program().tables[t].actions.is_empty() {
            continue;
        }
        let tname = sw.program().tables[t].name.clone();
        for variant in 0..3 {
            let acts = &sw.program().tables[t].actions;
            let a = acts[r.below(acts.len())];
            let aname = sw.program().actions[a as usize].name.clone();
            let params = param_tokens(sw, a, &mut r);
            let keys = key_tokens(sw, t, &mut r, variant);
            let prio = 1 + r.below(100);
            match sw.program().tables[t].profile {
                None => {
                    let line = format!("table_add {tname} {aname} {keys} => {params}");
                    if cli::run(sw, &line).is_ok() || cli::run(sw, &format!("{line} {prio}")).is_ok() {
                        added += 1;
                    }
                }
                Some(p) => {
                    let pname = sw.program().profiles[p as usize].name.clone();
                    let Some(m) = cli::run(sw, &format!("act_prof_create_member {pname} {aname} {params}"))
                        .ok()
                        .and_then(|s| handle_of(&s))
                    else {
                        continue;
                    };
                    let mut target = ("table_indirect_add", m.clone());
                    if variant == 2 {
                        if let Some(g) =
                            cli::run(sw, &format!("act_prof_create_group {pname}")).ok().and_then(|s| handle_of(&s))
                        {
                            let _ = cli::run(sw, &format!("act_prof_add_member_to_group {pname} {m} {g}"));
                            target = ("table_indirect_add_with_group", g);
                        }
                    }
                    let line = format!("{} {tname} {keys} => {}", target.0, target.1);
                    if cli::run(sw, &line).is_ok() || cli::run(sw, &format!("{line} {prio}")).is_ok() {
                        added += 1;
                    }
                }
            }
        }
    }
    added
}

/// Every program, loaded and configured.
fn switches() -> Vec<(&'static Program, Switch)> {
    let mut added = 0;
    let all: Vec<(&'static Program, Switch)> = corpus()
        .programs
        .iter()
        .map(|p| {
            let mut sw =
                sluice_engine::load_switch(&p.json).unwrap_or_else(|e| panic!("{}: does not load: {e}", p.name));
            for line in p.commands.lines() {
                let _ = cli::run(&mut sw, line);
            }
            added += populate(&mut sw, &p.name);
            (p, sw)
        })
        .collect();
    // Packets should reach actions, not only table misses.
    assert!(added > 800, "only {added} generated table entries could be added");
    all
}

// ---------------------------------------------------------------- helpers

/// How long one program may take for one property before it counts as hung.
const PROGRAM_TIME_LIMIT: Duration = Duration::from_secs(30);

/// A copy of `pkt` with the bits the indexes pick flipped.
fn flipped(pkt: &[u8], flips: &[Index]) -> Vec<u8> {
    let mut pkt = pkt.to_vec();
    let bits = pkt.len() * 8;
    if bits > 0 {
        for f in flips {
            let b = f.index(bits);
            pkt[b / 8] ^= 0x80 >> (b % 8);
        }
    }
    pkt
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn runner(cases: u32, name: &str) -> TestRunner {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_iters: 512,
        max_shrink_time: 20_000,
        ..Config::default()
    };
    let mut s = [0u8; 32];
    let mut m = Mix::new(name);
    for chunk in s.chunks_mut(8) {
        chunk.copy_from_slice(&m.next().to_le_bytes());
    }
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &s))
}

/// The last packet handed to a switch, for the report when it never returns.
#[derive(Default)]
struct Last(Mutex<(u32, Vec<u8>)>);

/// Runs one packet; fails when an emitted packet grew by more than [`GROWTH`]
/// bytes. Returns the number of packets emitted.
fn feed(sw: &mut Switch, last: &Last, port: u32, pkt: &[u8]) -> Result<u64, String> {
    {
        let mut l = last.0.lock().unwrap();
        l.0 = port;
        l.1.clear();
        l.1.extend_from_slice(pkt);
    }
    let mut bad = None;
    let mut n = 0;
    sw.process(port, pkt, &mut |p, out| {
        n += 1;
        if out.len() > pkt.len() + GROWTH && bad.is_none() {
            bad = Some(format!("emitted {} bytes on port {p} for a {}-byte input", out.len(), pkt.len()));
        }
    });
    match bad {
        Some(b) => Err(b),
        None => Ok(n),
    }
}

fn describe<T: std::fmt::Debug>(e: TestError<T>, show: impl Fn(&T) -> String) -> String {
    match e {
        TestError::Abort(why) => format!("aborted: {why}"),
        TestError::Fail(why, v) => format!("{why}\n    minimal input: {}", show(&v)),
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("panicked: {s}")
    } else {
        "panicked".to_string()
    }
}

/// Runs `work` on every loaded program, each in a thread of its own, so that a
/// packet that never finishes is reported (with the packet) instead of hanging
/// the test. Fails listing every failed program;
/// returns the sum of what `work` counted.
fn for_each_program<F>(what: &str, work: F) -> u64
where
    F: Fn(&'static Program, &mut Switch, &Last) -> Result<u64, String> + Send + Sync + 'static,
{
    let started = Instant::now();
    let work = Arc::new(work);
    let (mut failures, mut total, mut programs) = (Vec::new(), 0, 0);
    for (p, sw) in switches() {
        programs += 1;
        let last = Arc::new(Last::default());
        let (tx, rx) = mpsc::channel();
        let (w, l) = (work.clone(), last.clone());
        std::thread::Builder::new()
            .name(p.name.clone())
            .spawn(move || {
                let mut sw = sw;
                let r = std::panic::catch_unwind(AssertUnwindSafe(|| w(p, &mut sw, &l)));
                let _ = tx.send(r.map_err(|e| panic_text(&e)));
            })
            .unwrap();
        match rx.recv_timeout(PROGRAM_TIME_LIMIT) {
            Ok(Ok(Ok(n))) => total += n,
            Ok(Ok(Err(e)) | Err(e)) => failures.push(format!("{}: {e}", p.name)),
            Err(_) => {
                let l = last.0.lock().unwrap();
                failures.push(format!(
                    "{}: no answer within {PROGRAM_TIME_LIMIT:?}, probably stuck on port {}, packet {}",
                    p.name,
                    l.0,
                    hex(&l.1)
                ));
            }
        }
    }
    eprintln!("{what}: {programs} programs, count {total}, in {:.1?}", started.elapsed());
    assert!(programs > 150, "{what}: only {programs} programs were run");
    assert!(failures.is_empty(), "{what}: {} programs failed:\n{}", failures.len(), failures.join("\n"));
    total
}

// ---------------------------------------------------------------- packets

#[test]
fn random_bytes_never_panic() {
    let emitted = for_each_program("random bytes", |p, sw, last| {
        let sw = RefCell::new(sw);
        let total = RefCell::new(0);
        runner(PACKET_CASES, &p.name)
            .run(&(vec(any::<u8>(), 0..200), 0u32..16), |(bytes, port)| {
                *total.borrow_mut() += feed(&mut sw.borrow_mut(), last, port, &bytes).map_err(TestCaseError::fail)?;
                Ok(())
            })
            .map_err(|e| describe(e, |(b, port)| format!("port {port}, {}", hex(b))))?;
        Ok(total.into_inner())
    });
    // The property says little if nothing ever gets through.
    assert!(emitted > 1000, "only {emitted} packets were emitted for random input");
}

/// Proptest cases (batches of up to 8 packets) per program for the batched
/// compiled-versus-interpreted comparison.
const BATCH_DIFFERENTIAL_CASES: u32 = 200;

/// The batch path against the reference path: every program runs in two
/// switches configured alike: compiled pipelines fed in batches (parse-ahead,
/// prefetch, direct LPM indexes), as live ports and `sluice bench` feed them,
/// and the interpreter fed packet by packet with plain per-length maps
/// (`Switch::scratch`). Random batches of corpus packets
/// with bit flips, and random bytes, must give the same packets on the
/// same ports in the same order, each tagged with the index of the input
/// it came from; state carries over between batches, so counters,
/// registers and meters must evolve alike too, and so must each table's
/// count of hits and misses.
#[test]
fn batched_compiled_and_packet_by_packet_interpreted_switches_agree() {
    let emitted = for_each_program("batched compiled vs interpreted", |p, sw, last| {
        let twin = sw.scratch().map_err(|e| format!("no interpreted copy: {e}"))?;
        if sw.mode() != sluice_engine::ExecMode::Compiled || twin.mode() != sluice_engine::ExecMode::Interpreted {
            return Err(format!("modes are {:?} and {:?}", sw.mode(), twin.mode()));
        }
        let pkts = sample_packets(corpus(), p, 16);
        let make = |(i, flips, random, bytes): &(Index, Vec<Index>, bool, Vec<u8>)| -> Vec<u8> {
            if *random || pkts.is_empty() {
                return bytes.clone();
            }
            flipped(&pkts[i.index(pkts.len())].1, flips)
        };
        let sw = RefCell::new(sw);
        let twin = RefCell::new(twin);
        let (total, now) = (RefCell::new(0u64), RefCell::new(0u64));
        let one = (any::<Index>(), vec(any::<Index>(), 0..4), proptest::bool::weighted(0.2), vec(any::<u8>(), 0..120));
        let strategy = (vec(one, 1..8), 0u32..16);
        runner(BATCH_DIFFERENTIAL_CASES, &p.name)
            .run(&strategy, |(batch, port)| {
                let batch: Vec<Vec<u8>> = batch.iter().map(make).collect();
                if let Some(b) = batch.first() {
                    let mut l = last.0.lock().unwrap();
                    l.0 = port;
                    l.1.clone_from(b);
                }
                *now.borrow_mut() += 1000;
                let t = *now.borrow();
                let mut compiled = Vec::new();
                let frames: Vec<&[u8]> = batch.iter().map(|b| b.as_slice()).collect();
                sw.borrow_mut().process_batch_at(port, &frames, t, &mut |i, o, d: &[u8]| compiled.push((i, o, hex(d))));
                // The reference: the interpreter, one packet at a time (a
                // batch of one through the same loop), each output tagged
                // with the input it came from.
                let mut interpreted = Vec::new();
                for (i, b) in batch.iter().enumerate() {
                    twin.borrow_mut().process_at(port, b, t, &mut |o, d| interpreted.push((i, o, hex(d))));
                }
                if compiled != interpreted {
                    return Err(TestCaseError::fail(format!(
                        "compiled emitted {compiled:?}\n    interpreted emitted {interpreted:?}"
                    )));
                }
                // Every table lookup counted once, as a hit or a miss, on
                // whichever path resolved it (generated code, a helper, the
                // interpreter): the telemetry's figures.
                let (a, b) = (sw.borrow(), twin.borrow());
                for t in 0..a.program().tables.len() {
                    if a.table_lookups(t) != b.table_lookups(t) {
                        return Err(TestCaseError::fail(format!(
                            "table {}: compiled counted [hits, misses] {:?}, interpreted {:?}",
                            a.program().tables[t].name,
                            a.table_lookups(t),
                            b.table_lookups(t)
                        )));
                    }
                }
                *total.borrow_mut() += compiled.len() as u64;
                Ok(())
            })
            .map_err(|e| {
                describe(e, |(batch, port)| {
                    let b: Vec<String> = batch.iter().map(|x| hex(&make(x))).collect();
                    format!("port {port}, batch [{}]", b.join(", "))
                })
            })?;
        Ok(total.into_inner())
    });
    assert!(emitted > 1000, "only {emitted} packets were emitted: the comparison says little");
}

#[test]
fn truncated_corpus_packets_never_panic() {
    let fed = for_each_program("truncated packets", |p, sw, last| {
        let mut r = Mix::new(&p.name);
        let mut fed = 0;
        for (port, pkt) in sample_packets(corpus(), p, TRUNCATED_PER_PROGRAM) {
            for len in 0..=pkt.len() {
                let cut = &pkt[..len];
                for port in [port, r.below(16) as u32] {
                    fed += 1;
                    let res = std::panic::catch_unwind(AssertUnwindSafe(|| feed(sw, last, port, cut)));
                    let why = match res {
                        Ok(Ok(_)) => continue,
                        Ok(Err(e)) => e,
                        Err(panic) => panic_text(&panic),
                    };
                    return Err(format!(
                        "port {port}, packet of {} bytes cut to {len}: {why}\n    input: {}",
                        pkt.len(),
                        hex(cut)
                    ));
                }
            }
        }
        Ok(fed)
    });
    assert!(fed > 10_000, "only {fed} truncated packets were fed");
}

#[test]
fn bit_flipped_corpus_packets_never_panic() {
    let emitted = for_each_program("bit flips", |p, sw, last| {
        let pkts = sample_packets(corpus(), p, 16);
        if pkts.is_empty() {
            return Err("no packets to flip".into());
        }
        let flip = |(i, flips, port): &(Index, Vec<Index>, u32)| (*port, flipped(&pkts[i.index(pkts.len())].1, flips));
        let sw = RefCell::new(sw);
        let total = RefCell::new(0);
        let strategy = (any::<Index>(), vec(any::<Index>(), 1..12), 0u32..16);
        runner(PACKET_CASES, &p.name)
            .run(&strategy, |case| {
                let (port, pkt) = flip(&case);
                *total.borrow_mut() += feed(&mut sw.borrow_mut(), last, port, &pkt).map_err(TestCaseError::fail)?;
                Ok(())
            })
            .map_err(|e| {
                describe(e, |case| {
                    let (port, pkt) = flip(case);
                    format!("port {port}, {}", hex(&pkt))
                })
            })?;
        Ok(total.into_inner())
    });
    assert!(emitted > 1000, "only {emitted} packets were emitted for bit-flipped input");
}

// ---------------------------------------------------------------- commands

/// Command words the engine knows, plus some it does not.
const COMMANDS: &[&str] = &[
    "table_add",
    "table_set_default",
    "table_delete",
    "table_modify",
    "table_clear",
    "table_num_entries",
    "table_dump",
    "table_dump_entry",
    "table_dump_entry_from_key",
    "table_dump_member",
    "table_dump_group",
    "table_info",
    "table_indirect_add",
    "table_indirect_add_with_group",
    "table_indirect_set_default",
    "act_prof_create_member",
    "act_prof_delete_member",
    "act_prof_create_group",
    "act_prof_delete_group",
    "act_prof_add_member_to_group",
    "act_prof_remove_member_from_group",
    "act_prof_dump",
    "act_prof_dump_member",
    "act_prof_dump_group",
    "mc_mgrp_create",
    "mc_mgrp_destroy",
    "mc_node_create",
    "mc_node_update",
    "mc_node_associate",
    "mc_node_dissociate",
    "mc_node_destroy",
    "mc_dump",
    "mirroring_add",
    "mirroring_add_mc",
    "mirroring_delete",
    "mirroring_get",
    "counter_read",
    "counter_reset",
    "counter_write",
    "register_read",
    "register_write",
    "register_reset",
    "meter_set_rates",
    "meter_array_set_rates",
    "meter_get_rates",
    "pvs_add",
    "pvs_remove",
    "pvs_clear",
    "pvs_get",
    "show_pvs",
    "set_crc16_parameters",
    "set_crc32_parameters",
    "show_tables",
    "show_actions",
    "table_show_actions",
    "no_such_command",
];

/// Values that stress the CLI parsers.
const VALUES: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "7",
    "15",
    "255",
    "256",
    "511",
    "512",
    "65535",
    "65536",
    "0x",
    "0x0",
    "0xff",
    "0X1F",
    "0b",
    "0b102",
    "0b1",
    "0o7",
    "0o",
    "-",
    "-0",
    "-1",
    "-0x",
    "0x-1",
    "-99999999999",
    "+5",
    "1/99",
    "1/0",
    "0/0",
    "10.0.0.0/8",
    "10.0.0.1/33",
    "/",
    "1/",
    "a&&&b",
    "0&&&0",
    "1&&&0xff",
    "&&&",
    "->",
    "1->2",
    "2->1",
    "0->0xffffffffffffffff",
    "=>",
    "*",
    "|",
    "#",
    "4294967295",
    "4294967296",
    "2147483648",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "99999999999999999999999999999999999999999999999999",
    "0xffffffffffffffffffffffffffffffffffffffffffffffffffff",
    "10.0.0.1",
    "255.255.255.255",
    "1.2.3",
    "1.2.3.4.5",
    "256.0.0.1",
    "00:11:22:33:44:55",
    "00:11:22:33:44",
    "0:0:0:0:0:0",
    "::",
    "::1",
    ":::",
    "2001:db8::1",
    "1:2:3:4:5:6:7:8:9",
    "nan:1",
    "inf:0",
    "1e308:4294967295",
    "-1:-1",
    "0.5:3",
    ":",
    "true",
    "false",
    "True",
    "x",
    "\u{e9}",
    "\u{1f600}",
];

fn vocabulary(sw: &Switch) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut name = |n: &str| {
        v.push(n.to_string());
        if let Some((_, last)) = n.rsplit_once('.') {
            v.push(last.to_string());
        }
    };
    let pl = sw.program();
    pl.tables.iter().for_each(|t| name(&t.name));
    pl.actions.iter().for_each(|a| name(&a.name));
    pl.counters.iter().for_each(|a| name(&a.name));
    pl.registers.iter().for_each(|a| name(&a.name));
    pl.meters.iter().for_each(|a| name(&a.name));
    pl.profiles.iter().for_each(|a| name(&a.name));
    pl.calcs.iter().for_each(|a| name(&a.name));
    pl.vsets.iter().for_each(|a| name(&a.0));
    v.sort();
    v.dedup();
    v
}

/// One generated command line: `(command word, table, action, tokens)` choices,
/// made well-formed enough (table, action, right key count, `=>`) half the time
/// to get past the first checks.
type LineChoice = (Index, Index, Index, bool, Vec<(bool, Index)>);

fn make_line(sw: &Switch, names: &[String], (c, t, a, shaped, toks): &LineChoice) -> String {
    let tok = |(is_name, i): &(bool, Index)| -> String {
        if *is_name && !names.is_empty() {
            names[i.index(names.len())].clone()
        } else {
            VALUES[i.index(VALUES.len())].to_string()
        }
    };
    let cmd = COMMANDS[c.index(COMMANDS.len())];
    let tables = &sw.program().tables;
    if *shaped && !tables.is_empty() && cmd.starts_with("table_") {
        let tp = &tables[t.index(tables.len())];
        let action = if tp.actions.is_empty() {
            "none".to_string()
        } else {
            sw.program().actions[tp.actions[a.index(tp.actions.len())] as usize].name.clone()
        };
        let mut vals = toks.iter().map(tok);
        let mut line = format!("{cmd} {} {action}", tp.name);
        for _ in 0..tp.key.len() {
            line.push(' ');
            line.push_str(&vals.next().unwrap_or_else(|| "0".into()));
        }
        line.push_str(" =>");
        for v in vals {
            line.push(' ');
            line.push_str(&v);
        }
        line
    } else {
        let mut line = cmd.to_string();
        for x in toks {
            line.push(' ');
            line.push_str(&tok(x));
        }
        line
    }
}

#[test]
fn random_cli_commands_never_panic() {
    let accepted = for_each_program("random commands", |p, sw, last| {
        let names = vocabulary(sw);
        let pkts = sample_packets(corpus(), p, 8);
        let line = (
            any::<Index>(),
            any::<Index>(),
            any::<Index>(),
            any::<bool>(),
            vec((any::<bool>(), any::<Index>()), 0..10),
        );
        let strategy = (vec(line, 1..6), any::<Index>(), 0u32..16);
        let sw = RefCell::new(sw);
        let ok = RefCell::new(0);
        let r = runner(COMMAND_CASES, &p.name).run(&strategy, |(lines, pi, port)| {
            let mut sw = sw.borrow_mut();
            for l in &lines {
                let text = make_line(&sw, &names, l);
                if cli::run(&mut sw, &text).is_ok() {
                    *ok.borrow_mut() += 1;
                }
            }
            // Whatever got installed must not break packet processing.
            let (_, pkt) = &pkts[pi.index(pkts.len())];
            feed(&mut sw, last, port, pkt).map_err(TestCaseError::fail)?;
            Ok(())
        });
        r.map_err(|e| {
            let sw = sw.borrow();
            describe(e, |(lines, pi, port)| {
                let l: Vec<String> = lines.iter().map(|l| make_line(&sw, &names, l)).collect();
                format!("{l:?} then packet {} on port {port}", hex(&pkts[pi.index(pkts.len())].1))
            })
        })?;
        Ok(ok.into_inner())
    });
    assert!(accepted > 500, "only {accepted} generated command lines were accepted: the generator is too weak");
}

// ---------------------------------------------------------------- program texts

/// The member name a number at byte `s` is the value of, if any.
fn key_before(b: &[u8], s: usize) -> Option<&str> {
    let mut i = s;
    while i > 0 && b[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    if i == 0 || b[i - 1] != b':' {
        return None;
    }
    i -= 1;
    while i > 0 && b[i - 1].is_ascii_whitespace() {
        i -= 1;
    }
    if i == 0 || b[i - 1] != b'"' {
        return None;
    }
    let end = i - 1;
    let start = b[..end].iter().rposition(|c| *c == b'"')? + 1;
    std::str::from_utf8(&b[start..end]).ok()
}

/// Byte spans of the JSON numbers of a text (outside strings) that are not
/// source positions (`line`, `column`), which nothing reads.
fn number_spans(text: &str) -> Vec<(usize, usize)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let s = i;
                i += 1;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') {
                    i += 1;
                }
                if !matches!(key_before(b, s), Some("line" | "column")) {
                    out.push((s, i));
                }
            }
            _ => i += 1,
        }
    }
    out
}

const HUGE: &[&str] = &[
    "18446744073709551615",
    "9223372036854775808",
    "4294967296",
    "4294967295",
    "2147483648",
    "1099511627776",
    "100000000000000000000000000000",
    "1e300",
];
const NEGATIVE: &[&str] = &["-1", "-2147483649", "-9223372036854775808", "-0.5"];
const STRINGS: &[&str] = &["\"0\"", "\"\"", "\"x\"", "null", "true", "[]", "{}"];

/// Removes the `k`-th object member (depth first); returns its path.
fn drop_key(v: &mut serde_json::Value, k: &mut usize, path: &str) -> Option<String> {
    match v {
        serde_json::Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for key in keys {
                if *k == 0 {
                    m.remove(&key);
                    return Some(format!("{path}.{key}"));
                }
                *k -= 1;
                if let Some(p) = drop_key(m.get_mut(&key).unwrap(), k, &format!("{path}.{key}")) {
                    return Some(p);
                }
            }
            None
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                if let Some(p) = drop_key(x, k, &format!("{path}[{i}]")) {
                    return Some(p);
                }
            }
            None
        }
        _ => None,
    }
}

fn count_keys(v: &serde_json::Value) -> usize {
    match v {
        serde_json::Value::Object(m) => m.len() + m.values().map(count_keys).sum::<usize>(),
        serde_json::Value::Array(a) => a.iter().map(count_keys).sum(),
        _ => 0,
    }
}

type Mutation = (Index, u8, Index, Index, Index);

/// The mutated text and a description of the mutation.
fn mutate(c: &Corpus, spans: &[Vec<(usize, usize)>], (pi, kind, a, b, v): &Mutation) -> (usize, String, String) {
    let p = pi.index(c.programs.len());
    let text = &c.programs[p].json;
    let replace = |with: &str| -> (String, String) {
        let sp = &spans[p];
        let (s, e) = sp[a.index(sp.len())];
        (format!("{}{with}{}", &text[..s], &text[e..]), format!("number {} at byte {s} -> {with}", &text[s..e]))
    };
    let (t, d) = match kind % 5 {
        0 => {
            let mut s = a.index(text.len());
            while !text.is_char_boundary(s) {
                s -= 1;
            }
            let max = if b.index(2) == 0 { 16 } else { text.len() - s };
            let mut e = s + 1 + b.index(max.max(1));
            e = e.min(text.len());
            while !text.is_char_boundary(e) {
                e += 1;
            }
            (format!("{}{}", &text[..s], &text[e..]), format!("deleted bytes {s}..{e}: {:?}", &text[s..e.min(s + 40)]))
        }
        1 => replace(HUGE[v.index(HUGE.len())]),
        2 => replace(NEGATIVE[v.index(NEGATIVE.len())]),
        3 => replace(STRINGS[v.index(STRINGS.len())]),
        _ => {
            let mut val: serde_json::Value = serde_json::from_str(text).unwrap();
            let mut k = a.index(count_keys(&val).max(1));
            let path = drop_key(&mut val, &mut k, "").unwrap_or_default();
            (val.to_string(), format!("dropped key {path}"))
        }
    };
    (p, t, d)
}

fn check_mutation(c: &Corpus, p: usize, text: &str, desc: &str) -> Result<(), TestCaseError> {
    eprintln!("case: {} {desc}", c.programs[p].name);
    let valid_json = serde_json::from_str::<serde_json::Value>(text).is_ok();
    let model = sluice_json::load_str(text);
    if let Err(e) = &model {
        prop_assert!(!e.message.is_empty() && !e.to_string().is_empty(), "empty error message");
        if valid_json {
            prop_assert!(
                !e.path.is_empty() || e.message.starts_with("missing field \""),
                "error on valid JSON names no path: {e}"
            );
        } else {
            prop_assert!(e.message.contains("JSON"), "error on malformed JSON does not say so: {e}");
        }
    }
    match (sluice_engine::load_switch(text), model) {
        (Ok(_), Err(e)) => prop_assert!(false, "load_switch accepted a program that load_str rejects ({e})"),
        (Err(sluice_engine::LoadError::Json(a)), Err(b)) => prop_assert_eq!(a, b),
        (Err(e), Err(_)) => prop_assert!(false, "load_switch and load_str disagree: {e}"),
        (Err(sluice_engine::LoadError::Json(e)), Ok(_)) => {
            prop_assert!(false, "load_switch gave a JSON error for a program load_str accepts: {e}")
        }
        (Err(sluice_engine::LoadError::Compile(e)), Ok(_)) => {
            prop_assert!(!e.message.is_empty(), "empty compile error at {}", e.path);
            prop_assert!(!e.path.is_empty(), "compile error names no path: {e}");
        }
        (Ok(mut sw), Ok(_)) => {
            // An accepted program must run; what it emits is no longer bounded.
            // Not with jumps: a changed jump target makes a legitimate endless loop.
            if !text.contains("\"_jump") {
                let own = c.programs[p].packets.iter().take(3);
                for (port, pkt) in own.chain(c.pool.iter().step_by(c.pool.len() / 2)) {
                    sw.process(*port, pkt, &mut |_, _| {});
                }
            }
        }
    }
    Ok(())
}

const CHILD_ENV: &str = "SLUICE_ROBUSTNESS_CHILD";

/// Runs test `name` of this binary in a child process with at most `mem_mb` of
/// address space; fails with the tail of its output when it does not pass.
fn run_in_child(name: &str, mem_mb: u64, limit: Duration) {
    use std::io::Read;
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\" 2>&1", mem_mb * 1024))
        .arg(&exe)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("cannot start the child test process");
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        out.read_to_end(&mut s).ok();
        String::from_utf8_lossy(&s).to_string()
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > limit {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = reader.join().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    match status {
        Some(s) if s.success() => {
            assert!(text.contains("1 passed"), "child ran no test:\n{tail}");
            for l in lines.iter().filter(|l| l.contains(" cases in ")) {
                eprintln!("{l}");
            }
        }
        Some(s) => panic!("{name} failed in the child process ({s}); last output:\n{tail}"),
        None => panic!("{name} did not finish within {limit:?}; last output:\n{tail}"),
    }
}

#[test]
fn json_mutations_give_clear_errors() {
    if std::env::var_os(CHILD_ENV).is_none() {
        // Huge sizes must not be able to exhaust the machine: 6 GiB of address space.
        run_in_child("json_mutations_give_clear_errors", 6 * 1024, Duration::from_secs(300));
        return;
    }
    let started = Instant::now();
    let c = corpus();
    let spans: Vec<Vec<(usize, usize)>> = c.programs.iter().map(|p| number_spans(&p.json)).collect();
    for (p, s) in c.programs.iter().zip(&spans) {
        assert!(!s.is_empty(), "{}: no numbers found", p.name);
    }
    let strategy = (any::<Index>(), any::<u8>(), any::<Index>(), any::<Index>(), any::<Index>());
    let r = runner(JSON_CASES, "json").run(&strategy, |m| {
        let (p, text, desc) = mutate(c, &spans, &m);
        check_mutation(c, p, &text, &desc)
    });
    eprintln!("json mutations: {JSON_CASES} cases in {:.1?}", started.elapsed());
    if let Err(e) = r {
        panic!(
            "{}",
            describe(e, |m| {
                let (p, _, d) = mutate(c, &spans, m);
                format!("{}: {d}", c.programs[p].name)
            })
        );
    }
}

// ---------------------------------------------------------------- reproducers

/// forloop-bmv2's default action runs `for (bit<8> i = 1; i <= h.count; i = i + 1)`:
/// for count 255, `i` wraps and the loop never ends (bmv2 hangs as well). One
/// packet must not stall the switch for good: the engine bounds what one action
/// may execute (`MAX_ACTION_STEPS` primitives) and drops the packet past it.
#[test]
fn forloop_packet_with_count_255_terminates() {
    use sluice_dataplane::DataPlane;
    let p =
        corpus().programs.iter().find(|p| p.name == "p4c-stf/forloop-bmv2").expect("forloop-bmv2 not in the corpus");
    let mut sw = sluice_engine::load_switch(&p.json).unwrap();
    // The loop works: count 5 sums 1..=5.
    let mut out = Vec::new();
    sw.process(0, &[5, 0, 0, 0, 0, 0, 0, 0, 0], &mut |_, b| out.push(b.to_vec()));
    assert_eq!(out, vec![vec![5, 0, 0, 0, 15, 0, 0, 0, 0]]);
    let dropped_before = sw.stats().dropped;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut out = 0;
        sw.process(0, &[0xff, 0, 0, 0, 0, 0, 0, 0, 0], &mut |_, _| out += 1);
        let _ = tx.send((out, sw.stats().dropped));
    });
    let (out, dropped) = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| {
        panic!(
            "packet ff0000000000000000 on port 0 of forloop-bmv2 is still being processed after 10 s \
             (endless `_jump` loop in action ingress.sum_loop); its thread keeps spinning until the test binary exits"
        )
    });
    assert_eq!((out, dropped - dropped_before), (0, 1), "the endless packet is dropped and counted");
}

/// A corpus program with one JSON value replaced (`pointer` as in RFC 6901).
fn edited(program: &str, pointer: &str, value: serde_json::Value) -> String {
    let p =
        corpus().programs.iter().find(|p| p.name == program).unwrap_or_else(|| panic!("{program} not in the corpus"));
    let mut v: serde_json::Value = serde_json::from_str(&p.json).unwrap();
    *v.pointer_mut(pointer).unwrap_or_else(|| panic!("{program} has no {pointer}")) = value;
    v.to_string()
}

/// Loading must fail with an error at `path`, or every packet must be processed without a panic.
fn rejected_or_runs(text: &str, path: &str, packets: &[(u32, &str)]) {
    let mut sw = match sluice_engine::load_switch(text) {
        Err(e) => {
            assert!(e.to_string().starts_with(path), "rejected, but the error does not name {path}: {e}");
            return;
        }
        Ok(sw) => sw,
    };
    for (port, h) in packets {
        let pkt: Vec<u8> = (0..h.len() / 2).map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap()).collect();
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| sw.process(*port, &pkt, &mut |_, _| {})));
        if let Err(e) = r {
            panic!("the program loads, but packet {h} on port {port} makes the switch panic: {}", panic_text(&e));
        }
    }
}

/// A control that loops: a conditional whose branch leads back to itself,
/// or a table whose next node is the conditional before it (the first
/// found by the `load_json` fuzz target: the program loaded, and its
/// first packet ran for ever in the compiled pipeline). Refused at load,
/// naming the node the loop starts from.
#[test]
fn a_control_flow_loop_is_refused_at_load() {
    let self_loop = edited("examples/router", "/pipelines/0/conditionals/1/true_next", serde_json::json!("node_5"));
    let e = sluice_engine::load_switch(&self_loop).err().expect("a conditional leading to itself is refused");
    assert_eq!(
        e.to_string(),
        "pipelines[0].conditionals[1]: \"node_5\" leads back to \"node_5\": a control's tables and conditionals must form no loop"
    );
    let back = edited("examples/router", "/pipelines/0/tables/3/base_default_next", serde_json::json!("node_3"));
    let e = sluice_engine::load_switch(&back).err().expect("a table leading back to an earlier conditional is refused");
    assert!(e.to_string().contains("must form no loop"), "{e}");
    assert!(
        sluice_engine::load_switch(&edited(
            "examples/router",
            "/pipelines/0/tables/3/base_default_next",
            serde_json::json!("node_19")
        ))
        .is_ok(),
        "the router as compiled loads"
    );
}

/// `access_field` on a header-stack element picked at run time (`rest[retval & 7]`)
/// with a field index past the header type's fields: the compiler checks the index
/// only for fixed headers (sluice-engine expr.rs, `Expr::AccessField`), so the
/// packet panics with "index out of bounds" in control.rs `write_dst`
/// (and expr.rs `CExpr::DynField` when read).
#[test]
fn access_field_index_past_the_header_is_rejected() {
    let text = edited(
        "p4c-stf/opassign2-bmv2",
        "/actions/0/primitives/2/parameters/0/value/value/right",
        serde_json::json!(4294967295u64),
    );
    rejected_or_runs(
        &text,
        "actions[0].primitives[2]",
        &[(0, "0000123400005678deaddead0105ffaa1000000020000000300000004000000050000000600000007000000080000000")],
    );
}

/// `assign_VL` between varbit fields of different maximum sizes: Prim::AssignVl
/// copies the destination's whole buffer length from the source's offset
/// (`phv.wide.copy_within(b..b + len, a)` in control.rs), reading past the source
/// field; here past the end of the PHV's wide area (a "range end index ... out of
/// range for slice" panic). With a smaller gap it would silently copy the
/// neighbouring fields' bytes.
#[test]
fn assign_vl_between_varbits_of_different_sizes_does_not_panic() {
    // `$varbit32` (the local `s`) grows to 64 bytes; `s = hdr.h1.var` copies from a 4-byte varbit.
    let text = edited("p4c-stf/issue447-5-bmv2", "/header_types/1/max_length", serde_json::json!(64));
    rejected_or_runs(&text, "actions[0].primitives[0]", &[(0, "000000081234567890"), (0, "000000101234567890")]);
}

// ---------------------------------------------------------------- compiled vs interpreted

/// Packets per program for the differential property.
const DIFFERENTIAL_CASES: u32 = 1500;

/// The compiled pipelines (the default) and the interpreter emit the same
/// packets for random, corpus and bit-flipped input on every program, and
/// leave the same counters and registers behind.
#[test]
fn compiled_and_interpreted_pipelines_agree() {
    let compared = for_each_program("compiled vs interpreted", |p, sw, last| {
        if sw.mode() != sluice_engine::ExecMode::Compiled {
            return Err("the default switch is not compiled".into());
        }
        let mut twin = sluice_engine::load_switch(&p.json).map_err(|e| e.to_string())?;
        for line in p.commands.lines() {
            let _ = cli::run(&mut twin, line);
        }
        populate(&mut twin, &p.name);
        twin.set_mode(sluice_engine::ExecMode::Interpreted).map_err(|e| e.to_string())?;
        let pkts = sample_packets(corpus(), p, 16);
        let mut r = Mix::new(&p.name);
        let mut compared = 0u64;
        for case in 0..DIFFERENTIAL_CASES {
            let (port, mut pkt) = match (case % 3, pkts.is_empty()) {
                (0, _) | (_, true) => {
                    let len = r.below(200);
                    (r.below(16) as u32, (0..len).map(|_| r.next() as u8).collect::<Vec<u8>>())
                }
                (k, false) => {
                    let (port, pkt) = pkts[r.below(pkts.len())].clone();
                    (if k == 1 { port } else { r.below(16) as u32 }, pkt)
                }
            };
            if case % 3 == 2 && !pkt.is_empty() {
                for _ in 0..1 + r.below(6) {
                    let b = r.below(pkt.len() * 8);
                    pkt[b / 8] ^= 0x80 >> (b % 8);
                }
            }
            {
                let mut l = last.0.lock().unwrap();
                l.0 = port;
                l.1.clone_from(&pkt);
            }
            let now = 1000 * u64::from(case);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            sw.process_at(port, &pkt, now, &mut |q, out| a.push((q, out.to_vec())));
            twin.process_at(port, &pkt, now, &mut |q, out| b.push((q, out.to_vec())));
            if a != b {
                let show = |v: &[(u32, Vec<u8>)]| {
                    v.iter().map(|(q, o)| format!("\n      port {q}: {}", hex(o))).collect::<String>()
                };
                return Err(format!(
                    "packet {case} on port {port} ({}):\n    compiled emitted:{}\n    interpreted emitted:{}",
                    hex(&pkt),
                    show(&a),
                    show(&b)
                ));
            }
            compared += a.len() as u64;
        }
        let (da, db) = (sw.packet_state_summary(), twin.packet_state_summary());
        if da != db {
            return Err(format!("state differs after the packets:\n  compiled:    {da}\n  interpreted: {db}"));
        }
        Ok(compared)
    });
    assert!(compared > 10_000, "only {compared} emitted packets were compared");
}

/// Every fault of `--inject-faults`, in memory: the router example's
/// traffic received through a faulty port (every fault at once, links
/// steady) into the switch's batch path. Every frame is accounted for: the
/// port's receive count = what the switch was handed - duplicates + drops +
/// what the port still holds back; the switch sent or dropped each frame it
/// was handed (its counters), damaged frames included.
#[test]
fn injected_faults_in_memory_are_accounted_for_by_the_port_and_the_data_path() {
    use sluice_dataplane::DataPlane;
    use sluice_ports::faults::FaultyPort;
    use sluice_ports::memory::MemoryPort;
    use sluice_ports::{Port, RxBatch};
    let w = sluice::p4::bench::example(
        sluice::p4::bench::Example::Router,
        1000,
        64,
        0,
        sluice::p4::bench::RouteLayout::Consecutive,
        sluice_engine::ExecMode::Compiled,
    )
    .unwrap();
    let (mut sw, traffic) = (w.data_plane, w.traffic);
    let mut mem = MemoryPort::new("mem0");
    for _ in 0..4 {
        for f in &traffic {
            mem.push(f);
        }
    }
    let faults = "drop=0.1,dup=0.1,reorder=0.1,truncate=0.1,corrupt=0.1,seed=11".parse().unwrap();
    let mut port = FaultyPort::new(mem, faults, 2048);
    let mut batch = RxBatch::new(2048);
    let (mut handed, mut emitted) = (0u64, 0u64);
    let before = sw.stats();
    while !port.finished() {
        let n = port.recv(&mut batch).unwrap();
        let frames: Vec<&[u8]> = (0..n).map(|i| batch.frame(i).0).collect();
        sw.process_batch(0, &frames, &mut |_, _, _| emitted += 1);
        handed += n as u64;
    }
    let s = port.stats();
    let c = s.faults;
    for (what, n) in [("dropped", c.dropped), ("duplicated", c.duplicated), ("reordered", c.reordered)] {
        assert!(n > 0, "no frame {what}: {c}");
    }
    assert!(c.truncated > 0 && c.corrupted > 0, "{c}");
    assert_eq!(s.rx_packets, handed - c.duplicated + c.dropped, "the port's count: {c}");
    let after = sw.stats();
    let (received, sent, dropped) =
        (after.received - before.received, after.transmitted - before.transmitted, after.dropped - before.dropped);
    assert_eq!(received, handed, "the switch counts every frame it was handed");
    assert_eq!(sent, emitted, "the switch counts every frame it emitted");
    assert_eq!(sent + dropped, handed, "each frame was sent or dropped (the router makes no copies)");
    assert!(dropped > c.dropped / 2, "truncated and corrupted frames the router drops are counted: {dropped}");
}
