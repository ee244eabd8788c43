from __future__ import annotations

import pytest

from tools.hipify.lint import lint_bytes, mask
from tools.hipify.translate import Translator, positions


def _hazards(tr: Translator, src: str) -> set[tuple[str, int, int]]:
    data = src.encode()
    res = tr.translate(data)
    # lane-mask-32 is the translator's (it reads the mask: tools/hipify/masks.py), the rest the lint's
    found = [f for f in res.findings if f.kind == "hazard"] + lint_bytes(data, res.comment_spans)
    pos = positions(data, [f.offset for f in found])
    return {(f.rule, *pos[f.offset]) for f in found}


@pytest.mark.parametrize(
    ("line", "rule", "col"),
    [
        ("  __shared__ float buf[32];", "warp-size-literal", 24),
        ("  int lane = threadIdx.x & 31;", "lane-math", 26),
        ("  int warp = threadIdx.x >> 5;", "lane-math", 26),
        ("  int l = tid % 32;", "lane-math", 15),
        ("  float v = __shfl_xor_sync(m, x, 1);", "lane-mask-32", 13),
        ("  float v = __shfl_xor_sync(0x0000ffff, x, 1);", "lane-mask-32", 13),
        ("  unsigned m = __ballot(p);", "ballot-32", 3),
        ("  int n = __popc(__activemask());", "ballot-32", 11),
        ("  for (int o = 16; o > 0; o /= 2) v += __shfl_down(v, o);", "warp-reduce-16", 3),
        ('  asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));', "inline-asm", 3),
        ("#if __CUDA_ARCH__ >= 700", "cuda-arch-compare", 5),
        ("texture<float, 1> tref;", "texture-reference", 1),
        ("  auto blk = cooperative_groups::this_cluster();", "coop-groups", 34),
        ("  cooperative_groups::this_grid().sync();", "grid-sync", 23),
        ("  for (int i = 0; i < 32; ++i) {}", "warp-size-literal", 23),
        ("constexpr int kWarpSize = 32;", "warp-size-literal", 27),
    ],
)
def test_planted_hazards(tr52: Translator, line: str, rule: str, col: int) -> None:
    src = "__global__ void k() {\n" + line + "\n}\n"
    assert (rule, 2, col) in _hazards(tr52, src)


@pytest.mark.parametrize(
    "line",
    [
        "  uint64_t h = x >> 5;",  # hash math, no warp context
        "  // int lane = threadIdx.x & 31;",  # comment
        '  const char* s = "threadIdx.x & 31";',  # string
        "  int lane = threadIdx.x % warpSize;",
        "  unsigned long long m = __ballot(p);",
        "  int lane = threadIdx.x & 31;  // hipify: ignore",
        "  int lane = threadIdx.x & 31;  // hipify: ignore(lane-math)",
        "  float f = 32.0f * threadIdx.x;",
    ],
)
def test_no_false_positives(tr52: Translator, line: str) -> None:
    src = "__global__ void k() {\n" + line + "\n}\n"
    assert _hazards(tr52, src) == set()


def test_marker_for_other_rule_does_not_silence(tr52: Translator) -> None:
    src = "__global__ void k() {\n  int lane = threadIdx.x & 31;  // hipify: ignore(inline-asm)\n}\n"
    assert _hazards(tr52, src) == {("lane-math", 2, 26)}


def test_host_only_32_is_not_a_warp_size(tr52: Translator) -> None:
    assert _hazards(tr52, "void f() { for (int i = 0; i < 32; ++i) {} }\n") == set()


def test_cuda_only_header_reported(tr52: Translator) -> None:
    res = tr52.translate(b"#include <cuda/pipeline>\n#include <cuda/barrier>\n")
    assert {(f.name, f.rule) for f in res.findings} == {
        ("cuda/pipeline", "cuda-only-header"),
        ("cuda/barrier", "cuda-only-header"),
    }


def test_mask_keeps_offsets() -> None:
    data = b'a /* x\ny */ "s" b'
    masked = mask(data, [(2, 11), (12, 15)])
    assert len(masked) == len(data) and masked.count(b"\n") == 1
    assert masked == b"a     \n     " + b"    b"[0:0] + b"    b"


def test_warp_rules_need_device_code(tr52: Translator) -> None:
    host = "int f(int tid) { int lane = tid & 31; return lane; }\n"
    assert _hazards(tr52, host) == set()
    assert ("lane-math", 1, 44) in _hazards(tr52, "__device__ " + host)


def test_inline_asm_variants(tr52: Translator) -> None:
    src = '__device__ void f() {\n  __asm__ __volatile__("exit;");\n  asm("mov.u32 %0, 1;");\n  int plasma(1);\n}\n'
    assert {(r, line) for r, line, _c in _hazards(tr52, src)} == {("inline-asm", 2), ("inline-asm", 3)}


@pytest.mark.parametrize(
    ("template", "ptx"),
    [
        ('"mov.u32 %0, %%laneid;"', True),
        ('"bfind.u32 %0, %1;"', True),
        ('"{\\n\\t.reg .pred p;\\n\\t}"', True),
        ('"vabsdiff4.u32.u32.u32.add" " %0, %1;"', True),
        ('"mov.u64 %0, %globaltimer;"', True),
        ('"trap;"', True),
        ("PTX_IN_A_MACRO", True),  # not a literal: may be anything
        ('"cpuid"', False),  # x86
        ('"fldcw %0"', False),
        ('"mtfsf 255, %0"', False),  # PowerPC
        ('"sethi %hi(mode), %o1"', False),  # SPARC
        ('"v_dot2_f32_f16 %0, %1, %2, %0"', False),  # AMD GPU assembly (a HIP branch's)
        ('"" ::: "memory"', False),  # a compiler barrier
    ],
)
def test_only_ptx_is_inline_ptx(tr52: Translator, template: str, ptx: bool) -> None:
    src = "__device__ void f(float a) {\n  asm volatile(" + template + ");\n}\n"
    assert (("inline-asm", 2, 3) in _hazards(tr52, src)) == ptx
