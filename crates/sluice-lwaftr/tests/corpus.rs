//! The lwAFTR conformance corpus (`shared/conformance/lwaftr`, Snabb's
//! end-to-end cases): every case in two-interface mode and on a stick
//! (except the two misplaced-frame cases FORMAT.md skips there), frames
//! compared byte for byte per side and the changed counters exactly.
//! `tests/lwaftr-known-failures.txt` lists the `case mode reason` lines
//! expected to fail; the test fails when a listed case passes too, so the
//! list stays true. A missing corpus is a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use sluice_lwaftr::check::{check, counter_differences, counters_text, parse_counters};
use sluice_lwaftr::conf::Config;
use sluice_ports::pcapfile::frames_of as pcap_frames;

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/lwaftr");
const KNOWN: &str = include_str!("lwaftr-known-failures.txt");
const STICK_SKIPS: [&str; 2] = ["v4-iface-non-ipv4", "v4-iface-non-ipv4-vlan"];

fn frames(dir: &Path, name: &str) -> Vec<Vec<u8>> {
    match fs::read(dir.join(name)) {
        Ok(b) => pcap_frames(&b).unwrap_or_else(|e| panic!("{}/{name}: {e}", dir.display())),
        Err(_) => Vec::new(),
    }
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join("")
}

fn compare(side: &str, got: &[Vec<u8>], want: &[Vec<u8>]) -> Option<String> {
    for i in 0..got.len().max(want.len()) {
        match (got.get(i), want.get(i)) {
            (Some(g), Some(w)) if g == w => {}
            (Some(g), Some(w)) => {
                let at = g.iter().zip(w.iter()).position(|(a, b)| a != b).unwrap_or(g.len().min(w.len()));
                return Some(format!(
                    "{side} frame {} differs at byte {at} (got {} B, want {} B)\n  got  {}\n  want {}",
                    i + 1,
                    g.len(),
                    w.len(),
                    hex(g),
                    hex(w)
                ));
            }
            (Some(g), None) => return Some(format!("{side}: unexpected frame {} ({} B) {}", i + 1, g.len(), hex(g))),
            (None, Some(w)) => return Some(format!("{side}: missing frame {} ({} B) {}", i + 1, w.len(), hex(w))),
            (None, None) => {}
        }
    }
    None
}

fn run_case(dir: &Path, on_a_stick: bool) -> Result<(), String> {
    let text = fs::read_to_string(dir.join("lwaftr.conf")).map_err(|e| e.to_string())?;
    let conf = Config::parse(&text, "lwaftr.conf").map_err(|e| format!("{e:?}"))?;
    let r = check(&conf, &frames(dir, "in-v4.pcap"), &frames(dir, "in-v6.pcap"), on_a_stick)?;
    let mut problems = Vec::new();
    if let Some(p) = compare("v4", &r.out_v4, &frames(dir, "out-v4.pcap")) {
        problems.push(p);
    }
    if let Some(p) = compare("v6", &r.out_v6, &frames(dir, "out-v6.pcap")) {
        problems.push(p);
    }
    if let Ok(text) = fs::read_to_string(dir.join("counters.txt")) {
        let want = parse_counters(&text)?;
        assert_eq!(counters_text(&want), text, "{}: counters.txt layout", dir.display());
        problems.extend(counter_differences(&want, &r.counters));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[test]
fn lwaftr_corpus() {
    let root = Path::new(CORPUS);
    assert!(root.join("FORMAT.md").exists(), "the lwAFTR corpus is missing at {}", root.display());
    let mut cases: Vec<String> = fs::read_dir(root)
        .expect("corpus directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("lwaftr.conf").exists() && e.path().join("out-v4.pcap").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    cases.sort();
    assert!(cases.len() >= 100, "only {} cases found in {}", cases.len(), root.display());
    let known: BTreeSet<(String, String)> = KNOWN
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().expect("case").to_string(), w.next().expect("mode").to_string())
        })
        .collect();
    let only = std::env::var("LWAFTR_CASE").ok();
    let mut failed = BTreeMap::new();
    let mut passes = BTreeMap::<&str, (usize, usize)>::new();
    for case in &cases {
        if only.as_deref().is_some_and(|o| o != case) {
            continue;
        }
        for mode in ["two-interface", "on-a-stick"] {
            if mode == "on-a-stick" && STICK_SKIPS.contains(&case.as_str()) {
                continue;
            }
            let r = run_case(&root.join(case), mode == "on-a-stick");
            let e = passes.entry(mode).or_default();
            e.1 += 1;
            match r {
                Ok(()) => e.0 += 1,
                Err(why) => {
                    failed.insert((case.clone(), mode.to_string()), why);
                }
            }
        }
    }
    for (mode, (ok, all)) in &passes {
        println!("lwaftr corpus, {mode}: {ok}/{all} cases pass");
    }
    let mut errors = Vec::new();
    for ((case, mode), why) in &failed {
        let listed = known.contains(&(case.clone(), mode.clone()));
        println!("FAIL {case} {mode}{}:\n{why}\n", if listed { " (known)" } else { "" });
        if !listed {
            errors.push(format!("{case} {mode} fails and is not a known failure"));
        }
    }
    if only.is_none() {
        for (case, mode) in &known {
            if !failed.contains_key(&(case.clone(), mode.clone())) {
                errors.push(format!("{case} {mode} is listed as a known failure but passes"));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
