//! Parses every STF file of the shared p4c conformance corpora and checks the
//! result against the per-test counts recorded in `p4c-stf/MANIFEST.tsv`.
//! A missing corpus is a failure, never a skip.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use sluice_stf::{parse, ports, ExpectPattern, StfCommand, StfLine};

fn corpus_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance").join(name);
    assert!(
        dir.is_dir(),
        "STF corpus directory {} is missing; these tests need the shared conformance corpus",
        dir.display()
    );
    dir
}

/// `<dir>/<name>/<name>.stf` for every test directory, keyed by test name.
fn stf_files(dir: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let entry = entry.expect("directory entry");
        if !entry.file_type().expect("file type").is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let stf = entry.path().join(format!("{name}.stf"));
        assert!(stf.is_file(), "{} has no {name}.stf", entry.path().display());
        out.insert(name, stf);
    }
    out
}

fn parse_file(path: &Path) -> Vec<StfLine> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Per-file invariants that hold for any successfully parsed file.
fn check_round_trips(path: &Path, lines: &[StfLine]) {
    let mut prev = 0;
    for l in lines {
        assert!(l.line > prev, "{}: line numbers not increasing", path.display());
        prev = l.line;
        if let StfCommand::Expect { pattern: Some(p), .. } = &l.command {
            let again: ExpectPattern = p.to_string().parse().expect("display re-parses");
            assert_eq!(&again, p, "{}:{}", path.display(), l.line);
        }
        if let StfCommand::Packet { data, .. } = &l.command {
            assert!(!data.is_empty(), "{}:{}", path.display(), l.line);
        }
    }
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    packets: usize,
    expects: usize,
    expects_with_star: usize,
    expects_exact_len: usize,
    add: usize,
    setdefault: usize,
    other: BTreeMap<String, usize>,
    ports: BTreeSet<u32>,
}

fn count(lines: &[StfLine]) -> Counts {
    let mut c = Counts { ports: ports(lines), ..Counts::default() };
    for l in lines {
        match &l.command {
            StfCommand::Packet { .. } => c.packets += 1,
            StfCommand::Expect { pattern, .. } => {
                c.expects += 1;
                if let Some(p) = pattern {
                    if p.nibbles.iter().any(Option::is_none) {
                        c.expects_with_star += 1;
                    }
                    if p.exact_len {
                        c.expects_exact_len += 1;
                    }
                }
            }
            StfCommand::Add { .. } => c.add += 1,
            StfCommand::SetDefault { .. } => c.setdefault += 1,
            StfCommand::Passthrough { command } => {
                let word = command.split_whitespace().next().unwrap().to_string();
                *c.other.entry(word).or_default() += 1;
            }
            StfCommand::Wait => *c.other.entry("wait".into()).or_default() += 1,
            StfCommand::CheckCounter { .. } => *c.other.entry("check_counter".into()).or_default() += 1,
            StfCommand::RemoveAll => *c.other.entry("remove".into()).or_default() += 1,
            StfCommand::NoPacket => *c.other.entry("no_packet".into()).or_default() += 1,
        }
    }
    c
}

fn manifest_counts(fields: &[&str]) -> Counts {
    let num =
        |i: usize| -> usize { fields[i].parse().unwrap_or_else(|_| panic!("bad manifest number {:?}", fields[i])) };
    let mut other = BTreeMap::new();
    if fields[9] != "-" {
        for item in fields[9].split(',') {
            let (k, v) = item.split_once(':').expect("cmd:count");
            other.insert(k.to_string(), v.parse().expect("count"));
        }
    }
    let ports = if fields[10] == "-" || fields[10].is_empty() {
        BTreeSet::new()
    } else {
        fields[10].split(',').map(|p| p.parse().expect("port")).collect()
    };
    Counts {
        packets: num(3),
        expects: num(4),
        expects_with_star: num(5),
        expects_exact_len: num(6),
        add: num(7),
        setdefault: num(8),
        other,
        ports,
    }
}

