//! The code generation state for one function (`Gen`) and the emitters
//! every stage shares: the memory kinds generated code accesses (`Mem`),
//! context pointers, field reads and writes in the pieces headers are
//! copied in (`Grid`), byte copies. The emitters for expressions, checksums,
//! actions and tables are in this module's children; the stages (the
//! pipelines, parser, forwarding, batch and key functions) drive them.

mod action;
mod checksum;
mod expr;
mod table;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use cranelift_codegen::ir::{types, AliasRegionData, Block, InstBuilder, MemFlagsData, Value};
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Module};

use super::abi::{
    B_EDGES, B_PHV_WIRE_AT, DATA_LEN, HOT_RECORD, OFF_COUNTERS, OFF_DATA, OFF_LEN, OFF_REGISTERS, OFF_SLOTS, OFF_VALID,
    OFF_VIEWS, OFF_WIRE,
};
use super::flow::FlowPlan;
use super::shape::SumStash;
use super::JitStats;
use crate::expr::Fast;
use crate::phv::{mask64, FieldSrc};
use crate::plan::{Node, Plan};

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
pub(super) enum Mem {
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
pub(super) fn region_id(m: Mem) -> u32 {
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
pub(super) fn mem(b: &mut FunctionBuilder, m: Mem) -> MemFlagsData {
    let data = AliasRegionData { user_id: region_id(m), description: std::borrow::Cow::Borrowed("sluice") };
    let region = b.func.dfg.alias_regions.insert(data);
    MemFlagsData::new().with_notrap().with_alias_region(Some(region))
}

/// `v & m`; for a mask of the low 8, 16 or 32 bits a zero extension of the
/// narrowed value. Why: x86 has no 64-bit AND with such an immediate, and
/// Cranelift then reads the mask from memory (a load per use); a zero
/// extension is a register move.
pub(super) fn band_u(b: &mut FunctionBuilder, v: Value, m: i64) -> Value {
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

/// The `(offset, size)` pieces in which generated code copies `n` bytes:
/// 8-byte pieces, then at most one each of 4, 2 and 1 bytes.
pub(super) fn copy_chunks(n: u32) -> Vec<(u32, u32)> {
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
pub(super) static ZERO16: [u8; 16] = [0; 16];

/// A 16-byte zero vector, loaded where it is used. Why not a constant:
/// Cranelift hoists a constant vector out of the batch loop and keeps it in
/// a stack slot, which costs a store and a load per packet; a load from
/// static zeros costs one load (and loads are not hoisted).
pub(super) fn zero_vector(g: &mut Gen<'_, '_, '_>) -> Value {
    let at = g.b.ins().iconst(types::I64, ZERO16.as_ptr() as i64);
    let mf = mem(g.b, Mem::Packet);
    g.b.ins().load(types::I64X2, mf, at, 0)
}

/// The integer type of a copy piece of `size` bytes.
pub(super) fn chunk_type(size: u32) -> types::Type {
    match size {
        1 => types::I8,
        2 => types::I16,
        4 => types::I32,
        _ => types::I64,
    }
}

/// `(first bit, width)` in the wire area of a field read as
/// `(big-endian 8 bytes at byte) >> shift & mask`.
pub(super) fn wire_bits(byte: u32, shift: u8, mask: u64) -> (u32, u32) {
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

/// Code generation state for one generated function (a pipeline, the
/// parser, the forwarding, batch or key function).
pub(super) struct Gen<'p, 'b, 'f> {
    pub(super) plan: &'p Plan,
    pub(super) b: &'b mut FunctionBuilder<'f>,
    pub(super) ctx: Value,
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
    /// per-packet setup zeroes only these (the written setup, see
    /// `ParseCtx::setup`).
    pub(super) written: BTreeSet<u32>,
    /// Headers whose extraction the parser records: `(header, context
    /// offset)` where the cursor at the header's start is stored (the key
    /// function's `KeysCtx::spec`).
    pub(super) track: Vec<(u32, i32)>,
    /// The packet's length when the context does not hold it yet (the
    /// batch function): stored there before each helper call, the only
    /// readers of `JitCtx::len` besides generated code (see [`Gen::call`]).
    pub(super) len: Option<Value>,
    /// Per updated checksum of the forwarding shape, in order: the part of
    /// its sum the end of parsing computes (batch function only, see
    /// [`SumStash`]).
    pub(super) stash: Vec<Option<SumStash>>,
    /// The batch function's counted edges (see `jit::flow`): jumps
    /// between nodes go through [`Gen::edge_to`]. `None` elsewhere, where
    /// inline hits are counted one by one (`Gen::count_inline_hit`).
    pub(in crate::jit) flow: Option<FlowPlan>,
    /// Set when an edge the flow plan did not foresee found no slot left.
    pub(in crate::jit) flow_overflow: bool,
    /// The node being generated (`None`: the pipeline's entry).
    node: Option<Node>,
    /// Pipelines generated so far (0 ingress, 1 egress).
    bodies: usize,
    /// Per counted edge of the current pipeline, its counting block (see
    /// [`Gen::edge_to`]); filled at the pipeline's end.
    chords: BTreeMap<EdgeKey, (Block, usize, Block)>,
    /// Batch function with the headers in the packets' output areas (see
    /// `compile_batch`): the wire base is the packet's area, which each
    /// helper call first stores to the PHV's redirection slot, and the
    /// deparser moves headers only where an invalid one left a gap.
    pub(in crate::jit) in_place: bool,
}

/// An edge between two nodes' keys (`None`: the pipeline's entry or end).
type EdgeKey = (Option<(u8, u32)>, Option<(u8, u32)>);

fn node_key(n: Node) -> (u8, u32) {
    match n {
        Node::Table(t) => (0, t),
        Node::Cond(c) => (1, c),
    }
}

impl<'p, 'b, 'f> Gen<'p, 'b, 'f> {
    /// A generator for one function being built in `b`, with the engine
    /// helpers (`helpers`, in `new_module`'s order) declared in it; `ctx` is the
    /// context pointer parameter.
    pub(super) fn new(
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
            flow: None,
            flow_overflow: false,
            node: None,
            bodies: 0,
            chords: BTreeMap::new(),
            in_place: false,
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
        if self.in_place {
            // Engine code then reads and writes the headers in the packet's area.
            let mf = mem(self.b, Mem::Inputs);
            let slot = self.b.ins().load(types::I64, mf, self.ctx, B_PHV_WIRE_AT);
            let wire = self.ptr(OFF_WIRE);
            let mf = mem(self.b, Mem::Ctx);
            self.b.ins().store(mf, wire, slot, 0);
        }
        self.b.ins().call(f, args)
    }

    /// The packet's length: [`Gen::len`], else loaded from the context.
    pub(super) fn packet_len(&mut self) -> Value {
        match self.len {
            Some(v) => v,
            None => {
                let mf = mem(self.b, Mem::Ctx);
                self.b.ins().load(types::I64, mf, self.ctx, OFF_LEN)
            }
        }
    }

    /// Generates a pipeline starting at `init` from the current block; its
    /// end (and `exit`) jumps to `after`, which the caller then fills.
    pub(super) fn body(&mut self, init: Option<Node>, after: Block) {
        self.ret = after;
        self.blocks.clear();
        if let Some(f) = &mut self.flow {
            f.begin(self.bodies);
        }
        self.bodies += 1;
        self.node = None;
        let first = self.edge_to(init);
        self.b.ins().jump(first, &[]);
        while let Some((n, blk)) = self.work.pop() {
            self.b.switch_to_block(blk);
            self.node = Some(n);
            match n {
                Node::Cond(c) => self.cond(c),
                Node::Table(t) => self.table(t),
            }
        }
        // The counted edges: one add to `BatchCtx::edges`, then the target.
        for (_, (blk, slot, target)) in std::mem::take(&mut self.chords) {
            self.b.switch_to_block(blk);
            self.count_edge_slot(slot);
            self.b.ins().jump(target, &[]);
        }
    }

    /// The block a jump from the current node to `to` (`None`: the
    /// pipeline's end) goes to: `to`'s own, or, in the batch function, for
    /// an edge the flow plan counts, a block that counts it first.
    pub(super) fn edge_to(&mut self, to: Option<Node>) -> Block {
        let target = self.block_for(to);
        let Some(flow) = &mut self.flow else { return target };
        match flow.edge(self.node, to) {
            Ok(None) => target,
            Ok(Some(slot)) => {
                let key = (self.node.map(node_key), to.map(node_key));
                if let Some((blk, _, _)) = self.chords.get(&key) {
                    return *blk;
                }
                let blk = self.b.create_block();
                self.chords.insert(key, (blk, slot, target));
                blk
            }
            Err(()) => {
                self.flow_overflow = true;
                target
            }
        }
    }

    /// Adds one to slot `slot` of `BatchCtx::edges` (batch function only).
    pub(in crate::jit) fn count_edge_slot(&mut self, slot: usize) {
        let off = B_EDGES + 8 * slot as i32;
        let mf = mem(self.b, Mem::Counters);
        let n = self.b.ins().load(types::I64, mf, self.ctx, off);
        let n = self.b.ins().iadd_imm_u(n, 1);
        let mf = mem(self.b, Mem::Counters);
        self.b.ins().store(mf, n, self.ctx, off);
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
    pub(super) fn ptr(&mut self, off: i32) -> Value {
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

    /// Makes `v` the value of context pointer `off` for the code generated
    /// from here on (the batch function's per-packet wire base).
    pub(in crate::jit) fn set_base(&mut self, off: i32, v: Value) {
        self.bases.retain(|(o, _)| *o != off);
        self.bases.push((off, v));
    }

    /// Loads the context's constant pointers (PHV vectors, table views) in
    /// the current block, which must dominate all code generated after it.
    pub(super) fn load_bases(&mut self, with_views: bool) {
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

    pub(super) fn read(&mut self, s: FieldSrc) -> Value {
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
    pub(super) fn load_be(&mut self, m: Mem, ty: types::Type, base: Value, off: i32) -> Value {
        let mf = self.mf(m);
        let w = self.b.ins().load(ty, mf, base, off);
        let w = if ty == types::I8 { w } else { self.b.ins().bswap(w) };
        if ty == types::I64 {
            w
        } else {
            self.b.ins().uextend(types::I64, w)
        }
    }

    pub(super) fn write(&mut self, s: FieldSrc, v: Value, width_mask: u64) {
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
    pub(super) fn copy_bytes(
        &mut self,
        (from, src, src_off): (Mem, Value, i32),
        (to, dst, dst_off): (Mem, Value, i32),
        n: u32,
    ) {
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

    /// Merges the low `n` bytes of `v`, in little-endian order (its lowest
    /// byte goes first), into the wire from byte `b` on, all inside one
    /// grid piece: the whole piece is read, merged and stored, as
    /// [`Gen::write_bits`] does, but without byte swaps.
    pub(super) fn merge_le(&mut self, b: u32, n: u32, v: Value) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_accesses_follow_the_pieces_headers_are_copied_in() {
        assert_eq!(copy_chunks(14), vec![(0, 8), (8, 4), (12, 2)]);
        assert_eq!(copy_chunks(20), vec![(0, 8), (8, 8), (16, 4)]);
        assert_eq!(copy_chunks(7), vec![(0, 4), (4, 2), (6, 1)]);
        // A 48-bit field at byte 6 (Ethernet source): bits 48..96, 48 wide.
        assert_eq!(wire_bits(6, 16, mask64(48)), (48, 48));
        // A 4-bit field in the high nibble of byte 14 (IPv4 version).
        assert_eq!(wire_bits(14, 60, 0xf), (112, 4));
        let model = sluice_json::load_str(include_str!("../../../../../examples/router.json")).expect("router parses");
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
}
