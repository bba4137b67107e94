//! Egress queues: the traffic manager a data plane puts between the end
//! of its ingress processing and its egress (bmv2's egress buffers, an
//! OpenFlow port's queues).
//!
//! Contract:
//! - per port, `priorities` FIFO queues (queue 0 the lowest priority,
//!   `priorities - 1` the highest, as bmv2's `qid`), each bounded by a depth
//!   in packets (bmv2's default: 64); a packet arriving at a full queue is
//!   dropped (tail drop), handed back to the caller and counted;
//! - optional rates, per port and per queue: packets per second (bmv2's
//!   `set_queue_rate`: a pacer, as bmv2 schedules it: each packet may
//!   leave 1/rate after the one before it or when it arrived, whichever is
//!   later, so a late caller sends what was due at once and an idle queue
//!   saves no credit) or bits per second (a token bucket whose burst
//!   defaults to one 1 500-byte frame); a packet leaves when its queue's
//!   rate and its port's rate both allow it;
//! - scheduling per port: strict priority among the queues whose own rate
//!   allows a packet now (a rate-limited high queue does not hold back
//!   lower ones); ports are independent (separate links);
//! - time is the caller's, in nanoseconds on any monotonic clock, passed to
//!   every call; each departure carries its enqueue and dequeue times and
//!   the depths (in packets, before its own enqueue and after its own
//!   dequeue) of its queue and of its port's queues together;
//! - cost when unused: nothing is allocated for a port until a packet or a
//!   setting names it; [`EgressQueues::shaping`] says whether any rate is
//!   set: when none is, no packet ever waits for time, and a caller may
//!   hand departures straight on in the batch that queued them.
//!
//! Concurrency: none inside; a worker owns its queues (`&mut self` for
//! everything that changes them).

use std::collections::VecDeque;

/// bmv2's default depth of an egress queue, in packets.
pub const DEFAULT_DEPTH: usize = 64;

/// Highest port number the queues accept (bmv2's 9-bit ports, 0-511).
pub const MAX_PORT: u32 = 511;

/// Burst of a bits-per-second rate unless given: one 1 500-byte frame.
pub const DEFAULT_BURST_BITS: u64 = 1500 * 8;

/// A rate limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// At most this many packets per second, paced (no burst).
    PacketsPerSecond(f64),
    /// At most this many bits per second of frame bytes, with a burst of
    /// `burst_bits`.
    BitsPerSecond { bits: f64, burst_bits: u64 },
}

impl Rate {
    /// Bits per second with the default burst.
    pub fn bits_per_second(bits: f64) -> Rate {
        Rate::BitsPerSecond { bits, burst_bits: DEFAULT_BURST_BITS }
    }
}

/// A rate limiter, full when made: a pacer for packets per second, a token
/// bucket for bits per second.
#[derive(Debug, Clone, Copy)]
enum Bucket {
    Pacer(Pacer),
    Tokens(TokenBucket),
}

/// Each packet leaves `gap_ns` after the one before it (`next_ns`) or when
/// it was queued, whichever is later (bmv2's schedule).
#[derive(Debug, Clone, Copy)]
struct Pacer {
    rate: Rate,
    gap_ns: f64,
    next_ns: f64,
}

/// Tokens in bits, `per_ns` of them a nanosecond, at most `burst`.
#[derive(Debug, Clone, Copy)]
struct TokenBucket {
    rate: Rate,
    per_ns: f64,
    burst: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            self.tokens = (self.tokens + (now_ns - self.last_ns) as f64 * self.per_ns).min(self.burst);
            self.last_ns = now_ns;
        }
    }

    /// What a packet of `bytes` needs in the bucket to leave: its size in
    /// bits, or the whole burst for a packet bigger than the burst (it then
    /// leaves the bucket in debt, so the average rate holds).
    fn need(&self, bytes: u32) -> f64 {
        (f64::from(bytes) * 8.0).min(self.burst)
    }
}

