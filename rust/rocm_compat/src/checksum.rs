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
const MIX1: u64 = 0xBF58_476D_1CE4_E5B9;
const MIX2: u64 = 0x94D0_49BB_1331_11EB;

/// The splitmix64 finalizer.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(MIX1);
    z = (z ^ (z >> 27)).wrapping_mul(MIX2);
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
///
/// On x86-64 it runs the widest vector form the CPU has (AVX-512: 8 words per step with a native
/// 64-bit multiply, ~4x the scalar form and memory-bound on one core; AVX2: 4 words per step, the
/// 64-bit multiply built from 32-bit ones, ~2x); the sum is order-independent, so every form gives
/// the same value as `partial_scalar` (tested).
pub fn partial(data: &[u8], word_offset: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        #[cfg(mr_avx512)]
        if x86::has_avx512() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { x86::partial_avx512(data, word_offset) };
        }
        if x86::has_avx2() {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { x86::partial_avx2(data, word_offset) };
        }
    }
    partial_scalar(data, word_offset)
}

/// `partial` without vector instructions (the definition the vector forms are tested against).
pub fn partial_scalar(data: &[u8], word_offset: u64) -> u64 {
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

/// The vector forms of `partial`: whole blocks of 4 vectors here (four independent chains), the
/// rest by `partial_scalar` with its word index.
#[cfg(target_arch = "x86_64")]
pub mod x86 {
    use super::{partial_scalar, GOLDEN, MIX1, MIX2};
    use std::arch::x86_64::*;

    /// The salts of words `base_word + first .. + first + N` of a block, as `N` lanes.
    fn salts<const N: usize>(word_offset: u64, first: u64) -> [i64; N] {
        let mut out = [0i64; N];
        for (lane, s) in out.iter_mut().enumerate() {
            *s = word_offset
                .wrapping_add(first + lane as u64)
                .wrapping_mul(GOLDEN) as i64;
        }
        out
    }

    #[cfg(mr_avx512)]
    pub fn has_avx512() -> bool {
        is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512dq")
    }

    pub fn has_avx2() -> bool {
        is_x86_feature_detected!("avx2")
    }

    /// 32 words (256 bytes) per step, in four vectors of 8 lanes.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX-512DQ (`has_avx512`).
    #[cfg(mr_avx512)]
    #[allow(clippy::incompatible_msrv)] // built only by compilers that have it (build.rs: mr_avx512)
    #[target_feature(enable = "avx512f,avx512dq")]
    pub unsafe fn partial_avx512(data: &[u8], word_offset: u64) -> u64 {
        const WORDS: usize = 32;
        let blocks = data.len() / (WORDS * 8);
        let (m1, m2) = (
            _mm512_set1_epi64(MIX1 as i64),
            _mm512_set1_epi64(MIX2 as i64),
        );
        let mut salt = [_mm512_setzero_si512(); 4];
        for (v, s) in salt.iter_mut().enumerate() {
            let l: [i64; 8] = salts(word_offset, 8 * v as u64);
            *s = _mm512_loadu_si512(l.as_ptr().cast());
        }
        let step = _mm512_set1_epi64(GOLDEN.wrapping_mul(WORDS as u64) as i64);
        let mut acc = [_mm512_setzero_si512(); 4];
        let base = data.as_ptr();
        for block in 0..blocks {
            for v in 0..4 {
                // SAFETY: block < blocks, so the 64 bytes lie within `data` (unaligned load).
                let w = _mm512_loadu_si512(base.add((block * WORDS + 8 * v) * 8).cast());
                let mut z = _mm512_xor_si512(w, salt[v]);
                z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64::<30>(z)), m1);
                z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64::<27>(z)), m2);
                z = _mm512_xor_si512(z, _mm512_srli_epi64::<31>(z));
                acc[v] = _mm512_add_epi64(acc[v], z);
                salt[v] = _mm512_add_epi64(salt[v], step);
            }
        }
        let all = _mm512_add_epi64(
            _mm512_add_epi64(acc[0], acc[1]),
            _mm512_add_epi64(acc[2], acc[3]),
        );
        let done = blocks * WORDS;
        (_mm512_reduce_add_epi64(all) as u64).wrapping_add(partial_scalar(
            &data[done * 8..],
            word_offset.wrapping_add(done as u64),
        ))
    }

    /// The low 64 bits of `a * b`, `b` given as its 32-bit halves (AVX2 has no 64-bit multiply).
    #[target_feature(enable = "avx2")]
    unsafe fn mul64(a: __m256i, b_lo: __m256i, b_hi: __m256i) -> __m256i {
        let low = _mm256_mul_epu32(a, b_lo);
        let cross = _mm256_add_epi64(
            _mm256_mul_epu32(_mm256_srli_epi64::<32>(a), b_lo),
            _mm256_mul_epu32(a, b_hi),
        );
        _mm256_add_epi64(low, _mm256_slli_epi64::<32>(cross))
    }

    /// 16 words (128 bytes) per step, in four vectors of 4 lanes.
    ///
    /// # Safety
    /// The CPU must have AVX2 (`has_avx2`).
    #[target_feature(enable = "avx2")]
    pub unsafe fn partial_avx2(data: &[u8], word_offset: u64) -> u64 {
        const WORDS: usize = 16;
        let blocks = data.len() / (WORDS * 8);
        let half = |m: u64| {
            (
                _mm256_set1_epi64x((m & 0xFFFF_FFFF) as i64),
                _mm256_set1_epi64x((m >> 32) as i64),
            )
        };
        let ((m1_lo, m1_hi), (m2_lo, m2_hi)) = (half(MIX1), half(MIX2));
        let mut salt = [_mm256_setzero_si256(); 4];
        for (v, s) in salt.iter_mut().enumerate() {
            let l: [i64; 4] = salts(word_offset, 4 * v as u64);
            *s = _mm256_loadu_si256(l.as_ptr().cast());
        }
        let step = _mm256_set1_epi64x(GOLDEN.wrapping_mul(WORDS as u64) as i64);
        let mut acc = [_mm256_setzero_si256(); 4];
        let base = data.as_ptr();
        for block in 0..blocks {
            for v in 0..4 {
                // SAFETY: block < blocks, so the 32 bytes lie within `data` (unaligned load).
                let w = _mm256_loadu_si256(base.add((block * WORDS + 4 * v) * 8).cast());
                let mut z = _mm256_xor_si256(w, salt[v]);
                z = mul64(
                    _mm256_xor_si256(z, _mm256_srli_epi64::<30>(z)),
                    m1_lo,
                    m1_hi,
                );
                z = mul64(
                    _mm256_xor_si256(z, _mm256_srli_epi64::<27>(z)),
                    m2_lo,
                    m2_hi,
                );
                z = _mm256_xor_si256(z, _mm256_srli_epi64::<31>(z));
                acc[v] = _mm256_add_epi64(acc[v], z);
                salt[v] = _mm256_add_epi64(salt[v], step);
            }
        }
        let all = _mm256_add_epi64(
            _mm256_add_epi64(acc[0], acc[1]),
            _mm256_add_epi64(acc[2], acc[3]),
        );
        let mut lanes = [0u64; 4];
        _mm256_storeu_si256(lanes.as_mut_ptr().cast(), all);
        let done = blocks * WORDS;
        lanes
            .iter()
            .fold(0u64, |a, l| a.wrapping_add(*l))
            .wrapping_add(partial_scalar(
                &data[done * 8..],
                word_offset.wrapping_add(done as u64),
            ))
    }
}

