//! `sluice bench`: replays traffic from memory through the pipeline as fast as
//! possible and prints one line per second, in the spirit of Snabb's
//! `lwaftr bench`. With no program it runs the built-in router example with a
//! generated route table and generated 64-byte IPv4/UDP traffic.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_dataplane::workers::{flow_hash, Pool, WorkerIo};
use sluice_dataplane::{DataPlane, BATCH};
use sluice_engine::Switch;

#[path = "../benches/reference/router.rs"]
mod reference;
pub use reference::ReferenceRouter;

/// The router example, compiled by p4c, embedded so `sluice bench` needs no files.
pub const ROUTER_JSON: &str = include_str!("../../../examples/router.json");

/// Where the built-in /24 routes lie in the IPv4 space.
///
/// Why two: a DIR-24-8 reads one top-level slot per /24, so the layout
/// decides how much of its 64 MiB top level the traffic touches. Spread
/// routes touch slots all over it, as a real table (an Internet routing
/// table's prefixes come from most of the address space) does: with a
/// million routes the slots are out of the caches and memory latency
/// decides the rate. Consecutive routes keep a million slots in 4 MiB,
/// which a 32 MiB L3 holds: a cache-resident case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RouteLayout {
    /// /24s spread over the whole IPv4 space (route `r` at `r * 0x9e3779b1`
    /// modulo 2^24, a permutation: no two routes share a /24).
    Spread,
    /// Consecutive /24s from 10.0.0.0 (up to 4M routes stay inside 10.0.0.0-73.255.255.0).
    Consecutive,
}

impl RouteLayout {
    /// Network address of built-in route `r`.
    pub fn network(self, r: u32) -> u32 {
        match self {
            RouteLayout::Spread => (r.wrapping_mul(0x9e37_79b1) & 0xff_ffff) << 8,
            RouteLayout::Consecutive => (10u32 << 24).wrapping_add(r << 8),
        }
    }
}

/// Route-table commands for the built-in router: `routes` /24 routes over 16 next hops.
pub fn router_commands(routes: u32, layout: RouteLayout) -> String {
    let mut s = String::with_capacity(routes as usize * 80 + 2048);
    for nh in 1..=16u32 {
        let (port, src, dst) = router_nexthop(nh as u16);
        s.push_str(&format!(
            "table_add RouterIngress.nexthop RouterIngress.forward {nh} => {port} {} {}\n",
            mac(src),
            mac(dst)
        ));
    }
    for r in 0..routes {
        let net = std::net::Ipv4Addr::from(layout.network(r));
        s.push_str(&format!("table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop {net}/24 => {}\n", r % 16 + 1));
    }
    s
}

/// Next hop `nh` (1..=16) of the built-in router: egress port, source and destination MAC.
pub fn router_nexthop(nh: u16) -> (u16, [u8; 6], [u8; 6]) {
    (nh % 4, [2, 0, 0, 0, 0, nh as u8], [0, 0x5e, 0, 0, 0, nh as u8])
}

