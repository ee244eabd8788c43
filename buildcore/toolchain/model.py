"""What detection decides, and the small probing helpers the toolkit modules share."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from buildcore.errors import BuildError
from buildcore.toolchain.launcher import Launchers

# The variables that select a toolkit (ROCm's are in rocm.py); choose_platform reads both.
CUDA_ENV = ("CUDA_HOME", "CUDA_PATH")
# `-C archs=native`: the GPUs of the building machine (each toolkit's module says how it finds them).
NATIVE = "native"


@dataclass(frozen=True)
class HostTool:
    """A host tool detection chose (buildcore/toolchain/host.py), and why."""

    path: Path
    why: str  # "CC from the environment", "cc on PATH", "the ROCm clang: no cc on PATH", ...
    # Whether the build passes it to the tools; False when the user's own variable, or the tool's default,
    # already selects it (the tools then read the user's variable themselves: it always wins).
    passed: bool = True

    def describe(self) -> str:
        return f"{self.path} ({self.why})"


@dataclass(frozen=True)
class HostTools:
    """The host side of a build: compilers for host code and the linker Rust uses."""

    rust_target: str  # the triple cargo builds for (rustc -vV's host)
    linker: HostTool  # Rust's linker (cargo's CARGO_TARGET_<TRIPLE>_LINKER)
    c: HostTool | None = None  # CC for build scripts' cc crate (rust/rocm_compat/build.rs); None: not needed
    cxx: HostTool | None = None  # CMake's C++ compiler (CMAKE_CXX_COMPILER), CXX for build scripts
    cuda_host: HostTool | None = None  # nvcc's host compiler (-ccbin: CMAKE_CUDA_HOST_COMPILER)

    @property
    def linker_variable(self) -> str:
        return linker_variable(self.rust_target)

    def describe(self) -> str:
        parts = [
            (label, tool)
            for label, tool in (
                ("C compiler", self.c),
                ("C++ compiler", self.cxx),
                ("nvcc host compiler", self.cuda_host),
                ("Rust linker", self.linker),
            )
            if tool is not None
        ]
        return ", ".join(f"{label} {tool.describe()}" for label, tool in parts)


def linker_variable(rust_target: str) -> str:
    """cargo's linker variable for a target triple: CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER."""
    return f"CARGO_TARGET_{re.sub(r'[^A-Za-z0-9]', '_', rust_target).upper()}_LINKER"


@dataclass(frozen=True)
class Toolchain:
    """Everything that depends on *which* machine builds; later stages only read it."""

    platform: str  # "cpu" | "cuda" | "rocm"
    root: Path | None = None  # CUDA_HOME / the ROCm root
    compiler: Path | None = None  # nvcc, or the HIP-capable clang++
    version: tuple[int, int] | None = None  # CUDA 13.0, HIP 7.2
    archs: tuple[str, ...] = ()
    collective: str | None = None  # "nccl" | "rccl"
    collective_include: Path | None = None
    collective_soname: str | None = None
    collective_header_version: int | None = None  # NCCL_VERSION_CODE of that header (22707: API 2.27.7)
    lib_dir: Path | None = None  # cudart_static (CUDA) or libamdhip64 (ROCm)
    device_lib_dir: Path | None = None  # ROCm device bitcode
    env: Mapping[str, str] = field(default_factory=dict)  # set for every compiler run
    launchers: Launchers = field(default_factory=Launchers)  # compiler caches (toolchain/launcher.py)
    # ROCm only:
    layout: str | None = None  # which installation layout matched (rocm.LAYOUTS)
    runtime_soname: str | None = None  # libamdhip64.so.N, what the wheel needs on the target
    code_object_version: int | None = None  # -mcode-object-version for every device compile
    glibc_guard: bool = False  # host code compiled against glibc >= 2.38: keep its C23 redirects out
    # the ROCm libraries installed in the root (rocm.LIBRARIES: hipCUB, hipBLAS, ...) and their include directories
    libraries: tuple[tuple[str, Path], ...] = ()
    host: HostTools | None = None  # host compilers and Rust's linker (None: not detected, e.g. in unit tests)

    @property
    def local_label(self) -> str:
        if self.platform == "cuda" and self.version:
            return f"cu{self.version[0]}"
        if self.platform == "rocm" and self.version:
            return f"rocm{self.version[0]}.{self.version[1]}"
        return "cpu"

    @property
    def rpaths(self) -> tuple[str, ...]:
        # The CUDA wheel's extension reaches libnccl.so.2 from the nvidia-nccl-cu13 wheel.
        return ("$ORIGIN/../nvidia/nccl/lib",) if self.platform == "cuda" else ()

    @property
    def requires_dist(self) -> tuple[str, ...]:
        if self.platform == "cuda" and self.version:
            return (f"nvidia-nccl-cu{self.version[0]}",)
        return ()

    @property
    def version_text(self) -> str | None:
        return f"{self.version[0]}.{self.version[1]}" if self.version else None


def expand_native(requested: Sequence[str], found: Sequence[str]) -> tuple[str, ...]:
    """``requested`` with ``native`` replaced by the archs found on this machine, in place, each arch once."""
    out: list[str] = []
    for arch in requested:
        out += list(found) if arch == NATIVE else [arch]
    return tuple(dict.fromkeys(out))


def env_path(environ: Mapping[str, str], names: Sequence[str]) -> tuple[str, Path] | None:
    """The first of ``names`` set (non-empty) in ``environ``, with its value as a path."""
    for name in names:
        value = environ.get(name, "")
        if value:
            return name, Path(value)
    return None


def find_header(
    header: str,
    env_names: Sequence[str],
    fallbacks: Sequence[Path],
    environ: Mapping[str, str],
    *,
    needed: str,
    fix: str,
) -> Path:
    """The include directory holding ``header``: ``$<ENV>/include`` for each of ``env_names``, then ``fallbacks``."""
    candidates = [Path(environ[name]) / "include" for name in env_names if environ.get(name)] + list(fallbacks)
    for include in candidates:
        if (include / header).is_file():
            return include
    probed = ", ".join(str(c / header) for c in dict.fromkeys(candidates))
    raise BuildError(f"{needed} {header}, which was not found (probed {probed}). {fix}")


def collective_header_version(header: Path) -> int | None:
    """NCCL_VERSION_CODE as nccl.h / rccl.h define it (the bridge checks the library against it)."""
    try:
        text = header.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    m = re.search(r"#define\s+NCCL_VERSION_CODE\s+(\d+)", text)
    return int(m.group(1)) if m else None
