//! P4 targets: the router example's packet path, BMv2 JSON, the runtime
//! CLI, and the compiled pipelines against the interpreter on the
//! conformance corpora's programs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use sluice_control::cli;
use sluice_engine::runtime::SavedState;
use sluice_engine::{ExecMode, Switch};
use sluice_stf::StfCommand;

const ROUTER: &str = include_str!("../../../examples/router.json");
const EDGE: &str = include_str!("../../../examples/edge.json");

/// Routes and next hops of the router example, so that packets reach every table.
const ROUTES: &[&str] = &[
    "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1",
    "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.1.0.0/16 => 2",
    "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 0.0.0.0/0 => 3",
    "table_add RouterIngress.ipv4_lpm RouterIngress.drop 192.168.0.0/16 =>",
    "table_add RouterIngress.ipv6_lpm RouterIngress.set_nexthop 2001:db8::/32 => 1",
    "table_add RouterIngress.ipv6_lpm RouterIngress.set_nexthop ::/0 => 2",
    "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:01:01 00:00:00:00:02:02",
    "table_add RouterIngress.nexthop RouterIngress.forward 2 => 3 00:00:00:00:01:01 00:00:00:00:03:03",
    "table_add RouterIngress.nexthop RouterIngress.forward 3 => 511 00:00:00:00:01:01 00:00:00:00:04:04",
];

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Target `packet`: any frame on port 1 of the router example (with
/// routes) is processed without a panic and grows by at most 512 bytes.
pub fn packet(data: &[u8]) {
    static SW: OnceLock<Mutex<Switch>> = OnceLock::new();
    let sw = SW.get_or_init(|| {
        let mut sw = sluice_engine::load_switch(ROUTER).expect("router.json loads");
        for r in ROUTES {
            cli::run(&mut sw, r).unwrap_or_else(|e| panic!("{r}: {e}"));
        }
        Mutex::new(sw)
    });
    lock(sw).process(1, data, &mut |port, out| {
        assert!(out.len() <= data.len() + 512, "{} bytes out on port {port} for {} in", out.len(), data.len());
    });
}

/// Loads a program whose pipelines are interpreted: the loader and the
/// plan compiler without the native code generator.
fn load_interpreted(text: &str) -> Result<Switch, String> {
    let model = sluice_json::load_str(text).map_err(|e| e.to_string())?;
    let plan = sluice_engine::compile(&model).map_err(|e| e.to_string())?;
    Switch::new_interpreted(plan).map_err(|e| e.to_string())
}

/// Target `load_json`: any text loads or fails with a non-empty error; a
/// program that loads runs packets without a panic (unless it has jumps:
/// a mutated jump target is a legitimate endless loop). One input in 64
/// (by length) is also compiled to native code; the others are
/// interpreted, which loads them ten times faster (`p4_differential`
/// checks the native code on the corpus programs).
pub fn load_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let loaded = if data.len().is_multiple_of(64) {
        sluice_engine::load_switch(text).map_err(|e| e.to_string())
    } else {
        load_interpreted(text)
    };
    match loaded {
        Err(e) => assert!(!e.is_empty(), "empty error message"),
        Ok(mut sw) => {
            if text.contains("\"_jump") {
                return;
            }
            let mut pkt: Vec<u8> = (0..64u8).map(|i| i.wrapping_mul(37)).collect();
            pkt[12..14].copy_from_slice(&[0x08, 0x00]);
            for port in [0, 1] {
                sw.process(port, &pkt, &mut |_, _| {});
            }
        }
    }
}

/// An IPv4/TCP packet that reaches the edge example's acl, sources and routes tables.
const EDGE_PACKET: &[u8] = &[
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x08, 0x00, // ethernet
    0x45, 0x00, 0x00, 0x28, 0x00, 0x01, 0x00, 0x00, 0x40, 0x06, 0x00, 0x00, // ipv4 ...
    0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x02, // ... src, dst
    0x04, 0xd2, 0x00, 0x50, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0x02, 0x20, 0x00, 0x00, 0x00, 0x00,
    0x00, // tcp
];

