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
//!   parsing (`compile_parser`).
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

use std::collections::{BTreeSet, HashMap};
use std::ffi::c_void;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, AliasRegionData, Block, BlockArg, InstBuilder, MemFlagsData, Signature, UserFuncName, Value,
};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch as CaseSwitch};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};

use crate::control::Exec;
use crate::expr::{BinOp, Fast};
use crate::phv::{mask64, FieldSrc};
use crate::plan::{Dst, Node, Plan, Prim};
use crate::tables::{HotEntry, TableView};

/// Which engine runs a switch's control pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// Native code generated at load time (the default).
    #[default]
    Compiled,
    /// The plan interpreter (the reference; also used whenever tracing).
    Interpreted,
}

/// What the generated code and its helpers share for one pipeline run.
///
/// Field offsets are part of the generated code (the `OFF_*` constants,
/// taken from this layout): keep `#[repr(C)]`. The PHV's valid flags have
/// no pointer here: generated code finds them after the headers.
#[repr(C)]
pub struct JitCtx {
    exec: *mut c_void,
    wire: *mut u8,
    slots: *mut u128,
    /// Action data of the current table result, zero-padded.
    data: [u8; 64],
    /// Set by the helpers when the packet needs the general path after its
    /// pipeline (a clone, resubmit, recirculate or truncate was requested,
    /// or headers were added or removed): read by the forwarding function.
    special: u64,
    /// In (forwarding function): the switch time in µs, for the egress timestamp.
    now: u64,
    /// In (forwarding function): where the deparsed headers go (`FORWARD_HDR_MAX` bytes).
    out: *mut u8,
    /// Out (forwarding function): header bytes written to `out`.
    out_len: u64,
    /// Out (forwarding function): the egress port.
    port: u64,
    /// In (forwarding function): the packet's length (egress `packet_length`).
    len: u64,
    /// In: one [`TableView`] per table of the plan, current for this run.
    views: *const TableView,
    /// In: one [`CounterView`] per counter array of the plan.
    counters: *const CounterView,
    /// In: one [`RegisterView`] per register array of the plan.
    registers: *const RegisterView,
    /// Set when a helper ran engine code, which may write any PHV field:
    /// the next packet on this PHV then needs the full setup
    /// ([`SETUP_FULL`]), not only the slots generated code writes.
    dirty: u64,
    /// Zero when the packet metadata (`Exec::meta`) still hold an earlier
    /// packet's: the batch function only clears this flag, and the first
    /// helper that needs the metadata resets them (see [`exec_of`]). Why:
    /// most packets never run a helper, and the reset is a dozen stores.
    meta_fresh: u64,
    /// Batch function: per stashed checksum, the sum the end of parsing
    /// left for the update (see [`SumStash`]). In memory rather than a
    /// value: kept across the forwarding code, it and its inputs would be
    /// spilled.
    stash: [u64; STASH_MAX],
}

impl JitCtx {
    /// A context on the PHV of `ex`, with output `out` (null for the
    /// pipelines) and `views`; `exec`, `len` and the outputs are set by the
    /// caller per run.
    fn for_exec(ex: &mut Exec<'_>, out: *mut u8, views: &Views) -> JitCtx {
        // Generated code finds the valid flags at this distance from the headers.
        debug_assert_eq!(ex.phv.valid_offset(), ex.plan.layout.wire_bytes as usize + crate::phv::WIRE_PAD);
        JitCtx {
            exec: std::ptr::null_mut(),
            wire: ex.phv.wire_ptr(),
            slots: ex.phv.slots.as_mut_ptr(),
            data: [0; 64],
            special: 0,
            now: ex.now_us,
            out,
            out_len: 0,
            port: 0,
            len: 0,
            views: views.tables.as_ptr(),
            counters: views.counters.as_ptr(),
            registers: views.registers.as_ptr(),
            // A PHV of unknown history: the first setup on it is full.
            dirty: 1,
            meta_fresh: 1,
            stash: [0; STASH_MAX],
        }
    }

    /// How the forwarding function ended, from its status and this context.
    fn outcome(&self, status: i64) -> Forward {
        Self::outcome_of(status, self.port, self.out_len)
    }

    /// [`JitCtx::outcome`] from the status, port and header length.
    fn outcome_of(status: i64, port: u64, out_len: u64) -> Forward {
        match status {
            0 => Forward::Transmit { port: port as u32, hdr: out_len as usize },
            2 => Forward::Dropped,
            3 => Forward::AfterEgress { port: port as u32 },
            _ => Forward::AfterIngress,
        }
    }
}

/// The kinds of memory generated code touches, each a Cranelift alias
/// region (see [`mem`]). Why: an untagged store counts as writing all
/// memory, so every load after it is done again; tagged, Cranelift knows a
/// store to the header bytes leaves the valid flags and metadata slots
/// alone, forwards stored values to later loads and drops repeated loads
/// (the ingress port written by the setup and read by the pipeline, the
/// valid flag every key and checksum reads). The rule that keeps this
/// correct: generated code accesses each byte of memory under one kind
/// only. Helper calls may write anything (Cranelift treats a call as
/// touching every region).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mem {
    /// The PHV's header bytes (`Phv::wire`).
    Wire,
    /// One of the PHV's 16-byte slots (metadata and other fields): a region
    /// per slot, as generated code only ever touches slot `i` at its own
    /// address. Why apart: a store to one slot then leaves what Cranelift
    /// knows of every other (the ingress port the setup wrote is still
    /// known when the pipeline reads it, after the parser wrote its errors).
    Slot(u32),
    /// The PHV's valid flags.
    Valid,
    /// The scalar fields of the contexts that generated code writes, or
    /// helpers change: `JitCtx`'s `special`, `len`, `dirty`...,
    /// `ParseCtx`'s outputs.
    Ctx,
    /// What nothing writes while generated code runs: the contexts'
    /// pointers and inputs, the batch and key contexts, the packet
    /// references, the table, counter and register views.
    Inputs,
    /// Action data: `JitCtx::data` and the data in hot records.
    ActionData,
    /// Table memory: index slots and hot records (read only).
    Tables,
    /// Counter cells.
    Counters,
    /// Register cells.
    Registers,
    /// Packet bytes and static zeros (read only).
    Packet,
    /// What generated code hands back: output areas, packet results,
    /// prefetch keys.
    Out,
}

/// The alias region id of `m` (see [`Mem`]).
fn region_id(m: Mem) -> u32 {
    match m {
        Mem::Wire => 1,
        Mem::Valid => 2,
        Mem::Ctx => 3,
        Mem::Inputs => 4,
        Mem::ActionData => 5,
        Mem::Tables => 6,
        Mem::Counters => 7,
        Mem::Registers => 8,
        Mem::Packet => 9,
        Mem::Out => 10,
        Mem::Slot(i) => 16 + i,
    }
}

/// Memory flags for an access to `m`: cannot trap (generated code only
/// touches memory its caller owns), in `m`'s alias region.
fn mem(b: &mut FunctionBuilder, m: Mem) -> MemFlagsData {
    let data = AliasRegionData { user_id: region_id(m), description: std::borrow::Cow::Borrowed("sluice") };
    let region = b.func.dfg.alias_regions.insert(data);
    MemFlagsData::new().with_notrap().with_alias_region(Some(region))
}

const OFF_WIRE: i32 = std::mem::offset_of!(JitCtx, wire) as i32;
const OFF_SLOTS: i32 = std::mem::offset_of!(JitCtx, slots) as i32;
/// Not a field: [`Gen::ptr`] of it is the valid flags' address, a fixed
/// distance after the headers (see `Phv::wire_ptr`), computed from the
/// wire pointer rather than loaded.
const OFF_VALID: i32 = -1;
const OFF_DATA: i32 = std::mem::offset_of!(JitCtx, data) as i32;
const DATA_LEN: u32 = 64;
const OFF_SPECIAL: i32 = std::mem::offset_of!(JitCtx, special) as i32;
const OFF_NOW: i32 = std::mem::offset_of!(JitCtx, now) as i32;
const OFF_OUT: i32 = std::mem::offset_of!(JitCtx, out) as i32;
const OFF_OUT_LEN: i32 = std::mem::offset_of!(JitCtx, out_len) as i32;
const OFF_PORT: i32 = std::mem::offset_of!(JitCtx, port) as i32;
const OFF_LEN: i32 = std::mem::offset_of!(JitCtx, len) as i32;
const OFF_VIEWS: i32 = std::mem::offset_of!(JitCtx, views) as i32;
const OFF_COUNTERS: i32 = std::mem::offset_of!(JitCtx, counters) as i32;
const OFF_REGISTERS: i32 = std::mem::offset_of!(JitCtx, registers) as i32;
// The parser's code reaches the PHV through the same offsets in its context.
const _: () = assert!(std::mem::offset_of!(ParseCtx, wire) == OFF_WIRE as usize);
const _: () = assert!(std::mem::offset_of!(ParseCtx, slots) == OFF_SLOTS as usize);
/// Offset of a register cell's low word.
const REG_LO: i32 = std::mem::offset_of!(crate::shared::RegCell, lo) as i32;
/// Size of a [`TableView`] in the views array.
const VIEW_SIZE: i64 = 40;
const _: () = assert!(std::mem::size_of::<TableView>() == VIEW_SIZE as usize);

/// One counter array as generated code updates it: its cells and their number.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct CounterView {
    cells: *mut (u64, u64),
    len: u64,
}

/// Offsets of a cell's packet and byte counts (a tuple's layout is the compiler's choice).
const CELL_PACKETS: i32 = std::mem::offset_of!((u64, u64), 0) as i32;
const CELL_BYTES: i32 = std::mem::offset_of!((u64, u64), 1) as i32;
const CELL_SIZE: i64 = std::mem::size_of::<(u64, u64)>() as i64;

/// One register array as generated code reads and writes it: its cells
/// (see [`crate::shared::Registers::cells`]) and their number.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct RegisterView {
    cells: *const crate::shared::RegCell,
    len: u64,
}

/// What generated code reads the switch's tables and counters through,
/// rebuilt by [`Views::refresh`] before every packet or batch.
///
/// Invariant: valid until a table changes (control-plane writes happen
/// between batches) or the state is dropped; counter arrays never grow or
/// shrink after load, so their pointers stay put.
#[derive(Debug, Default)]
pub struct Views {
    pub tables: Vec<TableView>,
    /// Per table: the [`crate::tables::TableState::view_stamp`] its view was built at.
    stamps: Vec<u64>,
    /// Stamps issued, table vector and its length at the last refresh.
    seen: (u64, usize, usize),
    counters: Vec<CounterView>,
    registers: Vec<RegisterView>,
}

// SAFETY: views are plain data, used only by the switch that owns the state, on its thread.
unsafe impl Send for Views {}

impl Views {
    /// Points the views at `state`'s current tables and counters.
    /// Runs once per batch, so it rebuilds only the views of tables whose
    /// stamp changed and overwrites the rest in place.
    pub fn refresh(&mut self, state: &mut crate::state::State) {
        // No stamp issued since the last refresh, same table vector: no view
        // moved. (Another state's tables got their stamps when they were
        // made, while this vector was alive, so they live elsewhere.)
        let seen = (crate::tables::stamps_issued(), state.tables.as_ptr() as usize, state.tables.len());
        if seen != self.seen {
            self.tables.resize(state.tables.len(), TableView::ENGINE);
            self.stamps.resize(state.tables.len(), 0);
            for ((v, stamp), t) in self.tables.iter_mut().zip(&mut self.stamps).zip(&state.tables) {
                if *stamp != t.view_stamp() {
                    *v = t.view();
                    *stamp = t.view_stamp();
                }
            }
            self.seen = seen;
        }
        let empty = CounterView { cells: std::ptr::null_mut(), len: 0 };
        self.counters.resize(state.counters.len(), empty);
        for (v, c) in self.counters.iter_mut().zip(state.counters.iter_mut()) {
            *v = CounterView { cells: c.as_mut_ptr(), len: c.len() as u64 };
        }
        let arrays = state.registers.arrays();
        self.registers.resize(arrays, RegisterView { cells: std::ptr::null(), len: 0 });
        for (a, v) in self.registers.iter_mut().enumerate() {
            let c = state.registers.cells(a);
            *v = RegisterView { cells: c.as_ptr(), len: c.len() as u64 };
        }
    }
}

/// Bytes of `out` the forwarding function may write: every header the
/// deparser can emit, plus 8 for the widest store.
pub fn forward_hdr_max(plan: &Plan) -> usize {
    plan.layout.headers.iter().filter_map(|h| h.wire).map(|(_, n)| n as usize).sum::<usize>() + 8
}

/// The parser's and the forwarding function's contexts for a run of packets
/// (see [`CompiledPipelines::fast_contexts`]), and the batch function's.
/// `repr(C)`: the batch function finds the other two at fixed distances
/// from the forwarding function's context (its argument), so one register
/// reaches all three.
#[repr(C)]
pub struct FastContexts {
    parse: ParseCtx,
    fwd: JitCtx,
    batch: BatchCtx,
}

/// How a run of the forwarding function ended (see [`CompiledPipelines::forward`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forward {
    /// Transmit on `port`: `hdr` header bytes were written to `out`, the payload follows.
    Transmit { port: u32, hdr: usize },
    /// Dropped at the end of ingress or egress.
    Dropped,
    /// The packet needs the general path from the end of ingress.
    AfterIngress,
    /// The packet needs the general path from the end of egress (egress port `port`).
    AfterEgress { port: u32 },
}
/// Bytes of `JitCtx::data` that table results overwrite; the rest stays zero.
const HOT_RECORD: usize = crate::tables::HOT_DATA + 16;

type PipelineFn = unsafe extern "C" fn(*mut JitCtx);
type ParserFn = unsafe extern "C" fn(*mut ParseCtx);
type ForwardFn = unsafe extern "C" fn(*mut JitCtx) -> i64;

/// What the compiled parser reads and writes. Its first four fields have
/// [`JitCtx`]'s layout, so the parser is generated with the same field
/// readers and expression code as the pipelines. Field offsets are part of
/// the generated code: keep `#[repr(C)]` and the `P_*` constants in step.
#[repr(C)]
pub struct ParseCtx {
    exec: *mut c_void,
    wire: *mut u8,
    slots: *mut u128,
    pkt: *const u8,
    len: u64,
    /// Out: bytes consumed.
    cursor: u64,
    /// Out: 0 done, 1 the packet ended inside a header, 2 a `verify` failed.
    status: u64,
    /// Out: the error code of a failed `verify`.
    code: u64,
    /// In: set the PHV up first (zeroed, ingress standard metadata
    /// written) as `Switch::ingress_parse` does for an arriving packet:
    /// 0 no, [`SETUP_FULL`] every slot, [`SETUP_WRITTEN`] only the slots
    /// generated code writes (the others are still zero from the last full
    /// setup, on a PHV only generated code touched since, and the port and
    /// time still those of that setup).
    setup: u64,
    /// In (setup): the ingress port.
    port: u64,
    /// In (setup): the switch time in µs (ingress timestamp).
    now: u64,
}

const P_PKT: i32 = std::mem::offset_of!(ParseCtx, pkt) as i32;
const P_LEN: i32 = std::mem::offset_of!(ParseCtx, len) as i32;
const P_CURSOR: i32 = std::mem::offset_of!(ParseCtx, cursor) as i32;
const P_STATUS: i32 = std::mem::offset_of!(ParseCtx, status) as i32;
const P_CODE: i32 = std::mem::offset_of!(ParseCtx, code) as i32;
const P_SETUP: i32 = std::mem::offset_of!(ParseCtx, setup) as i32;
const P_PORT: i32 = std::mem::offset_of!(ParseCtx, port) as i32;
const P_NOW: i32 = std::mem::offset_of!(ParseCtx, now) as i32;
/// One arriving packet for the batch function: its bytes.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct PktRef {
    ptr: *const u8,
    len: u64,
}

impl PktRef {
    /// Why not the slice itself: a slice's layout is not fixed in Rust.
    pub fn of(data: &[u8]) -> PktRef {
        PktRef { ptr: data.as_ptr(), len: data.len() as u64 }
    }
}

impl Default for PktRef {
    fn default() -> PktRef {
        PktRef { ptr: std::ptr::null(), len: 0 }
    }
}

/// How the batch function left one packet: the forwarding function's
/// status, the egress port, the bytes of the packet to transmit (headers
/// and payload, in its output area) and the bytes the parser consumed.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct PktResult {
    status: u32,
    port: u32,
    len: u32,
    consumed: u32,
}

impl PktResult {
    /// How forwarding ended and the bytes the parser consumed, for the
    /// packet the batch function stopped at (for a transmitted packet use
    /// [`PktResult::transmit`]: `len` is then headers and payload).
    pub fn outcome(&self) -> (usize, Forward) {
        let c = JitCtx::outcome_of(i64::from(self.status), u64::from(self.port), u64::from(self.len));
        (self.consumed as usize, c)
    }

    /// The egress port and length of a packet to transmit, `None` when it was dropped.
    #[inline]
    pub fn transmit(&self) -> Option<(u32, usize)> {
        (self.status == 0).then_some((self.port, self.len as usize))
    }
}

/// What the batch function reads besides the two contexts it sits beside
/// in [`FastContexts`]: the packets and where each packet's bytes and
/// result go.
#[repr(C)]
struct BatchCtx {
    pkts: *const PktRef,
    n: u64,
    /// Packet `i`'s headers go to `out + 16 * i * stride16`.
    out: *mut u8,
    /// The areas' stride divided by 16 (a multiple of 64 bytes): generated
    /// code counts packets in sixteens (see [`compile_batch`]).
    stride16: u64,
    results: *mut PktResult,
}

/// Where the parser's and the batch's contexts are from the forwarding function's.
const PARSE_FROM_FWD: i64 =
    std::mem::offset_of!(FastContexts, parse) as i64 - std::mem::offset_of!(FastContexts, fwd) as i64;
const BATCH_FROM_FWD: i32 =
    std::mem::offset_of!(FastContexts, batch) as i32 - std::mem::offset_of!(FastContexts, fwd) as i32;
/// The batch's fields, from the forwarding function's context.
const B_PKTS: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, pkts) as i32;
const B_N: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, n) as i32;
const B_OUT: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, out) as i32;
const B_STRIDE16: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, stride16) as i32;
const B_RESULTS: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, results) as i32;
const _: () = assert!(std::mem::offset_of!(PktRef, len) == 8 && std::mem::size_of::<PktRef>() == 16);
const _: () = assert!(std::mem::offset_of!(PktResult, consumed) == 12 && std::mem::size_of::<PktResult>() == 16);
const OFF_DIRTY: i32 = std::mem::offset_of!(JitCtx, dirty) as i32;
const OFF_STASH: i32 = std::mem::offset_of!(JitCtx, stash) as i32;
/// Updated checksums whose stable part the batch function stashes (the
/// others are summed whole at the update).
const STASH_MAX: usize = 4;
const OFF_META_FRESH: i32 = std::mem::offset_of!(JitCtx, meta_fresh) as i32;

/// The batch function: its argument is `FastContexts::fwd` (see [`BatchCtx`]).
type BatchFn = unsafe extern "C" fn(*mut JitCtx) -> i64;

/// `ParseCtx::setup`: zero only the slots the parser and forwarding function write.
const SETUP_WRITTEN: u64 = 1;
/// `ParseCtx::setup`: zero every slot.
const SETUP_FULL: u64 = 2;
/// Most PHV bytes the compiled parser zeroes itself (bigger PHVs are reset by the engine).
const SETUP_MAX_BYTES: u32 = 2048;

/// The key function (see [`compile_keys`]) with its context: the compiled
/// parser run over a batch only to learn its headers, into a scratch PHV
/// (no setup, no end of parsing), then each prefetchable table's key. Why:
/// to prefetch a batch's lookups in big tables the switch parses each
/// packet ahead, and that parse must cost little next to the memory stalls
/// it hides.
pub struct Lookahead {
    keys: KeysFn,
    /// How each key is read straight from a packet, when every key is one
    /// field of a wire header (see [`Lookahead::key_reads`]).
    reads: Option<KeyReads>,
    ctx: KeysCtx,
}

/// Where a prefetch key lies in its header: the 8 big-endian bytes from
/// `field` bytes after the header's start, shifted right by `shift` and
/// masked (as the key function reads it).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyRead {
    field: usize,
    shift: u32,
    mask: u64,
}

/// One [`KeyRead`] per prefetchable table (the first `KeysCtx::tables`).
pub type KeyReads = [KeyRead; SPEC_TABLES];

impl Lookahead {
    /// Parses each packet of `batch` into `phv` (a PHV of this plan's
    /// layout) and writes its lookup key for each of the plan's
    /// prefetchable tables (`TablePlan::prefetchable`, in table order) to
    /// `keys`, packet by packet. Headers a packet lacks may keep an earlier
    /// packet's validity and bytes, which can only make a prefetch useless,
    /// never a result wrong.
    pub fn keys(&mut self, phv: &mut crate::phv::Phv, batch: &[&[u8]], keys: &mut Vec<u64>) {
        let mut refs = [PktRef::default(); crate::switch::BATCH];
        assert!(batch.len() <= refs.len(), "at most a batch");
        for (r, d) in refs.iter_mut().zip(batch) {
            *r = PktRef::of(d);
        }
        keys.clear();
        keys.resize(batch.len() * self.ctx.tables as usize, 0);
        self.run(phv, &refs[..batch.len()], keys);
    }

    /// Runs the key function over `pkts` into `phv`, writing their keys to
    /// `keys` (one per prefetchable table per packet) and, in
    /// `KeysCtx::spec`, where each key's header started.
    fn run(&mut self, phv: &mut crate::phv::Phv, pkts: &[PktRef], keys: &mut [u64]) {
        assert_eq!(keys.len(), pkts.len() * self.ctx.tables as usize, "one key per table per packet");
        let ctx = &mut self.ctx;
        ctx.parse.wire = phv.wire_ptr();
        ctx.parse.slots = phv.slots.as_mut_ptr();
        ctx.pkts = pkts.as_ptr();
        ctx.n = pkts.len() as u64;
        ctx.keys = keys.as_mut_ptr();
        // Each run learns its headers' places from its first packet.
        ctx.spec = [SPEC_UNKNOWN; SPEC_TABLES];
        // SAFETY: per packet the parser reads at most its `len` bytes (of
        // a live slice) and writes inside `phv`, sized by this plan's
        // layout; the function writes `n * tables` keys, the length of `keys`.
        unsafe { (self.keys)(ctx) };
    }

    /// Where each prefetch key of `batch`'s packets lies, learnt by
    /// parsing only its first packet (with the key function, into `phv`):
    /// one [`KeyRead`] per prefetchable table, in table order. `None` when
    /// the keys are not plain header fields or the first packet lacks a
    /// key's header: then use [`Lookahead::keys`]. Why: reading the keys
    /// of the other packets at the same places in Rust costs about a third
    /// of the generated key function's loop, its packet list and the pass
    /// over its output.
    pub fn key_reads(&mut self, phv: &mut crate::phv::Phv, batch: &[&[u8]]) -> Option<KeyReads> {
        let (Some(reads), Some(first)) = (self.reads, batch.first()) else { return None };
        // At most SPEC_TABLES tables, since `reads` exists.
        let tables = self.ctx.tables as usize;
        let mut one = [0u64; SPEC_TABLES];
        self.run(phv, &[PktRef::of(first)], &mut one[..tables]);
        let spec = self.ctx.spec;
        if spec[..tables].contains(&SPEC_UNKNOWN) {
            return None;
        }
        let mut at = [KeyRead::default(); SPEC_TABLES];
        for ((a, r), &s) in at.iter_mut().zip(&reads).zip(&spec).take(tables) {
            *a = KeyRead { field: s as usize + r.field, ..*r };
        }
        Some(at)
    }
}

impl KeyRead {
    /// The key in packet `d`, `None` when `d` is too short for the read.
    #[inline]
    pub fn read(&self, d: &[u8]) -> Option<u64> {
        let b = d.get(self.field..self.field + 8)?;
        Some((u64::from_be_bytes(b.try_into().expect("8 bytes")) >> self.shift) & self.mask)
    }
}

/// What the key function reads and writes: the lookahead parser's context
/// first (so the function's context pointer is the parser's), then the batch.
#[repr(C)]
struct KeysCtx {
    parse: ParseCtx,
    pkts: *const PktRef,
    n: u64,
    /// Out: `n * tables` keys.
    keys: *mut u64,
    /// Keys per packet (not read by generated code).
    tables: u64,
    /// Per prefetchable table, where its key's header started in the last
    /// packet parsed in full ([`SPEC_UNKNOWN`] until one was): the key
    /// function reads the next packets' keys at the same place.
    spec: [u64; SPEC_TABLES],
}

