//! The flow cache: what the pipeline did with a packet, recorded once and
//! replayed for the following packets whose fields look the same to every
//! table.
//!
//! Contract: reads a packet's full key and the tables' union masks; keeps,
//! per cache key, the steps ([`Op`]) one walk through the tables took (the
//! actions it ran in order, the group buckets it went through) and what
//! the walk counts ([`Count`]: the entries it hit, the tables it looked
//! up, the groups and buckets it used). The switch replays the steps on a
//! later packet with the same key instead of walking the tables: the
//! actions run on that packet's own bytes (a TTL that runs out still drops
//! it, checksums are its own), so only the choices the lookups made are
//! reused. Packets leave, as in a walk, by the actions' outputs.
//!
//! Counting: a replay adds one packet and its bytes to its cache entry
//! only; the entry's counts are folded into the switch's counters (flow
//! entries, tables, groups) when the entry is replaced, before any change
//! of the tables ([`FlowCache::drain`]), and are added to every counter
//! read ([`FlowCache::pending`]). Cacheable walks never change a packet's
//! length, so one packet and byte count per entry says everything.
//!
//! Why a replay is right: a lookup's result depends only on the key bits
//! some entry's mask covers (the tables' union masks, plus the input
//! port, which outputs read), and actions that set fields write
//! constants, so every later lookup of the walk sees the same bits too.
//! What breaks that is never recorded (the walk is then not cached):
//! actions that move headers or change the length (push/pop of VLAN, MPLS
//! and PBB tags, a set-field of the ethertype, IP protocol or ICMP type),
//! meters (their verdict depends on time), select groups (their bucket
//! depends on fields outside the key), output to TABLE, and a walk cut
//! short (an invalid TTL) since later packets may go further. A layout
//! wider than [`KEY_WORDS`] words turns the cache off until the tables
//! change.
//!
//! Concurrency: each replica has its own cache. Any change a walk
//! depends on (flows, groups, meters, ports) empties it before the
//! replica's next packet: the switch's change methods drain the counts
//! and empty the cache themselves (those of tables, groups and meters
//! first, while the entries the counts name still exist), and the worker
//! pool calls `DataPlane::changed` after a batch of changes, which does
//! it again.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use sluice_openflow::Action;

use crate::fields::{FullKey, FULL_LEN};

/// Slots of a replica's cache, in pairs: a key lives in one slot of the
/// pair its hash picks; a new key takes a free or void slot of the pair,
/// else replaces the pair's second entry after moving it to the first.
pub const SLOTS: usize = 1 << 16;

/// The longest cache key, in 8-byte words of the full key (six cover the
/// input port with Ethernet, VLAN, IPv4 and transport fields, or IPv6
/// addresses).
pub const KEY_WORDS: usize = 6;

/// Distinct step lists a cache holds; beyond, walks are not cached until
/// the next change.
const MAX_LISTS: usize = 1 << 16;

/// How the cache adapts to the traffic: whether packets go through it
/// is decided by what they cost, measured. The switch times its batches
/// ([`FlowCache::account`]); by windows of [`WINDOW`] packets the cache
/// keeps the cost of the last window run with it and of the last run
/// without it (every packet walking the tables), runs the cheaper way,
/// then one window the other way to measure it again (after a window
/// that refills the cache, when that way is the cache; a measure or a
/// refill that has cost twice a whole window of the chosen way ends
/// there). It stays in the cheaper way at least [`STAY`] windows, and as
/// many more (up to [`MAX_STAY`]) as keep what the measures cost beyond
/// it to 1/[`MEASURE_SHARE`] of the time. Why: whether a cache pays depends
/// on how many flows the traffic spreads over, how far apart their
/// slots are in memory and how cheap a walk is (a route table's fast
/// steps cost less than a miss and its recording); a hit rate says
/// little of that, the clock says all of it.
const WINDOW: u32 = 1 << 14;
const STAY: u32 = 63;
const MAX_STAY: u32 = 1 << 12;
const MEASURE_SHARE: u64 = 128;

