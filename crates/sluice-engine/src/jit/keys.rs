//! The key function (`sluice_keys`, `fn(*mut KeysCtx)`) and its Rust side
//! (`Lookahead`): the parser over a batch of packets only to find each
//! prefetchable table's key, so that the switch can prefetch big tables.
//!
//! Contract of the generated function:
//! - reads: `KeysCtx::pkts` and `n`, each packet's bytes, and
//!   `KeysCtx::spec` (where an earlier packet had each key's header);
//! - writes: a scratch PHV (through the parser context at the head of
//!   `KeysCtx`: no setup, no end of parsing), `n * tables` keys at
//!   `KeysCtx::keys` (per packet, one per prefetchable table in table
//!   order) and `KeysCtx::spec`;
//! - leaves: by returning, after the last packet (no status).

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::JITModule;
use cranelift_module::FuncId;

use super::abi::{KeysCtx, KeysFn, PktRef, K_KEYS, K_N, K_PKTS, K_SPEC, SPEC_TABLES, SPEC_UNKNOWN};
use super::gen::{band_u, mem, Mem};
use super::module::{declare_context_function, define, generate};
use super::parser::{emit_parser, ParseInputs, SetupFlag};
use super::shape::ParserShape;
use super::JitStats;
use crate::phv::FieldSrc;
use crate::plan::Plan;

/// The key function (see [`compile_keys`]) with its context: the compiled
/// parser run over a batch only to learn its headers, into a scratch PHV
/// (no setup, no end of parsing), then each prefetchable table's key. Why:
/// to prefetch a batch's lookups in big tables the switch parses each
/// packet ahead, and that parse must cost little next to the memory stalls
/// it hides.
pub struct Lookahead {
    pub(super) keys: KeysFn,
    /// How each key is read straight from a packet, when every key is one
    /// field of a wire header (see [`Lookahead::key_reads`]).
    pub(super) reads: Option<KeyReads>,
    pub(super) ctx: KeysCtx,
}

/// Where a prefetch key lies in its header: the 8 big-endian bytes from
/// `field` bytes after the header's start, shifted right by `shift` and
/// masked (as the key function reads it).
#[derive(Debug, Clone, Copy, Default)]
pub struct KeyRead {
    field: usize,
    shift: u32,
    mask: u64,
}

/// One [`KeyRead`] per prefetchable table (the first `KeysCtx::tables`).
pub type KeyReads = [KeyRead; SPEC_TABLES];

impl Lookahead {
    /// Parses each packet of `batch` into `phv` (a PHV of this plan's
    /// layout) and writes its lookup key for each of the plan's
    /// prefetchable tables (`TablePlan::prefetchable`, in table order) to
    /// `keys`, packet by packet. Headers a packet lacks may keep an earlier
    /// packet's validity and bytes, which can only make a prefetch useless,
    /// never a result wrong.
    pub fn keys(&mut self, phv: &mut crate::phv::Phv, batch: &[&[u8]], keys: &mut Vec<u64>) {
        let mut refs = [PktRef::default(); sluice_dataplane::BATCH];
        assert!(batch.len() <= refs.len(), "at most a batch");
        for (r, d) in refs.iter_mut().zip(batch) {
            *r = PktRef::of(d);
        }
        keys.clear();
        keys.resize(batch.len() * self.ctx.tables as usize, 0);
        self.run(phv, &refs[..batch.len()], keys);
    }

    /// Runs the key function over `pkts` into `phv`, writing their keys to
    /// `keys` (one per prefetchable table per packet) and, in
    /// `KeysCtx::spec`, where each key's header started.
    fn run(&mut self, phv: &mut crate::phv::Phv, pkts: &[PktRef], keys: &mut [u64]) {
        assert_eq!(keys.len(), pkts.len() * self.ctx.tables as usize, "one key per table per packet");
        let ctx = &mut self.ctx;
        ctx.parse.wire = phv.wire_ptr();
        ctx.parse.slots = phv.slots.as_mut_ptr();
        ctx.pkts = pkts.as_ptr();
        ctx.n = pkts.len() as u64;
        ctx.keys = keys.as_mut_ptr();
        // Each run learns its headers' places from its first packet.
        ctx.spec = [SPEC_UNKNOWN; SPEC_TABLES];
        // SAFETY: per packet the parser reads at most its `len` bytes (of
        // a live slice) and writes inside `phv`, sized by this plan's
        // layout; the function writes `n * tables` keys, the length of `keys`.
        unsafe { (self.keys)(ctx) };
    }

