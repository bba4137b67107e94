//! Load forwarding across blocks for generated functions.
//!
//! Why: Cranelift's own alias analysis forgets what it knows about memory
//! at most joins (the parser's branches each store to the headers, and the
//! meet then starts every later block afresh), so a pipeline reloads the
//! same valid flag and header word several times per packet. The load and
//! store units bound the generated code, so each such load costs time.
//!
//! This pass runs on the function before Cranelift compiles it. It walks
//! the blocks in reverse postorder and keeps, per program point, a list of
//! memory ranges whose contents are known as an SSA value (what a store
//! wrote or a load read). A block starts with what all its predecessors
//! agree on (the same bytes of the same value, or zeros); a block entered by
//! a back edge starts with nothing, unless the loop writes nothing. A load
//! inside a known range becomes that value (shifted and narrowed as needed,
//! memory being little-endian). A value known on every path into a block
//! was computed on every path, so its definition dominates the block and
//! the replacement is valid SSA.
//!
//! Where the predecessors know a range as *different* values, a block
//! parameter carries it, but only for the regions the caller names (the
//! headers and their valid flags, which the parser's paths each write
//! before they meet). Why not every region: the parameters keep more values
//! live through the tables, and the register allocator spilled them (the
//! edge example lost 9%, 11.3 → 10.3 Mpps, with parameters for all
//! regions; the router gained nothing more). Nor does a path that does not
//! know a range (a table helper's rare one) get a load of it so that the
//! paths meet: that kept the common path's values live through the table
//! code too (llvm-mca: 52.6 → 58-76 cycles per router packet).
//!
//! What a store may overwrite follows the alias regions generated code puts
//! on every access (see `jit::gen::Mem`): accesses in different regions never
//! overlap, and within a region two addresses are compared only when they
//! are the same base value plus constants; otherwise a store forgets the
//! whole region. Calls and other instructions with effects forget all.

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::dominator_tree::DominatorTree;
use cranelift_codegen::flowgraph::ControlFlowGraph;
use cranelift_codegen::ir::{types, Block, Function, Inst, InstBuilder, InstructionData, Opcode, Type, Value};
use std::collections::{HashMap, HashSet};

/// A memory range whose bytes are known: little-endian, bytes `skip..skip
/// + size` of `value` (a store that overwrites part of a known range
/// leaves the rest known, as the same value with a different `skip`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Known {
    /// The access's alias region (its user id), if it has one.
    region: Option<u32>,
    /// The address's base value, after constants are taken off.
    root: Value,
    off: i64,
    size: u32,
    value: Value,
    skip: u32,
}

/// What the pass did (for tests).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Forwarded {
    /// Loads replaced by a known value.
    pub loads: usize,
    /// Block parameters added (and used) to carry a range into a join.
    pub joins: usize,
}

/// Replaces loads whose bytes an earlier load or store on every path
/// already holds in a value (see the module doc). `zero16` is the address
/// of 16 static zero bytes: a vector loaded from there and stored makes
/// the stored range known as zero (the per-packet setup's zeroing).
/// `join_regions`: the alias regions (user ids) whose ranges may get block
/// parameters at joins.
pub fn forward_loads(func: &mut Function, zero16: i64, join_regions: &[u32]) -> Forwarded {
    // Parameters go to reachable blocks only, so branches of unreachable
    // ones (which Cranelift drops anyway) would lack their arguments.
    let mut cfg = ControlFlowGraph::with_function(func);
    let mut domtree = DominatorTree::with_function(func, &cfg);
    let unreachable: Vec<Block> = func.layout.blocks().filter(|b| !domtree.is_reachable(*b)).collect();
    if !unreachable.is_empty() {
        for block in unreachable {
            while let Some(inst) = func.layout.first_inst(block) {
                func.layout.remove_inst(inst);
            }
            func.layout.remove_block(block);
        }
        cfg.compute(func);
        domtree.compute(func, &cfg);
    }
    let Some(entry) = func.layout.entry_block() else { return Forwarded::default() };
    let zero = FuncCursor::new(func).at_first_insertion_point(entry).ins().iconst(types::I64, 0);
    let quiet = quiet_loop_headers(func, &cfg, &domtree);
    let mut pass = Pass { out: HashMap::new(), zero, zero16, loads: 0, params: Vec::new(), join_regions };
    let order: Vec<Block> = domtree.cfg_rpo().copied().collect();
    for block in order {
        let mut state = pass.entry_state(func, &cfg, &domtree, &quiet, block);
        let mut pos = FuncCursor::new(func).at_top(block);
        while let Some(inst) = pos.next_inst() {
            if let Some(v) = pass.step(pos.func, inst, &mut state) {
                // Build the replacement before the load, then drop it.
                let result = pos.func.dfg.inst_results(inst)[0];
                pos.goto_inst(inst);
                let v = convert(&mut pos, inst, v);
                pos.func.dfg.clear_results(inst);
                pos.func.dfg.change_to_alias(result, v);
                pos.remove_inst_and_step_back();
                pass.loads += 1;
            }
        }
        pass.out.insert(block, state);
    }
    let joins = drop_unused_params(func, &cfg, pass.params);
    Forwarded { loads: pass.loads, joins }
}

