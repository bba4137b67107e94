//! Packet filters written in pflang, the filter language of libpcap and
//! tcpdump, as the lwAFTR's `ingress-filter` / `egress-filter` settings
//! (IPv4 and IPv6 sides) carry them. A filter sees the untagged Ethernet
//! frame; a frame it matches passes, any other frame is dropped.
//!
//! **Compiling: libpcap's own compiler.** [`Filter::compile`] hands the
//! expression to `pcap_compile` (through the `pcap` crate, on a dead handle of
//! link type Ethernet, snaplen 65535, optimizer on) once, at configuration
//! load. That gives exactly tcpdump's language and semantics, every
//! expression an operator already uses with tcpdump or with Snabb (whose
//! pflua compiler mirrors libpcap's, and is not usable outside LuaJIT), and
//! libpcap's own error messages. No pure-Rust compiler covers the language:
//! the existing ones handle subsets.
//!
//! **Running: our own classic-BPF interpreter.** The compiled program is
//! copied into a `Vec` of decoded instructions, validated (known opcodes, jumps
//! forward and in range, ends in `ret`, scratch index below 16, no shift by 32
//! or more nor division by a constant zero) and interpreted here rather than
//! by `pcap_offline_filter`: no FFI call per packet, a [`Filter`] is `Clone +
//! Send + Sync` so each worker holds its own copy (libpcap's program is
//! neither), and every load is bounds-checked: a load past the end of the
//! frame rejects it, as libpcap does. [`Filter::matches_untagged_view`] reads
//! an 802.1Q-tagged frame as if its tag were removed, without copying it.
//!
//! A frame matches when the program returns a nonzero value (libpcap's
//! rule). A program that is a single `ret`, or whose every `ret` returns 0, is
//! a constant: [`Filter::is_accept_all`] (e.g. the empty expression) and
//! [`Filter::is_drop_all`] let the data plane skip it altogether. An
//! expression libpcap's optimizer proves matches nothing (`ip and not ip`)
//! is refused by libpcap and tcpdump ("expression rejects all packets") but
//! accepted by pflua: here it is a drop-all filter. Not supported: the
//! backward jumps libpcap emits for `protochain` (compiling one is an error).

use std::fmt;
use std::sync::Mutex;

/// Snapshot length the programs are compiled for (libpcap's default for a
/// dead handle, and what `ret` of an accepting tcpdump program returns).
pub const SNAPLEN: u32 = 65535;

/// Byte offset of the Ethertype (or 802.1Q TPID) in an Ethernet frame: the
/// untagged view maps offsets from here on past the tag.
const ETHERTYPE_OFFSET: usize = 12;

/// Number of scratch memory words of classic BPF.
const MEMWORDS: u32 = 16;

/// Longest program accepted (libpcap's programs for real expressions are far
/// shorter; this bounds what `from_instructions` takes).
const MAX_INSNS: usize = 1 << 20;

/// One classic-BPF instruction as libpcap encodes it (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BpfInsn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl BpfInsn {
    pub const fn new(code: u16, jt: u8, jf: u8, k: u32) -> BpfInsn {
        BpfInsn { code, jt, jf, k }
    }
}