/// Chooses between running packets through the cache and walking them
/// (see [`WINDOW`]).
#[derive(Debug, Clone, Copy)]
struct Chooser {
    /// The way packets run now: through the cache or not.
    cached: bool,
    /// Packets and ticks of the current window.
    packets: u32,
    ticks: u64,
    /// Ticks per window of each way, last measured (index: `cached`);
    /// `None` before the first measure.
    cost: [Option<u64>; 2],
    /// Windows left before the other way is measured again.
    stay: u32,
    /// The current window refills the cache: not measured.
    warming: bool,
    /// The current window measures the way not chosen.
    probing: bool,
    /// Ticks (per window) and windows of the current measure.
    probe_ticks: u64,
    probe_windows: u64,
}

impl Default for Chooser {
    fn default() -> Self {
        Chooser {
            cached: true,
            packets: 0,
            ticks: 0,
            cost: [None; 2],
            stay: 0,
            warming: true,
            probing: false,
            probe_ticks: 0,
            probe_windows: 0,
        }
    }
}

impl Chooser {
    #[inline]
    fn account(&mut self, packets: u32, ticks: u64) {
        self.packets += packets;
        self.ticks += ticks;
        // A measure of the way not chosen (or its refill) ends early once
        // it has cost twice a whole window of the chosen way: it lost.
        let lost = (self.probing || self.warming)
            && self.cost[usize::from(!self.cached)].is_some_and(|other| self.ticks > 2 * other);
        if self.packets >= WINDOW || lost {
            self.end_window();
        }
    }

    fn end_window(&mut self) {
        // Per WINDOW packets (a window ends on a batch boundary).
        let cost = self.ticks.saturating_mul(u64::from(WINDOW)) / u64::from(self.packets.max(1));
        self.packets = 0;
        self.ticks = 0;
        if self.probing {
            self.probe_ticks = self.probe_ticks.saturating_add(cost);
            self.probe_windows += 1;
        }
        if std::mem::take(&mut self.warming) {
            return;
        }
        self.cost[usize::from(self.cached)] = Some(cost);
        if self.probing {
            // Both ways measured: the cheaper one runs, for as many windows
            // as make what the measure cost beyond it (a refill, a
            // costlier way) 1/MEASURE_SHARE of the time.
            let (choice, stay) = match self.cost {
                [Some(walk), Some(cache)] => {
                    let better = walk.min(cache).max(1);
                    let extra = self.probe_ticks.saturating_sub(self.probe_windows * better);
                    let stay = (MEASURE_SHARE * extra / better).clamp(u64::from(STAY), u64::from(MAX_STAY));
                    (cache <= walk, stay as u32)
                }
                _ => (self.cached, STAY),
            };
            self.probing = false;
            self.probe_ticks = 0;
            self.probe_windows = 0;
            self.stay = stay;
            // Back to the cache after one window without it: it is as warm
            // as it was.
            self.cached = choice;
        } else if self.stay == 0 {
            self.probing = true;
            // The cache, left aside for a while, holds older walks: a
            // window refills it first.
            self.warming = !self.cached;
            self.cached = !self.cached;
        } else {
            self.stay -= 1;
        }
    }
}

/// One step of a recorded walk.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Op {
    /// A table's lookup found nothing: the packet is dropped.
    Drop,
    /// Write-metadata.
    Metadata { value: u64, mask: u64 },
    /// Set-field of the Ethernet destination (`at` 0) or source (`at` 6).
    SetEth { at: u8, mac: [u8; 6] },
    /// Output to a port (a number, not a reserved port).
    Output { port: u32 },
    /// Decrement of the IP TTL; `counted` as for [`Op::Act`].
    DecTtl { table: u8, cookie: u64, counted: bool },
    /// Any other action; `counted`: a drop by it counts as the pipeline's
    /// drop (apply-actions), not only as the end of the action set.
    Act { action: Action, reason: u8, table: u8, cookie: u64, counted: bool },
    /// A group: the steps of each bucket that ran, each on its own copy of
    /// the packet.
    Group { runs: Vec<Vec<Op>> },
}