/// Folds each `select` whose condition a dominating branch already
/// decided: in a block that only the taken (or the not-taken) edge of a
/// `brif` on the same value reaches, the condition is non-zero (zero), so
/// the `select` is its first (second) operand. Returns how many were
/// folded. Why: after [`forward_loads`] a table key's "zero while the
/// header is invalid" select and the program's `if (hdr.isValid())` branch
/// test the same valid flag value, and the select cost a compare and a
/// conditional move per packet inside the branch that already knows.
pub fn fold_decided_selects(func: &mut Function) -> usize {
    let cfg = ControlFlowGraph::with_function(func);
    let domtree = DominatorTree::with_function(func, &cfg);
    let Some(entry) = func.layout.entry_block() else { return 0 };
    // What each block starts knowing: the condition of the branch whose
    // edge is its only way in, and which way it went.
    let mut facts: HashMap<Block, Vec<(Value, bool)>> = HashMap::new();
    for &block in domtree.cfg_rpo() {
        let Some(last) = func.layout.last_inst(block) else { continue };
        if let InstructionData::Brif { arg, blocks: [then, other], .. } = func.dfg.insts[last] {
            let (then, other) = (then.block(&func.dfg.value_lists), other.block(&func.dfg.value_lists));
            if then == other {
                continue;
            }
            let cond = truth_root(func, arg);
            for (to, taken) in [(then, true), (other, false)] {
                if cfg.pred_iter(to).count() == 1 {
                    facts.entry(to).or_default().push((cond, taken));
                }
            }
        }
    }
    if facts.is_empty() {
        return 0;
    }
    // Depth first through the dominator tree: a block's facts hold in
    // every block it dominates. Leaving a block restores what its facts
    // replaced.
    let mut known: HashMap<Value, bool> = HashMap::new();
    let mut folded = 0;
    let mut stack: Vec<(Block, Option<Restore>)> = vec![(entry, None)];
    while let Some((block, restore)) = stack.pop() {
        if let Some(saved) = restore {
            for (cond, was) in saved.into_iter().rev() {
                match was {
                    Some(t) => known.insert(cond, t),
                    None => known.remove(&cond),
                };
            }
            continue;
        }
        let saved: Restore = facts.get(&block).into_iter().flatten().map(|&(c, t)| (c, known.insert(c, t))).collect();
        let mut pos = FuncCursor::new(func).at_top(block);
        while let Some(inst) = pos.next_inst() {
            if pos.func.dfg.insts[inst].opcode() != Opcode::Select {
                continue;
            }
            let &[cond, if_set, if_zero] = pos.func.dfg.inst_args(inst) else { continue };
            let Some(&taken) = known.get(&truth_root(pos.func, cond)) else { continue };
            let result = pos.func.dfg.inst_results(inst)[0];
            pos.func.dfg.clear_results(inst);
            pos.func.dfg.change_to_alias(result, if taken { if_set } else { if_zero });
            pos.remove_inst_and_step_back();
            folded += 1;
        }
        stack.push((block, Some(saved)));
        stack.extend(domtree.children(block).map(|c| (c, None)));
    }
    folded
}

