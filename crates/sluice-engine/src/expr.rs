//! Compiled expressions: resolved field ids, constants, and operators.
//!
//! An expression is compiled once per program; at run time it is a tree walk
//! with no name lookups and no allocation. Each top-level expression carries
//! a flag saying whether `i128` arithmetic is exact for it (decided by
//! [`bits`] and [`fits_i128`]), otherwise it is evaluated on 512 bits.

use sluice_json::Expr;

use crate::phv::{FieldSrc, Layout, Phv};
use crate::value::{Num, Wide};
use crate::CompileError;

/// A header designated statically or through a run-time stack index.
#[derive(Debug, Clone)]
pub enum HRef {
    /// A fixed header instance.
    Fixed(u32),
    /// `stack[index]`.
    StackElem(u32, Box<CExpr>),
    /// The last extracted element of a stack (`stack.last`).
    StackLast(u32),
    /// Member `.1` of the last extracted union of union stack `.0`.
    UnionStackLast(u32, usize),
}

/// Binary operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Shl,
    Shr,
    And,
    Or,
    Xor,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    LAnd,
    LOr,
}

/// A compiled expression.
#[derive(Debug, Clone)]
pub enum CExpr {
    /// A constant (both representations precomputed).
    Const(i128, Box<Wide>),
    /// A field read (sign-extended if the field is signed).
    Field(u32),
    /// A field of a header chosen at run time: `(header ref, field index in header)`.
    DynField(HRef, usize),
    /// Validity of a header (0 or 1).
    Valid(HRef),
    /// 1 if any member of the union is valid.
    ValidUnion(u32),
    /// An action parameter: byte offset and length in the action data, width in bits.
    Param {
        off: u32,
        len: u32,
    },
    /// Bits ahead of the parser cursor.
    Lookahead {
        off: u32,
        width: u32,
    },
    /// Index of the last valid element of a stack (`stack.lastIndex`).
    LastIndex(u32),
    /// Number of elements of a stack.
    StackSize(u32),
    Bin(BinOp, Box<CExpr>, Box<CExpr>),
    /// Logical not.
    LNot(Box<CExpr>),
    /// Bitwise not.
    BNot(Box<CExpr>),
    /// Arithmetic negation.
    Neg(Box<CExpr>),
    /// Nonzero test (`d2b`); `b2d` compiles to the operand itself.
    D2B(Box<CExpr>),
    /// Reduce modulo 2^w into the signed range.
    TwoCompMod(Box<CExpr>, u32),
    /// Saturate into `int<w>`.
    SatCast(Box<CExpr>, u32),
    /// Saturate into `bit<w>`.
    USatCast(Box<CExpr>, u32),
    Cond(Box<CExpr>, Box<CExpr>, Box<CExpr>),
}

/// Where a compiled expression reads its run-time inputs from.
pub struct Env<'a> {
    pub layout: &'a Layout,
    pub phv: &'a Phv,
    /// Action data of the running action (empty outside actions).
    pub params: &'a [u8],
    /// The packet and the parser cursor in bits (for lookahead).
    pub packet: &'a [u8],
    pub cursor_bits: usize,
}

