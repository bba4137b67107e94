//! `sluice bench` for P4 programs: the workloads of the built-in examples
//! (generated configurations and traffic) or of a program file with its
//! commands and a pcap, run by the shared harness (`sluice_bench`: worker
//! replay, per-second lines, turns against the reference, the result line).
//! With no program it runs the built-in router example with a generated
//! route table and generated 64-byte IPv4/UDP traffic. What is specific to
//! the v1model switch stays here: its workloads, the check that the router
//! emits what the hand-written reference emits, and the lookup-cache lines
//! of its tables after each turn.

use std::path::Path;
use std::sync::Arc;

use sluice_bench::ReferenceRun;
use sluice_engine::{ExecMode, Switch};

pub use sluice_bench::ReferenceRouter;

/// The router example, compiled by p4c, embedded so `sluice bench` needs no files.
pub const ROUTER_JSON: &str = include_str!("../../../../examples/router.json");

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

/// An Ethernet/IPv4/UDP frame of `len` bytes (no FCS; the IPv4 packet
/// fills it), TTL 64, a valid header checksum and no UDP checksum.
pub fn ipv4_udp_frame(macs: ([u8; 6], [u8; 6]), addrs: ([u8; 4], [u8; 4]), ports: (u16, u16), len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(42)];
    let len = p.len();
    p[0..6].copy_from_slice(&macs.0);
    p[6..12].copy_from_slice(&macs.1);
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut p[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&addrs.0);
    ip[16..20].copy_from_slice(&addrs.1);
    let c = csum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    p[34..36].copy_from_slice(&ports.0.to_be_bytes());
    p[36..38].copy_from_slice(&ports.1.to_be_bytes());
    p[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    p
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
        let dst = (layout.network(r) | ((x >> 24) | 1)).to_be_bytes();
        let macs = ([0, 0x5e, 0, 0, 0, 0xfe], [2, 0, 0, 0, 0, 1]);
        out.push(ipv4_udp_frame(macs, ([192, 168, 0, 1], dst), (1024 + (x & 0xff) as u16, 53), len));
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
    /// p4c's `psa-unicast-or-drop-corrected-bmv2` from the PSA STF corpus
    /// (read at run time from `$SLUICE_CORPUS/p4c-stf-psa/`): a PSA program
    /// (ingress and egress parsers, controls and deparsers) that sends each
    /// frame to the port its destination MAC names. It has no table to
    /// configure; the traffic goes to `--entries` ports (at most 256).
    PsaUnicast,
    /// p4c's `psa-metadata-bmv2` from the PSA STF corpus: `--entries` (at
    /// most 256) entries of its exact `match_meta` table, keyed by the
    /// destination MAC's last byte, each setting an egress port; traffic
    /// hits them all. The program never clears PSA's `drop`, so every packet
    /// is dropped after ingress, as in bmv2's `psa_switch`.
    PsaMetadata,
}

/// Where [`Example::BasicRouting`] finds the conformance corpus.
fn corpus_dir() -> std::path::PathBuf {
    std::env::var_os("SLUICE_CORPUS").map_or_else(|| "../shared/conformance".into(), Into::into)
}

/// A program of the conformance corpus: `rel` under [`corpus_dir`], named
/// `example` in the error when it cannot be read.
fn corpus_program(example: &str, rel: &str) -> Result<String, String> {
    let path = corpus_dir().join(rel);
    std::fs::read_to_string(&path).map_err(|e| {
        format!("the {example} example reads {} (set SLUICE_CORPUS to the conformance corpus): {e}", path.display())
    })
}

