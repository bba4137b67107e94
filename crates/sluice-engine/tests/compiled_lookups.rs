//! Table lookups that the compiled code does inline (DIR-24-8 for the
//! router's IPv4 routes, direct arrays for its next hops) and the
//! one-function forwarding path, checked against the interpreter on plain
//! per-length maps, through route adds and deletes between batches.
//!
//! The corpus differential (`robustness.rs`) configures a few entries per
//! table, too few for a DIR-24-8 (built from 64 routes on): this test loads
//! thousands, with prefixes of every length (extension groups included) and
//! destinations drawn inside and outside them. The edge example adds the
//! action selector behind an inline lookup and the merged ACL tuples.

use sluice_control::cli;
use sluice_engine::{ExecMode, Switch};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn router() -> Switch {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.json")).unwrap();
    sluice_engine::load_switch(&text).unwrap()
}

fn ip(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

/// An IPv4 packet to `dst` with a correct header checksum (or a broken one).
fn packet(dst: u32, ttl: u8, good_checksum: bool) -> Vec<u8> {
    packet_of(dst, ttl, good_checksum, 18)
}

/// [`packet`] with `payload` bytes after the IPv4 header.
fn packet_of(dst: u32, ttl: u8, good_checksum: bool, payload: usize) -> Vec<u8> {
    let mut p = vec![0u8; 14 + 20 + payload];
    p[0..6].copy_from_slice(&[0, 0, 0, 0, 0, 9]);
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let ipv4 = &mut p[14..34];
    ipv4[0] = 0x45;
    ipv4[2..4].copy_from_slice(&((20 + payload) as u16).to_be_bytes());
    ipv4[8] = ttl;
    ipv4[9] = 17;
    ipv4[12..16].copy_from_slice(&[192, 168, 7, 1]);
    ipv4[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = sluice_hash::Algorithm::from_name("csum16").unwrap().compute(ipv4) as u16;
    let c = if good_checksum { c } else { c ^ 0x0101 };
    ipv4[10..12].copy_from_slice(&c.to_be_bytes());
    for (i, b) in p[34..].iter_mut().enumerate() {
        *b = i as u8;
    }
    p
}

/// The router with one route, `prefix`, to next hop 1 (port 2), and its
/// interpreted twin.
fn one_route_router(prefix: &str) -> (Switch, Switch) {
    let mut compiled = router();
    cli::run(
        &mut compiled,
        "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:01:01 00:00:00:00:02:02",
    )
    .unwrap();
    cli::run(&mut compiled, &format!("table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop {prefix} => 1"))
        .unwrap();
    let twin = compiled.scratch().unwrap();
    (compiled, twin)
}

/// The handle in `table_add`'s answer.
fn handle(answer: &str) -> u32 {
    answer.rsplit(' ').next().and_then(|h| h.parse().ok()).unwrap_or_else(|| panic!("no handle in {answer:?}"))
}

/// Feeds `batch` to the compiled switch as one batch and to its interpreted
/// twin packet by packet; both must emit the same packets, which are returned.
fn same_output(
    compiled: &mut Switch,
    twin: &mut Switch,
    port: u32,
    batch: &[Vec<u8>],
    now: u64,
    round: u64,
) -> Vec<(u32, Vec<u8>)> {
    let mut a = Vec::new();
    let frames: Vec<&[u8]> = batch.iter().map(|b| b.as_slice()).collect();
    compiled.process_batch_at(port, &frames, now, &mut |_, o, d: &[u8]| a.push((o, d.to_vec())));
    let mut b = Vec::new();
    for p in batch {
        twin.process_at(port, p, now, &mut |o, d| b.push((o, d.to_vec())));
    }
    assert_eq!(a, b, "round {round}: compiled and interpreted switches emitted different packets");
    a
}

/// IPv4 header checksums at the edges of one's complement folding: header
/// words summing to a multiple of 0xffff (folded sum 0xffff, checksum
/// 0x0000, and its other form 0xffff that verification must reject), sums
/// with many carries, and random ones; verified by the compiled parser and
/// updated after the TTL decrement by the compiled forwarding function, both
/// against the interpreter.
#[test]
fn checksums_at_the_folding_edges_agree_with_the_interpreter() {
    let (mut compiled, mut twin) = one_route_router("0.0.0.0/0");
    let mut r = Rng(0xc5c5_0001);
    let word = |h: &[u8], i: usize| u32::from(u16::from_be_bytes([h[2 * i], h[2 * i + 1]]));
    let mut batch = Vec::new();
    for n in 0..4000u32 {
        let mut p = packet(r.next() as u32, 2 + r.below(254) as u8, true);
        let ip = &mut p[14..34];
        ip[1] = r.next() as u8;
        ip[4..8].copy_from_slice(&(r.next() as u32).to_be_bytes());
        ip[12..16].copy_from_slice(&if n % 3 == 0 { [0xff; 4] } else { (r.next() as u32).to_be_bytes() });
        // The other words' sum, with the identification word chosen so that
        // every other packet's total is a multiple of 0xffff.
        let rest: u32 = (0..10).filter(|i| *i != 2 && *i != 5).map(|i| word(ip, i)).sum();
        if n % 2 == 0 {
            ip[4..6].copy_from_slice(&(((0xffff - rest % 0xffff) % 0xffff) as u16).to_be_bytes());
        }
        let c = sluice_hash::Algorithm::from_name("csum16").unwrap().compute(&{
            let mut h = ip.to_vec();
            h[10..12].copy_from_slice(&[0, 0]);
            h
        }) as u16;
        // Packets 2, 6, 10... (sum a multiple of 0xffff) carry 0xffff for
        // their checksum 0: the other zero of one's complement, not equal.
        let stored = match n % 4 {
            0 | 1 => c,
            2 => !c,
            _ => c ^ (r.below(2) as u16 * 0x0101),
        };
        ip[10..12].copy_from_slice(&stored.to_be_bytes());
        batch.push(p);
    }
    let mut forwarded = 0;
    for (round, chunk) in batch.chunks(64).enumerate() {
        forwarded += same_output(&mut compiled, &mut twin, 1, chunk, 1000 * round as u64, round as u64).len();
    }
    // Half the packets (good checksums) and about half of a quarter more are forwarded.
    assert!((2300..2700).contains(&forwarded), "{forwarded} of 4000 forwarded");
}

/// The batch function copies each forwarded packet's payload (the bytes
/// behind the parsed headers) with pieces whose sizes depend on the length:
/// 8-, 4-, 2- or 1-byte pairs below 16 bytes, a 16-byte pair up to 32,
/// 32-byte steps above. Every payload length from 0 to 300 bytes, in one
/// batch and in shuffled batches, must come out byte for byte as the
/// interpreter emits it, and as the input with only the rewritten header
/// bytes changed.
#[test]
fn payloads_of_every_length_are_copied_whole() {
    let (mut compiled, mut twin) = one_route_router("10.0.0.0/8");
    let batch: Vec<Vec<u8>> = (0..=300usize)
        .map(|n| {
            let mut p = packet(0x0a01_0203, 64, true);
            p.truncate(34);
            p.extend((0..n).map(|i| (i * 7 + n) as u8));
            p
        })
        .collect();
    let out = same_output(&mut compiled, &mut twin, 1, &batch, 0, 0);
    assert_eq!(out.len(), batch.len(), "every packet is forwarded");
    for ((port, o), p) in out.iter().zip(&batch) {
        assert_eq!(*port, 2);
        assert_eq!(o.len(), p.len(), "payload of {} bytes", p.len() - 34);
        assert_eq!(o[34..], p[34..], "payload of {} bytes", p.len() - 34);
        assert_eq!(o[12..22], p[12..22], "header bytes before the TTL");
    }
    let mut r = Rng(0x9a71_0ad5);
    let mut shuffled = batch.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, r.below(i as u64 + 1) as usize);
    }
    for (round, chunk) in shuffled.chunks(37).enumerate() {
        same_output(&mut compiled, &mut twin, 1, chunk, 1000, round as u64 + 1);
    }
}

