//! CRC algorithms, computed the way bmv2 computes them.
//!
//! bmv2 implements every CRC (fixed and custom) in the classic
//! "Rocksoft" / CRC-catalogue model: the register starts at the initial
//! remainder, bytes are fed most-significant-bit first through a
//! non-reflected table (each input byte is bit-reversed first when
//! `data_reflected` is set), and at the end the register is bit-reversed
//! over the CRC width when `remainder_reflected` is set, then XORed with the
//! final XOR value. Check values from the CRC catalogue therefore apply.

/// Parameters of one CRC, in the Rocksoft / CRC-catalogue model that bmv2's
/// `crc_custom` (and `set_crc16_parameters` / `set_crc32_parameters`) uses.
///
/// Field names follow bmv2's `crc_config_t` so the CLI arguments map 1:1.
/// `polynomial` is given without its implicit top bit (e.g. `0x8005` for
/// CRC-16); `polynomial`, `initial_remainder` and `final_xor_value` are taken
/// modulo 2^`width`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CrcParams {
    /// CRC width in bits. bmv2 offers 8, 16, 32 and 64; [`Crc`] accepts 1..=64.
    pub width: u32,
    /// Generator polynomial without the x^width term.
    pub polynomial: u64,
    /// Register value before the first byte (not reflected, as in bmv2).
    pub initial_remainder: u64,
    /// Value XORed into the result after the optional final reflection.
    pub final_xor_value: u64,
    /// Bit-reverse each input byte before feeding it (catalogue "refin").
    pub data_reflected: bool,
    /// Bit-reverse the final register over `width` bits (catalogue "refout").
    pub remainder_reflected: bool,
}

impl CrcParams {
    /// Builds a parameter set; a `const fn` so presets can be constants.
    pub const fn new(
        width: u32,
        polynomial: u64,
        initial_remainder: u64,
        final_xor_value: u64,
        data_reflected: bool,
        remainder_reflected: bool,
    ) -> Self {
        CrcParams { width, polynomial, initial_remainder, final_xor_value, data_reflected, remainder_reflected }
    }

    /// Initial configuration of bmv2's `crc8_custom` (CRC-8, poly 0x07, not reflected).
    pub const CRC8_CUSTOM_DEFAULT: CrcParams = CrcParams::new(8, 0x07, 0, 0, false, false);
    /// Initial configuration of bmv2's `crc16_custom`: identical to its fixed `crc16`.
    pub const CRC16_CUSTOM_DEFAULT: CrcParams = CrcParams::new(16, 0x8005, 0, 0, true, true);
    /// Initial configuration of bmv2's `crc32_custom`: identical to its fixed `crc32`.
    pub const CRC32_CUSTOM_DEFAULT: CrcParams = CrcParams::new(32, 0x04c1_1db7, 0xffff_ffff, 0xffff_ffff, true, true);
    /// Initial configuration of bmv2's `crc64_custom` (poly 0x1b, reflected, init 0, xor 0).
    pub const CRC64_CUSTOM_DEFAULT: CrcParams = CrcParams::new(64, 0x1b, 0, 0, true, true);

    /// Looks up one of the named CRC presets bmv2 accepts as an algorithm
    /// name (its `CrcMap`, crcmod's predefined names with `-` replaced by `_`).
    pub fn preset(name: &str) -> Option<CrcParams> {
        PRESETS.iter().find(|(n, _)| *n == name).map(|(_, params)| *params)
    }

