"""ROCm: where we look for it, and why. Every path detection tries is in the data below.

**The root.** ``ROCM_HOME``, then ``ROCM_PATH`` (AMD's own tools read ``ROCM_PATH``; PyTorch and Monarch
read both). Without either, and only when ``-C platform=rocm`` asked for ROCm: ``/opt/rocm``, then the
newest ``/opt/rocm-X.Y.Z`` (AMD's packages), then ``/usr`` (Debian's and Ubuntu's packages).

**Inside the root** two installation layouts are known (:data:`LAYOUTS`):

* AMD's packages (``/opt/rocm``, ``/opt/rocm-7.2.0``): a private LLVM under ``lib/llvm`` (``llvm`` before
  ROCm 5), the device library bitcode under ``amdgcn/bitcode`` (before ROCm 6.?) or inside that LLVM's
  clang resource directory (``lib/llvm/lib/clang/N/lib/amdgcn/bitcode``), the version in ``.info/version``.
* Debian's and Ubuntu's packages (root ``/usr``): the distribution's versioned LLVM
  (``lib/llvm-N/bin/clang++``, also ``clang++-N`` on PATH); the bitcode under
  ``lib/x86_64-linux-gnu/amdgcn/bitcode`` (HIP 5.x, Debian 12) or inside the clang resource directory
  (``lib/llvm-N/lib/clang/N/amdgcn/bitcode``, HIP 6.4 and 7.2 in Debian sid/experimental).

A compiler is taken with the bitcode that belongs to it: its own resource directory's first, else the
root's. The HIP version comes from ``include/hip/hip_version.h``, else ``.info/version`` (AMD), else
``share/hip/version`` (Debian). The default architectures, and the code-object version every device
compile is given, follow that version (:data:`TARGETS`).
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from buildcore.errors import BuildError
from buildcore.toolchain.model import (
    NATIVE,
    Toolchain,
    collective_header_version,
    env_path,
    expand_native,
    find_header,
)

if TYPE_CHECKING:
    from buildcore.settings import Settings

# What runs compilers (subprocess, shutil, buildcore.process) is imported where it is used: tools/hipify
# imports this module only to read which HIP is installed (installed_version), on its start-up path.

ENV = ("ROCM_HOME", "ROCM_PATH")
FIX = (
    "Point ROCM_HOME (or ROCM_PATH) at a ROCm installation: /opt/rocm or /opt/rocm-X.Y.Z for AMD's packages, "
    "/usr for Debian's or Ubuntu's (apt-get install hipcc libamdhip64-dev); or build the CPU wheel with "
    "-C platform=cpu."
)


@dataclass(frozen=True)
class Layout:
    """Where one way of installing ROCm keeps what the build needs, as globs relative to the root."""

    name: str
    description: str
    compilers: tuple[str, ...]  # HIP-capable clang++
    bitcode: tuple[str, ...]  # device library bitcode (ocml.bc ...) outside any compiler's resource dir
    hip_libs: tuple[str, ...]  # directories holding libamdhip64.so


LAYOUTS: tuple[Layout, ...] = (
    Layout(
        name="amd",
        description="AMD's packages (/opt/rocm, /opt/rocm-X.Y.Z)",
        compilers=("lib/llvm/bin/clang++", "llvm/bin/clang++"),
        bitcode=("amdgcn/bitcode",),
        hip_libs=("lib", "lib64"),
    ),
    Layout(
        name="debian",
        description="Debian's or Ubuntu's packages (root /usr)",
        compilers=("lib/llvm-*/bin/clang++",),
        bitcode=("lib/x86_64-linux-gnu/amdgcn/bitcode", "lib/aarch64-linux-gnu/amdgcn/bitcode"),
        hip_libs=("lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib"),
    ),
)
# Which HIP an installation is, in order: (file under the root, major regex, minor regex). HIP's header (both
# layouts); AMD's ROCm release ("7.2.0-43": its major.minor is HIP's); Debian's "HIP_VERSION_MAJOR=7" lines.
VERSION_FILES: tuple[tuple[str, str, str], ...] = (
    ("include/hip/hip_version.h", r"#define\s+HIP_VERSION_MAJOR\s+(\d+)", r"#define\s+HIP_VERSION_MINOR\s+(\d+)"),
    (".info/version", r"^\s*(\d+)\.", r"^\s*\d+\.(\d+)"),
    ("share/hip/version", r"HIP_VERSION_MAJOR=(\d+)", r"HIP_VERSION_MINOR=(\d+)"),
)
# What a CUDA toolkit has (NVIDIA's installers and PyPI's cuda-toolkit tree alike) and a ROCm root has not.
CUDA_MARKERS = ("bin/nvcc", "include/cuda_runtime_api.h")
# Tools of a ROCm installation that list this machine's GPUs (`-C archs=native`), beside its clang or in its
# bin/; they print nothing without a GPU. rocm-bootstrap's detection is tried first (see native_archs).
ARCH_TOOLS = ("amdgpu-arch", "offload-arch")
# rocm-bootstrap's API (detect_gfx_targets: one GfxTarget per GPU model), asked in a process of its own so
# that it reads the build's environment, as the tools above do.
ROCM_BOOTSTRAP_PROBE = "from rocm_bootstrap import detect_gfx_targets\nfor t in detect_gfx_targets(): print(t.name)"
# Inside a compiler's clang resource directory (<llvm>/lib/clang/N): AMD puts the bitcode under lib/.
RESOURCE_BITCODE = ("lib/amdgcn/bitcode", "amdgcn/bitcode")


@dataclass(frozen=True)
class Target:
    """What a HIP version gets by default. ``archs`` must all be accepted; ``optional_archs`` are added when
    the compiler accepts them. ``code_object`` is the newest code-object version that the oldest runtime
    the wheel claims (the first release of the libamdhip64 major it links, ``oldest_runtime``) can load:
    v6 needs a ROCm >= 6.3 runtime, v5 ROCm >= 6.0 (and late 5.x)."""

    since: tuple[int, int]
    archs: tuple[str, ...]
    optional_archs: tuple[str, ...]
    code_object: int
    oldest_runtime: str


# Newest first; the first whose `since` the version reaches applies. MI200 = gfx90a, MI300X/MI325X =
# gfx942, MI350X/MI355X = gfx950 (gfx940 was the early MI300 name that clang-15 knows).
TARGETS: tuple[Target, ...] = (
    Target(since=(7, 0), archs=("gfx90a", "gfx942", "gfx950"), optional_archs=(), code_object=6, oldest_runtime="7.0"),
    Target(since=(6, 0), archs=("gfx90a", "gfx942"), optional_archs=("gfx950",), code_object=5, oldest_runtime="6.0"),
    Target(since=(0, 0), archs=("gfx90a", "gfx940"), optional_archs=("gfx942",), code_object=4, oldest_runtime="5.0"),
)


@dataclass(frozen=True)
class Library:
    """A ROCm library whose headers a port may need: ``header`` (relative to an include directory) says it is
    installed; ``legacy`` is its directory in AMD's layout before ROCm 5.2 (``<root>/hipcub/include``)."""

    name: str
    header: str
    legacy: str


