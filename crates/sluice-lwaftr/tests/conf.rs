//! The configuration reader and writer against the conformance corpus
//! (every `lwaftr.conf` reads, and writes back byte for byte), located error
//! messages for each kind of mistake, malformed texts (never a panic), and a
//! large generated binding table.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use sluice_lwaftr::conf::{generate_configuration, Config, NextHop};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/lwaftr");

/// Every `lwaftr.conf` of the corpus (case folders and `bench/`); the corpus
/// must be there.
fn corpus_confs() -> Vec<PathBuf> {
    let dir = Path::new(CORPUS);
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("the lwAFTR corpus {CORPUS} is missing: {e}"));
    let mut v: Vec<PathBuf> =
        entries.filter_map(|e| Some(e.ok()?.path().join("lwaftr.conf"))).filter(|p| p.is_file()).collect();
    v.sort();
    assert!(v.len() >= 100, "only {} lwaftr.conf files in {CORPUS}", v.len());
    v
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn v4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

#[test]
fn every_corpus_conf_reads_and_writes_back_unchanged() {
    for p in corpus_confs() {
        let text = read(&p);
        let name = p.display().to_string();
        let c = Config::parse(&text, &name).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.binding_table.softwires.len(), 12, "{name}");
        assert_eq!(c.instances.len(), 1, "{name}");
        assert_eq!(c.instances[0].device, "test", "{name}");
        let out = c.to_text();
        assert_eq!(out, text, "{name}: written back differently");
        assert_eq!(Config::parse(&out, "again").as_ref(), Ok(&c), "{name}");
    }
}

#[test]
fn bench_conf_facts() {
    let c = Config::parse(&read(&Path::new(CORPUS).join("bench/lwaftr.conf")), "bench/lwaftr.conf").unwrap();
    let sw = &c.binding_table.softwires;
    assert_eq!(sw.len(), 12);
    let first = &sw[0];
    assert_eq!((first.ipv4, first.psid), (v4("178.79.150.3"), 4));
    assert_eq!(first.b4_ipv6, v6("127:14:25:36:47:58:69:128"));
    assert_eq!(first.br_address, v6("1e:2:2:2:2:2:2:af"));
    assert_eq!(
        (first.port_set.psid_length, first.port_set.reserved_ports_bit_count, first.port_set.shift()),
        (6, 0, 10)
    );
    let s80 = sw.iter().find(|s| s.psid == 80).unwrap();
    assert_eq!((s80.ipv4, s80.b4_ipv6), (v4("178.79.150.233"), v6("127:2:3:4:5:6:7:128")));
    assert_eq!(sw.iter().filter(|s| s.ipv4 == v4("178.79.150.233")).count(), 7);
    for side in [&c.external.common, &c.internal.common] {
        assert!(!side.allow_incoming_icmp);
        assert!(side.generate_icmp_errors);
        assert_eq!(side.error_rate_limiting.packets, 600_000);
        assert_eq!(side.error_rate_limiting.period, 2);
        assert_eq!(side.reassembly.max_fragments_per_packet, 40);
        assert_eq!(side.reassembly.max_packets, 20_000);
        assert_eq!(side.mru, 1460);
        assert_eq!(side.ingress_filter, None);
    }
    assert_eq!((c.external.common.mtu, c.internal.common.mtu), (1460, 1500));
    assert!(c.internal.hairpinning);
    let q = c.queue_settings(None, None).unwrap();
    assert_eq!(q.external.queue.ip, v4("10.10.10.10"));
    assert_eq!(q.external.queue.mac, [0x12; 6]);
    assert_eq!(q.external.queue.next_hop, NextHop::Mac([0x68; 6]));
    assert_eq!(q.internal.queue.ip, v6("8:9:a:b:c:d:e:f"));
    assert_eq!(q.internal.queue.mac, [0x22; 6]);
    assert_eq!(q.internal.queue.next_hop, NextHop::Mac([0x44; 6]));
    assert_eq!((q.external.queue.vlan_tag, q.internal.queue.vlan_tag), (None, None));
    assert_eq!((q.flow_label, q.hairpinning), (0, true));
    assert_eq!(c.queue_settings(Some("test"), Some(0)), Ok(q));
    assert!(c.queue_settings(Some("nope"), None).is_err());
    assert!(c.queue_settings(None, Some(1)).is_err());
}

