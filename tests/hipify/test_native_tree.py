"""The native tree pass (rust/hipify_native: engine/tree*.rs, the fast path of ``python -m tools hipify``)
against the Python one (tools/hipify/tree.py + cli.py): the same output trees byte for byte, the same state
file (but the output mtimes it records), the same report (but ``seconds``), the same stderr and exit status,
on trees built from the golden files, csrc/, a generated corpus and hand-made trees (nested directories,
includes resolved relative, angled and by suffix, cuda-named directories and files, collisions, NUL, Latin-1
and BOM files, unreadable files, non-ASCII names), on reruns into an existing output (nothing new, a changed,
added or removed input, other options) and on bad command lines.

Two native modes: ``bridge`` runs the native tree pass with tree.py's own per-file ``_process`` (what the
tree pass does with the per-file results is what is compared), ``native`` runs everything natively (the
fast path). Plus: the plan (its key, its staleness), target detection against rocm.py on synthetic roots,
the path arithmetic, and the fast path through ``python -m tools hipify`` in a subprocess (with its silent
fallbacks).

Skipped without the module unless ``MONARCH_TEST_REQUIRE_NATIVE=1`` (then failures), as test_native.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath
from typing import Any
from unittest import mock

import pytest
from _native_support import load, make_generated, skip_unless_usable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from buildcore.toolchain import rocm
from tools.errors import ToolError
from tools.hipify import cache, cli, insert, plan, tree
from tools.hipify.model import HipifyOptions

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
NATIVE, PROBLEM = load("hipify_main")
needs_native = skip_unless_usable(PROBLEM, "native tree pass comparisons")
pytestmark = needs_native


def _native_per_file() -> bool:
    """Whether the module runs the per-file pass natively too (not only the tree pass)."""
    return bool(getattr(NATIVE, "TREE_NATIVE", False))


MODES = [
    "bridge",
    pytest.param("native", marks=pytest.mark.skipif(not _native_per_file(), reason="no native per-file pass yet")),
]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plans and detect files go to a cache of the test session's own (never the user's)."""
    if NATIVE is None:
        pytest.fail(f"MONARCH_TEST_REQUIRE_NATIVE=1, but the native module with the tree pass is not usable: {PROBLEM}")
    monkeypatch.setenv("MONARCH_HIPIFY_CACHE", str(tmp_path_factory.getbasetemp() / "hipify-cache"))


# --- running both ------------------------------------------------------------------------------------


def _options(argv: list[str]) -> tuple[HipifyOptions, tuple[int, int] | None]:
    """The options cli.main derives from ``argv`` (a command line _fast_parse takes), and the target."""
    a = cli._fast_parse(argv)
    assert a is not None, argv
    opts = HipifyOptions(
        hip_version=tree.parse_hip_version(a.hip_version) if a.hip_version is not None else None,
        translate_comments_and_strings=a.translate_comments,
        launch_style=a.launch,
        mapping_overrides=a.mappings,
        jobs=a.jobs,
        naming=a.naming,
        lint=not a.no_lint,
        engine=a.engine,
        report_unmapped=not a.no_unmapped,
    )
    return opts, opts.hip_version if opts.hip_version is not None else tree.detect_hip_version()


class _Bridge:
    """tree.py's own per-file work for the native tree pass (see py_tree.rs's Bridge)."""

    def __init__(self, opts: HipifyOptions, hip: tuple[int, int] | None) -> None:
        self.key = tree._options_key(opts, hip)

    def process(self, path: str, translate: bool, masks: Any, lint: bool) -> tuple[object, ...]:
        key = self.key if masks is None else (*self.key[:5], masks)
        p = tree._process(path, translate, key, lint)
        return (p.mode, p.sha, p.changed, p.data, p.findings, p.includes, p.defines, p.facts, p.insert_at,
                p.insert_line, p.unresolved, p.error)  # fmt: skip

    def project_masks(self, paths: list[str], wanted: list[str]) -> tuple[object, list[str]]:
        table = tree.project_masks(paths, frozenset(n.encode("latin-1") for n in wanted))
        return table, [name for name, *_ in table]


_PLANS: dict[str, str] = {}


def _plan_text(argv: list[str]) -> str:
    opts, hip = _options(argv)
    key = plan.options_plan_key(opts, hip)
    if key not in _PLANS:
        _PLANS[key] = plan.plan_text(opts, hip, key)
    return _PLANS[key]


def run_native(argv: list[str], mode: str) -> tuple[int, str, str]:
    """The native run of ``python -m tools hipify ARGV`` (it must be taken, not left to Python)."""
    opts, hip = _options(argv) if cli._fast_parse(argv) else (HipifyOptions(), None)
    text = _plan_text(argv) if cli._fast_parse(argv) else ""
    bridge = _Bridge(opts, hip) if mode == "bridge" else None
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, bridge, text)
    assert not isinstance(r, str), f"the native path was not taken: {r}"
    rc, out, err = r
    return rc, out or "", err


