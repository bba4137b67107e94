//! Fault injection: a [`Port`] wrapper that drops, duplicates, reorders,
//! truncates and corrupts received frames at configured rates, fails sends
//! as a full transmit ring does, and takes its link down and up on a
//! schedule, on any backend. For users' own testing (`--inject-faults` on
//! live ports) and for Sluice's tests of what the data path does with each
//! fault.
//!
//! Contract. Reads: frames from the wrapped port (`recv`), frames to send.
//! Writes: the frames the data path sees, in the receive batch; what it
//! injected, in [`PortStats::faults`]. Every received frame is accounted
//! for: `rx_packets` (as the inner port counts them) = frames delivered -
//! duplicates + dropped + discarded while the link is down + those still
//! held back (one reordered frame, and a batch's overflow: duplicates can
//! make more frames than a batch holds). Held-back frames are delivered by
//! the next receive, which the caller makes when the port's descriptor is
//! readable again: the last frames of a burst can wait for the next one.
//! A send that fails is counted in
//! `tx_dropped` as the backends count a full ring. Faults are drawn from a
//! seeded generator: the same seed and traffic give the same faults.

use std::fmt;
use std::io;
use std::os::fd::RawFd;
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::{link_error, LinkEvent, Port, PortStats, RxBatch, VnetHdr};

/// What to inject: probabilities per frame (0 to 1) and a link schedule.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// A received frame is dropped.
    pub drop: f64,
    /// A received frame is delivered twice.
    pub duplicate: f64,
    /// A received frame is held back and delivered after the next one.
    pub reorder: f64,
    /// A received frame is cut to a random shorter length (at least 1 byte).
    pub truncate: f64,
    /// One random bit of a received frame is flipped.
    pub corrupt: f64,
    /// A send fails as with a full transmit ring (the frame is not sent).
    pub send_fail: f64,
    /// The link is up for the first duration, then down for the second, and again.
    pub flap: Option<(Duration, Duration)>,
    /// The generator's seed.
    pub seed: u64,
}

/// How many of each fault a port injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultCounts {
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub truncated: u64,
    pub corrupted: u64,
    pub send_failed: u64,
    /// Frames received while the link was down (discarded).
    pub link_down: u64,
    /// Times the link went down.
    pub flaps: u64,
}

impl FaultCounts {
    /// Whether nothing was injected.
    pub fn is_empty(&self) -> bool {
        *self == FaultCounts::default()
    }

    /// The counts of two ports (or workers) together.
    pub fn plus(&self, o: &FaultCounts) -> FaultCounts {
        FaultCounts {
            dropped: self.dropped + o.dropped,
            duplicated: self.duplicated + o.duplicated,
            reordered: self.reordered + o.reordered,
            truncated: self.truncated + o.truncated,
            corrupted: self.corrupted + o.corrupted,
            send_failed: self.send_failed + o.send_failed,
            link_down: self.link_down + o.link_down,
            flaps: self.flaps + o.flaps,
        }
    }
}

impl fmt::Display for FaultCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "injected: {} dropped, {} duplicated, {} reordered, {} truncated, {} corrupted, {} sends failed, \
             {} while the link was down ({} flaps)",
            self.dropped,
            self.duplicated,
            self.reordered,
            self.truncated,
            self.corrupted,
            self.send_failed,
            self.link_down,
            self.flaps
        )
    }
}

impl FromStr for Faults {
    type Err = String;

    /// `drop=0.01,dup=0.01,reorder=0.01,truncate=0.01,corrupt=0.01,send-fail=0.01,flap=5s/1s,seed=7`
    /// (any subset; durations in s or ms).
    fn from_str(s: &str) -> Result<Faults, String> {
        let mut f = Faults { seed: 1, ..Faults::default() };
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (key, value) = item.split_once('=').ok_or_else(|| format!("\"{item}\": want key=value"))?;
            let rate = || -> Result<f64, String> {
                match value.parse::<f64>() {
                    Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
                    _ => Err(format!("{key}={value}: want a probability from 0 to 1")),
                }
            };
            match key {
                "drop" => f.drop = rate()?,
                "dup" | "duplicate" => f.duplicate = rate()?,
                "reorder" => f.reorder = rate()?,
                "truncate" => f.truncate = rate()?,
                "corrupt" => f.corrupt = rate()?,
                "send-fail" => f.send_fail = rate()?,
                "flap" => {
                    let (up, down) =
                        value.split_once('/').ok_or_else(|| format!("flap={value}: want UP/DOWN, e.g. 5s/1s"))?;
                    f.flap = Some((duration(up)?, duration(down)?));
                }
                "seed" => f.seed = value.parse().map_err(|_| format!("seed={value}: want a whole number"))?,
                _ => {
                    return Err(format!(
                        "unknown fault \"{key}\" (drop, dup, reorder, truncate, corrupt, send-fail, flap, seed)"
                    ))
                }
            }
        }
        Ok(f)
    }
}

