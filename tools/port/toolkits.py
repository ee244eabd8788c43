"""Find the two compilers the way the build backend does (buildcore.toolchain.detect), per side.

A side whose toolkit is missing is not an error: it is skipped, with the backend's own explanation of
what was probed and how to fix it. CUDA: CUDA_HOME/CUDA_PATH (then /usr/local/cuda), NCCL_HOME. ROCm:
ROCM_HOME/ROCM_PATH (then /opt/rocm), RCCL_HOME, HIP_CLANG_PATH.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from buildcore.errors import BuildError
from buildcore.process import tool_env
from buildcore.settings import Settings
from buildcore.toolchain import Toolchain, detect

SIDES = ("cuda", "rocm")
SIDE_LABEL = {"cuda": "CUDA", "rocm": "ROCm"}
COLLECTIVE_SONAME_MACRO = "MONARCH_COLLECTIVE_SONAME"


@dataclass(frozen=True)
class Side:
    """One side of the port: a toolchain to compile with, or why there is none."""

    name: str  # "cuda" | "rocm"
    toolchain: Toolchain | None
    skipped: str = ""  # why the side is skipped (empty when a toolchain was found)

    @property
    def label(self) -> str:
        return SIDE_LABEL[self.name]

    @property
    def archs(self) -> tuple[str, ...]:
        return self.toolchain.archs if self.toolchain else ()

    def describe(self) -> str:
        tc = self.toolchain
        if tc is None:
            return f"{self.label}: skipped"
        what = "nvcc" if self.name == "cuda" else "HIP-Clang"
        version = f" {tc.version_text}" if tc.version_text else ""
        return f"{self.label}{version} ({what} {tc.compiler}; archs {', '.join(display_archs(self))})"

    def libraries_line(self) -> str:
        """The ROCm libraries detection found (hipCUB, hipBLAS, ...) with their include directories, and RCCL's."""
        tc = self.toolchain
        if tc is None or self.name != "rocm":
            return ""
        by_dir: dict[Path, list[str]] = {}
        for name, include in tc.libraries:
            by_dir.setdefault(include, []).append(name)
        if tc.collective_include is not None:
            by_dir.setdefault(tc.collective_include, []).append("RCCL")
        if not tc.libraries:
            where = tc.root / "include" if tc.root is not None else "the ROCm root"
            rccl = f"; RCCL ({tc.collective_include})" if tc.collective_include is not None else ""
            return f"libraries: none of hipCUB, rocThrust, hipBLAS, ... in {where}{rccl}"
        return "libraries: " + "; ".join(f"{', '.join(names)} ({d})" for d, names in by_dir.items())


def display_archs(side: Side) -> list[str]:
    return [f"sm_{a}" if side.name == "cuda" else a for a in side.archs]


def find_side(
    name: str, archs: Sequence[str], environ: Mapping[str, str], *, enabled: bool = True, why_disabled: str = ""
) -> Side:
    """The toolchain of one side, with ``archs`` checked against its compiler (empty: the backend's defaults)."""
    if not enabled:
        return Side(name, None, why_disabled)
    option = f"--{name}-archs"
    try:
        tc = detect(Settings(platform=name, archs=tuple(archs), sources={"archs": option}), environ)
    except BuildError as err:
        # The backend speaks of -C settings; here the same choice is a command-line option.
        return Side(name, None, str(err).replace("-C archs=", f"{option} "))
    return Side(name, tc)


def macro_flags(defines: Sequence[tuple[str, str | None]]) -> list[str]:
    """``(name, value)`` as the compilers take them: ``-DNAME=VALUE``, or ``-UNAME`` for value None."""
    return [f"-U{name}" if value is None else f"-D{name}={value}" for name, value in defines]


