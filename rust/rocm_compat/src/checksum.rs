//! mr-sum64, the host reference of the bridge's checksum kernel (csrc/checksum.cu); the two must
//! agree bit for bit (docs/checksum.md):
//!
//! ```text
//! word_i = i-th 8-byte little-endian word of the data, the tail zero-padded
//! sum    = Σ mix64(word_i ^ (i · 0x9E3779B97F4A7C15))  (mod 2^64)
//! result = mix64(sum ^ len)
//! ```
//! `mix64` is the splitmix64 finalizer. The sum is order-independent, so the GPU may reduce in any
//! order; the index salt makes it position-sensitive (swapped words change the result).

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 finalizer.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The checksum of `data`, computed on the host.
pub fn reference(data: &[u8]) -> u64 {
    finalize(partial(data, 0), data.len())
}

/// The unfinalised sum over `data`, whose first byte is word `word_offset` of a larger buffer
/// (so `data` must start at a multiple of 8 bytes into it). Partial sums of consecutive pieces add
/// up (wrapping) to the whole buffer's; `finalize` turns the total into the checksum. The bridge's
/// `mr_checksum_partial` computes the same on the device.
pub fn partial(data: &[u8], word_offset: u64) -> u64 {
    let mut sum = 0u64;
    let mut index = word_offset;
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let word = u64::from_le_bytes([
            word[0], word[1], word[2], word[3], word[4], word[5], word[6], word[7],
        ]);
        sum = sum.wrapping_add(mix64(word ^ index.wrapping_mul(GOLDEN)));
        index = index.wrapping_add(1);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut word = [0u8; 8];
        word[..tail.len()].copy_from_slice(tail);
        sum = sum.wrapping_add(mix64(u64::from_le_bytes(word) ^ index.wrapping_mul(GOLDEN)));
    }
    sum
}

/// The checksum of a buffer of `len` bytes whose partial sums add up to `sum`.
pub fn finalize(sum: u64, len: usize) -> u64 {
    mix64(sum ^ len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_small_inputs_differ() {
        assert_ne!(reference(b""), reference(b"\0"));
        assert_ne!(reference(b"a"), reference(b"b"));
    }

    #[test]
    fn position_sensitive() {
        let a: Vec<u8> = (0..64u8).collect();
        let mut b = a.clone();
        b.swap(0, 8); // swap bytes of two different words
        assert_ne!(reference(&a), reference(&b));
    }

    #[test]
    fn partial_sums_of_pieces_add_up() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for cut in [0usize, 8, 496, 992] {
            let sum =
                partial(&data[..cut], 0).wrapping_add(partial(&data[cut..], (cut / 8) as u64));
            assert_eq!(finalize(sum, data.len()), reference(&data));
        }
    }

    #[test]
    fn known_values() {
        // Pinned: the device kernel, the host reference and every release must agree on these.
        let bytes: Vec<u8> = (0..251u8).collect();
        assert_eq!(reference(&bytes), 0xc16f_1754_205d_c8c5);
        assert_eq!(reference(b"monarch"), 0xcc31_2e80_1ca2_d09b);
    }

    #[test]
    fn splitmix_known_value() {
        // splitmix64 finalizer of 0 is 0; of 1 is a published constant.
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0x5692_161D_100B_05E5);
    }
}