fn mac(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// The hand-written reference router with the same routes and next hops as
/// [`router_commands`].
pub fn reference_router(routes: u32, layout: RouteLayout) -> ReferenceRouter {
    let mut r = ReferenceRouter::new();
    for nh in 1..=16u16 {
        let (port, src, dst) = router_nexthop(nh);
        r.add_nexthop(nh, port, src, dst);
    }
    r.add_ipv4_routes((0..routes).map(|i| (layout.network(i), 24, (i % 16 + 1) as u16)).collect());
    r
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
pub fn router_traffic(n: usize, routes: u32, layout: RouteLayout) -> Vec<Vec<u8>> {
    router_traffic_sized(n, routes, 64, layout)
}

/// IPv4/UDP frames of `frame` bytes on the wire (FCS included, so the buffers
/// are 4 bytes shorter; at least 64) from 192.168.0.1 to random hosts in the
/// built-in routes, UDP source ports 1024-1279 to port 53.
pub fn router_traffic_sized(n: usize, routes: u32, frame: usize, layout: RouteLayout) -> Vec<Vec<u8>> {
    let len = frame.max(64) - 4;
    let mut out = Vec::with_capacity(n);
    let mut x: u32 = 0x1234_5678;
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let r = x % routes.max(1);
        let mut p = vec![0u8; len];
        p[0..6].copy_from_slice(&[0, 0x5e, 0, 0, 0, 0xfe]);
        p[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        p[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut p[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[192, 168, 0, 1]);
        ip[16..20].copy_from_slice(&(layout.network(r) | ((x >> 24) | 1)).to_be_bytes());
        let c = csum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        p[34..36].copy_from_slice(&(1024 + (x & 0xff) as u16).to_be_bytes());
        p[36..38].copy_from_slice(&53u16.to_be_bytes());
        p[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
        out.push(p);
    }
    out
}

/// The example programs `sluice bench` can run without files, each with a
/// generated configuration and generated traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Example {
    /// `examples/router.p4`: `--entries` /24 routes over 16 next hops.
    Router,
    /// `examples/edge.p4`: `--acl` ternary+range ACL rules (none matches the
    /// traffic), a policed source (meter), `--entries` /24 routes over two ECMP
    /// groups of the action selector.
    Edge,
    /// `examples/l2_learning.p4`: `--entries` learned source and destination MACs.
    L2Learning,
    /// p4c's `basic_routing-bmv2` from the conformance corpus (read at run
    /// time from `$SLUICE_CORPUS/p4c-bench/basic_routing-bmv2/`, default
    /// `../shared/conformance`): port to bridge domain to VRF, `--entries`
    /// exact host routes (at most 131072) and as many /24 routes in its LPM
    /// table (at most 16384) over 16 next hops with MAC rewrite; traffic
    /// alternates between the hosts and the /24s.
    BasicRouting,
}

/// Where [`Example::BasicRouting`] finds the conformance corpus.
fn corpus_dir() -> std::path::PathBuf {
    std::env::var_os("SLUICE_CORPUS").map_or_else(|| "../shared/conformance".into(), Into::into)
}

/// basic_routing's configuration and traffic (see [`Example::BasicRouting`]).
fn basic_routing_setup(entries: u32, frame: usize, layout: RouteLayout) -> (String, Vec<Vec<u8>>) {
    let hosts = entries.min(131_072);
    let nets = entries.min(16_384);
    let mut s = String::with_capacity(hosts as usize * 80 + nets as usize * 80 + 4096);
    s.push_str("table_add ingress.port_mapping ingress.set_bd 0 => 1\n");
    s.push_str("table_add ingress.bd ingress.set_vrf 1 => 1\n");
    // A host miss goes on to the LPM table.
    s.push_str("table_set_default ingress.ipv4_fib ingress.on_miss\n");
    for nh in 1..=16u16 {
        let (port, src, dst) = router_nexthop(nh);
        s.push_str(&format!("table_add ingress.nexthop ingress.set_egress_details {nh} => {port}\n"));
        s.push_str(&format!(
            "table_add egress.rewrite_mac egress.rewrite_src_dst_mac {nh} => {} {}\n",
            mac(src),
            mac(dst)
        ));
    }
    // Hosts in the /24s of the layout's first routes, networks after them.
    let host = |r: u32| layout.network(r) | 1;
    let net = |r: u32| layout.network(hosts + r);
    for r in 0..hosts {
        let ip = std::net::Ipv4Addr::from(host(r));
        s.push_str(&format!("table_add ingress.ipv4_fib ingress.fib_hit_nexthop 1 {ip} => {}\n", r % 16 + 1));
    }
    for r in 0..nets {
        let ip = std::net::Ipv4Addr::from(net(r));
        s.push_str(&format!("table_add ingress.ipv4_fib_lpm ingress.fib_hit_nexthop 1 {ip}/24 => {}\n", r % 16 + 1));
    }
    let mut traffic = router_traffic_sized(traffic_count(entries, frame), 1, frame, layout);
    let mut x: u32 = 0x6c07_8965;
    for (i, p) in traffic.iter_mut().enumerate() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let dst = if i % 2 == 0 { host(x % hosts) } else { net(x % nets) | ((x >> 24) | 1) };
        let ip = &mut p[14..34];
        ip[16..20].copy_from_slice(&dst.to_be_bytes());
        ip[10..12].copy_from_slice(&[0, 0]);
        let c = csum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    (s, traffic)
}

/// The edge example, compiled by p4c.
pub const EDGE_JSON: &str = include_str!("../../../examples/edge.json");
/// The l2_learning example, compiled by p4c.
pub const L2_JSON: &str = include_str!("../../../examples/l2_learning.json");

/// What one bench run replays: switch, traffic, ingress port, and the
/// reference router the ratio is taken against (with its own traffic of the
/// same size and table size).
pub struct Workload {
    pub switch: Switch,
    pub traffic: Vec<Vec<u8>>,
    pub port: u32,
    pub reference: Option<(ReferenceRouter, Vec<Vec<u8>>)>,
    pub label: String,
}

/// Distinct packets replayed: enough that big tables are hit all over, but
/// at most 32 MiB of frames, so that big frames measure the switch rather
/// than the memory bandwidth of reading the traffic.
fn traffic_count(entries: u32, frame: usize) -> usize {
    let n = if entries <= 4096 { 4096 } else { 1 << 18 };
    n.min((32 << 20) / frame.max(64)).max(4096.min(n))
}

/// Edge ACL rules that the bench traffic never matches: five mask shapes
/// (the tuples a classifier has to search), some with port ranges.
pub fn edge_acl_commands(rules: u32) -> String {
    let mut s = String::new();
    for i in 0..rules {
        let a = (i >> 8) & 0xff;
        let b = i & 0xff;
        let line = match i % 5 {
            0 => format!("0&&&0 0&&&0 172.{a}.{b}.0&&&255.255.255.0 0.0.0.0&&&0.0.0.0 0&&&0 0->65535 0->65535 => drop"),
            1 => format!(
                "0&&&0 0&&&0 0.0.0.0&&&0.0.0.0 172.16.{b}.{a}&&&255.255.255.255 6&&&0xff 0->65535 0->65535 => drop"
            ),
            2 => format!(
                "0&&&0 0&&&0 10.{a}.{b}.0&&&255.255.255.0 0.0.0.0&&&0.0.0.0 6&&&0xff 0->65535 {}->{} => permit",
                1000 + b,
                2000 + b
            ),
            3 => format!(
                "0&&&0 0&&&0 0.0.0.0&&&0.0.0.0 0.0.0.0&&&0.0.0.0 17&&&0xff 0->65535 {}->{} => drop",
                5000 + i,
                5000 + i
            ),
            _ => format!(
                "0&&&0 0x86dd&&&0xffff 0.0.0.0&&&0.0.0.0 198.{a}.{b}.0&&&255.255.255.0 0&&&0 0->65535 0->65535 => drop"
            ),
        };
        let (key, act) = line.split_once(" => ").expect("rule");
        s.push_str(&format!("table_add EdgeIngress.acl EdgeIngress.{act} {key} => {}\n", 100 + i));
    }
    s
}

/// Edge routes and ECMP groups: group 0 = ports 1-4, group 1 = ports 3-4.
pub fn edge_route_commands(routes: u32, layout: RouteLayout) -> String {
    let mut s = String::with_capacity(routes as usize * 90 + 2048);
    for p in 1..=4 {
        s.push_str(&format!(
            "act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop {p} 00:5e:00:00:00:0{p} 02:00:00:00:0{p}:01\n"
        ));
    }
    s.push_str("act_prof_create_group EdgeIngress.ecmp\n");
    for m in 0..4 {
        s.push_str(&format!("act_prof_add_member_to_group EdgeIngress.ecmp {m} 0\n"));
    }
    s.push_str("act_prof_create_group EdgeIngress.ecmp\n");
    for m in 2..4 {
        s.push_str(&format!("act_prof_add_member_to_group EdgeIngress.ecmp {m} 1\n"));
    }
    for r in 0..routes {
        let net = std::net::Ipv4Addr::from(layout.network(r));
        s.push_str(&format!("table_indirect_add_with_group EdgeIngress.routes {net}/24 => {}\n", r % 2));
    }
    // The traffic's source is policed by meter 0, with rates it never exceeds.
    s.push_str("table_add EdgeIngress.sources EdgeIngress.police 192.168.0.1 => 0\n");
    s.push_str("meter_set_rates EdgeIngress.policer 0 1000000:1000000 2000000:2000000\n");
    s
}

/// l2_learning: `entries` hosts 02:00:xx:xx:xx:xx on ports 1-4, all learned
/// (no digests) and all in the forwarding table; traffic between random pairs.
fn l2_setup(entries: u32, frame: usize) -> (String, Vec<Vec<u8>>) {
    let host = |i: u32| [2u8, 0, (i >> 24) as u8, (i >> 16) as u8, (i >> 8) as u8, i as u8];
    let mut s = String::with_capacity(entries as usize * 160);
    for i in 0..entries {
        s.push_str(&format!("table_add L2Ingress.learned L2Ingress.known {} 0 =>\n", mac(host(i))));
        s.push_str(&format!("table_add L2Ingress.forwarding L2Ingress.forward {} => {}\n", mac(host(i)), i % 4 + 1));
    }
    let n = traffic_count(entries, frame);
    let mut x: u32 = 0x2545_f491;
    let mut traffic = Vec::with_capacity(n);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let (src, dst) = (x % entries, (x >> 8) % entries);
        let mut p = vec![0u8; frame.max(64) - 4];
        p[0..6].copy_from_slice(&host(dst));
        p[6..12].copy_from_slice(&host(src));
        p[12..14].copy_from_slice(&[0x88, 0xb5]);
        traffic.push(p);
    }
    (s, traffic)
}

/// Builds one of the [`Example`] workloads with `entries` table entries,
/// frames of `frame` bytes, (edge) `acl` ACL rules and (router, edge,
/// basic_routing) routes laid out as `layout` says.
pub fn example(ex: Example, entries: u32, frame: usize, acl: u32, layout: RouteLayout) -> Result<Workload, String> {
    let n = traffic_count(entries, frame);
    let (json, commands, traffic, port, label) = match ex {
        Example::Router => {
            let (c, t) = (router_commands(entries, layout), router_traffic_sized(n, entries, frame, layout));
            (ROUTER_JSON.into(), c, t, 0, "router".to_string())
        }
        Example::Edge => {
            let mut c = edge_acl_commands(acl);
            c.push_str(&edge_route_commands(entries, layout));
            (EDGE_JSON.into(), c, router_traffic_sized(n, entries, frame, layout), 1, "edge".to_string())
        }
        Example::L2Learning => {
            let (c, t) = l2_setup(entries, frame);
            (L2_JSON.into(), c, t, 0, "l2_learning".to_string())
        }
        Example::BasicRouting => {
            let path = corpus_dir().join("p4c-bench/basic_routing-bmv2/basic_routing-bmv2.json");
            let json = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "the basic-routing example reads {} (set SLUICE_CORPUS to the conformance corpus): {e}",
                    path.display()
                )
            })?;
            let (c, t) = basic_routing_setup(entries, frame, layout);
            (std::borrow::Cow::Owned(json), c, t, 0, "basic_routing".to_string())
        }
    };
    let mut sw = sluice_engine::load_switch(&json).map_err(|e| e.to_string())?;
    sw.set_mode(crate::default_mode()).map_err(|e| e.to_string())?;
    if crate::apply_command_text(&mut sw, &commands, "built-in configuration", false) > 0 {
        return Err("the built-in configuration failed to load".into());
    }
    if ex == Example::BasicRouting {
        // A corpus program: check that the generated configuration routes.
        // Emitted is not enough: a packet no table matched leaves on port 0
        // untouched; a routed one leaves on its next hop's port with the
        // next hop's destination MAC.
        let mut routed = 0;
        let probe = &traffic[..traffic.len().min(64)];
        for p in probe {
            sw.process(port, p, &mut |o, d| {
                let nh = u16::from(d[5]);
                if (1..=16).contains(&nh) && d[..6] == router_nexthop(nh).2 && o == u32::from(router_nexthop(nh).0) {
                    routed += 1;
                }
            });
        }
        if routed != probe.len() {
            return Err(format!("basic_routing routed {routed} of {} probe packets to their next hops", probe.len()));
        }
    }
    let reference = reference_router(entries.min(1 << 22), layout);
    let ref_traffic = router_traffic_sized(n, entries.min(1 << 22), frame, layout);
    Ok(Workload { switch: sw, traffic, port, reference: Some((reference, ref_traffic)), label })
}

