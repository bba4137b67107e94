//! Actions: primitives and action plans.
//!
//! Reads from the JSON model: `actions` (runtime data and primitives), and
//! the `field_lists` and `learn_lists` the primitives name by id.
//! Produces in the plan: `Plan::actions` (each `ActionPlan` with its
//! parameter layout and compiled `Prim`s, numbered in JSON order), the
//! id-to-index map the tables resolve `action_ids` with, `field_lists` and
//! `learn_lists`; and `pack_action_data`, which lays parameter values out
//! as action data (default entries here, entries at run time).
//! Errors: an unsupported primitive, too few parameters, an unknown
//! counter, meter, register, calculation or extern instance, a list
//! element that is no field; a wrong number of action parameters
//! (`pack_action_data`).

use std::collections::HashMap;

use sluice_json::{Expr, Primitive};

use super::cx::{is_psa, width_of, Cx, Dst};
use crate::expr::{CExpr, HRef, Root};
use crate::value::nbytes;
use crate::CompileError;

/// A compiled primitive.
#[derive(Debug, Clone)]
pub enum Prim {
    /// Assignment to a field with a hot-path writer (the common case), mask precomputed.
    SetField {
        dst: crate::phv::FieldSrc,
        mask: u64,
        src: Root,
    },
    Assign {
        dst: Dst,
        src: Root,
    },
    AssignHeader {
        dst: HRef,
        src: HRef,
    },
    AssignUnion {
        dst: u32,
        src: u32,
    },
    AssignStack {
        dst: u32,
        src: u32,
    },
    SetValid(HRef),
    SetInvalid(HRef),
    MarkToDrop,
    Exit,
    Jump(usize),
    JumpIfZero(Root, usize),
    Count {
        arr: u32,
        idx: Root,
    },
    ExecuteMeter {
        arr: u32,
        idx: Root,
        dst: Dst,
    },
    RegRead {
        dst: Dst,
        arr: u32,
        idx: Root,
    },
    RegWrite {
        arr: u32,
        idx: Root,
        val: Root,
    },
    Clone {
        ingress: bool,
        session: Root,
        field_list: Option<u32>,
    },
    Resubmit(Option<u32>),
    Recirculate(Option<u32>),
    Truncate(Root),
    Digest {
        receiver: Root,
        list: u32,
    },
    HashOffset {
        dst: Dst,
        base: Root,
        calc: u32,
        size: Root,
    },
    Rng {
        dst: Dst,
        lo: Root,
        hi: Root,
    },
    Push {
        stack: u32,
        n: u32,
    },
    Pop {
        stack: u32,
        n: u32,
    },
    Assert(Root),
    /// PSA `InternetChecksum` instance `ext` (its index among the
    /// program's): `clear`.
    CsumClear(u32),
    /// `add` (or `subtract`) of the fields of a field list, packed.
    CsumAdd {
        ext: u32,
        input: Vec<(Root, u32)>,
        subtract: bool,
    },
    /// `get` (the one's complement of the sum) into `dst`, or `get_state`
    /// (the sum itself).
    CsumGet {
        ext: u32,
        dst: Dst,
        state: bool,
    },
    /// `get_verify`: `dst` = whether `field` equals `get()`.
    CsumVerify {
        ext: u32,
        dst: Dst,
        field: Root,
    },
    /// `set_state`.
    CsumSetState {
        ext: u32,
        value: Root,
    },
    Log {
        fmt: String,
        args: Vec<Root>,
    },
    AssignVl {
        dst: u32,
        src: u32,
    },
}

/// A compiled action.
#[derive(Debug, Clone)]
pub struct ActionPlan {
    pub name: String,
    pub id: u64,
    /// `(name, bitwidth)` of each parameter.
    pub params: Vec<(String, u32)>,
    /// `(byte offset, byte length)` of each parameter in the action data.
    pub param_layout: Vec<(u32, u32)>,
    pub data_len: usize,
    pub prims: Vec<Prim>,
}

