//! Conformance: every case of `../shared/conformance/bmv2/` byte-exact per
//! port (plus the CLI read-backs of `expect_cli.txt`), and every test of
//! `../shared/conformance/p4c-stf/` except those listed, with a reason, in
//! `tests/stf-known-failures.txt`, and the same for the PSA tests of
//! `../shared/conformance/p4c-stf-psa/` (`tests/stf-psa-known-failures.txt`).

use std::collections::BTreeSet;
mod common;

use std::path::Path;

use common::{case_dirs, check_expect_cli, shared};
use sluice_control::cli;
use sluice_engine::ExecMode;

fn run_bmv2_case(dir: &Path, mode: ExecMode) -> Result<(), String> {
    let name = format!("{} ({mode:?})", dir.file_name().unwrap().to_string_lossy());
    let mut sw = sluice::load_with(&dir.join("program.json"), mode)?;
    // Like simple_switch_CLI, a failing command is reported and the rest still run
    // (some cases exercise error paths, e.g. EMPTY_GRP).
    sluice::apply_commands(&mut sw, &dir.join("commands.txt"), false)?;
    let ports: BTreeSet<u32> = std::fs::read_to_string(dir.join("ports.txt"))
        .map_err(|e| e.to_string())?
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let outs = sluice::run_inputs(&mut sw, &dir.join("in"), Some(&ports), false)?;
    for p in &ports {
        let want: Vec<Vec<u8>> = sluice_ports::pcapfile::read_pcap(&dir.join(format!("out/{p}.pcap")))?
            .into_iter()
            .map(|(_, d)| d)
            .collect();
        let got = outs.get(p).cloned().unwrap_or_default();
        if want.len() != got.len() {
            return Err(format!("{name}: port {p}: expected {} packets, got {}", want.len(), got.len()));
        }
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            if w != g {
                let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                return Err(format!(
                    "{name}: port {p} packet {i} differs\n  expected {}\n  got      {}",
                    hex(w),
                    hex(g)
                ));
            }
        }
    }
    check_expect_cli(dir, &name, |cmd| cli::run(&mut sw, cmd).unwrap_or_else(|e| e.to_string()))?;
    Ok(())
}

#[test]
fn bmv2_corpus_is_byte_exact() {
    let dirs = case_dirs(&shared().join("bmv2"));
    assert!(dirs.len() >= 20, "expected the bmv2 corpus, found {} cases", dirs.len());
    for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
        let failures: Vec<String> = dirs.iter().filter_map(|d| run_bmv2_case(d, mode).err()).collect();
        assert!(failures.is_empty(), "{} of {} cases failed:\n{}", failures.len(), dirs.len(), failures.join("\n"));
    }
}

/// The test names of a known-failures list (`<name> <reason>` lines).
fn known_stf_failures(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect()
}

/// Every STF test of corpus `dir` (at least `min` of them) passes on both
/// paths, except those `known` lists, which must fail.
fn stf_corpus_passes(dir: &str, min: usize, known: &str, list: &str) {
    let dirs = case_dirs(&shared().join(dir));
    assert!(dirs.len() >= min, "expected the {dir} corpus, found {} tests", dirs.len());
    let known = known_stf_failures(known);
    let mut failed = Vec::new();
    let mut unexpectedly_passing = Vec::new();
    for d in &dirs {
        let n = d.file_name().unwrap().to_string_lossy().to_string();
        let (json, stf) = (d.join(format!("{n}.json")), d.join(format!("{n}.stf")));
        if !stf.exists() {
            continue;
        }
        for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
            let ok = matches!(sluice::p4::stf::run_stf_with(&json, &stf, false, mode), Ok(true));
            match (ok, known.contains(&n)) {
                (false, false) => failed.push(format!("{n} ({mode:?})")),
                (true, true) => unexpectedly_passing.push(format!("{n} ({mode:?})")),
                _ => {}
            }
        }
    }
    assert!(failed.is_empty(), "STF tests failed (not in {list}): {failed:?}");
    assert!(unexpectedly_passing.is_empty(), "STF tests now pass: remove them from {list}: {unexpectedly_passing:?}");
}

