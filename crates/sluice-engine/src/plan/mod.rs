//! The compiler: typed model -> execution plan.
//!
//! Every name in the program is resolved here to an index (fields, headers,
//! tables, actions, externs), every parameter layout is fixed, and every
//! unsupported construct is rejected with the JSON path where it sits. The
//! plan is immutable once built; run-time state (entries, counters...) lives
//! in `state::State`.
//!
//! One file per stage, each opening with its contract (what it reads from
//! the JSON model, what it produces in the plan, which errors it reports):
//! - `cx`: the context every stage compiles with (names numbered,
//!   expressions and destinations resolved);
//! - `actions`: primitives, action plans, field and learn lists,
//!   [`pack_action_data`];
//! - `checksums`: calculations and checksums;
//! - `pipelines`: tables, conditionals, action profiles and selectors, and
//!   the check that a control has no loop;
//! - `parser`: parse states;
//! - `deparser`: the deparsers' header order and calls;
//! - `arrays`: counters, meters, registers and extern instances.
//!
//! This module holds the [`Plan`] and [`compile`], which runs the stages
//! in this order (the first error stops it): the layout, the extern
//! instances' checks, the context, actions, calculations, pipelines,
//! parsers, deparsers, checksums, arrays, field and learn lists, the
//! intrinsic fields and error codes, a PSA program's metadata fields.
//!
//! `plan` depends on `expr`, `phv`, `psa`, `tables` and `value` only, none
//! of which depends on it; within it, `cx` is the base, `actions` and
//! `checksums` use it, `pipelines`, `parser` and `deparser` use `actions`,
//! and `arrays` uses `checksums`.

use std::collections::HashMap;

use sluice_json::Program;

use crate::phv::Layout;
use crate::psa;
use crate::CompileError;

mod actions;
mod arrays;
mod checksums;
mod cx;
mod deparser;
mod parser;
mod pipelines;

pub use actions::{pack_action_data, ActionPlan, Prim};
pub use arrays::{ArrayPlan, MAX_ARRAY_SIZE};
pub use checksums::{CalcPlan, ChecksumPlan, MAX_CHECKSUMS};
pub use cx::{is_psa, Dst};
pub use parser::{ExtractTo, POp, PState, PTrans};
pub use pipelines::{
    CondPlan, KeyElem, KeyPart, Node, PieceFrom, PipelinePlan, ProfilePlan, SelectorPiece, TablePlan,
    SELECTOR_BYTES_MAX,
};

use actions::{compile_actions, compile_lists, Lists};
use arrays::{compile_arrays, extern_arrays, Arrays};
use checksums::{compile_calcs, compile_checksums};
use cx::Cx;
use deparser::{compile_deparsers, Deparsers};
use parser::{compile_parsers, Parsers};
use pipelines::{compile_pipelines, Pipelines};

/// The whole compiled program.
#[derive(Debug, Clone)]
pub struct Plan {
    pub layout: Layout,
    pub actions: Vec<ActionPlan>,
    pub tables: Vec<TablePlan>,
    pub conds: Vec<CondPlan>,
    pub ingress: PipelinePlan,
    pub egress: PipelinePlan,
    pub profiles: Vec<ProfilePlan>,
    pub states: Vec<PState>,
    pub init_state: Option<u32>,
    pub deparse_order: Vec<u32>,
    pub checksums: Vec<ChecksumPlan>,
    pub calcs: Vec<CalcPlan>,
    pub counters: Vec<ArrayPlan>,
    pub meters: Vec<ArrayPlan>,
    pub registers: Vec<ArrayPlan>,
    /// Field lists by JSON id: field ids.
    pub field_lists: HashMap<u64, Vec<u32>>,
    /// Learn lists by JSON id: `(name, field ids)`.
    pub learn_lists: HashMap<u64, (String, Vec<u32>)>,
    pub vsets: Vec<(String, u32)>,
    pub errors: HashMap<String, u64>,
    /// Value of `error.NoError` (0 in new p4c output, 1 in old).
    pub no_error: u64,
    pub std: StdFields,
    pub program_name: String,
    /// A PSA program's metadata fields (`None` for v1model): the
    /// architecture comes from the JSON (see [`is_psa`]).
    pub psa: Option<psa::PsaFields>,
    /// PSA: the egress parser's first state (in `states`).
    pub egress_init_state: Option<u32>,
    /// PSA: the egress deparser's order (`deparse_order` is the ingress one).
    pub egress_deparse_order: Vec<u32>,
    /// PSA: what the ingress and the egress deparser run before they emit
    /// (`InternetChecksum` calls).
    pub deparse_prims: Vec<Prim>,
    pub egress_deparse_prims: Vec<Prim>,
    /// Names and JSON ids of the parsers, deparsers, pipelines, headers,
    /// conditions and checksums, as bmv2's log and event stream give them.
    pub elements: Elements,
}

