//! Native code for the flow tables: a table whose few entries the
//! classifier would scan is compiled into a function that compares the
//! key's words with each entry's constants in priority order (what the
//! LINC journal proposed and ESwitch calls direct code), and the walk
//! from table to table is compiled into one function that links the
//! tables' code by their gotos ([`PipelineCode`]). Bigger tables keep
//! their lookup structures (the route-table template, the classifier),
//! which are data, not code; the walk calls them.
//!
//! Contract: [`TableCode::compile`] reads a table's scan (see
//! `table::scan_find`: per entry a head word, id in the high half and
//! word count in the low byte, then `(word index, mask, masked value)`
//! triples) and writes a function of the packet's full key returning the
//! first entry it matches, the same answer as the scan. The function
//! reads only the 136-byte full key it is given, writes nothing, and
//! never traps. [`PipelineCode::compile`] reads every table's shape (its
//! scan and gotos, or that it has a structure, or no entries) and writes
//! the walk, whose contract is on the type.
//!
//! Concurrency: compiled once (by the agent, off the packet path), then
//! shared read-only by every replica through an `Arc`; the code is
//! immutable and reentrant. A table drops its code when its entries
//! change (the code answers for the scan it was made from, which it
//! keeps), and the switch drops the walk's code before any table changes,
//! so stale code is never run; its memory is freed when the last replica
//! drops it.

use std::fmt;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, Endianness, InstBuilder, MemFlagsData, Signature, UserFuncName, Value,
};
use cranelift_codegen::isa::CallConv;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module};

use crate::fields::{FullKey, FULL_LEN};

/// The generated function: the full key's address in, the first matching
/// entry's id plus one out (0: none matches).
type ScanFn = extern "C" fn(*const u8) -> u32;

/// The memory of generated code, freed when dropped (with the functions
/// it holds: their owners keep it beside their pointers).
struct Jitted(Option<JITModule>);

// SAFETY: the module is only touched again to free its memory on drop;
// the code in it is immutable and reentrant (each function reads only what
// its caller passes).
unsafe impl Send for Jitted {}
// SAFETY: as above: calling its functions from several threads at once is
// reading immutable code.
unsafe impl Sync for Jitted {}

impl Drop for Jitted {
    fn drop(&mut self) {
        if let Some(m) = self.0.take() {
            // SAFETY: the function pointers die with their owner, which
            // drops this last.
            unsafe { m.free_memory() };
        }
    }
}

/// A small table compiled to native code (see the module documentation).
pub struct TableCode {
    func: ScanFn,
    _module: Jitted,
    /// The scan it was compiled from.
    scan: Box<[u64]>,
    /// The Cranelift IR it was compiled from, for users.
    pub listing: String,
    /// Bytes of machine code.
    pub code_bytes: usize,
}

impl fmt::Debug for TableCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableCode({} bytes for {} scan words)", self.code_bytes, self.scan.len())
    }
}

/// The entries of a scan (see `table::scan_entries`); `None` if the scan
/// is not well formed: an entry cut short, a word index past the key, an
/// id the function's answer (id + 1) cannot carry.
fn entries(scan: &[u64]) -> Option<Vec<(u32, &[u64])>> {
    let out: Vec<(u32, &[u64])> = crate::table::scan_entries(scan).collect();
    let whole = out.iter().map(|(_, words)| 1 + words.len()).sum::<usize>() == scan.len();
    let valid =
        |(id, words): &(u32, &[u64])| *id != u32::MAX && words.chunks_exact(3).all(|t| (t[0] as usize) < FULL_LEN / 8);
    (whole && out.iter().all(valid)).then_some(out)
}