/// An IPv6 packet of `len` bytes to `dst` (hop limit 64).
fn packet6(dst: u128, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; len.max(54)];
    p[..6].copy_from_slice(&[0, 0, 0, 0, 0, 1]);
    p[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 9]);
    p[12..14].copy_from_slice(&[0x86, 0xdd]);
    p[14] = 0x60;
    p[18..20].copy_from_slice(&((len.max(54) - 54) as u16).to_be_bytes());
    p[20] = 17;
    p[21] = 64;
    p[38..54].copy_from_slice(&dst.to_be_bytes());
    for (i, b) in p[54..].iter_mut().enumerate() {
        *b = i as u8 ^ 0x5a;
    }
    p
}

/// The batch function parses headers into each packet's output area and
/// deparses there: the router's IPv6 header, behind the (invalid) IPv4
/// one in the header layout, moves down behind Ethernet when emitted. The
/// IPv6 route lookup (a 128-bit key) runs in engine code, which must read
/// the destination where the batch function keeps it. In one batch, IPv4
/// and IPv6 packets of several lengths, route hits and misses, and packets
/// too short for their headers, in mixed orders, come out as the
/// interpreter emits them, each forwarded IPv6 packet with its destination
/// behind Ethernet.
#[test]
fn headers_deparsed_in_place_agree_with_the_interpreter() {
    let (mut compiled, mut twin) = one_route_router("10.0.0.0/8");
    for sw in [&mut compiled, &mut twin] {
        cli::run(
            sw,
            "table_add RouterIngress.nexthop RouterIngress.forward 3 => 3 00:00:00:00:03:03 00:00:00:00:04:04",
        )
        .unwrap();
        cli::run(sw, "table_add RouterIngress.ipv6_lpm RouterIngress.set_nexthop 2001:db8::/32 => 3").unwrap();
    }
    let dst6 = 0x2001_0db8_0000_0000_0000_0000_0000_0042u128;
    let mut r = Rng(0x1b6d_e9a5);
    let mut forwarded6 = 0;
    for round in 0..20 {
        let batch: Vec<Vec<u8>> = (0..48)
            .map(|_| match r.below(5) {
                0 => packet(0x0a00_0000 | r.below(1 << 24) as u32, 64, true),
                1 => packet(0xc0a8_0000 | r.below(1 << 16) as u32, 64, true),
                2 => packet6(dst6, 54 + r.below(100) as usize),
                3 => packet6(0xfe80 << 112, 60),
                _ => {
                    let mut p = packet6(dst6, 80);
                    p.truncate(20 + r.below(40) as usize);
                    p
                }
            })
            .collect();
        let out = same_output(&mut compiled, &mut twin, 1, &batch, 100 * round, round);
        for (port, o) in &out {
            if o[12..14] == [0x86, 0xdd] {
                assert_eq!(*port, 3);
                assert_eq!(o[21], 63, "hop limit decremented");
                assert_eq!(o[38..54], dst6.to_be_bytes(), "the IPv6 header behind Ethernet");
                forwarded6 += 1;
            }
        }
    }
    assert!(forwarded6 > 50, "{forwarded6} IPv6 packets forwarded: the comparison says little");
}