impl CExpr {
    /// Evaluates with representation `T`.
    pub fn eval<T: Num>(&self, env: &Env) -> T {
        match self {
            CExpr::Const(s, w) => {
                if T::BITS == 128 {
                    T::from_u128(*s as u128)
                } else {
                    // Wide: rebuild from the stored wide constant.
                    let mut b = [0u8; 64];
                    w.write_be(&mut b);
                    let v = T::from_be(&b);
                    if w.is_neg() {
                        v.sext(512)
                    } else {
                        v
                    }
                }
            }
            CExpr::Field(f) => read_field::<T>(env, *f),
            CExpr::DynField(h, idx) => match resolve_href(h, env) {
                Some(hdr) => {
                    let f = env.layout.headers[hdr as usize].fields[*idx];
                    read_field::<T>(env, f)
                }
                None => T::ZERO,
            },
            CExpr::Valid(h) => match resolve_href(h, env) {
                Some(hdr) if env.phv.valid()[hdr as usize] => T::ONE,
                _ => T::ZERO,
            },
            CExpr::ValidUnion(u) => {
                if env.layout.unions[*u as usize].headers.iter().any(|h| env.phv.valid()[*h as usize]) {
                    T::ONE
                } else {
                    T::ZERO
                }
            }
            CExpr::Param { off, len } => T::from_be(&env.params[*off as usize..(*off + *len) as usize]),
            CExpr::Lookahead { off, width } => {
                let start = env.cursor_bits + *off as usize;
                if start + *width as usize > env.packet.len() * 8 {
                    return T::ZERO;
                }
                if *width <= 128 {
                    T::from_u128(crate::phv::read_bits(env.packet, start, *width))
                } else {
                    let mut b = vec![0u8; crate::value::nbytes(*width)];
                    crate::phv::read_bits_into(env.packet, start, *width, &mut b);
                    T::from_be(&b)
                }
            }
            CExpr::LastIndex(s) => {
                let n = env.phv.stack_next[*s as usize] as i64;
                T::from_i64(n - 1).mask(32)
            }
            CExpr::StackSize(s) => T::from_i64(env.layout.stacks[*s as usize].headers.len() as i64),
            CExpr::Bin(op, a, b) => {
                match op {
                    BinOp::LAnd => {
                        return if a.eval::<T>(env) != T::ZERO && b.eval::<T>(env) != T::ZERO {
                            T::ONE
                        } else {
                            T::ZERO
                        };
                    }
                    BinOp::LOr => {
                        return if a.eval::<T>(env) != T::ZERO || b.eval::<T>(env) != T::ZERO {
                            T::ONE
                        } else {
                            T::ZERO
                        };
                    }
                    _ => {}
                }
                let x = a.eval::<T>(env);
                let y = b.eval::<T>(env);
                let t = |c: bool| if c { T::ONE } else { T::ZERO };
                match op {
                    BinOp::Add => x.add(y),
                    BinOp::Sub => x.sub(y),
                    BinOp::Mul => x.mul(y),
                    BinOp::Div => x.div(y).unwrap_or(T::ZERO),
                    BinOp::Mod => x.rem(y).unwrap_or(T::ZERO),
                    BinOp::Shl => x.shl(y.as_u64_sat()),
                    BinOp::Shr => x.shr(y.as_u64_sat()),
                    BinOp::And => x.and(y),
                    BinOp::Or => x.or(y),
                    BinOp::Xor => x.xor(y),
                    BinOp::Eq => t(x == y),
                    BinOp::Ne => t(x != y),
                    BinOp::Lt => t(x < y),
                    BinOp::Le => t(x <= y),
                    BinOp::Gt => t(x > y),
                    BinOp::Ge => t(x >= y),
                    BinOp::LAnd | BinOp::LOr => unreachable!("handled above"),
                }
            }
            CExpr::LNot(a) => {
                if a.eval::<T>(env) == T::ZERO {
                    T::ONE
                } else {
                    T::ZERO
                }
            }
            CExpr::BNot(a) => a.eval::<T>(env).not(),
            CExpr::Neg(a) => a.eval::<T>(env).neg(),
            CExpr::D2B(a) => {
                if a.eval::<T>(env) == T::ZERO {
                    T::ZERO
                } else {
                    T::ONE
                }
            }
            CExpr::TwoCompMod(a, w) => a.eval::<T>(env).sext(*w),
            CExpr::SatCast(a, w) => {
                let v = a.eval::<T>(env);
                let max = T::ONE.shl(*w as u64 - 1).sub(T::ONE);
                let min = T::ONE.shl(*w as u64 - 1).neg();
                if v > max {
                    max
                } else if v < min {
                    min
                } else {
                    v
                }
            }
            CExpr::USatCast(a, w) => {
                let v = a.eval::<T>(env);
                let max = T::ONE.shl(*w as u64).sub(T::ONE);
                if v.is_neg() {
                    T::ZERO
                } else if v > max {
                    max
                } else {
                    v
                }
            }
            CExpr::Cond(c, a, b) => {
                if c.eval::<T>(env) != T::ZERO {
                    a.eval::<T>(env)
                } else {
                    b.eval::<T>(env)
                }
            }
        }
    }
}

#[inline]
fn read_field<T: Num>(env: &Env, f: u32) -> T {
    let fi = &env.layout.fields[f as usize];
    let v = match fi.loc {
        crate::phv::Loc::Slot(i) => T::from_u128(env.phv.slots[i as usize]),
        crate::phv::Loc::Wide { off, len } => T::from_be(&env.phv.wide[off as usize..(off + len) as usize]),
        crate::phv::Loc::Wire { bit } => T::from_u128(crate::phv::read_bits(env.phv.wire(), bit as usize, fi.width)),
    };
    if fi.signed {
        v.sext(fi.width)
    } else {
        v
    }
}