/// What a block's facts replaced in [`fold_decided_selects`]: per
/// condition, what was known of it before (`None`: nothing).
type Restore = Vec<(Value, Option<bool>)>;

/// The value whose zero-ness `v` has: `v` itself, or what it zero- or
/// sign-extends (each load [`forward_loads`] replaces gets an extension of
/// its own, so two tests of one flag differ only there).
fn truth_root(func: &Function, mut v: Value) -> Value {
    loop {
        v = func.dfg.resolve_aliases(v);
        let Some(inst) = func.dfg.value_def(v).inst() else { return v };
        match func.dfg.insts[inst].opcode() {
            Opcode::Uextend | Opcode::Sextend => v = func.dfg.inst_args(inst)[0],
            _ => return v,
        }
    }
}

/// At most this many block parameters are added per join. Why: a join of
/// many paths in a large program could otherwise get one per header word.
const MAX_JOIN_PARAMS: usize = 16;

/// Removes the added block parameters nothing uses (each edge's argument
/// with it), until none is left; returns how many stay.
fn drop_unused_params(func: &mut Function, cfg: &ControlFlowGraph, mut params: Vec<Value>) -> usize {
    loop {
        let mut used = HashSet::new();
        for block in func.layout.blocks() {
            for inst in func.layout.block_insts(block) {
                used.extend(func.dfg.inst_values(inst).map(|v| func.dfg.resolve_aliases(v)));
            }
        }
        let (dead, live): (Vec<Value>, Vec<Value>) = params.into_iter().partition(|p| !used.contains(p));
        params = live;
        if dead.is_empty() {
            return params.len();
        }
        for p in dead {
            let block = func.dfg.value_def(p).unwrap_block();
            let ix = func.dfg.block_params(block).iter().position(|v| *v == p).expect("a parameter of its block");
            let mut insts: Vec<Inst> = cfg.pred_iter(block).map(|pr| pr.inst).collect();
            insts.sort();
            insts.dedup();
            let dfg = &mut func.dfg;
            for inst in insts {
                for call in dfg.insts[inst].branch_destination_mut(&mut dfg.jump_tables, &mut dfg.exception_tables) {
                    if call.block(&dfg.value_lists) == block {
                        call.remove(ix, &mut dfg.value_lists);
                    }
                }
            }
            func.dfg.remove_block_param(p);
        }
    }
}

/// Whether `k` holds all of `[off, off + size)` of `root` in `region`.
fn contains(k: &Known, region: Option<u32>, root: Value, off: i64, size: u32) -> bool {
    k.region == region && k.root == root && k.off <= off && off + i64::from(size) <= k.off + i64::from(k.size)
}

/// Forgets what a store of `[off, off + size)` of `root` in `region`
/// may overwrite: every range of the region at another base, and the
/// overwritten bytes of ranges at the same base (their other bytes stay
/// known). A store without a region forgets everything.
fn forget(state: &mut Vec<Known>, region: Option<u32>, root: Value, off: i64, size: u32) {
    let end = off + i64::from(size);
    let mut kept = Vec::with_capacity(state.len() + 1);
    for k in state.drain(..) {
        let k_end = k.off + i64::from(k.size);
        if region.is_none() || k.region.is_none() {
            continue;
        }
        if k.region != region || (k.root == root && (k_end <= off || end <= k.off)) {
            kept.push(k);
            continue;
        }
        if k.root != root {
            continue;
        }
        if k.off < off {
            kept.push(Known { size: (off - k.off) as u32, ..k });
        }
        if end < k_end {
            kept.push(Known { off: end, size: (k_end - end) as u32, skip: k.skip + (end - k.off) as u32, ..k });
        }
    }
    *state = kept;
}