/// Between packets of a batch, the compiled setup zeroes only the PHV slots
/// that generated code writes; a field that engine code wrote must still
/// read zero for the next packet. Here `set_nexthop` runs out of line (a
/// `log_msg` keeps it from being inlined), so only the engine writes
/// `meta.nexthop`: a packet whose route lookup misses must then find next
/// hop 0 (no entry: dropped), not the id the packet before it set.
#[test]
fn fields_written_by_engine_code_read_zero_for_the_next_packet() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut changed = 0;
    for a in v["actions"].as_array_mut().unwrap() {
        if a["name"] == "RouterIngress.set_nexthop" {
            let log = serde_json::json!({"op": "log_msg", "parameters": [{"type": "string", "value": "out of line"}]});
            a["primitives"].as_array_mut().unwrap().push(log);
            changed += 1;
        }
    }
    assert_eq!(changed, 2, "the IPv4 and IPv6 set_nexthop actions");
    let mut compiled = sluice_engine::load_switch(&v.to_string()).unwrap();
    cli::run(&mut compiled, "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1").unwrap();
    cli::run(
        &mut compiled,
        "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:01:01 00:00:00:00:02:02",
    )
    .unwrap();
    let mut twin = compiled.scratch().unwrap();
    let batch: Vec<Vec<u8>> =
        (0..8u32).map(|i| packet(if i % 2 == 0 { 0x0a01_0203 } else { 0xc000_0201 }, 64, true)).collect();
    let out = same_output(&mut compiled, &mut twin, 1, &batch, 1000, 0);
    assert_eq!(out.len(), 4, "only the packets to 10.1.2.3 are forwarded");
}

/// Batches from alternating ports, longer than one chunk of the batch
/// function: each packet counts on its own ingress port (the per-packet
/// setup writes the port only in a call's first, full setup, relying on it
/// staying put for the rest of the call), as the interpreter counts them.
#[test]
fn batches_from_different_ports_count_each_packet_on_its_port() {
    let mut compiled = router();
    cli::run(&mut compiled, "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1").unwrap();
    cli::run(
        &mut compiled,
        "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 00:00:00:00:01:01 00:00:00:00:02:02",
    )
    .unwrap();
    let mut twin = compiled.scratch().unwrap();
    let batch = |n: u32| -> Vec<Vec<u8>> { (0..n).map(|i| packet(0x0a00_0000 | i, 64, true)).collect() };
    for (round, (port, n)) in [(1u32, 300u32), (2, 150), (1, 50), (3, 129)].into_iter().enumerate() {
        let out = same_output(&mut compiled, &mut twin, port, &batch(n), 1000 + round as u64, round as u64);
        assert_eq!(out.len(), n as usize, "every packet is routed");
    }
    for (port, want) in [(1u32, 350u64), (2, 150), (3, 129), (0, 0)] {
        for sw in [&mut compiled, &mut twin] {
            let got = cli::run(sw, &format!("counter_read RouterIngress.port_rx {port}")).unwrap();
            assert!(got.ends_with(&format!(" {want} packets)")), "port {port}: {got}");
        }
    }
}

