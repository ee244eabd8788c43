"""Map positions in a hipified file back to its CUDA source.

hipify rewrites identifiers inside lines and rarely adds or removes a line (a launch converted to
hipLaunchKernelGGL, a downgraded call); a line diff gives the correspondence either way.
"""

from __future__ import annotations

import difflib


class LineMap:
    """``source_line(n)``: the CUDA line that hipified line ``n`` (1-based) came from."""

    __slots__ = ("_map", "_source_lines", "_target_lines")

    def __init__(self, source: bytes, target: bytes) -> None:
        self._source_lines = source.splitlines()
        self._target_lines = target.splitlines()
        self._map: dict[int, int] = {}
        matcher = difflib.SequenceMatcher(None, self._source_lines, self._target_lines, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "insert":
                for j in range(j1, j2):
                    self._map[j + 1] = min(i1 + 1, max(len(self._source_lines), 1))
                continue
            if tag == "delete":
                continue
            span_i, span_j = i2 - i1, j2 - j1
            for k in range(span_j):
                # equal/replace: line for line; an uneven replace maps proportionally
                self._map[j1 + k + 1] = i1 + 1 + (k * span_i // span_j if span_j else 0)

    def source_line(self, line: int) -> int:
        if line <= 0:
            return line
        return self._map.get(line, min(line, len(self._source_lines)))

    def source_column(self, line: int, column: int) -> int:
        """Column (1-based, bytes) on the source line for ``column`` on hipified ``line``."""
        if line <= 0 or column <= 0 or line > len(self._target_lines):
            return column
        src_line = self.source_line(line)
        if src_line <= 0 or src_line > len(self._source_lines):
            return column
        a, b = self._source_lines[src_line - 1], self._target_lines[line - 1]
        if a == b:
            return column
        offset = column - 1
        for tag, i1, _i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if j1 <= offset < j2:
                return (i1 + (offset - j1) if tag == "equal" else i1) + 1
        return min(column, len(a) + 1)