/// Compiles one function named `name`, of `pointers` pointer parameters
/// returning an i32, whose body `body` writes from its entry block (given
/// the parameters, the pointer type and the calling convention), for
/// this host's CPU, optimizing for speed: the code's memory, the
/// function's address, its IR as text and its machine code's size.
fn compile_fn(
    name: &str,
    pointers: usize,
    body: impl FnOnce(&mut FunctionBuilder, &[Value], types::Type, CallConv),
) -> Result<(Jitted, *const u8, String, usize), String> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("cranelift flag {k}: {e}"));
    set(&mut flags, "opt_level", "speed")?;
    set(&mut flags, "is_pic", "false")?;
    let isa = cranelift_native::builder()
        .map_err(|e| format!("no native code generator for this host: {e}"))?
        .finish(settings::Flags::new(flags))
        .map_err(|e| format!("cranelift: {e}"))?;
    let mut module = JITModule::new(JITBuilder::with_isa(isa, cranelift_module::default_libcall_names()));
    let ptr = module.target_config().pointer_type();
    let call_conv = module.isa().default_call_conv();
    let mut sig = Signature::new(call_conv);
    sig.params.extend((0..pointers).map(|_| AbiParam::new(ptr)));
    sig.returns.push(AbiParam::new(types::I32));
    let id = module.declare_function(name, Linkage::Local, &sig).map_err(|e| e.to_string())?;
    let mut ctx = Context::new();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(0, id.as_u32());
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let start = b.create_block();
        b.append_block_params_for_function_params(start);
        b.switch_to_block(start);
        let params = b.block_params(start).to_vec();
        body(&mut b, &params, ptr, call_conv);
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    let listing = ctx.func.display().to_string();
    module.define_function(id, &mut ctx).map_err(|e| format!("cranelift: {e:?}"))?;
    let code_bytes = ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
    module.finalize_definitions().map_err(|e| format!("cranelift: {e}"))?;
    let at = module.get_finalized_function(id);
    Ok((Jitted(Some(module)), at, listing, code_bytes))
}

/// Loads, once each, the key words the entries read (the key is 136
/// bytes the caller owns: in bounds, any alignment).
fn load_words<'a>(
    b: &mut FunctionBuilder,
    key: Value,
    entries: impl Iterator<Item = &'a (u32, &'a [u64])>,
    loaded: &mut [Option<Value>; FULL_LEN / 8],
) {
    let flags = MemFlagsData::new().with_notrap().with_endianness(Endianness::Little);
    for (_, words) in entries {
        for t in words.chunks_exact(3) {
            let w = t[0] as usize;
            if loaded[w].is_none() {
                loaded[w] = Some(b.ins().load(types::I64, flags, key, (w * 8) as i32));
            }
        }
    }
}

/// Emits the comparisons of one entry's words: falls through (in a new
/// block) when all match, jumps to `next` at the first that does not.
fn compare_words(b: &mut FunctionBuilder, words: &[u64], loaded: &[Option<Value>; FULL_LEN / 8], next: Block) {
    for t in words.chunks_exact(3) {
        let v = loaded[t[0] as usize].expect("loaded before");
        let masked = b.ins().band_imm_u(v, t[1] as i64);
        let same = b.ins().icmp_imm_u(IntCC::Equal, masked, t[2] as i64);
        let more = b.create_block();
        b.ins().brif(same, more, &[], next, &[]);
        b.switch_to_block(more);
    }
}

impl TableCode {
    /// Compiles `scan` (see the module documentation).
    pub fn compile(scan: &[u64]) -> Result<TableCode, String> {
        let entries = entries(scan).ok_or("a table scan that is not well formed")?;
        let (module, at, listing, code_bytes) = compile_fn("table_scan", 1, |b, params, _, _| {
            let key = params[0];
            let mut loaded = [None; FULL_LEN / 8];
            load_words(b, key, entries.iter(), &mut loaded);
            for (id, words) in &entries {
                // Each comparison failing goes to the next entry.
                let next = b.create_block();
                compare_words(b, words, &loaded, next);
                let found = b.ins().iconst(types::I32, i64::from(id.wrapping_add(1)));
                b.ins().return_(&[found]);
                b.switch_to_block(next);
            }
            let zero = b.ins().iconst(types::I32, 0);
            b.ins().return_(&[zero]);
        })?;
        // SAFETY: the function was declared with this signature (one pointer in, an i32 out).
        let func = unsafe { std::mem::transmute::<*const u8, ScanFn>(at) };
        Ok(TableCode { func, _module: module, scan: scan.into(), listing, code_bytes })
    }

    /// Whether this code answers for `scan` (it was compiled from it).
    pub fn is_for(&self, scan: &[u64]) -> bool {
        *self.scan == *scan
    }

    /// The id of the first entry `full` matches, as the scan says.
    #[inline]
    pub fn find(&self, full: &FullKey) -> Option<u32> {
        let r = (self.func)(full.as_ptr());
        r.checked_sub(1)
    }
}