#[test]
fn inline_lookups_agree_with_the_interpreter_through_route_changes() {
    agree_through_route_changes(3000);
}

/// From 262 144 routes on, batches take the big-table path: each packet's
/// key is read while the batch is listed and its slot prefetched, then the
/// batch runs.
#[test]
fn big_route_tables_with_prefetching_agree_with_the_interpreter() {
    agree_through_route_changes(270_000);
}

/// The router with `count` routes and 300 next hops, fed batches through the
/// compiled switch and packet by packet through its interpreted twin, with
/// route deletes and adds and next-hop changes, deletes and adds between
/// batches: both must emit the same packets.
fn agree_through_route_changes(count: usize) {
    let mut compiled = router();
    assert_eq!(compiled.mode(), ExecMode::Compiled);
    assert!(compiled.compiled().is_some_and(|c| c.has_forward()), "the router has a forwarding function");
    let mut r = Rng(0x5eed_1234_abcd_0001);
    let mut nexthops = Vec::new();
    for nh in 0..300u32 {
        let line = format!(
            "table_add RouterIngress.nexthop RouterIngress.forward {nh} => {} 0a:{:02x}:00:00:01:{:02x} 00:00:00:00:02:{:02x}",
            nh % 7 + 1,
            (nh * 3) % 256,
            nh % 256,
            (nh * 7) % 256
        );
        let h = handle(&cli::run(&mut compiled, &line).unwrap());
        nexthops.push((nh, h, h));
    }
    // Routes of every length; a share longer than 24 bits fills extension groups.
    // Each route keeps its handle in both switches: `(net, len, compiled, interpreted)`.
    let mut routes: Vec<(u32, u32, u32, u32)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    while routes.len() < count {
        let len = match r.below(4) {
            0 => 1 + r.below(32) as u32,
            1 => 25 + r.below(8) as u32,
            _ => 16 + r.below(9) as u32,
        };
        let net = (r.next() as u32) & (u32::MAX << (32 - len));
        if !seen.insert((net, len)) {
            continue;
        }
        // Next hops 300.. have no entry: those packets miss the second table.
        let nh = r.below(320);
        let line = format!("table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop {}/{len} => {nh}", ip(net));
        let h = handle(&cli::run(&mut compiled, &line).unwrap());
        routes.push((net, len, h, h));
    }
    let mut twin = compiled.scratch().unwrap();
    assert_eq!(twin.mode(), ExecMode::Interpreted);

    let mut emitted = 0usize;
    let mut now = 0u64;
    for round in 0..40 {
        // Batches shorter than the switch's chunk, and (200) one that
        // runs as two chunks, listed and prefetched each in turn.
        let batch: Vec<Vec<u8>> = (0..[64, 200, 7][round as usize % 3])
            .map(|_| {
                let dst = if r.below(5) == 0 {
                    r.next() as u32
                } else {
                    let (net, len, _, _) = routes[r.below(routes.len() as u64) as usize];
                    let host = if len == 32 { 0 } else { (r.next() as u32) & (u32::MAX >> len) };
                    net | host
                };
                // Some long ones: the output areas are sized by the longest.
                let payload = if r.below(8) == 0 { 1400 } else { 18 };
                let mut p = packet_of(dst, [64, 1, 2][r.below(3) as usize], r.below(20) != 0, payload);
                // Some too short for an IPv4 header, or for the work
                // ahead's read of the destination (both dropped).
                if r.below(16) == 0 {
                    p.truncate(r.below(34) as usize);
                }
                p
            })
            .collect();
        now += 1000;
        let port = r.below(4) as u32;
        emitted += same_output(&mut compiled, &mut twin, port, &batch, now, round).len();
        // Control-plane changes between batches: change the action of some
        // routes and next hops (generated code reads their new record
        // where the old one was), delete some routes, add others.
        for _ in 0..10 {
            let (_, _, hc, ht) = routes[r.below(routes.len() as u64) as usize];
            let action = match r.below(3) {
                0 => "RouterIngress.drop".to_string(),
                _ => format!("RouterIngress.set_nexthop {}", r.below(320)),
            };
            let (name, data) = action.split_once(' ').unwrap_or((&action, ""));
            cli::run(&mut compiled, &format!("table_modify RouterIngress.ipv4_lpm {name} {hc} {data}")).unwrap();
            cli::run(&mut twin, &format!("table_modify RouterIngress.ipv4_lpm {name} {ht} {data}")).unwrap();
            let (_, hc, ht) = nexthops[r.below(nexthops.len() as u64) as usize];
            if hc == u32::MAX {
                continue; // deleted this round
            }
            let data = format!(
                "{} 0c:{:02x}:00:00:03:{:02x} 00:00:00:00:04:{:02x}",
                r.below(8),
                r.below(256),
                r.below(256),
                r.below(256)
            );
            cli::run(&mut compiled, &format!("table_modify RouterIngress.nexthop RouterIngress.forward {hc} {data}"))
                .unwrap();
            cli::run(&mut twin, &format!("table_modify RouterIngress.nexthop RouterIngress.forward {ht} {data}"))
                .unwrap();
        }
        // A next hop deleted (its packets miss the table until it is back),
        // and the one deleted the round before added back with new data.
        if round % 2 == 0 {
            let (nh, hc, ht) = nexthops[round as usize];
            cli::run(&mut compiled, &format!("table_delete RouterIngress.nexthop {hc}")).unwrap();
            cli::run(&mut twin, &format!("table_delete RouterIngress.nexthop {ht}")).unwrap();
            nexthops[round as usize] = (nh, u32::MAX, u32::MAX);
        } else {
            let (nh, _, _) = nexthops[round as usize - 1];
            let line = format!(
                "table_add RouterIngress.nexthop RouterIngress.forward {nh} => {} 00:00:00:00:05:{:02x} 00:00:00:00:06:01",
                r.below(8),
                r.below(256)
            );
            let hc = handle(&cli::run(&mut compiled, &line).unwrap());
            let ht = handle(&cli::run(&mut twin, &line).unwrap());
            nexthops[round as usize - 1] = (nh, hc, ht);
        }
        for _ in 0..50 {
            let i = r.below(routes.len() as u64) as usize;
            let (net, len, hc, ht) = routes.swap_remove(i);
            seen.remove(&(net, len));
            cli::run(&mut compiled, &format!("table_delete RouterIngress.ipv4_lpm {hc}")).unwrap();
            cli::run(&mut twin, &format!("table_delete RouterIngress.ipv4_lpm {ht}")).unwrap();
            let len = 8 + r.below(25) as u32;
            let net = (r.next() as u32) & (u32::MAX << (32 - len));
            if !seen.insert((net, len)) {
                continue;
            }
            let line = format!(
                "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop {}/{len} => {}",
                ip(net),
                r.below(320)
            );
            let hc = handle(&cli::run(&mut compiled, &line).unwrap());
            let ht = handle(&cli::run(&mut twin, &line).unwrap());
            routes.push((net, len, hc, ht));
        }
    }
    // Most packets are forwarded (the rest miss a table, have TTL 1 or a bad checksum).
    assert!(emitted > 40 * 64 / 3, "only {emitted} packets were forwarded: the comparison says little");
    let report = compiled.stage_report();
    assert!(report.contains("DIR-24-8"), "the routes table should have its direct index:\n{report}");
}

