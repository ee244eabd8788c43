"""monarch-runtime's PEP 517 build backend.

It only orchestrates; each stage is a module with a small typed interface, and data flows one way:

    settings.load -> toolchain.detect -> hipify_stage.prepare -> compile.build_bridge
                  -> rust.build_extension -> wheel.write_wheel

Declared in pyproject.toml with ``backend-path = ["."]``. User errors (BuildError, ToolError) are
printed as one paragraph without a traceback and the hook exits with status 1.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from build_backend.hooks import hook
from buildcore.errors import BuildError

# The stages are imported by the hooks that run them, not here: get_requires_* and an sdist should not pay
# for the whole pipeline (see docs/design.md for the layers under this package).

__all__ = [
    "BuildError",
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
]


@hook
def get_requires_for_build_wheel(config_settings: Mapping[str, object] | None = None) -> list[str]:
    """variantlib (and, for ROCm, AMD's provider plugin) when a variant wheel is requested (-C variant=...
    or MONARCH_VARIANT), so isolated builds get them; a bad setting or an ambiguous platform is reported by
    build_wheel, with the rest of the build's context."""
    from build_backend import variant  # noqa: PLC0415
    from build_backend.pipeline import read_pyproject  # noqa: PLC0415
    from buildcore.settings import load as load_settings  # noqa: PLC0415
    from buildcore.toolchain import choose_platform  # noqa: PLC0415

    try:
        settings = load_settings(config_settings, os.environ, read_pyproject(Path.cwd()))
        return variant.build_requirements(choose_platform(settings, os.environ)) if settings.variant else []
    except BuildError:
        return []


@hook
def get_requires_for_build_sdist(config_settings: Mapping[str, object] | None = None) -> list[str]:
    return []


@hook
def build_wheel(
    wheel_directory: str,
    config_settings: Mapping[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    from build_backend.pipeline import build_wheel_into  # noqa: PLC0415

    out = Path(wheel_directory)
    out.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel_into(Path.cwd(), out, config_settings, os.environ)
    return wheel.name


@hook
def get_requires_for_build_editable(config_settings: Mapping[str, object] | None = None) -> list[str]:
    return []


@hook
def build_editable(
    wheel_directory: str,
    config_settings: Mapping[str, object] | None = None,
    metadata_directory: str | None = None,
) -> str:
    from build_backend.pipeline import build_editable_into  # noqa: PLC0415

    out = Path(wheel_directory)
    out.mkdir(parents=True, exist_ok=True)
    return build_editable_into(Path.cwd(), out, config_settings, os.environ).name


@hook
def build_sdist(sdist_directory: str, config_settings: Mapping[str, object] | None = None) -> str:
    from build_backend import log  # noqa: PLC0415
    from build_backend.pipeline import read_pyproject, write_sdist  # noqa: PLC0415

    source = Path.cwd()
    out = Path(sdist_directory)
    out.mkdir(parents=True, exist_ok=True)
    version = str(read_pyproject(source).get("tool", {}).get("monarch-runtime", {}).get("version", "0"))
    sdist = write_sdist(source, out, version)
    log.info(f"sdist: {sdist.name}")
    return sdist.name