/// The loop headers all of whose loops store nothing and call nothing
/// (a table's probe loop): what holds on entry to such a loop holds on
/// every trip, so [`Pass::entry_state`] needs only the edges from outside.
fn quiet_loop_headers(func: &Function, cfg: &ControlFlowGraph, domtree: &DominatorTree) -> HashSet<Block> {
    let mut quiet = HashSet::new();
    let mut noisy = HashSet::new();
    for block in domtree.cfg_rpo().copied() {
        for latch in cfg.pred_iter(block).map(|p| p.block) {
            if !domtree.block_dominates(block, latch) {
                continue;
            }
            // The natural loop: what reaches the latch without the header.
            let mut body = vec![block];
            let mut work = vec![latch];
            while let Some(b) = work.pop() {
                if body.contains(&b) {
                    continue;
                }
                body.push(b);
                work.extend(cfg.pred_iter(b).map(|p| p.block));
            }
            let writes = body.iter().any(|b| {
                func.layout.block_insts(*b).any(|i| {
                    let op = func.dfg.insts[i].opcode();
                    op.can_store() || op.is_call() || op.other_side_effects()
                })
            });
            if writes {
                noisy.insert(block);
            } else {
                quiet.insert(block);
            }
        }
    }
    quiet.retain(|b| !noisy.contains(b));
    quiet
}

/// What a predecessor knows of a range: zeros, or bytes of a value from
/// a byte offset on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bytes {
    Zero,
    Of(Value, u32),
}

struct Pass<'a> {
    /// Each processed block's state at its end.
    out: HashMap<Block, Vec<Known>>,
    /// An `iconst.i64 0` in the entry block: the value of zeroed ranges.
    zero: Value,
    zero16: i64,
    loads: usize,
    /// The block parameters added at joins.
    params: Vec<Value>,
    /// The alias regions whose ranges may get block parameters.
    join_regions: &'a [u32],
}

