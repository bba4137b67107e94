//! `sluice lwaftr check`, `generate-configuration` and `bench` as a user
//! runs them: corpus cases in both modes (frames and counters exact, the
//! output files in Snabb's pcap layout), a wrong counters file and a
//! malformed configuration (non-zero exit, a message naming the counter,
//! or the line and path), and generated traffic crossing a generated table.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/lwaftr");

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice")).args(args).output().expect("sluice runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-lwaftr-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn case(name: &str) -> PathBuf {
    let d = Path::new(CORPUS).join(name);
    assert!(
        d.join("lwaftr.conf").is_file(),
        "the lwAFTR corpus is missing: {} (expected beside the repository)",
        d.display()
    );
    d
}

fn frames(p: &Path) -> Vec<Vec<u8>> {
    if std::fs::metadata(p).unwrap().len() == 0 {
        return Vec::new();
    }
    pcap_records(p)
}

/// Frames of a classic pcap (little-endian, as Snabb and Sluice write them).
fn pcap_records(p: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(p).unwrap();
    assert_eq!(&b[..4], &0xa1b2_c3d4u32.to_le_bytes(), "{}", p.display());
    let (mut at, mut out) = (24, Vec::new());
    while at < b.len() {
        let n = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(b[at + 16..at + 16 + n].to_vec());
        at += 16 + n;
    }
    out
}