/// Most prefetchable tables whose keys the key function reads straight
/// from the packet (see [`compile_keys`]).
const SPEC_TABLES: usize = 4;
/// `KeysCtx::spec` before a packet showed the header: far beyond any
/// packet, so a bounds check against the length fails.
const SPEC_UNKNOWN: u64 = 1 << 40;
const K_SPEC: i32 = std::mem::offset_of!(KeysCtx, spec) as i32;

const K_PKTS: i32 = std::mem::offset_of!(KeysCtx, pkts) as i32;
const K_N: i32 = std::mem::offset_of!(KeysCtx, n) as i32;
const K_KEYS: i32 = std::mem::offset_of!(KeysCtx, keys) as i32;
const _: () = assert!(std::mem::offset_of!(KeysCtx, parse) == 0);

type KeysFn = unsafe extern "C" fn(*mut KeysCtx);

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
    /// Whether the compiled parser also sets `parser_error` and verifies
    /// checksums (`Switch::parse_end` is then skipped).
    parser_ends: bool,
    /// Whether the compiled parser can set an arriving packet's PHV up.
    parser_setup: bool,
    /// Ingress to deparser in one function, when the program allows it (see `compile_forward`).
    forward: Option<ForwardFn>,
    /// The parser and the forwarding function over a batch of packets (see `compile_batch`).
    batch: Option<BatchFn>,
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
        let fwd = JitCtx::for_exec(ex, std::ptr::null_mut(), views);
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
            },
        }
    }

    /// Bytes the forwarding function may write to its output area.
    pub fn forward_out(&self) -> usize {
        self.forward_out
    }

    /// Parses and forwards arriving packets `pkts` with the batch function
    /// (see `compile_batch`) on the PHV and state of `ex` (`cx` built with
    /// it). Packet `i` gets an area of `out` (grown as needed; the stride
    /// fits the longest packet) at `i * stride`, where a transmitted packet's headers and payload end up,
    /// and its result in `results[i]`. Returns the stride and how many
    /// packets were transmitted or dropped before the first that needs the
    /// general path (all of them when none does); that packet's PHV and
    /// metadata are then in `ex`. `longest` is the longest packet's length
    /// (the caller finds it while building `pkts`, saving a pass).
    ///
    /// # Safety
    /// No packet of `pkts` may be longer than `longest`: the areas are sized
    /// by it, and a longer payload would be copied past `out`.
    pub unsafe fn run_batch(
        &self,
        cx: &mut FastContexts,
        ex: &mut Exec<'_>,
        pkts: &[PktRef],
        longest: usize,
        out: &mut Vec<u8>,
        results: &mut [PktResult],
    ) -> (usize, usize) {
        let f = self.batch.expect("has_fast_path: the batch function exists");
        debug_assert!(std::ptr::eq(cx.parse.wire, ex.phv.wire_ptr()), "contexts of another PHV");
        assert!(results.len() >= pkts.len(), "one result per packet");
        debug_assert!(pkts.iter().all(|p| p.len as usize <= longest), "longest bounds every packet");
        let stride = (self.forward_out + longest).next_multiple_of(64);
        if out.len() < stride * pkts.len() {
            out.resize(stride * pkts.len(), 0);
        }
        cx.fwd.exec = ex as *mut Exec<'_> as *mut c_void;
        cx.batch = BatchCtx {
            pkts: pkts.as_ptr(),
            n: pkts.len() as u64,
            out: out.as_mut_ptr(),
            stride16: stride as u64 / 16,
            results: results.as_mut_ptr(),
        };
        // SAFETY: the parser reads at most each packet's `len` bytes of its
        // (live) slice and writes inside the PHV of `ex`, which the contexts
        // point at; at `out + i * stride` the forwarding function writes at
        // most `forward_out` header bytes and the payload copy at most `len`
        // more (the stride covers both); views are current for this batch,
        // and the helpers reach `ex`, alive for the call.
        let done = unsafe { f(&mut cx.fwd) } as usize;
        if done < pkts.len() && cx.fwd.meta_fresh == 0 {
            // The general path goes on with this packet's metadata.
            fresh_meta(ex.meta, pkts[done].len);
            cx.fwd.meta_fresh = 1;
        }
        (stride, done)
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
        Some(match ctx.status {
            0 => ParseOutcome::Done(c),
            1 => ParseOutcome::TooShort(c),
            _ => ParseOutcome::Verify(c, ctx.code),
        })
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

    /// Whether the compiled parser also does the end of parsing: sets
    /// `parser_error` and verifies checksums into `checksum_error`.
    pub fn parser_ends(&self) -> bool {
        self.parser_ends
    }

    /// Generates native code for a plan's pipelines.
    pub fn compile(plan: &Plan) -> Result<CompiledPipelines, String> {
        let mut flags = settings::builder();
        let set =
            |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("cranelift flag {k}: {e}"));
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "is_pic", "false")?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        let isa = cranelift_native::builder()
            .map_err(|e| format!("no native code generator for this host: {e}"))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("cranelift: {e}"))?;
        let mut jb = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
        jb.symbol("sluice_h_table", h_table as *const u8);
        jb.symbol("sluice_h_action", h_action as *const u8);
        jb.symbol("sluice_h_action_nodata", h_action_nodata as *const u8);
        jb.symbol("sluice_h_cond", h_cond as *const u8);
        jb.symbol("sluice_h_run_from", h_run_from as *const u8);
        jb.symbol("sluice_h_meter", h_meter as *const u8);
        jb.symbol("sluice_h_indirect", h_indirect as *const u8);
        jb.symbol("sluice_h_table_words", h_table_words as *const u8);
        jb.symbol("sluice_h_table_key", h_table_key as *const u8);
        let mut module = JITModule::new(jb);
        let ptr = module.target_config().pointer_type();
        let call_conv = module.isa().default_call_conv();
        let sig = |params: &[types::Type], ret: Option<types::Type>| {
            let mut s = Signature::new(call_conv);
            for p in params {
                s.params.push(AbiParam::new(*p));
            }
            if let Some(r) = ret {
                s.returns.push(AbiParam::new(r));
            }
            s
        };
        let helper_sigs = [
            ("sluice_h_table", sig(&[ptr, types::I32], Some(types::I64))),
            ("sluice_h_action", sig(&[ptr, types::I32], Some(types::I32))),
            ("sluice_h_action_nodata", sig(&[ptr, types::I32], Some(types::I32))),
            ("sluice_h_cond", sig(&[ptr, types::I32], Some(types::I32))),
            ("sluice_h_run_from", sig(&[ptr, types::I64], None)),
            ("sluice_h_meter", sig(&[ptr, types::I32, types::I64], Some(types::I64))),
            ("sluice_h_indirect", sig(&[ptr, types::I32, ptr], Some(types::I64))),
            (
                "sluice_h_table_words",
                sig(&[ptr, types::I32, types::I64, types::I64, types::I64, types::I64], Some(types::I64)),
            ),
            ("sluice_h_table_key", sig(&[ptr, types::I32, types::I64], Some(types::I64))),
        ];
        let mut helpers = Vec::new();
        for (name, s) in &helper_sigs {
            helpers.push(module.declare_function(name, Linkage::Import, s).map_err(|e| e.to_string())?);
        }
        let pipe_sig = sig(&[ptr], None);
        let mut listing = String::new();
        let mut stats = JitStats::default();
        let mut ids: [Option<FuncId>; 2] = [None, None];
        let mut fctx = FunctionBuilderContext::new();
        for (k, (name, init)) in [("ingress", plan.ingress.init), ("egress", plan.egress.init)].into_iter().enumerate()
        {
            let Some(init) = init else { continue };
            let id = module
                .declare_function(&format!("sluice_{name}"), Linkage::Local, &pipe_sig)
                .map_err(|e| e.to_string())?;
            let mut ctx = Context::new();
            ctx.func.signature = pipe_sig.clone();
            ctx.func.name = UserFuncName::user(0, k as u32);
            generate(plan, &mut module, &helpers, &mut fctx, &mut ctx, true, &mut stats, |g, _| g.function(init));
            listing.push_str(&format!("; {name} pipeline\n{}\n", ctx.func.display()));
            define(&mut module, id, &mut ctx, &format!("sluice_{name}"))?;
            ids[k] = Some(id);
        }
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
            pshape.as_ref(),
        )?;
        listing.push_str(&fwd_listing);
        let batch_id = match (parser_id, &pshape, &fshape, &fwd_written) {
            (Some((_, true, true)), Some(ps), Some(fs), Some(w)) => {
                Some(compile_batch(plan, &mut module, &helpers, &mut fctx, &mut listing, ps, fs, w)?)
            }
            _ => None,
        };
        let keys_id = match &pshape {
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
        let batch =
            batch_id.map(|id| unsafe { std::mem::transmute::<*const u8, BatchFn>(module.get_finalized_function(id)) });
        // SAFETY: the key function was defined with the signature `fn(*mut KeysCtx)`.
        let keys = keys_id.map(|(id, tables, reads)| {
            (unsafe { std::mem::transmute::<*const u8, KeysFn>(module.get_finalized_function(id)) }, tables, reads)
        });
        let parser_ends = parser_id.is_some_and(|(_, ends, _)| ends);
        let parser_setup = parser_id.is_some_and(|(_, _, setup)| setup);
        let get = |id: Option<FuncId>| {
            // SAFETY: the function was defined with `pipe_sig`, i.e. `fn(*mut JitCtx)`.
            id.map(|id| unsafe { std::mem::transmute::<*const u8, PipelineFn>(module.get_finalized_function(id)) })
        };
        let (ingress, egress) = (get(ids[0]), get(ids[1]));
        Ok(CompiledPipelines {
            module: Some(module),
            ingress,
            egress,
            parser,
            parser_ends,
            parser_setup,
            forward,
            batch,
            keys,
            forward_out: forward_hdr_max(plan),
            listing,
            stats,
        })
    }
}

/// `v & m`; for a mask of the low 8, 16 or 32 bits a zero extension of the
/// narrowed value. Why: x86 has no 64-bit AND with such an immediate, and
/// Cranelift then reads the mask from memory (a load per use); a zero
/// extension is a register move.
fn band_u(b: &mut FunctionBuilder, v: Value, m: i64) -> Value {
    let narrow = match m as u64 {
        0xff => Some(types::I8),
        0xffff => Some(types::I16),
        0xffff_ffff => Some(types::I32),
        _ => None,
    };
    match narrow {
        Some(ty) => {
            let n = b.ins().ireduce(ty, v);
            b.ins().uextend(types::I64, n)
        }
        None => b.ins().band_imm_u(v, m),
    }
}

/// At most how many low bits [`Gen::fast`]'s value of `f` has, when known
/// from its form alone. Why: a value known to fit its destination field
/// is stored without a mask.
fn fast_bits(f: &Fast) -> Option<u32> {
    match f {
        Fast::Const(c) => Some(64 - c.leading_zeros()),
        Fast::Param { len, .. } => Some(8 * len),
        Fast::Field(FieldSrc::Wire { byte, shift, mask }) => Some(wire_bits(*byte, *shift, *mask).1),
        Fast::AndConst { mask, .. } | Fast::AddMask { mask, .. } => Some(64 - mask.leading_zeros()),
        _ if is_truth_value(f) => Some(1),
        _ => None,
    }
}

/// Whether [`Gen::fast`] of `f` is always 0 or 1: valid flags (0/1 bytes,
/// see `Phv::valid`), comparisons, and `&&`/`||` of such.
fn is_truth_value(f: &Fast) -> bool {
    matches!(
        f,
        Fast::Valid(_)
            | Fast::NotValid(_)
            | Fast::Cmp { .. }
            | Fast::CmpFields { .. }
            | Fast::NonZero(_)
            | Fast::And(_)
            | Fast::Or(_)
    )
}

/// The `(offset, size)` pieces in which generated code copies `n` bytes:
/// 8-byte pieces, then at most one each of 4, 2 and 1 bytes.
fn copy_chunks(n: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    let mut at = 0;
    for size in [8, 4, 2, 1] {
        while n - at >= size {
            out.push((at, size));
            at += size;
        }
    }
    out
}

/// Sixteen zero bytes for [`zero_vector`].
static ZERO16: [u8; 16] = [0; 16];

/// A 16-byte zero vector, loaded where it is used. Why not a constant:
/// Cranelift hoists a constant vector out of the batch loop and keeps it in
/// a stack slot, which costs a store and a load per packet; a load from
/// static zeros costs one load (and loads are not hoisted).
fn zero_vector(g: &mut Gen<'_, '_, '_>) -> Value {
    let at = g.b.ins().iconst(types::I64, ZERO16.as_ptr() as i64);
    let mf = mem(g.b, Mem::Packet);
    g.b.ins().load(types::I64X2, mf, at, 0)
}

/// Where a compiled parser with a setup zeroes the headers it does not
/// extract: the setup zeroes before parsing only the headers some path may
/// or may not have extracted when it leaves the parser, and the ones no
/// state extracts; every way out of the parser zeroes the rest of the
/// headers its path surely did not extract. Why: a header the path
/// extracts is overwritten whole, so zeroing it first was a wasted store
/// per 16 bytes (the router's IPv4 path zeroes only the IPv6 header).
struct ZeroPlan {
    /// Headers in the wire area.
    wire: BTreeSet<u32>,
    /// Headers the setup zeroes.
    setup: BTreeSet<u32>,
    /// Per state: the headers some path into it extracted.
    maybe_in: HashMap<u32, BTreeSet<u32>>,
}

impl ZeroPlan {
    fn of(plan: &Plan, init: u32, order: &[u32]) -> ZeroPlan {
        use crate::plan::{ExtractTo, POp};
        let wire: BTreeSet<u32> = (0..plan.layout.headers.len() as u32)
            .filter(|h| {
                let info = &plan.layout.headers[*h as usize];
                info.wire.is_some() && !info.metadata
            })
            .collect();
        // Per state: the headers it extracts and the states it goes to.
        let steps: HashMap<u32, (BTreeSet<u32>, Vec<u32>)> = order
            .iter()
            .map(|&si| {
                let st = &plan.states[si as usize];
                let extracts = st
                    .ops
                    .iter()
                    .filter_map(|op| match op {
                        POp::Extract(ExtractTo::Header(h)) => Some(*h),
                        _ => None,
                    })
                    .collect();
                (si, (extracts, parser_next_states(plan, si)))
            })
            .collect();
        // Sure and maybe sets on entry to each state; the states form no
        // loop, so repeating the pass settles them.
        let mut sure_in: HashMap<u32, BTreeSet<u32>> = HashMap::from([(init, BTreeSet::new())]);
        let mut maybe_in: HashMap<u32, BTreeSet<u32>> = HashMap::from([(init, BTreeSet::new())]);
        loop {
            let mut changed = false;
            for &si in order {
                let (Some(sure), Some(maybe)) = (sure_in.get(&si).cloned(), maybe_in.get(&si).cloned()) else {
                    continue;
                };
                let (e, nexts) = &steps[&si];
                let sure_out: BTreeSet<u32> = sure.union(e).copied().collect();
                let maybe_out: BTreeSet<u32> = maybe.union(e).copied().collect();
                for &n in nexts {
                    let s = match sure_in.get(&n) {
                        Some(cur) => cur.intersection(&sure_out).copied().collect(),
                        None => sure_out.clone(),
                    };
                    let m: BTreeSet<u32> =
                        maybe_in.get(&n).map_or(maybe_out.clone(), |cur| cur.union(&maybe_out).copied().collect());
                    changed |= sure_in.get(&n) != Some(&s) || maybe_in.get(&n) != Some(&m);
                    sure_in.insert(n, s);
                    maybe_in.insert(n, m);
                }
            }
            if !changed {
                break;
            }
        }
        let extracted: BTreeSet<u32> = steps.values().flat_map(|(e, _)| e.iter().copied()).collect();
        let mut setup: BTreeSet<u32> = wire.difference(&extracted).copied().collect();
        for (si, maybe) in &maybe_in {
            setup.extend(maybe.difference(&sure_in[si]));
        }
        ZeroPlan { wire, setup, maybe_in }
    }

    /// The headers to zero on leaving state `si` after it extracted `done`.
    fn on_exit(&self, si: u32, done: &[u32]) -> BTreeSet<u32> {
        let maybe = &self.maybe_in[&si];
        self.wire
            .iter()
            .filter(|h| !maybe.contains(h) && !done.contains(h) && !self.setup.contains(h))
            .copied()
            .collect()
    }
}

/// Stores zeros over the wire bytes of headers `hs`, no byte outside them:
/// 16-byte stores over each run of adjacent headers (the last one moved
/// back to end with the run), narrower ones for a run under 16 bytes.
fn zero_headers(g: &mut Gen<'_, '_, '_>, hs: &BTreeSet<u32>) {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    let mut ranges: Vec<(u32, u32)> =
        hs.iter().filter_map(|h| g.plan.layout.headers[*h as usize].wire).map(|(o, n)| (o, o + n)).collect();
    ranges.sort();
    for (a, b) in ranges {
        match runs.last_mut() {
            Some(last) if last.1 >= a => last.1 = last.1.max(b),
            _ => runs.push((a, b)),
        }
    }
    if runs.is_empty() {
        return;
    }
    let wire = g.ptr(OFF_WIRE);
    for (a, b) in runs {
        let n = b - a;
        if n >= 16 {
            let zero16 = zero_vector(g);
            let mut at: Vec<u32> = (0..n / 16).map(|i| a + 16 * i).collect();
            if !n.is_multiple_of(16) {
                at.push(b - 16);
            }
            for o in at {
                let mf = mem(g.b, Mem::Wire);
                g.b.ins().store(mf, zero16, wire, o as i32);
            }
        } else {
            for (o, size) in copy_chunks(n) {
                let z = g.b.ins().iconst(chunk_type(size), 0);
                let mf = mem(g.b, Mem::Wire);
                g.b.ins().store(mf, z, wire, (a + o) as i32);
            }
        }
    }
}

/// The integer type of a copy piece of `size` bytes.
fn chunk_type(size: u32) -> types::Type {
    match size {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        _ => types::I64,
    }
}

/// `(first bit, width)` in the wire area of a field read as
/// `(big-endian 8 bytes at byte) >> shift & mask`.
fn wire_bits(byte: u32, shift: u8, mask: u64) -> (u32, u32) {
    let width = 64 - mask.leading_zeros();
    (8 * byte + 64 - u32::from(shift) - width, width)
}

/// A byte area cut into the pieces its copies use: per byte, the start and
/// size of its piece. See [`Gen::read_bits`] for why field accesses follow it.
#[derive(Default)]
struct Grid {
    chunk: Vec<(u32, u32)>,
}

impl Grid {
    /// The wire area: each wire-format header in `copy_chunks` pieces from
    /// its first byte (how the parser extracts it and the deparser emits it).
    fn wire(plan: &Plan) -> Grid {
        let n = plan.layout.wire_bytes;
        let mut chunk: Vec<(u32, u32)> = (0..n).map(|b| (b, 1)).collect();
        for h in &plan.layout.headers {
            if let Some((off, len)) = h.wire {
                for (at, size) in copy_chunks(len) {
                    for b in off + at..(off + at + size).min(n) {
                        chunk[b as usize] = (off + at, size);
                    }
                }
            }
        }
        Grid { chunk }
    }

    /// The action-data area: the hot record's pieces, then the rest's.
    fn data() -> Grid {
        let mut chunk = Vec::new();
        for (start, len) in [(0, HOT_RECORD as u32), (HOT_RECORD as u32, DATA_LEN - HOT_RECORD as u32)] {
            for (at, size) in copy_chunks(len) {
                chunk.extend((0..size).map(|_| (start + at, size)));
            }
        }
        Grid { chunk }
    }

    /// The piece holding byte `b` (a one-byte piece outside the area).
    fn chunk(&self, b: u32) -> (u32, u32) {
        self.chunk.get(b as usize).copied().unwrap_or((b, 1))
    }
}

/// Code sizes of the functions defined so far, by name (for [`write_perf_map`]).
static CODE_SIZES: std::sync::Mutex<Vec<(String, usize)>> = std::sync::Mutex::new(Vec::new());

/// Defines a generated function in the module and remembers its code size.
fn define(module: &mut JITModule, id: FuncId, ctx: &mut Context, name: &str) -> Result<(), String> {
    // Headers and valid flags may be carried into joins: the parser's
    // paths meet before the checksum verification reads them again.
    let joins = [region_id(Mem::Wire), region_id(Mem::Valid)];
    crate::loadfwd::forward_loads(&mut ctx.func, ZERO16.as_ptr() as i64, &joins);
    crate::loadfwd::fold_decided_selects(&mut ctx.func);
    module.define_function(id, ctx).map_err(|e| format!("cranelift: {e:?}"))?;
    let size = ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
    if let Ok(mut s) = CODE_SIZES.lock() {
        s.retain(|(n, _)| n != name);
        s.push((name.to_string(), size));
    }
    Ok(())
}

/// With `SLUICE_PERF_MAP` set: appends the generated functions to
/// `/tmp/perf-PID.map` (so `perf report` names them) and writes each one's
/// machine code to `/tmp/sluice-jit-PID-NAME.bin` (for `objdump -D -b binary
/// -m i386:x86-64`). Why: profiles of generated code are otherwise anonymous.
fn write_perf_map(module: &JITModule, funcs: &[(Option<FuncId>, &str)]) {
    use std::io::Write;
    let pid = std::process::id();
    let sizes = CODE_SIZES.lock().map(|s| s.clone()).unwrap_or_default();
    let Ok(mut map) = std::fs::OpenOptions::new().create(true).append(true).open(format!("/tmp/perf-{pid}.map")) else {
        return;
    };
    for (id, name) in funcs {
        let (Some(id), Some((_, size))) = (id, sizes.iter().find(|(n, _)| n == name)) else { continue };
        let p = module.get_finalized_function(*id);
        let _ = writeln!(map, "{:x} {:x} {name}", p as usize, size);
        // SAFETY: `p` points at `size` bytes of finalized, immutable code.
        let code = unsafe { std::slice::from_raw_parts(p, *size) };
        let _ = std::fs::write(format!("/tmp/sluice-jit-{pid}-{name}.bin"), code);
        eprintln!("sluice: {name} at {:x}, {size} bytes", p as usize);
    }
}

/// The key reader of a parser state's select, when the compiled parser can
/// evaluate it: `(field reader, bits)` per part, at most 64 bits in all.
fn parser_key(st: &crate::plan::PState) -> Option<Vec<(FieldSrc, u32)>> {
    let parts: Option<Vec<(FieldSrc, u32)>> = st
        .key
        .iter()
        .map(|(r, nb)| match r.fast {
            Fast::Field(src) => Some((src, nb * 8)),
            _ => None,
        })
        .collect();
    parts.filter(|p| p.iter().map(|x| x.1).sum::<u32>() <= 64)
}

/// Whether the compiled parser can run this operation: extraction of a
/// wire-format header outside unions, an assignment of a shortcut value to a
/// field of at most 64 bits, or a `verify` with a shortcut condition and a
/// constant error.
fn parser_op_ok(plan: &Plan, op: &crate::plan::POp) -> bool {
    use crate::plan::{ExtractTo, POp};
    let layout = &plan.layout;
    match op {
        POp::Extract(ExtractTo::Header(h)) => {
            let hi = &layout.headers[*h as usize];
            hi.wire.is_some() && hi.union.is_none() && hi.varbit_field.is_none()
        }
        POp::Set(Dst::Field(f), r) => {
            FieldSrc::of(&layout.fields[*f as usize]).is_some() && Gen::supported(&r.fast, false)
        }
        POp::Verify(cond, e) => Gen::supported(&cond.fast, false) && matches!(e.fast, Fast::Const(_)),
        _ => false,
    }
}

/// Declares a local function `fn(context pointer)` (returning an `i64`
/// status when `status`) and a code generation context for it; `user` tells
/// the listing's functions apart.
fn declare_context_function(
    module: &mut JITModule,
    name: &str,
    user: u32,
    status: bool,
) -> Result<(FuncId, Context), String> {
    let mut sig = Signature::new(module.isa().default_call_conv());
    sig.params.push(AbiParam::new(module.target_config().pointer_type()));
    if status {
        sig.returns.push(AbiParam::new(types::I64));
    }
    let id = module.declare_function(name, Linkage::Local, &sig).map_err(|e| e.to_string())?;
    let mut ctx = Context::new();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(user, 0);
    Ok((id, ctx))
}

