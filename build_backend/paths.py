"""Where things are: the source tree, the per-platform build directory, and the prefixes that
replace them inside binaries so no build-machine path is ever shipped."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from build_backend.errors import BuildError

# What the source and build directories are called inside debug info and panic messages.
SOURCE_PREFIX = "/monarch-runtime/src"
BUILD_PREFIX = "/monarch-runtime/build"


@dataclass(frozen=True)
class Layout:
    source: Path  # the project root (where pyproject.toml is)
    build: Path  # build/<platform> unless build-dir says otherwise

    @property
    def csrc(self) -> Path:
        return self.source / "csrc"

    @property
    def prefix_maps(self) -> tuple[tuple[Path, str], ...]:
        return ((self.build, BUILD_PREFIX), (self.source, SOURCE_PREFIX))

    def sub(self, name: str) -> Path:
        path = self.build / name
        path.mkdir(parents=True, exist_ok=True)
        return path


def make_layout(source: Path, build_dir: Path | None, platform: str) -> Layout:
    source = source.resolve()
    build = build_dir if build_dir is not None else source / "build" / platform
    build = build if build.is_absolute() else (source / build)
    try:
        build.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise BuildError(
            f"cannot create the build directory {build}: {err.strerror}. Choose a writable one with "
            "-C build-dir=PATH (or MONARCH_BUILD_DIR)."
        ) from None
    if not os.access(build, os.W_OK):
        raise BuildError(f"the build directory {build} is not writable. Choose another with -C build-dir=PATH.")
    return Layout(source=source, build=build.resolve())