/// Builds the switch and traffic for a bench run of a program file.
pub fn setup(program: &Path, commands: Option<&Path>, pcap: Option<&Path>) -> Result<Workload, String> {
    let mut sw = crate::load(program)?;
    if let Some(c) = commands {
        crate::apply_commands(&mut sw, c, false)?;
    }
    let pcap = pcap.ok_or("--pcap TRAFFIC.pcap is required with a program")?;
    let pk: Vec<Vec<u8>> = sluice_ports::pcapfile::read_pcap(pcap)?.into_iter().map(|(_, d)| d).collect();
    if pk.is_empty() {
        return Err(format!("{} holds no packets", pcap.display()));
    }
    Ok(Workload { switch: sw, traffic: pk, port: 0, reference: None, label: program.display().to_string() })
}

/// One worker's lookup-cache counters for a table: `(table, hits, misses,
/// bypassed)`; an entry with an empty name marks a worker that has recorded.
type CacheCounts = (String, u64, u64, u64);

/// Batch sizes the hand-written reference is tried with before its turns;
/// it runs on the fastest. Why: its two passes (prefetch every slot, then
/// process) want batches as long as the memory latency they hide: 32 when
/// a million slots stay in L3 (consecutive routes), 128 or more when they
/// come from memory (spread routes); a fixed size would hand it a handicap
/// in one of the two.
const REFERENCE_BATCHES: [usize; 4] = [32, 64, 128, 256];

