"""A small tree through hipify's tree pass, for the tests of the rules that need the tree (added lines, roles)."""

from __future__ import annotations

from pathlib import Path

from tools.hipify import HipifyOptions, HipifyResult, hipify_tree
from tools.hipify.mapping import Version


def hipify_files(tmp_path: Path, files: dict[str, str], version: Version = (6, 4)) -> tuple[HipifyResult, Path]:
    """``files`` (relative path -> text) written under ``tmp_path/src``, hipified into ``tmp_path/out`` for HIP
    ``version``: the result and the output directory."""
    src = tmp_path / "src"
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    out = tmp_path / "out"
    return hipify_tree([src], out, HipifyOptions(hip_version=version, jobs=1)), out