/// The PSA examples' configuration and traffic (see [`Example::PsaUnicast`]
/// and [`Example::PsaMetadata`]): frames of `frame` bytes to `entries`
/// destinations 00:00:00:00:00:01.. (at most 256), in a random order; for
/// psa-metadata, one `match_meta` entry per destination's last byte, to
/// port `byte % 16 + 1`.
fn psa_setup(ex: Example, entries: u32, frame: usize) -> (String, Vec<Vec<u8>>) {
    let dests = entries.clamp(1, 256);
    let mut s = String::new();
    if ex == Example::PsaMetadata {
        for d in 0..dests {
            let last = (d + 1) & 0xff;
            s.push_str(&format!("table_add ingress.match_meta ingress.set_output {last} => {}\n", last % 16 + 1));
        }
    }
    let n = traffic_count(entries, frame);
    let mut x: u32 = 0x1b87_3593;
    let mut traffic = Vec::with_capacity(n);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let d = x % dests + 1;
        let mut p = vec![0u8; frame.max(64) - 4];
        p[0..6].copy_from_slice(&[0, 0, 0, 0, (d >> 8) as u8, d as u8]);
        p[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        p[12..14].copy_from_slice(&[0x88, 0xb5]);
        traffic.push(p);
    }
    (s, traffic)
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
pub const EDGE_JSON: &str = include_str!("../../../../examples/edge.json");
/// The l2_learning example, compiled by p4c.
pub const L2_JSON: &str = include_str!("../../../../examples/l2_learning.json");

/// What one bench run replays: the switch, its traffic and ingress port,
/// and (built-in examples) the hand-written reference router the ratio is
/// taken against, with its own traffic of the same size and table size.
pub type Workload = sluice_bench::Workload<Switch>;

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
pub fn example(
    ex: Example,
    entries: u32,
    frame: usize,
    acl: u32,
    layout: RouteLayout,
    mode: ExecMode,
) -> Result<Workload, String> {
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
            let json = corpus_program("basic-routing", "p4c-bench/basic_routing-bmv2/basic_routing-bmv2.json")?;
            let (c, t) = basic_routing_setup(entries, frame, layout);
            (std::borrow::Cow::Owned(json), c, t, 0, "basic_routing".to_string())
        }
        Example::PsaUnicast | Example::PsaMetadata => {
            let (name, label) = match ex {
                Example::PsaUnicast => ("psa-unicast-or-drop-corrected-bmv2", "psa_unicast"),
                _ => ("psa-metadata-bmv2", "psa_metadata"),
            };
            if entries > 256 {
                return Err(format!(
                    "--entries {entries}: the {} example takes at most 256 (destinations and table keys are one byte)",
                    label.replace('_', "-")
                ));
            }
            let json = corpus_program(&label.replace('_', "-"), &format!("p4c-stf-psa/{name}/{name}.json"))?;
            let (c, t) = psa_setup(ex, entries, frame);
            (std::borrow::Cow::Owned(json), c, t, 0, label.to_string())
        }
    };
    let mut sw = sluice_engine::load_switch(&json).map_err(|e| e.to_string())?;
    sw.set_mode(mode).map_err(|e| e.to_string())?;
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
    if matches!(ex, Example::PsaUnicast | Example::PsaMetadata) {
        // A corpus program: check that it does what the generated
        // configuration says. psa-unicast sends each frame to the port its
        // destination names; psa-metadata drops everything (its action
        // leaves PSA's drop set), its entries loaded above.
        let probe = &traffic[..traffic.len().min(64)];
        let mut right = 0;
        for p in probe {
            let mut out = Vec::new();
            sw.process(port, p, &mut |o, d| out.push((o, d.len())));
            let want = u32::from(p[4]) << 8 | u32::from(p[5]);
            right += usize::from(match ex {
                Example::PsaUnicast => out == [(want, p.len())],
                _ => out.is_empty(),
            });
        }
        if right != probe.len() {
            return Err(format!("{label}: {right} of {} probe packets went where the program sends them", probe.len()));
        }
    }
    let ref_entries = entries.min(1 << 22);
    let ref_traffic = router_traffic_sized(n, ref_entries, frame, layout);
    let mut w = workload(sw, traffic, port, label, Some(entries));
    // The router and its reference must do the same work: same output for every packet.
    if ex == Example::Router {
        let probe = ref_traffic.clone();
        w.check = Some(Box::new(move |sw: &mut Switch| {
            check_same_output(sw, &mut reference_router(ref_entries, layout), port, &probe)
        }));
    }
    w.reference =
        Some(ReferenceRun::new("hand-written router, same packet size and route count", ref_traffic, 0, move || {
            reference_router(ref_entries, layout)
        }));
    Ok(w)
}

/// Builds the switch and traffic for a bench run of a program file.
pub fn setup(program: &Path, commands: Option<&Path>, pcap: Option<&Path>, mode: ExecMode) -> Result<Workload, String> {
    let mut sw = crate::load_with(program, mode)?;
    if let Some(c) = commands {
        crate::apply_commands(&mut sw, c, false)?;
    }
    let pcap = pcap.ok_or("--pcap TRAFFIC.pcap is required with a program")?;
    let pk: Vec<Vec<u8>> = sluice_ports::pcapfile::read_pcap(pcap)?.into_iter().map(|(_, d)| d).collect();
    if pk.is_empty() {
        return Err(format!("{} holds no packets", pcap.display()));
    }
    Ok(workload(sw, pk, 0, program.display().to_string(), None))
}

