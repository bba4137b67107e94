//! The switch's packet loop: a batch of frames that arrived on one port,
//! each run to completion. Every driver calls it: live ports, the pcap
//! replay, STF tests and the in-memory bench (through
//! `sluice_dataplane::DataPlane`), and [`Switch::process`] is a batch of one.
//!
//! Contract. Reads: the frames (borrowed for the call), the tables through
//! their views, rebuilt at the start of each batch so that a control-plane
//! change made between two batches is seen whole. Writes: pooled PHVs,
//! counters, registers, meters, digests, the switch's statistics. Leaves:
//! every frame sent goes to `emit(input, port, bytes)`, `input` being the
//! index of the frame it came from, in the order bmv2 would send them; a
//! dropped packet leaves nothing and counts in `stats.dropped`.
//!
//! A batch runs one of three strategies, chosen per batch ([`Strategy`]):
//! - **fused**: the generated batch function parses and forwards the
//!   packets (ingress, egress, deparser) into one output area each, and
//!   stops at a packet that needs the general path (multicast, clone,
//!   resubmit, recirculate, truncate), which then continues in Rust
//!   (`replication.rs`); with big header-keyed tables it calls back every
//!   few packets for their index slots and headers to be prefetched ahead
//!   of it ([`work_ahead`]), or, for tables that need more, the batch's
//!   keys are computed first and their memory prefetched;
//! - **parse ahead**: no generated batch function but big tables: the
//!   batch is parsed first, the lookups' memory prefetched in a software
//!   pipeline, then each packet runs;
//! - **packet by packet**: traces, or parsers that call externs (which
//!   cannot run ahead).

use crate::control::{Exec, PktMeta};
use crate::phv::Phv;

use super::{Arrival, Switch};
use crate::v1model::instance;

pub(crate) use sluice_dataplane::BATCH;

/// Entries from which the interpreter prefetches a header-keyed table's
/// lookups in batches (each packet parsed once more, ahead, for its key).
/// Why this many: with one index cache line per route, smaller tables stay
/// in a 32 MiB L3 and the second parse costs more than the misses it hides
/// (router, 64 B, one worker: 100k routes 16.5 Mpps without, 12.7 with;
/// 300k about equal; 1M 4 without, 12 with; edge at 100k routes 4.0
/// without, 3.8 with; `sluice bench --example router --entries N`).
const PREFETCH_MIN_ENTRIES: usize = 1 << 18;
/// [`PREFETCH_MIN_ENTRIES`] for generated code, whose prefetching costs far
/// less than the interpreter's second parse. Why this many: router, 64 B,
/// one worker (`sluice bench --example router --entries N --route-layout
/// L`), Mpps without and with prefetching (measured with the key pass
/// that tables needing more than their index slot still get): 10 routes 74.9 / 74.6 (spread)
/// and 75.1 / 74.1 (consecutive); 256: 68.5 / 69.7 and 74.6 / 72.8; 1000:
/// 67.6 / 70.6 and 74.0 / 75.6; 10k: 50.9 / 58.3 and 62.6 / 62.1; 100k:
/// 26.8 / 52.0 and 58.5 / 59.3. From about a thousand routes it never
/// costs, and on routes spread over the address space it doubles the rate.
/// With the top level on huge pages, 10 000 routes spread still run 0.79x
/// without it (`bench/ab.sh`, five turns): the stored frames streaming
/// through the caches evict the slots.
const FAST_PREFETCH_MIN_ENTRIES: usize = 1 << 10;

/// How many packets ahead of the one running the parse-ahead strategy
/// prefetches index slots, and hit records.
const SLOT_AHEAD: usize = 16;
const RECORD_AHEAD: usize = 8;

/// How one batch runs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// The generated batch function; `prefetch`: big tables' index slots
    /// are prefetched from the batch's keys first.
    Fused { prefetch: bool },
    /// Parsed ahead, lookups prefetched, then run packet by packet.
    ParseAhead,
    /// Packet by packet, the next packet's headers loading meanwhile.
    PerPacket,
}

/// The batch function's packet list, kept (empty) between batches so that
/// it is not allocated or zeroed per batch.
#[derive(Default)]
pub(crate) struct FastRefs(pub(crate) Vec<crate::jit::PktRef>);

// SAFETY: the list is emptied before a batch returns (and before the switch
// can move to another thread), so it holds no pointer between batches.
unsafe impl Send for FastRefs {}

