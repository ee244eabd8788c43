from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import tools.hipify.engines as engines
from tools.errors import ToolError
from tools.hipify import HipifyOptions, hipify_tree
from tools.hipify.lint_cli import main as lint_main
from tools.hipify.mapping import read_tsv
from tools.hipify.update_mappings import main as update_main

Write = Callable[[Path, dict[str, "bytes | str"]], None]
FIXTURE = Path(__file__).resolve().parent / "data" / "hipify_fixture"

FAKE_ENGINE = r"""
import re
PYTORCH_MAP = {"cudaFree": "hipFree", "cudaStream_t": "hipStream_t"}
RE_PYTORCH_PREPROCESSOR = re.compile(r"(?<=\W)(cudaFree|cudaStream_t)(?=\W)")
"""


def test_external_engine_wrapper(tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "fake"
    write(
        fake,
        {
            "hipify_torch/__init__.py": "",
            "hipify_torch/v2/__init__.py": "",
            "hipify_torch/v2/hipify_python.py": FAKE_ENGINE,
        },
    )
    monkeypatch.syspath_prepend(str(fake))
    for mod in [m for m in sys.modules if m.startswith("hipify_torch")]:
        monkeypatch.delitem(sys.modules, mod)
    src = tmp_path / "src"
    write(
        src,
        {
            "k.cu": b'#include "b.h"\n// caf\xe9 cudaFree\n void f(cudaStream_t s) { cudaFree(0); }\n',
            "b.h": "#pragma once\ncudaStream_t g();\n",
        },
    )
    res = hipify_tree([src], tmp_path / "out", HipifyOptions(hip_version=(5, 2), engine="hipify_torch"))
    out = (tmp_path / "out" / "k.hip").read_bytes()
    # that engine rewrites comments too, but no byte is lost (Latin-1 safe), and includes still follow renames
    api = b"#include <hip/hip_runtime_api.h>  // [hipify] nvcc includes the CUDA runtime implicitly\n"
    runtime = api.replace(b"hip_runtime_api.h", b"hip_runtime.h")
    assert out == runtime + b'#include "b_hip.h"\n// caf\xe9 hipFree\n void f(hipStream_t s) { hipFree(0); }\n'
    assert (tmp_path / "out" / "b_hip.h").read_bytes() == b"#pragma once\n" + api + b"hipStream_t g();\n"
    assert res.engine == "hipify_torch"


def test_external_engine_missing_is_a_user_error(tmp_path: Path, write: Write, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "_CANDIDATES", ("no_such_module_for_hipify_test",))
    write(tmp_path / "src", {"k.cu": "cudaFree(0);\n"})
    with pytest.raises(ToolError, match="importable"):
        hipify_tree([tmp_path / "src"], tmp_path / "out", HipifyOptions(engine="hipify_torch"))


def test_lint_command(tmp_path: Path, write: Write, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path, {"k.cu": "__global__ void k() {\n  int lane = threadIdx.x & 31;\n}\n", "ok.cpp": "int x;\n"})
    assert lint_main([str(tmp_path), "--hip-version", "5.2", "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert [(f["rule"], f["line"], f["column"]) for f in found] == [("lane-math", 2, 26)]
    assert lint_main([str(tmp_path / "ok.cpp"), "--hip-version", "5.2"]) == 0
    with pytest.raises(ToolError):
        lint_main([str(tmp_path / "missing.cu")])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_update_mappings_from_a_git_repository(tmp_path: Path) -> None:
    repo = tmp_path / "hipify"
    shutil.copytree(FIXTURE, repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "fixture"], check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    out = tmp_path / "db.tsv"
    assert update_main(["--git-dir", str(repo / ".git"), "-o", str(out)]) == 0
    meta, entries = read_tsv(out)
    assert meta["source_commit"] == sha and len(entries) == 10
    out2 = tmp_path / "db2.tsv"
    assert update_main([str(repo), "-o", str(out2)]) == 0  # a checkout: the commit is found too
    assert read_tsv(out2)[0]["source_commit"] == sha
    assert read_tsv(out)[1] == read_tsv(out2)[1]  # same rows either way


@pytest.mark.parametrize("where", ["parent-is-a-file", "is-a-file"])
def test_an_output_that_cannot_be_written_is_one_clear_error(tmp_path: Path, write: Write, where: str) -> None:
    """An output directory that cannot be made (its parent is a file, or it is a file): one paragraph naming it and
    how to fix it, exit 1, no traceback, nothing made (no staging directory left beside it)."""
    write(tmp_path / "src", {"k.cu": "__global__ void k() {}\nvoid f() { cudaFree(0); }\n"})
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    out = blocker / "out" if where == "parent-is-a-file" else blocker
    proc = subprocess.run(
        [sys.executable, "-m", "tools", "hipify", str(tmp_path / "src"), "-o", str(out), "--hip-version", "6.4"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: cannot write the output into {out}: ")
    assert "choose another with -o" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert blocker.read_text() == "not a directory\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "src"]