/// Opcodes (class | size | mode, class | op | src, ...), as in `<pcap/bpf.h>`.
mod op {
    pub const LD_W_ABS: u16 = 0x20;
    pub const LD_H_ABS: u16 = 0x28;
    pub const LD_B_ABS: u16 = 0x30;
    pub const LD_W_IND: u16 = 0x40;
    pub const LD_H_IND: u16 = 0x48;
    pub const LD_B_IND: u16 = 0x50;
    pub const LD_W_LEN: u16 = 0x80;
    pub const LD_IMM: u16 = 0x00;
    pub const LD_MEM: u16 = 0x60;
    pub const LDX_W_LEN: u16 = 0x81;
    pub const LDX_IMM: u16 = 0x01;
    pub const LDX_MEM: u16 = 0x61;
    pub const LDX_MSH_B: u16 = 0xb1;
    pub const ST: u16 = 0x02;
    pub const STX: u16 = 0x03;
    pub const ALU: u16 = 0x04;
    pub const ALU_NEG: u16 = 0x84;
    pub const JMP: u16 = 0x05;
    pub const JA: u16 = 0x05;
    pub const RET_K: u16 = 0x06;
    pub const RET_A: u16 = 0x16;
    pub const TAX: u16 = 0x07;
    pub const TXA: u16 = 0x87;
    /// `BPF_X` source bit of ALU and JMP opcodes.
    pub const SRC_X: u16 = 0x08;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AluOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Lsh,
    Rsh,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cond {
    Eq,
    Gt,
    Ge,
    Set,
}

/// A validated, decoded instruction. Jump targets are absolute indices,
/// always greater than the jump's own index and within the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Insn {
    LdW(u32),
    LdH(u32),
    LdB(u32),
    LdIndW(u32),
    LdIndH(u32),
    LdIndB(u32),
    LdLen,
    LdImm(u32),
    LdMem(u8),
    LdxLen,
    LdxImm(u32),
    LdxMem(u8),
    LdxMsh(u32),
    St(u8),
    Stx(u8),
    AluK(AluOp, u32),
    AluX(AluOp),
    Neg,
    Ja(u32),
    JmpK(Cond, u32, u32, u32),
    JmpX(Cond, u32, u32),
    RetK(u32),
    RetA,
    Tax,
    Txa,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Program {
    /// A single `ret`: the verdict does not depend on the frame.
    Const(bool),
    Code(Vec<Insn>),
}

/// A compiled pflang filter, ready to run on frames.
#[derive(Clone, PartialEq, Eq)]
pub struct Filter {
    expr: String,
    program: Program,
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = match &self.program {
            Program::Const(true) => "accept all".to_string(),
            Program::Const(false) => "drop all".to_string(),
            Program::Code(code) => format!("{} instructions", code.len()),
        };
        write!(f, "Filter({:?}, {shape})", self.expr)
    }
}

/// libpcap's optimizer's error for an expression no packet can match.
const REJECTS_ALL: &str = "expression rejects all packets";

/// libpcap's compiler was not reentrant before 1.8 and its optimizer kept
/// global state for longer: compile one expression at a time.
static COMPILER: Mutex<()> = Mutex::new(());

impl Filter {
    /// Compiles a pflang expression with libpcap (link type Ethernet,
    /// snaplen 65535, optimizer on). The error carries libpcap's message.
    pub fn compile(expr: &str) -> Result<Filter, String> {
        let insns = {
            let _guard = COMPILER.lock().unwrap_or_else(|e| e.into_inner());
            let dead = pcap::Capture::dead(pcap::Linktype::ETHERNET)
                .map_err(|e| format!("filter {expr:?}: cannot open libpcap: {e}"))?;
            let program = match dead.compile(expr, true) {
                Ok(program) => program,
                // libpcap's optimizer proved that nothing matches and
                // refuses such programs (tcpdump too); pflua accepts them.
                Err(pcap::Error::PcapError(text)) if text.contains(REJECTS_ALL) => {
                    return Ok(Filter { expr: expr.to_string(), program: Program::Const(false) });
                }
                Err(pcap::Error::PcapError(text)) => return Err(format!("filter {expr:?}: {text}")),
                Err(other) => return Err(format!("filter {expr:?}: {other}")),
            };
            program
                .get_instructions()
                .iter()
                .map(|i| parse_insn(&i.to_string()))
                .collect::<Option<Vec<BpfInsn>>>()
                .ok_or_else(|| format!("filter {expr:?}: unreadable instruction from libpcap"))?
        };
        let mut filter = Filter::from_instructions(&insns).map_err(|e| format!("filter {expr:?}: {e}"))?;
        filter.expr = expr.to_string();
        Ok(filter)
    }

