// The C ABI of the monarch-runtime bridge: what the Rust runtime calls (through rocm_compat).
// Written once in CUDA; the ROCm build hipifies it out of tree. Keep it plain C.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// mr-sum64 checksum of `nbytes` bytes at device address `data` (see docs/checksum.md):
//   word_i = i-th 8-byte little-endian word, the tail zero-padded
//   sum    = sum over i of mix64(word_i ^ (i * 0x9E3779B97F4A7C15)) modulo 2^64
//   result = mix64(sum ^ nbytes), mix64 being the splitmix64 finalizer.
// The reduction is a wrapping sum, so any order of evaluation gives the same bits.
// Blocks until the result is in *result (host memory).
cudaError_t mr_checksum_device(const void* data, size_t nbytes, uint64_t* result, cudaStream_t stream);

// The unfinalised part of mr-sum64 over `nbytes` bytes at device address `data` that start at word
// `word_offset` of a larger buffer: sum over i of mix64(word_i ^ ((word_offset + i) * 0x9E3779B97F4A7C15))
// modulo 2^64, the tail zero-padded. Partial sums of consecutive 8-byte-aligned pieces add up (wrapping)
// to the whole buffer's sum; the checksum is then mix64(sum ^ total_nbytes). This lets a receiver verify
// a buffer chunk by chunk as it arrives. Blocks until the sum is in *sum (host memory).
cudaError_t mr_checksum_partial(const void* data, size_t nbytes, uint64_t word_offset, uint64_t* sum,
                                cudaStream_t stream);

// Collective library (NCCL or RCCL), loaded with dlopen on first use. The ABI types come from the
// real header; see docs/collectives.md for why it is loaded at run time.
// Returns 0 when loaded; otherwise writes a one-line reason into `error` and returns -1.
int mr_collective_load(char* error, size_t error_len);
// The soname or path the bridge was built to load (e.g. "libnccl.so.2").
const char* mr_collective_soname(void);

#ifdef __cplusplus
}
#endif
