//! Control stage: walks a pipeline's tables and conditionals and runs actions.
//!
//! Hot-path invariant: nothing here allocates per packet. Keys are built into
//! a reusable buffer of the `Exec`; action data is borrowed from the entry.

use crate::expr::{fast_u64, fast_value, resolve_href, Env, Fast};
use crate::meters;
use crate::phv::{mask_top, Phv};
use crate::plan::{Dst, Node, Plan, Prim};
use crate::state::{Digest, State};
use crate::tables::EntryAction;
use crate::value::nbytes;

/// Primitives one action call may execute (loops come from `_jump`) before
/// Sluice stops it and drops the packet.
pub const MAX_ACTION_STEPS: u32 = 1_000_000;

/// Sets `key` to the first `n` bytes of `words` read as little-endian (the
/// inverse of `sluice_lookup::classifier::key_words`), written with
/// whole-word stores.
pub(crate) fn key_bytes_of_words(key: &mut Vec<u8>, words: &[u64], n: usize) {
    key.clear();
    for w in words.iter().take(n.div_ceil(8)) {
        key.extend_from_slice(&w.to_le_bytes());
    }
    // Drops the last word's bytes past `n` (or pads, given fewer words).
    key.resize(n, 0);
}

/// Keys of at most this many bytes made of whole fields are built as words
/// in registers, part by part (see [`Exec::build_key`]).
const FAST_KEY_BYTES: usize = 64;

/// Hidden per-packet state that v1model keeps outside the PHV.
#[derive(Debug, Clone, Default)]
pub struct PktMeta {
    /// Clone requested: `(session, field list)`.
    pub clone: Option<(u32, Option<u32>)>,
    pub resubmit: Option<Option<u32>>,
    pub recirculate: Option<Option<u32>>,
    pub truncate: Option<u32>,
    pub digest: Option<(u64, u32)>,
    pub exit: bool,
    /// bmv2's length register: received length adjusted by header add/remove.
    pub len_reg: u32,
    /// Length of the packet as received at ingress (counter/meter byte basis).
    pub ingress_len: u32,
    /// The sums of a PSA program's `InternetChecksum` instances (one
    /// parser's or deparser's run).
    pub csums: [u16; MAX_CHECKSUMS],
}

/// `InternetChecksum` instances a PSA program may have (the plan's limit).
pub use crate::plan::MAX_CHECKSUMS;

/// Everything one packet's control-stage execution needs.
pub struct Exec<'a> {
    pub plan: &'a Plan,
    pub state: &'a mut State,
    pub phv: &'a mut Phv,
    pub meta: &'a mut PktMeta,
    pub key_buf: &'a mut Vec<u8>,
    /// Reusable buffer for the running action's data.
    pub act_buf: &'a mut Vec<u8>,
    pub hash_buf: &'a mut sluice_hash::BitPacker,
    pub now_us: u64,
    pub trace: Option<&'a mut crate::trace::Trace>,
}

macro_rules! env {
    ($s:expr, $params:expr) => {
        Env { layout: &$s.plan.layout, phv: &*$s.phv, params: $params, packet: &[], cursor_bits: 0 }
    };
}

/// A table key built as one integer from its parts (see `Plan::key128`).
#[inline]
pub(crate) fn integer_key(parts: &[(crate::plan::KeyPart, u32)], phv: &Phv) -> u128 {
    let mut k: u128 = 0;
    for (part, bits) in parts {
        let v = u128::from(part.value(phv));
        k = if *bits >= 128 { v } else { (k << bits) | v };
    }
    k
}