# The libraries with a CUDA twin that hipify translates to (cub, thrust, cuBLAS, cuSPARSE, cuSOLVER, cuFFT, cuRAND,
# NCCL) and what they stand on. Both layouts install them under <root>/include/<lib>/: AMD's /opt/rocm/include and
# Debian's /usr/include (libhipcub-dev & co.). RCCL, the collective, is found on its own (_find_rccl: RCCL_HOME).
LIBRARIES: tuple[Library, ...] = (
    Library("hipCUB", "hipcub/hipcub.hpp", "hipcub"),
    Library("rocPRIM", "rocprim/rocprim.hpp", "rocprim"),
    Library("rocThrust", "thrust/system/hip/execution_policy.h", "rocthrust"),
    Library("hipBLAS", "hipblas/hipblas.h", "hipblas"),
    Library("hipBLASLt", "hipblaslt/hipblaslt.h", "hipblaslt"),
    Library("hipSPARSE", "hipsparse/hipsparse.h", "hipsparse"),
    Library("hipSOLVER", "hipsolver/hipsolver.h", "hipsolver"),
    Library("hipFFT", "hipfft/hipfft.h", "hipfft"),
    Library("hipRAND", "hiprand/hiprand.h", "hiprand"),
    Library("rocRAND", "rocrand/rocrand.h", "rocrand"),
)


def find_libraries(root: Path) -> tuple[tuple[str, Path], ...]:
    """The libraries of :data:`LIBRARIES` installed in the ROCm at ``root``, each with the include directory
    holding its headers: ``<root>/include`` (both layouts), else AMD's per-library ``<root>/<lib>/include``.
    Only files are looked at."""
    found: list[tuple[str, Path]] = []
    for lib in LIBRARIES:
        for include in (root / "include", root / lib.legacy / "include"):
            if (include / lib.header).is_file():
                found.append((lib.name, include))
                break
    return tuple(found)


