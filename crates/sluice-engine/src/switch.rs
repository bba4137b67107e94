//! The v1model switch: parser -> ingress -> replication/queueing -> egress ->
//! deparser, with clone, resubmit, recirculate and multicast as simple_switch
//! does them (see `docs/bmv2-semantics.md`).
//!
//! Memory invariant: PHVs and packet buffers come from per-switch pools and
//! go back to them, so steady-state unicast forwarding allocates nothing.
//! Concurrency invariant: a `Switch` is used from one thread at a time.

use std::collections::VecDeque;
use std::time::Instant;

use crate::control::{Exec, PktMeta};
use crate::expr::Env;
use crate::phv::{read_bits, read_bits_into, write_bits, write_bits_from, Loc, Phv};
use crate::plan::{ExtractTo, POp, Plan};
use crate::state::State;
use crate::value::nbytes;

/// Instance type values of `standard_metadata.instance_type`.
pub mod instance {
    pub const NORMAL: u128 = 0;
    pub const INGRESS_CLONE: u128 = 1;
    pub const EGRESS_CLONE: u128 = 2;
    pub const RECIRC: u128 = 4;
    pub const REPLICATION: u128 = 5;
    pub const RESUBMIT: u128 = 6;
}

/// Parser states one packet may visit before the parser gives up with `ParserTimeout`.
pub const MAX_PARSER_STATES: u32 = 10_000;

/// Packets [`Switch::process_batch`] parses ahead of running them.
pub(crate) const BATCH: usize = 128;

/// Entries from which the interpreter prefetches a header-keyed table's
/// lookups in batches (each packet parsed once more, ahead, for its key).
/// Why this many: with one index cache line per route, smaller tables stay
/// in a 32 MiB L3 and the second parse costs more than the misses it hides
/// (router, 64 B, one worker: 100k routes 16.5 Mpps without, 12.7 with;
/// 300k about equal; 1M 4 without, 12 with; edge at 100k routes 4.0
/// without, 3.8 with; `sluice bench --example router --entries N`).
const PREFETCH_MIN_ENTRIES: usize = 1 << 18;
/// [`PREFETCH_MIN_ENTRIES`] for generated code, whose key pass costs far
/// less than the interpreter's second parse. Why this many: router, 64 B,
/// one worker (`sluice bench --example router --entries N --route-layout
/// L`), Mpps without and with the key pass: 10 routes 74.9 / 74.6 (spread)
/// and 75.1 / 74.1 (consecutive); 256: 68.5 / 69.7 and 74.6 / 72.8; 1000:
/// 67.6 / 70.6 and 74.0 / 75.6; 10k: 50.9 / 58.3 and 62.6 / 62.1; 100k:
/// 26.8 / 52.0 and 58.5 / 59.3. From about a thousand routes it never
/// costs, and on routes spread over the address space it doubles the rate.
const FAST_PREFETCH_MIN_ENTRIES: usize = 1 << 10;
/// Moves up to [`BATCH`] packets from `it` into `slices`; returns how many.
/// Each packet's first 64 bytes (where its headers are) start loading into
/// the cache as it is taken. Why: packets arrive from memory the CPU has not
/// touched (a ring, or traffic bigger than the cache); read one by one, each
/// packet's miss stalls the pipeline, taken together the misses overlap
/// (router, 64 B, 100k routes: see `sluice bench --example router --entries 100000`).
fn next_chunk<'a>(it: &mut impl Iterator<Item = &'a [u8]>, slices: &mut [&'a [u8]; BATCH]) -> usize {
    let mut n = 0;
    for (slot, data) in slices.iter_mut().zip(it) {
        load_headers(data);
        *slot = data;
        n += 1;
    }
    n
}

/// [`next_chunk`] that also lists the packets for the batch function in
/// `refs` and returns the longest one's length with the count. Why one
/// pass: a second loop over the chunk only to list it cost about 4% of the
/// router's time at 64 B (`sluice bench --example router`).
fn next_chunk_listed<'a>(
    it: &mut impl Iterator<Item = &'a [u8]>,
    slices: &mut [&'a [u8]; BATCH],
    refs: &mut Vec<crate::jit::PktRef>,
) -> (usize, usize) {
    refs.clear();
    refs.reserve(BATCH);
    let (mut n, mut longest) = (0, 0);
    // Written in place rather than pushed: a push stores the length back
    // per packet. The spare slots come first in the zip, so that no packet
    // is taken from `it` without a slot for it.
    for ((r, slot), data) in refs.spare_capacity_mut().iter_mut().zip(slices.iter_mut()).zip(it) {
        load_headers(data);
        *slot = data;
        r.write(crate::jit::PktRef::of(data));
        longest = longest.max(data.len());
        n += 1;
    }
    // SAFETY: the loop initialized the first `n` spare slots.
    unsafe { refs.set_len(n) };
    (n, longest)
}

/// Starts loading the cache lines of a packet's first 64 bytes (where its
/// headers are): the first byte's line and the one holding byte 63 (or the
/// last); a prefetch never faults, so no branch for an empty packet.
#[inline(always)]
fn load_headers(data: &[u8]) {
    let p = data.as_ptr();
    crate::lpm::prefetch_ptr(p);
    crate::lpm::prefetch_ptr(p.wrapping_add(data.len().min(64).saturating_sub(1)));
}

/// [`Switch::prefetch_keys_of`] on parts of a switch: `keys` holds one key
/// per table of `prefetch`; `compiled`: the batch runs on generated code.
#[inline]
fn prefetch_keys_in(
    prefetch: &[(usize, bool)],
    state: &crate::state::State,
    keys: &[Option<u128>],
    second: bool,
    compiled: bool,
) {
    for (&(ti, inline), k) in prefetch.iter().zip(keys) {
        if let Some(k) = *k {
            let t = &state.tables[ti];
            if second {
                t.prefetch_hit_u128(k, compiled && inline);
            } else {
                t.prefetch_u128(k, compiled && inline);
            }
        }
    }
}

/// The batch function's packet list, kept (empty) between batches so that
/// it is not allocated or zeroed per batch.
#[derive(Default)]
struct FastRefs(Vec<crate::jit::PktRef>);

// SAFETY: the list is emptied before a batch returns (and before the switch
// can move to another thread), so it holds no pointer between batches.
unsafe impl Send for FastRefs {}

/// How many packets ahead of the one running a batch prefetches index
/// slots, and hit records (see [`Switch::process_batch_at`]).
const SLOT_AHEAD: usize = 16;
const RECORD_AHEAD: usize = 8;

/// The drop port of simple_switch.
pub const DROP_PORT: u128 = 511;

/// A field value carried into a resubmitted or recirculated packet:
/// `(field, value bytes, bytes of a field wider than 128 bits)`.
type Preserved = (u32, [u8; 16], Option<Vec<u8>>);

struct IngressItem {
    data: Vec<u8>,
    /// The port the packet arrived on (kept by resubmitted copies for re-parsing clones).
    port: u32,
    /// A packet from a port: bmv2 sets `ingress_port` and the ingress timestamp
    /// only on arrival, so resubmitted and recirculated packets see 0 there
    /// unless a preserved field list carries them.
    arrived: bool,
    instance_type: u128,
    /// `(field, value bytes)` preserved from the packet that caused this one.
    preserved: Vec<Preserved>,
}

/// How a packet entered ingress (the borrowed form of an [`IngressItem`]).
struct Arrival<'a> {
    port: u32,
    arrived: bool,
    instance_type: u128,
    preserved: &'a [Preserved],
}

struct EgressItem {
    /// Boxed so that queueing a packet moves a pointer, not the PHV's vectors.
    phv: Box<Phv>,
    /// Payload bytes (unparsed remainder).
    payload: Vec<u8>,
    port: u32,
    meta: PktMeta,
}

/// A packet in egress (an [`EgressItem`] without its payload).
struct EgressRun {
    phv: Box<Phv>,
    port: u32,
    meta: PktMeta,
}

/// Counters the switch keeps about its own work.
#[derive(Debug, Clone, Default)]
pub struct SwitchStats {
    pub received: u64,
    pub transmitted: u64,
    pub dropped: u64,
}