def run_python(argv: list[str]) -> tuple[int, str, str]:
    """``python -m tools hipify ARGV`` on the Python path, in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), mock.patch.object(cli, "_keep_plan"):
        try:
            rc = cli.main(argv)
        except ToolError as e:
            print(f"error: {e}", file=sys.stderr)
            rc = e.exit_code
    return rc, out.getvalue(), err.getvalue()


def _tree_of(root: Path) -> dict[str, object]:
    """Everything under ``root``: files (bytes; the state file without the mtimes it records), directories,
    links."""
    found: dict[str, object] = {}
    if not root.exists():
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = Path(dirpath, d)
            found[str(p.relative_to(root))] = "link" if p.is_symlink() else "dir"
        for f in filenames:
            p = Path(dirpath, f)
            rel = str(p.relative_to(root))
            if p.is_symlink():
                found[rel] = ("link", os.readlink(p))
            elif f == tree.STATE_FILE:
                found[rel] = re.sub(rb'"out_mtime_ns":\d+,', b"", p.read_bytes())
            else:
                found[rel] = p.read_bytes()
    return found


_SECONDS = re.compile(r'\n "seconds": [0-9.e-]+\n')


def compare(tmp: Path, args: list[str], mode: str, *, out: Path | None = None, report: bool = True) -> tuple[int, str]:
    """Run ``args -o OUT [--report R]`` on both paths from the same starting output directory; assert the same
    results; leave the native run's output in place. Returns (exit status, stderr)."""
    out = out or tmp / "out"
    snap = tmp / "snap"
    rep = tmp / "report.json"
    if snap.exists():
        shutil.rmtree(snap)
    if out.exists():
        shutil.copytree(out, snap, symlinks=True)
    argv = [*args, "-o", str(out), *(["--report", str(rep)] if report else [])]
    results = []
    trees = []
    for side in ("python", mode):
        if rep.exists():
            rep.unlink()
        if out.exists():
            shutil.rmtree(out)
        if snap.exists():
            shutil.copytree(snap, out, symlinks=True)
        rc, stdout, stderr = run_python(argv) if side == "python" else run_native(argv, mode)
        text = rep.read_text() if rep.exists() else None
        results.append((rc, _SECONDS.sub("\n", stdout), stderr, _SECONDS.sub("\n", text) if text else text))
        trees.append(_tree_of(out))
    py, nat = results
    assert nat[0] == py[0], (py, nat)
    assert nat[2] == py[2]  # stderr
    assert nat[1] == py[1]  # stdout
    assert nat[3] == py[3]  # the report
    assert trees[1].keys() == trees[0].keys()
    for rel, content in trees[0].items():
        assert trees[1][rel] == content, rel
    return py[0], py[2]


# --- trees -------------------------------------------------------------------------------------------


