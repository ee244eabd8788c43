"""CUDA: where we look for the toolkit and NCCL, and why.

The toolkit root is ``CUDA_HOME``, then ``CUDA_PATH``, then ``/usr/local/cuda`` (NVIDIA's installers).
It may be PyPI's ``cuda-toolkit`` tree (``.../site-packages/nvidia/cu13``): nvcc finds everything relative
to itself there, and cudart's static library sits in ``lib/`` instead of ``lib64/``. NCCL's header comes
from ``NCCL_HOME``/``NCCL_ROOT``, the ``nvidia-nccl-cu13`` wheel beside the toolkit or in this
interpreter's site-packages, or ``/usr/include``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path

from buildcore.errors import BuildError
from buildcore.settings import Settings
from buildcore.toolchain.model import (
    CUDA_ENV,
    NATIVE,
    Toolchain,
    collective_header_version,
    env_path,
    expand_native,
    find_header,
)

ENV = CUDA_ENV
FALLBACK_ROOTS = (Path("/usr/local/cuda"),)
DEFAULT_ARCHS = ("80", "90")  # A100, H100/H200
FIX = (
    "Point CUDA_HOME at a CUDA 13 toolkit (for example .../site-packages/nvidia/cu13 after "
    '`pip install "cuda-toolkit[nvcc,cudart,cccl]"`), or build the CPU wheel with -C platform=cpu.'
)


def detect(settings: Settings, environ: Mapping[str, str]) -> Toolchain:
    root = _root(environ)
    nvcc = root / "bin" / "nvcc"
    if not os.access(nvcc, os.X_OK):
        raise BuildError(f"CUDA toolkit at {root} has no compiler: {nvcc} is missing or not executable. {FIX}")
    version = _runtime_version(root)
    if version is None:
        raise BuildError(f"could not read the CUDA version from {root}/include/cuda_runtime_api.h. {FIX}")
    lib_dir = next((d for d in (root / "lib64", root / "lib") if (d / "libcudart_static.a").is_file()), None)
    if lib_dir is None:
        raise BuildError(
            f"CUDA toolkit at {root} has no libcudart_static.a in lib64/ or lib/. "
            'Install the cudart component (`pip install "cuda-toolkit[cudart]"`).'
        )
    archs = _validate_archs(settings, _nvcc_archs(nvcc), environ)
    include = _find_nccl(root, environ)
    return Toolchain(
        platform="cuda",
        root=root,
        compiler=nvcc,
        version=version,
        archs=archs,
        collective="nccl",
        collective_include=include,
        collective_soname="libnccl.so.2",
        collective_header_version=collective_header_version(include / "nccl.h"),
        lib_dir=lib_dir,
    )


def _root(environ: Mapping[str, str]) -> Path:
    found = env_path(environ, ENV)
    if found:
        name, root = found
        if not root.is_dir():
            raise BuildError(f"{name}={root} does not exist or is not a directory. {FIX}")
        return root
    for candidate in FALLBACK_ROOTS:
        if candidate.is_dir():
            return candidate
    probed = ", ".join([*ENV, *(str(p) for p in FALLBACK_ROOTS)])
    raise BuildError(f"the CUDA build was requested but no toolkit was found (probed {probed}). {FIX}")


def _runtime_version(root: Path) -> tuple[int, int] | None:
    try:
        text = (root / "include" / "cuda_runtime_api.h").read_text(errors="replace")
    except OSError:
        return None
    m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", text)
    if not m:
        return None
    value = int(m.group(1))
    return value // 1000, (value % 1000) // 10


def _nvcc_archs(nvcc: Path) -> tuple[str, ...]:
    try:
        out = subprocess.run([os.fspath(nvcc), "--list-gpu-arch"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        raise BuildError(f"{nvcc} --list-gpu-arch failed ({err}); is this a working nvcc?") from None
    return tuple(sorted(set(re.findall(r"compute_(\d+[a-z]?)", out.stdout)), key=_arch_key))


def _arch_key(arch: str) -> tuple[int, str]:
    digits = re.match(r"\d+", arch)
    return (int(digits.group(0)) if digits else 0, arch)


def _validate_archs(settings: Settings, supported: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    wanted, origin = settings.archs or DEFAULT_ARCHS, settings.origin("archs")
    if NATIVE in wanted:
        found = native_archs(environ, origin)
        wanted = expand_native(wanted, found)
        origin = f"{origin}; native: {', '.join(found)} found by nvidia-smi"
    archs = []
    for arch in wanted:
        norm = re.sub(r"^(sm_|compute_)", "", arch)
        if norm not in supported:
            raise BuildError(
                f"CUDA architecture {arch!r} (from {origin}) is not accepted by this nvcc. "
                f"It accepts: {' '.join(supported)}. Pass e.g. -C archs=80;90."
            )
        archs.append(norm)
    return tuple(dict.fromkeys(archs))


def native_archs(environ: Mapping[str, str], origin: str) -> tuple[str, ...]:
    """The compute capabilities of this machine's GPUs (``-C archs=native``), as nvidia-smi reports them
    (``--query-gpu=compute_cap``: 9.0 -> 90); an error naming what nvidia-smi said when it finds none."""
    search = environ.get("PATH", os.defpath)
    smi = shutil.which("nvidia-smi", path=search)
    fix = (
        "On a machine without an NVIDIA GPU (or driver) name the architectures instead, e.g. -C archs=80;90 "
        "(A100, H100/H200)."
    )
    if smi is None:
        raise BuildError(
            f"archs=native (from {origin}) builds for this machine's GPUs, which are read with nvidia-smi "
            f"--query-gpu=compute_cap, and nvidia-smi (part of the NVIDIA driver) is not on PATH ({search}). {fix}"
        )
    argv = [smi, "--query-gpu=compute_cap", "--format=csv,noheader"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False, env=dict(environ))
    except (OSError, subprocess.TimeoutExpired) as err:
        raise BuildError(f"archs=native (from {origin}): {' '.join(argv)} could not run ({err}). {fix}") from None
    caps = re.findall(r"^\s*(\d+)\.(\d+)\s*$", proc.stdout, re.M)
    if proc.returncode != 0 or not caps:
        said = " ".join((proc.stdout + proc.stderr).split())[:300] or "nothing"
        raise BuildError(
            f"archs=native (from {origin}) builds for this machine's GPUs, and {' '.join(argv)} found none "
            f"(exit status {proc.returncode}; it said: {said}). {fix}"
        )
    return tuple(dict.fromkeys(f"{major}{minor}" for major, minor in caps))


def _site_packages() -> list[Path]:
    """site-packages directories of this interpreter (where pip puts nvidia-nccl-cu13)."""
    paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    paths += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [Path(p) for p in dict.fromkeys(paths)]


def _find_nccl(root: Path, environ: Mapping[str, str]) -> Path:
    # The PyPI toolkit tree is .../site-packages/nvidia/cu13; nvidia-nccl-cu13 sits beside it.
    fallbacks = [root.resolve().parent / "nccl" / "include", root / "include"]
    fallbacks += [sp / "nvidia" / "nccl" / "include" for sp in _site_packages()]
    fallbacks.append(Path("/usr/include"))
    return find_header(
        "nccl.h",
        ("NCCL_HOME", "NCCL_ROOT"),
        fallbacks,
        environ,
        needed="the CUDA build needs NCCL's header",
        fix="Install it with `pip install nvidia-nccl-cu13`, or set NCCL_HOME to a directory with include/nccl.h.",
    )
