// CUDA functions HIP lacks, for HIP, in families (each a `// @family KIND` line, then its functions):
//
// - simd: CUDA's SIMD-in-a-word intrinsics (__vadd2, __vsub4, __vcmpeq4, __vsads2, ...), which HIP has none of
//   (HIP 5.2, 6.4 and 7.2 declare none; HIPIFY 7.2 lists them as unsupported). Written for monarch-runtime from the
//   semantics the CUDA Math API documents ("SIMD Intrinsics"): a 32-bit word holds two 16-bit lanes (the ...2
//   functions) or four 8-bit lanes (...4); each function works lane by lane and packs the lanes back, lane 0 in the
//   low bits. Signed lanes are two's complement; "saturation" clamps to the lane's range. Tested on the host against
//   a reference of those semantics, exhaustively on byte lanes (tests/hipify/test_simd.py), and compiled for the
//   device with HIP 5.2, 6.4 and 7.2.
// - cache-hint: CUDA's loads and stores with cache hints (CUDA C++ Programming Guide, "Load Functions Using Cache
//   Hints": __ldcg, __ldca, __ldcs, __ldlu, __ldcv; "Store Functions Using Cache Hints": __stwb, __stcg, __stcs,
//   __stwt), which CUDA defines for the integer and floating types, their vector types, __half(2) and
//   __nv_bfloat16(2). HIP 5.2, 6.4 and 7.2 declare __ldcg, __ldca and __ldcs for __half and __half2 only (as
//   `return *ptr;`, hip/amd_detail/amd_hip_fp16.h) and none of the others. Here each is a template, a plain load or
//   store: the hint only tunes the cache, it changes no result. HIP's own (non-template) __half overloads, and a
//   project's own, are chosen before the template where they match.
// - cg-reduce: CUDA's <cooperative_groups/reduce.h> (CUDA C++ Programming Guide, Cooperative Groups, "reduce"):
//   cooperative_groups::reduce(group, val, op) for a thread_block_tile or a coalesced_group, and the function objects
//   plus, less, greater, bit_and, bit_or, bit_xor. HIP 5.2, 6.4 and 7.2 have no such header and declare none of them
//   (hip/amd_detail/amd_hip_cooperative_groups.h). Built on the group's shfl_down and shfl, which HIP's tiles and
//   coalesced_group have in all three; the shuffle pattern is run on the host over a mock group
//   (tests/hipify/test_cg_reduce.py). An include wants this block (data/cuda_only_headers.tsv, compat column), not a
//   name. reduce_update_async/reduce_store_async and <cooperative_groups/scan.h> are not provided.
//
// `python -m tools hipify` writes the functions a tree uses (and does not define itself) into hipify_compat.h at the
// top of its output directory and includes it in the files that use them. They are __host__ __device__ and
// static: each translation unit gets its own copy, so they never clash at link time.
#ifndef HIPIFY_COMPAT_H
#define HIPIFY_COMPAT_H

#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define HIPIFY_COMPAT_FN static __host__ __device__ __forceinline__
#else
#define HIPIFY_COMPAT_FN static inline
#endif
#ifdef __cplusplus
// T itself, in a context that deduces nothing: a store's value converts to the pointer's type, as CUDA's overloads
// for each type convert it (__stcs(float_ptr, 0.0) stores a float).
template <typename T>
struct hipify_compat_same {
  typedef T type;
};
#endif

// Lane i of x, `bits` (8 or 16) wide: unsigned, or sign-extended.
HIPIFY_COMPAT_FN int hipify_simd_lane_u(unsigned int x, int i, int bits) {
  return (int)((x >> (i * bits)) & ((1u << bits) - 1u));
}
HIPIFY_COMPAT_FN int hipify_simd_lane_s(unsigned int x, int i, int bits) {
  const int half = 1 << (bits - 1);
  return (hipify_simd_lane_u(x, i, bits) ^ half) - half;
}
HIPIFY_COMPAT_FN int hipify_simd_abs(int v) { return v < 0 ? -v : v; }
HIPIFY_COMPAT_FN int hipify_simd_min(int a, int b) { return a < b ? a : b; }
HIPIFY_COMPAT_FN int hipify_simd_max(int a, int b) { return a > b ? a : b; }
HIPIFY_COMPAT_FN int hipify_simd_clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }
// (a + b) / 2 with ties rounded away from zero (C's division truncates towards zero)
HIPIFY_COMPAT_FN int hipify_simd_avg_away(int sum) { return (sum + (sum >= 0 ? 1 : -1)) / 2; }