impl Bucket {
    /// A full limiter running at `rate` / `share`.
    fn new(rate: Rate, share: u32, now_ns: u64) -> Bucket {
        let share = f64::from(share.max(1));
        match rate {
            Rate::PacketsPerSecond(p) => {
                let per_ns = p / share / 1e9;
                let gap_ns = if per_ns > 0.0 { 1.0 / per_ns } else { f64::INFINITY };
                Bucket::Pacer(Pacer { rate, gap_ns, next_ns: 0.0 })
            }
            Rate::BitsPerSecond { bits, burst_bits } => {
                let burst = burst_bits.max(1) as f64;
                Bucket::Tokens(TokenBucket { rate, per_ns: bits / share / 1e9, burst, tokens: burst, last_ns: now_ns })
            }
        }
    }

    /// The rate it was made for (before the share).
    fn rate(&self) -> Rate {
        match self {
            Bucket::Pacer(p) => p.rate,
            Bucket::Tokens(t) => t.rate,
        }
    }

    /// Whether a packet of `bytes` queued at `enq_ns` may leave at `now_ns`.
    fn allows(&mut self, bytes: u32, enq_ns: u64, now_ns: u64) -> bool {
        match self {
            Bucket::Pacer(p) => p.next_ns.max(enq_ns as f64) <= now_ns as f64 + 0.5,
            Bucket::Tokens(t) => {
                t.refill(now_ns);
                t.tokens + 1e-9 >= t.need(bytes)
            }
        }
    }

    /// A packet of `bytes` queued at `enq_ns` leaves.
    fn take(&mut self, bytes: u32, enq_ns: u64) {
        match self {
            Bucket::Pacer(p) => p.next_ns = p.next_ns.max(enq_ns as f64) + p.gap_ns,
            Bucket::Tokens(t) => t.tokens -= f64::from(bytes) * 8.0,
        }
    }

    /// When a packet of `bytes` queued at `enq_ns` may leave (`now_ns` or
    /// later; never for a zero rate).
    fn ready_at(self, bytes: u32, enq_ns: u64, now_ns: u64) -> Option<u64> {
        match self {
            Bucket::Pacer(p) => {
                let at = p.next_ns.max(enq_ns as f64);
                at.is_finite().then(|| (at.ceil() as u64).max(now_ns))
            }
            Bucket::Tokens(mut t) => {
                t.refill(now_ns);
                let missing = t.need(bytes) - t.tokens;
                if missing <= 1e-9 {
                    Some(now_ns)
                } else if t.per_ns <= 0.0 {
                    None
                } else {
                    Some(now_ns + (missing / t.per_ns).ceil() as u64)
                }
            }
        }
    }
}

/// Counters of one queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Packets queued.
    pub enqueued: u64,
    /// Packets that left.
    pub dequeued: u64,
    /// Bytes that left.
    pub dequeued_bytes: u64,
    /// Packets dropped at a full queue.
    pub dropped: u64,
}

struct Held<T> {
    item: T,
    bytes: u32,
    enq_ns: u64,
    enq_depth: u32,
    enq_port_depth: u32,
}

struct Queue<T> {
    items: VecDeque<Held<T>>,
    depth: usize,
    rate: Option<Bucket>,
    stats: QueueStats,
}

impl<T> Queue<T> {
    fn new(depth: usize) -> Queue<T> {
        Queue { items: VecDeque::new(), depth, rate: None, stats: QueueStats::default() }
    }
}

struct PortQueues<T> {
    queues: Vec<Queue<T>>,
    rate: Option<Bucket>,
    queued: usize,
}

/// A packet leaving its queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure<T> {
    /// What was queued.
    pub item: T,
    /// Its port.
    pub port: u32,
    /// Its queue (0 = lowest priority).
    pub queue: usize,
    /// Its frame's bytes, as given at enqueue.
    pub bytes: u32,
    /// When it was queued (ns, the caller's clock).
    pub enq_ns: u64,
    /// When it left.
    pub deq_ns: u64,
    /// Packets in its queue when it arrived (before it).
    pub enq_depth: u32,
    /// Packets in its port's queues together when it arrived.
    pub enq_port_depth: u32,
    /// Packets left in its queue after it left.
    pub deq_depth: u32,
    /// Packets left in its port's queues together after it left.
    pub deq_port_depth: u32,
}

