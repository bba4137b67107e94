//! `sluice bench` and `sluice inspect` as a user runs them: the built-in
//! examples forward their generated traffic, the router matches the
//! hand-written reference byte for byte (the bench checks that before it
//! measures and fails otherwise), and the result line carries the ratio.
//! Nothing here asserts a speed.

mod common;

use std::process::Command;

/// Runs sluice with the conformance corpus where the corpus examples read it.
fn sluice(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .env("SLUICE_CORPUS", common::shared())
        .args(args)
        .output()
        .expect("sluice runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "sluice {} failed:\n{text}", args.join(" "));
    text
}

/// The value of `key=` on the `result:` line.
fn result_field<'a>(text: &'a str, key: &str) -> &'a str {
    let line = text.lines().find(|l| l.starts_with("result: ")).unwrap_or_else(|| panic!("no result line in:\n{text}"));
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
}

/// `(packets, sent, dropped)` from the summary line.
fn summary(text: &str) -> (u64, u64, u64) {
    let line = text.lines().find(|l| l.starts_with("summary: ")).unwrap_or_else(|| panic!("no summary in:\n{text}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    let num = |after: &str| -> u64 {
        let i = w.iter().position(|x| *x == after).unwrap_or_else(|| panic!("no {after} in {line}"));
        w[i - 1].parse().unwrap_or_else(|_| panic!("bad number before {after} in {line}"))
    };
    (w[1].parse().expect("packet count"), num("sent,"), num("dropped"))
}

#[test]
fn router_bench_matches_the_reference_and_reports_the_ratio() {
    for (entries, size, workers) in [("100", "64", "1"), ("20000", "256", "2")] {
        let text = sluice(&[
            "bench",
            "--example",
            "router",
            "--entries",
            entries,
            "--size",
            size,
            "--workers",
            workers,
            "--duration",
            "0.3",
        ]);
        let (packets, sent, dropped) = summary(&text);
        assert!(packets > 0 && sent == packets && dropped == 0, "{text}");
        assert_eq!(result_field(&text, "program"), "router");
        assert_eq!(result_field(&text, "entries"), entries);
        assert_eq!(result_field(&text, "workers"), workers);
        assert_eq!(result_field(&text, "size"), size, "average frame size");
        let mpps: f64 = result_field(&text, "mpps").parse().expect("mpps");
        let reference: f64 = result_field(&text, "reference_mpps").parse().expect("reference_mpps");
        let ratio: f64 = result_field(&text, "ratio").parse().expect("ratio");
        assert!(mpps > 0.0 && reference > 0.0, "{text}");
        assert!((ratio - mpps / reference).abs() < 0.01, "ratio {ratio} is not {mpps} / {reference}");
    }
}

/// The numbers after `prefix` on the line that starts with it.
fn numbers_after(text: &str, prefix: &str) -> Vec<f64> {
    let line = text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no '{prefix}' line in:\n{text}"));
    line[prefix.len()..]
        .split_whitespace()
        .map(|v| v.parse().unwrap_or_else(|_| panic!("bad number in {line}")))
        .collect()
}

#[test]
fn bench_rounds_alternate_engine_and_reference_and_report_the_medians() {
    let text = sluice(&["bench", "--example", "router", "--entries", "10", "--duration", "0.2", "--rounds", "3"]);
    // Each turn replays the same traffic: every one forwards all of it.
    let summaries: Vec<&str> = text.lines().filter(|l| l.starts_with("summary: ")).collect();
    assert_eq!(summaries.len(), 3, "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("reference: ")).count(), 3, "{text}");
    let engine = numbers_after(&text, "turns: engine Mpps ");
    let reference = numbers_after(&text, "turns: reference Mpps ");
    let ratios = numbers_after(&text, "turns: ratio ");
    assert_eq!((engine.len(), reference.len(), ratios.len()), (3, 3, 3), "{text}");
    for ((e, r), q) in engine.iter().zip(&reference).zip(&ratios) {
        assert!(*e > 0.0 && *r > 0.0 && (q - e / r).abs() < 0.01, "turn ratio {q} is not {e} / {r}");
    }
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[1]
    };
    let field = |k: &str| -> f64 { result_field(&text, k).parse().expect("a number") };
    assert!((field("mpps") - median(&engine)).abs() < 0.001, "{text}");
    assert!((field("reference_mpps") - median(&reference)).abs() < 0.001, "{text}");
    assert!((field("ratio") - median(&ratios)).abs() < 0.001, "{text}");
    assert_eq!(result_field(&text, "rounds"), "3");
}

#[test]
fn edge_bench_forwards_everything_and_reports_its_acl_cache() {
    let text = sluice(&[
        "bench",
        "--example",
        "edge",
        "--entries",
        "300",
        "--acl",
        "200",
        "--duration",
        "0.3",
        "--no-reference",
    ]);
    let (packets, sent, dropped) = summary(&text);
    assert!(packets > 0 && sent == packets && dropped == 0, "{text}");
    assert_eq!(result_field(&text, "reference_mpps"), "-");
    let cache = text.lines().find(|l| l.starts_with("lookup cache of EdgeIngress.acl")).expect("cache line");
    assert!(cache.contains(" hits, ") && cache.contains(" misses "), "{cache}");
}

#[test]
fn l2_learning_bench_forwards_everything() {
    let text =
        sluice(&["bench", "--example", "l2-learning", "--entries", "500", "--duration", "0.3", "--no-reference"]);
    let (packets, sent, dropped) = summary(&text);
    assert!(packets > 0 && sent == packets && dropped == 0, "{text}");
}

#[test]
fn bench_rejects_more_entries_than_the_program_holds() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "--example", "l2-learning", "--entries", "70000", "--duration", "0.1"])
        .output()
        .expect("sluice runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("configuration failed"), "{err}");
}

