"""CUDA -> HIP translation for monarch-runtime: out of tree, incremental, byte-exact, with a report.

Public API (stable; the build backend uses it with the standard library only)::

    from tools.hipify import HipifyOptions, HipifyResult, hipify_tree
    result = hipify_tree([Path("csrc")], Path("build/x/hip-src"), HipifyOptions(hip_version=(5, 2)))

See docs/hipify.md.
"""

from __future__ import annotations

from tools.hipify.model import Finding, HipifyOptions, HipifyResult, included_closure
from tools.hipify.tree import detect_hip_version, hipify_tree, output_relpath

__all__ = [
    "Finding",
    "HipifyOptions",
    "HipifyResult",
    "detect_hip_version",
    "hipify_tree",
    "included_closure",
    "output_relpath",
]