/// What [`EgressQueues::enqueue`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Enqueue<T> {
    /// Queued behind `depth` packets of its queue.
    Queued { depth: u32 },
    /// The queue was full (or the port out of range): dropped and counted;
    /// the item comes back.
    Dropped(T),
}

/// Every port's queues (see the module documentation).
pub struct EgressQueues<T> {
    priorities: usize,
    default_depth: usize,
    /// The rate of every queue of ports yet to come (set for all ports).
    default_rate: Option<Rate>,
    ports: Vec<Option<PortQueues<T>>>,
    queued: usize,
    /// Whether any rate is set (the default rate, a port's or a queue's):
    /// recomputed whenever a rate changes.
    shaping: bool,
    /// Packets dropped because their port was beyond [`MAX_PORT`].
    pub out_of_range: u64,
    /// Copies of these queues whose rates add up (one per worker): each
    /// runs at its rates / `share`.
    share: u32,
}

impl<T> EgressQueues<T> {
    /// Queues of `priorities` levels (at least 1) and the default depth.
    pub fn new(priorities: usize) -> EgressQueues<T> {
        EgressQueues {
            priorities: priorities.max(1),
            default_depth: DEFAULT_DEPTH,
            default_rate: None,
            ports: Vec::new(),
            queued: 0,
            shaping: false,
            out_of_range: 0,
            share: 1,
        }
    }

    /// Runs every rate, set and to come, at 1 / `share` of itself: for
    /// `share` copies (workers) whose traffic adds up on the same links.
    /// Buckets restart full.
    pub fn set_share(&mut self, share: usize, now_ns: u64) {
        let share = share.clamp(1, u32::MAX as usize) as u32;
        self.share = share;
        let fresh = |b: &mut Option<Bucket>| {
            if let Some(old) = b {
                *old = Bucket::new(old.rate(), share, now_ns);
            }
        };
        for pq in self.ports.iter_mut().flatten() {
            fresh(&mut pq.rate);
            pq.queues.iter_mut().for_each(|q| fresh(&mut q.rate));
        }
    }

    /// Priority levels per port.
    pub fn priorities(&self) -> usize {
        self.priorities
    }

    /// Packets waiting, all ports together.
    pub fn len(&self) -> usize {
        self.queued
    }

    /// Whether no packet waits.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Whether any rate is set (otherwise no packet ever waits for time).
    pub fn shaping(&self) -> bool {
        self.shaping
    }

    /// `port`'s queues, made (with the defaults) on first use; `None` out of range.
    fn port_mut(&mut self, port: u32, now_ns: u64) -> Option<&mut PortQueues<T>> {
        if port > MAX_PORT {
            return None;
        }
        let i = port as usize;
        if self.ports.len() <= i {
            self.ports.resize_with(i + 1, || None);
        }
        if self.ports[i].is_none() {
            let (n, depth, rate, share) = (self.priorities, self.default_depth, self.default_rate, self.share);
            let queues = (0..n)
                .map(|_| Queue { rate: rate.map(|r| Bucket::new(r, share, now_ns)), ..Queue::new(depth) })
                .collect();
            self.ports[i] = Some(PortQueues { queues, rate: None, queued: 0 });
        }
        self.ports[i].as_mut()
    }

