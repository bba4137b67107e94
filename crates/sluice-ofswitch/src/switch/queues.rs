//! Port queues: where OpenFlow's `set_queue` action (1.0's `enqueue`)
//! sends a packet, on the shared egress queues
//! ([`sluice_dataplane::egress_queues`]).
//!
//! Contract. Reads: the queues configured at start ([`QueueConfig`]: a
//! port, a queue id, a minimum and a maximum rate in bits per second, a
//! depth in packets), the queue id a packet's actions chose, the clock.
//! Writes: the egress queues, per queue the packets and bytes sent and
//! the packets dropped, the port's tx counts when a queued packet leaves.
//! Leaves: a packet output to a port with a queue id that port has
//! goes at once when none of the port's queues holds a packet and the
//! queue's maximum rate allows it; otherwise it waits in that queue and
//! leaves from [`OfSwitch::release_queued`] (the data plane's `tick`) at
//! that rate;
//! a full queue drops it (tail drop, counted as the queue's tx error and
//! the port's tx drop). A queue without a maximum rate passes packets on
//! at once, counted. A queue id the port does not have, or no `set_queue`
//! at all, sends the packet straight on (as Open vSwitch sends it to the
//! port's default queue). The minimum rate is kept and reported (queue
//! configuration and descriptions); the queues of a port share no link
//! rate to divide, so it changes nothing in the scheduling.
//!
//! Concurrency: each replica has its own queues (a copy of the settings,
//! nothing queued), running at 1 / workers of each rate
//! (`EgressQueues::set_share`), as the meters do.

use std::collections::BTreeMap;
use std::time::Instant;

use sluice_dataplane::egress_queues::{EgressQueues, Rate, MAX_PORT};

use super::OfSwitch;

/// Packets a port queue holds unless its configuration says: Linux's
/// default transmit queue length, which the kernel queues Open vSwitch
/// configures inherit (a batch of 128 frames fits several times over).
pub const DEFAULT_QUEUE_DEPTH: usize = 1000;

/// One queue of a port, as configured at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueConfig {
    pub port: u32,
    pub queue_id: u32,
    /// Guaranteed rate, bits per second (reported, see the module documentation).
    pub min_rate: Option<u64>,
    /// Shaping rate, bits per second.
    pub max_rate: Option<u64>,
    /// Packets the queue holds ([`DEFAULT_QUEUE_DEPTH`] unless given).
    pub depth: usize,
}

impl QueueConfig {
    /// Parses `PORT:QUEUE[:KEY=VALUE,...]` with keys `min-rate` and
    /// `max-rate` (bits per second; a `k`, `M` or `G` suffix multiplies by
    /// 10^3, 10^6, 10^9) and `depth` (packets), as `--queue` takes it.
    pub fn parse(s: &str) -> Result<QueueConfig, String> {
        let bad = |why: &str| format!("--queue {s}: {why}");
        let mut parts = s.splitn(3, ':');
        let port = parts.next().unwrap_or("");
        let queue = parts.next().ok_or_else(|| bad("expected PORT:QUEUE[:min-rate=BPS,max-rate=BPS,depth=N]"))?;
        let port: u32 = port.parse().map_err(|_| bad(&format!("bad port {port}")))?;
        let queue_id: u32 = queue.parse().map_err(|_| bad(&format!("bad queue id {queue}")))?;
        let mut c = QueueConfig { port, queue_id, min_rate: None, max_rate: None, depth: DEFAULT_QUEUE_DEPTH };
        for kv in parts.next().unwrap_or("").split(',').filter(|p| !p.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| bad(&format!("{kv}: expected KEY=VALUE")))?;
            match k {
                "min-rate" => c.min_rate = Some(parse_bps(v).ok_or_else(|| bad(&format!("bad rate {v}")))?),
                "max-rate" => c.max_rate = Some(parse_bps(v).ok_or_else(|| bad(&format!("bad rate {v}")))?),
                "depth" => {
                    c.depth = v.parse().ok().filter(|d| *d >= 1).ok_or_else(|| bad(&format!("bad depth {v}")))?
                }
                _ => return Err(bad(&format!("unknown key {k} (min-rate, max-rate, depth)"))),
            }
        }
        Ok(c)
    }
}

