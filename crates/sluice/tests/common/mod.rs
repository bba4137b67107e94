//! Helpers shared by the integration tests: where the corpora are and how to list them.

#![allow(dead_code)] // each test binary uses a subset

pub mod lab;

use std::path::{Path, PathBuf};

/// `../shared/conformance` beside the repository; fails (never skips) when missing.
pub fn shared() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance");
    assert!(p.is_dir(), "conformance corpora not found at {}: clone the repo with ../shared beside it", p.display());
    p
}

/// Entries of `dir` that satisfy `keep`, sorted.
fn entries(dir: &Path, keep: fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| keep(p))
        .collect();
    v.sort();
    v
}

/// Sub-directories of `dir` (the cases of a corpus), sorted.
pub fn case_dirs(dir: &Path) -> Vec<PathBuf> {
    entries(dir, Path::is_dir)
}

/// Files of `dir`, sorted.
pub fn case_files(dir: &Path) -> Vec<PathBuf> {
    entries(dir, Path::is_file)
}

/// Values of an `expect_cli.txt` answer, with bmv2's wording lines that carry no value dropped.
fn cli_values(text: &str) -> Vec<String> {
    text.lines().filter(|l| !l.starts_with("this is the direct counter")).map(|l| l.trim().to_string()).collect()
}

/// Runs every command of a case's `expect_cli.txt` (if any) through `run` and
/// compares the answer's values with what bmv2 answered.
pub fn check_expect_cli(dir: &Path, name: &str, mut run: impl FnMut(&str) -> String) -> Result<(), String> {
    let cli = dir.join("expect_cli.txt");
    if !cli.exists() {
        return Ok(());
    }
    let text = std::fs::read_to_string(&cli).map_err(|e| e.to_string())?;
    for block in text.split("> ").filter(|b| !b.trim().is_empty()) {
        let (cmd, answer) = block.split_once('\n').unwrap_or((block, ""));
        let got = run(cmd);
        if cli_values(answer) != cli_values(&got) {
            return Err(format!("{name}: `{cmd}` answered {got:?}, bmv2 answered {answer:?}"));
        }
    }
    Ok(())
}