/// A loaded program with its state, ready to process packets.
pub struct Switch {
    pub plan: Plan,
    pub state: State,
    // Boxed on purpose: a pooled PHV moves into queue items as a pointer.
    #[allow(clippy::vec_box)]
    phv_pool: Vec<Box<Phv>>,
    buf_pool: Vec<Vec<u8>>,
    key_buf: Vec<u8>,
    act_buf: Vec<u8>,
    ingress_q: VecDeque<IngressItem>,
    egress_q: VecDeque<EgressItem>,
    /// Time of the packet being processed, µs since start (read once per packet).
    now: u64,
    hash_buf: sluice_hash::BitPacker,
    /// `(header, wire offset, bytes)` in deparser order when every header the
    /// deparser emits is in wire format.
    deparse_wire: Option<Vec<(u32, u32, u32)>>,
    mc_buf: Vec<(u16, u32)>,
    out_buf: Vec<u8>,
    start: Instant,
    /// When set, a per-packet trace is appended here.
    pub trace: Option<String>,
    pub stats: SwitchStats,
    /// Bound on recirculation/resubmission depth of one input packet (bmv2 has none and can loop forever).
    pub max_recirculations: u32,
    /// Native code for the control pipelines (`None`: interpreted).
    compiled: Option<crate::jit::CompiledPipelines>,
    /// Whether batches may be parsed ahead (the parser calls no externs).
    preparse: bool,
    /// Tables whose integer key comes from packet header fields only, so it
    /// is known right after parsing and their lookups can be prefetched;
    /// with whether generated code looks them up inline (it then reads
    /// record slots, see `lpm::DirLpm`).
    prefetch: Vec<(usize, bool)>,
    /// Parsed PHVs of the batch in progress.
    #[allow(clippy::vec_box)]
    batch: Vec<(Box<Phv>, usize)>,
    /// The batch's prefetch keys: per packet, one per table of `prefetch`.
    prefetch_keys: Vec<Option<u128>>,
    /// The same from the generated key function: `prefetch.len()` per packet.
    prefetch_words: Vec<u64>,
    /// Per entry of `plan.checksums`: its specialized form, if it has one.
    byte_checksums: Vec<Option<ByteChecksum>>,
    /// Where the forwarding function writes a packet's headers, followed by
    /// its payload for transmission (never shorter than the headers' maximum).
    fwd_hdr: Vec<u8>,
    /// The batch function's packet lists, kept between batches (arrays
    /// built per call cost a `memset` each): one per chunk of the
    /// big-table pipeline, the first also for the small-table path.
    chunk_refs: [FastRefs; 3],
    /// The batch function's results, kept between batches likewise.
    fast_results: Vec<crate::jit::PktResult>,
    /// The tables' lookup structures for compiled code, rebuilt at the
    /// start of every packet or batch (see `tables::TableView`).
    views: crate::jit::Views,
}

impl Switch {
    /// A throwaway copy for trying a batch of changes before making them
    /// (P4Runtime's rollback atomicity): same plan and state, registers and
    /// meters copied rather than shared, and no native code (it never runs
    /// packets).
    pub fn scratch(&self) -> Result<Switch, crate::CompileError> {
        let mut sw = Switch::new_interpreted(self.plan.clone())?;
        sw.state = self.state.clone();
        for t in &mut sw.state.tables {
            t.without_accelerators();
        }
        sw.state.registers = self.state.registers.deep_copy();
        sw.state.meters = self.state.meters.deep_copy();
        Ok(sw)
    }

    /// A switch for a compiled plan.
    pub fn new(plan: Plan) -> Result<Switch, crate::CompileError> {
        let mut sw = Switch::new_interpreted(plan)?;
        sw.set_mode(crate::ExecMode::Compiled)?;
        Ok(sw)
    }

    /// A switch for a compiled plan whose control pipelines are interpreted.
    pub fn new_interpreted(plan: Plan) -> Result<Switch, crate::CompileError> {
        let state = State::new(&plan)?;
        let deparse_wire = plan
            .deparse_order
            .iter()
            .map(|h| plan.layout.headers[*h as usize].wire.map(|(off, n)| (*h, off, n)))
            .collect::<Option<Vec<_>>>();
        let preparse = plan.states.iter().all(|st| st.ops.iter().all(|op| !matches!(op, crate::plan::POp::Prim(_))));
        let prefetch = plan
            .tables
            .iter()
            .enumerate()
            .filter(|(_, t)| t.prefetchable())
            .map(|(i, t)| (i, t.inline_key_parts().is_some()))
            .collect();
        let byte_checksums = plan.checksums.iter().map(|c| ByteChecksum::of(&plan, c)).collect();
        let plan_hdr = &plan;
        let fwd_hdr = vec![0; crate::jit::forward_hdr_max(plan_hdr)];
        Ok(Switch {
            deparse_wire,
            plan,
            state,
            phv_pool: Vec::new(),
            buf_pool: Vec::new(),
            key_buf: Vec::with_capacity(256),
            act_buf: Vec::with_capacity(256),
            ingress_q: VecDeque::new(),
            egress_q: VecDeque::new(),
            now: 0,
            hash_buf: sluice_hash::BitPacker::with_capacity(256),
            mc_buf: Vec::new(),
            out_buf: Vec::with_capacity(16384),
            start: Instant::now(),
            trace: None,
            stats: SwitchStats::default(),
            max_recirculations: 64,
            compiled: None,
            preparse,
            prefetch,
            batch: Vec::with_capacity(BATCH),
            prefetch_keys: Vec::new(),
            prefetch_words: Vec::new(),
            byte_checksums,
            fwd_hdr,
            chunk_refs: std::array::from_fn(|_| FastRefs(Vec::with_capacity(BATCH))),
            fast_results: vec![crate::jit::PktResult::default(); BATCH],
            views: crate::jit::Views::default(),
        })
    }

    /// A replica for another worker: same program, same execution mode and a
    /// copy of the current state, except registers and meters, which
    /// it shares with this switch (see `crate::shared`).
    pub fn replica(&self) -> Result<Switch, crate::CompileError> {
        let mut sw = Switch::new(self.plan.clone())?;
        sw.state = self.state.clone();
        sw.set_mode(self.mode())?;
        sw.max_recirculations = self.max_recirculations;
        Ok(sw)
    }

    /// Chooses how control pipelines run. Compiling can only fail when the
    /// host has no code generator; the error says so.
    pub fn set_mode(&mut self, mode: crate::ExecMode) -> Result<(), crate::CompileError> {
        if mode == self.mode() {
            return Ok(());
        }
        self.compiled = match mode {
            crate::ExecMode::Interpreted => None,
            crate::ExecMode::Compiled => Some(
                crate::jit::CompiledPipelines::compile(&self.plan)
                    .map_err(|e| crate::CompileError::at("pipelines", format!("native code generation failed: {e}")))?,
            ),
        };
        Ok(())
    }

    /// How control pipelines run now.
    pub fn mode(&self) -> crate::ExecMode {
        if self.compiled.is_some() {
            crate::ExecMode::Compiled
        } else {
            crate::ExecMode::Interpreted
        }
    }

    /// What the pipeline compiler produced (IR listing and counts), if compiled.
    pub fn compiled(&self) -> Option<&crate::jit::CompiledPipelines> {
        self.compiled.as_ref()
    }

    /// Rebuilds the tables' views for compiled code: the control plane may
    /// have changed tables since the last packet (see `tables::TableView`).
    fn refresh_views(&mut self) {
        self.views.refresh(&mut self.state);
    }

    fn now_us(&self) -> u64 {
        self.now
    }

    /// The instant a time of this switch's clock (µs since it started) stands for.
    pub fn instant_at(&self, us: u64) -> Instant {
        self.start + std::time::Duration::from_micros(us)
    }

    fn take_phv(&mut self) -> Box<Phv> {
        self.phv_pool.pop().unwrap_or_else(|| Box::new(self.plan.layout.new_phv()))
    }

    fn take_buf(&mut self) -> Vec<u8> {
        let mut b = self.buf_pool.pop().unwrap_or_default();
        b.clear();
        b
    }

    #[inline(always)]
    fn set_std(&self, phv: &mut Phv, f: Option<u32>, v: u128) {
        if let Some(f) = f {
            self.plan.layout.write(phv, f, v);
        }
    }

    #[inline(always)]
    fn get_std(&self, phv: &Phv, f: Option<u32>) -> u128 {
        f.map(|f| self.plan.layout.read(phv, f)).unwrap_or(0)
    }

    /// Processes one received packet and everything it causes (clones,
    /// replicas, recirculations); `emit(port, bytes)` receives each packet sent.
    ///
    /// The received packet is parsed straight from `data` and a unicast
    /// packet goes through egress without being queued or copied; only
    /// resubmitted, recirculated, cloned and replicated packets take the
    /// queues.
    pub fn process(&mut self, port: u32, data: &[u8], emit: &mut dyn FnMut(u32, &[u8])) {
        self.now = self.start.elapsed().as_micros() as u64;
        self.refresh_views();
        self.process_now(port, data, emit);
    }

    /// [`Switch::process`] at a given switch time (microseconds): replays
    /// and tests that must not depend on the wall clock use it.
    pub fn process_at(&mut self, port: u32, data: &[u8], now_us: u64, emit: &mut dyn FnMut(u32, &[u8])) {
        self.now = now_us;
        self.refresh_views();
        self.process_now(port, data, emit);
    }

