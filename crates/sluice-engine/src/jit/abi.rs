//! What Rust and generated code share: the contexts generated functions
//! take (`JitCtx` for the pipelines and the forwarding function,
//! `ParseCtx` for the parser, `FastContexts` and `BatchCtx` for the batch
//! function, `KeysCtx` for the key function), the packets and results of a
//! batch, the views of tables, counters and registers, the signatures of
//! the generated functions, and how helpers encode a pipeline's next node.
//!
//! Field offsets are part of the generated code: every structure here is
//! `#[repr(C)]`, generated code reaches its fields through the `OFF_*`,
//! `P_*`, `B_*` and `K_*` constants taken from these layouts, and the
//! compile-time asserts keep the layouts that generated code assumes (one
//! context inside another, fixed sizes) from changing unnoticed.

use super::flow::EDGE_SLOTS;
use std::ffi::c_void;

use crate::control::Exec;
use crate::plan::Node;
use crate::tables::TableView;

/// What the generated code and its helpers share for one pipeline run.
///
/// Field offsets are part of the generated code (the `OFF_*` constants,
/// taken from this layout): keep `#[repr(C)]`. The PHV's valid flags have
/// no pointer here: generated code finds them after the headers.
#[repr(C)]
pub struct JitCtx {
    pub(super) exec: *mut c_void,
    pub(super) wire: *mut u8,
    pub(super) slots: *mut u128,
    /// Action data of the current table result, zero-padded.
    pub(super) data: [u8; 64],
    /// Set by the helpers when the packet needs the general path after its
    /// pipeline (a clone, resubmit, recirculate or truncate was requested,
    /// or headers were added or removed): read by the forwarding function.
    pub(super) special: u64,
    /// In (forwarding function): the switch time in µs, for the egress timestamp.
    pub(super) now: u64,
    /// In (forwarding function): where the deparsed headers go (`FORWARD_HDR_MAX` bytes).
    out: *mut u8,
    /// Out (forwarding function): header bytes written to `out`.
    out_len: u64,
    /// Out (forwarding function): the egress port.
    port: u64,
    /// In (forwarding function): the packet's length (egress `packet_length`).
    pub(super) len: u64,
    /// In: one [`TableView`] per table of the plan, current for this run.
    views: *const TableView,
    /// In: one [`CounterView`] per counter array of the plan.
    counters: *const CounterView,
    /// In: one [`RegisterView`] per register array of the plan.
    registers: *const RegisterView,
    /// In: the replica's lookup counts, `[hits, misses]` per table
    /// (`State::lookups`): generated code outside the batch function counts
    /// the hits it resolves inline here.
    lookups: *mut [u64; 2],
    /// In: set when the batch function derives its inline hits from edge
    /// counts (see `jit::flow`): lookups the interpreter makes off its graph
    /// are then set apart (`State::outside_flow`).
    pub(super) in_flow: u64,
    /// What helpers did since the batch function last looked
    /// ([`MARK_DIRTY`], [`MARK_META_FRESH`]), one word so that a packet
    /// after no helper costs the batch function one test: it then clears
    /// the word, and its setup is the full one when the PHV was marked
    /// dirty.
    pub(super) marks: u64,
    /// Batch function: per stashed checksum, the sum the end of parsing
    /// left for the update (see [`SumStash`]). In memory rather than a
    /// value: kept across the forwarding code, it and its inputs would be
    /// spilled.
    ///
    /// [`SumStash`]: super::shape::SumStash
    stash: [u64; STASH_MAX],
}

