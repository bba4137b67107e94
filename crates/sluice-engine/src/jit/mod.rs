//! Compiled control pipelines: each pipeline of a loaded program becomes one
//! native function (generated with Cranelift at load time).
//!
//! Why: the interpreter in `control.rs` pays a dispatch (and often a branch
//! misprediction) for every node, primitive and expression of the program.
//! Here the pipeline's graph becomes straight-line native code in which the
//! offsets, widths, masks and constants the JSON fixes are immediates:
//! - conditions with a shortcut form (`Fast`) are evaluated inline;
//! - actions whose primitives are all simple (field assignments from
//!   shortcut expressions, counters, `mark_to_drop`, `exit`) run inline;
//!   any other action runs in the interpreter through a helper call;
//! - direct-array and DIR-24-8 tables are looked up inline through the
//!   tables' [`TableView`]s (key built from the PHV, one or two array reads,
//!   the hit's hot record copied into the context, the action dispatched by
//!   a jump table); other lookups call a helper that returns which
//!   `(action, hit)` case the result is, with the action data copied into
//!   the context; the compiled code then runs that action and jumps to the
//!   statically known next node. A result the compiled code cannot take
//!   (indirect entries, direct counters or meters, large action data) is
//!   applied completely by the interpreter and only the next node comes back;
//! - per program, a forwarding function runs ingress, the unicast decision,
//!   egress, checksum updates and the deparser's header bytes in one call
//!   (`compile_forward`), and the parser also sets the PHV up and ends
//!   parsing (`compile_parser`);
//! - a PSA program gets its ingress and egress parsers (without the setup
//!   and the end of parsing, which its packet path does) and its two
//!   controls; no forwarding, batch or key function (their unicast
//!   decision is v1model's).
//!
//! The interpreter stays the reference: tracing always uses it, and
//! `ExecMode::Interpreted` selects it for a whole switch (the conformance
//! corpora and a differential test run both).
//!
//! Memory invariant: the generated code reads and writes the packet's PHV
//! through the raw pointers in [`JitCtx`]; the PHV's vectors are allocated
//! once per PHV and never resized, so the pointers stay valid for the whole
//! call. The code memory is immutable after finalisation and freed when the
//! [`CompiledPipelines`] is dropped; nothing else refers to it.
//!
//! The code generator is split by stage; each stage's file opens with the
//! contract of the function it generates (what it reads, what it writes,
//! how a packet leaves it):
//! - `abi`: the structures Rust and generated code share (`JitCtx`,
//!   `ParseCtx`, `BatchCtx`, `KeysCtx`, packet references and results, the
//!   table, counter and register views) and the field offsets generated
//!   code is built with;
//! - `shape`: the analyses that decide what can be generated (the parser's
//!   and the forwarding function's shapes, what code after the parser may
//!   write, the checksum sums the end of parsing can stash);
//! - `gen`: the `Gen` builder shared by every stage, with its emitters for
//!   field accesses, expressions, checksums, actions and tables;
//! - the generated functions: `pipeline` (one per control pipeline),
//!   `parser`, `forward` (ingress to deparser), `batch` (parser and
//!   forwarding function per packet of a batch) and `keys` (the lookahead
//!   parser and prefetch keys);
//! - `helpers`: the `extern "C"` functions generated code calls to run
//!   engine code, and the table results they hand back;
//! - `module`: the Cranelift module, the declaration and definition of
//!   generated functions, code sizes and the perf map.
//! - `loadfwd`: the passes `module` runs on each generated function before
//!   Cranelift compiles it (load forwarding across blocks, selects whose
//!   condition is decided);
//! - `flow`: which edges of the pipelines' graphs the batch function
//!   counts, and each table's applies (so its inline hits) from them.
//!
//! [`TableView`]: crate::tables::TableView

