//! The parser: a frame's bytes into a PHV, then checksum verification.
//!
//! Contract. Reads: the frame's bytes, how the packet entered (port,
//! instance type, preserved fields), the parse value sets. Writes: the
//! PHV's headers and validity, `standard_metadata` (ingress port, packet
//! length, instance type, timestamps, `parser_error`, `checksum_error`).
//! Leaves: always into ingress, with the number of bytes consumed (the
//! rest is the payload); a parser error is recorded in `parser_error`, as
//! v1model says, never a drop here. Generated code parses when the parser
//! compiled (`crate::jit`), this interpreter otherwise and when tracing.

use crate::control::{Exec, PktMeta};
use crate::expr::Env;
use crate::phv::{read_bits, read_bits_into, Loc, Phv};
use crate::plan::{ExtractTo, POp};
use crate::value::nbytes;

use super::{Arrival, Switch};
use crate::trace::Event;
use crate::v1model::MAX_PARSER_STATES;

impl Switch {
    /// Sets up a PHV for a packet entering ingress and parses it; returns the
    /// PHV and the bytes the parser consumed.
    #[inline]
    pub(super) fn ingress_parse(&mut self, item: &Arrival, data: &[u8]) -> (Box<Phv>, usize) {
        let mut phv = self.take_phv();
        // An arriving packet: the compiled parser can set its PHV up itself.
        let compiled = self.compiled.as_ref().filter(|c| c.parser_sets_up() && self.trace.is_none());
        if let (Some(c), true, true) = (compiled, item.arrived, item.preserved.is_empty()) {
            let ends = c.parser_ends();
            if let Some(outcome) = c.run_parser_with(&mut phv, data, Some((item.port, self.now))) {
                let consumed = self.parse_outcome(&mut phv, data, outcome, ends);
                return (phv, consumed);
            }
        }
        self.ingress_parse_general(item, data, phv)
    }

    /// [`Switch::ingress_parse`] when the compiled parser does not set the
    /// PHV up (kept out of line, as `process_parsed_general`).
    #[inline(never)]
    fn ingress_parse_general(&mut self, item: &Arrival, data: &[u8], mut phv: Box<Phv>) -> (Box<Phv>, usize) {
        phv.reset();
        let len = data.len() as u128;
        if item.arrived {
            self.set_std(&mut phv, self.plan.std.ingress_port, item.port as u128);
            let now = self.now_us();
            self.set_std(&mut phv, self.plan.std.ingress_global_timestamp, now as u128);
        }
        for (f, v, wide) in item.preserved {
            let fi = &self.plan.layout.fields[*f as usize];
            match wide {
                Some(b) => phv.set_bytes(fi, b),
                None => phv.set_bytes(fi, v),
            }
        }
        // After the preserved fields, as bmv2 does for resubmitted and
        // recirculated copies: a preserved instance type or length does not
        // survive into the new pass.
        self.set_std(&mut phv, self.plan.std.packet_length, len);
        self.set_std(&mut phv, self.plan.std.instance_type, item.instance_type);
        if let Some(t) = self.trace.as_mut() {
            t.new_packet(item.port, data.len(), item.arrived, || {
                format!("Processing packet of instance type {} (resubmitted or recirculated)", item.instance_type)
            });
        }
        let consumed = self.parse(&mut phv, data);
        (phv, consumed)
    }

    /// Runs the parser and checksum verification; returns the bytes consumed.
    pub fn parse(&mut self, phv: &mut Phv, data: &[u8]) -> usize {
        if self.trace.is_none() {
            let ends = self.compiled.as_ref().is_some_and(|c| c.parser_ends());
            if let Some(outcome) = self.compiled.as_ref().and_then(|c| c.run_parser(phv, data)) {
                return self.parse_outcome(phv, data, outcome, ends);
            }
        }
        let (cursor, error) = self.parse_states(phv, data, self.plan.init_state);
        self.parse_end(phv, data, cursor, error)
    }