/// Target `cli_command`: up to 16 command lines against the edge example
/// (as freshly loaded) answer or fail with a non-empty error; then
/// packets run over whatever got installed.
pub fn cli_command(data: &[u8]) {
    static SW: OnceLock<Mutex<(Switch, SavedState)>> = OnceLock::new();
    let Ok(text) = std::str::from_utf8(data) else { return };
    let sw = SW.get_or_init(|| {
        let sw = sluice_engine::load_switch(EDGE).expect("edge.json loads");
        let loaded = sw.save_state();
        Mutex::new((sw, loaded))
    });
    let mut guard = lock(sw);
    let (sw, loaded) = &mut *guard;
    sw.restore_state(&loaded.unshared_copy());
    for line in text.lines().take(16) {
        if let Err(e) = cli::run(sw, line) {
            assert!(!e.to_string().is_empty(), "empty error for {line:?}");
        }
    }
    for port in [1, 255] {
        // Port 255 is the CPU port: a packet_out header comes first.
        let mut pkt = if port == 255 { vec![0x00, 0x80] } else { Vec::new() };
        pkt.extend_from_slice(EDGE_PACKET);
        sw.process(port, &pkt, &mut |_, _| {});
    }
}

// ---------------------------------------------------------------- differential

/// A corpus program and the commands that configure it.
struct CorpusProgram {
    /// `bmv2/<case>`, `p4c-stf/<test>`, `p4c-stf-psa/<test>`.
    name: String,
    json: PathBuf,
    /// Its STF test (table commands are taken from it), if any.
    stf: Option<PathBuf>,
    /// Its runtime CLI commands, if any.
    commands: Option<PathBuf>,
}

/// The programs the differential target picks from, in name order: every
/// bmv2 case, every p4c STF test (v1model and PSA).
fn corpus_programs() -> &'static [CorpusProgram] {
    static P: OnceLock<Vec<CorpusProgram>> = OnceLock::new();
    P.get_or_init(|| {
        let root = crate::conformance();
        let mut out = Vec::new();
        let dirs = |d: &Path| -> Vec<PathBuf> {
            let mut v: Vec<PathBuf> = std::fs::read_dir(d)
                .unwrap_or_else(|e| panic!("the conformance corpora are needed at {}: {e}", d.display()))
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
            v.sort();
            v
        };
        let some = |p: PathBuf| p.exists().then_some(p);
        for d in dirs(&root.join("bmv2")) {
            let n = d.file_name().unwrap().to_string_lossy().to_string();
            out.push(CorpusProgram {
                name: format!("bmv2/{n}"),
                json: d.join("program.json"),
                stf: None,
                commands: some(d.join("commands.txt")),
            });
        }
        for corpus in ["p4c-stf", "p4c-stf-psa"] {
            for d in dirs(&root.join(corpus)) {
                let n = d.file_name().unwrap().to_string_lossy().to_string();
                out.push(CorpusProgram {
                    name: format!("{corpus}/{n}"),
                    json: d.join(format!("{n}.json")),
                    stf: some(d.join(format!("{n}.stf"))),
                    commands: some(d.join("commands.txt")),
                });
            }
        }
        assert!(
            out.len() > 100,
            "expected the conformance corpora under {}, found {} programs",
            root.display(),
            out.len()
        );
        out
    })
}

/// A corpus program compiled and interpreted, each with its state as
/// configured by the program's corpus case.
struct Pair {
    compiled: Switch,
    interpreted: Switch,
    configured: [SavedState; 2],
}