    /// Builds a filter from classic-BPF instructions, validating them.
    pub fn from_instructions(insns: &[BpfInsn]) -> Result<Filter, String> {
        if insns.is_empty() {
            return Err("empty BPF program".into());
        }
        if insns.len() > MAX_INSNS {
            return Err(format!("BPF program of {} instructions is too long", insns.len()));
        }
        let n = insns.len();
        let mut code = Vec::with_capacity(n);
        for (pc, i) in insns.iter().enumerate() {
            code.push(decode(pc, n, i).map_err(|e| format!("BPF instruction {pc} ({i:?}): {e}"))?);
        }
        if !matches!(code[n - 1], Insn::RetK(_) | Insn::RetA) {
            return Err("BPF program does not end in ret".into());
        }
        let program = match code[0] {
            Insn::RetK(k) => Program::Const(k != 0),
            // Every way out returns 0 (a failed load or division does too).
            _ if code.iter().all(|i| match i {
                Insn::RetK(k) => *k == 0,
                Insn::RetA => false,
                _ => true,
            }) =>
            {
                Program::Const(false)
            }
            _ => Program::Code(code),
        };
        Ok(Filter { expr: String::new(), program })
    }

    /// The expression this filter was compiled from (empty when built from
    /// instructions).
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// True if the filter passes every frame (e.g. the empty expression).
    pub fn is_accept_all(&self) -> bool {
        self.program == Program::Const(true)
    }

    /// True if the filter passes no frame (e.g. `len < 0`).
    pub fn is_drop_all(&self) -> bool {
        self.program == Program::Const(false)
    }

    /// Whether the untagged Ethernet frame `frame` passes: the program
    /// returns a nonzero value (with `len` = the frame's length).
    #[inline]
    pub fn matches(&self, frame: &[u8]) -> bool {
        match &self.program {
            Program::Const(pass) => *pass,
            Program::Code(code) => run(code, &Flat(frame)) != 0,
        }
    }

    /// Whether `frame`, carrying `tag_len` bytes of VLAN tags right after
    /// the MAC addresses (4 for 802.1Q, 8 for QinQ), passes as if the tags
    /// were removed: offsets from 12 on read `tag_len` bytes further and
    /// `len` is the untagged length. Nothing is copied. A frame too short to
    /// hold the tags is seen as its first 12 bytes at most.
    #[inline]
    pub fn matches_untagged_view(&self, frame: &[u8], tag_len: usize) -> bool {
        match &self.program {
            Program::Const(pass) => *pass,
            Program::Code(code) if tag_len == 0 => run(code, &Flat(frame)) != 0,
            Program::Code(code) => run(code, &Untagged::new(frame, tag_len)) != 0,
        }
    }
}

/// Reads the `Display` form of `pcap::BpfInstruction`: "code jt jf k".
fn parse_insn(text: &str) -> Option<BpfInsn> {
    let mut it = text.split_ascii_whitespace();
    let insn = BpfInsn {
        code: it.next()?.parse().ok()?,
        jt: it.next()?.parse().ok()?,
        jf: it.next()?.parse().ok()?,
        k: it.next()?.parse().ok()?,
    };
    it.next().is_none().then_some(insn)
}