    /// The queues named by `port` (`None`: every port, the ones to come
    /// included) and `queue` (`None`: every queue of the port).
    fn each_queue(
        &mut self,
        port: Option<u32>,
        queue: Option<usize>,
        now_ns: u64,
        mut f: impl FnMut(&mut Queue<T>),
    ) -> bool {
        if queue.is_some_and(|q| q >= self.priorities) {
            return false;
        }
        let ports: Vec<u32> = match port {
            Some(p) if p > MAX_PORT => return false,
            Some(p) => vec![p],
            None => (0..self.ports.len() as u32).filter(|&p| self.ports[p as usize].is_some()).collect(),
        };
        for p in ports {
            let pq = self.port_mut(p, now_ns).expect("port in range");
            match queue {
                Some(q) => f(&mut pq.queues[q]),
                None => pq.queues.iter_mut().for_each(&mut f),
            }
        }
        true
    }

    /// Sets the depth (packets, at least 1) of a queue, of every queue of a
    /// port, or of every queue (ports not yet seen included: `port` None).
    /// Packets already beyond a smaller depth stay. False for a port or
    /// queue out of range.
    pub fn set_depth(&mut self, port: Option<u32>, queue: Option<usize>, depth: usize) -> bool {
        let depth = depth.max(1);
        if port.is_none() && queue.is_none() {
            self.default_depth = depth;
        }
        self.each_queue(port, queue, 0, |q| q.depth = depth)
    }

    /// Sets (or with `None` removes) the rate of a queue, of every queue of a
    /// port, or of every queue (ports not yet seen included: `port` None).
    /// False for a port or queue out of range.
    pub fn set_queue_rate(&mut self, port: Option<u32>, queue: Option<usize>, rate: Option<Rate>, now_ns: u64) -> bool {
        if port.is_none() && queue.is_none() {
            self.default_rate = rate;
        }
        let share = self.share;
        let ok = self.each_queue(port, queue, now_ns, |q| q.rate = rate.map(|r| Bucket::new(r, share, now_ns)));
        self.note_rates();
        ok
    }

    /// Recomputes [`EgressQueues::shaping`] after a rate changed.
    fn note_rates(&mut self) {
        self.shaping = self.default_rate.is_some()
            || self.ports.iter().flatten().any(|p| p.rate.is_some() || p.queues.iter().any(|q| q.rate.is_some()));
    }

    /// Sets (or removes) the rate of a port, all its queues together.
    pub fn set_port_rate(&mut self, port: u32, rate: Option<Rate>, now_ns: u64) -> bool {
        let share = self.share;
        let Some(pq) = self.port_mut(port, now_ns) else { return false };
        pq.rate = rate.map(|r| Bucket::new(r, share, now_ns));
        self.note_rates();
        true
    }

    /// Queues `item` (a frame of `bytes`) on `port`'s queue `queue`
    /// (clamped to the highest priority).
    pub fn enqueue(&mut self, port: u32, queue: usize, bytes: u32, item: T, now_ns: u64) -> Enqueue<T> {
        let mut item = Some(item);
        match self.enqueue_with(port, queue, bytes, now_ns, || item.take().expect("taken once")) {
            Some(depth) => Enqueue::Queued { depth },
            None => Enqueue::Dropped(item.take().expect("not taken")),
        }
    }

    /// [`EgressQueues::enqueue`] of the item `make` gives, made only when
    /// there is room for it: the depth it is queued behind, or `None` when
    /// it was dropped (and counted).
    pub fn enqueue_with(
        &mut self,
        port: u32,
        queue: usize,
        bytes: u32,
        now_ns: u64,
        make: impl FnOnce() -> T,
    ) -> Option<u32> {
        let queue = queue.min(self.priorities - 1);
        let Some(pq) = self.port_mut(port, now_ns) else {
            self.out_of_range += 1;
            return None;
        };
        let port_depth = pq.queued as u32;
        let q = &mut pq.queues[queue];
        if q.items.len() >= q.depth {
            q.stats.dropped += 1;
            return None;
        }
        let item = make();
        let depth = q.items.len() as u32;
        q.items.push_back(Held { item, bytes, enq_ns: now_ns, enq_depth: depth, enq_port_depth: port_depth });
        q.stats.enqueued += 1;
        pq.queued += 1;
        self.queued += 1;
        Some(depth)
    }

