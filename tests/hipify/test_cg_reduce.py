"""CUDA's <cooperative_groups/reduce.h> (cooperative_groups::reduce and the function objects plus, less, greater,
bit_and, bit_or, bit_xor), which HIP 5.2, 6.4 and 7.2 lack: the compat header's ``cg-reduce`` family
(tools/hipify/data/hipify_compat.h), wanted by the include through the ``compat`` column of
tools/hipify/data/cuda_only_headers.tsv.

- The translation: the include becomes the compat header's, the finding a note; without the row's compat column it
  stays blocking (the rule is what makes it pass). scan.h and memcpy_async.h stay blocking; reduce_store_async and
  reduce_update_async are blocking (lint coop-groups).
- The shuffle pattern, on the host: the header's reduction compiled with the host compiler and run by one thread per
  lane over a mock group whose shuffles behave as HIP's tile and coalesced_group ones (a source lane past the group's
  end gives the caller's own value), for every group size 1-64, with commutative and non-commutative ops.
- Compiles (-Wall -Wextra -Werror) in the ROCm 6.4 and 7.2 roots (gfx942, 64-lane wavefronts: tiles of 4, 16, 32 and
  64) and with HIP 5.2 on the host (gfx90a), with the header; without it they fail; a thread_block argument fails
  with the header's static_assert text.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from _roots import ROCM_ROOT_VERSIONS, host_hip52, require_root, run_in_root
from _trees import hipify_files as _hipify

from tools.hipify import HipifyResult, simd
from tools.hipify import headers as headers_mod
from tools.hipify.headers import table_row

CLANG = {"6.4": "clang++-21", "7.2": "clang++-22"}
FLAGS = ["-x", "hip", "-std=c++17", "-Wall", "-Wextra", "-Werror"]
HIP52 = [
    "clang++-15",
    "--offload-arch=gfx90a",
    "--rocm-path=/usr",
    "--hip-device-lib-path=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
]
BLOCK = "cooperative_groups_reduce"

KERNEL = """#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

struct SumMax {  // llm.c's pattern: a struct and a lambda
  float sum;
  float max;
  double extra;
};

template <int N>
__device__ void tile_ops(const int* ii, const float* ff, int* io, float* fo) {
  cg::thread_block_tile<N> t = cg::tiled_partition<N>(cg::this_thread_block());
  const int x = ii[threadIdx.x];
  const float f = ff[threadIdx.x];
  io[8 * threadIdx.x + 0] = cg::reduce(t, x, cg::plus<int>());
  io[8 * threadIdx.x + 1] = cg::reduce(t, x, cg::less<int>());
  io[8 * threadIdx.x + 2] = cg::reduce(t, x, cg::greater<int>());
  io[8 * threadIdx.x + 3] = cg::reduce(t, x, cg::bit_and<int>());
  io[8 * threadIdx.x + 4] = cg::reduce(t, x, cg::bit_or<int>());
  io[8 * threadIdx.x + 5] = cg::reduce(t, x, cg::bit_xor<int>());
  io[8 * threadIdx.x + 6] = (int)cg::reduce(t, (unsigned)x, cg::bit_xor<unsigned>{});
  fo[4 * threadIdx.x + 0] = cg::reduce(t, f, cg::plus<float>{});
  fo[4 * threadIdx.x + 1] = cg::reduce(t, f, cg::less<float>{});
  fo[4 * threadIdx.x + 2] = cg::reduce(t, f, cg::greater<float>{});
}

__global__ void tiles(const int* ii, const float* ff, int* io, float* fo) {
  tile_ops<4>(ii, ff, io, fo);
  tile_ops<16>(ii, ff, io, fo);
  tile_ops<32>(ii, ff, io, fo);
#if HIPIFY_TEST_WAVE64
  tile_ops<64>(ii, ff, io, fo);
#endif
}