# glibc 2.38 redirects strtol & co. to __isoc23_* symbols for C++ (and C23): code built there would need
# glibc 2.38 on the target for no reason. See glibc_floor.h.
GLIBC_C23_REDIRECTS = (2, 38)


def target_for(version: tuple[int, int]) -> Target:
    return next(t for t in TARGETS if version >= t.since)


def detect(settings: Settings, environ: Mapping[str, str]) -> Toolchain:
    from buildcore.process import private_tmpdir  # noqa: PLC0415 - see the imports above

    with private_tmpdir() as probe_tmp:  # the compiler probes' TMPDIR, removed after detection
        return _detect(settings, environ, probe_tmp)


def _detect(settings: Settings, environ: Mapping[str, str], probe_tmp: Path) -> Toolchain:
    root = find_root(environ)
    version = hip_version(root)
    if version is None:
        found = env_path(environ, ENV)
        named = f"{found[0]}={root}" if found else f"ROCm root {root}"
        cuda = next((root / m for m in CUDA_MARKERS if (root / m).exists()), None)
        if cuda is not None:
            variable = found[0] if found else "ROCM_HOME"
            raise BuildError(
                f"{named} is a CUDA toolkit (it has {cuda}), not a ROCm installation. For the CUDA build set "
                f"CUDA_HOME={root} and unset {variable}; for ROCm point {variable} at /opt/rocm or /opt/rocm-X.Y.Z "
                "(AMD's packages) or /usr (Debian's or Ubuntu's hipcc libamdhip64-dev)."
            )
        probed = ", ".join(str(root / name) for name, _major, _minor in VERSION_FILES)
        raise BuildError(f"{named} holds no HIP installation: none of {probed} says which HIP it is. {FIX}")
    compiler, device_libs, layout = _find_compiler(root, environ, probe_tmp)
    lib_dir, probed_libs = _find_hip_lib(root)
    if lib_dir is None:
        raise BuildError(
            f"ROCm at {root} has no libamdhip64.so (probed {', '.join(probed_libs)}). Install the HIP runtime's "
            "development files (Debian/Ubuntu: apt-get install libamdhip64-dev; AMD: the hip-runtime-amd package)."
        )
    target = target_for(version)
    base = Toolchain(
        platform="rocm", root=root, compiler=compiler, device_lib_dir=device_libs, env={"HIP_PLATFORM": "amd"}
    )
    archs = _validate_archs(settings, base, target, version, probe_tmp, environ=environ)
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
        collective_header_version=collective_header_version(include / "rccl" / "rccl.h"),
        lib_dir=lib_dir,
        device_lib_dir=device_libs,
        env={"HIP_PLATFORM": "amd"},
        layout=layout,
        runtime_soname=_runtime_soname(lib_dir, version),
        code_object_version=target.code_object,
        glibc_guard=host_glibc() >= GLIBC_C23_REDIRECTS,
        libraries=find_libraries(root),
    )


# ------------------------------------------------------------------------------------------ the root
def fallback_roots(opt: Path = Path("/opt")) -> list[Path]:
    """Where ROCm is looked for without ROCM_HOME/ROCM_PATH, in order: /opt/rocm, the newest /opt/rocm-X.Y.Z
    (AMD's packages), /usr (Debian's and Ubuntu's)."""
    return [opt / "rocm", *_newest_first(opt, "rocm-*"), Path("/usr")]


def installed_version(environ: Mapping[str, str], opt: Path = Path("/opt")) -> tuple[int, int] | None:
    """The HIP version of the ROCm the build would find (the roots of ``find_root``, in its order), read from
    files only; None when there is none. tools/hipify's default target."""
    found = env_path(environ, ENV)
    roots = [found[1]] if found else fallback_roots(opt)
    return next((v for v in map(hip_version, roots) if v is not None), None)