/// Frames borrowed from traffic that lives as long as they do.
struct Frames {
    /// The frames' storage: never changed while `frames` lives.
    _traffic: Vec<Vec<u8>>,
    frames: Vec<&'static [u8]>,
}

impl Frames {
    fn new(traffic: Vec<Vec<u8>>) -> Frames {
        // SAFETY: each slice points into the heap buffer of one of the
        // vectors of `traffic`, which `Frames` owns and never changes, so
        // the buffers stay where they are for as long as the slices live
        // (moving `Frames` moves the outer vector, not the buffers).
        let frames = traffic.iter().map(|p| unsafe { std::mem::transmute::<&[u8], &'static [u8]>(p) }).collect();
        Frames { _traffic: traffic, frames }
    }
}

/// One worker's share of the bench traffic, replayed in batches of
/// `sluice_dataplane::BATCH` frames (what a port whose receive ring is
/// full hands the loop).
struct BenchIo {
    traffic: Frames,
    /// Wire bytes of `traffic[..i]` at `i`: a batch's bytes are one
    /// subtraction, not a sum over its packets.
    wire_before: Vec<u64>,
    next: usize,
    port: u32,
    stop: Arc<AtomicBool>,
    /// Packets, wire bytes and packets sent by this worker (written by it
    /// alone, so with plain stores rather than locked additions).
    counts: Arc<[AtomicU64; 3]>,
    /// The CPU this worker pins itself to on its first batch (one worker per core).
    cpu: Option<usize>,
    /// Packets after which this worker stops by itself (`--packets`), so that
    /// instruction counts cover exactly that many packets.
    limit: Option<u64>,
    /// Lookup-cache `(table, hits, misses)` of this worker's switch, filled when it stops.
    /// (An empty table name marks "this worker has recorded".)
    caches: Arc<std::sync::Mutex<Vec<CacheCounts>>>,
    recorded: bool,
}

impl BenchIo {
    /// Records the lookup-cache counters of the worker's switch (once).
    fn record_caches(&mut self, sw: &Switch) {
        if self.recorded {
            return;
        }
        self.recorded = true;
        let mut c = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        c.push(("".into(), 0, 0, 0));
        for (t, p) in sw.program().tables.iter().enumerate() {
            if let Some((hits, misses, bypassed)) = sw.lookup_cache_stats(t) {
                c.push((p.name.clone(), hits, misses, bypassed));
            }
        }
    }
}

impl WorkerIo<Switch> for BenchIo {
    fn run_batch(&mut self, sw: &mut Switch) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            self.record_caches(sw);
            return false;
        }
        if let Some(cpu) = self.cpu.take() {
            pin_to_cpu(cpu);
        }
        let total = self.traffic.frames.len();
        let mut end = (self.next + BATCH).min(total);
        if let Some(limit) = self.limit {
            let left = limit.saturating_sub(self.counts[0].load(Ordering::Relaxed));
            if left == 0 {
                self.record_caches(sw);
                return false;
            }
            end = end.min(self.next + left as usize);
        }
        let batch = &self.traffic.frames[self.next..end];
        self.next = if end == total { 0 } else { end };
        // Packets sent are counted by the switch (every emit is counted in
        // its statistics), so the output callback has nothing to do: a
        // count kept through it is a read-modify-write in memory per packet.
        let before = sw.stats.transmitted;
        DataPlane::process_batch(sw, self.port, batch, &mut |_, _, _| {});
        let sent = sw.stats.transmitted - before;
        let bytes = self.wire_before[end] - self.wire_before[end - batch.len()];
        for (c, n) in self.counts.iter().zip([batch.len() as u64, bytes, sent]) {
            c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }
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

/// What to run: a program file with its commands and pcap, or a built-in example.
pub struct BenchArgs<'a> {
    pub program: Option<&'a Path>,
    pub commands: Option<&'a Path>,
    pub pcap: Option<&'a Path>,
    pub example: Example,
    pub entries: u32,
    pub frame: usize,
    pub acl: u32,
    /// Where the built-in routes lie (router, edge, basic_routing).
    pub layout: RouteLayout,
    pub duration: f64,
    pub max_packets: Option<u64>,
    pub workers: usize,
    /// Skip the hand-written reference run.
    pub no_reference: bool,
    /// Turns the engine and the reference take (see `sluice bench --rounds`).
    pub rounds: usize,
    /// Time each stage of the engine and print where the time went.
    pub profile: bool,
}

/// One turn of `sluice bench --rounds`: engine Mpps, reference Mpps.
type Turn = (f64, Option<f64>);

/// Runs the benchmark and prints per-second and summary lines, then runs the
/// hand-written reference router for as long and prints the ratio; with
/// `rounds` above one the two take that many turns and the result line
/// gives the turns' medians.
pub fn run(a: &BenchArgs<'_>) -> Result<(), String> {
    let w = match a.program {
        None => example(a.example, a.entries, a.frame, a.acl, a.layout)?,
        Some(p) => setup(p, a.commands, a.pcap)?,
    };
    let Workload { switch: mut sw, mut traffic, port, reference, label } = w;
    let workers = a.workers.max(1);
    let mode = match sw.mode() {
        sluice_engine::ExecMode::Compiled => "compiled",
        sluice_engine::ExecMode::Interpreted => "interpreted",
    };
    let size = traffic.iter().map(|p| p.len() + 4).sum::<usize>() / traffic.len();
    println!(
        "sluice bench: {label} ({} packets in memory, {} entries, {size} B average frame), {} s, {workers} worker(s), {mode} pipelines",
        traffic.len(),
        if a.program.is_none() { a.entries.to_string() } else { "-".into() },
        a.duration,
    );
    // The router and its reference must do the same work: same output for every packet.
    if let (Some((_, rt)), None, Example::Router) = (&reference, a.program, a.example) {
        check_same_output(&mut sw, &mut reference_router(a.entries.min(1 << 22), a.layout), port, rt)?;
    }
    let rounds = a.rounds.max(1);
    let mut ref_traffic = reference.filter(|_| !a.no_reference).map(|(_, rt)| rt);
    let has_reference = ref_traffic.is_some();
    let entries = a.entries.min(1 << 22);
    let layout = a.layout;
    // The reference runs on the batch size it is fastest with here.
    let ref_batch = match &ref_traffic {
        Some(rt) => {
            let tries = REFERENCE_BATCHES
                .iter()
                .map(|&b| {
                    let m = replay_reference(move || reference_router(entries, layout), rt.clone(), workers, 0.2, b)?;
                    Ok((b, m))
                })
                .collect::<Result<Vec<_>, String>>()?;
            let best = tries.iter().copied().max_by(|x, y| x.1.total_cmp(&y.1)).expect("batch sizes listed").0;
            let list: Vec<String> = tries.iter().map(|(b, m)| format!("{b}: {m:.1}")).collect();
            println!("reference batch: {best} packets (0.2 s each, Mpps: {})", list.join(", "));
            best
        }
        None => REFERENCE_BATCHES[0],
    };
    let mut turns: Vec<Turn> = Vec::with_capacity(rounds);
    let mut sw = Some(sw);
    for round in 0..rounds {
        if rounds > 1 {
            println!("round {} of {rounds}", round + 1);
        }
        // The last turn takes the traffic itself; earlier ones a copy.
        let t = if round + 1 == rounds { std::mem::take(&mut traffic) } else { traffic.clone() };
        let (engine, back) =
            replay(sw.take().expect("put back by each turn"), t, port, workers, a.duration, a.max_packets, a.profile)?;
        sw = Some(back);
        let m = match ref_traffic.as_mut() {
            Some(rt) => {
                let rt = if round + 1 == rounds { std::mem::take(rt) } else { rt.clone() };
                let m =
                    replay_reference(move || reference_router(entries, layout), rt, workers, a.duration, ref_batch)?;
                println!("reference: hand-written router, same packet size and route count: {m:.3} Mpps");
                Some(m)
            }
            None => None,
        };
        turns.push((engine, m));
    }
    // (With an even number of turns, the mean of the middle two.)
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let k = v.len() / 2;
        if v.len().is_multiple_of(2) {
            (v[k - 1] + v[k]) / 2.0
        } else {
            v[k]
        }
    };
    let engine = median(turns.iter().map(|t| t.0).collect());
    let reference = has_reference.then(|| median(turns.iter().filter_map(|t| t.1).collect()));
    let ratios: Vec<f64> = turns.iter().filter_map(|t| Some(t.0 / t.1?)).collect();
    let ratio = match reference {
        Some(_) => format!("{:.3}", median(ratios.clone())),
        None => String::from("-"),
    };
    if rounds > 1 {
        let list = |v: &mut dyn Iterator<Item = f64>| v.map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" ");
        println!("turns: engine Mpps {}", list(&mut turns.iter().map(|t| t.0)));
        if reference.is_some() {
            println!("turns: reference Mpps {}", list(&mut turns.iter().filter_map(|t| t.1)));
            println!("turns: ratio {}", list(&mut ratios.iter().copied()));
        }
    }
    println!(
        "result: program={label} size={size} workers={workers} entries={} mode={mode} mpps={engine:.3} reference_mpps={} ratio={ratio}{}",
        if a.program.is_none() { a.entries.to_string() } else { "-".into() },
        reference.map_or(String::from("-"), |r| format!("{r:.3}")),
        if rounds > 1 { format!(" rounds={rounds}") } else { String::new() },
    );
    Ok(())
}

