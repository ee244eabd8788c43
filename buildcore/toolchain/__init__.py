"""Stage 1: find the toolkit for the requested platform, and check the requested architectures.

Everything that depends on *which* machine builds (paths, versions, the collective library) is decided
here and nowhere else; later stages only read the :class:`Toolchain` this returns. Each toolkit's
detection is a module of its own that says where it looks and why: :mod:`buildcore.toolchain.cuda`,
:mod:`buildcore.toolchain.rocm`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from buildcore.errors import BuildError
from buildcore.toolchain import launcher, model, rocm
from buildcore.toolchain.model import Toolchain, env_path

if TYPE_CHECKING:
    from buildcore.settings import Settings

__all__ = ["Toolchain", "choose_platform", "detect"]


def detect(settings: Settings, environ: Mapping[str, str]) -> Toolchain:
    """The toolkit and its archs, then the host compilers and Rust's linker (:mod:`buildcore.toolchain.host`),
    then the compiler launchers (:mod:`buildcore.toolchain.launcher`)."""
    toolkit = _detect_toolkit(settings, environ)
    return replace(toolkit, launchers=launcher.resolve(settings, environ, toolkit.platform, toolkit.version))


def _detect_toolkit(settings: Settings, environ: Mapping[str, str]) -> Toolchain:
    from buildcore.toolchain import host  # noqa: PLC0415 - runs tools: not on tools/hipify's start-up path

    platform = choose_platform(settings, environ)
    if platform == "cpu":
        if settings.archs:
            raise BuildError(
                f"archs={';'.join(settings.archs)} (from {settings.origin('archs')}) was given for the "
                "CPU build, which compiles no device code. Drop archs, or choose -C platform=cuda|rocm."
            )
        tc = Toolchain(platform="cpu")
    elif platform == "cuda":
        from buildcore.toolchain import cuda  # noqa: PLC0415 - nvcc's probes: only for CUDA builds

        tc = cuda.detect(settings, environ)
    else:
        tc = rocm.detect(settings, environ)
    return replace(tc, host=host.choose(platform, environ, tc.compiler if platform == "rocm" else None))


def choose_platform(settings: Settings, environ: Mapping[str, str]) -> str:
    """``-C platform`` when given; else rocm when ROCM_HOME/ROCM_PATH is set, cuda when CUDA_HOME/CUDA_PATH
    is, cpu when neither; both set is an error."""
    if settings.platform != "auto":
        return settings.platform
    found_cuda = env_path(environ, model.CUDA_ENV)
    found_rocm = env_path(environ, rocm.ENV)
    if found_cuda and found_rocm:
        raise BuildError(
            f"both toolkits are set: {found_cuda[0]}={found_cuda[1]} and {found_rocm[0]}={found_rocm[1]}, so the "
            "platform is ambiguous. Unset one of them, or choose explicitly with -C platform=cuda or "
            "-C platform=rocm (or MONARCH_PLATFORM=...)."
        )
    if found_rocm:
        return "rocm"
    if found_cuda:
        return "cuda"
    return "cpu"
