//! Hash and checksum algorithms of bmv2 (`simple_switch`), bit-for-bit.
//!
//! A bmv2 JSON `calculations[]` entry (and the hash in an action selector)
//! names an algorithm in `algo` and lists its inputs. bmv2 first packs the
//! inputs into one byte buffer, then runs the named algorithm over it and
//! gets a `u64`. This crate provides both halves: [`BitPacker`] builds the
//! buffer and [`Algorithm`] hashes it. It has no dependencies and knows
//! nothing of packets or JSON; the engine feeds it field values.
//!
//! # Facts established from the bmv2 sources
//!
//! Sources read (p4lang/behavioral-model unless noted):
//! `src/bm_sim/calculations.cpp`, `include/bm/bm_sim/calculations.h`,
//! `src/bm_sim/extract.h`, `src/bm_sim/crc_tables.h`, `src/bm_sim/crc_map.{h,cpp}`,
//! `src/bm_sim/P4Objects.cpp`, `src/bm_sim/checksums.cpp`,
//! `targets/simple_switch/{simple_switch,primitives}.cpp`, `tools/runtime_CLI.py`,
//! issue #740 / PR #745, and p4lang/p4c `backends/bmv2/simple_switch/simpleSwitch.cpp`.
//!
//! ## Building the buffer (`BufBuilder`)
//!
//! * Input entries are `"field"`, `"hexstr"` (a constant with a `bitwidth`),
//!   `"header"` (a whole header) and `"payload"`; anything else is rejected
//!   when the JSON is loaded.
//! * Fields and constants are written one after the other, MSB-first, with no
//!   padding between them, each exactly its bit width. A 4-bit, a 12-bit and a
//!   9-bit field make 25 bits. The buffer is `ceil(bits / 8)` bytes; the padding
//!   is the low-order bits of the last byte, and they are zero.
//! * A field of an **invalid header contributes nothing**: it is skipped, not
//!   zero-filled. A `"header"` entry is the header's deparsed bytes if it is
//!   valid, nothing otherwise. bmv2 asserts that a whole header starts on a
//!   byte boundary.
//! * `"payload"` only sets a flag. The payload (the packet bytes not yet parsed
//!   into headers) is appended **after all other entries, wherever `"payload"`
//!   appears in the list**. It starts at the next byte boundary, after the
//!   zero padding bits.
//! * A `"hexstr"` constant is parsed into big-endian bytes, and bmv2 reads its
//!   first `ceil(bitwidth / 8)` bytes as the right-aligned value. p4c writes
//!   hexstrs exactly that long. (For a longer string bmv2 would take the leading
//!   bytes; for a shorter one it reads past the end. [`BitPacker::push_field`]
//!   takes the low bits instead.)
//!
//! ## Algorithms (registered names → behaviour)
//!
//! All of them return `u64`. None of them truncates to a "width": the value
//! is narrowed only when it is stored into a destination field (the low bits
//! are kept).
//!
//! * `crc16`: poly 0x8005, init 0, xorout 0, input and output reflected.
//!   This is CRC-16/ARC, check 0xBB3D.
//! * `crc32`: poly 0x04C11DB7, init and xorout 0xFFFFFFFF, reflected. This
//!   is the standard CRC-32, check 0xCBF43926.
//! * `crcCCITT`: poly 0x1021, init 0xFFFF, xorout 0, not reflected. This is
//!   CRC-16/CCITT-FALSE (IBM-3740), check 0x29B1.
//! * `crc8_custom`, `crc16_custom`, `crc32_custom`, `crc64_custom` use
//!   parameters that can be changed at run time. Each calculation has its
//!   own parameters. `set_crc16_parameters <calc> <poly> <init> <xor>
//!   <reflect data> <reflect remainder>` (and the crc32 form) changes them.
//!   The starting values are: crc8 `{0x07,0,0,false,false}`, crc16 = `crc16`,
//!   crc32 = `crc32`, crc64 `{0x1b,0,0,true,true}`. bmv2 computes every CRC
//!   in the Rocksoft model (see [`CrcParams`]).
//! * Names from bmv2's `CrcMap` (`crc_16_dect`, `crc_32c`, `modbus`, …) and
//!   custom strings (`poly_0x18005_init_0xffff_not_rev`) are also accepted,
//!   in that order, after the registered names.
//! * `csum16` and `cksum16` (the same function): the RFC 1071 Internet
//!   checksum over big-endian 16-bit words. An odd last byte is padded with
//!   a zero byte.
//! * `xor16` and `xor32`: XOR of big-endian words. A short tail is
//!   left-aligned and zero-padded.
//! * `identity`: the *first* `min(8, len)` bytes as a big-endian number.
//! * `xxh64`, and simple_switch's `bmv2_hash`: XXH64 with seed 0.
//!   simple_switch's `hash_ex` is a FNV-style mix over signed chars.
//! * `toeplitz`: the RSS hash, with a key set at run time (default 4 zero
//!   bytes).
//! * `round_robin` and `round_robin_consistent` are counters, not functions
//!   of the input. The engine must implement them ([`is_stateful_name`]).
//! * v1model's `HashAlgorithm.random` is passed by p4c as `"random"`, but no
//!   such name is registered in bmv2's core or in simple_switch. It is not a
//!   function of the input anyway, so the engine handles it (or rejects it).
//!
//! ## Using the result
//!
//! * `hash(...)` in v1model compiles to the primitive
//!   `modify_field_with_hash_based_offset(dst, base, calc, max)`. bmv2 computes
//!   `(hash % max) + base` in `u64`, treating `max == 0` as 1 (with a
//!   warning), and then stores the result into `dst`, keeping its low bits.
//!   See [`hash_with_offset`].
//! * Checksum update stores the `u64` output into the field (narrowed).
//!   Checksum verify compares the *unnarrowed* `u64` output with the field
//!   value.
//!
//! ## Open points
//!
//! * In the `P4Objects.cpp` version examined, `check_hash` accepts `CrcMap`
//!   presets and custom strings. The calculation is then built by name from
//!   the registered-hash map only, so such names may not actually work in
//!   bmv2 calculations. Sluice accepts them.
//! * bmv2 reads `base` and `max` with `Data::get<uint64_t>()`. For values
//!   wider than 64 bits, this crate assumes the low 64 bits are used.
//! * `csum16` is bmv2's result on a little-endian host, which is where bmv2
//!   runs in practice. Its code reads native-endian words.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod crc;
mod packer;
mod simple;
mod toeplitz;
mod xxh64;

