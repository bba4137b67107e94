//! Actions as generated code: which run inline (field assignments from
//! shortcut expressions, counters, meters, registers of at most 64 bits,
//! `mark_to_drop`, `exit`), their primitives, the rest through
//! `h_action`, and the jump to the next node after an action.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};

use super::expr::fast_bits;
use super::{band_u, mem, Gen, Mem};
use crate::jit::abi::{
    RegisterView, CELL_BYTES, CELL_PACKETS, CELL_SIZE, HOT_RECORD, OFF_COUNTERS, OFF_DATA, OFF_REGISTERS, REG_LO,
};
use crate::phv::{mask64, FieldSrc};
use crate::plan::{Dst, Node, Prim};
use crate::registers::{in_low_word, width_mask, RegCell};

/// Result of an inline action: whether it always ends the pipeline (`exit`).
pub(super) enum ActionEnd {
    Continue,
    Exit,
    /// The action ran in a helper; the value is its exit flag (i32).
    Dynamic(Value),
}

impl Gen<'_, '_, '_> {
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
                in_low_word(self.plan.registers[*arr as usize].width)
                    && Self::supported(&idx.fast, data)
                    && Self::supported(&val.fast, data)
            }
            Prim::RegRead { dst: Dst::Field(f), arr, idx } => {
                in_low_word(self.plan.registers[*arr as usize].width)
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
        let at = self.b.ins().imul_imm_u(i, std::mem::size_of::<RegCell>() as i64);
        (inside, self.b.ins().iadd(cells, at))
    }

    /// Generates action `ai` in the current block (data, if any, read at
    /// `Gen::data_base`; a helper-run action gets it copied into `JitCtx::data`).
    pub(super) fn action(&mut self, ai: u32, data: bool) -> ActionEnd {
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
                    // the register's width (at most 64 bits: the high word stays 0),
                    // as `Registers::write` writes it.
                    let i = self.fast(&idx.fast);
                    let v = self.fast(&val.fast);
                    let v = band_u(self.b, v, width_mask(plan.registers[*arr as usize].width) as i64);
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
                    // Inline: cell `i`'s low word, or 0 out of range (as `Registers::read_or_zero` gives).
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

    /// Ends the current block after an action: to `next`, or out on exit.
    pub(super) fn after_action(&mut self, end: ActionEnd, next: Option<Node>) {
        match end {
            ActionEnd::Continue => {
                let n = self.edge_to(next);
                self.b.ins().jump(n, &[]);
            }
            ActionEnd::Exit => {
                let end = self.edge_to(None);
                self.b.ins().jump(end, &[]);
            }
            ActionEnd::Dynamic(exit) => {
                let n = self.edge_to(next);
                let end = self.edge_to(None);
                self.b.ins().brif(exit, end, &[], n, &[]);
            }
        }
    }
}