def _write(root: Path, files: dict[str, bytes | str]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden files, csrc/, tests/hipify/data/warp_sync and ~200 KB of bench/hipify_bench.py's corpus."""
    root = tmp_path_factory.mktemp("corpus") / "src"
    shutil.copytree(HERE / "golden", root / "golden")
    shutil.copytree(REPO / "csrc", root / "csrc")
    shutil.copytree(HERE / "data" / "warp_sync", root / "warp_sync")
    make_generated(root / "gen", 200_000)
    return root


# Hand-made: every resolution path, naming rule and odd file the tree pass has a branch for.
ODD: dict[str, bytes | str] = {
    "main.cu": '#include "common/util.h"\n#include <helper_cuda.h>\n#include "cuda/kern.cuh"\n'
    "__global__ void k() {}\nint main() { cudaDeviceSynchronize(); k<<<1, 1>>>(); }\n",
    "common/util.h": "#pragma once\n#include <cuda_runtime.h>\ninline void u() { cudaFree(0); }\n",
    "common/plain.h": "#pragma once\nint plain();\n",
    "Common/helper_cuda.h": "#pragma once\n#include <cuda.h>\n#define checkCudaErrors(x) x\n",
    "cuda/kern.cuh": '#include "../common/plain.h"\n__device__ int kern() { return __shfl_sync(FULL_MASK, 1, 0); }\n',
    "cuda/masks.h": "#pragma once\n#define FULL_MASK 0xffffffff\n",
    "cuda/cuda_utils.h": '#include "kern.cuh"\nvoid f() { cudaStream_t s; }\n',
    "sub/deep/x.cpp": '#include "common/plain.h"\n#include "util.h"\nint x() { return plain(); }\n',
    "sub/deep/api.cpp": "void g() { cudaMalloc(0, 4); }\n",
    "sub/deep/sync.cu": "__device__ void s(unsigned m) { __syncwarp(m); __activemask(); }\n",
    "sub/unistd.h": "#pragma once\n",
    "sub/uses_unistd.c": "#include <unistd.h>\nint main() { return 0; }\n",
    "a.cu": "__global__ void a() {}\n",
    "a.hip": "// hip already\n",
    "nul.cu": b"\x00\x01binary cudaMalloc\n",
    "latin1.cpp": "// caf\xe9 cudaMalloc\nvoid l() { cudaMalloc(0, 1); }\n".encode("latin-1"),
    "bom.cu": b"\xef\xbb\xbf#include <cuda_runtime.h>\nvoid b() { cudaFree(0); }\n",
    "crlf.cu": b"#include <stdio.h>\r\n__global__ void c() {}\r\n",
    ".hidden_file.cu": "void h() { cudaFree(0); }\n",
    ".git/config": "[core]\n",
    "__pycache__/x.cu": "void p() {}\n",
    ".hidden/y.cu": "void y() {}\n",
    "notes.txt": "cudaMalloc in prose\n",
    "CMakeLists.txt": "add_library(x main.cu)\n",
    "noext": "cudaFree\n",
    "dots..cu": "void d() { cudaFree(0); }\n",
    "lint.cu": "__global__ void w(int* o) { int lane = threadIdx.x & 31; o[lane] = 32; }  // hipify: ignore(lane-math)\n",
    "unmapped.cu": "#define cudaMyMacro 1\nvoid m() { int x = cudaMyMacro + cudaNotARealName; }\n",
    "dír/é.cu": '#include "é.h"\nvoid e() { cudaFree(0); }\n',
    "dír/é.h": "#pragma once\nvoid f() { cudaStream_t s; }\n",
    "café.h": "#pragma once\ncudaError_t cafe();\n",  # (a UTF-8 name, included by its Latin-1 spelling below)
    "latin1_include.cpp": b'#include "caf\xe9.h"\nint z() { return 0; }\n',
    "sub/missing.cpp": '#include "nowhere.h"\n#include <sys/types.h>\n#include "../broken.h"\nint q;\n',
}


@pytest.fixture
def odd(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    _write(src, ODD)
    (src / "broken.cu").symlink_to(src / "nowhere.cu")  # unreadable: a finding, no output
    (src / "broken.h").symlink_to(src / "nowhere.h")  # (an include of it resolves no further)
    (src / "linked_dir").symlink_to(src / "common")  # not walked (followlinks=False)
    (src / "linked.h").symlink_to(src / "common" / "plain.h")
    return src


# --- the comparisons -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "opts",
    [
        ["--hip-version", "5.2"],
        ["--hip-version", "6.4", "--naming", "keep"],
        ["--hip-version", "7.2", "--translate-comments", "--launch", "hipLaunchKernelGGL", "-j", "1"],
        ["--hip-version", "6.2.1", "--no-lint", "--no-unmapped", "--max-listed", "3", "--strict"],
    ],
    ids=["5.2", "6.4-keep", "7.2-literals-launch", "6.2-nolint-strict"],
)
def test_corpus(tmp_path: Path, corpus: Path, opts: list[str], mode: str) -> None:
    compare(tmp_path, [str(corpus), *opts], mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("naming", ["hipify_torch", "keep"])
@pytest.mark.parametrize("hip", ["5.2", "6.4"])
def test_odd_tree(tmp_path: Path, odd: Path, naming: str, hip: str, mode: str) -> None:
    rc, err = compare(tmp_path, [str(odd), "--hip-version", hip, "--naming", naming, "--max-listed", "100"], mode)
    assert rc == 0
    assert "[unreadable]" in err and "[output-collision]" in err


@pytest.mark.parametrize("mode", MODES)
def test_file_arguments_and_two_roots(tmp_path: Path, odd: Path, corpus: Path, mode: str) -> None:
    args = [str(odd / "main.cu"), str(odd / "sub"), str(corpus / "golden"), str(odd / "cuda" / "kern.cuh")]
    compare(tmp_path, [*args, "--hip-version", "6.4", "-q"], mode)


@pytest.mark.parametrize("mode", MODES)
def test_reruns(tmp_path: Path, odd: Path, mode: str) -> None:
    args = [str(odd), "--hip-version", "6.4"]
    compare(tmp_path, args, mode)  # fresh (staged beside, renamed into place)
    compare(tmp_path, args, mode)  # nothing new: every result from the record, every output unchanged
    (odd / "sub" / "deep" / "api.cpp").write_text("void g() { cudaMalloc(0, 8); cudaFree(0); }\n")  # changed
    (odd / "new.cu").write_text('#include "common/util.h"\nvoid n() {}\n')  # added
    shutil.rmtree(odd / "cuda")  # removed: stale outputs and their emptied directories go
    compare(tmp_path, args, mode)
    compare(tmp_path, [*args, "--no-lint"], mode)  # other options: nothing reused
    (tmp_path / "out" / "common" / "plain.h").write_text("edited output\n")  # an output edited by hand
    compare(tmp_path, [*args, "--no-lint"], mode)
    os.utime(tmp_path / "out" / "main.hip", ns=(0, 0))  # an output touched: compared by content
    compare(tmp_path, [*args, "--no-lint"], mode)


@pytest.mark.parametrize("mode", MODES)
def test_existing_output_without_record(tmp_path: Path, odd: Path, mode: str) -> None:
    _write(tmp_path / "out", {"main.hip": "old\n", "keep/me.txt": "mine\n", tree.STATE_FILE: "not json"})
    compare(tmp_path, [str(odd), "--hip-version", "5.2"], mode)


@pytest.mark.parametrize("mode", MODES)
def test_project_masks_and_header_edit(tmp_path: Path, mode: str) -> None:
    src = tmp_path / "src"
    _write(
        src,
        {
            "common.cuh": "#pragma once\n#define FULL_MASK 0xffffffff\n#define HALF 0x0000ffff\n",
            "k.cu": '#include "common.cuh"\n__global__ void k(int* d) {\n'
            "  d[0] = __shfl_sync(FULL_MASK, d[0], 0) + __shfl_sync(HALF, d[0], 0) + __shfl_sync(NOWHERE, d[0], 0);\n}\n",
        },
    )
    args = [str(src), "--hip-version", "6.4"]
    compare(tmp_path, args, mode)
    compare(tmp_path, args, mode)
    (src / "common.cuh").write_text("#pragma once\n#define FULL_MASK 0x0000ffff\n#define HALF 0x0000ffff\n")
    compare(tmp_path, args, mode)


@pytest.mark.parametrize("mode", MODES)
def test_report_to_stdout_and_quiet(tmp_path: Path, odd: Path, mode: str) -> None:
    compare(tmp_path, [str(odd), "--hip-version", "5.2", "--report=-", "-q"], mode, report=False)
    compare(tmp_path, [str(odd), "--hip-version", "5.2", "--max-listed", "0", "--strict"], mode)


@pytest.mark.parametrize("mode", MODES)
def test_bad_inputs(tmp_path: Path, odd: Path, mode: str) -> None:
    rc, err = compare(tmp_path, [str(tmp_path / "nope"), "--hip-version", "5.2"], mode)
    assert rc == 2 and err.startswith("error: source not found")
    before = _tree_of(odd)
    argv = [str(odd / "sub"), "-o", str(odd), "--hip-version", "5.2"]
    py, nat = run_python(argv), run_native(argv, mode)
    assert nat == py and py[0] == 2 and "refusing to translate in place" in py[2]
    assert _tree_of(odd) == before
    rc, err = compare(tmp_path, [str(odd), "--hip-version", "5.2", "-j", "0"], mode)
    assert rc == 2 and err == "error: jobs must be at least 1\n"
    # a file argument inside the output directory, whose output would be itself
    out = tmp_path / "out2"
    _write(out, {"plain.h": "#pragma once\nint plain();\n", "z.cu": "void z() { cudaFree(0); }\n"})
    rc, err = compare(tmp_path, [str(out / "z.cu"), str(out / "plain.h"), "--hip-version", "5.2"], mode, out=out)
    assert rc == 2 and "would overwrite a source file" in err
    # a report that cannot be written (its directory is a file)
    rc, err = compare(tmp_path, [str(odd), "--hip-version", "5.2", "--report", str(odd / "notes.txt" / "r.json")],
                      mode, report=False)  # fmt: skip
    assert rc == 2 and err.startswith("error: cannot write report")


@pytest.mark.parametrize("mode", MODES)
def test_overrides(tmp_path: Path, odd: Path, mode: str) -> None:
    tsv = tmp_path / "local.tsv"
    tsv.write_text(
        "# project overrides\ncuda_name\thip_name\tkind\tlibrary\n"
        "cudaMalloc\thipMallocManagedX\tfunction\truntime\ncudaMyMacro\thipMyMacro\tfunction\tproject\n",
        encoding="utf-8",
    )
    compare(tmp_path, [str(odd), "--hip-version", "6.4", "--mappings", str(tsv)], mode)


@pytest.mark.parametrize("mode", MODES)
def test_relative_paths(tmp_path: Path, odd: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    args = ["./src/../src/sub", "src//main.cu", "--hip-version", "5.2", "--report=rep/x/r.json"]
    compare(tmp_path, args, mode, out=Path("out"), report=False)
    assert (tmp_path / "rep" / "x" / "r.json").is_file()


@pytest.mark.parametrize("mode", MODES)
def test_output_inside_source_and_empty_trees(tmp_path: Path, odd: Path, mode: str) -> None:
    compare(tmp_path, [str(odd), "--hip-version", "5.2"], mode, out=odd / "hip-out")  # (skipped by the walk)
    compare(tmp_path, [str(odd), "--hip-version", "5.2"], mode, out=odd / "hip-out")
    (tmp_path / "empty").mkdir()
    compare(tmp_path, [str(tmp_path / "empty"), "--hip-version", "5.2"], mode, out=tmp_path / "out-empty")


@pytest.mark.parametrize("mode", MODES)
def test_record_pointing_elsewhere(tmp_path: Path, odd: Path, mode: str) -> None:
    args = [str(odd), "--hip-version", "5.2"]
    compare(tmp_path, args, mode)
    state_path = tmp_path / "out" / tree.STATE_FILE
    state = json.loads(state_path.read_text())
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("not ours\n")
    state["files"][str(odd / "gone.cpp")] = {**state["files"][str(odd / "notes.txt")], "out": str(outside)}
    state["files"][str(odd / "gone2.cpp")] = {**state["files"][str(odd / "notes.txt")], "out": str(odd / "main.cu")}
    state["files"][str(odd / "gone3.cpp")] = [1, 2]  # (not an entry: ignored, but it is a key)
    state_path.write_text(json.dumps(state, sort_keys=True, separators=(",", ":")) + "\n")
    compare(tmp_path, args, mode)
    assert outside.exists() and (odd / "main.cu").exists()


@pytest.mark.parametrize("mode", MODES)
def test_state_shared_both_ways(tmp_path: Path, odd: Path, mode: str) -> None:
    """A run of either kind reuses the other's record: nothing translated or written again, the record kept."""
    argv = [str(odd), "--hip-version", "6.4", "-o", str(tmp_path / "out")]
    state = tmp_path / "out" / tree.STATE_FILE
    for first, second in ((run_native, run_python), (run_python, run_native)):
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        first(argv, mode) if first is run_native else first(argv)
        before = state.read_bytes()
        rc, _, err = second(argv, mode) if second is run_native else second(argv)
        assert rc == 0 and "): 0 written, " in err, err
        assert state.read_bytes() == before


# --- random trees ------------------------------------------------------------------------------------------

_DIRS = ["", "a/", "cuda/", "a/b/", "Common/", "lib_cuda/x/"]
_NAMES = ["x.h", "y.cuh", "cuda_util.h", "k.cu", "m.cpp", "x_hip.h", "CUDA.h", "z.hip", "u.inl", "w.c"]
_LINES = [
    "__global__ void k{n}() {{}}",
    "void f{n}() {{ cudaMalloc(0, 4); }}",
    "__device__ int s{n}(int v) {{ return __shfl_sync(FULL_MASK, v, 0); }}",
    "#define FULL_MASK 0xffffffff",
    "#include <cuda_runtime.h>",
    "#include <hip/hip_runtime.h>",
    "#include <stdio.h>",
    "int plain{n};",
    "#define MY_CUDA_THING 1",
    "// cudaFree in a comment",
]


@st.composite
def _trees(draw: st.DrawFn) -> dict[str, str]:
    paths = draw(
        st.lists(
            st.tuples(st.sampled_from(_DIRS), st.sampled_from(_NAMES)).map("".join), min_size=1, max_size=8, unique=True
        )
    )
    files: dict[str, str] = {}
    for n, path in enumerate(paths):
        lines = []
        for _ in range(draw(st.integers(0, 5))):
            if draw(st.booleans()):
                target = draw(st.sampled_from(paths))
                how = draw(st.sampled_from(["rel", "root", "name", "angled", "up"]))
                spelled = {
                    "rel": os.path.relpath(target, os.path.dirname(path) or "."),
                    "root": target,
                    "name": target.rsplit("/", 1)[-1],
                    "angled": target,
                    "up": "../" + target,
                }[how]
                lines.append(f"#include <{spelled}>" if how == "angled" else f'#include "{spelled}"')
            else:
                lines.append(draw(st.sampled_from(_LINES)).format(n=n))
        files[path] = "\n".join(lines) + ("\n" if draw(st.booleans()) else "")
    return files


@pytest.mark.parametrize("mode", MODES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=_trees(), hip=st.sampled_from(["5.2", "6.4", "7.2"]), naming=st.sampled_from(["hipify_torch", "keep"]))
def test_random_trees(
    tmp_path_factory: pytest.TempPathFactory, mode: str, files: dict[str, str], hip: str, naming: str
) -> None:
    tmp = tmp_path_factory.mktemp("random")
    _write(tmp / "src", files)
    compare(tmp, [str(tmp / "src"), "--hip-version", hip, "--naming", naming], mode)
    first = next(iter(files))
    (tmp / "src" / first).write_text(files[first] + "void edited() { cudaFree(0); }\n")
    compare(tmp, [str(tmp / "src"), "--hip-version", hip, "--naming", naming], mode)


# --- what the native side leaves to Python ---------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["src", "-o", "out", "--engine", "hipify_torch"],
        ["src", "-o", "out", "--hip-version", "five"],
        ["src", "-o", "out", "--out=x"],
        ["src", "--version"],
        ["-o", "out"],
        ["src", "-o", "out", "--report", "."],
    ],
)
def test_left_to_python(argv: list[str]) -> None:
    assert isinstance(NATIVE.hipify_main(argv, plan.TOOLS_DIR, None, ""), str)


@pytest.mark.parametrize("bad", [["--naming", "flat"], ["--launch", "hip"], ["--engine", "other"]])
def test_an_option_value_model_py_does_not_offer_is_left_to_argparse(tmp_path: Path, odd: Path, bad: list[str]) -> None:
    # the values come from the plan (model.py's LAUNCH_STYLES, NAMING_STYLES), the engine must be builtin
    argv = [str(odd), "-o", str(tmp_path / "out"), "--hip-version", "5.2"]
    r = NATIVE.hipify_main([*argv, *bad], plan.TOOLS_DIR, None, _plan_text(argv))
    assert isinstance(r, str) and ("argparse" in r or "--engine other" in r), r
    assert not (tmp_path / "out").exists()
    proc = _cli([*argv, *bad], {})
    assert proc.returncode == 2 and f"invalid choice: '{bad[1]}'" in proc.stderr, proc.stderr


def test_a_source_given_twice_is_left_to_python(tmp_path: Path, odd: Path) -> None:
    argv = [str(odd / "sub"), str(odd / "sub" / "deep" / "x.cpp"), "-o", str(tmp_path / "out"), "--hip-version", "5.2"]
    opts, hip = _options(argv)
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), _plan_text(argv))
    assert isinstance(r, str) and "twice" in r
    assert not (tmp_path / "out").exists()