/// Checks that the engine and the reference emit the same frames on the same
/// ports for `traffic`, so that the ratio compares equal work.
fn check_same_output(sw: &mut Switch, r: &mut ReferenceRouter, port: u32, traffic: &[Vec<u8>]) -> Result<(), String> {
    for (i, p) in traffic.iter().enumerate() {
        let mut a = Vec::new();
        sw.process(port, p, &mut |o, d| a.push((o, d.to_vec())));
        let mut b = Vec::new();
        r.process(port, p, &mut |o, d| b.push((o, d.to_vec())));
        if a != b {
            return Err(format!("packet {i}: the engine emitted {a:?} but the reference {b:?}"));
        }
    }
    Ok(())
}

/// Replays `traffic` through reference routers made by `make` (one per
/// worker, each pinned like the engine's workers, `batch` packets per call)
/// for `duration` seconds; returns Mpps.
fn replay_reference(
    make: impl Fn() -> ReferenceRouter + Send + Sync + 'static,
    traffic: Vec<Vec<u8>>,
    workers: usize,
    duration: f64,
    batch: usize,
) -> Result<f64, String> {
    let mut shares: Vec<Vec<Vec<u8>>> = vec![Vec::new(); workers];
    for p in traffic {
        shares[flow_hash(&p) as usize % workers].push(p);
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let make = Arc::new(make);
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(std::sync::Barrier::new(workers + 1));
    let handles: Vec<_> = shares
        .into_iter()
        .enumerate()
        .map(|(k, share)| {
            let (stop, make, ready) = (stop.clone(), make.clone(), ready.clone());
            std::thread::spawn(move || {
                if workers <= cpus {
                    pin_to_cpu(k);
                }
                let mut r = make();
                ready.wait();
                let (mut n, mut sent) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    for batch in share.chunks(batch) {
                        r.process_batch(0, batch, &mut |_, _| sent += 1);
                        n += batch.len() as u64;
                    }
                }
                std::hint::black_box(sent);
                n
            })
        })
        .collect();
    ready.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(duration));
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for h in handles {
        total += h.join().map_err(|_| "reference worker panicked".to_string())?;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64() / 1e6)
}