    /// Parses bmv2's custom CRC algorithm string
    /// `poly_0x1<hex>{_init_<hex>}{_xout_<hex>}{_not_rev}`.
    ///
    /// Mirrors bmv2's `CrcMap::get_copy_from_custom_str`: tokens are separated
    /// by `_`; parsing stops at the first empty token; the polynomial must be
    /// written `0x1...` with its top bit, and its degree (4 × digits after
    /// `0x1`) must be 8, 16, 32 or 64; `init`/`xout` default to 0; both
    /// reflections default to true and `not_rev` clears both; `lsb`, `msb`,
    /// `extend` and anything else make the string invalid.
    pub fn from_custom_str(s: &str) -> Option<CrcParams> {
        let mut tokens = s.split('_');
        let mut next = move || tokens.next().unwrap_or("");
        let mut poly: Option<&str> = None;
        let mut init = 0u64;
        let mut xout = 0u64;
        let mut reflected = true;
        loop {
            let token = next();
            match token {
                "" => break,
                "poly" => {
                    let value = next();
                    if value.is_empty() {
                        return None;
                    }
                    poly = Some(value);
                }
                "init" => init = parse_hex(next())?,
                "xout" => xout = parse_hex(next())?,
                "not" if next() == "rev" => reflected = false,
                _ => return None,
            }
        }
        let poly = poly?;
        let digits = poly.strip_prefix("0x1")?;
        let width = u32::try_from(digits.len() * 4).ok()?;
        if !matches!(width, 8 | 16 | 32 | 64) {
            return None;
        }
        let polynomial = parse_hex(digits)?;
        let mask = width_mask(width);
        Some(CrcParams::new(width, polynomial & mask, init & mask, xout & mask, reflected, reflected))
    }
}

/// Parses a hexadecimal number with an optional lowercase `0x` prefix (as
/// bmv2's `Data` string constructor does); excess high digits are dropped.
fn parse_hex(s: &str) -> Option<u64> {
    let digits = s.strip_prefix("0x").unwrap_or(s);
    if digits.is_empty() {
        return None;
    }
    let mut value = 0u64;
    for c in digits.chars() {
        value = (value << 4) | u64::from(c.to_digit(16)?);
    }
    Some(value)
}

/// All-ones mask of `width` bits (1..=64).
const fn width_mask(width: u32) -> u64 {
    u64::MAX >> (64 - width)
}

/// bmv2's named CRC presets (`src/bm_sim/crc_map.cpp`), in its own order.
const PRESETS: &[(&str, CrcParams)] = &[
    ("crc_8", CrcParams::new(8, 0x07, 0x00, 0x00, false, false)),
    ("crc_8_darc", CrcParams::new(8, 0x39, 0x00, 0x00, true, true)),
    ("crc_8_i_code", CrcParams::new(8, 0x1d, 0xfd, 0x00, false, false)),
    ("crc_8_itu", CrcParams::new(8, 0x07, 0x00, 0x55, false, false)),
    ("crc_8_maxim", CrcParams::new(8, 0x31, 0x00, 0x00, true, true)),
    ("crc_8_rohc", CrcParams::new(8, 0x07, 0xff, 0x00, true, true)),
    ("crc_8_wcdma", CrcParams::new(8, 0x9b, 0x00, 0x00, true, true)),
    ("crc_16", CrcParams::new(16, 0x8005, 0x0000, 0x0000, true, true)),
    ("crc_16_buypass", CrcParams::new(16, 0x8005, 0x0000, 0x0000, false, false)),
    ("crc_16_dds_110", CrcParams::new(16, 0x8005, 0x800d, 0x0000, false, false)),
    ("crc_16_dect", CrcParams::new(16, 0x0589, 0x0000, 0x0001, false, false)),
    ("crc_16_dnp", CrcParams::new(16, 0x3d65, 0x0000, 0xffff, true, true)),
    ("crc_16_en_13757", CrcParams::new(16, 0x3d65, 0x0000, 0xffff, false, false)),
    ("crc_16_genibus", CrcParams::new(16, 0x1021, 0xffff, 0xffff, false, false)),
    ("crc_16_maxim", CrcParams::new(16, 0x8005, 0x0000, 0xffff, true, true)),
    ("crc_16_mcrf4xx", CrcParams::new(16, 0x1021, 0xffff, 0x0000, true, true)),
    ("crc_16_riello", CrcParams::new(16, 0x1021, 0xb2aa, 0x0000, true, true)),
    ("crc_16_t10_dif", CrcParams::new(16, 0x8bb7, 0x0000, 0x0000, false, false)),
    ("crc_16_teledisk", CrcParams::new(16, 0xa097, 0x0000, 0x0000, false, false)),
    ("crc_16_usb", CrcParams::new(16, 0x8005, 0xffff, 0xffff, true, true)),
    ("x_25", CrcParams::new(16, 0x1021, 0xffff, 0xffff, true, true)),
    ("xmodem", CrcParams::new(16, 0x1021, 0x0000, 0x0000, false, false)),
    ("modbus", CrcParams::new(16, 0x8005, 0xffff, 0x0000, true, true)),
    ("kermit", CrcParams::new(16, 0x1021, 0x0000, 0x0000, true, true)),
    ("crc_ccitt_false", CrcParams::new(16, 0x1021, 0xffff, 0x0000, false, false)),
    ("crc_aug_ccitt", CrcParams::new(16, 0x1021, 0x1d0f, 0x0000, false, false)),
    ("crc_32", CrcParams::new(32, 0x04c1_1db7, 0xffff_ffff, 0xffff_ffff, true, true)),
    ("crc_32_bzip2", CrcParams::new(32, 0x04c1_1db7, 0xffff_ffff, 0xffff_ffff, false, false)),
    ("crc_32c", CrcParams::new(32, 0x1edc_6f41, 0xffff_ffff, 0xffff_ffff, true, true)),
    ("crc_32d", CrcParams::new(32, 0xa833_982b, 0xffff_ffff, 0xffff_ffff, true, true)),
    ("crc_32_mpeg", CrcParams::new(32, 0x04c1_1db7, 0xffff_ffff, 0x0000_0000, false, false)),
    ("posix", CrcParams::new(32, 0x04c1_1db7, 0x0000_0000, 0xffff_ffff, false, false)),
    ("crc_32q", CrcParams::new(32, 0x8141_41ab, 0, 0, false, false)),
    ("jamcrc", CrcParams::new(32, 0x04c1_1db7, 0xffff_ffff, 0x0000_0000, true, true)),
    ("xfer", CrcParams::new(32, 0x0000_00af, 0, 0, false, false)),
    ("crc_64", CrcParams::new(64, 0x1b, 0, 0, true, true)),
    ("crc_64_we", CrcParams::new(64, 0x42f0_e1eb_a9ea_3693, u64::MAX, u64::MAX, false, false)),
    ("crc_64_jones", CrcParams::new(64, 0xad93_d235_94c9_35a9, u64::MAX, 0, true, true)),
];