/// What [`PipelineCode`] assumed about one table when it was compiled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TableShape {
    /// No entries: every packet misses.
    Empty,
    /// Looked up at run time through the lookup function the caller
    /// passes (the table's structure: route-table template, classifier).
    Structure,
    /// Scanned: its scan, and per entry (in scan order) the table its
    /// instructions go to when they are a `goto_table` alone.
    Scanned { scan: Box<[u64]>, gotos: Vec<Option<u8>> },
}

/// Marks a miss in a [`PipelineCode`] path.
pub const PATH_MISS: u32 = u32::MAX;

/// The lookup of a table through its structure, called by pipeline code:
/// `(context, table, key)` in; out 0 for a miss, else the entry's id plus
/// one in the low 32 bits and, when the entry's instructions are a goto
/// alone, its target table plus one in bits 32 to 39. The context starts
/// with a [`LookupAhead`].
pub type LookupFn = extern "C" fn(*mut u8, u32, *const u8) -> u64;

/// How a lookup context starts: a lookup already made for one table (a
/// batch loads route tables' entries ahead), which the walk's code takes
/// instead of calling the lookup function.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct LookupAhead {
    /// The table it was made for; `u32::MAX`: none.
    pub table: u32,
    /// What the lookup function would return for it.
    pub answer: u64,
}

impl LookupAhead {
    /// No lookup made ahead.
    pub const NONE: LookupAhead = LookupAhead { table: u32::MAX, answer: 0 };
}

/// The generated walk: key, lookup context, lookup function, path out;
/// returns the path's length.
type WalkFn = extern "C" fn(*const u8, *mut u8, LookupFn, *mut u64) -> u32;

/// The walk from table to table as native code, as far as it goes by
/// entries that are a `goto_table` alone (what ESwitch links its table
/// templates with): from table 0, each scanned table's entries are
/// compared inline and a goto jumps straight to the next table's code;
/// a table with a structure is looked up through the lookup function
/// (the goto it returns picks the next table's code). The walk stops at
/// the first entry that does more than a goto, at a miss, or at a goto to
/// an empty table, and leaves its path: one `table << 32 | id` per entry
/// hit ([`PATH_MISS`] as the id of a miss), the last one where it stopped.
///
/// Contract: reads only the key and, through the lookup function, the
/// tables with a structure; writes at most one path element per table
/// (the caller passes room for 64); never traps. It answers for the
/// shapes it was compiled from ([`PipelineCode::is_for`]): the caller
/// drops it when a table's entries change.
///
/// Concurrency: as [`TableCode`]: immutable, shared by the replicas.
pub struct PipelineCode {
    func: WalkFn,
    _module: Jitted,
    shapes: Vec<TableShape>,
    /// The Cranelift IR it was compiled from, for users.
    pub listing: String,
    /// Bytes of machine code.
    pub code_bytes: usize,
}

impl fmt::Debug for PipelineCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PipelineCode({} bytes for {} tables)", self.code_bytes, self.shapes.len())
    }
}