    /// Lets a packet of `bytes` for `port`'s queue `queue` pass at once,
    /// without waiting, when neither its queue nor a higher one holds a
    /// packet (strict priority would send it next) and the rates allow it
    /// now: counted as queued and sent (depth 0, no delay). False when it
    /// must be enqueued.
    pub fn try_pass(&mut self, port: u32, queue: usize, bytes: u32, now_ns: u64) -> bool {
        let queue = queue.min(self.priorities - 1);
        let Some(pq) = self.port_mut(port, now_ns) else { return false };
        if pq.queues[queue..].iter().any(|q| !q.items.is_empty()) {
            return false;
        }
        let q = &mut pq.queues[queue];
        if !q.rate.as_mut().is_none_or(|b| b.allows(bytes, now_ns, now_ns))
            || !pq.rate.as_mut().is_none_or(|b| b.allows(bytes, now_ns, now_ns))
        {
            return false;
        }
        for b in [q.rate.as_mut(), pq.rate.as_mut()].into_iter().flatten() {
            b.take(bytes, now_ns);
        }
        q.stats.enqueued += 1;
        q.stats.dequeued += 1;
        q.stats.dequeued_bytes += u64::from(bytes);
        true
    }

    /// Hands `out` every packet allowed to leave at `now_ns`, at most
    /// `budget` of them, port by port, each port's in strict priority.
    /// Returns how many left.
    pub fn dequeue(&mut self, now_ns: u64, budget: usize, mut out: impl FnMut(Departure<T>)) -> usize {
        let mut sent = 0;
        if self.queued == 0 {
            return 0;
        }
        for (p, slot) in self.ports.iter_mut().enumerate() {
            let Some(pq) = slot else { continue };
            while sent < budget && pq.queued > 0 {
                // The highest queue with a packet its own rate lets go.
                let pick = (0..pq.queues.len()).rev().find(|&i| {
                    let q = &mut pq.queues[i];
                    match (q.items.front(), q.rate.as_mut()) {
                        (None, _) => false,
                        (Some(_), None) => true,
                        (Some(h), Some(b)) => b.allows(h.bytes, h.enq_ns, now_ns),
                    }
                });
                let Some(i) = pick else { break };
                let (bytes, enq_ns) = pq.queues[i].items.front().map_or((0, 0), |h| (h.bytes, h.enq_ns));
                if let Some(b) = pq.rate.as_mut() {
                    if !b.allows(bytes, enq_ns, now_ns) {
                        break;
                    }
                    b.take(bytes, enq_ns);
                }
                let q = &mut pq.queues[i];
                if let Some(b) = q.rate.as_mut() {
                    b.take(bytes, enq_ns);
                }
                let h = q.items.pop_front().expect("picked a non-empty queue");
                q.stats.dequeued += 1;
                q.stats.dequeued_bytes += u64::from(h.bytes);
                pq.queued -= 1;
                self.queued -= 1;
                sent += 1;
                out(Departure {
                    item: h.item,
                    port: p as u32,
                    queue: i,
                    bytes: h.bytes,
                    enq_ns: h.enq_ns,
                    deq_ns: now_ns,
                    enq_depth: h.enq_depth,
                    enq_port_depth: h.enq_port_depth,
                    deq_depth: q.items.len() as u32,
                    deq_port_depth: pq.queued as u32,
                });
            }
            if sent == budget {
                break;
            }
        }
        sent
    }

