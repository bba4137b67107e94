//! Packet-processing throughput of whole programs.
//!
//! - `parse`: `Switch::parse` alone (PHV reset + parser + IPv4 checksum
//!   verification) on one 64-byte IPv4/UDP frame, for the router and edge programs.
//! - `router`: `Switch::process` (parse, ingress with lpm + exact tables,
//!   egress, checksum update, deparse) of `examples/router.json` with 10, 10k
//!   and 1M (2^20, the program's `ipv4_lpm` size) /24 routes over 16 next hops.
//! - `edge`: `Switch::process` of `examples/edge.json` with the 8 ternary+range
//!   ACL rules of the conformance corpus (none matches the traffic, so each
//!   packet scans all of them and takes the default `permit`), a miss in the
//!   exact `sources` table, then 1k /24 routes through the crc16 ECMP action
//!   selector (two groups of 4 and 2 members).
//!
//! Traffic is 65536 distinct 64-byte IPv4/UDP frames (60 bytes without FCS) to
//! random installed routes, cycled one packet per iteration; every packet is
//! checked to be forwarded before measuring. Throughput is packets per second
//! (`Throughput::Elements(1)` per packet).
//!
//! - `reference/router`: the hand-written router of `sluice_bench::reference`
//!   (`crates/sluice-bench/src/reference.rs`, the ceiling; see there) on the
//!   same routes and traffic, in batches of 32 (its best size with
//!   consecutive routes; `sluice bench` tries several);
//!   divide `process/router` by it for the ratio (`sluice bench` and
//!   `bench/perf-lab.sh` print the ratio themselves).
//!
//! Routes are consecutive /24s from 10.0.0.0 (`sluice::p4::bench::RouteLayout::Consecutive`).
//!
//! Run: `cargo bench -p sluice --bench pipeline` (add `-- --quick` for a fast pass).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sluice::p4::bench::{router_commands, router_traffic, RouteLayout, ROUTER_JSON};
use sluice_control::cli;
use sluice_engine::{load_switch, Switch};

/// The layout of the built-in routes here.
const LAYOUT: RouteLayout = RouteLayout::Consecutive;

/// The edge example, compiled by p4c.
const EDGE_JSON: &str = include_str!("../../../examples/edge.json");

/// Distinct packets per case (a power of two).
const PACKETS: usize = 1 << 16;

/// Runs command lines, panicking on the first one that fails.
fn apply(sw: &mut Switch, text: &str) {
    for (i, line) in text.lines().enumerate() {
        if let Err(e) = cli::run(sw, line) {
            panic!("command line {}: {e}: {line}", i + 1);
        }
    }
}

/// Processes every packet once and checks that each one is sent out exactly once.
fn check_forwarded(sw: &mut Switch, port: u32, traffic: &[Vec<u8>]) {
    let mut sent = 0usize;
    for p in traffic {
        sw.process(port, p, &mut |_, _| sent += 1);
    }
    assert_eq!(sent, traffic.len(), "not every benchmark packet was forwarded");
}

/// The router with `routes` /24 routes, and traffic to random hosts in them.
fn router(routes: u32) -> (Switch, Vec<Vec<u8>>) {
    let mut sw = load_switch(ROUTER_JSON).expect("router.json loads");
    apply(&mut sw, &router_commands(routes, LAYOUT));
    (sw, router_traffic(PACKETS, routes, LAYOUT))
}

/// ACL rules of the conformance corpus (`sluice_edge/commands.txt`).
const EDGE_ACL: &str = "\
table_add EdgeIngress.acl EdgeIngress.punt 0&&&0 0&&&0 0.0.0.0&&&0.0.0.0 0.0.0.0&&&0.0.0.0 6&&&0xff 0->65535 179->179 => 5
table_add EdgeIngress.acl EdgeIngress.permit 0&&&0 0&&&0 10.66.1.0&&&255.255.255.0 0.0.0.0&&&0.0.0.0 0&&&0 0->65535 0->65535 => 10
table_add EdgeIngress.acl EdgeIngress.drop 0&&&0 0&&&0 10.66.0.0&&&255.255.0.0 0.0.0.0&&&0.0.0.0 0&&&0 0->65535 0->65535 => 20
table_add EdgeIngress.acl EdgeIngress.drop 0&&&0 0&&&0 0.0.0.0&&&0.0.0.0 0.0.0.0&&&0.0.0.0 17&&&0xff 0->65535 5000->5999 => 30
table_add EdgeIngress.acl EdgeIngress.drop 3&&&0x1ff 0&&&0 0.0.0.0&&&0.0.0.0 0.0.0.0&&&0.0.0.0 6&&&0xff 1->1023 0->65535 => 40
table_add EdgeIngress.acl EdgeIngress.drop 0&&&0 0x8100&&&0xffff 0.0.0.0&&&0.0.0.0 10.99.0.0&&&255.255.0.0 0&&&0 0->65535 0->65535 => 50
table_add EdgeIngress.acl EdgeIngress.punt 0&&&0 0&&&0 0.0.0.0&&&0.0.0.0 10.5.5.5&&&255.255.255.255 1&&&0xff 0->65535 0->65535 => 60
table_add EdgeIngress.acl EdgeIngress.permit 0&&&0 0&&&0 10.3.0.22&&&255.255.255.255 0.0.0.0&&&0.0.0.0 6&&&0xff 0->65535 179->179 => 1
table_add EdgeIngress.sources EdgeIngress.police 10.7.0.1 => 0
table_add EdgeIngress.sources EdgeIngress.permit 10.7.0.4 =>
";

