"""Where things are: the source tree, the per-platform build directory, and the prefixes that
replace them inside binaries so no build-machine path is ever shipped."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from buildcore.errors import BuildError

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

    @property
    def tmp(self) -> Path:
        """The tools' TMPDIR while the build runs; created and removed by the pipeline."""
        return self.build / "tmp"

    def sub(self, name: str) -> Path:
        path = self.build / name
        path.mkdir(parents=True, exist_ok=True)
        return path


# Characters a path cannot hold on its way through CMake and Ninja: CMake separates list items with ';',
# and Ninja runs every command through /bin/sh after its own '$' expansion, so '$', '`', '"' and '\'
# would be interpreted there rather than passed as part of a single argument.
UNSAFE_PATH_CHARACTERS = (";", "$", "`", '"', "\\", "\n", "\r")


def check_path(path: Path, what: str) -> None:
    bad = [c for c in UNSAFE_PATH_CHARACTERS if c in str(path)]
    if bad:
        raise BuildError(
            f"{what} {str(path)!r} contains {', '.join(repr(c) for c in bad)}, which CMake and Ninja cannot pass "
            "to a compiler as part of one argument (';' separates CMake lists; Ninja runs commands through "
            "/bin/sh). Rename it, or choose another directory."
        )


def user_cache(environ: Mapping[str, str]) -> Path:
    """The build's per-user cache directory: ``$XDG_CACHE_HOME/monarch-runtime``, ``~/.cache/...`` by default."""
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "monarch-runtime"


def default_build_dir(source: Path, platform: str) -> Path:
    """build/<platform> in the source tree; a per-user cache directory when the tree is read-only."""
    if os.access(source, os.W_OK):
        return source / "build" / platform
    digest = hashlib.sha256(str(source).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return user_cache(os.environ) / "build" / f"{digest}-{platform}"


def make_layout(source: Path, build_dir: Path | None, platform: str) -> Layout:
    source = source.resolve()
    check_path(source, "the source tree")
    build = build_dir if build_dir is not None else default_build_dir(source, platform)
    build = build if build.is_absolute() else (source / build)
    check_path(build, "the build directory")
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