/// Bits per second: digits with an optional `k`, `M` or `G`.
fn parse_bps(v: &str) -> Option<u64> {
    let (digits, mul) = match v.as_bytes().last()? {
        b'k' | b'K' => (&v[..v.len() - 1], 1_000),
        b'M' => (&v[..v.len() - 1], 1_000_000),
        b'G' => (&v[..v.len() - 1], 1_000_000_000),
        _ => (v, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

/// A queue's counts: packets and bytes sent, packets dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_errors: u64,
}

/// The switch's queues (see the module documentation).
pub struct PortQueues {
    /// Sorted by port, then queue id.
    configs: Vec<QueueConfig>,
    /// (port, queue id) → index in `configs`.
    index: BTreeMap<(u32, u32), usize>,
    /// Per config: its queue's number among its port's queues.
    rank: Vec<usize>,
    /// Per config: what passed through without waiting (no maximum rate).
    passed: Vec<QueueCounts>,
    queues: EgressQueues<Vec<u8>>,
    /// When the queues were made (queue statistics' duration).
    pub since: Instant,
}

impl Clone for PortQueues {
    /// The same settings, nothing queued, counts at zero (for a replica).
    fn clone(&self) -> PortQueues {
        PortQueues {
            configs: self.configs.clone(),
            index: self.index.clone(),
            rank: self.rank.clone(),
            passed: vec![QueueCounts::default(); self.configs.len()],
            queues: self.queues.settings_copy(0),
            since: self.since,
        }
    }
}

impl std::fmt::Debug for PortQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PortQueues").field("configs", &self.configs).field("queued", &self.queues.len()).finish()
    }
}

/// Burst of a maximum rate: 5 ms of it, at least two 1 500-byte frames
/// (the packet loop wakes for departures with millisecond timers).
fn burst_bits(bps: u64) -> u64 {
    (bps / 200).max(2 * 1500 * 8)
}

impl PortQueues {
    /// Queues as `configs` say; an error names a port out of range
    /// (1-511), a queue given twice, a zero maximum rate or a minimum
    /// above the maximum.
    pub fn new(mut configs: Vec<QueueConfig>, now_ns: u64) -> Result<PortQueues, String> {
        configs.sort_by_key(|c| (c.port, c.queue_id));
        let mut index = BTreeMap::new();
        let mut rank = Vec::new();
        let mut per_port: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, c) in configs.iter().enumerate() {
            let name = format!("queue {} of port {}", c.queue_id, c.port);
            if c.port == 0 || c.port > MAX_PORT {
                return Err(format!("{name}: queues go on ports 1 to {MAX_PORT}"));
            }
            if c.queue_id == u32::MAX {
                return Err(format!("{name}: 0xffffffff means all queues"));
            }
            if index.insert((c.port, c.queue_id), i).is_some() {
                return Err(format!("{name} is given twice"));
            }
            if c.max_rate == Some(0) {
                return Err(format!("{name}: a maximum rate of 0 would send nothing"));
            }
            if let (Some(lo), Some(hi)) = (c.min_rate, c.max_rate) {
                if lo > hi {
                    return Err(format!("{name}: min-rate {lo} is above max-rate {hi}"));
                }
            }
            let n = per_port.entry(c.port).or_insert(0);
            rank.push(*n);
            *n += 1;
        }
        let levels = per_port.values().copied().max().unwrap_or(1);
        let mut queues = EgressQueues::new(levels);
        for (c, &r) in configs.iter().zip(&rank) {
            queues.set_depth(Some(c.port), Some(r), c.depth);
            let rate = c.max_rate.map(|bps| Rate::BitsPerSecond { bits: bps as f64, burst_bits: burst_bits(bps) });
            queues.set_queue_rate(Some(c.port), Some(r), rate, now_ns);
        }
        let passed = vec![QueueCounts::default(); configs.len()];
        Ok(PortQueues { configs, index, rank, passed, queues, since: Instant::now() })
    }

    /// The queues as configured, by port and queue id.
    pub fn configs(&self) -> &[QueueConfig] {
        &self.configs
    }

    /// Packets waiting.
    pub fn queued(&self) -> usize {
        self.queues.len()
    }

    /// This copy's counts of each queue (in the order of `configs`).
    pub fn counts(&self) -> Vec<QueueCounts> {
        self.configs
            .iter()
            .zip(&self.rank)
            .zip(&self.passed)
            .map(|((c, &r), p)| {
                let s = self.queues.stats(c.port, r);
                QueueCounts {
                    tx_packets: p.tx_packets + s.dequeued,
                    tx_bytes: p.tx_bytes + s.dequeued_bytes,
                    tx_errors: s.dropped,
                }
            })
            .collect()
    }
}

/// What became of a frame offered to a queue.
pub(super) enum Offer {
    /// No such queue, or one without a maximum rate: send it now.
    Send,
    /// It waits in the queue.
    Queued,
    /// The queue was full.
    Dropped,
}

impl OfSwitch {
    /// Configures the port queues (at start, before replicas are made);
    /// an empty list removes them. Errors as [`PortQueues::new`], and for
    /// a port the switch does not have.
    pub fn set_queues(&mut self, configs: Vec<QueueConfig>) -> Result<(), String> {
        if configs.is_empty() {
            self.queues = None;
            return Ok(());
        }
        if let Some(c) = configs.iter().find(|c| !self.ports.contains_key(&c.port)) {
            return Err(format!("queue {} of port {}: the switch has no port {}", c.queue_id, c.port, c.port));
        }
        let now = self.clock.elapsed().as_nanos() as u64;
        self.queues = Some(Box::new(PortQueues::new(configs, now)?));
        Ok(())
    }