/// ECMP members and groups of the conformance corpus: group 0 = ports 1-4, group 1 = ports 3-4.
const EDGE_ECMP: &str = "\
act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop 1 00:5e:00:00:00:01 02:00:00:00:01:01
act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop 2 00:5e:00:00:00:02 02:00:00:00:02:01
act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop 3 00:5e:00:00:00:03 02:00:00:00:03:01
act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop 4 00:5e:00:00:00:04 02:00:00:00:04:01
act_prof_create_group EdgeIngress.ecmp
act_prof_add_member_to_group EdgeIngress.ecmp 0 0
act_prof_add_member_to_group EdgeIngress.ecmp 1 0
act_prof_add_member_to_group EdgeIngress.ecmp 2 0
act_prof_add_member_to_group EdgeIngress.ecmp 3 0
act_prof_create_group EdgeIngress.ecmp
act_prof_add_member_to_group EdgeIngress.ecmp 2 1
act_prof_add_member_to_group EdgeIngress.ecmp 3 1
";

/// Ingress port of edge traffic (not the CPU port 255).
const EDGE_PORT: u32 = 1;

/// The edge program with the corpus ACL and ECMP setup plus `routes` /24 routes over both groups.
fn edge(routes: u32) -> (Switch, Vec<Vec<u8>>) {
    let mut sw = load_switch(EDGE_JSON).expect("edge.json loads");
    apply(&mut sw, EDGE_ACL);
    apply(&mut sw, EDGE_ECMP);
    let mut cmds = String::new();
    for r in 0..routes {
        cmds.push_str(&format!(
            "table_indirect_add_with_group EdgeIngress.routes 10.{}.{}.0/24 => {}\n",
            (r >> 8) & 0xff,
            r & 0xff,
            r % 2
        ));
    }
    apply(&mut sw, &cmds);
    // Same frames as the router's: 192.168.0.1 -> 10.a.b.x, UDP 1024..1279 -> 53.
    (sw, router_traffic(PACKETS, routes, LAYOUT))
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1));
    // Headers parsed: Ethernet + IPv4 (router); Ethernet + IPv4 + L4 ports (edge).
    for (name, json, consumed) in [("router", ROUTER_JSON, 34), ("edge", EDGE_JSON, 38)] {
        let mut sw = load_switch(json).expect("program loads");
        let pkt = router_traffic(1, 10, LAYOUT).remove(0);
        let mut phv = sw.program().layout.new_phv();
        assert_eq!(sw.parse(&mut phv, &pkt), consumed, "{name}: unexpected header bytes parsed");
        g.bench_function(BenchmarkId::new(name, "ipv4_udp_64B"), |b| {
            b.iter(|| {
                phv.reset();
                black_box(sw.parse(&mut phv, black_box(&pkt)))
            })
        });
    }
    g.finish();
}

fn process_router(c: &mut Criterion) {
    let mut g = c.benchmark_group("process/router");
    g.throughput(Throughput::Elements(1));
    for (label, routes) in [("10", 10u32), ("10k", 10_000), ("1M", 1 << 20)] {
        let (mut sw, traffic) = router(routes);
        check_forwarded(&mut sw, 0, &traffic);
        if routes >= 1 << 20 {
            g.sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        } else {
            g.sample_size(50).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        }
        g.bench_function(BenchmarkId::new("routes", label), |b| bench_process(b, &mut sw, 0, &traffic));
    }
    g.finish();
}

fn process_edge(c: &mut Criterion) {
    let mut g = c.benchmark_group("process/edge");
    g.throughput(Throughput::Elements(1));
    g.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    let (mut sw, traffic) = edge(1_000);
    check_forwarded(&mut sw, EDGE_PORT, &traffic);
    g.bench_function("acl8_routes1k_ecmp", |b| bench_process(b, &mut sw, EDGE_PORT, &traffic));
    g.finish();
}

/// One packet per iteration, cycling through the traffic.
fn bench_process(b: &mut criterion::Bencher<'_>, sw: &mut Switch, port: u32, traffic: &[Vec<u8>]) {
    let mut i = 0usize;
    b.iter(|| {
        let p = &traffic[i];
        i = (i + 1) & (PACKETS - 1);
        sw.process(port, black_box(p), &mut |port, bytes| {
            black_box((port, bytes));
        });
    })
}

fn reference_router(c: &mut Criterion) {
    let mut g = c.benchmark_group("reference/router");
    g.throughput(Throughput::Elements(32));
    for (label, routes) in [("10", 10u32), ("10k", 10_000), ("1M", 1 << 20)] {
        let mut r = sluice::p4::bench::reference_router(routes, LAYOUT);
        let traffic = router_traffic(PACKETS, routes, LAYOUT);
        let mut sent = 0usize;
        for batch in traffic.chunks(32) {
            r.process_batch(0, batch, &mut |_, _| sent += 1);
        }
        assert_eq!(sent, traffic.len(), "the reference did not forward every packet");
        g.sample_size(50).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
        let mut i = 0usize;
        g.bench_function(BenchmarkId::new("routes", label), |b| {
            b.iter(|| {
                let batch = &traffic[i..i + 32];
                i = (i + 32) & (PACKETS - 1);
                r.process_batch(0, black_box(batch), &mut |port, bytes| {
                    black_box((port, bytes));
                });
            })
        });
    }
    g.finish();
}

criterion_group!(benches, parse, process_router, reference_router, process_edge);
criterion_main!(benches);