def find_root(environ: Mapping[str, str]) -> Path:
    found = env_path(environ, ENV)
    if found:
        name, root = found
        if root.exists() and not root.is_dir():
            # Often the compiler itself (ROCM_HOME=/opt/rocm/bin/hipcc): its installation is two levels up.
            hint = f" (for {root}, that is {root.parent.parent})" if root.parent.name == "bin" else ""
            raise BuildError(
                f"{name}={root} is a file, not a directory: {name} names the root directory of a ROCm "
                f"installation, the one holding include/hip{hint}. {FIX}"
            )
        if not root.is_dir():
            raise BuildError(f"{name}={root} does not exist or is not a directory. {FIX}")
        return root
    candidates = fallback_roots()
    for candidate in candidates:
        if hip_version(candidate) is not None:
            return candidate
    probed = [*ENV, *(str(c) for c in candidates)]
    if not any(c.name.startswith("rocm-") for c in candidates):
        probed.insert(len(ENV) + 1, "/opt/rocm-X.Y.Z")
    raise BuildError(
        f"the ROCm build was requested but no ROCm installation was found (probed {', '.join(probed)}). {FIX}"
    )


def hip_version(root: Path) -> tuple[int, int] | None:
    """The HIP version of the installation at ``root``, from the first of :data:`VERSION_FILES` that says it
    (nothing is run)."""
    for name, major_re, minor_re in VERSION_FILES:
        text = _read(root / name)
        major = re.search(major_re, text) if text is not None else None
        minor = re.search(minor_re, text) if text is not None else None
        if major and minor:
            return int(major.group(1)), int(minor.group(1))
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _newest_first(base: Path, pattern: str) -> list[Path]:
    """``base``/``pattern`` (a glob), the highest version numbers in the matched names first."""

    def key(path: Path) -> tuple[tuple[int, ...], str]:
        return tuple(int(n) for n in re.findall(r"\d+", path.as_posix())), path.as_posix()

    return sorted(base.glob(pattern), key=key, reverse=True) if "*" in pattern else [base / pattern]


# ------------------------------------------------------------------------------ compiler + bitcode
def _compiler_candidates(root: Path, environ: Mapping[str, str]) -> Iterator[tuple[Path, str]]:
    """HIP-capable clang++ candidates with where each comes from, in order of preference."""
    if environ.get("HIP_CLANG_PATH"):
        yield Path(environ["HIP_CLANG_PATH"]) / "clang++", "HIP_CLANG_PATH"
    for layout in LAYOUTS:
        for pattern in layout.compilers:
            for path in _newest_first(root, pattern):
                yield path, layout.name
    import shutil  # noqa: PLC0415 - see the imports above

    search = os.pathsep.join([str(root / "bin"), environ.get("PATH", "")])
    for major in range(30, 13, -1):  # a distribution's clang on PATH (Debian 12's HIP uses clang-15)
        found = shutil.which(f"clang++-{major}", path=search)
        if found:
            yield Path(found), "PATH"


def _bitcode_for(compiler: Path, root: Path) -> Path | None:
    """The device bitcode that belongs to ``compiler``: its own resource directory's, else the root's."""
    llvm = compiler.resolve().parent.parent
    for resource in _newest_first(llvm, "lib/clang/*"):
        for sub in RESOURCE_BITCODE:
            if (resource / sub / "ocml.bc").is_file():
                return resource / sub
    for layout in LAYOUTS:
        for pattern in layout.bitcode:
            for path in _newest_first(root, pattern):
                if (path / "ocml.bc").is_file():
                    return path
    return None


def _find_compiler(root: Path, environ: Mapping[str, str], probe_tmp: Path) -> tuple[Path, Path, str]:
    """The first candidate that exists, has device bitcode and compiles for gfx90a; else an error that
    lists every place looked at."""
    probed: list[str] = []
    for candidate, origin in _compiler_candidates(root, environ):
        if str(candidate) in probed:
            continue
        if not os.access(candidate, os.X_OK):
            probed.append(f"{candidate} (absent)")
            continue
        bitcode = _bitcode_for(candidate, root)
        if bitcode is None:
            probed.append(f"{candidate} (no device bitcode: ocml.bc)")
            continue
        if not _accepts_arch(candidate, root, "gfx90a", probe_tmp):
            probed.append(f"{candidate} (does not compile HIP for gfx90a)")
            continue
        return candidate, bitcode, origin
    if not probed:
        probed = [str(root / p) for layout in LAYOUTS for p in layout.compilers] + ["clang++-N on PATH"]
    bitcode_places = [str(root / p) for layout in LAYOUTS for p in layout.bitcode]
    raise BuildError(
        f"no HIP-capable compiler usable for ROCm at {root}: probed {'; '.join(probed)}. The device library bitcode "
        f"(ocml.bc) was looked for in each compiler's clang resource directory (lib/clang/N/"
        f"{{{','.join(RESOURCE_BITCODE)}}}) and in {', '.join(bitcode_places)}. Install HIP's compiler and device "
        "libraries (Debian/Ubuntu: apt-get install hipcc, which brings clang and rocm-device-libs; AMD: the "
        "rocm-llvm and rocm-device-libs packages), or set HIP_CLANG_PATH to the directory holding clang++."
    )


