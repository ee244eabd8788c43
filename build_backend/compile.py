"""Stage 4: the C++ bridge, compiled by CMake + Ninja into a static library for the Rust crate."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

from build_backend import log
from build_backend.hipify_stage import BridgeSources
from build_backend.paths import Layout, check_path
from buildcore.errors import BuildError
from buildcore.process import run
from buildcore.settings import Settings
from buildcore.toolchain import Toolchain

CMAKE_PROJECT = Path(__file__).resolve().parent / "cmake"
GLIBC_GUARD = CMAKE_PROJECT / "glibc_floor.h"  # see the header and toolchain/rocm.py
MIN_CMAKE = (3, 28)
MAX_WARNINGS_SHOWN = 20


def _tool(module: str, name: str) -> Path:
    """The cmake / ninja executable: the PyPI package's copy first (a build requirement), then PATH."""
    try:
        mod = __import__(module)
        attr = "CMAKE_BIN_DIR" if module == "cmake" else "BIN_DIR"
        candidate = Path(getattr(mod, attr)) / name
        if candidate.is_file():
            return candidate
    except (ImportError, AttributeError):
        pass
    found = shutil.which(name)
    if not found:
        raise BuildError(
            f"{name} was not found (probed the `{module}` Python package and PATH). Install it: pip install {module}."
        )
    return Path(found)