#[test]
fn p4c_stf_corpus_passes() {
    stf_corpus_passes("p4c-stf", 100, include_str!("stf-known-failures.txt"), "tests/stf-known-failures.txt");
}

/// The PSA programs of p4c's STF tests, through the PSA packet path.
#[test]
fn p4c_stf_psa_corpus_passes() {
    stf_corpus_passes(
        "p4c-stf-psa",
        15,
        include_str!("stf-psa-known-failures.txt"),
        "tests/stf-psa-known-failures.txt",
    );
}

#[test]
fn p4c_bench_programs_load() {
    for d in case_dirs(&shared().join("p4c-bench")) {
        let n = d.file_name().unwrap().to_string_lossy().to_string();
        sluice::load(&d.join(format!("{n}.json"))).unwrap_or_else(|e| panic!("{n}: {e}"));
    }
}

#[test]
fn stf_runner_reports_a_wrong_expectation() {
    let dir = shared().join("p4c-stf/arith-bmv2");
    let text = std::fs::read_to_string(dir.join("arith-bmv2.stf")).unwrap();
    // Flip the first hex digit of every expectation: the runner must fail.
    let broken: String = text
        .lines()
        .map(|l| {
            if let Some(rest) = l.strip_prefix("expect 0 ") {
                let mut c: Vec<char> = rest.chars().collect();
                let i = c.iter().position(|x| x.is_ascii_hexdigit()).unwrap();
                c[i] = if c[i] == '0' { '1' } else { '0' };
                format!("expect 0 {}\n", c.into_iter().collect::<String>())
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let tmp = std::env::temp_dir().join(format!("sluice-broken-{}.stf", std::process::id()));
    std::fs::write(&tmp, broken).unwrap();
    let r = sluice::p4::stf::run_stf(&dir.join("arith-bmv2.json"), &tmp, false);
    std::fs::remove_file(&tmp).ok();
    assert_eq!(r, Ok(false));
}

/// A PSA program whose externs Sluice does not run, or whose extern is
/// malformed, is refused at load with the extern's JSON path and why.
#[test]
fn psa_externs_sluice_does_not_run_are_refused_with_their_path() {
    let text = std::fs::read_to_string(shared().join("p4c-stf-psa/psa-meter7-bmv2/psa-meter7-bmv2.json")).unwrap();
    let program: serde_json::Value = serde_json::from_str(&text).unwrap();
    let load = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut p = program.clone();
        edit(&mut p["extern_instances"][0]);
        sluice_engine::load_switch(&p.to_string()).err().map(|e| e.to_string())
    };
    assert_eq!(load(&|_| {}), None, "the program as compiled loads");
    let digest = load(&|e| e["type"] = "Digest".into()).expect("a Digest is refused");
    assert!(digest.contains("extern_instances[0]") && digest.contains("\"Digest\""), "{digest}");
    let counter = load(&|e| e["type"] = "Counter".into()).expect("a Counter without n_counters is refused");
    assert!(counter.contains("extern_instances[0]") && counter.contains("n_counters"), "{counter}");
    let kind = load(&|e| e["attribute_values"][3]["value"] = "furlongs".into()).expect("a bad meter type is refused");
    assert!(kind.contains("extern_instances[0]") && kind.contains("furlongs"), "{kind}");
    let direct = load(&|e| e["attribute_values"][0]["value"] = 1.into()).expect("a direct meter is refused");
    assert!(direct.contains("extern_instances[0]") && direct.contains("\"Meter\""), "{direct}");
}

/// PSA's `Counter` and `Random`: p4c's meter test with its `Meter` made a
/// `Counter` (counted by `count`, read by `counter_read`) and the meter's
/// colour read from a `Random` of bounds 1..1 (GREEN: the packet goes on
/// to port 3, as the test expects).
#[test]
fn psa_counter_counts_and_random_reads_within_its_bounds() {
    let dir = shared().join("p4c-stf-psa/psa-meter7-bmv2");
    let text = std::fs::read_to_string(dir.join("psa-meter7-bmv2.json")).unwrap();
    let mut program: serde_json::Value = serde_json::from_str(&text).unwrap();
    let meter = program["extern_instances"][0].clone();
    let name = meter["name"].as_str().unwrap().to_string();
    program["extern_instances"] = serde_json::json!([
        {"name": name, "id": 0, "type": "Counter", "attribute_values": [
            {"name": "n_counters", "type": "hexstr", "value": "0x00000400"},
            {"name": "type", "type": "string", "value": "packets"}]},
        {"name": "colour", "id": 1, "type": "Random", "attribute_values": [
            {"name": "min", "type": "hexstr", "value": "0x1"},
            {"name": "max", "type": "hexstr", "value": "0x1"}]},
    ]);
    let actions = program["actions"].as_array_mut().unwrap();
    let action = actions.iter_mut().find(|a| a["primitives"].to_string().contains("_Meter_execute")).unwrap();
    let prims = action["primitives"].as_array_mut().unwrap();
    let at = prims.iter().position(|p| p["op"] == "_Meter_execute").unwrap();
    let params = prims[at]["parameters"].clone();
    prims[at] = serde_json::json!({"op": "_Counter_count", "parameters": [params[0], params[1]]});
    prims.push(serde_json::json!({"op": "_Random_read", "parameters": [
        {"type": "extern", "value": "colour"}, params[2]]}));
    for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
        let mut sw = sluice_engine::load_switch(&program.to_string()).unwrap();
        sw.set_mode(mode).unwrap();
        let frame = [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        let mut outs = Vec::new();
        for _ in 0..3 {
            sw.process(4, &frame, &mut |p, d| outs.push((p, d.to_vec())));
        }
        assert_eq!(outs.len(), 3, "{mode:?}: GREEN from the Random sends each packet on");
        assert!(outs.iter().all(|(p, d)| *p == 3 && d[5] == 3), "{mode:?}: {outs:?}");
        let read = cli::run(&mut sw, &format!("counter_read {name} 1")).unwrap();
        assert!(read.contains("(42 bytes, 3 packets)"), "{mode:?}: {read}");
        let other = cli::run(&mut sw, &format!("counter_read {name} 2")).unwrap();
        assert!(other.contains("(0 bytes, 0 packets)"), "{mode:?}: {other}");
    }
    // p4c-bm2-psa also lists an indirect Counter in `counter_arrays`: still one array.
    program["counter_arrays"] = serde_json::json!([{"name": name, "id": 0, "is_direct": false, "size": 1024}]);
    let mut sw = sluice_engine::load_switch(&program.to_string()).unwrap();
    assert_eq!(sw.program().counters.len(), 1, "one array for {name}");
    sw.process(4, &[0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xff, 0xff], &mut |_, _| {});
    let read = cli::run(&mut sw, &format!("counter_read {name} 1")).unwrap();
    assert!(read.contains("(14 bytes, 1 packets)"), "{read}");
}

/// A PSA packet whose control fails an `assert` is dropped (PSA's `drop`,
/// not v1model's drop port), on both paths.
#[test]
fn a_failed_assert_drops_a_psa_packet() {
    let dir = shared().join("p4c-stf-psa/psa-top-level-assignments-bmv2");
    let text = std::fs::read_to_string(dir.join("psa-top-level-assignments-bmv2.json")).unwrap();
    let program: serde_json::Value = serde_json::from_str(&text).unwrap();
    let frame = [0xca, 0xfe, 0xd0, 0x0d, 0xbe, 0xad, 0x12, 0x34, 0x56, 0x78, 0x90, 0xab, 0xff, 0xff];
    for (assert, want) in [(true, 1), (false, 0)] {
        let mut p = program.clone();
        p["actions"][0]["primitives"].as_array_mut().unwrap().push(serde_json::json!({
            "op": "assert",
            "parameters": [{"type": "expression", "value": {"type": "bool", "value": assert}}]
        }));
        for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
            let mut sw = sluice_engine::load_switch(&p.to_string()).unwrap();
            sw.set_mode(mode).unwrap();
            let mut outs = Vec::new();
            sw.process(1, &frame, &mut |port, d| outs.push((port, d.to_vec())));
            assert_eq!(outs.len(), want, "assert({assert}), {mode:?}: {outs:?}");
            assert!(outs.iter().all(|(port, _)| *port == 3), "{outs:?}");
        }
    }
}

/// PSA's `InternetChecksum` in a deparser: p4c's internet_checksum1 with
/// its egress parser made to parse the IPv4 header (in the test as
/// compiled it parses nothing, so the egress deparser's checksum lands in
/// an invalid header and nothing checks it). The egress deparser's
/// `clear`, `add` and `get` then rewrite a wrong or zero header checksum
/// with the right one.
#[test]
fn psa_internet_checksum_rewrites_the_ipv4_header_checksum() {
    let dir = shared().join("p4c-stf-psa/internet_checksum1-bmv2");
    let text = std::fs::read_to_string(dir.join("internet_checksum1-bmv2.json")).unwrap();
    let mut program: serde_json::Value = serde_json::from_str(&text).unwrap();
    let parsers = program["parsers"].as_array_mut().unwrap();
    let ingress = parsers.iter().find(|p| p["name"] == "ingress_parser").unwrap().clone();
    let (start, mut ipv4) = (ingress["parse_states"][0].clone(), ingress["parse_states"][1].clone());
    ipv4["parser_ops"].as_array_mut().unwrap().truncate(1); // the extract only
    let egress = parsers.iter_mut().find(|p| p["name"] == "egress_parser").unwrap();
    egress["parse_states"] = serde_json::json!([start, ipv4]);
    let tmp = std::env::temp_dir().join(format!("sluice-psa-csum-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let json = tmp.join("program.json");
    std::fs::write(&json, program.to_string()).unwrap();
    let frame =
        |csum: &str| format!("525400123502080027018bbc0800 00FE C523 FDA1 D68A AF02 {csum} 0000 0001 0000 0002");
    for wrong in ["0000", "1234", "b6ab"] {
        let stf = tmp.join("test.stf");
        std::fs::write(&stf, format!("packet 0 {}\nexpect 0 {}\n", frame(wrong), frame("b6ab"))).unwrap();
        for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
            let ok = sluice::p4::stf::run_stf_with(&json, &stf, false, mode);
            assert!(matches!(ok, Ok(true)), "checksum {wrong}, {mode:?}: {ok:?}");
        }
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A PSA clone session's truncation and class of service (P4Runtime's
/// `packet_length_bytes` and `class_of_service`): an E2E clone of p4c's
/// psa-e2e-cloning-basic is cut to the session's length before its egress
/// parser, and its egress sees the session's class of service (written into
/// the clone's destination MAC here), on both paths.
#[test]
fn psa_clone_sessions_truncate_and_carry_their_class_of_service() {
    let dir = shared().join("p4c-stf-psa/psa-e2e-cloning-basic-bmv2");
    let text = std::fs::read_to_string(dir.join("psa-e2e-cloning-basic-bmv2.json")).unwrap();
    let mut program: serde_json::Value = serde_json::from_str(&text).unwrap();
    let actions = program["actions"].as_array_mut().unwrap();
    let on_clone = actions.iter_mut().find(|a| a["name"] == "psae2ecloningbasicbmv2l84").unwrap();
    on_clone["primitives"].as_array_mut().unwrap().push(serde_json::json!({"op": "assign", "parameters": [
        {"type": "field", "value": ["ethernet", "dstAddr"]},
        {"type": "field", "value": ["psa_egress_input_metadata", "class_of_service"]}]}));
    for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
        let mut sw = sluice_engine::load_switch(&program.to_string()).unwrap();
        sw.set_mode(mode).unwrap();
        for c in ["mc_mgrp_create 3", "mc_node_create 0 6", "mc_node_create 0 7"] {
            cli::run(&mut sw, c).unwrap();
        }
        for c in ["mc_node_associate 3 0", "mc_node_associate 3 1"] {
            cli::run(&mut sw, c).unwrap();
        }
        let session =
            sluice_engine::state::MirrorSession { mgid: Some(3), truncate: Some(16), cos: 5, ..Default::default() };
        sw.mirror_set(8, session);
        let mut frame = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        frame.extend_from_slice(b"0123456789");
        let mut outs = Vec::new();
        sw.process(1, &frame, &mut |p, d| outs.push((p, d.to_vec())));
        outs.sort();
        let clone = [&[0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0xca, 0xfe, 0xfa, 0xce][..], b"01"].concat();
        let original = [&[0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0xca, 0xfe, 0xff, 0xff][..], b"0123456789"].concat();
        assert_eq!(outs, vec![(2, original), (6, clone.clone()), (7, clone)], "{mode:?}");
    }
}

/// PSA's `DirectCounter` and `DirectMeter` as p4c-bm2-psa emits them: the
/// arrays (`is_direct`, bound to the table by `binding`; the table's own
/// `with_counters` false and `direct_meters` null) and a `DirectCounter`
/// declaration. p4c's psa-metadata (made to forward on a hit) counts each
/// hit in the entry's counter, and its direct meter writes PSA's GREEN (1)
/// into the result field; a miss counts nothing. Both paths.
#[test]
fn psa_direct_counters_and_meters_count_hits_of_their_table() {
    let mut program = psa_metadata_forwarding();
    program["counter_arrays"] = serde_json::json!([
        {"name": "ingress.hits", "id": 0, "is_direct": true, "binding": "ingress.match_meta"}]);
    program["meter_arrays"] = serde_json::json!([{"name": "ingress.dm", "id": 0, "is_direct": true,
        "rate_count": 2, "type": "packets", "size": 1024, "binding": "ingress.match_meta",
        "result_target": ["ethernet", "srcAddr"]}]);
    program["extern_instances"] = serde_json::json!([{"name": "ingress.hits", "id": 0, "type": "DirectCounter",
        "attribute_values": [{"name": "type", "type": "hexstr", "value": "0x00000001"}]}]);
    for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
        let mut sw = sluice_engine::load_switch(&program.to_string()).unwrap();
        sw.set_mode(mode).unwrap();
        let added = cli::run(&mut sw, "table_add ingress.match_meta ingress.set_output 5 => 3").unwrap();
        assert!(added.contains("handle 0"), "{added}");
        let mut outs = Vec::new();
        for dst in [5u8, 5, 6] {
            let frame = [0, 0, 0, 0, 0, dst, 0, 0, 0, 0, 0, 9, 0x88, 0xb5];
            sw.process(1, &frame, &mut |p, d| outs.push((p, d.to_vec())));
        }
        let hit = vec![0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 1, 0x88, 0xb5];
        assert_eq!(
            outs,
            vec![(3, hit.clone()), (3, hit)],
            "{mode:?}: two hits forwarded (GREEN = 1), the miss dropped"
        );
        let read = cli::run(&mut sw, "counter_read ingress.hits 0").unwrap();
        assert!(read.contains("(28 bytes, 2 packets)"), "{mode:?}: {read}");
    }
}

/// p4c's psa-metadata with `ingress.set_output` also clearing PSA's drop:
/// a hit of `ingress.match_meta` (keyed by the destination MAC's last
/// byte) sends the frame to the entry's port, a miss drops it.
fn psa_metadata_forwarding() -> serde_json::Value {
    let dir = shared().join("p4c-stf-psa/psa-metadata-bmv2");
    let text = std::fs::read_to_string(dir.join("psa-metadata-bmv2.json")).unwrap();
    let mut program: serde_json::Value = serde_json::from_str(&text).unwrap();
    let set_output = program["actions"].as_array_mut().unwrap().iter_mut().find(|a| a["name"] == "ingress.set_output");
    set_output.unwrap()["primitives"].as_array_mut().unwrap().push(serde_json::json!({"op": "assign", "parameters": [
        {"type": "field", "value": ["psa_ingress_output_metadata", "drop"]},
        {"type": "expression", "value": {"type": "expression", "value":
            {"op": "b2d", "left": null, "right": {"type": "bool", "value": false}}}}]}));
    program
}

/// A PSA table implemented by an `ActionSelector` (`psa_implementation`),
/// as p4c-bm2-psa writes it: the table `indirect_ws` with its
/// `action_profile`, the pipeline's `action_profiles` entry with a
/// selector hashing the source MAC. Members and a group through the CLI;
/// the group spreads sources over both members' ports, the same source
/// always to the same port; a member entry sends to its port; an entry
/// whose group was emptied runs no action. Both paths.
#[test]
fn psa_action_selector_spreads_a_group_and_runs_members() {
    let mut program = psa_metadata_forwarding();
    let ingress = &mut program["pipelines"][0];
    ingress["action_profiles"] = serde_json::json!([{"name": "ingress.sel", "id": 0, "max_size": 64,
        "selector": {"algo": "crc16", "input": [{"type": "field", "value": ["ethernet", "srcAddr"]}]}}]);
    let table = ingress["tables"].as_array_mut().unwrap().iter_mut().find(|t| t["name"] == "ingress.match_meta");
    let table = table.unwrap();
    table["type"] = "indirect_ws".into();
    table["action_profile"] = "ingress.sel".into();
    table.as_object_mut().unwrap().remove("default_entry");
    for mode in [ExecMode::Compiled, ExecMode::Interpreted] {
        let mut sw = sluice_engine::load_switch(&program.to_string()).unwrap();
        sw.set_mode(mode).unwrap();
        for c in [
            "act_prof_create_member ingress.sel ingress.set_output 2",
            "act_prof_create_member ingress.sel ingress.set_output 3",
            "act_prof_create_group ingress.sel",
            "act_prof_add_member_to_group ingress.sel 0 0",
            "act_prof_add_member_to_group ingress.sel 1 0",
            "table_indirect_add_with_group ingress.match_meta 5 => 0",
            "table_indirect_add ingress.match_meta 6 => 1",
            "act_prof_create_group ingress.sel",
            "act_prof_add_member_to_group ingress.sel 0 1",
            "table_indirect_add_with_group ingress.match_meta 7 => 1",
            "act_prof_remove_member_from_group ingress.sel 0 1",
        ] {
            cli::run(&mut sw, c).unwrap_or_else(|e| panic!("{c}: {e}"));
        }
        let send = |sw: &mut sluice_engine::Switch, dst: u8, src: u8| {
            let mut out = Vec::new();
            sw.process(1, &[0, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src, 0x88, 0xb5], &mut |p, _| out.push(p));
            out
        };
        let ports: BTreeSet<u32> = (0..32).flat_map(|src| send(&mut sw, 5, src)).collect();
        assert_eq!(ports, BTreeSet::from([2, 3]), "{mode:?}: the group spreads sources over both members");
        assert_eq!(send(&mut sw, 5, 7), send(&mut sw, 5, 7), "{mode:?}: one source, one member");
        assert_eq!(send(&mut sw, 6, 7), vec![3], "{mode:?}: the member entry");
        assert_eq!(send(&mut sw, 9, 7), Vec::<u32>::new(), "{mode:?}: a miss is dropped");
        // An emptied group runs no action (as bmv2): PSA's drop stays set.
        assert_eq!(send(&mut sw, 7, 7), Vec::<u32>::new(), "{mode:?}: an empty group");
    }
}
