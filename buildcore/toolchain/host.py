"""The host side of a build: which compilers build host code and which linker Rust uses, and why.

A user's variables always win: ``CC``, ``CXX``, ``CUDAHOSTCXX``, ``CARGO_TARGET_<TRIPLE>_LINKER`` (or
``-C linker=`` in ``RUSTFLAGS``). The tools read those themselves; detection only checks that they name a
program, so that a typo is an error here, before anything compiles. Without them, first that is found:

* C (the ``cc`` crate in build scripts: rust/rocm_compat's C shims): ``cc`` on PATH; then, for ROCm, the
  ROCm clang (the C driver beside the HIP clang++); for CUDA ``gcc``, ``clang``. The CPU build compiles no C.
* C++ (CMake's ``CMAKE_CXX_COMPILER``): ``c++`` on PATH; then the ROCm clang++, or ``g++``, ``clang++``.
* nvcc's host compiler (``-ccbin``, CMake's ``CMAKE_CUDA_HOST_COMPILER``): ``CUDAHOSTCXX``, else the C++ one.
* Rust's linker: ``cc`` on PATH (cargo's own default: nothing is passed), else the C compiler chosen
  above (for the CPU build: ``CC``, ``gcc``, ``clang``), passed as ``CARGO_TARGET_<TRIPLE>_LINKER``.

Debian's and Ubuntu's ROCm packages (``hipcc libamdhip64-dev``) bring clang but no gcc, g++ or cc: such a
machine builds the ROCm wheel with the ROCm clang alone. nvcc cannot work without a host compiler, and
Rust cannot link without a linker: there, the error comes from here, naming what was probed.
"""

from __future__ import annotations

import os
import platform
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from buildcore.errors import BuildError
from buildcore.toolchain.model import HostTool, HostTools, linker_variable

C_FALLBACKS = ("gcc", "clang")  # after cc, where the toolkit brings no compiler of its own
CXX_FALLBACKS = ("g++", "clang++")  # after c++
PLATFORM_LABELS = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm"}
_RUSTFLAGS_LINKER = re.compile(r"-C\s*linker=([^\s\x1f]+)")


def choose(platform_name: str, environ: Mapping[str, str], hip_compiler: Path | None = None) -> HostTools:
    """The host tools for ``platform_name`` ("cpu", "cuda" or "rocm"); ``hip_compiler`` is the ROCm clang++
    detection found (its C driver and itself are ROCm's fallbacks)."""
    search = environ.get("PATH", os.defpath)
    target = rust_target(environ, search)
    c = cxx = cuda_host = c_fallback = None
    if platform_name == "rocm":
        assert hip_compiler is not None
        rocm_c, rocm_cxx = rocm_clang(hip_compiler)
        c_fallback = HostTool(rocm_c, "the ROCm clang: no cc on PATH") if rocm_c is not None else None
        c = _pick(environ, search, "CC", ("cc",), fallback=rocm_c, fallback_why="the ROCm clang: no cc on PATH")
        cxx = _pick(environ, search, "CXX", ("c++",), fallback=rocm_cxx, fallback_why="the ROCm clang: no c++ on PATH")
    elif platform_name == "cuda":
        cxx = _pick(environ, search, "CXX", ("c++", *CXX_FALLBACKS))
        cuda_host = _cuda_host(environ, search, cxx)
        if cuda_host is None:
            raise BuildError(
                "the CUDA build needs a host C++ compiler: nvcc compiles the host half of every .cu file with it, "
                f"and none was found (probed CUDAHOSTCXX and CXX: unset; c++, g++ and clang++ on PATH={search}). "
                "Install one (Debian/Ubuntu: apt-get install g++; RHEL/Fedora: dnf install gcc-c++), or set "
                "CUDAHOSTCXX (or CXX) to a C++ compiler this nvcc supports, e.g. CUDAHOSTCXX=/usr/bin/g++-13."
            )
        c = _pick(environ, search, "CC", ("cc", *C_FALLBACKS))
    linker = _linker(environ, search, target, c, platform_name, c_fallback=c_fallback)
    if platform_name == "cuda" and c is None:  # the linker came from the user; the C shims still need CC
        raise BuildError(
            "the CUDA build needs a C compiler for the C shims of rust/rocm_compat (the cc crate), and none was "
            f"found (probed CC: unset; cc, gcc and clang on PATH={search}). Install one (Debian/Ubuntu: apt-get "
            "install gcc), or set CC to a C compiler."
        )
    return HostTools(rust_target=target, linker=linker, c=c, cxx=cxx, cuda_host=cuda_host)


def rust_target(environ: Mapping[str, str], search: str) -> str:
    """The triple cargo builds for: ``host:`` of ``rustc -vV``, else this machine's ``<arch>-unknown-linux-gnu``."""
    rustc = environ.get("RUSTC") or shutil.which("rustc", path=search)
    if rustc:
        try:
            out = subprocess.run(
                [rustc, "-vV"], capture_output=True, text=True, timeout=60, check=False, env=dict(environ)
            ).stdout
        except (OSError, subprocess.TimeoutExpired):
            out = ""
        m = re.search(r"^host:\s*(\S+)", out, re.M)
        if m:
            return m.group(1)
    return f"{platform.machine()}-unknown-linux-gnu"