__global__ void others(const float* ff, float* out, double* d) {
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(cg::this_thread_block());
  SumMax sm = {ff[threadIdx.x], ff[threadIdx.x], 1.0};
  SumMax total = cg::reduce(warp, sm, [](SumMax a, SumMax b) {
    SumMax r = {a.sum + b.sum, a.max > b.max ? a.max : b.max, a.extra + b.extra};
    return r;
  });
  out[threadIdx.x] = total.sum + total.max;
  d[threadIdx.x] = cg::reduce(warp, (double)ff[threadIdx.x], cg::plus<double>());
  if (ff[threadIdx.x] > 0.f) {
    cg::coalesced_group active = cg::coalesced_threads();
    out[threadIdx.x] += cg::reduce(active, ff[threadIdx.x], cg::plus<float>());
  }
}
"""

BLOCK_ARG = """#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void k(int* p) { p[0] = cg::reduce(cg::this_thread_block(), p[1], cg::plus<int>()); }
"""


def _findings(res: HipifyResult, header: str) -> list[tuple[str, bool]]:
    return [(f.kind, f.blocking) for f in res.findings if f.name == header]


# -- the translation --------------------------------------------------------------------------------------------------
def test_the_row_names_the_block() -> None:
    row = table_row("cooperative_groups/reduce.h")
    assert row is not None and row.compat == (BLOCK,) and BLOCK in simd.blocks()
    assert simd.family(BLOCK.encode()).by_include
    assert BLOCK.encode() not in simd.names()  # an include wants it, not a name
    other = table_row("cooperative_groups/scan.h")
    assert other is not None and other.header == "cooperative_groups/" and other.compat == ()


def test_the_include_becomes_the_compat_header(tmp_path: Path) -> None:
    res, out = _hipify(tmp_path, {"k.cu": KERNEL, "deep/h.cuh": '#include "cooperative_groups/reduce.h"\n'})
    text = (out / "k.hip").read_text()
    assert '#include "hipify_compat.h"' in text.split("namespace cg")[0]
    assert "// [hipify] provided by hipify_compat.h: #include <cooperative_groups/reduce.h>" in text
    assert "#include <hip/hip_cooperative_groups.h>" in text
    assert '#include "../hipify_compat.h"' in (out / "deep" / "h_hip.cuh").read_text()
    assert _findings(res, "cooperative_groups/reduce.h") == [("note", False), ("note", False)]
    note = next(f for f in res.findings if f.name == "cooperative_groups/reduce.h")
    assert "provided by hipify_compat.h" in note.reason and "HIP 5.2, 6.4 and 7.2" in note.reason
    compat = (out / simd.OUTPUT_NAME).read_text()
    assert "namespace cooperative_groups {" in compat and "struct bit_xor" in compat
    assert "__vsub4(unsigned" not in compat and "__ldcs(const" not in compat  # only the blocks the tree uses


def test_without_the_rule_it_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The row's compat column is the rule: without it the include stays, blocking, and no compat header is written."""
    row = table_row("cooperative_groups/reduce.h")
    assert row is not None
    monkeypatch.setattr(row, "compat", ())
    res, out = _hipify(tmp_path, {"k.cu": KERNEL})
    assert _findings(res, "cooperative_groups/reduce.h") == [("hazard", True)]
    assert "#include <cooperative_groups/reduce.h>" in (out / "k.hip").read_text()
    assert not (out / simd.OUTPUT_NAME).exists()


def test_a_bad_compat_name_is_one_clear_error(tmp_path: Path) -> None:
    from tools.errors import ToolError  # noqa: PLC0415

    bad = tmp_path / "t.tsv"
    bad.write_text("header\tinstead\tsource\tcompat\nx.h\tdo y\tz\tno_such_block\n")
    with pytest.raises(ToolError, match=r"no_such_block, which hipify_compat\.h has no block of"):
        headers_mod.table(bad)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("#include <cooperative_groups/scan.h>\n", "cooperative_groups/scan.h"),
        ("#include <cooperative_groups/memcpy_async.h>\n", "cooperative_groups/memcpy_async.h"),
    ],
)
def test_scan_and_memcpy_async_stay_blocking(tmp_path: Path, text: str, name: str) -> None:
    res, _out = _hipify(tmp_path, {"k.cu": text + "__global__ void k() {}\n"})
    (f,) = [f for f in res.findings if f.name == name]
    assert (
        f.blocking
        and f.rule == "cuda-only-header"
        and "hipify provides it for <cooperative_groups/reduce.h>" in (f.suggestion)
    )


@pytest.mark.parametrize("name", ["reduce_store_async", "reduce_update_async"])
def test_the_async_reductions_block(tmp_path: Path, name: str) -> None:
    src = (
        KERNEL
        + f"__global__ void a(int* p) {{ cg::{name}(cg::tiled_partition<32>(cg::this_thread_block()), p, 1, cg::plus<int>()); }}\n"
    )
    res, _out = _hipify(tmp_path, {"k.cu": src})
    assert [(f.rule, f.blocking) for f in res.findings if f.name == name] == [("coop-groups", True)]


