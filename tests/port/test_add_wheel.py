"""``port --add`` end to end: on a copy of the repository, the kernel is registered, and the next CUDA
wheel built from that copy lists it in build_info.json and in ``monarch_runtime.kernels()``.
The real csrc/ is never touched. Builds one wheel (about a minute on 2 cores)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from _port_support import DATA, Runner
from _support import ROOT, Toolchains, make_venv, pip_wheel, tree_digest

pytestmark = pytest.mark.slow
KERNELS = DATA / "kernels"


def copy_checkout(dest: Path) -> Path:
    """This checkout's working tree as git sees it (tracked files, and new files not ignored) copied to
    ``dest``: what the session's own wheels are built from, without build outputs."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for rel in filter(None, listed.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def test_add_registers_kernel_in_next_wheel(
    tools_cli: Runner, port_env: dict[str, str], toolchains: Toolchains, tmp_path: Path
) -> None:
    csrc_before = tree_digest(ROOT / "csrc")
    repo = copy_checkout(tmp_path / "repo")
    # The kernel lives outside the checkout, as a new contribution would.
    work = tmp_path / "contrib"
    work.mkdir()
    for name in ("scale2.cu", "scale2_params.h"):
        shutil.copy(KERNELS / name, work / name)

    proc = tools_cli(
        "port", work / "scale2.cu", "--cuda-archs", "80", "--rocm-archs", "gfx90a", "--add", env=port_env, cwd=repo
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "add: registered kernel 'scale2'" in proc.stdout
    assert (repo / "csrc" / "kernels" / "scale2.cu").read_bytes() == (work / "scale2.cu").read_bytes()
    assert (repo / "csrc" / "kernels" / "scale2_params.h").is_file()
    manifest = (repo / "csrc" / "manifest.toml").read_text()
    assert 'name = "scale2"' in manifest and 'entry = "mr_kernel_scale2"' in manifest

    # Adding it again changes nothing; a different kernel file under the same name is refused.
    again = tools_cli("port", work / "scale2.cu", "--no-cuda", "--no-rocm", "--add", env=port_env, cwd=repo)
    assert again.returncode == 0 and "already registered" in again.stdout
    (work / "scale2.cu").write_text((work / "scale2.cu").read_text() + "// changed\n")
    clash = tools_cli("port", work / "scale2.cu", "--no-cuda", "--no-rocm", "--add", env=port_env, cwd=repo)
    assert clash.returncode == 2 and "refusing to overwrite" in clash.stderr
    assert (repo / "csrc" / "manifest.toml").read_text() == manifest

    # A kernel with two entry points is refused before any work.
    bad = tools_cli(
        "port", DATA / "kernels" / "two_entries.cu", "--no-cuda", "--no-rocm", "--add", env=port_env, cwd=repo
    )
    assert bad.returncode == 2 and "several entry points" in bad.stderr

    # The next wheel has it.
    out = tmp_path / "wheel"
    out.mkdir()
    build = pip_wheel(repo, out, toolchains.env_for("cuda"), "-C", "archs=80", "-C", f"build-dir={tmp_path / 'build'}")
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        info = json.loads(zf.read("monarch_runtime/build_info.json"))
    assert info["kernels"] == ["scale2"]

    python = make_venv(tmp_path / "venv")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    listed = subprocess.run(
        [str(python), "-c", "import monarch_runtime as m; print(list(m.kernels()))"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "['scale2']"
    assert tree_digest(ROOT / "csrc") == csrc_before