// The result of a lane-wise function: each lane's value, truncated to the lane, at its place. In EXPR, HIPIFY_S(x) and
// HIPIFY_U(x) are lane i of x (signed / unsigned); simd_lo_, simd_hi_ and simd_umax_ the lane's limits.
#define HIPIFY_SIMD_LANES(BITS, EXPR)                                                    \
  unsigned int hipify_simd_r = 0;                                                       \
  for (int i = 0; i < 32 / (BITS); ++i) {                                               \
    const int bits_ = (BITS);                                                           \
    const int simd_lo_ = -(1 << (bits_ - 1)), simd_hi_ = (1 << (bits_ - 1)) - 1;        \
    const int simd_umax_ = (1 << bits_) - 1;                                            \
    (void)simd_lo_, (void)simd_hi_;                                                     \
    hipify_simd_r |= ((unsigned int)(EXPR) & (unsigned int)simd_umax_) << (bits_ * i); \
  }                                                                                     \
  return hipify_simd_r
#define HIPIFY_S(x) hipify_simd_lane_s((x), i, bits_)
#define HIPIFY_U(x) hipify_simd_lane_u((x), i, bits_)
// @family simd
// @begin __vabs2
// __vabs2: per 16-bit lane, absolute value of each signed lane, with wrap-around (the most negative value stays).
HIPIFY_COMPAT_FN unsigned int __vabs2(unsigned int a) { HIPIFY_SIMD_LANES(16, hipify_simd_abs(HIPIFY_S(a))); }
// @end
// @begin __vabs4
// __vabs4: per 8-bit lane, absolute value of each signed lane, with wrap-around (the most negative value stays).
HIPIFY_COMPAT_FN unsigned int __vabs4(unsigned int a) { HIPIFY_SIMD_LANES(8, hipify_simd_abs(HIPIFY_S(a))); }
// @end
// @begin __vabsdiffs2
// __vabsdiffs2: per 16-bit lane, absolute difference of the signed lanes (as an unsigned lane).
HIPIFY_COMPAT_FN unsigned int __vabsdiffs2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_abs(HIPIFY_S(a) - HIPIFY_S(b))); }
// @end
// @begin __vabsdiffs4
// __vabsdiffs4: per 8-bit lane, absolute difference of the signed lanes (as an unsigned lane).
HIPIFY_COMPAT_FN unsigned int __vabsdiffs4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_abs(HIPIFY_S(a) - HIPIFY_S(b))); }
// @end
// @begin __vabsdiffu2
// __vabsdiffu2: per 16-bit lane, absolute difference of the unsigned lanes.
HIPIFY_COMPAT_FN unsigned int __vabsdiffu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_abs(HIPIFY_U(a) - HIPIFY_U(b))); }
// @end
// @begin __vabsdiffu4
// __vabsdiffu4: per 8-bit lane, absolute difference of the unsigned lanes.
HIPIFY_COMPAT_FN unsigned int __vabsdiffu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_abs(HIPIFY_U(a) - HIPIFY_U(b))); }
// @end
// @begin __vabsss2
// __vabsss2: per 16-bit lane, absolute value of each signed lane, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vabsss2(unsigned int a) { HIPIFY_SIMD_LANES(16, hipify_simd_clamp(hipify_simd_abs(HIPIFY_S(a)), simd_lo_, simd_hi_)); }
// @end
// @begin __vabsss4
// __vabsss4: per 8-bit lane, absolute value of each signed lane, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vabsss4(unsigned int a) { HIPIFY_SIMD_LANES(8, hipify_simd_clamp(hipify_simd_abs(HIPIFY_S(a)), simd_lo_, simd_hi_)); }
// @end
// @begin __vadd2
// __vadd2: per 16-bit lane, sum of the lanes, with wrap-around.
HIPIFY_COMPAT_FN unsigned int __vadd2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_U(a) + HIPIFY_U(b)); }
// @end
// @begin __vadd4
// __vadd4: per 8-bit lane, sum of the lanes, with wrap-around.
HIPIFY_COMPAT_FN unsigned int __vadd4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_U(a) + HIPIFY_U(b)); }
// @end
// @begin __vaddss2
// __vaddss2: per 16-bit lane, sum of the signed lanes, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vaddss2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_clamp(HIPIFY_S(a) + HIPIFY_S(b), simd_lo_, simd_hi_)); }
// @end
// @begin __vaddss4
// __vaddss4: per 8-bit lane, sum of the signed lanes, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vaddss4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_clamp(HIPIFY_S(a) + HIPIFY_S(b), simd_lo_, simd_hi_)); }
// @end
// @begin __vaddus2
// __vaddus2: per 16-bit lane, sum of the unsigned lanes, with unsigned saturation.
HIPIFY_COMPAT_FN unsigned int __vaddus2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_clamp(HIPIFY_U(a) + HIPIFY_U(b), 0, simd_umax_)); }
// @end
// @begin __vaddus4
// __vaddus4: per 8-bit lane, sum of the unsigned lanes, with unsigned saturation.
HIPIFY_COMPAT_FN unsigned int __vaddus4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_clamp(HIPIFY_U(a) + HIPIFY_U(b), 0, simd_umax_)); }
// @end
// @begin __vavgs2
// __vavgs2: per 16-bit lane, average of the signed lanes, ties rounded away from zero.
HIPIFY_COMPAT_FN unsigned int __vavgs2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_avg_away(HIPIFY_S(a) + HIPIFY_S(b))); }
// @end
// @begin __vavgs4
// __vavgs4: per 8-bit lane, average of the signed lanes, ties rounded away from zero.
HIPIFY_COMPAT_FN unsigned int __vavgs4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_avg_away(HIPIFY_S(a) + HIPIFY_S(b))); }
// @end
// @begin __vavgu2
// __vavgu2: per 16-bit lane, average of the unsigned lanes, ties rounded upward.
HIPIFY_COMPAT_FN unsigned int __vavgu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, (HIPIFY_U(a) + HIPIFY_U(b) + 1) >> 1); }
// @end
// @begin __vavgu4
// __vavgu4: per 8-bit lane, average of the unsigned lanes, ties rounded upward.
HIPIFY_COMPAT_FN unsigned int __vavgu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, (HIPIFY_U(a) + HIPIFY_U(b) + 1) >> 1); }
// @end
// @begin __vcmpeq2
// __vcmpeq2: per 16-bit lane, all ones in each lane where a == b, else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpeq2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_S(a) == HIPIFY_S(b))); }
// @end
// @begin __vcmpeq4
// __vcmpeq4: per 8-bit lane, all ones in each lane where a == b, else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpeq4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_S(a) == HIPIFY_S(b))); }
// @end
// @begin __vcmpges2
// __vcmpges2: per 16-bit lane, all ones in each lane where a >= b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpges2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_S(a) >= HIPIFY_S(b))); }
// @end
// @begin __vcmpges4
// __vcmpges4: per 8-bit lane, all ones in each lane where a >= b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpges4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_S(a) >= HIPIFY_S(b))); }
// @end
// @begin __vcmpgeu2
// __vcmpgeu2: per 16-bit lane, all ones in each lane where a >= b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpgeu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_U(a) >= HIPIFY_U(b))); }
// @end
// @begin __vcmpgeu4
// __vcmpgeu4: per 8-bit lane, all ones in each lane where a >= b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpgeu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_U(a) >= HIPIFY_U(b))); }
// @end
// @begin __vcmpgts2
// __vcmpgts2: per 16-bit lane, all ones in each lane where a > b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpgts2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_S(a) > HIPIFY_S(b))); }
// @end
// @begin __vcmpgts4
// __vcmpgts4: per 8-bit lane, all ones in each lane where a > b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpgts4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_S(a) > HIPIFY_S(b))); }
// @end
// @begin __vcmpgtu2
// __vcmpgtu2: per 16-bit lane, all ones in each lane where a > b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpgtu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_U(a) > HIPIFY_U(b))); }
// @end
// @begin __vcmpgtu4
// __vcmpgtu4: per 8-bit lane, all ones in each lane where a > b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpgtu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_U(a) > HIPIFY_U(b))); }
// @end
// @begin __vcmples2
// __vcmples2: per 16-bit lane, all ones in each lane where a <= b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmples2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_S(a) <= HIPIFY_S(b))); }
// @end
// @begin __vcmples4
// __vcmples4: per 8-bit lane, all ones in each lane where a <= b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmples4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_S(a) <= HIPIFY_S(b))); }
// @end
// @begin __vcmpleu2
// __vcmpleu2: per 16-bit lane, all ones in each lane where a <= b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpleu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_U(a) <= HIPIFY_U(b))); }
// @end
// @begin __vcmpleu4
// __vcmpleu4: per 8-bit lane, all ones in each lane where a <= b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpleu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_U(a) <= HIPIFY_U(b))); }
// @end
// @begin __vcmplts2
// __vcmplts2: per 16-bit lane, all ones in each lane where a < b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmplts2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_S(a) < HIPIFY_S(b))); }
// @end
// @begin __vcmplts4
// __vcmplts4: per 8-bit lane, all ones in each lane where a < b (signed), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmplts4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_S(a) < HIPIFY_S(b))); }
// @end
// @begin __vcmpltu2
// __vcmpltu2: per 16-bit lane, all ones in each lane where a < b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpltu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_U(a) < HIPIFY_U(b))); }
// @end
// @begin __vcmpltu4
// __vcmpltu4: per 8-bit lane, all ones in each lane where a < b (unsigned), else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpltu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_U(a) < HIPIFY_U(b))); }
// @end
// @begin __vcmpne2
// __vcmpne2: per 16-bit lane, all ones in each lane where a != b, else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpne2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, -(HIPIFY_S(a) != HIPIFY_S(b))); }
// @end
// @begin __vcmpne4
// __vcmpne4: per 8-bit lane, all ones in each lane where a != b, else zero.
HIPIFY_COMPAT_FN unsigned int __vcmpne4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, -(HIPIFY_S(a) != HIPIFY_S(b))); }
// @end
// @begin __vhaddu2
// __vhaddu2: per 16-bit lane, average of the unsigned lanes, ties rounded toward zero.
HIPIFY_COMPAT_FN unsigned int __vhaddu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, (HIPIFY_U(a) + HIPIFY_U(b)) >> 1); }
// @end
// @begin __vhaddu4
// __vhaddu4: per 8-bit lane, average of the unsigned lanes, ties rounded toward zero.
HIPIFY_COMPAT_FN unsigned int __vhaddu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, (HIPIFY_U(a) + HIPIFY_U(b)) >> 1); }
// @end
// @begin __vmaxs2
// __vmaxs2: per 16-bit lane, maximum of the signed lanes.
HIPIFY_COMPAT_FN unsigned int __vmaxs2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_max(HIPIFY_S(a), HIPIFY_S(b))); }
// @end
// @begin __vmaxs4
// __vmaxs4: per 8-bit lane, maximum of the signed lanes.
HIPIFY_COMPAT_FN unsigned int __vmaxs4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_max(HIPIFY_S(a), HIPIFY_S(b))); }
// @end
// @begin __vmaxu2
// __vmaxu2: per 16-bit lane, maximum of the unsigned lanes.
HIPIFY_COMPAT_FN unsigned int __vmaxu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_max(HIPIFY_U(a), HIPIFY_U(b))); }
// @end
// @begin __vmaxu4
// __vmaxu4: per 8-bit lane, maximum of the unsigned lanes.
HIPIFY_COMPAT_FN unsigned int __vmaxu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_max(HIPIFY_U(a), HIPIFY_U(b))); }
// @end
// @begin __vmins2
// __vmins2: per 16-bit lane, minimum of the signed lanes.
HIPIFY_COMPAT_FN unsigned int __vmins2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_min(HIPIFY_S(a), HIPIFY_S(b))); }
// @end
// @begin __vmins4
// __vmins4: per 8-bit lane, minimum of the signed lanes.
HIPIFY_COMPAT_FN unsigned int __vmins4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_min(HIPIFY_S(a), HIPIFY_S(b))); }
// @end
// @begin __vminu2
// __vminu2: per 16-bit lane, minimum of the unsigned lanes.
HIPIFY_COMPAT_FN unsigned int __vminu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_min(HIPIFY_U(a), HIPIFY_U(b))); }
// @end
// @begin __vminu4
// __vminu4: per 8-bit lane, minimum of the unsigned lanes.
HIPIFY_COMPAT_FN unsigned int __vminu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_min(HIPIFY_U(a), HIPIFY_U(b))); }
// @end
// @begin __vneg2
// __vneg2: per 16-bit lane, negation of each signed lane, with wrap-around.
HIPIFY_COMPAT_FN unsigned int __vneg2(unsigned int a) { HIPIFY_SIMD_LANES(16, -HIPIFY_S(a)); }
// @end
// @begin __vneg4
// __vneg4: per 8-bit lane, negation of each signed lane, with wrap-around.
HIPIFY_COMPAT_FN unsigned int __vneg4(unsigned int a) { HIPIFY_SIMD_LANES(8, -HIPIFY_S(a)); }
// @end
// @begin __vnegss2
// __vnegss2: per 16-bit lane, negation of each signed lane, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vnegss2(unsigned int a) { HIPIFY_SIMD_LANES(16, hipify_simd_clamp(-HIPIFY_S(a), simd_lo_, simd_hi_)); }
// @end
// @begin __vnegss4
// __vnegss4: per 8-bit lane, negation of each signed lane, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vnegss4(unsigned int a) { HIPIFY_SIMD_LANES(8, hipify_simd_clamp(-HIPIFY_S(a), simd_lo_, simd_hi_)); }
// @end
// @begin __vsads2
// __vsads2: the sum of the absolute differences of the signed lanes (16-bit lanes), as one unsigned integer.
HIPIFY_COMPAT_FN unsigned int __vsads2(unsigned int a, unsigned int b) {
  unsigned int sum = 0;
  for (int i = 0; i < 2; ++i) {
    const int bits_ = 16;
    sum += (unsigned int)(hipify_simd_abs(HIPIFY_S(a) - HIPIFY_S(b)));
  }
  return sum;
}
// @end
// @begin __vsads4
// __vsads4: the sum of the absolute differences of the signed lanes (8-bit lanes), as one unsigned integer.
HIPIFY_COMPAT_FN unsigned int __vsads4(unsigned int a, unsigned int b) {
  unsigned int sum = 0;
  for (int i = 0; i < 4; ++i) {
    const int bits_ = 8;
    sum += (unsigned int)(hipify_simd_abs(HIPIFY_S(a) - HIPIFY_S(b)));
  }
  return sum;
}
// @end
// @begin __vsadu2
// __vsadu2: the sum of the absolute differences of the unsigned lanes (16-bit lanes), as one unsigned integer.
HIPIFY_COMPAT_FN unsigned int __vsadu2(unsigned int a, unsigned int b) {
  unsigned int sum = 0;
  for (int i = 0; i < 2; ++i) {
    const int bits_ = 16;
    sum += (unsigned int)(hipify_simd_abs(HIPIFY_U(a) - HIPIFY_U(b)));
  }
  return sum;
}
// @end
// @begin __vsadu4
// __vsadu4: the sum of the absolute differences of the unsigned lanes (8-bit lanes), as one unsigned integer.
HIPIFY_COMPAT_FN unsigned int __vsadu4(unsigned int a, unsigned int b) {
  unsigned int sum = 0;
  for (int i = 0; i < 4; ++i) {
    const int bits_ = 8;
    sum += (unsigned int)(hipify_simd_abs(HIPIFY_U(a) - HIPIFY_U(b)));
  }
  return sum;
}
// @end
// @begin __vseteq2
// __vseteq2: per 16-bit lane, 1 in each lane where a == b, else 0.
HIPIFY_COMPAT_FN unsigned int __vseteq2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_S(a) == HIPIFY_S(b)); }
// @end
// @begin __vseteq4
// __vseteq4: per 8-bit lane, 1 in each lane where a == b, else 0.
HIPIFY_COMPAT_FN unsigned int __vseteq4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_S(a) == HIPIFY_S(b)); }
// @end
// @begin __vsetges2
// __vsetges2: per 16-bit lane, 1 in each lane where a >= b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetges2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_S(a) >= HIPIFY_S(b)); }
// @end
// @begin __vsetges4
// __vsetges4: per 8-bit lane, 1 in each lane where a >= b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetges4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_S(a) >= HIPIFY_S(b)); }
// @end
// @begin __vsetgeu2
// __vsetgeu2: per 16-bit lane, 1 in each lane where a >= b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetgeu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_U(a) >= HIPIFY_U(b)); }
// @end
// @begin __vsetgeu4
// __vsetgeu4: per 8-bit lane, 1 in each lane where a >= b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetgeu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_U(a) >= HIPIFY_U(b)); }
// @end
// @begin __vsetgts2
// __vsetgts2: per 16-bit lane, 1 in each lane where a > b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetgts2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_S(a) > HIPIFY_S(b)); }
// @end
// @begin __vsetgts4
// __vsetgts4: per 8-bit lane, 1 in each lane where a > b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetgts4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_S(a) > HIPIFY_S(b)); }
// @end
// @begin __vsetgtu2
// __vsetgtu2: per 16-bit lane, 1 in each lane where a > b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetgtu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_U(a) > HIPIFY_U(b)); }
// @end
// @begin __vsetgtu4
// __vsetgtu4: per 8-bit lane, 1 in each lane where a > b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetgtu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_U(a) > HIPIFY_U(b)); }
// @end
// @begin __vsetles2
// __vsetles2: per 16-bit lane, 1 in each lane where a <= b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetles2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_S(a) <= HIPIFY_S(b)); }
// @end
// @begin __vsetles4
// __vsetles4: per 8-bit lane, 1 in each lane where a <= b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetles4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_S(a) <= HIPIFY_S(b)); }
// @end
// @begin __vsetleu2
// __vsetleu2: per 16-bit lane, 1 in each lane where a <= b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetleu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_U(a) <= HIPIFY_U(b)); }
// @end
// @begin __vsetleu4
// __vsetleu4: per 8-bit lane, 1 in each lane where a <= b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetleu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_U(a) <= HIPIFY_U(b)); }
// @end
// @begin __vsetlts2
// __vsetlts2: per 16-bit lane, 1 in each lane where a < b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetlts2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_S(a) < HIPIFY_S(b)); }
// @end
// @begin __vsetlts4
// __vsetlts4: per 8-bit lane, 1 in each lane where a < b (signed), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetlts4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_S(a) < HIPIFY_S(b)); }
// @end
// @begin __vsetltu2
// __vsetltu2: per 16-bit lane, 1 in each lane where a < b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetltu2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_U(a) < HIPIFY_U(b)); }
// @end
// @begin __vsetltu4
// __vsetltu4: per 8-bit lane, 1 in each lane where a < b (unsigned), else 0.
HIPIFY_COMPAT_FN unsigned int __vsetltu4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_U(a) < HIPIFY_U(b)); }
// @end
// @begin __vsetne2
// __vsetne2: per 16-bit lane, 1 in each lane where a != b, else 0.
HIPIFY_COMPAT_FN unsigned int __vsetne2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_S(a) != HIPIFY_S(b)); }
// @end
// @begin __vsetne4
// __vsetne4: per 8-bit lane, 1 in each lane where a != b, else 0.
HIPIFY_COMPAT_FN unsigned int __vsetne4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_S(a) != HIPIFY_S(b)); }
// @end
// @begin __vsub2
// __vsub2: per 16-bit lane, difference of the lanes, with wrap-around.
HIPIFY_COMPAT_FN unsigned int __vsub2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, HIPIFY_U(a) - HIPIFY_U(b)); }
// @end
// @begin __vsub4
// __vsub4: per 8-bit lane, difference of the lanes, with wrap-around.
HIPIFY_COMPAT_FN unsigned int __vsub4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, HIPIFY_U(a) - HIPIFY_U(b)); }
// @end
// @begin __vsubss2
// __vsubss2: per 16-bit lane, difference of the signed lanes, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vsubss2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_clamp(HIPIFY_S(a) - HIPIFY_S(b), simd_lo_, simd_hi_)); }
// @end
// @begin __vsubss4
// __vsubss4: per 8-bit lane, difference of the signed lanes, with signed saturation.
HIPIFY_COMPAT_FN unsigned int __vsubss4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_clamp(HIPIFY_S(a) - HIPIFY_S(b), simd_lo_, simd_hi_)); }
// @end
// @begin __vsubus2
// __vsubus2: per 16-bit lane, difference of the unsigned lanes, with unsigned saturation (0 when b > a).
HIPIFY_COMPAT_FN unsigned int __vsubus2(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(16, hipify_simd_clamp(HIPIFY_U(a) - HIPIFY_U(b), 0, simd_umax_)); }
// @end
// @begin __vsubus4
// __vsubus4: per 8-bit lane, difference of the unsigned lanes, with unsigned saturation (0 when b > a).
HIPIFY_COMPAT_FN unsigned int __vsubus4(unsigned int a, unsigned int b) { HIPIFY_SIMD_LANES(8, hipify_simd_clamp(HIPIFY_U(a) - HIPIFY_U(b), 0, simd_umax_)); }
// @end
// @family cache-hint
// @begin __ldcg
// __ldcg: load with the hint "cache at the global level (L2, not L1)"; here a plain load.
template <typename T>
HIPIFY_COMPAT_FN T __ldcg(const T* p) { return *p; }
// @end
// @begin __ldca
// __ldca: load with the hint "cache at all levels"; here a plain load.
template <typename T>
HIPIFY_COMPAT_FN T __ldca(const T* p) { return *p; }
// @end
// @begin __ldcs
// __ldcs: load with the hint "cache streaming: likely accessed once (evict first)"; here a plain load.
template <typename T>
HIPIFY_COMPAT_FN T __ldcs(const T* p) { return *p; }
// @end
// @begin __ldlu
// __ldlu: load with the hint "last use: the line will not be used again"; here a plain load.
template <typename T>
HIPIFY_COMPAT_FN T __ldlu(const T* p) { return *p; }
// @end
// @begin __ldcv
// __ldcv: load with the hint "don't cache; fetch again (volatile)"; here a plain load.
template <typename T>
HIPIFY_COMPAT_FN T __ldcv(const T* p) { return *p; }
// @end
// @begin __stwb
// __stwb: store with the hint "write back at all coherent levels"; here a plain store.
template <typename T>
HIPIFY_COMPAT_FN void __stwb(T* p, typename hipify_compat_same<T>::type v) { *p = v; }
// @end
// @begin __stcg
// __stcg: store with the hint "cache at the global level (L2, not L1)"; here a plain store.
template <typename T>
HIPIFY_COMPAT_FN void __stcg(T* p, typename hipify_compat_same<T>::type v) { *p = v; }
// @end
// @begin __stcs
// __stcs: store with the hint "cache streaming: likely accessed once (evict first)"; here a plain store.
template <typename T>
HIPIFY_COMPAT_FN void __stcs(T* p, typename hipify_compat_same<T>::type v) { *p = v; }
// @end
// @begin __stwt
// __stwt: store with the hint "write through to system memory"; here a plain store.
template <typename T>
HIPIFY_COMPAT_FN void __stwt(T* p, typename hipify_compat_same<T>::type v) { *p = v; }
// @end
// @family cg-reduce
// @begin cooperative_groups_reduce
// cooperative_groups::reduce(group, val, op) (CUDA's <cooperative_groups/reduce.h>): every thread of the group gets
// op applied over the values of all its threads, in thread-rank order (op need only be associative). The group is a
// thread_block_tile (HIP: a power of 2 up to warpSize, 64 on gfx9) or a coalesced_group (any size); other groups are a
// compile error, as in CUDA. Lane r gathers ranks [r, r + 2d) with shfl_down (d = 1, 2, 4, ...: the ranks past the
// group's end are skipped), then rank 0's total is broadcast with shfl. Values travel 32 bits at a time, so any
// trivially copyable type works (float, int, double, a struct), as CUDA's do; HIP's own shuffles take only integer
// and floating types. And the function objects plus, less (the lesser), greater (the greater), bit_and, bit_or,
// bit_xor, which HIP 5.2, 6.4 and 7.2 do not declare either.
#ifdef __cplusplus
namespace hipify_cg {
// 32-bit words of a value, shuffled through the group's int shuffle `shfl(group, word, arg)`
template <typename T>
struct words {
  int w[(sizeof(T) + 3) / 4];
};
template <typename T>
HIPIFY_COMPAT_FN words<T> to_words(const T& v) {
  static_assert(__is_trivially_copyable(T), "cooperative_groups::reduce: the value type must be trivially copyable");
  words<T> out;
  for (unsigned i = 0; i < sizeof(out.w) / sizeof(int); ++i) out.w[i] = 0;
  __builtin_memcpy(out.w, &v, sizeof(T));
  return out;
}
template <typename T>
HIPIFY_COMPAT_FN T from_words(const words<T>& in, T v) {
  __builtin_memcpy(&v, in.w, sizeof(T));
  return v;
}
template <typename G, typename T>
HIPIFY_COMPAT_FN T shfl_down(const G& g, T v, unsigned int delta) {
  words<T> in = to_words(v);
  for (unsigned i = 0; i < sizeof(in.w) / sizeof(int); ++i) in.w[i] = g.shfl_down(in.w[i], delta);
  return from_words(in, v);
}
template <typename G, typename T>
HIPIFY_COMPAT_FN T shfl(const G& g, T v, int src_rank) {
  words<T> in = to_words(v);
  for (unsigned i = 0; i < sizeof(in.w) / sizeof(int); ++i) in.w[i] = g.shfl(in.w[i], src_rank);
  return from_words(in, v);
}
// The reduction over any group with size(), thread_rank(), shfl_down(int, delta) and shfl(int, rank): after the step
// with distance d, lane r holds op over ranks [r, min(r + 2d, size)), combined lower ranks first.
template <typename G, typename T, typename Op>
HIPIFY_COMPAT_FN T reduce(const G& g, T val, Op& op) {
  const unsigned int n = g.size(), rank = g.thread_rank();
  for (unsigned int d = 1; d < n; d *= 2) {
    const T above = shfl_down(g, val, d);
    if (rank + d < n) val = op(val, above);
  }
  return shfl(g, val, 0);
}
template <typename G>
struct unsupported_group {
  static const bool value = false;
};
}  // namespace hipify_cg
#if defined(__HIPCC__)
#include <hip/hip_cooperative_groups.h>
namespace cooperative_groups {
template <typename T>
struct plus {
  __host__ __device__ T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct less {
  __host__ __device__ T operator()(T a, T b) const { return b < a ? b : a; }
};
template <typename T>
struct greater {
  __host__ __device__ T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct bit_and {
  __host__ __device__ T operator()(T a, T b) const { return a & b; }
};
template <typename T>
struct bit_or {
  __host__ __device__ T operator()(T a, T b) const { return a | b; }
};
template <typename T>
struct bit_xor {
  __host__ __device__ T operator()(T a, T b) const { return a ^ b; }
};
template <unsigned int Size, typename Parent, typename T, typename Op>
__device__ __forceinline__ auto reduce(const thread_block_tile<Size, Parent>& g, T val, Op op) -> decltype(op(val, val)) {
  return hipify_cg::reduce(g, val, op);
}
template <typename T, typename Op>
__device__ __forceinline__ auto reduce(const coalesced_group& g, T val, Op op) -> decltype(op(val, val)) {
  return hipify_cg::reduce(g, val, op);
}
// any other group (thread_block, grid_group, a tiled_partition(block, n) thread_group): CUDA rejects it too
template <typename Group, typename T, typename Op>
__device__ __forceinline__ T reduce(const Group&, T val, Op) {
  static_assert(hipify_cg::unsupported_group<Group>::value,
                "cooperative_groups::reduce takes a thread_block_tile or a coalesced_group (as in CUDA)");
  return val;
}
}  // namespace cooperative_groups
#endif
#endif
// @end

#undef HIPIFY_S
#undef HIPIFY_U
#undef HIPIFY_SIMD_LANES
#undef HIPIFY_COMPAT_FN
#endif  // HIPIFY_COMPAT_H