/// Resolves a header reference at run time; `None` for an out-of-range stack index.
pub fn resolve_href(h: &HRef, env: &Env) -> Option<u32> {
    match h {
        HRef::Fixed(x) => Some(*x),
        HRef::StackElem(s, idx) => {
            let i = idx.eval::<i128>(env);
            let st = &env.layout.stacks[*s as usize];
            if i < 0 || i as usize >= st.headers.len() {
                None
            } else {
                Some(st.headers[i as usize])
            }
        }
        HRef::StackLast(s) => {
            let n = env.phv.stack_next[*s as usize] as usize;
            let st = &env.layout.stacks[*s as usize];
            if n == 0 || n > st.headers.len() {
                None
            } else {
                Some(st.headers[n - 1])
            }
        }
        HRef::UnionStackLast(s, m) => {
            let n = env.phv.union_stack_next[*s as usize] as usize;
            let u = *env.layout.union_stacks[*s as usize].unions.get(n.checked_sub(1)?)?;
            env.layout.unions[u as usize].headers.get(*m).copied()
        }
    }
}

/// Upper bound on the number of bits (magnitude plus sign) of an expression's value;
/// `None` when unbounded.
pub fn bits(e: &CExpr, layout: &Layout) -> Option<u32> {
    Some(match e {
        CExpr::Const(s, w) => {
            if **w > Wide::from(i128::MAX) || **w < Wide::from(i128::MIN) {
                return Some(512);
            }
            if *s < 0 {
                129 - (!*s).leading_zeros()
            } else {
                128 - s.leading_zeros()
            }
        }
        CExpr::Field(f) => layout.fields[*f as usize].width,
        CExpr::DynField(..) => 128,
        CExpr::Valid(_) | CExpr::ValidUnion(_) | CExpr::LNot(_) | CExpr::D2B(_) => 1,
        CExpr::Param { len, .. } => len * 8,
        CExpr::Lookahead { width, .. } => *width,
        CExpr::LastIndex(_) | CExpr::StackSize(_) => 32,
        CExpr::Bin(op, a, b) => {
            let (x, y) = (bits(a, layout), bits(b, layout));
            match op {
                BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::LAnd | BinOp::LOr => 1,
                BinOp::Add | BinOp::Sub => x?.max(y?) + 1,
                BinOp::Mul => x? + y?,
                BinOp::Div | BinOp::Mod | BinOp::Shr => x?,
                BinOp::And | BinOp::Or | BinOp::Xor => x?.max(y?),
                BinOp::Shl => match &**b {
                    CExpr::Const(s, _) if *s >= 0 && *s < 4096 => x? + *s as u32,
                    _ => return None,
                },
            }
        }
        CExpr::BNot(a) | CExpr::Neg(a) => bits(a, layout)? + 1,
        CExpr::TwoCompMod(_, w) | CExpr::SatCast(_, w) | CExpr::USatCast(_, w) => *w + 1,
        CExpr::Cond(_, a, b) => bits(a, layout)?.max(bits(b, layout)?),
    })
}

/// True when evaluating `e` with `i128` gives exactly the low 128 bits of the
/// arbitrary-precision result and every comparison/shift/division sees exact operands.
pub fn fits_i128(e: &CExpr, layout: &Layout) -> bool {
    let exact = |x: &CExpr| bits(x, layout).is_some_and(|b| b <= 126) && fits_i128(x, layout);
    match e {
        CExpr::Const(..)
        | CExpr::Field(_)
        | CExpr::Valid(HRef::Fixed(_))
        | CExpr::Valid(HRef::StackLast(_))
        | CExpr::ValidUnion(_)
        | CExpr::Param { .. }
        | CExpr::LastIndex(_)
        | CExpr::StackSize(_) => true,
        CExpr::Lookahead { width, .. } => *width <= 128,
        CExpr::DynField(h, _) | CExpr::Valid(h) => match h {
            HRef::StackElem(_, i) => exact(i),
            _ => true,
        },
        CExpr::Bin(op, a, b) => match op {
            BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor => {
                fits_i128(a, layout) && fits_i128(b, layout)
            }
            BinOp::Shl => fits_i128(a, layout) && exact(b),
            _ => exact(a) && exact(b),
        },
        CExpr::BNot(a) | CExpr::Neg(a) => fits_i128(a, layout),
        CExpr::TwoCompMod(a, w) => *w <= 126 && fits_i128(a, layout),
        CExpr::LNot(a) | CExpr::D2B(a) | CExpr::SatCast(a, _) | CExpr::USatCast(a, _) => exact(a),
        CExpr::Cond(c, a, b) => exact(c) && fits_i128(a, layout) && fits_i128(b, layout),
    }
}

