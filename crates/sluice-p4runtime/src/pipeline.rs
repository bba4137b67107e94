//! A forwarding pipeline as P4Runtime sees it: the P4Info, the BMv2 JSON the
//! engine runs, and the maps from P4Info ids to the engine's plan indices.
//!
//! Why maps built once: every Write names tables, fields, actions and
//! parameters by P4Info id; resolving them by name per update would cost
//! string work on the hot path of batched inserts. Objects are matched by
//! their fully qualified names, which p4c writes identically into both files;
//! a P4Info object without a counterpart in the JSON makes the pipeline
//! invalid (INVALID_ARGUMENT names it).

use std::collections::HashMap;
use std::sync::Arc;

use sluice_engine::runtime::{MatchKind, Resource};
use sluice_engine::Switch;

use crate::proto::p4::config::v1 as info;

/// One key field of a table, in the engine's key order.
#[derive(Debug, Clone)]
pub struct KeyField {
    pub id: u32,
    pub kind: MatchKind,
    pub bitwidth: u32,
}

/// A table's ids and shape.
#[derive(Debug, Clone)]
pub struct TableIds {
    pub index: usize,
    pub id: u32,
    /// Key fields in engine order (the P4Info and JSON orders agree).
    pub key: Vec<KeyField>,
    /// P4Info action ids this table may use.
    pub actions: Vec<u32>,
    pub is_const: bool,
    /// The action profile (P4Info id) of an indirect table.
    pub profile: Option<u32>,
    pub direct_counter: Option<u32>,
    pub direct_meter: Option<u32>,
    pub idle_timeout: bool,
}

/// An action's engine index and parameter ids in engine order.
#[derive(Debug, Clone)]
pub struct ActionIds {
    /// The first engine action of this name (p4c may copy an action per table: see [`Ids::engine_action`]).
    pub index: u32,
    pub name: String,
    pub params: Vec<(u32, u32)>, // (param id, bitwidth)
}

/// Fields of a controller header (`packet_in` / `packet_out`): `(id, bitwidth)` in header order.
pub type HeaderFields = Vec<(u32, u32)>;

/// Every P4Info id the server resolves.
#[derive(Debug, Default)]
pub struct Ids {
    pub tables: HashMap<u32, TableIds>,
    /// Engine table index -> P4Info table id.
    pub table_by_index: HashMap<usize, u32>,
    pub actions: HashMap<u32, ActionIds>,
    /// Engine action index -> P4Info action id.
    pub action_by_index: HashMap<u32, u32>,
    /// Action profile id -> engine profile index.
    pub profiles: HashMap<u32, usize>,
    /// Counter id -> engine counter index.
    pub counters: HashMap<u32, usize>,
    pub meters: HashMap<u32, usize>,
    pub registers: HashMap<u32, usize>,
    /// Direct counter / meter id -> the P4Info table id it belongs to.
    pub direct_counters: HashMap<u32, u32>,
    pub direct_meters: HashMap<u32, u32>,
    /// Value set id -> (engine index, match fields `(id, bitwidth)`).
    pub value_sets: HashMap<u32, (usize, Vec<(u32, u32)>)>,
    /// Digest id -> learn list name; and back.
    pub digests: HashMap<u32, String>,
    pub digest_by_name: HashMap<String, u32>,
    pub packet_in: Option<HeaderFields>,
    pub packet_out: Option<HeaderFields>,
}

/// A pipeline the server installed or saved.
pub struct Pipeline {
    pub p4info: info::P4Info,
    pub json: Arc<str>,
    pub cookie: Option<u64>,
    pub ids: Ids,
}

fn name(p: &Option<info::Preamble>) -> (u32, &str) {
    p.as_ref().map_or((0, ""), |p| (p.id, p.name.as_str()))
}

fn kind_of(m: &info::MatchField) -> Option<MatchKind> {
    use info::match_field::{Match, MatchType};
    match m.r#match.as_ref()? {
        Match::MatchType(t) => match MatchType::try_from(*t).ok()? {
            MatchType::Exact => Some(MatchKind::Exact),
            MatchType::Lpm => Some(MatchKind::Lpm),
            MatchType::Ternary => Some(MatchKind::Ternary),
            MatchType::Range => Some(MatchKind::Range),
            MatchType::Optional => Some(MatchKind::Optional),
            MatchType::Unspecified => None,
        },
        Match::OtherMatchType(_) => None,
    }
}