/// A TCP or UDP packet from `src` to `dst` on the edge example's ports.
fn l4_packet(src: u32, dst: u32, proto: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![0u8; 14 + 20 + 8 + 22];
    p[0..6].copy_from_slice(&[0, 0, 0, 0, 0, 9]);
    p[6..12].copy_from_slice(&[0, 0, 0, 0, 0, 1]);
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let ipv4 = &mut p[14..34];
    ipv4[0] = 0x45;
    ipv4[2..4].copy_from_slice(&50u16.to_be_bytes());
    ipv4[8] = 64;
    ipv4[9] = proto;
    ipv4[12..16].copy_from_slice(&src.to_be_bytes());
    ipv4[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = sluice_hash::Algorithm::from_name("csum16").unwrap().compute(ipv4) as u16;
    ipv4[10..12].copy_from_slice(&c.to_be_bytes());
    p[34..36].copy_from_slice(&sport.to_be_bytes());
    p[36..38].copy_from_slice(&dport.to_be_bytes());
    p
}

/// Network of the edge example's route `r`: 10.0.0.0/24 onwards, one /24 each.
fn route_network(r: u32) -> u32 {
    (10 << 24) + (r << 8)
}

/// The edge example's setup: `rules` ACL rules in five kinds (source /24s
/// denied, TCP to single hosts denied, TCP to port ranges from 10.a.b.0/24
/// permitted, UDP to single ports denied, IPv6 denied), two selector groups
/// over four next hops, `routes` /24 routes alternating between the groups,
/// and the policer on the traffic's one unnamed source.
fn edge_setup(rules: u32, routes: u32) -> String {
    let mut s = String::new();
    for i in 0..rules {
        let (a, b) = ((i >> 8) & 0xff, i & 0xff);
        let any = "0.0.0.0&&&0.0.0.0";
        let (src, dst, proto, dports, act) = match i % 5 {
            0 => (format!("172.{a}.{b}.0&&&255.255.255.0"), any.to_string(), "0&&&0", "0->65535".to_string(), "drop"),
            1 => (any.to_string(), format!("172.16.{b}.{a}&&&255.255.255.255"), "6&&&0xff", "0->65535".into(), "drop"),
            2 => (
                format!("10.{a}.{b}.0&&&255.255.255.0"),
                any.into(),
                "6&&&0xff",
                format!("{}->{}", 1000 + b, 2000 + b),
                "permit",
            ),
            3 => (any.into(), any.into(), "17&&&0xff", format!("{0}->{0}", 5000 + i), "drop"),
            _ => (any.into(), format!("198.{a}.{b}.0&&&255.255.255.0"), "0&&&0", "0->65535".into(), "drop"),
        };
        let ether = if i % 5 == 4 { "0x86dd&&&0xffff" } else { "0&&&0" };
        s += &format!(
            "table_add EdgeIngress.acl EdgeIngress.{act} 0&&&0 {ether} {src} {dst} {proto} 0->65535 {dports} => {}\n",
            100 + i
        );
    }
    for p in 1..=4 {
        s += &format!("act_prof_create_member EdgeIngress.ecmp EdgeIngress.set_nexthop {p} 00:5e:00:00:00:0{p} 02:00:00:00:0{p}:01\n");
    }
    s += "act_prof_create_group EdgeIngress.ecmp\nact_prof_create_group EdgeIngress.ecmp\n";
    for (member, group) in [(0, 0), (1, 0), (2, 0), (3, 0), (2, 1), (3, 1)] {
        s += &format!("act_prof_add_member_to_group EdgeIngress.ecmp {member} {group}\n");
    }
    for r in 0..routes {
        s += &format!("table_indirect_add_with_group EdgeIngress.routes {}/24 => {}\n", ip(route_network(r)), r % 2);
    }
    s += "table_add EdgeIngress.sources EdgeIngress.police 192.168.0.1 => 0\n";
    s += "meter_set_rates EdgeIngress.policer 0 1000000:1000000 2000000:2000000\n";
    s
}

/// The edge example with 1000 ACL rules (several masks, merged into fewer
/// tuples) and 3000 routes to two action-selector groups, which
/// the compiled code looks up inline (DIR-24-8) and hands to the selector
/// helper with the hit's record. Traffic hits and misses ACL rules and
/// routes; between batches, group members and routes change. Compiled and
/// interpreted switches must emit the same packets.
#[test]
fn edge_acl_and_selector_routes_agree_with_the_interpreter() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/edge.json")).unwrap();
    let mut compiled = sluice_engine::load_switch(&text).unwrap();
    assert_eq!(compiled.mode(), ExecMode::Compiled);
    for line in edge_setup(1000, 3000).lines() {
        cli::run(&mut compiled, line).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    let mut twin = compiled.scratch().unwrap();
    assert_eq!(twin.mode(), ExecMode::Interpreted);
    let report = compiled.stage_report();
    assert!(report.contains("DIR-24-8"), "the routes table should have its direct index:\n{report}");
    let mut r = Rng(0x0edc_e5ee_d000_0001);
    let mut seen = [0usize; 2];
    for round in 0..30 {
        let batch: Vec<Vec<u8>> = (0..64)
            .map(|_| {
                let (a, b) = (r.below(4) as u32, r.below(256) as u32);
                // Sources the ACL denies (172.a.b.0/24), permits with a port
                // range (10.a.b.0/24), or does not name (the policed 192.168.0.1).
                let src = [0xac00_0000 | a << 16 | b << 8 | 5, 0x0a00_0000 | a << 16 | b << 8 | 7, 0xc0a8_0001]
                    [r.below(3) as usize];
                // Destinations: a route (10.0.0.0 + r * 256), a /32 the ACL
                // denies for TCP (172.16.b.a), or nowhere.
                let dst = match r.below(4) {
                    0 => 0xac10_0000 | b << 8 | a,
                    1 => r.next() as u32,
                    _ => route_network(r.below(3200) as u32) | (r.below(256) as u32),
                };
                let proto = [6u8, 17][r.below(2) as usize];
                let dport = [1000 + b as u16 + r.below(1200) as u16, 5000 + r.below(1000) as u16][r.below(2) as usize];
                l4_packet(src, dst, proto, r.below(65536) as u16, dport)
            })
            .collect();
        let a = same_output(&mut compiled, &mut twin, 1, &batch, 1000 * round, round);
        seen[0] += a.len();
        seen[1] += a.iter().filter(|(o, _)| *o == 3 || *o == 4).count();
        // Group 0 loses or regains member 1 (port 2), so the selector's choice moves.
        let change = if round % 2 == 0 {
            "act_prof_remove_member_from_group EdgeIngress.ecmp 1 0"
        } else {
            "act_prof_add_member_to_group EdgeIngress.ecmp 1 0"
        };
        cli::run(&mut compiled, change).unwrap();
        cli::run(&mut twin, change).unwrap();
        let line = format!(
            "table_indirect_add_with_group EdgeIngress.routes {}/24 => 1",
            ip(route_network(3000 + round as u32))
        );
        cli::run(&mut compiled, &line).unwrap();
        cli::run(&mut twin, &line).unwrap();
    }
    // Some packets are forwarded, some of them through both groups' shared ports.
    assert!(seen[0] > 30 * 64 / 5 && seen[1] > 0, "forwarded {seen:?}: the comparison says little");
}

/// The l2_learning example with 3000 learned hosts: its `learned` table
/// (48+9-bit exact key) is probed inline in open addressing, and its
/// `forwarding` table, which has a direct counter, counts its hits in the
/// helper and runs `forward` in generated code. Hosts leave and come back
/// between batches (deletes shift probe runs back, inserts grow the map).
/// Compiled and interpreted switches must emit the same packets and count
/// the same hits per entry.
#[test]
fn l2_open_addressing_and_direct_counters_agree_with_the_interpreter() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/l2_learning.json")).unwrap();
    let mut compiled = sluice_engine::load_switch(&text).unwrap();
    assert_eq!(compiled.mode(), ExecMode::Compiled);
    let mac = |i: u64| {
        let b = (0x0200_0000_0000u64 | (i * 0x0101)).to_be_bytes();
        format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[2], b[3], b[4], b[5], b[6], b[7])
    };
    let hosts = 3000u64;
    // `(learned handle, forwarding handle)` per host, the same in both switches.
    let mut handles = Vec::new();
    for i in 0..hosts {
        let l = handle(
            &cli::run(&mut compiled, &format!("table_add L2Ingress.learned L2Ingress.known {} 1 =>", mac(i))).unwrap(),
        );
        let f = handle(
            &cli::run(
                &mut compiled,
                &format!("table_add L2Ingress.forwarding L2Ingress.forward {} => {}", mac(i), i % 4 + 2),
            )
            .unwrap(),
        );
        handles.push(Some((l, f)));
    }
    let mut twin = compiled.scratch().unwrap();
    let report = compiled.stage_report();
    assert!(report.contains("exact: open addressing"), "{report}");
    let mut r = Rng(0x12_0000_beef);
    let mut forwarded = 0;
    for round in 0..30 {
        let batch: Vec<Vec<u8>> = (0..64)
            .map(|_| {
                // Hosts past `hosts` are unknown: learned misses (digest), forwarding floods.
                let (src, dst) = (r.below(hosts + 200), r.below(hosts + 200));
                let mut p = vec![0u8; 60];
                let parse =
                    |m: String| -> Vec<u8> { m.split(':').map(|x| u8::from_str_radix(x, 16).unwrap()).collect() };
                p[0..6].copy_from_slice(&parse(mac(dst)));
                p[6..12].copy_from_slice(&parse(mac(src)));
                p[12..14].copy_from_slice(&[0x88, 0xb5]);
                p
            })
            .collect();
        // Arriving on one of the forwarding ports, a packet to a host behind
        // it is dropped by egress (`egress_port == ingress_port`, a
        // comparison of two fields that generated code evaluates).
        let port = 2 + (round % 4) as u32;
        let a = same_output(&mut compiled, &mut twin, port, &batch, 1000 * round, round);
        forwarded += a.len();
        // A few hosts leave, a few come back.
        for _ in 0..40 {
            let i = r.below(hosts) as usize;
            match handles[i] {
                Some((l, f)) => {
                    for sw in [&mut compiled, &mut twin] {
                        cli::run(sw, &format!("table_delete L2Ingress.learned {l}")).unwrap();
                        cli::run(sw, &format!("table_delete L2Ingress.forwarding {f}")).unwrap();
                    }
                    handles[i] = None;
                }
                None => {
                    let add_l = format!("table_add L2Ingress.learned L2Ingress.known {} 1 =>", mac(i as u64));
                    let add_f = format!("table_add L2Ingress.forwarding L2Ingress.forward {} => 3", mac(i as u64));
                    let (l, f) = (
                        handle(&cli::run(&mut compiled, &add_l).unwrap()),
                        handle(&cli::run(&mut compiled, &add_f).unwrap()),
                    );
                    assert_eq!(l, handle(&cli::run(&mut twin, &add_l).unwrap()));
                    assert_eq!(f, handle(&cli::run(&mut twin, &add_f).unwrap()));
                    handles[i] = Some((l, f));
                }
            }
        }
    }
    assert!(forwarded > 30 * 64 / 2, "only {forwarded} packets out: the comparison says little");
    // Every entry counted the same hits.
    let mut counted = 0;
    for (i, h) in handles.iter().enumerate() {
        if let Some((_, f)) = h {
            let read = |sw: &mut Switch| cli::run(sw, &format!("counter_read L2Ingress.forwarding_hits {f}")).unwrap();
            let (x, y) = (read(&mut compiled), read(&mut twin));
            assert_eq!(x, y, "host {i}: direct counter of entry {f}");
            counted += usize::from(!x.ends_with(" 0 packets)"));
        }
    }
    assert!(counted > 100, "{counted} entries counted hits: the comparison says little");
}