impl Exec<'_> {
    /// Runs a pipeline from its first node.
    pub fn run_pipeline(&mut self, init: Option<Node>) {
        let mut node = init;
        while let Some(n) = node {
            if self.meta.exit {
                break;
            }
            node = match n {
                Node::Cond(c) => {
                    let cp = &self.plan.conds[c as usize];
                    let v = self.eval_cond(c as usize);
                    if let Some(t) = self.trace.as_deref_mut() {
                        t.push(crate::trace::Event::Condition { cond: c, value: v });
                    }
                    if v {
                        cp.true_next
                    } else {
                        cp.false_next
                    }
                }
                Node::Table(t) => match (self.plan.tables[t as usize].inline_default, &self.trace) {
                    // A keyless table that always runs one action (p4c's wrapper for statements).
                    (Some((a, next)), None) => {
                        self.run_action(a as usize, &[]);
                        next
                    }
                    _ => self.apply_table(t as usize),
                },
            };
        }
    }

    /// Evaluates conditional `ci`.
    #[inline]
    pub fn eval_cond(&self, ci: usize) -> bool {
        let cp = &self.plan.conds[ci];
        if !matches!(cp.expr.fast, Fast::None) {
            fast_u64(&cp.expr.fast, self.phv, &[]) != 0
        } else {
            cp.expr.eval_bool(&env!(self, &[]))
        }
    }

    /// Counts the packet in cell `idx` of counter array `arr` (out of range: ignored, as bmv2).
    #[inline]
    pub fn count(&mut self, arr: usize, idx: u64) {
        let len = self.meta.ingress_len as u64;
        if let Some(c) = usize::try_from(idx).ok().and_then(|i| self.state.counters[arr].get_mut(i)) {
            c.0 += 1;
            c.1 += len;
        }
    }

    /// Builds table `ti`'s key bytes in `key_buf`. Returns the key as the
    /// four words tuple search reads (`sluice_lookup::classifier::key_words`)
    /// when it built them on the way (keys of whole fields, at most 32 bytes).
    pub(crate) fn build_key(&mut self, ti: usize) -> Option<[u64; 4]> {
        let tp = &self.plan.tables[ti];
        if let (Some(parts), true) = (&tp.key_fields, tp.key_bytes <= FAST_KEY_BYTES) {
            // Hot-path reads (fields of invalid headers as zero, as
            // `integer_key` builds them), each put in its bytes of the key
            // read as little-endian words, the form tuple search and the
            // lookup cache hash. Why words and not bytes: the words stay in
            // registers, and the bytes are then written with whole-word
            // stores that later byte reads can be forwarded from.
            let mut words = [0u64; FAST_KEY_BYTES / 8 + 1];
            let mut at = 0;
            for (part, bits) in parts {
                let v = part.value(self.phv);
                // The value's big-endian bytes first, as a little-endian word.
                let le = if *bits >= 64 { v } else { v << (64 - bits) }.swap_bytes();
                let (w, shift) = (at / 8, (at % 8) * 8);
                words[w] |= le << shift;
                if shift != 0 {
                    words[w + 1] |= le >> (64 - shift);
                }
                at += *bits as usize / 8;
            }
            let n = tp.key_bytes;
            key_bytes_of_words(self.key_buf, &words, n);
            return (n <= 32).then(|| [words[0], words[1], words[2], words[3]]);
        }
        self.key_buf.clear();
        // Zeroed once for the whole key: parts of invalid headers stay zero.
        self.key_buf.resize(tp.key.iter().map(|k| nbytes(k.width)).sum(), 0);
        let env = env!(self, &[]);
        let mut start = 0;
        for k in &tp.key {
            let n = nbytes(k.width);
            start += n;
            let start = start - n;
            let invalid = match &k.header {
                Some(h) => !resolve_href(h, &env).is_some_and(|x| self.phv.valid()[x as usize]),
                None => false,
            };
            if invalid {
                continue;
            }
            let dst = &mut self.key_buf[start..start + n];
            match &k.src {
                // Fields of up to 64 bits: one read at a fixed place, no per-bit walk.
                crate::expr::CExpr::Field(f) if n <= 8 && self.plan.layout.hot[*f as usize].is_some() => {
                    let (src, _) = self.plan.layout.hot[*f as usize].expect("checked");
                    sluice_lookup::mem::copy_short(dst, &src.read(self.phv).to_be_bytes()[8 - n..]);
                }
                crate::expr::CExpr::Field(f) => self.phv.get_bytes(&self.plan.layout.fields[*f as usize], dst),
                e => {
                    let v = e.eval::<i128>(&env);
                    crate::value::u128_to_be(v as u128, dst);
                }
            }
            if let Some(m) = &k.mask {
                let ml = m.len();
                for (i, b) in dst.iter_mut().rev().enumerate() {
                    *b &= if i < ml { m[ml - 1 - i] } else { 0 };
                }
            }
        }
        None
    }

    /// Looks table `ti` up with its key built as one integer, when the key
    /// allows it: `Some(hit entry index or None)`, or `None` to take the byte path.
    #[inline]
    pub(crate) fn lookup_integer_key(&self, ti: usize) -> Option<Option<u32>> {
        let parts = self.plan.tables[ti].key128.as_ref()?;
        self.state.tables[ti].lookup_u128(integer_key(parts, self.phv))
    }

    /// The entry index table `ti` hits for this packet, if any. Integer keys
    /// (the common case) skip the key bytes entirely, except under a trace,
    /// which prints them from `key_buf`.
    pub(crate) fn lookup_hit(&mut self, ti: usize) -> Option<u32> {
        let plan = self.plan;
        let fast_hit = if self.trace.is_none() { self.lookup_integer_key(ti) } else { None };
        match fast_hit {
            Some(h) => h,
            None => {
                let words = self.build_key(ti);
                // p4c wraps single action calls in keyless tables: skip the lookup for them.
                if plan.tables[ti].key.is_empty() && self.state.tables[ti].is_empty() {
                    None
                } else {
                    self.state.tables[ti].lookup_cached(self.key_buf, words.as_ref())
                }
            }
        }
    }

    /// Counts a hit on entry index `h` of table `ti` in its direct counter
    /// (the packet and its ingress length).
    pub(crate) fn count_hit(&mut self, ti: usize, h: u32) {
        let len = u64::from(self.meta.ingress_len);
        let e = self.state.tables[ti].entry_mut(h).expect("hit index is live");
        e.packets += 1;
        e.bytes += len;
    }

    /// Applies one table; returns the next node.
    pub fn apply_table(&mut self, ti: usize) -> Option<Node> {
        let plan = self.plan;
        let tp = &plan.tables[ti];
        if let Some((a, next)) = tp.inline_default {
            if let Some(t) = self.trace.as_deref_mut() {
                t.push(crate::trace::Event::Table {
                    table: ti as u32,
                    key: Vec::new(),
                    hit: None,
                    action: Some((a, Vec::new())),
                });
            }
            self.run_action(a as usize, &[]);
            return next;
        }
        let hit = self.lookup_hit(ti);
        self.state.lookups[ti][usize::from(hit.is_none())] += 1;
        if let (Some(h), true) = (hit, tp.support_timeout) {
            self.state.tables[ti].touch(h, self.now_us);
        }
        if let (Some(h), None, false, None) = (hit, &self.trace, tp.with_counters, &tp.direct_meter) {
            // A direct action with little data: run it from the hot record.
            let hot = *self.state.tables[ti].hot(h);
            if hot.action != u32::MAX {
                self.run_action(hot.action as usize, &hot.data);
                return match tp.next_hit {
                    Some(n) => n,
                    None => match tp.actions.iter().position(|a| *a == hot.action) {
                        Some(pos) => tp.next_by_action[pos],
                        None => tp.base_default_next,
                    },
                };
            }
        }
        let len = self.meta.ingress_len as u64;
        // Action data is copied into a reusable buffer: no allocation per packet.
        let mut data = std::mem::take(self.act_buf);
        data.clear();
        let action: u32 = match hit {
            Some(h) => {
                // The hot record says what an indirect entry points to, so
                // only counters and large action data touch the entry itself.
                let hot = *self.state.tables[ti].hot(h);
                if tp.with_counters {
                    self.count_hit(ti, h);
                }
                // Direct meter cells are indexed by entry index and shared by all workers.
                let colour = tp.direct_meter.as_ref().map(|(mi, dst)| {
                    let size = meters::units(plan.meters[*mi as usize].width, len);
                    (self.state.meters.execute(*mi as usize, h as usize, size, self.now_us), dst)
                });
                let target = match hot.indirect() {
                    Some(indirect) => Err(indirect),
                    None if hot.action != u32::MAX => {
                        data.extend_from_slice(&hot.data[..hot.len as usize]);
                        Ok(hot.action)
                    }
                    None => match &self.state.tables[ti].entry(h).expect("hit index is live").action {
                        EntryAction::Direct { action, data: d } => {
                            data.extend_from_slice(d);
                            Ok(*action)
                        }
                        EntryAction::Member(m) => Err((false, *m)),
                        EntryAction::Group(g) => Err((true, *g)),
                    },
                };
                if let Some((c, dst)) = colour {
                    // A PSA DirectMeter's colour is PSA_MeterColor_t, as an indirect one's.
                    let c = if plan.psa.is_some() { (c + 1) % 3 } else { c };
                    self.write_dst(dst, c as u128, &[]);
                }
                match target {
                    Ok(a) => a,
                    Err((false, m)) => self.member_into(tp.profile, m, &mut data),
                    Err((true, g)) => match self.select_member(tp.profile, g) {
                        Some(m) => self.member_into(tp.profile, m, &mut data),
                        None => {
                            *self.act_buf = data;
                            return tp.base_default_next;
                        }
                    },
                }
            }
            None => match &self.state.tables[ti].default {
                Some((a, d)) => {
                    data.extend_from_slice(d);
                    *a
                }
                None => {
                    if let Some(t) = self.trace.as_deref_mut() {
                        t.push(crate::trace::Event::Table {
                            table: ti as u32,
                            key: self.key_buf.clone(),
                            hit: None,
                            action: None,
                        });
                    }
                    *self.act_buf = data;
                    return match tp.next_miss {
                        Some(n) => n,
                        None => tp.base_default_next,
                    };
                }
            },
        };
        if let Some(t) = self.trace.as_deref_mut() {
            t.push(crate::trace::Event::Table {
                table: ti as u32,
                key: self.key_buf.clone(),
                hit,
                action: Some((action, data.clone())),
            });
        }
        // Padding lets parameter reads load fixed 16-byte windows.
        data.extend_from_slice(&[0u8; 16]);
        self.run_action(action as usize, &data);
        *self.act_buf = data;
        if hit.is_some() {
            if let Some(n) = tp.next_hit {
                return n;
            }
        } else if let Some(n) = tp.next_miss {
            return n;
        }
        match tp.actions.iter().position(|a| *a == action) {
            Some(pos) => tp.next_by_action[pos],
            None => tp.base_default_next,
        }
    }

    /// Copies a profile member's action data into `data`; returns its action.
    fn member_into(&self, profile: Option<u32>, m: u32, data: &mut Vec<u8>) -> u32 {
        let p = &self.state.profiles[profile.expect("indirect table has a profile") as usize];
        match p.members.get(m as usize) {
            Some(Some((a, d))) => {
                data.extend_from_slice(d);
                *a
            }
            _ => 0,
        }
    }

    /// Executes cell `i` of meter array `arr` for this packet (packets or
    /// bytes of its ingress length), from this worker's leases when it has
    /// them on: its colour, 0 (green) out of range.
    pub(crate) fn execute_meter(&mut self, arr: usize, i: usize) -> u32 {
        let size = meters::units(self.plan.meters[arr].width, u64::from(self.meta.ingress_len));
        let st = &mut *self.state;
        let colour = st.meters.execute_leased(&mut st.meter_leases, arr, i, size, self.now_us);
        if self.plan.psa.is_some() {
            // PSA_MeterColor_t: RED 0, GREEN 1, YELLOW 2 (v1model: GREEN 0,
            // YELLOW 1, RED 2).
            return (colour + 1) % 3;
        }
        colour
    }

    pub(crate) fn select_member(&mut self, profile: Option<u32>, g: u32) -> Option<u32> {
        let pi = profile? as usize;
        let grp = self.state.profiles[pi].groups.get(g as usize)?.as_ref()?;
        if grp.is_empty() {
            return None;
        }
        let profile = &self.plan.profiles[pi];
        let hash = match &profile.selector {
            Some((algo, _, _)) => {
                let mut buf = [0u8; SELECTOR_BUF];
                algo.compute(selector_input(self.plan, profile, self.phv, self.hash_buf, &mut buf))
            }
            None => 0,
        };
        // bmv2 picks with the hash's low 32 bits.
        grp.pick(hash & 0xffff_ffff)
    }

    fn write_dst(&mut self, dst: &Dst, v: u128, params: &[u8]) {
        let layout = &self.plan.layout;
        match dst {
            Dst::Field(f) => self.phv.set(&layout.fields[*f as usize], v),
            Dst::Dyn(h, idx) => {
                let env = env!(self, params);
                if let Some(hd) = resolve_href(h, &env) {
                    let f = layout.headers[hd as usize].fields[*idx];
                    self.phv.set(&layout.fields[f as usize], v);
                }
            }
        }
    }

    fn set_validity(&mut self, h: u32, valid: bool) {
        let layout = &self.plan.layout;
        let hi = &layout.headers[h as usize];
        if hi.metadata {
            return;
        }
        let was = self.phv.valid()[h as usize];
        if was != valid {
            let bytes = (hi.fixed_bits + self.phv.varbit_len[h as usize]) / 8;
            if valid {
                self.meta.len_reg = self.meta.len_reg.wrapping_add(bytes);
            } else {
                self.meta.len_reg = self.meta.len_reg.wrapping_sub(bytes);
            }
        }
        if valid && !was {
            // A header made valid reads as zero until written (P4-16 leaves it undefined).
            self.phv.zero_header(layout, h);
        }
        self.phv.valid_mut()[h as usize] = valid;
        if valid {
            if let Some(u) = hi.union {
                for other in &layout.unions[u as usize].headers {
                    if *other != h {
                        self.phv.valid_mut()[*other as usize] = false;
                    }
                }
            }
        }
    }

    /// Runs an action with its data.
    pub fn run_action(&mut self, ai: usize, data: &[u8]) {
        let plan = self.plan;
        let prims = &plan.actions[ai].prims;
        let mut pc = 0;
        let mut steps = 0u32;
        let tracing = self.trace.is_some();
        if let Some(t) = self.trace.as_deref_mut() {
            t.push(crate::trace::Event::Action { action: ai as u32 });
        }
        while pc < prims.len() {
            let p = &prims[pc];
            pc += 1;
            // The commonest primitives run here, without entering `run_prim`.
            if !tracing {
                match p {
                    Prim::SetField { dst, mask, src } => {
                        let v = if !matches!(src.fast, Fast::None) {
                            fast_u64(&src.fast, self.phv, data)
                        } else {
                            src.eval_u128(&env!(self, data)) as u64
                        };
                        dst.write(self.phv, v, *mask);
                        continue;
                    }
                    Prim::Count { arr, idx } => {
                        let i = self.value(idx, data);
                        self.count(*arr as usize, i as u64);
                        continue;
                    }
                    _ => {}
                }
            }
            steps += 1;
            if steps > MAX_ACTION_STEPS {
                // A loop that never ends (bmv2 would hang): stop and drop the packet.
                if let Some(t) = self.trace.as_deref_mut() {
                    t.note("Action exceeded its step limit: packet dropped".into());
                }
                self.meta.exit = true;
                self.drop_packet();
                return;
            }
            self.run_prim(p, data, &mut pc);
        }
    }

    /// Evaluates an expression to its low 128 bits, through its shortcut when it has one.
    #[inline(always)]
    fn value(&self, r: &crate::expr::Root, data: &[u8]) -> u128 {
        if !matches!(r.fast, Fast::None) {
            fast_value(&r.fast, self.phv, data)
        } else {
            r.eval_u128(&env!(self, data))
        }
    }

    /// Runs one primitive; `pc` may be changed by jumps.
    pub fn run_prim(&mut self, p: &Prim, data: &[u8], pc: &mut usize) {
        let plan = self.plan;
        let layout = &plan.layout;
        match p {
            Prim::SetField { dst, mask, src } => {
                let v = src.eval_u128(&env!(self, data));
                dst.write(self.phv, v as u64, *mask);
            }
            Prim::Assign { dst, src } => match dst {
                Dst::Field(f) => {
                    let fi = &layout.fields[*f as usize];
                    if fi.width <= 128 {
                        let v = src.eval_u128(&env!(self, data));
                        self.phv.set(fi, v);
                    } else {
                        let mut b = [0u8; 512];
                        let n = nbytes(fi.width);
                        src.eval_bytes(&env!(self, data), &mut b[..n]);
                        self.phv.set_bytes(fi, &b[..n]);
                    }
                }
                d => {
                    let v = src.eval_u128(&env!(self, data));
                    self.write_dst(d, v, data);
                }
            },
            Prim::AssignHeader { dst, src } => {
                let env = env!(self, data);
                if let (Some(d), Some(s)) = (resolve_href(dst, &env), resolve_href(src, &env)) {
                    let was = self.phv.valid()[d as usize];
                    let now = self.phv.valid()[s as usize];
                    self.phv.copy_header(layout, d, s);
                    self.phv.valid_mut()[d as usize] = was;
                    self.set_validity_keep(d, now);
                }
            }
            Prim::AssignUnion { dst, src } => {
                let (d, s) = (&layout.unions[*dst as usize], &layout.unions[*src as usize]);
                for (hd, hs) in d.headers.iter().zip(s.headers.iter()) {
                    self.phv.copy_header(layout, *hd, *hs);
                }
            }
            Prim::AssignStack { dst, src } => {
                let (d, s) = (&layout.stacks[*dst as usize], &layout.stacks[*src as usize]);
                for (hd, hs) in d.headers.iter().zip(s.headers.iter()) {
                    self.phv.copy_header(layout, *hd, *hs);
                }
                self.phv.stack_next[*dst as usize] = self.phv.stack_next[*src as usize];
            }
            Prim::SetValid(h) => {
                if let Some(x) = resolve_href(h, &env!(self, data)) {
                    self.set_validity(x, true);
                }
            }
            Prim::SetInvalid(h) => {
                if let Some(x) = resolve_href(h, &env!(self, data)) {
                    self.set_validity(x, false);
                }
            }
            Prim::MarkToDrop => {
                if let Some(f) = plan.std.egress_spec {
                    self.phv.set(&layout.fields[f as usize], 511);
                }
                if let Some(f) = plan.std.mcast_grp {
                    self.phv.set(&layout.fields[f as usize], 0);
                }
            }
            Prim::Exit => self.meta.exit = true,
            Prim::Jump(t) => *pc = *t,
            Prim::JumpIfZero(c, t) => {
                if !c.eval_bool(&env!(self, data)) {
                    *pc = *t;
                }
            }
            Prim::Count { arr, idx } => {
                let i = idx.eval_u128(&env!(self, data)) as u64;
                self.count(*arr as usize, i);
            }
            Prim::ExecuteMeter { arr, idx, dst } => {
                let i = idx.eval_u128(&env!(self, data)) as usize;
                let colour = self.execute_meter(*arr as usize, i);
                self.write_dst(dst, u128::from(colour), data);
            }
            Prim::RegRead { dst, arr, idx } => {
                let i = idx.eval_u128(&env!(self, data)) as usize;
                let v = self.state.registers.read_or_zero(*arr as usize, i);
                self.write_dst(dst, v, data);
            }
            Prim::RegWrite { arr, idx, val } => {
                let env = env!(self, data);
                let i = idx.eval_u128(&env) as usize;
                let v = val.eval_u128(&env);
                self.state.registers.write(*arr as usize, i, v);
            }
            Prim::Clone { session, field_list, .. } => {
                let s = session.eval_u128(&env!(self, data)) as u32;
                self.meta.clone = Some((s, *field_list));
            }
            Prim::Resubmit(fl) => self.meta.resubmit = Some(*fl),
            Prim::Recirculate(fl) => self.meta.recirculate = Some(*fl),
            Prim::Truncate(n) => {
                let n = n.eval_u128(&env!(self, data)) as u32;
                self.meta.truncate = Some(self.meta.truncate.map_or(n, |t| t.min(n)));
            }
            Prim::Digest { receiver, list } => {
                let r = receiver.eval_u128(&env!(self, data)) as u64;
                self.meta.digest = Some((r, *list));
                if let Some((name, fields)) = plan.learn_lists.get(&(*list as u64)) {
                    let values = fields
                        .iter()
                        .map(|f| {
                            let fi = &layout.fields[*f as usize];
                            let mut b = vec![0u8; nbytes(fi.width)];
                            self.phv.get_bytes(fi, &mut b);
                            b
                        })
                        .collect();
                    self.state.digests.push(Digest { list: name.clone(), list_id: *list as u64, receiver: r, values });
                }
            }
            Prim::CsumClear(ext) => self.meta.csums[*ext as usize] = 0,
            Prim::CsumAdd { ext, input, subtract } => {
                self.hash_buf.clear();
                let env = env!(self, data);
                for (r, w) in input {
                    pack_input(&env, self.hash_buf, r, *w);
                }
                // One's complement sums: subtracting adds the complement
                // (which `csum16` gives).
                let bytes = self.hash_buf.as_bytes();
                let sum = u64::from(self.meta.csums[*ext as usize]);
                let acc = if *subtract {
                    sum + u64::from(sluice_hash::csum16(bytes))
                } else {
                    sluice_hash::csum16_add(sum, bytes)
                };
                self.meta.csums[*ext as usize] = !sluice_hash::csum16_finish(acc);
            }
            Prim::CsumGet { ext, dst, state } => {
                let sum = self.meta.csums[*ext as usize];
                self.write_dst(dst, u128::from(if *state { sum } else { !sum }), data);
            }
            Prim::CsumVerify { ext, dst, field } => {
                let v = field.eval_u128(&env!(self, data));
                let ok = v == u128::from(!self.meta.csums[*ext as usize]);
                self.write_dst(dst, u128::from(ok), data);
            }
            Prim::CsumSetState { ext, value } => {
                self.meta.csums[*ext as usize] = value.eval_u128(&env!(self, data)) as u16;
            }
            Prim::HashOffset { dst, base, calc, size } => {
                let env = env!(self, data);
                let b = base.eval_u128(&env) as u64;
                let s = size.eval_u128(&env) as u64;
                let h = self.compute_calc(*calc as usize);
                self.write_dst(dst, sluice_hash::hash_with_offset(b, h, s) as u128, data);
            }
            Prim::Rng { dst, lo, hi } => {
                let env = env!(self, data);
                let (l, h) = (lo.eval_u128(&env) as u64, hi.eval_u128(&env) as u64);
                let span = h.saturating_sub(l).saturating_add(1);
                // xorshift on the clock: not cryptographic, deterministic enough for tests of bounds.
                let mut x = self.now_us ^ 0x9e37_79b9_7f4a_7c15;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let v = if span == 0 { l } else { l + x % span };
                self.write_dst(dst, v as u128, data);
            }
            Prim::Push { stack, n } => {
                let st = &layout.stacks[*stack as usize];
                let size = st.headers.len();
                let n = (*n as usize).min(size);
                for i in (n..size).rev() {
                    self.phv.copy_header(layout, st.headers[i], st.headers[i - n]);
                }
                for i in 0..n {
                    self.phv.valid_mut()[st.headers[i] as usize] = false;
                }
                let next = &mut self.phv.stack_next[*stack as usize];
                *next = (*next + n as u32).min(size as u32);
            }
            Prim::Pop { stack, n } => {
                let st = &layout.stacks[*stack as usize];
                let size = st.headers.len();
                let n = (*n as usize).min(size);
                for i in 0..size - n {
                    self.phv.copy_header(layout, st.headers[i], st.headers[i + n]);
                }
                for i in size - n..size {
                    self.phv.valid_mut()[st.headers[i] as usize] = false;
                }
                let next = &mut self.phv.stack_next[*stack as usize];
                *next = next.saturating_sub(n as u32);
            }
            Prim::Assert(c) => {
                if !c.eval_bool(&env!(self, data)) {
                    // bmv2 aborts the whole switch; Sluice drops this packet and says why.
                    if let Some(t) = self.trace.as_deref_mut() {
                        t.note("Assertion failed: packet dropped".into());
                    }
                    self.meta.exit = true;
                    self.drop_packet();
                }
            }
            Prim::Log { fmt, args } => {
                if let Some(t) = self.trace.as_deref_mut() {
                    let env = Env { layout, phv: &*self.phv, params: data, packet: &[], cursor_bits: 0 };
                    let vals: Vec<String> = args.iter().map(|a| a.eval_u128(&env).to_string()).collect();
                    t.push(crate::trace::Event::UserLog(format_log_msg(fmt, &vals)));
                }
            }
            Prim::AssignVl { dst, src } => {
                let (fd, fs) = (&layout.fields[*dst as usize], &layout.fields[*src as usize]);
                if let (crate::phv::Loc::Wide { off: a, len: la }, crate::phv::Loc::Wide { off: b, len: lb }) =
                    (fd.loc, fs.loc)
                {
                    // Values are right-aligned in their storage: copy the common low part.
                    let n = la.min(lb);
                    self.phv.wide[a as usize..(a + la) as usize].fill(0);
                    self.phv.wide.copy_within((b + lb - n) as usize..(b + lb) as usize, (a + la - n) as usize);
                }
                let vl = self.phv.varbit_len[fs.header as usize].min(fd.width);
                self.phv.varbit_len[fd.header as usize] = vl;
            }
        }
    }

    fn set_validity_keep(&mut self, h: u32, valid: bool) {
        let was = self.phv.valid()[h as usize];
        if was != valid {
            let layout = &self.plan.layout;
            let hi = &layout.headers[h as usize];
            if !hi.metadata {
                let bytes = (hi.fixed_bits + self.phv.varbit_len[h as usize]) / 8;
                self.meta.len_reg =
                    if valid { self.meta.len_reg.wrapping_add(bytes) } else { self.meta.len_reg.wrapping_sub(bytes) };
            }
        }
        self.phv.valid_mut()[h as usize] = valid;
    }

    /// Drops the packet the control runs on (an action past its step limit,
    /// a failed assert): v1model's drop port, or PSA's `drop` (the ingress
    /// and the egress output's: the other control's is set again before it
    /// runs).
    fn drop_packet(&mut self) {
        let plan = self.plan;
        let fields = match &plan.psa {
            Some(psa) => [psa.ig_drop.map(|f| (f, 1)), psa.eg_drop.map(|f| (f, 1))],
            None => [plan.std.egress_spec.map(|f| (f, 511)), None],
        };
        for (f, v) in fields.into_iter().flatten() {
            plan.layout.write(self.phv, f, v);
        }
    }

    /// Computes a named calculation over the current PHV (invalid headers' fields skipped).
    pub fn compute_calc(&mut self, ci: usize) -> u64 {
        compute_calc(self.plan, self.state, self.phv, self.hash_buf, ci, &[])
    }
}

