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
    // Four words per step with the salt advanced by additions (i·GOLDEN + GOLDEN = (i+1)·GOLDEN):
    // the same sum as one word at a time, with independent multiply chains in flight.
    let word = |w: &[u8]| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
    let mut sums = [0u64; 4];
    let mut salt = word_offset.wrapping_mul(GOLDEN);
    let mut blocks = data.chunks_exact(32);
    for block in &mut blocks {
        for (lane, sum) in sums.iter_mut().enumerate() {
            let s = salt.wrapping_add((lane as u64).wrapping_mul(GOLDEN));
            *sum = sum.wrapping_add(mix64(word(&block[lane * 8..lane * 8 + 8]) ^ s));
        }
        salt = salt.wrapping_add(GOLDEN.wrapping_mul(4));
    }
    let mut sum = sums.iter().fold(0u64, |acc, s| acc.wrapping_add(*s));
    let mut words = blocks.remainder().chunks_exact(8);
    for w in &mut words {
        sum = sum.wrapping_add(mix64(word(w) ^ salt));
        salt = salt.wrapping_add(GOLDEN);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut last = [0u8; 8];
        last[..tail.len()].copy_from_slice(tail);
        sum = sum.wrapping_add(mix64(u64::from_le_bytes(last) ^ salt));
    }
    sum
}

/// `partial` on up to `threads` threads (pieces of whole words, at least `MIN_PIECE` bytes each):
/// the same value, for large buffers on the host.
pub fn partial_parallel(data: &[u8], word_offset: u64, threads: usize) -> u64 {
    const MIN_PIECE: usize = 4 << 20;
    let threads = threads.min(data.len() / MIN_PIECE).max(1);
    if threads == 1 {
        return partial(data, word_offset);
    }
    let piece = data.len().div_ceil(threads).div_ceil(8) * 8;
    std::thread::scope(|scope| {
        let handles: Vec<_> = data
            .chunks(piece)
            .enumerate()
            .map(|(i, part)| {
                let offset = word_offset.wrapping_add((i * piece / 8) as u64);
                scope.spawn(move || partial(part, offset))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .fold(0u64, u64::wrapping_add)
    })
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
    fn parallel_and_unrolled_sums_match_one_word_at_a_time() {
        let data: Vec<u8> = (0..(9u32 << 20) + 13)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        let slow = |d: &[u8], mut index: u64| {
            let mut sum = 0u64;
            for w in d.chunks(8) {
                let mut b = [0u8; 8];
                b[..w.len()].copy_from_slice(w);
                sum = sum.wrapping_add(mix64(u64::from_le_bytes(b) ^ index.wrapping_mul(GOLDEN)));
                index += 1;
            }
            sum
        };
        for (len, offset) in [
            (0usize, 0u64),
            (5, 3),
            (31, 1),
            (32, 0),
            (33, 7),
            (1000, 5),
            (data.len(), 11),
        ] {
            let d = &data[..len];
            assert_eq!(partial(d, offset), slow(d, offset), "{len} {offset}");
            assert_eq!(
                partial_parallel(d, offset, 3),
                slow(d, offset),
                "{len} {offset}"
            );
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
