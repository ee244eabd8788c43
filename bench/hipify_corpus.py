"""The generated hipify corpus: bench/hipify_bench.py's default input and the golden tests' generated tree
(tests/hipify/frozen.py). Its bytes are part of those goldens: changing a template, the seed or the inputs it
copies (csrc/, tests/hipify/golden/*.cu) changes the generated files, and the goldens must then be written again
(``python tests/hipify/frozen.py --write``) and reviewed.

The files are assembled from the project's own CUDA and templates of typical kernels and host code (runtime,
driver, cuBLAS/cuRAND/cuFFT, NCCL; warp reductions with the usual 32-lane assumptions), ~8 KB each, with one
Latin-1 file in 40: much denser in CUDA API names and hazards than real code.
"""

from __future__ import annotations

import random
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

TEMPLATES = [
    """// {name}: grid-stride kernel with a warp reduction
#include <cuda_runtime.h>
#include <cstdio>
#include "common_{idx}.h"

#define CUDA_CHECK(x) do {{ cudaError_t e_ = (x); if (e_ != cudaSuccess) {{ \\
    fprintf(stderr, "CUDA error %s at %s:%d\\n", cudaGetErrorString(e_), __FILE__, __LINE__); }} }} while (0)

template <typename T, int BLOCK>
__global__ void {name}_kernel(const T* __restrict__ in, T* __restrict__ out, size_t n) {{
  __shared__ T smem[BLOCK / 32];
  T acc = T(0);
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {{
    acc += in[i] * T(2);
  }}
  for (int off = warpSize / 2; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffff, acc, off);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) smem[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {{
    T total = T(0);
    for (int w = 0; w < BLOCK / 32; ++w) total += smem[w];
    atomicAdd(out, total);
  }}
}}

int run_{name}(const float* h_in, float* h_out, size_t n, cudaStream_t stream) {{
  float *d_in = nullptr, *d_out = nullptr;
  CUDA_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d_out, sizeof(float)));
  CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice, stream));
  CUDA_CHECK(cudaMemsetAsync(d_out, 0, sizeof(float), stream));
  {name}_kernel<float, 256><<<(n + 255) / 256, 256, 0, stream>>>(d_in, d_out, n);
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaMemcpyAsync(h_out, d_out, sizeof(float), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaEvent_t start, stop; float ms = 0;
  cudaEventCreate(&start); cudaEventCreate(&stop);
  cudaEventRecord(start, stream); cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop); cudaEventElapsedTime(&ms, start, stop);
  cudaFree(d_in); cudaFree(d_out);
  return 0;
}}
""",
    """/* {name}: cuBLAS / cuRAND / cuFFT host code */
#include <cublas_v2.h>
#include <curand.h>
#include <cufft.h>
#include <vector>

struct {name}_ctx {{
  cublasHandle_t blas; curandGenerator_t gen; cufftHandle plan; cudaStream_t stream;
}};

static void {name}_init({name}_ctx& c, int n) {{
  cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking);
  cublasCreate(&c.blas);
  cublasSetStream(c.blas, c.stream);
  curandCreateGenerator(&c.gen, CURAND_RNG_PSEUDO_DEFAULT);
  curandSetPseudoRandomGeneratorSeed(c.gen, 1234ULL + {idx});
  cufftPlan1d(&c.plan, n, CUFFT_C2C, 1);
}}

static float {name}_gemm({name}_ctx& c, const float* A, const float* B, float* C, int m) {{
  const float alpha = 1.0f, beta = 0.0f;
  cublasSgemm(c.blas, CUBLAS_OP_N, CUBLAS_OP_T, m, m, m, &alpha, A, m, B, m, &beta, C, m);
  std::vector<float> host(m * m);
  cudaMemcpy(host.data(), C, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  float s = 0; for (float v : host) s += v;  // "cudaMemcpy" in a string: untouched
  return s;
}}

static void {name}_fini({name}_ctx& c) {{
  cufftDestroy(c.plan); curandDestroyGenerator(c.gen); cublasDestroy(c.blas);
  cudaStreamDestroy(c.stream); cudaDeviceSynchronize();
}}
""",
    """// {name}: device properties, driver API and NCCL
#include <cuda.h>
#include <nccl.h>
#include <cstring>

#ifndef __CUDACC__
#error "needs nvcc"
#endif

int {name}_query(int dev) {{
  cudaDeviceProp prop;
  memset(&prop, 0, sizeof(prop));
  if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return -1;
  CUdevice d; CUcontext ctx; CUdeviceptr ptr;
  cuInit(0); cuDeviceGet(&d, dev); cuCtxCreate(&ctx, 0, d);
  cuMemAlloc(&ptr, 1 << 20); cuMemFree(ptr); cuCtxDestroy(ctx);
  return prop.multiProcessorCount * prop.warpSize;  // warpSize is 64 on CDNA
}}

ncclResult_t {name}_allreduce(ncclComm_t comm, float* buf, size_t n, cudaStream_t s) {{
  return ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s);
}}
""",
]
LATIN1 = "// Kommentar: Gr\u00f6\u00dfe, caf\u00e9 (Latin-1 bytes)\nvoid f{idx}() {{ cudaDeviceSynchronize(); }}\n"


def make_corpus(root: Path, target_bytes: int) -> tuple[int, int]:
    """~12 KB files (like real CUDA sources), 23 module directories each with a shared header."""
    rng = random.Random(42)
    own = [p.read_bytes() for p in sorted((REPO / "csrc").glob("*.cu*"))]
    own += [p.read_bytes() for p in sorted((REPO / "tests" / "hipify" / "golden").glob("*.cu"))]
    total = files = 0
    idx = 0
    while total < target_bytes:
        sub = root / f"mod{idx % 23:02d}"
        if not sub.is_dir():
            sub.mkdir(parents=True)
            header = b"#pragma once\n#include <cuda_runtime.h>\ncudaError_t module_init(cudaStream_t s);\n"
            (sub / "common.h").write_bytes(header)
            total += len(header)
            files += 1
        name = f"op{idx}_{rng.choice(['sum', 'scan', 'gemm', 'norm', 'topk', 'fft', 'rng'])}"
        parts = [
            t.format(name=f"{name}_{k}", idx=idx) for k, t in enumerate(rng.choices(TEMPLATES, k=rng.randint(3, 9)))
        ]
        body = b'#include "common.h"\n' + "\n".join(parts).encode()
        if own and idx % 3 == 0:
            body += b"\n" + own[idx % len(own)]
        if idx % 40 == 0:
            legacy = LATIN1.format(idx=idx).encode("latin-1")
            (sub / f"legacy{idx}.cpp").write_bytes(legacy)
            total += len(legacy)
            files += 1
        (sub / f"{name}.cu").write_bytes(body)
        total += len(body)
        files += 1
        idx += 1
    return files, total