    /// The earliest time at which a waiting packet may leave (`now_ns` when
    /// one may leave now; `None` when none waits or none ever can: a zero rate).
    pub fn next_departure(&self, now_ns: u64) -> Option<u64> {
        let mut best: Option<u64> = None;
        for pq in self.ports.iter().flatten() {
            if pq.queued == 0 {
                continue;
            }
            let mut port_best: Option<u64> = None;
            let (mut head_bytes, mut head_enq) = (0, 0);
            for q in pq.queues.iter().rev() {
                let Some(h) = q.items.front() else { continue };
                let t = match q.rate {
                    None => Some(now_ns),
                    Some(b) => b.ready_at(h.bytes, h.enq_ns, now_ns),
                };
                if let Some(t) = t {
                    if port_best.is_none_or(|b| t < b) {
                        port_best = Some(t);
                        (head_bytes, head_enq) = (h.bytes, h.enq_ns);
                    }
                }
            }
            let Some(mut t) = port_best else { continue };
            if let Some(b) = pq.rate {
                match b.ready_at(head_bytes, head_enq, t) {
                    Some(u) => t = t.max(u),
                    None => continue,
                }
            }
            if best.is_none_or(|b| t < b) {
                best = Some(t);
            }
        }
        best
    }

    /// Queues of the same settings (priorities, depths, rates, their
    /// buckets full) holding nothing, counters at zero: for a replica.
    pub fn settings_copy<U>(&self, now_ns: u64) -> EgressQueues<U> {
        let fresh = |b: &Option<Bucket>| b.map(|b| Bucket::new(b.rate(), self.share, now_ns));
        EgressQueues {
            priorities: self.priorities,
            default_depth: self.default_depth,
            default_rate: self.default_rate,
            ports: self
                .ports
                .iter()
                .map(|p| {
                    p.as_ref().map(|p| PortQueues {
                        queues: p
                            .queues
                            .iter()
                            .map(|q| Queue { rate: fresh(&q.rate), ..Queue::new(q.depth) })
                            .collect(),
                        rate: fresh(&p.rate),
                        queued: 0,
                    })
                })
                .collect(),
            queued: 0,
            shaping: self.shaping,
            out_of_range: 0,
            share: self.share,
        }
    }

    /// The counters of `port`'s queue `queue` (zeros for one never used).
    pub fn stats(&self, port: u32, queue: usize) -> QueueStats {
        self.ports
            .get(port as usize)
            .and_then(|p| p.as_ref())
            .and_then(|p| p.queues.get(queue))
            .map_or_else(QueueStats::default, |q| q.stats)
    }

    /// `(port, queue, counters, packets waiting)` of every queue made so far.
    pub fn all_stats(&self) -> Vec<(u32, usize, QueueStats, usize)> {
        let mut out = Vec::new();
        for (p, pq) in self.ports.iter().enumerate() {
            let Some(pq) = pq else { continue };
            for (i, q) in pq.queues.iter().enumerate() {
                out.push((p as u32, i, q.stats, q.items.len()));
            }
        }
        out
    }

