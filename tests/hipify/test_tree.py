from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

import tools.hipify.tree as tree_mod
from tools.errors import ToolError
from tools.hipify import HipifyOptions, hipify_tree, output_relpath
from tools.hipify.cli import main as cli_main
from tools.hipify.insert import render

Write = Callable[[Path, dict[str, "bytes | str"]], None]
REPO = Path(__file__).resolve().parents[2]
OPTS = HipifyOptions(hip_version=(5, 2), jobs=1)
# the lines the tree pass adds to a file that uses runtime API names or device code without including the runtime
# (nvcc includes it implicitly): see test_insertions.py
API = render(None, b"hip/hip_runtime_api.h", False)
RUNTIME = render(None, b"hip/hip_runtime.h", False)

TREE: dict[str, bytes | str] = {
    "checksum.cu": '#include "bridge.h"\n__global__ void k() {}\nvoid f() { cudaDeviceSynchronize(); }\n',
    "bridge.h": "#pragma once\n#include <cuda_runtime.h>\ncudaError_t bridge_init();\n",
    "plain.h": "#pragma once\nint plain();\n",
    "sub/x.cpp": '#include "../plain.h"\nint x() { return plain(); }\n',
    "sub/y.cpp": '#include "bridge.h"\nint y();\n',  # resolved against the source root
    "cuda/util.cuh": '#include "plain.h"\n#include "../bridge.h"\n',
    "blob.bin": b"\x00\x01\x02cudaMalloc\xff",
    "CMakeLists.txt": "add_library(x checksum.cu)\n",
}


@pytest.mark.parametrize(
    ("rel", "changed", "expected"),
    [
        ("checksum.cu", False, "checksum.hip"),
        ("checksum.cu", True, "checksum.hip"),
        ("bridge.h", True, "bridge_hip.h"),
        ("bridge.h", False, "bridge.h"),
        ("sub/x.cpp", False, "sub/x.cpp"),
        ("sub/x.cpp", True, "sub/x_hip.cpp"),
        ("cuda/util.cuh", True, "hip/util.cuh"),
        ("cuda/util.cuh", False, "hip/util.cuh"),
        ("cuda_utils.h", True, "hip_utils.h"),
        ("CUDAHelpers.hpp", True, "HIPHelpers.hpp"),
        ("cuda_utils.h", False, "cuda_utils.h"),
    ],
)
def test_naming_rules(rel: str, changed: bool, expected: str) -> None:
    assert output_relpath(PurePosixPath(rel), changed).as_posix() == expected


def test_tree_layout_and_includes(tmp_path: Path, write: Write) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, TREE)
    res = hipify_tree([src], out, OPTS)
    rel = {s.relative_to(src).as_posix(): d.relative_to(out).as_posix() for s, d in res.outputs.items()}
    assert rel == {
        "checksum.cu": "checksum.hip",
        "bridge.h": "bridge_hip.h",
        "plain.h": "plain.h",
        "sub/x.cpp": "sub/x.cpp",
        "sub/y.cpp": "sub/y_hip.cpp",
        "cuda/util.cuh": "hip/util.cuh",
        "blob.bin": "blob.bin",
        "CMakeLists.txt": "CMakeLists.txt",
    }
    assert all(p.is_absolute() for p in res.outputs.values())
    assert (out / "checksum.hip").read_bytes().startswith(RUNTIME + b'#include "bridge_hip.h"\n')
    assert (out / "sub/y_hip.cpp").read_bytes().startswith(b'#include "bridge_hip.h"\n')
    assert (out / "sub/x.cpp").read_bytes() == str(TREE["sub/x.cpp"]).encode()
    assert (out / "hip/util.cuh").read_bytes() == b'#include "plain.h"\n#include "../bridge_hip.h"\n'
    assert (out / "blob.bin").read_bytes() == TREE["blob.bin"]
    assert b"hipError_t" in (out / "bridge_hip.h").read_bytes()
    assert res.blocking == 0
    # the source tree is never written
    assert sorted(p.relative_to(src).as_posix() for p in src.rglob("*") if p.is_file()) == sorted(TREE)