mod abi;
mod batch;
mod flow;
mod forward;
mod gen;
mod helpers;
mod keys;
mod loadfwd;
mod module;
mod parser;
mod pipeline;
mod shape;

use std::ffi::c_void;

use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::JITModule;
use cranelift_module::FuncId;

pub use abi::{AheadFn, CounterView, FastContexts, Forward, JitCtx, ParseCtx, PktRef, PktResult, RegisterView, Views};
pub use forward::forward_hdr_max;
pub use keys::{KeyRead, KeyReads, Lookahead};
/// How many tables a [`KeyReads`] covers at most.
pub const KEY_READ_TABLES: usize = abi::SPEC_TABLES;

use crate::control::Exec;
use crate::plan::Plan;
use abi::{
    BatchCtx, BatchFn, ForwardFn, KeysCtx, KeysFn, ParserFn, PipelineFn, MARK_META_FRESH, SETUP_FULL, SPEC_TABLES,
    SPEC_UNKNOWN,
};
use batch::compile_batch;
use forward::compile_forward;
use helpers::fresh_meta;
use keys::compile_keys;
use module::{new_module, write_perf_map};
use parser::compile_parser;
use pipeline::compile_pipelines;
use shape::{forward_shape, parser_shape, parser_shape_from};

/// Which engine runs a switch's control pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// Native code generated at load time (the default).
    #[default]
    Compiled,
    /// The plan interpreter (the reference; also used whenever tracing).
    Interpreted,
}

/// How a compiled parser run ended.
pub enum ParseOutcome {
    /// Parsing finished (accept, or no transition matched): bytes consumed.
    Done(usize),
    /// The packet ended inside a header; bytes consumed before it.
    TooShort(usize),
    /// A `verify` failed with this error code; bytes consumed before it.
    Verify(usize, u64),
}

/// The native code of a program's ingress and egress pipelines.
pub struct CompiledPipelines {
    module: Option<JITModule>,
    ingress: Option<PipelineFn>,
    egress: Option<PipelineFn>,
    /// The parser, when every state it can reach copies wire-format headers
    /// and selects on at most 64 bits of fields (see [`compile_parser`]).
    parser: Option<ParserFn>,
    /// A PSA program's egress parser, compiled as `parser` is.
    egress_parser: Option<ParserFn>,
    /// Whether the compiled parser also sets `parser_error` and verifies
    /// checksums (`Switch::parse_end` is then skipped).
    parser_ends: bool,
    /// Whether the compiled parser can set an arriving packet's PHV up.
    parser_setup: bool,
    /// Ingress to deparser in one function, when the program allows it (see `compile_forward`).
    forward: Option<ForwardFn>,
    /// The parser and the forwarding function over a batch of packets (see `compile_batch`).
    batch: Option<BatchFn>,
    /// How the batch function's inline hits follow from its edge counts
    /// (see `flow`); `None` when it counts them one by one.
    batch_flow: Option<flow::BatchFlow>,
    /// Whether the batch function parses headers into the output areas
    /// (see `compile_batch`).
    batch_in_place: bool,
    /// The lookahead parser with the prefetchable tables' keys (see `compile_keys`).
    keys: Option<(KeysFn, u64, Option<KeyReads>)>,
    /// Bytes the forwarding function may write to its output buffer.
    forward_out: usize,
    /// Cranelift IR of each compiled function, for `sluice inspect`.
    pub listing: String,
    /// How many actions run inline vs through the interpreter, per pipeline.
    pub stats: JitStats,
}

/// Counts of what the compiler managed to turn into native code.
#[derive(Debug, Clone, Default)]
pub struct JitStats {
    pub conditions_inline: usize,
    pub conditions_helper: usize,
    pub actions_inline: usize,
    pub actions_helper: usize,
    pub tables: usize,
}

// SAFETY: the module is only touched again to free its memory on drop; the
// generated code is immutable and reentrant (all state lives in `JitCtx`).
unsafe impl Send for CompiledPipelines {}

