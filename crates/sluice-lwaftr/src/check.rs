//! `check`: runs a configuration over input frames as Snabb's
//! `snabb lwaftr check` does, for the conformance corpus.
//!
//! Contract: reads a [`Config`] and the frames of each side; runs the plane
//! with deterministic fragment IDs and a frozen clock: one `tick` at t = 0,
//! then the IPv4 input on the external side and the IPv6 input on the
//! internal side in batches of at most `BATCH` (both on port 0 on a
//! stick). Every input runs to completion within its batch, so the plane
//! is quiescent when the last batch returns (held frames stay held).
//! Returns the frames of each side in emission order (on a stick split by
//! VLAN tag when the sides' tags differ, else by EtherType: IPv4 and ARP
//! are the IPv4 side's) and the Snabb counters that changed.
//! `sluice lwaftr check` runs it on pcap files.

use std::collections::BTreeMap;

use sluice_dataplane::{DataPlane, BATCH};

use crate::conf::Config;
use crate::counters::Counters;
use crate::frame::{be16, ET_ARP, ET_IPV4, ET_VLAN};
use crate::plane::{Lwaftr, Options};
use crate::{EXTERNAL, INTERNAL};

/// What a check run produced.
#[derive(Debug, Clone, Default)]
pub struct CheckResult {
    /// Frames out of the external (IPv4) side.
    pub out_v4: Vec<Vec<u8>>,
    /// Frames out of the internal (IPv6) side.
    pub out_v6: Vec<Vec<u8>>,
    /// Snabb counters that changed, by name, with their values.
    pub counters: BTreeMap<String, u64>,
    /// Every counter, the extra block included.
    pub all: Counters,
}

/// Runs `conf` over `in_v4` and `in_v6` (see the module documentation).
pub fn check(conf: &Config, in_v4: &[Vec<u8>], in_v6: &[Vec<u8>], on_a_stick: bool) -> Result<CheckResult, String> {
    let opts = Options { on_a_stick, deterministic_ids: true, frozen_clock: Some(0) };
    let mut lw = Lwaftr::new(conf, opts)?;
    let s = lw.settings().clone();
    let (t4, t6) = (s.external.queue.vlan_tag, s.internal.queue.vlan_tag);
    let mut out: Vec<(u32, Vec<u8>)> = Vec::new();
    lw.tick(0, &mut |p: u32, f: &[u8]| out.push((p, f.to_vec())));
    let ports = if on_a_stick { [0, 0] } else { [EXTERNAL, INTERNAL] };
    for (frames, port) in [(in_v4, ports[0]), (in_v6, ports[1])] {
        for chunk in frames.chunks(BATCH) {
            let refs: Vec<&[u8]> = chunk.iter().map(|f| f.as_slice()).collect();
            lw.process_batch(port, &refs, &mut |_, p: u32, f: &[u8]| out.push((p, f.to_vec())));
        }
    }
    let mut r = CheckResult::default();
    for (p, f) in out {
        let v4 = if !on_a_stick {
            p == EXTERNAL
        } else {
            match (t4, t6) {
                (Some(a), Some(b)) if a != b => be16(&f, 14).map(|t| t & 0x0fff) == Some(a),
                _ => {
                    let et = match be16(&f, 12) {
                        Some(ET_VLAN) => be16(&f, 16),
                        et => et,
                    };
                    et == Some(ET_IPV4) || et == Some(ET_ARP)
                }
            }
        };
        if v4 {
            r.out_v4.push(f);
        } else {
            r.out_v6.push(f);
        }
    }
    r.all = *lw.lw_counters();
    r.counters = r.all.snabb.iter().filter(|&(_, v)| v != 0).map(|(n, v)| (n.to_string(), v)).collect();
    Ok(r)
}

/// `counters` in Snabb's `counters.txt` layout: `name value` lines sorted
/// by name, each ending with a newline.
pub fn counters_text(counters: &BTreeMap<String, u64>) -> String {
    counters.iter().map(|(n, v)| format!("{n} {v}\n")).collect()
}

/// Reads a `counters.txt` (`name value` per line; blank lines ignored).
pub fn parse_counters(text: &str) -> Result<BTreeMap<String, u64>, String> {
    let mut m = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (n, v) = line.split_once(char::is_whitespace).ok_or_else(|| format!("line {}: not `name value`", i + 1))?;
        let v = v.trim().parse::<u64>().map_err(|e| format!("line {}: {e}", i + 1))?;
        m.insert(n.to_string(), v);
    }
    Ok(m)
}

/// Compares the counters that changed with the expected ones exactly; the
/// differences, in name order (`counter NAME: expected X, got Y`,
/// `unexpected counter NAME = Y`, `missing counter NAME = X`).
pub fn counter_differences(expected: &BTreeMap<String, u64>, got: &BTreeMap<String, u64>) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = expected.keys().chain(got.keys()).collect();
    names
        .into_iter()
        .filter_map(|n| match (expected.get(n), got.get(n)) {
            (Some(x), Some(y)) if x == y => None,
            (Some(x), Some(y)) => Some(format!("counter {n}: expected {x}, got {y}")),
            (Some(x), None) => Some(format!("missing counter {n} = {x}")),
            (None, Some(y)) => Some(format!("unexpected counter {n} = {y}")),
            (None, None) => None,
        })
        .collect()
}
