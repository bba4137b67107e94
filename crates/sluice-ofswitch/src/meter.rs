//! OpenFlow meters: per-meter bands with token buckets, the band a packet
//! falls into, and the meters' statistics.
//!
//! Contract: reads meter-mods (validated here) and, per packet that a
//! flow sends through a meter, its length and the time; writes each
//! band's bucket and the meter's counters, and tells the pipeline what
//! to do with the packet: go on, drop it, or raise its DSCP drop
//! precedence by the band's level.
//!
//! A band applies when the packet exceeds its rate, and of the bands that
//! apply the one with the highest rate wins (OpenFlow 1.3.5 section
//! 5.7.1). Each band measures with a token bucket filled at the band's
//! rate (kilobits or packets per second, after the meter's flags) holding
//! at most its burst size (with OFPMF_BURST) or a tenth of a second of its
//! rate. Concurrency: each worker's replica meters its own share of the
//! traffic with `1 / workers` of every rate, so the switch as a whole
//! meters at the configured rates (a flow's packets all go to one worker).

use std::collections::BTreeMap;

use sluice_openflow::errors::{error_type, meter_mod_failed};
use sluice_openflow::{meter_flags, meter_mod_command as mmc, MeterBand, MeterMod, OfError};

/// Meter ids this switch accepts (1 to this).
pub const MAX_METERS: u32 = 65536;
/// Bands per meter.
pub const MAX_BANDS: usize = 8;

/// What a meter decided for a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Drop,
    /// Raise the DSCP drop precedence by this many levels.
    Remark(u8),
}

#[derive(Debug, Clone)]
struct Bucket {
    /// Tokens, in thousandths of a unit (bits/1000 or packets).
    milli: u64,
    last_ns: u64,
}

/// A meter entry with its bands' buckets and counters.
#[derive(Debug, Clone)]
pub struct Meter {
    pub flags: u16,
    pub bands: Vec<MeterBand>,
    buckets: Vec<Bucket>,
    /// (packets, bytes) in, and per band (packets, bytes) that it applied to.
    pub packets: u64,
    pub bytes: u64,
    pub band_counts: Vec<(u64, u64)>,
    /// When the meter was added (the agent's clock).
    pub added_ns: u64,
}

fn rate_burst(b: &MeterBand) -> (u32, u32) {
    match b {
        MeterBand::Drop { rate, burst_size }
        | MeterBand::DscpRemark { rate, burst_size, .. }
        | MeterBand::Experimenter { rate, burst_size, .. } => (*rate, *burst_size),
    }
}

/// The meters of one replica.
#[derive(Debug, Clone, Default)]
pub struct Meters {
    pub meters: BTreeMap<u32, Meter>,
    /// This replica's share of every rate: 1 / `share`.
    pub share: u64,
}

fn err(code: u16, reason: impl Into<String>) -> OfError {
    OfError::new(error_type::METER_MOD_FAILED, code, reason)
}

impl Meters {
    /// Validates a meter-mod against the current meters.
    pub fn check(&self, mm: &MeterMod) -> Result<(), OfError> {
        let id = mm.meter_id;
        // A delete may name every meter (OFPM_ALL).
        let all = mm.command == mmc::DELETE && id == sluice_openflow::meter::ALL;
        if (id == 0 || id > MAX_METERS) && !all {
            return Err(err(meter_mod_failed::INVALID_METER, format!("meter {id}")));
        }
        match mm.command {
            mmc::ADD | mmc::MODIFY => {
                if mm.flags & meter_flags::KBPS != 0 && mm.flags & meter_flags::PKTPS != 0 {
                    return Err(err(meter_mod_failed::BAD_FLAGS, "both KBPS and PKTPS"));
                }
                if mm.flags & !(meter_flags::KBPS | meter_flags::PKTPS | meter_flags::BURST | meter_flags::STATS) != 0 {
                    return Err(err(meter_mod_failed::BAD_FLAGS, format!("flags {:#x}", mm.flags)));
                }
                if mm.bands.len() > MAX_BANDS {
                    return Err(err(meter_mod_failed::OUT_OF_BANDS, format!("{} bands", mm.bands.len())));
                }
                for b in &mm.bands {
                    let (rate, burst) = rate_burst(b);
                    if rate == 0 {
                        return Err(err(meter_mod_failed::BAD_RATE, "a band of rate 0"));
                    }
                    if mm.flags & meter_flags::BURST != 0 && burst == 0 {
                        return Err(err(meter_mod_failed::BAD_BURST, "a band of burst 0 with OFPMF_BURST"));
                    }
                    if let MeterBand::Experimenter { .. } = b {
                        return Err(err(meter_mod_failed::BAD_BAND, "experimenter bands are not supported"));
                    }
                }
                let exists = self.meters.contains_key(&id);
                if mm.command == mmc::ADD && exists {
                    return Err(err(meter_mod_failed::METER_EXISTS, format!("meter {id}")));
                }
                if mm.command == mmc::MODIFY && !exists {
                    return Err(err(meter_mod_failed::UNKNOWN_METER, format!("meter {id}")));
                }
                Ok(())
            }
            mmc::DELETE => Ok(()),
            c => Err(err(meter_mod_failed::BAD_COMMAND, format!("command {c}"))),
        }
    }