#[test]
fn corpus_variants_facts() {
    let conf = |case: &str| Config::parse(&read(&Path::new(CORPUS).join(case).join("lwaftr.conf")), case).unwrap();
    let c = conf("hairpin-vlantag");
    let q = c.queue_settings(None, None).unwrap();
    assert_eq!((q.external.queue.vlan_tag, q.internal.queue.vlan_tag), (Some(1092), Some(1638)));
    assert!(q.internal.common.allow_incoming_icmp);
    assert_eq!(q.internal.common.error_rate_limiting.packets, 6000);
    assert_eq!(q.external.common.error_rate_limiting.packets, 600_000);
    let c = conf("ndp-na-then-forward");
    let q = c.queue_settings(None, None).unwrap();
    assert_eq!(q.internal.queue.next_hop, NextHop::Ip(v6("8:9:a:b:4:3:2:1")));
    // Filters, MTUs, hairpinning and reassembly limits somewhere in the corpus.
    let all: Vec<Config> = corpus_confs().iter().map(|p| Config::parse(&read(p), "c").unwrap()).collect();
    assert!(all.iter().any(|c| c.external.common.ingress_filter.as_deref() == Some("len < 0")));
    assert!(all.iter().any(|c| c.internal.common.egress_filter.as_deref() == Some("ip6")));
    assert!(all.iter().any(|c| c.external.common.mtu == 576));
    assert!(all.iter().any(|c| c.internal.common.mtu == 1280));
    assert!(all.iter().any(|c| !c.internal.hairpinning));
    assert!(all.iter().any(|c| c.internal.common.reassembly
        == sluice_lwaftr::conf::Reassembly { max_fragments_per_packet: 1, max_packets: 10 }));
}

/// The error of reading `text` as file `t.conf`.
fn err(text: &str) -> String {
    match Config::parse(text, "t.conf") {
        Ok(c) => panic!("read without error: {c:?}"),
        Err(e) => e.to_string(),
    }
}

const SW: &str = "softwire-config {
  binding-table {
    softwire {
      ipv4 178.79.150.233;
      psid 80;
      b4-ipv6 127:2:3;
      br-address 8:9:a:b:c:d:e:f;
      port-set { psid-length 16; }
    }
  }
}
";

