"""Version downgrades: for a target HIP older than the one that added a CUDA name, rewrite the call
to what that older HIP has (data/downgrades.tsv), instead of blocking the port.

Example, target HIP 5.2: ``__shfl_down_sync(__activemask(), v, 16)`` -> ``__shfl_down(v, 16)``.
Each rewrite is reported as a non-blocking hazard (rule ``sync-mask-dropped``) at the call; one that drops a
mask naming only some lanes, or computed at run time, blocks (rule ``lane-mask-32``, tools/hipify/masks.py)."""

from __future__ import annotations

from pathlib import Path

from tools.errors import ToolError
from tools.hipify.mapping import Version, parse_version

DOWNGRADES_DB = Path(__file__).resolve().parent / "data" / "downgrades.tsv"
ACTIONS = ("drop-first-arg", "call", "replace-call")


class Downgrade:
    __slots__ = ("action", "below", "cuda_name", "replacement")

    def __init__(self, cuda_name: str, below: Version, replacement: bytes, action: str) -> None:
        self.cuda_name = cuda_name
        self.below = below
        self.replacement = replacement
        self.action = action


def load_downgrades(target: Version | None, path: Path = DOWNGRADES_DB) -> dict[bytes, Downgrade]:
    """The downgrades that apply to ``target`` (none when the target is unknown)."""
    if target is None:
        return {}
    rows = [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]
    out: dict[bytes, Downgrade] = {}
    for line in rows[1:]:
        cells = line.split("\t")
        if len(cells) != 4 or cells[3] not in ACTIONS:
            raise ToolError(f"{path}: bad row {line!r} (want 4 tab-separated cells, action one of {ACTIONS})")
        below = parse_version(cells[1])
        if below is not None and target[:2] < below[:2]:
            out[cells[0].encode("latin-1")] = Downgrade(cells[0], below, cells[2].encode("latin-1"), cells[3])
    return out


def rewrite_call(data: bytes, end: int, dg: Downgrade) -> tuple[bytes, int] | None:
    """For the name ending at ``end``: (text replacing ``data[start:resume]``, resume offset), or None
    when the call cannot be parsed (then the name is left to the normal version check)."""
    i = end
    n = len(data)
    while i < n and data[i] in b" \t":
        i += 1
    if i >= n or data[i] != ord("("):
        return None
    depth = 0
    first_comma = -1
    j = i
    while j < n:
        c = data[j]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            depth -= 1
            if depth == 0:
                break
        elif c == ord(",") and depth == 1 and first_comma < 0:
            first_comma = j
        elif c == ord(";") and depth <= 1:
            return None
        j += 1
    else:
        return None
    if dg.action == "call":
        if data[i + 1 : j].strip():
            return None
        return dg.replacement, j + 1
    if dg.action == "replace-call":  # the whole call, whatever its arguments
        return dg.replacement, j + 1
    if first_comma < 0:
        return None
    k = first_comma + 1
    while k < j and data[k] in b" \t":
        k += 1
    # Emit "replacement(" and resume scanning at the second argument, so it is still translated.
    return dg.replacement + b"(", k