    /// Where each prefetch key of `batch`'s packets lies, learnt by
    /// parsing only its first packet (with the key function, into `phv`):
    /// one [`KeyRead`] per prefetchable table, in table order. `None` when
    /// the keys are not plain header fields or the first packet lacks a
    /// key's header: then use [`Lookahead::keys`]. Why: reading the keys
    /// of the other packets at the same places in Rust costs about a third
    /// of the generated key function's loop, its packet list and the pass
    /// over its output.
    pub fn key_reads(&mut self, phv: &mut crate::phv::Phv, batch: &[&[u8]]) -> Option<KeyReads> {
        let (Some(reads), Some(first)) = (self.reads, batch.first()) else { return None };
        // At most SPEC_TABLES tables, since `reads` exists.
        let tables = self.ctx.tables as usize;
        let mut one = [0u64; SPEC_TABLES];
        self.run(phv, &[PktRef::of(first)], &mut one[..tables]);
        let spec = self.ctx.spec;
        if spec[..tables].contains(&SPEC_UNKNOWN) {
            return None;
        }
        let mut at = [KeyRead::default(); SPEC_TABLES];
        for ((a, r), &s) in at.iter_mut().zip(&reads).zip(&spec).take(tables) {
            *a = KeyRead { field: s as usize + r.field, ..*r };
        }
        Some(at)
    }
}

impl KeyRead {
    /// The key in packet `d`, `None` when `d` is too short for the read.
    #[inline]
    pub fn read(&self, d: &[u8]) -> Option<u64> {
        let b = d.get(self.field..self.field + 8)?;
        Some((u64::from_be_bytes(b.try_into().expect("8 bytes")) >> self.shift) & self.mask)
    }

    /// The same key read from 4 big-endian bytes, when it has at most 32
    /// bits: `(byte offset, shift, mask)` such that the key is
    /// `(u32::from_be_bytes(d[o..o + 4]) >> shift) & mask`. Why: a 4-byte
    /// read needs fewer bytes of the packet and a 32-bit mask, which the
    /// work ahead keeps in registers.
    pub fn window32(&self) -> Option<(usize, u32, u32)> {
        let width = 64 - self.mask.leading_zeros();
        // A mask of low bits, and the key whole inside the 8 bytes.
        if self.mask.checked_add(1).is_some_and(|m| !m.is_power_of_two()) || width > 32 || self.shift + width > 64 {
            return None;
        }
        // The window ending at or just above the key's top bit (bytes from
        // the 8's first; byte o's window covers bits 8(4-o)..8(8-o)).
        let o = ((64 - self.shift - width) / 8).min(4);
        let low = 8 * (4 - o);
        (low <= self.shift).then(|| (self.field + o as usize, self.shift - low, self.mask as u32))
    }
}