def test_incremental_unchanged_and_stale(tmp_path: Path, write: Write) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, TREE)
    first = hipify_tree([src], out, OPTS)
    assert len(first.written) == len(TREE)
    hip = out / "checksum.hip"
    os.utime(hip, ns=(1_000_000_000, 1_000_000_000))
    second = hipify_tree([src], out, OPTS)
    assert second.written == [] and len(second.unchanged) == len(TREE)
    assert hip.stat().st_mtime_ns == 1_000_000_000  # not rewritten
    # a source change is picked up
    (src / "checksum.cu").write_text('#include "bridge.h"\nvoid f() { cudaFree(0); }\n')
    third = hipify_tree([src], out, OPTS)
    assert third.written == [hip] and b"hipFree(0)" in hip.read_bytes()
    # a deleted source removes its stale output (and the emptied directory)
    (src / "cuda" / "util.cuh").unlink()
    fourth = hipify_tree([src], out, OPTS)
    assert fourth.removed == [out / "hip" / "util.cuh"]
    assert not (out / "hip").exists()
    # a file nobody produced is never removed
    (out / "mine.txt").write_text("keep")
    hipify_tree([src], out, OPTS)
    assert (out / "mine.txt").exists()


def test_header_rename_follows_changes(tmp_path: Path, write: Write) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, {"a.h": "int a;\n", "b.h": '#include "a.h"\n', "c.cpp": '#include "b.h"\n'})
    res = hipify_tree([src], out, OPTS)
    assert {d.name for d in res.outputs.values()} == {"a.h", "b.h", "c.cpp"}
    (src / "a.h").write_text("cudaStream_t a;\n")
    res = hipify_tree([src], out, OPTS)
    # a.h changed -> a_hip.h, so b.h's include changes -> b_hip.h, and c.cpp's -> c_hip.cpp
    assert {d.name for d in res.outputs.values()} == {"a_hip.h", "b_hip.h", "c_hip.cpp"}
    assert (out / "c_hip.cpp").read_bytes() == b'#include "b_hip.h"\n'
    assert {p.name for p in res.removed} == {"a.h", "b.h", "c.cpp"}


def test_file_arguments_and_collisions(tmp_path: Path, write: Write) -> None:
    write(tmp_path, {"one/k.cu": "cudaFree(0);\n", "two/k.cu": "cudaFree(1);\n"})
    res = hipify_tree([tmp_path / "one" / "k.cu", tmp_path / "two" / "k.cu"], tmp_path / "out", OPTS)
    assert [f.rule for f in res.findings if f.kind != "note"] == ["output-collision"]
    assert res.blocking == 1
    assert (tmp_path / "out" / "k.hip").read_bytes() == RUNTIME + b"hipFree(0);\n"


def test_never_in_place(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "src", {"k.cu": "cudaFree(0);\n"})
    with pytest.raises(ToolError):
        hipify_tree([tmp_path / "src"], tmp_path / "src", OPTS)
    with pytest.raises(ToolError):
        hipify_tree([tmp_path / "src"], tmp_path, OPTS)
    with pytest.raises(ToolError):
        hipify_tree([tmp_path / "missing"], tmp_path / "out", OPTS)
    # an output directory inside the source tree is skipped by the walk
    res = hipify_tree([tmp_path / "src"], tmp_path / "src" / "build", OPTS)
    again = hipify_tree([tmp_path / "src"], tmp_path / "src" / "build", OPTS)
    assert list(res.outputs) == list(again.outputs) == [tmp_path / "src" / "k.cu"]


def test_unreadable_file_is_reported_and_run_goes_on(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "src", {"a.cu": "cudaFree(0);\n"})
    (tmp_path / "src" / "dangling.h").symlink_to(tmp_path / "nowhere.h")
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", OPTS)
    assert (tmp_path / "out" / "a.hip").read_bytes() == RUNTIME + b"hipFree(0);\n"
    errors = [f for f in res.findings if f.kind == "error"]
    assert len(errors) == 1 and errors[0].file.name == "dangling.h" and errors[0].blocking


def test_parallel_matches_serial(tmp_path: Path, write: Write) -> None:
    files: dict[str, bytes | str] = {
        f"d{i % 3}/k{i}.cu": f"cudaFree({i}); cuGetErrorString(e, s);\n" for i in range(24)
    }
    write(tmp_path / "src", files)
    serial = hipify_tree([tmp_path / "src"], tmp_path / "o1", OPTS)
    parallel = hipify_tree([tmp_path / "src"], tmp_path / "o2", HipifyOptions(hip_version=(5, 2), jobs=2))
    assert [f.to_json()["name"] for f in serial.findings] == [f.to_json()["name"] for f in parallel.findings]
    for s, d in serial.outputs.items():
        assert d.read_bytes() == parallel.outputs[s].read_bytes()


