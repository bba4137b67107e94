//! Shortcut expressions (`Fast`) as generated code, and condition nodes:
//! inline when the expression has a shortcut form, else through `h_cond`.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};

use super::{band_u, mem, wire_bits, Gen, Grid, Mem};
use crate::expr::{BinOp, Fast};
use crate::jit::abi::{DATA_LEN, OFF_DATA, OFF_VALID};
use crate::phv::FieldSrc;

/// At most how many low bits [`Gen::fast`]'s value of `f` has, when known
/// from its form alone. Why: a value known to fit its destination field
/// is stored without a mask.
pub(super) fn fast_bits(f: &Fast) -> Option<u32> {
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

impl Gen<'_, '_, '_> {
    pub(in crate::jit) fn bool_to_i64(&mut self, c: Value) -> Value {
        self.b.ins().uextend(types::I64, c)
    }

    /// Whether [`Gen::fast`] can generate `f` (`data`: action data in scope).
    pub(in crate::jit) fn supported(f: &Fast, data: bool) -> bool {
        match f {
            Fast::None => false,
            Fast::Param { off, len } => data && *len <= 8 && off + 8 <= DATA_LEN,
            Fast::And(p) | Fast::Or(p) => Self::supported(&p.0, data) && Self::supported(&p.1, data),
            _ => true,
        }
    }

    /// Generates a shortcut expression's value (as `fast_u64` computes it).
    pub(in crate::jit) fn fast(&mut self, f: &Fast) -> Value {
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
    pub(super) fn fast_bool(&mut self, f: &Fast) -> Value {
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

    pub(super) fn cond(&mut self, c: u32) {
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
        let (t, f) = (self.edge_to(cp.true_next), self.edge_to(cp.false_next));
        self.b.ins().brif(v, t, &[], f, &[]);
    }
}