    /// Packets waiting in `port`'s queue `queue`.
    pub fn depth(&self, port: u32, queue: usize) -> usize {
        self.ports
            .get(port as usize)
            .and_then(|p| p.as_ref())
            .and_then(|p| p.queues.get(queue))
            .map_or(0, |q| q.items.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn drain(q: &mut EgressQueues<u32>, now: u64) -> Vec<Departure<u32>> {
        let mut v = Vec::new();
        q.dequeue(now, usize::MAX, |d| v.push(d));
        v
    }

    #[test]
    fn fifo_without_rates_and_tail_drop_at_the_default_depth() {
        let mut q = EgressQueues::new(1);
        assert!(!q.shaping());
        for i in 0..70 {
            let r = q.enqueue(3, 0, 100, i, 0);
            if i < 64 {
                assert_eq!(r, Enqueue::Queued { depth: i });
            } else {
                assert_eq!(r, Enqueue::Dropped(i));
            }
        }
        assert_eq!(q.stats(3, 0).dropped, 6);
        assert_eq!(q.next_departure(5), Some(5));
        let out = drain(&mut q, 5);
        assert_eq!(out.iter().map(|d| d.item).collect::<Vec<_>>(), (0..64).collect::<Vec<_>>());
        assert_eq!(out[0].deq_depth, 63);
        assert_eq!(out[63].deq_depth, 0);
        assert_eq!(out[10].enq_depth, 10);
        assert!(q.is_empty());
        assert_eq!(q.next_departure(6), None);
    }

    #[test]
    fn strict_priority_serves_the_highest_queue_first() {
        let mut q = EgressQueues::new(3);
        q.enqueue(1, 0, 64, 10, 0);
        q.enqueue(1, 2, 64, 20, 0);
        q.enqueue(1, 1, 64, 30, 0);
        q.enqueue(1, 2, 64, 21, 0);
        q.enqueue(1, 9, 64, 22, 0); // clamped to the highest
        let out = drain(&mut q, 0);
        assert_eq!(
            out.iter().map(|d| (d.item, d.queue)).collect::<Vec<_>>(),
            [(20, 2), (21, 2), (22, 2), (30, 1), (10, 0)]
        );
        assert_eq!(out[0].enq_port_depth, 1);
        assert_eq!(out[0].deq_port_depth, 4);
    }

    #[test]
    fn packets_per_second_paces_departures() {
        let mut q = EgressQueues::new(1);
        assert!(q.set_queue_rate(Some(2), Some(0), Some(Rate::PacketsPerSecond(1000.0)), 0));
        assert!(q.shaping());
        for i in 0..50 {
            q.enqueue(2, 0, 1500, i, 0);
        }
        // One at once (the bucket starts full), then one per millisecond.
        let mut left = drain(&mut q, 0).len();
        assert_eq!(left, 1);
        let mut now = 0;
        while !q.is_empty() {
            let t = q.next_departure(now).expect("a rate above zero");
            assert!(t > now);
            now = t;
            let out = drain(&mut q, now);
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].deq_ns - out[0].enq_ns, now);
            left += 1;
        }
        assert_eq!(left, 50);
        // 49 gaps of 1 ms.
        assert!((49 * MS..49 * MS + 50).contains(&now), "{now}");
    }

    #[test]
    fn bits_per_second_holds_the_rate_within_one_percent() {
        for bits in [1e6, 1e8, 1e10] {
            let mut q = EgressQueues::new(1);
            q.set_port_rate(0, Some(Rate::bits_per_second(bits)), 0);
            let mut now = 0;
            let mut sent_bits = 0u64;
            let mut next = 0u32;
            // Keep the queue full for a simulated interval of 10 000 frames' time.
            let frame = 1000u32;
            let span = (10_000.0 * f64::from(frame) * 8.0 / bits * 1e9) as u64;
            while now < span {
                while q.depth(0, 0) < 64 {
                    q.enqueue(0, 0, frame, next, now);
                    next += 1;
                }
                for d in drain(&mut q, now) {
                    sent_bits += u64::from(d.bytes) * 8;
                }
                now = q.next_departure(now).expect("frames wait");
            }
            let achieved = sent_bits as f64 / (span as f64 / 1e9);
            assert!((achieved / bits - 1.0).abs() < 0.01, "{bits} b/s: achieved {achieved}");
        }
    }

    #[test]
    fn a_rate_limited_high_queue_does_not_hold_back_a_lower_one() {
        let mut q = EgressQueues::new(2);
        q.set_queue_rate(Some(0), Some(1), Some(Rate::PacketsPerSecond(1.0)), 0);
        q.enqueue(0, 1, 64, 1, 0);
        q.enqueue(0, 1, 64, 2, 0);
        q.enqueue(0, 0, 64, 3, 0);
        let out = drain(&mut q, 10);
        assert_eq!(out.iter().map(|d| d.item).collect::<Vec<_>>(), [1, 3]);
        // The first was due when it arrived (0), the next is due 1/rate after it.
        assert_eq!(q.next_departure(10), Some(1_000_000_000));
    }