/// Decodes and validates instruction `pc` of a program of `n` instructions.
fn decode(pc: usize, n: usize, i: &BpfInsn) -> Result<Insn, String> {
    let k = i.k;
    let mem = || {
        if k < MEMWORDS {
            Ok(k as u8)
        } else {
            Err(format!("scratch memory index {k} out of range (0..{MEMWORDS})"))
        }
    };
    // Target of a jump by `off` past the next instruction: forward, in range.
    let target = |off: u64| {
        let t = pc as u64 + 1 + off;
        if t < n as u64 {
            Ok(t as u32)
        } else {
            Err(format!("jump to {t} is past the end of the program ({n} instructions)"))
        }
    };
    Ok(match i.code {
        op::LD_W_ABS => Insn::LdW(k),
        op::LD_H_ABS => Insn::LdH(k),
        op::LD_B_ABS => Insn::LdB(k),
        op::LD_W_IND => Insn::LdIndW(k),
        op::LD_H_IND => Insn::LdIndH(k),
        op::LD_B_IND => Insn::LdIndB(k),
        op::LD_W_LEN => Insn::LdLen,
        op::LD_IMM => Insn::LdImm(k),
        op::LD_MEM => Insn::LdMem(mem()?),
        op::LDX_W_LEN => Insn::LdxLen,
        op::LDX_IMM => Insn::LdxImm(k),
        op::LDX_MEM => Insn::LdxMem(mem()?),
        op::LDX_MSH_B => Insn::LdxMsh(k),
        op::ST => Insn::St(mem()?),
        op::STX => Insn::Stx(mem()?),
        op::ALU_NEG => Insn::Neg,
        op::RET_K => Insn::RetK(k),
        op::RET_A => Insn::RetA,
        op::TAX => Insn::Tax,
        op::TXA => Insn::Txa,
        op::JA => {
            if k as i32 >= 0 {
                Insn::Ja(target(u64::from(k))?)
            } else {
                return Err("backward jump (libpcap emits them for `protochain`), not supported".into());
            }
        }
        code if code & 0x07 == op::ALU && code & !(0xf0 | op::SRC_X) == op::ALU => {
            let alu = match code & 0xf0 {
                0x00 => AluOp::Add,
                0x10 => AluOp::Sub,
                0x20 => AluOp::Mul,
                0x30 => AluOp::Div,
                0x40 => AluOp::Or,
                0x50 => AluOp::And,
                0x60 => AluOp::Lsh,
                0x70 => AluOp::Rsh,
                0x90 => AluOp::Mod,
                0xa0 => AluOp::Xor,
                _ => return Err(format!("unknown opcode {code:#06x}")),
            };
            if code & op::SRC_X != 0 {
                Insn::AluX(alu)
            } else {
                match alu {
                    AluOp::Div | AluOp::Mod if k == 0 => return Err("division by constant zero".into()),
                    AluOp::Lsh | AluOp::Rsh if k >= 32 => {
                        return Err(format!("shift by constant {k} (more than 31 bits)"))
                    }
                    _ => Insn::AluK(alu, k),
                }
            }
        }
        code if code & 0x07 == op::JMP && code & !(0xf0 | op::SRC_X) == op::JMP => {
            let cond = match code & 0xf0 {
                0x10 => Cond::Eq,
                0x20 => Cond::Gt,
                0x30 => Cond::Ge,
                0x40 => Cond::Set,
                _ => return Err(format!("unknown opcode {code:#06x}")),
            };
            let (jt, jf) = (target(u64::from(i.jt))?, target(u64::from(i.jf))?);
            if code & op::SRC_X != 0 {
                Insn::JmpX(cond, jt, jf)
            } else {
                Insn::JmpK(cond, k, jt, jf)
            }
        }
        code => return Err(format!("unknown opcode {code:#06x}")),
    })
}

/// Bounds-checked big-endian reads of the frame a program sees.
trait View {
    /// `len` as the program sees it (wire length = captured length here).
    fn len(&self) -> u32;
    fn word(&self, k: u64) -> Option<u32>;
    fn half(&self, k: u64) -> Option<u16>;
    fn byte(&self, k: u64) -> Option<u8>;
}

/// The frame as it is.
struct Flat<'a>(&'a [u8]);

#[inline]
fn slice_at<const N: usize>(frame: &[u8], k: u64) -> Option<[u8; N]> {
    let start = usize::try_from(k).ok()?;
    frame.get(start..start.checked_add(N)?)?.try_into().ok()
}

impl View for Flat<'_> {
    #[inline]
    fn len(&self) -> u32 {
        u32::try_from(self.0.len()).unwrap_or(u32::MAX)
    }
    #[inline]
    fn word(&self, k: u64) -> Option<u32> {
        slice_at::<4>(self.0, k).map(u32::from_be_bytes)
    }
    #[inline]
    fn half(&self, k: u64) -> Option<u16> {
        slice_at::<2>(self.0, k).map(u16::from_be_bytes)
    }
    #[inline]
    fn byte(&self, k: u64) -> Option<u8> {
        self.0.get(usize::try_from(k).ok()?).copied()
    }
}