pub use crc::{crc16, crc32, crc32c, crc_ccitt, Crc, CrcParams};
pub use packer::BitPacker;
pub use simple::{
    csum16, csum16_add, csum16_finish, csum16_ranges, hash_ex, identity, ipv4_header_checksum, xor16, xor32,
};
pub use toeplitz::ToeplitzKey;
pub use xxh64::xxh64;

use std::fmt;

/// A hash algorithm as named by a bmv2 JSON `algo`, with any run-time
/// configuration it carries (custom CRC parameters, Toeplitz key).
///
/// Holds per-calculation state because in bmv2 each calculation owns a copy
/// of its algorithm, so configuring one `crc16_custom` calculation does not
/// affect another.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// `crc16` (CRC-16/ARC).
    Crc16,
    /// `crc32` (standard reflected CRC-32).
    Crc32,
    /// `crcCCITT` (CRC-16/CCITT-FALSE).
    CrcCcitt,
    /// `csum16` / `cksum16`: the Internet checksum.
    Csum16,
    /// `xor16`: XOR of 16-bit words.
    Xor16,
    /// `xor32`: XOR of 32-bit words.
    Xor32,
    /// `identity`: first up-to-8 bytes, big-endian.
    Identity,
    /// `xxh64` / `bmv2_hash`: XXH64, seed 0.
    Xxh64,
    /// `hash_ex`: simple_switch's example hash.
    HashEx,
    /// `crc{8,16,32,64}_custom`, a `CrcMap` preset or a custom CRC string;
    /// reconfigurable with [`Algorithm::set_crc_params`].
    CustomCrc(Box<Crc>),
    /// `toeplitz`, with its key.
    Toeplitz(ToeplitzKey),
}