impl<'a> Cx<'a> {
    /// Compiles one primitive call; `params` is the action data layout.
    pub(super) fn prim(&self, pr: &Primitive, params: &[(u32, u32)]) -> Result<Prim, CompileError> {
        let path = pr.path.as_str();
        let n = pr.params.len();
        let need = |k: usize| -> Result<(), CompileError> {
            if n < k {
                Err(CompileError::at(path, format!("primitive \"{}\" needs {k} parameters, got {n}", pr.op)))
            } else {
                Ok(())
            }
        };
        let cx = self.ecx(params, path);
        Ok(match pr.op.as_str() {
            "assign" | "modify_field" => {
                need(2)?;
                let (dst, w) = self.dst(&pr.params[0], params, path)?;
                let src = self.root(&pr.params[1], params, path, w)?;
                match dst {
                    Dst::Field(f) => match crate::phv::FieldSrc::of(&self.layout.fields[f as usize]) {
                        Some(dst) => Prim::SetField { dst, mask: crate::phv::mask64(w), src },
                        None => Prim::Assign { dst: Dst::Field(f), src },
                    },
                    _ => Prim::Assign { dst, src },
                }
            }
            "add_to_field" | "subtract_from_field" => {
                need(2)?;
                let (dst, w) = self.dst(&pr.params[0], params, path)?;
                let op = if pr.op == "add_to_field" { "+" } else { "-" };
                let e = Expr::Op {
                    op: op.into(),
                    left: Some(Box::new(pr.params[0].clone())),
                    right: Some(Box::new(pr.params[1].clone())),
                };
                Prim::Assign { dst, src: self.root(&e, params, path, w)? }
            }
            "assign_header" => {
                need(2)?;
                Prim::AssignHeader { dst: cx.href(&pr.params[0])?, src: cx.href(&pr.params[1])? }
            }
            "assign_union" => {
                need(2)?;
                let u = |e: &Expr| -> Result<u32, CompileError> {
                    match e {
                        Expr::HeaderUnion(n) => self
                            .layout
                            .union(n)
                            .ok_or_else(|| CompileError::at(path, format!("unknown header union \"{n}\""))),
                        _ => Err(CompileError::at(path, "expected a header union")),
                    }
                };
                Prim::AssignUnion { dst: u(&pr.params[0])?, src: u(&pr.params[1])? }
            }
            "assign_header_stack" => {
                need(2)?;
                Prim::AssignStack { dst: self.stack_of(&pr.params[0], path)?, src: self.stack_of(&pr.params[1], path)? }
            }
            "add_header" | "setValid" => {
                need(1)?;
                Prim::SetValid(cx.href(&pr.params[0])?)
            }
            "remove_header" | "setInvalid" => {
                need(1)?;
                Prim::SetInvalid(cx.href(&pr.params[0])?)
            }
            "mark_to_drop" | "drop" => Prim::MarkToDrop,
            "exit" => Prim::Exit,
            "_jump" => {
                need(1)?;
                Prim::Jump(self.const_u64(&pr.params[0], path)? as usize)
            }
            "_jump_if_zero" => {
                need(2)?;
                Prim::JumpIfZero(
                    self.root(&pr.params[0], params, path, 0)?,
                    self.const_u64(&pr.params[1], path)? as usize,
                )
            }
            "count" => {
                need(2)?;
                Prim::Count {
                    arr: self.named(&self.counters, &pr.params[0], "counter array", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                }
            }
            "_InternetChecksum_clear"
            | "_InternetChecksum_add"
            | "_InternetChecksum_subtract"
            | "_InternetChecksum_get"
            | "_InternetChecksum_get_state"
            | "_InternetChecksum_get_verify"
            | "_InternetChecksum_set_state" => {
                let method = &pr.op["_InternetChecksum_".len()..];
                need(match method {
                    "clear" => 1,
                    "get_verify" => 3,
                    _ => 2,
                })?;
                let ext = self.named(&self.csums, &pr.params[0], "InternetChecksum", path)?;
                match method {
                    "clear" => Prim::CsumClear(ext),
                    "add" | "subtract" => {
                        let Expr::List(items) = &pr.params[1] else {
                            return Err(CompileError::at(path, "expected a field list"));
                        };
                        let mut input = Vec::new();
                        for e in items {
                            let ce = self.ecx(params, path).expr(e)?;
                            let w = width_of(self.layout, &ce);
                            if w == 0 {
                                return Err(CompileError::at(path, format!("checksum input {e:?} is not supported")));
                            }
                            input.push((Root::new(ce, self.layout, w), w));
                        }
                        Prim::CsumAdd { ext, input, subtract: method == "subtract" }
                    }
                    "get" | "get_state" => {
                        let (dst, _) = self.dst(&pr.params[1], params, path)?;
                        Prim::CsumGet { ext, dst, state: method == "get_state" }
                    }
                    "get_verify" => {
                        let (dst, _) = self.dst(&pr.params[1], params, path)?;
                        Prim::CsumVerify { ext, dst, field: self.root(&pr.params[2], params, path, 0)? }
                    }
                    _ => Prim::CsumSetState { ext, value: self.root(&pr.params[1], params, path, 0)? },
                }
            }
            "_Counter_count" => {
                need(2)?;
                Prim::Count {
                    arr: self.named(&self.counters, &pr.params[0], "Counter", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                }
            }
            "_Random_read" => {
                need(2)?;
                let (dst, _) = self.dst(&pr.params[1], params, path)?;
                let (lo, hi) = self.named(&self.randoms, &pr.params[0], "Random", path)?;
                let constant = |v: u64| Expr::Hex { negative: false, magnitude: v.to_be_bytes().to_vec() };
                Prim::Rng {
                    dst,
                    lo: self.root(&constant(lo), params, path, 0)?,
                    hi: self.root(&constant(hi), params, path, 0)?,
                }
            }
            "_Meter_execute" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[2], params, path)?;
                Prim::ExecuteMeter {
                    arr: self.named(&self.meters, &pr.params[0], "Meter", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                    dst,
                }
            }
            "_Hash_get_hash" | "_Hash_get_hash_mod" => {
                let with_mod = pr.op == "_Hash_get_hash_mod";
                need(if with_mod { 5 } else { 3 })?;
                let (dst, width) = self.dst(&pr.params[1], params, path)?;
                let (name, algo) = self.named(&self.hashes, &pr.params[0], "Hash", path)?;
                let Expr::List(items) = &pr.params[if with_mod { 3 } else { 2 }] else {
                    return Err(CompileError::at(path, "expected a field list"));
                };
                let input = items
                    .iter()
                    .map(|e| sluice_json::CalcInput { expr: e.clone(), bitwidth: None, path: path.to_string() })
                    .collect();
                let mut extra = self.extern_calcs.borrow_mut();
                let calc = (self.p.calculations.len() + extra.len()) as u32;
                extra.push((format!("{name}.get_hash"), algo.to_string(), input, path.to_string()));
                drop(extra);
                let constant = |v: u128| Expr::Hex { negative: false, magnitude: v.to_be_bytes().to_vec() };
                let (base, size) = if with_mod {
                    (self.root(&pr.params[2], params, path, 0)?, self.root(&pr.params[4], params, path, 0)?)
                } else {
                    // The whole hash, cut to the destination's width.
                    let size = if width < 64 { 1u128 << width } else { u128::from(u64::MAX) };
                    (self.root(&constant(0), params, path, 0)?, self.root(&constant(size), params, path, 0)?)
                };
                Prim::HashOffset { dst, base, calc, size }
            }
            "execute_meter" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[2], params, path)?;
                Prim::ExecuteMeter {
                    arr: self.named(&self.meters, &pr.params[0], "meter array", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                    dst,
                }
            }
            "register_read" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[0], params, path)?;
                Prim::RegRead {
                    dst,
                    arr: self.named(&self.registers, &pr.params[1], "register array", path)?,
                    idx: self.root(&pr.params[2], params, path, 0)?,
                }
            }
            "register_write" => {
                need(3)?;
                let arr = self.named(&self.registers, &pr.params[0], "register array", path)?;
                let w = self.p.register_arrays.get(arr as usize).map(|r| r.bitwidth).unwrap_or(0);
                Prim::RegWrite {
                    arr,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                    val: self.root(&pr.params[2], params, path, w)?,
                }
            }
            "clone_ingress_pkt_to_egress" | "clone_egress_pkt_to_egress" => {
                need(1)?;
                Prim::Clone {
                    ingress: pr.op == "clone_ingress_pkt_to_egress",
                    session: self.root(&pr.params[0], params, path, 0)?,
                    field_list: self.field_list_id(pr.params.get(1), path)?,
                }
            }
            "resubmit" => Prim::Resubmit(self.field_list_id(pr.params.first(), path)?),
            "recirculate" => Prim::Recirculate(self.field_list_id(pr.params.first(), path)?),
            "truncate" => {
                need(1)?;
                Prim::Truncate(self.root(&pr.params[0], params, path, 0)?)
            }
            // p4c-bm2-psa gives only the learn list (a PSA `Digest`): receiver 0.
            "generate_digest" if n == 1 && is_psa(self.p) => Prim::Digest {
                receiver: self.root(&Expr::Hex { negative: false, magnitude: vec![0] }, params, path, 0)?,
                list: self.const_u64(&pr.params[0], path)? as u32,
            },
            "generate_digest" => {
                need(2)?;
                Prim::Digest {
                    receiver: self.root(&pr.params[0], params, path, 0)?,
                    list: self.const_u64(&pr.params[1], path)? as u32,
                }
            }
            "modify_field_with_hash_based_offset" => {
                need(4)?;
                let (dst, _) = self.dst(&pr.params[0], params, path)?;
                Prim::HashOffset {
                    dst,
                    base: self.root(&pr.params[1], params, path, 0)?,
                    calc: self.named(&self.calcs, &pr.params[2], "calculation", path)?,
                    size: self.root(&pr.params[3], params, path, 0)?,
                }
            }
            "modify_field_rng_uniform" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[0], params, path)?;
                Prim::Rng {
                    dst,
                    lo: self.root(&pr.params[1], params, path, 0)?,
                    hi: self.root(&pr.params[2], params, path, 0)?,
                }
            }
            "push" | "pop" => {
                need(2)?;
                let stack = self.stack_of(&pr.params[0], path)?;
                let k = self.const_u64(&pr.params[1], path)? as u32;
                if pr.op == "push" {
                    Prim::Push { stack, n: k }
                } else {
                    Prim::Pop { stack, n: k }
                }
            }
            "assert" | "assume" => {
                need(1)?;
                Prim::Assert(self.root(&pr.params[0], params, path, 0)?)
            }
            "log_msg" => {
                let fmt = match pr.params.first() {
                    Some(Expr::Str(s)) => s.clone(),
                    _ => String::new(),
                };
                // The arguments: p4c passes them as one `parameters_vector`.
                let mut args = Vec::new();
                for a in pr.params.iter().skip(1) {
                    let items = match a {
                        Expr::List(items) => items.as_slice(),
                        one => std::slice::from_ref(one),
                    };
                    for item in items {
                        args.push(self.root(item, params, path, 0)?);
                    }
                }
                Prim::Log { fmt, args }
            }
            "assign_VL" => {
                need(2)?;
                let f = |e: &Expr| -> Result<u32, CompileError> {
                    match cx.expr(e)? {
                        CExpr::Field(f) => Ok(f),
                        _ => Err(CompileError::at(path, "assign_VL needs fields")),
                    }
                };
                Prim::AssignVl { dst: f(&pr.params[0])?, src: f(&pr.params[1])? }
            }
            other => return Err(CompileError::at(path, format!("primitive \"{other}\" is not supported"))),
        })
    }
}