impl Drop for CompiledPipelines {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the function pointers die with `self`; nothing else holds them.
            unsafe { m.free_memory() };
        }
    }
}

impl CompiledPipelines {
    /// Runs the ingress (`ingress == true`) or egress pipeline on `ex`.
    /// Returns false when that pipeline was not compiled (it is empty).
    /// `views` are the tables' current [`TableView`]s, one per table.
    ///
    /// [`TableView`]: crate::tables::TableView
    pub fn run(&self, ingress: bool, ex: &mut Exec<'_>, views: &Views) -> bool {
        let Some(f) = (if ingress { self.ingress } else { self.egress }) else {
            return false;
        };
        assert_eq!(views.tables.len(), ex.plan.tables.len(), "one table view per table");
        assert_eq!(views.counters.len(), ex.plan.counters.len(), "one counter view per counter array");
        let mut ctx = JitCtx::for_exec(ex, std::ptr::null_mut(), views);
        ctx.now = 0;
        ctx.len = u64::from(ex.meta.ingress_len);
        ctx.exec = ex as *mut Exec<'_> as *mut c_void;
        // SAFETY: `f` was generated for this plan; `ctx` points at live PHV
        // vectors (never resized) and at `ex`, which outlives the call.
        unsafe { f(&mut ctx) };
        true
    }

    /// Whether the one-function path from ingress to deparser exists.
    pub fn has_forward(&self) -> bool {
        self.forward.is_some()
    }

    /// Runs ingress, the unicast decision, egress, checksum updates and the
    /// header part of the deparser in one native call (see `compile_forward`).
    /// `out` must hold [`forward_hdr_max`] bytes; `len` is the packet's length.
    /// Returns `None` when the program has no forwarding function.
    #[inline]
    pub fn forward(&self, ex: &mut Exec<'_>, len: u32, out: &mut [u8], views: &Views) -> Option<Forward> {
        let f = self.forward?;
        assert!(out.len() >= self.forward_out, "forwarding buffer too small");
        assert_eq!(views.tables.len(), ex.plan.tables.len(), "one table view per table");
        assert_eq!(views.counters.len(), ex.plan.counters.len(), "one counter view per counter array");
        debug_assert_eq!(len, ex.meta.ingress_len, "counters count the ingress length");
        let mut ctx = JitCtx::for_exec(ex, out.as_mut_ptr(), views);
        ctx.len = u64::from(len);
        ctx.exec = ex as *mut Exec<'_> as *mut c_void;
        // SAFETY: as in `run`; `out` has the room the generated code writes into (checked above).
        let status = unsafe { f(&mut ctx) };
        Some(ctx.outcome(status))
    }

    /// Whether arriving packets can take [`CompiledPipelines::run_batch`]:
    /// the parser is compiled, sets the PHV up and ends parsing, and the
    /// forwarding function exists (the batch function is then compiled).
    pub fn has_fast_path(&self) -> bool {
        self.batch.is_some()
    }

    /// Contexts for [`CompiledPipelines::run_batch`], built once for a run
    /// of packets that arrive on `port` at `now_us` and share the PHV of
    /// `ex` (each packet's setup zeroes what the one before may have
    /// written). Why: building both contexts and the engine state per
    /// packet cost about as much as the parser itself.
    pub fn fast_contexts(&self, ex: &mut Exec<'_>, views: &Views, port: u32) -> FastContexts {
        assert!(self.has_fast_path(), "no fast path for this program");
        assert_eq!(views.tables.len(), ex.plan.tables.len(), "one table view per table");
        assert_eq!(views.counters.len(), ex.plan.counters.len(), "one counter view per counter array");
        // The batch function points `out` at each packet's area.
        let mut fwd = JitCtx::for_exec(ex, std::ptr::null_mut(), views);
        fwd.in_flow = u64::from(self.batch_flow.is_some());
        FastContexts {
            parse: ParseCtx {
                exec: std::ptr::null_mut(),
                wire: fwd.wire,
                slots: fwd.slots,
                pkt: std::ptr::null(),
                len: 0,
                cursor: 0,
                status: 0,
                code: 0,
                setup: SETUP_FULL,
                port: u64::from(port),
                now: ex.now_us,
            },
            fwd,
            batch: BatchCtx {
                pkts: std::ptr::null(),
                n: 0,
                out: std::ptr::null_mut(),
                stride16: 0,
                results: std::ptr::null_mut(),
                phv_wire_at: std::ptr::null_mut(),
                edges: [0; flow::EDGE_SLOTS],
                room: 0,
                limit16: 0,
                ahead: None,
                ahead_state: std::ptr::null_mut(),
            },
        }
    }