def compile_command(
    side: Side,
    source: Path,
    obj: Path,
    include_dirs: Sequence[Path],
    *,
    depfile: Path | None = None,
    defines: Sequence[tuple[str, str | None]] = (),
) -> list[str]:
    """The command that compiles one translation unit as the build does (CMake's flags, without CMake), with the
    user's ``defines`` (``-D NAME=VALUE``; value None: ``-U NAME``) after the build's own, in their order; with
    ``depfile``, it also writes the files it read there (``-MD -MF``, as Ninja's builds do: nvcc and HIP-Clang)."""
    tc = side.toolchain
    assert tc is not None and tc.compiler is not None
    includes = [f"-I{d}" for d in (*include_dirs, *([tc.collective_include] if tc.collective_include else []))]
    # The ROCm libraries' headers where detection found them; <root>/include is searched already (HIP-Clang adds
    # it for --rocm-path, and /usr/include is the system's: passing it again would break #include_next).
    if side.name == "rocm" and tc.root is not None:
        searched = {tc.root / "include", Path("/usr/include"), Path("/usr/local/include")}
        extra = dict.fromkeys(d for _name, d in tc.libraries if d not in searched)
        includes += [f"-isystem{d}" for d in extra]
    define = f'-D{COLLECTIVE_SONAME_MACRO}="{tc.collective_soname}"'
    user = macro_flags(defines)
    deps = ["-MD", "-MF", os.fspath(depfile)] if depfile is not None else []
    if side.name == "cuda":
        gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in tc.archs]
        # nvcc's host compiler as detection chose it (buildcore/toolchain/host.py), as the build passes it.
        host = tc.host.cuda_host if tc.host is not None else None
        ccbin = ["-ccbin", os.fspath(host.path)] if host is not None else []
        return [
            os.fspath(tc.compiler),
            *ccbin,
            "-x",
            "cu",
            "-std=c++17",
            "-Xcompiler",
            "-fPIC",
            *gencode,
            *includes,
            define,
            *user,
            *deps,
            "-c",
            os.fspath(source),
            "-o",
            os.fspath(obj),
        ]
    assert tc.root is not None
    # HIP 5.2 (Debian 12) keeps the device bitcode in its own directory, which clang-15 must be told; HIP 6.4
    # and 7.2 keep it in clang's resource directory, where clang finds it: no flag (detection leaves it None).
    bitcode = [f"--hip-device-lib-path={tc.device_lib_dir}"] if tc.device_lib_dir is not None else []
    # A code object version chosen by detection (what the target runtime loads), when it chose one.
    code_object = getattr(tc, "code_object_version", None)
    cov = [f"-mcode-object-version={code_object}"] if isinstance(code_object, int) else []
    return [
        os.fspath(tc.compiler),
        "-x",
        "hip",
        *[f"--offload-arch={a}" for a in tc.archs],
        f"--rocm-path={tc.root}",
        *bitcode,
        *cov,
        "-std=c++17",
        "-fPIC",
        *includes,
        define,
        *user,
        *deps,
        "-c",
        os.fspath(source),
        "-o",
        os.fspath(obj),
    ]


def deps_command(
    side: Side,
    source: Path,
    include_dirs: Sequence[Path],
    depfile: Path,
    defines: Sequence[tuple[str, str | None]] = (),
) -> list[str]:
    """A preprocessing-only run that lists what ``source`` includes in ``depfile`` (``-M -MG``: a missing header is
    listed, not fatal), with the compile's flags: for a ROCm unit whose compile failed (HIP-Clang then writes no
    dependency file: the host pass, which writes it, never runs). The host pass's view of the includes."""
    cmd = compile_command(side, source, Path(os.devnull), include_dirs, defines=defines)
    at = cmd.index("-c")
    return [*cmd[:at], "--cuda-host-only", "-M", "-MG", "-MF", os.fspath(depfile), os.fspath(source)]


def read_depfile(path: Path, cwd: Path) -> list[Path] | None:
    """The files a compile's ``-MD`` dependency file lists (make syntax; relative paths are the compiler's, from
    ``cwd``), normalised; None when there is none (a compiler writes none when it stops at a missing header)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    _target, colon, deps = text.replace("\\\n", " ").partition(": ")
    if not colon:
        return None
    found = [t.replace("\\ ", " ") for t in re.findall(r"(?:\\ |\S)+", deps)]
    return [Path(os.path.normpath(cwd / f)) for f in found]


def compile_env(side: Side, environ: Mapping[str, str], tmpdir: Path) -> dict[str, str]:
    """The compiler's environment: ``environ`` with the toolchain's settings, and ``tmpdir`` as its TMPDIR."""
    env = dict(environ)
    if side.toolchain is not None:
        env.update(side.toolchain.env)
    if side.name == "rocm":
        env["HIP_PLATFORM"] = "amd"  # with an nvcc on PATH, HIP tools silently switch to NVIDIA otherwise
    return tool_env(env, tmpdir)