/// `5s`, `250ms` or `1.5` (seconds), above zero.
fn duration(s: &str) -> Result<Duration, String> {
    let (n, scale) = match s.strip_suffix("ms") {
        Some(n) => (n, 1e-3),
        None => (s.strip_suffix('s').unwrap_or(s), 1.0),
    };
    match n.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(Duration::from_secs_f64(v * scale)),
        _ => Err(format!("\"{s}\": want a duration above zero (5s, 250ms)")),
    }
}

/// A port with faults injected (see the module's contract).
pub struct FaultyPort<P: Port> {
    inner: P,
    faults: Faults,
    rng: u64,
    /// The frames of the last inner receive, to deliver with faults applied.
    staged: RxBatch,
    /// A frame held back to be delivered after the next one (reorder).
    held: Option<(Vec<u8>, VnetHdr)>,
    /// Frames that did not fit the last batch (duplicates make more frames
    /// than were received): delivered first by the next receive.
    overflow: std::collections::VecDeque<(Vec<u8>, VnetHdr)>,
    counts: FaultCounts,
    started: Instant,
}

impl<P: Port> FaultyPort<P> {
    /// Wraps `inner`; frames of up to `slot` bytes.
    pub fn new(inner: P, faults: Faults, slot: usize) -> FaultyPort<P> {
        // A zero seed would keep xorshift at zero.
        let rng = faults.seed ^ 0x9e37_79b9_7f4a_7c15;
        FaultyPort {
            inner,
            faults,
            rng: if rng == 0 { 1 } else { rng },
            staged: RxBatch::new(slot),
            held: None,
            overflow: Default::default(),
            counts: FaultCounts::default(),
            started: Instant::now(),
        }
    }

    /// What was injected so far.
    pub fn counts(&self) -> FaultCounts {
        FaultCounts { flaps: self.flaps(), ..self.counts }
    }

    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn hit(&mut self, p: f64) -> bool {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        p > 0.0 && unit < p
    }

    /// Whether the schedule has the link down now.
    fn link_down_now(&self) -> bool {
        let Some((up, down)) = self.faults.flap else { return false };
        let t = self.started.elapsed().as_nanos() % (up + down).as_nanos().max(1);
        t >= up.as_nanos()
    }

    /// Times the schedule has taken the link down so far (whether or not
    /// traffic met the link while it was down).
    fn flaps(&self) -> u64 {
        let Some((up, down)) = self.faults.flap else { return 0 };
        let t = self.started.elapsed().as_nanos();
        if t < up.as_nanos() {
            return 0;
        }
        ((t - up.as_nanos()) / (up + down).as_nanos().max(1)) as u64 + 1
    }
}

