//! The packet path: a packet ([`Pkt`]), the walk from table to table
//! (fast steps, the walk's native code, then the full walk: instructions,
//! the action set), batches as a software pipeline, meters on the path,
//! and packet-outs.
//!
//! Contract: reads frames with their input port (a batch, one frame, or a
//! packet-out's header and actions), the tables (route tables' lookups
//! made ahead for a batch), the meters; writes the table and entry
//! counts, the packet (apply-actions, metadata, a meter's DSCP remark),
//! the walk being recorded. A packet leaves by the actions it runs
//! (`actions.rs`), a next-hop group's forwarding step, or not at all (a
//! table miss, a meter or an action drops it, counted).

use sluice_dataplane::profile::stamp;
use sluice_lookup::lpm::prefetch_headers;
use sluice_openflow::{Instruction, OxmField};

use super::{OfSwitch, N_TABLES};
use crate::cache::{Count, Op};
use crate::code::{LookupAhead, PATH_MISS};
use crate::fields::{self, FullKey, Meta, Parsed, FULL_LEN};
use crate::table::{Fast, FlowTable, Hit};

/// How many frames ahead of the one being parsed a batch starts loading.
const LOAD_AHEAD: usize = 12;

/// Packets of a group of a batch's pipeline (see
/// `OfSwitch::process_pipelined`): enough for what a stage starts loading
/// to arrive from memory before the next stage reads it (measured with
/// `sluice openflow-bench`: 4 leaves a million routes' loads waiting, 16
/// evicts what 10 000 routes' loads brought).
const STAGE: usize = 8;

/// Packets a batch's pipeline holds: its four stages' groups.
const RING: usize = 4 * STAGE;

/// What the walk's code and [`pipeline_lookup`] read: the lookup a batch
/// made ahead for the packet (first, as the code expects), the tables, the
/// lookup scratch buffer.
#[repr(C)]
struct LookupCtx {
    ahead: LookupAhead,
    tables: *mut FlowTable,
    scratch: *mut Vec<u8>,
}

/// A table's hit as the walk's code reads it (see [`crate::code::LookupFn`]):
/// 0 for a miss (or an id too large to carry).
#[inline]
fn walk_answer(t: &FlowTable, hit: Option<Hit>) -> u64 {
    match hit {
        Some((id, step)) if id != u32::MAX => {
            let goto = match step.unwrap_or_else(|| t.fast(id)) {
                Fast::Goto(g) => u64::from(g) + 1,
                _ => 0,
            };
            (goto << 32) | u64::from(id + 1)
        }
        _ => 0,
    }
}

/// Looks up a table through its structure for the walk's native code
/// (see [`crate::code::LookupFn`]).
extern "C" fn pipeline_lookup(ctx: *mut u8, table: u32, key: *const u8) -> u64 {
    // SAFETY: the caller (`OfSwitch::walk_fast`) passes a live `LookupCtx`
    // whose pointers are the switch's tables (64 of them: the code asks
    // only for table numbers below that) and scratch buffer, not borrowed
    // otherwise during the call, and the packet's 136-byte key.
    let (ctx, key) = unsafe { (&*(ctx as *const LookupCtx), &*(key as *const FullKey)) };
    // SAFETY: as above.
    let (t, scratch) = unsafe { (&mut *ctx.tables.add(table as usize), &mut *ctx.scratch) };
    let hit = t.lookup_id(key, scratch).map(|id| (id, None));
    walk_answer(t, hit)
}

/// A packet on its way through the pipeline.
#[derive(Debug, Clone)]
pub(super) struct Pkt {
    pub(super) buf: Vec<u8>,
    pub(super) parsed: Parsed,
    pub(super) meta: Meta,
    pub(super) full: FullKey,
    /// `full` no longer reflects `buf` or `meta` (a field or the metadata
    /// changed).
    pub(super) stale: bool,
    /// `parsed` no longer reflects `buf` (headers were pushed, popped or
    /// changed in a way that moves the ones after them); implies `stale`.
    reparse: bool,
    /// What table `.0`'s lookup of `full` found (the entry's classifier
    /// id, with its fast step when the lookup gave it), looked up ahead
    /// while the batch was prefetched; void once `full` is extracted
    /// again.
    found: Option<(u8, Option<Hit>)>,
    /// The queue a `set_queue` action chose for the outputs that follow.
    pub(super) queue: Option<u32>,
}

