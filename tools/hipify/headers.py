"""CUDA headers with no HIP counterpart (``data/cuda_only_headers.tsv``), by target: the one loader that hipify's
translation (the blocking ``cuda-only-header`` finding) and ``tools port``'s failure classifier read.

A row's ``compat`` names the blocks of the compat header (tools/hipify/simd.py, ``data/hipify_compat.h``) that
provide the header on HIP (``cooperative_groups/reduce.h``): the translation then writes the compat header in its
place, and the finding is a note.

``cuda_only_header(spelling, hip_version)`` answers for a header as written in ``#include``: a row of the table
(the exact path, else the longest ``dir/`` prefix that holds it), or, for the headers whose counterpart depends on the
HIP version (``data/targets.tsv``'s ``header`` rules: ``cuda_fp6.h`` has none before HIP 7.0), one made from that
rule when the target has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from tools.errors import ToolError
from tools.hipify import simd
from tools.hipify.mapping import Version, format_version
from tools.hipify.targets import load_target

_Row = TypeVar("_Row")

TABLE = Path(__file__).resolve().parent / "data" / "cuda_only_headers.tsv"
_COLUMNS = ("header", "instead", "source", "compat")


class CudaOnlyHeader:
    """A header HIP (at some target) has no counterpart of: what to do instead, where that was checked, and the
    first HIP that has one (``since``, with its path ``counterpart``; ``None`` when none has)."""

    __slots__ = ("compat", "counterpart", "header", "instead", "since", "source")

    def __init__(  # noqa: PLR0917
        self,
        header: str,
        instead: str,
        source: str,
        since: Version | None = None,
        counterpart: str = "",
        compat: tuple[str, ...] = (),
    ) -> None:
        self.header = header  # the table's key: a path, or a prefix ending in "/"
        self.instead = instead
        self.source = source
        self.since = since
        self.counterpart = counterpart
        self.compat = compat  # the compat header's blocks that provide it (tools/hipify/simd.py), or ()

    def reason(self, spelling: str, hip_version: Version | None) -> str:
        target = f"HIP {format_version(hip_version)}" if hip_version else "HIP"
        if self.since is not None:
            return (
                f"<{spelling}> is a CUDA header {target} has no counterpart of (HIP >= {format_version(self.since)} "
                f"has <{self.counterpart}>)"
            )
        return f"<{spelling}> is a CUDA header with no HIP counterpart ({target})"

    def __repr__(self) -> str:
        return f"CudaOnlyHeader({self.header!r})"


@lru_cache(maxsize=2)
def table(path: Path = TABLE) -> dict[str, CudaOnlyHeader]:
    """The rows of ``data/cuda_only_headers.tsv`` by header; a bad row is a ToolError."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ToolError(f"cannot read {path}: {err.strerror or err}") from None
    out: dict[str, CudaOnlyHeader] = {}
    header = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if not header:
            if tuple(cells) != _COLUMNS:
                raise ToolError(f"{path}:{lineno}: the header row must be {' '.join(_COLUMNS)}")
            header = True
            continue
        if len(cells) != len(_COLUMNS) or not all(cells) or cells[0] in out:
            raise ToolError(
                f"{path}:{lineno}: bad row {line!r} (want header, instead, source, compat; each header once)"
            )
        compat = () if cells[3] == "-" else tuple(cells[3].split(","))
        unknown = sorted(set(compat) - simd.blocks())
        if unknown:
            raise ToolError(
                f"{path}:{lineno}: compat names {', '.join(unknown)}, which {simd.SOURCE.name} has no block of "
                "('-' for none)"
            )
        out[cells[0]] = CudaOnlyHeader(cells[0], cells[1], cells[2], compat=compat)
    return out


def by_path(rows: Mapping[str, _Row], spelling: str) -> _Row | None:
    """The row of a header table (keys: header paths, and ``dir/`` rows for whole directories) for ``spelling``:
    the exact path, else the longest ``dir/`` prefix that holds it."""
    hit = rows.get(spelling)
    if hit is not None:
        return hit
    parts = spelling.split("/")
    for n in range(len(parts) - 1, 0, -1):
        hit = rows.get("/".join(parts[:n]) + "/")
        if hit is not None:
            return hit
    return None


def table_row(spelling: str) -> CudaOnlyHeader | None:
    """The CUDA-only header table's row for ``spelling`` (``by_path``)."""
    return by_path(table(), spelling)


@lru_cache(maxsize=64)
def _by_target(hip_version: Version | None) -> dict[str, tuple[str, Version | None]]:
    return load_target(hip_version).headers


def cuda_only_header(spelling: str, hip_version: Version | None) -> CudaOnlyHeader | None:
    """The row for ``spelling`` when HIP ``hip_version`` (None: the newest) has no counterpart of it, else None."""
    by_target = _by_target(hip_version[:2] if hip_version else None).get(spelling)
    if by_target is not None:
        hip, lowest = by_target
        if hip:
            return None
        newest = _by_target(None).get(spelling, ("", None))[0]
        instead = (
            f"raise the target to HIP {format_version(lowest)} (<{newest}>), or guard the include with "
            "#ifndef __HIP_PLATFORM_AMD__"
            if lowest is not None
            else "guard the include with #ifndef __HIP_PLATFORM_AMD__"
        )
        return CudaOnlyHeader(spelling, instead, "data/targets.tsv", lowest, newest)
    return table_row(spelling)