/// Lists `chunk`'s packets for the batch function in `refs`. With
/// `headers`, each packet's first 64 bytes (where its headers are) start
/// loading into the cache as it is listed: the key pass that follows for
/// big tables then reads them with their misses overlapped. Why only then:
/// in interleaved A/B runs of `bench/ab.sh`, without the prefetches
/// `l2_learning` and `basic_routing` at 10 000 entries (no key pass) ran
/// 5-8% faster, while the router at 1M routes and the edge example at
/// 100 000 (key pass) ran up to 10% slower.
fn list_chunk(chunk: &[&[u8]], refs: &mut Vec<crate::jit::PktRef>, headers: bool) {
    refs.clear();
    refs.reserve(chunk.len());
    // Written in place rather than pushed: a push stores the length back
    // per packet (about 2% of the router's time at 64 B).
    for (r, data) in refs.spare_capacity_mut().iter_mut().zip(chunk) {
        if headers {
            crate::lpm::prefetch_headers(data);
        }
        r.write(crate::jit::PktRef::of(data));
    }
    // SAFETY: the loop initialized the first `chunk.len()` spare slots
    // (`reserve` made room for them).
    unsafe { refs.set_len(chunk.len()) };
}

/// Packets the batch function runs between two calls of its work ahead
/// ([`work_ahead`]), and how many such steps ahead of the packets running
/// it prefetches their index slots, and their headers (read for the keys
/// two steps before the slots are). Why these: router, 64 B, one worker,
/// `bench/ab.sh` (alternating 2 s turns): steps of 8 packets ran 3-4%
/// faster than 16 at 10 000 and a million routes, 32 slower still; slots
/// two steps ahead and headers four 1.5% (10 000) and 6% (a million)
/// faster than one and two; three and five the same as two and four.
const AHEAD_STEP: usize = 8;
const SLOT_STEPS: usize = 2;
const HEADER_STEPS: usize = 4;

/// What the batch function's work ahead reads (see [`work_ahead`]).
///
/// Raw pointers, as in a table's `TableView`: the batch function holds the
/// switch's state mutably while it runs. They stay valid for the batch:
/// the chunk's packets are borrowed for the call, and tables change only
/// between batches (control-plane writes).
struct Ahead {
    /// The chunk's packet list.
    pkts: *const crate::jit::PktRef,
    n: usize,
    /// The packet of the chunk the current call of the batch function
    /// started with (its packet 0).
    base: usize,
    /// Per big table: its index slots, their count and the key bits below a slot.
    slots: TableSlots,
    reads: crate::jit::KeyReads,
    tables: usize,
    /// The same for a lone big table whose key is read from 4 bytes.
    one: Option<OneTable>,
}

/// A lone big table's slot, from a packet: the slot index is
/// `(u32::from_be_bytes(packet[at..at + 4]) >> shift) & mask`, for packets
/// of at least `at + 4` bytes, and the slot is `top[index]` when the index
/// is below `len`. Why: the work ahead's commonest case (a route table)
/// then costs about a dozen instructions per packet, where the general
/// loop over tables and 8-byte reads costs about 31 (the router at 10 000
/// routes runs about 311 in all); the router at a million routes ran
/// about 2% faster, at 10 000 the same (the step runs in the shadow of
/// its memory stalls).
#[derive(Clone, Copy)]
struct OneTable {
    top: *const u32,
    len: usize,
    at: usize,
    shift: u32,
    mask: u32,
}

impl OneTable {
    /// The lone table of `slots` and `reads`, when its key has a 4-byte
    /// window (`KeyRead::window32`) and the slot's low bits fit in it. Out
    /// of line: inlined, it changed the register allocation of the bench's
    /// whole batch loop, and `basic_routing` at 131 072 entries (which never
    /// takes this step) ran 4% slower in two A/B runs.
    #[inline(never)]
    fn of(slots: &TableSlots, reads: &crate::jit::KeyReads, tables: usize) -> Option<OneTable> {
        let (top, len, low) = slots[0];
        let (at, shift, mask) = (tables == 1).then(|| reads[0].window32()).flatten()?;
        (shift + low < 32).then_some(OneTable { top, len, at, shift: shift + low, mask: mask >> low })
    }

