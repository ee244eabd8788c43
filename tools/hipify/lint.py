"""Portability-hazard lint (stub replaced below)."""

from __future__ import annotations

from tools.hipify.translate import RawFinding


def lint_bytes(data: bytes, spans: list[tuple[int, int]]) -> list[RawFinding]:
    return []