/// Shapes of expressions that p4c emits very often, evaluated without a tree
/// walk and in `u64`. Each is exact: it is only chosen when it computes the
/// same value as the general evaluator (unsigned fields of at most 64 bits,
/// constants and masks that fit 64 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fast {
    /// No shortcut: walk the tree.
    None,
    /// A constant.
    Const(u64),
    /// An unsigned field with a hot-path reader.
    Field(FieldSrc),
    /// An action parameter of at most 8 bytes.
    Param {
        off: u32,
        len: u32,
    },
    /// `(slot + c) & mask` (p4c's form of `x + c` and `x - c`); only the
    /// low 64 bits of `c` matter under a 64-bit mask.
    AddMask {
        slot: FieldSrc,
        c: u64,
        mask: u64,
    },
    /// Header validity (`isValid()`, `d2b(h.$valid$)`).
    Valid(u32),
    /// Negated header validity.
    NotValid(u32),
    /// `slot OP c` for a comparison operator (constant on the right).
    Cmp {
        slot: FieldSrc,
        c: u64,
        op: BinOp,
    },
    /// `a OP b` for a comparison operator between two unsigned fields
    /// (`egress_port == ingress_port`).
    CmpFields {
        a: FieldSrc,
        b: FieldSrc,
        op: BinOp,
    },
    /// `slot & mask` (a field of at most 64 bits only keeps the mask's low bits).
    AndConst {
        slot: FieldSrc,
        mask: u64,
    },
    /// `field != 0` (`d2b(field)`).
    NonZero(FieldSrc),
    /// Logical and / or of two shortcuts.
    And(Box<(Fast, Fast)>),
    Or(Box<(Fast, Fast)>),
}

/// A top-level expression with its chosen representation.
#[derive(Debug, Clone)]
pub struct Root {
    pub e: CExpr,
    pub wide: bool,
    pub fast: Fast,
}

fn unsigned_slot(e: &CExpr, layout: &Layout) -> Option<FieldSrc> {
    match e {
        CExpr::Field(f) => {
            let fi = &layout.fields[*f as usize];
            if fi.signed {
                return None;
            }
            FieldSrc::of(fi)
        }
        _ => None,
    }
}

fn const_u128(e: &CExpr) -> Option<u128> {
    match e {
        CExpr::Const(c, _) if *c >= 0 => Some(*c as u128),
        _ => None,
    }
}

fn const_u64(e: &CExpr) -> Option<u64> {
    const_u128(e).and_then(|c| u64::try_from(c).ok())
}

fn fast_shape(e: &CExpr, layout: &Layout) -> Fast {
    if let Some(c) = const_u64(e) {
        return Fast::Const(c);
    }
    if let Some(s) = unsigned_slot(e, layout) {
        return Fast::Field(s);
    }
    match e {
        CExpr::Param { off, len } if *len <= 8 && *len > 0 => Fast::Param { off: *off, len: *len },
        CExpr::Valid(HRef::Fixed(h)) => Fast::Valid(*h),
        CExpr::D2B(x) => match fast_shape(x, layout) {
            Fast::Valid(h) => Fast::Valid(h),
            Fast::Field(s) => Fast::NonZero(s),
            f @ (Fast::Cmp { .. } | Fast::CmpFields { .. }) => f,
            _ => Fast::None,
        },
        CExpr::LNot(x) => match fast_shape(x, layout) {
            Fast::Valid(h) => Fast::NotValid(h),
            _ => Fast::None,
        },
        CExpr::Bin(BinOp::And, a, m) if unsigned_slot(a, layout).is_some() && const_u128(m).is_some() => {
            Fast::AndConst { slot: unsigned_slot(a, layout).expect("checked"), mask: const_u128(m).unwrap_or(0) as u64 }
        }
        CExpr::Bin(BinOp::And, a, m) => match (&**a, const_u64(m)) {
            (CExpr::Bin(BinOp::Add, x, c), Some(mask)) => match (unsigned_slot(x, layout), const_u128(c)) {
                (Some(slot), Some(c)) => Fast::AddMask { slot, c: c as u64, mask },
                _ => Fast::None,
            },
            _ => Fast::None,
        },
        CExpr::Bin(op @ (BinOp::LAnd | BinOp::LOr), a, b) => {
            let (x, y) = (fast_shape(a, layout), fast_shape(b, layout));
            if matches!(x, Fast::None) || matches!(y, Fast::None) {
                return Fast::None;
            }
            if *op == BinOp::LAnd {
                Fast::And(Box::new((x, y)))
            } else {
                Fast::Or(Box::new((x, y)))
            }
        }
        CExpr::Bin(op @ (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge), a, b) => {
            match (unsigned_slot(a, layout), const_u64(b), unsigned_slot(b, layout)) {
                (Some(slot), Some(c), _) => Fast::Cmp { slot, c, op: *op },
                (Some(a), None, Some(b)) => Fast::CmpFields { a, b, op: *op },
                _ => Fast::None,
            }
        }
        _ => Fast::None,
    }
}

