//! Parser: parse states.
//!
//! Reads from the JSON model: `parsers` (init state, states with their
//! operations, transition keys and transitions) and `parse_vsets`.
//! Produces in the plan: `states` (every parser's states in one list; a
//! PSA program's egress parser follows its ingress one), `init_state`,
//! `egress_init_state`, `vsets`; per state the integer transitions and
//! the wire extracts the fast parser paths use.
//! Errors: more than one parser in a v1model program, an unknown init or
//! next state, header, header stack, union stack, member or value set, an
//! unsupported transition key, and the errors of the primitives a parser
//! calls.

use std::collections::HashMap;

use sluice_json::{Expr, HeaderRef, ParserOpKind, TransitionValue};

use super::actions::Prim;
use super::cx::{Cx, Dst};
use crate::expr::{CExpr, HRef, Root};
use crate::psa;
use crate::value::nbytes;
use crate::CompileError;

/// Where an `extract` writes.
#[derive(Debug, Clone)]
pub enum ExtractTo {
    Header(u32),
    StackNext(u32),
    UnionStackNext(u32, usize),
}

/// A parser operation.
#[derive(Debug, Clone)]
pub enum POp {
    Extract(ExtractTo),
    ExtractVl(ExtractTo, Root),
    Set(Dst, Root),
    Verify(Root, Root),
    Advance(Root),
    Prim(Prim),
}

/// One transition.
#[derive(Debug, Clone)]
pub struct PTrans {
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
    pub vset: Option<u32>,
    pub default: bool,
    /// `None` accepts.
    pub next: Option<u32>,
}

/// A parser state.
#[derive(Debug, Clone)]
pub struct PState {
    pub name: String,
    pub ops: Vec<POp>,
    /// Key elements with their byte width.
    pub key: Vec<(Root, u32)>,
    pub key_len: usize,
    pub transitions: Vec<PTrans>,
    /// `(value, mask, next)` as integers, when the key is at most 16 bytes of
    /// fields and no value set is used (the default case has mask 0).
    pub fast_transitions: Option<Vec<(u128, u128, Option<u32>)>>,
    /// `(header, wire offset, bytes)` when the state only extracts
    /// wire-format headers outside unions: the parser then copies bytes.
    pub wire_extracts: Option<Vec<(u32, u32, u32)>>,
}

/// The compiled parsers.
pub(super) struct Parsers {
    pub(super) states: Vec<PState>,
    pub(super) init_state: Option<u32>,
    pub(super) egress_init_state: Option<u32>,
    pub(super) vsets: Vec<(String, u32)>,
}