def _accepts_arch(compiler: Path, root: Path, arch: str, probe_tmp: Path) -> bool:
    """Whether ``compiler`` can target ``arch``: a device-only syntax check of an empty HIP file."""
    import subprocess  # noqa: PLC0415 - see the imports above

    from buildcore.process import tool_env  # noqa: PLC0415

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


def bitcode_has_arch(bitcode: Path, arch: str) -> bool:
    """Whether the device libraries carry ``arch`` (oclc_isa_version_942.bc for gfx942, also gfx942:xnack-)."""
    processor = arch.split(":", 1)[0]
    return processor.startswith("gfx") and (bitcode / f"oclc_isa_version_{processor[3:]}.bc").is_file()


def native_archs(
    compiler: Path, root: Path, environ: Mapping[str, str], probe_tmp: Path, origin: str
) -> tuple[tuple[str, ...], str]:
    """The GPUs of this machine for ``-C archs=native``, and what found them: rocm-bootstrap's detection when
    it is installed (it honours ROCM_BOOTSTRAP_FORCE_GFX_ARCH and ROCM_BOOTSTRAP_DISABLE_DETECTION), then
    amdgpu-arch / offload-arch of the ROCm found. An error that lists each probe's answer when none finds one."""
    import shutil  # noqa: PLC0415 - see the imports above
    import sys  # noqa: PLC0415

    # (what, argv to ask it) in order; argv None: why it cannot be asked
    probes: list[tuple[str, list[str] | None]] = []
    cli = shutil.which("rocm-bootstrap-detect", path=environ.get("PATH", os.defpath))
    if importlib.util.find_spec("rocm_bootstrap") is not None:
        probes.append(("rocm-bootstrap", [sys.executable, "-c", ROCM_BOOTSTRAP_PROBE]))
    elif cli:
        probes.append((cli, [cli, "--unique"]))
    else:
        probes.append(("rocm-bootstrap (not installed)", None))
    places = dict.fromkeys([compiler.parent, compiler.resolve().parent, root / "bin", root / "lib" / "llvm" / "bin"])
    for tool in ARCH_TOOLS:
        found = next((place / tool for place in places if os.access(place / tool, os.X_OK)), None)
        if found is None:
            probes.append((f"{tool} (not in {', '.join(str(p) for p in places)})", None))
        else:
            probes.append((str(found), [str(found)]))
    tried = []
    for name, argv in probes:
        if argv is None:
            tried.append(name)
            continue
        archs, answer = _ask(argv, environ, probe_tmp)
        if archs:
            return archs, name
        tried.append(f"{name} ({answer})")
    raise BuildError(
        f"archs=native (from {origin}) builds for this machine's GPUs, and none was found: {'; '.join(tried)}. "
        "On a machine without an AMD GPU name the architectures instead, e.g. -C archs=gfx942 (MI300X/MI325X), "
        "gfx950 (MI350X/MI355X) or gfx90a (MI200); or install rocm-bootstrap (pip install rocm-bootstrap) and "
        "set ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfx942."
    )


def _ask(argv: Sequence[str], environ: Mapping[str, str], probe_tmp: Path) -> tuple[tuple[str, ...], str]:
    """The gfx targets a GPU-listing tool prints (one per line, a GPU each), or why there are none."""
    import subprocess  # noqa: PLC0415 - see the imports above

    from buildcore.process import tool_env  # noqa: PLC0415

    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=60, check=False, env=tool_env(environ, probe_tmp)
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        return (), f"could not run: {err}"
    archs = tuple(dict.fromkeys(re.findall(r"^\s*(gfx[0-9a-f]+(?::[a-z+-]+)*)\s*$", proc.stdout, re.M)))
    if archs:
        return archs, ""
    said = (proc.stderr.strip().splitlines() or [""])[-1][:200]
    if proc.returncode != 0:
        return (), f"exited {proc.returncode}" + (f": {said}" if said else "")
    return (), "found no GPU"