/// Every table lookup is counted once, as a hit or a miss, whichever path
/// resolved it: the interpreter, a helper handing the result back, or
/// generated code on its own (the router's routes in a DIR-24-8, built
/// from 64 routes on, and its next hops in a direct array); the counts
/// come out the same compiled and interpreted, and reach the metrics.
/// Packets longer than any before stop the batch function (its output
/// areas would not hold them) and run again with more room: nothing is
/// lost, emitted twice or counted twice, with the work ahead of big tables
/// (2000 routes) and without it (one route).
#[test]
fn packets_longer_than_the_areas_so_far_run_again_with_more_room() {
    for routes in [1u32, 2000] {
        let (mut compiled, mut twin) = one_route_router("10.0.0.0/16");
        for sw in [&mut compiled, &mut twin] {
            for i in 1..routes {
                let line = format!(
                    "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop {}/24 => 1",
                    ip(0x0b00_0000 + (i << 8))
                );
                cli::run(sw, &line).unwrap();
            }
        }
        let mut r = Rng(0x0123_4567_89ab_cdef ^ u64::from(routes));
        let mut sent = 0u64;
        for round in 0..6u64 {
            // Lengths that grow within a batch (each new longest one
            // restarts it), shrink again, and the odd one to no route.
            let batch: Vec<Vec<u8>> = (0..150u32)
                .map(|i| {
                    let payload = match (round, i % 50) {
                        (_, 7) => 100 + 300 * round as usize,
                        (_, 31) => 1400,
                        (5, 40) => 9000,
                        _ => 18 + r.below(20) as usize,
                    };
                    let dst = if r.below(4) == 0 { 0x0c00_0001 } else { 0x0a00_0001 + i };
                    packet_of(dst, 64, true, payload)
                })
                .collect();
            sent += batch.len() as u64;
            let out = same_output(&mut compiled, &mut twin, 1, &batch, 1_000 + round, round);
            assert!(out.iter().any(|(_, d)| d.len() > 1400), "round {round}: the long packets are forwarded");
        }
        let stats = sluice_dataplane::DataPlane::stats(&compiled);
        assert_eq!(stats.received, sent, "{routes} routes: every packet received once");
        assert_eq!(stats.transmitted + stats.dropped, sent, "{routes} routes: each sent or dropped once");
        assert_eq!(stats.transmitted, sluice_dataplane::DataPlane::stats(&twin).transmitted);
        for t in ["RouterIngress.ipv4_lpm", "RouterIngress.nexthop"] {
            let ti = compiled.index_of(sluice_engine::runtime::Resource::Table, t).unwrap();
            assert_eq!(compiled.table_lookups(ti), twin.table_lookups(ti), "{routes} routes: {t} lookups");
        }
    }
}

