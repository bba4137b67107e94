//! The v1model switch: parser -> ingress -> replication/queueing -> egress ->
//! deparser, with clone, resubmit, recirculate and multicast as simple_switch
//! does them (see `docs/bmv2-semantics.md`).
//!
//! One packet's walk, file by file: [`batch`] takes a batch of frames and
//! picks how it runs; [`parser`] parses a frame into a PHV and verifies
//! checksums; the controls run in `crate::control` (interpreted) or in
//! generated code (`crate::jit`), matching in `crate::tables`;
//! [`replication`] decides what follows ingress and egress (unicast,
//! multicast copies, clones, resubmission, recirculation, drop) and runs
//! the queues; [`deparser`] updates checksums and writes the headers and
//! payload out; [`inspect`] reports what the specializer chose per stage.
//! A PSA program takes [`psa`]'s packet path instead (two parsers and
//! deparsers, PSA's metadata), on the same parser, controls, deparser and
//! queues.
//!
//! Memory invariant: PHVs and packet buffers come from per-switch pools and
//! go back to them, so steady-state unicast forwarding allocates nothing.
//! Concurrency invariant: a `Switch` is used from one thread at a time; a
//! worker owns its replica (see `sluice_dataplane::workers`).

mod batch;
mod deparser;
mod inspect;
mod parser;
mod psa;
mod queues;
mod replication;

use std::collections::VecDeque;
use std::time::Instant;

use sluice_dataplane::egress_queues::EgressQueues;

use crate::checksum::ByteChecksum;
use crate::control::{Exec, PktMeta};
use crate::phv::Phv;
use crate::plan::Plan;
use crate::state::State;

use batch::FastRefs;
pub(crate) use batch::BATCH;
use replication::{Arrival, EgressItem, IngressItem};
pub use sluice_dataplane::Stats as SwitchStats;

/// Bytes the output buffer and a pooled packet buffer keep when idle
/// (larger ones, grown by large frames, are given back).
const OUT_BUF: usize = 16384;
/// [`Switch::area_room`] at the start and after the buffers are released:
/// a minimum-size Ethernet frame and then some.
const AREA_ROOM: usize = 64;

/// The switch's stages as `--profile` reports them. The fused strategy
/// times its generated batch function (parser to deparser) as one stage;
/// packets that leave it for the general path, and the other strategies,
/// time parser, controls, replication and deparser one by one. A PSA
/// program's second parser and deparser are stages of their own.
pub(crate) const STAGES: &[&str] = &[
    "parser",
    "ingress",
    "replication",
    "egress",
    "deparser",
    "forwarding function",
    "batch function",
    "egress parser",
    "egress deparser",
];
pub(crate) const STAGE_PARSER: usize = 0;
pub(crate) const STAGE_INGRESS: usize = 1;
pub(crate) const STAGE_REPLICATION: usize = 2;
pub(crate) const STAGE_EGRESS: usize = 3;
pub(crate) const STAGE_DEPARSER: usize = 4;
pub(crate) const STAGE_FORWARD: usize = 5;
pub(crate) const STAGE_FUSED: usize = 6;
pub(crate) const STAGE_EGRESS_PARSER: usize = 7;
pub(crate) const STAGE_EGRESS_DEPARSER: usize = 8;