#[test]
fn located_errors() {
    let sw = "/softwire-config/binding-table/softwire[ipv4=178.79.150.233][psid=80]";
    assert_eq!(err(SW), format!("t.conf:6:15: {sw}/b4-ipv6: \"127:2:3\" is not an IPv6 address"));
    // The keys are named even when they come after the error.
    let late = SW
        .replace("      ipv4 178.79.150.233;\n      psid 80;\n", "")
        .replace("port-set { psid-length 16; }", "port-set { psid-length 16; } ipv4 178.79.150.233; psid 80;");
    assert_eq!(err(&late), format!("t.conf:4:15: {sw}/b4-ipv6: \"127:2:3\" is not an IPv6 address"));
    let ok = SW.replace("127:2:3;", "127:2:3:4:5:6:7:128;");
    Config::parse(&ok, "t.conf").unwrap();
    // Unknown keyword.
    assert_eq!(
        err(&ok.replace("psid 80;", "psid 80; colour red;")),
        format!(
            "t.conf:5:16: {sw}: unknown keyword \"colour\" (expected one of: ipv4, psid, b4-ipv6, br-address, \
             padding, port-set)"
        )
    );
    // Missing mandatory leaf.
    assert_eq!(
        err(&ok.replace("br-address 8:9:a:b:c:d:e:f;", "")),
        format!("t.conf:3:5: {sw}/br-address: mandatory, missing")
    );
    assert_eq!(
        err(&ok.replace("port-set { psid-length 16; }", "port-set { }")),
        format!("t.conf:8:7: {sw}/port-set/psid-length: mandatory, missing")
    );
    // Duplicate leaf.
    assert_eq!(err(&ok.replace("psid 80;", "psid 80; psid 81;")), format!("t.conf:5:16: {sw}/psid: given twice"));
    // Out of range and bad values.
    assert_eq!(
        err(&ok.replace("psid-length 16", "psid-length 17")),
        format!("t.conf:8:30: {sw}/port-set/psid-length: 17 is out of range 0..16")
    );
    assert_eq!(
        err(&ok.replace("psid 80", "psid 65536")),
        "t.conf:5:12: /softwire-config/binding-table/softwire[ipv4=178.79.150.233][psid=65536]/psid: 65536 is out of \
         range 0..65535"
    );
    assert_eq!(
        err(&ok.replace("psid 80", "psid eighty")),
        "t.conf:5:12: /softwire-config/binding-table/softwire[ipv4=178.79.150.233][psid=eighty]/psid: \
         \"eighty\" is not an unsigned decimal number"
    );
    assert_eq!(
        err(&ok.replace("ipv4 178.79.150.233", "ipv4 178.79.150")),
        "t.conf:4:12: /softwire-config/binding-table/softwire[ipv4=178.79.150][psid=80]/ipv4: \
         \"178.79.150\" is not an IPv4 address"
    );
    // psid must fit psid-length; psid-length + reserved bits at most 16.
    assert_eq!(
        err(&ok.replace("psid-length 16", "psid-length 6")),
        format!("t.conf:5:12: {sw}/psid: psid 80 does not fit psid-length 6 (must be below 64)")
    );
    assert_eq!(
        err(&ok.replace("psid-length 16;", "psid-length 10; reserved-ports-bit-count 7;")),
        format!("t.conf:8:7: {sw}/port-set: psid-length 10 + reserved-ports-bit-count 7 exceeds 16")
    );
    // Duplicate softwire key, and port sets that differ within one address.
    let body =
        "    softwire {\n      ipv4 178.79.150.233;\n      psid 80;\n      b4-ipv6 ::1;\n      br-address ::2;\n      \
                port-set { psid-length 16; }\n    }\n";
    let two = |second: &str| format!("softwire-config {{\n  binding-table {{\n{body}{second}  }}\n}}\n");
    assert_eq!(
        err(&two(body)),
        format!("t.conf:10:5: {sw}: duplicate key: the softwire at line 3 has the same ipv4 and psid")
    );
    assert_eq!(
        err(&two(&body.replace("psid 80;", "psid 1;").replace("psid-length 16", "psid-length 8"))),
        "t.conf:10:5: /softwire-config/binding-table/softwire[ipv4=178.79.150.233][psid=1]: port-set (psid-length \
         8, reserved-ports-bit-count 0) differs from that of the softwire at line 3 with the same ipv4 \
         (psid-length 16, reserved-ports-bit-count 0)"
    );
    Config::parse(&two(&body.replace("psid 80;", "psid 81;")), "t.conf").unwrap();
    Config::parse(
        &two(&body.replace("178.79.150.233", "178.79.150.234").replace("psid-length 16", "psid-length 8")),
        "t",
    )
    .unwrap();
}

