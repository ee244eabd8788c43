// mr-sum64 checksum kernel. Memory-bound by design: 8-byte-aligned data is read with 16-byte vector
// loads (two words each), several in flight per thread, over a grid sized to fill the device once
// (grid-stride loop); the per-word index salt is advanced by additions instead of a multiply. The
// words outside the vectors (an 8-byte head before 16-byte alignment, the tail) and all words of
// unaligned data are read one by one. Each warp reduces with shuffles over the device's warpSize
// (32 on NVIDIA, 64 on CDNA), the warps of a block through shared memory, then one atomic add per block;
// the last block to finish writes the sum straight into pinned host memory and re-zeroes the
// accumulator, so a call is one kernel launch and one stream synchronization.
#include "bridge.h"

#include <atomic>
#include <new>

// A named namespace, not an anonymous one: nvcc names internal-linkage kernels after a hash of the
// source file's absolute path, which would make the wheel depend on where the tree was built.
namespace monarch_bridge {

__host__ __device__ inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// Threads per block (a multiple of every warpSize), and 16-byte loads issued together per thread.
constexpr int kThreads = 256;
constexpr int kUnroll = 4;

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

// The words of the piece (word i is salted with (word_offset + i) * kGolden) fall in three parts:
//   - `vectors` pairs of whole words read as 16-byte vectors: pair v holds words head + 2v and
//     head + 2v + 1, at bytes + 8 * head, which the host made 16-byte aligned;
//   - `extras` words read one by one: word 0 when head == 1, then every word from head + 2 * vectors
//     to the end (the tail, zero-padded). For unaligned data head == vectors == 0: every word.
// Each word is in exactly one part; the sum is a wrapping sum, so the order does not matter.
//
// `acc` is zero when the kernel starts and zero again when it ends; `result` (pinned host memory,
// mapped) receives the sum.
struct Accumulator {
  unsigned long long sum;    // the blocks' sums so far
  unsigned int blocks_done;  // blocks that have added theirs
};

__global__ void __launch_bounds__(kThreads)
    checksum_kernel(const unsigned char* __restrict__ bytes, size_t nbytes, uint64_t word_offset, bool aligned,
                    size_t head, size_t vectors, size_t extras, Accumulator* acc, unsigned long long* result) {
  const size_t threads = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t tid = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long local = 0;

  // The 16-byte part. `salt` is always (word_offset + head + 2v) * kGolden mod 2^64 for the pair v
  // about to be read (its second word adds one kGolden): multiplication distributes over addition
  // modulo 2^64, so moving v by `threads` pairs (2 * threads words) adds `step`.
  const ulonglong2* __restrict__ pairs = reinterpret_cast<const ulonglong2*>(bytes + 8 * head);
  const uint64_t step = 2 * static_cast<uint64_t>(threads) * kGolden;
  uint64_t salt = (word_offset + head + 2 * static_cast<uint64_t>(tid)) * kGolden;
  size_t v = tid;
  // Whole rounds: pairs v, v + threads, ..., v + (kUnroll - 1) * threads all exist; loaded first, so
  // kUnroll loads are in flight before the arithmetic.
  for (; v + (kUnroll - 1) * threads < vectors; v += kUnroll * threads) {
    ulonglong2 w[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      w[u] = pairs[v + u * threads];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      local += mix64(w[u].x ^ salt);
      local += mix64(w[u].y ^ (salt + kGolden));
      salt += step;
    }
  }
  // The rest of the pairs (fewer than kUnroll per thread).
  for (; v < vectors; v += threads) {
    const ulonglong2 w = pairs[v];
    local += mix64(w.x ^ salt);
    local += mix64(w.y ^ (salt + kGolden));
    salt += step;
  }

  // The words outside the pairs: extra k is word k for k < head, else word head + 2 * vectors + (k - head).
  for (size_t k = tid; k < extras; k += threads) {
    const size_t word = k < head ? k : 2 * vectors + k;
    local += mix64(load_word(bytes, nbytes, word, aligned) ^ ((word_offset + word) * kGolden));
  }

  // Every thread of the block gets here (no early return), so every lane of each warp is active.
  __shared__ unsigned long long warp_sums[kThreads];  // one per warp; kThreads bounds the warp count
  local = warp_sum(local);
  if (threadIdx.x % warpSize == 0) {
    warp_sums[threadIdx.x / warpSize] = local;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int warps = (blockDim.x + warpSize - 1) / warpSize;
    unsigned long long block = 0;
    for (unsigned int i = 0; i < warps; ++i) {
      block += warp_sums[i];
    }
    atomicAdd(&acc->sum, block);
    __threadfence();  // this block's sum is in before it counts itself done
    const unsigned int done = atomicAdd(&acc->blocks_done, 1u);
    if (done == gridDim.x - 1) {
      // The last block: every other block added its sum before counting itself.
      __threadfence();
      *result = atomicExch(&acc->sum, 0ULL);
      atomicExch(&acc->blocks_done, 0u);
      __threadfence_system();
    }
  }
}

// Per-device state kept for the life of the process (not freed at exit: a CUDA call in a static
// destructor could run after the runtime has shut down). Devices numbered kCachedDevices or more get
// none (their calls allocate and free their own scratch), nor do calls beyond kScratchSlots at once.
constexpr int kCachedDevices = 64;
constexpr int kScratchSlots = 32;

// The most blocks worth launching on a device: as many as can be resident at once (SMs/CUs times the
// kernel's occupancy), so one wave covers the device and the grid-stride loop does the rest.
// 0 = not yet known.
std::atomic<int> g_grid_blocks[kCachedDevices];

cudaError_t grid_blocks(int device, int* blocks) {
  const bool cached = device >= 0 && device < kCachedDevices;
  if (cached) {
    int known = g_grid_blocks[device].load(std::memory_order_relaxed);
    if (known > 0) {
      *blocks = known;
      return cudaSuccess;
    }
  }
  int units = 0;
  int per_unit = 0;
  cudaError_t err = cudaDeviceGetAttribute(&units, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return err;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_unit, checksum_kernel, kThreads, 0);
  if (err != cudaSuccess) return err;
  int n = (units > 0 ? units : 1) * (per_unit > 0 ? per_unit : 1);
  if (cached) g_grid_blocks[device].store(n, std::memory_order_relaxed);
  *blocks = n;
  return cudaSuccess;
}

// The accumulator and host result of one call. Concurrent calls (rank threads, each on its own stream)
// each take a different slot; a slot goes back to the pool only after the stream it was used on has
// been synchronized with the kernel done (which leaves the accumulator zeroed), so no queued work can
// still touch it when another call, on any stream, takes it.
struct Scratch {
  Accumulator* acc;                // device memory
  unsigned long long* host;        // pinned host memory, mapped
  unsigned long long* host_alias;  // the same, as the device sees it
};

std::atomic<Scratch*> g_scratch[kCachedDevices][kScratchSlots];

// The error to report when two steps can fail: the first one's (the later one usually follows from it).
inline cudaError_t first_error(cudaError_t first, cudaError_t then) { return first != cudaSuccess ? first : then; }

// Frees both buffers whatever happens; the first error, if any.
cudaError_t free_scratch(Scratch* s) {
  cudaError_t err = s->acc != nullptr ? cudaFree(s->acc) : cudaSuccess;
  err = first_error(err, s->host != nullptr ? cudaFreeHost(s->host) : cudaSuccess);
  delete s;
  return err;
}

// A slot for `device` (the current one); a new one is zeroed on `stream`, ahead of the kernel.
cudaError_t acquire_scratch(int device, cudaStream_t stream, Scratch** out) {
  if (device >= 0 && device < kCachedDevices) {
    for (auto& slot : g_scratch[device]) {
      Scratch* p = slot.exchange(nullptr, std::memory_order_acq_rel);
      if (p != nullptr) {
        *out = p;
        return cudaSuccess;
      }
    }
  }
  Scratch* s = new (std::nothrow) Scratch{nullptr, nullptr, nullptr};
  if (s == nullptr) return cudaErrorMemoryAllocation;
  cudaError_t err = cudaMalloc(reinterpret_cast<void**>(&s->acc), sizeof(Accumulator));
  if (err == cudaSuccess) err = cudaMallocHost(reinterpret_cast<void**>(&s->host), sizeof(*s->host));
  if (err == cudaSuccess) err = cudaHostGetDevicePointer(reinterpret_cast<void**>(&s->host_alias), s->host, 0);
  if (err == cudaSuccess) err = cudaMemsetAsync(s->acc, 0, sizeof(Accumulator), stream);
  if (err != cudaSuccess) return first_error(err, free_scratch(s));
  *out = s;
  return cudaSuccess;
}

// Only for a slot whose kernel is known to have finished (its stream synchronized) or never started.
cudaError_t release_scratch(int device, Scratch* s) {
  if (device >= 0 && device < kCachedDevices) {
    for (auto& slot : g_scratch[device]) {
      Scratch* expected = nullptr;
      if (slot.compare_exchange_strong(expected, s, std::memory_order_acq_rel)) return cudaSuccess;
    }
  }
  return free_scratch(s);  // more concurrent calls than slots: this one is not kept
}

}  // namespace monarch_bridge