def test_overrides_option(tmp_path: Path, write: Write) -> None:
    write(tmp_path / "src", {"k.cu": "__shfl_down_sync(m, v, 1);\n"})
    ov = tmp_path / "map.tsv"
    ov.write_text("cuda_name\thip_name\tkind\tlibrary\n__shfl_down_sync\tmy_shfl_down_sync\tdevice_function\tproject\n")
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(5, 2), mapping_overrides=ov))
    assert (tmp_path / "out" / "k.hip").read_bytes() == b"my_shfl_down_sync(m, v, 1);\n"
    assert res.blocking == 0


PLANTED = (
    "#include <cuda_runtime.h>\n"  # 1
    "__global__ void k(int* x) {\n"  # 2
    "  int lane = threadIdx.x & 31;\n"  # 3: lane-math at col 26
    "  cuGetErrorString(0, 0);\n"  # 4: version at col 3
    "  cudaInitDevice(0, 0, 0);\n"  # 5: unsupported at col 3
    "  int w = threadIdx.x % 32;  // hipify: ignore(lane-math)\n"  # 6: silenced
    "}\n"
)


def test_cli_report_and_strict(tmp_path: Path, write: Write, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "src", {"k.cu": PLANTED})
    report = tmp_path / "r.json"
    argv = [str(tmp_path / "src"), "-o", str(tmp_path / "out"), "--report", str(report), "--hip-version", "5.2"]
    assert cli_main(argv) == 0
    assert cli_main([*argv, "--strict"]) == 1
    data = json.loads(report.read_text())
    assert data["schema"] == "monarch-runtime/hipify-report/v1"
    assert data["hip_version"] == "5.2"
    got = {(f["name"], f["kind"], f["line"], f["column"], f["rule"]) for f in data["findings"]}
    assert got == {
        ("& 31", "hazard", 3, 26, "lane-math"),
        ("cuGetErrorString", "version", 4, 3, ""),
        ("cudaInitDevice", "unsupported", 5, 3, ""),
    }
    assert data["blocking"] == 3 and data["counts"]["hazard"] == 1
    assert {"file", "line", "column", "name", "kind", "reason", "suggestion", "blocking", "rule"} == set(
        data["findings"][0]
    )
    err = capsys.readouterr().err
    assert "1 unsupported, 1 version, 1 hazard; 3 blocking" in err
    # a clean tree passes --strict
    write(tmp_path / "ok", {"k.cu": "void f() { cudaFree(0); }\n"})
    assert cli_main([str(tmp_path / "ok"), "-o", str(tmp_path / "out2"), "--strict", "--hip-version", "5.2"]) == 0