/// A table-driven CRC of any width 1..=64 and any parameters.
///
/// The register is kept left-aligned in a `u64` so one code path serves all
/// widths; the 256-entry table is built once in [`Crc::new`].
#[derive(Clone)]
pub struct Crc {
    params: CrcParams,
    /// Polynomial, left-aligned.
    table: [u64; 256],
    /// Initial remainder, left-aligned.
    init: u64,
    /// Final XOR value, masked to the width.
    xor_out: u64,
}

impl Crc {
    /// Precomputes the table; `None` if `params.width` is not in 1..=64.
    pub fn new(params: CrcParams) -> Option<Crc> {
        if !(1..=64).contains(&params.width) {
            return None;
        }
        let shift = 64 - params.width;
        let mask = width_mask(params.width);
        let params = CrcParams {
            polynomial: params.polynomial & mask,
            initial_remainder: params.initial_remainder & mask,
            final_xor_value: params.final_xor_value & mask,
            ..params
        };
        Some(Crc {
            params,
            table: msb_first_table(params.polynomial << shift),
            init: params.initial_remainder << shift,
            xor_out: params.final_xor_value,
        })
    }

    /// The (width-masked) parameters this CRC was built from.
    pub fn params(&self) -> &CrcParams {
        &self.params
    }

    /// Computes the CRC of `data`; the result fits in `params().width` bits.
    pub fn compute(&self, data: &[u8]) -> u64 {
        let mut reg = self.init;
        if self.params.data_reflected {
            for &byte in data {
                let idx = ((reg >> 56) as u8) ^ byte.reverse_bits();
                reg = self.table[usize::from(idx)] ^ (reg << 8);
            }
        } else {
            for &byte in data {
                let idx = ((reg >> 56) as u8) ^ byte;
                reg = self.table[usize::from(idx)] ^ (reg << 8);
            }
        }
        let out = if self.params.remainder_reflected {
            // Left-aligned register: reversing all 64 bits lands the
            // width-bit reflection in the low bits.
            reg.reverse_bits()
        } else {
            reg >> (64 - self.params.width)
        };
        out ^ self.xor_out
    }
}

impl PartialEq for Crc {
    /// Two CRCs are equal when their parameters are (the table follows).
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
    }
}

impl Eq for Crc {}

impl std::fmt::Debug for Crc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crc").field("params", &self.params).finish()
    }
}

