// mr-sum64 checksum kernel: grid-stride loop, warp reduction with shuffles over the device's
// warpSize (32 on NVIDIA, 64 on CDNA), one atomic add per warp.
#include "bridge.h"

// A named namespace, not an anonymous one: nvcc names internal-linkage kernels after a hash of the
// source file's absolute path, which would make the wheel depend on where the tree was built.
namespace monarch_bridge {

__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// Word `word` of the data, little-endian, the tail zero-padded. Whole words of 8-byte-aligned data
// are one 64-bit load (NVIDIA and AMD GPUs are little-endian); otherwise byte by byte.
__device__ inline uint64_t load_word(const unsigned char* bytes, size_t nbytes, size_t word, bool aligned) {
  size_t start = word * 8;
  if (aligned && nbytes - start >= 8) {
    return *reinterpret_cast<const uint64_t*>(bytes + start);
  }
  uint64_t value = 0;
  size_t len = nbytes - start < 8 ? nbytes - start : 8;
  for (size_t k = 0; k < len; ++k) {
    value |= static_cast<uint64_t>(bytes[start + k]) << (8 * k);
  }
  return value;
}

__device__ inline unsigned long long warp_sum(unsigned long long value) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    value += __shfl_down_sync(__activemask(), value, offset);
  }
  return value;
}

__global__ void checksum_kernel(const unsigned char* bytes, size_t nbytes, uint64_t word_offset, bool aligned,
                                unsigned long long* out) {
  size_t words = (nbytes + 7) / 8;
  unsigned long long local = 0;
  size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words; i += stride) {
    local += mix64(load_word(bytes, nbytes, i, aligned) ^ ((word_offset + static_cast<uint64_t>(i)) * kGolden));
  }
  local = warp_sum(local);
  if (threadIdx.x % warpSize == 0) {
    atomicAdd(out, local);
  }
}

}  // namespace monarch_bridge

using monarch_bridge::checksum_kernel;
using monarch_bridge::mix64;

extern "C" cudaError_t mr_checksum_partial(const void* data, size_t nbytes, uint64_t word_offset, uint64_t* sum_out,
                                           cudaStream_t stream) {
  unsigned long long* partial = nullptr;
  cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&partial), sizeof(*partial));
  if (err != cudaSuccess) return err;
  err = cudaMemsetAsync(partial, 0, sizeof(*partial), stream);
  if (err == cudaSuccess && nbytes > 0) {
    const int threads = 256;
    size_t words = (nbytes + 7) / 8;
    size_t wanted = (words + threads - 1) / threads;
    int blocks = static_cast<int>(wanted < 1024 ? (wanted > 0 ? wanted : 1) : 1024);
    bool aligned = reinterpret_cast<uintptr_t>(data) % 8 == 0;
    checksum_kernel<<<blocks, threads, 0, stream>>>(static_cast<const unsigned char*>(data), nbytes, word_offset,
                                                    aligned, partial);
    err = cudaGetLastError();
  }
  unsigned long long sum = 0;
  if (err == cudaSuccess) err = cudaMemcpyAsync(&sum, partial, sizeof(sum), cudaMemcpyDeviceToHost, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaError_t free_err = cudaFree(partial);
  if (err == cudaSuccess) err = free_err;
  if (err == cudaSuccess) *sum_out = static_cast<uint64_t>(sum);
  return err;
}

extern "C" cudaError_t mr_checksum_device(const void* data, size_t nbytes, uint64_t* result, cudaStream_t stream) {
  uint64_t sum = 0;
  cudaError_t err = mr_checksum_partial(data, nbytes, 0, &sum, stream);
  if (err == cudaSuccess) *result = mix64(sum ^ static_cast<uint64_t>(nbytes));
  return err;
}