#[test]
fn located_errors_outside_the_table() {
    assert_eq!(
        err("softwire-config {\n  instance { device a; }\n  instance { device a; }\n}"),
        "t.conf:3:3: /softwire-config/instance[device=a]: duplicate key: an earlier instance has device \"a\""
    );
    let q = "queue { id 1; external-interface { ip 1.2.3.4; mac 1:2:3:4:5:6; next-hop { mac 1:2:3:4:5:7; } } \
             internal-interface { ip ::1; mac 1:2:3:4:5:6; next-hop { ip ::2; } } }";
    let one = format!("softwire-config {{ instance {{ device a; {q} }} }}");
    let c = Config::parse(&one, "t.conf").unwrap();
    assert_eq!(c.instances[0].queues[0].internal.next_hop, NextHop::Ip(v6("::2")));
    assert_eq!(Config::parse(&c.to_text(), "t").unwrap(), c);
    assert_eq!(
        err(&format!("softwire-config {{ instance {{ device a; {q}\n {q} }} }}")),
        "t.conf:2:2: /softwire-config/instance[device=a]/queue[id=1]: duplicate key: an earlier queue has id 1"
    );
    assert_eq!(
        err(&one.replace("id 1;", "id 256;")),
        "t.conf:1:51: /softwire-config/instance[device=a]/queue[id=256]/id: 256 is out of range 0..255"
    );
    assert_eq!(
        err(&one.replace("next-hop { ip ::2; }", "next-hop { ip ::2; mac 1:2:3:4:5:6; }")),
        "t.conf:1:201: /softwire-config/instance[device=a]/queue[id=1]/internal-interface/next-hop/mac: next-hop \
         takes one of ip and mac, not both"
    );
    assert_eq!(
        err(&one.replace("next-hop { ip ::2; }", "next-hop { }")),
        "t.conf:1:182: /softwire-config/instance[device=a]/queue[id=1]/internal-interface/next-hop: mandatory \
         choice missing: ip or mac"
    );
    assert_eq!(
        err(&one.replace("mac 1:2:3:4:5:7", "mac 1:2:3:4:5")),
        "t.conf:1:119: /softwire-config/instance[device=a]/queue[id=1]/external-interface/next-hop/mac: \
         \"1:2:3:4:5\" is not a MAC address (xx:xx:xx:xx:xx:xx)"
    );
    assert_eq!(
        err(&one.replace("ip 1.2.3.4; ", "")),
        "t.conf:1:54: /softwire-config/instance[device=a]/queue[id=1]/external-interface/ip: mandatory, missing"
    );
    assert_eq!(
        err(&one.replace("next-hop { mac 1:2:3:4:5:7; } }", "next-hop { mac 1:2:3:4:5:7; } vlan-tag 4096; }")),
        "t.conf:1:143: /softwire-config/instance[device=a]/queue[id=1]/external-interface/vlan-tag: 4096 is out of \
         range 0..4095"
    );
    assert_eq!(
        err("softwire-config { instance { device a; softwire-state { } } }"),
        "t.conf:1:40: /softwire-config/instance[device=a]/softwire-state: state data (config false), not accepted \
         in a configuration"
    );
    // Global interfaces.
    let g = |side: &str, body: &str| err(&format!("softwire-config {{\n  {side} {{\n    {body}\n  }}\n}}\n"));
    assert_eq!(
        g("external-interface", "mtu 67;"),
        "t.conf:3:9: /softwire-config/external-interface/mtu: 67 is out of range 68..65535"
    );
    assert_eq!(
        g("internal-interface", "mtu 1279;"),
        "t.conf:3:9: /softwire-config/internal-interface/mtu: 1279 is out of range 1280..65535"
    );
    assert_eq!(
        g("internal-interface", "mtu 1500; mtu 1400;"),
        "t.conf:3:15: /softwire-config/internal-interface/mtu: given twice"
    );
    assert_eq!(
        g("external-interface", "error-rate-limiting { period 0; }"),
        "t.conf:3:34: /softwire-config/external-interface/error-rate-limiting/period: 0 is out of range 1..4294967295"
    );
    assert_eq!(
        g("internal-interface", "reassembly { max-fragments-per-packet 0; }"),
        "t.conf:3:43: /softwire-config/internal-interface/reassembly/max-fragments-per-packet: 0 is out of range \
         1..4294967295"
    );
    assert_eq!(
        g("external-interface", "hairpinning false;"),
        "t.conf:3:5: /softwire-config/external-interface: unknown keyword \"hairpinning\" (expected one of: mtu, mru, \
         ingress-filter, egress-filter, allow-incoming-icmp, generate-icmp-errors, error-rate-limiting, reassembly)"
    );
    assert_eq!(
        g("internal-interface", "hairpinning no;"),
        "t.conf:3:17: /softwire-config/internal-interface/hairpinning: \"no\" is not a boolean (true or false)"
    );
    assert_eq!(
        g("internal-interface", "reassembly 3;"),
        "t.conf:3:5: /softwire-config/internal-interface/reassembly: a container: write `reassembly { ... }`"
    );
    assert_eq!(
        g("internal-interface", "mtu { }"),
        "t.conf:3:5: /softwire-config/internal-interface/mtu: a leaf, not a container: write `mtu VALUE;`"
    );
    assert_eq!(
        g("internal-interface", "mtu;"),
        "t.conf:3:5: /softwire-config/internal-interface/mtu: value missing: write `mtu VALUE;`"
    );
    assert_eq!(
        g("internal-interface", "mtu 1500"),
        "t.conf:4:3: /softwire-config/internal-interface/mtu: expected `;` after the value"
    );
    // Syntax and the top level.
    assert_eq!(err(""), "t.conf:1:1: /softwire-config: mandatory, missing");
    assert_eq!(err("// nothing\n"), "t.conf:2:1: /softwire-config: mandatory, missing");
    assert_eq!(err("softwire-config {"), "t.conf:1:18: /softwire-config: unexpected end of text: `}` missing");
    assert_eq!(err("softwire-config { } }"), "t.conf:1:21: /: unexpected `}`");
    assert_eq!(err("softwire-config { } softwire-config { }"), "t.conf:1:21: /softwire-config: given twice");
    assert_eq!(
        err("softwire-state { }"),
        "t.conf:1:1: /softwire-state: state data (config false), not accepted in a configuration"
    );
    assert_eq!(err("softwire-config {\n /* open"), "t.conf:2:2: /softwire-config: unterminated comment /* ...");
    assert_eq!(err("softwire-config { name \"abc }"), "t.conf:1:24: /softwire-config: unterminated string \"...");
    assert_eq!(
        err("softwire-config { \"name\" x; }"),
        "t.conf:1:19: /softwire-config: expected a keyword, found a quoted string"
    );
}