def test_what_python_would_hold_otherwise_is_left_to_python(tmp_path: Path) -> None:
    src = tmp_path / "src"
    _write(src, {"ok.cu": "void f() { cudaFree(0); }\n"})
    with open(os.path.join(os.fsencode(src), b"\xffx.cu"), "wb") as fh:  # not UTF-8: surrogate-escaped in Python
        fh.write(b"void g() {}\n")
    out = tmp_path / "out"
    argv = [str(src), "-o", str(out), "--hip-version", "5.2"]
    opts, hip = _options(argv)
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), _plan_text(argv))
    assert isinstance(r, str) and "UTF-8" in r
    assert not out.exists()
    os.unlink(os.path.join(os.fsencode(src), b"\xffx.cu"))
    out.write_text("a file where the output directory goes\n")  # Python fails with an OSError there
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), _plan_text(argv))
    assert isinstance(r, str) and "not a directory" in r


def test_stale_or_missing_plan_is_left_to_python(tmp_path: Path, odd: Path) -> None:
    argv = [str(odd), "-o", str(tmp_path / "out"), "--hip-version", "5.2"]
    text = _plan_text(argv)
    header, body = text.split("\n", 1)
    head = json.loads(header)
    head["inputs"][2][1][1] += 1  # a .py file's mtime
    stale = json.dumps(head) + "\n" + body
    opts, hip = _options(argv)
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), stale)
    assert isinstance(r, str) and "stale" in r
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), text.replace(plan.PLAN_FORMAT, "other"))
    assert isinstance(r, str)
    assert not (tmp_path / "out").exists()