#[test]
fn table_lookups_are_counted_once_as_hits_or_misses_on_every_path() {
    let (mut compiled, mut twin) = one_route_router("10.0.0.0/16");
    for sw in [&mut compiled, &mut twin] {
        for i in 1..=100u32 {
            let line = format!(
                "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop {}/24 => 1",
                ip(0x0b00_0000 + (i << 8))
            );
            cli::run(sw, &line).unwrap();
        }
    }
    let mut batch = Vec::new();
    for i in 0..300u32 {
        // Two in three to a route, one in three to none.
        let dst = if i % 3 == 2 { 0x0c00_0001 + i } else { 0x0a00_0001 + i };
        batch.push(packet(dst, 64, true));
    }
    for round in 0..4 {
        same_output(&mut compiled, &mut twin, 1, &batch, 1_000 + round, round);
    }
    let lpm = compiled.index_of(sluice_engine::runtime::Resource::Table, "RouterIngress.ipv4_lpm").unwrap();
    let nexthop = compiled.index_of(sluice_engine::runtime::Resource::Table, "RouterIngress.nexthop").unwrap();
    for sw in [&compiled, &twin] {
        assert_eq!(sw.table_lookups(lpm), [800, 400], "{:?}", sw.mode());
        // The next hops are looked up for every packet: 0, none, for those without a route.
        assert_eq!(sw.table_lookups(nexthop), [800, 400], "{:?}", sw.mode());
    }
    let mut m = sluice_dataplane::Metrics::new();
    sluice_dataplane::DataPlane::metrics(&compiled, &mut m);
    let hits = m.get("sluice_p4_table_lookups_total", &[("table", "RouterIngress.ipv4_lpm"), ("result", "hit")]);
    let misses = m.get("sluice_p4_table_lookups_total", &[("table", "RouterIngress.ipv4_lpm"), ("result", "miss")]);
    assert_eq!((hits, misses), (Some(800.0), Some(400.0)), "{}", m.to_text());
}