#[test]
fn syntax_variants() {
    let text = r#"/* all on a few lines */ softwire-config { name 'my lwaftr' ;
        external-interface { ingress-filter "len" + ' < ' // joined
          + "0" ; egress-filter "a\"b\\c\n\t" ; mru 9000; }
        internal-interface { flow-label 1048575; vlan-tag 0; hairpinning false; mtu 9000;
          error-rate-limiting { period 7; packets 0; } }
        binding-table { version { number 18446744073709551615; date "2024-01-01T00:00:00Z"; }
          softwire { psid "3"; ipv4 "10.0.0.1"; b4-ipv6 ::FFFF:1.2.3.4; br-address FE80::100; padding 65535;
                     port-set { reserved-ports-bit-count 6; psid-length 10; } } }
        instance { device "0000:01:00.0"; external-device 0000:01:00.1;
          queue { id 255; internal-interface { next-hop { ip fe80::1; } mac 0:0:0:0:0:0; ip ::; }
                  external-interface { next-hop { ip 0.0.0.0; } ip 255.255.255.255; mac ff:FF:ff:ff:ff:ff; vlan-tag 4095; } } }
    }"#;
    let c = Config::parse(text, "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.name.as_deref(), Some("my lwaftr"));
    assert_eq!(c.external.common.ingress_filter.as_deref(), Some("len < 0"));
    assert_eq!(c.external.common.egress_filter.as_deref(), Some("a\"b\\c\n\t"));
    assert_eq!(c.external.common.mru, 9000);
    assert_eq!((c.internal.flow_label, c.internal.vlan_tag, c.internal.hairpinning), (1_048_575, Some(0), false));
    assert_eq!(c.internal.common.error_rate_limiting.period, 7);
    assert_eq!(c.binding_table.version, Some((Some(u64::MAX), Some("2024-01-01T00:00:00Z".into()))));
    let s = &c.binding_table.softwires[0];
    assert_eq!((s.ipv4, s.psid, s.padding), (v4("10.0.0.1"), 3, 65535));
    assert_eq!((s.b4_ipv6, s.br_address), (v6("::ffff:1.2.3.4"), v6("fe80::100")));
    assert_eq!(s.port_set.shift(), 0);
    assert_eq!(c.instances[0].external_device.as_deref(), Some("0000:01:00.1"));
    let q = c.queue_settings(Some("0000:01:00.0"), Some(255)).unwrap();
    assert_eq!(q.internal.queue.vlan_tag, Some(0), "the global internal vlan-tag when the queue has none");
    assert_eq!(q.external.queue.vlan_tag, Some(4095));
    assert_eq!(q.external.queue.mac, [0xff; 6]);
    let out = c.to_text();
    assert_eq!(Config::parse(&out, "out").unwrap_or_else(|e| panic!("{e}\n{out}")), c);
}

