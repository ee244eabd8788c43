"""Stage 3: the bridge sources for the compiler. CUDA compiles csrc/ as it is; ROCm compiles a
hipified copy written under the build directory (csrc/ is never written)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from build_backend import log
from build_backend.paths import Layout
from buildcore.errors import BuildError
from buildcore.kernels import Kernel, write_registry
from buildcore.settings import Settings
from buildcore.toolchain import Toolchain

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".hip")


@dataclass(frozen=True)
class BridgeSources:
    sources: tuple[Path, ...]
    include_dirs: tuple[Path, ...]


def _compile_units(root: Path) -> tuple[Path, ...]:
    """Every compile unit under ``root``. Directory symlinks are not followed (so a loop cannot recurse
    forever); a symlink that cannot be resolved is reported and skipped."""
    units = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink():
            try:
                path.resolve(strict=True)
            except (OSError, RuntimeError) as err:
                log.info(f"warning: skipping {path}: {getattr(err, 'strerror', None) or err}")
                continue
        if path.is_file() and path.suffix in SOURCE_SUFFIXES:
            units.append(path)
    return tuple(units)


def prepare(toolchain: Toolchain, layout: Layout, settings: Settings, registered: tuple[Kernel, ...]) -> BridgeSources:
    """The compile units, with the registry of ``registered`` kernels (read once by the pipeline)."""
    if not layout.csrc.is_dir():
        raise BuildError(f"the source tree {layout.source} has no csrc/ directory; is this a monarch-runtime checkout?")
    registry = write_registry(registered, layout.sub("generated"))
    if toolchain.platform == "cuda":
        return BridgeSources((*_compile_units(layout.csrc), registry), (layout.csrc,))
    from tools.hipify import HipifyOptions, hipify_tree  # noqa: PLC0415 - only the ROCm build needs it

    out = layout.sub("hip-src")
    target = settings.hip_version or toolchain.version
    with log.stage("hipify", f"csrc/ -> {out} (target HIP {target[0]}.{target[1]})" if target else "csrc/"):
        # the ROCm compile's own view (build_backend/cmake/CMakeLists.txt): every source is compiled as HIP, with the
        # collective library's name defined; branches it decides against are not reported
        options = HipifyOptions(
            hip_version=target,
            defines=(
                (("MONARCH_COLLECTIVE_SONAME", f'"{toolchain.collective_soname}"'),)
                if toolchain.collective_soname
                else ()
            ),
            cuda_units=SOURCE_SUFFIXES,
        )
        result = hipify_tree([layout.csrc], out, options)
        log.info(f"hipify: {result.summary()}")
    if result.blocking:
        raise BuildError(
            "hipify left code in csrc/ that cannot be ported to the target HIP version:\n"
            + "\n".join(f"  {f}" for f in result.findings[:20])
            + "\nRun `python -m tools hipify csrc -o /tmp/out --report r.json` for the full report."
        )
    sources = tuple(sorted(p for p in result.outputs.values() if p.suffix in SOURCE_SUFFIXES))
    return BridgeSources((*sources, registry), (out,))
