"""Names, types, casts, the hipBLAS API level and namespaces, by target (issue 22, classes 1-4 and 11): the
translation's text and findings. tests/hipify/test_names_compile.py compiles the same rules in the ROCm roots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tools.hipify import HipifyOptions, hipify_tree
from tools.hipify.mapping import MappingDatabase
from tools.hipify.targets import read_rows
from tools.hipify.translate import Translator, call_arguments


def tr(db: MappingDatabase, version: tuple[int, int] | None) -> Translator:
    return Translator(db, version)


def findings(res: object, rule: str) -> list[tuple[str, str, bool]]:
    return [(f.kind, f.name, f.blocking) for f in res.findings if f.rule == rule]  # type: ignore[attr-defined]


# -- class 1: __trap ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [(5, 2), (6, 4), (7, 2), None])
def test_trap_is_the_builtin(db: MappingDatabase, version: tuple[int, int] | None) -> None:
    res = tr(db, version).translate(b"__device__ void f(int x) { if (x) __trap(); }\n")
    assert res.data == b"__device__ void f(int x) { if (x) __builtin_trap(); }\n"
    assert not res.findings


# -- class 2: bf16 and fp8 by target --------------------------------------------------------------------------
BF16 = (
    b"#include <cuda_bf16.h>\n"
    b"__device__ nv_bfloat162 f(nv_bfloat16 a, __nv_bfloat16 b, float c) {\n"
    b"  nv_bfloat16 r = __float2bfloat16_rn(c);\n"
    b"  return make_bfloat162(__hadd(a, b), r);\n"
    b"}\n"
)


@pytest.mark.parametrize("version", [(6, 4), (7, 2), None])
def test_bf16_is_hip_bf16(db: MappingDatabase, version: tuple[int, int] | None) -> None:
    res = tr(db, version).translate(BF16)
    assert res.data == (
        b"#include <hip/hip_bf16.h>\n"
        b"__device__ __hip_bfloat162 f(__hip_bfloat16 a, __hip_bfloat16 b, float c) {\n"
        b"  __hip_bfloat16 r = __float2bfloat16(c);\n"
        b"  return __halves2bfloat162(__hadd(a, b), r);\n"
        b"}\n"
    )
    assert b"hip_bfloat16 " not in res.data.replace(b"__hip_bfloat16", b"")  # never the old struct
    assert not [f for f in res.findings if f.blocking]


def test_bf16_before_hip_bf16_h_is_a_version_finding(db: MappingDatabase) -> None:
    res = tr(db, (5, 2)).translate(BF16)
    assert res.data == BF16  # HIP 5.2 has only hip_bfloat16.h's struct, another API: nothing is renamed
    versions = {f.name for f in res.findings if f.kind == "version" and f.blocking}
    assert {"cuda_bf16.h", "nv_bfloat16", "nv_bfloat162", "__nv_bfloat16", "__float2bfloat16_rn"} <= versions


FP8_DEVICE = (
    b"#include <cuda_fp8.h>\n"
    b"__global__ void k(const __nv_fp8_e4m3* in, float* out, __nv_fp8x2_e5m2* two) {\n"
    b"  out[0] = float(in[0]);\n"
    b"  out[1] = __half2float(__nv_cvt_fp8_to_halfraw(in[1].__x, __NV_E4M3));\n"
    b"  __nv_fp8_storage_t s = __nv_cvt_float_to_fp8(out[2], __NV_SATFINITE, __NV_E5M2);\n"
    b"}\n"
)


@pytest.mark.parametrize("version", [(6, 4), (7, 2)])
def test_fp8_is_ocp_with_a_blocking_hazard_in_device_code(db: MappingDatabase, version: tuple[int, int]) -> None:
    res = tr(db, version).translate(FP8_DEVICE)
    out = res.data
    assert b"const __hip_fp8_e4m3* in" in out and b"__hip_fp8x2_e5m2* two" in out
    assert b"__hip_cvt_fp8_to_halfraw(in[1].__x, __HIP_E4M3)" in out
    assert b"__hip_cvt_float_to_fp8(out[2], __HIP_SATFINITE, __HIP_E5M2)" in out
    assert b"_fnuz" not in out and b"_FNUZ" not in out  # never HIPIFY's FNUZ types: another encoding
    hazards = findings(res, "name-hazard")
    assert {n for _k, n, _b in hazards} == {"__nv_fp8_e4m3", "__nv_fp8x2_e5m2", "__NV_E4M3", "__NV_E5M2"}
    assert all(kind == "hazard" and blocking for kind, _n, blocking in hazards)
    assert all("gfx942" in f.reason and "FNUZ" in f.reason for f in res.findings if f.rule == "name-hazard")


def test_fp8_hazard_does_not_block_host_code(db: MappingDatabase) -> None:
    res = tr(db, (7, 2)).translate(
        b"#include <cuda_fp8.h>\nunsigned char f(float x) { return __nv_fp8_e4m3(x).__x; }\n"
    )
    assert b"__hip_fp8_e4m3(x).__x" in res.data
    assert findings(res, "name-hazard") == [("hazard", "__nv_fp8_e4m3", False)]


def test_fp8_e5m2_infinities_block_everywhere_where_hip_reads_them_as_finite(db: MappingDatabase) -> None:
    src = b"#include <cuda_fp8.h>\nfloat f(__nv_fp8_e5m2 x) { return float(x); }\n"
    old = tr(db, (6, 4)).translate(src)
    assert [(f.blocking, "57344" in f.reason) for f in old.findings if f.rule == "name-hazard"] == [(True, True)]
    new = tr(db, (7, 2)).translate(src)
    assert [(f.blocking, "57344" in f.reason) for f in new.findings if f.rule == "name-hazard"] == [(False, False)]


@pytest.mark.parametrize("version", [(5, 2), (6, 2)])
def test_fp8_without_ocp_types_is_left_and_reported(db: MappingDatabase, version: tuple[int, int]) -> None:
    """HIP 6.2 has only the FNUZ types (HIP < 6.2 no hip_fp8.h): no faithful translation."""
    res = tr(db, version).translate(FP8_DEVICE)
    assert b"__nv_fp8_e4m3" in res.data and b"__NV_E4M3" in res.data and b"_fnuz" not in res.data
    assert {"__nv_fp8_e4m3", "__nv_fp8x2_e5m2", "__NV_E4M3"} <= {
        f.name for f in res.findings if f.kind == "version" and f.blocking
    }


# -- class 3: kernel arguments as const void* -----------------------------------------------------------------
CAST = "reinterpret_cast<const void*>"


@pytest.mark.parametrize(
    ("src", "want"),
    [
        ("cudaFuncSetAttribute(k, attr, n);", f"hipFuncSetAttribute({CAST}(k), attr, n);"),
        ("cudaFuncSetAttribute(k<T, 4>, attr, n);", f"hipFuncSetAttribute({CAST}(k<T, 4>), attr, n);"),
        ("cudaFuncSetAttribute(ns::k<float, N, 3>, a, n);", f"hipFuncSetAttribute({CAST}(ns::k<float, N, 3>), a, n);"),
        (
            "cudaFuncSetAttribute(k<std::pair<int, int>>, a, n);",
            f"hipFuncSetAttribute({CAST}(k<std::pair<int, int>>), a, n);",
        ),
        ("cudaFuncSetAttribute(k<(N > 2)>, a, n);", f"hipFuncSetAttribute({CAST}(k<(N > 2)>), a, n);"),
        ("cudaFuncSetAttribute(::ns::k<T>, a, n);", f"hipFuncSetAttribute({CAST}(::ns::k<T>), a, n);"),
        (
            "cudaFuncSetCacheConfig(&k, cudaFuncCachePreferL1);",
            f"hipFuncSetCacheConfig({CAST}(&k), hipFuncCachePreferL1);",
        ),
        ("cudaFuncSetSharedMemConfig(k, c);", f"hipFuncSetSharedMemConfig({CAST}(k), c);"),
        ("cudaFuncGetAttributes(&attr, kernel<Real>);", f"hipFuncGetAttributes(&attr, {CAST}(kernel<Real>));"),
        ("e = cudaLaunchKernel(k, g, b, args);", f"e = hipLaunchKernel({CAST}(k), g, b, args);"),
        ("e = cudaLaunchKernel(k, g, b, args, 0, s);", f"e = hipLaunchKernel({CAST}(k), g, b, args, 0, s);"),
        (  # a cast to the kernel's own pointer type is no const void*
            "cudaFuncSetAttribute(reinterpret_cast<kernel_t>(k), a, n);",
            f"hipFuncSetAttribute({CAST}(reinterpret_cast<kernel_t>(k)), a, n);",
        ),
        ("CHECK(cudaFuncSetAttribute(k<T, 2>, a, n));", f"CHECK(hipFuncSetAttribute({CAST}(k<T, 2>), a, n));"),
        (  # in a macro: its parameter
            "#define SET(k) cudaFuncSetCacheConfig(k, cudaFuncCachePreferL1)\n",
            f"#define SET(k) hipFuncSetCacheConfig({CAST}(k), hipFuncCachePreferL1)\n",
        ),
        (  # over lines, with a comment
            "cudaFuncSetAttribute(\n    k<T>,  // the kernel\n    a, n);",
            f"hipFuncSetAttribute(\n    {CAST}(k<T>),  // the kernel\n    a, n);",
        ),
        (  # a comment after the last argument stays a comment
            "cudaFuncGetAttributes(&attr,\n    k  // the kernel\n);",
            f"hipFuncGetAttributes(&attr,\n    {CAST}(k)  // the kernel\n);",
        ),
        (  # the argument's own CUDA names are translated
            "cudaFuncGetAttributes(&attr, pick<cudaStream_t>(s));",
            f"hipFuncGetAttributes(&attr, {CAST}(pick<hipStream_t>(s)));",
        ),
        # already a void pointer, or a null one: left
        ("cudaFuncGetAttributes(&attr, (void*)k);", "hipFuncGetAttributes(&attr, (void*)k);"),
        ("cudaFuncGetAttributes(&attr, (const void *) k);", "hipFuncGetAttributes(&attr, (const void *) k);"),
        (f"cudaFuncGetAttributes(&attr, {CAST}(k));", f"hipFuncGetAttributes(&attr, {CAST}(k));"),
        ("cudaLaunchKernel((void*)k, g, b, args, 0, s);", "hipLaunchKernel((void*)k, g, b, args, 0, s);"),
        ("cudaFuncGetAttributes(&attr, nullptr);", "hipFuncGetAttributes(&attr, nullptr);"),
        ("auto f = cudaFuncSetAttribute;", "auto f = hipFuncSetAttribute;"),  # not a call
        # HIP has template overloads of these (HIP 5.2, 6.4 and 7.2): left as CUDA wrote them
        (
            "cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k<T>, 256, 0);",
            "hipOccupancyMaxActiveBlocksPerMultiprocessor(&n, k<T>, 256, 0);",
        ),
        ("cudaLaunchCooperativeKernel(k<T>, g, b, args, 0, s);", "hipLaunchCooperativeKernel(k<T>, g, b, args, 0, s);"),
    ],
)
def test_kernel_arguments_get_the_cast(db: MappingDatabase, src: str, want: str) -> None:
    for version in ((5, 2), (6, 4), (7, 2)):
        res = tr(db, version).translate(src.encode())
        assert res.data == want.encode(), version
        assert not findings(res, "kernel-cast")
        assert tr(db, version).translate(res.data).data == res.data  # a second run adds no second cast


@pytest.mark.parametrize(
    "src",
    [
        "cudaFuncSetCacheConfig(__VA_ARGS__);",  # a macro's arguments: the arity does not fit
        "cudaFuncSetAttribute(a < b ? k1 : k2, attr, n);",  # a comparison read as a template: the arity tells
        "cudaFuncSetAttribute(k, attr;",  # unbalanced
    ],
)
def test_unparseable_kernel_arguments_are_reported(db: MappingDatabase, src: str) -> None:
    res = tr(db, (6, 4)).translate(src.encode())
    assert CAST.encode() not in res.data
    assert findings(res, "kernel-cast") == [("hazard", src.split("(", maxsplit=1)[0], True)]


def test_kernel_cast_keeps_include_and_launch_positions(db: MappingDatabase) -> None:
    src = b'#include "a.h"\ncudaFuncSetAttribute(k<T>, a, n);\n#include "b.h"\nvoid f() { k<T><<<1, 1>>>(); }\n'
    t = Translator(db, (6, 4), launch=True)
    res = t.translate(src)
    assert CAST.encode() + b"(k<T>)" in res.data
    assert b"hipLaunchKernelGGL((k<T>), dim3(1), dim3(1), 0, 0)" in res.data
    assert [res.data[i.out_start : i.out_end] for i in res.includes] == [b"a.h", b"b.h"]


def test_call_arguments() -> None:
    assert call_arguments(b"f(a, k<b, c>, (d, e))", 1) == [(2, 3), (5, 12), (14, 20)]
    assert call_arguments(b"f()", 1) == [] and call_arguments(b"f ( )", 1) == []
    assert call_arguments(b"f;", 1) == []  # no call
    assert call_arguments(b"f(a, b;", 1) is None and call_arguments(b"f(a, ", 1) is None
    assert call_arguments(b"f(\",\", ',', a /* , */, b // ,\n)", 1) == [(2, 5), (7, 10), (12, 13), (23, 24)]
    assert call_arguments(b"f(a << 2, b->c, d >= 1)", 1) == [(2, 8), (10, 14), (16, 22)]


# -- class 4: the hipBLAS API level ---------------------------------------------------------------------------
BLAS = b"#include <cuda_runtime.h>\n#include <cublas_v2.h>\nint x = CUDA_R_32F + CUBLAS_COMPUTE_32F;\n"


def test_hipblas_v2_before_the_header_for_hipblas_2(db: MappingDatabase) -> None:
    res = tr(db, (6, 4)).translate(BLAS)
    assert res.data == (
        b"#include <hip/hip_runtime.h>\n"
        b"#ifndef HIPBLAS_V2  // [hipify] the API the translation writes needs it\n#define HIPBLAS_V2\n#endif\n"
        b"#include <hipblas/hipblas.h>\n"
        b"int x = HIP_R_32F + HIPBLAS_COMPUTE_32F;\n"
    )
    assert findings(res, "header-define") == [("note", "hipblas/hipblas.h", False)]
    assert [res.data[i.out_start : i.out_end] for i in res.includes] == [b"hip/hip_runtime.h", b"hipblas/hipblas.h"]
    assert tr(db, (6, 4)).translate(res.data).data == res.data  # a second run adds nothing
    crlf = tr(db, (6, 0)).translate(BLAS.replace(b"\n", b"\r\n")).data
    assert (
        b"\r\n#define HIPBLAS_V2\r\n#endif\r\n#include <hipblas/hipblas.h>\r\n" in crlf
        and b"\n#" not in crlf.replace(b"\r\n", b"")
    )


@pytest.mark.parametrize("version", [(5, 2), (7, 0), (7, 2), None])
def test_no_hipblas_v2_where_the_header_does_not_need_it(db: MappingDatabase, version: tuple[int, int] | None) -> None:
    """hipBLAS < 2.0 has no v2 API; hipBLAS 3.x (ROCm 7) has only it and defines HIPBLAS_V2 itself."""
    res = tr(db, version).translate(BLAS)
    assert b"HIPBLAS_V2" not in res.data and not findings(res, "header-define")


# -- class 11: namespaces -------------------------------------------------------------------------------------
def test_thrust_cuda_is_thrust_hip(db: MappingDatabase) -> None:
    src = (
        b"#include <thrust/system/cuda/execution_policy.h>\n"
        b"void f(cudaStream_t s, int* b, int* e) {\n"
        b"  thrust::sort(thrust::cuda::par.on(s), b, e);\n"
        b"  thrust::fill(thrust :: cuda :: par_nosync.on(s), b, e, 0);\n"
        b"  thrust::system::cuda::vector<int> v; ::thrust::cuda_cub::tag t;\n"
        b"#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA\n#endif\n"
        b"}\n"
    )
    res = tr(db, (6, 4)).translate(src)
    assert res.data == (
        b"#include <thrust/system/hip/execution_policy.h>\n"
        b"void f(hipStream_t s, int* b, int* e) {\n"
        b"  thrust::sort(thrust::hip::par.on(s), b, e);\n"
        b"  thrust::fill(thrust :: hip :: par_nosync.on(s), b, e, 0);\n"
        b"  thrust::system::hip::vector<int> v; ::thrust::hip_rocprim::tag t;\n"
        b"#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_HIP\n#endif\n"
        b"}\n"
    )
    assert not res.findings


def test_other_namespaces_named_cuda_are_left(db: MappingDatabase) -> None:
    src = b"at::cuda::getCurrentCUDAStream(); cv::cuda::GpuMat m; int cuda = 1; x.cuda; c10 :: cuda :: device();\n"
    res = tr(db, (7, 2)).translate(src)
    assert res.data == src and not res.findings


def test_cub_is_hipcub_at_the_top_level_only(db: MappingDatabase) -> None:
    res = tr(db, (7, 2)).translate(
        b"cub::BlockScan<int, 128> a; ::cub::Sum b; at::cuda::cub::inclusive_sum(); int cub;"
    )
    assert res.data == b"hipcub::BlockScan<int, 128> a; ::hipcub::Sum b; at::cuda::cub::inclusive_sum(); int cub;"


def test_libcudacxx_namespaces_are_reported(db: MappingDatabase) -> None:
    src = b"cuda::std::atomic<int> a; ::cuda::pipeline<cuda::thread_scope_block> p; using namespace cuda; nvcuda::wmma::fragment f;\n"
    res = tr(db, (7, 2)).translate(src)
    assert res.data == src
    assert findings(res, "namespace") == [
        ("unsupported", "cuda::std::atomic", True),
        ("unsupported", "cuda::pipeline", True),
        ("unsupported", "cuda::thread_scope_block", True),
        ("unsupported", "cuda", True),
        ("unsupported", "nvcuda::wmma::fragment", True),
    ]
    assert all("HIP has no namespace" in f.reason for f in res.findings)


def test_a_namespace_cuda_of_the_project_is_not_reported(
    tmp_path: Path, write: Callable[[Path, dict[str, bytes | str]], None]
) -> None:
    write(
        tmp_path / "src",
        {
            "a.h": "namespace cuda { inline int f() { return 1; } }\n",
            "b.cu": '#include "a.h"\nint g() { return cuda::f(); }\n',
        },
    )
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(7, 2), jobs=1))
    assert not [f for f in res.findings if f.rule == "namespace"]
    bare = hipify_tree([tmp_path / "src" / "b.cu"], tmp_path / "out2", HipifyOptions(hip_version=(7, 2), jobs=1))
    assert [f.name for f in bare.findings if f.rule == "namespace"] == ["cuda::f"]  # without the header: reported


# -- data -----------------------------------------------------------------------------------------------------
def test_the_target_rows_name_their_source() -> None:
    rules = ("kernel-arg", "header-define", "name-hazard", "device-name-hazard")
    rows = [r for r in read_rows() if r[0] in rules]
    assert {r[1] for r in rows if r[0] == "kernel-arg"} == {
        "hipFuncSetAttribute",
        "hipFuncSetCacheConfig",
        "hipFuncSetSharedMemConfig",
        "hipFuncGetAttributes",
        "hipLaunchKernel",
    }
    text = Path(__file__).resolve().parents[2].joinpath("tools/hipify/data/targets.tsv").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith(rules):
            assert line.split("\t")[5].strip(), line  # every row says where it was checked