/// A workload of the switch: its execution mode on the lines (`mode=`),
/// and its lookup caches reported after each turn.
fn workload(sw: Switch, traffic: Vec<Vec<u8>>, port: u32, label: String, entries: Option<u32>) -> Workload {
    let mode = match sw.mode() {
        sluice_engine::ExecMode::Compiled => "compiled",
        sluice_engine::ExecMode::Interpreted => "interpreted",
    };
    let mut w = sluice_bench::Workload::new(sw, traffic, port, label);
    w.mode = mode.into();
    w.entries = entries.map(u64::from);
    w.replica_report = Some(Arc::new(lookup_cache_lines));
    w
}

/// One line per table of one worker's switch that has a lookup cache: its
/// hits, its misses and the lookups that bypassed it.
fn lookup_cache_lines(sw: &Switch) -> Vec<String> {
    sw.program()
        .tables
        .iter()
        .enumerate()
        .filter_map(|(t, p)| {
            let (hits, misses, bypassed) = sw.lookup_cache_stats(t)?;
            Some(format!(
                "lookup cache of {} (one worker): {hits} hits, {misses} misses ({:.1}% hits), \
                 {bypassed} lookups bypassed it while its hit rate was under 1/8",
                p.name,
                100.0 * hits as f64 / (hits + misses).max(1) as f64,
            ))
        })
        .collect()
}

/// What to run: a program file with its commands and pcap, or a built-in example.
pub struct BenchArgs<'a> {
    pub program: Option<&'a Path>,
    /// Compiled to native code, or interpreted (`sluice --interpret`).
    pub mode: ExecMode,
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
    /// Faults injected into the traffic before it is replayed.
    pub faults: Option<sluice_ports::faults::Faults>,
    /// Egress queues per port (`--priority-queues`; 1: none).
    pub priority_queues: usize,
}

/// The traffic `frames` as a port injecting `faults` delivers it, once
/// (the bench then replays that: the same faults every pass), and what
/// was injected. Only received frames' faults apply: link flaps and
/// failed sends belong to live ports.
pub fn inject_faults(
    frames: &[Vec<u8>],
    faults: sluice_ports::faults::Faults,
) -> Result<(Vec<Vec<u8>>, sluice_ports::faults::FaultCounts), String> {
    use sluice_ports::faults::FaultyPort;
    use sluice_ports::memory::MemoryPort;
    use sluice_ports::{Port, RxBatch};
    if faults.flap.is_some() || faults.send_fail > 0.0 {
        return Err("--inject-faults: flap and send-fail act on live ports; the bench's traffic takes drop, dup, \
                    reorder, truncate and corrupt"
            .into());
    }
    let mut mem = MemoryPort::new("traffic");
    let largest = frames.iter().map(Vec::len).max().unwrap_or(0);
    for f in frames {
        mem.push(f);
    }
    let mut port = FaultyPort::new(mem, faults, largest.max(64));
    let mut batch = RxBatch::new(largest.max(64));
    let mut out = Vec::with_capacity(frames.len());
    while !port.finished() {
        let n = port.recv(&mut batch).map_err(|e| format!("--inject-faults: {e}"))?;
        out.extend((0..n).map(|i| batch.frame(i).0.to_vec()));
    }
    if out.is_empty() {
        return Err("--inject-faults: every frame of the traffic was dropped".into());
    }
    Ok((out, port.stats().faults))
}

/// Runs the benchmark (see `sluice_bench`): per-second and summary lines,
/// then the hand-written reference router for as long and the ratio; with
/// `rounds` above one the two take that many turns and the result line
/// gives the turns' medians.
pub fn run(a: &BenchArgs<'_>) -> Result<(), String> {
    let mut w = match a.program {
        None => example(a.example, a.entries, a.frame, a.acl, a.layout, a.mode)?,
        Some(p) => setup(p, a.commands, a.pcap, a.mode)?,
    };
    if a.no_reference {
        w.reference = None;
    }
    if a.priority_queues > 1 {
        // Every packet through the egress queues (no rate: none waits).
        w.data_plane.set_priority_queues(a.priority_queues);
    }
    if let Some(f) = a.faults {
        let (traffic, counts) = inject_faults(&w.traffic, f)?;
        w.traffic = traffic;
        let mut all = counts;
        for (_, t) in &mut w.more_traffic {
            let (faulty, c) = inject_faults(t, f)?;
            *t = faulty;
            all = all.plus(&c);
        }
        // The reference and the output check were set up for the traffic as made.
        (w.reference, w.check) = (None, None);
        eprintln!("sluice bench: traffic {all} (replayed as such; no reference run)");
    }
    let options = sluice_bench::Options {
        duration: a.duration,
        max_packets: a.max_packets,
        workers: a.workers,
        rounds: a.rounds,
        profile: a.profile,
        ..Default::default()
    };
    sluice_bench::run(w, &options).map(|_| ())
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