impl Pass<'_> {
    /// What all of `block`'s (reachable) predecessors know of the same
    /// ranges as the same bytes (see the module doc). A range of a
    /// [`Pass::join_regions`] region that every predecessor knows, as
    /// different values, gets a new block parameter, each edge passing its
    /// value (shifted and resized before the edge's branch).
    fn entry_state(
        &mut self,
        func: &mut Function,
        cfg: &ControlFlowGraph,
        domtree: &DominatorTree,
        quiet: &HashSet<Block>,
        block: Block,
    ) -> Vec<Known> {
        let mut preds: Vec<(Block, Inst)> = Vec::new();
        for p in cfg.pred_iter(block).filter(|p| domtree.is_reachable(p.block)) {
            if self.out.contains_key(&p.block) {
                preds.push((p.block, p.inst));
            } else if !quiet.contains(&block) {
                return Vec::new();
            }
        }
        preds.sort();
        preds.dedup();
        if let [(only, _)] = preds[..] {
            return self.out[&only].clone();
        }
        // No parameters at a loop header (its back edges would need them).
        let params_ok = !quiet.contains(&block)
            && preds.iter().all(|&(_, i)| matches!(func.dfg.insts[i].opcode(), Opcode::Jump | Opcode::Brif));
        let candidates: Vec<Known> = preds.iter().flat_map(|(p, _)| self.out[p].iter().copied()).collect();
        let mut state: Vec<Known> = Vec::new();
        let mut params = 0;
        for c in candidates {
            if state.iter().any(|k| k.region == c.region && k.root == c.root && k.off == c.off && k.size == c.size) {
                continue;
            }
            let bytes: Vec<Option<Bytes>> = preds
                .iter()
                .map(|(p, _)| {
                    let o = &self.out[p];
                    match o.iter().find(|m| contains(m, c.region, c.root, c.off, c.size)) {
                        Some(m) if value_is_zero(func, m.value) => Some(Bytes::Zero),
                        Some(m) => Some(Bytes::Of(m.value, m.skip + (c.off - m.off) as u32)),
                        None if zeroed(func, o, c.region, c.root, c.off, c.size) => Some(Bytes::Zero),
                        None => None,
                    }
                })
                .collect();
            if bytes.iter().any(Option::is_none) {
                continue;
            }
            if bytes.iter().all(|b| *b == bytes[0]) {
                state.push(match bytes[0] {
                    Some(Bytes::Of(value, skip)) => Known { value, skip, ..c },
                    _ => Known { value: self.zero, skip: 0, ..c },
                });
                continue;
            }
            let ty = func.dfg.value_type(c.value);
            let region_ok = c.region.is_some_and(|r| self.join_regions.contains(&r));
            if !params_ok || !region_ok || ty.bytes() < c.skip + c.size || params >= MAX_JOIN_PARAMS {
                continue;
            }
            params += 1;
            let param = func.dfg.append_block_param(block, ty);
            for (&(_, inst), b) in preds.iter().zip(bytes) {
                let mut pos = FuncCursor::new(func).at_inst(inst);
                let v = match b {
                    Some(Bytes::Of(v, skip)) => bytes_of(&mut pos, v, skip, ty),
                    _ => pos.ins().iconst(ty, 0),
                };
                let dfg = &mut func.dfg;
                for call in dfg.insts[inst].branch_destination_mut(&mut dfg.jump_tables, &mut dfg.exception_tables) {
                    if call.block(&dfg.value_lists) == block {
                        call.append_argument(v, &mut dfg.value_lists);
                    }
                }
            }
            self.params.push(param);
            state.push(Known { value: param, skip: 0, ..c });
        }
        state
    }

    /// Updates `state` for `inst`. For a load inside a known range, returns
    /// the known value and the byte offset into it; the load is then
    /// replaced.
    fn step(&mut self, func: &Function, inst: Inst, state: &mut Vec<Known>) -> Option<(Value, u32)> {
        let op = func.dfg.insts[inst].opcode();
        if op.can_load() && !op.can_store() {
            let (region, root, off, size) = access(func, inst)?;
            let result = func.dfg.inst_results(inst)[0];
            if !func.dfg.value_type(result).is_int() {
                return None;
            }
            if let Some(k) = state.iter().find(|k| contains(k, region, root, off, size)) {
                return Some((k.value, k.skip + (off - k.off) as u32));
            }
            if zeroed(func, state, region, root, off, size) {
                return Some((self.zero, 0));
            }
            state.push(Known { region, root, off, size, value: result, skip: 0 });
            return None;
        }
        if op.can_store() {
            match access(func, inst) {
                Some((region, root, off, size)) => {
                    forget(state, region, root, off, size);
                    let value = func.dfg.resolve_aliases(func.dfg.inst_args(inst)[0]);
                    let value = if func.dfg.value_type(value).is_int() {
                        Some(value)
                    } else if self.is_zero16(func, value) {
                        Some(self.zero)
                    } else {
                        None
                    };
                    if let Some(value) = value {
                        state.push(Known { region, root, off, size, value, skip: 0 });
                    }
                }
                None => state.clear(),
            }
            return None;
        }
        if op.is_call() || op.other_side_effects() {
            state.clear();
        }
        None
    }

    /// Whether `v` is a load of the static zeros.
    fn is_zero16(&self, func: &Function, v: Value) -> bool {
        let Some(inst) = func.dfg.value_def(v).inst() else { return false };
        let InstructionData::Load { opcode: Opcode::Load, arg, offset, .. } = func.dfg.insts[inst] else {
            return false;
        };
        let (root, off) = root_of(func, arg);
        i32::from(offset) == 0 && off == 0 && iconst(func, root) == Some(self.zero16)
    }
}

/// Whether every byte of `[off, off + size)` lies in some range `state`
/// knows as zero (the setup zeroes with overlapping 16-byte stores, so a
/// field may straddle two of them).
fn zeroed(func: &Function, state: &[Known], region: Option<u32>, root: Value, off: i64, size: u32) -> bool {
    (off..off + i64::from(size))
        .all(|b| state.iter().any(|k| contains(k, region, root, b, 1) && value_is_zero(func, k.value)))
}

/// The memory access of `inst`: `(region, root, offset, size)`.
fn access(func: &Function, inst: Inst) -> Option<(Option<u32>, Value, i64, u32)> {
    let (addr, off, ty) = match func.dfg.insts[inst] {
        InstructionData::Load { arg, offset, .. } => (arg, offset, func.dfg.value_type(func.dfg.inst_results(inst)[0])),
        InstructionData::Store { args, offset, .. } => (args[1], offset, func.dfg.value_type(args[0])),
        _ => return None,
    };
    let size = match func.dfg.insts[inst].opcode() {
        Opcode::Uload8 | Opcode::Sload8 | Opcode::Istore8 => 1,
        Opcode::Uload16 | Opcode::Sload16 | Opcode::Istore16 => 2,
        Opcode::Uload32 | Opcode::Sload32 | Opcode::Istore32 => 4,
        Opcode::Load | Opcode::Store => ty.bytes(),
        _ => return None,
    };
    let region = func.dfg.insts[inst].alias_region(&func.dfg).map(|r| func.dfg.alias_regions[r].user_id);
    let (root, base) = root_of(func, addr);
    Some((region, root, base + i64::from(off), size))
}

