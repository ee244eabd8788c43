"""Faults and hostile environments (issue 8): interrupted builds resume to the same wheel, concurrent
builds are serialised, a read-only tree builds, a symlink loop is reported, a full disk is named.
Every test here is marked `fault`; the session prints how many behaved as stated."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from _support import ROOT, SOURCE_DATE_EPOCH, Toolchains, copy_tree, temp_env, tree_digest

pytestmark = [pytest.mark.slow, pytest.mark.fault]

# SIGINT as in a terminal: a test run started in the background by a non-interactive shell inherits SIGINT
# ignored (and Python then keeps it ignored), which would make the SIGINT case below wait forever.
HOOK = (
    "import signal, sys, json\nsignal.signal(signal.SIGINT, signal.default_int_handler)\nimport build_backend\n"
    "print(build_backend.build_wheel(sys.argv[1], json.loads(sys.argv[2])))\n"
)


def start(tree: Path, out: Path, env: dict[str, str], **config: str) -> subprocess.Popen[str]:
    """The backend hook in its own process group, as pip runs it (signals go to the whole group)."""
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-c", HOOK, str(out), json.dumps(config)],
        cwd=tree,
        env={**env, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_for(proc: subprocess.Popen[str], marker: str, timeout: float = 600) -> str:
    """Read the process's output until ``marker`` appears; return what was read."""
    assert proc.stdout is not None
    seen = []
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        seen.append(line)
        if marker in line:
            return "".join(seen)
        assert time.monotonic() < deadline, "".join(seen)
    raise AssertionError(f"process ended before {marker!r}:\n{''.join(seen)}")


def finish(proc: subprocess.Popen[str], timeout: float = 900) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"the build did not end within {timeout:.0f} s:\n{out[-4000:]}") from None
    return proc.returncode, out


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# (stage the build is paused at, signal, seconds to wait after the pause point before signalling)
INTERRUPTIONS = [
    ("hipify", signal.SIGINT, 0.0),
    ("compile", signal.SIGTERM, 1.0),  # while Ninja compiles
    ("cargo", signal.SIGKILL, 8.0),  # while cargo compiles and links
    ("pack", signal.SIGKILL, 0.0),
]


def test_interrupted_builds_resume_to_the_same_wheel(
    sdist_tree: Path, toolchains: Toolchains, built_wheels: dict[str, Path], tmp_path: Path
) -> None:
    """SIGINT, SIGTERM and SIGKILL during hipify, compile, cargo (compile + link) and packing: each leaves no
    wheel behind, and nothing in the user's TMPDIR (the tools' temporary files go to <build-dir>/tmp, removed
    on the way out and, after a SIGKILL, by the next build); the next build into the same build directory
    gives the uninterrupted wheel."""
    user_tmp = tmp_path / "user tmp"
    env = {**toolchains.env_for("rocm"), **temp_env(user_tmp)}
    build_dir, out = tmp_path / "build", tmp_path / "dist"
    for stage, sig, delay in INTERRUPTIONS:
        paused_env = {**env, "MONARCH_FAULT_PAUSE_AT": stage}
        proc = start(sdist_tree, out, paused_env if delay == 0.0 else {**env}, **{"build-dir": str(build_dir)})
        wait_for(proc, f"fault-injection: paused at {stage}" if delay == 0.0 else f"] {stage}: ")
        time.sleep(delay)
        os.killpg(proc.pid, sig)
        code, log = finish(proc, timeout=180)  # an interrupted build ends at once
        assert code != 0, log
        assert "Traceback" not in log
        assert not list(out.glob("*.whl")), f"a wheel was left after {sig.name} at {stage}"
        if sig != signal.SIGKILL:
            assert not list(out.glob(".*.partial")), f"a partial file was left after {sig.name} at {stage}"
        if delay == 0.0 and sig != signal.SIGKILL:  # no tool was running: the tools' TMPDIR is gone too
            assert not (build_dir / "tmp").exists(), f"<build-dir>/tmp was left after {sig.name} at {stage}"
        assert not list(user_tmp.iterdir()), f"files were left in TMPDIR after {sig.name} at {stage}"
    proc = start(sdist_tree, out, env, **{"build-dir": str(build_dir)})
    code, log = finish(proc)
    assert code == 0, log[-4000:]
    assert not list(user_tmp.iterdir()) and not (build_dir / "tmp").exists()
    (wheel,) = out.glob("*.whl")
    assert not list(out.glob(".*.partial"))
    assert sha(wheel) == sha(built_wheels["rocm"]), "the resumed build differs from an uninterrupted one"


