"""monarch-runtime: GPU building blocks for checkpoint-less recovery, one API on CPU, CUDA and ROCm.

>>> import monarch_runtime as m
>>> m.build_info()["platform"]   # "cpu", "cuda" or "rocm"
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from monarch_runtime._native import (
    PLATFORM,
    CollectiveError,
    MonarchError,
    NoDeviceError,
    all_reduce_single_rank,
    device_count,
    device_properties,
    kernels,
    launch_kernel,
)
from monarch_runtime._native import checksum as _checksum
from monarch_runtime._native import checksum_reference as _checksum_reference
from monarch_runtime._native import collective_info as _collective_info

__all__ = [
    "PLATFORM",
    "CollectiveError",
    "MonarchError",
    "NoDeviceError",
    "all_reduce_single_rank",
    "build_info",
    "checksum",
    "checksum_reference",
    "device_count",
    "device_properties",
    "kernels",
    "launch_kernel",
]


@lru_cache(maxsize=1)
def _recorded() -> dict[str, Any]:
    text = resources.files(__name__).joinpath("build_info.json").read_text(encoding="utf-8")
    return dict(json.loads(text))


def build_info() -> dict[str, Any]:
    """How this wheel was built (platform, archs, toolkit, collective library), plus the collective
    library's run-time state: whether it loads here and its version (e.g. 23203 for NCCL 2.32.3)."""
    info = dict(_recorded())
    info["native_platform"] = PLATFORM
    collective = _collective_info()
    info["collective_loaded"] = collective["loaded"]
    info["collective_version"] = collective["version"]
    if collective["error"]:
        info["collective_error"] = collective["error"]
    return info


def _as_bytes(data: Any) -> bytes:
    return data if isinstance(data, bytes) else bytes(memoryview(data).cast("B"))


def checksum(data: Any) -> int:
    """mr-sum64 of a bytes-like object, computed by the device kernel (on the host for the CPU build)."""
    return int(_checksum(_as_bytes(data)))


def checksum_reference(data: Any) -> int:
    """mr-sum64 computed by the host reference; equals ``checksum(data)`` bit for bit."""
    return int(_checksum_reference(_as_bytes(data)))