impl PipelineCode {
    /// Compiles the walk over tables of `shapes` (index: table number).
    pub fn compile(shapes: &[TableShape]) -> Result<PipelineCode, String> {
        let n_tables = shapes.len();
        if n_tables == 0 || n_tables > 255 {
            return Err(format!("a pipeline of {n_tables} tables"));
        }
        let mut scans = Vec::with_capacity(n_tables);
        for (t, s) in shapes.iter().enumerate() {
            scans.push(match s {
                TableShape::Scanned { scan, gotos } => {
                    let e = entries(scan).ok_or(format!("table {t}: a scan that is not well formed"))?;
                    if e.len() != gotos.len() {
                        return Err(format!("table {t}: {} entries, {} gotos", e.len(), gotos.len()));
                    }
                    Some(e)
                }
                _ => None,
            });
        }
        let (module, at, listing, code_bytes) = compile_fn("pipeline_walk", 4, |b, params, ptr, call_conv| {
            let mut lookup_sig = Signature::new(call_conv);
            lookup_sig.params.push(AbiParam::new(ptr));
            lookup_sig.params.push(AbiParam::new(types::I32));
            lookup_sig.params.push(AbiParam::new(ptr));
            lookup_sig.returns.push(AbiParam::new(types::I64));
            let lookup_ref = b.import_signature(lookup_sig);
            let (key, lctx, lookup, path) = (params[0], params[1], params[2], params[3]);
            let mut loaded = [None; FULL_LEN / 8];
            load_words(b, key, scans.iter().flatten().flatten(), &mut loaded);
            // One block per table with entries; its parameter is the
            // path's length so far.
            let blocks: Vec<Option<Block>> = shapes
                .iter()
                .map(|s| {
                    (*s != TableShape::Empty).then(|| {
                        let blk = b.create_block();
                        b.append_block_param(blk, types::I32);
                        blk
                    })
                })
                .collect();
            let store = MemFlagsData::new().with_notrap();
            // Appends `elem` to the path: its new length.
            let append = |b: &mut FunctionBuilder, n: Value, elem: Value| {
                let n64 = b.ins().uextend(types::I64, n);
                let off = b.ins().imul_imm_u(n64, 8);
                let at = b.ins().iadd(path, off);
                b.ins().store(store, elem, at, 0);
                b.ins().iadd_imm_u(n, 1)
            };
            // Appends `elem` and returns the path's length.
            let append_return = |b: &mut FunctionBuilder, n: Value, elem: Value| {
                let n1 = append(b, n, elem);
                b.ins().return_(&[n1]);
            };
            let zero = b.ins().iconst(types::I32, 0);
            match blocks[0] {
                Some(first) => {
                    b.ins().jump(first, &[zero.into()]);
                }
                None => {
                    let miss = b.ins().iconst(types::I64, i64::from(PATH_MISS));
                    append_return(b, zero, miss);
                }
            }
            for (t, blk) in blocks.iter().enumerate() {
                let Some(blk) = *blk else { continue };
                b.switch_to_block(blk);
                let n = b.block_params(blk)[0];
                let here = (t as i64) << 32;
                match (&shapes[t], &scans[t]) {
                    (TableShape::Scanned { gotos, .. }, Some(entries)) => {
                        for ((id, words), goto) in entries.iter().zip(gotos) {
                            let next = b.create_block();
                            compare_words(b, words, &loaded, next);
                            let elem = b.ins().iconst(types::I64, here | i64::from(*id));
                            let target =
                                goto.map(usize::from).filter(|g| *g > t).and_then(|g| blocks.get(g).copied().flatten());
                            match target {
                                Some(to) => {
                                    let n1 = append(b, n, elem);
                                    b.ins().jump(to, &[n1.into()]);
                                }
                                None => append_return(b, n, elem),
                            }
                            b.switch_to_block(next);
                        }
                        let miss = b.ins().iconst(types::I64, here | i64::from(PATH_MISS));
                        append_return(b, n, miss);
                    }
                    _ => {
                        // A lookup made ahead for this table is in the
                        // context (see `LookupAhead`); else the call.
                        let ctx_flags = MemFlagsData::new().with_notrap();
                        let ahead_table = b.ins().load(types::I32, ctx_flags, lctx, 0);
                        let is_ahead = b.ins().icmp_imm_u(IntCC::Equal, ahead_table, t as i64);
                        let ahead = b.create_block();
                        let call_block = b.create_block();
                        let found = b.create_block();
                        b.append_block_param(found, types::I64);
                        b.ins().brif(is_ahead, ahead, &[], call_block, &[]);
                        b.switch_to_block(ahead);
                        let r_ahead = b.ins().load(types::I64, ctx_flags, lctx, 8);
                        b.ins().jump(found, &[r_ahead.into()]);
                        b.switch_to_block(call_block);
                        let table = b.ins().iconst(types::I32, t as i64);
                        let call = b.ins().call_indirect(lookup_ref, lookup, &[lctx, table, key]);
                        let r_called = b.inst_results(call)[0];
                        b.ins().jump(found, &[r_called.into()]);
                        b.switch_to_block(found);
                        let r = b.block_params(found)[0];
                        let id1 = b.ins().ireduce(types::I32, r);
                        let hit = b.create_block();
                        let missed = b.create_block();
                        b.ins().brif(id1, hit, &[], missed, &[]);
                        b.switch_to_block(missed);
                        let miss = b.ins().iconst(types::I64, here | i64::from(PATH_MISS));
                        append_return(b, n, miss);
                        b.switch_to_block(hit);
                        let id = b.ins().iadd_imm_s(id1, -1);
                        let id64 = b.ins().uextend(types::I64, id);
                        let elem = b.ins().bor_imm_u(id64, here);
                        let n1 = append(b, n, elem);
                        let hi = b.ins().ushr_imm_u(r, 32);
                        let goto1 = b.ins().band_imm_u(hi, 0xff);
                        // The goto picks the next table's code, if it
                        // has any; else the walk stops here.
                        for (g, to) in blocks.iter().enumerate().skip(t + 1) {
                            let Some(to) = *to else { continue };
                            let same = b.ins().icmp_imm_u(IntCC::Equal, goto1, g as i64 + 1);
                            let other = b.create_block();
                            b.ins().brif(same, to, &[n1.into()], other, &[]);
                            b.switch_to_block(other);
                        }
                        b.ins().return_(&[n1]);
                    }
                }
            }
        })?;
        // SAFETY: declared with this signature (four pointers in, an i32 out).
        let func = unsafe { std::mem::transmute::<*const u8, WalkFn>(at) };
        Ok(PipelineCode { func, _module: module, shapes: shapes.to_vec(), listing, code_bytes })
    }

