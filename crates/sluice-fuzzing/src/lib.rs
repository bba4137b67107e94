//! The bodies of Sluice's fuzz targets, one function per target.
//!
//! Contract: each target takes any bytes and returns normally, or panics
//! on a defect: a decoder that panics, an error without a message, a
//! value that does not survive its own encoding, or (differential
//! targets) a fast path that answers differently from its reference
//! path. cargo-fuzz (`fuzz/`, a nightly toolchain) runs them under
//! libFuzzer; the test suite replays every seed corpus in `fuzz/corpus/`
//! through them on the stable toolchain (`tests/replay.rs`), so the
//! corpora keep working as the code changes.
//!
//! Targets whose state outlives one input (a loaded program, a
//! connection's device) reset it at the start of each input, so a crash
//! reproduces from its input alone.
//!
//! - [`p4`]: the v1model router's packet path, BMv2 JSON, the runtime CLI,
//!   and the compiled and interpreted pipelines of the corpus programs
//!   against each other;
//! - [`control`]: the Thrift runtime API and P4Runtime's Write and Read;
//! - [`openflow`]: OpenFlow 1.3 and 1.0 decoding, and the OpenFlow
//!   switch's cached and native paths against its plain table walk;
//! - [`lwaftr`]: the lwAFTR's configuration and its packet path;
//! - [`pcap`]: pcap files.

pub mod control;
pub mod lwaftr;
pub mod nanomsg;
pub mod openflow;
pub mod p4;
pub mod pcap;

use std::path::PathBuf;

/// A fuzz target: its name (as in `fuzz/Cargo.toml` and `fuzz/corpus/`)
/// and its body.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

/// Every fuzz target.
pub const TARGETS: &[Target] = &[
    Target { name: "packet", run: p4::packet },
    Target { name: "p4_differential", run: p4::differential },
    Target { name: "load_json", run: p4::load_json },
    Target { name: "cli_command", run: p4::cli_command },
    Target { name: "thrift_call", run: control::thrift_call },
    Target { name: "p4runtime_write", run: control::p4runtime_write },
    Target { name: "openflow_decode", run: openflow::decode13 },
    Target { name: "openflow10_decode", run: openflow::decode10 },
    Target { name: "openflow_differential", run: openflow::differential },
    Target { name: "lwaftr_conf", run: lwaftr::conf },
    Target { name: "lwaftr_plane", run: lwaftr::plane },
    Target { name: "pcap_file", run: pcap::file },
    Target { name: "packet_in", run: nanomsg::packet_in },
];

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The repository's root (examples, fuzz corpora).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shared conformance corpora: `$SLUICE_CONFORMANCE`, else
/// `../shared/conformance` beside the repository.
pub fn conformance() -> PathBuf {
    match std::env::var_os("SLUICE_CONFORMANCE") {
        Some(p) => PathBuf::from(p),
        None => repo().join("../shared/conformance"),
    }
}

/// Splits `data` at `sep` bytes, the way several targets read a sequence
/// of frames or lines from one input.
pub fn split(data: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    data.split(move |&b| b == sep)
}