/// MSB-first table for a left-aligned 64-bit register.
const fn msb_first_table(poly_aligned: u64) -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut reg = (i as u64) << 56;
        let mut bit = 0;
        while bit < 8 {
            reg = if reg & (1 << 63) != 0 { (reg << 1) ^ poly_aligned } else { reg << 1 };
            bit += 1;
        }
        table[i] = reg;
        i += 1;
    }
    table
}

/// LSB-first (reflected) 16-bit table for a reflected polynomial.
const fn lsb_first_table16(poly_reflected: u16) -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut reg = i as u16;
        let mut bit = 0;
        while bit < 8 {
            reg = if reg & 1 != 0 { (reg >> 1) ^ poly_reflected } else { reg >> 1 };
            bit += 1;
        }
        table[i] = reg;
        i += 1;
    }
    table
}

/// LSB-first (reflected) 32-bit table for a reflected polynomial.
const fn lsb_first_table32(poly_reflected: u32) -> [u32; 256] {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut reg = i as u32;
        let mut bit = 0;
        while bit < 8 {
            reg = if reg & 1 != 0 { (reg >> 1) ^ poly_reflected } else { reg >> 1 };
            bit += 1;
        }
        table[i] = reg;
        i += 1;
    }
    table
}

/// MSB-first 16-bit table.
const fn msb_first_table16(poly: u16) -> [u16; 256] {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut reg = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            reg = if reg & 0x8000 != 0 { (reg << 1) ^ poly } else { reg << 1 };
            bit += 1;
        }
        table[i] = reg;
        i += 1;
    }
    table
}

/// Reflected table of 0x8005 (0xA001), for bmv2's `crc16`.
static CRC16_TABLE: [u16; 256] = lsb_first_table16(0x8005u16.reverse_bits());
/// Reflected table of 0x04C11DB7 (0xEDB88320), for bmv2's `crc32`.
static CRC32_TABLE: [u32; 256] = lsb_first_table32(0x04c1_1db7u32.reverse_bits());
/// Plain table of 0x1021, for bmv2's `crcCCITT`.
static CCITT_TABLE: [u16; 256] = msb_first_table16(0x1021);

/// bmv2 `crc16`: poly 0x8005, init 0, xorout 0, reflected in and out
/// (catalogue CRC-16/ARC, check value 0xBB3D).
///
/// Eight bytes at a time (slicing-by-8): an action selector hashes a
/// 13-byte 5-tuple per packet, and one table lookup per byte was a chain
/// of 13 dependent loads. Zero bytes in front of the data leave a CRC whose
/// register starts at zero unchanged, so the first `len % 8` bytes are
/// taken as the end of an eight-byte word that starts with zeros: a 5-tuple
/// is two steps, each eight independent table reads.
pub fn crc16(data: &[u8]) -> u16 {
    let r = data.len() % 8;
    let mut reg = 0u16;
    if r > 0 {
        // The first `r` bytes in the top `r` bytes of a little-endian word,
        // read as one load where the data has eight bytes (byte by byte, a
        // store then a wider load of the same bytes waits for the stores).
        let head = match data.get(..8) {
            Some(w) => u64::from_le_bytes(w.try_into().expect("8 bytes")),
            None => data.iter().rev().fold(0u64, |w, &b| (w << 8) | u64::from(b)),
        };
        reg = crc16_step8(reg, head << (8 * (8 - r)));
    }
    for w in data[r..].chunks_exact(8) {
        reg = crc16_step8(reg, u64::from_le_bytes(w.try_into().expect("8 bytes")));
    }
    reg
}

/// [`crc16`]'s register after the eight bytes of `w` (little-endian: its
/// low byte first).
#[inline(always)]
fn crc16_step8(reg: u16, w: u64) -> u16 {
    let v = w ^ u64::from(reg);
    let t = &CRC16_SLICES;
    let b = |k: u32| (v >> (8 * k)) as u8 as usize;
    (t[7][b(0)] ^ t[6][b(1)] ^ t[5][b(2)] ^ t[4][b(3)]) ^ (t[3][b(4)] ^ t[2][b(5)] ^ t[1][b(6)] ^ t[0][b(7)])
}