/// The program's elements as bmv2 names and numbers them (its per-packet
/// log and its event stream, see `crate::trace`).
#[derive(Debug, Clone, Default)]
pub struct Elements {
    /// `(name, JSON id)` of the parser (a PSA program: ingress then egress).
    pub parsers: Vec<(String, u64)>,
    /// Each parser's first parse state in `Plan::states`, and its name.
    pub parser_starts: Vec<(u32, String)>,
    pub deparsers: Vec<(String, u64)>,
    /// Ingress, egress.
    pub pipelines: [(String, u64); 2],
    /// JSON id by layout header.
    pub headers: Vec<u64>,
    /// JSON id by `Plan::conds` index.
    pub conds: Vec<u64>,
    /// JSON id by `Plan::checksums` index.
    pub checksums: Vec<u64>,
}

impl Elements {
    fn new(p: &Program, layout: &Layout, conds: &[CondPlan], checksums: &[ChecksumPlan]) -> Elements {
        let egress_last = |name: &str, egress_name: &str| name == egress_name;
        let mut parsers: Vec<(String, u64)> = p.parsers.iter().map(|x| (x.name.clone(), x.id)).collect();
        parsers.sort_by_key(|(n, _)| egress_last(n, psa::EGRESS_PARSER));
        let mut parser_starts = Vec::new();
        let mut base = 0u32;
        for x in &p.parsers {
            parser_starts.push((base, x.name.clone()));
            base += x.states.len() as u32;
        }
        let mut deparsers: Vec<(String, u64)> = p.deparsers.iter().map(|x| (x.name.clone(), x.id)).collect();
        deparsers.sort_by_key(|(n, _)| egress_last(n, psa::EGRESS_DEPARSER));
        let pipeline = |name: &str| {
            p.pipelines.iter().find(|x| x.name == name).map(|x| (x.name.clone(), x.id)).unwrap_or((name.to_string(), 0))
        };
        let header_ids: HashMap<&str, u64> = p.headers.iter().map(|h| (h.name.as_str(), h.id)).collect();
        let cond_ids: HashMap<&str, u64> =
            p.pipelines.iter().flat_map(|pl| pl.conditionals.iter().map(|c| (c.name.as_str(), c.id))).collect();
        let checksum_ids: HashMap<&str, u64> = p.checksums.iter().map(|c| (c.name.as_str(), c.id)).collect();
        Elements {
            parsers,
            parser_starts,
            deparsers,
            pipelines: [pipeline("ingress"), pipeline("egress")],
            headers: layout.headers.iter().map(|h| header_ids.get(h.name.as_str()).copied().unwrap_or(0)).collect(),
            conds: conds.iter().map(|c| cond_ids.get(c.name.as_str()).copied().unwrap_or(0)).collect(),
            checksums: checksums.iter().map(|c| checksum_ids.get(c.name.as_str()).copied().unwrap_or(0)).collect(),
        }
    }

    /// The ingress (or only) parser, or a PSA program's egress parser.
    pub fn parser(&self, egress: bool) -> (&str, u64) {
        let p = self.parsers.get(usize::from(egress)).or(self.parsers.first());
        p.map(|(n, i)| (n.as_str(), *i)).unwrap_or(("parser", 0))
    }

    /// The deparser, as [`Elements::parser`].
    pub fn deparser(&self, egress: bool) -> (&str, u64) {
        let p = self.deparsers.get(usize::from(egress)).or(self.deparsers.first());
        p.map(|(n, i)| (n.as_str(), *i)).unwrap_or(("deparser", 0))
    }

    /// The name of the parser parse state `state` belongs to.
    pub fn parser_of_state(&self, state: u32) -> &str {
        self.parser_starts.iter().rev().find(|(s, _)| *s <= state).map(|(_, n)| n.as_str()).unwrap_or("parser")
    }
}