def cmake_version(cmake: Path) -> tuple[int, int]:
    out = subprocess.run([os.fspath(cmake), "--version"], capture_output=True, text=True, check=False).stdout
    m = re.search(r"version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _hip_flag_path(path: Path) -> Path:
    """CMake's HIP compiler identification splits CMAKE_HIP_FLAGS at white space whatever the quoting, and
    fails on non-ASCII paths, so the ROCm paths in it must be plain: use the real path behind symlinks."""
    real = path.resolve()
    if not real.as_posix().isascii() or any(c.isspace() for c in real.as_posix()):
        raise BuildError(
            f"the ROCm path {path} (real path {real}) contains white space or non-ASCII characters, which CMake's "
            "HIP compiler identification cannot handle. Point ROCM_HOME at a symlink to it, or at a copy, whose "
            "real path is plain ASCII without spaces (e.g. ln -s '<your path>' /opt/rocm)."
        )
    return real


def build_bridge(
    toolchain: Toolchain, layout: Layout, settings: Settings, sources: BridgeSources, environ: Mapping[str, str]
) -> Path:
    """Configure and build; return the directory that holds libmonarch_bridge.a."""
    cmake = _tool("cmake", "cmake")
    ninja = _tool("ninja", "ninja")
    if cmake_version(cmake) < MIN_CMAKE:
        raise BuildError(
            f"{cmake} is older than CMake {MIN_CMAKE[0]}.{MIN_CMAKE[1]}, which the HIP language needs. "
            "pip install 'cmake>=3.28'."
        )
    for path, what in (
        (toolchain.root, "the toolkit root"),
        (toolchain.compiler, "the compiler"),
        (toolchain.collective_include, "the collective library's include directory"),
    ):
        if path is not None:
            check_path(path, what)
    build = layout.sub("cmake")
    assert toolchain.compiler is not None and toolchain.collective_include is not None
    include_dirs = (*sources.include_dirs, toolchain.collective_include)
    args: list[str] = [
        os.fspath(cmake),
        "-G",
        "Ninja",
        "-S",
        os.fspath(CMAKE_PROJECT),
        "-B",
        os.fspath(build),
        f"-DCMAKE_MAKE_PROGRAM={ninja}",
        f"-DCMAKE_BUILD_TYPE={'Debug' if settings.debug else 'Release'}",
        f"-DMONARCH_BRIDGE_SOURCES={';'.join(os.fspath(s) for s in sources.sources)}",
        f"-DMONARCH_INCLUDE_DIRS={';'.join(os.fspath(d) for d in include_dirs)}",
        f"-DMONARCH_COLLECTIVE_SONAME={toolchain.collective_soname}",
        f"-DMONARCH_PREFIX_MAPS={';'.join(f'{old}={new}' for old, new in layout.prefix_maps)}",
    ]
    host = toolchain.host
    if host is not None and host.cxx is not None and host.cxx.passed:  # detection's choice (toolchain/host.py)
        args.append(f"-DCMAKE_CXX_COMPILER={host.cxx.path}")
    if toolchain.platform == "cuda":
        if host is not None and host.cuda_host is not None and host.cuda_host.passed:
            args.append(f"-DCMAKE_CUDA_HOST_COMPILER={host.cuda_host.path}")
        args += [
            "-DMONARCH_GPU_LANGUAGE=CUDA",
            f"-DCMAKE_CUDA_COMPILER={toolchain.compiler}",
            # -real: machine code for exactly the requested archs, no PTX (lean, see docs/wheels.md).
            f"-DCMAKE_CUDA_ARCHITECTURES={';'.join(a + '-real' for a in toolchain.archs)}",
        ]
    else:
        assert toolchain.root is not None and toolchain.device_lib_dir is not None
        hip_root, device_libs = _hip_flag_path(toolchain.root), _hip_flag_path(toolchain.device_lib_dir)
        args += [
            "-DMONARCH_GPU_LANGUAGE=HIP",
            f"-DCMAKE_HIP_COMPILER={toolchain.compiler}",
            "-DCMAKE_HIP_PLATFORM=amd",
            f"-DCMAKE_HIP_ARCHITECTURES={';'.join(toolchain.archs)}",
            f"-DCMAKE_HIP_FLAGS=--rocm-path={hip_root} --hip-device-lib-path={device_libs}",
            f"-DCMAKE_PREFIX_PATH={hip_root}",
            "-DMONARCH_DEVICE_OPTIONS="
            + (f"-mcode-object-version={toolchain.code_object_version}" if toolchain.code_object_version else ""),
            f"-DMONARCH_GLIBC_GUARD={GLIBC_GUARD if toolchain.glibc_guard else ''}",
        ]
    # The compiler cache (detection's choice: toolchain/launcher.py), passed for every language the project
    # enables, empty for none, so a reconfigured build directory never keeps an old one.
    args += toolchain.launchers.cmake_definitions(("CXX", "CUDA" if toolchain.platform == "cuda" else "HIP"))
    env = {**environ, **toolchain.env, **toolchain.launchers.tool_env(layout.source, layout.build, environ)}
    fix = "Check the compiler messages above; `python -m tools check` compiles csrc/ for both platforms."
    with log.stage("configure", f"CMake for {toolchain.platform} ({', '.join(toolchain.archs)})"):
        run(args, env=env, tmpdir=layout.tmp, what="CMake configure of the C++ bridge", fix=fix)
    jobs = ["-j", str(settings.jobs)] if settings.jobs else []
    with log.stage("compile", f"{len(sources.sources)} translation units with Ninja"):
        out = run(
            [os.fspath(cmake), "--build", os.fspath(build), *jobs],
            env=env,
            tmpdir=layout.tmp,
            what="compiling the C++ bridge",
            fix=fix,
        )
        rebuilt = sum(1 for line in out.splitlines() if re.match(r"\[\d+/\d+\] Building ", line))
        # Compiler warnings would otherwise vanish with the captured output: show them (the bridge is
        # expected to build warning-free on every supported toolkit; the ROCm root tests check it).
        warnings = [line.strip() for line in out.splitlines() if re.search(r"\bwarning:", line)]
        for line in warnings[:MAX_WARNINGS_SHOWN]:
            log.info(f"compile: {line}")
        if len(warnings) > MAX_WARNINGS_SHOWN:
            log.info(f"compile: ... {len(warnings) - MAX_WARNINGS_SHOWN} more warnings")
        log.info(
            "compile: ninja: no work to do"
            if "no work to do" in out
            else f"compile: {rebuilt} translation units rebuilt"
        )
    return build