/// Compiles the program's actions, in JSON order, and maps each action's
/// JSON id to its index.
pub(super) fn compile_actions(cx: &Cx) -> Result<(Vec<ActionPlan>, HashMap<u64, u32>), CompileError> {
    let p = cx.p;
    let mut actions = Vec::new();
    let mut action_by_id = HashMap::new();
    for a in &p.actions {
        let mut layout_p = Vec::new();
        let mut off = 0u32;
        for r in &a.runtime_data {
            let len = nbytes(r.bitwidth.max(1)) as u32;
            layout_p.push((off, len));
            off += len;
        }
        let mut prims = Vec::new();
        for pr in &a.primitives {
            prims.push(cx.prim(pr, &layout_p)?);
        }
        action_by_id.insert(a.id, actions.len() as u32);
        actions.push(ActionPlan {
            name: a.name.clone(),
            id: a.id,
            params: a.runtime_data.iter().map(|r| (r.name.clone(), r.bitwidth)).collect(),
            param_layout: layout_p,
            data_len: off as usize,
            prims,
        });
    }
    Ok((actions, action_by_id))
}

/// The field lists (clones, resubmits, recirculations) and learn lists
/// (digests) the primitives name by id.
pub(super) struct Lists {
    pub(super) field_lists: HashMap<u64, Vec<u32>>,
    pub(super) learn_lists: HashMap<u64, (String, Vec<u32>)>,
}