/// Computes calculation `ci` over `phv`, bmv2-style bit packing.
pub fn compute_calc(
    plan: &Plan,
    state: &State,
    phv: &Phv,
    buf: &mut sluice_hash::BitPacker,
    ci: usize,
    payload: &[u8],
) -> u64 {
    let c = &plan.calcs[ci];
    if c.is_csum16 && !c.with_payload {
        if let Some((h, ranges)) = &c.csum_bytes {
            // All inputs in one header: when it is invalid nothing is packed.
            if !phv.valid()[*h as usize] {
                return 0xffff;
            }
            return u64::from(sluice_hash::csum16_ranges(phv.wire(), ranges));
        }
    }
    compute_calc_packed(plan, state, phv, buf, ci, payload)
}

/// The general path: bit-pack every input with `BitPacker` (which reuses its
/// buffer), then the payload.
fn compute_calc_packed(
    plan: &Plan,
    state: &State,
    phv: &Phv,
    buf: &mut sluice_hash::BitPacker,
    ci: usize,
    payload: &[u8],
) -> u64 {
    let c = &plan.calcs[ci];
    buf.clear();
    let env = Env { layout: &plan.layout, phv, params: &[], packet: &[], cursor_bits: 0 };
    if c.pad_left {
        // Zeros in front up to whole bytes (PSA's Hash).
        let bits: u32 = c
            .input
            .iter()
            .zip(&c.input_headers)
            .filter(|(_, h)| h.is_none_or(|h| phv.valid()[h as usize]))
            .map(|((_, w), _)| *w)
            .sum();
        buf.push_u64(0, ((8 - bits % 8) % 8) as usize);
    }
    for ((r, w), h) in c.input.iter().zip(&c.input_headers) {
        if let Some(h) = h {
            if !phv.valid()[*h as usize] {
                continue;
            }
        }
        pack_input(&env, buf, r, *w);
    }
    if c.with_payload {
        buf.append_payload(payload);
    }
    state.calc_algos[ci].compute(buf.as_bytes())
}