/// Why a run-time reconfiguration was refused (bmv2's `CustomCrcErrorCode`
/// and `ToeplitzErrorCode`), so the CLI can report the same errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The calculation's algorithm is not of the kind being configured, e.g.
    /// crc16 parameters for a `crc32_custom` or a fixed `crc16` calculation.
    WrongTypeCalculation,
    /// The new configuration itself is invalid (e.g. a Toeplitz key whose
    /// length is not a non-zero multiple of 4).
    InvalidConfig,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::WrongTypeCalculation => f.write_str("wrong type of calculation"),
            ConfigError::InvalidConfig => f.write_str("invalid configuration"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// Names of bmv2 hash algorithms that keep state instead of hashing their
/// input (`round_robin`, `round_robin_consistent`); the engine implements
/// them. [`Algorithm::from_name`] returns `None` for these.
pub fn is_stateful_name(name: &str) -> bool {
    matches!(name, "round_robin" | "round_robin_consistent")
}

fn custom(params: CrcParams) -> Algorithm {
    Algorithm::CustomCrc(Box::new(Crc::new(params).expect("valid preset")))
}

impl Algorithm {
    /// Resolves a JSON `algo` name as bmv2 does: registered names first,
    /// then `CrcMap` presets, then custom CRC strings. `None` if bmv2 would
    /// not find a stateless hash by that name.
    pub fn from_name(name: &str) -> Option<Algorithm> {
        let algo = match name {
            "crc16" => Algorithm::Crc16,
            "crc32" => Algorithm::Crc32,
            "crcCCITT" => Algorithm::CrcCcitt,
            "csum16" | "cksum16" => Algorithm::Csum16,
            "xor16" => Algorithm::Xor16,
            "xor32" => Algorithm::Xor32,
            "identity" => Algorithm::Identity,
            "xxh64" | "bmv2_hash" => Algorithm::Xxh64,
            "hash_ex" => Algorithm::HashEx,
            "toeplitz" => Algorithm::Toeplitz(ToeplitzKey::default()),
            "crc8_custom" => custom(CrcParams::CRC8_CUSTOM_DEFAULT),
            "crc16_custom" => custom(CrcParams::CRC16_CUSTOM_DEFAULT),
            "crc32_custom" => custom(CrcParams::CRC32_CUSTOM_DEFAULT),
            "crc64_custom" => custom(CrcParams::CRC64_CUSTOM_DEFAULT),
            _ => custom(CrcParams::preset(name).or_else(|| CrcParams::from_custom_str(name))?),
        };
        Some(algo)
    }

    /// Hashes `data` (the buffer from [`BitPacker`]) to bmv2's `u64` result.
    pub fn compute(&self, data: &[u8]) -> u64 {
        match self {
            Algorithm::Crc16 => u64::from(crc16(data)),
            Algorithm::Crc32 => u64::from(crc32(data)),
            Algorithm::CrcCcitt => u64::from(crc_ccitt(data)),
            Algorithm::Csum16 => u64::from(csum16(data)),
            Algorithm::Xor16 => u64::from(xor16(data)),
            Algorithm::Xor32 => u64::from(xor32(data)),
            Algorithm::Identity => identity(data),
            Algorithm::Xxh64 => xxh64(data, 0),
            Algorithm::HashEx => u64::from(hash_ex(data)),
            Algorithm::CustomCrc(crc) => crc.compute(data),
            Algorithm::Toeplitz(key) => u64::from(key.hash(data)),
        }
    }

    /// Number of significant bits the algorithm produces (the result is
    /// always below 2^width). bmv2 itself never narrows results to this
    /// width; it is for range checks and for display.
    pub fn output_width_bits(&self) -> u32 {
        match self {
            Algorithm::Crc16 | Algorithm::CrcCcitt | Algorithm::Csum16 | Algorithm::Xor16 => 16,
            Algorithm::Crc32 | Algorithm::Xor32 | Algorithm::HashEx | Algorithm::Toeplitz(_) => 32,
            Algorithm::Identity | Algorithm::Xxh64 => 64,
            Algorithm::CustomCrc(crc) => crc.params().width,
        }
    }

    /// Applies `set_crcN_parameters`. Only a custom CRC of the same width
    /// can be reconfigured (bmv2 checks the calculation's type); anything
    /// else is [`ConfigError::WrongTypeCalculation`].
    pub fn set_crc_params(&mut self, params: CrcParams) -> Result<(), ConfigError> {
        match self {
            Algorithm::CustomCrc(crc) if crc.params().width == params.width => {
                **crc = Crc::new(params).ok_or(ConfigError::InvalidConfig)?;
                Ok(())
            }
            _ => Err(ConfigError::WrongTypeCalculation),
        }
    }

    /// Sets the key of a `toeplitz` calculation. Keys that are empty or not
    /// a multiple of 4 bytes are refused and the old key is kept, as in bmv2.
    pub fn set_toeplitz_key(&mut self, key: &[u8]) -> Result<(), ConfigError> {
        match self {
            Algorithm::Toeplitz(current) => {
                *current = ToeplitzKey::new(key).ok_or(ConfigError::InvalidConfig)?;
                Ok(())
            }
            _ => Err(ConfigError::WrongTypeCalculation),
        }
    }
}

/// bmv2's `modify_field_with_hash_based_offset` arithmetic, i.e. v1model's
/// `hash(dst, algo, base, data, max)`: the hash modulo `size`, plus `base`,
/// in wrapping `u64`, with `size == 0` treated as 1 (so the result is
/// `base`). The caller stores the result into the destination field, which
/// keeps only the field's low bits.
pub fn hash_with_offset(base: u64, hash: u64, size: u64) -> u64 {
    let size = size.max(1);
    (hash % size).wrapping_add(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECK: &[u8] = b"123456789";

    #[test]
    fn names_resolve_like_bmv2() {
        assert_eq!(Algorithm::from_name("crc16"), Some(Algorithm::Crc16));
        assert_eq!(Algorithm::from_name("crc32"), Some(Algorithm::Crc32));
        assert_eq!(Algorithm::from_name("crcCCITT"), Some(Algorithm::CrcCcitt));
        assert_eq!(Algorithm::from_name("csum16"), Some(Algorithm::Csum16));
        assert_eq!(Algorithm::from_name("cksum16"), Some(Algorithm::Csum16));
        assert_eq!(Algorithm::from_name("bmv2_hash"), Some(Algorithm::Xxh64));
        assert_eq!(Algorithm::from_name("xxh64"), Some(Algorithm::Xxh64));
        assert_eq!(Algorithm::from_name("crcccitt"), None);
        assert_eq!(Algorithm::from_name("random"), None);
        assert_eq!(Algorithm::from_name("round_robin"), None);
        assert!(is_stateful_name("round_robin"));
        assert!(is_stateful_name("round_robin_consistent"));
        assert!(!is_stateful_name("crc16"));
        assert_eq!(Algorithm::from_name(""), None);
    }

    #[test]
    fn every_named_algorithm_computes_its_check_value() {
        let cases: &[(&str, u64, u32)] = &[
            ("crc16", 0xbb3d, 16),
            ("crc32", 0xcbf4_3926, 32),
            ("crcCCITT", 0x29b1, 16),
            ("crc8_custom", 0xf4, 8),
            ("crc16_custom", 0xbb3d, 16),
            ("crc32_custom", 0xcbf4_3926, 32),
            ("crc64_custom", 0x46a5_a938_8a5b_effe, 64),
            ("crc_32c", 0xe306_9283, 32),
            ("poly_0x11021_init_0xffff_not_rev", 0x29b1, 16),
            ("identity", 0x3132_3334_3536_3738, 64),
            ("xor16", 0x3132 ^ 0x3334 ^ 0x3536 ^ 0x3738 ^ 0x3900, 16),
            ("xor32", 0x3132_3334 ^ 0x3536_3738 ^ 0x3900_0000, 32),
            ("xxh64", 0x8cb8_41db_40e6_ae83, 64),
            ("hash_ex", 0xaf67_fb84, 32),
            ("toeplitz", 0, 32),
            // 3132+3334+3536+3738+3900 = 1_09d4 -> 09d5 after the carry; !09d5.
            ("csum16", 0xf62a, 16),
        ];
        for &(name, expected, width) in cases {
            let algo = Algorithm::from_name(name).unwrap();
            assert_eq!(algo.compute(CHECK), expected, "{name}");
            assert_eq!(algo.output_width_bits(), width, "{name}");
        }
    }

    #[test]
    fn custom_crc_reconfiguration() {
        let mut algo = Algorithm::from_name("crc16_custom").unwrap();
        assert_eq!(algo.compute(CHECK), 0xbb3d);
        // set_crc16_parameters calc 0x1021 0xffff 0x0 false false
        algo.set_crc_params(CrcParams::new(16, 0x1021, 0xffff, 0, false, false)).unwrap();
        assert_eq!(algo.compute(CHECK), 0x29b1);
        // Width mismatch and non-custom algorithms are refused.
        assert_eq!(algo.set_crc_params(CrcParams::CRC32_CUSTOM_DEFAULT), Err(ConfigError::WrongTypeCalculation));
        assert_eq!(algo.compute(CHECK), 0x29b1);
        let mut fixed = Algorithm::Crc16;
        assert_eq!(fixed.set_crc_params(CrcParams::CRC16_CUSTOM_DEFAULT), Err(ConfigError::WrongTypeCalculation));
        // A second calculation keeps its own defaults.
        let other = Algorithm::from_name("crc16_custom").unwrap();
        assert_eq!(other.compute(CHECK), 0xbb3d);
        let mut c32 = Algorithm::from_name("crc32_custom").unwrap();
        c32.set_crc_params(CrcParams::preset("crc_32c").unwrap()).unwrap();
        assert_eq!(c32.compute(CHECK), 0xe306_9283);
    }

    #[test]
    fn toeplitz_key_configuration() {
        let mut algo = Algorithm::from_name("toeplitz").unwrap();
        assert_eq!(algo.compute(b"abcd"), 0);
        assert_eq!(algo.set_toeplitz_key(&[1, 2, 3]), Err(ConfigError::InvalidConfig));
        algo.set_toeplitz_key(&[0x80, 0, 0, 1]).unwrap();
        assert_eq!(algo.compute(&[0x80, 0, 0, 0]), 0x8000_0001);
        assert_eq!(Algorithm::Crc32.set_toeplitz_key(&[0; 4]), Err(ConfigError::WrongTypeCalculation));
        assert_eq!(ConfigError::InvalidConfig.to_string(), "invalid configuration");
    }

    #[test]
    fn hash_with_offset_semantics() {
        assert_eq!(hash_with_offset(0, 0xbb3d, 16), 0xd);
        assert_eq!(hash_with_offset(100, 0xbb3d, 16), 113);
        assert_eq!(hash_with_offset(5, 12345, 1), 5);
        // max == 0 behaves like max == 1: the result is the base.
        assert_eq!(hash_with_offset(7, 12345, 0), 7);
        // max of 2^32 keeps a 32-bit hash intact.
        assert_eq!(hash_with_offset(0, 0xcbf4_3926, 1 << 32), 0xcbf4_3926);
        // u64 wrap-around.
        assert_eq!(hash_with_offset(u64::MAX, 3, 10), 2);
    }

    #[test]
    fn packed_ipv4_field_list_checksum() {
        // The IPv4 header as a P4 field list: version(4) ihl(4) diffserv(8)
        // totalLen(16) identification(16) flags(3) fragOffset(13) ttl(8)
        // protocol(8) srcAddr(32) dstAddr(32); the checksum field left out.
        let mut p = BitPacker::new();
        p.push_u64(4, 4);
        p.push_u64(5, 4);
        p.push_u64(0, 8);
        p.push_u64(0x73, 16);
        p.push_u64(0, 16);
        p.push_u64(0b010, 3);
        p.push_u64(0, 13);
        p.push_u64(0x40, 8);
        p.push_u64(0x11, 8);
        p.push_u64(0xc0a8_0001, 32);
        p.push_u64(0xc0a8_00c7, 32);
        assert_eq!(p.as_bytes().len(), 18);
        assert_eq!(Algorithm::Csum16.compute(p.as_bytes()), 0xb861);
    }

    #[test]
    fn packed_unaligned_list_feeds_hashes() {
        // 4 + 12 + 9 bits -> [ab cd ff 80]; the CRC sees the padded bytes.
        let mut p = BitPacker::new();
        p.push_u64(0xa, 4);
        p.push_u64(0xbcd, 12);
        p.push_u64(0x1ff, 9);
        let bytes = [0xab, 0xcd, 0xff, 0x80];
        assert_eq!(p.as_bytes(), &bytes);
        assert_eq!(Algorithm::Crc16.compute(p.as_bytes()), u64::from(crc16(&bytes)));
        assert_eq!(Algorithm::Identity.compute(p.as_bytes()), 0xabcd_ff80);
        assert_eq!(Algorithm::Xor16.compute(p.as_bytes()), 0xabcd ^ 0xff80);
    }
}