/// The v1model intrinsic fields the switch reads and writes.
#[derive(Debug, Clone, Default)]
pub struct StdFields {
    pub ingress_port: Option<u32>,
    pub egress_spec: Option<u32>,
    pub egress_port: Option<u32>,
    pub instance_type: Option<u32>,
    pub packet_length: Option<u32>,
    pub mcast_grp: Option<u32>,
    pub egress_rid: Option<u32>,
    pub checksum_error: Option<u32>,
    pub parser_error: Option<u32>,
    pub ingress_global_timestamp: Option<u32>,
    pub egress_global_timestamp: Option<u32>,
    pub enq_timestamp: Option<u32>,
    pub enq_qdepth: Option<u32>,
    pub deq_timedelta: Option<u32>,
    pub deq_qdepth: Option<u32>,
    /// `queueing_metadata.qid` (P4_14 programs; not in v1model's
    /// `standard_metadata_t`): the queue a packet left from.
    pub qid: Option<u32>,
    pub priority: Option<u32>,
}

/// Compiles a loaded program into an execution plan.
pub fn compile(p: &Program) -> Result<Plan, CompileError> {
    let psa = is_psa(p);
    let layout = Layout::new(p)?;
    let externs = extern_arrays(p)?;
    let cx = Cx::new(p, &layout, &externs.counters, &externs.meters);
    let (actions, action_by_id) = compile_actions(&cx)?;
    let calcs = compile_calcs(&cx)?;
    let Pipelines { tables, conds, profiles, ingress, egress } = compile_pipelines(&cx, psa, &actions, &action_by_id)?;
    let Parsers { states, init_state, egress_init_state, vsets } = compile_parsers(&cx, psa)?;
    let Deparsers { deparse_order, egress_deparse_order, deparse_prims, egress_deparse_prims } =
        compile_deparsers(&cx, psa)?;
    let checksums = compile_checksums(&cx)?;
    let Arrays { counters, meters, registers } = compile_arrays(p, &externs)?;
    let Lists { field_lists, learn_lists } = compile_lists(&cx)?;
    let std = std_fields(&layout);
    let errors = error_codes(p);
    let no_error = errors["NoError"];
    let psa = if psa { Some(psa::PsaFields::of(&layout)?) } else { None };
    let elements = Elements::new(p, &layout, &conds, &checksums);
    Ok(Plan {
        elements,
        psa,
        egress_init_state,
        egress_deparse_order,
        deparse_prims,
        egress_deparse_prims,
        no_error,
        layout,
        actions,
        tables,
        conds,
        ingress,
        egress,
        profiles,
        states,
        init_state,
        deparse_order,
        checksums,
        calcs,
        counters,
        meters,
        registers,
        field_lists,
        learn_lists,
        vsets,
        errors,
        std,
        program_name: p.program.clone().unwrap_or_default(),
    })
}

/// The v1model intrinsic fields in `layout`.
fn std_fields(layout: &Layout) -> StdFields {
    StdFields {
        ingress_port: layout.intrinsic("ingress_port"),
        egress_spec: layout.intrinsic("egress_spec"),
        egress_port: layout.intrinsic("egress_port"),
        instance_type: layout.intrinsic("instance_type"),
        packet_length: layout.intrinsic("packet_length"),
        mcast_grp: layout.intrinsic("mcast_grp"),
        egress_rid: layout.intrinsic("egress_rid"),
        checksum_error: layout.intrinsic("checksum_error"),
        parser_error: layout.intrinsic("parser_error"),
        ingress_global_timestamp: layout.intrinsic("ingress_global_timestamp"),
        egress_global_timestamp: layout.intrinsic("egress_global_timestamp"),
        enq_timestamp: layout.intrinsic("enq_timestamp"),
        enq_qdepth: layout.intrinsic("enq_qdepth"),
        deq_timedelta: layout.intrinsic("deq_timedelta"),
        deq_qdepth: layout.intrinsic("deq_qdepth"),
        qid: layout.intrinsic("qid"),
        priority: layout.intrinsic("priority"),
    }
}

/// The program's error codes, with the standard errors it does not declare
/// numbered in `core.p4`'s order.
fn error_codes(p: &Program) -> HashMap<String, u64> {
    let mut errors: HashMap<String, u64> = p.errors.iter().cloned().collect();
    for (i, n) in [
        "NoError",
        "PacketTooShort",
        "NoMatch",
        "StackOutOfBounds",
        "HeaderTooShort",
        "ParserTimeout",
        "ParserInvalidArgument",
    ]
    .iter()
    .enumerate()
    {
        errors.entry(n.to_string()).or_insert(i as u64);
    }
    errors
}
