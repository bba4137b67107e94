//! Native code for small flow tables: a table whose few entries the
//! classifier would scan is compiled into a function that compares the
//! key's words with each entry's constants in priority order (what the
//! LINC journal proposed and ESwitch calls direct code). Bigger tables
//! keep their lookup structures (the route-table template, the
//! classifier), which are data, not code.
//!
//! Contract: [`TableCode::compile`] reads a table's scan (see
//! `table::scan_find`: per entry a head word, id in the high half and
//! word count in the low byte, then `(word index, mask, masked value)`
//! triples) and writes a function of the packet's full key returning the
//! first entry it matches, the same answer as the scan. The function
//! reads only the 136-byte full key it is given, writes nothing, and
//! never traps.
//!
//! Concurrency: compiled once (by the agent, off the packet path), then
//! shared read-only by every replica through an `Arc`; the code is
//! immutable and reentrant. A table drops its code when its entries
//! change (the code answers for the scan it was made from, which it
//! keeps), so a stale function is never run; its memory is freed when
//! the last replica drops it.

use std::fmt;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, Endianness, InstBuilder, MemFlagsData, Signature, UserFuncName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{Linkage, Module};

use crate::fields::{FullKey, FULL_LEN};

/// The generated function: the full key's address in, the first matching
/// entry's id plus one out (0: none matches).
type ScanFn = extern "C" fn(*const u8) -> u32;

/// A small table compiled to native code (see the module documentation).
pub struct TableCode {
    func: ScanFn,
    module: Option<JITModule>,
    /// The scan it was compiled from.
    scan: Box<[u64]>,
    /// The Cranelift IR it was compiled from, for users.
    pub listing: String,
    /// Bytes of machine code.
    pub code_bytes: usize,
}

// SAFETY: the module is only touched again to free its memory on drop; the
// generated code is immutable and reentrant (it only reads its argument).
unsafe impl Send for TableCode {}
// SAFETY: as above: calling the function from several threads at once is
// reading immutable code and each caller's own key.
unsafe impl Sync for TableCode {}

impl Drop for TableCode {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the function pointer dies with `self`; nothing else holds it.
            unsafe { m.free_memory() };
        }
    }
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

impl TableCode {
    /// Compiles `scan` (see the module documentation).
    pub fn compile(scan: &[u64]) -> Result<TableCode, String> {
        let entries = entries(scan).ok_or("a table scan that is not well formed")?;
        let mut flags = settings::builder();
        let set =
            |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("cranelift flag {k}: {e}"));
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "is_pic", "false")?;
        let isa = cranelift_native::builder()
            .map_err(|e| format!("no native code generator for this host: {e}"))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("cranelift: {e}"))?;
        let mut module = JITModule::new(JITBuilder::with_isa(isa, cranelift_module::default_libcall_names()));
        let ptr = module.target_config().pointer_type();
        let mut sig = Signature::new(module.isa().default_call_conv());
        sig.params.push(AbiParam::new(ptr));
        sig.returns.push(AbiParam::new(types::I32));
        let id = module.declare_function("table_scan", Linkage::Local, &sig).map_err(|e| e.to_string())?;
        let mut ctx = Context::new();
        ctx.func.signature = sig;
        ctx.func.name = UserFuncName::user(0, id.as_u32());
        let mut fctx = FunctionBuilderContext::new();
        {
            let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let start = b.create_block();
            b.append_block_params_for_function_params(start);
            b.switch_to_block(start);
            let key = b.block_params(start)[0];
            // Every word some entry reads, loaded once (the key is 136
            // bytes the caller owns: in bounds, any alignment).
            let flags = MemFlagsData::new().with_notrap().with_endianness(Endianness::Little);
            let mut loaded = [None; FULL_LEN / 8];
            for (_, words) in &entries {
                for t in words.chunks_exact(3) {
                    let w = t[0] as usize;
                    if loaded[w].is_none() {
                        loaded[w] = Some(b.ins().load(types::I64, flags, key, (w * 8) as i32));
                    }
                }
            }
            let none = b.create_block();
            for (id, words) in &entries {
                // Each comparison failing goes to the next entry.
                let next = b.create_block();
                for t in words.chunks_exact(3) {
                    let v = loaded[t[0] as usize].expect("loaded above");
                    let masked = b.ins().band_imm_u(v, t[1] as i64);
                    let same = b.ins().icmp_imm_u(IntCC::Equal, masked, t[2] as i64);
                    let more = b.create_block();
                    b.ins().brif(same, more, &[], next, &[]);
                    b.switch_to_block(more);
                }
                let found = b.ins().iconst(types::I32, i64::from(id.wrapping_add(1)));
                b.ins().return_(&[found]);
                b.switch_to_block(next);
            }
            b.ins().jump(none, &[]);
            b.switch_to_block(none);
            let zero = b.ins().iconst(types::I32, 0);
            b.ins().return_(&[zero]);
            b.seal_all_blocks();
            b.finalize(module.target_config());
        }
        let listing = ctx.func.display().to_string();
        module.define_function(id, &mut ctx).map_err(|e| format!("cranelift: {e:?}"))?;
        let code_bytes = ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
        module.finalize_definitions().map_err(|e| format!("cranelift: {e}"))?;
        let p = module.get_finalized_function(id);
        // SAFETY: the function was declared with this signature (one pointer in, an i32 out).
        let func = unsafe { std::mem::transmute::<*const u8, ScanFn>(p) };
        Ok(TableCode { func, module: Some(module), scan: scan.into(), listing, code_bytes })
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::table::scan_find as scan;

    #[test]
    fn compiled_tables_find_what_the_scan_finds() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
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