/// `v` as a base value plus a constant, looking through `iadd` of
/// constants.
fn root_of(func: &Function, v: Value) -> (Value, i64) {
    let mut v = func.dfg.resolve_aliases(v);
    let mut off = 0i64;
    while let Some(inst) = func.dfg.value_def(v).inst() {
        let InstructionData::Binary { opcode: Opcode::Iadd, args } = func.dfg.insts[inst] else { break };
        let (a, b) = (func.dfg.resolve_aliases(args[0]), func.dfg.resolve_aliases(args[1]));
        if let Some(c) = iconst(func, b) {
            off = off.wrapping_add(c);
            v = a;
        } else if let Some(c) = iconst(func, a) {
            off = off.wrapping_add(c);
            v = b;
        } else {
            break;
        }
    }
    (v, off)
}

fn iconst(func: &Function, v: Value) -> Option<i64> {
    let inst = func.dfg.value_def(v).inst()?;
    match func.dfg.insts[inst] {
        InstructionData::UnaryImm { opcode: Opcode::Iconst, imm } => Some(imm.bits()),
        _ => None,
    }
}

/// The load `inst`'s result built from the known `value` (its bytes from
/// `shift` on): shifted, narrowed and extended as the load would.
fn convert(pos: &mut FuncCursor<'_>, inst: Inst, (value, shift): (Value, u32)) -> Value {
    let op = pos.func.dfg.insts[inst].opcode();
    let result_ty = pos.func.dfg.value_type(pos.func.dfg.inst_results(inst)[0]);
    let mem_ty = match op {
        Opcode::Uload8 | Opcode::Sload8 => types::I8,
        Opcode::Uload16 | Opcode::Sload16 => types::I16,
        Opcode::Uload32 | Opcode::Sload32 => types::I32,
        _ => result_ty,
    };
    let v = bytes_of(pos, value, shift, mem_ty);
    match op {
        Opcode::Uload8 | Opcode::Uload16 | Opcode::Uload32 => pos.ins().uextend(result_ty, v),
        Opcode::Sload8 | Opcode::Sload16 | Opcode::Sload32 => pos.ins().sextend(result_ty, v),
        _ => v,
    }
}

/// Bytes `skip..` of `value` (little-endian) as a `ty`: shifted down,
/// then narrowed or zero-extended. A zero is a constant of `ty` (a zeroed
/// range may be wider than its value, 16 bytes, so it is never shifted).
fn bytes_of(pos: &mut FuncCursor<'_>, value: Value, skip: u32, ty: Type) -> Value {
    if value_is_zero(pos.func, value) {
        return pos.ins().iconst(ty, 0);
    }
    let v = if skip > 0 { pos.ins().ushr_imm_u(value, i64::from(skip * 8)) } else { value };
    match pos.func.dfg.value_type(v).bits().cmp(&ty.bits()) {
        std::cmp::Ordering::Greater => pos.ins().ireduce(ty, v),
        std::cmp::Ordering::Less => pos.ins().uextend(ty, v),
        std::cmp::Ordering::Equal => v,
    }
}