def test_a_tree_beyond_the_memory_bound_is_left_to_python(
    tmp_path: Path, odd: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the native pass holds a run's inputs and outputs: past its bound, Python (RETAIN_BYTES) takes the run,
    # before anything is written
    argv = [str(odd), "-o", str(tmp_path / "out"), "--hip-version", "5.2"]
    opts, hip = _options(argv)
    monkeypatch.setenv("MONARCH_HIPIFY_NATIVE_MAX_BYTES", "1000")
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), _plan_text(argv))
    assert isinstance(r, str) and "exceed" in r and "RETAIN_BYTES" in r
    assert not (tmp_path / "out").exists()
    monkeypatch.setenv("MONARCH_HIPIFY_NATIVE_MAX_BYTES", str(10 << 20))
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), _plan_text(argv))
    assert not isinstance(r, str) and r[0] == 0
    assert (tmp_path / "out").is_dir()


def test_a_module_built_from_other_sources_is_left_to_python(tmp_path: Path, odd: Path) -> None:
    # the fingerprint plan.py computes over rust/hipify_native is the one build.rs compiled in (the module under
    # test is built from this tree), and a plan naming other sources is refused with the way to fix it
    assert plan.native_sources() == NATIVE.NATIVE_SOURCES
    argv = [str(odd), "-o", str(tmp_path / "out"), "--hip-version", "5.2"]
    text = _plan_text(argv)
    header, body = text.split("\n", 1)
    head = json.loads(header)
    assert head["native_sources"] == NATIVE.NATIVE_SOURCES
    assert os.path.join(plan.NATIVE_DIR, "src", "lib.rs") in [p for p, _sig in head["inputs"]]
    head["native_sources"] = "00000000-1"
    opts, hip = _options(argv)
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, hip), json.dumps(head) + "\n" + body)
    assert isinstance(r, str) and "pip install ./rust/hipify_native" in r
    assert not (tmp_path / "out").exists()