/// A tagged frame seen without its `tag` bytes at offset 12:
/// `frame[..12] ++ frame[12 + tag..]`.
struct Untagged<'a> {
    frame: &'a [u8],
    tag: u64,
    len: u64,
}

impl<'a> Untagged<'a> {
    fn new(frame: &'a [u8], tag: usize) -> Untagged<'a> {
        let (n, tag) = (frame.len() as u64, tag as u64);
        let len = if n >= ETHERTYPE_OFFSET as u64 + tag { n - tag } else { n.min(ETHERTYPE_OFFSET as u64) };
        Untagged { frame, tag, len }
    }

    /// Reads `N` view bytes from `k`.
    #[inline]
    fn bytes<const N: usize>(&self, k: u64) -> Option<[u8; N]> {
        if k.checked_add(N as u64)? > self.len {
            return None;
        }
        let head = ETHERTYPE_OFFSET as u64;
        if k >= head {
            slice_at::<N>(self.frame, k + self.tag)
        } else if k + N as u64 <= head {
            slice_at::<N>(self.frame, k)
        } else {
            // Straddles offset 12: byte by byte.
            let mut out = [0u8; N];
            for (j, b) in out.iter_mut().enumerate() {
                let v = k + j as u64;
                let at = if v >= head { v + self.tag } else { v };
                *b = *self.frame.get(usize::try_from(at).ok()?)?;
            }
            Some(out)
        }
    }
}

impl View for Untagged<'_> {
    #[inline]
    fn len(&self) -> u32 {
        u32::try_from(self.len).unwrap_or(u32::MAX)
    }
    #[inline]
    fn word(&self, k: u64) -> Option<u32> {
        self.bytes::<4>(k).map(u32::from_be_bytes)
    }
    #[inline]
    fn half(&self, k: u64) -> Option<u16> {
        self.bytes::<2>(k).map(u16::from_be_bytes)
    }
    #[inline]
    fn byte(&self, k: u64) -> Option<u8> {
        self.bytes::<1>(k).map(|[b]| b)
    }
}

#[inline]
fn alu(op: AluOp, a: u32, v: u32) -> Option<u32> {
    Some(match op {
        AluOp::Add => a.wrapping_add(v),
        AluOp::Sub => a.wrapping_sub(v),
        AluOp::Mul => a.wrapping_mul(v),
        AluOp::Div => a.checked_div(v)?,
        AluOp::Mod => a.checked_rem(v)?,
        AluOp::And => a & v,
        AluOp::Or => a | v,
        AluOp::Xor => a ^ v,
        AluOp::Lsh => a.checked_shl(v).unwrap_or(0),
        AluOp::Rsh => a.checked_shr(v).unwrap_or(0),
    })
}

#[inline]
fn test(cond: Cond, a: u32, v: u32) -> bool {
    match cond {
        Cond::Eq => a == v,
        Cond::Gt => a > v,
        Cond::Ge => a >= v,
        Cond::Set => a & v != 0,
    }
}