#[test]
fn every_v1model_stf_file_parses_and_matches_manifest() {
    let dir = corpus_dir("p4c-stf");
    let files = stf_files(&dir);
    let manifest_path = dir.join("MANIFEST.tsv");
    let manifest =
        fs::read_to_string(&manifest_path).unwrap_or_else(|e| panic!("reading {}: {e}", manifest_path.display()));
    let mut rows = BTreeMap::new();
    for line in manifest.lines() {
        if line.starts_with('#') || line.starts_with("name\t") || line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        assert_eq!(fields.len(), 12, "manifest row {line:?}");
        rows.insert(fields[0].to_string(), manifest_counts(&fields));
    }
    assert!(files.len() >= 140, "expected the full corpus, found only {} STF files in {}", files.len(), dir.display());
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        rows.keys().collect::<Vec<_>>(),
        "test directories and MANIFEST.tsv disagree"
    );
    let mut total_lines = 0;
    for (name, path) in &files {
        let lines = parse_file(path);
        check_round_trips(path, &lines);
        total_lines += lines.len();
        assert_eq!(count(&lines), rows[name], "{name}: counts differ from MANIFEST.tsv");
    }
    assert!(total_lines > 500, "suspiciously few commands: {total_lines}");
}

#[test]
fn every_psa_stf_file_parses() {
    let dir = corpus_dir("p4c-stf-psa");
    let files = stf_files(&dir);
    assert!(files.len() >= 15, "expected the PSA corpus, found only {} STF files in {}", files.len(), dir.display());
    let mut passthrough = BTreeSet::new();
    for path in files.values() {
        let lines = parse_file(path);
        check_round_trips(path, &lines);
        for l in &lines {
            if let StfCommand::Passthrough { command } = &l.command {
                passthrough.insert(command.split_whitespace().next().unwrap().to_string());
            }
        }
    }
    for cmd in [
        "mc_mgrp_create",
        "mc_node_create",
        "mc_node_associate",
        "mirroring_add_mc",
        "mirroring_get",
        "register_read",
        "register_write",
        "register_reset",
        "meter_set_rates",
        "meter_get_rates",
        "meter_array_set_rates",
    ] {
        assert!(passthrough.contains(cmd), "no {cmd} found in the PSA corpus");
    }
}

#[test]
fn corpus_meter_rates_are_kept_verbatim() {
    let path = corpus_dir("p4c-stf-psa").join("psa-meter7-bmv2/psa-meter7-bmv2.stf");
    let lines = parse_file(&path);
    assert!(lines.iter().any(|l| l.command
        == StfCommand::Passthrough { command: "meter_set_rates cIngress.meter0 2 0.000005:4 0.00002:5".into() }));
}

#[test]
fn corpus_ternary2_entries() {
    let path = corpus_dir("p4c-stf").join("ternary2-bmv2/ternary2-bmv2.stf");
    let lines = parse_file(&path);
    let adds: Vec<_> = lines
        .iter()
        .filter_map(|l| match &l.command {
            StfCommand::Add { table, priority, keys, .. } => Some((table.as_str(), *priority, keys.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(adds.len(), 6);
    assert_eq!(adds[1].0, "test1");
    assert_eq!(adds[1].1, Some(503));
    let (value, mask) = adds[1].2[0].1.to_ternary(32).unwrap();
    assert_eq!(value, vec![0, 0, 0x02, 0x02]);
    assert_eq!(mask, vec![0, 0, 0xff, 0xff]);
    // `extra$0.h:0x25**` on a 16-bit field.
    assert_eq!(adds[2].2[0].0, "extra$0.h");
    assert_eq!(sluice_stf::stack_index_to_brackets(&adds[2].2[0].0), "extra[0].h");
    assert_eq!(adds[2].2[0].1.to_ternary(16).unwrap(), (vec![0x25, 0x00], vec![0xff, 0x00]));
}