/// Appends input `r` of `w` bits (a field read straight from the PHV) to
/// `buf`, as bmv2 packs calculation inputs.
fn pack_input(env: &Env, buf: &mut sluice_hash::BitPacker, r: &crate::expr::Root, w: u32) {
    if let crate::expr::CExpr::Field(f) = &r.e {
        let fi = &env.layout.fields[*f as usize];
        if fi.width <= 64 {
            buf.push_u64(env.phv.get(fi) as u64, fi.width as usize);
            return;
        }
    }
    let nb = nbytes(w);
    let mut small = [0u8; 16];
    let mut big = Vec::new();
    let b: &mut [u8] = if nb <= 16 {
        &mut small[..nb]
    } else {
        big.resize(nb, 0);
        &mut big
    };
    match &r.e {
        crate::expr::CExpr::Field(f) => env.phv.get_bytes(&env.layout.fields[*f as usize], b),
        _ => r.eval_bytes(env, b),
    }
    mask_top(b, w);
    buf.push_field(b, w as usize);
}

/// Bytes of the buffer [`selector_input`] gathers into: the longest input
/// and one 16-byte copy's overhang.
pub const SELECTOR_BUF: usize = crate::plan::SELECTOR_BYTES_MAX as usize + 16;

/// The bytes an action selector hashes on `phv`: its input fields in
/// order, bit-packed, leaving out fields of invalid headers (as bmv2 does).
/// Byte-aligned wire fields are copied straight from the PHV
/// ([`crate::plan::ProfilePlan::selector_bytes`]); anything else is
/// evaluated and packed bit by bit into `packer`.
pub fn selector_input<'b>(
    plan: &Plan,
    profile: &crate::plan::ProfilePlan,
    phv: &Phv,
    packer: &'b mut sluice_hash::BitPacker,
    buf: &'b mut [u8; SELECTOR_BUF],
) -> &'b [u8] {
    let Some((_, inputs, widths)) = &profile.selector else { return &[] };
    if let Some(copies) = &profile.selector_bytes {
        // Each piece of at most 16 bytes is one 16-byte copy (the next
        // piece overwrites the bytes past it): the wire area has
        // `phv::WIRE_PAD` bytes after its last field and `buf` 16 after
        // the longest input. Why: a copy of a length known only here
        // costs several compares and branches per piece.
        let mut n = 0;
        for p in copies {
            if phv.valid()[p.header as usize] {
                let len = p.len as usize;
                match p.from {
                    crate::plan::PieceFrom::Wire(at) if len <= 16 => {
                        let at = at as usize;
                        buf[n..n + 16].copy_from_slice(&phv.wire()[at..at + 16]);
                    }
                    crate::plan::PieceFrom::Wire(at) => sluice_lookup::mem::copy_short(
                        &mut buf[n..n + len],
                        &phv.wire()[at as usize..at as usize + len],
                    ),
                    crate::plan::PieceFrom::Slot(i) if len <= 8 => {
                        // The value's low `len` bytes, big-endian, from a
                        // 64-bit shift: a port or a protocol number costs
                        // no 128-bit arithmetic.
                        let v = (phv.slots[i as usize] as u64) << (8 * (8 - len as u32));
                        buf[n..n + 8].copy_from_slice(&v.to_be_bytes());
                    }
                    crate::plan::PieceFrom::Slot(i) => {
                        // Slot pieces are at most 16 bytes (a slot's value).
                        let v = phv.slots[i as usize] << (8 * (16 - len as u32)).min(127);
                        buf[n..n + 16].copy_from_slice(&v.to_be_bytes());
                    }
                }
                n += len;
            }
        }
        return &buf[..n];
    }
    packer.clear();
    let env = Env { layout: &plan.layout, phv, params: &[], packet: &[], cursor_bits: 0 };
    for (e, w) in inputs.iter().zip(widths) {
        if let crate::expr::CExpr::Field(f) = e {
            let fi = &plan.layout.fields[*f as usize];
            if !phv.valid()[fi.header as usize] {
                continue;
            }
        }
        let nb = nbytes(*w);
        if *w > 126 {
            let mut b = [0u8; 64];
            crate::value::Num::write_be(e.eval::<crate::value::Wide>(&env), &mut b[..nb]);
            packer.push_field(&b[..nb], *w as usize);
        } else {
            let mut b = [0u8; 16];
            crate::value::Num::write_be(e.eval::<i128>(&env), &mut b[..nb]);
            packer.push_field(&b[..nb], *w as usize);
        }
    }
    packer.as_bytes()
}

