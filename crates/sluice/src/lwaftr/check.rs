//! `sluice lwaftr check [--on-a-stick] CONF IN.V4 IN.V6 OUT.V4 OUT.V6 [COUNTERS]`.
//!
//! Contract: loads CONF (an error names file:line:col and the path in the
//! tree), reads both inputs (an empty or header-only file injects
//! nothing), runs `sluice_lwaftr::check::check` (deterministic fragment
//! IDs, frozen clock, one tick at t = 0, then the IPv4 frames on the
//! external side and the IPv6 frames on the internal side, each to
//! completion: quiescent when the last returns), writes each side's
//! frames to OUT.V4 / OUT.V6 in Snabb's pcap layout, and with COUNTERS
//! fails unless the Snabb counters that changed equal the file's exactly,
//! naming the first difference in name order; with `--regen` it writes
//! the counters that changed to COUNTERS instead (Snabb's `-r`). Prints
//! nothing on success.

use std::path::PathBuf;

use sluice_lwaftr::check::{check, counter_differences, counters_text, parse_counters};
use sluice_ports::pcapfile::{read_frames, write_untimed_pcap};

/// The arguments of `lwaftr check`.
#[derive(Debug, Clone)]
pub struct CheckArgs {
    pub on_a_stick: bool,
    /// Write COUNTERS rather than compare with it.
    pub regen: bool,
    pub conf: PathBuf,
    pub in_v4: PathBuf,
    pub in_v6: PathBuf,
    pub out_v4: PathBuf,
    pub out_v6: PathBuf,
    pub counters: Option<PathBuf>,
}

/// Runs `lwaftr check` (see the module documentation).
pub fn run(a: &CheckArgs) -> Result<(), String> {
    let conf = super::load_conf(&a.conf)?;
    let in_v4 = read_frames(&a.in_v4)?;
    let in_v6 = read_frames(&a.in_v6)?;
    let r = check(&conf, &in_v4, &in_v6, a.on_a_stick)?;
    write_untimed_pcap(&a.out_v4, &r.out_v4)?;
    write_untimed_pcap(&a.out_v6, &r.out_v6)?;
    if let (Some(path), true) = (&a.counters, a.regen) {
        std::fs::write(path, counters_text(&r.counters))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    } else if let Some(path) = &a.counters {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let expected = parse_counters(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let diffs = counter_differences(&expected, &r.counters);
        if let Some(first) = diffs.first() {
            let more = match diffs.len() {
                1 => String::new(),
                n => format!(" (and {} more difference{})", n - 1, if n > 2 { "s" } else { "" }),
            };
            return Err(format!("counters differ from {}: {first}{more}", path.display()));
        }
    }
    Ok(())
}
