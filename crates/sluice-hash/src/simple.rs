//! The non-CRC algorithms of bmv2: one's-complement checksum, XOR folds,
//! identity and simple_switch's `hash_ex`.

/// bmv2 `csum16` / `cksum16`: the Internet checksum (RFC 1071).
///
/// The buffer is read as big-endian 16-bit words, an odd trailing byte is
/// the high byte of a last word padded with a zero byte, the words are added
/// with end-around carry, and the one's complement of the sum is returned.
/// This is bit-for-bit what bmv2's little-endian 64-bit-at-a-time code
/// yields on x86 after its final `ntohs`, including the two zero cases:
/// all-zero (or empty) input gives 0xFFFF, a non-zero input whose sum is
/// 0xFFFF gives 0x0000.
pub fn csum16(data: &[u8]) -> u16 {
    csum16_finish(csum16_add(0, data))
}

/// The running sum of [`csum16`] (not folded, not complemented): `acc` plus
/// the big-endian 16-bit words of `data`, an odd last byte padded with a
/// zero byte. Sums of pieces that each start on an even offset of the
/// whole add up (a pseudo-header and its payload, for instance).
#[inline]
pub fn csum16_add(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a running sum of [`csum16_add`] with end-around carry and
/// complements it: the checksum to store.
#[inline]
pub fn csum16_finish(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Checksum of an IPv4 header with its checksum field (bytes 10..12)
/// treated as zero, as bmv2's legacy `"ipv4"` checksum type computes it.
///
/// Storing the result big-endian in bytes 10..12 makes the header valid.
pub fn ipv4_header_checksum(header: &[u8]) -> u16 {
    let mut copy = header.to_vec();
    for b in copy.iter_mut().skip(10).take(2) {
        *b = 0;
    }
    csum16(&copy)
}

/// bmv2 `xor16`: XOR of the buffer's big-endian 16-bit words; a trailing odd
/// byte is the high byte of a zero-padded last word.
pub fn xor16(data: &[u8]) -> u16 {
    let mut acc = 0u16;
    for chunk in data.chunks(2) {
        let mut word = [0u8; 2];
        word[..chunk.len()].copy_from_slice(chunk);
        acc ^= u16::from_be_bytes(word);
    }
    acc
}

/// bmv2 `xor32`: XOR of big-endian 32-bit words; a short tail is
/// left-aligned in a zero-padded last word (`[a, b]` counts as `0xaabb0000`).
pub fn xor32(data: &[u8]) -> u32 {
    let mut acc = 0u32;
    for chunk in data.chunks(4) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        acc ^= u32::from_be_bytes(word);
    }
    acc
}

/// bmv2 `identity`: the first `min(8, len)` bytes read as a big-endian
/// number. Longer inputs are *not* truncated to their low bytes: bytes past
/// the eighth are ignored. Narrowing to the destination happens only when
/// the result is stored in a field.
pub fn identity(data: &[u8]) -> u64 {
    data.iter().take(8).fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// simple_switch's `hash_ex` (registered by the simple_switch target, not by
/// the bmv2 core): an FNV-1 style 32-bit mix followed by a final avalanche.
///
/// bmv2 XORs each byte as a C `char`, which is signed on x86, so bytes
/// 0x80..=0xFF are sign-extended to 32 bits before the XOR; this replicates
/// that.
pub fn hash_ex(data: &[u8]) -> u32 {
    let mut h: u32 = 2_166_136_261;
    for &b in data {
        let sign_extended = i32::from(b as i8) as u32;
        h = (h ^ sign_extended).wrapping_mul(16_777_619);
    }
    h = h.wrapping_add(h << 13);
    h ^= h >> 7;
    h = h.wrapping_add(h << 3);
    h ^= h >> 17;
    h = h.wrapping_add(h << 5);
    h
}

/// The Internet checksum of the concatenation of byte ranges of `bytes`.
///
/// One's complement sums do not depend on where the words start as long as
/// bytes keep their parity, so each range is summed on its own and a range
/// starting at an odd position of the concatenation counts byte-swapped
/// (RFC 1071, section 2).
pub fn csum16_ranges(bytes: &[u8], ranges: &[(u32, u32)]) -> u16 {
    let mut total: u64 = 0;
    let mut odd = false;
    for (a, b) in ranges {
        let r = &bytes[*a as usize..*b as usize];
        let mut sum = sum_words(r);
        if odd {
            sum = u64::from(fold16(sum).swap_bytes());
        }
        total = add_carry(total, sum);
        odd ^= r.len() % 2 == 1;
    }
    !fold16(total)
}

/// Adds with end-around carry: the sum stays the same modulo 2^64 - 1, and so
/// modulo 2^16 - 1.
#[inline(always)]
fn add_carry(a: u64, b: u64) -> u64 {
    let (t, carry) = a.overflowing_add(b);
    t + carry as u64
}

/// A value congruent, modulo 2^16 - 1, to the one's complement sum of the
/// big-endian 16-bit words of `r` (an odd last byte padded with zero). A
/// big-endian 64-bit word is congruent to the sum of its four 16-bit words.
#[inline(always)]
fn sum_words(r: &[u8]) -> u64 {
    let mut sum: u64 = 0;
    let mut i = 0;
    while let Some(w) = r.get(i..i + 8) {
        sum = add_carry(sum, u64::from_be_bytes(w.try_into().expect("8 bytes")));
        i += 8;
    }
    if let Some(w) = r.get(i..i + 4) {
        sum = add_carry(sum, u64::from(u32::from_be_bytes(w.try_into().expect("4 bytes"))));
        i += 4;
    }
    if let Some(w) = r.get(i..i + 2) {
        sum = add_carry(sum, u64::from(u16::from_be_bytes([w[0], w[1]])));
        i += 2;
    }
    if let Some(b) = r.get(i) {
        sum = add_carry(sum, u64::from(*b) << 8);
    }
    sum
}

/// Folds a sum into 16 bits with end-around carry.
///
/// Every step keeps the value modulo 2^16 - 1, which divides 2^32 - 1, so
/// the fold runs in a fixed number of steps.
#[inline]
fn fold16(x: u64) -> u16 {
    let mut y = (x & 0xffff_ffff) + (x >> 32);
    y = (y & 0xffff_ffff) + (y >> 32);
    let mut z = (y & 0xffff) + (y >> 16);
    z = (z & 0xffff) + (z >> 16);
    z = (z & 0xffff) + (z >> 16);
    z as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model of bmv2's cksum16 as it runs on a little-endian host: sums of
    /// native-endian 8/4/2/1-byte loads with end-around carry, fold, invert,
    /// then byte-swap. Written from its description to cross-check `csum16`.
    fn bmv2_style_cksum16(data: &[u8]) -> u16 {
        fn add(sum: &mut u64, s: u64) {
            *sum = sum.wrapping_add(s);
            if *sum < s {
                *sum += 1;
            }
        }
        let mut sum = 0u64;
        let mut rest = data;
        while rest.len() >= 8 {
            add(&mut sum, u64::from_le_bytes(rest[..8].try_into().unwrap()));
            rest = &rest[8..];
        }
        if rest.len() & 4 != 0 {
            add(&mut sum, u64::from(u32::from_le_bytes(rest[..4].try_into().unwrap())));
            rest = &rest[4..];
        }
        if rest.len() & 2 != 0 {
            add(&mut sum, u64::from(u16::from_le_bytes([rest[0], rest[1]])));
            rest = &rest[2..];
        }
        if rest.len() & 1 != 0 {
            add(&mut sum, u64::from(rest[0]));
        }
        let t2 = (sum >> 32) as u32;
        let mut t1 = (sum as u32).wrapping_add(t2);
        if t1 < t2 {
            t1 += 1;
        }
        let t4 = (t1 >> 16) as u16;
        let mut t3 = (t1 as u16).wrapping_add(t4);
        if t3 < t4 {
            t3 += 1;
        }
        (!t3).swap_bytes()
    }

    #[test]
    fn csum16_rfc1071_example() {
        // RFC 1071 section 3: words 0001 f203 f4f5 f6f7 sum to ddf2
        // (with end-around carry), so the checksum is !ddf2 = 220d.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(csum16(&data), 0x220d);
    }

    #[test]
    fn csum16_real_ipv4_header() {
        // A real IPv4 header (Wikipedia's worked example) whose checksum is b861.
        let mut hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(ipv4_header_checksum(&hdr), 0xb861);
        // Including the correct checksum, the whole header sums to 0xffff.
        assert_eq!(csum16(&hdr), 0x0000);
        hdr[10] = 0;
        hdr[11] = 0;
        assert_eq!(csum16(&hdr), 0xb861);
    }

    #[test]
    fn csum16_odd_length_and_zero_cases() {
        // Odd byte is the high half of a zero-padded word.
        assert_eq!(csum16(&[0x12]), !0x1200);
        assert_eq!(csum16(&[0x12, 0x34, 0x56]), !(0x1234u16 + 0x5600));
        assert_eq!(csum16(&[]), 0xffff);
        assert_eq!(csum16(&[0; 7]), 0xffff);
        assert_eq!(csum16(&[0xff, 0xff]), 0x0000);
        assert_eq!(csum16(&[0xff, 0xff, 0xff, 0xff]), 0x0000);
    }

    #[test]
    fn csum16_matches_bmv2_little_endian_algorithm() {
        let mut s = 99u64;
        for len in 0..70 {
            for fill in 0..4 {
                let data: Vec<u8> = (0..len)
                    .map(|_| {
                        s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        match fill {
                            0 => (s >> 56) as u8,
                            1 => 0,
                            2 => 0xff,
                            _ => ((s >> 56) as u8) | 0xf0,
                        }
                    })
                    .collect();
                assert_eq!(csum16(&data), bmv2_style_cksum16(&data), "{data:02x?}");
            }
        }
    }

    #[test]
    fn xor_folds() {
        assert_eq!(xor16(&[]), 0);
        assert_eq!(xor16(&[0x12, 0x34]), 0x1234);
        assert_eq!(xor16(&[0x12, 0x34, 0x56, 0x78]), 0x1234 ^ 0x5678);
        // Odd tail is left-aligned: [ab] -> 0xab00.
        assert_eq!(xor16(&[0x12, 0x34, 0xab]), 0x1234 ^ 0xab00);
        assert_eq!(xor16(&[0xab]), 0xab00);
        assert_eq!(xor32(&[0xab, 0xcd]), 0xabcd_0000);
        assert_eq!(xor32(&[1, 2, 3, 4, 5, 6, 7, 8, 9]), 0x0102_0304 ^ 0x0506_0708 ^ 0x0900_0000);
    }

    #[test]
    fn identity_uses_first_eight_bytes() {
        assert_eq!(identity(&[]), 0);
        assert_eq!(identity(&[0xab]), 0xab);
        assert_eq!(identity(&[0x12, 0x34, 0x56]), 0x0012_3456);
        assert_eq!(identity(&[1, 2, 3, 4, 5, 6, 7, 8]), 0x0102_0304_0506_0708);
        assert_eq!(identity(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]), 0x0102_0304_0506_0708);
    }

    #[test]
    fn hash_ex_values() {
        // Expected values produced by compiling simple_switch's hash_ex
        // with gcc on x86-64 (signed char).
        assert_eq!(hash_ex(b""), 0x5902_879e);
        assert_eq!(hash_ex(b"123456789"), 0xaf67_fb84);
        assert_eq!(hash_ex(&[0x80, 0xff, 0x7f]), 0x4dd0_1827);
    }

    #[test]
    fn csum16_ranges_equals_the_checksum_of_the_concatenation() {
        let bytes: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        let cases: &[&[(u32, u32)]] =
            &[&[(0, 20)], &[(0, 10), (12, 20)], &[(1, 4), (7, 8), (9, 30)], &[(3, 3)], &[(5, 6), (6, 23), (40, 63)]];
        for ranges in cases {
            let cat: Vec<u8> =
                ranges.iter().flat_map(|(a, b)| bytes[*a as usize..*b as usize].iter().copied()).collect();
            assert_eq!(csum16_ranges(&bytes, ranges), csum16(&cat), "{ranges:?}");
        }
        assert_eq!(csum16_ranges(&[0u8; 4], &[(0, 4)]), 0xffff);
        assert_eq!(csum16_ranges(&[0xff; 4], &[(0, 4)]), 0);
        assert_eq!(csum16_ranges(&[0xff; 64], &[(0, 64)]), 0);
        assert_eq!(super::fold16(u64::MAX), 0xffff);
        assert_eq!(super::fold16(0x1_0000), 1);
    }
}