/// `CRC16_SLICES[k][b]`: the register after byte `b` then `k` zero bytes,
/// from a zero register (slice 0 is [`CRC16_TABLE`]).
static CRC16_SLICES: [[u16; 256]; 8] = slices16(&CRC16_TABLE);

/// The slicing tables of a reflected 16-bit CRC table.
const fn slices16<const N: usize>(t: &[u16; 256]) -> [[u16; 256]; N] {
    let mut out = [[0u16; 256]; N];
    out[0] = *t;
    let mut k = 1;
    while k < N {
        let mut b = 0;
        while b < 256 {
            let prev = out[k - 1][b];
            out[k][b] = (prev >> 8) ^ t[(prev & 0xff) as usize];
            b += 1;
        }
        k += 1;
    }
    out
}

/// bmv2 `crc32`: poly 0x04C11DB7, init and xorout 0xFFFFFFFF, reflected in
/// and out (catalogue CRC-32/ISO-HDLC, the Ethernet/zlib CRC, check 0xCBF43926).
pub fn crc32(data: &[u8]) -> u32 {
    let mut reg = u32::MAX;
    for &byte in data {
        reg = (reg >> 8) ^ CRC32_TABLE[usize::from((reg as u8) ^ byte)];
    }
    !reg
}

/// Reflected table of 0x1EDC6F41 (0x82F63B78), for [`crc32c`].
static CRC32C_TABLE: [u32; 256] = lsb_first_table32(0x1edc_6f41u32.reverse_bits());

/// CRC-32C (Castagnoli): poly 0x1EDC6F41, init and xorout 0xFFFFFFFF,
/// reflected in and out (check value 0xE3069283): SCTP's checksum
/// (RFC 9260, appendix A), which the packet carries in little-endian byte
/// order.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut reg = u32::MAX;
    for &byte in data {
        reg = (reg >> 8) ^ CRC32C_TABLE[usize::from((reg as u8) ^ byte)];
    }
    !reg
}