impl Root {
    /// Chooses the representation for `e`, given the width of its destination (0 if none).
    pub fn new(e: CExpr, layout: &Layout, dst_width: u32) -> Root {
        let wide = !fits_i128(&e, layout) || dst_width > 128;
        let fast = if wide { Fast::None } else { fast_shape(&e, layout) };
        Root { e, wide, fast }
    }

    /// Evaluates to the low 128 bits (for destinations of at most 128 bits).
    #[inline]
    pub fn eval_u128(&self, env: &Env) -> u128 {
        if matches!(self.fast, Fast::None) {
            return if self.wide { self.e.eval::<Wide>(env).low_u128() } else { self.e.eval::<i128>(env) as u128 };
        }
        eval_fast(&self.fast, env)
    }

    /// Evaluates to big-endian bytes (two's complement, low `out.len()*8` bits).
    pub fn eval_bytes(&self, env: &Env, out: &mut [u8]) {
        if self.wide {
            self.e.eval::<Wide>(env).write_be(out)
        } else if out.len() <= 16 && !matches!(self.fast, Fast::None) {
            crate::value::u128_to_be(self.eval_u128(env), out)
        } else {
            self.e.eval::<i128>(env).write_be(out)
        }
    }

    /// Evaluates as a condition.
    #[inline]
    pub fn eval_bool(&self, env: &Env) -> bool {
        match &self.fast {
            Fast::None => {
                if self.wide {
                    self.e.eval::<Wide>(env) != Wide::ZERO
                } else {
                    self.e.eval::<i128>(env) != 0
                }
            }
            f => eval_fast(f, env) != 0,
        }
    }
}

/// Evaluates a shortcut (never `Fast::None`).
#[inline(always)]
fn eval_fast(f: &Fast, env: &Env) -> u128 {
    fast_value(f, env.phv, env.params)
}

/// Evaluates a shortcut from the PHV and the action data alone.
///
/// Inlined into its callers: the leaf cases are a few instructions each and
/// a call would cost more than they do.
#[inline(always)]
pub fn fast_value(f: &Fast, phv: &Phv, params: &[u8]) -> u128 {
    u128::from(fast_u64(f, phv, params))
}

/// [`fast_value`] in its native width.
#[inline(always)]
pub fn fast_u64(f: &Fast, phv: &Phv, params: &[u8]) -> u64 {
    match f {
        Fast::And(p) => (fast_operand(&p.0, phv, params) != 0 && fast_operand(&p.1, phv, params) != 0) as u64,
        Fast::Or(p) => (fast_operand(&p.0, phv, params) != 0 || fast_operand(&p.1, phv, params) != 0) as u64,
        _ => fast_leaf(f, phv, params),
    }
}

/// An operand of `&&` / `||`: a leaf inline, a nested connective out of line.
#[inline(always)]
fn fast_operand(f: &Fast, phv: &Phv, params: &[u8]) -> u64 {
    match f {
        Fast::And(_) | Fast::Or(_) => fast_nested(f, phv, params),
        _ => fast_leaf(f, phv, params),
    }
}

#[inline(never)]
fn fast_nested(f: &Fast, phv: &Phv, params: &[u8]) -> u64 {
    fast_u64(f, phv, params)
}

