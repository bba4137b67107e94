//! A lightweight 4over6 AFTR (RFC 7596): the binding table of softwires,
//! encapsulation toward B4s, decapsulation with source validation,
//! hairpinning, ICMP, fragmentation and reassembly, ARP and NDP, as Snabb's
//! lwAFTR does, configured with Snabb's `snabb-softwire-v3` text format.
//!
//! [`conf`] reads and writes the configuration (and `conf::data` gives
//! Snabb's `snabb config` paths over it); [`filter`] compiles its pflang
//! filters; [`plane`] is the data plane and [`check`] runs it as Snabb's
//! `lwaftr check` does; [`control`] is its control server on a running
//! node (Snabb's `config` and `query` verbs). The data plane implements
//! `sluice_dataplane::DataPlane` with two ports: [`EXTERNAL`] (IPv4, the
//! internet side) and [`INTERNAL`] (IPv6, the B4 side).

pub mod bt;
pub mod check;
pub mod conf;
pub mod control;
mod core;
pub mod counters;
pub mod filter;
pub mod frag;
pub mod frame;
pub mod icmp;
pub mod nd;
pub mod plane;
pub mod reasm;

pub use plane::{FilterHook, Filters, Lwaftr, Options, Side};

/// Port number of the external (IPv4, internet) interface.
pub const EXTERNAL: u32 = 0;
/// Port number of the internal (IPv6, B4) interface.
pub const INTERNAL: u32 = 1;
