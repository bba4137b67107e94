//! Sluice's packet engine: compiles a BMv2 JSON program (v1model) into an
//! execution plan and runs packets through it exactly as bmv2's
//! `simple_switch` would.
//!
//! Follow one packet through the files named after the stages:
//! [`switch`] (the batch loop, parser, replication, deparser) runs the
//! control stage in [`control`] (tables and actions, interpreted) or in
//! [`jit`] (generated code), which match in [`tables`] and evaluate [`expr`]
//! over the [`phv`]; [`checksum`] verifies and updates checksums. [`plan`]
//! is the compiler that builds all of it from the model in `sluice-json`;
//! [`state`] holds entries, counters and the replication engine, and the
//! [`meters`] and [`registers`] that every worker's replica shares (each
//! module owns its cells, their sharing between workers, what a packet
//! does to them and the checks of control-plane writes);
//! [`runtime`] is the typed API through which everything outside the engine
//! reads and changes them (every control plane, through `sluice-control`);
//! [`dataplane`] makes the switch a `sluice_dataplane::DataPlane` that
//! workers replicate.
//!
//! Dependencies are one-way: `sluice-json` (model) <- `plan` (compiler) <-
//! `switch`/`control` (run time) <- `runtime` (control API) <- `dataplane`
//! (the seam the drivers use). `meters` and `registers` are leaves below
//! `state`: `meters` imports nothing of the engine, `registers` only
//! `value`; the interpreter, generated code and runtime call them. The
//! lookup structures under [`tables`] (exact map, DIR-24-8, classifier,
//! group member choice) come from `sluice-lookup`, which knows nothing of
//! P4.

pub mod checksum;
pub mod control;
pub mod dataplane;
pub mod expr;
pub mod jit;
pub mod meters;
pub mod phv;
pub mod plan;
pub mod psa;
pub mod registers;
pub mod runtime;
pub mod state;
pub mod switch;
pub mod tables;
pub mod trace;
pub mod v1model;
pub mod value;

use std::fmt;

/// The lookup structures the tables are built on, under the paths the
/// engine (and its code generator) has always used.
pub use sluice_lookup::{exact, lpm};

pub use jit::ExecMode;
pub use plan::{compile, Plan};
pub use switch::Switch;

/// A construct the compiler cannot run, located by its JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// JSON path of the element, e.g. `actions[3].primitives[0]`.
    pub path: String,
    /// What is wrong or unsupported.
    pub message: String,
}

impl CompileError {
    /// An error at a JSON path.
    pub fn at(path: &str, message: impl Into<String>) -> CompileError {
        CompileError { path: path.to_string(), message: message.into() }
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl std::error::Error for CompileError {}

/// Errors from loading a program file: JSON problems or unsupported constructs.
#[derive(Debug, Clone)]
pub enum LoadError {
    /// The JSON could not be read into the model.
    Json(sluice_json::LoadError),
    /// The model uses something the engine cannot run.
    Compile(CompileError),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Json(e) => write!(f, "{e}"),
            LoadError::Compile(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LoadError {}

/// Loads, compiles and instantiates a program from JSON text.
pub fn load_switch(json: &str) -> Result<Switch, LoadError> {
    let model = sluice_json::load_str(json).map_err(LoadError::Json)?;
    let plan = compile(&model).map_err(LoadError::Compile)?;
    Switch::new(plan).map_err(LoadError::Compile)
}

/// A deterministic xorshift32 sequence from `seed` (non-zero), for tests
/// that need many varied but repeatable keys.
#[cfg(test)]
pub(crate) fn test_rng(seed: u32) -> impl FnMut() -> u32 {
    let mut x = seed;
    move || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    }
}