/// Generates the body of a function declared by [`declare_context_function`]:
/// the builder, its entry block and a [`Gen`] with the context pointers
/// loaded (`with_views`: also the table and counter views), then `body`
/// (given the context pointer), then sealing and finalization. Returns the
/// PHV slots the function may store to ([`Gen::written`]).
#[allow(clippy::too_many_arguments)]
fn generate(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    ctx: &mut Context,
    with_views: bool,
    stats: &mut JitStats,
    body: impl FnOnce(&mut Gen<'_, '_, '_>, Value),
) -> BTreeSet<u32> {
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let pc = b.block_params(entry)[0];
    let mut g = Gen::new(plan, &mut b, module, helpers, pc, stats);
    g.load_bases(with_views);
    body(&mut g, pc);
    let written = std::mem::take(&mut g.written);
    b.seal_all_blocks();
    b.finalize(module.target_config());
    written
}

/// The hot-path writer of a standard metadata field and its width mask:
/// `Some(None)` when the program lacks the field, `None` when the field has
/// no hot-path writer (the code that needs it is then not generated).
fn std_writer(plan: &Plan, f: Option<u32>) -> Option<Option<(FieldSrc, u64)>> {
    match f {
        None => Some(None),
        Some(f) => {
            let fi = &plan.layout.fields[f as usize];
            FieldSrc::of(fi).map(|s| Some((s, mask64(fi.width))))
        }
    }
}

/// The byte-range form of a checksum whose condition generated code can
/// evaluate, if it has one.
fn compiled_checksum(plan: &Plan, c: &crate::plan::ChecksumPlan) -> Option<crate::switch::ByteChecksum> {
    crate::switch::ByteChecksum::of(plan, c).filter(|bc| bc.cond.as_ref().is_none_or(|f| Gen::supported(f, false)))
}

/// What [`compile_parser`] can generate code for: the reachable states in
/// depth-first order, and the end of parsing and the PHV setup when they
/// can run in generated code too.
struct ParserShape {
    init: u32,
    order: Vec<u32>,
    /// `parser_error` and `checksum_error` writers and the verified checksums.
    ends: Option<(StdWriter, StdWriter, Vec<crate::switch::ByteChecksum>)>,
    /// Writers of `ingress_port`, `ingress_global_timestamp`, `packet_length` and `instance_type`.
    setup: Option<[StdWriter; 4]>,
}

/// A standard metadata field's hot-path writer and width mask (`None`: the
/// program lacks the field), as [`std_writer`] finds it.
type StdWriter = Option<(FieldSrc, u64)>;

/// The states compiled parser code goes to from state `si`: its default
/// transition's without a select key, else its integer-form cases'.
fn parser_next_states(plan: &Plan, si: u32) -> Vec<u32> {
    let st = &plan.states[si as usize];
    if st.key.is_empty() {
        st.transitions.iter().find(|t| t.default).and_then(|t| t.next).into_iter().collect()
    } else {
        st.fast_transitions.iter().flatten().filter_map(|(_, _, n)| *n).collect()
    }
}

/// The [`ParserShape`] of `plan`'s parser, `None` when it cannot be compiled.
fn parser_shape(plan: &Plan) -> Option<ParserShape> {
    let init = plan.init_state?;
    // Reachable states in depth-first order, refusing loops and uncompilable states.
    let mut order: Vec<u32> = vec![init];
    let mut stack: Vec<(u32, usize)> = vec![(init, 0)];
    let mut on_path: Vec<u32> = vec![init];
    while let Some((si, k)) = stack.pop() {
        let st = &plan.states[si as usize];
        let key_ok = st.key.is_empty() || (st.fast_transitions.is_some() && parser_key(st).is_some());
        if !key_ok || !st.ops.iter().all(|op| parser_op_ok(plan, op)) {
            return None;
        }
        let nexts = parser_next_states(plan, si);
        if k < nexts.len() {
            stack.push((si, k + 1));
            let n = nexts[k];
            if on_path.contains(&n) {
                return None;
            }
            if !order.contains(&n) {
                order.push(n);
                on_path.push(n);
                stack.push((n, 0));
            }
        } else {
            on_path.retain(|x| *x != si);
        }
    }
    // The end of parsing runs here too when every verified checksum has the
    // byte-range form and the error fields have hot-path writers.
    let ends = (|| {
        let perr = std_writer(plan, plan.std.parser_error)?;
        let cerr = std_writer(plan, plan.std.checksum_error)?;
        let sums: Option<Vec<_>> =
            plan.checksums.iter().filter(|c| c.verify).map(|c| compiled_checksum(plan, c)).collect();
        Some((perr, cerr, sums?))
    })();
    // PHV setup runs here too when the PHV is small and only has the
    // vectors the context points to (no wide fields, varbits or stacks) and
    // the ingress standard metadata have hot-path writers.
    let layout = &plan.layout;
    let setup = (|| {
        let plain = layout.wide_bytes == 0
            && layout.stacks.is_empty()
            && layout.union_stacks.is_empty()
            && layout.headers.iter().all(|h| h.varbit_field.is_none());
        let bytes = 16 * layout.n_slots + layout.wire_bytes + crate::phv::WIRE_PAD as u32;
        if !plain || bytes > SETUP_MAX_BYTES {
            return None;
        }
        let std = &plan.std;
        Some([
            std_writer(plan, std.ingress_port)?,
            std_writer(plan, std.ingress_global_timestamp)?,
            std_writer(plan, std.packet_length)?,
            std_writer(plan, std.instance_type)?,
        ])
    })();
    Some(ParserShape { init, order, ends, setup })
}

/// A packet's parser inputs as values of the generating function, for an
/// emitter inside a loop over packets (see [`emit_parser`]): they need not
/// go through the parser context's memory and be loaded back.
#[derive(Clone, Copy)]
struct ParseInputs {
    /// `ParseCtx::setup`.
    setup: Value,
    /// Whether `setup` is known to be non-zero.
    always: bool,
    pkt: Value,
    len: Value,
}

/// Generates the parser of `shape` at the current block, with `pc` the
/// [`ParseCtx`]: returns from the function, or jumps to `exit` when given
/// (the batch function goes on with the packet). `fwd_written`: the slots
/// the forwarding function writes (see [`SETUP_WRITTEN`]). `inputs`: the
/// setup flag, packet and length as values (else loaded from `pc`).
fn emit_parser(
    g: &mut Gen<'_, '_, '_>,
    pc: Value,
    shape: &ParserShape,
    fwd_written: Option<&BTreeSet<u32>>,
    exit: Option<Block>,
    inputs: Option<ParseInputs>,
) {
    use crate::plan::{ExtractTo, POp};
    let plan = g.plan;
    let layout = &plan.layout;
    let (init, order, ends, setup) = (shape.init, &shape.order, &shape.ends, shape.setup);
    // An exit block with a parameter takes the cursor (the batch function
    // needs nothing else of the parser's outputs): no context stores.
    let to_block = exit.is_some_and(|e| g.b.block_params(e).len() == 1);
    let leave = |g: &mut Gen<'_, '_, '_>, cursor: Value| match exit {
        Some(e) => {
            let args: &[BlockArg] = if to_block { &[cursor.into()] } else { &[] };
            g.b.ins().jump(e, args);
        }
        None => {
            g.b.ins().return_(&[]);
        }
    };
    // The setup's blocks; the per-packet part is filled last, when every
    // slot the parser writes is known.
    let mut setup_blocks = None;
    if setup.is_some() {
        let set_up = g.b.create_block();
        let full = g.b.create_block();
        let written = g.b.create_block();
        let parse = g.b.create_block();
        let flag = match inputs {
            Some(i) => i.setup,
            None => {
                let mf = mem(g.b, Mem::Inputs);
                g.b.ins().load(types::I64, mf, pc, P_SETUP)
            }
        };
        // The batch function always sets up (its flag is never 0): a jump,
        // so that the setup dominates the parser and Cranelift knows what
        // it stored there (the ingress port, the zeroed metadata).
        if inputs.is_some_and(|i| i.always) {
            g.b.ins().jump(set_up, &[]);
        } else {
            g.b.ins().brif(flag, set_up, &[], parse, &[]);
        }
        g.b.switch_to_block(set_up);
        let is_full = g.b.ins().icmp_imm_u(IntCC::Equal, flag, SETUP_FULL as i64);
        g.b.ins().brif(is_full, full, &[], written, &[]);
        setup_blocks = Some((full, written, parse));
        g.b.switch_to_block(parse);
    }
    let blocks: HashMap<u32, Block> = order.iter().map(|si| (*si, g.b.create_block())).collect();
    // With a setup, the ways out of the parser zero what their path did
    // not extract (see `ZeroPlan`): edges that need it go through a block
    // of their own, filled after the states.
    let zeros = setup.is_some().then(|| ZeroPlan::of(plan, init, order));
    let mut zero_edges: Vec<(Block, BTreeSet<u32>, Block, Vec<BlockArg>)> = Vec::new();
    let mut edge = |g: &mut Gen<'_, '_, '_>, si: u32, got: &[u32], to: Block, args: Vec<BlockArg>| {
        let hs = zeros.as_ref().map(|z| z.on_exit(si, got)).unwrap_or_default();
        if hs.is_empty() {
            return (to, args);
        }
        let blk = g.b.create_block();
        zero_edges.push((blk, hs, to, args));
        (blk, Vec::new())
    };
    let done = g.b.create_block();
    let short = g.b.create_block();
    let failed = g.b.create_block();
    for blk in blocks.values().chain([&done, &short, &failed]) {
        g.b.append_block_param(*blk, types::I64); // the cursor
    }
    g.b.append_block_param(failed, types::I64); // the error code
    let (pkt, len) = match inputs {
        Some(i) => (i.pkt, i.len),
        None => {
            let mf = mem(g.b, Mem::Inputs);
            (g.b.ins().load(types::I64, mf, pc, P_PKT), g.b.ins().load(types::I64, mf, pc, P_LEN))
        }
    };
    let zero = g.b.ins().iconst(types::I64, 0);
    g.b.ins().jump(blocks[&init], &[zero.into()]);
    for si in order {
        let st = &plan.states[*si as usize];
        let blk = blocks[si];
        g.b.switch_to_block(blk);
        let mut cursor = g.b.block_params(blk)[0];
        let mut got: Vec<u32> = Vec::new();
        for op in &st.ops {
            match op {
                POp::Extract(ExtractTo::Header(h)) => {
                    let (off, n) = plan.layout.headers[*h as usize].wire.expect("checked");
                    // Bounds check: cursor + n <= len, else PacketTooShort before this header.
                    let end = g.b.ins().iadd_imm_u(cursor, i64::from(n));
                    let fits = g.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, len);
                    let copy = g.b.create_block();
                    let (to, args) = edge(g, *si, &got, short, vec![cursor.into()]);
                    g.b.ins().brif(fits, copy, &[], to, &args);
                    got.push(*h);
                    g.b.switch_to_block(copy);
                    for at in g.track.iter().filter(|t| t.0 == *h).map(|t| t.1).collect::<Vec<_>>() {
                        let mf = mem(g.b, Mem::Ctx);
                        g.b.ins().store(mf, cursor, pc, at);
                    }
                    let src = g.b.ins().iadd(pkt, cursor);
                    let wire = g.ptr(OFF_WIRE);
                    g.copy_bytes((Mem::Packet, src, 0), (Mem::Wire, wire, off as i32), n);
                    let valid = g.ptr(OFF_VALID);
                    let one = g.b.ins().iconst(types::I8, 1);
                    let mf = mem(g.b, Mem::Valid);
                    g.b.ins().store(mf, one, valid, *h as i32);
                    cursor = end;
                }
                POp::Set(Dst::Field(f), r) => {
                    let fi = &plan.layout.fields[*f as usize];
                    let dst = FieldSrc::of(fi).expect("checked");
                    let v = g.fast(&r.fast);
                    g.write(dst, v, mask64(fi.width));
                }
                POp::Verify(cond, e) => {
                    let Fast::Const(code) = e.fast else { unreachable!("checked") };
                    let ok = g.fast(&cond.fast);
                    let cont = g.b.create_block();
                    let code = g.b.ins().iconst(types::I64, code as i64);
                    let (to, args) = edge(g, *si, &got, failed, vec![cursor.into(), code.into()]);
                    g.b.ins().brif(ok, cont, &[], to, &args);
                    g.b.switch_to_block(cont);
                }
                _ => unreachable!("checked by parser_op_ok"),
            }
        }
        if st.key.is_empty() {
            match st.transitions.iter().find(|t| t.default).and_then(|t| t.next) {
                Some(n) => g.b.ins().jump(blocks[&n], &[cursor.into()]),
                None => {
                    let (to, args) = edge(g, *si, &got, done, vec![cursor.into()]);
                    g.b.ins().jump(to, &args)
                }
            };
            continue;
        }
        let mut key = g.b.ins().iconst(types::I64, 0);
        for (src, bits) in parser_key(st).expect("checked") {
            let v = g.read(src);
            let v = if bits >= 64 { v } else { band_u(g.b, v, mask64(bits) as i64) };
            key = if bits >= 64 {
                v
            } else {
                let sh = g.b.ins().ishl_imm_u(key, i64::from(bits));
                g.b.ins().bor(sh, v)
            };
        }
        for (v, m, next) in st.fast_transitions.iter().flatten() {
            let (target, args) = match next {
                Some(n) => (blocks[n], vec![cursor.into()]),
                None => edge(g, *si, &got, done, vec![cursor.into()]),
            };
            let masked = band_u(g.b, key, *m as u64 as i64);
            let hit = g.b.ins().icmp_imm_u(IntCC::Equal, masked, *v as u64 as i64);
            let miss = g.b.create_block();
            g.b.ins().brif(hit, target, &args, miss, &[]);
            g.b.switch_to_block(miss);
        }
        let (to, args) = edge(g, *si, &got, done, vec![cursor.into()]);
        g.b.ins().jump(to, &args);
    }
    for (blk, hs, to, args) in zero_edges {
        g.b.switch_to_block(blk);
        zero_headers(g, &hs);
        g.b.ins().jump(to, &args);
    }
    let end = g.b.create_block();
    g.b.append_block_param(end, types::I64); // the parser error
    g.b.append_block_param(end, types::I64); // the cursor
    let too_short = plan.errors.get("PacketTooShort").copied().unwrap_or(0);
    for (blk, status) in [(done, 0i64), (short, 1), (failed, 2)] {
        g.b.switch_to_block(blk);
        let c = g.b.block_params(blk)[0];
        if !to_block {
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().store(mf, c, pc, P_CURSOR);
            let st = g.b.ins().iconst(types::I64, status);
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().store(mf, st, pc, P_STATUS);
        }
        let error = match status {
            0 => g.b.ins().iconst(types::I64, plan.no_error as i64),
            1 => g.b.ins().iconst(types::I64, too_short as i64),
            _ => {
                let code = g.b.block_params(blk)[1];
                if !to_block {
                    let mf = mem(g.b, Mem::Ctx);
                    g.b.ins().store(mf, code, pc, P_CODE);
                }
                code
            }
        };
        if let Some((perr, _, _)) = &ends {
            // `parser_error` is written here, where it is mostly a
            // constant (masked now rather than per packet).
            if let Some((s, m)) = perr {
                let v = match status {
                    0 | 1 => {
                        let e = if status == 0 { plan.no_error } else { too_short };
                        g.b.ins().iconst(types::I64, (e & *m) as i64)
                    }
                    _ => band_u(g.b, error, *m as i64),
                };
                g.write(*s, v, u64::MAX);
            }
            g.b.ins().jump(end, &[error.into(), c.into()]);
        } else {
            leave(g, c);
        }
    }
    // The end of parsing (`Switch::parse_end`): `parser_error`, then
    // checksum verification into `checksum_error`.
    g.b.switch_to_block(end);
    let cursor = g.b.block_params(end)[1];
    if let Some((_, cerr, sums)) = &ends {
        // The stable part of each updated checksum (batch function).
        let mut partial = Vec::new();
        for st in g.stash.clone().into_iter().flatten() {
            let raw = g.csum16_raw(&st.stable);
            let v = if st.decided {
                // `applies` is 0 or 1: all ones (SUM_SKIPPED) or nothing
                // over the sum, without a constant the loop would keep.
                let applies = g.checksum_applies(&st.bc);
                let skip = g.b.ins().iadd_imm_s(applies, -1);
                g.b.ins().bor(raw, skip)
            } else {
                raw
            };
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().store(mf, v, g.ctx, st.at);
            partial.push((st, raw));
        }
        let mut bad = g.b.ins().iconst(types::I64, 0);
        for bc in sums {
            let cond = g.checksum_applies(bc);
            // A verification of the same words as an update adds to its stable part.
            let shared = partial.iter().find(|(st, _)| st.bc.same_words(bc));
            let sum = match shared {
                Some((st, raw)) => {
                    let rest = g.csum16_raw(&st.changing);
                    let all = g.b.ins().iadd(*raw, rest);
                    g.csum16_fold(all)
                }
                None => g.csum16_swapped(bc),
            };
            let stored = match g.le16_byte(bc.target) {
                Some(b) => {
                    let wire = g.ptr(OFF_WIRE);
                    let mf = mem(g.b, Mem::Wire);
                    g.b.ins().uload16(types::I64, mf, wire, b as i32)
                }
                None => {
                    let v = g.read(bc.target);
                    g.swap16(v)
                }
            };
            let differs = g.b.ins().icmp(IntCC::NotEqual, sum, stored);
            let differs = g.bool_to_i64(differs);
            let counted = g.b.ins().band(cond, differs);
            bad = g.b.ins().bor(bad, counted);
        }
        if let Some((s, m)) = cerr {
            // `bad` is 0 or 1: no mask unless the field has no bit at all.
            g.write(*s, bad, if *m & 1 == 1 { u64::MAX } else { *m });
        }
    }
    leave(g, cursor);
    if let (Some([port_f, now_f, len_f, itype_f]), Some((full, written, parse))) = (setup, setup_blocks) {
        // Every slot the parser, the setup itself or the forwarding
        // function may write (all of them without a forwarding function).
        let mut dirty = g.written.clone();
        match fwd_written {
            Some(w) => dirty.extend(w),
            None => dirty.extend(0..layout.n_slots),
        }
        // The setup writes these itself (the high half of a slot field
        // is zero whoever wrote it, see `Gen::write`).
        let mut set: BTreeSet<u32> = [port_f, now_f, len_f, itype_f]
            .iter()
            .flatten()
            .filter_map(|(s, _)| match s {
                FieldSrc::Slot(i) => Some(*i),
                FieldSrc::Wire { .. } => None,
            })
            .collect();
        // The end of parsing writes the two error fields on every path:
        // when no parser state reads them first, they need no zeroing.
        if let Some((perr, cerr, _)) = ends {
            if let Some(read) = parser_reads(plan, order) {
                for (s, _) in [perr, cerr].into_iter().flatten() {
                    if let FieldSrc::Slot(i) = s {
                        if !read.contains(i) {
                            set.insert(*i);
                        }
                    }
                }
            }
        }
        // Port, time and instance type hold for a whole batch function
        // call, whose first setup is full (`JitCtx::dirty` starts set):
        // when no generated code writes their slots, the full setup alone
        // writes them, and later packets find them still in place.
        // Per field: the context offset of its value (`None`: zero), and
        // whether it is stable (written by the full setup only).
        let stable = |f: &Option<(FieldSrc, u64)>| matches!(f, Some((FieldSrc::Slot(i), _)) if !dirty.contains(i));
        let inputs_per_call =
            [(port_f, Some(P_PORT)), (now_f, Some(P_NOW)), (itype_f, None)].map(|(f, at)| (f, at, stable(&f)));
        let write_inputs = |g: &mut Gen<'_, '_, '_>, stable: bool| {
            for &(f, at, st) in &inputs_per_call {
                if let (Some((s, m)), true) = (f, st == stable) {
                    let v = match at {
                        Some(at) => {
                            let mf = mem(g.b, Mem::Inputs);
                            g.b.ins().load(types::I64, mf, pc, at)
                        }
                        None => g.b.ins().iconst(types::I64, 0),
                    };
                    g.write(s, v, m);
                }
            }
        };
        dirty.extend(&set);
        // 16-byte stores: one per slot, then the wire area.
        g.b.switch_to_block(full);
        let zero16 = zero_vector(g);
        let slots = g.ptr(OFF_SLOTS);
        for i in 0..layout.n_slots {
            let mf = mem(g.b, Mem::Slot(i));
            g.b.ins().store(mf, zero16, slots, 16 * i as i32);
        }
        // The wire padding too, after engine code ran (it never writes
        // there either; this keeps a mistake from lasting).
        let wire = g.ptr(OFF_WIRE);
        let mf = mem(g.b, Mem::Wire);
        g.b.ins().store(mf, zero16, wire, layout.wire_bytes as i32);
        write_inputs(g, true);
        g.b.ins().jump(written, &[]);
        g.b.switch_to_block(written);
        let zero = g.b.ins().iconst(types::I64, 0);
        // Only the low halves: generated code writes no more, and since the
        // last full setup (which zeroed whole slots) only generated code ran.
        // Why: an 8-byte zero is what a later 8-byte load of the field gets
        // from Cranelift without loading it.
        for i in dirty.difference(&set) {
            let mf = mem(g.b, Mem::Slot(*i));
            g.b.ins().store(mf, zero, slots, 16 * *i as i32);
        }
        // The headers the parser's exits do not zero (see `ZeroPlan`).
        // The padding after them is never written (see `phv::WIRE_PAD`):
        // still zero.
        if let Some(z) = &zeros {
            zero_headers(g, &z.setup);
        }
        // The valid flags: metadata valid, headers not, as 8-byte
        // constants (the PHV rounds the flags up to whole words).
        let valid = g.ptr(OFF_VALID);
        for (w, word) in layout.headers.chunks(8).enumerate() {
            let flags = word.iter().enumerate().fold(0u64, |v, (i, h)| v | (u64::from(h.metadata) << (8 * i)));
            let v = g.b.ins().iconst(types::I64, flags as i64);
            let mf = mem(g.b, Mem::Valid);
            g.b.ins().store(mf, v, valid, 8 * w as i32);
        }
        write_inputs(g, false);
        let len = match inputs {
            Some(i) => i.len,
            None => {
                let mf = mem(g.b, Mem::Inputs);
                g.b.ins().load(types::I64, mf, pc, P_LEN)
            }
        };
        if let Some((s, m)) = len_f {
            g.write(s, len, m);
        }
        g.b.ins().jump(parse, &[]);
    }
}

/// Compiles the parser when every state reachable from the start is made
/// of operations [`parser_op_ok`] accepts and selects on at most 64 bits of
/// fields, and the states form no loop (the interpreter bounds loops; this
/// code does not need to). Returns `None` (interpreted parser) otherwise.
///
/// Each state becomes a block: per header a bounds check, then 8/4/2/1-byte
/// copies at constant PHV offsets and its valid flag; assignments and
/// `verify` with the pipelines' expression code; the select as a chain of
/// masked compares on the key read once, in the plan's order.
fn compile_parser(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    fwd_written: Option<&BTreeSet<u32>>,
    shape: Option<&ParserShape>,
) -> Result<Option<(FuncId, bool, bool)>, String> {
    let Some(shape) = shape else { return Ok(None) };
    let (id, mut ctx) = declare_context_function(module, "sluice_parser", 1, false)?;
    generate(plan, module, helpers, fctx, &mut ctx, false, &mut JitStats::default(), |g, pc| {
        emit_parser(g, pc, shape, fwd_written, None, None)
    });
    listing.push_str(&format!("; parser\n{}\n", ctx.func.display()));
    define(module, id, &mut ctx, "sluice_parser")?;
    Ok(Some((id, shape.ends.is_some(), shape.setup.is_some())))
}