def test_native_sources_follow_the_files(tmp_path: Path) -> None:
    crate = tmp_path / "crate"
    (crate / "src" / "engine").mkdir(parents=True)
    (crate / "Cargo.toml").write_text("[package]\n")
    (crate / "src" / "lib.rs").write_text("mod engine;\n")
    before = plan.native_sources(str(crate))
    (crate / "src" / "engine" / "mod.rs").write_text("")
    after = plan.native_sources(str(crate))
    assert before is not None and after is not None and before != after
    (crate / "src" / "engine" / "mod.rs").write_text("//")
    assert plan.native_sources(str(crate)) != after
    assert plan.native_sources(str(tmp_path / "none")) is None


def test_plan_names_agree() -> None:
    for hip, overrides, flags in [
        ((5, 2), None, (False, True, False, True)),
        (None, "/x/o.tsv", (True, False, True, False)),
    ]:
        key, name, directory = NATIVE._plan_name(plan.TOOLS_DIR, hip, overrides, *flags)
        comments, unmapped, launch, lint = flags
        assert key == plan.plan_key(hip, overrides, comments=comments, unmapped=unmapped, launch=launch, lint=lint)
        assert name == plan.entry_name("plan", key)
    assert directory == cache.cache_dir()


def test_refresh_writes_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONARCH_HIPIFY_CACHE", str(tmp_path / "cache"))
    opts = HipifyOptions(hip_version=(5, 2))
    assert plan.refresh(opts, (5, 2))
    assert not plan.refresh(opts, (5, 2))
    path, key = plan.plan_path(opts, (5, 2)) or ("", "")
    assert plan._current(path, plan.PLAN_FORMAT, key)
    assert (tmp_path / "cache" / plan.entry_name("plan", key)).is_file()


# --- target detection ------------------------------------------------------------------------------------


def _rocm_roots(tmp: Path) -> Path:
    opt = tmp / "opt"
    _write(
        opt,
        {
            "rocm-5.7.1/.info/version": "5.7.1-43\n",
            "rocm-6.10.0/include/hip/hip_version.h": "#define HIP_VERSION_MAJOR 6\n#define HIP_VERSION_MINOR 10\n",
            "rocm-6.2.0/share/hip/version": "HIP_VERSION_MAJOR=6\nHIP_VERSION_MINOR=2\n",
            "home/include/hip/hip_version.h": "#define  HIP_VERSION_MAJOR\t7\n#define HIP_VERSION_MINOR 2 // x\n",
            "bad/.info/version": "  x.2\n",
            "both/.info/version": "6.4.0\n",
            "both/include/hip/hip_version.h": "#define HIP_VERSION_MAJOR 7\n",
            "dir/include/hip/hip_version.h/x": "",
        },
    )
    return opt