using monarch_bridge::acquire_scratch;
using monarch_bridge::checksum_kernel;
using monarch_bridge::first_error;
using monarch_bridge::grid_blocks;
using monarch_bridge::kThreads;
using monarch_bridge::mix64;
using monarch_bridge::release_scratch;
using monarch_bridge::Scratch;

extern "C" cudaError_t mr_checksum_partial(const void* data, size_t nbytes, uint64_t word_offset, uint64_t* sum_out,
                                           cudaStream_t stream) {
  if (nbytes == 0) {
    // Nothing to add up; still a synchronization point, as for any other size.
    cudaError_t err = cudaStreamSynchronize(stream);
    if (err == cudaSuccess) *sum_out = 0;
    return err;
  }
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int most = 0;
  err = grid_blocks(device, &most);
  if (err != cudaSuccess) return err;

  // Split the words (see checksum_kernel): 16-byte pairs need 8-byte-aligned data; an address 8 past a
  // 16-byte boundary starts with one word read alone.
  const uintptr_t address = reinterpret_cast<uintptr_t>(data);
  const bool aligned = address % 8 == 0;
  const size_t words = (nbytes + 7) / 8;
  const size_t whole = nbytes / 8;
  size_t head = 0;
  size_t vectors = 0;
  if (aligned) {
    head = address % 16 == 0 ? 0 : 1;
    if (head > whole) head = whole;
    vectors = (whole - head) / 2;
  }
  const size_t extras = words - 2 * vectors;
  const size_t work = vectors > extras ? vectors : extras;  // per-thread items of the larger part
  const size_t wanted = (work + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < static_cast<size_t>(most) ? wanted : most);

  Scratch* scratch = nullptr;
  err = acquire_scratch(device, stream, &scratch);
  if (err != cudaSuccess) return err;
  checksum_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(data), nbytes, word_offset,
                                                   aligned, head, vectors, extras, scratch->acc,
                                                   scratch->host_alias);
  err = cudaGetLastError();
  if (err != cudaSuccess) {
    // Not launched, so the slot is as it was; make sure a new slot's zeroing has run before reuse (if the
    // stream cannot be synchronized, the slot is not reused). The launch's error is the one reported.
    cudaError_t synced = cudaStreamSynchronize(stream);
    if (synced == cudaSuccess) synced = release_scratch(device, scratch);
    return first_error(err, synced);
  }
  err = cudaStreamSynchronize(stream);
  if (err != cudaSuccess) {
    // The kernel may have stopped part way, leaving the accumulator non-zero: the slot is not reused
    // (a few bytes leaked after an error that usually leaves the device unusable anyway).
    return err;
  }
  *sum_out = static_cast<uint64_t>(*scratch->host);
  // The sum is valid; a failure to free an extra slot (more concurrent calls than slots) is still reported.
  return release_scratch(device, scratch);
}

extern "C" cudaError_t mr_checksum_device(const void* data, size_t nbytes, uint64_t* result, cudaStream_t stream) {
  uint64_t sum = 0;
  cudaError_t err = mr_checksum_partial(data, nbytes, 0, &sum, stream);
  if (err == cudaSuccess) *result = mix64(sum ^ static_cast<uint64_t>(nbytes));
  return err;
}
