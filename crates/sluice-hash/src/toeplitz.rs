//! bmv2's `toeplitz` hash (the RSS hash), with its run-time key.

/// Key of a `toeplitz` calculation, kept as big-endian 32-bit words.
///
/// bmv2 starts every `toeplitz` calculation with a 4-byte all-zero key (so
/// the hash is 0 until a key is set) and accepts only keys that are at least
/// 4 bytes long and a multiple of 4 bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToeplitzKey {
    words: Vec<u32>,
}

impl Default for ToeplitzKey {
    /// bmv2's initial key: four zero bytes.
    fn default() -> Self {
        ToeplitzKey { words: vec![0] }
    }
}

impl ToeplitzKey {
    /// Builds a key from bytes; `None` (bmv2: `INVALID_KEY`) unless the
    /// length is a non-zero multiple of 4.
    pub fn new(bytes: &[u8]) -> Option<ToeplitzKey> {
        if bytes.is_empty() || bytes.len() & 3 != 0 {
            return None;
        }
        let words = bytes.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect();
        Some(ToeplitzKey { words })
    }

    /// Computes the Toeplitz hash of `data` under this key.
    ///
    /// Input bit `p` (counting from the most significant bit of byte 0)
    /// that is set XORs in the 32 key bits starting at key bit `p`. The
    /// input is taken as big-endian 32-bit words, the last one zero-padded
    /// on the right; key bits wrap around modulo the key length (bmv2's
    /// choice for inputs longer than the key).
    pub fn hash(&self, data: &[u8]) -> u32 {
        let n = self.words.len();
        let mut result = 0u32;
        for (i, chunk) in data.chunks(4).enumerate() {
            let mut word = [0u8; 4];
            word[..chunk.len()].copy_from_slice(chunk);
            let mut input = u32::from_be_bytes(word);
            let left = u64::from(self.words[i % n]);
            let right = u64::from(self.words[(i + 1) % n]);
            let window64 = (left << 32) | right;
            while input != 0 {
                let bit = input.leading_zeros();
                result ^= (window64 >> (32 - bit)) as u32;
                input &= !(0x8000_0000u32 >> bit);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The well-known RSS verification key (Microsoft's RSS documentation).
    const RSS_KEY: [u8; 40] = [
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca,
        0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b,
        0xbe, 0xac, 0x01, 0xfa,
    ];

    #[test]
    fn rss_verification_suite() {
        let key = ToeplitzKey::new(&RSS_KEY).unwrap();
        // Source 66.9.149.187:2794, destination 161.142.100.80:1766.
        let ips = [66, 9, 149, 187, 161, 142, 100, 80];
        assert_eq!(key.hash(&ips), 0x323e_8fc2);
        let mut with_ports = ips.to_vec();
        with_ports.extend_from_slice(&2794u16.to_be_bytes());
        with_ports.extend_from_slice(&1766u16.to_be_bytes());
        assert_eq!(key.hash(&with_ports), 0x51cc_c178);
    }

    #[test]
    fn default_key_hashes_to_zero_and_bad_keys_rejected() {
        let key = ToeplitzKey::default();
        assert_eq!(key.hash(b"anything at all"), 0);
        assert!(ToeplitzKey::new(&[]).is_none());
        assert!(ToeplitzKey::new(&[1, 2, 3]).is_none());
        assert!(ToeplitzKey::new(&[1, 2, 3, 4, 5]).is_none());
    }

    #[test]
    fn short_key_wraps() {
        // With a one-word key the window for word 1 wraps back to word 0.
        let key = ToeplitzKey::new(&[0x80, 0, 0, 1]).unwrap();
        // Bit 0 set: window is the key itself.
        assert_eq!(key.hash(&[0x80, 0, 0, 0]), 0x8000_0001);
        // Bit 31 set: window = key << 31 | key >> 1 (wrapping).
        assert_eq!(key.hash(&[0, 0, 0, 1]), 0x8000_0000 | 0x4000_0000);
        // Second word uses the same key again.
        assert_eq!(key.hash(&[0, 0, 0, 0, 0x80]), 0x8000_0001);
    }
}