def test_detection_matches_rocm_py(tmp_path: Path) -> None:
    opt = _rocm_roots(tmp_path)
    files = [tuple(v) for v in rocm.VERSION_FILES]
    cases: list[dict[str, str]] = [
        {},
        {"ROCM_HOME": str(opt / "home")},
        {"ROCM_HOME": "", "ROCM_PATH": str(opt / "rocm-5.7.1")},
        {"ROCM_HOME": str(opt / "bad"), "ROCM_PATH": str(opt / "home")},
        {"ROCM_PATH": str(opt / "both") + "//"},
        {"ROCM_PATH": str(opt / "dir")},
        {"ROCM_PATH": str(opt / "nowhere")},
    ]
    for env in cases:
        roots = [str(p) for p in rocm.fallback_roots(opt)]
        got = NATIVE._installed_version(list(env.items()), list(rocm.ENV), roots, files)
        assert got == rocm.installed_version(env, opt), env
    shutil.rmtree(opt / "rocm-6.10.0")
    roots = [str(p) for p in rocm.fallback_roots(opt)]
    assert NATIVE._installed_version([], list(rocm.ENV), roots, files) == rocm.installed_version({}, opt) == (6, 2)


def test_detection_through_the_detect_file(tmp_path: Path, odd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opt = _rocm_roots(tmp_path)
    monkeypatch.setenv("MONARCH_HIPIFY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ROCM_HOME", str(opt / "home"))
    monkeypatch.delenv("ROCM_PATH", raising=False)
    assert tree.detect_hip_version() == (7, 2)
    argv = [str(odd), "-o", str(tmp_path / "out")]
    assert "no detect file" in NATIVE.hipify_main(argv, plan.TOOLS_DIR, None, "")
    plan.refresh_detect()
    opts = HipifyOptions()
    key = plan.options_plan_key(opts, (7, 2))
    r = NATIVE.hipify_main(argv, plan.TOOLS_DIR, _Bridge(opts, (7, 2)), plan.plan_text(opts, (7, 2), key))
    assert isinstance(r, tuple) and "(HIP 7.2)" in r[2]


# --- paths -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["", ".", "/", "//a//b/", "///a/../b", "a/./b/../../..", "x.cu", ".cu", "..cu", "a.b/c", "a/b.", "/a/b.CU",
     "dír/é.h", "a/.hidden.h", "cuda/CUDA_x.cuh", "a/b/c.tar.gz"],
)  # fmt: skip
def test_path_arithmetic(path: str) -> None:
    normpath, pure, ext, suffix, rel = NATIVE._paths(path, "/a/b/c")
    assert normpath == os.path.normpath(path)
    assert pure == str(PurePosixPath(path))
    assert ext == os.path.splitext(path)[1]
    assert suffix == PurePosixPath(path).suffix
    if path.startswith("/"):
        assert rel == tree._relative(os.path.normpath(path), "/a/b/c")
    if path and not path.endswith("/") and path not in (".", "/"):
        for changed in (False, True):
            for naming in ("hipify_torch", "keep"):
                assert NATIVE._output_rel(path.lstrip("/"), changed, naming) == tree._output_rel(
                    path.lstrip("/"), changed, naming
                )


def test_file_rules_from_the_plan_decide_as_tree_py() -> None:
    # the tables are Python's (plan.file_rules(), in every plan); what the Rust side does with them must be
    # what tree.py and insert.py do: suffixes by Path.suffix or os.path.splitext, lower-cased; skipped
    # directory names; system spellings by name or prefix
    paths = [f"d/x{s}" for s in [*tree.SOURCE_SUFFIXES, *insert.IMPLICIT_SUFFIXES, ".CU", ".Cuh", ".txt", ".py", ""]]
    paths += ["d/.cu", "d/..h", "d/a.b.cu", "d.cu/x", "a/b.H", ".hg", "d/.git", "__pycache__", "node_modules"]
    paths += [*sorted(tree.SYSTEM_HEADERS), "sys/mman.h", "bits/x.h", "netinet/in.h", "cuda.h", "mysys/x.h", "vectors"]
    got = NATIVE._file_rules(json.dumps(plan.file_rules()), paths)
    for path, row in zip(paths, got):
        name = path.rsplit("/", 1)[-1]
        want = (
            PurePosixPath(path).suffix.lower() in tree.SOURCE_SUFFIXES,
            os.path.splitext(path)[1].lower() in tree.HEADER_SUFFIXES,
            os.path.splitext(path)[1].lower() in insert.IMPLICIT_SUFFIXES,
            name in tree.SKIP_DIRS,
            tree.is_system_header(path),
        )
        assert tuple(row) == want, path


# --- the fast path through python -m tools -------------------------------------------------------------------


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    path = [os.path.dirname(NATIVE.__file__), str(REPO)]
    return subprocess.run(
        [sys.executable, "-m", "tools", "hipify", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(path), **env},
        check=False,
        timeout=300,
    )