/// Runs `check` on corpus case `name` (an absent input = an empty file),
/// in two-interface mode or on a stick; asserts success and exact frames.
fn check_case(name: &str, on_a_stick: bool) {
    let c = case(name);
    let d = scratch(&format!("{name}-{on_a_stick}"));
    let empty = d.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let input = |f: &str| if c.join(f).is_file() { c.join(f) } else { empty.clone() };
    let (o4, o6) = (d.join("out-v4.pcap"), d.join("out-v6.pcap"));
    let mut args: Vec<String> = vec!["lwaftr".into(), "check".into()];
    if on_a_stick {
        args.push("--on-a-stick".into());
    }
    for p in [
        c.join("lwaftr.conf"),
        input("in-v4.pcap"),
        input("in-v6.pcap"),
        o4.clone(),
        o6.clone(),
        c.join("counters.txt"),
    ] {
        args.push(p.display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = sluice(&args);
    assert!(out.status.success(), "{name} (on a stick: {on_a_stick}): {}", text(&out));
    for (got, want) in [(&o4, c.join("out-v4.pcap")), (&o6, c.join("out-v6.pcap"))] {
        assert_eq!(frames(got), frames(&want), "{name} (on a stick: {on_a_stick}): {}", want.display());
        // Snabb's layout: little endian, 2.4, snaplen 65535, Ethernet, timestamps 0.
        let b = std::fs::read(got).unwrap();
        assert_eq!(
            &b[..24],
            &[0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0]
        );
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn corpus_cases_pass_in_both_modes() {
    for name in [
        "b4-bound-decap",
        "inet-bound-encap-vlan",
        "hairpin",
        "inet-udp-ipv6-fragment",
        "b4-ipv6-reassembly",
        "ndp-resolve-next-hop",
        "ping-aftr-v4-and-data",
    ] {
        check_case(name, false);
        check_case(name, true);
    }
}

#[test]
fn header_only_inputs_inject_nothing() {
    let c = case("b4-bound-decap");
    let d = scratch("header-only");
    let header = d.join("header.pcap");
    std::fs::write(&header, &std::fs::read(c.join("out-v6.pcap")).unwrap()[..24]).unwrap();
    let (o4, o6, counters) = (d.join("o4.pcap"), d.join("o6.pcap"), d.join("none.txt"));
    std::fs::write(&counters, "").unwrap();
    let s = |p: &Path| p.display().to_string();
    let out = sluice(&[
        "lwaftr",
        "check",
        &s(&c.join("lwaftr.conf")),
        &s(&header),
        &s(&header),
        &s(&o4),
        &s(&o6),
        &s(&counters),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(frames(&o4).is_empty() && frames(&o6).is_empty());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_wrong_counters_file_fails_naming_the_counter() {
    let c = case("b4-bound-decap");
    let d = scratch("wrong-counters");
    let want = std::fs::read_to_string(c.join("counters.txt")).unwrap();
    let bad = want.replace("out-ipv4-packets 1", "out-ipv4-packets 7");
    assert_ne!(bad, want, "the case counts out-ipv4-packets 1");
    let counters = d.join("counters.txt");
    std::fs::write(&counters, bad).unwrap();
    let empty = d.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let s = |p: &Path| p.display().to_string();
    let out = sluice(&[
        "lwaftr",
        "check",
        &s(&c.join("lwaftr.conf")),
        &s(&empty),
        &s(&c.join("in-v6.pcap")),
        &s(&d.join("o4.pcap")),
        &s(&d.join("o6.pcap")),
        &s(&counters),
    ]);
    assert!(!out.status.success(), "a wrong counters file passed: {}", text(&out));
    assert!(text(&out).contains("counter out-ipv4-packets: expected 7, got 1"), "{}", text(&out));
    // A counter the run did not change, expected anyway.
    std::fs::write(&counters, format!("{want}zzz-not-a-counter 1\n")).unwrap();
    let out = sluice(&[
        "lwaftr",
        "check",
        &s(&c.join("lwaftr.conf")),
        &s(&empty),
        &s(&c.join("in-v6.pcap")),
        &s(&d.join("o4.pcap")),
        &s(&d.join("o6.pcap")),
        &s(&counters),
    ]);
    assert!(!out.status.success() && text(&out).contains("missing counter zzz-not-a-counter = 1"), "{}", text(&out));
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_malformed_configuration_names_its_line_and_path() {
    let c = case("b4-bound-decap");
    let d = scratch("malformed");
    let conf = std::fs::read_to_string(c.join("lwaftr.conf")).unwrap();
    let (line, _) = conf
        .lines()
        .enumerate()
        .find(|(_, l)| l.trim_start().starts_with("max-fragments-per-packet "))
        .expect("a max-fragments-per-packet line");
    let bad: String = conf
        .lines()
        .enumerate()
        .map(|(i, l)| if i == line { "      max-fragments-per-packet banana;\n".to_string() } else { format!("{l}\n") })
        .collect();
    let path = d.join("bad.conf");
    std::fs::write(&path, bad).unwrap();
    let empty = d.join("empty.pcap");
    std::fs::write(&empty, b"").unwrap();
    let s = |p: &Path| p.display().to_string();
    let out = sluice(&["lwaftr", "check", &s(&path), &s(&empty), &s(&empty), &s(&d.join("o4")), &s(&d.join("o6"))]);
    assert!(!out.status.success());
    let msg = text(&out);
    assert!(msg.contains(&format!("{}:{}:", path.display(), line + 1)), "{msg}");
    assert!(msg.contains("/softwire-config/external-interface/reassembly/max-fragments-per-packet"), "{msg}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// generate-configuration writes a table and traffic that `check` runs
/// through without a drop, and `bench` prints its lines on them.
#[test]
fn generated_configuration_and_traffic_check_and_bench() {
    let d = scratch("generate");
    let s = |p: &Path| p.display().to_string();
    let (conf, v4, v6) = (d.join("gen.conf"), d.join("v4.pcap"), d.join("v6.pcap"));
    let out = sluice(&[
        "lwaftr",
        "generate-configuration",
        "193.5.1.100",
        "3",
        "fc00::100",
        "fc00:1:2:3:4:5:0:7e",
        "6",
        "--output",
        &s(&conf),
        "--pcap-v4",
        &s(&v4),
        "--pcap-v6",
        &s(&v6),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&conf).unwrap().matches("softwire {").count(), 189);
    assert_eq!((frames(&v4).len(), frames(&v6).len()), (189, 189));
    let counters = d.join("counters.txt");
    std::fs::write(
        &counters,
        // 550 B in each way; 510 B out decapsulated, 590 B out encapsulated.
        "in-ipv4-bytes 103950\nin-ipv4-frag-reassembly-unneeded 189\nin-ipv4-packets 189\n\
         in-ipv6-bytes 103950\nin-ipv6-frag-reassembly-unneeded 189\nin-ipv6-packets 189\n\
         out-ipv4-bytes 96390\nout-ipv4-frag-not 189\nout-ipv4-packets 189\n\
         out-ipv6-bytes 111510\nout-ipv6-frag-not 189\nout-ipv6-packets 189\n",
    )
    .unwrap();
    let out =
        sluice(&["lwaftr", "check", &s(&conf), &s(&v4), &s(&v6), &s(&d.join("o4")), &s(&d.join("o6")), &s(&counters)]);
    assert!(out.status.success(), "{}", text(&out));
    let out = sluice(&["lwaftr", "bench", &s(&conf), &s(&v4), &s(&v6), "--duration", "1.2", "--workers", "2"]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("Time (s),Decap. MPPS,Decap. Gbps,Encap. MPPS,Encap. Gbps"), "{t}");
    let line = t.lines().find(|l| l.starts_with("1.")).unwrap_or_else(|| panic!("no per-second line:\n{t}"));
    let v: Vec<f64> = line.split(',').map(|x| x.parse().unwrap()).collect();
    assert!(v.len() == 5 && v[1] > 0.0 && v[3] > 0.0, "{line}");
    assert!(t.contains("Summary: decapsulation ") && t.contains("result: program=lwaftr"), "{t}");
    std::fs::remove_dir_all(&d).unwrap();
}