/// Generates a copy of `n` bytes (known at run time) from `src` to `dst`
/// that reads and writes only inside both ranges, then jumps to `done`:
/// for 16 to 32 bytes two 16-byte pieces, one at each end (overlapping);
/// above, 32-byte steps with the last step ending at `n`; for fewer than 16
/// bytes two overlapping 8-, 4-, 2- or 1-byte pieces. Why not `memcpy`:
/// packet payloads are short, and a call costs more than the copy. Why no
/// loop up to 32 bytes: a 64-byte frame's payload behind Ethernet and IPv4
/// is 26 bytes, and the loop's compares and jumps cost more than its moves
/// (router, 64 B: see `sluice bench --example router`).
fn copy_var(b: &mut FunctionBuilder, src: Value, dst: Value, n: Value, done: Block) {
    let from = mem(b, Mem::Packet);
    let to = mem(b, Mem::Out);
    // Two 16-byte pieces at `at` and `at + second` (relative to both ends' starts).
    let pair = |b: &mut FunctionBuilder, at: Value, second: Value| {
        let s = b.ins().iadd(src, at);
        let d = b.ins().iadd(dst, at);
        let s2 = b.ins().iadd(s, second);
        let d2 = b.ins().iadd(d, second);
        let v = b.ins().load(types::I8X16, from, s, 0);
        let w = b.ins().load(types::I8X16, from, s2, 0);
        b.ins().store(to, v, d, 0);
        b.ins().store(to, w, d2, 0);
    };
    let big = b.create_block();
    let small = b.create_block();
    let is_big = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, n, 16);
    b.ins().brif(is_big, big, &[], small, &[]);
    b.switch_to_block(big);
    let short = b.create_block();
    let long = b.create_block();
    let is_long = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, n, 32);
    b.ins().brif(is_long, long, &[], short, &[]);
    // 16 <= n <= 32: the first 16 bytes and the last 16.
    b.switch_to_block(short);
    let zero = b.ins().iconst(types::I64, 0);
    let last16 = b.ins().iadd_imm_s(n, -16);
    pair(b, zero, last16);
    b.ins().jump(done, &[]);
    // n > 32: 32-byte steps at 0, 32, ... below n - 32, then the last 32 bytes.
    b.switch_to_block(long);
    let lp = b.create_block();
    b.append_block_param(lp, types::I64);
    let tail = b.create_block();
    let zero = b.ins().iconst(types::I64, 0);
    let sixteen = b.ins().iconst(types::I64, 16);
    let last = b.ins().iadd_imm_s(n, -32);
    b.ins().jump(lp, &[zero.into()]);
    b.switch_to_block(lp);
    let k = b.block_params(lp)[0];
    let more = b.ins().icmp(IntCC::UnsignedLessThan, k, last);
    let body = b.create_block();
    b.ins().brif(more, body, &[], tail, &[]);
    b.switch_to_block(body);
    pair(b, k, sixteen);
    let k32 = b.ins().iadd_imm_u(k, 32);
    b.ins().jump(lp, &[k32.into()]);
    b.switch_to_block(tail);
    pair(b, last, sixteen);
    b.ins().jump(done, &[]);
    // n < 16: two pieces of the largest size that fits, one at each end.
    b.switch_to_block(small);
    for (size, ty) in [(8i64, types::I64), (4, types::I32), (2, types::I16), (1, types::I8)] {
        let fits = b.create_block();
        let smaller = b.create_block();
        let ok = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, n, size);
        b.ins().brif(ok, fits, &[], smaller, &[]);
        b.switch_to_block(fits);
        let end = b.ins().iadd_imm_s(n, -size);
        let a = b.ins().load(ty, from, src, 0);
        let s = b.ins().iadd(src, end);
        let z = b.ins().load(ty, from, s, 0);
        b.ins().store(to, a, dst, 0);
        let d = b.ins().iadd(dst, end);
        b.ins().store(to, z, d, 0);
        b.ins().jump(done, &[]);
        b.switch_to_block(smaller);
    }
    // n == 0 here.
    b.ins().jump(done, &[]);
}

/// Generates the key function the switch prefetches big tables with:
/// over a batch of packets (`KeysCtx`), the parser without setup and
/// without the end of parsing, then each prefetchable table's key built as
/// `control::integer_key` does, stored per packet and table. When every
/// key is one field of a wire header, the packets after one parsed in full
/// are read where that one had the header, without a parse (router, 1M
/// routes: about 46 instructions per packet become about 15). `None` (with
/// no code) when the plan has no prefetchable table. Returns the function
/// and its keys per packet.
fn compile_keys(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    parser: &ParserShape,
) -> Result<Option<(FuncId, u64, Option<KeyReads>)>, String> {
    let tables: Vec<&[(crate::plan::KeyPart, u32)]> =
        plan.tables.iter().filter(|t| t.prefetchable()).filter_map(|t| t.key128.as_deref()).collect();
    if tables.is_empty() {
        return Ok(None);
    }
    // Each key straight from the packet: `(header, the field's offset in
    // it, shift, mask)`, when every key is one field of a wire header.
    let spec: Option<Vec<(u32, i64, i64, u64)>> = tables
        .iter()
        .map(|parts| match parts {
            [(crate::plan::KeyPart::Field { src: FieldSrc::Wire { byte, shift, mask }, header: Some(h) }, _)] => {
                let (off, _) = plan.layout.headers[*h as usize].wire?;
                Some((*h, i64::from(byte.checked_sub(off)?), i64::from(*shift), *mask))
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .filter(|s| s.len() <= SPEC_TABLES);
    let shape = ParserShape { init: parser.init, order: parser.order.clone(), ends: None, setup: None };
    let (id, mut ctx) = declare_context_function(module, "sluice_keys", 4, false)?;
    generate(plan, module, helpers, fctx, &mut ctx, false, &mut JitStats::default(), |g, pc| {
        if let Some(spec) = &spec {
            g.track = spec.iter().enumerate().map(|(t, sp)| (sp.0, K_SPEC + 8 * t as i32)).collect();
        }
        let head = g.b.create_block();
        g.b.append_block_param(head, types::I64);
        let body = g.b.create_block();
        let stop = g.b.create_block();
        let zero = g.b.ins().iconst(types::I64, 0);
        g.b.ins().jump(head, &[zero.into()]);

        g.b.switch_to_block(head);
        let i = g.b.block_params(head)[0];
        let mf = mem(g.b, Mem::Inputs);
        let n = g.b.ins().load(types::I64, mf, pc, K_N);
        let more = g.b.ins().icmp(IntCC::UnsignedLessThan, i, n);
        g.b.ins().brif(more, body, &[], stop, &[]);

        g.b.switch_to_block(body);
        let mf = mem(g.b, Mem::Inputs);
        let pkts = g.b.ins().load(types::I64, mf, pc, K_PKTS);
        let at = g.b.ins().ishl_imm_u(i, 4);
        let p = g.b.ins().iadd(pkts, at);
        let mf = mem(g.b, Mem::Inputs);
        let ptr = g.b.ins().load(types::I64, mf, p, 0);
        let mf = mem(g.b, Mem::Inputs);
        let len = g.b.ins().load(types::I64, mf, p, 8);
        let i1 = g.b.ins().iadd_imm_u(i, 1);
        if let Some(spec) = &spec {
            // Once a packet parsed in full showed where the keys' headers
            // start, the next ones are read at the same place, without a
            // parse: a key read wrong (another layout) only makes its
            // prefetch useless. The parse stays for a packet too short.
            let direct = g.b.create_block();
            let parse = g.b.create_block();
            let mut ok = None;
            let mut at = Vec::new();
            for (t, &(_, field, _, _)) in spec.iter().enumerate() {
                let mf = mem(g.b, Mem::Ctx);
                let start = g.b.ins().load(types::I64, mf, pc, K_SPEC + 8 * t as i32);
                let off = g.b.ins().iadd_imm_u(start, field);
                let end = g.b.ins().iadd_imm_u(off, 8);
                let fits = g.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, len);
                ok = Some(match ok {
                    Some(o) => g.b.ins().band(o, fits),
                    None => fits,
                });
                at.push(off);
            }
            g.b.ins().brif(ok.expect("a table"), direct, &[], parse, &[]);
            g.b.switch_to_block(direct);
            let mf = mem(g.b, Mem::Inputs);
            let out = g.b.ins().load(types::I64, mf, pc, K_KEYS);
            let first = g.b.ins().imul_imm_u(i, 8 * tables.len() as i64);
            let out = g.b.ins().iadd(out, first);
            for (t, (&(_, _, shift, mask), off)) in spec.iter().zip(at).enumerate() {
                let a = g.b.ins().iadd(ptr, off);
                let v = g.load_be(Mem::Packet, types::I64, a, 0);
                let v = g.b.ins().ushr_imm_u(v, shift);
                let key = band_u(g.b, v, mask as i64);
                let mf = mem(g.b, Mem::Out);
                g.b.ins().store(mf, key, out, 8 * t as i32);
            }
            g.b.ins().jump(head, &[i1.into()]);
            g.b.switch_to_block(parse);
        }
        let parsed = g.b.create_block();
        emit_parser(g, pc, &shape, None, Some(parsed), Some(ParseInputs { setup: zero, always: false, pkt: ptr, len }));

        g.b.switch_to_block(parsed);
        let mf = mem(g.b, Mem::Inputs);
        let out = g.b.ins().load(types::I64, mf, pc, K_KEYS);
        let first = g.b.ins().imul_imm_u(i, 8 * tables.len() as i64);
        let out = g.b.ins().iadd(out, first);
        for (t, parts) in tables.iter().enumerate() {
            let key = g.integer_key(parts);
            let mf = mem(g.b, Mem::Out);
            g.b.ins().store(mf, key, out, 8 * t as i32);
        }
        g.b.ins().jump(head, &[i1.into()]);

        g.b.switch_to_block(stop);
        g.b.ins().return_(&[]);
    });
    listing
        .push_str(&format!("; key function (lookahead parser and prefetch keys per packet)\n{}\n", ctx.func.display()));
    define(module, id, &mut ctx, "sluice_keys")?;
    let reads = spec.map(|sp| {
        let mut r = [KeyRead::default(); SPEC_TABLES];
        for (r, &(_, field, shift, mask)) in r.iter_mut().zip(&sp) {
            *r = KeyRead { field: field as usize, shift: shift as u32, mask };
        }
        r
    });
    Ok(Some((id, tables.len() as u64, reads)))
}

/// Compiles the batch function: for each packet of a [`BatchCtx`], the
/// parser's setup flag from the last packet's helpers, the parser, the
/// forwarding function into the packet's own output area, and the packet's
/// [`PktResult`]; it stops after the first packet that needs the general
/// path and returns its index (the number of packets when none does). Why:
/// per packet, the Rust loop around the two calls cost about a quarter of
/// the instructions of the whole path.
#[allow(clippy::too_many_arguments)]
fn compile_batch(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    parser: &ParserShape,
    forward: &ForwardShape,
    fwd_written: &BTreeSet<u32>,
) -> Result<FuncId, String> {
    let (id, mut ctx) = declare_context_function(module, "sluice_batch", 3, true)?;
    // The argument is the forwarding function's context, with the parser's
    // and the batch's beside it (see `FastContexts`).
    generate(plan, module, helpers, fctx, &mut ctx, false, &mut JitStats::default(), |g, fc| {
        let load = |g: &mut Gen<'_, '_, '_>, m: Mem, base: Value, off: i32| {
            let mf = mem(g.b, m);
            g.b.ins().load(types::I64, mf, base, off)
        };
        let pc = g.b.ins().iadd_imm_s(fc, PARSE_FROM_FWD);
        g.ctx = fc;
        // Only the PHV's two pointers stay in registers. The table views,
        // counters and registers, like the batch's own fields (packets,
        // areas, results), are loaded where they are used: kept across the
        // packet's code they would be spilled, and a spilled value costs a
        // store back per packet besides its load (memory operations bound
        // this loop).
        g.load_bases(false);
        // The loop counts `at`, 16 times the packet's index (the offset of
        // its `PktRef` and its `PktResult`). Why not the index: both would
        // be live across the packet's code, and one more value kept there is
        // one more spilled.
        let head = g.b.create_block();
        g.b.append_block_param(head, types::I64);
        let body = g.b.create_block();
        let next = g.b.create_block();
        let stop = g.b.create_block();
        g.b.append_block_param(stop, types::I64);
        let zero = g.b.ins().iconst(types::I64, 0);
        g.b.ins().jump(head, &[zero.into()]);

        g.b.switch_to_block(head);
        let at = g.b.block_params(head)[0];
        let n = load(g, Mem::Inputs, fc, B_N);
        let n16 = g.b.ins().ishl_imm_u(n, 4);
        let more = g.b.ins().icmp(IntCC::UnsignedLessThan, at, n16);
        g.b.ins().brif(more, body, &[], stop, &[n16.into()]);

        // The parser, after its inputs: the packet and the setup flag
        // (full after a helper ran, see `JitCtx::dirty`).
        g.b.switch_to_block(body);
        let pkts = load(g, Mem::Inputs, fc, B_PKTS);
        let p = g.b.ins().iadd(pkts, at);
        let ptr = load(g, Mem::Inputs, p, 0);
        let len = load(g, Mem::Inputs, p, 8);
        // The flag is cleared only when set: a load, not a store per packet.
        let dirty = load(g, Mem::Ctx, fc, OFF_DIRTY);
        let clear = g.b.create_block();
        let cleared = g.b.create_block();
        g.b.ins().brif(dirty, clear, &[], cleared, &[]);
        g.b.switch_to_block(clear);
        let mf = mem(g.b, Mem::Ctx);
        g.b.ins().store(mf, zero, fc, OFF_DIRTY);
        g.b.ins().jump(cleared, &[]);
        g.b.switch_to_block(cleared);
        let setup = g.b.ins().iadd_imm_u(dirty, SETUP_WRITTEN as i64);
        let parsed = g.b.create_block();
        g.b.append_block_param(parsed, types::I64); // the cursor
        let inputs = ParseInputs { setup, always: true, pkt: ptr, len };
        // Checksum words nothing changes are summed where the parser ends
        // (it verifies there); only then does every packet pass there.
        if let Some((_, _, verified)) = &parser.ends {
            g.stash = plan_stash(plan, &forward.sums, verified);
        }
        emit_parser(g, pc, parser, Some(fwd_written), Some(parsed), Some(inputs));

        // The forwarding function, into the packet's area. `special` is
        // zero here without a store: a fresh context has it zero, and a
        // packet whose helpers set it ends the batch (status 1 or 3).
        g.b.switch_to_block(parsed);
        let cursor = g.b.block_params(parsed)[0];
        let fresh = load(g, Mem::Ctx, fc, OFF_META_FRESH);
        let stale = g.b.create_block();
        let meta_done = g.b.create_block();
        g.b.ins().brif(fresh, stale, &[], meta_done, &[]);
        g.b.switch_to_block(stale);
        let mf = mem(g.b, Mem::Ctx);
        g.b.ins().store(mf, zero, fc, OFF_META_FRESH);
        g.b.ins().jump(meta_done, &[]);
        g.b.switch_to_block(meta_done);
        // The length goes to the context only before a helper call (see `Gen::call`).
        g.len = Some(len);
        let forwarded = g.b.create_block();
        for _ in 0..4 {
            g.b.append_block_param(forwarded, types::I64); // status, port, header bytes, area
        }
        // The output area's address is computed by the deparser, rather
        // than kept across the forwarding code (kept, it would be spilled,
        // one more store per packet); the payload copy gets it from there
        // through the exit block.
        let area = |g: &mut Gen<'_, '_, '_>| {
            let mf = mem(g.b, Mem::Inputs);
            let stride16 = g.b.ins().load(types::I64, mf, fc, B_STRIDE16);
            let mf = mem(g.b, Mem::Inputs);
            let out = g.b.ins().load(types::I64, mf, fc, B_OUT);
            let o = g.b.ins().imul(at, stride16);
            g.b.ins().iadd(out, o)
        };
        emit_forward(g, fc, forward, Some((forwarded, &area)));

        // The result: two 8-byte stores, (status, port) and (length, cursor).
        g.b.switch_to_block(forwarded);
        let &[status, port, hdr, o] = g.b.block_params(forwarded) else { unreachable!("four parameters") };
        let results = load(g, Mem::Inputs, fc, B_RESULTS);
        let r = g.b.ins().iadd(results, at);
        let st32 = band_u(g.b, status, 0xffff_ffff);
        let port_hi = g.b.ins().ishl_imm_u(port, 32);
        let first = g.b.ins().bor(st32, port_hi);
        let mf = mem(g.b, Mem::Out);
        g.b.ins().store(mf, first, r, 0);
        let cursor_hi = g.b.ins().ishl_imm_u(cursor, 32);
        // Transmitted (0): the payload goes behind the headers and the
        // length covers both; dropped (2): next packet; else stop.
        let transmit = g.b.create_block();
        let other = g.b.create_block();
        g.b.ins().brif(status, other, &[], transmit, &[]);
        g.b.switch_to_block(other);
        let second = g.b.ins().bor(hdr, cursor_hi);
        let mf = mem(g.b, Mem::Out);
        g.b.ins().store(mf, second, r, 8);
        let low = band_u(g.b, status, !2);
        g.b.ins().brif(low, stop, &[at.into()], next, &[]);

        g.b.switch_to_block(transmit);
        // The packet's address is loaded again rather than kept across the
        // forwarding code, which frees a register for the loop counter
        // (kept, one of them is spilled: two loads and two stores).
        let pkts = load(g, Mem::Inputs, fc, B_PKTS);
        let p = g.b.ins().iadd(pkts, at);
        let ptr = load(g, Mem::Inputs, p, 0);
        let from = g.b.ins().umin(cursor, len);
        let n_pay = g.b.ins().isub(len, from);
        let src = g.b.ins().iadd(ptr, from);
        let dst = g.b.ins().iadd(o, hdr);
        let total = g.b.ins().iadd(hdr, n_pay);
        let second = g.b.ins().bor(total, cursor_hi);
        let mf = mem(g.b, Mem::Out);
        g.b.ins().store(mf, second, r, 8);
        copy_var(g.b, src, dst, n_pay, next);

        g.b.switch_to_block(next);
        let at1 = g.b.ins().iadd_imm_u(at, 16);
        g.b.ins().jump(head, &[at1.into()]);

        g.b.switch_to_block(stop);
        let at = g.b.block_params(stop)[0];
        let v = g.b.ins().ushr_imm_u(at, 4);
        g.b.ins().return_(&[v]);
    });
    listing
        .push_str(&format!("; batch function (parser and forwarding function per packet)\n{}\n", ctx.func.display()));
    define(module, id, &mut ctx, "sluice_batch")?;
    Ok(id)
}

/// An updated checksum whose words over wire bytes that nothing writes
/// after parsing (see [`post_parse_writes`]) the batch function sums at the
/// end of parsing, where the verification of the same bytes loads them
/// anyway; the update then adds only the words that may have changed. Why:
/// in a router that decrements the TTL, that is one word of the IPv4
/// header's nine, and the update's loads and additions were a tenth of the
/// per-packet code.
#[derive(Clone)]
struct SumStash {
    /// The checksum (the update's, as the forwarding shape has it).
    bc: crate::switch::ByteChecksum,
    /// Where in the context the stable words' sum goes (not folded;
    /// [`SUM_SKIPPED`] when `decided` and the checksum does not apply).
    at: i32,
    /// The words (as [`csum_words`] lists them) summed at the end of parsing.
    stable: Vec<Vec<u32>>,
    /// The words the update sums itself.
    changing: Vec<Vec<u32>>,
    /// Whether the checksum's condition reads only bytes and validity
    /// flags nothing changes after parsing: then the end of parsing decides
    /// it too.
    decided: bool,
}

/// [`SumStash::at`]'s value for a checksum that does not apply (no sum of wire
/// words reaches it: they are far fewer than 2^48).
const SUM_SKIPPED: i64 = -1;

/// The 16-bit words a checksum sums, as wire byte offsets (high byte
/// first; a last odd byte alone).
fn csum_words(bc: &crate::switch::ByteChecksum) -> Vec<Vec<u32>> {
    let bytes: Vec<u32> = bc.ranges.iter().flat_map(|(a, b)| *a..*b).collect();
    bytes.chunks(2).map(<[u32]>::to_vec).collect()
}

/// Adds the wire bytes a hot-path field access covers to `out` (none for a slot).
fn src_wire_bytes(src: FieldSrc, out: &mut BTreeSet<u32>) {
    if let FieldSrc::Wire { byte, shift, mask } = src {
        let (bit, width) = wire_bits(byte, shift, mask);
        if width > 0 {
            out.extend(bit / 8..=(bit + width - 1) / 8);
        }
    }
}

/// Adds header `h`'s wire bytes to `out` (none when it is not on the wire).
fn header_wire_bytes(plan: &Plan, h: u32, out: &mut BTreeSet<u32>) {
    if let Some((off, n)) = plan.layout.headers[h as usize].wire {
        out.extend(off..off + n);
    }
}

/// Adds field `f`'s wire bytes to `out`: its own, or its whole header's
/// when it has no hot-path access (wider than 64 bits).
fn field_wire_bytes(plan: &Plan, f: u32, out: &mut BTreeSet<u32>) {
    let fi = &plan.layout.fields[f as usize];
    match FieldSrc::of(fi) {
        Some(src) => src_wire_bytes(src, out),
        None => header_wire_bytes(plan, fi.header, out),
    }
}

/// The headers a header reference may name.
fn href_headers(plan: &Plan, r: &crate::expr::HRef) -> Vec<u32> {
    use crate::expr::HRef;
    match r {
        HRef::Fixed(h) => vec![*h],
        HRef::StackElem(st, _) | HRef::StackLast(st) => plan.layout.stacks[*st as usize].headers.clone(),
        HRef::UnionStackLast(us, m) => {
            let unions = &plan.layout.union_stacks[*us as usize].unions;
            unions.iter().filter_map(|u| plan.layout.unions[*u as usize].headers.get(*m).copied()).collect()
        }
    }
}

/// What code after the parser may change in the PHV's wire area: `(wire
/// bytes, headers whose validity)`, over every action of both pipelines,
/// the standard metadata the forwarding function writes and the updated
/// checksums' targets; `None` when that cannot be told (header unions,
/// stack-wide operations or varbit assignments). Why: wire bytes outside
/// that set keep at the deparser the values they had at the end of
/// parsing (see [`SumStash`]).
fn post_parse_writes(plan: &Plan) -> Option<(BTreeSet<u32>, BTreeSet<u32>)> {
    let mut bytes = BTreeSet::new();
    let mut validity = BTreeSet::new();
    let dst_bytes = |d: &Dst, bytes: &mut BTreeSet<u32>| match d {
        Dst::Field(f) => field_wire_bytes(plan, *f, bytes),
        Dst::Dyn(r, i) => {
            for h in href_headers(plan, r) {
                match plan.layout.headers[h as usize].fields.get(*i) {
                    Some(f) => field_wire_bytes(plan, *f, bytes),
                    None => header_wire_bytes(plan, h, bytes),
                }
            }
        }
    };
    for a in &plan.actions {
        for p in &a.prims {
            match p {
                Prim::SetField { dst, .. } => src_wire_bytes(*dst, &mut bytes),
                Prim::Assign { dst, .. }
                | Prim::ExecuteMeter { dst, .. }
                | Prim::RegRead { dst, .. }
                | Prim::HashOffset { dst, .. }
                | Prim::Rng { dst, .. } => dst_bytes(dst, &mut bytes),
                Prim::AssignHeader { dst, .. } | Prim::SetValid(dst) | Prim::SetInvalid(dst) => {
                    for h in href_headers(plan, dst) {
                        header_wire_bytes(plan, h, &mut bytes);
                        validity.insert(h);
                    }
                }
                Prim::AssignUnion { .. }
                | Prim::AssignStack { .. }
                | Prim::Push { .. }
                | Prim::Pop { .. }
                | Prim::AssignVl { .. } => return None,
                Prim::MarkToDrop
                | Prim::Exit
                | Prim::Jump(_)
                | Prim::JumpIfZero(..)
                | Prim::Count { .. }
                | Prim::RegWrite { .. }
                | Prim::Clone { .. }
                | Prim::Resubmit(_)
                | Prim::Recirculate(_)
                | Prim::Truncate(_)
                | Prim::Digest { .. }
                | Prim::Assert(_)
                | Prim::Log { .. } => {}
            }
        }
    }
    // Standard metadata (mark_to_drop's and the egress fields) is not on
    // the wire in a v1model layout; counted anyway, should it be.
    let std = &plan.std;
    for f in [
        std.egress_spec,
        std.mcast_grp,
        std.egress_port,
        std.instance_type,
        std.packet_length,
        std.egress_global_timestamp,
    ]
    .into_iter()
    .flatten()
    {
        field_wire_bytes(plan, f, &mut bytes);
    }
    for c in plan.checksums.iter().filter(|c| c.update) {
        field_wire_bytes(plan, c.target, &mut bytes);
    }
    Some((bytes, validity))
}