def _validate_archs(
    settings: Settings,
    base: Toolchain,
    target: Target,
    version: tuple[int, int],
    probe_tmp: Path,
    *,
    environ: Mapping[str, str],
) -> tuple[str, ...]:
    compiler, root, bitcode = base.compiler, base.root, base.device_lib_dir
    assert compiler is not None and root is not None and bitcode is not None
    verdicts: dict[str, str] = {}  # arch -> "" when usable, else why not; each probed at most once

    def why_not(arch: str) -> str:
        if arch not in verdicts:
            if not _accepts_arch(compiler, root, arch, probe_tmp):
                verdicts[arch] = f"{compiler} rejects it"
            elif not bitcode_has_arch(bitcode, arch):
                verdicts[arch] = f"the device libraries in {bitcode} have no oclc_isa_version bitcode for it"
            else:
                verdicts[arch] = ""
        return verdicts[arch]

    hip = f"{version[0]}.{version[1]}"
    requested, origin = settings.archs, settings.origin("archs")
    if NATIVE in requested:
        found, tool = native_archs(compiler, root, environ, probe_tmp, origin)
        requested = expand_native(requested, found)
        origin = f"{origin}; native: {', '.join(found)} found by {tool}"
    if not requested:
        missing = [f"{a} ({why_not(a)})" for a in target.archs if why_not(a)]
        if missing:
            raise BuildError(
                f"HIP {hip} should build for {';'.join(target.archs)} by default, but {', '.join(missing)}. "
                "The compiler or the device libraries do not match this HIP; reinstall them together, or choose "
                "the architectures with -C archs=... (e.g. -C archs=gfx90a)."
            )
        return target.archs + tuple(a for a in target.optional_archs if not why_not(a))
    rejected = [f"{a} ({why_not(a)})" for a in requested if why_not(a)]
    if rejected:
        known = [a for a in (*target.archs, *target.optional_archs) if not why_not(a)]
        every = len(rejected) == len(dict.fromkeys(requested))
        raise BuildError(
            f"{'none of the requested ROCm architectures' if every else 'ROCm architecture'} "
            f"{', '.join(rejected)} (from {origin}) {'can' if every else 'cannot'} be built with HIP {hip} at "
            f"{root}. Of this HIP's default targets these work: {', '.join(known) or 'none'}. MI300X is gfx942 "
            "(HIP 6 or later), MI350X/MI355X gfx950 (HIP 6.4 or later); "
            + ("point ROCM_HOME (or ROCM_PATH) at a ROCm that builds them, or " if every else "")
            + f"pass e.g. -C archs={';'.join(known) or 'gfx90a'}."
        )
    return tuple(dict.fromkeys(requested))


# ------------------------------------------------------------------------------------ libraries
def _find_hip_lib(root: Path) -> tuple[Path | None, list[str]]:
    probed: list[str] = []
    for layout in LAYOUTS:
        for sub in layout.hip_libs:
            directory = root / sub
            if str(directory) in probed:
                continue
            probed.append(str(directory))
            if (directory / "libamdhip64.so").exists():
                return directory, probed
    return None, probed


def _runtime_soname(lib_dir: Path, version: tuple[int, int]) -> str:
    """libamdhip64.so.N, N from the library the link finds (its file name), else the HIP major."""
    real = (lib_dir / "libamdhip64.so").resolve().name
    m = re.match(r"libamdhip64\.so\.(\d+)", real)
    return f"libamdhip64.so.{m.group(1) if m else version[0]}"


def _find_rccl(root: Path, environ: Mapping[str, str]) -> Path:
    return find_header(
        "rccl/rccl.h",
        ("RCCL_HOME", "RCCL_ROOT"),
        [root / "include", Path("/opt/rocm/include"), Path("/usr/include")],
        environ,
        needed="the ROCm build needs RCCL's header",
        fix="Install RCCL's development files (Debian/Ubuntu: librccl-dev; AMD: rccl-dev), or set RCCL_HOME to "
        "a directory with include/rccl/rccl.h.",
    )


def host_glibc(include: Sequence[Path] = (Path("/usr/include"),)) -> tuple[int, int]:
    """The glibc version of the headers host code compiles against (0.0 when unknown)."""
    for directory in include:
        text = _read(directory / "features.h")
        if text is None:
            continue
        major = re.search(r"#define\s+__GLIBC__\s+(\d+)", text)
        minor = re.search(r"#define\s+__GLIBC_MINOR__\s+(\d+)", text)
        if major and minor:
            return int(major.group(1)), int(minor.group(1))
    return (0, 0)