    /// Bytes the forwarding function may write to its output area.
    pub fn forward_out(&self) -> usize {
        self.forward_out
    }

    /// Parses and forwards arriving packets `pkts` with the batch function
    /// (see `compile_batch`) on the PHV and state of `ex` (`cx` built with
    /// it). Packet `i` gets an area of `out` (grown as needed) at `i *
    /// stride`, where a transmitted packet's headers and payload end up,
    /// and its result in `results[i]`; the stride leaves `room` bytes for
    /// a packet, and a longer one stops the batch function before it is
    /// parsed (the caller calls again with more room: the room is the
    /// longest packet seen so far, so no pass over the batch finds the
    /// longest first). Returns the stride, how many packets were
    /// transmitted or dropped before the first that did not fit or needs
    /// the general path (all of them when none), and whether that one did
    /// not fit. A packet that needs the general path has its PHV and
    /// metadata in `ex` (with the headers in place, copied back from its
    /// area into the PHV's own buffer). With `ahead`, `(f, state, first)`:
    /// the batch function calls `f(state, i)` before packet `i` when it
    /// reaches its limit, the first being `first` packets (see
    /// [`AheadFn`]).
    ///
    /// # Safety
    /// `f` must be callable with `state` for the whole call and return a
    /// limit above its `index` and at most `pkts.len()`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_batch(
        &self,
        cx: &mut FastContexts,
        ex: &mut Exec<'_>,
        pkts: &[PktRef],
        room: usize,
        out: &mut Vec<u8>,
        results: &mut [PktResult],
        ahead: Option<(AheadFn, *mut c_void, usize)>,
    ) -> (usize, usize, bool) {
        let f = self.batch.expect("has_fast_path: the batch function exists");
        debug_assert!(std::ptr::eq(cx.parse.wire, ex.phv.wire_ptr()), "contexts of another PHV");
        assert!(results.len() >= pkts.len(), "one result per packet");
        // With the headers in place, an area holds them, their padding
        // and valid flags before the payload overwrites what follows them.
        let head = if self.batch_in_place { self.forward_out.max(ex.phv.wire_total()) } else { self.forward_out };
        let stride = (head + room).next_multiple_of(64);
        if out.len() < stride * pkts.len() {
            out.resize(stride * pkts.len(), 0);
        }
        cx.fwd.exec = ex as *mut Exec<'_> as *mut c_void;
        // (`edges` stays as the last call left it: zero.)
        cx.batch.pkts = pkts.as_ptr();
        cx.batch.n = pkts.len() as u64;
        cx.batch.out = out.as_mut_ptr();
        cx.batch.stride16 = stride as u64 / 16;
        cx.batch.results = results.as_mut_ptr();
        cx.batch.room = room as u64;
        cx.batch.phv_wire_at = if self.batch_in_place { ex.phv.wire_at_slot() } else { std::ptr::null_mut() };
        let limit = match ahead {
            Some((f, state, first)) => {
                cx.batch.ahead = Some(f);
                cx.batch.ahead_state = state;
                first.min(pkts.len())
            }
            None => {
                cx.batch.ahead = None;
                cx.batch.ahead_state = std::ptr::null_mut();
                pkts.len()
            }
        };
        cx.batch.limit16 = 16 * limit as u64;
        // SAFETY: the parser reads at most each packet's `len` bytes of its
        // (live) slice and writes inside the PHV of `ex`, which the contexts
        // point at, or, with the headers in place, its headers, padding and
        // flags (`wire_total` bytes) at `out + i * stride`; there the
        // forwarding function writes at most `forward_out` header bytes and
        // the payload copy at most `len` more, at most `room` (a longer
        // packet stops the batch function before it is parsed);
        // views are current for this batch, and the helpers reach `ex`,
        // alive for the call, whose PHV reads and writes the area the batch
        // function stored to its redirection slot (reset below).
        if let Some(flow) = &self.batch_flow {
            flow.mark(&ex.state.lookups, &mut ex.state.lookup_marks);
        }
        let done = unsafe { f(&mut cx.fwd) } as usize;
        // The packet the call stopped at, unless it only did not fit.
        let too_long = done < pkts.len() && pkts[done].len as usize > room;
        let stopped = done < pkts.len() && !too_long;
        if self.batch_in_place {
            // The general path goes on with the PHV's own buffer: the
            // headers of the packet it takes come back from its area.
            let area = stopped.then(|| &out[done * stride..done * stride + ex.phv.wire_total()]);
            ex.phv.end_wire_redirect(area);
        }
        if let Some(flow) = &self.batch_flow {
            let ran = done + usize::from(stopped);
            let after_ingress = stopped && matches!(results[done].outcome().1, Forward::AfterIngress);
            let state = &mut *ex.state;
            flow.fold(&mut cx.batch.edges, ran as u64, after_ingress, state);
        }
        if stopped && cx.fwd.marks & MARK_META_FRESH == 0 {
            // The general path goes on with this packet's metadata.
            fresh_meta(ex.meta, pkts[done].len);
            cx.fwd.marks |= MARK_META_FRESH;
        }
        (stride, done, too_long)
    }

    /// Runs the compiled parser on `data` into `phv`, or returns `None` when
    /// the parser was not compiled (the interpreter then parses).
    pub fn run_parser(&self, phv: &mut crate::phv::Phv, data: &[u8]) -> Option<ParseOutcome> {
        self.run_parser_with(phv, data, None)
    }

    /// Whether the compiled parser can also set an arriving packet's PHV up
    /// (see [`CompiledPipelines::run_parser_with`]).
    pub fn parser_sets_up(&self) -> bool {
        self.parser_setup
    }

    /// [`CompiledPipelines::run_parser`], first setting the PHV up for a
    /// packet arriving on `port` at `now` µs when `arrival` is given (only
    /// when [`CompiledPipelines::parser_sets_up`]): every field zeroed,
    /// metadata headers valid, `ingress_port`, `ingress_global_timestamp`,
    /// `packet_length` and `instance_type` written. Why: the engine's reset
    /// is several `memset` calls and four generic field writes per packet.
    pub fn run_parser_with(
        &self,
        phv: &mut crate::phv::Phv,
        data: &[u8],
        arrival: Option<(u32, u64)>,
    ) -> Option<ParseOutcome> {
        let f = self.parser?;
        assert!(arrival.is_none() || self.parser_setup, "this parser does not set PHVs up");
        Some(Self::call_parser(f, phv, data, arrival))
    }

    /// Runs a PSA program's compiled egress parser on `data` into `phv`, or
    /// returns `None` when it was not compiled. Like every PSA parser it
    /// sets nothing up and does not end parsing (the PSA packet path does).
    pub fn run_egress_parser(&self, phv: &mut crate::phv::Phv, data: &[u8]) -> Option<ParseOutcome> {
        Some(Self::call_parser(self.egress_parser?, phv, data, None))
    }

    fn call_parser(f: ParserFn, phv: &mut crate::phv::Phv, data: &[u8], arrival: Option<(u32, u64)>) -> ParseOutcome {
        let (port, now) = arrival.unwrap_or((0, 0));
        let mut ctx = ParseCtx {
            exec: std::ptr::null_mut(),
            wire: phv.wire_ptr(),
            slots: phv.slots.as_mut_ptr(),
            pkt: data.as_ptr(),
            len: data.len() as u64,
            cursor: 0,
            status: 0,
            code: 0,
            setup: if arrival.is_some() { SETUP_FULL } else { 0 },
            port: u64::from(port),
            now,
        };
        // SAFETY: `f` was generated for this plan's layout; it reads at most
        // `len` bytes from `pkt` (every copy is bounds-checked first) and
        // writes inside the PHV's vectors, whose sizes come from the same layout.
        unsafe { f(&mut ctx) };
        let c = ctx.cursor as usize;
        match ctx.status {
            0 => ParseOutcome::Done(c),
            1 => ParseOutcome::TooShort(c),
            _ => ParseOutcome::Verify(c, ctx.code),
        }
    }

    /// A [`Lookahead`], when the parser is compiled and the plan has
    /// prefetchable tables.
    pub fn lookahead(&self) -> Option<Lookahead> {
        let (keys, tables, reads) = self.keys?;
        Some(Lookahead {
            keys,
            reads,
            ctx: KeysCtx {
                parse: ParseCtx {
                    exec: std::ptr::null_mut(),
                    wire: std::ptr::null_mut(),
                    slots: std::ptr::null_mut(),
                    pkt: std::ptr::null(),
                    len: 0,
                    cursor: 0,
                    status: 0,
                    code: 0,
                    setup: 0,
                    port: 0,
                    now: 0,
                },
                pkts: std::ptr::null(),
                n: 0,
                keys: std::ptr::null_mut(),
                tables,
                spec: [SPEC_UNKNOWN; SPEC_TABLES],
            },
        })
    }

    /// Whether the parser runs as native code.
    pub fn parser_compiled(&self) -> bool {
        self.parser.is_some()
    }

    /// Whether a PSA program's egress parser runs as native code.
    pub fn egress_parser_compiled(&self) -> bool {
        self.egress_parser.is_some()
    }

    /// Whether the compiled parser also does the end of parsing: sets
    /// `parser_error` and verifies checksums into `checksum_error`.
    pub fn parser_ends(&self) -> bool {
        self.parser_ends
    }

    /// Generates native code for a plan's pipelines.
    pub fn compile(plan: &Plan) -> Result<CompiledPipelines, String> {
        let (mut module, helpers) = new_module()?;
        let mut listing = String::new();
        let mut stats = JitStats::default();
        let mut fctx = FunctionBuilderContext::new();
        let ids = compile_pipelines(plan, &mut module, &helpers, &mut fctx, &mut listing, &mut stats)?;
        // The forwarding function first: the parser's setup zeroes the slots it writes.
        let mut fwd_listing = String::new();
        // Each shape is found once: the standalone functions and the
        // batch and key functions are generated from the same ones.
        let (pshape, fshape) = (parser_shape(plan), forward_shape(plan));
        let forward = compile_forward(plan, &mut module, &helpers, &mut fctx, &mut fwd_listing, fshape.as_ref())?;
        let (forward_id, fwd_written) = forward.unzip();
        let parser_id = compile_parser(
            plan,
            &mut module,
            &helpers,
            &mut fctx,
            &mut listing,
            fwd_written.as_ref(),
            pshape.as_ref().map(|s| (s, "sluice_parser")),
        )?;
        // A PSA program's egress parser; its ingress parser is `parser_id`.
        let egress_parser_id = match (plan.psa.is_some(), plan.egress_init_state) {
            (true, Some(init)) => {
                let shape = parser_shape_from(plan, init);
                let shape = shape.as_ref().map(|s| (s, "sluice_egress_parser"));
                compile_parser(plan, &mut module, &helpers, &mut fctx, &mut listing, None, shape)?
            }
            _ => None,
        };
        listing.push_str(&fwd_listing);
        let batch_id = match (parser_id, &pshape, &fshape, &fwd_written) {
            (Some((_, true, true)), Some(ps), Some(fs), Some(w)) => {
                Some(compile_batch(plan, &mut module, &helpers, &mut fctx, &mut listing, ps, fs, w)?)
            }
            _ => None,
        };
        let (batch_id, batch_flow, batch_in_place) = match batch_id {
            Some((id, flow, in_place)) => (Some(id), flow, in_place),
            None => (None, None, false),
        };
        let keys_id = match &pshape {
            // A PSA program's packets are never parsed ahead (see `Switch::process_batch_at`).
            Some(_) if plan.psa.is_some() => None,
            Some(ps) => compile_keys(plan, &mut module, &helpers, &mut fctx, &mut listing, ps)?,
            None => None,
        };
        module.finalize_definitions().map_err(|e| e.to_string())?;
        if std::env::var_os("SLUICE_PERF_MAP").is_some() {
            write_perf_map(
                &module,
                &[
                    (ids[0], "sluice_ingress"),
                    (ids[1], "sluice_egress"),
                    (parser_id.map(|p| p.0), "sluice_parser"),
                    (egress_parser_id.map(|p| p.0), "sluice_egress_parser"),
                    (forward_id, "sluice_forward"),
                    (batch_id, "sluice_batch"),
                    (keys_id.as_ref().map(|k| k.0), "sluice_keys"),
                ],
            );
        }
        // SAFETY: the forwarding function was defined with the signature `fn(*mut JitCtx) -> i64`.
        let forward = forward_id
            .map(|id| unsafe { std::mem::transmute::<*const u8, ForwardFn>(module.get_finalized_function(id)) });
        // SAFETY: the parser was defined with the signature `fn(*mut ParseCtx)`.
        let parser = parser_id
            .map(|(id, _, _)| unsafe { std::mem::transmute::<*const u8, ParserFn>(module.get_finalized_function(id)) });
        // SAFETY: the batch function was defined with the signature `fn(*mut JitCtx) -> i64`.
        // SAFETY: as for the parser.
        let egress_parser = egress_parser_id
            .map(|(id, _, _)| unsafe { std::mem::transmute::<*const u8, ParserFn>(module.get_finalized_function(id)) });
        let batch =
            batch_id.map(|id| unsafe { std::mem::transmute::<*const u8, BatchFn>(module.get_finalized_function(id)) });
        // SAFETY: the key function was defined with the signature `fn(*mut KeysCtx)`.
        let keys = keys_id.map(|(id, tables, reads)| {
            (unsafe { std::mem::transmute::<*const u8, KeysFn>(module.get_finalized_function(id)) }, tables, reads)
        });
        let parser_ends = parser_id.is_some_and(|(_, ends, _)| ends);
        let parser_setup = parser_id.is_some_and(|(_, _, setup)| setup);
        let get = |id: Option<FuncId>| {
            // SAFETY: the function was defined with the pipelines' signature
            // (see `compile_pipelines`), i.e. `fn(*mut JitCtx)`.
            id.map(|id| unsafe { std::mem::transmute::<*const u8, PipelineFn>(module.get_finalized_function(id)) })
        };
        let (ingress, egress) = (get(ids[0]), get(ids[1]));
        Ok(CompiledPipelines {
            module: Some(module),
            ingress,
            egress,
            parser,
            egress_parser,
            parser_ends,
            parser_setup,
            forward,
            batch,
            batch_flow,
            batch_in_place,
            keys,
            forward_out: forward_hdr_max(plan),
            listing,
            stats,
        })
    }
}
