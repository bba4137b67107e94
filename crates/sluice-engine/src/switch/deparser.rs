//! The deparser: checksum updates, then the valid headers in deparser
//! order followed by the payload.
//!
//! Contract. Reads: the PHV (headers, validity, varbit lengths) and the
//! unparsed payload. Writes: checksum fields (updated before the headers
//! are written; a PSA deparser's own statements, its `InternetChecksum`
//! calls, run first) and the output buffer. Leaves: the bytes in `out`, which
//! the caller transmits (truncated if the pipeline asked) or recirculates.
//! For unicast packets of programs whose deparser emits only wire-format
//! headers, generated code does the same work (`crate::jit`).

use crate::control::{Exec, PktMeta};
use crate::phv::{write_bits, write_bits_from, Loc, Phv};

use super::Switch;

impl Switch {
    /// Updates checksums and writes valid headers then the payload into `out`.
    pub fn deparse(&mut self, phv: &mut Phv, payload: &[u8], out: &mut Vec<u8>) {
        self.deparse_with(phv, payload, out, false);
    }

    /// [`Switch::deparse`] with the egress deparser's order when `egress`
    /// (a PSA program's second deparser).
    pub(super) fn deparse_with(&mut self, phv: &mut Phv, payload: &[u8], out: &mut Vec<u8>, egress: bool) {
        let prims = if egress { &self.plan.egress_deparse_prims } else { &self.plan.deparse_prims };
        if !prims.is_empty() {
            // What the deparser computes before it emits (PSA's
            // InternetChecksum calls), with state of its own.
            let mut meta = PktMeta::default();
            let mut ex = Exec {
                plan: &self.plan,
                state: &mut self.state,
                phv,
                meta: &mut meta,
                key_buf: &mut self.key_buf,
                act_buf: &mut self.act_buf,
                hash_buf: &mut self.hash_buf,
                now_us: self.now,
                trace: None,
            };
            for p in prims {
                let mut pc = 0;
                ex.run_prim(p, &[], &mut pc);
            }
        }
        let plan = &self.plan;
        let layout = &plan.layout;
        let order = if egress { &plan.egress_deparse_order } else { &plan.deparse_order };
        if let Some(t) = self.trace.as_mut() {
            trace_deparser(t, plan, phv, order, egress);
        }
        crate::checksum::update_all(plan, &self.state, &self.byte_checksums, phv, &mut self.hash_buf, payload);
        out.clear();
        if let Some(hs) = &self.deparse_wire[usize::from(egress)] {
            // Every header the deparser may emit is in wire format: append bytes.
            for &(h, off, n) in hs {
                if phv.valid()[h as usize] {
                    out.extend_from_slice(&phv.wire()[off as usize..(off + n) as usize]);
                }
            }
            out.extend_from_slice(payload);
            return;
        }
        let mut bits = 0usize;
        for h in order {
            if phv.valid()[*h as usize] {
                bits += (layout.headers[*h as usize].fixed_bits + phv.varbit_len[*h as usize]) as usize;
            }
        }
        let hdr_bytes = bits.div_ceil(8);
        // 16 bytes of slack let `write_bits` use fixed-size windows.
        out.resize(hdr_bytes + 16, 0);
        let mut cursor: usize = 0;
        for h in order {
            if !phv.valid()[*h as usize] {
                continue;
            }
            let hi = &layout.headers[*h as usize];
            if let Some((off, n)) = hi.wire {
                let (off, n) = (off as usize, n as usize);
                if cursor.is_multiple_of(8) {
                    out[cursor / 8..cursor / 8 + n].copy_from_slice(&phv.wire()[off..off + n]);
                } else {
                    for i in 0..n {
                        write_bits(out, cursor + 8 * i, 8, u128::from(phv.wire()[off + i]));
                    }
                }
                cursor += hi.fixed_bits as usize;
                continue;
            }
            if let Some(codec) = &hi.codec {
                for (slot, off, width) in codec {
                    write_bits(out, cursor + *off as usize, *width, phv.slots[*slot as usize]);
                }
                cursor += hi.fixed_bits as usize;
                continue;
            }
            for (i, f) in hi.fields.iter().enumerate() {
                let fi = &layout.fields[*f as usize];
                if Some(i) == hi.varbit_field {
                    let vl = phv.varbit_len[*h as usize];
                    if let Loc::Wide { off, len } = fi.loc {
                        let src = &phv.wide[off as usize..(off + len) as usize];
                        write_bits_from(out, cursor, vl, src);
                    }
                    cursor += vl as usize;
                    continue;
                }
                match fi.loc {
                    Loc::Slot(s) => write_bits(out, cursor, fi.width, phv.slots[s as usize]),
                    Loc::Wire { .. } => write_bits(out, cursor, fi.width, phv.get(fi)),
                    Loc::Wide { off, len } => {
                        write_bits_from(out, cursor, fi.width, &phv.wide[off as usize..(off + len) as usize])
                    }
                }
                cursor += fi.width as usize;
            }
        }
        out.truncate(hdr_bytes);
        out.extend_from_slice(payload);
    }
}

/// The deparser's trace: its start, the checksums it updates (those whose
/// target header is valid: a condition is not evaluated again here), each
/// valid header it emits, its end.
fn trace_deparser(t: &mut crate::trace::Trace, plan: &crate::plan::Plan, phv: &Phv, order: &[u32], egress: bool) {
    use crate::trace::Event;
    t.push(Event::DeparserStart { egress });
    if !egress || plan.psa.is_some() {
        for (i, c) in plan.checksums.iter().enumerate() {
            if c.update && phv.valid()[plan.layout.fields[c.target as usize].header as usize] {
                t.push(Event::ChecksumUpdate { checksum: i as u32 });
            }
        }
    }
    for h in order {
        if phv.valid()[*h as usize] {
            t.push(Event::Emit { header: *h });
        }
    }
    t.push(Event::DeparserDone { egress });
}