/// `v OP c` for a comparison operator of [`Fast::Cmp`], as 0 or 1.
#[inline(always)]
fn compare(op: BinOp, v: u64, c: u64) -> u64 {
    (match op {
        BinOp::Eq => v == c,
        BinOp::Ne => v != c,
        BinOp::Lt => v < c,
        BinOp::Le => v <= c,
        BinOp::Gt => v > c,
        _ => v >= c,
    }) as u64
}

/// A shortcut other than `&&` / `||`.
#[inline(always)]
fn fast_leaf(f: &Fast, phv: &Phv, params: &[u8]) -> u64 {
    match f {
        Fast::Const(c) => *c,
        Fast::Field(s) => s.read(phv),
        Fast::Param { off, len } => {
            // Action data is stored with 16 bytes of zero padding: one window load.
            let off = *off as usize;
            match params.get(off..off + 8) {
                Some(w) => u64::from_be_bytes(w.try_into().expect("8 bytes")) >> (64 - 8 * *len),
                None => crate::value::be_to_u128(&params[off..off + *len as usize]) as u64,
            }
        }
        Fast::AddMask { slot, c, mask } => slot.read(phv).wrapping_add(*c) & mask,
        Fast::Valid(h) => phv.valid()[*h as usize] as u64,
        Fast::NotValid(h) => !phv.valid()[*h as usize] as u64,
        Fast::Cmp { slot, c, op } => compare(*op, slot.read(phv), *c),
        Fast::CmpFields { a, b, op } => compare(*op, a.read(phv), b.read(phv)),
        Fast::AndConst { slot, mask } => slot.read(phv) & mask,
        Fast::NonZero(s) => (s.read(phv) != 0) as u64,
        Fast::And(_) | Fast::Or(_) => fast_nested(f, phv, params),
        Fast::None => unreachable!("callers check for Fast::None"),
    }
}

/// Compilation context for expressions: the layout and the action parameters in scope.
pub struct ExprCx<'a> {
    pub layout: &'a Layout,
    /// `(byte offset, byte length)` of each action parameter.
    pub params: &'a [(u32, u32)],
    pub path: &'a str,
}

