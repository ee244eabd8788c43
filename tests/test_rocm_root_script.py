"""ci/rocm-root.sh itself: bad requests, idempotence, and that nothing it mounts is ever seen outside the
command it runs (a private mount namespace), also when the command fails or is killed."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from _roots import require_root, run_in_root

from ci.roots import SCRIPT as ROOT_SCRIPT


def script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT_SCRIPT), *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def mounts_under(path: Path) -> list[str]:
    real = str(path.resolve())
    with open("/proc/self/mounts", encoding="utf-8") as table:
        return [line for line in table if line.split()[1].startswith(real)]


@pytest.mark.fault
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("make", "6.3", "{dest}"), "has no recipe"),
        (("make",), "which ROCm"),
        (("make", "7.2"), "no directory given"),
        (("make", "6.4", "{dest}", "--with-hipify-clang"), "7.2 only"),
        (("make", "7.2", "{dest}", "--bogus"), "unknown option"),
        (("run", "/nonexistent-root", "--", "true"), "not a finished ROCm root"),
        (("frobnicate",), "usage"),
    ],
)
def test_bad_requests_are_one_clear_line(args: tuple[str, ...], needle: str, tmp_path: Path) -> None:
    dest = tmp_path / "root"  # a directory of this test's own: nothing may be made there
    proc = script(*(a.format(dest=dest) for a in args))
    assert proc.returncode != 0
    assert needle in proc.stderr and "[rocm-root] error:" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not dest.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.fault
def test_run_without_a_command_or_with_a_missing_bind() -> None:
    root = require_root("7.2")
    assert "no command given" in script("run", str(root), "--").stderr
    proc = script("run", str(root), "--bind", "/nonexistent/path", "--", "true")
    assert proc.returncode != 0 and "--bind /nonexistent/path" in proc.stderr


def test_make_is_idempotent_and_quick_on_a_made_root() -> None:
    root = require_root("7.2")
    stamp = (root / ".monarch-root").read_text()
    start = time.monotonic()
    proc = script("make", "7.2", str(root))
    assert proc.returncode == 0 and "up to date" in proc.stderr, proc.stderr
    assert time.monotonic() - start < 30  # nothing downloaded or installed
    assert (root / ".monarch-root").read_text() == stamp
    assert not mounts_under(root)


def test_make_brings_a_root_of_an_older_recipe_to_the_bare_state(tmp_path: Path) -> None:
    """Roots made before linked cc/c++ to the ROCm clang in /usr/local/bin (kinder than a user's machine):
    make removes those links, quickly and without touching the stamp, and leaves anything else there."""
    stamp = (require_root("7.2") / ".monarch-root").read_text()
    old = tmp_path / "root"
    local = old / "usr" / "local" / "bin"
    local.mkdir(parents=True)
    (old / ".monarch-root").write_text(stamp)
    (local / "cc").symlink_to("/usr/bin/clang-22")
    (local / "c++").symlink_to("/usr/bin/clang++-22")
    (local / "mine").symlink_to("/usr/bin/true")
    for _ in range(2):  # idempotent: the second run finds nothing to remove
        proc = script("make", "7.2", str(old))
        assert proc.returncode == 0 and "up to date" in proc.stderr, proc.stderr
    assert not (local / "cc").is_symlink() and not (local / "c++").is_symlink()
    assert (local / "mine").is_symlink() and (old / ".monarch-root").read_text() == stamp
    assert proc.stderr.count("removed") == 0


def test_make_puts_the_library_headers_where_debian_installs_them(tmp_path: Path) -> None:
    """--with-libs unpacks the libraries' headers under /opt/rocm-libs/usr; make links them into /usr/include/<lib>
    (Debian's place, where the compiler and detection look on a user's machine), relative so that they resolve
    inside the root and outside, quickly, idempotently, leaving what /usr/include already has."""
    stamp = (require_root("6.4") / ".monarch-root").read_text()
    old = tmp_path / "root"
    unpacked = old / "opt" / "rocm-libs" / "usr" / "include"
    (unpacked / "hipcub").mkdir(parents=True)
    (unpacked / "hipcub" / "hipcub.hpp").write_text("// hipCUB\n")
    (unpacked / "hipblaslt-export.h").write_text("// a flat header\n")
    (unpacked / "thrust").mkdir()
    system = old / "usr" / "include"
    (system / "thrust").mkdir(parents=True)  # already there: left alone
    (old / ".monarch-root").write_text(stamp)
    for _ in range(2):
        proc = script("make", "6.4", str(old), "--with-libs")
        assert proc.returncode == 0 and "up to date" in proc.stderr, proc.stderr
    assert os.readlink(system / "hipcub") == "../../opt/rocm-libs/usr/include/hipcub"
    assert (system / "hipcub" / "hipcub.hpp").read_text() == "// hipCUB\n"
    assert (system / "hipblaslt-export.h").is_file() and (system / "hipblaslt-export.h").is_symlink()
    assert (system / "thrust").is_dir() and not (system / "thrust").is_symlink()
    assert (old / ".monarch-root").read_text() == stamp


def test_commands_see_their_binds_and_the_outside_sees_no_mounts(tmp_path: Path) -> None:
    root = require_root("7.2")
    (tmp_path / "hello").write_text("from outside")
    proc = run_in_root("7.2", ["sh", "-c", f"cat {tmp_path}/hello && echo inside > {tmp_path}/back"], binds=[tmp_path])
    assert proc.returncode == 0 and proc.stdout == "from outside", proc.stderr
    assert (tmp_path / "back").read_text() == "inside\n"
    failing = run_in_root("7.2", ["sh", "-c", "exit 7"], binds=[tmp_path])
    assert failing.returncode == 7
    assert not mounts_under(root)


@pytest.mark.fault
def test_a_killed_command_leaves_nothing_mounted(tmp_path: Path) -> None:
    root = require_root("7.2")
    flag = tmp_path / "started"
    proc = subprocess.Popen(
        [
            "bash",
            str(ROOT_SCRIPT),
            "run",
            str(root),
            "--bind",
            str(tmp_path),
            "--",
            "sh",
            "-c",
            f"touch {flag}; sleep 60",
        ],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not flag.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert flag.exists(), "the command never started in the root"
        assert not mounts_under(root)  # the mounts exist only inside the command's namespace
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not mounts_under(root)