/// `partial` on up to `threads` threads (pieces of whole words, at least `MIN_PIECE` bytes each):
/// the same value, for large buffers on the host.
pub fn partial_parallel(data: &[u8], word_offset: u64, threads: usize) -> u64 {
    const MIN_PIECE: usize = 16 << 20;
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
    fn parallel_unrolled_and_vector_sums_match_one_word_at_a_time() {
        let data: Vec<u8> = (0..(9u32 << 20) + 13)
            .map(|i| (i.wrapping_mul(2654435761) >> 7) as u8)
            .collect();
        let slow = |d: &[u8], mut index: u64| {
            let mut sum = 0u64;
            for w in d.chunks(8) {
                let mut b = [0u8; 8];
                b[..w.len()].copy_from_slice(w);
                sum = sum.wrapping_add(mix64(u64::from_le_bytes(b) ^ index.wrapping_mul(GOLDEN)));
                index = index.wrapping_add(1);
            }
            sum
        };
        // Every form the CPU has, against one word at a time: lengths around the vector blocks
        // (128 and 256 bytes), starts that are not aligned in memory, large word offsets.
        type Form = fn(&[u8], u64) -> u64;
        let mut forms: Vec<(&str, Form)> = vec![("partial", partial), ("scalar", partial_scalar)];
        #[cfg(target_arch = "x86_64")]
        {
            if x86::has_avx2() {
                // SAFETY: the CPU has AVX2.
                forms.push(("avx2", |d, o| unsafe { x86::partial_avx2(d, o) }));
            }
            #[cfg(mr_avx512)]
            if x86::has_avx512() {
                // SAFETY: the CPU has AVX-512F/DQ.
                forms.push(("avx512", |d, o| unsafe { x86::partial_avx512(d, o) }));
            }
        }
        let mut cases = vec![
            (0usize, 0usize, 0u64),
            (0, 5, 3),
            (0, 31, 1),
            (0, 32, 0),
            (0, 33, 7),
            (0, 1000, 5),
            (0, data.len(), 11),
            (3, data.len() - 3, u64::MAX - 2),
        ];
        for len in [127, 128, 129, 255, 256, 257, 383, 512, 4096 + 24] {
            for start in [0, 1, 8, 13] {
                cases.push((start, len, (start * 977 + len) as u64));
            }
        }
        for (start, len, offset) in cases {
            let d = &data[start..start + len];
            let want = slow(d, offset);
            for (name, form) in &forms {
                assert_eq!(form(d, offset), want, "{name} {start} {len} {offset}");
            }
            assert_eq!(
                partial_parallel(d, offset, 3),
                want,
                "{start} {len} {offset}"
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
