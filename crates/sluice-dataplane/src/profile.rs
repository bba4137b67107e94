//! Where the time goes: per-stage cycle counts, in the manner of VPP's
//! `show runtime`.
//!
//! Every stage (receive, the data plane's own stages, send) is timed per
//! call, not per packet: one time stamp before and after a stage's work on
//! a whole batch. A stage then reports its calls, its packets, cycles per
//! packet and packets per call. Timing is off unless asked for
//! (`sluice bench --profile`, `sluice simple_switch --profile`): a
//! [`StageClock`] that is off reads no clock and costs one predictable
//! branch per stage.
//!
//! Cycles are time-stamp-counter ticks on x86-64 (constant rate, whatever
//! the core's frequency) and nanoseconds elsewhere.

use std::fmt::Write as _;

/// The current time stamp (see the module doc for its unit).
#[inline(always)]
pub fn stamp() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

/// Time stamps per second, measured once (about 20 ms) on first use.
pub fn stamps_per_second() -> f64 {
    use std::sync::OnceLock;
    static RATE: OnceLock<f64> = OnceLock::new();
    *RATE.get_or_init(|| {
        let (t0, c0) = (std::time::Instant::now(), stamp());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (dt, dc) = (t0.elapsed().as_secs_f64(), stamp().wrapping_sub(c0));
        dc as f64 / dt
    })
}

/// What one stage did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTime {
    /// Calls that did some work.
    pub calls: u64,
    /// Packets those calls handled.
    pub packets: u64,
    /// Time stamps spent in them.
    pub cycles: u64,
}

impl StageTime {
    fn add(&mut self, o: &StageTime) {
        self.calls += o.calls;
        self.packets += o.packets;
        self.cycles += o.cycles;
    }
}

/// Stages with their times, in the order a packet meets them; the same
/// stage reported twice (by two workers) is summed.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    stages: Vec<(String, StageTime)>,
}

impl Profile {
    /// Adds `t` to stage `name` (appended if new).
    pub fn add(&mut self, name: &str, t: StageTime) {
        match self.stages.iter_mut().find(|(n, _)| n == name) {
            Some((_, s)) => s.add(&t),
            None => self.stages.push((name.to_string(), t)),
        }
    }

    /// Adds every stage of another profile.
    pub fn merge(&mut self, other: &Profile) {
        for (n, t) in &other.stages {
            self.add(n, *t);
        }
    }

    /// The stages and their times.
    pub fn stages(&self) -> &[(String, StageTime)] {
        &self.stages
    }

    /// The time of stage `name`, if reported.
    pub fn get(&self, name: &str) -> Option<StageTime> {
        self.stages.iter().find(|(n, _)| n == name).map(|(_, t)| *t)
    }

    /// A table: stage, calls, packets, cycles per packet, packets per call
    /// and the stage's share of all the time stages took.
    pub fn report(&self) -> String {
        let total: u64 = self.stages.iter().map(|(_, t)| t.cycles).sum();
        let mut s = String::new();
        let unit = if cfg!(target_arch = "x86_64") { "cycles" } else { "ns" };
        let _ = writeln!(
            s,
            "{:<28} {:>12} {:>14} {:>12} {:>10} {:>7}",
            "stage",
            "calls",
            "packets",
            format!("{unit}/pkt"),
            "pkts/call",
            "share"
        );
        for (name, t) in &self.stages {
            let _ = writeln!(
                s,
                "{:<28} {:>12} {:>14} {:>12.1} {:>10.1} {:>6.1}%",
                name,
                t.calls,
                t.packets,
                t.cycles as f64 / t.packets.max(1) as f64,
                t.packets as f64 / t.calls.max(1) as f64,
                100.0 * t.cycles as f64 / total.max(1) as f64
            );
        }
        if cfg!(target_arch = "x86_64") {
            let _ = writeln!(s, "(time stamp counter at {:.2} GHz)", stamps_per_second() / 1e9);
        }
        s
    }
}

/// A fixed list of stages timed by one owner (a worker's loop, a data plane).
#[derive(Debug, Clone)]
pub struct StageClock {
    names: &'static [&'static str],
    times: Vec<StageTime>,
    on: bool,
}

impl StageClock {
    /// A clock for `names`, off.
    pub fn new(names: &'static [&'static str]) -> StageClock {
        StageClock { names, times: vec![StageTime::default(); names.len()], on: false }
    }

    /// Turns timing on (from zero) or off.
    pub fn set(&mut self, on: bool) {
        self.on = on;
        self.times.iter_mut().for_each(|t| *t = StageTime::default());
    }

    /// Whether timing is on.
    #[inline(always)]
    pub fn on(&self) -> bool {
        self.on
    }

    /// A time stamp when timing is on, 0 otherwise.
    #[inline(always)]
    pub fn start(&self) -> u64 {
        if self.on {
            stamp()
        } else {
            0
        }
    }

    /// Charges the time since `since` to `stage` for `packets` packets
    /// (nothing when off, or for a call that handled none); returns the
    /// current stamp, to time the next stage from.
    #[inline(always)]
    pub fn record(&mut self, stage: usize, since: u64, packets: usize) -> u64 {
        if !self.on {
            return 0;
        }
        let now = stamp();
        if packets > 0 {
            let t = &mut self.times[stage];
            t.calls += 1;
            t.packets += packets as u64;
            t.cycles += now.wrapping_sub(since);
        }
        now
    }

    /// Adds the time since `since` to `stage` without counting a call or
    /// packets (work that belongs to the calls already counted, such as a
    /// transmit queue flushed after the frames were queued).
    #[inline(always)]
    pub fn extend(&mut self, stage: usize, since: u64) {
        if self.on {
            self.times[stage].cycles += stamp().wrapping_sub(since);
        }
    }

    /// Charges `cycles` measured elsewhere to `stage`.
    pub fn charge(&mut self, stage: usize, cycles: u64, packets: usize) {
        if self.on && packets > 0 {
            let t = &mut self.times[stage];
            t.calls += 1;
            t.packets += packets as u64;
            t.cycles += cycles;
        }
    }

    /// Adds the stages that did something to `to`.
    pub fn add_to(&self, to: &mut Profile) {
        for (n, t) in self.names.iter().zip(&self.times) {
            if t.calls > 0 {
                to.add(n, *t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_that_is_off_records_nothing_and_one_that_is_on_counts_calls_and_packets() {
        let mut c = StageClock::new(&["receive", "send"]);
        let t = c.start();
        c.record(0, t, 32);
        let mut p = Profile::default();
        c.add_to(&mut p);
        assert!(p.stages().is_empty(), "off: nothing recorded");
        c.set(true);
        let t = c.start();
        let t = c.record(0, t, 32);
        c.record(1, t, 0);
        let t = c.start();
        c.record(0, t, 16);
        c.add_to(&mut p);
        let r = p.get("receive").expect("receive recorded");
        assert_eq!((r.calls, r.packets), (2, 48));
        assert!(p.get("send").is_none(), "a call with no packets is not a call");
        let mut q = Profile::default();
        q.merge(&p);
        q.merge(&p);
        assert_eq!(q.get("receive").map(|t| t.packets), Some(96));
        assert!(q.report().contains("receive"));
    }
}