    /// The port queues, if any are configured.
    pub fn queues(&self) -> Option<&PortQueues> {
        self.queues.as_deref()
    }

    /// Runs this replica's queues at 1 / `workers` of their rates.
    pub(super) fn share_queues(&mut self, workers: usize) {
        let now = self.clock.elapsed().as_nanos() as u64;
        if let Some(q) = self.queues.as_mut() {
            q.queues.set_share(workers, now);
        }
    }

    /// Offers frame `f` for `port`'s queue `queue_id` (see [`Offer`]).
    pub(super) fn offer_to_queue(&mut self, port: u32, queue_id: u32, f: &[u8]) -> Offer {
        let Some(pq) = self.queues.as_deref_mut() else { return Offer::Send };
        let Some(&i) = pq.index.get(&(port, queue_id)) else { return Offer::Send };
        if pq.configs[i].max_rate.is_none() {
            let p = &mut pq.passed[i];
            p.tx_packets += 1;
            p.tx_bytes += f.len() as u64;
            return Offer::Send;
        }
        let (len, rank) = (f.len() as u32, pq.rank[i]);
        let now = self.clock.elapsed().as_nanos() as u64;
        // An idle port whose rate allows it: no wait, no copy.
        if pq.queues.try_pass(port, rank, len, now) {
            return Offer::Send;
        }
        let spare = &mut self.spare;
        // The frame is copied only when its queue has room.
        let copy = || {
            let mut buf = spare.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(f);
            buf
        };
        match pq.queues.enqueue_with(port, rank, len, now, copy) {
            Some(_) => Offer::Queued,
            None => Offer::Dropped,
        }
    }

    /// Sends every queued frame whose time has come; `emit(port, bytes)`
    /// gets them (live port numbers). A port closed meanwhile drops them.
    pub fn release_queued<E: FnMut(u32, &[u8]) + ?Sized>(&mut self, emit: &mut E) {
        let Some(mut pq) = self.queues.take() else { return };
        if !pq.queues.is_empty() {
            let now = self.clock.elapsed().as_nanos() as u64;
            pq.queues.dequeue(now, usize::MAX, |d| {
                self.send_now(0, d.port, &d.item, &mut |_, p, b| emit(p, b));
                self.spare.push(d.item);
            });
        }
        self.queues = Some(pq);
    }

    /// How long until the next queued frame may leave; `None` when none waits.
    pub fn next_departure_in(&self) -> Option<std::time::Duration> {
        let pq = self.queues.as_deref()?;
        if pq.queues.is_empty() {
            return None;
        }
        let now = self.clock.elapsed().as_nanos() as u64;
        let at = pq.queues.next_departure(now)?;
        Some(std::time::Duration::from_nanos(at.saturating_sub(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_options_parse_with_rate_suffixes_and_bad_ones_say_why() {
        let c = QueueConfig::parse("2:7:min-rate=1M,max-rate=2500k,depth=100").unwrap();
        assert_eq!(
            c,
            QueueConfig { port: 2, queue_id: 7, min_rate: Some(1_000_000), max_rate: Some(2_500_000), depth: 100 }
        );
        assert_eq!(QueueConfig::parse("1:0").unwrap().max_rate, None);
        assert_eq!(QueueConfig::parse("1:0:max-rate=1G").unwrap().max_rate, Some(1_000_000_000));
        for (bad, why) in [
            ("1", "expected PORT:QUEUE"),
            ("x:1", "bad port x"),
            ("1:q", "bad queue id q"),
            ("1:1:max-rate=fast", "bad rate fast"),
            ("1:1:depth=0", "bad depth 0"),
            ("1:1:burst=3", "unknown key burst"),
            ("1:1:max-rate", "expected KEY=VALUE"),
        ] {
            let e = QueueConfig::parse(bad).unwrap_err();
            assert!(e.starts_with(&format!("--queue {bad}: ")) && e.contains(why), "{bad}: {e}");
        }
        let q = |s: &str| QueueConfig::parse(s).unwrap();
        let e = PortQueues::new(vec![q("1:1"), q("1:1:max-rate=1M")], 0).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        let e = PortQueues::new(vec![q("600:1")], 0).unwrap_err();
        assert!(e.contains("ports 1 to 511"), "{e}");
        let e = PortQueues::new(vec![q("1:1:min-rate=2M,max-rate=1M")], 0).unwrap_err();
        assert!(e.contains("above max-rate"), "{e}");
        let e = PortQueues::new(vec![q("1:1:max-rate=0")], 0).unwrap_err();
        assert!(e.contains("would send nothing"), "{e}");
    }
}