fn value_is_zero(func: &Function, v: Value) -> bool {
    iconst(func, v) == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::ir::{AbiParam, AliasRegionData, MemFlagsData, Signature, UserFuncName};
    use cranelift_codegen::isa::CallConv;
    use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};

    fn flags(b: &mut FunctionBuilder, region: u32) -> MemFlagsData {
        let data = AliasRegionData { user_id: region, description: std::borrow::Cow::Borrowed("test") };
        let r = b.func.dfg.alias_regions.insert(data);
        MemFlagsData::new().with_notrap().with_alias_region(Some(r))
    }

    /// A function `f(p, c)`: `before` runs in the entry block, which then
    /// branches on `c` to two blocks running `left` and `right`, which
    /// join in a block running `after`; returns `after`'s value.
    fn diamond(
        before: impl Fn(&mut FunctionBuilder, Value),
        left: impl Fn(&mut FunctionBuilder, Value),
        right: impl Fn(&mut FunctionBuilder, Value),
        after: impl Fn(&mut FunctionBuilder, Value) -> Value,
    ) -> Function {
        let mut func = two_argument_function();
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let (entry, l, r, join) = (b.create_block(), b.create_block(), b.create_block(), b.create_block());
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let (p, c) = (b.block_params(entry)[0], b.block_params(entry)[1]);
        before(&mut b, p);
        b.ins().brif(c, l, &[], r, &[]);
        b.switch_to_block(l);
        left(&mut b, p);
        b.ins().jump(join, &[]);
        b.switch_to_block(r);
        right(&mut b, p);
        b.ins().jump(join, &[]);
        b.switch_to_block(join);
        let v = after(&mut b, p);
        b.ins().return_(&[v]);
        finish(b);
        func
    }

    /// A function `f(i64, i64) -> i64` with no body yet.
    fn two_argument_function() -> Function {
        let mut sig = Signature::new(CallConv::SystemV);
        sig.params.push(AbiParam::new(types::I64));
        sig.params.push(AbiParam::new(types::I64));
        sig.returns.push(AbiParam::new(types::I64));
        Function::with_name_signature(UserFuncName::default(), sig)
    }

    /// Seals and finalizes a built function for the host.
    fn finish(mut b: FunctionBuilder) {
        b.seal_all_blocks();
        let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
        let isa = cranelift_native::builder().expect("a supported host").finish(flags).expect("an ISA");
        b.finalize(isa.frontend_config());
    }

    #[test]
    fn selects_on_a_condition_a_dominating_branch_decided_are_folded() {
        // f(p, c): c8 = c as i8; brif (c8 as i64) then / other; `then`
        // and `other` each select on their own extension of c8, reached only
        // from one edge; the join (two ways in) selects too.
        let mut func = two_argument_function();
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let (entry, then, other, join) = (b.create_block(), b.create_block(), b.create_block(), b.create_block());
        b.append_block_params_for_function_params(entry);
        b.append_block_param(join, types::I64);
        b.switch_to_block(entry);
        let (p, c) = (b.block_params(entry)[0], b.block_params(entry)[1]);
        let c8 = b.ins().ireduce(types::I8, c);
        let t = b.ins().uextend(types::I64, c8);
        b.ins().brif(t, then, &[], other, &[]);
        let arm = |b: &mut FunctionBuilder, blk: Block, if_zero: i64| {
            b.switch_to_block(blk);
            let t = b.ins().uextend(types::I64, c8);
            let z = b.ins().iconst(types::I64, if_zero);
            let s = b.ins().select(t, p, z);
            b.ins().jump(join, &[s.into()]);
        };
        arm(&mut b, then, 1);
        arm(&mut b, other, 2);
        b.switch_to_block(join);
        let x = b.block_params(join)[0];
        let t = b.ins().sextend(types::I64, c8);
        let five = b.ins().iconst(types::I64, 5);
        let s = b.ins().select(t, x, five);
        b.ins().return_(&[s]);
        finish(b);

        assert_eq!(fold_decided_selects(&mut func), 2, "the join's select stays:\n{}", func.display());
        let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
        cranelift_codegen::verify_function(&func, &flags).expect("the pass leaves valid code");
        // Each arm now passes the select's operand for its side of the branch.
        let passed = |blk: Block| {
            let last = func.layout.last_inst(blk).expect("a jump");
            let call = func.dfg.insts[last].branch_destination(&func.dfg.jump_tables, &func.dfg.exception_tables)[0];
            let arg = call.args(&func.dfg.value_lists).next().and_then(|a| a.as_value()).expect("a value");
            func.dfg.resolve_aliases(arg)
        };
        assert_eq!(passed(then), p, "taken: the first operand");
        let konst = |v: Value| match func.dfg.insts[func.dfg.value_def(v).unwrap_inst()] {
            InstructionData::UnaryImm { imm, .. } => imm.bits(),
            ref d => panic!("not a constant: {d:?}"),
        };
        assert_eq!(konst(passed(other)), 2, "not taken: the second operand");
        let selects = func
            .layout
            .blocks()
            .flat_map(|b| func.layout.block_insts(b))
            .filter(|i| func.dfg.insts[*i].opcode() == Opcode::Select);
        assert_eq!(selects.count(), 1);
    }

    fn run(func: &mut Function) -> Forwarded {
        let done = forward_loads(func, 0, &[1]);
        let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
        cranelift_codegen::verify_function(func, &flags).expect("the pass leaves valid code");
        done
    }

    fn store_word(b: &mut FunctionBuilder, p: Value, region: u32, off: i32, v: i64) {
        let f = flags(b, region);
        let v = b.ins().iconst(types::I64, v);
        b.ins().store(f, v, p, off);
    }

    fn load(b: &mut FunctionBuilder, p: Value, region: u32, ty: Type, off: i32) -> Value {
        let f = flags(b, region);
        let v = b.ins().load(ty, f, p, off);
        if ty == types::I64 {
            v
        } else {
            b.ins().uextend(types::I64, v)
        }
    }

    #[test]
    fn a_store_before_a_diamond_answers_a_load_after_it() {
        let mut f = diamond(
            |b, p| store_word(b, p, 1, 0, 7),
            |_, _| {},
            |b, p| store_word(b, p, 2, 0, 9),
            |b, p| load(b, p, 1, types::I64, 0),
        );
        assert_eq!(run(&mut f).loads, 1);
    }

    #[test]
    fn a_store_to_the_same_region_on_one_path_keeps_the_load() {
        // Region 3 gets no join parameters, so the load stays.
        let mut f = diamond(
            |b, p| store_word(b, p, 3, 0, 7),
            |_, _| {},
            |b, p| store_word(b, p, 3, 4, 9),
            |b, p| load(b, p, 3, types::I64, 0),
        );
        assert_eq!(run(&mut f).loads, 0);
    }

    #[test]
    fn a_call_on_one_path_keeps_the_load() {
        let mut f = diamond(
            |b, p| store_word(b, p, 1, 0, 7),
            |_, _| {},
            |b, p| {
                let sig = b.import_signature(Signature::new(CallConv::SystemV));
                let name = b.func.declare_imported_user_function(cranelift_codegen::ir::UserExternalName::new(0, 0));
                let callee = b.import_function(cranelift_codegen::ir::ExtFuncData {
                    name: cranelift_codegen::ir::ExternalName::user(name),
                    signature: sig,
                    colocated: false,
                    patchable: false,
                });
                let _ = p;
                b.ins().call(callee, &[]);
            },
            |b, p| load(b, p, 1, types::I64, 0),
        );
        assert_eq!(run(&mut f).loads, 0);
    }

    #[test]
    fn a_partial_overwrite_keeps_the_other_bytes_known() {
        let mut f = diamond(
            |b, p| {
                store_word(b, p, 3, 0, 0x0807_0605_0403_0201);
                let f = flags(b, 3);
                let one = b.ins().iconst(types::I8, 0x55);
                b.ins().store(f, one, p, 1);
            },
            |_, _| {},
            |_, _| {},
            |b, p| {
                let kept = load(b, p, 3, types::I16, 2);
                let hit = load(b, p, 3, types::I16, 0);
                b.ins().iadd(kept, hit)
            },
        );
        // Bytes 2-3 come from the word; bytes 0-1 span the byte store, so
        // that load stays.
        assert_eq!(run(&mut f).loads, 1);
    }

    #[test]
    fn different_values_on_two_paths_meet_in_a_block_parameter() {
        let mut f = diamond(
            |_, _| {},
            |b, p| store_word(b, p, 1, 8, 1),
            |b, p| store_word(b, p, 1, 8, 2),
            |b, p| load(b, p, 1, types::I32, 8),
        );
        let done = run(&mut f);
        assert_eq!((done.loads, done.joins), (1, 1));
        // Outside the join regions the paths' values are not merged.
        let mut f = diamond(
            |_, _| {},
            |b, p| store_word(b, p, 3, 8, 1),
            |b, p| store_word(b, p, 3, 8, 2),
            |b, p| load(b, p, 3, types::I32, 8),
        );
        assert_eq!(run(&mut f), Forwarded::default());
    }
}