/// Runs a validated program; returns what its `ret` returns, 0 when a load
/// is out of bounds or a division by zero happens (libpcap's rules).
fn run<V: View>(code: &[Insn], p: &V) -> u32 {
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; MEMWORDS as usize];
    let mut pc = 0usize;
    // Validation makes every jump go forward within the program and the
    // last instruction a `ret`, so `pc` stays in range; `get` keeps that a
    // reject rather than a panic if it ever did not.
    while let Some(&insn) = code.get(pc) {
        pc += 1;
        match insn {
            Insn::LdW(k) => match p.word(u64::from(k)) {
                Some(v) => a = v,
                None => return 0,
            },
            Insn::LdH(k) => match p.half(u64::from(k)) {
                Some(v) => a = u32::from(v),
                None => return 0,
            },
            Insn::LdB(k) => match p.byte(u64::from(k)) {
                Some(v) => a = u32::from(v),
                None => return 0,
            },
            Insn::LdIndW(k) => match p.word(u64::from(x) + u64::from(k)) {
                Some(v) => a = v,
                None => return 0,
            },
            Insn::LdIndH(k) => match p.half(u64::from(x) + u64::from(k)) {
                Some(v) => a = u32::from(v),
                None => return 0,
            },
            Insn::LdIndB(k) => match p.byte(u64::from(x) + u64::from(k)) {
                Some(v) => a = u32::from(v),
                None => return 0,
            },
            Insn::LdxMsh(k) => match p.byte(u64::from(k)) {
                Some(v) => x = u32::from(v & 0x0f) << 2,
                None => return 0,
            },
            Insn::LdLen => a = p.len(),
            Insn::LdxLen => x = p.len(),
            Insn::LdImm(k) => a = k,
            Insn::LdxImm(k) => x = k,
            Insn::LdMem(m) => a = mem[usize::from(m & 15)],
            Insn::LdxMem(m) => x = mem[usize::from(m & 15)],
            Insn::St(m) => mem[usize::from(m & 15)] = a,
            Insn::Stx(m) => mem[usize::from(m & 15)] = x,
            Insn::AluK(op, k) => match alu(op, a, k) {
                Some(v) => a = v,
                None => return 0,
            },
            Insn::AluX(op) => match alu(op, a, x) {
                Some(v) => a = v,
                None => return 0,
            },
            Insn::Neg => a = a.wrapping_neg(),
            Insn::Ja(t) => pc = t as usize,
            Insn::JmpK(cond, k, jt, jf) => pc = if test(cond, a, k) { jt } else { jf } as usize,
            Insn::JmpX(cond, jt, jf) => pc = if test(cond, a, x) { jt } else { jf } as usize,
            Insn::RetK(k) => return k,
            Insn::RetA => return a,
            Insn::Tax => x = a,
            Insn::Txa => a = x,
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn i(code: u16, jt: u8, jf: u8, k: u32) -> BpfInsn {
        BpfInsn::new(code, jt, jf, k)
    }

    #[test]
    fn trivial_programs_are_constants() {
        let all = Filter::compile("").unwrap();
        assert!(all.is_accept_all() && all.matches(&[]));
        // libpcap's optimizer refuses this one ("expression rejects all packets").
        let none = Filter::compile("ip and not ip").unwrap();
        assert!(none.is_drop_all() && !none.matches(&[0; 64]));
        assert_eq!(none.expr(), "ip and not ip");
        // Not folded by libpcap: interpreted, matches nothing.
        let none = Filter::compile("len < 0").unwrap();
        assert!(!none.matches(&[0; 64]) && !none.matches(&[]));
        let zeros = [i(op::LD_W_LEN, 0, 0, 0), i(0x15, 0, 1, 3), i(op::RET_K, 0, 0, 0), i(op::RET_K, 0, 0, 0)];
        assert!(Filter::from_instructions(&zeros).unwrap().is_drop_all());
        let ip = Filter::compile("ip").unwrap();
        assert!(!ip.is_accept_all() && !ip.is_drop_all());
        assert_eq!(ip.expr(), "ip");
    }

    #[test]
    fn bad_expression_gives_libpcaps_message() {
        let e = Filter::compile("ip and and").unwrap_err();
        assert!(e.contains("syntax error"), "{e}");
        let e = Filter::compile("ether host zz:zz").unwrap_err();
        assert!(e.contains("filter \"ether host zz:zz\""), "{e}");
        assert!(Filter::compile("port 99999").is_err());
        assert!(Filter::compile("ip\0").is_err());
        // libpcap loops over IPv6 extension headers with backward jumps.
        let e = Filter::compile("ip6 protochain 6").unwrap_err();
        assert!(e.contains("backward jump"), "{e}");
    }

    #[test]
    fn validation() {
        let ret = i(op::RET_K, 0, 0, 1);
        assert!(Filter::from_instructions(&[]).is_err());
        assert!(Filter::from_instructions(&[i(op::LD_IMM, 0, 0, 1)]).is_err(), "no ret");
        assert!(Filter::from_instructions(&[i(0x15, 0, 1, 0), ret]).is_err(), "jf out of range");
        assert!(Filter::from_instructions(&[i(0x15, 0, 0, 0), ret]).is_ok());
        assert!(Filter::from_instructions(&[i(op::JA, 0, 0, 1), ret]).is_err());
        assert!(Filter::from_instructions(&[i(op::JA, 0, 0, u32::MAX), ret]).is_err(), "backward");
        assert!(Filter::from_instructions(&[i(op::ST, 0, 0, 16), ret]).is_err());
        assert!(Filter::from_instructions(&[i(op::LDX_MEM, 0, 0, 15), ret]).is_ok());
        assert!(Filter::from_instructions(&[i(0x34, 0, 0, 0), ret]).is_err(), "div by 0");
        assert!(Filter::from_instructions(&[i(0x94, 0, 0, 0), ret]).is_err(), "mod by 0");
        assert!(Filter::from_instructions(&[i(0x64, 0, 0, 32), ret]).is_err(), "lsh by 32");
        assert!(Filter::from_instructions(&[i(0x3c, 0, 0, 0), ret]).is_ok(), "div by X");
        assert!(Filter::from_instructions(&[i(0xc4, 0, 0, 0), ret]).is_err(), "unknown alu");
        assert!(Filter::from_instructions(&[i(0x0d, 0, 0, 0), ret]).is_err(), "ja with X");
        assert!(Filter::from_instructions(&[i(0x08, 0, 0, 0), ret]).is_err(), "ld h imm");
        assert!(Filter::from_instructions(&[i(0x0e, 0, 0, 0)]).is_err(), "ret X");
    }

    #[test]
    fn interpreter_rules() {
        let run = |p: &[BpfInsn], f: &[u8]| {
            let filter = Filter::from_instructions(p).unwrap();
            match &filter.program {
                Program::Code(c) => run(c, &Flat(f)),
                Program::Const(b) => u32::from(*b),
            }
        };
        let ret_a = i(op::RET_A, 0, 0, 0);
        // Division and modulo by X = 0 reject.
        assert_eq!(run(&[i(op::LD_IMM, 0, 0, 7), i(0x3c, 0, 0, 0), ret_a], &[]), 0);
        assert_eq!(run(&[i(op::LD_IMM, 0, 0, 7), i(0x9c, 0, 0, 0), ret_a], &[]), 0);
        // 7 / 2 = 3, 7 % 4 = 3, shifts by X >= 32 give 0.
        let div = [i(op::LD_IMM, 0, 0, 7), i(op::LDX_IMM, 0, 0, 2), i(0x3c, 0, 0, 0), ret_a];
        assert_eq!(run(&div, &[]), 3);
        assert_eq!(run(&[i(op::LD_IMM, 0, 0, 7), i(0x94, 0, 0, 4), ret_a], &[]), 3);
        let lsh = [i(op::LD_IMM, 0, 0, 1), i(op::LDX_IMM, 0, 0, 40), i(0x6c, 0, 0, 0), ret_a];
        assert_eq!(run(&lsh, &[]), 0);
        // Loads: big-endian, msh, ind, past the end rejects.
        let f = [0x12, 0x34, 0x56, 0x78, 0x4a];
        assert_eq!(run(&[i(op::LD_W_ABS, 0, 0, 0), ret_a], &f), 0x1234_5678);
        assert_eq!(run(&[i(op::LD_W_ABS, 0, 0, 1), ret_a], &f), 0x3456_784a);
        assert_eq!(run(&[i(op::LD_W_ABS, 0, 0, 2), i(op::RET_K, 0, 0, 1)], &f), 0);
        assert_eq!(run(&[i(op::LD_W_ABS, 0, 0, u32::MAX), i(op::RET_K, 0, 0, 1)], &f), 0);
        let msh = [i(op::LDX_MSH_B, 0, 0, 4), i(op::TXA, 0, 0, 0), ret_a];
        assert_eq!(run(&msh, &f), 40);
        let ind = [i(op::LDX_IMM, 0, 0, 3), i(op::LD_H_IND, 0, 0, 0), ret_a];
        assert_eq!(run(&ind, &f), 0x784a);
        let ind_far = [i(op::LDX_IMM, 0, 0, u32::MAX), i(op::LD_B_IND, 0, 0, 1), ret_a];
        assert_eq!(run(&ind_far, &f), 0);
        // Scratch memory, len, neg, tax.
        let mem = [
            i(op::LD_W_LEN, 0, 0, 0),
            i(op::ST, 0, 0, 15),
            i(op::LD_IMM, 0, 0, 0),
            i(op::LDX_MEM, 0, 0, 15),
            i(op::TXA, 0, 0, 0),
            i(op::ALU_NEG, 0, 0, 0),
            ret_a,
        ];
        assert_eq!(run(&mem, &f), 5u32.wrapping_neg());
        // jset / jgt with X.
        let jset = [
            i(op::LD_B_ABS, 0, 0, 4),
            i(0x45, 1, 0, 0x08),
            i(op::RET_K, 0, 0, 0),
            i(op::LDX_IMM, 0, 0, 0x4a),
            i(0x3d, 0, 1, 0),
            i(op::RET_K, 0, 0, 9),
            i(op::RET_K, 0, 0, 0),
        ];
        assert_eq!(run(&jset, &f), 9);
    }

    #[test]
    fn untagged_view_matches_a_stripped_copy() {
        let f = Filter::compile("ip and udp port 53").unwrap();
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]);
        frame.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 0x30, 0x39, 0, 53, 0, 8, 0, 0]);
        assert!(f.matches(&frame));
        let mut tagged = frame[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        tagged.extend_from_slice(&frame[12..]);
        assert!(!f.matches(&tagged));
        assert!(f.matches_untagged_view(&tagged, 4));
        let len = Filter::compile(&format!("len = {}", frame.len())).unwrap();
        assert!(len.matches_untagged_view(&tagged, 4) && !len.matches(&tagged));
        let straddle = Filter::compile("ether[10:4] = 0x00000800").unwrap();
        assert!(straddle.matches_untagged_view(&tagged, 4));
        assert!(!straddle.matches(&tagged));
    }

    #[test]
    fn random_programs_never_panic() {
        const CODES: [u16; 40] = [
            0x20, 0x28, 0x30, 0x40, 0x48, 0x50, 0x80, 0x00, 0x60, 0x81, 0x01, 0x61, 0xb1, 0x02, 0x03, 0x04, 0x14, 0x24,
            0x34, 0x44, 0x54, 0x64, 0x74, 0x94, 0xa4, 0x0c, 0x3c, 0x6c, 0x9c, 0x84, 0x05, 0x15, 0x25, 0x35, 0x45, 0x1d,
            0x4d, 0x06, 0x16, 0x87,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let (mut valid, mut accepted) = (0, 0);
        for _ in 0..20_000 {
            let n = 1 + (next() % 12) as usize;
            let mut prog: Vec<BpfInsn> = (0..n)
                .map(|_| {
                    let r = next();
                    let k = match r % 4 {
                        0 => (r >> 8) as u32 % 80,
                        1 => (r >> 8) as u32 % 17,
                        2 => u32::MAX - (r >> 8) as u32 % 4,
                        _ => (r >> 32) as u32,
                    };
                    let code = CODES[(r >> 40) as usize % CODES.len()];
                    BpfInsn::new(code, (r >> 48) as u8 % 4, (r >> 56) as u8 % 4, k)
                })
                .collect();
            let r = next();
            prog.push(BpfInsn::new(if r & 1 == 0 { op::RET_K } else { op::RET_A }, 0, 0, (r >> 32) as u32 & 1));
            let Ok(f) = Filter::from_instructions(&prog) else { continue };
            valid += 1;
            for len in [0usize, 1, 13, 14, 17, 60, 90] {
                let frame: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                accepted += usize::from(f.matches(&frame));
                let _ = f.matches_untagged_view(&frame, 4);
                let _ = f.matches_untagged_view(&frame, 8);
            }
        }
        assert!(valid > 1000 && accepted > 100, "{valid} valid, {accepted} accepted");
    }

    #[test]
    fn filters_are_clone_send_sync() {
        fn check<T: Clone + Send + Sync + 'static>() {}
        check::<Filter>();
    }
}