/// The most common walk, forwarding, as one step: set the Ethernet
/// addresses it names, decrement the IP TTL if it says so, send out of one
/// port. A step list made only of [`Op::SetEth`], at most one
/// [`Op::DecTtl`] and a last [`Op::Output`] (also as a group's single
/// bucket at the end of the walk) has one; the switch runs it without
/// going through the list, except when the TTL runs out (then the list
/// runs, with its invalid-TTL handling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forward {
    pub dst: Option<[u8; 6]>,
    pub src: Option<[u8; 6]>,
    pub dec_ttl: bool,
    pub port: u32,
}

impl Forward {
    /// The forwarding step a list of actions amounts to, if it does: MAC
    /// sets, at most one `dec_nw_ttl`, then an output to a port (a
    /// group's single bucket, say).
    pub fn of_actions(actions: &[Action]) -> Option<Forward> {
        let (last, init) = actions.split_last()?;
        let Action::Output { port, .. } = last else { return None };
        if *port > sluice_openflow::port::MAX {
            return None;
        }
        let mut f = Forward { dst: None, src: None, dec_ttl: false, port: *port };
        for a in init {
            match a {
                Action::SetField(o) if o.value.len() == 6 && o.mask.is_none() => {
                    let mac: [u8; 6] = o.value[..].try_into().ok()?;
                    match o.field {
                        sluice_openflow::OxmField::EthDst => f.dst = Some(mac),
                        sluice_openflow::OxmField::EthSrc => f.src = Some(mac),
                        _ => return None,
                    }
                }
                Action::DecNwTtl if !f.dec_ttl => f.dec_ttl = true,
                _ => return None,
            }
        }
        Some(f)
    }

    /// The forwarding step `ops` amount to, if they do.
    fn of(ops: &[Op]) -> Option<Forward> {
        let mut f = Forward { dst: None, src: None, dec_ttl: false, port: 0 };
        let (last, init) = ops.split_last()?;
        match last {
            Op::Output { port } => f.port = *port,
            Op::Group { runs } if runs.len() == 1 => {
                let inner = Forward::of(&runs[0])?;
                // The group's bucket runs on a copy after the steps before it.
                let mut outer = Forward::of(&[init, &[Op::Output { port: inner.port }]].concat())?;
                outer.dst = inner.dst.or(outer.dst);
                outer.src = inner.src.or(outer.src);
                if outer.dec_ttl && inner.dec_ttl {
                    return None;
                }
                outer.dec_ttl |= inner.dec_ttl;
                return Some(outer);
            }
            _ => return None,
        }
        for op in init {
            match op {
                Op::SetEth { at: 0, mac } => f.dst = Some(*mac),
                Op::SetEth { at: 6, mac } => f.src = Some(*mac),
                Op::DecTtl { .. } if !f.dec_ttl => f.dec_ttl = true,
                _ => return None,
            }
        }
        Some(f)
    }
}

/// What a recorded walk counts, per packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Count {
    /// Table `table` looked up and matched entry `id` (classifier id).
    Hit { table: u8, id: u32 },
    /// Table `table` looked up and matched nothing.
    Miss { table: u8 },
    /// Group `id` (of `n` buckets) ran these buckets.
    Group { id: u32, n: usize, buckets: Vec<usize> },
}

#[derive(Debug)]
struct Slot {
    generation: u64,
    hash: u64,
    key: [u64; KEY_WORDS],
    /// Packets and bytes replayed and not yet folded.
    packets: u64,
    bytes: u64,
    counts: Box<[Count]>,
    /// Index of its step list.
    list: u32,
    /// The forwarding step the list amounts to, if it does (a copy of the
    /// list's: a hit reads it with the key, from the same lines).
    forward: Option<Forward>,
}