@pytest.mark.skipif(not _native_per_file(), reason="no native per-file pass yet")
def test_fast_path_end_to_end(tmp_path: Path, odd: Path) -> None:
    cache = tmp_path / "cache"
    env = {"MONARCH_HIPIFY_CACHE": str(cache), "MONARCH_HIPIFY_NATIVE_TRACE": "1"}
    out, rep = tmp_path / "out", tmp_path / "r.json"
    args = [str(odd), "--hip-version", "6.4", "--report", str(rep), "-o", str(out)]
    runs = []
    for name, extra in (("python", {"MONARCH_HIPIFY_NATIVE": "0"}), ("first", {}), ("fast", {}), ("again", {})):
        if name != "again" and out.exists():
            shutil.rmtree(out)
        proc = _cli(args, {**env, **extra})
        runs.append((name, proc, _tree_of(out), _SECONDS.sub("\n", rep.read_text())))
    (_, ref, ref_tree, ref_report), (_, first, *_), (_, fast, fast_tree, fast_report), (_, again, *_) = runs
    assert "not on the native fast path: no plan" in first.stderr  # no plan yet: Python, which writes it
    assert "not on the native fast path" not in fast.stderr + again.stderr
    assert fast.returncode == ref.returncode
    assert fast.stderr == ref.stderr
    assert fast_tree == ref_tree
    assert fast_report == ref_report
    assert "): 0 written, " in again.stderr  # the rerun reuses everything
    # a command line the fast path leaves to argparse: Python, silently (but for the trace)
    argv = [str(odd), "--hip-version", "6.4", "-o", str(tmp_path / "c"), "--no-lin"]  # (an abbreviation)
    other = _cli(argv, {"MONARCH_HIPIFY_CACHE": str(cache)})
    assert other.returncode == 0 and "files (HIP 6.4): " in other.stderr.splitlines()[-1]
    assert "native" not in other.stderr
    traced = _cli(argv, env)
    assert "not on the native fast path: a command line for argparse" in traced.stderr


def _relocated(tree: dict[str, object], out: Path) -> dict[str, object]:
    """``_tree_of(out)`` with the output directory's path in the state file (its records name their outputs) as
    "OUT", to compare two output directories."""
    state = tree.get(".hipify-state.json")
    if isinstance(state, bytes):
        tree = {**tree, ".hipify-state.json": state.replace(str(out).encode(), b"OUT")}
    return tree


@pytest.mark.skipif(not _native_per_file(), reason="no native per-file pass yet")
@pytest.mark.parametrize("fault", ["MONARCH_FAULT_HIPIFY_PANIC", "MONARCH_FAULT_HIPIFY_PANIC_WRITE"])
def test_a_panic_of_the_native_pass_leaves_the_run_to_python(tmp_path: Path, odd: Path, fault: str) -> None:
    """A bug of the native pass (a panic, injected in the per-file pass or while writing) costs the user nothing:
    the Python path does the run, with the reference's result, and no staging directory is left behind; into an
    existing output too."""
    cache = tmp_path / "cache"
    env = {"MONARCH_HIPIFY_CACHE": str(cache), "MONARCH_HIPIFY_NATIVE_TRACE": "1"}
    ref, out = tmp_path / "ref" / "out", tmp_path / "run" / "out"
    base = [str(odd), "--hip-version", "6.4", "-q"]
    first = _cli([*base, "-o", str(ref)], env)  # no plan yet: the Python path, which writes it
    assert first.returncode == 0 and "not on the native fast path: no plan" in first.stderr
    # the first source file in the walk's order is in every run, translated or copied
    victim = sorted(p.name for p in odd.rglob("*") if p.is_file() and p.suffix in (".cu", ".h", ".cuh"))[0]
    victim = victim.replace(".cu", ".hip") if fault.endswith("WRITE") else victim
    for round_ in ("fresh", "existing"):
        if round_ == "existing":
            shutil.rmtree(ref)  # both from the same existing output, after an input changed
            shutil.copytree(out, ref, symlinks=True)
            (odd / "added.cu").write_text("__global__ void added() { cudaDeviceSynchronize(); }\n")
            assert _cli([*base, "-o", str(ref)], {**env, "MONARCH_HIPIFY_NATIVE": "0"}).returncode == 0
            victim = "added.hip" if fault.endswith("WRITE") else "added.cu"  # (the one file this run processes)
        proc = _cli([*base, "-o", str(out)], {**env, fault: victim})
        assert proc.returncode == 0, proc.stderr
        assert "not on the native fast path: the native pass failed" in proc.stderr, proc.stderr
        assert "a bug, please report it" in proc.stderr
        assert _relocated(_tree_of(out), out) == _relocated(_tree_of(ref), ref)
        assert not [p for p in out.parent.iterdir() if p.name.endswith(".hipify-tmp")]
    clean = _cli([*base, "-o", str(tmp_path / "clean")], env)  # without the fault: the fast path again
    assert clean.returncode == 0 and "not on the native fast path" not in clean.stderr


@pytest.mark.skipif(not _native_per_file(), reason="no native per-file pass yet")
def test_an_output_that_cannot_be_written_is_a_clear_error_on_both_paths(tmp_path: Path, odd: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    env = {"MONARCH_HIPIFY_CACHE": str(tmp_path / "cache"), "MONARCH_HIPIFY_NATIVE_TRACE": "1"}
    base = [str(odd), "--hip-version", "6.4", "-q"]
    assert _cli([*base, "-o", str(tmp_path / "ok")], env).returncode == 0  # (the plan, for the native run)
    for extra in ({"MONARCH_HIPIFY_NATIVE": "0"}, {}):
        proc = _cli([*base, "-o", str(blocker / "out")], {**env, **extra})
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert f"error: cannot write the output into {blocker / 'out'}: Not a directory" in proc.stderr
        assert "choose another with -o" in proc.stderr
        assert "not on the native fast path" not in proc.stderr  # (each path said it itself)
    assert blocker.read_text() == "not a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "cache", "ok", "src"]  # nothing else made
