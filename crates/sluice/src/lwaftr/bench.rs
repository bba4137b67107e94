//! `sluice lwaftr bench CONF IN.V4 IN.V6 [--duration S] [--workers N] [--on-a-stick]`.
//!
//! Contract: both directions at once from memory through the whole plane
//! (reassembly, lwAFTR, fragmentation, ARP/NDP, echo), what it emits
//! dropped into a sink. The IPv4 frames arrive on the external port and
//! the IPv6 frames on the internal one (both on port 0 on a stick), one
//! batch of each in turn (a capture of fewer frames than a batch is
//! repeated to fill one); every worker replays all of the traffic through
//! its own replica (Snabb's bench runs its one-flow captures likewise,
//! per process). The frames reach the lwAFTR through the harness's
//! receive ring (128 buffers per side, written just before each batch, as
//! a NIC writes its ring; `--no-ring`: straight from where they are
//! stored). Decapsulation is what leaves on the IPv4 side,
//! encapsulation what leaves on the IPv6 side (on a stick: IPv4 and IPv6
//! frames). Gbps counts the bytes of the output frames x 8 (no FCS,
//! preamble or gap), as Snabb's bench does. Lines: the bench harness's
//! first line, a note on Gbps and a CSV header, one CSV line per second
//! `time,decap Mpps,decap Gbps,encap Mpps,encap Gbps`, a `Summary:` line
//! per direction and the harness's `summary:` and `result:` lines.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_bench::{Interval, LineFormat, Outputs, Workload};
use sluice_dataplane::BATCH;
use sluice_lwaftr::frame::{be16, ET_IPV6, ET_VLAN};
use sluice_lwaftr::{Lwaftr, Options, EXTERNAL, INTERNAL};

/// The arguments of `lwaftr bench`.
#[derive(Debug, Clone)]
pub struct BenchArgs {
    pub conf: PathBuf,
    pub in_v4: PathBuf,
    pub in_v6: PathBuf,
    pub duration: f64,
    pub workers: usize,
    pub on_a_stick: bool,
    /// Frames go through the harness's receive ring.
    pub ring: bool,
}

/// Output class of decapsulated traffic (out of the IPv4 side).
const DECAP: usize = 0;
/// Output class of encapsulated traffic (out of the IPv6 side).
const ENCAP: usize = 1;

/// Two interfaces: the port says the side.
fn by_port(port: u32, _f: &[u8]) -> usize {
    match port {
        EXTERNAL => DECAP,
        INTERNAL => ENCAP,
        _ => usize::MAX,
    }
}

/// On a stick: IPv6 frames are the IPv6 side's, the rest the IPv4 side's.
fn by_ethertype(_port: u32, f: &[u8]) -> usize {
    let et = match be16(f, 12) {
        Some(ET_VLAN) => be16(f, 16),
        et => et,
    };
    if et == Some(ET_IPV6) {
        ENCAP
    } else {
        DECAP
    }
}

/// `(Mpps, Gbps)` of one output class over an interval.
fn rates(iv: &Interval<'_>, class: usize) -> (f64, f64) {
    let c = iv.out[class];
    (c.packets as f64 / iv.seconds / 1e6, c.bytes as f64 * 8.0 / iv.seconds / 1e9)
}

/// The lwAFTR's output lines.
pub fn outputs(on_a_stick: bool) -> Outputs {
    let line: LineFormat = Arc::new(|iv: &Interval<'_>| {
        let (dm, dg) = rates(iv, DECAP);
        let (em, eg) = rates(iv, ENCAP);
        format!("{:.6},{dm:.6},{dg:.6},{em:.6},{eg:.6}", iv.at)
    });
    let summary: LineFormat = Arc::new(|iv: &Interval<'_>| {
        let (dm, dg) = rates(iv, DECAP);
        let (em, eg) = rates(iv, ENCAP);
        format!(
            "Summary: decapsulation {dm:.3} Mpps, {dg:.3} Gbps; encapsulation {em:.3} Mpps, {eg:.3} Gbps \
             ({} and {} frames out in {:.2} s)",
            iv.out[DECAP].packets, iv.out[ENCAP].packets, iv.seconds
        )
    });
    Outputs {
        classes: 2,
        classify: if on_a_stick { by_ethertype } else { by_port },
        header: "Gbps = bytes of the output frames x 8 (as Snabb's bench: no FCS, preamble or gap)\n\
                 Time (s),Decap. MPPS,Decap. Gbps,Encap. MPPS,Encap. Gbps"
            .into(),
        line,
        summary,
    }
}

/// `frames` repeated until there are at least [`BATCH`] of them (none
/// stay none). Why: the harness hands the plane batches of consecutive
/// frames of the traffic, so a one-frame capture (Snabb's bench files)
/// would run in batches of one, measuring the per-batch work rather than
/// the per-packet work; Snabb's bench likewise repeats the capture to fill
/// its links.
pub fn fill_batch(frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    if frames.is_empty() || frames.len() >= BATCH {
        return frames;
    }
    let copies = BATCH.div_ceil(frames.len());
    let mut out = Vec::with_capacity(copies * frames.len());
    for _ in 0..copies {
        out.extend(frames.iter().cloned());
    }
    out
}

/// Runs `lwaftr bench` (see the module documentation).
pub fn run(a: &BenchArgs) -> Result<(), String> {
    let conf = super::load_conf(&a.conf)?;
    let in_v4 = fill_batch(sluice_ports::pcapfile::read_frames(&a.in_v4)?);
    let in_v6 = fill_batch(sluice_ports::pcapfile::read_frames(&a.in_v6)?);
    if in_v4.is_empty() && in_v6.is_empty() {
        return Err(format!("{} and {} hold no frames", a.in_v4.display(), a.in_v6.display()));
    }
    let softwires = conf.binding_table.softwires.len() as u64;
    let lw = Lwaftr::new(&conf, Options { on_a_stick: a.on_a_stick, ..Options::default() })?;
    let (p4, p6) = if a.on_a_stick { (0, 0) } else { (EXTERNAL, INTERNAL) };
    let mut w = Workload::new(lw, in_v4, p4, "lwaftr");
    w.more_traffic = vec![(p6, in_v6)];
    w.entries = Some(softwires);
    w.mode = if a.on_a_stick { "on-a-stick" } else { "two-port" }.into();
    w.outputs = Some(outputs(a.on_a_stick));
    let o = sluice_bench::Options {
        duration: a.duration,
        workers: a.workers,
        whole_traffic: true,
        receive_ring: a.ring,
        ..sluice_bench::Options::default()
    };
    sluice_bench::run(w, &o).map(|_| ())
}