/// A replica's flow cache (see the module documentation).
#[derive(Debug)]
pub struct FlowCache {
    /// Bumped by [`FlowCache::drain`]: entries of older generations are void.
    generation: u64,
    /// Generation the key layout below was computed for.
    layout_generation: Option<u64>,
    /// The 8-byte words of the full key the cache key is made of, and
    /// their masks; `None` when they are more than [`KEY_WORDS`].
    words: Option<Vec<(usize, u64)>>,
    /// Seeds the key hash (per cache: packets made to collide in one
    /// replica do not collide in another run).
    seed: u64,
    slots: Vec<Option<Slot>>,
    /// The slots filled in this generation (each once): what
    /// [`FlowCache::drain`] and [`FlowCache::pending`] visit, so a change
    /// costs in proportion to what the cache holds, not to its size.
    filled: Vec<u32>,
    /// Distinct step lists, shared by the entries that take the same steps
    /// (a route table's entries to one next hop), with the forwarding step
    /// they amount to, and their index by hash.
    lists: Vec<(Vec<Op>, Option<Forward>)>,
    list_index: HashMap<u64, Vec<u32>>,
    /// Whether packets go through the cache or walk (see [`WINDOW`]).
    chooser: Chooser,
}

impl Clone for FlowCache {
    /// A copy starts empty (a new replica records its own walks).
    fn clone(&self) -> Self {
        FlowCache::new()
    }
}

impl Default for FlowCache {
    fn default() -> Self {
        FlowCache::new()
    }
}

/// A packet's cache key and its hash.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    words: [u64; KEY_WORDS],
    hash: u64,
}

/// Hashes a cache key: one multiply per word, all independent (a short
/// dependency chain), then a final mix.
#[inline]
fn hash(key: &[u64; KEY_WORDS], seed: u64) -> u64 {
    const M: [u64; KEY_WORDS] = [
        0x9e37_79b9_7f4a_7c15,
        0xc2b2_ae3d_27d4_eb4f,
        0x1656_67b1_9e37_79f9,
        0xd6e8_feb8_6659_fd93,
        0xff51_afd7_ed55_8ccd,
        0xc4ce_b9fe_1a85_ec53,
    ];
    let mut h = seed;
    for (w, m) in key.iter().zip(M) {
        h = h.wrapping_add((w ^ (w >> 29)).wrapping_mul(m));
    }
    h ^= h >> 32;
    h = h.wrapping_mul(M[0]);
    h ^ (h >> 29)
}

impl FlowCache {
    /// An empty cache.
    pub fn new() -> FlowCache {
        let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        FlowCache {
            generation: 0,
            layout_generation: None,
            words: None,
            seed: t ^ (&t as *const u64 as u64),
            slots: Vec::new(),
            filled: Vec::new(),
            lists: Vec::new(),
            list_index: HashMap::new(),
            chooser: Chooser::default(),
        }
    }

    /// Gives every entry's pending counts to `fold` (then zero), and voids
    /// every entry: call it before the tables, groups or meters change.
    pub fn drain(&mut self, mut fold: impl FnMut(&[Count], u64, u64)) {
        for &i in &self.filled {
            if let Some(s) = &mut self.slots[i as usize] {
                if s.generation == self.generation && s.packets != 0 {
                    fold(&s.counts, s.packets, s.bytes);
                    s.packets = 0;
                    s.bytes = 0;
                }
            }
        }
        self.filled.clear();
        self.generation += 1;
        // Clearing an empty map still sweeps its capacity: not once per
        // flow-mod of a batch.
        if !self.lists.is_empty() {
            self.lists.clear();
            self.list_index.clear();
        }
    }