impl JitCtx {
    /// A context on the PHV of `ex`, with output `out` (null for the
    /// pipelines) and `views`; `exec`, `len` and the outputs are set by the
    /// caller per run.
    pub(super) fn for_exec(ex: &mut Exec<'_>, out: *mut u8, views: &Views) -> JitCtx {
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
            lookups: ex.state.lookups.as_mut_ptr(),
            in_flow: 0,
            // A PHV of unknown history: the first setup on it is full.
            marks: MARK_DIRTY | MARK_META_FRESH,
            stash: [0; STASH_MAX],
        }
    }

    /// How the forwarding function ended, from its status and this context.
    pub(super) fn outcome(&self, status: i64) -> Forward {
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

pub(super) const OFF_WIRE: i32 = std::mem::offset_of!(JitCtx, wire) as i32;
pub(super) const OFF_SLOTS: i32 = std::mem::offset_of!(JitCtx, slots) as i32;
/// Not a field: [`Gen::ptr`] of it is the valid flags' address, a fixed
/// distance after the headers (see `Phv::wire_ptr`), computed from the
/// wire pointer rather than loaded.
///
/// [`Gen::ptr`]: super::gen::Gen::ptr
pub(super) const OFF_VALID: i32 = -1;
pub(super) const OFF_DATA: i32 = std::mem::offset_of!(JitCtx, data) as i32;
pub(super) const DATA_LEN: u32 = 64;
pub(super) const OFF_SPECIAL: i32 = std::mem::offset_of!(JitCtx, special) as i32;
pub(super) const OFF_NOW: i32 = std::mem::offset_of!(JitCtx, now) as i32;
pub(super) const OFF_OUT: i32 = std::mem::offset_of!(JitCtx, out) as i32;
pub(super) const OFF_OUT_LEN: i32 = std::mem::offset_of!(JitCtx, out_len) as i32;
pub(super) const OFF_PORT: i32 = std::mem::offset_of!(JitCtx, port) as i32;
pub(super) const OFF_LEN: i32 = std::mem::offset_of!(JitCtx, len) as i32;
pub(super) const OFF_VIEWS: i32 = std::mem::offset_of!(JitCtx, views) as i32;
pub(super) const OFF_COUNTERS: i32 = std::mem::offset_of!(JitCtx, counters) as i32;
pub(super) const OFF_REGISTERS: i32 = std::mem::offset_of!(JitCtx, registers) as i32;
pub(super) const OFF_LOOKUPS: i32 = std::mem::offset_of!(JitCtx, lookups) as i32;
// The parser's code reaches the PHV through the same offsets in its context.
const _: () = assert!(std::mem::offset_of!(ParseCtx, wire) == OFF_WIRE as usize);
const _: () = assert!(std::mem::offset_of!(ParseCtx, slots) == OFF_SLOTS as usize);
/// Offset of a register cell's low word.
pub(super) const REG_LO: i32 = std::mem::offset_of!(crate::registers::RegCell, lo) as i32;
/// Size of a [`TableView`] in the views array.
pub(super) const VIEW_SIZE: i64 = 40;
const _: () = assert!(std::mem::size_of::<TableView>() == VIEW_SIZE as usize);

/// One counter array as generated code updates it: its cells and their number.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct CounterView {
    cells: *mut (u64, u64),
    len: u64,
}

/// Offsets of a cell's packet and byte counts (a tuple's layout is the compiler's choice).
pub(super) const CELL_PACKETS: i32 = std::mem::offset_of!((u64, u64), 0) as i32;
pub(super) const CELL_BYTES: i32 = std::mem::offset_of!((u64, u64), 1) as i32;
pub(super) const CELL_SIZE: i64 = std::mem::size_of::<(u64, u64)>() as i64;

/// One register array as generated code reads and writes it: its cells
/// (see [`crate::registers::Registers::cells`]) and their number.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct RegisterView {
    pub(super) cells: *const crate::registers::RegCell,
    pub(super) len: u64,
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
    pub(super) counters: Vec<CounterView>,
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

/// The parser's and the forwarding function's contexts for a run of packets
/// (see [`CompiledPipelines::fast_contexts`]), and the batch function's.
/// `repr(C)`: the batch function finds the other two at fixed distances
/// from the forwarding function's context (its argument), so one register
/// reaches all three.
///
/// [`CompiledPipelines::fast_contexts`]: super::CompiledPipelines::fast_contexts
#[repr(C)]
pub struct FastContexts {
    pub(super) parse: ParseCtx,
    pub(super) fwd: JitCtx,
    pub(super) batch: BatchCtx,
}

/// How a run of the forwarding function ended (see [`CompiledPipelines::forward`]).
///
/// [`CompiledPipelines::forward`]: super::CompiledPipelines::forward
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
pub(super) const HOT_RECORD: usize = crate::tables::HOT_DATA + 16;