impl Pair {
    fn load(p: &CorpusProgram) -> Option<Pair> {
        let json = std::fs::read_to_string(&p.json).ok()?;
        let mut compiled = sluice_engine::load_switch(&json).ok()?;
        let mut interpreted = load_interpreted(&json).ok()?;
        assert_eq!(compiled.mode(), ExecMode::Compiled, "{}: the default switch is compiled", p.name);
        let cli: Vec<String> = p
            .commands
            .as_ref()
            .and_then(|c| std::fs::read_to_string(c).ok())
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default();
        let stf: Vec<StfCommand> = p
            .stf
            .as_ref()
            .and_then(|s| std::fs::read_to_string(s).ok())
            .and_then(|t| sluice_stf::parse(&t).ok())
            .map(|lines| lines.into_iter().map(|l| l.command).collect())
            .unwrap_or_default();
        let mut configured = Vec::new();
        for sw in [&mut compiled, &mut interpreted] {
            for l in &cli {
                let _ = cli::run(sw, l);
            }
            for c in &stf {
                let _ = sluice::p4::stf::apply_table_command(sw, c);
            }
            configured.push(sw.save_state());
        }
        let configured = configured.try_into().ok()?;
        Some(Pair { compiled, interpreted, configured })
    }

    /// Both switches back to the program as configured by its corpus case
    /// (a copy of the saved state each: the packets change registers and
    /// meters of their own).
    fn reset(&mut self) {
        self.compiled.restore_state(&self.configured[0].unshared_copy());
        self.interpreted.restore_state(&self.configured[1].unshared_copy());
    }
}

/// The packets of a differential input: after the program's two bytes,
/// records of `[port, length (2 bytes, big-endian), bytes]`; the last
/// record takes what is left when its length runs past the end. At most 8.
pub fn differential_packets(rest: &[u8]) -> Vec<(u32, &[u8])> {
    let mut out = Vec::new();
    let mut at = rest;
    while at.len() >= 3 && out.len() < 8 {
        let port = u32::from(at[0]);
        let len = usize::from(u16::from_be_bytes([at[1], at[2]]));
        let end = (3 + len).min(at.len());
        out.push((port, &at[3..end]));
        at = &at[end..];
    }
    out
}

/// Target `p4_differential`: the first two bytes pick a corpus program
/// (big-endian index, modulo their number), configured by its corpus
/// case; the rest is packets (see [`differential_packets`]). The
/// compiled pipelines and the interpreter emit the same packets and leave
/// the same counters and registers.
pub fn differential(data: &[u8]) {
    differential_emitted(data);
}

/// [`differential`], returning the number of packets each path emitted.
pub fn differential_emitted(data: &[u8]) -> usize {
    static LOADED: OnceLock<Mutex<HashMap<usize, Option<Pair>>>> = OnceLock::new();
    if data.len() < 2 {
        return 0;
    }
    let programs = corpus_programs();
    let i = usize::from(u16::from_be_bytes([data[0], data[1]])) % programs.len();
    let mut loaded = lock(LOADED.get_or_init(Default::default));
    let Some(pair) = loaded.entry(i).or_insert_with(|| Pair::load(&programs[i])) else { return 0 };
    pair.reset();
    let mut emitted = 0;
    for (n, (port, pkt)) in differential_packets(&data[2..]).into_iter().enumerate() {
        let now = 1000 * n as u64;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        pair.compiled.process_at(port, pkt, now, &mut |q, out| a.push((q, out.to_vec())));
        pair.interpreted.process_at(port, pkt, now, &mut |q, out| b.push((q, out.to_vec())));
        assert_eq!(
            a, b,
            "{}: packet {n} on port {port}: compiled (left) and interpreted (right) differ",
            programs[i].name
        );
        emitted += a.len();
    }
    let (sa, sb) = (pair.compiled.packet_state_summary(), pair.interpreted.packet_state_summary());
    assert_eq!(sa, sb, "{}: state after the packets: compiled (left) and interpreted (right) differ", programs[i].name);
    emitted
}

/// The index of the corpus program called `name` (for making seeds).
pub fn differential_program_index(name: &str) -> Option<usize> {
    corpus_programs().iter().position(|p| p.name == name)
}

/// The names of the corpus programs, in index order.
pub fn differential_program_names() -> Vec<String> {
    corpus_programs().iter().map(|p| p.name.clone()).collect()
}
