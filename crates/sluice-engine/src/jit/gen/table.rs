//! Table nodes as generated code: the key built from the PHV, the lookup
//! inline through the table's `TableView` (direct array, DIR-24-8, open
//! addressing) or through a helper, and the dispatch of the result to its
//! action's case and next node (or, for a table the interpreter applied,
//! to the node it returned).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, Value};
use cranelift_frontend::Switch as CaseSwitch;

use super::{band_u, mem, Gen, Mem};
use crate::jit::abi::{encode_node, OFF_DATA, OFF_LOOKUPS, OFF_VALID, OFF_VIEWS, VIEW_SIZE};
use crate::plan::Node;
use crate::tables::TableView;

impl Gen<'_, '_, '_> {
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
    pub(in crate::jit) fn integer_key(&mut self, parts: &[(crate::plan::KeyPart, u32)]) -> Value {
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

    /// `u32` slot `i` of the array whose address `view` holds at byte
    /// `field` (a direct array's record ids, a DIR-24-8 level).
    fn view_slot(&mut self, view: Value, field: i32, i: Value) -> Value {
        let mf = mem(self.b, Mem::Inputs);
        let base = self.b.ins().load(types::I64, mf, view, field);
        let off = self.b.ins().ishl_imm_u(i, 2);
        let addr = self.b.ins().iadd(base, off);
        let mf = mem(self.b, Mem::Tables);
        self.b.ins().uload32(mf, addr, 0)
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
        // The kind and the shift, both `u32`, at 0 and 4; the shift is
        // loaded only where a kind uses it.
        const _: () =
            assert!(std::mem::offset_of!(TableView, kind) == 0 && std::mem::offset_of!(TableView, shift) == 4);
        let mf = mem(self.b, Mem::Inputs);
        let kind = self.b.ins().uload32(mf, view, 0);
        let direct = self.b.create_block();
        let dir = self.b.create_block();
        let hash = self.b.create_block();
        let hit = self.b.create_block();
        self.b.append_block_param(hit, types::I64); // the hot record id

        // The hit's record and its action, then the action's case.
        let dispatch = self.b.create_block();
        self.b.append_block_param(dispatch, types::I64);
        self.b.append_block_param(dispatch, types::I64);

        // The kind the table's match type makes likely is tested first.
        let tp = &self.plan.tables[t as usize];
        let (tp_key_bytes, has_profile) = (tp.key_bytes as u32, tp.profile.is_some());
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
        let mf = mem(self.b, Mem::Inputs);
        let shift = self.b.ins().uload32(mf, view, 4);
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

        // Direct array: the key's own row in `b` (`tables::DirectRows`:
        // its record with the action plus one, zeros for no entry, whose
        // action then reads as the cold record's), or, for a table with an
        // action profile (whose member records go to `h_indirect`),
        // `a[key]`, the record id. The arrays have a slot for every key of
        // the table's key bytes (`TableView::kind`), so a key of no more
        // bits is inside them without a check.
        self.b.switch_to_block(direct);
        let key_bits: u32 = parts.iter().map(|(_, bits)| *bits).sum();
        if key_bits > 8 * tp_key_bytes {
            let mf = mem(self.b, Mem::Inputs);
            let len = self.b.ins().load(types::I64, mf, view, 24);
            let inside = self.b.ins().icmp(IntCC::UnsignedLessThan, key, len);
            let read = self.b.create_block();
            self.b.ins().brif(inside, read, &[], engine, &[]);
            self.b.switch_to_block(read);
        }
        if !has_profile {
            let mf = mem(self.b, Mem::Inputs);
            let rows = self.b.ins().load(types::I64, mf, view, 16);
            let off = self.b.ins().ishl_imm_u(key, crate::tables::HOT_RECORD_SHIFT);
            let rec = self.b.ins().iadd(rows, off);
            let mf = mem(self.b, Mem::Tables);
            let plus_one = self.b.ins().load(types::I32, mf, rec, 0);
            let action = self.b.ins().iadd_imm_s(plus_one, -1);
            let action = self.b.ins().uextend(types::I64, action);
            self.b.ins().jump(dispatch, &[rec.into(), action.into()]);
        } else {
            let r = self.view_slot(view, 8, key);
            self.b.ins().jump(hit, &[r.into()]);
        }

        // DIR-24-8 of record ids (`lpm::DirLpm::record`); 0 for no route.
        self.b.switch_to_block(dir);
        let k32 = band_u(self.b, key, 0xffff_ffff);
        let mf = mem(self.b, Mem::Inputs);
        let shift = self.b.ins().uload32(mf, view, 4);
        let idx = self.b.ins().ushr(k32, shift);
        let slot = self.view_slot(view, 8, idx);
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
        let slot = self.view_slot(view, 16, i);
        self.b.ins().jump(hit, &[slot.into()]);

        // The hit's hot record (the cold record 0 for no entry, whose
        // action sends the packet to the engine), then its action.
        self.b.switch_to_block(hit);
        let r = self.b.block_params(hit)[0];
        let mf = mem(self.b, Mem::Inputs);
        let hot = self.b.ins().load(types::I64, mf, view, 32);
        let off = self.b.ins().ishl_imm_u(r, crate::tables::HOT_RECORD_SHIFT);
        let rec = self.b.ins().iadd(hot, off);
        let mf = mem(self.b, Mem::Tables);
        let action = self.b.ins().uload32(mf, rec, 0);
        self.b.ins().jump(dispatch, &[rec.into(), action.into()]);
        self.b.switch_to_block(dispatch);
        let (rec, action) = (self.b.block_params(dispatch)[0], self.b.block_params(dispatch)[1]);
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
        for (tr, blk) in trampolines {
            self.b.switch_to_block(tr);
            self.count_inline_hit(t);
            self.b.ins().jump(blk, &[data.into()]);
        }
        key
    }

    /// Counts a hit resolved inline, with no helper (`State::lookups`,
    /// hits first in each table's pair; helpers count what they resolve),
    /// through `JitCtx::lookups`. Not in the batch function, whose inline
    /// hits follow from its edge counts (see `jit::flow`).
    fn count_inline_hit(&mut self, t: u32) {
        if self.flow.is_some() {
            return;
        }
        let counts = self.ptr(OFF_LOOKUPS);
        let mf = mem(self.b, Mem::Counters);
        let hits = self.b.ins().load(types::I64, mf, counts, 16 * t as i32);
        let hits = self.b.ins().iadd_imm_u(hits, 1);
        let mf = mem(self.b, Mem::Counters);
        self.b.ins().store(mf, hits, counts, 16 * t as i32);
    }

    pub(super) fn table(&mut self, t: u32) {
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
        let end = self.edge_to(None);
        self.b.ins().jump(end, &[]);

        // Applied by the interpreter: `-1 - next node`, or i64::MIN on exit.
        self.b.switch_to_block(full);
        let exit = self.b.ins().icmp_imm_u(IntCC::Equal, r, i64::MIN);
        let dispatch = self.b.create_block();
        let end = self.edge_to(None);
        self.b.ins().brif(exit, end, &[], dispatch, &[]);
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
                let blk = self.edge_to(n);
                sw.set_entry(e as u128, blk);
            }
        }
        let other = self.b.create_block();
        sw.emit(self.b, enc, other);
        // Any other node (not expected): let the interpreter run the rest.
        self.b.switch_to_block(other);
        self.call(self.h_run_from, &[self.ctx, enc]);
        let end = self.edge_to(None);
        self.b.ins().jump(end, &[]);
    }
}