    /// Runs the parser states from `init` (interpreted): the bits consumed
    /// and the parser error, if one ended the parse.
    pub(super) fn parse_states(&mut self, phv: &mut Phv, data: &[u8], init: Option<u32>) -> (usize, Option<u64>) {
        let plan = &self.plan;
        let layout = &plan.layout;
        let mut cursor: usize = 0; // bits
        let mut state = init;
        let mut error: Option<u64> = None;
        let total_bits = data.len() * 8;
        let err = |name: &str| plan.errors.get(name).copied().unwrap_or(0);
        let mut meta = PktMeta::default();
        let mut trace = self.trace.take();
        let egress = init.is_some() && init == plan.egress_init_state;
        if let Some(t) = trace.as_mut() {
            t.push(Event::ParserStart { egress });
        }
        // bmv2 has no bound on parser loops; Sluice stops a parser that has
        // run MAX_PARSER_STATES states with ParserTimeout instead of hanging.
        let mut visited = 0u32;
        'states: while let Some(si) = state {
            visited += 1;
            if visited > MAX_PARSER_STATES {
                error = Some(err("ParserTimeout"));
                break 'states;
            }
            let st = &plan.states[si as usize];
            if let Some(t) = trace.as_mut() {
                t.push(Event::ParserState { state: si });
            }
            if let (Some(ex), true) = (&st.wire_extracts, trace.is_none() && cursor.is_multiple_of(8)) {
                // Only wire-format headers: each extraction is a byte copy.
                for &(h, off, n) in ex {
                    let (c, off, n) = (cursor / 8, off as usize, n as usize);
                    let Some(src) = data.get(c..c + n) else {
                        error = Some(err("PacketTooShort"));
                        break 'states;
                    };
                    sluice_lookup::mem::copy_short(&mut phv.wire_mut()[off..off + n], src);
                    phv.valid_mut()[h as usize] = true;
                    cursor += n * 8;
                }
            } else {
                for op in &st.ops {
                    match op {
                        POp::Extract(to) | POp::ExtractVl(to, _) => {
                            let h = match to {
                                ExtractTo::Header(h) => *h,
                                ExtractTo::StackNext(s) => {
                                    let next = phv.stack_next[*s as usize] as usize;
                                    let sh = &layout.stacks[*s as usize].headers;
                                    if next >= sh.len() {
                                        error = Some(err("StackOutOfBounds"));
                                        break 'states;
                                    }
                                    sh[next]
                                }
                                ExtractTo::UnionStackNext(us, m) => {
                                    let next = phv.union_stack_next[*us as usize] as usize;
                                    let us_ = &layout.union_stacks[*us as usize].unions;
                                    if next >= us_.len() {
                                        error = Some(err("StackOutOfBounds"));
                                        break 'states;
                                    }
                                    layout.unions[us_[next] as usize].headers[*m]
                                }
                            };
                            let hi = &layout.headers[h as usize];
                            let mut vl_bits = 0u32;
                            if let POp::ExtractVl(_, len) = op {
                                let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                                let n = len.eval_u128(&env);
                                if !n.is_multiple_of(8) {
                                    error = Some(err("ParserInvalidArgument"));
                                    break 'states;
                                }
                                vl_bits = n.min(u32::MAX as u128) as u32;
                            }
                            let bits = hi.fixed_bits as usize + vl_bits as usize;
                            if cursor + bits > total_bits {
                                error = Some(err("PacketTooShort"));
                                break 'states;
                            }
                            if let Some(vf) = hi.varbit_field {
                                let f = &layout.fields[hi.fields[vf] as usize];
                                if vl_bits > f.width {
                                    error = Some(err("HeaderTooShort"));
                                    break 'states;
                                }
                            }
                            extract_header(layout, phv, h, data, cursor, vl_bits);
                            phv.valid_mut()[h as usize] = true;
                            if let Some(u) = hi.union {
                                for o in &layout.unions[u as usize].headers {
                                    if *o != h {
                                        phv.valid_mut()[*o as usize] = false;
                                    }
                                }
                            }
                            match to {
                                ExtractTo::StackNext(s) => phv.stack_next[*s as usize] += 1,
                                ExtractTo::UnionStackNext(us, _) => phv.union_stack_next[*us as usize] += 1,
                                _ => {}
                            }
                            if let Some(t) = trace.as_mut() {
                                t.push(Event::Extract { header: h });
                            }
                            cursor += bits;
                        }
                        POp::Set(dst, src) => {
                            if let crate::expr::CExpr::Lookahead { width, .. } = &src.e {
                                if total_bits - cursor.min(total_bits) < nbytes(*width) * 8 {
                                    error = Some(err("PacketTooShort"));
                                    break 'states;
                                }
                            }
                            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                            match dst {
                                crate::plan::Dst::Field(f) => {
                                    let fi = &layout.fields[*f as usize];
                                    if fi.width <= 128 {
                                        let v = src.eval_u128(&env);
                                        phv.set(fi, v);
                                    } else {
                                        let mut b = vec![0u8; nbytes(fi.width)];
                                        src.eval_bytes(&env, &mut b);
                                        phv.set_bytes(fi, &b);
                                    }
                                }
                                crate::plan::Dst::Dyn(h, idx) => {
                                    let v = src.eval_u128(&env);
                                    if let Some(hd) = crate::expr::resolve_href(h, &env) {
                                        let f = layout.headers[hd as usize].fields[*idx];
                                        phv.set(&layout.fields[f as usize], v);
                                    }
                                }
                            }
                        }
                        POp::Verify(cond, e) => {
                            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                            if !cond.eval_bool(&env) {
                                error = Some(e.eval_u128(&env) as u64);
                                break 'states;
                            }
                        }
                        POp::Advance(n) => {
                            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
                            let n = n.eval_u128(&env) as usize;
                            if !n.is_multiple_of(8) {
                                error = Some(err("ParserInvalidArgument"));
                                break 'states;
                            }
                            if cursor + n > total_bits {
                                error = Some(err("PacketTooShort"));
                                break 'states;
                            }
                            cursor += n;
                        }
                        POp::Prim(p) => {
                            let mut ex = Exec {
                                plan,
                                state: &mut self.state,
                                phv,
                                meta: &mut meta,
                                key_buf: &mut self.key_buf,
                                act_buf: &mut self.act_buf,
                                hash_buf: &mut self.hash_buf,
                                now_us: 0,
                                trace: None,
                            };
                            let mut pc = 0;
                            ex.run_prim(p, &[], &mut pc);
                        }
                    }
                }
            }
            // Transition key
            if st.key.is_empty() {
                state = st.transitions.iter().find(|t| t.default).and_then(|t| t.next);
                if st.transitions.iter().all(|t| !t.default) {
                    state = None;
                }
                continue;
            }
            let env = Env { layout, phv: &*phv, params: &[], packet: data, cursor_bits: cursor };
            if let Some(fast) = &st.fast_transitions {
                // Keys of at most 16 bytes from fields: compare as integers.
                let mut k: u128 = 0;
                for (r, nb) in &st.key {
                    let bits = *nb * 8;
                    let v = if matches!(r.fast, crate::expr::Fast::None) {
                        r.eval_u128(&env)
                    } else {
                        crate::expr::fast_value(&r.fast, phv, &[])
                    };
                    k = if bits >= 128 { 0 } else { k << bits } | (v & crate::value::mask128(bits));
                }
                state = fast.iter().find(|(v, m, _)| k & m == *v).and_then(|(_, _, n)| *n);
                continue;
            }
            let mut key = [0u8; 128];
            let mut koff = 0;
            for (r, nb) in &st.key {
                let nb = *nb as usize;
                if let crate::expr::CExpr::Lookahead { off, width } = &r.e {
                    let need_bytes = (*off as usize) / 8 + nbytes(*width);
                    if cursor / 8 + need_bytes > data.len() {
                        error = Some(err("PacketTooShort"));
                        break 'states;
                    }
                }
                if koff + nb > key.len() {
                    break;
                }
                r.eval_bytes(&env, &mut key[koff..koff + nb]);
                koff += nb;
            }
            let key = &key[..koff];
            let mut next = None;
            let mut matched = false;
            for t in &st.transitions {
                let hit = if t.default {
                    true
                } else if let Some(vs) = t.vset {
                    self.state.vsets[vs as usize].iter().any(|(v, m)| {
                        key.iter().zip(v.iter().zip(m.iter())).all(|(k, (v, m))| k & m == v & m) && v.len() == key.len()
                    })
                } else {
                    match &t.mask {
                        Some(m) => key.iter().zip(t.value.iter().zip(m.iter())).all(|(k, (v, m))| k & m == v & m),
                        None => key == t.value.as_slice(),
                    }
                };
                if hit {
                    next = t.next;
                    matched = true;
                    break;
                }
            }
            if !matched {
                next = None;
            }
            state = next;
        }
        if let Some(t) = trace.as_mut() {
            if let Some(e) = error {
                let name = plan.errors.iter().find(|(_, v)| **v == e).map_or_else(|| e.to_string(), |(n, _)| n.clone());
                t.push(Event::ParserError { error: name });
            }
            t.push(Event::ParserDone { egress });
        }
        self.trace = trace;
        (cursor, error)
    }

    /// Bytes consumed by a compiled parser run, after the end of parsing
    /// (unless the compiled parser did that too: `ends`).
    fn parse_outcome(&mut self, phv: &mut Phv, data: &[u8], outcome: crate::jit::ParseOutcome, ends: bool) -> usize {
        let (cursor, error) = self.outcome_parts(outcome);
        if ends {
            return cursor;
        }
        self.parse_end(phv, data, cursor * 8, error)
    }

    /// A compiled parser run's bytes consumed and parser error, if one ended it.
    pub(super) fn outcome_parts(&self, outcome: crate::jit::ParseOutcome) -> (usize, Option<u64>) {
        match outcome {
            crate::jit::ParseOutcome::Done(c) => (c, None),
            crate::jit::ParseOutcome::TooShort(c) => {
                (c, Some(self.plan.errors.get("PacketTooShort").copied().unwrap_or(0)))
            }
            crate::jit::ParseOutcome::Verify(c, code) => (c, Some(code)),
        }
    }

    /// After the parser states: sets `parser_error`, verifies checksums and
    /// returns the bytes consumed (`cursor` is in bits).
    fn parse_end(&mut self, phv: &mut Phv, data: &[u8], cursor: usize, error: Option<u64>) -> usize {
        let plan = &self.plan;
        let layout = &plan.layout;
        let perr = error.unwrap_or(plan.no_error);
        if let Some(f) = plan.std.parser_error {
            layout.write(phv, f, perr as u128);
        }
        let rest = &data[cursor.div_ceil(8).min(data.len())..];
        let bad = crate::checksum::verify_all(plan, &self.state, &self.byte_checksums, phv, &mut self.hash_buf, rest);
        if let Some(f) = plan.std.checksum_error {
            layout.write(phv, f, bad as u128);
        }
        cursor.div_ceil(8)
    }
}

