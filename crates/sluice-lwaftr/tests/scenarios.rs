//! Upstream scenarios that the visible corpus lacks (design notes §5),
//! built from corpus frames and configurations, with the behaviour
//! Snabb's sources give.

use std::fs;
use std::path::Path;

use sluice_hash::{csum16, csum16_finish};
use sluice_lwaftr::check::{check, CheckResult};
use sluice_lwaftr::conf::{Config, NextHop};
use sluice_ports::pcapfile::frames_of as pcap_frames;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/lwaftr");

fn conf(case: &str) -> Config {
    let text = fs::read_to_string(Path::new(CORPUS).join(case).join("lwaftr.conf")).expect("corpus case");
    Config::parse(&text, "lwaftr.conf").expect("valid conf")
}

fn frames(case: &str, file: &str) -> Vec<Vec<u8>> {
    pcap_frames(&fs::read(Path::new(CORPUS).join(case).join(file)).expect("corpus file")).unwrap()
}

fn counters(r: &CheckResult) -> Vec<(String, u64)> {
    r.counters.iter().map(|(k, v)| (k.clone(), *v)).collect()
}

fn c(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn reversed_ipv4_fragments_reassemble_the_same() {
    let case = "inet-ipv4-frags-reassembly";
    let mut inp = frames(case, "in-v4.pcap");
    inp.reverse();
    for stick in [false, true] {
        let r = check(&conf(case), &inp, &[], stick).unwrap();
        assert_eq!(r.out_v6, frames(case, "out-v6.pcap"));
    }
}

#[test]
fn out_of_order_ipv6_fragments_reassemble_the_same() {
    let case = "b4-ipv6-reassembly";
    let mut inp = frames(case, "in-v6.pcap");
    inp.reverse();
    let r = check(&conf(case), &[], &inp, false).unwrap();
    assert_eq!(r.out_v4, frames(case, "out-v4.pcap"));
}

#[test]
fn ipv4_on_the_ipv6_port_is_misplaced() {
    let inp = frames("inet-bound-encap", "in-v4.pcap");
    let r = check(&conf("b4-unbound-drop"), &[], &inp, false).unwrap();
    assert!(r.out_v4.is_empty() && r.out_v6.is_empty());
    assert_eq!(
        counters(&r),
        c(&[
            ("drop-all-ipv6-iface-bytes", 66),
            ("drop-all-ipv6-iface-packets", 1),
            ("drop-misplaced-not-ipv6-bytes", 66),
            ("drop-misplaced-not-ipv6-packets", 1),
            ("in-ipv6-frag-reassembly-unneeded", 1),
        ])
    );
}

#[test]
fn echo_request_with_a_bad_checksum_is_dropped() {
    let mut inp = frames("inet-icmp-echo-request", "in-v4.pcap");
    inp[0][14 + 20 + 2] ^= 0xff;
    let r = check(&conf("inet-icmp-echo-request"), &inp, &[], false).unwrap();
    assert!(r.out_v6.is_empty());
    assert_eq!(r.counters.get("drop-bad-checksum-icmpv4-bytes"), Some(&98));
    assert_eq!(r.counters.get("drop-all-ipv4-iface-packets"), Some(&1));
}

#[test]
fn icmpv6_too_big_becomes_icmpv4_frag_needed() {
    let case = "b4-icmpv6-hop-limit";
    let mut inp = frames(case, "in-v6.pcap");
    let icmp = 14 + 40;
    inp[0][icmp] = 2;
    inp[0][icmp + 1] = 0;
    inp[0][icmp + 4..icmp + 8].copy_from_slice(&1400u32.to_be_bytes());
    let r = check(&conf(case), &[], &inp, false).unwrap();
    assert_eq!(r.out_v4.len(), 1);
    let e = &r.out_v4[0];
    assert_eq!((e[34], e[35]), (3, 4));
    assert_eq!(u16::from_be_bytes([e[40], e[41]]), 1360);
    assert_eq!(csum16(&e[34..]), 0);
    // The same with a non-zero code is dropped.
    inp[0][icmp + 1] = 1;
    let r = check(&conf(case), &[], &inp, false).unwrap();
    assert!(r.out_v4.is_empty());
    assert_eq!(r.counters.get("drop-too-big-type-but-not-code-icmpv6-packets"), Some(&1));
}

#[test]
fn echo_with_ttl_32_is_answered_with_ttl_64() {
    let case = "ping-aftr-v4";
    let mut inp = frames(case, "in-v4.pcap");
    inp[0][14 + 8] = 32;
    // Keep the IPv4 checksum right: TTL is the high byte of word 4.
    let ck = u16::from_be_bytes([inp[0][24], inp[0][25]]);
    let fixed = csum16_finish(u64::from(!ck) + 0xffff - (64u64 << 8) + (32u64 << 8));
    inp[0][24..26].copy_from_slice(&fixed.to_be_bytes());
    let r = check(&conf(case), &inp, &[], false).unwrap();
    assert_eq!(r.out_v4, frames(case, "out-v4.pcap"));
}

#[test]
fn an_ipv6_packet_three_mtus_long_leaves_in_three_fragments() {
    let case = "inet-udp-ipv6-fragment";
    let inp = frames(case, "in-v4.pcap");
    let mut cf = conf(case);
    // 1474-byte frame -> 1514-byte IPv6 frame; with an MTU of 600 the
    // fragments carry 552, 552 and 356 bytes.
    cf.internal.common.mtu = 600;
    let r = check(&cf, &inp, &[], false).unwrap();
    assert_eq!(r.out_v6.len(), 3);
    let offs: Vec<u16> = r.out_v6.iter().map(|f| u16::from_be_bytes([f[56], f[57]])).collect();
    assert_eq!(offs, vec![1, 552 | 1, 1104]);
    assert!(r.out_v6.iter().all(|f| f[58..62] == [0x42, 0x42, 0x42, 0x43]));
    assert_eq!(r.counters.get("out-ipv6-frag"), Some(&3));
}

#[test]
fn arp_request_for_an_ip_next_hop_goes_out_at_start() {
    let mut cf = conf("arp-request-for-aftr");
    cf.instances[0].queues[0].external.next_hop = NextHop::Ip("10.10.10.1".parse().unwrap());
    let r = check(&cf, &[], &[], false).unwrap();
    assert_eq!(r.out_v4.len(), 1);
    let a = &r.out_v4[0];
    assert_eq!(a.len(), 42);
    assert_eq!(&a[..6], &[0xff; 6]);
    assert_eq!(&a[20..22], &[0, 1]);
    assert_eq!(&a[38..42], &[10, 10, 10, 1]);
    assert_eq!(
        counters(&r),
        c(&[("out-arp-request-bytes", 42), ("out-arp-request-packets", 1), ("out-ipv4-frag-not", 1)])
    );
}

#[test]
fn ns_for_a_secondary_address_is_not_answered() {
    let case = "ndp-ns-for-aftr";
    let mut inp = frames(case, "in-v6.pcap");
    // Target 1e:1:1:1:1:1:1:af (a br-address that is not the internal ip).
    let target = "1e:1:1:1:1:1:1:af".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let f = &mut inp[0];
    f[14 + 40 + 8..14 + 40 + 24].copy_from_slice(&target);
    f[14 + 40 + 2..14 + 40 + 4].copy_from_slice(&[0, 0]);
    let ck = sluice_lwaftr::frame::ipv6_upper_checksum(&f[22..38], &f[38..54], 58, &f[54..]);
    f[56..58].copy_from_slice(&ck.to_be_bytes());
    let r = check(&conf(case), &[], &inp, false).unwrap();
    assert!(r.out_v6.is_empty());
    assert_eq!(
        counters(&r),
        c(&[("in-ipv6-frag-reassembly-unneeded", 1), ("in-ndp-ns-bytes", 86), ("in-ndp-ns-packets", 1)])
    );
}

#[test]
fn icmp_errors_to_a_b4_are_tunnelled_even_without_hairpinning() {
    let case = "inet-ttl1-time-exceeded";
    let mut inp = frames(case, "in-v4.pcap");
    // Source 178.79.150.233 (port 54192: a bound softwire), TTL 1.
    inp[0][26..30].copy_from_slice(&[178, 79, 150, 233]);
    sluice_lwaftr::frame::set_ipv4_checksum(&mut inp[0][14..34]);
    // tunnel_icmp: incoming ICMP allowed (the tunnelled error passes that policy).
    let mut cf = conf("hairpin-ttl1-icmp");
    cf.internal.hairpinning = false;
    let r = check(&cf, &inp, &[], false).unwrap();
    assert!(r.out_v4.is_empty());
    assert_eq!(r.out_v6.len(), 1);
    let f = &r.out_v6[0];
    // Inner ICMPv4 time exceeded with TTL 254, to the B4 of psid 54192.
    assert_eq!((f[54 + 8], f[54 + 20]), (254, 11));
    assert_eq!(&f[38..54], &"127:11:12:13:14:15:16:128".parse::<std::net::Ipv6Addr>().unwrap().octets());
    assert_eq!(r.counters.get("out-ipv4-packets"), None);
    assert_eq!(r.counters.get("out-icmpv4-error-packets"), Some(&1));
    assert_eq!(r.counters.get("out-ipv6-packets"), Some(&1));
}

#[test]
fn a_next_hop_learned_by_one_replica_releases_another_replicas_frames() {
    use sluice_dataplane::DataPlane;
    use sluice_lwaftr::{Lwaftr, Options, INTERNAL};
    let case = "ndp-na-then-forward";
    let inp = frames(case, "in-v6.pcap");
    let opts = Options { on_a_stick: false, deterministic_ids: true, frozen_clock: Some(0) };
    let mut a = Lwaftr::new(&conf(case), opts).unwrap();
    let mut b = a.replica(2).unwrap();
    let mut out_b = Vec::new();
    b.tick(0, &mut |p: u32, f: &[u8]| out_b.push((p, f.to_vec())));
    assert_eq!(out_b.len(), 1, "the NS");
    b.process_batch(INTERNAL, &[&inp[0]], &mut |_, p, f: &[u8]| out_b.push((p, f.to_vec())));
    assert_eq!(out_b.len(), 1, "the hairpinned frame waits for the next hop");
    a.process_batch(INTERNAL, &[&inp[1]], &mut |_, _, _: &[u8]| {});
    b.tick(1, &mut |p: u32, f: &[u8]| out_b.push((p, f.to_vec())));
    assert_eq!(out_b.len(), 2);
    assert_eq!(out_b[1], (INTERNAL, frames(case, "out-v6.pcap")[1].clone()));
}

#[test]
fn next_hop_requests_repeat_every_three_seconds_until_resolved() {
    use sluice_dataplane::DataPlane;
    use sluice_lwaftr::{Lwaftr, Options};
    let case = "ndp-na-then-forward";
    let mut lw = Lwaftr::new(&conf(case), Options::default()).unwrap();
    let mut n = 0;
    for t in [0u64, 1_000_000_000, 2_999_999_999, 3_000_000_000, 4_000_000_000, 6_000_000_000] {
        lw.tick(t, &mut |_: u32, _: &[u8]| n += 1);
    }
    assert_eq!(n, 3);
    let na = frames(case, "in-v6.pcap")[1].clone();
    lw.process_batch(1, &[&na], &mut |_, _, _: &[u8]| {});
    lw.tick(9_000_000_000, &mut |_: u32, _: &[u8]| n += 1);
    assert_eq!(n, 3);
}

#[test]
fn a_hairpinned_echo_reply_from_an_address_without_port_0_gets_icmpv6_1_5() {
    let case = "hairpin-icmp-echo-request";
    let mut inp = frames(case, "in-v6.pcap");
    // The echo request becomes a reply: its decapsulation key is port 0,
    // which 178.79.150.233 (psid-length 16) does not have.
    let icmp = 14 + 40 + 20;
    inp[0][icmp] = 0;
    inp[0][icmp + 2..icmp + 4].copy_from_slice(&[0, 0]);
    let ck = csum16(&inp[0][icmp..]);
    inp[0][icmp + 2..icmp + 4].copy_from_slice(&ck.to_be_bytes());
    let r = check(&conf(case), &[], &inp, false).unwrap();
    assert!(r.out_v4.is_empty());
    assert_eq!(r.out_v6.len(), 1);
    let e = &r.out_v6[0];
    assert_eq!(e.len(), 186);
    assert_eq!((e[54], e[55]), (1, 5));
    assert_eq!(&e[22..38], &inp[0][38..54], "from the packet's destination");
    assert_eq!(&e[62..], &inp[0][14..]);
    assert_eq!(
        counters(&r),
        c(&[
            ("drop-all-ipv6-iface-bytes", 138),
            ("drop-all-ipv6-iface-packets", 1),
            ("drop-no-source-softwire-ipv6-bytes", 138),
            ("drop-no-source-softwire-ipv6-packets", 1),
            ("in-ipv6-bytes", 138),
            ("in-ipv6-frag-reassembly-unneeded", 1),
            ("in-ipv6-packets", 1),
            ("out-icmpv6-error-bytes", 186),
            ("out-icmpv6-error-packets", 1),
            ("out-ipv6-bytes", 186),
            ("out-ipv6-frag-not", 1),
            ("out-ipv6-packets", 1),
        ])
    );
}

#[test]
fn whole_address_softwires_next_to_each_other_keep_their_own_b4() {
    use sluice_lwaftr::conf::{PortSet, Softwire};
    let case = "inet-bound-encap";
    let mut cf = conf(case);
    let br = "8:9:a:b:c:d:e:f".parse().unwrap();
    cf.binding_table.softwires = (233u8..=236)
        .map(|last| Softwire {
            ipv4: std::net::Ipv4Addr::new(178, 79, 150, last),
            psid: 0,
            b4_ipv6: format!("127:10:20:30:{last}:50:60:128").parse().unwrap(),
            br_address: br,
            padding: 0,
            port_set: PortSet { psid_length: 0, reserved_ports_bit_count: 0 },
        })
        .collect();
    let base = frames(case, "in-v4.pcap").remove(0);
    let inp: Vec<Vec<u8>> = (233u8..=236)
        .map(|last| {
            let mut f = base.clone();
            f[33] = last;
            sluice_lwaftr::frame::set_ipv4_checksum(&mut f[14..34]);
            f
        })
        .collect();
    let r = check(&cf, &inp, &[], false).unwrap();
    assert_eq!(r.out_v6.len(), 4);
    for (f, last) in r.out_v6.iter().zip(233u8..=236) {
        let want: std::net::Ipv6Addr = format!("127:10:20:30:{last}:50:60:128").parse().unwrap();
        assert_eq!(&f[38..54], &want.octets());
    }
}

#[test]
fn errors_beyond_the_rate_limit_are_dropped() {
    // ICMPv6: counted drop-over-rate-limit with the error's size.
    let case = "b4-unbound-icmpv6";
    let mut cf = conf(case);
    cf.internal.common.error_rate_limiting.packets = 1;
    let one = frames(case, "in-v6.pcap").remove(0);
    let r = check(&cf, &[], &[one.clone(), one], false).unwrap();
    assert_eq!(r.out_v6.len(), 1);
    assert_eq!(r.counters.get("drop-over-rate-limit-icmpv6-bytes"), Some(&154));
    assert_eq!(r.counters.get("drop-over-rate-limit-icmpv6-packets"), Some(&1));
    assert_eq!(r.counters.get("drop-all-ipv6-iface-packets"), Some(&2));
    // ICMPv4: no Snabb counter; the offending packet is still counted dropped.
    let case = "inet-unbound-icmp";
    let mut cf = conf(case);
    cf.external.common.error_rate_limiting.packets = 1;
    let one = frames(case, "in-v4.pcap").remove(0);
    let r = check(&cf, &[one.clone(), one], &[], false).unwrap();
    assert_eq!(r.out_v4.len(), 1);
    assert_eq!(r.counters.get("out-icmpv4-error-packets"), Some(&1));
    assert_eq!(r.counters.get("drop-all-ipv4-iface-packets"), Some(&2));
    assert_eq!(r.all.extra.icmpv4_rate_limited, 1);
}

#[test]
fn frames_with_the_wrong_vlan_tag_are_dropped_silently() {
    let case = "inet-bound-encap-vlan";
    let good = frames(case, "in-v4.pcap").remove(0);
    let mut wrong = good.clone();
    wrong[15] ^= 1;
    let untagged: Vec<u8> = good[..12].iter().chain(&good[16..]).copied().collect();
    let mut pcp = good.clone();
    pcp[14] |= 0x20;
    for stick in [false, true] {
        let r = check(&conf(case), &[wrong.clone(), untagged.clone(), pcp.clone()], &[], stick).unwrap();
        assert!(r.out_v4.is_empty() && r.out_v6.is_empty());
        assert!(r.counters.is_empty(), "{:?}", r.counters);
        assert_eq!(r.all.extra.vlan_mismatch, 3);
    }
}

#[test]
fn the_on_a_stick_bench_mix_goes_through() {
    let dir = Path::new(CORPUS).join("bench");
    let cf = Config::parse(&fs::read_to_string(dir.join("lwaftr.conf")).unwrap(), "lwaftr.conf").unwrap();
    let mix = pcap_frames(&fs::read(dir.join("ipv4_and_ipv6_stick_imix.pcap")).unwrap()).unwrap();
    let (v4, v6): (Vec<Vec<u8>>, Vec<Vec<u8>>) = mix.into_iter().partition(|f| f[12..14] == [8, 0]);
    let r = check(&cf, &v4, &v6, true).unwrap();
    // Every frame crosses (the 1500-byte ones leave in two fragments).
    assert_eq!(r.counters.get("out-ipv6-packets"), Some(&(v4.len() as u64)), "{:?}", r.counters);
    assert_eq!(r.counters.get("out-ipv4-packets"), Some(&(v6.len() as u64)), "{:?}", r.counters);
    assert_eq!(r.out_v6.len(), v4.len() + 1);
    assert_eq!(r.out_v4.len(), v6.len() + 1);
    assert!(r.counters.keys().all(|k| !k.starts_with("drop")), "{:?}", r.counters);
}