    /// The slot index for packet `d`, `None` when `d` is too short for the
    /// read or the index is past the slots.
    #[inline(always)]
    fn index(&self, d: &[u8]) -> Option<usize> {
        if d.len() < self.at + 4 {
            return None;
        }
        // SAFETY: `d` has `at + 4` bytes.
        let w = unsafe { std::ptr::read_unaligned(d.as_ptr().add(self.at).cast::<[u8; 4]>()) };
        let k = ((u32::from_be_bytes(w) >> self.shift) & self.mask) as usize;
        (k < self.len).then_some(k)
    }
}

/// Per big table (at most [`crate::jit::KEY_READ_TABLES`]): its index
/// slots, their count and the key bits below a slot.
type TableSlots = [(*const u32, usize, u32); crate::jit::KEY_READ_TABLES];

impl Ahead {
    /// Packet `i` of the chunk (`i < n`).
    fn packet(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.n, "a packet of the chunk");
        // SAFETY: `i < n`, the list's length; the packet's bytes are
        // borrowed for the batch.
        unsafe {
            let (p, len) = (*self.pkts.add(i)).parts();
            std::slice::from_raw_parts(p, len)
        }
    }

    /// Starts loading the headers of packets `from..to` of the chunk.
    fn headers(&self, from: usize, to: usize) {
        for i in from..to.min(self.n) {
            crate::lpm::prefetch_headers(self.packet(i));
        }
    }

    /// One step of the work ahead for a lone table ([`OneTable`]): the
    /// slots of packets `slots..slots + AHEAD_STEP` and the headers of
    /// `headers..headers + AHEAD_STEP`, all in the chunk (`slots <
    /// headers`, `headers + AHEAD_STEP <= n`). A packet's headers are its
    /// first two cache lines' worth from its start (its first 64 bytes,
    /// wherever they fall), read past a shorter packet's end: a prefetch
    /// never faults.
    #[inline(always)]
    fn step_one(&self, t: &OneTable, slots: usize, headers: usize) {
        debug_assert!(slots < headers && headers + AHEAD_STEP <= self.n, "a step inside the chunk");
        // A local copy, so that its fields stay in registers across the prefetches.
        let t = *t;
        for j in 0..AHEAD_STEP {
            let h = self.packet(headers + j).as_ptr();
            crate::lpm::prefetch_ptr(h);
            crate::lpm::prefetch_ptr(h.wrapping_add(63));
            if let Some(k) = t.index(self.packet(slots + j)) {
                crate::lpm::prefetch_ptr(t.top.wrapping_add(k).cast());
            }
        }
    }

    /// Starts loading the index slots of packets `from..to` of the chunk,
    /// from the keys read straight from the packets.
    fn slots(&self, from: usize, to: usize) {
        for i in from..to.min(self.n) {
            let d = self.packet(i);
            for (&(top, len, low), read) in self.slots[..self.tables].iter().zip(&self.reads) {
                if let Some(k) = read.read(d) {
                    let at = ((k as u32) >> low) as usize;
                    if at < len {
                        crate::lpm::prefetch_ptr(top.wrapping_add(at).cast());
                    }
                }
            }
        }
    }
}

/// The batch function's work ahead (a `jit::AheadFn`): before packet
/// `index` of its call it starts loading the index slots of the packets
/// [`SLOT_STEPS`] steps on (their keys read from headers loaded two steps
/// earlier) and the headers of those [`HEADER_STEPS`] steps on, then lets
/// it run a step. Why: the memory latency then overlaps the packets'
/// work, where a pass over the batch before the batch function waits for
/// it alone.
///
/// # Safety
/// `state` points to the [`Ahead`] of the running batch.
unsafe extern "C" fn work_ahead(state: *mut std::ffi::c_void, index: u64) -> u64 {
    // SAFETY: the caller's word.
    let a = unsafe { &*(state as *const Ahead) };
    let i = a.base + index as usize;
    let (slots, headers) = (i + SLOT_STEPS * AHEAD_STEP, i + HEADER_STEPS * AHEAD_STEP);
    match &a.one {
        Some(t) if headers + AHEAD_STEP <= a.n => a.step_one(t, slots, headers),
        _ => {
            a.slots(slots, slots + AHEAD_STEP);
            a.headers(headers, headers + AHEAD_STEP);
        }
    }
    (index as usize + AHEAD_STEP).min(a.n - a.base) as u64
}

