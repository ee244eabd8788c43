"""What the native-engine parity tests share: loading the module (skipped when it is not usable, a failure under
``MONARCH_TEST_REQUIRE_NATIVE=1``, which ci/run-tests.sh sets) and the corpora they compare the engines on."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from tools.errors import ToolError
from tools.hipify import native as native_mod

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
REQUIRE_NATIVE = os.environ.get("MONARCH_TEST_REQUIRE_NATIVE") == "1"


def load(attr: str | None = None) -> tuple[Any, str | None]:
    """(the native module, None) under ``MONARCH_HIPIFY_NATIVE=1``, or (None, why it is not usable): not
    importable, built for another interface, or without ``attr`` (built from an older tree)."""
    try:
        module = native_mod.load({"MONARCH_HIPIFY_NATIVE": "1"})
    except ToolError as err:
        return None, str(err)
    if module is None:
        return None, "not importable"
    if attr is not None and not hasattr(module, attr):
        return None, f"the native module has no {attr} (built from an older tree): pip install ./rust/hipify_native"
    return module, None


def skip_unless_usable(problem: str | None, what: str) -> pytest.MarkDecorator:
    """Skip when the module is not usable, unless it is required (then the tests run, and fail)."""
    return pytest.mark.skipif(
        problem is not None and not REQUIRE_NATIVE,
        reason=f"native hipify module not usable, {what} skipped: {problem} "
        "(MONARCH_TEST_REQUIRE_NATIVE=1 makes this a failure)",
    )


def files_under(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def make_generated(root: Path, size: int) -> None:
    """bench/hipify_bench.py's synthetic tree (templates, csrc/, golden files, Latin-1 files) of ``size`` bytes."""
    spec = importlib.util.spec_from_file_location("_hipify_bench_for_tests", REPO / "bench" / "hipify_bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    files, total = bench.make_corpus(root, size)
    assert files > 20 and total >= size


#: the repository's corpora (the generated one is the ``generated_corpus`` fixture of conftest.py)
CORPORA = {
    "golden": lambda: files_under(HERE / "golden"),
    "data": lambda: files_under(HERE / "data"),
    "csrc": lambda: files_under(REPO / "csrc"),
}