def test_cli_user_errors_have_no_traceback(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "tools", "hipify", str(tmp_path / "nope"), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert proc.returncode == 2 and "error: source not found" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "tools", "hipify", str(tmp_path), "-o", str(tmp_path / "o"), "--hip-version", "five"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    assert proc.returncode == 2 and "bad HIP version" in proc.stderr and "Traceback" not in proc.stderr


def test_cache_skips_unchanged_inputs(tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    src, out = tmp_path / "src", tmp_path / "out"
    write(src, TREE)
    first = hipify_tree([src], out, OPTS)
    calls: list[str] = []
    real, real_copy = tree_mod._process, tree_mod._hash_and_copy

    def counting(path: str, *args: object, **kwargs: object) -> object:
        calls.append(Path(path).name)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    def counting_copy(path: str, *args: object) -> object:
        calls.append(Path(path).name)
        return real_copy(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(tree_mod, "_process", counting)  # (translated files)
    monkeypatch.setattr(tree_mod, "_hash_and_copy", counting_copy)  # (copied ones)
    second = hipify_tree([src], out, OPTS)
    assert calls == []  # nothing re-translated
    assert [f.to_json() for f in second.findings] == [f.to_json() for f in first.findings]
    assert second.outputs == first.outputs and second.written == []
    # an output deleted or edited by hand is made again (from the cache entry's source)
    (out / "checksum.hip").unlink()
    (out / "bridge_hip.h").write_text("edited")
    third = hipify_tree([src], out, OPTS)
    assert sorted(p.name for p in third.written) == ["bridge_hip.h", "checksum.hip"]
    assert sorted(calls) == ["bridge.h", "checksum.cu"]
    assert b"hipError_t" in (out / "bridge_hip.h").read_bytes()
    # other options: everything is translated again
    calls.clear()
    hipify_tree([src], out, HipifyOptions(hip_version=(6, 2), jobs=1))
    assert len(calls) == len(TREE)


def test_report_matches_its_json_schema(tmp_path: Path, write: Write) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((REPO / "tools" / "hipify" / "data" / "report.schema.json").read_text())
    write(tmp_path / "src", {"k.cu": PLANTED, "b.bin": b"\0x"})
    (tmp_path / "src" / "gone.h").symlink_to(tmp_path / "nowhere")
    report = tmp_path / "r.json"
    cli_main(
        [str(tmp_path / "src"), "-o", str(tmp_path / "out"), "--report", str(report), "--hip-version", "5.2", "-q"]
    )
    data = json.loads(report.read_text())
    jsonschema.validate(data, schema)
    assert {f["kind"] for f in data["findings"]} == {"hazard", "version", "unsupported", "error"}


def test_the_include_graph_is_what_the_tree_pass_resolved(tmp_path: Path, write: Write) -> None:
    """HipifyResult.includes (and the report's "includes"): each source's project includes as resolved and
    rewritten (beside the includer, from a source root, by the path's tail), none to the system's headers; reached()
    follows them transitively."""
    src = tmp_path / "src"
    write(
        src,
        {
            "k.cu": '#include <vector>\n#include "a.cuh"\n#include <lib/b.h>\n#include "missing.h"\n',
            "a.cuh": '#pragma once\n#include "sub/c.h"\n',
            "sub/c.h": "#pragma once\n",
            "inc/lib/b.h": "#pragma once\n#include <vector>\n",
            "lone.h": "#pragma once\n",
        },
    )
    result = hipify_tree([src], tmp_path / "out", HipifyOptions(hip_version=(6, 4), jobs=1))
    assert result.includes == {
        src / "k.cu": [src / "a.cuh", src / "inc" / "lib" / "b.h"],
        src / "a.cuh": [src / "sub" / "c.h"],
    }
    assert result.reached([src / "k.cu"]) == {
        src / "k.cu",
        src / "a.cuh",
        src / "sub" / "c.h",
        src / "inc" / "lib" / "b.h",
    }
    assert result.reached([src / "lone.h"]) == {src / "lone.h"}
    report = result.to_json()["includes"]
    assert report == {str(k): [str(t) for t in v] for k, v in sorted(result.includes.items())}


def test_project_names_that_look_like_cuda_are_not_unmapped(tmp_path: Path, write: Write) -> None:
    write(
        tmp_path / "src",
        {
            "util.h": "#pragma once\nstruct cudaHelperState { int x; };\nvoid cudaCheckLast(const char* what);\n",
            "util.cpp": '#include "util.h"\nvoid cudaCheckLast(const char* what) { (void)what; }\n',
            "k.cu": '#include "util.h"\nvoid f() { cudaHelperState s; cudaCheckLast("x"); cudaNoSuchApi(); }\n',
        },
    )
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", OPTS)
    assert [(f.name, f.kind) for f in res.findings if f.kind != "note"] == [("cudaNoSuchApi", "unmapped")]


def test_declared_cuda_looking_variables_are_not_unmapped(tmp_path: Path, write: Write) -> None:
    write(
        tmp_path / "src",
        {
            "k.cu": (
                "template <typename T> T cuGet(int);\n"
                "template <> float cuGet<float>(int x) { return float(x); }\n"
                "void f(CUdevice cuDevice) {\n"
                "  CUresult cuStatus = cuInit(0);\n"
                "  dim3 cudaGrid(1, 1, 1);\n"
                "  s.cudaProducer = cuStatus;\n"
                "  if (cuStatus == 0) cudaBrandNewApi(cudaGrid, cuGet<float>(1));\n"
                "}\n"
            ),
        },
    )
    res = hipify_tree([tmp_path / "src"], tmp_path / "out", OPTS)
    found = [(f.name, f.kind, f.line) for f in res.findings if f.kind != "note"]
    assert found == [("cudaBrandNewApi", "unmapped", 7)]


def test_launch_conversion_keeps_later_includes_right(tmp_path: Path, write: Write) -> None:
    write(
        tmp_path / "src",
        {
            "k.cu": 'void f() { k<<<1, 2>>>(x); }\n#include "late.h"\nvoid g() { ns::k2<int><<<g, b, 0, s>>>(); }\n',
            "late.h": "cudaStream_t s;\n",
        },
    )
    opts = HipifyOptions(hip_version=(5, 2), launch_style="hipLaunchKernelGGL", jobs=1)
    hipify_tree([tmp_path / "src"], tmp_path / "out", opts)
    assert (tmp_path / "out" / "k.hip").read_bytes() == RUNTIME + (
        b"void f() { hipLaunchKernelGGL(k, dim3(1), dim3(2), 0, 0, x); }\n"
        b'#include "late_hip.h"\n'
        b"void g() { hipLaunchKernelGGL((ns::k2<int>), dim3(g), dim3(b), 0, s); }\n"
    )


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, writes: int) -> None:
    """Make the tree pass's writer raise KeyboardInterrupt on its ``writes``-th write (as a Ctrl-C would)."""
    real = tree_mod._Writer.write
    count = [0]

    def write(self: tree_mod._Writer, path: Path, data: bytes) -> None:
        count[0] += 1
        if count[0] == writes:
            raise KeyboardInterrupt
        real(self, path, data)

    monkeypatch.setattr(tree_mod._Writer, "write", write)


def test_fresh_output_appears_whole_or_not_at_all(
    tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new output directory is staged beside it and renamed into place: an interrupted first run leaves
    neither the directory nor the staging copy; a complete one leaves no staging copy either."""
    write(tmp_path / "src", TREE)
    out = tmp_path / "build" / "hip"
    with monkeypatch.context() as mp:
        _interrupt_after(mp, 4)
        with pytest.raises(KeyboardInterrupt):
            hipify_tree([tmp_path / "src"], out, OPTS)
    assert not out.exists()
    assert not (tmp_path / "build").exists() or not list((tmp_path / "build").iterdir())
    res = hipify_tree([tmp_path / "src"], out, OPTS)
    assert sorted(p.name for p in (tmp_path / "build").iterdir()) == ["hip"]
    assert len(res.written) == len(TREE) and all(p.is_file() for p in res.written)
    assert (out / tree_mod.STATE_FILE).is_file()
    assert not hipify_tree([tmp_path / "src"], out, OPTS).written  # the state recorded the final paths


def test_existing_output_is_updated_file_by_file(tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    """Into an existing output directory each file is replaced atomically: an interrupted run leaves whole
    files (old or new) and no temporary files, and the next run finishes the job."""
    write(tmp_path / "src", TREE)
    out = tmp_path / "out"
    hipify_tree([tmp_path / "src"], out, OPTS)
    for rel in ("checksum.cu", "bridge.h", "sub/x.cpp"):
        p = tmp_path / "src" / rel
        p.write_bytes(p.read_bytes() + b"// cudaMalloc\nvoid more() { cudaFree(0); }\n")
    with monkeypatch.context() as mp:
        _interrupt_after(mp, 2)
        with pytest.raises(KeyboardInterrupt):
            hipify_tree([tmp_path / "src"], out, OPTS)
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
    res = hipify_tree([tmp_path / "src"], out, OPTS)
    assert res.written  # what the interrupted run did not write
    assert b"hipFree(0)" in (out / "checksum.hip").read_bytes()
    assert not hipify_tree([tmp_path / "src"], out, OPTS).written


def test_include_through_an_unknown_include_dir_follows_the_rename(tmp_path: Path, write: Write) -> None:
    """<helper_cuda.h> from a project's Common/ (a -I directory hipify is not told about): the one file of the
    tree ending in the spelling is the target, so the include follows its rename; an ambiguous or a relative
    spelling, or a header nobody renames, is left alone."""
    src, out = tmp_path / "src", tmp_path / "out"
    write(
        src,
        {
            "Common/helper_cuda.h": "#pragma once\n#include <cuda_runtime.h>\ncudaError_t check();\n",
            "Common/cuda/detail.h": "#pragma once\ncudaStream_t s;\n",
            "Common/plain.h": "#pragma once\nint plain();\n",
            "a/util.h": "cudaEvent_t e;\n",
            "shim/unistd.h": "#include <direct.h>\ncudaStream_t s;\n",
            "b/util.h": "cudaEvent_t e;\n",
            "Samples/x/x.cu": (
                '#include <helper_cuda.h>\n#include "cuda/detail.h"\n#include <plain.h>\n#include <util.h>\n'
                "#include <../Common/helper_cuda.h>\n#include <stdio.h>\n#include <unistd.h>\n"
            ),
        },
    )
    hipify_tree([src], out, OPTS)
    lines = (out / "Samples/x/x.hip").read_text().splitlines()
    assert lines[0] == RUNTIME.decode().rstrip("\n")  # a .cu unit: the runtime first, as nvcc had it
    assert lines[1:] == [
        "#include <helper_hip.h>",  # renamed (cuda -> hip in a changed file's name)
        '#include "hip/detail.h"',  # a directory named cuda is renamed in the output
        "#include <plain.h>",  # unchanged header: same name
        "#include <util.h>",  # two candidates: left alone
        "#include <../Common/helper_cuda.h>",  # a relative spelling is not guessed at
        "#include <stdio.h>",
        "#include <unistd.h>",  # the system's, not the project's Windows shim of that name
    ]
    assert (out / "Common/helper_hip.h").is_file() and (out / "Common/hip/detail.h").is_file()


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".hipify-state.json"
    }


@pytest.mark.parametrize("jobs", [1, 2])
def test_copies_into_a_new_output_are_those_into_an_existing_one(tmp_path: Path, write: Write, jobs: int) -> None:
    """A new output directory gets its copies while the translations run (in the worker processes with -j 2),
    each by the first file to claim its output; an existing one gets them in the write pass. The same bytes,
    findings and lists either way, two copies with one output included."""
    big = bytes(range(256)) * (3 << 12)  # 3 MiB
    write(
        tmp_path / "src",
        {
            **TREE,
            "data/big.bin": big,
            "cuda/notes.txt": "first\n",  # both -> hip/notes.txt: the first claims it
            "hip/notes.txt": "second\n",
            "z/late.dat": b"\x00" * 5000,
        },
    )
    (tmp_path / "src" / "data" / "broken.bin").symlink_to(tmp_path / "nowhere")  # unreadable: a finding
    opts = HipifyOptions(hip_version=(6, 4), jobs=jobs)
    new = hipify_tree([tmp_path / "src"], tmp_path / "new", opts)
    (tmp_path / "old").mkdir()
    old = hipify_tree([tmp_path / "src"], tmp_path / "old", opts)
    assert _files(tmp_path / "new") == _files(tmp_path / "old")
    assert (tmp_path / "new" / "data" / "big.bin").read_bytes() == big
    assert (tmp_path / "new" / "hip" / "notes.txt").read_text() == "first\n"
    found = [
        json.dumps(r.to_json()["findings"]).replace(str(tmp_path / d), "OUT") for r, d in ((new, "new"), (old, "old"))
    ]
    assert found[0] == found[1]
    assert [f.rule for f in new.findings if f.kind == "error"] == ["unreadable", "output-collision"]
    assert new.copied == old.copied  # (sources)
    for a, b in ((new.written, old.written), (new.unchanged, old.unchanged)):
        assert [p.relative_to(tmp_path / "new") for p in a] == [p.relative_to(tmp_path / "old") for p in b]
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".hipify-tmp")]
    again = hipify_tree([tmp_path / "src"], tmp_path / "new", opts)  # a rerun: nothing to copy
    assert again.written == [] and len(again.unchanged) == len(new.written)


def test_a_worker_process_error_is_the_runs_error(
    tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With -j 2 the work is shared with a forked process: an error there (a write error, here) is raised in the
    run as it was raised there, and a worker that dies is one clear error; a new output directory is not made."""
    write(tmp_path / "src", {**TREE, **{f"d/f{i}.txt": f"{i}\n" for i in range(40)}})
    real = tree_mod._hash_and_copy
    parent = os.getpid()

    def in_the_worker(fail: Callable[[str], object]) -> Callable[..., object]:
        def copy(path: str, *args: object) -> object:
            if os.getpid() != parent:
                fail(path)
            else:
                time.sleep(0.02)  # (the parent is slow: the worker takes chunks too)
            return real(path, *args)  # type: ignore[arg-type]

        return copy

    def no_space(path: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(tree_mod, "_hash_and_copy", in_the_worker(no_space))
    with pytest.raises(OSError) as caught:
        hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(6, 4), jobs=2))
    assert caught.value.errno == errno.ENOSPC and caught.value.strerror == "No space left on device"
    assert caught.value.filename.startswith(str(tmp_path / "src"))
    monkeypatch.setattr(tree_mod, "_hash_and_copy", in_the_worker(lambda _path: os._exit(9)))
    with pytest.raises(ToolError, match=r"worker process \d+ ended without its results") as died:
        hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(hip_version=(6, 4), jobs=2))
    assert died.value.exit_code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]  # no output, no staging directory