    /// Gives every entry's pending counts to `see` (a counter read).
    pub fn pending(&self, mut see: impl FnMut(&[Count], u64, u64)) {
        for &i in &self.filled {
            if let Some(s) = &self.slots[i as usize] {
                if s.generation == self.generation && s.packets != 0 {
                    see(&s.counts, s.packets, s.bytes);
                }
            }
        }
    }

    /// Whether the key layout must be recomputed (see [`FlowCache::set_layout`]).
    #[inline]
    pub fn needs_layout(&self) -> bool {
        self.layout_generation != Some(self.generation)
    }

    /// Sets the key layout from the OR of the tables' union masks; the
    /// input port is always part of the key.
    pub fn set_layout(&mut self, union: &FullKey) {
        let mut mask = *union;
        mask[0..4].fill(0xff);
        let words: Vec<(usize, u64)> =
            (0..FULL_LEN / 8).map(|w| (w, crate::fields::word(&mask, w))).filter(|&(_, m)| m != 0).collect();
        self.words = (words.len() <= KEY_WORDS).then_some(words);
        self.layout_generation = Some(self.generation);
    }

    /// The cache key of the packet whose fields are `full`; `None` when
    /// the layout is too wide for the cache.
    #[inline]
    pub fn key(&self, full: &FullKey) -> Option<Key> {
        let layout = self.words.as_ref()?;
        let mut words = [0; KEY_WORDS];
        for (k, &(w, m)) in words.iter_mut().zip(layout) {
            *k = crate::fields::word(full, w) & m;
        }
        Some(Key { words, hash: hash(&words, self.seed) })
    }

    /// Whether packets go through the cache for now (see [`WINDOW`]).
    #[inline]
    pub fn in_use(&self) -> bool {
        self.chooser.cached
    }

    /// Counts a batch of `packets` that took `ticks` (time stamps of
    /// `sluice_dataplane::profile::stamp`) run
    /// the way [`FlowCache::in_use`] said.
    #[inline]
    pub fn account(&mut self, packets: usize, ticks: u64) {
        self.chooser.account(packets as u32, ticks);
    }

    /// Starts loading the slots where `key` would be.
    #[inline]
    pub fn prefetch(&self, key: &Key) {
        // Every cache line of the pair (a slot spans two).
        let pair = (key.hash as usize) & (SLOTS - 2);
        if let Some(s) = self.slots.get(pair..pair + 2) {
            let (at, bytes) = (s.as_ptr() as *const u8, std::mem::size_of_val(s));
            for off in (0..bytes).step_by(64) {
                sluice_lookup::lpm::prefetch_ptr(at.wrapping_add(off));
            }
        }
    }

    /// Looks up the packet of key `key` and length `len`; on a hit, counts
    /// it and gives the index of its step list (see
    /// [`FlowCache::take_list`]). Only while [`FlowCache::in_use`].
    #[inline]
    pub fn lookup(&mut self, key: &Key, len: usize) -> Option<(u32, Option<Forward>)> {
        let pair = (key.hash as usize) & (SLOTS - 2);
        let generation = self.generation;
        let s = self.slots.get_mut(pair..pair + 2)?.iter_mut().flatten().find(|s| {
            s.hash == key.hash
                && s.generation == generation
                && s.key.iter().zip(&key.words).fold(0, |d, (a, b)| d | (a ^ b)) == 0
        })?;
        s.packets += 1;
        s.bytes += len as u64;
        Some((s.list, s.forward))
    }

    /// Takes step list `i` out to run it (give it back with
    /// [`FlowCache::put_list`]).
    #[inline]
    pub fn take_list(&mut self, i: u32) -> Vec<Op> {
        std::mem::take(&mut self.lists[i as usize].0)
    }

    /// Gives back step list `i` (see [`FlowCache::take_list`]).
    #[inline]
    pub fn put_list(&mut self, i: u32, ops: Vec<Op>) {
        self.lists[i as usize].0 = ops;
    }

