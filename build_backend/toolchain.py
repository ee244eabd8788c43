"""Stage 1: find the toolkit for the requested platform, and check the requested architectures.

Everything that depends on *which* machine builds (paths, versions, the collective library) is
decided here and nowhere else; later stages only read the Toolchain this returns.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from build_backend.errors import BuildError
from build_backend.process import private_tmpdir, tool_env
from build_backend.settings import Settings

CUDA_DEFAULT_ARCHS = ("80", "90")
# CDNA targets (MI200, MI300); each is kept only when the found compiler accepts it.
ROCM_CANDIDATE_ARCHS = ("gfx90a", "gfx940", "gfx942")
CUDA_ENV = ("CUDA_HOME", "CUDA_PATH")
ROCM_ENV = ("ROCM_HOME", "ROCM_PATH")


@dataclass(frozen=True)
class Toolchain:
    platform: str  # "cpu" | "cuda" | "rocm"
    root: Path | None = None  # CUDA_HOME / ROCm root
    compiler: Path | None = None  # nvcc, or the HIP-capable clang++
    version: tuple[int, int] | None = None  # CUDA 13.5, HIP 5.2
    archs: tuple[str, ...] = ()
    collective: str | None = None  # "nccl" | "rccl"
    collective_include: Path | None = None
    collective_soname: str | None = None
    lib_dir: Path | None = None  # cudart_static (CUDA) or libamdhip64 (ROCm)
    device_lib_dir: Path | None = None  # ROCm device bitcode
    env: Mapping[str, str] = field(default_factory=dict)  # set for every compiler run

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


def _env_path(environ: Mapping[str, str], names: Sequence[str]) -> tuple[str, Path] | None:
    for name in names:
        value = environ.get(name, "")
        if value:
            return name, Path(value)
    return None


def detect(settings: Settings, environ: Mapping[str, str]) -> Toolchain:
    platform = _choose_platform(settings, environ)
    if platform == "cpu":
        if settings.archs:
            raise BuildError(
                f"archs={';'.join(settings.archs)} (from {settings.origin('archs')}) was given for the "
                "CPU build, which compiles no device code. Drop archs, or choose -C platform=cuda|rocm."
            )
        return Toolchain(platform="cpu")
    if platform == "cuda":
        return _detect_cuda(settings, environ)
    with private_tmpdir() as probe_tmp:  # the compiler probes' TMPDIR, removed after detection
        return _detect_rocm(settings, environ, probe_tmp)


def _choose_platform(settings: Settings, environ: Mapping[str, str]) -> str:
    if settings.platform != "auto":
        return settings.platform
    cuda = _env_path(environ, CUDA_ENV)
    rocm = _env_path(environ, ROCM_ENV)
    if cuda and rocm:
        raise BuildError(
            f"both toolkits are set: {cuda[0]}={cuda[1]} and {rocm[0]}={rocm[1]}, so the platform is "
            "ambiguous. Unset one of them, or choose explicitly with -C platform=cuda or "
            "-C platform=rocm (or MONARCH_PLATFORM=...)."
        )
    if rocm:
        return "rocm"
    if cuda:
        return "cuda"
    return "cpu"


def _probe_root(
    environ: Mapping[str, str], names: Sequence[str], fallbacks: Sequence[Path], what: str, fix: str
) -> Path:
    found = _env_path(environ, names)
    if found:
        name, root = found
        if not root.is_dir():
            raise BuildError(f"{name}={root} does not exist or is not a directory. {fix}")
        return root
    for candidate in fallbacks:
        if candidate.is_dir():
            return candidate
    probed = ", ".join([*names, *(str(p) for p in fallbacks)])
    raise BuildError(f"the {what} was requested but no toolkit was found (probed {probed}). {fix}")


def _version_from_header(header: Path, major: str, minor: str) -> tuple[int, int] | None:
    try:
        text = header.read_text(errors="replace")
    except OSError:
        return None
    ma = re.search(rf"#define\s+{major}\s+(\d+)", text)
    mi = re.search(rf"#define\s+{minor}\s+(\d+)", text)
    return (int(ma.group(1)), int(mi.group(1))) if ma and mi else None


# ---------------------------------------------------------------------------------------------- CUDA
def _detect_cuda(settings: Settings, environ: Mapping[str, str]) -> Toolchain:
    fix = (
        "Point CUDA_HOME at a CUDA 13 toolkit (for example .../site-packages/nvidia/cu13 after "
        '`pip install "cuda-toolkit[nvcc,cudart,cccl]"`), or build the CPU wheel with -C platform=cpu.'
    )
    root = _probe_root(environ, CUDA_ENV, [Path("/usr/local/cuda")], "CUDA build", fix)
    nvcc = root / "bin" / "nvcc"
    if not os.access(nvcc, os.X_OK):
        raise BuildError(f"CUDA toolkit at {root} has no compiler: {nvcc} is missing or not executable. {fix}")
    version = _cuda_runtime_version(root)
    if version is None:
        raise BuildError(f"could not read the CUDA version from {root}/include/cuda_runtime_api.h. {fix}")
    lib_dir = next((d for d in (root / "lib64", root / "lib") if (d / "libcudart_static.a").is_file()), None)
    if lib_dir is None:
        raise BuildError(
            f"CUDA toolkit at {root} has no libcudart_static.a in lib64/ or lib/. "
            'Install the cudart component (`pip install "cuda-toolkit[cudart]"`).'
        )
    supported = _nvcc_archs(nvcc)
    archs = _validate_cuda_archs(settings, supported)
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
        lib_dir=lib_dir,
    )


def _cuda_runtime_version(root: Path) -> tuple[int, int] | None:
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
    return tuple(sorted({m for m in re.findall(r"compute_(\d+[a-z]?)", out.stdout)}, key=_arch_key))


def _arch_key(arch: str) -> tuple[int, str]:
    digits = re.match(r"\d+", arch)
    return (int(digits.group(0)) if digits else 0, arch)


def _validate_cuda_archs(settings: Settings, supported: Sequence[str]) -> tuple[str, ...]:
    wanted = settings.archs or CUDA_DEFAULT_ARCHS
    archs = []
    for arch in wanted:
        norm = re.sub(r"^(sm_|compute_)", "", arch)
        if norm not in supported:
            raise BuildError(
                f"CUDA architecture {arch!r} (from {settings.origin('archs')}) is not accepted by this nvcc. "
                f"It accepts: {' '.join(supported)}. Pass e.g. -C archs=80;90."
            )
        archs.append(norm)
    return tuple(dict.fromkeys(archs))


def _site_packages() -> list[Path]:
    """site-packages directories of this interpreter (where pip puts nvidia-nccl-cu13)."""
    paths = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    paths += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [Path(p) for p in dict.fromkeys(paths)]


def _find_header(
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


def _find_nccl(root: Path, environ: Mapping[str, str]) -> Path:
    # The PyPI toolkit tree is .../site-packages/nvidia/cu13; nvidia-nccl-cu13 sits beside it.
    fallbacks = [root.resolve().parent / "nccl" / "include", root / "include"]
    fallbacks += [sp / "nvidia" / "nccl" / "include" for sp in _site_packages()]
    fallbacks.append(Path("/usr/include"))
    return _find_header(
        "nccl.h",
        ("NCCL_HOME", "NCCL_ROOT"),
        fallbacks,
        environ,
        needed="the CUDA build needs NCCL's header",
        fix="Install it with `pip install nvidia-nccl-cu13`, or set NCCL_HOME to a directory with include/nccl.h.",
    )


# ---------------------------------------------------------------------------------------------- ROCm
def _detect_rocm(settings: Settings, environ: Mapping[str, str], probe_tmp: Path) -> Toolchain:
    fix = (
        "Point ROCM_HOME (or ROCM_PATH) at a ROCm installation (/opt/rocm, or /usr for Debian's "
        "hipcc/libamdhip64-dev packages), or build the CPU wheel with -C platform=cpu."
    )
    root = _probe_root(environ, ROCM_ENV, [Path("/opt/rocm")], "ROCm build", fix)
    version = _version_from_header(root / "include" / "hip" / "hip_version.h", "HIP_VERSION_MAJOR", "HIP_VERSION_MINOR")
    if version is None:
        raise BuildError(f"ROCm root {root} has no include/hip/hip_version.h, so it holds no HIP installation. {fix}")
    compiler, probed = _find_hip_clang(root, environ, probe_tmp)
    if compiler is None:
        raise BuildError(
            f"no HIP-capable compiler found for ROCm at {root} (probed {', '.join(probed)}). Install hipcc "
            "and clang (Debian: apt-get install hipcc), or set HIP_CLANG_PATH to the directory holding clang++."
        )
    device_libs = _find_device_libs(root)
    if device_libs is None:
        raise BuildError(
            f"ROCm at {root} has no device library bitcode (amdgcn/bitcode/ocml.bc). "
            "Install rocm-device-libs (Debian: apt-get install rocm-device-libs)."
        )
    lib_dir = next(
        (
            d
            for d in (root / "lib", root / "lib" / "x86_64-linux-gnu", root / "lib64")
            if (d / "libamdhip64.so").exists()
        ),
        None,
    )
    if lib_dir is None:
        raise BuildError(
            f"ROCm at {root} has no libamdhip64.so in lib/ or lib/x86_64-linux-gnu/. "
            "Install the HIP runtime development files (Debian: libamdhip64-dev)."
        )
    base = Toolchain(
        platform="rocm", root=root, compiler=compiler, device_lib_dir=device_libs, env={"HIP_PLATFORM": "amd"}
    )
    archs = _validate_rocm_archs(settings, base, probe_tmp)
    include = _find_rccl(root, environ)
    return Toolchain(
        platform="rocm",
        root=root,
        compiler=compiler,
        version=version,
        archs=archs,
        collective="rccl",
        collective_include=include,
        collective_soname="librccl.so.1",
        lib_dir=lib_dir,
        device_lib_dir=device_libs,
        env={"HIP_PLATFORM": "amd"},
    )


def _find_hip_clang(root: Path, environ: Mapping[str, str], probe_tmp: Path) -> tuple[Path | None, list[str]]:
    candidates: list[Path] = []
    if environ.get("HIP_CLANG_PATH"):
        candidates.append(Path(environ["HIP_CLANG_PATH"]) / "clang++")
    candidates += [root / "lib" / "llvm" / "bin" / "clang++", root / "llvm" / "bin" / "clang++"]
    for major in range(22, 13, -1):  # distribution clang (Debian's HIP uses clang-15)
        found = shutil.which(f"clang++-{major}", path=str(root / "bin") + os.pathsep + environ.get("PATH", ""))
        if found:
            candidates.append(Path(found))
    probed: list[str] = []
    for candidate in candidates:
        probed.append(str(candidate))
        if os.access(candidate, os.X_OK) and _accepts_arch(candidate, root, "gfx90a", probe_tmp):
            return candidate, probed
    return None, probed or ["HIP_CLANG_PATH", str(root / "llvm/bin/clang++"), "clang++-NN on PATH"]


def _find_device_libs(root: Path) -> Path | None:
    candidates = [root / "amdgcn" / "bitcode", root / "lib" / "x86_64-linux-gnu" / "amdgcn" / "bitcode"]
    candidates += sorted((root / "lib" / "llvm" / "lib" / "clang").glob("*/lib/amdgcn/bitcode"))
    return next((c for c in candidates if (c / "ocml.bc").is_file()), None)


def _accepts_arch(compiler: Path, root: Path, arch: str, probe_tmp: Path) -> bool:
    """Whether ``compiler`` can target ``arch``: a device-only syntax check of an empty HIP file, with
    ``probe_tmp`` as the compiler's TMPDIR."""
    args = [
        os.fspath(compiler),
        "-x",
        "hip",
        f"--offload-arch={arch}",
        f"--rocm-path={root}",
        "-nogpuinc",
        "-nogpulib",
        "--cuda-device-only",
        "-fsyntax-only",
        "-",
    ]
    try:
        proc = subprocess.run(
            args,
            input=b"",
            capture_output=True,
            timeout=60,
            check=False,
            env=tool_env({**os.environ, "HIP_PLATFORM": "amd"}, probe_tmp),
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _validate_rocm_archs(settings: Settings, base: Toolchain, probe_tmp: Path) -> tuple[str, ...]:
    compiler, root = base.compiler, base.root
    assert compiler is not None and root is not None
    probed: dict[str, bool] = {}  # each arch is probed (one compiler run) at most once

    def accepts(arch: str) -> bool:
        if arch not in probed:
            probed[arch] = _accepts_arch(compiler, root, arch, probe_tmp)
        return probed[arch]

    if not settings.archs:
        archs = tuple(a for a in ROCM_CANDIDATE_ARCHS if accepts(a))
        if not archs:
            raise BuildError(f"{compiler} accepts none of the default ROCm targets {', '.join(ROCM_CANDIDATE_ARCHS)}.")
        return archs
    rejected = [a for a in settings.archs if not accepts(a)]
    if rejected:
        accepted = [a for a in ROCM_CANDIDATE_ARCHS if accepts(a)]
        raise BuildError(
            f"ROCm architecture {', '.join(rejected)} (from {settings.origin('archs')}) is rejected by "
            f"{compiler}. Of the CDNA targets it accepts {', '.join(accepted) or 'none'}; a newer compiler "
            "(ROCm 6+, or clang-17+) is needed for gfx942. Pass e.g. -C archs=gfx90a;gfx940."
        )
    return tuple(dict.fromkeys(settings.archs))


def _find_rccl(root: Path, environ: Mapping[str, str]) -> Path:
    return _find_header(
        "rccl/rccl.h",
        ("RCCL_HOME", "RCCL_ROOT"),
        [root / "include", Path("/opt/rocm/include"), Path("/usr/include")],
        environ,
        needed="the ROCm build needs RCCL's header",
        fix="Install RCCL's development files (rccl-dev / librccl-dev), or set RCCL_HOME to a directory with "
        "include/rccl/rccl.h.",
    )