pub(super) type PipelineFn = unsafe extern "C" fn(*mut JitCtx);
pub(super) type ParserFn = unsafe extern "C" fn(*mut ParseCtx);
pub(super) type ForwardFn = unsafe extern "C" fn(*mut JitCtx) -> i64;

/// What the compiled parser reads and writes. Its first four fields have
/// [`JitCtx`]'s layout, so the parser is generated with the same field
/// readers and expression code as the pipelines. Field offsets are part of
/// the generated code: keep `#[repr(C)]` and the `P_*` constants in step.
#[repr(C)]
pub struct ParseCtx {
    pub(super) exec: *mut c_void,
    pub(super) wire: *mut u8,
    pub(super) slots: *mut u128,
    pub(super) pkt: *const u8,
    pub(super) len: u64,
    /// Out: bytes consumed.
    pub(super) cursor: u64,
    /// Out: 0 done, 1 the packet ended inside a header, 2 a `verify` failed.
    pub(super) status: u64,
    /// Out: the error code of a failed `verify`.
    pub(super) code: u64,
    /// In: set the PHV up first (zeroed, ingress standard metadata
    /// written) as `Switch::ingress_parse` does for an arriving packet:
    /// 0 no, [`SETUP_FULL`] every slot, any other value only the slots
    /// generated code writes (the written setup: the others are still zero
    /// from the last full setup, on a PHV only generated code touched
    /// since, and the port and time still those of that setup; the batch
    /// function's, see `parser::SetupFlag`).
    pub(super) setup: u64,
    /// In (setup): the ingress port.
    pub(super) port: u64,
    /// In (setup): the switch time in µs (ingress timestamp).
    pub(super) now: u64,
}

pub(super) const P_PKT: i32 = std::mem::offset_of!(ParseCtx, pkt) as i32;
pub(super) const P_LEN: i32 = std::mem::offset_of!(ParseCtx, len) as i32;
pub(super) const P_CURSOR: i32 = std::mem::offset_of!(ParseCtx, cursor) as i32;
pub(super) const P_STATUS: i32 = std::mem::offset_of!(ParseCtx, status) as i32;
pub(super) const P_CODE: i32 = std::mem::offset_of!(ParseCtx, code) as i32;
pub(super) const P_SETUP: i32 = std::mem::offset_of!(ParseCtx, setup) as i32;
pub(super) const P_PORT: i32 = std::mem::offset_of!(ParseCtx, port) as i32;
pub(super) const P_NOW: i32 = std::mem::offset_of!(ParseCtx, now) as i32;

/// One arriving packet for the batch function: its bytes.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
pub struct PktRef {
    ptr: *const u8,
    pub(super) len: u64,
}

impl PktRef {
    /// Why not the slice itself: a slice's layout is not fixed in Rust.
    pub fn of(data: &[u8]) -> PktRef {
        PktRef { ptr: data.as_ptr(), len: data.len() as u64 }
    }

    /// The packet's first byte and its length.
    pub fn parts(&self) -> (*const u8, usize) {
        (self.ptr, self.len as usize)
    }

