//! `sluice inspect`: what the specializer chose for each stage of a
//! program, so that a user can see why a program is slow.

use crate::checksum::ByteChecksum;

use super::Switch;

impl Switch {
    /// What the specializer chose for each stage of this program, one line
    /// per parser state, checksum, table and the deparser: the shortcuts a
    /// stage got and, where it got none, the general path it takes (for
    /// `sluice inspect`, so a user can see why a program is slow).
    pub fn stage_report(&self) -> String {
        use std::fmt::Write as _;
        let plan = &self.plan;
        let layout = &plan.layout;
        let mut r = String::new();
        let psa = plan.psa.is_some();
        let _ = writeln!(
            r,
            "batches: {}",
            match (self.compiled.as_ref().is_some_and(|c| c.has_fast_path()), self.preparse) {
                _ if psa => "packet by packet through PSA's packet path (ingress parser, control and deparser, replication, egress parser, control and deparser)",
                (true, true) => "fast path: one generated batch function (parser, forwarding function and payload copy per packet, one PHV per batch); with big LPM/exact tables, each batch is parsed ahead first to prefetch its index slots, then its hit records",
                (true, false) => "fast path: one generated batch function (parser, forwarding function and payload copy per packet, one PHV per batch)",
                (false, true) => "parsed ahead 32 at a time when tables are big, then run (the parser calls no externs)",
                (false, false) => "packet by packet (the parser calls externs, so it cannot run ahead)",
            }
        );
        let parser_how = |compiled: Option<bool>| {
            match compiled {
            Some(true) => "native code (byte copies, selects as compare chains)",
            Some(false) => "interpreted (a state extracts a non-wire-format header or stack, computes a value without a shortcut, calls an extern, selects on a non-field or >64-bit key, or the states loop)",
            None => "interpreted (--interpret)",
        }
        };
        let compiled = self.compiled.as_ref();
        let _ = writeln!(
            r,
            "{}: {}",
            if psa { "ingress parser" } else { "parser" },
            parser_how(compiled.map(|c| c.parser_compiled()))
        );
        if psa {
            let _ = writeln!(r, "egress parser: {}", parser_how(compiled.map(|c| c.egress_parser_compiled())));
        }
        let _ = writeln!(
            r,
            "forwarding: {}",
            match compiled {
                _ if psa => match compiled {
                    Some(_) => "stage by stage: ingress and egress controls as native code (conditions, simple actions and table lookups inline), deparsers as byte copies",
                    None => "stage by stage (--interpret)",
                },
                Some(c) if c.has_forward() => "one native function from ingress to deparser for unicast packets (general path for multicast, clone, resubmit, recirculate, truncate)",
                Some(_) => "stage by stage (the deparser emits a header not in wire format, or a checksum update has no byte-range form)",
                None => "stage by stage (--interpret)",
            }
        );
        for st in &plan.states {
            let extracts = match &st.wire_extracts {
                Some(x) if x.is_empty() => "no extraction".to_string(),
                Some(x) => format!(
                    "byte copies of {}",
                    x.iter()
                        .map(|(h, _, n)| format!("{} ({n} B)", layout.headers[*h as usize].name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None => format!("{} general operations (bit-level extraction or expressions)", st.ops.len()),
            };
            let next = if st.key.is_empty() {
                "unconditional transition".to_string()
            } else if st.fast_transitions.is_some() {
                format!("select on an integer key, {} cases", st.transitions.len())
            } else {
                format!("select on a byte key, {} cases compared bytewise", st.transitions.len())
            };
            let _ = writeln!(r, "  state {}: {extracts}; {next}", st.name);
        }
        let _ = writeln!(r, "checksums:");
        if plan.checksums.is_empty() {
            let _ = writeln!(r, "  none");
        }
        for c in &plan.checksums {
            let calc = &plan.calcs[c.calc as usize];
            let special = ByteChecksum::of(plan, c).is_some();
            let how = match (&calc.csum_bytes, calc.is_csum16, calc.with_payload) {
                (Some((_, ranges)), true, false) => {
                    format!("csum16 summed over {} byte range(s) of the header", ranges.len())
                }
                (_, true, _) => "csum16 over packed fields".to_string(),
                _ => format!("{} over packed fields", calc.algo),
            };
            let cond = match &c.cond {
                None => "always",
                Some(e) if !matches!(e.fast, crate::expr::Fast::None) => "condition evaluated inline",
                Some(_) => "condition evaluated by the expression walker",
            };
            let _ = writeln!(
                r,
                "  {} ({}{}): {how}; {cond}{}",
                c.name,
                if c.verify { "verify" } else { "" },
                if c.update {
                    if c.verify {
                        "+update"
                    } else {
                        "update"
                    }
                } else {
                    ""
                },
                if special { "; specialized (direct sum into the field)" } else { "" }
            );
        }
        let _ = writeln!(r, "tables:");
        for (i, t) in plan.tables.iter().enumerate() {
            let st = &self.state.tables[i];
            let kinds: Vec<String> =
                st.key.iter().map(|k| format!("{:?}/{}b", k.kind, k.width).to_lowercase()).collect();
            // Compiled pipelines build inline keys (the forwarding function, or each control's function).
            let compiled = compiled.is_some();
            let key = if t.inline_default.is_some() {
                "keyless, fixed action: a direct call".to_string()
            } else if compiled && t.inline_key_parts().is_some() {
                "key built as one integer in generated code (direct arrays, DIR-24-8 and open addressing \
                 looked up inline, other indexes get the key from it)"
                    .to_string()
            } else if compiled && t.word_key_parts().is_some() {
                "key built as four words in generated code, searched by the engine".to_string()
            } else if t.key128.is_some() {
                "key read as one integer".to_string()
            } else if t.key.is_empty() {
                "keyless".to_string()
            } else {
                "key built as bytes".to_string()
            };
            if t.key.is_empty() {
                let _ = writeln!(r, "  {}: {key}", t.name);
                continue;
            }
            let _ = writeln!(
                r,
                "  {} [{}] {} entries: {key}; {}{}",
                t.name,
                kinds.join(", "),
                st.len(),
                st.index_kind(),
                if self.prefetch.iter().any(|p| p.0 == i) { "; prefetched after parsing" } else { "" }
            );
        }
        let deparser_how = |wire: &Option<Vec<_>>| match wire {
            Some(h) => format!("byte copies of {} header(s)", h.len()),
            None => "bit-level writes (some header is not whole bytes)".to_string(),
        };
        if psa {
            let _ = writeln!(r, "ingress deparser: {}", deparser_how(&self.deparse_wire[0]));
            let _ = writeln!(r, "egress deparser: {}", deparser_how(&self.deparse_wire[1]));
        } else {
            let _ = writeln!(r, "deparser: {}", deparser_how(&self.deparse_wire[0]));
        }
        r
    }
}