/// Whether a shortcut expression reads only wire bytes outside `bytes` and
/// validity flags of headers outside `validity` (so it has the same value
/// at the deparser as at the end of parsing).
fn fast_stable(f: &Fast, bytes: &BTreeSet<u32>, validity: &BTreeSet<u32>) -> bool {
    let src = |s: &FieldSrc| {
        let mut b = BTreeSet::new();
        src_wire_bytes(*s, &mut b);
        matches!(s, FieldSrc::Wire { .. }) && b.is_disjoint(bytes)
    };
    match f {
        Fast::None | Fast::Param { .. } => false,
        Fast::Const(_) => true,
        Fast::Valid(h) | Fast::NotValid(h) => !validity.contains(h),
        Fast::Field(s) | Fast::NonZero(s) => src(s),
        Fast::AddMask { slot: s, .. } | Fast::Cmp { slot: s, .. } | Fast::AndConst { slot: s, .. } => src(s),
        Fast::CmpFields { a, b, .. } => src(a) && src(b),
        Fast::And(b) | Fast::Or(b) => fast_stable(&b.0, bytes, validity) && fast_stable(&b.1, bytes, validity),
    }
}

/// The [`SumStash`] of each of `sums` (the forwarding shape's updated
/// checksums, in order; at most [`STASH_MAX`] of them stashed): only for
/// a checksum the end of parsing verifies over the same bytes (`verified`).
/// Why: there its stable words are loaded and added anyway; without a
/// verification, summing them there only moves the work and keeps more
/// values live through the parser (edge: 20 instructions more a packet).
fn plan_stash(
    plan: &Plan,
    sums: &[crate::switch::ByteChecksum],
    verified: &[crate::switch::ByteChecksum],
) -> Vec<Option<SumStash>> {
    let Some((bytes, validity)) = post_parse_writes(plan) else { return Vec::new() };
    let mut used = 0;
    sums.iter()
        .map(|bc| {
            let verifies = verified.iter().any(|v| v.same_words(bc));
            if !verifies || validity.contains(&bc.header) || used == STASH_MAX {
                return None;
            }
            let (stable, changing): (Vec<_>, Vec<_>) =
                csum_words(bc).into_iter().partition(|w| w.iter().all(|x| !bytes.contains(x)));
            if stable.is_empty() {
                return None;
            }
            let decided = bc.cond.as_ref().is_none_or(|f| fast_stable(f, &bytes, &validity));
            let at = OFF_STASH + 8 * used as i32;
            used += 1;
            Some(SumStash { bc: bc.clone(), at, stable, changing, decided })
        })
        .collect()
}

/// What [`compile_forward`] generates code for: the deparsed headers
/// `(header, wire offset, bytes)`, the updated checksums and the writers of
/// `mcast_grp`, `egress_spec`, `instance_type`, `egress_global_timestamp`,
/// `egress_port` and `packet_length`.
struct ForwardShape {
    deparse: Vec<(u32, u32, u32)>,
    sums: Vec<crate::switch::ByteChecksum>,
    fields: [StdWriter; 6],
}

/// The [`ForwardShape`] of `plan`, `None` when it has no forwarding function.
fn forward_shape(plan: &Plan) -> Option<ForwardShape> {
    let layout = &plan.layout;
    let deparse = plan
        .deparse_order
        .iter()
        .map(|h| layout.headers[*h as usize].wire.map(|(off, n)| (*h, off, n)))
        .collect::<Option<Vec<_>>>()?;
    let sums: Vec<_> =
        plan.checksums.iter().filter(|c| c.update).map(|c| compiled_checksum(plan, c)).collect::<Option<_>>()?;
    // Standard metadata the function reads or writes: each must have a hot-path reader.
    let std = &plan.std;
    let fields: Option<Vec<_>> = [
        std.mcast_grp,
        std.egress_spec,
        std.instance_type,
        std.egress_global_timestamp,
        std.egress_port,
        std.packet_length,
    ]
    .into_iter()
    .map(|f| std_writer(plan, f))
    .collect();
    let fields: [StdWriter; 6] = fields?.try_into().ok()?;
    Some(ForwardShape { deparse, sums, fields })
}

/// Whether nothing on the forwarding function's path reads the egress
/// standard metadata it would write: the program has no egress pipeline
/// and no checksum update condition reads a slot field they live in.
fn egress_std_unread(plan: &Plan, sums: &[crate::switch::ByteChecksum], fields: &[StdWriter; 6]) -> bool {
    let mut read = BTreeSet::new();
    let known = sums.iter().all(|bc| bc.cond.as_ref().is_none_or(|f| fast_slots(f, &mut read)));
    let written = fields.iter().flatten().any(|(s, _)| matches!(s, FieldSrc::Slot(i) if read.contains(i)));
    plan.egress.init.is_none() && known && !written
}

/// The unsigned integer condition of a [`Fast::Cmp`] operator.
fn int_cc(op: BinOp) -> IntCC {
    match op {
        BinOp::Eq => IntCC::Equal,
        BinOp::Ne => IntCC::NotEqual,
        BinOp::Lt => IntCC::UnsignedLessThan,
        BinOp::Le => IntCC::UnsignedLessThanOrEqual,
        BinOp::Gt => IntCC::UnsignedGreaterThan,
        _ => IntCC::UnsignedGreaterThanOrEqual,
    }
}

/// The PHV slots the compiled parser's states `order` read (assignments,
/// `verify` conditions, select keys); `None` when that cannot be told.
fn parser_reads(plan: &Plan, order: &[u32]) -> Option<BTreeSet<u32>> {
    use crate::plan::POp;
    let mut out = BTreeSet::new();
    for si in order {
        let st = &plan.states[*si as usize];
        for op in &st.ops {
            let ok = match op {
                POp::Set(_, r) => fast_slots(&r.fast, &mut out),
                POp::Verify(c, _) => fast_slots(&c.fast, &mut out),
                _ => true,
            };
            if !ok {
                return None;
            }
        }
        for (src, _) in parser_key(st).unwrap_or_default() {
            if let FieldSrc::Slot(i) = src {
                out.insert(i);
            }
        }
    }
    Some(out)
}

/// Adds the PHV slots a shortcut expression reads to `out`; false when it
/// cannot tell (no shortcut, or an action parameter).
fn fast_slots(f: &Fast, out: &mut BTreeSet<u32>) -> bool {
    let mut slot = |s: &FieldSrc| {
        if let FieldSrc::Slot(i) = s {
            out.insert(*i);
        }
        true
    };
    match f {
        Fast::None | Fast::Param { .. } => false,
        Fast::Const(_) | Fast::Valid(_) | Fast::NotValid(_) => true,
        Fast::Field(s) | Fast::NonZero(s) => slot(s),
        Fast::AddMask { slot: s, .. } | Fast::Cmp { slot: s, .. } | Fast::AndConst { slot: s, .. } => slot(s),
        Fast::CmpFields { a, b, .. } => slot(a) && slot(b),
        Fast::And(b) | Fast::Or(b) => fast_slots(&b.0, out) && fast_slots(&b.1, out),
    }
}

/// Generates, where it is called, the address of the packet's output area
/// (for the batch function: computed where the deparser needs it, so that
/// it is not kept, and spilled, across the whole forwarding code).
type OutArea<'a> = &'a dyn Fn(&mut Gen<'_, '_, '_>) -> Value;

/// Generates the forwarding function of `shape` at the current block, with
/// `pc` the [`JitCtx`]: returns the status (egress port and header bytes
/// stored to the context), or, when `exit` is given, jumps to its block
/// with the three as parameters and deparses into the area its
/// [`OutArea`] computes.
fn emit_forward(g: &mut Gen<'_, '_, '_>, pc: Value, shape: &ForwardShape, exit: Option<(Block, OutArea<'_>)>) {
    let plan = g.plan;
    let deparse = shape.deparse.clone();
    let sums = &shape.sums;
    let [mcast, spec_f, itype, egress_ts, egress_port, pkt_len] = shape.fields;
    // The exit block takes (status, egress port, header bytes, output
    // area; 0 for the last two unless transmitted): in the batch function
    // they go straight to the packet's result; a function of its own
    // stores them to the context for its caller.
    let ret = match exit {
        Some((e, _)) => e,
        None => {
            let r = g.b.create_block();
            for _ in 0..4 {
                g.b.append_block_param(r, types::I64);
            }
            r
        }
    };
    let ret_with = |g: &mut Gen, status: i64, port: Value| {
        let v = g.b.ins().iconst(types::I64, status);
        let none = g.b.ins().iconst(types::I64, 0);
        g.b.ins().jump(ret, &[v.into(), port.into(), none.into(), none.into()]);
    };
    let read_or_zero = |g: &mut Gen, f: Option<(FieldSrc, u64)>| match f {
        Some((s, _)) => g.read(s),
        None => g.b.ins().iconst(types::I64, 0),
    };
    // Branches to a block returning `status` (with egress port `port`)
    // when `cond` is non-zero, else continues.
    let bail_if = |g: &mut Gen, cond: Value, status: i64, port: Value| {
        let out = g.b.create_block();
        let cont = g.b.create_block();
        g.b.ins().brif(cond, out, &[], cont, &[]);
        g.b.switch_to_block(out);
        ret_with(g, status, port);
        g.b.switch_to_block(cont);
    };

    // Ingress.
    let after_ingress = g.b.create_block();
    g.body(plan.ingress.init, after_ingress);
    g.b.switch_to_block(after_ingress);
    let no_port = g.b.ins().iconst(types::I64, 0);
    let mf = mem(g.b, Mem::Ctx);
    let special = g.b.ins().load(types::I64, mf, pc, OFF_SPECIAL);
    bail_if(g, special, 1, no_port);
    if let Some((s, _)) = mcast {
        let m = g.read(s);
        bail_if(g, m, 1, no_port);
    }
    let spec = read_or_zero(g, spec_f);
    let drop = g.b.ins().icmp_imm_u(IntCC::Equal, spec, crate::switch::DROP_PORT as i64);
    bail_if(g, drop, 2, no_port);
    // Egress standard metadata, as `Switch::egress_pipeline` sets them.
    let port = spec;
    if egress_std_unread(plan, &shape.sums, &shape.fields) {
        // No egress pipeline: nothing after this point reads them (and no
        // helper runs), and once the packet is transmitted or dropped its
        // PHV is dead. `egress_spec` is then the 512 written here.
        let spec = spec_f.map_or(0, |(_, m)| 512 & m);
        if u128::from(spec) == crate::switch::DROP_PORT {
            let always = g.b.ins().iconst(types::I64, 1);
            bail_if(g, always, 2, port);
        }
    } else {
        if let Some((s, m)) = itype {
            let z = g.b.ins().iconst(types::I64, 0);
            g.write(s, z, m);
        }
        if let Some((s, m)) = egress_ts {
            let mf = mem(g.b, Mem::Ctx);
            let now = g.b.ins().load(types::I64, mf, pc, OFF_NOW);
            g.write(s, now, m);
        }
        if let Some((s, m)) = egress_port {
            g.write(s, spec, m);
        }
        if let Some((s, m)) = spec_f {
            let v = g.b.ins().iconst(types::I64, 512);
            g.write(s, v, m);
        }
        if let Some((s, m)) = pkt_len {
            let len = g.packet_len();
            g.write(s, len, m);
        }

        // Egress.
        let after_egress = g.b.create_block();
        g.body(plan.egress.init, after_egress);
        g.b.switch_to_block(after_egress);
        let mf = mem(g.b, Mem::Ctx);
        let special = g.b.ins().load(types::I64, mf, pc, OFF_SPECIAL);
        bail_if(g, special, 3, port);
        let spec = read_or_zero(g, spec_f);
        let drop = g.b.ins().icmp_imm_u(IntCC::Equal, spec, crate::switch::DROP_PORT as i64);
        bail_if(g, drop, 2, port);
    }

    // Checksum updates: csum16 of the byte ranges, summed as
    // little-endian words and stored as such (the one's complement sum
    // does not depend on byte order).
    for (i, bc) in sums.iter().enumerate() {
        let stash = g.stash.get(i).cloned().flatten();
        let (cond, part) = match &stash {
            Some(st) => {
                let mf = mem(g.b, Mem::Ctx);
                let part = g.b.ins().load(types::I64, mf, g.ctx, st.at);
                let cond = if st.decided {
                    g.b.ins().icmp_imm_s(IntCC::NotEqual, part, SUM_SKIPPED)
                } else {
                    g.checksum_applies(bc)
                };
                (cond, Some((st, part)))
            }
            None => (g.checksum_applies(bc), None),
        };
        let compute = g.b.create_block();
        let next = g.b.create_block();
        g.b.ins().brif(cond, compute, &[], next, &[]);
        g.b.switch_to_block(compute);
        let v = match part {
            Some((st, part)) => {
                let rest = g.csum16_raw(&st.changing);
                let all = g.b.ins().iadd(part, rest);
                g.csum16_fold(all)
            }
            None => g.csum16_swapped(bc),
        };
        match g.le16_byte(bc.target) {
            Some(b) => g.merge_le(b, 2, v),
            None => {
                let v = g.swap16(v);
                g.write(bc.target, v, 0xffff);
            }
        }
        g.b.ins().jump(next, &[]);
        g.b.switch_to_block(next);
    }

    // Headers in deparser order: only valid ones are copied. Why a
    // branch per header: copying every header and advancing only over
    // valid ones costs an IPv4 packet the 40-byte IPv6 copy.
    let out = match exit {
        Some((_, out)) => out(g),
        None => {
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().load(types::I64, mf, pc, OFF_OUT)
        }
    };
    let wire = g.ptr(OFF_WIRE);
    let valid = g.ptr(OFF_VALID);
    // The headers' write pointer, not their length, goes from header to
    // header: the output area's address is then used (computed) once here,
    // not again in each header's copy (Cranelift places pure values at
    // their uses, per branch).
    let mut at = out;
    for (h, off, n) in deparse {
        let copy = g.b.create_block();
        let next = g.b.create_block();
        g.b.append_block_param(next, types::I64);
        let mf = mem(g.b, Mem::Valid);
        let v = g.b.ins().uload8(types::I64, mf, valid, h as i32);
        g.b.ins().brif(v, copy, &[], next, &[at.into()]);
        g.b.switch_to_block(copy);
        g.copy_bytes((Mem::Wire, wire, off as i32), (Mem::Out, at, 0), n);
        let after = g.b.ins().iadd_imm_u(at, i64::from(n));
        g.b.ins().jump(next, &[after.into()]);
        g.b.switch_to_block(next);
        at = g.b.block_params(next)[0];
    }
    let pos = g.b.ins().isub(at, out);
    let ok = g.b.ins().iconst(types::I64, 0);
    g.b.ins().jump(ret, &[ok.into(), port.into(), pos.into(), out.into()]);

    if exit.is_none() {
        g.b.switch_to_block(ret);
        let &[status, port, hdr, _] = g.b.block_params(ret) else { unreachable!("four parameters") };
        let mf = mem(g.b, Mem::Ctx);
        g.b.ins().store(mf, port, pc, OFF_PORT);
        let mf = mem(g.b, Mem::Ctx);
        g.b.ins().store(mf, hdr, pc, OFF_OUT_LEN);
        g.b.ins().return_(&[status]);
    }
}

/// Compiles the forwarding function: ingress, the unicast decision, the
/// egress standard metadata, egress, checksum updates and the header part of
/// the deparser, in one function per program. Why: between the stages the
/// general path pays for queues, metadata bookkeeping in `u128` and
/// interpreted checksum conditions; for a unicast packet none of it is
/// needed, and the stages' boundaries cost more than their work.
///
/// Available when every header the deparser emits is in wire format, every
/// checksum update has the byte-range form (`ByteChecksum`) and the standard
/// metadata it writes have hot-path readers; `None` otherwise.
///
/// Returns 0 to transmit (port and header length in the context), 1 when the
/// packet needs the general path after ingress (multicast, or a helper asked
/// for a clone, resubmit, recirculate or truncate, or changed the length),
/// 2 when dropped, 3 for the general path after egress.
fn compile_forward(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    shape: Option<&ForwardShape>,
) -> Result<Option<(FuncId, BTreeSet<u32>)>, String> {
    let Some(shape) = shape else { return Ok(None) };
    let (id, mut ctx) = declare_context_function(module, "sluice_forward", 2, true)?;
    let written = generate(plan, module, helpers, fctx, &mut ctx, true, &mut JitStats::default(), |g, pc| {
        emit_forward(g, pc, shape, None)
    });
    listing.push_str(&format!("; forwarding function (ingress to deparser)\n{}\n", ctx.func.display()));
    define(module, id, &mut ctx, "sluice_forward")?;
    Ok(Some((id, written)))
}

/// Code generation state for one pipeline function.
struct Gen<'p, 'b, 'f> {
    plan: &'p Plan,
    b: &'b mut FunctionBuilder<'f>,
    ctx: Value,
    blocks: HashMap<(u8, u32), Block>,
    work: Vec<(Node, Block)>,
    ret: Block,
    h_table: cranelift_codegen::ir::FuncRef,
    h_action: cranelift_codegen::ir::FuncRef,
    h_action_nodata: cranelift_codegen::ir::FuncRef,
    h_cond: cranelift_codegen::ir::FuncRef,
    h_run_from: cranelift_codegen::ir::FuncRef,
    h_meter: cranelift_codegen::ir::FuncRef,
    h_indirect: cranelift_codegen::ir::FuncRef,
    h_table_words: cranelift_codegen::ir::FuncRef,
    h_table_key: cranelift_codegen::ir::FuncRef,
    stats: &'b mut JitStats,
    /// Context pointers loaded once per call: `(offset, value)`.
    bases: Vec<(i32, Value)>,
    /// How wire fields are loaded and stored (see [`Gen::read_bits`]).
    wire_grid: Grid,
    /// While an action of a table result is generated: where its data is
    /// read (the hit's hot record, or `JitCtx::data` after the helper).
    data_base: Option<Value>,
    /// Every PHV slot the generated code may store to: the parser's
    /// per-packet setup zeroes only these (see [`SETUP_WRITTEN`]).
    written: BTreeSet<u32>,
    /// Headers whose extraction the parser records: `(header, context
    /// offset)` where the cursor at the header's start is stored (the key
    /// function's `KeysCtx::spec`).
    track: Vec<(u32, i32)>,
    /// The packet's length when the context does not hold it yet (the
    /// batch function): stored there before each helper call, the only
    /// readers of `JitCtx::len` besides generated code (see [`Gen::call`]).
    len: Option<Value>,
    /// Per updated checksum of the forwarding shape, in order: the part of
    /// its sum the end of parsing computes (batch function only, see
    /// [`SumStash`]).
    stash: Vec<Option<SumStash>>,
}

fn node_key(n: Node) -> (u8, u32) {
    match n {
        Node::Table(t) => (0, t),
        Node::Cond(c) => (1, c),
    }
}

/// How the helpers report a next node: 0 for the end of the pipeline.
fn encode_node(n: Option<Node>) -> i64 {
    match n {
        None => 0,
        Some(Node::Table(t)) => 1 + 2 * i64::from(t),
        Some(Node::Cond(c)) => 2 + 2 * i64::from(c),
    }
}

fn decode_node(v: i64) -> Option<Node> {
    match v {
        0 => None,
        v if v % 2 == 1 => Some(Node::Table(((v - 1) / 2) as u32)),
        v => Some(Node::Cond(((v - 2) / 2) as u32)),
    }
}

/// Result of an inline action: whether it always ends the pipeline (`exit`).
enum ActionEnd {
    Continue,
    Exit,
    /// The action ran in a helper; the value is its exit flag (i32).
    Dynamic(Value),
}

impl<'p, 'b, 'f> Gen<'p, 'b, 'f> {
    /// A generator for one function being built in `b`, with the engine
    /// helpers (`helpers`, in `compile`'s order) declared in it; `ctx` is the
    /// context pointer parameter.
    fn new(
        plan: &'p Plan,
        b: &'b mut FunctionBuilder<'f>,
        module: &mut JITModule,
        helpers: &[FuncId],
        ctx: Value,
        stats: &'b mut JitStats,
    ) -> Self {
        let refs: Vec<_> = helpers.iter().map(|h| module.declare_func_in_func(*h, b.func)).collect();
        Gen {
            plan,
            b,
            ctx,
            blocks: HashMap::new(),
            work: Vec::new(),
            ret: Block::from_u32(0),
            h_table: refs[0],
            h_action: refs[1],
            h_action_nodata: refs[2],
            h_cond: refs[3],
            h_run_from: refs[4],
            h_meter: refs[5],
            h_indirect: refs[6],
            h_table_words: refs[7],
            h_table_key: refs[8],
            stats,
            bases: Vec::new(),
            wire_grid: Grid::wire(plan),
            data_base: None,
            written: BTreeSet::new(),
            track: Vec::new(),
            len: None,
            stash: Vec::new(),
        }
    }
}