#[test]
fn inspect_shows_each_stage_and_the_lpm_index_that_entries_bring() {
    let dir = std::env::temp_dir().join(format!("sluice-inspect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let commands = dir.join("routes.txt");
    std::fs::write(&commands, sluice::p4::bench::router_commands(100, sluice::p4::bench::RouteLayout::Consecutive))
        .unwrap();
    let router = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/router.json");
    let empty = sluice(&["inspect", "--no-code", router]);
    for want in [
        "parser: native code",
        "state start: byte copies of ethernet (14 B); select on an integer key, 3 cases",
        "specialized (direct sum into the field)",
        "RouterIngress.ipv4_lpm [lpm/32b] 0 entries: key built as one integer in generated code (direct arrays, DIR-24-8 and open addressing looked up inline, other indexes get the key from it); lpm: a hash probe per prefix length (0 now); direct-indexed from 8 entries; prefetched after parsing",
        "RouterIngress.nexthop [exact/16b] 0 entries: key built as one integer in generated code (direct arrays, DIR-24-8 and open addressing looked up inline, other indexes get the key from it); exact: direct array",
        "deparser: byte copies of 3 header(s)",
    ] {
        assert!(empty.contains(want), "missing {want:?} in:\n{empty}");
    }
    assert!(!empty.contains("function u0:0"), "--no-code still printed code");
    let loaded = sluice(&["inspect", router, "--commands", commands.to_str().unwrap()]);
    assert!(
        loaded.contains(
            "RouterIngress.ipv4_lpm [lpm/32b] 100 entries: key built as one integer in generated code (direct arrays, DIR-24-8 and open addressing looked up inline, other indexes get the key from it); lpm: direct-indexed (DIR-24-8)"
        ),
        "{loaded}"
    );
    assert!(loaded.contains("; parser\nfunction"), "no parser code listed:\n{loaded}");
    // edge's parser assigns metadata and runs `verify`: still native code.
    let edge = sluice(&["inspect", "--no-code", concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/edge.json")]);
    assert!(edge.contains("parser: native code"), "{edge}");
    // Its 17-byte ACL key is built in generated code for the tuple search.
    assert!(edge.contains("key built as four words in generated code, searched by the engine"), "{edge}");
    // fabric's parser extracts header stacks and uses lookahead: interpreted, with the reason.
    let fabric_json = common::shared().join("p4c-bench/fabric/fabric.json");
    let fabric = sluice(&["inspect", "--no-code", fabric_json.to_str().unwrap()]);
    assert!(fabric.contains("parser: interpreted (a state extracts a non-wire-format header or stack"), "{fabric}");
    std::fs::remove_dir_all(&dir).ok();
}

/// The lab's corpus program: p4c's basic_routing-bmv2, read from the
/// conformance corpus, forwards all of its generated traffic (half to hosts
/// of its exact table, half through its LPM table after a host miss); with
/// the corpus elsewhere, the error says where it looked and what to set.
#[test]
fn basic_routing_from_the_corpus_forwards_everything() {
    let run = |corpus: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .env("SLUICE_CORPUS", corpus)
            .args(["bench", "--example", "basic-routing", "--entries", "3000", "--duration", "0.3", "--no-reference"])
            .output()
            .expect("sluice runs")
    };
    let out = run(&common::shared());
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    let (packets, sent, dropped) = summary(&text);
    assert!(packets > 0 && sent == packets && dropped == 0, "{text}");
    assert_eq!(result_field(&text, "program"), "basic_routing");
    let out = run(std::path::Path::new("/nonexistent-corpus"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent-corpus/p4c-bench/basic_routing-bmv2") && err.contains("SLUICE_CORPUS"), "{err}");
}

/// The lab's PSA corpus programs: psa-unicast sends every generated frame
/// on (the bench checks the ports first), psa-metadata drops every frame
/// after its table; both through compiled parsers and controls.
#[test]
fn psa_corpus_programs_run_in_the_bench() {
    let text = sluice(&["bench", "--example", "psa-unicast", "--entries", "16", "--duration", "0.3", "--no-reference"]);
    let (packets, sent, dropped) = summary(&text);
    assert!(packets > 0 && sent == packets && dropped == 0, "{text}");
    assert_eq!(result_field(&text, "program"), "psa_unicast");
    assert_eq!(result_field(&text, "mode"), "compiled");
    // `--profile` names PSA's stages: both parsers and both deparsers see every packet.
    let text = sluice(&[
        "bench",
        "--example",
        "psa-unicast",
        "--entries",
        "16",
        "--duration",
        "0.3",
        "--no-reference",
        "--profile",
    ]);
    let calls = |stage: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(stage)).unwrap_or_else(|| panic!("no {stage}:\n{text}"));
        line[stage.len()..].split_whitespace().next().unwrap().parse().unwrap()
    };
    let parsed = calls("parser ");
    assert!(parsed > 0, "{text}");
    for stage in ["egress parser ", "deparser ", "egress deparser "] {
        assert!(calls(stage).abs_diff(parsed) <= parsed / 10, "{stage}: {} for {parsed} parsed\n{text}", calls(stage));
    }
    let text =
        sluice(&["bench", "--example", "psa-metadata", "--entries", "256", "--duration", "0.3", "--no-reference"]);
    let (packets, sent, dropped) = summary(&text);
    assert!(packets > 0 && sent == 0 && dropped == packets, "{text}");
    assert_eq!(result_field(&text, "entries"), "256");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .env("SLUICE_CORPUS", common::shared())
        .args(["bench", "--example", "psa-metadata", "--entries", "257", "--duration", "0.1"])
        .output()
        .expect("sluice runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--entries 257") && err.contains("at most 256"), "{err}");
    for name in ["psa-unicast-or-drop-corrected-bmv2", "psa-metadata-bmv2"] {
        let json = common::shared().join(format!("p4c-stf-psa/{name}/{name}.json"));
        let report = sluice(&["inspect", "--no-code", json.to_str().unwrap()]);
        for want in [
            "ingress parser: native code",
            "egress parser: native code",
            "forwarding: stage by stage: ingress and egress controls as native code",
            "ingress deparser: byte copies of 1 header(s)",
            "egress deparser: byte copies of 1 header(s)",
        ] {
            assert!(report.contains(want), "{name}: missing {want:?} in:\n{report}");
        }
    }
}

/// `--profile`: a table of the stages the packets went through, with
/// packets per stage that add up to what the bench ran (the table is read
/// while the workers still run, a few batches before the end).
#[test]
fn bench_profile_reports_where_the_time_went_per_stage() {
    // Compiled: the generated batch function is one stage.
    let text = sluice(&[
        "bench",
        "--example",
        "router",
        "--entries",
        "100",
        "--duration",
        "0.3",
        "--no-reference",
        "--profile",
    ]);
    let (packets, _, _) = summary(&text);
    let line = text.lines().find(|l| l.starts_with("batch function")).unwrap_or_else(|| panic!("no stage:\n{text}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    let (calls, pkts): (u64, u64) = (cols[2].parse().unwrap(), cols[3].parse().unwrap());
    assert!(calls > 0 && pkts <= packets && pkts >= packets / 10 * 9, "{line} for {packets} packets");
    // Interpreted: parser, ingress and deparser each count every packet.
    let text = sluice(&[
        "--interpret",
        "bench",
        "--example",
        "router",
        "--entries",
        "100",
        "--duration",
        "0.3",
        "--no-reference",
        "--profile",
    ]);
    for stage in ["parser", "ingress", "deparser"] {
        assert!(text.lines().any(|l| l.starts_with(stage)), "no {stage} stage:\n{text}");
    }
}

/// `sluice openflow-bench` checks the OpenFlow router against the P4
/// router before measuring, says how each table is looked up (a route
/// table this big runs on the longest-prefix template), and reports both
/// rates and their ratio, with and without the flow cache.
#[test]
fn openflow_bench_checks_against_the_p4_router_and_shows_the_table_lookups() {
    for cache in [None, Some("--no-flow-cache")] {
        let mut args = vec!["openflow-bench", "--entries", "3000", "--duration", "0.3", "--rounds", "1"];
        args.extend(cache);
        let text = sluice(&args);
        assert!(text.contains("check: the OpenFlow switch and the P4 router emit the same"), "{text}");
        assert!(text.contains("table 0: 1 entries, classifier"), "{text}");
        assert!(text.contains("table 1: 3000 entries, longest-prefix match"), "{text}");
        assert!(result_field(&text, "openflow_mpps").parse::<f64>().unwrap() > 0.0, "{text}");
        assert!(result_field(&text, "ratio").parse::<f64>().unwrap() > 0.0, "{text}");
    }
}

/// A 3-second soak of `data_plane` on two workers while updates are asked
/// at 10 000 a second: nothing lost, nothing mis-forwarded, thousands of
/// updates applied, memory steady.
fn short_soak(data_plane: &str) {
    let text = sluice(&[
        "soak",
        "--data-plane",
        data_plane,
        "--duration",
        "3",
        "--workers",
        "2",
        "--updates-per-second",
        "10000",
    ]);
    let line = text.lines().find(|l| l.starts_with("soak: ")).unwrap_or_else(|| panic!("{text}"));
    let num = |after: &str| -> u64 {
        line.split(after).next().unwrap().rsplit(' ').next().unwrap().trim_start_matches('(').parse().unwrap()
    };
    assert!(num(" packets in") > 100_000, "{line}");
    assert_eq!(num(" lost"), 0, "{line}");
    assert_eq!(num(" mis-forwarded"), 0, "{line}");
    // Updates land as fast as the workers take them: on a loaded machine
    // (the suite runs tests side by side) fewer than asked; thousands still.
    assert!(num(" updates") >= 1_000, "updates landed while the workers forwarded: {line}");
    let rss: Vec<u64> = line
        .rsplit("RSS ")
        .next()
        .unwrap()
        .split(" -> ")
        .map(|s| s.trim_end_matches(" KiB").parse().unwrap())
        .collect();
    assert!(rss[1] < rss[0] + 16 * 1024, "RSS grew by more than 16 MiB: {line}");
}

/// The short soak of the router: its next hops rewritten (a packet must
/// leave as one whole version of its entry, in sequence).
#[test]
fn a_short_soak_loses_and_misforwards_nothing_under_table_updates() {
    short_soak("router");
}

/// The short soak of the OpenFlow switch: its route flows rewritten by
/// MODIFY_STRICT flow-mods (through its flow cache).
#[test]
fn a_short_openflow_soak_loses_and_misforwards_nothing_under_flow_mods() {
    short_soak("openflow");
}

/// The short soak of the lwAFTR: its softwires' B4 addresses rewritten
/// (an encapsulated packet must go to one version of its softwire's B4).
#[test]
fn a_short_lwaftr_soak_loses_and_misforwards_nothing_under_softwire_updates() {
    short_soak("lwaftr");
}

/// `sluice bench --inject-faults`: the router's traffic goes through the
/// fault injector once, what it injected is reported, and the damaged
/// frames the router drops show in the summary; faults of live ports
/// (flaps, failed sends) are refused with a message.
#[test]
fn the_bench_replays_traffic_with_injected_faults() {
    let text = sluice(&[
        "bench",
        "--duration",
        "0.5",
        "--inject-faults",
        "drop=0.1,dup=0.05,reorder=0.05,truncate=0.1,corrupt=0.05,seed=3",
    ]);
    let injected = text.lines().find(|l| l.contains("traffic injected: ")).unwrap_or_else(|| panic!("{text}"));
    for what in [" dropped", " duplicated", " reordered", " truncated", " corrupted"] {
        let n: u64 = injected.split(what).next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
        assert!(n > 0, "nothing{what}: {injected}");
    }
    assert_eq!(result_field(&text, "reference_mpps"), "-", "no reference run on faulty traffic:\n{text}");
    let summary = text.lines().find(|l| l.starts_with("summary: ")).unwrap_or_else(|| panic!("{text}"));
    let dropped: u64 = summary.rsplit(", ").next().unwrap().trim_end_matches(" dropped").parse().unwrap();
    assert!(dropped > 0, "the router drops the truncated frames: {summary}");
    let out =
        Command::new(env!("CARGO_BIN_EXE_sluice")).args(["bench", "--inject-faults", "flap=1s/1s"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("flap and send-fail act on live ports"), "{err}");
}