impl Switch {
    /// Processes one received packet and everything it causes (clones,
    /// replicas, recirculations): a batch of one. `emit(port, bytes)`
    /// receives each packet sent.
    pub fn process(&mut self, port: u32, data: &[u8], emit: &mut dyn FnMut(u32, &[u8])) {
        self.process_batch(port, &[data], &mut |_, p, d: &[u8]| emit(p, d));
    }

    /// [`Switch::process`] at a given switch time (microseconds): replays
    /// and tests that must not depend on the wall clock use it.
    pub fn process_at(&mut self, port: u32, data: &[u8], now_us: u64, emit: &mut dyn FnMut(u32, &[u8])) {
        self.process_batch_at(port, &[data], now_us, &mut |_, p, d: &[u8]| emit(p, d));
    }

    /// Processes frames that arrived together on one port (see the module
    /// doc): they share one reading of the clock (ingress timestamps have
    /// microsecond resolution anyway).
    pub fn process_batch<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E) {
        let now = self.clock_us();
        self.process_batch_at(port, frames, now, emit);
    }

    /// [`Switch::process_batch`] at a given switch time (microseconds), for
    /// replays and tests that must not depend on the wall clock.
    pub fn process_batch_at<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        frames: &[&[u8]],
        now_us: u64,
        emit: &mut E,
    ) {
        self.now = now_us;
        self.refresh_views();
        if self.plan.psa.is_some() {
            // A PSA program: each frame through the PSA packet path.
            for (i, f) in frames.iter().enumerate() {
                let first = Arrival { port, arrived: true, instance_type: crate::psa::path::NORMAL, preserved: &[] };
                self.with_queues(&mut |p, d| emit(i, p, d), |sw, ingress, egress, _| {
                    sw.psa_ingress(first, f, ingress, egress)
                });
            }
            return;
        }
        let strategy = self.strategy();
        for (k, chunk) in frames.chunks(BATCH).enumerate() {
            let base = k * BATCH;
            match strategy {
                Strategy::Fused { prefetch } => self.run_fused(port, chunk, base, prefetch, emit),
                Strategy::ParseAhead => self.run_parsed_ahead(port, chunk, base, emit),
                Strategy::PerPacket => self.run_per_packet(port, chunk, base, emit),
            }
        }
    }

    /// The strategy for the next batch: it depends on the tables' sizes,
    /// which the control plane changes between batches.
    pub(crate) fn strategy(&self) -> Strategy {
        let fused =
            self.trace.is_none() && self.tm.is_none() && self.compiled.as_ref().is_some_and(|c| c.has_fast_path());
        if fused {
            return Strategy::Fused { prefetch: self.preparse && self.prefetched_table_of(FAST_PREFETCH_MIN_ENTRIES) };
        }
        if self.preparse && self.trace.is_none() && self.prefetched_table_of(PREFETCH_MIN_ENTRIES) {
            Strategy::ParseAhead
        } else {
            Strategy::PerPacket
        }
    }

    /// Whether a table whose lookups are prefetched holds `n` entries or more.
    fn prefetched_table_of(&self, n: usize) -> bool {
        self.prefetch.iter().any(|t| self.state.tables[t.0].len() >= n)
    }

    /// The packet-by-packet strategy: the next packet's headers start
    /// loading while this one runs.
    fn run_per_packet<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        chunk: &[&[u8]],
        base: usize,
        emit: &mut E,
    ) {
        for (i, data) in chunk.iter().enumerate() {
            if let Some(b) = chunk.get(i + 1).and_then(|d| d.first()) {
                crate::lpm::prefetch(b);
            }
            let first = Arrival { port, arrived: true, instance_type: instance::NORMAL, preserved: &[] };
            let t = self.clock.start();
            let (phv, consumed) = self.ingress_parse(&first, data);
            self.clock.record(super::STAGE_PARSER, t, 1);
            self.process_parsed(port, data, phv, consumed, &mut |p, d| emit(base + i, p, d));
        }
    }

    /// The parse-ahead strategy: the chunk is parsed first (parsing has no
    /// side effects: `preparse` is only set for parsers that call no
    /// externs, so the order of effects is the same as packet by packet),
    /// then, while packet i runs, the index slot of packet i + SLOT_AHEAD
    /// and the hit record of packet i + RECORD_AHEAD (whose slot has had
    /// time to arrive) load: the memory latency of big tables overlaps
    /// instead of stalling each packet in turn.
    fn run_parsed_ahead<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        chunk: &[&[u8]],
        base: usize,
        emit: &mut E,
    ) {
        let mut parsed = std::mem::take(&mut self.batch);
        parsed.clear();
        let t = self.clock.start();
        for data in chunk {
            crate::lpm::prefetch_headers(data);
        }
        for data in chunk {
            let arrival = Arrival { port, arrived: true, instance_type: instance::NORMAL, preserved: &[] };
            parsed.push(self.ingress_parse(&arrival, data));
        }
        self.clock.record(super::STAGE_PARSER, t, chunk.len());
        let tables = self.prefetch.len();
        // `process_parsed` runs the forwarding function when there is one.
        let compiled = self.trace.is_none() && self.compiled.as_ref().is_some_and(|c| c.has_forward());
        let mut keys = std::mem::take(&mut self.prefetch_keys);
        keys.clear();
        for (phv, _) in &parsed {
            for &(ti, _) in &self.prefetch {
                keys.push(self.plan.tables[ti].key128.as_ref().map(|p| crate::control::integer_key(p, phv)));
            }
        }
        let n = chunk.len();
        let mut run = parsed.drain(..).zip(chunk).enumerate();
        for i in 0..n + SLOT_AHEAD {
            if i < n {
                self.prefetch_keys_of(&keys[i * tables..(i + 1) * tables], false, compiled);
            }
            if let Some(j) = (i + RECORD_AHEAD).checked_sub(SLOT_AHEAD).filter(|j| *j < n) {
                self.prefetch_keys_of(&keys[j * tables..(j + 1) * tables], true, compiled);
            }
            if i >= SLOT_AHEAD {
                let (k, ((phv, consumed), data)) = run.next().expect("one per packet");
                self.process_parsed(port, data, phv, consumed, &mut |p, d| emit(base + k, p, d));
            }
        }
        drop(run);
        self.prefetch_keys = keys;
        self.batch = parsed;
    }

    /// Hints the CPU to load what this packet's header-keyed table lookups
    /// will read: the index slot (`second == false`), then the hit entry's
    /// record (`second == true`, once the slot has arrived); `compiled`: for
    /// generated code.
    #[inline]
    fn prefetch_keys_of(&self, keys: &[Option<u128>], second: bool, compiled: bool) {
        for (&(ti, inline), k) in self.prefetch.iter().zip(keys) {
            if let Some(k) = *k {
                let t = &self.state.tables[ti];
                if second {
                    t.prefetch_hit_u128(k, compiled && inline);
                } else {
                    t.prefetch_u128(k, compiled && inline);
                }
            }
        }
    }

    /// The fused strategy over one chunk (at most [`BATCH`] packets):
    /// lists the packets (unless the batch function reads them where they
    /// are); with `prefetch`, either hands the batch function the work
    /// ahead of its packets ([`work_ahead`]: index slots and headers a few
    /// packets ahead) or, where that cannot do (a table needs more than its
    /// index slot prefetched, or a key is not a plain header field),
    /// prefetches the chunk's headers then its keys' memory first
    /// ([`Switch::prefetch_chunk`]); then runs the batch function.
    fn run_fused<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        chunk: &[&[u8]],
        base: usize,
        prefetch: bool,
        emit: &mut E,
    ) {
        let FastRefs(mut refs) = std::mem::take(&mut self.chunk_refs);
        let ahead = if prefetch { self.ahead_of(chunk) } else { None };
        let headers_first = prefetch && ahead.is_none();
        // The chunk as the batch function's packet list where it is, or
        // listed into `refs`.
        let view = crate::jit::PktRef::view(chunk);
        match view {
            Some(_) if headers_first => chunk.iter().for_each(|d| crate::lpm::prefetch_headers(d)),
            Some(_) => {}
            None => list_chunk(chunk, &mut refs, headers_first),
        }
        let pkts = view.unwrap_or(&refs);
        let tables = self.prefetch.len();
        let mut ahead = ahead.map(|(slots, reads)| {
            let one = OneTable::of(&slots, &reads, tables);
            Ahead { pkts: pkts.as_ptr(), n: pkts.len(), base: 0, slots, reads, tables, one }
        });
        match &ahead {
            Some(a) => {
                // What the calls before the first packet would have done.
                a.headers(0, HEADER_STEPS * AHEAD_STEP);
                a.slots(0, SLOT_STEPS * AHEAD_STEP);
            }
            None if prefetch => self.prefetch_chunk(chunk),
            None => {}
        }
        self.run_batch_function(port, chunk, pkts, base, ahead.as_mut(), emit);
        refs.clear();
        self.chunk_refs = FastRefs(refs);
    }

    /// What the work ahead for `chunk` reads besides its packet list, when
    /// every big table needs only its index slot prefetched and every key
    /// is one header field: each table's slots, and where each key is in a
    /// packet, read straight from the packets where the chunk's first
    /// packet's parse found it (a key read wrong from a packet of another
    /// layout only wastes a prefetch). The slots are looked at first, so
    /// that tables needing more cost no parse.
    fn ahead_of(&mut self, chunk: &[&[u8]]) -> Option<(TableSlots, crate::jit::KeyReads)> {
        if chunk.is_empty() || self.prefetch.len() > crate::jit::KEY_READ_TABLES {
            return None;
        }
        let mut slots = [(std::ptr::null(), 0, 0); crate::jit::KEY_READ_TABLES];
        for (s, &(ti, inline)) in slots.iter_mut().zip(&self.prefetch) {
            let (top, low) = inline.then(|| self.state.tables[ti].slot_prefetch()).flatten()?.parts();
            *s = (top.as_ptr(), top.len(), low);
        }
        let mut look = self.compiled.as_ref().and_then(|c| c.lookahead())?;
        let mut scratch = self.take_phv();
        let reads = look.key_reads(&mut scratch, chunk);
        self.phv_pool.push(scratch);
        Some((slots, reads?))
    }

    /// Computes the lookup keys of `chunk`'s packets with the generated key
    /// function and prefetches the big tables' index slots (and hit
    /// records, when those do not stay in cache), for tables the work ahead
    /// cannot serve ([`Switch::ahead_of`]). Parsing twice costs less than
    /// the memory stalls it hides.
    fn prefetch_chunk(&mut self, chunk: &[&[u8]]) {
        if chunk.is_empty() {
            return;
        }
        let Some(mut look) = self.compiled.as_ref().and_then(|c| c.lookahead()) else { return };
        let mut scratch = self.take_phv();
        let tables = self.prefetch.len();
        let mut words = std::mem::take(&mut self.prefetch_words);
        look.keys(&mut scratch, chunk, &mut words);
        for (t, &(ti, inline)) in self.prefetch.iter().enumerate() {
            self.state.tables[ti].prefetch_words(&words[t..], tables, inline);
        }
        self.prefetch_words = words;
        self.phv_pool.push(scratch);
    }

    /// Runs the generated batch function over `batch` (at most [`BATCH`]
    /// packets, listed in `refs`): it parses and forwards them into one
    /// output area per packet and stops at the first packet that needs the
    /// general path (or that its area would not hold: the areas then grow
    /// to it, see [`Switch::area_room`], and it runs again); the transmitted ones
    /// (headers and payload in place) are emitted in order, and the general
    /// path takes that packet with its PHV and metadata before the batch
    /// function goes on after it. Same results as packet by packet (each
    /// packet's setup zeroes what an earlier one may have written).
    fn run_batch_function<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        batch: &[&[u8]],
        refs: &[crate::jit::PktRef],
        base: usize,
        mut ahead: Option<&mut Ahead>,
        emit: &mut E,
    ) {
        assert!(refs.len() == batch.len() && batch.len() <= BATCH, "one listing per packet, at most a batch");
        let mut results = std::mem::take(&mut self.fast_results);
        let mut start = 0;
        while start < batch.len() {
            let rest = &batch[start..];
            let n = rest.len();
            let listed = &refs[start..];
            let mut phv = self.take_phv();
            let mut meta = PktMeta::default();
            let compiled = self.compiled.as_ref().expect("the fused strategy needs generated code");
            let mut out = std::mem::take(&mut self.fwd_hdr);
            let t = self.clock.start();
            let room = self.area_room;
            let (stride, done, too_long) = {
                let mut ex = Exec {
                    plan: &self.plan,
                    state: &mut self.state,
                    phv: &mut phv,
                    meta: &mut meta,
                    key_buf: &mut self.key_buf,
                    act_buf: &mut self.act_buf,
                    hash_buf: &mut self.hash_buf,
                    now_us: self.now,
                    trace: None,
                };
                let mut cx = compiled.fast_contexts(&mut ex, &self.views, port);
                // The work ahead starts at once, with this call's first packet.
                let ahead = ahead.as_deref_mut().map(|a| {
                    a.base = start;
                    (work_ahead as crate::jit::AheadFn, (a as *mut Ahead).cast(), 0)
                });
                // SAFETY: `work_ahead` reads the `Ahead` of this chunk,
                // alive for the call, and returns a limit above the index
                // and at most the packets from `start` on.
                unsafe { compiled.run_batch(&mut cx, &mut ex, listed, room, &mut out, &mut results[..n], ahead) }
            };
            // The packets the call took: those done and the one it stopped at.
            let took = (done + usize::from(done < n && !too_long)).min(n);
            self.clock.record(super::STAGE_FUSED, t, took);
            self.fwd_hdr = out;
            self.stats.received += took as u64;
            let mut sent = 0;
            for (i, (r, area)) in results[..done].iter().zip(self.fwd_hdr.chunks_exact(stride)).enumerate() {
                // Headers and payload are in place (see `CompiledPipelines::run_batch`).
                if let Some((port, len)) = r.transmit() {
                    sent += 1;
                    emit(base + start + i, port, &area[..len]);
                }
            }
            self.stats.transmitted += sent;
            self.stats.dropped += done as u64 - sent;
            if too_long {
                // The areas grow to the packet, for this batch and the next.
                self.area_room = rest[done].len().next_multiple_of(64);
                self.phv_pool.push(phv);
                start += done;
            } else if done < n {
                let (consumed, outcome) = results[done].outcome();
                let at = base + start + done;
                // (The general path times its own stages: replication, egress, deparser.)
                self.process_parsed_general(port, rest[done], phv, consumed, meta, Some(outcome), &mut |p, d| {
                    emit(at, p, d)
                });
                start += done + 1;
            } else {
                self.phv_pool.push(phv);
                start += n;
            }
        }
        self.fast_results = results;
    }

    /// Runs a parsed packet from ingress on, then everything it caused
    /// (clones, replicas, resubmissions, recirculations).
    ///
    /// The common case (one unicast copy, nothing cloned, resubmitted or
    /// recirculated) goes straight from ingress through egress to `emit`
    /// without touching the queues; anything else continues on the general
    /// path from where the packet is.
    #[inline]
    pub(super) fn process_parsed(
        &mut self,
        port: u32,
        data: &[u8],
        mut phv: Box<Phv>,
        consumed: usize,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        self.stats.received += 1;
        let len = data.len() as u32;
        let mut meta = PktMeta { len_reg: len, ingress_len: len, ..Default::default() };
        let t = self.clock.start();
        match self.forward(&mut phv, &mut meta, len) {
            Some(crate::jit::Forward::Transmit { port, hdr }) => {
                // The headers are already in place: append the payload behind them.
                let payload = &data[consumed.min(data.len())..];
                let n = hdr + payload.len();
                if self.fwd_hdr.len() < n {
                    self.fwd_hdr.resize(n, 0);
                }
                sluice_lookup::mem::copy_short(&mut self.fwd_hdr[hdr..n], payload);
                self.clock.record(super::STAGE_FORWARD, t, 1);
                self.stats.transmitted += 1;
                emit(port, &self.fwd_hdr[..n]);
                self.phv_pool.push(phv);
            }
            Some(crate::jit::Forward::Dropped) => {
                self.clock.record(super::STAGE_FORWARD, t, 1);
                self.stats.dropped += 1;
                self.phv_pool.push(phv);
            }
            outcome => self.process_parsed_general(port, data, phv, consumed, meta, outcome, emit),
        }
    }

    /// [`Switch::process_parsed`] for everything but a transmitted or dropped
    /// unicast packet. Kept out of line: the common case then pays for none
    /// of its stack frame.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn process_parsed_general(
        &mut self,
        port: u32,
        data: &[u8],
        mut phv: Box<Phv>,
        consumed: usize,
        mut meta: PktMeta,
        outcome: Option<crate::jit::Forward>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let first = Arrival { port, arrived: true, instance_type: instance::NORMAL, preserved: &[] };
        match outcome {
            Some(crate::jit::Forward::AfterEgress { port }) => {
                let payload = &data[consumed.min(data.len())..];
                let e = super::replication::EgressRun { phv, port, meta: PktMeta::default() };
                self.with_queues(emit, |sw, ingress, egress, emit| {
                    sw.after_egress(e, meta, payload, ingress, egress, emit)
                })
            }
            Some(_) => self.with_queues(emit, |sw, ingress, egress, emit| {
                sw.after_ingress(first, data, phv, consumed, meta, ingress, egress, emit)
            }),
            None => {
                self.run_pipeline(&mut phv, &mut meta, true);
                self.with_queues(emit, |sw, ingress, egress, emit| {
                    sw.after_ingress(first, data, phv, consumed, meta, ingress, egress, emit)
                });
            }
        }
    }

    /// Runs a first-pass packet through the forwarding function (ingress to
    /// deparser in one native call), when the program has one and nothing
    /// is being traced.
    fn forward(&mut self, phv: &mut Phv, meta: &mut PktMeta, len: u32) -> Option<crate::jit::Forward> {
        let compiled =
            self.compiled.as_ref().filter(|c| c.has_forward() && self.trace.is_none() && self.tm.is_none())?;
        let mut ex = Exec {
            plan: &self.plan,
            state: &mut self.state,
            phv,
            meta,
            key_buf: &mut self.key_buf,
            act_buf: &mut self.act_buf,
            hash_buf: &mut self.hash_buf,
            now_us: self.now,
            trace: None,
        };
        compiled.forward(&mut ex, len, &mut self.fwd_hdr, &self.views)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::{EntryAction, FieldMatch, Resource};

    /// The router with `routes` /24 routes spread over the address space,
    /// every one to next hop 1.
    fn router_with(routes: u32) -> Switch {
        let mut sw = crate::load_switch(include_str!("../../../../examples/router.json")).expect("loads");
        let t = sw.index_of(Resource::Table, "RouterIngress.ipv4_lpm").expect("table");
        let a = sw.index_of(Resource::Action, "RouterIngress.set_nexthop").expect("action") as u32;
        for r in 0..routes {
            let net = (r.wrapping_mul(0x9e37_79b1) & 0xffff_ff00).to_be_bytes();
            let data = sw.pack_action(a, &[vec![1]]).expect("data");
            sw.add_entry(t, vec![FieldMatch::Lpm(net.to_vec(), 24)], EntryAction::Direct { action: a, data }, 0)
                .expect("entry");
        }
        sw
    }

    fn ipv4_to(dst: u32, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[12..14].copy_from_slice(&[0x08, 0x00]);
        p[14] = 0x45;
        p[22] = 64;
        p[30..34].copy_from_slice(&dst.to_be_bytes());
        p
    }

    /// With a big route table, the work ahead takes the lone table's step
    /// (`OneTable`): it reads the destination address where it is (bytes
    /// 30..34) and indexes the route table's top level with its top 24
    /// bits, the slot a lookup reads first; the general path's 8-byte read
    /// gives the same slot for every packet it can read.
    #[test]
    fn the_lone_route_tables_step_reads_each_packets_slot() {
        let mut sw = router_with(2000);
        sw.refresh_views();
        assert_eq!(sw.strategy(), Strategy::Fused { prefetch: true });
        let frames: Vec<Vec<u8>> = (0..16u32).map(|i| ipv4_to(i.wrapping_mul(0x0101_0203) ^ 0x0a00_0000, 64)).collect();
        let chunk: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let (slots, reads) = sw.ahead_of(&chunk).expect("the route table's slots, its key read from the packets");
        let one = OneTable::of(&slots, &reads, sw.prefetch.len()).expect("one table, a 32-bit key");
        let (top, len, low) = slots[0];
        assert_eq!((one.top, one.len, one.at), (top, len, 30));
        assert_eq!((len, low), (1 << 24, 8), "DIR-24-8: the top 24 bits index the top level");
        for f in &frames {
            let dst = u32::from_be_bytes(f[30..34].try_into().unwrap());
            let at = one.index(f).expect("a slot for every address");
            assert_eq!(at, (dst >> 8) as usize);
            assert_eq!(Some(at as u64), reads[0].read(f).map(|k| (k as u32 >> low).into()));
            // Too short for the read: no slot.
            assert_eq!(one.index(&f[..33]), None);
        }
        // A second table to prefetch would take the general step.
        assert!(OneTable::of(&slots, &reads, 2).is_none());
    }
}