    /// Whether the walk of the packet that just missed should be recorded.
    #[inline]
    pub fn should_record(&self) -> bool {
        self.words.is_some()
    }

    /// Stores the walk recorded for the packet that just missed (the walk
    /// counted that packet itself); the entry it replaces gives its
    /// pending counts to `fold` first.
    pub fn insert(&mut self, key: &Key, ops: Vec<Op>, counts: Vec<Count>, fold: impl FnOnce(&[Count], u64, u64)) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ops.hash(&mut h);
        let fingerprint = h.finish();
        let same = self.list_index.get(&fingerprint).and_then(|v| v.iter().find(|&&i| self.lists[i as usize].0 == ops));
        let list = match same {
            Some(&i) => i,
            None if self.lists.len() < MAX_LISTS => {
                let forward = Forward::of(&ops);
                self.lists.push((ops, forward));
                let i = (self.lists.len() - 1) as u32;
                self.list_index.entry(fingerprint).or_default().push(i);
                i
            }
            None => return,
        };
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, || None);
        }
        let pair = (key.hash as usize) & (SLOTS - 2);
        let live = |s: &Option<Slot>, g: u64| s.as_ref().is_some_and(|s| s.generation == g);
        let at = if !live(&self.slots[pair], self.generation) {
            self.filled.push(pair as u32);
            pair
        } else {
            if live(&self.slots[pair + 1], self.generation) {
                // Both taken: the second goes, the first moves there.
                if let Some(old) = self.slots[pair + 1].as_ref().filter(|s| s.packets != 0) {
                    fold(&old.counts, old.packets, old.bytes);
                }
                self.slots.swap(pair, pair + 1);
                pair
            } else {
                self.filled.push(pair as u32 + 1);
                pair + 1
            }
        };
        self.slots[at] = Some(Slot {
            generation: self.generation,
            hash: key.hash,
            key: key.words,
            packets: 0,
            bytes: 0,
            counts: counts.into_boxed_slice(),
            list,
            forward: self.lists[list as usize].1,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cheaper_way_runs_and_the_other_is_measured_again() {
        let mut c = Chooser::default();
        let window = |c: &mut Chooser, ticks: u64| {
            // Two batches of half a window: a window ends on the second.
            c.account(WINDOW / 2, ticks / 2);
            c.account(WINDOW / 2, ticks / 2);
        };
        assert!(c.cached && c.warming, "the cache is tried first, filled first");
        window(&mut c, 1_000_000);
        assert!(c.cached && c.cost == [None, None], "the fill is not measured (nor cut short: nothing to compare)");
        window(&mut c, 2_000);
        assert!(!c.cached && c.probing, "then the walk is measured");
        window(&mut c, 1_000);
        assert!(!c.cached, "the walk, cheaper, is chosen");
        assert_eq!(c.cost, [Some(1_000), Some(2_000)]);
        assert_eq!(c.stay, STAY, "its own measure cost nothing extra");
        for _ in 0..c.stay {
            window(&mut c, 1_000);
        }
        assert!(!c.cached);
        window(&mut c, 1_000);
        assert!(c.cached && c.warming, "then the cache is measured again, refilled first");
        // A refill that costs too much ends early: after one batch of
        // half a window costing 2 500 (more than twice the walk's 1 000).
        c.account(WINDOW / 2, 2_500);
        assert!(c.cached && !c.warming && c.packets == 0, "the refill was cut short");
        window(&mut c, 500);
        assert_eq!(c.cost, [Some(1_000), Some(500)]);
        // The refill counts at its rate over a whole window (5 000): 4 500
        // beyond the cache's two windows, nine windows' worth.
        assert!(c.cached && c.stay == 9 * 128, "the cache, cheaper now, is chosen, and its costly refill made rare");
        for _ in 0..=9 * 128 {
            window(&mut c, 500);
        }
        assert!(!c.cached && !c.warming, "the walk is measured again");
        window(&mut c, 1_000);
        assert!(c.cached && !c.warming, "back to the cache, still warm");
        assert_eq!(c.stay, 128, "the walk's measure cost one extra window's worth");
        // A measure that loses badly ends early too.
        for _ in 0..=128 {
            window(&mut c, 500);
        }
        assert!(!c.cached && c.probing);
        c.account(64, 1_001);
        assert!(c.cached && !c.probing && c.cost[0] == Some(1_001 * u64::from(WINDOW) / 64));
    }

    #[test]
    fn forwarding_steps_fold_into_one_and_others_do_not() {
        let (dst, src) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let dec = Op::DecTtl { table: 0, cookie: 0, counted: true };
        let route =
            [Op::SetEth { at: 6, mac: src }, Op::SetEth { at: 0, mac: dst }, dec.clone(), Op::Output { port: 3 }];
        let f = Forward { dst: Some(dst), src: Some(src), dec_ttl: true, port: 3 };
        assert_eq!(Forward::of(&route), Some(f));
        // Through a next-hop group at the end: the bucket's sets come last.
        let via_group = [Op::SetEth { at: 0, mac: src }, Op::Group { runs: vec![route.to_vec()] }];
        assert_eq!(Forward::of(&via_group), Some(f));
        assert_eq!(Forward::of(&[dec.clone(), Op::Group { runs: vec![route.to_vec()] }]), None, "two decrements");
        assert_eq!(Forward::of(&[Op::Output { port: 1 }, Op::Output { port: 2 }]), None, "two outputs");
        assert_eq!(Forward::of(&[Op::Metadata { value: 1, mask: 1 }, Op::Output { port: 1 }]), None);
        assert_eq!(Forward::of(&[Op::Drop]), None);
        assert_eq!(Forward::of(&[]), None);
    }

    #[test]
    fn a_pair_keeps_two_keys_and_evicted_counts_are_folded() {
        let mut c = FlowCache::new();
        let mut union = [0u8; FULL_LEN];
        union[40..44].fill(0xff);
        c.set_layout(&union);
        let full = |ip: u32| {
            let mut k = [0u8; FULL_LEN];
            k[40..44].copy_from_slice(&ip.to_be_bytes());
            k
        };
        // Three keys that land in one pair (found by trying: about one
        // key in 32 768 lands in a given pair).
        let pair_of = |k: &Key| (k.hash as usize) & (SLOTS - 2);
        let first = c.key(&full(0)).unwrap();
        let same: Vec<Key> =
            (1..1 << 22).map(|i| c.key(&full(i)).unwrap()).filter(|k| pair_of(k) == pair_of(&first)).take(2).collect();
        assert_eq!(same.len(), 2, "keys sharing a pair");
        let counts = |id: u32| vec![Count::Hit { table: 0, id }];
        let mut folded = Vec::new();
        c.insert(&first, vec![Op::Output { port: 1 }], counts(0), |_, _, _| unreachable!());
        c.insert(&same[0], vec![Op::Output { port: 2 }], counts(1), |_, _, _| unreachable!());
        assert!(c.lookup(&first, 60).is_some() && c.lookup(&same[0], 60).is_some());
        assert!(c.lookup(&first, 60).is_some());
        c.insert(&same[1], vec![Op::Output { port: 3 }], counts(2), |k, p, b| folded.push((k.to_vec(), p, b)));
        assert_eq!(folded.len(), 1, "the evicted entry's counts");
        assert!(c.lookup(&same[1], 60).is_some());
        let mut left = Vec::new();
        c.drain(|k, p, b| left.push((k.to_vec(), p, b)));
        let total: u64 = folded.iter().chain(&left).map(|x| x.1).sum();
        assert_eq!(total, 4, "every hit counted once, evicted or drained");
        assert!(c.lookup(&first, 60).is_none() && c.lookup(&same[1], 60).is_none(), "drained: empty");
    }
}