/// Replays `traffic` through the engine on `workers` workers (flow-hashed
/// shares, as live ports do) and prints per-second and summary lines;
/// returns Mpps and the switch (for the next turn).
fn replay(
    sw: Switch,
    traffic: Vec<Vec<u8>>,
    port: u32,
    workers: usize,
    duration: f64,
    max_packets: Option<u64>,
    profile: bool,
) -> Result<(f64, Switch), String> {
    let mut shares: Vec<Vec<Vec<u8>>> = vec![Vec::new(); workers];
    for p in traffic {
        shares[flow_hash(&p) as usize % workers].push(p);
    }
    if let Some(k) = shares.iter().position(|s| s.is_empty()) {
        return Err(format!("worker {k} gets no traffic: the traffic has too few flows for {workers} workers"));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Vec<Arc<[AtomicU64; 3]>> = (0..workers).map(|_| Arc::new(Default::default())).collect();
    let caches = Arc::new(std::sync::Mutex::new(Vec::new()));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let io: Vec<Box<dyn WorkerIo<Switch>>> = shares
        .into_iter()
        .zip(&counts)
        .enumerate()
        .map(|(k, (t, c))| {
            let cpu = (workers <= cpus).then_some(k);
            // The workers share `--packets` out: each stops after its part.
            let limit = max_packets.map(|m| m / workers as u64 + u64::from((k as u64) < m % workers as u64));
            // Wire size: frame + FCS + preamble/IFG (20 bytes) as network benchmarks count it.
            let wire_before = std::iter::once(0)
                .chain(t.iter().scan(0u64, |sum, p| {
                    *sum += p.len() as u64 + 4 + 20;
                    Some(*sum)
                }))
                .collect();
            Box::new(BenchIo {
                traffic: Frames::new(t),
                wire_before,
                next: 0,
                port,
                stop: stop.clone(),
                counts: c.clone(),
                cpu,
                limit,
                caches: caches.clone(),
                recorded: false,
            }) as Box<_>
        })
        .collect();
    let total = |i: usize| counts.iter().map(|c| c[i].load(Ordering::Relaxed)).sum::<u64>();
    let mut pool = Pool::start(sw, io)?;
    if profile {
        pool.set_profiling(true);
    }
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
    // Asked while the workers still run (they answer between batches).
    let times = profile.then(|| pool.profile());
    stop.store(true, Ordering::Relaxed);
    let dt = start.elapsed().as_secs_f64();
    // Each worker records its lookup caches on its next batch; wait for that (briefly).
    let waited = Instant::now();
    while caches.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|c| c.0.is_empty()).count() < workers
        && waited.elapsed() < Duration::from_secs(2)
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    let sw = pool.finish();
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
    for (table, hits, misses, bypassed) in
        caches.lock().unwrap_or_else(|e| e.into_inner()).iter().filter(|c| !c.0.is_empty())
    {
        println!(
            "lookup cache of {table} (one worker): {hits} hits, {misses} misses ({:.1}% hits), \
             {bypassed} lookups bypassed it while its hit rate was under 1/8",
            100.0 * *hits as f64 / (*hits + *misses).max(1) as f64
        );
    }
    if let Some(p) = times {
        println!("where the time went, per stage (timing on: the rates above include its cost):\n{}", p.report());
    }
    Ok((pkts as f64 / dt / 1e6, sw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spread routes are distinct /24s over the bench's whole range of
    /// route counts (the multiplier is odd, so route numbers below 2^24 map
    /// one to one), and both layouts' traffic goes to installed routes.
    #[test]
    fn spread_routes_are_distinct_and_traffic_hits_them() {
        let mut seen = vec![false; 1 << 24];
        for r in 0..(1u32 << 22) {
            let net = RouteLayout::Spread.network(r);
            assert_eq!(net & 0xff, 0, "route {r} is a /24");
            let slot = &mut seen[(net >> 8) as usize];
            assert!(!*slot, "route {r} repeats {net:#x}");
            *slot = true;
        }
        for layout in [RouteLayout::Spread, RouteLayout::Consecutive] {
            let mut r = reference_router(5000, layout);
            let traffic = router_traffic(2000, 5000, layout);
            let mut sent = 0;
            r.process_batch(0, &traffic, &mut |_, _| sent += 1);
            assert_eq!(sent, traffic.len(), "{layout:?}: every packet has a route");
        }
    }
}