fn extract_header(layout: &crate::phv::Layout, phv: &mut Phv, h: u32, data: &[u8], mut cursor: usize, vl_bits: u32) {
    let hi = &layout.headers[h as usize];
    if let Some((off, n)) = hi.wire {
        let (off, n) = (off as usize, n as usize);
        if cursor.is_multiple_of(8) {
            sluice_lookup::mem::copy_short(&mut phv.wire_mut()[off..off + n], &data[cursor / 8..cursor / 8 + n]);
        } else {
            for i in 0..n {
                phv.wire_mut()[off + i] = read_bits(data, cursor + 8 * i, 8) as u8;
            }
        }
        return;
    }
    if let Some(codec) = &hi.codec {
        for (slot, off, width) in codec {
            phv.slots[*slot as usize] = read_bits(data, cursor + *off as usize, *width);
        }
        return;
    }
    for (i, f) in hi.fields.iter().enumerate() {
        let fi = &layout.fields[*f as usize];
        if Some(i) == hi.varbit_field {
            if let Loc::Wide { off, len } = fi.loc {
                let dst = &mut phv.wide[off as usize..(off + len) as usize];
                read_bits_into(data, cursor, vl_bits, dst);
            }
            phv.varbit_len[h as usize] = vl_bits;
            cursor += vl_bits as usize;
            continue;
        }
        match fi.loc {
            Loc::Slot(s) => phv.slots[s as usize] = read_bits(data, cursor, fi.width),
            Loc::Wire { .. } => phv.set(fi, read_bits(data, cursor, fi.width)),
            Loc::Wide { off, len } => {
                read_bits_into(data, cursor, fi.width, &mut phv.wide[off as usize..(off + len) as usize])
            }
        }
        cursor += fi.width as usize;
    }
}