impl Pkt {
    /// What table `table`'s lookup found, when it was made ahead (see
    /// the field `found`).
    #[inline]
    fn found_in(&self, table: usize) -> Option<Option<Hit>> {
        self.found.filter(|(t, _)| usize::from(*t) == table).map(|(_, hit)| hit)
    }

    pub(super) fn new(buf: Vec<u8>, meta: Meta) -> Pkt {
        Pkt {
            buf,
            parsed: Parsed::default(),
            meta,
            full: [0; FULL_LEN],
            stale: true,
            reparse: true,
            found: None,
            queue: None,
        }
    }

    /// Becomes a copy of `frame` with `meta`, parsed and its key
    /// extracted from `frame` itself: reading the copy just written would
    /// wait for the copy's wide overlapping stores (store forwarding
    /// fails for reads that span two of them).
    #[inline]
    fn load(&mut self, frame: &[u8], meta: Meta) {
        self.buf.clear();
        self.buf.extend_from_slice(frame);
        self.meta = meta;
        self.queue = None;
        fields::parse_extract(frame, &self.meta, &mut self.parsed, &mut self.full);
        self.reparse = false;
        self.stale = false;
        self.found = None;
    }

    /// Brings `parsed` up to date (what actions that change the frame need).
    #[inline]
    pub(super) fn parsed(&mut self) {
        if self.reparse {
            fields::parse_into(&self.buf, &mut self.parsed);
            self.reparse = false;
        }
    }

    /// Brings `parsed` and `full` up to date (what lookups need).
    #[inline]
    pub(super) fn refresh(&mut self) {
        self.parsed();
        if self.stale {
            fields::extract(&self.buf, &self.parsed, &self.meta, &mut self.full);
            self.stale = false;
            self.found = None;
        }
    }

    /// Decrements the IPv4 TTL or IPv6 hop limit (`parsed` up to date):
    /// `Some(false)`, changing nothing, when it would reach zero; `None`
    /// for a frame with neither.
    #[inline]
    pub(super) fn dec_ttl(&mut self) -> Option<bool> {
        let at = match self.parsed.kind {
            fields::L3::Ipv4 => self.parsed.l3 + 8,
            fields::L3::Ipv6 => self.parsed.l3 + 7,
            _ => return None,
        };
        if self.buf[at] <= 1 {
            return Some(false);
        }
        if self.parsed.kind == fields::L3::Ipv4 {
            // The TTL is under the IPv4 header checksum only.
            fields::dec_ipv4_ttl(&mut self.buf, self.parsed.l3);
        } else {
            self.buf[at] -= 1;
        }
        Some(true)
    }

    /// A copy of the frame for a controller: with its checksums complete
    /// (a controller, or a packet-out of a buffered packet, cannot finish
    /// a partial one).
    pub(super) fn for_controller(&mut self) -> Vec<u8> {
        let mut data = self.buf.clone();
        if self.meta.csum_partial {
            self.parsed();
            fields::fix_checksums(&mut data, &self.parsed, false);
        }
        data
    }

    /// The frame's headers changed place.
    pub(super) fn moved(&mut self) {
        self.stale = true;
        self.reparse = true;
    }
}

/// A packet-out's header before its frame: in_port (u32), actions length
/// (u16), the actions in OpenFlow encoding, then the frame.
pub fn encode_packet_out(in_port: u32, actions: &[u8], frame: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(6 + actions.len() + frame.len());
    v.extend_from_slice(&in_port.to_be_bytes());
    v.extend_from_slice(&(actions.len() as u16).to_be_bytes());
    v.extend_from_slice(actions);
    v.extend_from_slice(frame);
    v
}

impl OfSwitch {
    /// A copy of `pkt` in a reused buffer.
    pub(super) fn copy_of(&mut self, pkt: &Pkt) -> Pkt {
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(&pkt.buf);
        Pkt {
            buf,
            parsed: pkt.parsed,
            meta: pkt.meta,
            full: pkt.full,
            stale: pkt.stale,
            reparse: pkt.reparse,
            found: pkt.found,
            queue: pkt.queue,
        }
    }