#[cfg(test)]
mod tests {
    use super::{Exec, PktMeta, State};

    /// Random wire bytes, random values within their widths in the slots of
    /// fields up to 64 bits, and each header valid with probability 3/4.
    fn randomize(layout: &crate::phv::Layout, phv: &mut crate::phv::Phv, next: &mut impl FnMut() -> u32) {
        for b in phv.wire_mut().iter_mut() {
            *b = next() as u8;
        }
        for fi in &layout.fields {
            if let (crate::phv::Loc::Slot(i), 1..=64) = (fi.loc, fi.width) {
                let v = (u64::from(next()) << 32) | u64::from(next());
                phv.slots[i as usize] = u128::from(v & crate::phv::mask64(fi.width));
            }
        }
        for (h, hi) in layout.headers.iter().enumerate() {
            if !hi.metadata {
                phv.valid_mut()[h] = !next().is_multiple_of(4);
            }
        }
    }

    #[test]
    fn keys_written_part_by_part_equal_the_general_key_bytes() {
        let model = sluice_json::load_str(include_str!("../../../examples/edge.json")).expect("edge parses");
        let fast = crate::plan::compile(&model).expect("edge compiles");
        let acl = fast.tables.iter().position(|t| t.name.ends_with("acl")).expect("edge has an acl");
        assert!(fast.tables[acl].key_fields.is_some() && fast.tables[acl].key128.is_none(), "a 17-byte field key");
        let mut slow = fast.clone();
        for t in &mut slow.tables {
            t.key_fields = None;
        }
        let mut state = State::new(&fast).expect("state");
        let mut phv = fast.layout.new_phv();
        let mut meta = PktMeta::default();
        let (mut key, mut act) = (Vec::new(), Vec::new());
        let mut packer = sluice_hash::BitPacker::default();
        let mut next = crate::test_rng(0x2545_f491);
        let mut distinct = std::collections::HashSet::new();
        for _ in 0..300 {
            randomize(&fast.layout, &mut phv, &mut next);
            let mut keys = Vec::new();
            let mut words = Vec::new();
            for plan in [&fast, &slow] {
                let mut ex = Exec {
                    plan,
                    state: &mut state,
                    phv: &mut phv,
                    meta: &mut meta,
                    key_buf: &mut key,
                    act_buf: &mut act,
                    hash_buf: &mut packer,
                    now_us: 0,
                    trace: None,
                };
                words.push(ex.build_key(acl));
                keys.push(ex.key_buf.clone());
            }
            assert_eq!(keys[0], keys[1]);
            assert_eq!(words[0], Some(sluice_lookup::classifier::key_words(&keys[0])), "words built with the key");
            assert_eq!(words[1], None);
            assert_eq!(keys[0].len(), 17);
            distinct.insert(keys[0].clone());
        }
        assert!(distinct.len() > 250, "random PHVs give different keys");
    }