def test_concurrent_builds_into_one_build_dir_are_serialised(
    sdist_tree: Path, toolchains: Toolchains, built_wheels: dict[str, Path], tmp_path: Path
) -> None:
    env = toolchains.env_for("cpu")
    build_dir = tmp_path / "shared-build"
    first = start(
        sdist_tree, tmp_path / "a", {**env, "MONARCH_FAULT_PAUSE_AT": "cargo"}, **{"build-dir": str(build_dir)}
    )
    wait_for(first, "fault-injection: paused at cargo")
    second = start(sdist_tree, tmp_path / "b", env, **{"build-dir": str(build_dir)})
    waiting = wait_for(second, "waiting for it to finish", timeout=120)
    assert f"pid {first.pid}" in waiting  # says who holds the lock
    os.killpg(first.pid, signal.SIGTERM)  # the holder goes away; the waiter proceeds
    finish(first)
    code, log = finish(second)
    assert code == 0, log[-4000:]
    (wheel,) = (tmp_path / "b").glob("*.whl")
    assert sha(wheel) == sha(built_wheels["cpu"])


@contextmanager
def mounted(args: list[str], target: Path) -> Iterator[None]:
    """A mount for the duration of a test; skips where this machine does not allow mounting."""
    target.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"cannot mount here: {proc.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


def test_read_only_source_tree_builds(sdist_tree: Path, toolchains: Toolchains, tmp_path: Path) -> None:
    """Nothing is written into the source tree: with no build-dir given, a read-only tree builds in the
    per-user cache directory."""
    before = tree_digest(sdist_tree)
    ro = tmp_path / "ro"
    with mounted(["--bind", str(sdist_tree)], ro):
        subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)], check=True)
        assert subprocess.run(["touch", str(ro / "probe")], capture_output=True, check=False).returncode != 0
        env = {**toolchains.env_for("cpu"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        code, log = finish(start(ro, tmp_path / "dist", env))
        assert code == 0, log[-4000:]
        assert str(tmp_path / "cache" / "monarch-runtime" / "build") in log
    assert list((tmp_path / "dist").glob("*.whl"))
    assert tree_digest(sdist_tree) == before


def test_symlink_loop_in_csrc_is_reported_not_followed(tmp_path: Path, toolchains: Toolchains) -> None:
    tree = copy_tree(tmp_path / "tree")
    (tree / "csrc" / "loop1").symlink_to("loop2")
    (tree / "csrc" / "loop2").symlink_to("loop1")
    (tree / "csrc" / "up").symlink_to("..", target_is_directory=True)
    proc = start(tree, tmp_path / "dist", toolchains.env_for("rocm"), **{"build-dir": str(tmp_path / "b")})
    code, log = finish(proc)
    assert code != 0 and "Traceback" not in log
    assert "loop1" in log and "symbolic links" in log  # named, with the reason
    assert not list((tmp_path / "dist").glob("*.whl"))


def test_out_of_disk_is_named_and_the_next_build_succeeds(tmp_path: Path, toolchains: Toolchains) -> None:
    small = tmp_path / "small disk"
    env = toolchains.env_for("cpu")
    with mounted(["-t", "tmpfs", "-o", "size=24m", "tmpfs"], small):
        code, log = finish(start(ROOT, tmp_path / "dist", env, **{"build-dir": str(small / "build")}))
        assert code != 0 and "Traceback" not in log
        assert "No space left on device" in log or "out of disk space" in log
        assert str(small) in log  # names the directory
        assert not list((tmp_path / "dist").glob("*.whl"))
    with mounted(["-t", "tmpfs", "-o", "size=2g", "tmpfs"], small):  # space freed
        code, log = finish(start(ROOT, tmp_path / "dist", env, **{"build-dir": str(small / "build")}))
        assert code == 0, log[-4000:]
    assert list((tmp_path / "dist").glob("*.whl"))


@pytest.mark.parametrize(
    ("variable", "value", "needle"),
    [
        ("MONARCH_ARCHS", "80;$(touch {marker})", "not an architecture name"),
        ("MONARCH_BUILD_DIR", "{tmp}/b`touch {marker}`", "contains '`'"),
        ("MONARCH_BUILD_DIR", "{tmp}/b$(touch {marker})", "contains '$'"),
        ("MONARCH_PLATFORM", "cpu\nrm -rf /", "is not one of"),
        ("CUDA_HOME", "/nonexistent;touch {marker}", "does not exist"),
    ],
)
def test_environment_values_never_reach_a_shell(
    variable: str, value: str, needle: str, tmp_path: Path, clean_env: dict[str, str]
) -> None:
    marker = tmp_path / "injected"
    env = {**clean_env, variable: value.format(marker=marker, tmp=tmp_path)}
    if variable == "MONARCH_ARCHS":
        env["MONARCH_PLATFORM"] = "cuda"
        env["CUDA_HOME"] = str(tmp_path)
    code, log = finish(start(ROOT, tmp_path / "dist", env))
    assert code != 0 and "Traceback" not in log
    assert needle in log, log[-2000:]
    assert not marker.exists()