/// Compiles every parser's states (`psa`: the program is a PSA one).
pub(super) fn compile_parsers(cx: &Cx, psa: bool) -> Result<Parsers, CompileError> {
    let (p, layout) = (cx.p, cx.layout);
    let mut states = Vec::new();
    let mut init_state = None;
    let vsets: Vec<(String, u32)> = p.parse_vsets.iter().map(|v| (v.name.clone(), v.compressed_bitwidth)).collect();
    if p.parsers.len() > 1 && !psa {
        return Err(CompileError::at("parsers[1]", "only one parser is supported (v1model has one)"));
    }
    // Every parser's states in one list (PSA has an ingress and an egress
    // parser): a parser's transitions index the list.
    let mut egress_init_state = None;
    for parser in &p.parsers {
        let base = states.len() as u32;
        let state_idx: HashMap<&str, u32> =
            parser.states.iter().enumerate().map(|(i, s)| (s.name.as_str(), base + i as u32)).collect();
        let init =
            Some(*state_idx.get(parser.init_state.as_str()).ok_or_else(|| {
                CompileError::at(&parser.path, format!("unknown init_state \"{}\"", parser.init_state))
            })?);
        if psa && parser.name == psa::EGRESS_PARSER {
            egress_init_state = init;
        } else {
            init_state = init;
        }
        for s in &parser.states {
            let mut ops = Vec::new();
            for o in &s.ops {
                let path = o.path.as_str();
                let to = |h: &HeaderRef| -> Result<ExtractTo, CompileError> {
                    Ok(match h {
                        HeaderRef::Header(n) => ExtractTo::Header(
                            layout
                                .header(n)
                                .ok_or_else(|| CompileError::at(path, format!("unknown header \"{n}\"")))?,
                        ),
                        HeaderRef::StackNext(n) => ExtractTo::StackNext(
                            layout
                                .stack(n)
                                .ok_or_else(|| CompileError::at(path, format!("unknown header stack \"{n}\"")))?,
                        ),
                        HeaderRef::UnionStackNext(n, m) => {
                            let us = layout
                                .union_stack(n)
                                .ok_or_else(|| CompileError::at(path, format!("unknown union stack \"{n}\"")))?;
                            let u0 = layout.union_stacks[us as usize].unions[0];
                            let mi = layout.unions[u0 as usize]
                                .member_names
                                .iter()
                                .position(|x| x == m)
                                .ok_or_else(|| CompileError::at(path, format!("unknown union member \"{m}\"")))?;
                            ExtractTo::UnionStackNext(us, mi)
                        }
                    })
                };
                ops.push(match &o.kind {
                    ParserOpKind::Extract(h) => POp::Extract(to(h)?),
                    ParserOpKind::ExtractVl(h, e) => POp::ExtractVl(to(h)?, cx.root(e, &[], path, 0)?),
                    ParserOpKind::Set(d, e) => {
                        let (dst, w) = cx.dst(d, &[], path)?;
                        POp::Set(dst, cx.root(e, &[], path, w)?)
                    }
                    ParserOpKind::Verify(c, e) => POp::Verify(cx.root(c, &[], path, 0)?, cx.root(e, &[], path, 0)?),
                    ParserOpKind::Advance(e) => POp::Advance(cx.root(e, &[], path, 0)?),
                    ParserOpKind::Primitive(pr) => POp::Prim(cx.prim(pr, &[])?),
                });
            }
            let mut key = Vec::new();
            let mut key_len = 0;
            for k in &s.key {
                if let Expr::UnionStackField(us, m, f) = k {
                    let (ce, w) = cx.ecx(&[], &s.path).union_stack_field(us, m, f)?;
                    let nb = nbytes(w) as u32;
                    key_len += nb as usize;
                    key.push((Root::new(ce, layout, w), nb));
                    continue;
                }
                let ce = cx.ecx(&[], &s.path).expr(k)?;
                let w = match &ce {
                    CExpr::Field(f) => layout.fields[*f as usize].width,
                    CExpr::DynField(HRef::StackLast(st), idx) => {
                        let h0 = layout.stacks[*st as usize].headers[0];
                        layout.fields[layout.headers[h0 as usize].fields[*idx] as usize].width
                    }
                    CExpr::Lookahead { width, .. } => *width,
                    _ => return Err(CompileError::at(&s.path, format!("transition key {k:?} is not supported"))),
                };
                let nb = nbytes(w) as u32;
                key_len += nb as usize;
                key.push((Root::new(ce, layout, w), nb));
            }
            let mut transitions = Vec::new();
            for t in &s.transitions {
                let next = match &t.next_state {
                    None => None,
                    Some(n) => Some(
                        *state_idx
                            .get(n.as_str())
                            .ok_or_else(|| CompileError::at(&s.path, format!("unknown next_state \"{n}\"")))?,
                    ),
                };
                let tr = match &t.value {
                    TransitionValue::Default => PTrans { value: vec![], mask: None, vset: None, default: true, next },
                    TransitionValue::Value { value, mask } => PTrans {
                        value: crate::tables::fit(value, key_len, key_len as u32 * 8),
                        mask: mask.as_ref().map(|m| crate::tables::fit(m, key_len, key_len as u32 * 8)),
                        vset: None,
                        default: false,
                        next,
                    },
                    TransitionValue::Vset(name) => {
                        PTrans {
                            value: vec![],
                            mask: None,
                            vset: Some(
                                vsets.iter().position(|(n, _)| n == name).ok_or_else(|| {
                                    CompileError::at(&s.path, format!("unknown parse_vset \"{name}\""))
                                })? as u32,
                            ),
                            default: false,
                            next,
                        }
                    }
                };
                transitions.push(tr);
            }
            let fast_ok = key_len <= 16
                && !key.iter().any(|(r, _)| matches!(r.e, CExpr::Lookahead { .. }))
                && transitions.iter().all(|t| t.vset.is_none());
            let fast_transitions = fast_ok.then(|| {
                transitions
                    .iter()
                    .map(|t| {
                        if t.default {
                            (0, 0, t.next)
                        } else {
                            let m = t
                                .mask
                                .as_ref()
                                .map_or(crate::value::mask128(key_len as u32 * 8), |m| crate::value::be_to_u128(m));
                            (crate::value::be_to_u128(&t.value) & m, m, t.next)
                        }
                    })
                    .collect()
            });
            let wire_extracts = ops
                .iter()
                .map(|op| match op {
                    POp::Extract(ExtractTo::Header(h)) => {
                        let hi = &layout.headers[*h as usize];
                        match (hi.wire, hi.union) {
                            (Some((off, n)), None) => Some((*h, off, n)),
                            _ => None,
                        }
                    }
                    _ => None,
                })
                .collect::<Option<Vec<_>>>();
            states.push(PState {
                // A PSA program's states are named with their parser's name (traces, `sluice inspect`).
                name: if psa { format!("{}.{}", parser.name, s.name) } else { s.name.clone() },
                ops,
                key,
                key_len,
                transitions,
                fast_transitions,
                wire_extracts,
            });
        }
    }
    Ok(Parsers { states, init_state, egress_init_state, vsets })
}