# -- the shuffle pattern, run on the host --------------------------------------------------------------------------
HOST_TEST = r"""
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>
#include "hipify_compat.h"

// n lanes in lockstep at each shuffle: every lane writes its word, all wait, every lane reads its source, all wait
struct Shared {
  unsigned n;
  std::vector<int> slots;
  std::mutex m;
  std::condition_variable cv;
  unsigned arrived = 0, generation = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    unsigned gen = generation;
    if (++arrived == n) { arrived = 0; ++generation; cv.notify_all(); }
    else cv.wait(lock, [&] { return gen != generation; });
  }
  int exchange(unsigned self, int v, unsigned src) {
    slots[self] = v; wait();
    int out = slots[src]; wait();
    return out;
  }
};
// HIP's tile and coalesced_group: a source past the group's end gives the caller's own value
struct Lane {
  Shared* s; unsigned r;
  unsigned size() const { return s->n; }
  unsigned thread_rank() const { return r; }
  int shfl_down(int v, unsigned d) const { return s->exchange(r, v, r + d < s->n ? r + d : r); }
  int shfl(int v, int src) const { return s->exchange(r, v, (unsigned)src % s->n); }
};
struct Span { int first, last; long long count; double weight; };  // 3+ words, and op(a, b) is not commutative

template <typename T, typename Op, typename Value>
static bool check(unsigned n, Op op, Value value, const char* what) {
  Shared s; s.n = n; s.slots.assign(n, 0);
  std::vector<T> got(n);
  std::vector<std::thread> lanes;
  for (unsigned r = 0; r < n; ++r)
    lanes.emplace_back([&, r] { Lane l{&s, r}; got[r] = hipify_cg::reduce(l, value(r), op); });
  for (auto& t : lanes) t.join();
  T want = value(0);
  for (unsigned r = 1; r < n; ++r) want = op(want, value(r));
  for (unsigned r = 0; r < n; ++r)
    if (__builtin_memcmp(&got[r], &want, sizeof(T)) != 0) { std::printf("FAIL %s n=%u lane %u\n", what, n, r); return false; }
  return true;
}

int main() {
  bool ok = true;
  for (unsigned n = 1; n <= 64; ++n) {
    ok &= check<int>(n, [](int a, int b) { return a + b; }, [](unsigned r) { return (int)(r * 7919u % 1000u) - 500; }, "plus");
    ok &= check<int>(n, [](int a, int b) { return b < a ? b : a; }, [](unsigned r) { return (int)(r * 37u % 101u); }, "less");
    ok &= check<unsigned>(n, [](unsigned a, unsigned b) { return a ^ b; }, [](unsigned r) { return r * 2654435761u; }, "xor");
    ok &= check<float>(n, [](float a, float b) { return a < b ? b : a; }, [](unsigned r) { return (float)(r % 13) * -0.5f; }, "greater");
    ok &= check<Span>(n, [](Span a, Span b) { return Span{a.first, b.last, a.count + b.count, a.weight + b.weight}; },
                      [](unsigned r) { return Span{(int)r, (int)r, 1, 0.25 * r}; }, "span");
  }
  std::printf(ok ? "ok\n" : "failed\n");
  return ok ? 0 : 1;
}
"""


def test_the_shuffle_pattern_on_the_host(tmp_path: Path) -> None:
    cxx = shutil.which("g++") or shutil.which("clang++-15") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    (tmp_path / simd.OUTPUT_NAME).write_bytes(simd.render([BLOCK]))
    (tmp_path / "t.cpp").write_text(HOST_TEST)
    build = subprocess.run(
        [
            cxx,
            "-std=c++17",
            "-O1",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pthread",
            "-o",
            str(tmp_path / "t"),
            str(tmp_path / "t.cpp"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    proc = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout[-2000:]


# -- compiles -------------------------------------------------------------------------------------------------------
def _script(tmp_path: Path, compiler: list[str], version: tuple[int, int]) -> str:
    res, out = _hipify(tmp_path, {"reduce.cu": KERNEL, "block.cu": BLOCK_ARG}, version)
    blocking = [f.to_json() for f in res.findings if f.blocking and f.rule != "warp-size-literal"]
    assert blocking == []
    naive = tmp_path / "naive"  # without the compat header: what HIP itself offers
    naive.mkdir()
    (naive / "reduce.hip").write_text(
        re.sub(r'#include "hipify_compat.h"[^\n]*\n', "", (out / "reduce.hip").read_text())
    )
    units = {
        "reduce": [*compiler, *FLAGS, "-DHIPIFY_TEST_WAVE64=1", "-c", "-o", "/dev/null", str(out / "reduce.hip")],
        "naive": [*compiler, *FLAGS, "-fsyntax-only", str(naive / "reduce.hip")],
        "block": [*compiler, *FLAGS, "-fsyntax-only", str(out / "block.hip")],
    }
    return "".join(f"echo '@@ {n} start'; {shlex.join(c)} 2>&1; echo '@@ {n} rc='$?; " for n, c in units.items())


def _check(log: str, label: str) -> None:
    rc = dict(re.findall(r"^@@ (\w+) rc=(\d+)$", log, re.M))
    assert set(rc) == {"reduce", "naive", "block"}, log[-4000:]
    assert rc["reduce"] == "0", f"{label}: the kernels do not compile:\n{log[-6000:]}"
    assert rc["naive"] != "0" and "no member named 'reduce' in namespace 'cooperative_groups'" in log, log[-4000:]
    assert rc["block"] != "0" and "cooperative_groups::reduce takes a thread_block_tile or a coalesced_group" in log


@pytest.mark.slow
@pytest.mark.parametrize("version", ROCM_ROOT_VERSIONS)
def test_in_the_roots(tmp_path: Path, version: str) -> None:
    require_root(version)
    script = _script(tmp_path, [CLANG[version], "--offload-arch=gfx942"], (int(version[0]), int(version[2])))
    proc = run_in_root(version, ["bash", "-c", script], binds=[tmp_path], timeout=600)
    _check(proc.stdout + proc.stderr, f"HIP {version}")


@pytest.mark.slow
def test_with_hip_52_on_the_host(tmp_path: Path) -> None:
    if not host_hip52():
        pytest.skip("HIP 5.2 (clang++-15, /usr/include/hip) is not installed")
    script = _script(tmp_path, HIP52, (5, 2))
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=600, check=False)
    _check(proc.stdout + proc.stderr, "HIP 5.2")
