"""bench/port_quality.py's pure parts, on a small synthetic corpus: which units a build compiles (the corpus
profiles), the blocking findings in files no CUDA unit includes (hipify's include graph), and the error sites of a
failed compile mapped back to the CUDA source and matched against the blocking findings."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from _support import ROOT

from tools.hipify import HipifyOptions, hipify_tree

sys.path.insert(0, str(ROOT / "bench"))
import port_quality as pq

CORPUS = {
    "src/a.cu": '#include "common.cuh"\n__global__ void a(float* p) { p[0] = lane(); }\n',
    "src/b.cu": '#include "common.cuh"\n#include <lib/extra.h>\n__global__ void b(float* p) { p[0] = 0; }\n',
    "src/common.cuh": '#pragma once\n#include "detail/lanes.h"\n#define CHECK(x) check_it(x)\n',
    "src/detail/lanes.h": "#pragma once\n__device__ inline int lane() { return threadIdx.x & 31; }\n",
    "include/lib/extra.h": "#pragma once\n__device__ inline int warp() { return threadIdx.x >> 5; }\n",
    # no unit includes these two: a CPU helper with a blocking finding, and a unit the build leaves out
    "src/cpu/simd.h": '#pragma once\ninline void spin() { asm volatile("pause"); }\n__device__ int w() { return threadIdx.x % 32; }\n',
    "src/unbuilt/old.cu": "__global__ void old(float* p) { p[threadIdx.x & 31] = 0; }\n",
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "mini"
    for rel, text in CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_profiles_name_the_units_and_the_build_defines(corpus: Path, tmp_path: Path) -> None:
    ggml = pq.load_profiles()["ggml"]
    assert "GGML_SCHED_MAX_COPIES=4" in ggml.defines and "GGML_USE_HIP" not in ggml.defines
    assert ggml.hand_defines is not None and "GGML_USE_HIP" in ggml.hand_defines
    assert ggml.include_dirs == ("src", "include") and len(ggml.units) == 9
    toml = tmp_path / "profiles.toml"
    toml.write_text('[mini]\nunits = ["src/*.cu"]\ninclude_dirs = ["include"]\ndefines = ["X=1"]\n')
    mini = pq.load_profiles(toml)["mini"]
    files = pq.corpus_files(corpus)
    assert [p.relative_to(corpus).as_posix() for p in pq.corpus_units(corpus, files, mini)] == ["src/a.cu", "src/b.cu"]
    assert mini.hand_defines is None and mini.defines == ("X=1",)
    every = pq.corpus_units(corpus, files, pq.Profile("mini"))  # no profile: every .cu file
    assert [p.relative_to(corpus).as_posix() for p in every] == ["src/a.cu", "src/b.cu", "src/unbuilt/old.cu"]


def test_blocking_findings_in_files_no_unit_includes(corpus: Path, tmp_path: Path) -> None:
    result = hipify_tree([corpus], tmp_path / "out", HipifyOptions(hip_version=(6, 4)))
    report = json.loads(json.dumps(result.to_json()))  # as the bench reads it: the hipify report
    units = [str(corpus / "src" / "a.cu"), str(corpus / "src" / "b.cu")]
    outside = pq.blocking_outside_units(report["findings"], report["includes"], units)
    where = sorted({os.path.relpath(str(f["file"]), corpus) for f in outside})
    # lanes.h and extra.h (through <lib/extra.h>, found by its path) are read by the units; simd.h and the unit
    # the build leaves out are not
    assert where == ["src/cpu/simd.h", "src/unbuilt/old.cu"]
    assert all(f["blocking"] for f in outside)
    read = {os.path.relpath(str(f["file"]), corpus) for f in report["findings"] if f["blocking"]} - set(where)
    assert read == {"src/detail/lanes.h", "include/lib/extra.h"}
    with_old = pq.blocking_outside_units(
        report["findings"], report["includes"], [*units, str(corpus / "src/unbuilt/old.cu")]
    )
    assert sorted({os.path.relpath(str(f["file"]), corpus) for f in with_old}) == ["src/cpu/simd.h"]
    # what a unit's compile read wins over its #include lines: b.cu's build left <lib/extra.h> out (an #if, say);
    # a unit whose compile said nothing (None) keeps its #include lines
    reads = {units[0]: None, units[1]: [str(corpus / "src" / "common.cuh"), str(corpus / "src/detail/lanes.h")]}
    compiled = pq.blocking_outside_units(report["findings"], report["includes"], units, reads)
    assert sorted({os.path.relpath(str(f["file"]), corpus) for f in compiled}) == [
        "include/lib/extra.h",
        "src/cpu/simd.h",
        "src/unbuilt/old.cu",
    ]


def test_error_sites_map_back_and_are_matched_against_blocking_findings(corpus: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    # the translation added a line at the top of the unit and renamed the header: line n of a.hip is line n-1 of a.cu
    unit = out / "a.hip"
    unit.write_text("#include <hip/hip_runtime.h>\n" + CORPUS["src/a.cu"])
    header = out / "common_hip.cuh"
    header.write_text(CORPUS["src/common.cuh"])
    to_source = pq.SourceMap({unit: corpus / "src" / "a.cu", header: corpus / "src" / "common.cuh"})
    output = "\n".join(
        [
            f"In file included from {unit}:2:",
            f"{header}:3:18: error: use of undeclared identifier 'check_it'",  # in a macro's body
            f"{unit}:3:36: note: expanded from macro 'CHECK'",
            f"{unit}:3:40: error: no matching function for call to 'lane'",
            "/usr/include/hip/amd_detail/amd_hip_runtime.h:10:5: note: candidate function not viable",
            "/usr/include/hip/amd_detail/amd_warp_functions.h:50:3: error: static assertion failed",  # HIP's own
            f"{unit}:3:20: note: in instantiation of function template specialization requested here",
            "/usr/include/hip/hip_runtime.h:1:1: error: only HIP's headers, no project line",
            f"{unit}:3:1: warning: a warning is not an error site",
            "clang++: error: no file name: not a site either",
        ]
    )
    diags = pq.parse_diagnostics(output)
    assert [d.severity for d in diags] == ["error", "error", "error", "error", "warning"]
    assert diags[0].notes == [(str(unit), 3)] and len(diags[1].notes) == 1
    a, common = str(corpus / "src" / "a.cu"), str(corpus / "src" / "common.cuh")
    sites = pq.error_sites(output, to_source)
    assert sites == [
        ([(common, 3), (a, 2)], "use of undeclared identifier 'check_it'"),
        ([(a, 2)], "no matching function for call to 'lane'"),
        ([(a, 2)], "static assertion failed"),  # placed at the instantiation in the project
    ]
    # over units, as read back from JSON: each site once, by its first location
    other_unit = [[[[common, 3]], "use of undeclared identifier 'check_it'"]]
    distinct = pq.distinct_sites([json.loads(json.dumps(sites)), other_unit])
    assert sorted(distinct) == [(a, 2), (common, 3)]
    assert distinct[(common, 3)][0] == {(common, 3), (a, 2)}
    # a blocking finding at the macro's use explains the site in the macro's body; nothing explains a.cu:2
    assert pq.unflagged_sites(distinct, {(a, 2)}) == []
    assert pq.unflagged_sites(distinct, {(common, 3)}) == [(a, 2)]
    assert pq.unflagged_sites(distinct, set()) == [(a, 2), (common, 3)]


def test_a_translation_cache_key_follows_the_corpus_and_the_options(corpus: Path) -> None:
    files = pq.corpus_files(corpus)
    key = pq.fingerprint(files, ["hipify_torch", ["include"]])
    assert key == pq.fingerprint(files, ["hipify_torch", ["include"]])
    assert key != pq.fingerprint(files, ["hipify_torch", ["src"]])
    (corpus / "src" / "a.cu").write_text(CORPUS["src/a.cu"] + "// edited, one byte longer\n")
    assert key != pq.fingerprint(files, ["hipify_torch", ["include"]])


def test_the_compile_cache_keeps_what_an_interrupted_run_wrote(tmp_path: Path) -> None:
    cache = tmp_path / "compile-cache.jsonl"
    cache.write_text(
        json.dumps({"key": "a", "row": {"rc": 0}})
        + "\n"
        + json.dumps({"key": "b", "row": {"rc": 1}})
        + "\n"
        + '{"key": "c", "ro'
    )
    assert pq.read_cache(cache) == {"a": {"rc": 0}, "b": {"rc": 1}}
    assert pq.read_cache(tmp_path / "none.jsonl") == {}


def test_ours_translates_with_the_build_defines(tmp_path: Path) -> None:
    """Ours is told the corpus's CUDA-build defines (-D), as its compiles are: a blocking finding in a branch they
    decide against is not reported (counted as skipped)."""
    corpus = tmp_path / "d"
    corpus.mkdir()
    (corpus / "k.cu").write_text("#ifndef MINI_NEW_API\n__global__ void k() { cudaFooBar(); }\n#endif\n")
    _took, _mapping, plain = pq.run_ours(corpus, tmp_path / "plain", "6.4")
    assert plain["blocking"] == 1 and plain["skipped"] == 0 and plain["defines"] == []
    _took, _mapping, told = pq.run_ours(corpus, tmp_path / "told", "6.4", ["MINI_NEW_API", "LEVEL=2"])
    assert told["blocking"] == 0 and told["skipped"] == 1
    assert told["defines"] == ["-DMINI_NEW_API=1", "-DLEVEL=2"]


def test_cuda_host_code_is_counted_apart(tmp_path: Path) -> None:
    """A C/C++ source that includes a CUDA header (itself, or through a project header) is CUDA host code, with the
    headers it reaches; a C++ file with no CUDA header, and a header only it includes, are not."""
    files = {
        "host.cpp": '#include "helper.h"\nint main() { return 0; }\n',
        "helper.h": "#include <cuda_runtime.h>\nint f();\n",
        "solver.cc": "#include <cusolverSp.h>\n",
        "cpu.cpp": '#include "cpu.h"\n',
        "cpu.h": "#include <vector>\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    p = {name: str(tmp_path / name) for name in files}
    graph = {p["host.cpp"]: [p["helper.h"]], p["cpu.cpp"]: [p["cpu.h"]]}
    host = pq.cuda_host_code(p.values(), graph, pq._is_cuda_header)
    assert host == {p["host.cpp"], p["helper.h"], p["solver.cc"]}
    assert pq._is_cuda_header("cuda_runtime.h") and pq._is_cuda_header("cooperative_groups/reduce.h")
    assert not pq._is_cuda_header("vector")