def rocm_clang(hip_compiler: Path) -> tuple[Path | None, Path]:
    """The ROCm clang's C driver (``clang`` beside ``clang++``, ``clang-22`` beside ``clang++-22``) and C++ driver."""
    c = hip_compiler.with_name(hip_compiler.name.replace("clang++", "clang", 1))
    return (c if c != hip_compiler and os.access(c, os.X_OK) else None), hip_compiler


def _resolve(word: str, search: str) -> Path | None:
    if "/" in word:
        return Path(word) if os.access(word, os.X_OK) and Path(word).is_file() else None
    found = shutil.which(word, path=search)
    return Path(found) if found else None


def _user_value(environ: Mapping[str, str], name: str, search: str, what: str, rule: str) -> Path | None:
    """The program the user's variable ``name`` names (its first word: ``CC="ccache gcc"`` is ccache), or
    None when it is unset; a value that names no program is an error."""
    value = environ.get(name, "").strip()
    if not value:
        return None
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    found = _resolve(words[0], search) if words else None
    if found is None:
        where = "is not an executable file" if "/" in words[0] else f"is not on PATH ({search})"
        raise BuildError(
            f"{name}={value!r} (from the environment) names no program: {words[0]} {where}. Set {name} to {what}, "
            f"or unset it to let the build choose ({rule})."
        )
    return found


def _pick(
    environ: Mapping[str, str],
    search: str,
    variable: str,
    names: Sequence[str],
    *,
    fallback: Path | None = None,
    fallback_why: str = "",
) -> HostTool | None:
    what = "a C compiler" if variable == "CC" else "a C++ compiler"
    rule = f"{', '.join(names)} on PATH" + (", then the ROCm clang" if fallback_why else "")
    user = _user_value(environ, variable, search, what, rule)
    if user is not None:
        return HostTool(user, f"{variable} from the environment", passed=False)
    for i, name in enumerate(names):
        found = shutil.which(name, path=search)
        if found:
            why = f"{name} on PATH" if i == 0 else f"{name} on PATH: no {names[0]}"
            return HostTool(Path(found), why)
    return HostTool(fallback, fallback_why) if fallback is not None else None


def _cuda_host(environ: Mapping[str, str], search: str, cxx: HostTool | None) -> HostTool | None:
    user = _user_value(environ, "CUDAHOSTCXX", search, "a C++ compiler nvcc supports", "CXX, c++, g++, clang++")
    if user is not None:
        return HostTool(user, "CUDAHOSTCXX from the environment", passed=False)  # CMake reads it itself
    if cxx is None:
        return None
    # CMake does not hand CXX to nvcc: the choice is passed, also when it came from the user's CXX.
    return HostTool(cxx.path, cxx.why, passed=True)


def _linker(
    environ: Mapping[str, str],
    search: str,
    target: str,
    c: HostTool | None,
    platform_name: str,
    *,
    c_fallback: HostTool | None = None,
) -> HostTool:
    """Rust's linker; ``c`` is the C compiler chosen for the platform, ``c_fallback`` ROCm's own clang."""
    variable = linker_variable(target)
    flags = environ.get("CARGO_ENCODED_RUSTFLAGS") or environ.get("RUSTFLAGS", "")
    m = _RUSTFLAGS_LINKER.search(flags)
    if m:
        return HostTool(Path(m.group(1)), "-C linker= in RUSTFLAGS", passed=False)
    user = _user_value(environ, variable, search, "a linker driver (a C compiler)", "cc, then the C compiler")
    if user is not None:
        return HostTool(user, f"{variable} from the environment", passed=False)
    found = shutil.which("cc", path=search)
    if found:
        return HostTool(Path(found), "cc on PATH, cargo's default", passed=False)
    if platform_name == "cpu":
        c = _pick(environ, search, "CC", C_FALLBACKS)
    if c is not None and not c.passed and len(environ.get("CC", "").split()) > 1:
        # CC="ccache gcc": a launcher and a compiler, not one program cargo could run as its linker.
        c = _pick({}, search, "CC", C_FALLBACKS) if platform_name != "rocm" else c_fallback
    if c is not None:
        why = c.why if "no cc" in c.why else f"{c.why}: no cc on PATH"
        return HostTool(c.path, why)
    probed = f"{variable}, RUSTFLAGS' -C linker= and CC: unset; cc" + (
        ", gcc and clang" if platform_name in ("cpu", "cuda") else ""
    )
    raise BuildError(
        f"the {PLATFORM_LABELS.get(platform_name, platform_name)} build needs a C compiler as Rust's "
        "linker: rustc links the extension through a C compiler driver (cargo's default is cc), and none was found "
        f"(probed {probed} on PATH={search}). Install one (Debian/Ubuntu: apt-get install gcc; RHEL/Fedora: dnf "
        f"install gcc), or set {variable} (or CC) to a C compiler."
    )