    #[test]
    fn gathered_selector_bytes_equal_the_bit_packed_input() {
        let model = sluice_json::load_str(include_str!("../../../examples/edge.json")).expect("edge parses");
        let plan = crate::plan::compile(&model).expect("edge compiles");
        let fast = plan.profiles.iter().find(|p| p.selector.is_some()).expect("edge has a selector");
        // The 5-tuple is byte-aligned; the adjacent addresses are one piece.
        assert_eq!(fast.selector_bytes.as_ref().map(Vec::len), Some(4));
        let slow = crate::plan::ProfilePlan { selector_bytes: None, ..fast.clone() };
        let mut phv = plan.layout.new_phv();
        let mut packer = sluice_hash::BitPacker::default();
        let mut next = crate::test_rng(0x9e37_79b9);
        let mut full = 0;
        for _ in 0..300 {
            randomize(&plan.layout, &mut phv, &mut next);
            let (mut a, mut b) = ([0u8; super::SELECTOR_BUF], [0u8; super::SELECTOR_BUF]);
            let gathered = super::selector_input(&plan, fast, &phv, &mut packer, &mut a).to_vec();
            let packed = super::selector_input(&plan, &slow, &phv, &mut packer, &mut b).to_vec();
            assert_eq!(gathered, packed);
            full += usize::from(gathered.len() == 13);
        }
        assert!(full > 0, "some inputs had every header valid");
    }
}