    /// `frames` read as the batch function's packet list where they are,
    /// when this build lays a `&[u8]` out as a `PktRef` (pointer, then
    /// length): checked on a probe slice, not assumed, since Rust does not
    /// fix a slice's layout. Why: listing a batch into `PktRef`s costs two
    /// stores per packet that the batch function then loads back (router,
    /// 64 B, 10 routes: about 2% of its time).
    pub fn view<'a>(frames: &'a [&'a [u8]]) -> Option<&'a [PktRef]> {
        static PROBE: [u8; 3] = [1, 2, 3];
        let probe: &[u8] = &PROBE[1..];
        // SAFETY: a `&[u8]` is two words on the 64-bit targets this JIT
        // supports (the transmute checks the size at compile time).
        let words = unsafe { std::mem::transmute::<&[u8], [usize; 2]>(probe) };
        if words != [probe.as_ptr() as usize, probe.len()] {
            return None;
        }
        // SAFETY: each slice is laid out as a `PktRef` (checked above, and
        // one layout holds for every `&[u8]` of a build; a `PktRef` is 16
        // bytes, asserted beside `BatchCtx`), with the same alignment (two
        // words); the list borrows `frames`.
        Some(unsafe { std::slice::from_raw_parts(frames.as_ptr().cast::<PktRef>(), frames.len()) })
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
/// result go; and where it counts the hits it resolves inline.
#[repr(C)]
pub(super) struct BatchCtx {
    pub(super) pkts: *const PktRef,
    pub(super) n: u64,
    /// Out: the counted edges of the pipelines' graphs (see `jit::flow`),
    /// folded into `State::lookups` and cleared after each call. Here, beside
    /// the context pointer, a count is one add to memory.
    pub(super) edges: [u64; EDGE_SLOTS],
    /// Packet `i`'s headers go to `out + 16 * i * stride16`.
    pub(super) out: *mut u8,
    /// The areas' stride divided by 16 (a multiple of 64 bytes): generated
    /// code counts packets in sixteens (see [`compile_batch`]).
    ///
    /// [`compile_batch`]: super::batch::compile_batch
    pub(super) stride16: u64,
    pub(super) results: *mut PktResult,
    /// The PHV's redirection slot (`Phv::wire_at_slot`): with headers in
    /// the output areas, each helper call stores the packet's area there
    /// first, so that engine code sees the headers generated code wrote.
    pub(super) phv_wire_at: *mut *mut u8,
    /// Bytes a packet may have: a longer one stops the loop before it is
    /// parsed (its area would not hold it).
    pub(super) room: u64,
    /// The loop runs packet `i` while `16 * i < limit16`; at the limit,
    /// with packets left, it calls `ahead` and goes on to the limit it
    /// returns. Without `ahead`, `16 * n`.
    pub(super) limit16: u64,
    pub(super) ahead: Option<AheadFn>,
    pub(super) ahead_state: *mut c_void,
}

/// Work ahead of the batch function's packets (memory prefetches), called
/// by it before packet `index` (counted from the call's first packet) when
/// it reaches its limit: `state` is the caller's, and the result is the
/// next limit, in packets, greater than `index` and at most the call's
/// packet count. Why a call every few packets: a prefetch issued as the
/// packets run overlaps their work, where a pass over the whole batch
/// before them waits for the memory with nothing else to do, and the
/// generated code has no prefetch instruction of its own.
pub type AheadFn = unsafe extern "C" fn(state: *mut c_void, index: u64) -> u64;

/// Where the parser's and the batch's contexts are from the forwarding function's.
pub(super) const PARSE_FROM_FWD: i64 =
    std::mem::offset_of!(FastContexts, parse) as i64 - std::mem::offset_of!(FastContexts, fwd) as i64;
const BATCH_FROM_FWD: i32 =
    std::mem::offset_of!(FastContexts, batch) as i32 - std::mem::offset_of!(FastContexts, fwd) as i32;
/// The batch's fields, from the forwarding function's context.
pub(super) const B_PKTS: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, pkts) as i32;
pub(super) const B_N: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, n) as i32;
pub(super) const B_OUT: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, out) as i32;
pub(super) const B_STRIDE16: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, stride16) as i32;
pub(super) const B_EDGES: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, edges) as i32;
pub(super) const B_RESULTS: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, results) as i32;
pub(super) const B_PHV_WIRE_AT: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, phv_wire_at) as i32;
pub(super) const B_ROOM: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, room) as i32;
pub(super) const B_LIMIT16: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, limit16) as i32;
pub(super) const B_AHEAD: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, ahead) as i32;
pub(super) const B_AHEAD_STATE: i32 = BATCH_FROM_FWD + std::mem::offset_of!(BatchCtx, ahead_state) as i32;
const _: () = assert!(std::mem::offset_of!(PktRef, len) == 8 && std::mem::size_of::<PktRef>() == 16);
const _: () = assert!(std::mem::offset_of!(PktResult, consumed) == 12 && std::mem::size_of::<PktResult>() == 16);
pub(super) const OFF_MARKS: i32 = std::mem::offset_of!(JitCtx, marks) as i32;
pub(super) const OFF_STASH: i32 = std::mem::offset_of!(JitCtx, stash) as i32;
/// Updated checksums whose stable part the batch function stashes (the
/// others are summed whole at the update).
pub(super) const STASH_MAX: usize = 4;
/// `JitCtx::marks`: a helper ran engine code, which may write any PHV
/// field: the next packet on this PHV needs the full setup
/// ([`SETUP_FULL`]), not only the slots generated code writes.
pub(super) const MARK_DIRTY: u64 = 1;
/// `JitCtx::marks`: the packet metadata (`Exec::meta`) are this packet's.
/// Clear, they still hold an earlier packet's: the batch function only
/// clears the mark, and the first helper that needs the metadata resets
/// them (see `helpers::exec_reading`). Why: most packets never run a
/// helper, and the reset is a dozen stores.
pub(super) const MARK_META_FRESH: u64 = 2;