    /// Applies a checked meter-mod; returns the ids it deleted.
    pub fn apply(&mut self, mm: &MeterMod, now_ns: u64) -> Vec<u32> {
        match mm.command {
            mmc::DELETE => {
                let ids: Vec<u32> = if mm.meter_id == sluice_openflow::meter::ALL {
                    self.meters.keys().copied().collect()
                } else {
                    vec![mm.meter_id]
                };
                ids.into_iter().filter(|id| self.meters.remove(id).is_some()).collect()
            }
            _ => {
                let buckets = mm.bands.iter().map(|_| Bucket { milli: u64::MAX, last_ns: now_ns }).collect();
                let band_counts = vec![(0, 0); mm.bands.len()];
                let (packets, bytes, added_ns) = match self.meters.get(&mm.meter_id) {
                    Some(old) => (old.packets, old.bytes, old.added_ns),
                    None => (0, 0, now_ns),
                };
                let m =
                    Meter { flags: mm.flags, bands: mm.bands.clone(), buckets, packets, bytes, band_counts, added_ns };
                self.meters.insert(mm.meter_id, m);
                vec![]
            }
        }
    }

    /// Meters a packet of `len` bytes through meter `id` at `now_ns`; an
    /// unknown meter passes it.
    pub fn meter(&mut self, id: u32, len: usize, now_ns: u64) -> Verdict {
        let share = self.share.max(1);
        let Some(m) = self.meters.get_mut(&id) else { return Verdict::Pass };
        m.packets += 1;
        m.bytes += len as u64;
        let pkts = m.flags & meter_flags::PKTPS != 0;
        // The packet's cost in thousandths of the rate's unit.
        let cost = if pkts { 1000 } else { len as u64 * 8 };
        let mut best: Option<(u32, usize)> = None;
        for (i, b) in m.bands.iter().enumerate() {
            let (rate, burst) = rate_burst(b);
            let rate = u64::from(rate).div_ceil(share);
            // Capacity in thousandths: the burst, or a tenth of a second.
            let cap =
                if m.flags & meter_flags::BURST != 0 { u64::from(burst).max(1) * 1000 } else { (rate * 100).max(cost) };
            let bk = &mut m.buckets[i];
            let elapsed = now_ns.saturating_sub(bk.last_ns);
            bk.last_ns = now_ns;
            // rate units per second = rate * 1000 thousandths per 1e9 ns.
            let refill = (u128::from(elapsed) * u128::from(rate) / 1_000_000) as u64;
            bk.milli = bk.milli.saturating_add(refill).min(cap);
            if bk.milli >= cost {
                bk.milli -= cost;
            } else if best.is_none_or(|(r, _)| rate as u32 > r) {
                best = Some((rate as u32, i));
            }
        }
        match best {
            None => Verdict::Pass,
            Some((_, i)) => {
                m.band_counts[i].0 += 1;
                m.band_counts[i].1 += len as u64;
                match m.bands[i] {
                    MeterBand::DscpRemark { prec_level, .. } => Verdict::Remark(prec_level),
                    _ => Verdict::Drop,
                }
            }
        }
    }
}