/// bmv2 `crcCCITT`: poly 0x1021, init 0xFFFF, xorout 0, not reflected
/// (catalogue CRC-16/IBM-3740 a.k.a. CRC-16/CCITT-FALSE, check 0x29B1).
pub fn crc_ccitt(data: &[u8]) -> u16 {
    let mut reg = 0xffffu16;
    for &byte in data {
        reg = (reg << 8) ^ CCITT_TABLE[usize::from(((reg >> 8) as u8) ^ byte)];
    }
    reg
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHECK: &[u8] = b"123456789";

    /// Bit-at-a-time reference CRC, written straight from the Rocksoft model.
    fn reference(p: &CrcParams, data: &[u8]) -> u64 {
        let top = 1u128 << (p.width - 1);
        let mask = (1u128 << p.width) - 1;
        let mut reg = u128::from(p.initial_remainder) & mask;
        for &b in data {
            let b = if p.data_reflected { b.reverse_bits() } else { b };
            for i in (0..8).rev() {
                let bit = u128::from((b >> i) & 1);
                let fb = u128::from(reg & top != 0) ^ bit;
                reg = (reg << 1) & mask;
                if fb != 0 {
                    reg ^= u128::from(p.polynomial) & mask;
                }
            }
        }
        let mut out = reg as u64;
        if p.remainder_reflected {
            out = out.reverse_bits() >> (64 - p.width);
        }
        out ^ (p.final_xor_value & (mask as u64))
    }

    /// Small deterministic PRNG so tests need no dependency.
    fn lcg(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        *state >> 11
    }

    #[test]
    fn fixed_check_values() {
        assert_eq!(crc16(CHECK), 0xbb3d);
        assert_eq!(crc32(CHECK), 0xcbf4_3926);
        assert_eq!(crc32c(CHECK), 0xe306_9283);
        assert_eq!(crc_ccitt(CHECK), 0x29b1);
        // Empty input leaves init ^ xorout.
        assert_eq!(crc16(b""), 0);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc_ccitt(b""), 0xffff);
    }

    #[test]
    fn fixed_tables_match_bmv2_published_entries() {
        // bmv2's crc_tables.h holds non-reflected tables; a few entries of
        // them (facts) must equal our MSB-first tables.
        let t16 = msb_first_table16(0x8005);
        assert_eq!(&t16[..4], &[0x0000, 0x8005, 0x800f, 0x000a]);
        assert_eq!(t16[255], 0x0202);
        assert_eq!(&CCITT_TABLE[..4], &[0x0000, 0x1021, 0x2042, 0x3063]);
        assert_eq!(CCITT_TABLE[255], 0x1ef0);
        let t32 = msb_first_table(0x04c1_1db7u64 << 32);
        assert_eq!(t32[1] >> 32, 0x04c1_1db7);
        assert_eq!(t32[255] >> 32, 0xb1f7_40b4);
    }

    /// Every length class of the slicing (a short first word, whole words,
    /// both) against the bit-at-a-time model.
    #[test]
    fn crc16_equals_the_bitwise_model_at_every_length() {
        let arc = CrcParams::preset("crc_16").unwrap();
        let mut s = 11;
        for len in 0..100 {
            let data: Vec<u8> = (0..len).map(|_| lcg(&mut s) as u8).collect();
            assert_eq!(u64::from(crc16(&data)), reference(&arc, &data), "{len} bytes");
        }
    }

    #[test]
    fn custom_defaults_equal_fixed() {
        let c16 = Crc::new(CrcParams::CRC16_CUSTOM_DEFAULT).unwrap();
        let c32 = Crc::new(CrcParams::CRC32_CUSTOM_DEFAULT).unwrap();
        let mut s = 7;
        for len in 0..100 {
            let data: Vec<u8> = (0..len).map(|_| lcg(&mut s) as u8).collect();
            assert_eq!(c16.compute(&data), u64::from(crc16(&data)));
            assert_eq!(c32.compute(&data), u64::from(crc32(&data)));
        }
        let ccitt = Crc::new(CrcParams::preset("crc_ccitt_false").unwrap()).unwrap();
        assert_eq!(ccitt.compute(b"hello world"), u64::from(crc_ccitt(b"hello world")));
    }

    #[test]
    fn preset_check_values() {
        // Catalogue / crcmod check values over "123456789".
        let expected: &[(&str, u64)] = &[
            ("crc_8", 0xf4),
            ("crc_8_darc", 0x15),
            ("crc_8_i_code", 0x7e),
            ("crc_8_itu", 0xa1),
            ("crc_8_maxim", 0xa1),
            ("crc_8_rohc", 0xd0),
            ("crc_8_wcdma", 0x25),
            ("crc_16", 0xbb3d),
            ("crc_16_buypass", 0xfee8),
            ("crc_16_dds_110", 0x9ecf),
            ("crc_16_dect", 0x007e),
            ("crc_16_dnp", 0xea82),
            ("crc_16_en_13757", 0xc2b7),
            ("crc_16_genibus", 0xd64e),
            ("crc_16_maxim", 0x44c2),
            ("crc_16_mcrf4xx", 0x6f91),
            ("crc_16_riello", 0x63d0),
            ("crc_16_t10_dif", 0xd0db),
            ("crc_16_teledisk", 0x0fb3),
            ("crc_16_usb", 0xb4c8),
            ("x_25", 0x906e),
            ("xmodem", 0x31c3),
            ("modbus", 0x4b37),
            ("kermit", 0x2189),
            ("crc_ccitt_false", 0x29b1),
            ("crc_aug_ccitt", 0xe5cc),
            ("crc_32", 0xcbf4_3926),
            ("crc_32_bzip2", 0xfc89_1918),
            ("crc_32c", 0xe306_9283),
            ("crc_32d", 0x8731_5576),
            ("crc_32_mpeg", 0x0376_e6e7),
            ("posix", 0x765e_7680),
            ("crc_32q", 0x3010_bf7f),
            ("jamcrc", 0x340b_c6d9),
            ("xfer", 0xbd0b_e338),
            ("crc_64", 0x46a5_a938_8a5b_effe),
            ("crc_64_we", 0x62ec_59e3_f1a4_f00a),
            ("crc_64_jones", 0xcaa7_1716_8609_f281),
        ];
        assert_eq!(expected.len(), PRESETS.len());
        for &(name, check) in expected {
            let params = CrcParams::preset(name).unwrap();
            let crc = Crc::new(params).unwrap();
            assert_eq!(crc.compute(CHECK), check, "{name}");
            assert_eq!(reference(&params, CHECK), check, "reference {name}");
        }
        assert_eq!(CrcParams::preset("crc_99"), None);
    }

    #[test]
    fn table_driven_matches_bitwise_reference_for_random_params() {
        let mut s = 12345;
        for round in 0..400 {
            let width = match round % 5 {
                0 => 8,
                1 => 16,
                2 => 32,
                3 => 64,
                _ => 1 + (lcg(&mut s) % 64) as u32,
            };
            let mask = width_mask(width);
            let params = CrcParams::new(
                width,
                lcg(&mut s) & mask,
                lcg(&mut s) & mask,
                lcg(&mut s) & mask,
                lcg(&mut s) & 1 == 1,
                lcg(&mut s) & 1 == 1,
            );
            let crc = Crc::new(params).unwrap();
            let len = (lcg(&mut s) % 40) as usize;
            let data: Vec<u8> = (0..len).map(|_| lcg(&mut s) as u8).collect();
            let got = crc.compute(&data);
            assert_eq!(got, reference(&params, &data), "{params:?}");
            assert_eq!(got & !mask, 0);
        }
    }

    #[test]
    fn mixed_reflection_is_honoured() {
        // refin without refout differs from both pure variants.
        let both = CrcParams::new(16, 0x8005, 0, 0, true, true);
        let only_in = CrcParams { remainder_reflected: false, ..both };
        let only_out = CrcParams { data_reflected: false, ..both };
        let a = Crc::new(both).unwrap().compute(CHECK);
        let b = Crc::new(only_in).unwrap().compute(CHECK);
        let c = Crc::new(only_out).unwrap().compute(CHECK);
        assert_eq!(b, u64::from((a as u16).reverse_bits()));
        assert_ne!(a, c);
        assert_eq!(c, reference(&only_out, CHECK));
    }

    #[test]
    fn params_are_masked_to_width() {
        let crc = Crc::new(CrcParams::new(16, 0x1_8005, 0xf_0000, 0xabc_0000, true, true)).unwrap();
        assert_eq!(crc.params().polynomial, 0x8005);
        assert_eq!(crc.params().initial_remainder, 0);
        assert_eq!(crc.params().final_xor_value, 0);
        assert_eq!(crc.compute(CHECK), 0xbb3d);
        assert!(Crc::new(CrcParams::new(0, 1, 0, 0, false, false)).is_none());
        assert!(Crc::new(CrcParams::new(65, 1, 0, 0, false, false)).is_none());
    }

    #[test]
    fn custom_string_parsing() {
        assert_eq!(CrcParams::from_custom_str("poly_0x18005"), Some(CrcParams::CRC16_CUSTOM_DEFAULT));
        assert_eq!(
            CrcParams::from_custom_str("poly_0x11021_init_0xffff_not_rev"),
            CrcParams::preset("crc_ccitt_false")
        );
        assert_eq!(
            CrcParams::from_custom_str("poly_0x104c11db7_init_0xffffffff_xout_0xffffffff"),
            Some(CrcParams::CRC32_CUSTOM_DEFAULT)
        );
        // Order of properties does not matter; init without 0x is hex too.
        assert_eq!(CrcParams::from_custom_str("init_ffff_poly_0x11021_xout_0xffff"), CrcParams::preset("x_25"));
        assert_eq!(CrcParams::from_custom_str("poly_0x107"), Some(CrcParams::new(8, 7, 0, 0, true, true)));
        assert_eq!(CrcParams::from_custom_str("poly_0x1000000000000001b"), Some(CrcParams::CRC64_CUSTOM_DEFAULT));
        // Parsing stops at the first empty token, like bmv2.
        assert_eq!(CrcParams::from_custom_str("poly_0x18005__init_0xffff"), Some(CrcParams::CRC16_CUSTOM_DEFAULT));
        for bad in [
            "",
            "init_0xffff",
            "poly",
            "poly_0x8005",
            "poly_0x1800",
            "poly_0x1123456",
            "poly_0x18005_lsb",
            "poly_0x18005_msb",
            "poly_0x18005_extend",
            "poly_0x18005_not_foo",
            "poly_0x18005_init",
            "poly_0x18005_init_xyz",
            "poly_0x18005_bogus_1",
            "crc16",
        ] {
            assert_eq!(CrcParams::from_custom_str(bad), None, "{bad:?}");
        }
    }
}