    #[test]
    fn a_congested_low_class_leaves_the_high_class_untouched() {
        // A port paced at 1 000 packets/s; the low class offers 2 000/s and
        // fills its queue, the high class 100/s and never waits more than
        // one departure.
        let mut q = EgressQueues::new(2);
        q.set_port_rate(5, Some(Rate::PacketsPerSecond(1000.0)), 0);
        let (mut low_drop, mut high_delay_max, mut low_delay_max) = (0, 0, 0);
        for step in 0..20_000u64 {
            let now = step * MS / 2; // every 0.5 ms
            if let Enqueue::Dropped(_) = q.enqueue(5, 0, 100, 0, now) {
                low_drop += 1;
            }
            if step % 20 == 0 {
                assert!(matches!(q.enqueue(5, 1, 100, 1, now), Enqueue::Queued { .. }));
            }
            q.dequeue(now, usize::MAX, |d| {
                let delay = d.deq_ns - d.enq_ns;
                if d.item == 1 {
                    high_delay_max = high_delay_max.max(delay);
                } else {
                    low_delay_max = low_delay_max.max(delay);
                }
            });
        }
        assert!(low_drop > 4000, "{low_drop}");
        assert!(high_delay_max <= MS, "{high_delay_max}");
        assert!(low_delay_max >= 60 * MS, "{low_delay_max}");
        assert_eq!(q.stats(5, 1).dropped, 0);
    }

    #[test]
    fn settings_out_of_range_are_refused_and_depths_apply_to_new_ports() {
        let mut q: EgressQueues<u32> = EgressQueues::new(2);
        assert!(!q.set_depth(Some(512), None, 10));
        assert!(!q.set_depth(None, Some(2), 10));
        assert!(q.set_depth(None, None, 2));
        q.enqueue(7, 0, 64, 1, 0);
        q.enqueue(7, 0, 64, 2, 0);
        assert_eq!(q.enqueue(7, 0, 64, 3, 0), Enqueue::Dropped(3));
        assert_eq!(q.enqueue(600, 0, 64, 4, 0), Enqueue::Dropped(4));
        assert_eq!(q.out_of_range, 1);
        assert!(q.set_queue_rate(None, None, Some(Rate::PacketsPerSecond(10.0)), 0));
        assert!(q.shaping());
        assert!(q.set_queue_rate(None, None, None, 0));
        assert!(!q.shaping());
    }

    #[test]
    fn copies_sharing_a_link_run_at_their_share_of_the_rate() {
        // Two workers' copies of a port paced at 1 000 packets/s: each
        // sends one packet per 2 ms, settings made before or after the share.
        let mut a: EgressQueues<u32> = EgressQueues::new(1);
        a.set_queue_rate(Some(3), None, Some(Rate::PacketsPerSecond(1000.0)), 0);
        a.set_share(2, 0);
        let mut b: EgressQueues<u32> = a.settings_copy(0);
        b.set_queue_rate(None, None, Some(Rate::PacketsPerSecond(1000.0)), 0);
        for q in [&mut a, &mut b] {
            for i in 0..10 {
                q.enqueue(3, 0, 64, i, 0);
            }
            let mut times = Vec::new();
            let mut now = 0;
            while let Some(t) = q.next_departure(now) {
                now = t;
                q.dequeue(now, usize::MAX, |d| times.push(d.deq_ns));
            }
            let gaps: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
            assert_eq!(gaps, vec![2_000_000; 9]);
        }
    }

    #[test]
    fn an_idle_queue_whose_rate_allows_lets_a_packet_pass_unqueued() {
        let mut q: EgressQueues<u32> = EgressQueues::new(2);
        q.set_queue_rate(Some(4), Some(0), Some(Rate::PacketsPerSecond(1.0)), 0);
        assert!(q.try_pass(4, 0, 100, 0), "idle, the rate allows one");
        assert!(!q.try_pass(4, 0, 100, 1), "the next is due a second later");
        assert_eq!(q.enqueue(4, 0, 100, 7, 1), Enqueue::Queued { depth: 0 });
        assert!(!q.try_pass(4, 0, 100, 2_000_000_000), "never ahead of a packet of its queue");
        assert!(q.try_pass(4, 1, 100, 2), "a higher queue with nothing ahead of it passes");
        let s = q.stats(4, 0);
        assert_eq!((s.enqueued, s.dequeued, s.dequeued_bytes), (2, 1, 100));
    }
}
