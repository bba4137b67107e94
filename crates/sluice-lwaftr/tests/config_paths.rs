//! `conf::data` (Snabb's `snabb config` paths) against the conformance
//! corpus: `get /` of every `lwaftr.conf` is the file's text and reads back
//! as the same configuration (with or without defaults); every xpath line
//! reads back through `get` and setting its leaf to that value changes
//! nothing; what `get` prints for a container, a list or a list entry is
//! what `set` takes back for the same path.

use std::path::{Path, PathBuf};

use sluice_lwaftr::conf::data::{Change, Format, PrintOptions};
use sluice_lwaftr::conf::Config;

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

fn read(p: &Path) -> (String, Config) {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let c = Config::parse(&text, &p.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    (text, c)
}

const YANG: PrintOptions = PrintOptions { format: Format::Yang, print_default: false };

#[test]
fn get_root_round_trips_every_corpus_conf() {
    for p in corpus_confs() {
        let (text, c) = read(&p);
        let name = p.display().to_string();
        let root = c.get("/", YANG).unwrap();
        assert_eq!(root, text, "{name}: `get /` differs from the file");
        assert_eq!(Config::parse(&root, "root").as_ref(), Ok(&c), "{name}");
        let full = c.get("/", PrintOptions { format: Format::Yang, print_default: true }).unwrap();
        assert!(full.len() > root.len(), "{name}");
        assert_eq!(Config::parse(&full, "full").as_ref(), Ok(&c), "{name}: `get --print-default /`");
    }
}

#[test]
fn every_leaf_reads_back_and_sets_to_itself() {
    for p in corpus_confs() {
        let (_, c) = read(&p);
        let name = p.display().to_string();
        let lines = c.get("/", PrintOptions { format: Format::Xpath, print_default: true }).unwrap();
        assert!(lines.lines().count() > 50, "{name}");
        for line in lines.lines() {
            let (path, value) = line.split_once(' ').unwrap_or_else(|| panic!("{name}: {line:?}"));
            assert_eq!(c.get(path, YANG).unwrap(), format!("{value}\n"), "{name}: {path}");
            let mut d = c.clone();
            let change = d.set(path, value).unwrap_or_else(|e| panic!("{name}: set {path} {value}: {e}"));
            assert_eq!(d, c, "{name}: set {path} {value}");
            if path.starts_with("/softwire-config/binding-table/softwire[") {
                assert!(
                    matches!(change, Change::Softwires { ref removed, ref added } if removed.len() == 1 && added.len() == 1)
                );
            } else {
                assert_eq!(change, Change::Other, "{name}: {path}");
            }
        }
    }
}

#[test]
fn what_get_prints_set_takes_back() {
    for p in corpus_confs() {
        let (_, c) = read(&p);
        let name = p.display().to_string();
        let mut paths: Vec<String> = [
            "/softwire-config",
            "/softwire-config/binding-table",
            "/softwire-config/binding-table/softwire",
            "/softwire-config/external-interface",
            "/softwire-config/internal-interface",
            "/softwire-config/instance",
            "/softwire-config/instance[device=test]",
            "/softwire-config/instance[device=test]/queue",
            "/softwire-config/instance[device=test]/queue[id=0]",
            "/softwire-config/instance[device=test]/queue[id=0]/internal-interface",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        paths.extend(
            c.binding_table
                .softwires
                .iter()
                .map(|s| format!("/softwire-config/binding-table/softwire[ipv4={}][psid={}]", s.ipv4, s.psid)),
        );
        for path in paths {
            let value = c.get(&path, YANG).unwrap_or_else(|e| panic!("{name}: get {path}: {e}"));
            let mut d = c.clone();
            d.set(&path, &value).unwrap_or_else(|e| panic!("{name}: set {path}: {e}\n{value}"));
            assert_eq!(d, c, "{name}: set {path} with what get printed");
        }
        // Every softwire removed, then added back from what `get` printed of the list.
        let list = "/softwire-config/binding-table/softwire";
        let all = c.get(list, YANG).unwrap();
        let mut d = c.clone();
        for s in &c.binding_table.softwires {
            let path = format!("{list}[ipv4={}][psid={}]", s.ipv4, s.psid);
            assert_eq!(d.remove(&path), Ok(Change::Softwires { removed: vec![(s.ipv4, s.psid)], added: vec![] }));
        }
        assert!(d.binding_table.softwires.is_empty(), "{name}");
        assert_eq!(
            d.add(list, &all),
            Ok(Change::Softwires { removed: vec![], added: c.binding_table.softwires.clone() }),
            "{name}"
        );
        assert_eq!(d, c, "{name}");
        assert_eq!(d.add(list, &all).unwrap_err(), "Can not add already-existing list entry #1", "{name}");
    }
}