/// Compiles the program's field lists and learn lists.
pub(super) fn compile_lists(cx: &Cx) -> Result<Lists, CompileError> {
    let p = cx.p;
    let mut field_lists = HashMap::new();
    for fl in &p.field_lists {
        let mut fs = Vec::new();
        for e in &fl.elements {
            match cx.ecx(&[], &fl.path).expr(e)? {
                CExpr::Field(f) => fs.push(f),
                _ => return Err(CompileError::at(&fl.path, "field list elements must be fields")),
            }
        }
        field_lists.insert(fl.id, fs);
    }
    let mut learn_lists = HashMap::new();
    for fl in &p.learn_lists {
        let mut fs = Vec::new();
        for e in &fl.elements {
            match cx.ecx(&[], &fl.path).expr(e)? {
                CExpr::Field(f) => fs.push(f),
                _ => return Err(CompileError::at(&fl.path, "learn list elements must be fields")),
            }
        }
        learn_lists.insert(fl.id, (fl.name.clone(), fs));
    }
    Ok(Lists { field_lists, learn_lists })
}

/// Lays out action parameter values (big-endian, any length) into action data bytes.
pub fn pack_action_data(a: &ActionPlan, values: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    if values.len() != a.params.len() {
        return Err(format!("action \"{}\" takes {} parameters, got {}", a.name, a.params.len(), values.len()));
    }
    let mut data = vec![0u8; a.data_len];
    for (i, v) in values.iter().enumerate() {
        let (off, len) = a.param_layout[i];
        let dst = &mut data[off as usize..(off + len) as usize];
        crate::tables::copy_right(dst, v);
        crate::phv::mask_top(dst, a.params[i].1);
    }
    Ok(data)
}