/// A loaded program with its state, ready to process packets.
///
/// The program and its state are private to the engine: everything outside
/// it reads and changes them through the typed runtime API
/// (`crate::runtime`).
pub struct Switch {
    pub(crate) plan: Plan,
    pub(crate) state: State,
    // Boxed on purpose: a pooled PHV moves into queue items as a pointer.
    #[allow(clippy::vec_box)]
    phv_pool: Vec<Box<Phv>>,
    buf_pool: Vec<Vec<u8>>,
    key_buf: Vec<u8>,
    act_buf: Vec<u8>,
    ingress_q: VecDeque<IngressItem>,
    egress_q: VecDeque<EgressItem>,
    /// The traffic manager: per-port egress queues, made when a priority
    /// count above one, a depth or a rate is set (`None`: packets go from
    /// ingress to egress at once, the fast paths stay on).
    tm: Option<Box<EgressQueues<EgressItem>>>,
    /// The traffic manager's settings and counts (boxed: read only where
    /// queues are set up, counted or released).
    pub(crate) tm_state: Box<queues::TmState>,
    /// Set while [`Switch::release_queued_at`] runs: queued packets may
    /// leave even when rates are set (otherwise they leave only there).
    tm_release: bool,
    /// Time of the packet being processed, µs since start (read once per packet).
    now: u64,
    hash_buf: sluice_hash::BitPacker,
    /// `(header, wire offset, bytes)` in deparser order when every header the
    /// deparser emits is in wire format: the deparser's (a PSA program's
    /// ingress deparser's), then a PSA program's egress deparser's.
    deparse_wire: [Option<Vec<(u32, u32, u32)>>; 2],
    mc_buf: Vec<(u16, u32)>,
    out_buf: Vec<u8>,
    start: Instant,
    /// When set, a per-packet trace is appended here (see `Switch::set_trace`).
    pub(crate) trace: Option<crate::trace::Trace>,
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
    /// Bytes of packet each of the batch function's output areas holds:
    /// the longest packet seen since the buffers were last released (a
    /// longer one stops the batch function, which then runs again with
    /// the room grown to it). Why not the batch's longest: finding it is a
    /// pass over the batch before the batch function, which waits for the
    /// packet list to load with nothing else to do (router, 64 B, 10 000
    /// routes: about 2%).
    area_room: usize,
    /// The batch function's packet list, kept between batches (an array
    /// built per call costs a `memset`).
    chunk_refs: FastRefs,
    /// The batch function's results, kept between batches likewise.
    fast_results: Vec<crate::jit::PktResult>,
    /// The tables' lookup structures for compiled code, rebuilt at the
    /// start of every packet or batch (see `tables::TableView`).
    views: crate::jit::Views,
    /// Per-stage timing (`sluice bench --profile`), off unless asked for.
    pub(crate) clock: sluice_dataplane::StageClock,
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
        let deparse_wire = [&plan.deparse_order, &plan.egress_deparse_order].map(|order| {
            order
                .iter()
                .map(|h| plan.layout.headers[*h as usize].wire.map(|(off, n)| (*h, off, n)))
                .collect::<Option<Vec<_>>>()
        });
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
            tm: None,
            tm_state: Box::default(),
            tm_release: false,
            now: 0,
            hash_buf: sluice_hash::BitPacker::with_capacity(256),
            mc_buf: Vec::new(),
            out_buf: Vec::with_capacity(OUT_BUF),
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
            area_room: AREA_ROOM,
            chunk_refs: FastRefs(Vec::with_capacity(BATCH)),
            fast_results: vec![crate::jit::PktResult::default(); BATCH],
            views: crate::jit::Views::default(),
            clock: sluice_dataplane::StageClock::new(STAGES),
        })
    }

    /// Shrinks the buffers large frames grew (the forwarding area, the
    /// output and pooled packet buffers) back to their initial sizes; a
    /// worker calls it once idle (see `DataPlane::release_memory`).
    pub fn release_memory(&mut self) {
        let initial = crate::jit::forward_hdr_max(&self.plan);
        if self.fwd_hdr.capacity() > initial {
            self.fwd_hdr = vec![0; initial];
        }
        self.area_room = AREA_ROOM;
        if self.out_buf.capacity() > OUT_BUF {
            self.out_buf = Vec::with_capacity(OUT_BUF);
        }
        self.buf_pool.retain(|b| b.capacity() <= OUT_BUF);
        self.buf_pool.shrink_to_fit();
    }

    /// A replica for another worker: same program, same execution mode,
    /// tracing as this switch does, and a copy of the current state, except
    /// registers and meters, which it shares with this switch (see
    /// `crate::registers`, `crate::meters`).
    pub fn replica(&self) -> Result<Switch, crate::CompileError> {
        // An interpreted replica generates no native code only to drop it.
        let mut sw = match self.mode() {
            crate::ExecMode::Interpreted => Switch::new_interpreted(self.plan.clone())?,
            crate::ExecMode::Compiled => Switch::new(self.plan.clone())?,
        };
        sw.state = self.state.clone();
        sw.set_mode(self.mode())?;
        sw.max_recirculations = self.max_recirculations;
        sw.tm_state.priority_queues = self.tm_state.priority_queues;
        sw.tm_state.share = self.tm_state.share;
        sw.tm = self.tm.as_ref().map(|t| Box::new(t.settings_copy(self.now * 1000)));
        sw.set_trace(self.tracing());
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

    /// This switch's clock now: microseconds since it started.
    pub fn clock_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
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

    /// Runs the ingress or the egress control on a packet (generated code
    /// when there is some and nothing is traced, the interpreter otherwise).
    fn run_pipeline(&mut self, phv: &mut Phv, meta: &mut PktMeta, ingress: bool) {
        let init = if ingress { self.plan.ingress.init } else { self.plan.egress.init };
        if init.is_none() && self.trace.is_none() {
            // An empty control (e.g. the router's egress) costs nothing.
            return;
        }
        let now = self.now_us();
        let timed = self.clock.start();
        let mut trace = self.trace.take();
        if let Some(t) = trace.as_mut() {
            t.push(crate::trace::Event::PipelineStart { egress: !ingress });
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
        if meta.exit {
            if let Some(t) = trace.as_mut() {
                t.note("Packet is marked for exit, interrupting pipeline".into());
            }
        }
        meta.exit = false;
        if let Some(t) = trace.as_mut() {
            t.push(crate::trace::Event::PipelineDone { egress: !ingress });
        }
        self.trace = trace;
        self.clock.record(if ingress { STAGE_INGRESS } else { STAGE_EGRESS }, timed, 1);
    }
}