    /// Processes packets that arrived together on one port: they share one
    /// reading of the clock (ingress timestamps have microsecond resolution
    /// anyway), which saves a clock read per packet.
    pub fn process_batch<'a, E: FnMut(u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        batch: impl IntoIterator<Item = &'a [u8]>,
        emit: &mut E,
    ) {
        let now = self.start.elapsed().as_micros() as u64;
        self.process_batch_at(port, batch, now, emit);
    }

    /// [`Switch::process_batch`] at a given switch time (microseconds), for
    /// replays and tests that must not depend on the wall clock.
    pub fn process_batch_at<'a, E: FnMut(u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        batch: impl IntoIterator<Item = &'a [u8]>,
        now_us: u64,
        emit: &mut E,
    ) {
        self.now = now_us;
        self.refresh_views();
        // Parsing ahead only pays when there are big tables to prefetch for.
        let big_from = |n: usize| self.prefetch.iter().any(|t| self.state.tables[t.0].len() >= n);
        let big = big_from(PREFETCH_MIN_ENTRIES);
        let fast = self.trace.is_none() && self.compiled.as_ref().is_some_and(|c| c.has_fast_path());
        if fast && !big_from(FAST_PREFETCH_MIN_ENTRIES) {
            self.process_batch_fast(port, batch, emit);
            return;
        }
        if fast && self.preparse {
            // Big tables: per BATCH packets, the generated key function
            // parses each into a scratch PHV for its lookup keys; their index
            // slots (and hit records, when those do not stay in cache) are
            // prefetched, then the batch runs on the fast path. Parsing
            // twice costs less than the memory stalls it hides.
            //
            // Given more than BATCH packets, a three-stage pipeline over
            // chunks of BATCH: while chunk k runs, chunk k + 1's keys are
            // computed and prefetched, and chunk k + 2's packets start
            // loading. Why: a slot prefetched just before its chunk runs
            // arrives too late for the first packets of the chunk (DRAM
            // takes a few hundred cycles); a chunk's run ahead hides it,
            // and the key function finds its packets in cache.
            let mut it = batch.into_iter();
            let mut chunks: [[&[u8]; BATCH]; 3] = [[&[]; BATCH]; 3];
            let mut sizes = [0usize; 3];
            let mut scratch = self.take_phv();
            let tables = self.prefetch.len();
            let mut look =
                self.compiled.as_ref().and_then(|c| c.lookahead()).expect("fast path with prefetchable tables");
            // Generated code parses the batch ahead and writes the keys.
            let mut words = std::mem::take(&mut self.prefetch_words);
            let mut ahead = |sw: &mut Switch, chunk: &[&[u8]]| {
                if chunk.is_empty() {
                    return;
                }
                // When each table needs only its index slot prefetched, the
                // keys are read straight from the packets, where the first
                // one's parse found them (a key read wrong from a packet of
                // another layout only wastes a prefetch).
                let slots =
                    |&(ti, inline): &(usize, bool)| inline.then(|| sw.state.tables[ti].slot_prefetch()).flatten();
                if sw.prefetch.iter().all(|t| slots(t).is_some()) {
                    if let Some(reads) = look.key_reads(&mut scratch, chunk) {
                        for (s, r) in sw.prefetch.iter().filter_map(slots).zip(&reads) {
                            for d in chunk {
                                if let Some(k) = r.read(d) {
                                    s.prefetch(k as u32);
                                }
                            }
                        }
                        return;
                    }
                }
                look.keys(&mut scratch, chunk, &mut words);
                for (t, &(ti, inline)) in sw.prefetch.iter().enumerate() {
                    sw.state.tables[ti].prefetch_words(&words[t..], tables, inline);
                }
            };
            // Each chunk's packet list and longest length, made as it is taken.
            let mut lists = std::mem::take(&mut self.chunk_refs).map(|FastRefs(r)| r);
            let mut longest = [0usize; 3];
            (sizes[0], longest[0]) = next_chunk_listed(&mut it, &mut chunks[0], &mut lists[0]);
            ahead(self, &chunks[0][..sizes[0]]);
            (sizes[1], longest[1]) = next_chunk_listed(&mut it, &mut chunks[1], &mut lists[1]);
            let mut k = 0;
            while sizes[k % 3] > 0 {
                let (run, keyed, loading) = (k % 3, (k + 1) % 3, (k + 2) % 3);
                (sizes[loading], longest[loading]) =
                    next_chunk_listed(&mut it, &mut chunks[loading], &mut lists[loading]);
                ahead(self, &chunks[keyed][..sizes[keyed]]);
                self.process_batch_fast_with(port, &chunks[run][..sizes[run]], &lists[run], longest[run], emit);
                k += 1;
            }
            self.chunk_refs = lists.map(|mut r| {
                r.clear();
                FastRefs(r)
            });
            self.prefetch_words = words;
            self.phv_pool.push(scratch);
            return;
        }
        if !self.preparse || self.trace.is_some() || !big {
            // The next packet's headers start loading while this one runs.
            let mut it = batch.into_iter().peekable();
            while let Some(data) = it.next() {
                if let Some(b) = it.peek().and_then(|d| d.first()) {
                    crate::lpm::prefetch(b);
                }
                self.process_now(port, data, &mut |p, d| emit(p, d));
            }
            return;
        }
        // Parse up to BATCH packets first, prefetch what their table lookups
        // will read, then run them: memory latency of big tables overlaps
        // instead of stalling each packet in turn. Parsing has no side effects
        // (`preparse` is only set for parsers that call no externs), so the
        // order of effects is the same as packet by packet.
        let mut it = batch.into_iter().peekable();
        let mut parsed = std::mem::take(&mut self.batch);
        let mut slices: [&[u8]; BATCH] = [&[]; BATCH];
        while it.peek().is_some() {
            parsed.clear();
            let n = next_chunk(&mut it, &mut slices);
            // (`next_chunk` started loading the headers' cache lines.)
            for data in &slices[..n] {
                let arrival = Arrival { port, arrived: true, instance_type: instance::NORMAL, preserved: &[] };
                parsed.push(self.ingress_parse(&arrival, data));
            }
            // Tables small enough to stay in cache gain nothing from prefetching.
            if self.prefetch.iter().any(|t| self.state.tables[t.0].len() >= PREFETCH_MIN_ENTRIES) {
                // A software pipeline: while packet i runs, the index slot of
                // packet i + SLOT_AHEAD and the hit record of packet
                // i + RECORD_AHEAD (whose slot has had time to arrive) load.
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
                let mut run = parsed.drain(..).zip(slices);
                for i in 0..n + SLOT_AHEAD {
                    if i < n {
                        self.prefetch_keys_of(&keys[i * tables..(i + 1) * tables], false, compiled);
                    }
                    if let Some(j) = (i + RECORD_AHEAD).checked_sub(SLOT_AHEAD).filter(|j| *j < n) {
                        self.prefetch_keys_of(&keys[j * tables..(j + 1) * tables], true, compiled);
                    }
                    if i >= SLOT_AHEAD {
                        let ((phv, consumed), data) = run.next().expect("one per packet");
                        self.process_parsed(port, data, phv, consumed, &mut |p, d| emit(p, d));
                    }
                }
                self.prefetch_keys = keys;
            } else {
                for ((phv, consumed), data) in parsed.drain(..).zip(slices) {
                    self.process_parsed(port, data, phv, consumed, &mut |p, d| emit(p, d));
                }
            }
        }
        self.batch = parsed;
    }

    /// [`Switch::process_batch_at`] when the compiled parser and forwarding
    /// function take arriving packets end to end: the engine state and both
    /// native contexts are built once and one PHV serves every packet that
    /// is transmitted or dropped; a packet that needs more (multicast,
    /// clone, resubmit...) leaves the loop for the general path with its PHV
    /// and metadata, and the loop starts again after it. Same results as
    /// packet by packet (each packet's setup zeroes the PHV).
    fn process_batch_fast<'a, E: FnMut(u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        batch: impl IntoIterator<Item = &'a [u8]>,
        emit: &mut E,
    ) {
        let mut it = batch.into_iter().peekable();
        let mut slices: [&[u8]; BATCH] = [&[]; BATCH];
        let FastRefs(mut refs) = std::mem::take(&mut self.chunk_refs[0]);
        while it.peek().is_some() {
            let (n, longest) = next_chunk_listed(&mut it, &mut slices, &mut refs);
            self.process_batch_fast_with(port, &slices[..n], &refs, longest, emit);
        }
        refs.clear();
        self.chunk_refs[0] = FastRefs(refs);
    }

    /// [`Switch::process_batch_fast`] over a slice of packets (at most
    /// `BATCH`): the compiled batch function parses and forwards them into
    /// one output area per packet and stops at the first packet that needs
    /// the general path; the transmitted ones then get their payloads and
    /// are emitted in order, and the general path takes that packet with its
    /// PHV and metadata before the batch function goes on after it. Same
    /// results as packet by packet (each packet's setup zeroes what an
    /// earlier one may have written).
    /// `refs` lists `batch` for the batch function (one per packet) and
    /// `longest` is its longest packet's length, both made as the chunk was
    /// taken ([`next_chunk_listed`]).
    fn process_batch_fast_with<E: FnMut(u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        batch: &[&[u8]],
        refs: &[crate::jit::PktRef],
        longest: usize,
        emit: &mut E,
    ) {
        assert_eq!(refs.len(), batch.len(), "one listing per packet");
        let mut results = std::mem::take(&mut self.fast_results);
        let mut start = 0;
        while start < batch.len() {
            let rest = &batch[start..];
            let n = rest.len().min(BATCH);
            let listed = &refs[start..start + n];
            let mut phv = self.take_phv();
            let mut meta = PktMeta::default();
            let compiled = self.compiled.as_ref().expect("checked by the caller");
            let mut out = std::mem::take(&mut self.fwd_hdr);
            let (stride, done) = {
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
                // SAFETY: `longest` bounds every packet of `batch` (the caller's word).
                unsafe { compiled.run_batch(&mut cx, &mut ex, listed, longest, &mut out, &mut results[..n]) }
            };
            self.fwd_hdr = out;
            self.stats.received += (done + 1).min(n) as u64;
            let mut sent = 0;
            for (r, area) in results[..done].iter().zip(self.fwd_hdr.chunks_exact(stride)) {
                // Headers and payload are in place (see `CompiledPipelines::run_batch`).
                if let Some((port, len)) = r.transmit() {
                    sent += 1;
                    emit(port, &area[..len]);
                }
            }
            self.stats.transmitted += sent;
            self.stats.dropped += done as u64 - sent;
            if done < n {
                let (consumed, outcome) = results[done].outcome();
                self.process_parsed_general(port, rest[done], phv, consumed, meta, Some(outcome), &mut |p, d| {
                    emit(p, d)
                });
                start += done + 1;
            } else {
                self.phv_pool.push(phv);
                start += n;
            }
        }
        self.fast_results = results;
    }

    /// Hints the CPU to load what this packet's header-keyed table lookups
    /// will read: the index slot (`second == false`), then the hit entry's
    /// record (`second == true`, once the slot has arrived); `compiled`: for
    /// generated code.
    #[inline]
    fn prefetch_keys_of(&self, keys: &[Option<u128>], second: bool, compiled: bool) {
        prefetch_keys_in(&self.prefetch, &self.state, keys, second, compiled);
    }

    fn process_now(&mut self, port: u32, data: &[u8], emit: &mut dyn FnMut(u32, &[u8])) {
        let first = Arrival { port, arrived: true, instance_type: instance::NORMAL, preserved: &[] };
        let (phv, consumed) = self.ingress_parse(&first, data);
        self.process_parsed(port, data, phv, consumed, emit);
    }

    /// Runs a parsed packet from ingress on, then everything it caused
    /// (clones, replicas, resubmissions, recirculations).
    ///
    /// The common case (one unicast copy, nothing cloned, resubmitted or
    /// recirculated) goes straight from ingress through egress to `emit`
    /// without touching the queues; anything else continues on the general
    /// path from where the packet is.
    #[inline]
    fn process_parsed(
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
        match self.forward(&mut phv, &mut meta, len) {
            Some(crate::jit::Forward::Transmit { port, hdr }) => {
                // The headers are already in place: append the payload behind them.
                let payload = &data[consumed.min(data.len())..];
                let n = hdr + payload.len();
                if self.fwd_hdr.len() < n {
                    self.fwd_hdr.resize(n, 0);
                }
                crate::phv::copy_short(&mut self.fwd_hdr[hdr..n], payload);
                self.stats.transmitted += 1;
                emit(port, &self.fwd_hdr[..n]);
                self.phv_pool.push(phv);
            }
            Some(crate::jit::Forward::Dropped) => {
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
    fn process_parsed_general(
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
                let e = EgressRun { phv, port, meta: PktMeta::default() };
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
        let compiled = self.compiled.as_ref().filter(|c| c.has_forward() && self.trace.is_none())?;
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

    /// Runs `start` with the switch's queues, then everything left in them:
    /// egress first, then the next ingress pass, until both are empty.
    fn with_queues(
        &mut self,
        emit: &mut dyn FnMut(u32, &[u8]),
        start: impl FnOnce(&mut Self, &mut VecDeque<IngressItem>, &mut VecDeque<EgressItem>, &mut dyn FnMut(u32, &[u8])),
    ) {
        let mut ingress = std::mem::take(&mut self.ingress_q);
        let mut egress = std::mem::take(&mut self.egress_q);
        start(self, &mut ingress, &mut egress, emit);
        let mut passes = 1;
        while !(egress.is_empty() && ingress.is_empty()) {
            while let Some(e) = egress.pop_front() {
                self.egress(e, &mut ingress, &mut egress, emit);
            }
            let Some(item) = ingress.pop_front() else { break };
            passes += 1;
            if passes > self.max_recirculations + 1 {
                self.stats.dropped += 1;
                self.buf_pool.push(item.data);
                continue;
            }
            let arrival = Arrival {
                port: item.port,
                arrived: item.arrived,
                instance_type: item.instance_type,
                preserved: &item.preserved,
            };
            self.ingress(arrival, &item.data, &mut ingress, &mut egress, emit);
            self.buf_pool.push(item.data);
        }
        self.ingress_q = ingress;
        self.egress_q = egress;
    }

    fn trace_line(&mut self, s: impl FnOnce() -> String) {
        if let Some(t) = self.trace.as_mut() {
            t.push_str(&s());
        }
    }

    fn ingress(
        &mut self,
        item: Arrival,
        data: &[u8],
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let (phv, consumed) = self.ingress_parse(&item, data);
        self.ingress_run(item, data, phv, consumed, ingress, egress, emit);
    }

    /// Sets up a PHV for a packet entering ingress and parses it; returns the
    /// PHV and the bytes the parser consumed.
    #[inline]
    fn ingress_parse(&mut self, item: &Arrival, data: &[u8]) -> (Box<Phv>, usize) {
        let mut phv = self.take_phv();
        // An arriving packet: the compiled parser can set its PHV up itself.
        let compiled = self.compiled.as_ref().filter(|c| c.parser_sets_up() && self.trace.is_none());
        if let (Some(c), true, true) = (compiled, item.arrived, item.preserved.is_empty()) {
            let ends = c.parser_ends();
            if let Some(outcome) = c.run_parser_with(&mut phv, data, Some((item.port, self.now))) {
                let consumed = self.parse_outcome(&mut phv, data, outcome, ends);
                return (phv, consumed);
            }
        }
        self.ingress_parse_general(item, data, phv)
    }

    /// [`Switch::ingress_parse`] when the compiled parser does not set the
    /// PHV up (kept out of line, as `process_parsed_general`).
    #[inline(never)]
    fn ingress_parse_general(&mut self, item: &Arrival, data: &[u8], mut phv: Box<Phv>) -> (Box<Phv>, usize) {
        phv.reset();
        let len = data.len() as u128;
        if item.arrived {
            self.set_std(&mut phv, self.plan.std.ingress_port, item.port as u128);
            let now = self.now_us();
            self.set_std(&mut phv, self.plan.std.ingress_global_timestamp, now as u128);
        }
        for (f, v, wide) in item.preserved {
            let fi = &self.plan.layout.fields[*f as usize];
            match wide {
                Some(b) => phv.set_bytes(fi, b),
                None => phv.set_bytes(fi, v),
            }
        }
        // After the preserved fields, as bmv2 does for resubmitted and
        // recirculated copies: a preserved instance type or length does not
        // survive into the new pass.
        self.set_std(&mut phv, self.plan.std.packet_length, len);
        self.set_std(&mut phv, self.plan.std.instance_type, item.instance_type);
        let item_type = item.instance_type;
        self.trace_line(|| format!("packet in port {} ({} bytes, instance_type {})\n", item.port, len, item_type));
        let consumed = self.parse(&mut phv, data);
        (phv, consumed)
    }

    /// Ingress from the pipeline on, for a packet [`Switch::ingress_parse`] parsed.
    #[allow(clippy::too_many_arguments)]
    fn ingress_run(
        &mut self,
        item: Arrival,
        data: &[u8],
        mut phv: Box<Phv>,
        consumed: usize,
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let len = data.len() as u32;
        let mut meta = PktMeta { len_reg: len, ingress_len: len, ..Default::default() };
        self.run_pipeline(&mut phv, &mut meta, true);
        self.after_ingress(item, data, phv, consumed, meta, ingress, egress, emit);
    }

    /// What follows the ingress pipeline: clone, resubmit, multicast, drop
    /// or the queue to egress.
    #[allow(clippy::too_many_arguments)]
    fn after_ingress(
        &mut self,
        item: Arrival,
        data: &[u8],
        mut phv: Box<Phv>,
        consumed: usize,
        mut meta: PktMeta,
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let len = data.len() as u128;
        if let Some((session, fl)) = meta.clone.take() {
            let sess = self.state.mirror.get(&(session & 0x7fff)).cloned();
            self.trace_line(|| {
                format!(
                    "  clone I2E session {session}: {}\n",
                    if sess.is_some() { "configured" } else { "not configured" }
                )
            });
            if let Some(sess) = sess {
                let mut cphv = self.take_phv();
                cphv.reset();
                self.set_std(&mut cphv, self.plan.std.ingress_port, item.port as u128);
                let cconsumed = self.parse(&mut cphv, data);
                // Keep the re-parsed headers, zero all metadata, then copy the field list.
                let parsed = cphv.clone();
                cphv.reset();
                copy_headers_only(&self.plan, &mut cphv, &parsed);
                self.copy_field_list(&mut cphv, &phv, fl);
                self.set_std(&mut cphv, self.plan.std.instance_type, instance::INGRESS_CLONE);
                self.set_std(&mut cphv, self.plan.std.packet_length, len);
                let payload = data[cconsumed.min(data.len())..].to_vec();
                let cmeta = PktMeta { len_reg: len as u32, ingress_len: len as u32, ..Default::default() };
                self.enqueue_session(&sess, cphv, payload, cmeta, egress);
            }
        }
        if let Some((r, l)) = meta.digest {
            self.trace_line(|| format!("  digest list {l} receiver {r}\n"));
        }
        if let Some(fl) = meta.resubmit {
            let preserved = self.preserved(&phv, fl);
            self.trace_line(|| "  resubmit\n".to_string());
            let mut b = self.take_buf();
            b.extend_from_slice(data);
            ingress.push_back(IngressItem {
                data: b,
                port: item.port,
                arrived: false,
                instance_type: instance::RESUBMIT,
                preserved,
            });
            self.phv_pool.push(phv);
            return;
        }
        let mgid = self.get_std(&phv, self.plan.std.mcast_grp) as u32;
        let payload_start = consumed.min(data.len());
        if mgid != 0 {
            self.set_std(&mut phv, self.plan.std.instance_type, instance::REPLICATION);
            let mut copies = std::mem::take(&mut self.mc_buf);
            self.state.pre.replicate(mgid, &mut copies);
            self.trace_line(|| format!("  multicast group {mgid}: {} copies\n", copies.len()));
            for (rid, port) in copies.iter() {
                self.set_std(&mut phv, self.plan.std.egress_rid, *rid as u128);
                let mut c = self.take_phv();
                c.copy_from(&phv);
                let mut p = self.take_buf();
                p.extend_from_slice(&data[payload_start..]);
                let m = PktMeta { len_reg: meta.len_reg, ingress_len: meta.ingress_len, ..Default::default() };
                egress.push_back(EgressItem { phv: c, payload: p, port: *port, meta: m });
            }
            self.mc_buf = copies;
            self.phv_pool.push(phv);
            return;
        }
        let spec = self.get_std(&phv, self.plan.std.egress_spec);
        if spec == DROP_PORT {
            self.trace_line(|| "  dropped at end of ingress\n".to_string());
            self.stats.dropped += 1;
            self.phv_pool.push(phv);
            return;
        }
        self.set_std(&mut phv, self.plan.std.instance_type, instance::NORMAL);
        let m = PktMeta {
            len_reg: meta.len_reg,
            ingress_len: meta.ingress_len,
            truncate: meta.truncate,
            ..Default::default()
        };
        self.trace_line(|| format!("  to egress port {spec}\n"));
        if egress.is_empty() {
            // Nothing queued ahead of it: egress runs on the borrowed payload.
            self.egress_body(phv, spec as u32, m, &data[payload_start..], ingress, egress, emit);
        } else {
            let mut p = self.take_buf();
            p.extend_from_slice(&data[payload_start..]);
            egress.push_back(EgressItem { phv, payload: p, port: spec as u32, meta: m });
        }
    }

    fn enqueue_session(
        &mut self,
        sess: &crate::state::MirrorSession,
        phv: Box<Phv>,
        payload: Vec<u8>,
        meta: PktMeta,
        egress: &mut VecDeque<EgressItem>,
    ) {
        if let Some(mgid) = sess.mgid {
            let mut copies = std::mem::take(&mut self.mc_buf);
            self.state.pre.replicate(mgid, &mut copies);
            let mut src = phv.clone();
            for (rid, port) in copies.iter() {
                self.set_std(&mut src, self.plan.std.egress_rid, *rid as u128);
                let mut c = self.take_phv();
                c.copy_from(&src);
                let m = PktMeta { len_reg: meta.len_reg, ingress_len: meta.ingress_len, ..Default::default() };
                egress.push_back(EgressItem { phv: c, payload: payload.clone(), port: *port, meta: m });
            }
            self.mc_buf = copies;
        }
        if let Some(port) = sess.port {
            egress.push_back(EgressItem { phv, payload, port, meta });
        }
    }

    fn preserved(&self, phv: &Phv, fl: Option<u32>) -> Vec<Preserved> {
        let mut out = Vec::new();
        if let Some(list) = fl.and_then(|id| self.plan.field_lists.get(&(id as u64))) {
            for f in list {
                let fi = &self.plan.layout.fields[*f as usize];
                if fi.width > 128 {
                    let mut b = vec![0u8; nbytes(fi.width)];
                    phv.get_bytes(fi, &mut b);
                    out.push((*f, [0; 16], Some(b)));
                } else {
                    let mut b = [0u8; 16];
                    crate::value::u128_to_be(phv.get(fi), &mut b);
                    out.push((*f, b, None));
                }
            }
        }
        out
    }

    fn copy_field_list(&self, dst: &mut Phv, src: &Phv, fl: Option<u32>) {
        for (f, v, wide) in self.preserved(src, fl) {
            let fi = &self.plan.layout.fields[f as usize];
            match wide {
                Some(b) => dst.set_bytes(fi, &b),
                None => dst.set_bytes(fi, &v),
            }
        }
    }

    fn run_pipeline(&mut self, phv: &mut Phv, meta: &mut PktMeta, ingress: bool) {
        let init = if ingress { self.plan.ingress.init } else { self.plan.egress.init };
        if init.is_none() && self.trace.is_none() {
            // An empty control (e.g. the router's egress) costs nothing.
            return;
        }
        let now = self.now_us();
        let mut trace = self.trace.take();
        if let Some(t) = trace.as_mut() {
            t.push_str(if ingress { "  ingress pipeline\n" } else { "  egress pipeline\n" });
        }
        let mut ex = Exec {
            plan: &self.plan,
            state: &mut self.state,
            phv,
            meta,
            key_buf: &mut self.key_buf,
            act_buf: &mut self.act_buf,
            hash_buf: &mut self.hash_buf,
            now_us: now,
            trace: trace.as_mut(),
        };
        let ran = match (&self.compiled, ex.trace.is_none()) {
            (Some(c), true) => c.run(ingress, &mut ex, &self.views),
            _ => false,
        };
        if !ran {
            ex.run_pipeline(init);
        }
        meta.exit = false;
        self.trace = trace;
    }

    fn egress(
        &mut self,
        e: EgressItem,
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        self.egress_body(e.phv, e.port, e.meta, &e.payload, ingress, egress, emit);
        self.buf_pool.push(e.payload);
    }

    /// Egress for one packet whose unparsed payload is `payload`.
    #[allow(clippy::too_many_arguments)]
    fn egress_body(
        &mut self,
        phv: Box<Phv>,
        port: u32,
        meta: PktMeta,
        payload: &[u8],
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        let (e, meta) = self.egress_pipeline(phv, port, meta);
        self.after_egress(e, meta, payload, ingress, egress, emit);
    }

    /// Sets the egress standard metadata and runs the egress pipeline;
    /// returns the packet and the pipeline's requests (clone, recirculate, truncate).
    fn egress_pipeline(&mut self, phv: Box<Phv>, port: u32, meta: PktMeta) -> (EgressRun, PktMeta) {
        let mut e = EgressRun { phv, port, meta };
        let now = self.now_us();
        self.set_std(&mut e.phv, self.plan.std.egress_global_timestamp, now as u128);
        self.set_std(&mut e.phv, self.plan.std.egress_port, e.port as u128);
        self.set_std(&mut e.phv, self.plan.std.egress_spec, 512);
        self.set_std(&mut e.phv, self.plan.std.packet_length, e.meta.len_reg as u128);
        self.trace_line(|| format!("  egress port {}\n", e.port));
        let mut meta = std::mem::take(&mut e.meta);
        self.run_pipeline(&mut e.phv, &mut meta, false);
        (e, meta)
    }

    /// What follows the egress pipeline: clone E2E, then drop, recirculate or transmit.
    fn after_egress(
        &mut self,
        e: EgressRun,
        mut meta: PktMeta,
        payload: &[u8],
        ingress: &mut VecDeque<IngressItem>,
        egress: &mut VecDeque<EgressItem>,
        emit: &mut dyn FnMut(u32, &[u8]),
    ) {
        if let Some((session, fl)) = meta.clone.take() {
            if let Some(sess) = self.state.mirror.get(&(session & 0x7fff)).cloned() {
                self.trace_line(|| format!("  clone E2E session {session}\n"));
                let mut c = self.take_phv();
                c.reset();
                copy_headers_only(&self.plan, &mut c, &e.phv);
                self.copy_field_list(&mut c, &e.phv, fl);
                self.set_std(&mut c, self.plan.std.instance_type, instance::EGRESS_CLONE);
                let cm = PktMeta { len_reg: meta.len_reg, ingress_len: meta.ingress_len, ..Default::default() };
                self.enqueue_session(&sess, c, payload.to_vec(), cm, egress);
            }
        }
        if let Some(fl) = meta.recirculate {
            if self.get_std(&e.phv, self.plan.std.egress_spec) == DROP_PORT {
                self.egress_end(e, &meta, payload, emit);
                return;
            }
            let mut out = std::mem::take(&mut self.out_buf);
            let mut phv = e.phv;
            self.deparse(&mut phv, payload, &mut out);
            let preserved = self.preserved(&phv, fl);
            self.trace_line(|| "  recirculate\n".to_string());
            let mut b = self.take_buf();
            b.extend_from_slice(&out);
            ingress.push_back(IngressItem {
                data: b,
                port: 0,
                arrived: false,
                instance_type: instance::RECIRC,
                preserved,
            });
            self.out_buf = out;
            self.phv_pool.push(phv);
            return;
        }
        self.egress_end(e, &meta, payload, emit);
    }

    /// The end of egress for a packet that is not recirculated: drop, or
    /// deparse and transmit (truncated if the pipeline asked).
    fn egress_end(&mut self, mut e: EgressRun, meta: &PktMeta, payload: &[u8], emit: &mut dyn FnMut(u32, &[u8])) {
        if self.get_std(&e.phv, self.plan.std.egress_spec) == DROP_PORT {
            self.trace_line(|| "  dropped at end of egress\n".to_string());
            self.stats.dropped += 1;
            self.phv_pool.push(e.phv);
            return;
        }
        let mut out = std::mem::take(&mut self.out_buf);
        self.deparse(&mut e.phv, payload, &mut out);
        let n = meta.truncate.map_or(out.len(), |t| (t as usize).min(out.len()));
        self.trace_line(|| format!("  transmit port {} ({} bytes)\n", e.port, n));
        self.stats.transmitted += 1;
        emit(e.port, &out[..n]);
        self.out_buf = out;
        self.phv_pool.push(e.phv);
    }

    /// What the specializer chose for each stage of this program, one line
    /// per parser state, checksum, table and the deparser: the shortcuts a
    /// stage got and, where it got none, the general path it takes (for
    /// `sluice inspect`, so a user can see why a program is slow).
    pub fn stage_report(&self) -> String {
        use std::fmt::Write as _;
        let plan = &self.plan;
        let layout = &plan.layout;
        let mut r = String::new();
        let _ = writeln!(
            r,
            "batches: {}",
            match (self.compiled.as_ref().is_some_and(|c| c.has_fast_path()), self.preparse) {
                (true, true) => "fast path: one generated batch function (parser, forwarding function and payload copy per packet, one PHV per batch); with big LPM/exact tables, each batch is parsed ahead first to prefetch its index slots, then its hit records",
                (true, false) => "fast path: one generated batch function (parser, forwarding function and payload copy per packet, one PHV per batch)",
                (false, true) => "parsed ahead 32 at a time when tables are big, then run (the parser calls no externs)",
                (false, false) => "packet by packet (the parser calls externs, so it cannot run ahead)",
            }
        );
        let _ = writeln!(
            r,
            "parser: {}",
            match &self.compiled {
                Some(c) if c.parser_compiled() => "native code (byte copies, selects as compare chains)",
                Some(_) => "interpreted (a state extracts a non-wire-format header or stack, computes a value without a shortcut, selects on a non-field or >64-bit key, or the states loop)",
                None => "interpreted (--interpret)",
            }
        );
        let _ = writeln!(
            r,
            "forwarding: {}",
            match &self.compiled {
                Some(c) if c.has_forward() => "one native function from ingress to deparser for unicast packets (general path for multicast, clone, resubmit, recirculate, truncate)",
                Some(_) => "stage by stage (the deparser emits a header not in wire format, or a checksum update has no byte-range form)",
                None => "stage by stage (--interpret)",
            }
        );
        for st in &plan.states {
            let extracts = match &st.wire_extracts {
                Some(x) if x.is_empty() => "no extraction".to_string(),
                Some(x) => format!(
                    "byte copies of {}",
                    x.iter()
                        .map(|(h, _, n)| format!("{} ({n} B)", layout.headers[*h as usize].name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => format!("{} general operations (bit-level extraction or expressions)", st.ops.len()),
            };
            let next = if st.key.is_empty() {
                "unconditional transition".to_string()
            } else if st.fast_transitions.is_some() {
                format!("select on an integer key, {} cases", st.transitions.len())
            } else {
                format!("select on a byte key, {} cases compared bytewise", st.transitions.len())
            };
            let _ = writeln!(r, "  state {}: {extracts}; {next}", st.name);
        }
        let _ = writeln!(r, "checksums:");
        if plan.checksums.is_empty() {
            let _ = writeln!(r, "  none");
        }
        for c in &plan.checksums {
            let calc = &plan.calcs[c.calc as usize];
            let special = ByteChecksum::of(plan, c).is_some();
            let how = match (&calc.csum_bytes, calc.is_csum16, calc.with_payload) {
                (Some((_, ranges)), true, false) => {
                    format!("csum16 summed over {} byte range(s) of the header", ranges.len())
                }
                (_, true, _) => "csum16 over packed fields".to_string(),
                _ => format!("{} over packed fields", calc.algo),
            };
            let cond = match &c.cond {
                None => "always",
                Some(e) if !matches!(e.fast, crate::expr::Fast::None) => "condition evaluated inline",
                Some(_) => "condition evaluated by the expression walker",
            };
            let _ = writeln!(
                r,
                "  {} ({}{}): {how}; {cond}{}",
                c.name,
                if c.verify { "verify" } else { "" },
                if c.update {
                    if c.verify {
                        "+update"
                    } else {
                        "update"
                    }
                } else {
                    ""
                },
                if special { "; specialized (direct sum into the field)" } else { "" }
            );
        }
        let _ = writeln!(r, "tables:");
        for (i, t) in plan.tables.iter().enumerate() {
            let st = &self.state.tables[i];
            let kinds: Vec<String> =
                st.key.iter().map(|k| format!("{:?}/{}b", k.kind, k.width).to_lowercase()).collect();
            let compiled = self.compiled.as_ref().is_some_and(|c| c.has_forward());
            let key = if t.inline_default.is_some() {
                "keyless, fixed action: a direct call".to_string()
            } else if compiled && t.inline_key_parts().is_some() {
                "key built as one integer in generated code (direct arrays, DIR-24-8 and open addressing \
                 looked up inline, other indexes get the key from it)"
                    .to_string()
            } else if compiled && t.word_key_parts().is_some() {
                "key built as four words in generated code, searched by the engine".to_string()
            } else if t.key128.is_some() {
                "key read as one integer".to_string()
            } else if t.key.is_empty() {
                "keyless".to_string()
            } else {
                "key built as bytes".to_string()
            };
            if t.key.is_empty() {
                let _ = writeln!(r, "  {}: {key}", t.name);
                continue;
            }
            let _ = writeln!(
                r,
                "  {} [{}] {} entries: {key}; {}{}",
                t.name,
                kinds.join(", "),
                st.len(),
                st.index_kind(),
                if self.prefetch.iter().any(|p| p.0 == i) { "; prefetched after parsing" } else { "" }
            );
        }
        let _ = writeln!(
            r,
            "deparser: {}",
            match &self.deparse_wire {
                Some(h) => format!("byte copies of {} header(s)", h.len()),
                None => "bit-level writes (some header is not whole bytes)".to_string(),
            }
        );
        r
    }

    /// Runs the parser and checksum verification; returns the bytes consumed.
    pub fn parse(&mut self, phv: &mut Phv, data: &[u8]) -> usize {
        if self.trace.is_none() {
            let ends = self.compiled.as_ref().is_some_and(|c| c.parser_ends());
            if let Some(outcome) = self.compiled.as_ref().and_then(|c| c.run_parser(phv, data)) {
                return self.parse_outcome(phv, data, outcome, ends);
            }
        }
        let plan = &self.plan;
        let layout = &plan.layout;
        let mut cursor: usize = 0; // bits
        let mut state = plan.init_state;
        let mut error: Option<u64> = None;
        let total_bits = data.len() * 8;
        let err = |name: &str| plan.errors.get(name).copied().unwrap_or(0);
        let mut meta = PktMeta::default();
        let mut trace = self.trace.take();
        // bmv2 has no bound on parser loops; Sluice stops a parser that has
        // run MAX_PARSER_STATES states with ParserTimeout instead of hanging.
        let mut visited = 0u32;
        'states: while let Some(si) = state {
            visited += 1;
            if visited > MAX_PARSER_STATES {
                error = Some(err("ParserTimeout"));
                break 'states;
            }
            let st = &plan.states[si as usize];
            if let Some(t) = trace.as_mut() {
                t.push_str(&format!("  parser state {}\n", st.name));
            }
            if let (Some(ex), true) = (&st.wire_extracts, trace.is_none() && cursor.is_multiple_of(8)) {
                // Only wire-format headers: each extraction is a byte copy.
                for &(h, off, n) in ex {
                    let (c, off, n) = (cursor / 8, off as usize, n as usize);
                    let Some(src) = data.get(c..c + n) else {
                        error = Some(err("PacketTooShort"));
                        break 'states;
                    };
                    crate::phv::copy_short(&mut phv.wire_mut()[off..off + n], src);
                    phv.valid_mut()[h as usize] = true;
                    cursor += n * 8;
                }
            } else {
                for op in &st.ops {
                    match op {
                        POp::Extract(to) | POp::ExtractVl(to, _) => {
                            let h = match to {
                                ExtractTo::Header(h) => *h,
                                ExtractTo::StackNext(s) => {
                                    let next = phv.stack_next[*s as usize] as usize;
                                    let sh = &layout.stacks[*s as usize].headers;
                                    if next >= sh.len() {
                                        error = Some(err("StackOutOfBounds"));
                                        break 'states;
                                    }
                                    sh[next]
                                }
                                ExtractTo::UnionStackNext(us, m) => {
                                    let next = phv.union_stack_next[*us as usize] as usize;
                                    let us_ = &layout.union_stacks[*us as usize].unions;
                                    if next >= us_.len() {
                                        error = Some(err("StackOutOfBounds"));
                                        break 'states;
                                    }
                                    layout.unions[us_[next] as usize].headers[*m]
                                }
                            };
                            let hi = &layout.headers[h as usize];
                            let mut vl_bits = 0u32;
                            if let POp::ExtractVl(_, len) = op {
                                let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                                let n = len.eval_u128(&env);
                                if !n.is_multiple_of(8) {
                                    error = Some(err("ParserInvalidArgument"));
                                    break 'states;
                                }
                                vl_bits = n.min(u32::MAX as u128) as u32;
                            }
                            let bits = hi.fixed_bits as usize + vl_bits as usize;
                            if cursor + bits > total_bits {
                                error = Some(err("PacketTooShort"));
                                break 'states;
                            }
                            if let Some(vf) = hi.varbit_field {
                                let f = &layout.fields[hi.fields[vf] as usize];
                                if vl_bits > f.width {
                                    error = Some(err("HeaderTooShort"));
                                    break 'states;
                                }
                            }
                            extract_header(layout, phv, h, data, cursor, vl_bits);
                            phv.valid_mut()[h as usize] = true;
                            if let Some(u) = hi.union {
                                for o in &layout.unions[u as usize].headers {
                                    if *o != h {
                                        phv.valid_mut()[*o as usize] = false;
                                    }
                                }
                            }
                            match to {
                                ExtractTo::StackNext(s) => phv.stack_next[*s as usize] += 1,
                                ExtractTo::UnionStackNext(us, _) => phv.union_stack_next[*us as usize] += 1,
                                _ => {}
                            }
                            if let Some(t) = trace.as_mut() {
                                t.push_str(&format!("    extract {} ({} bits)\n", hi.name, bits));
                            }
                            cursor += bits;
                        }
                        POp::Set(dst, src) => {
                            if let crate::expr::CExpr::Lookahead { width, .. } = &src.e {
                                if total_bits - cursor.min(total_bits) < nbytes(*width) * 8 {
                                    error = Some(err("PacketTooShort"));
                                    break 'states;
                                }
                            }
                            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                            match dst {
                                crate::plan::Dst::Field(f) => {
                                    let fi = &layout.fields[*f as usize];
                                    if fi.width <= 128 {
                                        let v = src.eval_u128(&env);
                                        phv.set(fi, v);
                                    } else {
                                        let mut b = vec![0u8; nbytes(fi.width)];
                                        src.eval_bytes(&env, &mut b);
                                        phv.set_bytes(fi, &b);
                                    }
                                }
                                crate::plan::Dst::Dyn(h, idx) => {
                                    let v = src.eval_u128(&env);
                                    if let Some(hd) = crate::expr::resolve_href(h, &env) {
                                        let f = layout.headers[hd as usize].fields[*idx];
                                        phv.set(&layout.fields[f as usize], v);
                                    }
                                }
                            }
                        }
                        POp::Verify(cond, e) => {
                            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                            if !cond.eval_bool(&env) {
                                error = Some(e.eval_u128(&env) as u64);
                                break 'states;
                            }
                        }
                        POp::Advance(n) => {
                            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                            let n = n.eval_u128(&env) as usize;
                            if !n.is_multiple_of(8) {
                                error = Some(err("ParserInvalidArgument"));
                                break 'states;
                            }
                            if cursor + n > total_bits {
                                error = Some(err("PacketTooShort"));
                                break 'states;
                            }
                            cursor += n;
                        }
                        POp::Prim(p) => {
                            let mut ex = Exec {
                                plan,
                                state: &mut self.state,
                                phv,
                                meta: &mut meta,
                                key_buf: &mut self.key_buf,
                                act_buf: &mut self.act_buf,
                                hash_buf: &mut self.hash_buf,
                                now_us: 0,
                                trace: None,
                            };
                            let mut pc = 0;
                            ex.run_prim(p, &[], &mut pc);
                        }
                    }
                }
            }
            // Transition key
            if st.key.is_empty() {
                state = st.transitions.iter().find(|t| t.default).and_then(|t| t.next);
                if st.transitions.iter().all(|t| !t.default) {
                    state = None;
                }
                continue;
            }
            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
            if let Some(fast) = &st.fast_transitions {
                // Keys of at most 16 bytes from fields: compare as integers.
                let mut k: u128 = 0;
                for (r, nb) in &st.key {
                    let bits = *nb * 8;
                    let v = if matches!(r.fast, crate::expr::Fast::None) {
                        r.eval_u128(&env)
                    } else {
                        crate::expr::fast_value(&r.fast, phv, &[])
                    };
                    k = if bits >= 128 { 0 } else { k << bits } | (v & crate::value::mask128(bits));
                }
                state = fast.iter().find(|(v, m, _)| k & m == *v).and_then(|(_, _, n)| *n);
                continue;
            }
            let mut key = [0u8; 128];
            let mut koff = 0;
            for (r, nb) in &st.key {
                let nb = *nb as usize;
                if let crate::expr::CExpr::Lookahead { off, width } = &r.e {
                    let need_bytes = (*off as usize) / 8 + nbytes(*width);
                    if cursor / 8 + need_bytes > data.len() {
                        error = Some(err("PacketTooShort"));
                        break 'states;
                    }
                }
                if koff + nb > key.len() {
                    break;
                }
                r.eval_bytes(&env, &mut key[koff..koff + nb]);
                koff += nb;
            }
            let key = &key[..koff];
            let mut next = None;
            let mut matched = false;
            for t in &st.transitions {
                let hit = if t.default {
                    true
                } else if let Some(vs) = t.vset {
                    self.state.vsets[vs as usize].iter().any(|(v, m)| {
                        key.iter().zip(v.iter().zip(m.iter())).all(|(k, (v, m))| k & m == v & m) && v.len() == key.len()
                    })
                } else {
                    match &t.mask {
                        Some(m) => key.iter().zip(t.value.iter().zip(m.iter())).all(|(k, (v, m))| k & m == v & m),
                        None => key == t.value.as_slice(),
                    }
                };
                if hit {
                    next = t.next;
                    matched = true;
                    break;
                }
            }
            if !matched {
                next = None;
            }
            state = next;
        }
        if let Some(e) = error {
            if let Some(t) = trace.as_mut() {
                t.push_str(&format!("    parser error {e}\n"));
            }
        }
        self.trace = trace;
        self.parse_end(phv, data, cursor, error)
    }

    /// Bytes consumed by a compiled parser run, after the end of parsing
    /// (unless the compiled parser did that too: `ends`).
    fn parse_outcome(&mut self, phv: &mut Phv, data: &[u8], outcome: crate::jit::ParseOutcome, ends: bool) -> usize {
        let (cursor, error) = match outcome {
            crate::jit::ParseOutcome::Done(c) => (c, None),
            crate::jit::ParseOutcome::TooShort(c) => {
                (c, Some(self.plan.errors.get("PacketTooShort").copied().unwrap_or(0)))
            }
            crate::jit::ParseOutcome::Verify(c, code) => (c, Some(code)),
        };
        if ends {
            return cursor;
        }
        self.parse_end(phv, data, cursor * 8, error)
    }

    /// After the parser states: sets `parser_error`, verifies checksums and
    /// returns the bytes consumed (`cursor` is in bits).
    fn parse_end(&mut self, phv: &mut Phv, data: &[u8], cursor: usize, error: Option<u64>) -> usize {
        let plan = &self.plan;
        let layout = &plan.layout;
        let perr = error.unwrap_or(plan.no_error);
        if let Some(f) = plan.std.parser_error {
            layout.write(phv, f, perr as u128);
        }
        // Checksum verification.
        let mut bad = false;
        for (c, fast) in plan.checksums.iter().zip(&self.byte_checksums) {
            if !c.verify {
                continue;
            }
            if let Some(f) = fast {
                if f.applies(phv)
                    && u64::from(crate::control::csum16_ranges(phv.wire(), &f.ranges)) != f.target.read(phv)
                {
                    bad = true;
                }
                continue;
            }
            let tf = &layout.fields[c.target as usize];
            if !phv.valid()[tf.header as usize] || !checksum_applies(plan, c, phv) {
                continue;
            }
            let rest = &data[cursor.div_ceil(8).min(data.len())..];
            let v = crate::control::compute_calc(plan, &self.state, phv, &mut self.hash_buf, c.calc as usize, rest);
            if v as u128 != layout.read(phv, c.target) {
                bad = true;
            }
        }
        if let Some(f) = plan.std.checksum_error {
            layout.write(phv, f, bad as u128);
        }
        cursor.div_ceil(8)
    }

    /// Updates checksums and writes valid headers then the payload into `out`.
    pub fn deparse(&mut self, phv: &mut Phv, payload: &[u8], out: &mut Vec<u8>) {
        let plan = &self.plan;
        let layout = &plan.layout;
        for (c, fast) in plan.checksums.iter().zip(&self.byte_checksums) {
            if !c.update {
                continue;
            }
            if let Some(f) = fast {
                if f.applies(phv) {
                    let v = crate::control::csum16_ranges(phv.wire(), &f.ranges);
                    f.target.write(phv, u64::from(v), 0xffff);
                }
                continue;
            }
            if !checksum_applies(plan, c, phv) {
                continue;
            }
            let v = crate::control::compute_calc(plan, &self.state, phv, &mut self.hash_buf, c.calc as usize, payload);
            layout.write(phv, c.target, v as u128);
        }
        out.clear();
        if let Some(hs) = &self.deparse_wire {
            // Every header the deparser may emit is in wire format: append bytes.
            for &(h, off, n) in hs {
                if phv.valid()[h as usize] {
                    out.extend_from_slice(&phv.wire()[off as usize..(off + n) as usize]);
                }
            }
            out.extend_from_slice(payload);
            return;
        }
        let mut bits = 0usize;
        for h in &plan.deparse_order {
            if phv.valid()[*h as usize] {
                bits += (layout.headers[*h as usize].fixed_bits + phv.varbit_len[*h as usize]) as usize;
            }
        }
        let hdr_bytes = bits.div_ceil(8);
        // 16 bytes of slack let `write_bits` use fixed-size windows.
        out.resize(hdr_bytes + 16, 0);
        let mut cursor: usize = 0;
        for h in &plan.deparse_order {
            if !phv.valid()[*h as usize] {
                continue;
            }
            let hi = &layout.headers[*h as usize];
            if let Some((off, n)) = hi.wire {
                let (off, n) = (off as usize, n as usize);
                if cursor.is_multiple_of(8) {
                    out[cursor / 8..cursor / 8 + n].copy_from_slice(&phv.wire()[off..off + n]);
                } else {
                    for i in 0..n {
                        write_bits(out, cursor + 8 * i, 8, u128::from(phv.wire()[off + i]));
                    }
                }
                cursor += hi.fixed_bits as usize;
                continue;
            }
            if let Some(codec) = &hi.codec {
                for (slot, off, width) in codec {
                    write_bits(out, cursor + *off as usize, *width, phv.slots[*slot as usize]);
                }
                cursor += hi.fixed_bits as usize;
                continue;
            }
            for (i, f) in hi.fields.iter().enumerate() {
                let fi = &layout.fields[*f as usize];
                if Some(i) == hi.varbit_field {
                    let vl = phv.varbit_len[*h as usize];
                    if let Loc::Wide { off, len } = fi.loc {
                        let src = &phv.wide[off as usize..(off + len) as usize];
                        write_bits_from(out, cursor, vl, src);
                    }
                    cursor += vl as usize;
                    continue;
                }
                match fi.loc {
                    Loc::Slot(s) => write_bits(out, cursor, fi.width, phv.slots[s as usize]),
                    Loc::Wire { .. } => write_bits(out, cursor, fi.width, phv.get(fi)),
                    Loc::Wide { off, len } => {
                        write_bits_from(out, cursor, fi.width, &phv.wide[off as usize..(off + len) as usize])
                    }
                }
                cursor += fi.width as usize;
            }
        }
        out.truncate(hdr_bytes);
        out.extend_from_slice(payload);
    }
}

/// A checksum the specializer reduced to byte ranges of one wire-format
/// header: csum16 over `ranges` of the wire area into a 16-bit field of the
/// same header, under a shortcut condition. Why: the generic path evaluates
/// the condition through the expression walker, dispatches on the algorithm
/// and reads the target through the layout, for what is a 20-byte sum.
#[derive(Debug, Clone)]
pub(crate) struct ByteChecksum {
    pub(crate) header: u32,
    pub(crate) ranges: Vec<(u32, u32)>,
    pub(crate) target: crate::phv::FieldSrc,
    pub(crate) cond: Option<crate::expr::Fast>,
}

impl ByteChecksum {
    /// Whether `other` sums the same bytes of the same header (a
    /// verification and an update of one checksum, for instance).
    pub(crate) fn same_words(&self, other: &ByteChecksum) -> bool {
        self.header == other.header && self.ranges == other.ranges
    }

    /// The specialized form of `c`, when it has one.
    pub(crate) fn of(plan: &Plan, c: &crate::plan::ChecksumPlan) -> Option<ByteChecksum> {
        let calc = &plan.calcs[c.calc as usize];
        let (h, ranges) = calc.csum_bytes.as_ref()?;
        let tf = &plan.layout.fields[c.target as usize];
        if !calc.is_csum16 || calc.with_payload || tf.header != *h || tf.width != 16 {
            return None;
        }
        let target = crate::phv::FieldSrc::of(tf)?;
        let cond = match &c.cond {
            None => None,
            Some(e) if matches!(e.fast, crate::expr::Fast::None) => return None,
            Some(e) => Some(e.fast.clone()),
        };
        Some(ByteChecksum { header: *h, ranges: ranges.clone(), target, cond })
    }

    /// Whether the checksum is computed for this packet: its header is valid and the condition holds.
    #[inline]
    fn applies(&self, phv: &Phv) -> bool {
        phv.valid()[self.header as usize]
            && self.cond.as_ref().is_none_or(|f| crate::expr::fast_value(f, phv, &[]) != 0)
    }
}

/// Whether a checksum's `if_cond` (if any) holds for this packet.
fn checksum_applies(plan: &Plan, c: &crate::plan::ChecksumPlan, phv: &Phv) -> bool {
    c.cond.as_ref().is_none_or(|cond| {
        if !matches!(cond.fast, crate::expr::Fast::None) {
            crate::expr::fast_value(&cond.fast, phv, &[]) != 0
        } else {
            cond.eval_bool(&Env { layout: &plan.layout, phv, params: &[], packet: &[], cursor_bits: 0 })
        }
    })
}

fn copy_headers_only(plan: &Plan, dst: &mut Phv, src: &Phv) {
    for (h, hi) in plan.layout.headers.iter().enumerate() {
        if hi.metadata {
            continue;
        }
        if let Some((off, n)) = hi.wire {
            dst.wire_mut()[off as usize..(off + n) as usize]
                .copy_from_slice(&src.wire()[off as usize..(off + n) as usize]);
        }
        for f in &hi.fields {
            let fi = &plan.layout.fields[*f as usize];
            match fi.loc {
                Loc::Slot(s) => dst.slots[s as usize] = src.slots[s as usize],
                Loc::Wide { off, len } => dst.wide[off as usize..(off + len) as usize]
                    .copy_from_slice(&src.wide[off as usize..(off + len) as usize]),
                Loc::Wire { .. } => {}
            }
        }
        dst.valid_mut()[h] = src.valid()[h];
        dst.varbit_len[h] = src.varbit_len[h];
    }
    dst.stack_next.copy_from_slice(&src.stack_next);
    dst.union_stack_next.copy_from_slice(&src.union_stack_next);
}

fn extract_header(layout: &crate::phv::Layout, phv: &mut Phv, h: u32, data: &[u8], mut cursor: usize, vl_bits: u32) {
    let hi = &layout.headers[h as usize];
    if let Some((off, n)) = hi.wire {
        let (off, n) = (off as usize, n as usize);
        if cursor.is_multiple_of(8) {
            crate::phv::copy_short(&mut phv.wire_mut()[off..off + n], &data[cursor / 8..cursor / 8 + n]);
        } else {
            for i in 0..n {
                phv.wire_mut()[off + i] = read_bits(data, cursor + 8 * i, 8) as u8;
            }
        }
        return;
    }
    if let Some(codec) = &hi.codec {
        for (slot, off, width) in codec {
            phv.slots[*slot as usize] = read_bits(data, cursor + *off as usize, *width);
        }
        return;
    }
    for (i, f) in hi.fields.iter().enumerate() {
        let fi = &layout.fields[*f as usize];
        if Some(i) == hi.varbit_field {
            if let Loc::Wide { off, len } = fi.loc {
                let dst = &mut phv.wide[off as usize..(off + len) as usize];
                read_bits_into(data, cursor, vl_bits, dst);
            }
            phv.varbit_len[h as usize] = vl_bits;
            cursor += vl_bits as usize;
            continue;
        }
        match fi.loc {
            Loc::Slot(s) => phv.slots[s as usize] = read_bits(data, cursor, fi.width),
            Loc::Wire { .. } => phv.set(fi, read_bits(data, cursor, fi.width)),
            Loc::Wide { off, len } => {
                read_bits_into(data, cursor, fi.width, &mut phv.wide[off as usize..(off + len) as usize])
            }
        }
        cursor += fi.width as usize;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_copies_equal_a_plain_copy_at_every_length() {
        let src: Vec<u8> = (0..100u8).map(|b| b.wrapping_mul(37).wrapping_add(11)).collect();
        for n in 0..=src.len() {
            let mut dst = vec![0xeeu8; n];
            crate::phv::copy_short(&mut dst, &src[..n]);
            assert_eq!(dst, &src[..n], "length {n}");
        }
    }
}