impl ExprCx<'_> {
    fn err(&self, m: impl Into<String>) -> CompileError {
        CompileError::at(self.path, m)
    }

    /// Resolves `header.field` (with `$valid$` handled by the caller).
    pub fn field(&self, h: &str, f: &str) -> Result<u32, CompileError> {
        self.layout.field(h, f).ok_or_else(|| self.err(format!("unknown field \"{h}.{f}\"")))
    }

    /// Compiles a header-valued expression.
    pub fn href(&self, e: &Expr) -> Result<HRef, CompileError> {
        match e {
            Expr::Header(h) => {
                Ok(HRef::Fixed(self.layout.header(h).ok_or_else(|| self.err(format!("unknown header \"{h}\"")))?))
            }
            Expr::Op { op, left: Some(l), right: Some(r) } if op == "dereference_header_stack" => {
                let s = match &**l {
                    Expr::HeaderStack(s) => {
                        self.layout.stack(s).ok_or_else(|| self.err(format!("unknown header stack \"{s}\"")))?
                    }
                    _ => return Err(self.err("dereference_header_stack needs a header_stack")),
                };
                // A constant index resolves now.
                let idx = self.expr(r)?;
                if let CExpr::Const(i, _) = idx {
                    let st = &self.layout.stacks[s as usize];
                    if i >= 0 && (i as usize) < st.headers.len() {
                        return Ok(HRef::Fixed(st.headers[i as usize]));
                    }
                }
                Ok(HRef::StackElem(s, Box::new(idx)))
            }
            Expr::Op { op, left: None, right: Some(r) } if op == "last_stack_element" => match &**r {
                Expr::HeaderStack(s) => Ok(HRef::StackLast(
                    self.layout.stack(s).ok_or_else(|| self.err(format!("unknown header stack \"{s}\"")))?,
                )),
                _ => Err(self.err("last_stack_element needs a header_stack")),
            },
            other => Err(self.err(format!("expected a header, got {other:?}"))),
        }
    }

    /// Compiles a `union_stack_field` of a parser transition key: field
    /// `field` of member `member` of the union stack's last extracted union
    /// (zero while none is), and the field's width.
    pub fn union_stack_field(&self, stack: &str, member: &str, field: &str) -> Result<(CExpr, u32), CompileError> {
        let us = self.layout.union_stack(stack).ok_or_else(|| self.err(format!("unknown union stack \"{stack}\"")))?;
        let u0 = *self.layout.union_stacks[us as usize]
            .unions
            .first()
            .ok_or_else(|| self.err(format!("union stack \"{stack}\" has no unions")))?;
        let union = &self.layout.unions[u0 as usize];
        let m = union
            .member_names
            .iter()
            .position(|x| x == member)
            .ok_or_else(|| self.err(format!("unknown member \"{member}\" of union stack \"{stack}\"")))?;
        let h = *union.headers.get(m).ok_or_else(|| self.err(format!("union member \"{member}\" has no header")))?;
        let idx = self
            .layout
            .field_index_in_header(h, field)
            .ok_or_else(|| self.err(format!("unknown field \"{field}\" of union member \"{stack}.{member}\"")))?;
        let width = self.layout.fields[self.layout.headers[h as usize].fields[idx] as usize].width;
        // Every union of the stack has the field at the same place (the
        // same union type), so the key reads whichever is last.
        for u in &self.layout.union_stacks[us as usize].unions {
            let same = self.layout.unions[*u as usize].headers.get(m).is_some_and(|h| {
                let fields = &self.layout.headers[*h as usize].fields;
                fields.get(idx).is_some_and(|f| self.layout.fields[*f as usize].name == field)
                    && self.layout.fields[fields[idx] as usize].width == width
            });
            if !same {
                return Err(self.err(format!("the unions of stack \"{stack}\" differ in member \"{member}\"")));
            }
        }
        Ok((CExpr::DynField(HRef::UnionStackLast(us, m), idx), width))
    }

    /// Compiles a value expression.
    pub fn expr(&self, e: &Expr) -> Result<CExpr, CompileError> {
        Ok(match e {
            Expr::Field(h, f) => {
                if f == "$valid$" {
                    if let Some(hd) = self.layout.header(h) {
                        return Ok(CExpr::Valid(HRef::Fixed(hd)));
                    }
                    if let Some(u) = self.layout.union(h) {
                        return Ok(CExpr::ValidUnion(u));
                    }
                    return Err(self.err(format!("unknown header \"{h}\"")));
                }
                CExpr::Field(self.field(h, f)?)
            }
            Expr::Hex { negative, magnitude } => {
                let w = <Wide as Num>::from_be(magnitude);
                let w = if *negative { w.neg() } else { w };
                let small = w.low_u128() as i128;
                CExpr::Const(small, Box::new(w))
            }
            Expr::Bool(b) => CExpr::Const(*b as i128, Box::new(Wide::from(*b as i64))),
            // `local` is how p4c refers to action parameters inside expressions.
            Expr::RuntimeData(i) | Expr::Local(i) => {
                let (off, len) =
                    *self.params.get(*i as usize).ok_or_else(|| self.err(format!("runtime_data {i} out of range")))?;
                CExpr::Param { off, len }
            }
            Expr::Lookahead(off, width) => CExpr::Lookahead { off: *off, width: *width },
            Expr::StackField(s, f) => {
                let si = self.layout.stack(s).ok_or_else(|| self.err(format!("unknown header stack \"{s}\"")))?;
                let h0 = self.layout.stacks[si as usize].headers[0];
                let idx = self
                    .layout
                    .field_index_in_header(h0, f)
                    .ok_or_else(|| self.err(format!("unknown field \"{f}\" in stack \"{s}\"")))?;
                CExpr::DynField(HRef::StackLast(si), idx)
            }
            Expr::UnionStackField(..) => {
                return Err(self.err("union_stack_field is only allowed in a parser transition key (as in bmv2)"))
            }
            Expr::AccessField(h, idx) => {
                let hr = self.href(h)?;
                if let HRef::Fixed(x) = hr {
                    let fields = &self.layout.headers[x as usize].fields;
                    let f = *fields.get(*idx as usize).ok_or_else(|| self.err("access_field index out of range"))?;
                    return Ok(CExpr::Field(f));
                }
                // Every element of a stack has the same type: check the index once.
                let h0 = match &hr {
                    HRef::StackElem(st, _) | HRef::StackLast(st) => {
                        self.layout.stacks[*st as usize].headers.first().copied()
                    }
                    HRef::Fixed(x) => Some(*x),
                    HRef::UnionStackLast(..) => None,
                };
                let nfields = h0.map_or(0, |h| self.layout.headers[h as usize].fields.len());
                if *idx as usize >= nfields {
                    return Err(self.err(format!("access_field index {idx} is out of range ({nfields} fields)")));
                }
                CExpr::DynField(hr, *idx as usize)
            }
            Expr::Cond { cond, left, right } => {
                CExpr::Cond(Box::new(self.expr(cond)?), Box::new(self.expr(left)?), Box::new(self.expr(right)?))
            }
            Expr::Op { op, left, right } => return self.op(op, left.as_deref(), right.as_deref()),
            other => return Err(self.err(format!("{other:?} is not a value expression"))),
        })
    }

    fn op(&self, op: &str, l: Option<&Expr>, r: Option<&Expr>) -> Result<CExpr, CompileError> {
        let need = |x: Option<&Expr>| -> Result<CExpr, CompileError> {
            match x {
                Some(e) => self.expr(e),
                None => Err(self.err(format!("operator \"{op}\" is missing an operand"))),
            }
        };
        let width_of = |x: Option<&Expr>| -> Result<u32, CompileError> {
            match x {
                Some(Expr::Hex { negative: false, magnitude }) => Ok(crate::value::be_to_u128(magnitude) as u32),
                _ => Err(self.err(format!("operator \"{op}\" needs a constant width"))),
            }
        };
        let bin =
            |b: BinOp| -> Result<CExpr, CompileError> { Ok(CExpr::Bin(b, Box::new(need(l)?), Box::new(need(r)?))) };
        match op {
            "+" => bin(BinOp::Add),
            "-" => {
                if l.is_none() {
                    Ok(CExpr::Neg(Box::new(need(r)?)))
                } else {
                    bin(BinOp::Sub)
                }
            }
            "*" => bin(BinOp::Mul),
            "/" => bin(BinOp::Div),
            "%" => bin(BinOp::Mod),
            "<<" => bin(BinOp::Shl),
            ">>" => bin(BinOp::Shr),
            "&" => bin(BinOp::And),
            "|" => bin(BinOp::Or),
            "^" => bin(BinOp::Xor),
            "==" => bin(BinOp::Eq),
            "!=" => bin(BinOp::Ne),
            "<" => bin(BinOp::Lt),
            "<=" => bin(BinOp::Le),
            ">" => bin(BinOp::Gt),
            ">=" => bin(BinOp::Ge),
            "and" => bin(BinOp::LAnd),
            "or" => bin(BinOp::LOr),
            "not" => Ok(CExpr::LNot(Box::new(need(r)?))),
            "~" => Ok(CExpr::BNot(Box::new(need(r)?))),
            "d2b" => Ok(CExpr::D2B(Box::new(need(r)?))),
            "b2d" => need(r),
            "two_comp_mod" => Ok(CExpr::TwoCompMod(Box::new(need(l)?), width_of(r)?)),
            "sat_cast" => Ok(CExpr::SatCast(Box::new(need(l)?), width_of(r)?)),
            "usat_cast" => Ok(CExpr::USatCast(Box::new(need(l)?), width_of(r)?)),
            "valid" => match r {
                Some(Expr::HeaderUnion(u)) => Ok(CExpr::ValidUnion(
                    self.layout.union(u).ok_or_else(|| self.err(format!("unknown header union \"{u}\"")))?,
                )),
                Some(h) => Ok(CExpr::Valid(self.href(h)?)),
                None => Err(self.err("valid needs a header")),
            },
            "valid_union" => match r {
                Some(Expr::HeaderUnion(u)) => Ok(CExpr::ValidUnion(
                    self.layout.union(u).ok_or_else(|| self.err(format!("unknown header union \"{u}\"")))?,
                )),
                _ => Err(self.err("valid_union needs a header_union")),
            },
            "last_stack_index" => match r {
                Some(Expr::HeaderStack(s)) => Ok(CExpr::LastIndex(
                    self.layout.stack(s).ok_or_else(|| self.err(format!("unknown header stack \"{s}\"")))?,
                )),
                _ => Err(self.err("last_stack_index needs a header_stack")),
            },
            "size_stack" => match r {
                Some(Expr::HeaderStack(s)) => Ok(CExpr::StackSize(
                    self.layout.stack(s).ok_or_else(|| self.err(format!("unknown header stack \"{s}\"")))?,
                )),
                _ => Err(self.err("size_stack needs a header_stack")),
            },
            "access_field" => Err(self.err("access_field in unexpected position")),
            other => Err(self.err(format!("operator \"{other}\" is not supported"))),
        }
    }
}