/// The batch function: its argument is `FastContexts::fwd` (see [`BatchCtx`]).
pub(super) type BatchFn = unsafe extern "C" fn(*mut JitCtx) -> i64;

/// `ParseCtx::setup`: zero every slot.
pub(super) const SETUP_FULL: u64 = 2;

/// What the key function reads and writes: the lookahead parser's context
/// first (so the function's context pointer is the parser's), then the batch.
#[repr(C)]
pub(super) struct KeysCtx {
    pub(super) parse: ParseCtx,
    pub(super) pkts: *const PktRef,
    pub(super) n: u64,
    /// Out: `n * tables` keys.
    pub(super) keys: *mut u64,
    /// Keys per packet (not read by generated code).
    pub(super) tables: u64,
    /// Per prefetchable table, where its key's header started in the last
    /// packet parsed in full ([`SPEC_UNKNOWN`] until one was): the key
    /// function reads the next packets' keys at the same place.
    pub(super) spec: [u64; SPEC_TABLES],
}

/// Most prefetchable tables whose keys the key function reads straight
/// from the packet (see [`compile_keys`]).
///
/// [`compile_keys`]: super::keys::compile_keys
pub(super) const SPEC_TABLES: usize = 4;
/// `KeysCtx::spec` before a packet showed the header: far beyond any
/// packet, so a bounds check against the length fails.
pub(super) const SPEC_UNKNOWN: u64 = 1 << 40;
pub(super) const K_SPEC: i32 = std::mem::offset_of!(KeysCtx, spec) as i32;

pub(super) const K_PKTS: i32 = std::mem::offset_of!(KeysCtx, pkts) as i32;
pub(super) const K_N: i32 = std::mem::offset_of!(KeysCtx, n) as i32;
pub(super) const K_KEYS: i32 = std::mem::offset_of!(KeysCtx, keys) as i32;
const _: () = assert!(std::mem::offset_of!(KeysCtx, parse) == 0);

pub(super) type KeysFn = unsafe extern "C" fn(*mut KeysCtx);

/// How the helpers report a next node: 0 for the end of the pipeline.
pub(super) fn encode_node(n: Option<Node>) -> i64 {
    match n {
        None => 0,
        Some(Node::Table(t)) => 1 + 2 * i64::from(t),
        Some(Node::Cond(c)) => 2 + 2 * i64::from(c),
    }
}

pub(super) fn decode_node(v: i64) -> Option<Node> {
    match v {
        0 => None,
        v if v % 2 == 1 => Some(Node::Table(((v - 1) / 2) as u32)),
        v => Some(Node::Cond(((v - 2) / 2) as u32)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Node;

    #[test]
    fn node_encoding_round_trips() {
        for n in [None, Some(Node::Table(0)), Some(Node::Cond(0)), Some(Node::Table(77)), Some(Node::Cond(1234))] {
            assert_eq!(decode_node(encode_node(n)), n);
        }
    }

    #[test]
    fn a_batch_of_slices_reads_as_its_packet_list() {
        let frames: Vec<Vec<u8>> = (1..=5).map(|n| vec![n as u8; n * 7]).collect();
        let chunk: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let view = PktRef::view(&chunk).expect("a slice is (pointer, length) on x86-64");
        assert_eq!(view.len(), chunk.len());
        for (r, f) in view.iter().zip(&chunk) {
            assert_eq!((r.ptr, r.len), (f.as_ptr(), f.len() as u64));
        }
    }
}