    /// Whether this code answers for tables of `shapes`.
    pub fn is_for(&self, shapes: &[TableShape]) -> bool {
        self.shapes == shapes
    }

    /// The shapes it was compiled from.
    pub fn shapes(&self) -> &[TableShape] {
        &self.shapes
    }

    /// Walks `full` (see the type's documentation); `path` receives the
    /// entries hit (it need not be initialized); returns them.
    ///
    /// # Safety
    /// `lookup` must be safe to call with `ctx` and any table number of
    /// a [`TableShape::Structure`] table.
    #[inline]
    pub unsafe fn run<'p>(
        &self,
        full: &FullKey,
        ctx: *mut u8,
        lookup: LookupFn,
        path: &'p mut std::mem::MaybeUninit<[u64; 64]>,
    ) -> &'p [u64] {
        debug_assert!(self.shapes.len() <= 64);
        let at = path.as_mut_ptr().cast::<u64>();
        let n = ((self.func)(full.as_ptr(), ctx, lookup, at) as usize).min(64);
        // SAFETY: the code wrote the first `n` elements (at most one per
        // table, and tables strictly increase along a walk).
        unsafe { std::slice::from_raw_parts(at, n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::table::scan_find as scan;

    /// A xorshift64 generator from `seed`.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    #[test]
    fn compiled_tables_find_what_the_scan_finds() {
        let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for round in 0..40 {
            // Up to 32 entries on a few words with narrow masks, so that
            // random keys match some of them.
            let mut s = Vec::new();
            let n = 1 + (rnd() % 32) as usize;
            for e in 0..n {
                let words = (rnd() % 4) as usize;
                let id = if round % 5 == 0 { u32::MAX - 1 - e as u32 } else { (rnd() % 1000) as u32 };
                s.push((u64::from(id) << 32) | words as u64);
                for _ in 0..words {
                    let w = rnd() % 3 + if round % 2 == 0 { 0 } else { 14 };
                    let mask = (rnd() & 0x0303) << (8 * (rnd() % 6));
                    s.extend([w, mask, rnd() & mask]);
                }
            }
            let code = TableCode::compile(&s).expect("compiles");
            assert!(code.is_for(&s) && code.code_bytes > 0 && code.listing.contains("function"));
            let mut hits = 0;
            for _ in 0..2000 {
                let mut full = [0u8; FULL_LEN];
                for (i, b) in full.iter_mut().enumerate() {
                    *b = (rnd() >> (i % 8)) as u8 & 0x03;
                }
                let want = scan(&s, &full);
                hits += usize::from(want.is_some());
                assert_eq!(code.find(&full), want, "round {round}, scan {s:x?}");
            }
            assert!(hits > 0 || n < 3, "round {round}: random keys matched nothing");
        }
    }

    /// The fake structure lookups of the walk test: per table, a scan and
    /// its gotos by id (see `LookupFn`).
    type Fake = Vec<(Vec<u64>, std::collections::HashMap<u32, u8>)>;

    extern "C" fn fake_lookup(ctx: *mut u8, table: u32, key: *const u8) -> u64 {
        // SAFETY: the test passes a `Fake` with an entry per table and a key.
        let (fake, key) = unsafe { (&*(ctx as *const Fake), &*(key as *const FullKey)) };
        let (scan_words, gotos) = &fake[table as usize];
        match scan(scan_words, key) {
            Some(id) => (gotos.get(&id).map_or(0, |g| u64::from(*g) + 1) << 32) | u64::from(id + 1),
            None => 0,
        }
    }

    #[test]
    fn the_walk_stops_where_the_interpreted_walk_leaves_the_gotos() {
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1du64);
        const TABLES: usize = 8;
        for round in 0..30 {
            let mut shapes = Vec::new();
            let mut fake: Fake = Vec::new();
            for t in 0..TABLES {
                // Entries on the first key words, each a goto to a later
                // table (some empty) or not.
                let mut sc = Vec::new();
                let mut gotos = Vec::new();
                let n = 1 + (rnd() % 6) as usize;
                for e in 0..n {
                    let mask = (rnd() & 0x0101) << (8 * (rnd() % 3));
                    sc.extend([((e as u64 + 1) << 32) | 1, rnd() % 2, mask, rnd() & mask]);
                    let later = t + 1 + (rnd() as usize % TABLES);
                    gotos.push((later < TABLES && !rnd().is_multiple_of(4)).then_some(later as u8));
                }
                fake.push((
                    sc.clone(),
                    entries(&sc).unwrap().iter().zip(&gotos).filter_map(|((id, _), g)| g.map(|g| (*id, g))).collect(),
                ));
                shapes.push(match (rnd() + round) % 4 {
                    0 if t > 0 => TableShape::Empty,
                    1 => TableShape::Structure,
                    _ => TableShape::Scanned { scan: sc.into(), gotos },
                });
            }
            let code = PipelineCode::compile(&shapes).expect("compiles");
            assert!(code.is_for(&shapes) && code.listing.contains("function"));
            for _ in 0..500 {
                let mut full = [0u8; FULL_LEN];
                for (i, b) in full.iter_mut().enumerate().take(16) {
                    *b = (rnd() >> (i % 8)) as u8 & 0x03;
                }
                // The interpreted walk over the same tables.
                let mut want = Vec::new();
                let mut t = 0;
                loop {
                    let hit = match &shapes[t] {
                        TableShape::Empty => None,
                        _ => scan(&fake[t].0, &full),
                    };
                    let Some(id) = hit else {
                        want.push(((t as u64) << 32) | u64::from(PATH_MISS));
                        break;
                    };
                    want.push(((t as u64) << 32) | u64::from(id));
                    match fake[t].1.get(&id).map(|g| usize::from(*g)) {
                        Some(g) if g > t && shapes[g] != TableShape::Empty => t = g,
                        _ => break,
                    }
                }
                let mut path = std::mem::MaybeUninit::uninit();
                // SAFETY: `fake_lookup` reads a `Fake` covering every table.
                let got = unsafe { code.run(&full, (&mut fake as *mut Fake).cast(), fake_lookup, &mut path) };
                assert_eq!(got, &want[..], "round {round}, shapes {shapes:?}");
            }
        }
        assert!(PipelineCode::compile(&[]).is_err());
        let bad = TableShape::Scanned { scan: vec![2].into(), gotos: vec![None] };
        assert!(PipelineCode::compile(&[bad]).is_err(), "a malformed scan");
        let uneven = TableShape::Scanned { scan: vec![1 << 32].into(), gotos: vec![] };
        assert!(PipelineCode::compile(&[uneven]).is_err(), "gotos that are not one per entry");
    }

    #[test]
    fn an_empty_or_malformed_scan() {
        let empty = TableCode::compile(&[]).expect("an empty table compiles");
        assert_eq!(empty.find(&[0; FULL_LEN]), None);
        // A head that promises more words than follow, a word index past the key.
        assert!(TableCode::compile(&[2]).is_err());
        assert!(TableCode::compile(&[1, 17, 0, 0]).is_err());
        // An id the function's answer (id + 1) cannot carry.
        assert!(TableCode::compile(&[u64::from(u32::MAX) << 32]).is_err());
    }
}