/// A `log_msg` line as bmv2 writes it: each `{...}` of `fmt` (a `{` not
/// preceded by a backslash, up to the next `}` not preceded by one) takes
/// the next value in decimal, then escaped braces lose their backslash. A
/// placeholder without a value stays as written, a `{` without its `}` ends
/// the substitution, and values left over are appended in brackets (bmv2
/// stops the whole switch for either mistake; Sluice logs what it can).
pub fn format_log_msg(fmt: &str, vals: &[String]) -> String {
    let b = fmt.as_bytes();
    let mut out = String::with_capacity(fmt.len() + 8 * vals.len());
    let mut vals = vals.iter();
    let mut i = 0;
    let mut copied = 0;
    while i < b.len() {
        if b[i] == b'{' && (i == 0 || b[i - 1] != b'\\') {
            let mut j = i + 1;
            while j < b.len() && !(b[j] == b'}' && b[j - 1] != b'\\') {
                j += 1;
            }
            if j == b.len() {
                break;
            }
            if let Some(v) = vals.next() {
                out.push_str(&fmt[copied..i]);
                out.push_str(v);
                copied = j + 1;
            }
            i = j + 1;
        } else {
            i += 1;
        }
    }
    out.push_str(&fmt[copied..]);
    let mut out = out.replace("\\{", "{").replace("\\}", "}");
    let rest: Vec<&str> = vals.map(String::as_str).collect();
    if !rest.is_empty() {
        out.push_str(&format!(" [{}]", rest.join(", ")));
    }
    out
}

#[cfg(test)]
mod log_msg_tests {
    use super::format_log_msg;

    #[test]
    fn placeholders_take_values_in_order_and_escapes_lose_their_backslash() {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(format_log_msg("ttl={} port={}", &v(&["63", "2"])), "ttl=63 port=2");
        assert_eq!(format_log_msg("a {x} b {}", &v(&["1", "2"])), "a 1 b 2");
        assert_eq!(format_log_msg("set \\{{}\\}", &v(&["7"])), "set {7}");
        assert_eq!(format_log_msg("no args", &[]), "no args");
        assert_eq!(format_log_msg("{} and {}", &v(&["1"])), "1 and {}");
        assert_eq!(format_log_msg("x", &v(&["1"])), "x [1]");
        assert_eq!(format_log_msg("open { never closed", &v(&["1"])), "open { never closed [1]");
    }
}