impl<P: Port> Port for FaultyPort<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn offload(&self) -> bool {
        self.inner.offload()
    }

    fn fd(&self) -> RawFd {
        self.inner.fd()
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        // What did not fit the last batch goes first; more is read only when it all fitted.
        let room = batch.capacity();
        let mut out = 0;
        while out < room {
            let Some((f, v)) = self.overflow.pop_front() else { break };
            batch.put(out, &f, &v);
            out += 1;
        }
        if !self.overflow.is_empty() {
            batch.set_len(out);
            return Ok(out);
        }
        let n = self.inner.recv(&mut self.staged)?;
        if self.link_down_now() {
            self.counts.link_down += n as u64;
            batch.set_len(out);
            return if out > 0 { Ok(out) } else { Err(link_error(self.inner.name(), LinkEvent::Down, None)) };
        }
        let mut deliver = |this: &mut Self, f: Vec<u8>, v: VnetHdr, out: &mut usize| {
            if *out < room {
                batch.put(*out, &f, &v);
                *out += 1;
            } else {
                this.overflow.push_back((f, v));
            }
        };
        for i in 0..n {
            let (frame, vnet) = self.staged.frame(i);
            let (mut frame, vnet) = (frame.to_vec(), *vnet);
            if self.hit(self.faults.drop) {
                self.counts.dropped += 1;
                continue;
            }
            if frame.len() > 1 && self.hit(self.faults.truncate) {
                let keep = 1 + (self.next() % (frame.len() as u64 - 1)) as usize;
                frame.truncate(keep);
                self.counts.truncated += 1;
            }
            if !frame.is_empty() && self.hit(self.faults.corrupt) {
                let bit = (self.next() % (frame.len() as u64 * 8)) as usize;
                frame[bit / 8] ^= 1 << (bit % 8);
                self.counts.corrupted += 1;
            }
            if self.held.is_none() && self.hit(self.faults.reorder) {
                self.held = Some((frame, vnet));
                self.counts.reordered += 1;
                continue;
            }
            if self.hit(self.faults.duplicate) {
                self.counts.duplicated += 1;
                deliver(self, frame.clone(), vnet, &mut out);
            }
            deliver(self, frame, vnet, &mut out);
            if let Some((h, hv)) = self.held.take() {
                deliver(self, h, hv, &mut out);
            }
        }
        // Nothing will come after a held frame once the port has ended (a file): let it go.
        if self.inner.finished() {
            if let Some((h, hv)) = self.held.take() {
                deliver(self, h, hv, &mut out);
            }
        }
        batch.set_len(out);
        Ok(out)
    }

    fn send(&mut self, frame: &[u8], vnet: &VnetHdr) -> io::Result<()> {
        if self.link_down_now() {
            // Not counted here: the caller counts what it could not send to a link that is down.
            return Err(link_error(self.inner.name(), LinkEvent::Down, None));
        }
        if self.hit(self.faults.send_fail) {
            self.counts.send_failed += 1;
            return Ok(());
        }
        self.inner.send(frame, vnet)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn stats(&self) -> PortStats {
        let mut s = self.inner.stats();
        s.tx_dropped += self.counts.send_failed;
        s.faults = self.counts();
        s
    }

    fn finished(&self) -> bool {
        self.inner.finished() && self.held.is_none() && self.overflow.is_empty()
    }

    fn check_link(&self) -> io::Result<()> {
        if self.link_down_now() {
            return Err(link_error(self.inner.name(), LinkEvent::Down, None));
        }
        self.inner.check_link()
    }

    fn release_memory(&mut self) {
        self.inner.release_memory()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryPort;
    use crate::BATCH;

    fn frames(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| [(i as u32).to_be_bytes().as_slice(), &[0xab; 60]].concat()).collect()
    }

    /// Receives everything `faults` lets through `frames`: the frames and the port.
    fn through(faults: &str, input: &[Vec<u8>]) -> (Vec<Vec<u8>>, FaultyPort<MemoryPort>) {
        let mut mem = MemoryPort::new("mem0");
        for f in input {
            mem.push(f);
        }
        let mut port = FaultyPort::new(mem, faults.parse().unwrap(), 2048);
        let mut batch = RxBatch::new(2048);
        let mut out = Vec::new();
        while !port.inner.is_drained() || !port.overflow.is_empty() {
            let n = port.recv(&mut batch).unwrap();
            out.extend((0..n).map(|i| batch.frame(i).0.to_vec()));
        }
        (out, port)
    }

    /// Frames received by the inner port = delivered - duplicates + dropped + held.
    fn accounted(out: &[Vec<u8>], port: &FaultyPort<MemoryPort>) {
        let s = port.stats();
        let c = s.faults;
        let held = u64::from(port.held.is_some()) + port.overflow.len() as u64;
        assert_eq!(s.rx_packets, out.len() as u64 - c.duplicated + c.dropped + c.link_down + held, "{c}");
    }

    #[test]
    fn each_fault_is_injected_at_its_rate_and_every_frame_is_accounted_for() {
        let input = frames(4000);
        let (out, port) = through("", &input);
        assert_eq!(out, input, "no faults: every frame, in order, unchanged");
        assert!(port.counts().is_empty());
        for (spec, count) in [
            ("drop=0.25", (|c: &FaultCounts| c.dropped) as fn(&FaultCounts) -> u64),
            ("dup=0.25", |c| c.duplicated),
            ("reorder=0.25", |c| c.reordered),
            ("truncate=0.25", |c| c.truncated),
            ("corrupt=0.25", |c| c.corrupted),
        ] {
            let (out, port) = through(spec, &input);
            let n = count(&port.counts());
            assert!((800..1200).contains(&n), "{spec}: {n} of 4000 frames");
            accounted(&out, &port);
        }
        let (out, _) = through("drop=1", &input);
        assert!(out.is_empty());
    }

    #[test]
    fn faults_do_what_they_say_to_each_frame() {
        let input = frames(1000);
        // Reordered: a held frame comes right after the next one.
        let (out, port) = through("reorder=0.1,seed=3", &input);
        let order: Vec<u32> = out.iter().map(|f| u32::from_be_bytes(f[..4].try_into().unwrap())).collect();
        let swaps = order.windows(2).filter(|w| w[0] > w[1]).count() as u64;
        assert_eq!(swaps, port.counts().reordered - u64::from(port.held.is_some()));
        // Truncated: shorter, a prefix of the frame.
        let (out, _) = through("truncate=1", &input);
        for (o, i) in out.iter().zip(&input) {
            assert!(!o.is_empty() && o.len() < i.len() && i.starts_with(o));
        }
        // Corrupted: one bit flipped.
        let (out, _) = through("corrupt=1", &input);
        for (o, i) in out.iter().zip(&input) {
            let bits: u32 = o.iter().zip(i).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(bits, 1);
        }
        // Duplicated: each frame twice, in a row, within the batch size.
        let (out, port) = through("dup=1", &input[..BATCH / 2]);
        assert_eq!(out.len(), BATCH, "{}", port.counts());
        assert!(out.chunks(2).all(|p| p[0] == p[1]));
        // The same seed, the same faults.
        assert_eq!(through("drop=0.3,seed=9", &input).0, through("drop=0.3,seed=9", &input).0);
        assert_ne!(through("drop=0.3,seed=9", &input).0, through("drop=0.3,seed=10", &input).0);
    }

    #[test]
    fn failed_sends_and_a_flapping_link() {
        let mut port = FaultyPort::new(MemoryPort::new("mem0"), "send-fail=0.5".parse().unwrap(), 2048);
        for f in frames(1000) {
            port.send(&f, &VnetHdr::default()).unwrap();
        }
        let s = port.stats();
        assert_eq!(s.tx_packets + s.tx_dropped, 1000, "every send is sent or counted dropped");
        assert_eq!(s.tx_dropped, s.faults.send_failed);
        assert!((400..600).contains(&s.tx_dropped));

        let mut port = FaultyPort::new(MemoryPort::new("mem1"), "flap=80ms/80ms".parse().unwrap(), 2048);
        assert!(port.check_link().is_ok(), "up first");
        std::thread::sleep(Duration::from_millis(100));
        let e = port.check_link().unwrap_err();
        assert_eq!(crate::link_event(&e), Some(LinkEvent::Down));
        port.inner.push(&[1; 64]);
        let e = port.recv(&mut RxBatch::new(2048)).unwrap_err();
        assert_eq!(crate::link_event(&e), Some(LinkEvent::Down));
        assert!(port.send(&[1; 64], &VnetHdr::default()).is_err());
        assert_eq!((port.counts().link_down, port.counts().flaps), (1, 1));
        std::thread::sleep(Duration::from_millis(80));
        assert!(port.check_link().is_ok(), "up again");
    }

    #[test]
    fn fault_specs_parse_or_say_what_is_wrong() {
        let f: Faults = "drop=0.1, dup=0.2,reorder=0.3,truncate=0.4,corrupt=0.5,send-fail=0.6,flap=2s/250ms,seed=4"
            .parse()
            .unwrap();
        assert_eq!(
            (f.drop, f.duplicate, f.reorder, f.truncate, f.corrupt, f.send_fail),
            (0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
        );
        assert_eq!(f.flap, Some((Duration::from_secs(2), Duration::from_millis(250))));
        assert_eq!(f.seed, 4);
        for (bad, says) in [
            ("drop=2", "probability"),
            ("lose=0.1", "unknown fault \"lose\""),
            ("flap=5s", "UP/DOWN"),
            ("flap=0s/1s", "above zero"),
            ("drop", "key=value"),
        ] {
            let e = bad.parse::<Faults>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