#[test]
fn softwires_on_their_own() {
    let one = "softwire { ipv4 1.2.3.4; psid 1; b4-ipv6 ::1; br-address ::2; port-set { psid-length 8; } }\n";
    let v = Config::parse_softwires(&format!("// added\n{one}{}", one.replace("psid 1;", "psid 2;")), "add").unwrap();
    assert_eq!(v.iter().map(|s| s.psid).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(Config::parse_softwires("", "add"), Ok(vec![]));
    assert_eq!(
        Config::parse_softwires(&format!("{one}{one}"), "add").unwrap_err().to_string(),
        "add:2:1: /softwire-config/binding-table/softwire[ipv4=1.2.3.4][psid=1]: duplicate key: the softwire at line 1 \
         has the same ipv4 and psid"
    );
    assert_eq!(
        Config::parse_softwires("softwire { ipv4 1.2.3.4; psid 1; } }", "add").unwrap_err().to_string(),
        "add:1:1: /softwire-config/binding-table/softwire[ipv4=1.2.3.4][psid=1]/b4-ipv6: mandatory, missing"
    );
    assert_eq!(
        Config::parse_softwires("}", "add").unwrap_err().to_string(),
        "add:1:1: /softwire-config/binding-table: unexpected `}`"
    );
    assert_eq!(
        Config::parse_softwires("instance { }", "add").unwrap_err().to_string(),
        "add:1:1: /softwire-config/binding-table: unknown keyword \"instance\" (expected one of: softwire)"
    );
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Reading `text` gives a located error, or a configuration that writes
/// back to a text that reads as the same.
fn check(text: &str) {
    match Config::parse(text, "t") {
        Err(e) => assert!(!e.message.is_empty() && e.line >= 1 && e.col >= 1 && e.path.starts_with('/'), "{e}"),
        Ok(c) => {
            let out = c.to_text();
            assert_eq!(Config::parse(&out, "out").as_ref(), Ok(&c), "{text}\n--- written as ---\n{out}");
        }
    }
}

#[test]
fn malformed_texts_never_panic() {
    let base = read(&Path::new(CORPUS).join("bench/lwaftr.conf"));
    let mut cases = 0;
    // Every truncation.
    for cut in 0..base.trim_end().len() {
        let r = Config::parse(&base[..cut], "t");
        assert!(r.is_err(), "truncated at {cut} reads");
        cases += 1;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let bytes = base.as_bytes();
    // Bit flips, byte insertions and deletions (any bytes, read lossily).
    for _ in 0..3000 {
        let mut b = bytes.to_vec();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(b.len());
            match rng.below(3) {
                0 => b[i] ^= 1 << rng.below(8),
                1 => b.insert(i, rng.next() as u8),
                _ => {
                    b.remove(i);
                }
            }
        }
        let text = String::from_utf8_lossy(&b);
        check(&text);
        cases += 1;
    }
    // Token soup.
    let toks = [
        "softwire-config",
        "binding-table",
        "softwire",
        "instance",
        "queue",
        "port-set",
        "{",
        "}",
        ";",
        "ipv4",
        "psid",
        "1.2.3.4",
        "::1",
        "\"",
        "'",
        "/*",
        "*/",
        "//",
        "\n",
        "+",
        "\"a\"",
        "psid-length",
        "99999999999999999999",
        "mac",
        "next-hop",
        "ip",
        "0",
        "\\",
        "é",
        "external-interface",
        "internal-interface",
        "mtu",
        "version",
    ];
    for _ in 0..3000 {
        let mut s = String::new();
        for _ in 0..rng.below(60) {
            s.push_str(toks[rng.below(toks.len())]);
            s.push(' ');
        }
        check(&s);
        cases += 1;
    }
    // Deep nesting.
    let deep = "softwire-config { ".to_string() + &"binding-table { ".repeat(10_000);
    assert!(Config::parse(&deep, "t").is_err());
    assert!(cases > 6000);
}

/// A random string from characters the syntax treats specially.
fn random_string(rng: &mut Rng) -> String {
    const PARTS: &[&str] = &[
        "a", "Z", "0", " ", "\t", "\n", "\r", ";", "{", "}", "\"", "'", "\\", "/", "//", "/*", "*/", "+", "é", "ip6",
        "len < 0", "\u{b}",
    ];
    (0..rng.below(8)).map(|_| PARTS[rng.below(PARTS.len())]).collect()
}

#[test]
fn random_configurations_write_and_read_back() {
    use sluice_lwaftr::conf::{Instance, PortSet, Queue, QueueInterface, Softwire};
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let base = Config::parse(&read(&Path::new(CORPUS).join("bench/lwaftr.conf")), "bench").unwrap();
    for round in 0..300 {
        let mut c = base.clone();
        let r = &mut rng;
        c.name = (r.below(2) == 0).then(|| random_string(r));
        for side in [&mut c.external.common, &mut c.internal.common] {
            side.ingress_filter = (r.below(2) == 0).then(|| random_string(r));
            side.egress_filter = (r.below(2) == 0).then(|| random_string(r));
            side.mtu = 1280 + r.below(60000) as u16;
            side.mru = r.next() as u16;
            side.allow_incoming_icmp = r.below(2) == 0;
            side.generate_icmp_errors = r.below(2) == 0;
            side.error_rate_limiting.packets = r.next() as u32;
            side.error_rate_limiting.period = 1 + r.below(1000) as u32;
            side.reassembly.max_fragments_per_packet = 1 + r.below(100) as u32;
            side.reassembly.max_packets = r.next() as u32;
        }
        c.internal.flow_label = r.next() as u32;
        c.internal.vlan_tag = (r.below(2) == 0).then(|| r.below(4096) as u16);
        c.internal.hairpinning = r.below(2) == 0;
        c.binding_table.version = match r.below(4) {
            0 => None,
            1 => Some((None, None)),
            _ => Some(((r.below(2) == 0).then(|| r.next()), (r.below(2) == 0).then(|| random_string(r)))),
        };
        c.binding_table.softwires = (0..r.below(20))
            .map(|i| {
                let k = (i % 17) as u8;
                let a = r.below(17 - k as usize) as u8;
                Softwire {
                    ipv4: Ipv4Addr::from(i as u32),
                    psid: (r.next() as u16) & ((1u32 << k) - 1) as u16,
                    b4_ipv6: Ipv6Addr::from(u128::from(r.next()) << r.below(64)),
                    br_address: Ipv6Addr::from(u128::from(r.next())),
                    padding: r.next() as u16,
                    port_set: PortSet { psid_length: k, reserved_ports_bit_count: a },
                }
            })
            .collect();
        let iface = |r: &mut Rng| QueueInterface {
            ip: Ipv4Addr::from(r.next() as u32),
            mac: [r.next() as u8; 6],
            vlan_tag: (r.below(2) == 0).then(|| r.below(4096) as u16),
            next_hop: if r.below(2) == 0 {
                NextHop::Mac([1, 2, 3, 4, 5, r.next() as u8])
            } else {
                NextHop::Ip(Ipv4Addr::from(r.next() as u32))
            },
        };
        c.instances = (0..r.below(3))
            .map(|i| Instance {
                device: format!("{}{i}", random_string(r)),
                external_device: (r.below(2) == 0).then(|| random_string(r)),
                queues: (0..r.below(3) as u8)
                    .map(|id| {
                        let e = iface(r);
                        let n = iface(r);
                        Queue {
                            id,
                            external: e,
                            internal: QueueInterface {
                                ip: Ipv6Addr::from(u128::from(n.ip.to_bits()) << 64),
                                mac: n.mac,
                                vlan_tag: n.vlan_tag,
                                next_hop: match n.next_hop {
                                    NextHop::Mac(m) => NextHop::Mac(m),
                                    NextHop::Ip(a) => NextHop::Ip(a.to_ipv6_mapped()),
                                },
                            },
                        }
                    })
                    .collect(),
            })
            .collect();
        let out = c.to_text();
        assert_eq!(
            Config::parse(&out, "out").unwrap_or_else(|e| panic!("round {round}: {e}\n{out}")),
            c,
            "round {round}"
        );
    }
}

/// `n` softwires in Snabb's generated layout (one per line).
fn snabb_style_table(n: u32) -> String {
    let mut s = String::from("softwire-config {\n  binding-table {\n");
    let b4_first: u128 = u128::from(v6("fc00:1:2:3:4:5:0:7e"));
    for i in 0..n {
        let b4 = b4_first + u128::from(i);
        let ip = Ipv4Addr::from(u32::from(v4("193.5.1.100")) + i / 63);
        let psid = i % 63 + 1;
        s.push_str(&format!(
            "  softwire {{ ipv4 {ip}; psid {psid}; b4-ipv6 {}; br-address fc00::100; port-set {{ psid-length 6; }}}}\n",
            Ipv6Addr::from(b4)
        ));
    }
    s.push_str("  }\n}\n");
    s
}

#[test]
fn hundred_thousand_softwires() {
    let text = snabb_style_table(100_000);
    let c = Config::parse(&text, "big").unwrap();
    assert_eq!(c.binding_table.softwires.len(), 100_000);
    let g = generate_configuration(
        v4("193.5.1.100"),
        100_000u32.div_ceil(63),
        v6("fc00::100"),
        v6("fc00:1:2:3:4:5:0:7e"),
        6,
        None,
    )
    .unwrap();
    assert_eq!(&g.binding_table.softwires[..100_000], &c.binding_table.softwires[..]);
    let again = Config::parse(&g.to_text(), "gen").unwrap();
    assert_eq!(again, g);
}

/// `cargo test --release -p sluice-lwaftr --test conf -- --ignored --nocapture`
#[test]
#[ignore = "a timing run of a million softwires, in release mode"]
fn million_softwires_timing() {
    let g =
        generate_configuration(v4("193.5.1.100"), 15874, v6("fc00::100"), v6("fc00:1:2:3:4:5:0:7e"), 6, None).unwrap();
    let t = std::time::Instant::now();
    let text = g.to_text();
    eprintln!("to_text: {} softwires, {} MB in {:?}", g.binding_table.softwires.len(), text.len() >> 20, t.elapsed());
    let t = std::time::Instant::now();
    let c = Config::parse(&text, "1m").unwrap();
    eprintln!("parse (multi-line layout): {:?}", t.elapsed());
    assert_eq!(c.binding_table.softwires.len(), 1_000_062);
    let text = snabb_style_table(1_000_062);
    let t = std::time::Instant::now();
    let c2 = Config::parse(&text, "1m").unwrap();
    eprintln!("parse (Snabb's one-line layout, {} MB): {:?}", text.len() >> 20, t.elapsed());
    assert_eq!(c2.binding_table.softwires, c.binding_table.softwires);
}