    /// Runs one frame through the tables from table 0, or replays the walk
    /// the flow cache holds for frames like it; gives its buffer back for
    /// reuse.
    pub(super) fn pipeline<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        meta: Meta,
        frame: Vec<u8>,
        emit: &mut E,
    ) -> Vec<u8> {
        let mut pkt = Pkt::new(frame, meta);
        if self.rec.is_some() {
            // A walk started within a recorded one (an output to TABLE):
            // neither cached nor recorded into the outer walk.
            self.uncacheable();
            let outer = self.rec.take();
            self.walk(idx, &mut pkt, emit);
            self.rec = outer;
            return pkt.buf;
        }
        if !self.flow_cache {
            self.walk(idx, &mut pkt, emit);
            return pkt.buf;
        }
        pkt.refresh();
        self.cache_layout();
        let key = self.cache.key(&pkt.full);
        self.run_cached(idx, &mut pkt, key, emit);
        pkt.buf
    }

    /// Runs `frames` (a batch from `port`) as a software pipeline of four
    /// stages over groups of [`STAGE`] packets, each stage one group
    /// behind the one before: parse the frames into their packets;
    /// compute their cache keys and start loading their cache slots, or
    /// the route-table slots a walk would read; find their route-table
    /// entries and start loading them (entry and counters); run them. What
    /// a stage starts loading has a group's time to arrive, a group's
    /// loads are started together (they overlap), and only the packets in
    /// flight are touched between, so what was loaded is still in the
    /// first-level cache when it is read (whole-batch passes over 128
    /// packets' state evict it). Packets run in batch order, in a ring of
    /// [`RING`] reused from batch to batch.
    pub(super) fn process_pipelined<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        port: u32,
        frames: &[&[u8]],
        partial: u128,
        emit: &mut E,
    ) {
        let mut ring = std::mem::take(&mut self.batch);
        while ring.len() < RING {
            ring.push((Pkt::new(Vec::new(), Meta::default()), None));
        }
        let meta = Meta { in_port: port, in_phy_port: port, ..Meta::default() };
        self.cache_layout();
        // Packets either go through the cache or walk the tables; only
        // those that walk are worth loading route-table slots for.
        let start = stamp();
        let cached = self.flow_cache && self.cache.in_use();
        let prefix_tables = std::mem::take(&mut self.prefix_tables);
        let ahead: &[u8] = if cached { &[] } else { &prefix_tables };
        let n = frames.len();
        let mut bytes = 0;
        // The packets of the group `back` groups before group `g`.
        let group = |g: usize, back: usize| match g.checked_sub(back) {
            Some(g) => (g * STAGE).min(n)..((g + 1) * STAGE).min(n),
            None => 0..0,
        };
        frames.iter().take(LOAD_AHEAD).for_each(|f| prefetch_headers(f));
        for g in 0..n.div_ceil(STAGE) + 3 {
            for i in group(g, 0) {
                if let Some(f) = frames.get(i + LOAD_AHEAD) {
                    prefetch_headers(f);
                }
                let (pkt, _) = &mut ring[i % RING];
                pkt.load(frames[i], Meta { csum_partial: partial >> i & 1 != 0, ..meta });
                bytes += frames[i].len() as u64;
            }
            for i in group(g, 1) {
                let (pkt, key) = &mut ring[i % RING];
                *key = None;
                if cached {
                    *key = self.cache.key(&pkt.full);
                    if let Some(k) = key {
                        self.cache.prefetch(k);
                    }
                }
                for &t in ahead {
                    self.tables[usize::from(t)].prefetch(&pkt.full);
                }
            }
            for i in group(g, 2) {
                // The route-table lookups are made here (their slots
                // loaded by now) and kept for the walk; the entries they
                // find start loading.
                let (pkt, _) = &mut ring[i % RING];
                for &t in ahead {
                    let found = self.tables[usize::from(t)].lookup_ahead(&pkt.full);
                    if pkt.found.is_none() {
                        pkt.found = Some((t, found));
                    }
                }
            }
            for i in group(g, 3) {
                let (pkt, key) = &mut ring[i % RING];
                if cached {
                    self.run_cached(i, pkt, *key, emit);
                } else {
                    self.walk(i, pkt, emit);
                }
            }
        }
        // Walking every packet (no cache, or the cache stepped aside):
        // counted as cache misses when the cache is on.
        if !cached && self.flow_cache {
            self.counters.cache_misses += n as u64;
        }
        self.prefix_tables = prefix_tables;
        if self.flow_cache {
            self.cache.account(n, stamp().wrapping_sub(start));
        }
        self.port_count(port)[1] += bytes;
        self.batch = ring;
    }

    /// Walks `pkt` through the tables from table 0 (recording the walk
    /// when a recording is on).
    #[inline]
    pub(super) fn walk<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, idx: usize, pkt: &mut Pkt, emit: &mut E) {
        let from = if self.rec.is_none() {
            match self.walk_fast(idx, pkt, emit) {
                Some(table) => table,
                None => return,
            }
        } else {
            0
        };
        self.walk_from(idx, pkt, from, emit);
    }

    /// The start of a walk while it takes fast steps only (see [`Fast`]):
    /// `None` when the packet's walk ended with one; else the table where
    /// the walk goes on in full (its lookup not counted: the walk makes
    /// it again), having changed nothing but what the steps it took count.
    #[inline(always)]
    fn walk_fast<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        emit: &mut E,
    ) -> Option<usize> {
        pkt.refresh();
        if self.pipeline.is_some() {
            return self.walk_fast_native(idx, pkt, emit);
        }
        self.walk_fast_from(idx, pkt, 0, emit)
    }

    /// [`OfSwitch::walk_fast`] on the walk's native code: the gotos run
    /// there, the fast steps go on from the entry where it stopped.
    #[inline(never)]
    fn walk_fast_native<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        emit: &mut E,
    ) -> Option<usize> {
        let table = self.walk_native(pkt);
        self.walk_fast_from(idx, pkt, table, emit)
    }

    /// The loop of fast steps of [`OfSwitch::walk_fast`] from `table`.
    #[inline(always)]
    fn walk_fast_from<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        mut table: usize,
        emit: &mut E,
    ) -> Option<usize> {
        loop {
            let found = pkt
                .found_in(table)
                .unwrap_or_else(|| self.tables[table].lookup_id(&pkt.full, &mut self.scratch).map(|id| (id, None)));
            let step = found.and_then(|hit| self.fast_step(idx, pkt, table, hit, true, emit));
            match step {
                Some(Fast::Goto(t)) => {
                    self.counters.tables[table].0 += 1;
                    table = usize::from(t);
                }
                Some(_) => {
                    self.counters.tables[table].0 += 1;
                    return None;
                }
                None => return Some(table),
            }
        }
    }

    /// Runs the walk's native code on `pkt` (the switch has some): counts
    /// the entries it went through by their gotos and gives the table
    /// where it stopped, what that table's lookup found there being the
    /// packet's lookup made ahead.
    #[inline(always)]
    fn walk_native(&mut self, pkt: &mut Pkt) -> usize {
        let Some(code) = &self.pipeline else { return 0 };
        let ahead = match pkt.found {
            Some((t, hit)) => {
                LookupAhead { table: u32::from(t), answer: walk_answer(&self.tables[usize::from(t)], hit) }
            }
            None => LookupAhead::NONE,
        };
        let ahead_table = ahead.table;
        let mut ctx = LookupCtx { ahead, tables: self.tables.as_mut_ptr(), scratch: &mut self.scratch };
        let mut path = std::mem::MaybeUninit::uninit();
        // SAFETY: `pipeline_lookup` reads `ctx` as the `LookupCtx` it is,
        // and the code only asks it for tables it was compiled to find
        // through their structure, which exist (all 64 do).
        let path = unsafe { code.run(&pkt.full, (&mut ctx as *mut LookupCtx).cast(), pipeline_lookup, &mut path) };
        let len = pkt.buf.len() as u64;
        for &e in &path[..path.len().saturating_sub(1)] {
            let (t, id) = ((e >> 32) as usize, e as u32);
            self.counters.tables[t].0 += 1;
            self.counters.tables[t].1 += 1;
            self.tables[t].count(id, 1, len);
        }
        let Some(&last) = path.last() else { return 0 };
        let (table, id) = ((last >> 32) as usize, last as u32);
        // Stopped at the table looked up ahead: that lookup (it carries
        // the entry's fast step) stays the packet's.
        if table as u32 != ahead_table {
            pkt.found = Some((table as u8, (id != PATH_MISS).then_some((id, None))));
        }
        table
    }

    /// Walks `pkt` through the tables from `table` on, with an empty
    /// action set (recording the walk when a recording is on).
    fn walk_from<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        mut table: usize,
        emit: &mut E,
    ) {
        // Boxed: taking it out and back moves a pointer, not the set.
        let mut set = self.set.take().unwrap_or_default();
        set.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        loop {
            pkt.refresh();
            self.counters.tables[table].0 += 1;
            let found = match pkt.found_in(table) {
                Some(hit) => hit.map(|(id, _)| id),
                None => self.tables[table].lookup_id(&pkt.full, &mut scratch),
            };
            let Some(id) = found else {
                if let Some(r) = &mut self.rec {
                    r.counts.push(Count::Miss { table: table as u8 });
                    r.push(Op::Drop);
                }
                if self.miss_packet_ins {
                    // Not replayed: each such packet goes to the agent.
                    self.uncacheable();
                    self.implicit_miss(pkt, table as u8);
                }
                self.stats.dropped += 1;
                break;
            };
            if let Some(r) = &mut self.rec {
                r.counts.push(Count::Hit { table: table as u8, id });
            } else {
                match self.fast_step(idx, pkt, table, (id, None), set.empty, emit) {
                    Some(Fast::Goto(t)) => {
                        table = usize::from(t);
                        continue;
                    }
                    Some(_) => break,
                    None => {}
                }
            }
            let hot = self.tables[table].hot(id);
            // Taken out while they run (nothing else reads this entry's
            // list meanwhile: tables change only between batches), put
            // back below.
            let (cookie, miss_entry, taken) = (hot.cookie, hot.miss_entry, hot.instructions.take());
            let Some(instructions) = taken else {
                self.uncacheable();
                self.stats.dropped += 1;
                break;
            };
            self.counters.tables[table].1 += 1;
            let len = pkt.buf.len() as u64;
            self.tables[table].count(id, 1, len);
            let reason = if miss_entry {
                sluice_openflow::packet_in_reason::NO_MATCH
            } else {
                sluice_openflow::packet_in_reason::ACTION
            };
            let mut next = None;
            let mut dropped = false;
            // A meter runs first; a packet it drops runs nothing else (the
            // entry's instructions still go back to it below).
            if let Some(m) = instructions.iter().find_map(|i| match i {
                Instruction::Meter(m) => Some(*m),
                _ => None,
            }) {
                // Its verdict depends on time: not replayed.
                self.uncacheable();
                dropped = !self.run_meter(m, pkt);
            }
            if !dropped {
                if let Some(r) = &mut self.rec {
                    r.apply = true;
                }
                for ins in instructions.iter() {
                    if let Instruction::ApplyActions(a) = ins {
                        if self.run_actions(idx, pkt, a, reason, table as u8, cookie, 0, emit).is_err() {
                            // Cut short: a later packet may go further.
                            self.uncacheable();
                            dropped = true;
                            break;
                        }
                    }
                }
                if let Some(r) = &mut self.rec {
                    r.apply = false;
                }
            }
            if !dropped {
                if instructions.iter().any(|i| matches!(i, Instruction::ClearActions)) {
                    set.clear();
                }
                for ins in instructions.iter() {
                    match ins {
                        Instruction::WriteActions(a) => set.write(a),
                        Instruction::WriteMetadata { metadata, mask } => {
                            pkt.meta.metadata = (pkt.meta.metadata & !mask) | (metadata & mask);
                            pkt.stale = true;
                            self.rec(|| Op::Metadata { value: *metadata, mask: *mask });
                        }
                        Instruction::GotoTable(t) => next = Some(usize::from(*t)),
                        _ => {}
                    }
                }
            }
            self.tables[table].hot(id).instructions = Some(instructions);
            if dropped {
                self.stats.dropped += 1;
                break;
            }
            match next {
                Some(t) if t > table && t < N_TABLES => table = t,
                _ => {
                    // The action set, in its order; an action that drops
                    // the packet ends it.
                    let mut n = 0;
                    while let Some(a) = (!set.empty).then(|| set.nth(n)).flatten() {
                        n += 1;
                        let Some(a) = a else { continue };
                        let one = std::slice::from_ref(a);
                        // Said as from the action set (1.4's reason).
                        let reason = if reason == sluice_openflow::packet_in_reason::ACTION {
                            sluice_openflow::packet_in_reason::ACTION_SET
                        } else {
                            reason
                        };
                        if self.run_actions(idx, pkt, one, reason, table as u8, cookie, 0, emit).is_err() {
                            self.uncacheable();
                            break;
                        }
                    }
                    break;
                }
            }
        }
        self.scratch = scratch;
        self.set = Some(set);
    }

    /// Runs the entry `id` of `table` (whose fast step is `step`, when
    /// the lookup gave it) when its instructions are a fast step
    /// (see [`Fast`]) that applies here: a goto to a later table, or a
    /// next-hop group (see [`Group::forward`]) with an empty action set
    /// behind it and a TTL that does not run out. Counts what the generic
    /// path counts and returns the step it ran; `None`, having done
    /// nothing, when the generic path must run the entry.
    #[inline(always)]
    fn fast_step<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        table: usize,
        (id, step): Hit,
        set_empty: bool,
        emit: &mut E,
    ) -> Option<Fast> {
        let len = pkt.buf.len() as u64;
        let step = step.unwrap_or_else(|| self.tables[table].fast(id));
        match step {
            Fast::Goto(t) if usize::from(t) > table && usize::from(t) < N_TABLES => {}
            Fast::Group(g) if set_empty => {
                // Counted before it runs (one lookup of the group), taken
                // back in the rare case the generic path must run it.
                let group = self.groups.get_mut(&g)?;
                let f = group.forward?;
                group.forwarded.0 += 1;
                group.forwarded.1 += len;
                if !self.forward(idx, pkt, &f, emit) {
                    if let Some(group) = self.groups.get_mut(&g) {
                        group.forwarded.0 -= 1;
                        group.forwarded.1 -= len;
                    }
                    return None;
                }
            }
            _ => return None,
        }
        self.tables[table].count(id, 1, len);
        self.counters.tables[table].1 += 1;
        Some(step)
    }

    /// Sends `pkt` through meter `id`; false when the meter drops it (a
    /// DSCP-remark band rewrites the packet's DSCP instead).
    fn run_meter(&mut self, id: u32, pkt: &mut Pkt) -> bool {
        let now = self.clock.elapsed().as_nanos() as u64;
        match self.meters.meter(id, pkt.buf.len(), now) {
            crate::meter::Verdict::Pass => true,
            crate::meter::Verdict::Drop => false,
            crate::meter::Verdict::Remark(levels) => {
                pkt.refresh();
                let dscp = pkt.full[33];
                let v = [crate::meter::remark_dscp(dscp, levels)];
                if fields::write_field(&mut pkt.buf, &pkt.parsed, OxmField::IpDscp, &v) {
                    fields::fix_checksums(&mut pkt.buf, &pkt.parsed, pkt.meta.csum_partial);
                    pkt.stale = true;
                }
                true
            }
        }
    }

    /// Runs a packet-out frame (see [`encode_packet_out`]).
    pub(super) fn packet_out<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, idx: usize, raw: &[u8], emit: &mut E) {
        if raw.len() < 6 {
            self.stats.dropped += 1;
            return;
        }
        let in_port = u32::from_be_bytes(raw[0..4].try_into().expect("4 bytes"));
        let alen = usize::from(u16::from_be_bytes([raw[4], raw[5]]));
        let Some(enc) = raw.get(6..6 + alen) else {
            self.stats.dropped += 1;
            return;
        };
        let Ok(actions) = sluice_openflow::decode_actions(enc) else {
            self.stats.dropped += 1;
            return;
        };
        let frame = raw[6 + alen..].to_vec();
        let meta = Meta { in_port, in_phy_port: in_port, ..Meta::default() };
        let mut pkt = Pkt::new(frame, meta);
        let reason = sluice_openflow::packet_in_reason::PACKET_OUT;
        let _ = self.run_actions(idx, &mut pkt, &actions, reason, 0, 0, 0, emit);
    }
}