/// Generates the key function the switch prefetches big tables with:
/// over a batch of packets (`KeysCtx`), the parser without setup and
/// without the end of parsing, then each prefetchable table's key built as
/// `control::integer_key` does, stored per packet and table. When every
/// key is one field of a wire header, the packets after one parsed in full
/// are read where that one had the header, without a parse (router, 1M
/// routes: about 46 instructions per packet become about 15). `None` (with
/// no code) when the plan has no prefetchable table. Returns the function
/// and its keys per packet.
pub(super) fn compile_keys(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    parser: &ParserShape,
) -> Result<Option<(FuncId, u64, Option<KeyReads>)>, String> {
    let tables: Vec<&[(crate::plan::KeyPart, u32)]> =
        plan.tables.iter().filter(|t| t.prefetchable()).filter_map(|t| t.key128.as_deref()).collect();
    if tables.is_empty() {
        return Ok(None);
    }
    // Each key straight from the packet: `(header, the field's offset in
    // it, shift, mask)`, when every key is one field of a wire header.
    let spec: Option<Vec<(u32, i64, i64, u64)>> = tables
        .iter()
        .map(|parts| match parts {
            [(crate::plan::KeyPart::Field { src: FieldSrc::Wire { byte, shift, mask }, header: Some(h) }, _)] => {
                let (off, _) = plan.layout.headers[*h as usize].wire?;
                Some((*h, i64::from(byte.checked_sub(off)?), i64::from(*shift), *mask))
            }
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .filter(|s| s.len() <= SPEC_TABLES);
    let shape = ParserShape { init: parser.init, order: parser.order.clone(), ends: None, setup: None };
    let (id, mut ctx) = declare_context_function(module, "sluice_keys", 4, false)?;
    generate(plan, module, helpers, fctx, &mut ctx, false, &mut JitStats::default(), |g, pc| {
        if let Some(spec) = &spec {
            g.track = spec.iter().enumerate().map(|(t, sp)| (sp.0, K_SPEC + 8 * t as i32)).collect();
        }
        let head = g.b.create_block();
        g.b.append_block_param(head, types::I64);
        let body = g.b.create_block();
        let stop = g.b.create_block();
        let zero = g.b.ins().iconst(types::I64, 0);
        g.b.ins().jump(head, &[zero.into()]);

        g.b.switch_to_block(head);
        let i = g.b.block_params(head)[0];
        let mf = mem(g.b, Mem::Inputs);
        let n = g.b.ins().load(types::I64, mf, pc, K_N);
        let more = g.b.ins().icmp(IntCC::UnsignedLessThan, i, n);
        g.b.ins().brif(more, body, &[], stop, &[]);

        g.b.switch_to_block(body);
        let mf = mem(g.b, Mem::Inputs);
        let pkts = g.b.ins().load(types::I64, mf, pc, K_PKTS);
        let at = g.b.ins().ishl_imm_u(i, 4);
        let p = g.b.ins().iadd(pkts, at);
        let mf = mem(g.b, Mem::Inputs);
        let ptr = g.b.ins().load(types::I64, mf, p, 0);
        let mf = mem(g.b, Mem::Inputs);
        let len = g.b.ins().load(types::I64, mf, p, 8);
        let i1 = g.b.ins().iadd_imm_u(i, 1);
        if let Some(spec) = &spec {
            // Once a packet parsed in full showed where the keys' headers
            // start, the next ones are read at the same place, without a
            // parse: a key read wrong (another layout) only makes its
            // prefetch useless. The parse stays for a packet too short.
            let direct = g.b.create_block();
            let parse = g.b.create_block();
            let mut ok = None;
            let mut at = Vec::new();
            for (t, &(_, field, _, _)) in spec.iter().enumerate() {
                let mf = mem(g.b, Mem::Ctx);
                let start = g.b.ins().load(types::I64, mf, pc, K_SPEC + 8 * t as i32);
                let off = g.b.ins().iadd_imm_u(start, field);
                let end = g.b.ins().iadd_imm_u(off, 8);
                let fits = g.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, len);
                ok = Some(match ok {
                    Some(o) => g.b.ins().band(o, fits),
                    None => fits,
                });
                at.push(off);
            }
            g.b.ins().brif(ok.expect("a table"), direct, &[], parse, &[]);
            g.b.switch_to_block(direct);
            let mf = mem(g.b, Mem::Inputs);
            let out = g.b.ins().load(types::I64, mf, pc, K_KEYS);
            let first = g.b.ins().imul_imm_u(i, 8 * tables.len() as i64);
            let out = g.b.ins().iadd(out, first);
            for (t, (&(_, _, shift, mask), off)) in spec.iter().zip(at).enumerate() {
                let a = g.b.ins().iadd(ptr, off);
                let v = g.load_be(Mem::Packet, types::I64, a, 0);
                let v = g.b.ins().ushr_imm_u(v, shift);
                let key = band_u(g.b, v, mask as i64);
                let mf = mem(g.b, Mem::Out);
                g.b.ins().store(mf, key, out, 8 * t as i32);
            }
            g.b.ins().jump(head, &[i1.into()]);
            g.b.switch_to_block(parse);
        }
        let parsed = g.b.create_block();
        emit_parser(
            g,
            pc,
            &shape,
            None,
            Some(parsed),
            Some(ParseInputs { setup: SetupFlag::Value(zero), pkt: ptr, len }),
        );

        g.b.switch_to_block(parsed);
        let mf = mem(g.b, Mem::Inputs);
        let out = g.b.ins().load(types::I64, mf, pc, K_KEYS);
        let first = g.b.ins().imul_imm_u(i, 8 * tables.len() as i64);
        let out = g.b.ins().iadd(out, first);
        for (t, parts) in tables.iter().enumerate() {
            let key = g.integer_key(parts);
            let mf = mem(g.b, Mem::Out);
            g.b.ins().store(mf, key, out, 8 * t as i32);
        }
        g.b.ins().jump(head, &[i1.into()]);

        g.b.switch_to_block(stop);
        g.b.ins().return_(&[]);
    });
    listing
        .push_str(&format!("; key function (lookahead parser and prefetch keys per packet)\n{}\n", ctx.func.display()));
    define(module, id, &mut ctx, "sluice_keys")?;
    let reads = spec.map(|sp| {
        let mut r = [KeyRead::default(); SPEC_TABLES];
        for (r, &(_, field, shift, mask)) in r.iter_mut().zip(&sp) {
            *r = KeyRead { field: field as usize, shift: shift as u32, mask };
        }
        r
    });
    Ok(Some((id, tables.len() as u64, reads)))
}

#[cfg(test)]
mod tests {
    use crate::jit::CompiledPipelines;

    /// The generated key function writes, per packet, the key the engine
    /// builds from the packet's parsed PHV (`control::integer_key`) for each
    /// prefetchable table, after the first packet read straight from where
    /// that one had the header; a short packet still gets a key (a stale one
    /// only makes a prefetch useless).
    #[test]
    fn key_function_writes_each_packets_lpm_key() {
        let model = sluice_json::load_str(include_str!("../../../../examples/router.json")).expect("router parses");
        let plan = crate::plan::compile(&model).expect("router compiles");
        let tables: Vec<usize> = (0..plan.tables.len()).filter(|t| plan.tables[*t].prefetchable()).collect();
        assert_eq!(tables.len(), 1, "the router's IPv4 route table");
        let compiled = CompiledPipelines::compile(&plan).expect("compiles");
        let mut look = compiled.lookahead().expect("compiled parser");
        let mut pkts: Vec<Vec<u8>> = Vec::new();
        for i in 0..20u32 {
            let mut p = vec![0u8; 60];
            p[12..14].copy_from_slice(&[0x08, 0x00]);
            p[14] = 0x45;
            p[22] = 64;
            p[30..34].copy_from_slice(&(0x0a00_0001u32.wrapping_mul(i + 1) ^ (i << 20)).to_be_bytes());
            pkts.push(p);
        }
        pkts.push(pkts[3][..20].to_vec());
        let refs: Vec<&[u8]> = pkts.iter().map(|p| p.as_slice()).collect();
        let mut scratch = plan.layout.new_phv();
        let mut words = Vec::new();
        look.keys(&mut scratch, &refs, &mut words);
        assert_eq!(words.len(), refs.len());
        let parts = plan.tables[tables[0]].key128.as_deref().expect("integer key");
        for (p, w) in refs.iter().zip(&words).take(20) {
            let mut phv = plan.layout.new_phv();
            compiled.run_parser(&mut phv, p).expect("compiled parser");
            let want = crate::control::integer_key(parts, &phv);
            assert_eq!(u128::from(*w), want);
            assert_eq!(*w as u32, u32::from_be_bytes(p[30..34].try_into().unwrap()));
        }
        // Packets after the first are read where the first had its IPv4
        // header; a batch that starts without one (ARP) parses until a
        // packet shows it, and a packet too short for the direct read
        // (34 bytes) is parsed.
        let mut arp = pkts[0].clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let batch: Vec<&[u8]> = vec![&arp, &pkts[5][..34], &pkts[6], &pkts[7][..34], &pkts[8]];
        look.keys(&mut scratch, &batch, &mut words);
        for (p, w) in batch.iter().zip(&words).skip(1) {
            assert_eq!(*w as u32, u32::from_be_bytes(p[30..34].try_into().unwrap()));
        }
        // Reads learnt from a first IPv4 packet give the key function's
        // keys; a packet too short for the 8-byte read gives none, and a
        // batch that starts without the header gives no reads at all.
        let reads = look.key_reads(&mut scratch, &refs).expect("the first packet is IPv4");
        look.keys(&mut scratch, &refs, &mut words);
        for (p, w) in refs.iter().zip(&words).take(20) {
            assert_eq!(reads[0].read(p), Some(*w));
        }
        assert_eq!(reads[0].read(&pkts[5][..34]), None);
        let mut vlan = pkts[4].clone();
        vlan.splice(12..12, [0x81, 0x00, 0, 1]);
        assert_eq!(reads[0].read(&vlan), Some(u64::from(u32::from_be_bytes(vlan[30..34].try_into().unwrap()))));
        assert!(look.key_reads(&mut scratch, &batch).is_none(), "ARP first: no reads");
    }

    /// A key of at most 32 bits read from its 4-byte window equals the
    /// 8-byte read, wherever it lies in the 8 bytes; wider keys, and
    /// masks that are not low bits, have no window.
    #[test]
    fn window32_reads_the_same_key() {
        use super::KeyRead;
        let mut data = [0u8; 24];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for b in data.iter_mut() {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            *b = (x >> 56) as u8;
        }
        let mut windows = 0;
        for field in 0..8 {
            for width in 1..=40u32 {
                for shift in 0..=(64 - width) {
                    let r = KeyRead { field, shift, mask: (1u64 << width) - 1 };
                    match r.window32() {
                        Some((o, s, m)) => {
                            windows += 1;
                            assert!(width <= 32 && o + 4 <= field + 8, "{r:?}");
                            let w = u32::from_be_bytes(data[o..o + 4].try_into().unwrap());
                            assert_eq!(Some(u64::from((w >> s) & m)), r.read(&data), "{r:?}");
                        }
                        // No window: wider than 32 bits, or over 5 bytes.
                        None => assert!(width > 32 || (shift + width - 1) / 8 - shift / 8 > 3, "{r:?} has a window"),
                    }
                }
            }
        }
        assert!(windows > 1000);
        assert_eq!(KeyRead { field: 30, shift: 32, mask: u64::from(u32::MAX) }.window32(), Some((30, 0, u32::MAX)));
        assert_eq!(KeyRead { field: 0, shift: 0, mask: 0b1011 }.window32(), None, "not low bits");
    }
}