/// Raises the drop precedence of an IPv4 or IPv6 DSCP value by `levels`
/// (the two bits below the class, as the AF classes use them), at most to 3.
pub fn remark_dscp(dscp: u8, levels: u8) -> u8 {
    let dp = (dscp >> 1) & 3;
    let new = (dp + levels).min(3);
    (dscp & !0b110) | (new << 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mm(command: u16, id: u32, flags: u16, bands: Vec<MeterBand>) -> MeterMod {
        MeterMod { command, flags, meter_id: id, bands }
    }

    #[test]
    fn a_pktps_drop_band_passes_its_rate_and_drops_the_rest() {
        let mut m = Meters { share: 1, ..Meters::default() };
        let add = mm(
            mmc::ADD,
            1,
            meter_flags::PKTPS | meter_flags::BURST,
            vec![MeterBand::Drop { rate: 100, burst_size: 10 }],
        );
        m.check(&add).unwrap();
        m.apply(&add, 0);
        // 1000 packets in one second: the burst of 10 plus 100 refilled pass.
        let mut passed = 0;
        for i in 0..1000u64 {
            if m.meter(1, 64, i * 1_000_000) == Verdict::Pass {
                passed += 1;
            }
        }
        assert!((100..=115).contains(&passed), "{passed} passed");
        assert_eq!(m.meters[&1].packets, 1000);
        assert_eq!(m.meters[&1].band_counts[0].0, 1000 - passed);
    }

    #[test]
    fn the_highest_exceeded_band_wins_and_errors_are_the_specifications() {
        let mut m = Meters { share: 1, ..Meters::default() };
        let bands = vec![
            MeterBand::Drop { rate: 1000, burst_size: 0 },
            MeterBand::DscpRemark { rate: 100, burst_size: 0, prec_level: 1 },
        ];
        let add = mm(mmc::ADD, 2, meter_flags::KBPS, bands);
        m.apply(&add, 0);
        // 1500-byte packets every 1 ms = 12 Mbit/s: both bands exceeded, the drop band (1000 kbps) wins.
        let v: Vec<Verdict> = (0..500u64).map(|i| m.meter(2, 1500, i * 1_000_000)).collect();
        assert!(v.contains(&Verdict::Drop));
        assert_eq!(m.check(&add).unwrap_err().code, meter_mod_failed::METER_EXISTS);
        assert_eq!(m.check(&mm(mmc::MODIFY, 9, 0, vec![])).unwrap_err().code, meter_mod_failed::UNKNOWN_METER);
        assert_eq!(m.check(&mm(mmc::ADD, 0, 0, vec![])).unwrap_err().code, meter_mod_failed::INVALID_METER);
        let zero = mm(mmc::ADD, 3, meter_flags::KBPS, vec![MeterBand::Drop { rate: 0, burst_size: 0 }]);
        assert_eq!(m.check(&zero).unwrap_err().code, meter_mod_failed::BAD_RATE);
        assert_eq!(m.apply(&mm(mmc::DELETE, 2, 0, vec![]), 0), vec![2]);
        // Delete of every meter (OFPM_ALL), as controllers clear a switch.
        m.apply(&mm(mmc::ADD, 4, meter_flags::PKTPS, vec![MeterBand::Drop { rate: 10, burst_size: 0 }]), 0);
        m.apply(&mm(mmc::ADD, 5, meter_flags::PKTPS, vec![MeterBand::Drop { rate: 10, burst_size: 0 }]), 0);
        let all = mm(mmc::DELETE, sluice_openflow::meter::ALL, 0, vec![]);
        assert!(m.check(&all).is_ok());
        assert_eq!(m.apply(&all, 0), vec![4, 5]);
        assert!(m.meters.is_empty());
        assert_eq!(
            m.check(&mm(mmc::ADD, sluice_openflow::meter::ALL, 0, vec![])).unwrap_err().code,
            meter_mod_failed::INVALID_METER
        );
        assert_eq!(remark_dscp(10, 1), 12, "AF11 -> AF12");
        assert_eq!(remark_dscp(14, 2), 14, "AF13 stays");
    }
}