impl Gen<'_, '_, '_> {
    /// Memory flags for an access to `m` (see [`Mem`]).
    fn mf(&mut self, m: Mem) -> MemFlagsData {
        mem(self.b, m)
    }

    /// Calls helper `f`, first storing the packet's length to the context
    /// when generated code holds it in a register ([`Gen::len`]). Why: the
    /// batch function would otherwise store it for every packet, and most
    /// packets call no helper.
    fn call(&mut self, f: cranelift_codegen::ir::FuncRef, args: &[Value]) -> cranelift_codegen::ir::Inst {
        if let Some(len) = self.len {
            let mf = mem(self.b, Mem::Ctx);
            self.b.ins().store(mf, len, self.ctx, OFF_LEN);
        }
        self.b.ins().call(f, args)
    }

    /// The packet's length: [`Gen::len`], else loaded from the context.
    fn packet_len(&mut self) -> Value {
        match self.len {
            Some(v) => v,
            None => {
                let mf = mem(self.b, Mem::Ctx);
                self.b.ins().load(types::I64, mf, self.ctx, OFF_LEN)
            }
        }
    }

    /// A pipeline's body, from its entry block (set up by [`generate`]).
    fn function(&mut self, init: Node) {
        let ret = self.b.create_block();
        self.body(Some(init), ret);
        self.b.switch_to_block(ret);
        self.b.ins().return_(&[]);
    }

    /// Generates a pipeline starting at `init` from the current block; its
    /// end (and `exit`) jumps to `after`, which the caller then fills.
    fn body(&mut self, init: Option<Node>, after: Block) {
        self.ret = after;
        self.blocks.clear();
        let first = self.block_for(init);
        self.b.ins().jump(first, &[]);
        while let Some((n, blk)) = self.work.pop() {
            self.b.switch_to_block(blk);
            match n {
                Node::Cond(c) => self.cond(c),
                Node::Table(t) => self.table(t),
            }
        }
    }

    /// The block that runs node `n` (the return block for the end).
    fn block_for(&mut self, n: Option<Node>) -> Block {
        let Some(n) = n else { return self.ret };
        if let Some(b) = self.blocks.get(&node_key(n)) {
            return *b;
        }
        let b = self.b.create_block();
        self.blocks.insert(node_key(n), b);
        self.work.push((n, b));
        b
    }

    /// A pointer field of the context: loaded once in the entry block (see
    /// [`Gen::load_bases`]) for the PHV and view pointers, which never
    /// change during a call, so field accesses need no reload.
    fn ptr(&mut self, off: i32) -> Value {
        if off == OFF_VALID {
            // The valid flags follow the headers in one buffer (`Phv::wire_ptr`).
            let wire = self.ptr(OFF_WIRE);
            let at = self.plan.layout.wire_bytes as usize + crate::phv::WIRE_PAD;
            return self.b.ins().iadd_imm_u(wire, at as i64);
        }
        if let Some((_, v)) = self.bases.iter().find(|(o, _)| *o == off) {
            return *v;
        }
        let mf = mem(self.b, Mem::Inputs);
        self.b.ins().load(types::I64, mf, self.ctx, off)
    }

    /// Loads the context's constant pointers (PHV vectors, table views) in
    /// the current block, which must dominate all code generated after it.
    fn load_bases(&mut self, with_views: bool) {
        self.bases.clear();
        let offs: &[i32] = if with_views {
            &[OFF_WIRE, OFF_SLOTS, OFF_VIEWS, OFF_COUNTERS, OFF_REGISTERS]
        } else {
            &[OFF_WIRE, OFF_SLOTS]
        };
        for off in offs {
            let mf = mem(self.b, Mem::Inputs);
            let v = self.b.ins().load(types::I64, mf, self.ctx, *off);
            self.bases.push((*off, v));
        }
    }

    fn read(&mut self, s: FieldSrc) -> Value {
        match s {
            FieldSrc::Slot(i) => {
                let base = self.ptr(OFF_SLOTS);
                let mf = mem(self.b, Mem::Slot(i));
                self.b.ins().load(types::I64, mf, base, (16 * i) as i32)
            }
            FieldSrc::Wire { byte, shift, mask } => {
                let base = self.ptr(OFF_WIRE);
                let (bit, width) = wire_bits(byte, shift, mask);
                if let Some(ty) = self.whole_in_piece(bit, width) {
                    // A load inside the piece's last store is still
                    // forwarded from it; it needs no shift or mask.
                    return self.load_be(Mem::Wire, ty, base, (bit / 8) as i32);
                }
                let grid = std::mem::take(&mut self.wire_grid);
                let v = self.read_bits(Mem::Wire, base, 0, &grid, bit, width);
                self.wire_grid = grid;
                v
            }
        }
    }

    /// The load type of wire bits `[bit, bit + width)` when they are 1, 2,
    /// 4 or 8 whole bytes inside one piece of the wire grid.
    fn whole_in_piece(&self, bit: u32, width: u32) -> Option<types::Type> {
        let (first, last) = (bit / 8, (bit + width - 1) / 8);
        (bit.is_multiple_of(8)
            && matches!(width, 8 | 16 | 32 | 64)
            && self.wire_grid.chunk(first) == self.wire_grid.chunk(last))
        .then(|| chunk_type(width / 8))
    }

    /// Loads a `ty`-sized big-endian value at `base + off`, zero-extended to 64 bits.
    fn load_be(&mut self, m: Mem, ty: types::Type, base: Value, off: i32) -> Value {
        let mf = self.mf(m);
        let w = self.b.ins().load(ty, mf, base, off);
        let w = if ty == types::I8 { w } else { self.b.ins().bswap(w) };
        if ty == types::I64 {
            w
        } else {
            self.b.ins().uextend(types::I64, w)
        }
    }

    fn write(&mut self, s: FieldSrc, v: Value, width_mask: u64) {
        match s {
            FieldSrc::Slot(i) => {
                // Only the low half: a slot field has at most 64 bits
                // (`FieldSrc::of`), and every writer keeps the high half of
                // such a slot zero (PHV reset and setup zero it, values are
                // masked to the field's width).
                self.written.insert(i);
                let base = self.ptr(OFF_SLOTS);
                let v = if width_mask == u64::MAX { v } else { band_u(self.b, v, width_mask as i64) };
                let mf = mem(self.b, Mem::Slot(i));
                self.b.ins().store(mf, v, base, (16 * i) as i32);
            }
            FieldSrc::Wire { byte, shift, mask } => {
                let (bit, width) = wire_bits(byte, shift, mask);
                if width == 8 && self.whole_in_piece(bit, width).is_some() {
                    // One byte: merged into its piece little-endian, no swaps.
                    self.merge_le(bit / 8, 1, v);
                    return;
                }
                let base = self.ptr(OFF_WIRE);
                let grid = std::mem::take(&mut self.wire_grid);
                self.write_bits(Mem::Wire, base, 0, &grid, bit, width, v);
                self.wire_grid = grid;
            }
        }
    }

    /// `(data offset, wire byte, bytes)` when setting `dst` to `src` copies
    /// bytes: `dst` is whole bytes of the wire and `src` an action parameter
    /// of as many bytes inside the hot record's data (both hold the value
    /// big-endian, so no integer needs building).
    fn data_copy(&self, dst: FieldSrc, src: &Fast) -> Option<(u32, u32, u32)> {
        let (FieldSrc::Wire { byte, shift, mask }, Fast::Param { off, len }) = (dst, src) else { return None };
        let (bit, width) = wire_bits(byte, shift, mask);
        (bit.is_multiple_of(8) && width == 8 * len && (off + len) as usize <= crate::tables::HOT_DATA).then_some((
            *off,
            bit / 8,
            *len,
        ))
    }

    /// Writes `n` bytes of action data from data byte `off` to the wire at
    /// byte `first` (see [`Gen::data_copy`]): per piece of the wire grid, a
    /// whole piece is one load and one store; a partly covered one is read,
    /// merged with the data bytes loaded little-endian at its position and
    /// stored, without byte swaps. Loads may read past the parameter, into
    /// the zero padding after the hot data, and masks drop those bytes.
    fn copy_data_to_wire(&mut self, off: u32, first: u32, n: u32) {
        let wire = self.ptr(OFF_WIRE);
        let (data, area) = match self.data_base {
            Some(base) => (base, 0),
            None => (self.ctx, OFF_DATA),
        };
        let mut at = first;
        while at < first + n {
            let (cs, csize) = self.wire_grid.chunk(at);
            let x1 = (first + n).min(cs + csize);
            let ty = chunk_type(csize);
            let src = area + (off + at - first) as i32;
            let mf = mem(self.b, Mem::ActionData);
            let v = self.b.ins().load(ty, mf, data, src);
            if at == cs && x1 == cs + csize {
                let mf = mem(self.b, Mem::Wire);
                self.b.ins().store(mf, v, wire, cs as i32);
            } else {
                let v = if ty == types::I64 { v } else { self.b.ins().uextend(types::I64, v) };
                self.merge_le(at, x1 - at, v);
            }
            at = x1;
        }
    }

    /// Copies `n` bytes (a length the program fixes) from `src + src_off` to
    /// `dst + dst_off` with 8/4/2/1-byte loads and stores.
    fn copy_bytes(&mut self, (from, src, src_off): (Mem, Value, i32), (to, dst, dst_off): (Mem, Value, i32), n: u32) {
        let (from, to) = (self.mf(from), self.mf(to));
        for (at, size) in copy_chunks(n) {
            let ty = chunk_type(size);
            let v = self.b.ins().load(ty, from, src, src_off + at as i32);
            self.b.ins().store(to, v, dst, dst_off + at as i32);
        }
    }

    /// Reads bits `[bit, bit + width)` (width ≤ 64) of an area cut into
    /// `grid`'s chunks, as an integer: one whole-chunk load per chunk the
    /// bits touch. Why whole chunks: the parser and deparser copy, and
    /// [`Gen::write_bits`] stores, exactly these chunks, so every load is
    /// answered by the store that last wrote its bytes (store-to-load
    /// forwarding) instead of waiting for several narrower stores to reach
    /// the cache.
    fn read_bits(&mut self, m: Mem, base: Value, area: i32, grid: &Grid, bit: u32, width: u32) -> Value {
        let end = bit + width;
        let mut at = bit;
        let mut v: Option<Value> = None;
        while at < end {
            let (cs, csize) = grid.chunk(at / 8);
            let cend = (cs + csize) * 8;
            let x1 = end.min(cend);
            let n = x1 - at;
            let c = self.load_be(m, chunk_type(csize), base, area + cs as i32);
            let part = if cend > x1 { self.b.ins().ushr_imm_u(c, i64::from(cend - x1)) } else { c };
            let part = if at > cs * 8 { band_u(self.b, part, mask64(n) as i64) } else { part };
            v = Some(match v {
                None => part,
                Some(p) => {
                    let p = self.b.ins().ishl_imm_u(p, i64::from(n));
                    self.b.ins().bor(p, part)
                }
            });
            at = x1;
        }
        v.unwrap_or_else(|| self.b.ins().iconst(types::I64, 0))
    }

    /// Writes `v` (its low `width` bits) to bits `[bit, bit + width)` of an
    /// area cut into `grid`'s chunks: a whole chunk is stored outright, a
    /// partly covered one read, merged and stored (see [`Gen::read_bits`]).
    #[allow(clippy::too_many_arguments)]
    fn write_bits(&mut self, m: Mem, base: Value, area: i32, grid: &Grid, bit: u32, width: u32, v: Value) {
        let end = bit + width;
        let mut at = bit;
        while at < end {
            let (cs, csize) = grid.chunk(at / 8);
            let ty = chunk_type(csize);
            let cend = (cs + csize) * 8;
            let x1 = end.min(cend);
            let n = x1 - at;
            let part = if end > x1 { self.b.ins().ushr_imm_u(v, i64::from(end - x1)) } else { v };
            let part = if n < 64 { band_u(self.b, part, mask64(n) as i64) } else { part };
            let shift = cend - x1;
            let part = if shift > 0 { self.b.ins().ishl_imm_u(part, i64::from(shift)) } else { part };
            let out = if n == csize * 8 {
                part
            } else {
                let cur = self.load_be(m, ty, base, area + cs as i32);
                let kept = band_u(self.b, cur, !(mask64(n) << shift) as i64);
                self.b.ins().bor(kept, part)
            };
            let out = if ty == types::I64 { out } else { self.b.ins().ireduce(ty, out) };
            let out = if ty == types::I8 { out } else { self.b.ins().bswap(out) };
            let mf = self.mf(m);
            self.b.ins().store(mf, out, base, area + cs as i32);
            at = x1;
        }
    }

    /// 1 when a specialized checksum applies to this packet (its header is
    /// valid and its condition holds), else 0.
    fn checksum_applies(&mut self, bc: &crate::switch::ByteChecksum) -> Value {
        let valid = self.ptr(OFF_VALID);
        let mf = mem(self.b, Mem::Valid);
        let mut cond = self.b.ins().uload8(types::I64, mf, valid, bc.header as i32);
        if let Some(f) = &bc.cond {
            let c = self.fast_bool(f);
            cond = self.b.ins().band(cond, c);
        }
        cond
    }

    /// The csum16 of a specialized checksum's byte ranges, as
    /// `control::csum16_ranges` computes it, byte-swapped: the words are
    /// summed as little-endian loads (the one's complement sum does not
    /// depend on byte order), so the result's little-endian 16-bit form is
    /// the checksum's big-endian bytes. Why swapped: the parser compares it
    /// with the field's bytes loaded the same way, and the forwarding
    /// function stores it so, neither with a byte swap.
    fn csum16_swapped(&mut self, bc: &crate::switch::ByteChecksum) -> Value {
        let words = csum_words(bc);
        let sum = self.csum16_raw(&words);
        self.csum16_fold(sum)
    }

    /// The 64-bit sum of `pairs` (wire byte offsets of 16-bit words, high
    /// byte first; a last word of one byte is padded with zero), summed as
    /// little-endian loads: not yet folded to 16 bits, so that partial sums
    /// add up (see [`SumStash`]).
    fn csum16_raw(&mut self, pairs: &[Vec<u32>]) -> Value {
        let wire = self.ptr(OFF_WIRE);
        // Two adjacent words in contiguous bytes load as one 32-bit value:
        // 2^16 is 1 modulo 0xffff, so summing 32-bit pieces and folding
        // gives the same sum as summing the 16-bit words.
        let mut terms = Vec::with_capacity(pairs.len());
        let mut i = 0;
        while i < pairs.len() {
            let p = &pairs[i];
            let contiguous = |q: &[u32]| q.len() == 2 && q[1] == q[0] + 1;
            // Four adjacent words inside one piece of the wire grid (a
            // load across two of the parser's stores is not forwarded from
            // them, and stalls) load as one 64-bit value, summed as its two
            // 32-bit halves: one load (loads bound this code) for two
            // register operations.
            if (0..4).all(|k| pairs.get(i + k).is_some_and(|q| contiguous(q) && q[0] == p[0] + 2 * k as u32))
                && self.whole_in_piece(8 * p[0], 64).is_some()
            {
                let mf = mem(self.b, Mem::Wire);
                let v = self.b.ins().load(types::I64, mf, wire, p[0] as i32);
                terms.push(band_u(self.b, v, 0xffff_ffff));
                terms.push(self.b.ins().ushr_imm_u(v, 32));
                i += 4;
                continue;
            }
            if contiguous(p) && i + 1 < pairs.len() && contiguous(&pairs[i + 1]) && pairs[i + 1][0] == p[0] + 2 {
                let mf = mem(self.b, Mem::Wire);
                terms.push(self.b.ins().uload32(mf, wire, p[0] as i32));
                i += 2;
                continue;
            }
            let w = match *p.as_slice() {
                [hi, lo] if lo == hi + 1 => {
                    let mf = mem(self.b, Mem::Wire);
                    self.b.ins().uload16(types::I64, mf, wire, hi as i32)
                }
                [hi, lo] => {
                    let mf = mem(self.b, Mem::Wire);
                    let h = self.b.ins().uload8(types::I64, mf, wire, hi as i32);
                    let mf = mem(self.b, Mem::Wire);
                    let l = self.b.ins().uload8(types::I64, mf, wire, lo as i32);
                    let l = self.b.ins().ishl_imm_u(l, 8);
                    self.b.ins().bor(h, l)
                }
                [hi] => {
                    let mf = mem(self.b, Mem::Wire);
                    self.b.ins().uload8(types::I64, mf, wire, hi as i32)
                }
                _ => unreachable!("chunks of two"),
            };
            terms.push(w);
            i += 1;
        }
        // A tree of additions: the sum's latency grows with the log of the terms.
        while terms.len() > 1 {
            let next: Vec<Value> =
                terms.chunks(2).map(|c| if let [a, b] = *c { self.b.ins().iadd(a, b) } else { c[0] }).collect();
            terms = next;
        }
        match terms.first() {
            Some(t) => *t,
            None => self.b.ins().iconst(types::I64, 0),
        }
    }

    /// A [`Gen::csum16_raw`] sum folded to 16 bits and complemented: the
    /// checksum, byte-swapped (see [`Gen::csum16_swapped`]).
    fn csum16_fold(&mut self, sum: Value) -> Value {
        // Folded with end-around carries by rotation: `x + rotl(x, half)`
        // holds the one's complement sum of x's two halves in its upper
        // half (the carry out of the lower half lands in it). 64 to 32
        // bits, then 32 to 16.
        let rot = self.b.ins().rotl_imm_u(sum, 32);
        let sum = self.b.ins().iadd(sum, rot);
        let sum = self.b.ins().ushr_imm_u(sum, 32);
        let s32 = self.b.ins().ireduce(types::I32, sum);
        let rot = self.b.ins().rotl_imm_u(s32, 16);
        let s32 = self.b.ins().iadd(s32, rot);
        let s32 = self.b.ins().ushr_imm_u(s32, 16);
        let sum = self.b.ins().uextend(types::I64, s32);
        self.b.ins().bxor_imm_u(sum, 0xffff)
    }

    /// Swaps the two bytes of a 16-bit value.
    fn swap16(&mut self, v: Value) -> Value {
        let lo = band_u(self.b, v, 0xff);
        let lo = self.b.ins().ishl_imm_u(lo, 8);
        let hi = self.b.ins().ushr_imm_u(v, 8);
        let hi = band_u(self.b, hi, 0xff);
        self.b.ins().bor(lo, hi)
    }

    /// The wire byte of field `s` when it is two whole bytes inside one
    /// piece of the wire grid: it can then be read and written in
    /// little-endian form (see [`Gen::csum16_swapped`], [`Gen::merge_le`]).
    fn le16_byte(&self, s: FieldSrc) -> Option<u32> {
        let FieldSrc::Wire { byte, shift, mask } = s else { return None };
        let (bit, width) = wire_bits(byte, shift, mask);
        (width == 16 && self.whole_in_piece(bit, width).is_some()).then_some(bit / 8)
    }

    /// Merges the low `n` bytes of `v`, in little-endian order (its lowest
    /// byte goes first), into the wire from byte `b` on, all inside one
    /// grid piece: the whole piece is read, merged and stored, as
    /// [`Gen::write_bits`] does, but without byte swaps.
    fn merge_le(&mut self, b: u32, n: u32, v: Value) {
        let wire = self.ptr(OFF_WIRE);
        let (cs, csize) = self.wire_grid.chunk(b);
        debug_assert!(b + n <= cs + csize, "bytes inside one piece");
        let ty = chunk_type(csize);
        let mf = mem(self.b, Mem::Wire);
        let cur = self.b.ins().load(ty, mf, wire, cs as i32);
        let cur = if ty == types::I64 { cur } else { self.b.ins().uextend(types::I64, cur) };
        let bytes = if n >= 8 { u64::MAX } else { (1u64 << (8 * n)) - 1 };
        let k = 8 * (b - cs);
        let kept = band_u(self.b, cur, !(bytes << k) as i64);
        let part = band_u(self.b, v, bytes as i64);
        let part = if k > 0 { self.b.ins().ishl_imm_u(part, i64::from(k)) } else { part };
        let out = self.b.ins().bor(kept, part);
        let out = if ty == types::I64 { out } else { self.b.ins().ireduce(ty, out) };
        let mf = mem(self.b, Mem::Wire);
        self.b.ins().store(mf, out, wire, cs as i32);
    }

    fn bool_to_i64(&mut self, c: Value) -> Value {
        self.b.ins().uextend(types::I64, c)
    }

    /// Whether [`Gen::fast`] can generate `f` (`data`: action data in scope).
    fn supported(f: &Fast, data: bool) -> bool {
        match f {
            Fast::None => false,
            Fast::Param { off, len } => data && *len <= 8 && off + 8 <= DATA_LEN,
            Fast::And(p) | Fast::Or(p) => Self::supported(&p.0, data) && Self::supported(&p.1, data),
            _ => true,
        }
    }

    /// Generates a shortcut expression's value (as `fast_u64` computes it).
    fn fast(&mut self, f: &Fast) -> Value {
        match f {
            Fast::Const(c) => self.b.ins().iconst(types::I64, *c as i64),
            Fast::Field(s) => self.read(*s),
            Fast::Param { off, len } => {
                let grid = Grid::data();
                match self.data_base {
                    Some(base) => self.read_bits(Mem::ActionData, base, 0, &grid, 8 * off, 8 * len),
                    None => self.read_bits(Mem::ActionData, self.ctx, OFF_DATA, &grid, 8 * off, 8 * len),
                }
            }
            Fast::AddMask { slot, c, mask } => {
                let v = self.read(*slot);
                let v = self.b.ins().iadd_imm_u(v, *c as i64);
                band_u(self.b, v, *mask as i64)
            }
            Fast::Valid(h) | Fast::NotValid(h) => {
                let base = self.ptr(OFF_VALID);
                let mf = mem(self.b, Mem::Valid);
                let v = self.b.ins().uload8(types::I64, mf, base, *h as i32);
                if matches!(f, Fast::NotValid(_)) {
                    self.b.ins().bxor_imm_u(v, 1)
                } else {
                    v
                }
            }
            Fast::Cmp { slot, c, op } => {
                let v = self.read(*slot);
                let r = self.b.ins().icmp_imm_u(int_cc(*op), v, *c as i64);
                self.bool_to_i64(r)
            }
            Fast::CmpFields { a, b, op } => {
                let (x, y) = (self.read(*a), self.read(*b));
                let r = self.b.ins().icmp(int_cc(*op), x, y);
                self.bool_to_i64(r)
            }
            Fast::AndConst { slot, mask } => {
                let v = self.read(*slot);
                band_u(self.b, v, *mask as i64)
            }
            Fast::NonZero(s) => {
                let v = self.read(*s);
                let r = self.b.ins().icmp_imm_u(IntCC::NotEqual, v, 0);
                self.bool_to_i64(r)
            }
            Fast::And(p) | Fast::Or(p) => {
                // Shortcut leaves have no side effects: evaluate both sides.
                let a = self.fast_bool(&p.0);
                let c = self.fast_bool(&p.1);
                if matches!(f, Fast::And(_)) {
                    self.b.ins().band(a, c)
                } else {
                    self.b.ins().bor(a, c)
                }
            }
            Fast::None => unreachable!("checked by `supported`"),
        }
    }

    /// [`Gen::fast`] of `f` as a truth value: 1 when nonzero, else 0.
    /// Why: valid flags, comparisons and their `&&`/`||` are 0 or 1
    /// already, and need no compare with zero.
    fn fast_bool(&mut self, f: &Fast) -> Value {
        match f {
            _ if is_truth_value(f) => self.fast(f),
            Fast::Const(c) => self.b.ins().iconst(types::I64, i64::from(*c != 0)),
            _ => {
                let v = self.fast(f);
                let r = self.b.ins().icmp_imm_u(IntCC::NotEqual, v, 0);
                self.bool_to_i64(r)
            }
        }
    }

    fn cond(&mut self, c: u32) {
        let cp = &self.plan.conds[c as usize];
        let v = if Self::supported(&cp.expr.fast, false) {
            self.stats.conditions_inline += 1;
            self.fast(&cp.expr.fast)
        } else {
            self.stats.conditions_helper += 1;
            let ci = self.b.ins().iconst(types::I32, i64::from(c));
            let call = self.call(self.h_cond, &[self.ctx, ci]);
            self.b.inst_results(call)[0]
        };
        let (t, f) = (self.block_for(cp.true_next), self.block_for(cp.false_next));
        self.b.ins().brif(v, t, &[], f, &[]);
    }

    /// Whether action `ai` can run inline (`data`: it has action data).
    fn action_inlinable(&self, ai: u32, data: bool) -> bool {
        let std = &self.plan.std;
        self.plan.actions[ai as usize].prims.iter().all(|p| match p {
            Prim::SetField { src, .. } => Self::supported(&src.fast, data),
            Prim::Count { idx, .. } => Self::supported(&idx.fast, data),
            Prim::ExecuteMeter { idx, dst: Dst::Field(f), .. } => {
                FieldSrc::of(&self.plan.layout.fields[*f as usize]).is_some() && Self::supported(&idx.fast, data)
            }
            Prim::RegWrite { arr, idx, val } => {
                self.plan.registers[*arr as usize].width <= 64
                    && Self::supported(&idx.fast, data)
                    && Self::supported(&val.fast, data)
            }
            Prim::RegRead { dst: Dst::Field(f), arr, idx } => {
                self.plan.registers[*arr as usize].width <= 64
                    && FieldSrc::of(&self.plan.layout.fields[*f as usize]).is_some()
                    && Self::supported(&idx.fast, data)
            }
            Prim::MarkToDrop => [std.egress_spec, std.mcast_grp]
                .iter()
                .all(|f| f.is_none_or(|f| FieldSrc::of(&self.plan.layout.fields[f as usize]).is_some())),
            Prim::Exit => true,
            _ => false,
        })
    }

    /// Whether index `i` is inside register array `arr` (an `i8` condition)
    /// and the address of its cell (only to be used when inside).
    fn register_cell(&mut self, arr: u32, i: Value) -> (Value, Value) {
        let views = self.ptr(OFF_REGISTERS);
        let off = std::mem::size_of::<RegisterView>() as i32 * arr as i32;
        let mf = mem(self.b, Mem::Inputs);
        let len = self.b.ins().load(types::I64, mf, views, off + std::mem::offset_of!(RegisterView, len) as i32);
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, i, len);
        let mf = mem(self.b, Mem::Inputs);
        let cells = self.b.ins().load(types::I64, mf, views, off + std::mem::offset_of!(RegisterView, cells) as i32);
        let at = self.b.ins().imul_imm_u(i, std::mem::size_of::<crate::shared::RegCell>() as i64);
        (inside, self.b.ins().iadd(cells, at))
    }

    /// Generates action `ai` in the current block (data, if any, read at
    /// `Gen::data_base`; a helper-run action gets it copied into `JitCtx::data`).
    fn action(&mut self, ai: u32, data: bool) -> ActionEnd {
        if !self.action_inlinable(ai, data) {
            self.stats.actions_helper += 1;
            if let (true, Some(base)) = (data, self.data_base) {
                // The interpreter reads the data from the context.
                self.copy_bytes((Mem::ActionData, base, 0), (Mem::ActionData, self.ctx, OFF_DATA), HOT_RECORD as u32);
            }
            let a = self.b.ins().iconst(types::I32, i64::from(ai));
            let h = if data { self.h_action } else { self.h_action_nodata };
            let call = self.call(h, &[self.ctx, a]);
            return ActionEnd::Dynamic(self.b.inst_results(call)[0]);
        }
        self.stats.actions_inline += 1;
        let plan = self.plan;
        let mut exit = false;
        for p in &plan.actions[ai as usize].prims {
            match p {
                Prim::SetField { dst, mask, src } => match self.data_copy(*dst, &src.fast) {
                    Some((off, first, n)) => self.copy_data_to_wire(off, first, n),
                    None => {
                        let v = self.fast(&src.fast);
                        // A value no wider than the field needs no mask.
                        let fits = fast_bits(&src.fast).is_some_and(|b| b < 64 && mask64(b) & !*mask == 0);
                        self.write(*dst, v, if fits { u64::MAX } else { *mask });
                    }
                },
                Prim::Count { arr, idx } => {
                    // Inline: cell `i` of the array, when in range, counts one
                    // packet of the ingress length (`JitCtx::len`).
                    let i = self.fast(&idx.fast);
                    let views = self.ptr(OFF_COUNTERS);
                    let mf = mem(self.b, Mem::Inputs);
                    let len = self.b.ins().load(types::I64, mf, views, 16 * *arr as i32 + 8);
                    let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, i, len);
                    let (bump, next) = (self.b.create_block(), self.b.create_block());
                    self.b.ins().brif(inside, bump, &[], next, &[]);
                    self.b.switch_to_block(bump);
                    let mf = mem(self.b, Mem::Inputs);
                    let cells = self.b.ins().load(types::I64, mf, views, 16 * *arr as i32);
                    let at = self.b.ins().imul_imm_u(i, CELL_SIZE);
                    let cell = self.b.ins().iadd(cells, at);
                    let mf = mem(self.b, Mem::Counters);
                    let p = self.b.ins().load(types::I64, mf, cell, CELL_PACKETS);
                    let p = self.b.ins().iadd_imm_u(p, 1);
                    let mf = mem(self.b, Mem::Counters);
                    self.b.ins().store(mf, p, cell, CELL_PACKETS);
                    let n = self.packet_len();
                    let mf = mem(self.b, Mem::Counters);
                    let bytes = self.b.ins().load(types::I64, mf, cell, CELL_BYTES);
                    let bytes = self.b.ins().iadd(bytes, n);
                    let mf = mem(self.b, Mem::Counters);
                    self.b.ins().store(mf, bytes, cell, CELL_BYTES);
                    self.b.ins().jump(next, &[]);
                    self.b.switch_to_block(next);
                }
                Prim::ExecuteMeter { arr, idx, dst: Dst::Field(f) } => {
                    // The meter cell is updated by a helper (it is shared
                    // by the workers, behind a lock); the colour is written here.
                    let fi = &plan.layout.fields[*f as usize];
                    let dst = FieldSrc::of(fi).expect("checked by action_inlinable");
                    let i = self.fast(&idx.fast);
                    let a = self.b.ins().iconst(types::I32, i64::from(*arr));
                    let call = self.call(self.h_meter, &[self.ctx, a, i]);
                    let colour = self.b.inst_results(call)[0];
                    self.write(dst, colour, mask64(fi.width));
                }
                Prim::RegWrite { arr, idx, val } => {
                    // Inline: cell `i`, when in range, gets the value masked to
                    // the register's width (at most 64 bits: the high word stays 0).
                    let i = self.fast(&idx.fast);
                    let v = self.fast(&val.fast);
                    let v = band_u(self.b, v, mask64(plan.registers[*arr as usize].width) as i64);
                    let (inside, cell) = self.register_cell(*arr, i);
                    let (write, next) = (self.b.create_block(), self.b.create_block());
                    self.b.ins().brif(inside, write, &[], next, &[]);
                    self.b.switch_to_block(write);
                    let mf = mem(self.b, Mem::Registers);
                    self.b.ins().store(mf, v, cell, REG_LO);
                    self.b.ins().jump(next, &[]);
                    self.b.switch_to_block(next);
                }
                Prim::RegRead { dst: Dst::Field(f), arr, idx } => {
                    // Inline: cell `i`'s low word, or 0 out of range (as `Registers::get` gives).
                    let fi = &plan.layout.fields[*f as usize];
                    let dst = FieldSrc::of(fi).expect("checked by action_inlinable");
                    let i = self.fast(&idx.fast);
                    let (inside, cell) = self.register_cell(*arr, i);
                    let (read, next) = (self.b.create_block(), self.b.create_block());
                    self.b.append_block_param(next, types::I64);
                    let zero = self.b.ins().iconst(types::I64, 0);
                    self.b.ins().brif(inside, read, &[], next, &[zero.into()]);
                    self.b.switch_to_block(read);
                    let mf = mem(self.b, Mem::Registers);
                    let v = self.b.ins().load(types::I64, mf, cell, REG_LO);
                    self.b.ins().jump(next, &[v.into()]);
                    self.b.switch_to_block(next);
                    let v = self.b.block_params(next)[0];
                    self.write(dst, v, mask64(fi.width));
                }
                Prim::MarkToDrop => {
                    for (f, v) in [(plan.std.egress_spec, 511i64), (plan.std.mcast_grp, 0)] {
                        if let Some(f) = f {
                            let fi = &plan.layout.fields[f as usize];
                            let src = FieldSrc::of(fi).expect("checked by action_inlinable");
                            let c = self.b.ins().iconst(types::I64, v);
                            self.write(src, c, mask64(fi.width));
                        }
                    }
                }
                Prim::Exit => exit = true,
                _ => unreachable!("checked by action_inlinable"),
            }
        }
        if exit {
            ActionEnd::Exit
        } else {
            ActionEnd::Continue
        }
    }

    /// The integer key parts of table `t` when its lookups can run inline
    /// (see [`crate::plan::TablePlan::inline_key_parts`]).
    fn inline_key(&self, t: u32) -> Option<Vec<(crate::plan::KeyPart, u32)>> {
        self.plan.tables[t as usize].inline_key_parts().map(<[_]>::to_vec)
    }

    /// A key part's value (`plan::KeyPart::value`): a field, zero while its
    /// header is invalid, or a validity bit.
    fn key_part(&mut self, part: &crate::plan::KeyPart) -> Value {
        use crate::plan::KeyPart;
        match part {
            KeyPart::Field { src, header } => {
                let v = self.read(*src);
                match header {
                    Some(h) => {
                        let valid = self.ptr(OFF_VALID);
                        let mf = mem(self.b, Mem::Valid);
                        let ok = self.b.ins().uload8(types::I64, mf, valid, *h as i32);
                        let zero = self.b.ins().iconst(types::I64, 0);
                        self.b.ins().select(ok, v, zero)
                    }
                    None => v,
                }
            }
            KeyPart::Valid(h) => {
                let valid = self.ptr(OFF_VALID);
                let mf = mem(self.b, Mem::Valid);
                self.b.ins().uload8(types::I64, mf, valid, *h as i32)
            }
        }
    }

    /// A table key of at most 64 bits from its parts, as
    /// `control::integer_key` builds it.
    fn integer_key(&mut self, parts: &[(crate::plan::KeyPart, u32)]) -> Value {
        let mut key = self.b.ins().iconst(types::I64, 0);
        for (part, bits) in parts {
            let v = self.key_part(part);
            key = if *bits >= 64 {
                v
            } else {
                let sh = self.b.ins().ishl_imm_u(key, i64::from(*bits));
                self.b.ins().bor(sh, v)
            };
        }
        key
    }

    /// The key parts of table `t` when generated code builds its key as
    /// words (see [`crate::plan::TablePlan::word_key_parts`]).
    fn word_key(&self, t: u32) -> Option<Vec<(crate::plan::KeyPart, u32)>> {
        self.plan.tables[t as usize].word_key_parts().map(<[_]>::to_vec)
    }

    /// Builds table `t`'s key words from `parts` (as `Exec::build_key` does)
    /// and calls `h_table_words`; its result goes to `result`.
    fn word_lookup(&mut self, t: u32, parts: &[(crate::plan::KeyPart, u32)], result: Block) {
        let mut words: [Option<Value>; 4] = [None; 4];
        let mut at = 0u32;
        for (part, bits) in parts {
            let v = self.key_part(part);
            // The value's big-endian bytes first, as a little-endian word.
            let top = if *bits >= 64 { v } else { self.b.ins().ishl_imm_u(v, i64::from(64 - bits)) };
            let le = self.b.ins().bswap(top);
            let (w, shift) = ((at / 8) as usize, (at % 8) * 8);
            let low = if shift == 0 { le } else { self.b.ins().ishl_imm_u(le, i64::from(shift)) };
            words[w] = Some(match words[w] {
                Some(x) => self.b.ins().bor(x, low),
                None => low,
            });
            if shift != 0 && w + 1 < 4 {
                let high = self.b.ins().ushr_imm_u(le, i64::from(64 - shift));
                words[w + 1] = Some(match words[w + 1] {
                    Some(x) => self.b.ins().bor(x, high),
                    None => high,
                });
            }
            at += bits / 8;
        }
        let mut args = vec![self.ctx, self.b.ins().iconst(types::I32, i64::from(t))];
        for w in words {
            args.push(match w {
                Some(v) => v,
                None => self.b.ins().iconst(types::I64, 0),
            });
        }
        let call = self.call(self.h_table_words, &args);
        let r = self.b.inst_results(call)[0];
        self.b.ins().jump(result, &[r.into()]);
    }

    /// Looks table `t` up inline through its [`TableView`]: a direct array,
    /// a DIR-24-8 or open addressing, then the hit's hot record (its action dispatched to its
    /// case block, which reads the data from the record). A profile member
    /// or group goes to `h_indirect` with the record (no second lookup),
    /// whose result goes to `result` as `h_table`'s would. Misses, other
    /// index kinds and entries without a hot record go to `engine`.
    /// Returns the key (`engine` then hands it to `h_table_key`).
    fn inline_lookup(
        &mut self,
        t: u32,
        parts: &[(crate::plan::KeyPart, u32)],
        case_blocks: &[(Block, u32, usize, bool)],
        engine: Block,
        result: Block,
    ) -> Value {
        use crate::tables::{VIEW_DIR, VIEW_DIRECT, VIEW_HASH};
        let key = self.integer_key(parts);
        let views = self.ptr(OFF_VIEWS);
        let view = self.b.ins().iadd_imm_u(views, VIEW_SIZE * i64::from(t));
        // The kind and the shift (both `u32`, at 0 and 4) in one load.
        const _: () =
            assert!(std::mem::offset_of!(TableView, kind) == 0 && std::mem::offset_of!(TableView, shift) == 4);
        let mf = mem(self.b, Mem::Inputs);
        let kind_shift = self.b.ins().load(types::I64, mf, view, 0);
        let kind = band_u(self.b, kind_shift, 0xffff_ffff);
        let direct = self.b.create_block();
        let dir = self.b.create_block();
        let hash = self.b.create_block();
        let hit = self.b.create_block();
        self.b.append_block_param(hit, types::I64); // the hot record id

        // The kind the table's match type makes likely is tested first.
        let tp = &self.plan.tables[t as usize];
        let mut kinds = [(VIEW_DIRECT, direct), (VIEW_DIR, dir), (VIEW_HASH, hash)];
        let likely = match tp.match_type.as_str() {
            "lpm" => VIEW_DIR,
            _ if tp.key_bytes <= 2 => VIEW_DIRECT,
            _ => VIEW_HASH,
        };
        kinds.sort_by_key(|(k, _)| *k != likely);
        for (i, (k, blk)) in kinds.into_iter().enumerate() {
            let is = self.b.ins().icmp_imm_u(IntCC::Equal, kind, i64::from(k));
            let other = if i == 2 { engine } else { self.b.create_block() };
            self.b.ins().brif(is, blk, &[], other, &[]);
            if i < 2 {
                self.b.switch_to_block(other);
            }
        }

        // Open addressing (`exact::OpenMap::get`): from the home slot
        // `(key * HASH_MUL) >> shift`, 16-byte slots until the key (its
        // record id at offset 12) or an empty slot (a miss: the engine
        // applies the default).
        self.b.switch_to_block(hash);
        let mul = self.b.ins().iconst(types::I64, crate::exact::HASH_MUL as i64);
        let h = self.b.ins().imul(key, mul);
        let shift = self.b.ins().ushr_imm_u(kind_shift, 32);
        let home = self.b.ins().ushr(h, shift);
        let mf = mem(self.b, Mem::Inputs);
        let slots = self.b.ins().load(types::I64, mf, view, 8);
        let mf = mem(self.b, Mem::Inputs);
        let mask = self.b.ins().load(types::I64, mf, view, 24);
        let probe = self.b.create_block();
        self.b.append_block_param(probe, types::I64);
        self.b.ins().jump(probe, &[home.into()]);
        self.b.switch_to_block(probe);
        let i = self.b.block_params(probe)[0];
        let off = self.b.ins().ishl_imm_u(i, 4);
        let slot = self.b.ins().iadd(slots, off);
        let mf = mem(self.b, Mem::Tables);
        let value = self.b.ins().uload32(mf, slot, 8);
        let empty = self.b.ins().icmp_imm_u(IntCC::Equal, value, i64::from(crate::exact::EMPTY));
        let compare = self.b.create_block();
        self.b.ins().brif(empty, engine, &[], compare, &[]);
        self.b.switch_to_block(compare);
        let mf = mem(self.b, Mem::Tables);
        let k = self.b.ins().load(types::I64, mf, slot, 0);
        let same = self.b.ins().icmp(IntCC::Equal, k, key);
        let step = self.b.create_block();
        let found = self.b.create_block();
        self.b.ins().brif(same, found, &[], step, &[]);
        self.b.switch_to_block(found);
        let mf = mem(self.b, Mem::Tables);
        let r = self.b.ins().uload32(mf, slot, 12);
        self.b.ins().jump(hit, &[r.into()]);
        self.b.switch_to_block(step);
        let next = self.b.ins().iadd_imm_u(i, 1);
        let next = self.b.ins().band(next, mask);
        self.b.ins().jump(probe, &[next.into()]);

        // Direct array: `a[key]`, the record id (0, the cold record, for no entry).
        self.b.switch_to_block(direct);
        let mf = mem(self.b, Mem::Inputs);
        let len = self.b.ins().load(types::I64, mf, view, 24);
        let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, key, len);
        let read = self.b.create_block();
        self.b.ins().brif(inside, read, &[], engine, &[]);
        self.b.switch_to_block(read);
        let mf = mem(self.b, Mem::Inputs);
        let a = self.b.ins().load(types::I64, mf, view, 8);
        let off = self.b.ins().ishl_imm_u(key, 2);
        let addr = self.b.ins().iadd(a, off);
        let mf = mem(self.b, Mem::Tables);
        let r = self.b.ins().uload32(mf, addr, 0);
        self.b.ins().jump(hit, &[r.into()]);

        // DIR-24-8 of record ids (`lpm::DirLpm::record`); 0 for no route.
        self.b.switch_to_block(dir);
        let k32 = band_u(self.b, key, 0xffff_ffff);
        let shift = self.b.ins().ushr_imm_u(kind_shift, 32);
        let mf = mem(self.b, Mem::Inputs);
        let top = self.b.ins().load(types::I64, mf, view, 8);
        let idx = self.b.ins().ushr(k32, shift);
        let off = self.b.ins().ishl_imm_u(idx, 2);
        let addr = self.b.ins().iadd(top, off);
        let mf = mem(self.b, Mem::Tables);
        let slot = self.b.ins().uload32(mf, addr, 0);
        let ext = self.b.create_block();
        let group = band_u(self.b, slot, i64::from(crate::lpm::GROUP_BIT));
        self.b.ins().brif(group, ext, &[], hit, &[slot.into()]);
        self.b.switch_to_block(ext);
        let g = band_u(self.b, slot, i64::from(!crate::lpm::GROUP_BIT));
        let hi = self.b.ins().ishl(g, shift);
        let one = self.b.ins().iconst(types::I64, 1);
        let low_mask = self.b.ins().ishl(one, shift);
        let low_mask = self.b.ins().iadd_imm_u(low_mask, -1i64);
        let lo = self.b.ins().band(k32, low_mask);
        let i = self.b.ins().bor(hi, lo);
        let mf = mem(self.b, Mem::Inputs);
        let base = self.b.ins().load(types::I64, mf, view, 16);
        let off = self.b.ins().ishl_imm_u(i, 2);
        let addr = self.b.ins().iadd(base, off);
        let mf = mem(self.b, Mem::Tables);
        let slot = self.b.ins().uload32(mf, addr, 0);
        self.b.ins().jump(hit, &[slot.into()]);

        // The hit's hot record (the cold record 0 for no entry, whose
        // action sends the packet to the engine), then its action.
        self.b.switch_to_block(hit);
        let r = self.b.block_params(hit)[0];
        let mf = mem(self.b, Mem::Inputs);
        let hot = self.b.ins().load(types::I64, mf, view, 32);
        let off = self.b.ins().imul_imm_u(r, 48);
        let rec = self.b.ins().iadd(hot, off);
        let mf = mem(self.b, Mem::Tables);
        let action = self.b.ins().uload32(mf, rec, 0);
        // The action reads its data straight from the record (no copy).
        let data = self.b.ins().iadd_imm_u(rec, i64::from(crate::tables::HOT_DATA_OFFSET));
        let mut sw = CaseSwitch::new();
        let mut seen = Vec::new();
        let mut trampolines = Vec::new();
        for (blk, a, _, is_hit) in case_blocks {
            if *is_hit && !seen.contains(a) {
                seen.push(*a);
                let t = self.b.create_block();
                trampolines.push((t, *blk));
                sw.set_entry(u128::from(*a), t);
            }
        }
        if self.plan.tables[t as usize].profile.is_some() {
            let other = self.b.create_block();
            sw.emit(self.b, action, other);
            self.b.switch_to_block(other);
            let indirect = self.b.create_block();
            let cold = self.b.ins().icmp_imm_u(IntCC::Equal, action, i64::from(u32::MAX));
            self.b.ins().brif(cold, indirect, &[], engine, &[]);
            self.b.switch_to_block(indirect);
            let ti = self.b.ins().iconst(types::I32, i64::from(t));
            let call = self.call(self.h_indirect, &[self.ctx, ti, rec]);
            let r = self.b.inst_results(call)[0];
            self.b.ins().jump(result, &[r.into()]);
        } else {
            sw.emit(self.b, action, engine);
        }
        for (t, blk) in trampolines {
            self.b.switch_to_block(t);
            self.b.ins().jump(blk, &[data.into()]);
        }
        key
    }

    /// Ends the current block after an action: to `next`, or out on exit.
    fn after_action(&mut self, end: ActionEnd, next: Option<Node>) {
        match end {
            ActionEnd::Continue => {
                let n = self.block_for(next);
                self.b.ins().jump(n, &[]);
            }
            ActionEnd::Exit => {
                self.b.ins().jump(self.ret, &[]);
            }
            ActionEnd::Dynamic(exit) => {
                let n = self.block_for(next);
                self.b.ins().brif(exit, self.ret, &[], n, &[]);
            }
        }
    }

    fn table(&mut self, t: u32) {
        self.stats.tables += 1;
        let tp = &self.plan.tables[t as usize];
        if let Some((a, next)) = tp.inline_default {
            let end = self.action(a, false);
            self.after_action(end, next);
            return;
        }
        // One block per (action position, hit): the action inline, then the next node.
        // Each takes where its action data is read (see `Gen::data_base`).
        let mut case_blocks = Vec::new();
        for (pos, a) in tp.actions.iter().enumerate() {
            for hit in [false, true] {
                let blk = self.b.create_block();
                self.b.append_block_param(blk, types::I64);
                case_blocks.push((blk, *a, pos, hit));
            }
        }
        let engine = self.b.create_block();
        // A helper's result (`h_table` or `h_indirect`).
        let result = self.b.create_block();
        self.b.append_block_param(result, types::I64);
        let mut int_key = None;
        if let Some(parts) = self.inline_key(t) {
            int_key = Some(self.inline_lookup(t, &parts, &case_blocks, engine, result));
        } else if let Some(parts) = self.word_key(t) {
            self.word_lookup(t, &parts, result);
        } else if let Some(parts) = tp.key128.as_deref().filter(|p| p.iter().map(|(_, b)| *b).sum::<u32>() <= 64) {
            // Not looked up inline (a direct counter, meter or idle
            // timeout): the key is still built here, not by the engine.
            int_key = Some(self.integer_key(parts));
            self.b.ins().jump(engine, &[]);
        } else {
            self.b.ins().jump(engine, &[]);
        }
        self.b.switch_to_block(engine);
        let ti = self.b.ins().iconst(types::I32, i64::from(t));
        // The key built inline goes along: the helper need not build it again.
        let call = match int_key {
            Some(k) => self.call(self.h_table_key, &[self.ctx, ti, k]),
            None => self.call(self.h_table, &[self.ctx, ti]),
        };
        let r = self.b.inst_results(call)[0];
        self.b.ins().jump(result, &[r.into()]);
        self.b.switch_to_block(result);
        let r = self.b.block_params(result)[0];
        let hot = self.b.create_block();
        let full = self.b.create_block();
        let neg = self.b.ins().icmp_imm_u(IntCC::SignedLessThan, r, 0);
        self.b.ins().brif(neg, full, &[], hot, &[]);

        // Hot results: case `2 * position + hit`.
        self.b.switch_to_block(hot);
        let mut cases = CaseSwitch::new();
        let fallback = self.b.create_block();
        let mut trampolines = Vec::new();
        for (blk, _, pos, hit) in &case_blocks {
            let t = self.b.create_block();
            trampolines.push((t, *blk));
            cases.set_entry((2 * pos + *hit as usize) as u128, t);
        }
        let in_context = self.b.ins().iadd_imm_u(self.ctx, i64::from(OFF_DATA));
        cases.emit(self.b, r, fallback);
        for (t, blk) in trampolines {
            self.b.switch_to_block(t);
            self.b.ins().jump(blk, &[in_context.into()]);
        }
        for (blk, a, pos, hit) in case_blocks {
            self.b.switch_to_block(blk);
            let next = match (hit, tp.next_hit, tp.next_miss) {
                (true, Some(n), _) | (false, _, Some(n)) => n,
                _ => tp.next_by_action[pos],
            };
            self.data_base = Some(self.b.block_params(blk)[0]);
            let end = self.action(a, true);
            self.data_base = None;
            self.after_action(end, next);
        }
        // Not expected (the helper only returns listed actions): end the pipeline.
        self.b.switch_to_block(fallback);
        self.b.ins().jump(self.ret, &[]);

        // Applied by the interpreter: `-1 - next node`, or i64::MIN on exit.
        self.b.switch_to_block(full);
        let exit = self.b.ins().icmp_imm_u(IntCC::Equal, r, i64::MIN);
        let dispatch = self.b.create_block();
        self.b.ins().brif(exit, self.ret, &[], dispatch, &[]);
        self.b.switch_to_block(dispatch);
        let minus_one = self.b.ins().iconst(types::I64, -1);
        let enc = self.b.ins().isub(minus_one, r);
        let mut succ: Vec<Option<Node>> = vec![tp.base_default_next];
        succ.extend(tp.next_by_action.iter().copied());
        succ.extend(tp.next_hit);
        succ.extend(tp.next_miss);
        let mut seen = Vec::new();
        let mut sw = CaseSwitch::new();
        for n in succ {
            let e = encode_node(n);
            if !seen.contains(&e) {
                seen.push(e);
                let blk = self.block_for(n);
                sw.set_entry(e as u128, blk);
            }
        }
        let other = self.b.create_block();
        sw.emit(self.b, enc, other);
        // Any other node (not expected): let the interpreter run the rest.
        self.b.switch_to_block(other);
        self.call(self.h_run_from, &[self.ctx, enc]);
        self.b.ins().jump(self.ret, &[]);
    }
}

