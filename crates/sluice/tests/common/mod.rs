//! Helpers shared by the integration tests: where the corpora are and how to list them.

#![allow(dead_code)] // each test binary uses a subset

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
