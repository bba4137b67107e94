//! Loader for the BMv2 JSON format emitted by `p4c-bm2-ss` (v1model).
//!
//! This crate turns JSON text into a typed [`Program`] and nothing more: it
//! checks shapes and spellings and reports every problem with the JSON path
//! where it sits (`pipelines[0].tables[3].key[1]: ...`). Name resolution,
//! layout and semantics live in the compiler (`sluice-engine`), which keeps
//! this crate small and lets it serve other tools (inspection, P4Runtime).

mod model;
mod reader;

pub use model::*;
pub use reader::At;

/// The newest BMv2 JSON format version this loader reads (`__meta__.version`
/// of p4c's current output; bmv2's `--json-version` prints it).
pub const MAX_JSON_VERSION: &str = "2.23";

use std::fmt;

/// A problem found while loading a program, located by its JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// Path of the offending JSON element, e.g. `actions[3].primitives[0]`.
    pub path: String,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for LoadError {}

/// Parses BMv2 JSON text into a [`Program`].
pub fn load_str(text: &str) -> Result<Program, LoadError> {
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| LoadError { path: String::new(), message: format!("not valid JSON: {e}") })?;
    model::parse_program(&At::root(&v))
}

/// Reads and parses a BMv2 JSON file.
pub fn load_file(path: &std::path::Path) -> Result<Program, LoadError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LoadError { path: String::new(), message: format!("cannot read {}: {e}", path.display()) })?;
    load_str(&text)
}