/// The `Exec` behind a context.
///
/// # Safety
/// `ctx` must be the live context of a running compiled pipeline.
unsafe fn exec_of<'a>(ctx: *mut JitCtx) -> (&'a mut Exec<'a>, &'a mut [u8; 64]) {
    // Engine code may write any field (see `JitCtx::dirty`).
    (*ctx).dirty = 1;
    exec_reading(ctx)
}

/// [`exec_of`] for engine code that writes no PHV field: a table lookup
/// that hands its action back to generated code (its counters and caches
/// are table state), a meter (generated code writes its colour). Why: the
/// next packet's setup then stays the short one (see `JitCtx::dirty`);
/// programs that look up or meter through helpers on every packet would
/// otherwise zero the whole PHV for every packet.
///
/// # Safety
/// As [`exec_of`].
unsafe fn exec_reading<'a>(ctx: *mut JitCtx) -> (&'a mut Exec<'a>, &'a mut [u8; 64]) {
    let c = &mut *ctx;
    let ex = &mut *(c.exec as *mut Exec<'a>);
    if c.meta_fresh == 0 {
        fresh_meta(ex.meta, c.len);
        c.meta_fresh = 1;
    }
    (ex, &mut c.data)
}

/// Resets packet metadata for a packet of `len` bytes as it arrives.
fn fresh_meta(meta: &mut crate::control::PktMeta, len: u64) {
    let len = len as u32;
    *meta = crate::control::PktMeta { len_reg: len, ingress_len: len, ..Default::default() };
}

/// After a helper ran interpreter code: takes its `exit` flag (the compiled
/// code acts on the returned value, so the flag never leaks into the next
/// pipeline of a forwarding run) and records in the context whether the
/// packet now needs the general path after its pipeline.
///
/// # Safety
/// As [`exec_of`].
unsafe fn settle(ctx: *mut JitCtx) -> bool {
    let (ex, _) = exec_of(ctx);
    let exit = std::mem::take(&mut ex.meta.exit);
    let m = &*ex.meta;
    let special = m.clone.is_some()
        || m.resubmit.is_some()
        || m.recirculate.is_some()
        || m.truncate.is_some()
        || m.len_reg != m.ingress_len;
    (*ctx).special |= special as u64;
    exit
}

extern "C" fn h_table(ctx: *mut JitCtx, ti: u32) -> i64 {
    // SAFETY: called only by generated code with its live context.
    unsafe { table_result(ctx, |ex, data| ex.apply_table_for_jit(ti as usize, data)) }
}

/// Runs a table helper's work `f` on the context's `Exec` and data area;
/// when the table was applied by the interpreter (a negative result),
/// settles the context as `settle` says. The one body of the table helpers.
///
/// # Safety
/// `ctx` must be the live context of a running compiled pipeline.
#[inline(always)]
unsafe fn table_result(ctx: *mut JitCtx, f: impl FnOnce(&mut Exec<'_>, &mut [u8; 64]) -> i64) -> i64 {
    // A non-negative result hands the action back: the lookup wrote no field.
    let (ex, data) = exec_reading(ctx);
    let r = f(ex, data);
    if r < 0 {
        // The interpreter ran the table's action (`settle` marks the PHV dirty).
        settle(ctx);
    }
    r
}

extern "C" fn h_action(ctx: *mut JitCtx, ai: u32) -> u32 {
    // SAFETY: as above.
    let (ex, data) = unsafe { exec_of(ctx) };
    let d = *data;
    ex.run_action(ai as usize, &d);
    // SAFETY: as above.
    unsafe { settle(ctx) as u32 }
}

extern "C" fn h_action_nodata(ctx: *mut JitCtx, ai: u32) -> u32 {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.run_action(ai as usize, &[]);
    // SAFETY: as above.
    unsafe { settle(ctx) as u32 }
}

extern "C" fn h_cond(ctx: *mut JitCtx, ci: u32) -> u32 {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.eval_cond(ci as usize) as u32
}

extern "C" fn h_run_from(ctx: *mut JitCtx, node: i64) {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.run_pipeline(decode_node(node));
    // SAFETY: as above.
    unsafe { settle(ctx) };
}

/// The result of table `ti` for an indirect entry whose hot record `rec`
/// the generated code found inline (see `Gen::inline_lookup`); the same
/// encoding as `h_table`.
extern "C" fn h_indirect(ctx: *mut JitCtx, ti: u32, rec: *const HotEntry) -> i64 {
    // SAFETY: `rec` points into the table's current view (valid until the
    // table changes, which cannot happen while a packet runs).
    let hot = unsafe { *rec };
    // SAFETY: called only by generated code with its live context.
    unsafe {
        table_result(ctx, |ex, data| match ex.indirect_for_jit(ti as usize, &hot, data) {
            Some(r) => r,
            None => ex.apply_table_for_jit(ti as usize, data),
        })
    }
}

/// `h_table` for a table whose key the generated code built as words (see
/// `Gen::word_lookup`).
extern "C" fn h_table_words(ctx: *mut JitCtx, ti: u32, w0: u64, w1: u64, w2: u64, w3: u64) -> i64 {
    // SAFETY: called only by generated code with its live context.
    unsafe { table_result(ctx, |ex, data| ex.apply_table_words_for_jit(ti as usize, [w0, w1, w2, w3], data)) }
}

/// `h_table` for a table whose integer key generated code built (see
/// `Gen::inline_lookup`).
extern "C" fn h_table_key(ctx: *mut JitCtx, ti: u32, key: u64) -> i64 {
    // SAFETY: called only by generated code with its live context.
    unsafe { table_result(ctx, |ex, data| ex.apply_table_key_for_jit(ti as usize, key, data)) }
}

/// Executes cell `i` of meter array `arr` for the running packet (as the
/// interpreter's `execute_meter`): the colour, 0 (green) out of range.
extern "C" fn h_meter(ctx: *mut JitCtx, arr: u32, i: u64) -> u64 {
    // SAFETY: as above. Generated code writes the colour to its field.
    let (ex, _) = unsafe { exec_reading(ctx) };
    u64::from(ex.execute_meter(arr as usize, i as usize))
}

/// Puts action data `d` (at most `HOT_DATA` bytes) into `out`, zero-padded
/// to `HOT_RECORD` bytes. Why not two slice copies: their lengths are known
/// only at run time, so they call `memcpy` and `memset`; a fixed clear and a
/// short copy are a few moves.
#[inline(always)]
fn put_data(out: &mut [u8; 64], d: &[u8]) {
    out[..HOT_RECORD].fill(0);
    crate::phv::copy_short(&mut out[..d.len()], d);
}

/// Table results as the compiled code consumes them (see `h_table`).
impl Exec<'_> {
    /// Looks table `ti` up for compiled code. When the table has nothing
    /// else to do on a hit (no direct counter or meter, no idle timeout) and
    /// the action it lands on (a direct entry's, a profile member's, the
    /// member an action selector picks, or the default) has at most
    /// `HOT_DATA` bytes of data, it copies the zero-padded data into `out`
    /// and returns `2 * position of the action in the table + hit`: the
    /// action then runs in generated code. Anything else is applied
    /// completely here; the result is then `-1 - encoded next node`, or
    /// `i64::MIN` when the action exited.
    pub fn apply_table_for_jit(&mut self, ti: usize, out: &mut [u8; 64]) -> i64 {
        if self.plan.tables[ti].hit_returns_to_jit() {
            let hit = self.lookup_hit(ti);
            return self.result_or_apply(ti, hit, out);
        }
        self.apply_table_fully(ti)
    }

    /// [`Exec::apply_table_for_jit`] for a table whose key generated code
    /// built as the four words `words` of its bytes (see `Gen::word_lookup`).
    pub fn apply_table_words_for_jit(&mut self, ti: usize, words: [u64; 4], out: &mut [u8; 64]) -> i64 {
        let tp = &self.plan.tables[ti];
        if self.trace.is_some() || !tp.hit_returns_to_jit() || tp.key_bytes > 32 {
            return self.apply_table_for_jit(ti, out);
        }
        // The key bytes, for range checks and byte-keyed indexes.
        crate::control::key_bytes_of_words(self.key_buf, &words, tp.key_bytes);
        let hit = self.state.tables[ti].lookup_cached(self.key_buf, Some(&words));
        self.result_or_apply(ti, hit, out)
    }

    /// [`Exec::apply_table_for_jit`] for a table whose integer key (at most
    /// 64 bits, as `control::integer_key` builds it) generated code built.
    pub fn apply_table_key_for_jit(&mut self, ti: usize, key: u64, out: &mut [u8; 64]) -> i64 {
        if self.trace.is_some() || !self.plan.tables[ti].hit_returns_to_jit() {
            return self.apply_table_for_jit(ti, out);
        }
        match self.state.tables[ti].lookup_u128(u128::from(key)) {
            Some(hit) => self.result_or_apply(ti, hit, out),
            // An index that needs the key's bytes.
            None => self.apply_table_for_jit(ti, out),
        }
    }

    /// The result for generated code of lookup result `hit` of table `ti`
    /// (see [`Exec::apply_table_for_jit`]); `None` when the table has to be
    /// applied completely.
    fn result_for_jit(&mut self, ti: usize, hit: Option<u32>, out: &mut [u8; 64]) -> Option<i64> {
        let r = self.action_for_jit(ti, hit, out)?;
        if let (Some(h), true) = (hit, self.plan.tables[ti].with_counters) {
            // The direct counter, as `apply_table` counts a hit (only here,
            // once the table is not going to be applied completely).
            self.count_hit(ti, h);
        }
        Some(r)
    }

    /// [`Exec::result_for_jit`], or the table applied completely when the
    /// result cannot go back to generated code.
    fn result_or_apply(&mut self, ti: usize, hit: Option<u32>, out: &mut [u8; 64]) -> i64 {
        match self.result_for_jit(ti, hit, out) {
            Some(r) => r,
            None => self.apply_table_fully(ti),
        }
    }

    /// [`Exec::result_for_jit`] but for the direct counter.
    fn action_for_jit(&mut self, ti: usize, hit: Option<u32>, out: &mut [u8; 64]) -> Option<i64> {
        let tp = &self.plan.tables[ti];
        let (a, hit) = match hit {
            Some(h) => {
                let hot = self.state.tables[ti].hot(h);
                if hot.action != u32::MAX {
                    // The record is zero-padded; `out` beyond it stays zero.
                    out[..hot.data.len()].copy_from_slice(&hot.data);
                    (hot.action, 1)
                } else {
                    let hot = *hot;
                    return self.indirect_for_jit(ti, &hot, out);
                }
            }
            None => match &self.state.tables[ti].default {
                Some((a, d)) if d.len() <= crate::tables::HOT_DATA => {
                    put_data(out, d);
                    (*a, 0)
                }
                _ => return None,
            },
        };
        tp.actions.iter().position(|x| *x == a).map(|pos| 2 * pos as i64 + hit)
    }

    /// Applies table `ti` in the interpreter, for generated code: `-1 -
    /// encoded next node`, or `i64::MIN` when the action exited.
    fn apply_table_fully(&mut self, ti: usize) -> i64 {
        let next = self.apply_table(ti);
        if self.meta.exit {
            i64::MIN
        } else {
            -1 - encode_node(next)
        }
    }

    /// The result of an indirect entry (hot record `hot`, a profile member
    /// or group) of table `ti`, as [`Exec::apply_table_for_jit`] returns it:
    /// the member's (or the member the selector picks) action and data for
    /// generated code, or the end of an empty group. `None` when the member
    /// is missing or its data does not fit (the caller then applies the
    /// table completely).
    fn indirect_for_jit(&mut self, ti: usize, hot: &HotEntry, out: &mut [u8; 64]) -> Option<i64> {
        let tp = &self.plan.tables[ti];
        let (is_group, id) = hot.indirect()?;
        let m = if is_group {
            match self.select_member(tp.profile, id) {
                Some(m) => m,
                // An empty group runs no action (as `apply_table`).
                None => return Some(-1 - encode_node(tp.base_default_next)),
            }
        } else {
            id
        };
        let a = self.member_for_jit(tp.profile, m, out)?;
        tp.actions.iter().position(|x| *x == a).map(|pos| 2 * pos as i64 + 1)
    }

    /// Copies profile member `m`'s action data into `out` (zero-padded to
    /// `HOT_RECORD` bytes) and returns its action, when the data fits.
    fn member_for_jit(&self, profile: Option<u32>, m: u32, out: &mut [u8; 64]) -> Option<u32> {
        let p = &self.state.profiles[profile? as usize];
        let (a, d) = p.members.get(m as usize)?.as_ref()?;
        if d.len() > crate::tables::HOT_DATA {
            return None;
        }
        put_data(out, d);
        Some(*a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_exits_zero_only_what_their_path_did_not_extract() {
        let model = sluice_json::load_str(include_str!("../../../examples/router.json")).expect("router parses");
        let plan = crate::plan::compile(&model).expect("router compiles");
        let shape = parser_shape(&plan).expect("router's parser compiles");
        let z = ZeroPlan::of(&plan, shape.init, &shape.order);
        let h = |n: &str| plan.layout.headers.iter().position(|x| x.name == n).expect("a header") as u32;
        let st = |n: &str| plan.states.iter().position(|x| x.name == n).expect("a state") as u32;
        let (eth, ip4, ip6) = (h("ethernet"), h("ipv4"), h("ipv6"));
        let set = |hs: &[u32]| hs.iter().copied().collect::<BTreeSet<u32>>();
        // Every path either extracts a header or surely does not.
        assert!(z.setup.is_empty(), "setup zeroes {:?}", z.setup);
        assert_eq!(z.on_exit(st("start"), &[]), set(&[eth, ip4, ip6]), "too short for Ethernet");
        assert_eq!(z.on_exit(st("start"), &[eth]), set(&[ip4, ip6]), "neither IP version");
        assert_eq!(z.on_exit(st("parse_ipv4"), &[]), set(&[ip4, ip6]), "too short for IPv4");
        assert_eq!(z.on_exit(st("parse_ipv4"), &[ip4]), set(&[ip6]));
        assert_eq!(z.on_exit(st("parse_ipv6"), &[ip6]), set(&[ip4]));
    }

    #[test]
    fn headers_a_path_may_or_may_not_have_extracted_are_zeroed_by_the_setup() {
        // fabric: VLAN tags are optional before IPv4, TCP follows IPv4 or GTP-U.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/p4c-bench/fabric/fabric.json");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e} (the shared corpora)"));
        let plan = crate::plan::compile(&sluice_json::load_str(&text).expect("fabric parses")).expect("compiles");
        let order: Vec<u32> = (0..plan.states.len() as u32).collect();
        let z = ZeroPlan::of(&plan, plan.init_state.expect("a parser"), &order);
        let h = |n: &str| plan.layout.headers.iter().position(|x| x.name == n).expect("a header") as u32;
        let st = |n: &str| plan.states.iter().position(|x| x.name == n).expect("a state") as u32;
        for ambiguous in ["vlan_tag", "inner_vlan_tag", "packet_out"] {
            assert!(z.setup.contains(&h(ambiguous)), "{ambiguous} is zeroed before parsing");
            assert!(!z.on_exit(st("parse_tcp"), &[h("tcp")]).contains(&h(ambiguous)));
        }
        assert!(!z.setup.contains(&h("tcp")), "a path surely extracts TCP or surely does not");
        assert!(z.on_exit(st("parse_icmp"), &[h("icmp")]).contains(&h("tcp")));
        assert!(!z.on_exit(st("parse_tcp"), &[h("tcp")]).contains(&h("tcp")));
    }

    /// The router with its `forward` action also rewriting the IPv4
    /// source address (as a NAT would): one more checksummed field written.
    fn router_rewriting_the_source() -> String {
        let json = include_str!("../../../examples/router.json");
        let at = json.find("\"name\" : \"RouterIngress.forward\"").expect("the forward action");
        let prims = at + json[at..].find("\"primitives\" : [").expect("its primitives") + "\"primitives\" : [".len();
        let nat = r#"{"op": "assign", "parameters": [{"type": "field", "value": ["ipv4", "src_addr"]},
            {"type": "hexstr", "value": "0xc0a80a01"}]},"#;
        format!("{}{nat}{}", &json[..prims], &json[prims..])
    }

    #[test]
    fn checksum_updates_sum_again_only_the_words_the_program_may_write() {
        let stash_of = |json: &str| {
            let plan = crate::plan::compile(&sluice_json::load_str(json).expect("parses")).expect("compiles");
            let shape = forward_shape(&plan).expect("a forwarding function");
            let ip4 = plan.layout.headers.iter().find(|h| h.name == "ipv4").and_then(|h| h.wire).expect("ipv4").0;
            let parser = parser_shape(&plan).expect("a compiled parser");
            let verified = parser.ends.as_ref().map(|e| e.2.clone()).unwrap_or_default();
            let stash = plan_stash(&plan, &shape.sums, &verified);
            let [Some(st)] = stash.as_slice() else { panic!("one stashed checksum, not {}", stash.len()) };
            let rel =
                |ws: &[Vec<u32>]| ws.iter().map(|w| w.iter().map(|b| b - ip4).collect()).collect::<Vec<Vec<u32>>>();
            (rel(&st.stable), rel(&st.changing), st.decided)
        };
        // The router writes only the TTL (byte 8, summed with the protocol)
        // of the IPv4 header's nine checksummed words (the checksum, bytes
        // 10 and 11, is not one of them).
        let (stable, changing, decided) = stash_of(include_str!("../../../examples/router.json"));
        assert_eq!(changing, vec![vec![8, 9]]);
        assert_eq!(
            stable,
            vec![
                vec![0, 1],
                vec![2, 3],
                vec![4, 5],
                vec![6, 7],
                vec![12, 13],
                vec![14, 15],
                vec![16, 17],
                vec![18, 19]
            ]
        );
        assert!(decided, "validity and IHL are never written: the end of parsing decides the update");
        // Rewriting the source address adds its two words.
        let (stable, changing, _) = stash_of(&router_rewriting_the_source());
        assert_eq!(changing, vec![vec![8, 9], vec![12, 13], vec![14, 15]]);
        assert_eq!(stable.len(), 6);
        // Edge updates the IPv4 checksum without verifying it: nothing to share.
        let plan =
            crate::plan::compile(&sluice_json::load_str(include_str!("../../../examples/edge.json")).expect("parses"))
                .expect("compiles");
        let sums = forward_shape(&plan).expect("a forwarding function").sums;
        assert_eq!(sums.len(), 1);
        let verified = parser_shape(&plan).and_then(|p| p.ends).map(|e| e.2).unwrap_or_default();
        assert!(plan_stash(&plan, &sums, &verified).iter().all(Option::is_none));
    }

    #[test]
    fn stashed_checksum_sums_give_the_interpreters_packets() {
        let json = router_rewriting_the_source();
        let mut sw = crate::load_switch(&json).expect("loads");
        assert_eq!(sw.mode(), crate::ExecMode::Compiled);
        for c in [
            "table_add RouterIngress.nexthop RouterIngress.forward 1 => 2 02:00:00:00:00:02 00:00:5e:00:00:02",
            "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.0.0/8 => 1",
        ] {
            sw.command(c).unwrap_or_else(|e| panic!("{c}: {e:?}"));
        }
        let mut twin = sw.scratch().expect("an interpreted copy");
        assert_eq!(twin.mode(), crate::ExecMode::Interpreted);
        let ipv4 = |ihl: u8, ttl: u8, good_sum: bool| {
            let mut p = vec![0u8; 14 + 4 * usize::from(ihl) + 8];
            p[12] = 0x08;
            p[14] = 0x40 | ihl;
            let total = (p.len() - 14) as u16;
            p[16..18].copy_from_slice(&total.to_be_bytes());
            p[22] = ttl;
            p[23] = 17;
            p[26..30].copy_from_slice(&[172, 16, 0, 9]);
            p[30..34].copy_from_slice(&[10, 1, 2, 3]);
            let hdr = 14..14 + 4 * usize::from(ihl);
            let sum = crate::control::csum16_ranges(&p[hdr.clone()], &[(0, 10), (12, hdr.len() as u32)]);
            let sum = if good_sum { sum } else { sum ^ 0x0100 };
            p[24..26].copy_from_slice(&sum.to_be_bytes());
            p
        };
        // Good checksums (updated with the TTL and the new source), a bad
        // one (dropped), an IHL of 6 (no verification, no update) and a
        // TTL of 1 (dropped).
        let batch = [ipv4(5, 64, true), ipv4(5, 64, false), ipv4(6, 9, true), ipv4(5, 1, true), ipv4(5, 2, true)];
        let mut compiled = Vec::new();
        sw.process_batch(0, batch.iter().map(|p| p.as_slice()), &mut |port, d| compiled.push((port, d.to_vec())));
        let mut interpreted = Vec::new();
        for p in &batch {
            twin.process(0, p, &mut |port, d| interpreted.push((port, d.to_vec())));
        }
        assert_eq!(compiled, interpreted);
        assert_eq!(compiled.len(), 3, "three packets forwarded: {compiled:?}");
        let (_, first) = &compiled[0];
        assert_eq!(&first[26..30], &[192, 168, 10, 1], "source rewritten");
        assert_eq!(first[22], 63, "TTL decremented");
        let sum = crate::control::csum16_ranges(&first[14..34], &[(0, 10), (12, 20)]);
        assert_eq!(u16::from_be_bytes([first[24], first[25]]), sum, "the checksum covers the new header");
    }

    #[test]
    fn node_encoding_round_trips() {
        for n in [None, Some(Node::Table(0)), Some(Node::Cond(0)), Some(Node::Table(77)), Some(Node::Cond(1234))] {
            assert_eq!(decode_node(encode_node(n)), n);
        }
    }

    #[test]
    fn field_accesses_follow_the_pieces_headers_are_copied_in() {
        assert_eq!(copy_chunks(14), vec![(0, 8), (8, 4), (12, 2)]);
        assert_eq!(copy_chunks(20), vec![(0, 8), (8, 8), (16, 4)]);
        assert_eq!(copy_chunks(7), vec![(0, 4), (4, 2), (6, 1)]);
        // A 48-bit field at byte 6 (Ethernet source): bits 48..96, 48 wide.
        assert_eq!(wire_bits(6, 16, mask64(48)), (48, 48));
        // A 4-bit field in the high nibble of byte 14 (IPv4 version).
        assert_eq!(wire_bits(14, 60, 0xf), (112, 4));
        let model = sluice_json::load_str(include_str!("../../../examples/router.json")).expect("router parses");
        let plan = crate::plan::compile(&model).expect("router compiles");
        let grid = Grid::wire(&plan);
        let (eth, _) = plan.layout.headers.iter().find(|h| h.name == "ethernet").and_then(|h| h.wire).unwrap();
        let (ip, _) = plan.layout.headers.iter().find(|h| h.name == "ipv4").and_then(|h| h.wire).unwrap();
        // Ethernet source address bytes 6..12 lie in the pieces [0, 8) and [8, 12).
        assert_eq!(grid.chunk(eth + 7), (eth, 8));
        assert_eq!(grid.chunk(eth + 9), (eth + 8, 4));
        // The IPv4 TTL (byte 8) and checksum (10, 11) share the piece [8, 16).
        assert_eq!(grid.chunk(ip + 8), (ip + 8, 8));
        assert_eq!(grid.chunk(ip + 11), (ip + 8, 8));
        let data = Grid::data();
        assert_eq!(data.chunk(41), (40, 2));
        assert_eq!(data.chunk(63), (63, 1));
    }

    /// The generated key function writes, per packet, the key the engine
    /// builds from the packet's parsed PHV (`control::integer_key`) for each
    /// prefetchable table, after the first packet read straight from where
    /// that one had the header; a short packet still gets a key (a stale one
    /// only makes a prefetch useless).
    #[test]
    fn key_function_writes_each_packets_lpm_key() {
        let model = sluice_json::load_str(include_str!("../../../examples/router.json")).expect("router parses");
        let plan = crate::plan::compile(&model).expect("router compiles");
        let tables: Vec<usize> = (0..plan.tables.len()).filter(|t| plan.tables[*t].prefetchable()).collect();
        assert_eq!(tables.len(), 1, "the router's IPv4 route table");
        let compiled = CompiledPipelines::compile(&plan).expect("compiles");
        let mut look = compiled.lookahead().expect("compiled parser");
        let mut pkts: Vec<Vec<u8>> = Vec::new();
        for i in 0..20u32 {
            let mut p = vec![0u8; 60];
            p[12..14].copy_from_slice(&[0x08, 0x00]);
            p[14] = 0x45;
            p[22] = 64;
            p[30..34].copy_from_slice(&(0x0a00_0001u32.wrapping_mul(i + 1) ^ (i << 20)).to_be_bytes());
            pkts.push(p);
        }
        pkts.push(pkts[3][..20].to_vec());
        let refs: Vec<&[u8]> = pkts.iter().map(|p| p.as_slice()).collect();
        let mut scratch = plan.layout.new_phv();
        let mut words = Vec::new();
        look.keys(&mut scratch, &refs, &mut words);
        assert_eq!(words.len(), refs.len());
        let parts = plan.tables[tables[0]].key128.as_deref().expect("integer key");
        for (p, w) in refs.iter().zip(&words).take(20) {
            let mut phv = plan.layout.new_phv();
            compiled.run_parser(&mut phv, p).expect("compiled parser");
            let want = crate::control::integer_key(parts, &phv);
            assert_eq!(u128::from(*w), want);
            assert_eq!(*w as u32, u32::from_be_bytes(p[30..34].try_into().unwrap()));
        }
        // Packets after the first are read where the first had its IPv4
        // header; a batch that starts without one (ARP) parses until a
        // packet shows it, and a packet too short for the direct read
        // (34 bytes) is parsed.
        let mut arp = pkts[0].clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let batch: Vec<&[u8]> = vec![&arp, &pkts[5][..34], &pkts[6], &pkts[7][..34], &pkts[8]];
        look.keys(&mut scratch, &batch, &mut words);
        for (p, w) in batch.iter().zip(&words).skip(1) {
            assert_eq!(*w as u32, u32::from_be_bytes(p[30..34].try_into().unwrap()));
        }
        // Reads learnt from a first IPv4 packet give the key function's
        // keys; a packet too short for the 8-byte read gives none, and a
        // batch that starts without the header gives no reads at all.
        let reads = look.key_reads(&mut scratch, &refs).expect("the first packet is IPv4");
        look.keys(&mut scratch, &refs, &mut words);
        for (p, w) in refs.iter().zip(&words).take(20) {
            assert_eq!(reads[0].read(p), Some(*w));
        }
        assert_eq!(reads[0].read(&pkts[5][..34]), None);
        let mut vlan = pkts[4].clone();
        vlan.splice(12..12, [0x81, 0x00, 0, 1]);
        assert_eq!(reads[0].read(&vlan), Some(u64::from(u32::from_be_bytes(vlan[30..34].try_into().unwrap()))));
        assert!(look.key_reads(&mut scratch, &batch).is_none(), "ARP first: no reads");
    }
}