impl Ids {
    /// The engine action a P4Info action is in table `t` (p4c gives each
    /// table its own copy of an action used by several tables).
    pub fn engine_action(&self, sw: &Switch, action: &ActionIds, t: Option<usize>) -> u32 {
        let p = sw.program();
        t.and_then(|t| p.tables[t].actions.iter().copied().find(|a| p.actions[*a as usize].name == action.name))
            .unwrap_or(action.index)
    }

    /// Resolves every P4Info object against the compiled program.
    pub fn build(p: &info::P4Info, sw: &Switch) -> Result<Ids, String> {
        let mut ids = Ids::default();
        for a in &p.actions {
            let (id, n) = name(&a.preamble);
            let index = sw
                .index_of(Resource::Action, n)
                .ok_or_else(|| format!("action {n} (id {id}) is not in the BMv2 JSON"))? as u32;
            let ap = &sw.program().actions[index as usize];
            if ap.params.len() != a.params.len() {
                return Err(format!(
                    "action {n}: the P4Info has {} parameters, the BMv2 JSON {}",
                    a.params.len(),
                    ap.params.len()
                ));
            }
            for (i, x) in sw.program().actions.iter().enumerate() {
                if x.name == n {
                    ids.action_by_index.insert(i as u32, id);
                }
            }
            ids.actions.insert(
                id,
                ActionIds {
                    index,
                    name: n.to_string(),
                    params: a.params.iter().map(|x| (x.id, x.bitwidth as u32)).collect(),
                },
            );
        }
        for ap in &p.action_profiles {
            let (id, n) = name(&ap.preamble);
            let i = sw
                .index_of(Resource::Profile, n)
                .ok_or_else(|| format!("action profile {n} is not in the BMv2 JSON"))?;
            ids.profiles.insert(id, i);
        }
        for c in &p.counters {
            let (id, n) = name(&c.preamble);
            let i = sw.index_of(Resource::Counter, n).ok_or_else(|| format!("counter {n} is not in the BMv2 JSON"))?;
            ids.counters.insert(id, i);
        }
        for m in &p.meters {
            let (id, n) = name(&m.preamble);
            let i = sw.index_of(Resource::Meter, n).ok_or_else(|| format!("meter {n} is not in the BMv2 JSON"))?;
            ids.meters.insert(id, i);
        }
        for r in &p.registers {
            let (id, n) = name(&r.preamble);
            let i =
                sw.index_of(Resource::Register, n).ok_or_else(|| format!("register {n} is not in the BMv2 JSON"))?;
            ids.registers.insert(id, i);
        }
        for d in &p.direct_counters {
            ids.direct_counters.insert(name(&d.preamble).0, d.direct_table_id);
        }
        for d in &p.direct_meters {
            ids.direct_meters.insert(name(&d.preamble).0, d.direct_table_id);
        }
        for t in &p.tables {
            let (id, n) = name(&t.preamble);
            let index = sw.index_of(Resource::Table, n).ok_or_else(|| format!("table {n} is not in the BMv2 JSON"))?;
            let tp = &sw.program().tables[index];
            if tp.key.len() != t.match_fields.len() {
                return Err(format!(
                    "table {n}: the P4Info has {} match fields, the BMv2 JSON {}",
                    t.match_fields.len(),
                    tp.key.len()
                ));
            }
            let mut key = Vec::new();
            for (mf, k) in t.match_fields.iter().zip(&tp.key) {
                let kind =
                    kind_of(mf).ok_or_else(|| format!("table {n}: field {} has an unsupported match type", mf.name))?;
                let _ = kind; // the engine's kind rules (the JSON and P4Info agree for v1model programs)
                key.push(KeyField { id: mf.id, kind: k.kind, bitwidth: mf.bitwidth as u32 });
            }
            let direct_counter = t.direct_resource_ids.iter().copied().find(|r| ids.direct_counters.contains_key(r));
            let direct_meter = t.direct_resource_ids.iter().copied().find(|r| ids.direct_meters.contains_key(r));
            ids.table_by_index.insert(index, id);
            ids.tables.insert(
                id,
                TableIds {
                    index,
                    id,
                    key,
                    actions: t.action_refs.iter().map(|r| r.id).collect(),
                    is_const: t.is_const_table,
                    profile: (t.implementation_id != 0).then_some(t.implementation_id),
                    direct_counter,
                    direct_meter,
                    idle_timeout: t.idle_timeout_behavior == 1,
                },
            );
        }
        for v in &p.value_sets {
            let (id, n) = name(&v.preamble);
            let i =
                sw.index_of(Resource::ValueSet, n).ok_or_else(|| format!("value set {n} is not in the BMv2 JSON"))?;
            ids.value_sets.insert(id, (i, v.r#match.iter().map(|m| (m.id, m.bitwidth as u32)).collect()));
        }
        for d in &p.digests {
            let (id, n) = name(&d.preamble);
            if !sw.program().learn_lists.values().any(|(ln, _)| ln == n) {
                return Err(format!("digest {n} is not in the BMv2 JSON's learn lists"));
            }
            ids.digests.insert(id, n.to_string());
            ids.digest_by_name.insert(n.to_string(), id);
        }
        for c in &p.controller_packet_metadata {
            let (_, n) = name(&c.preamble);
            let fields: HeaderFields = c.metadata.iter().map(|m| (m.id, m.bitwidth as u32)).collect();
            match n {
                "packet_in" => ids.packet_in = Some(fields),
                "packet_out" => ids.packet_out = Some(fields),
                _ => {}
            }
        }
        Ok(ids)
    }
}

/// Packs `(value, bitwidth)` fields, most significant first, into bytes (a
/// controller header). Values wider than their field are cut to it.
pub fn pack_fields(fields: &[(Vec<u8>, u32)]) -> Vec<u8> {
    let total: u32 = fields.iter().map(|(_, w)| *w).sum();
    let mut out = vec![0u8; total.div_ceil(8) as usize];
    let mut bit = 0u32;
    for (v, w) in fields {
        for i in 0..*w {
            // Bit i of the field counted from its most significant bit.
            let from_lsb = w - 1 - i;
            let byte = v.len() as i64 - 1 - i64::from(from_lsb / 8);
            let set = byte >= 0 && v[byte as usize] >> (from_lsb % 8) & 1 == 1;
            if set {
                let pos = bit + i;
                out[(pos / 8) as usize] |= 0x80 >> (pos % 8);
            }
        }
        bit += w;
    }
    out
}

/// Splits the leading bits of `data` into fields of the given widths
/// (minimal big-endian bytes each); `None` when `data` is too short.
pub fn unpack_fields(data: &[u8], widths: &[u32]) -> Option<Vec<Vec<u8>>> {
    let total: u32 = widths.iter().sum();
    if (data.len() as u32) * 8 < total {
        return None;
    }
    let mut out = Vec::new();
    let mut bit = 0u32;
    for w in widths {
        let mut v = vec![0u8; w.div_ceil(8) as usize];
        for i in 0..*w {
            let pos = bit + i;
            if data[(pos / 8) as usize] & (0x80 >> (pos % 8)) != 0 {
                let from_lsb = w - 1 - i;
                let idx = v.len() - 1 - (from_lsb / 8) as usize;
                v[idx] |= 1 << (from_lsb % 8);
            }
        }
        bit += w;
        out.push(v);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_headers_pack_and_unpack_bit_exactly() {
        // 9-bit port 0x1ff then 7 bits of padding 0: 0xff 0x80.
        let h = pack_fields(&[(vec![0x01, 0xff], 9), (vec![0], 7)]);
        assert_eq!(h, vec![0xff, 0x80]);
        let back = unpack_fields(&h, &[9, 7]).unwrap();
        assert_eq!(back, vec![vec![0x01, 0xff], vec![0]]);
        assert_eq!(unpack_fields(&[0xff], &[9, 7]), None);
        let h = pack_fields(&[(vec![2], 3), (vec![0x0a, 0xbc], 13)]);
        assert_eq!(unpack_fields(&h, &[3, 13]).unwrap(), vec![vec![2], vec![0x0a, 0xbc]]);
    }
}
