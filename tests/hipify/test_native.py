"""The native hipify scanner (rust/hipify_native, module ``monarch_hipify_native``) against the Python
reference engine: byte-identical output, the same findings, includes, defines, comment spans and lint
findings, on the golden files, csrc/, a generated corpus and adversarial token soup. Plus the loader's
choices (``MONARCH_HIPIFY_NATIVE``) and its errors, directly and through the CLI.

When the module is not importable the engine comparisons are skipped, unless ``MONARCH_TEST_REQUIRE_NATIVE=1``
(ci/run-tests.sh sets it), in which case they fail: a broken native build must not pass as "skipped".
Every comparison forces its engines explicitly (the native side under ``MONARCH_HIPIFY_NATIVE=1``), so
they also run when the session itself has ``MONARCH_HIPIFY_NATIVE=0``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from _native_support import CORPORA, SOUP_TOKENS
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tools.errors import ToolError
from tools.hipify import lint
from tools.hipify import native as native_mod
from tools.hipify.lint import lint_bytes
from tools.hipify.mapping import MappingDatabase
from tools.hipify.translate import FileResult, Translator

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ENV = "MONARCH_HIPIFY_NATIVE"
REQUIRE_NATIVE = os.environ.get("MONARCH_TEST_REQUIRE_NATIVE") == "1"


def _native_problem() -> str | None:
    """Why the native module cannot be used here (not importable, or built for another interface), or None."""
    try:
        native_mod.load({ENV: "1"})
    except ToolError as err:
        return str(err)
    return None


NATIVE_PROBLEM = _native_problem()
# Not usable and not required: skip with the reason. Required (CI): the tests run, and fail in `engines`.
needs_native = pytest.mark.skipif(
    NATIVE_PROBLEM is not None and not REQUIRE_NATIVE,
    reason=f"native hipify scanner not usable, engine comparisons skipped: {NATIVE_PROBLEM} "
    "(MONARCH_TEST_REQUIRE_NATIVE=1 makes this a failure)",
)


def _require_native() -> None:
    if NATIVE_PROBLEM is not None:
        pytest.fail(f"MONARCH_TEST_REQUIRE_NATIVE=1, but the native hipify scanner is not usable: {NATIVE_PROBLEM}")


# --- engines -----------------------------------------------------------------------------------------

# Option sets the comparisons run under (keyword arguments of Translator).
OPTIONS: dict[str, dict[str, Any]] = {
    "newest": {"hip_version": None},
    "hip5.2": {"hip_version": (5, 2)},  # *_sync downgrades (a call's arguments rewritten and consumed)
    "hip6.4": {"hip_version": (6, 4)},  # 64-bit masks, the warp-sync macro, (void) on discarded hipError_t
    "hip7.2": {"hip_version": (7, 2)},
    "literals": {"hip_version": (5, 2), "translate_comments_and_strings": True},
    "launch": {"hip_version": (6, 4), "launch": True},
    "no-unmapped": {"hip_version": (5, 2), "report_unmapped": False},
    "everything": {"hip_version": None, "translate_comments_and_strings": True, "launch": True},
}


class Pair:
    """The same Translator options on both engines (each reused across files, as the tree pass does)."""

    def __init__(self, db: MappingDatabase, options: dict[str, Any]) -> None:
        self.python = Translator(db, engine="python", **options)
        with mock.patch.dict(os.environ, {ENV: "1"}):
            self.native = Translator(db, engine="auto", **options)
        assert self.python._native is None
        assert self.native._native is not None


@pytest.fixture(scope="session")
def engines() -> dict[str, Pair]:
    """Engine pairs by option set, built on first use and shared by the session."""
    if REQUIRE_NATIVE:
        _require_native()
    return {}


def pair(db: MappingDatabase, pairs: dict[str, Pair], name: str) -> Pair:
    p = pairs.get(name)
    if p is None:
        p = pairs[name] = Pair(db, OPTIONS[name])
    return p


def lint_native(data: bytes, spans: list[tuple[int, int]]) -> list[tuple[Any, ...]]:
    with mock.patch.dict(os.environ, {ENV: "1"}):
        assert lint._plan("auto", "1").native is not None
        return [_finding(f) for f in lint_bytes(data, spans, engine="auto")]


def lint_python(data: bytes, spans: list[tuple[int, int]]) -> list[tuple[Any, ...]]:
    return [_finding(f) for f in lint_bytes(data, spans, engine="python")]


def _finding(f: Any) -> tuple[Any, ...]:
    return (f.offset, f.name, f.kind, f.reason, f.suggestion, f.blocking, f.rule)


def snapshot(res: FileResult) -> dict[str, Any]:
    return {
        "data": res.data,
        "changed": res.changed,
        "findings": [_finding(f) for f in res.findings],
        "includes": [(i.out_start, i.out_end, i.spelling, i.angled, i.in_offset, i.mapped) for i in res.includes],
        "defines": list(res.defines),
        "comment_spans": [tuple(s) for s in res.comment_spans],
        "facts": res.facts,
    }


def differences(p: Pair, data: bytes) -> list[str]:
    """Fields on which the engines disagree for ``data`` (translation, then the lint over its spans)."""
    want = snapshot(p.python.translate(data))
    got = snapshot(p.native.translate(data))
    out = [f"{k}: python {want[k]!r:.300} != native {got[k]!r:.300}" for k in want if want[k] != got[k]]
    spans = want["comment_spans"]
    lp, ln = lint_python(data, spans), lint_native(data, spans)
    if lp != ln:
        out.append(f"lint: python {lp!r:.300} != native {ln!r:.300}")
    return out


# --- corpora -----------------------------------------------------------------------------------------


@needs_native
@pytest.mark.parametrize("option_set", sorted(OPTIONS))
@pytest.mark.parametrize("corpus", [*CORPORA, "generated"])
def test_engines_agree_on_corpus(
    db: MappingDatabase, engines: dict[str, Pair], request: pytest.FixtureRequest, corpus: str, option_set: str
) -> None:
    files = request.getfixturevalue("generated_corpus") if corpus == "generated" else CORPORA[corpus]()
    assert files, f"no files in corpus {corpus}"
    p = pair(db, engines, option_set)
    bad = {str(f): d for f in files if (d := differences(p, f.read_bytes()))}
    assert not bad, f"{len(bad)} of {len(files)} files differ, e.g.: {next(iter(bad.items()))}"


# --- adversarial inputs ------------------------------------------------------------------------------

TOKENS = SOUP_TOKENS
SOUP = st.lists(st.sampled_from(TOKENS), max_size=60).map(b"".join)
BOM = b"\xef\xbb\xbf"


@needs_native
@pytest.mark.parametrize("option_set", ["hip5.2", "hip6.4", "everything", "no-unmapped"])
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=SOUP)
@example(data=BOM + b'#include <cuda_runtime.h>\ncudaMalloc(u8"cudaFree"); // cudaStream_t\n')
@example(data=BOM + b"cudaMalloc")
@example(data=BOM)
@example(data=b"")
def test_engines_agree_on_token_soup(
    db: MappingDatabase, engines: dict[str, Pair], option_set: str, data: bytes
) -> None:
    assert differences(pair(db, engines, option_set), data) == []


@needs_native
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=SOUP)
def test_engines_agree_after_a_bom(db: MappingDatabase, engines: dict[str, Pair], data: bytes) -> None:
    assert differences(pair(db, engines, "literals"), BOM + data) == []


@needs_native
@pytest.mark.parametrize("option_set", ["newest", "literals"])
def test_engines_agree_on_a_bom_prefixed_file(db: MappingDatabase, engines: dict[str, Pair], option_set: str) -> None:
    src = BOM + b'#include "cuda_fp16.h"\n/* cudaFree */ cudaStream_t s; cudaMalloc(&p, 32); L"cudaFree"\n'
    p = pair(db, engines, option_set)
    assert differences(p, src) == []
    res = p.native.translate(src)
    assert res.data.startswith(BOM + b'#include "hip/hip_fp16.h"\n')
    assert all(a >= 3 for a, _b in res.comment_spans)


@needs_native
@pytest.mark.parametrize("engine", ["python", "native"])
def test_literal_translation_keeps_the_encoding_prefix(
    db: MappingDatabase, engines: dict[str, Pair], engine: str
) -> None:
    # --translate-comments-and-strings used to drop a literal's u8/L prefix (bytes lost)
    p = pair(db, engines, "literals")
    tr = p.python if engine == "python" else p.native
    src = b'auto a = u8"cudaMalloc"; auto b = LR"x(cudaFree)x"; auto c = U"cudaStream_t"; auto d = L\'c\';\n'
    res = tr.translate(src)
    assert res.data == (
        b'auto a = u8"hipMalloc"; auto b = LR"x(hipFree)x"; auto c = U"hipStream_t"; auto d = L\'c\';\n'
    )
    assert res.changed
    assert (src[res.comment_spans[0][0] : res.comment_spans[0][1]]) == b'u8"cudaMalloc"'
    assert (src[res.comment_spans[1][0] : res.comment_spans[1][1]]) == b'LR"x(cudaFree)x"'


@pytest.mark.skipif(
    NATIVE_PROBLEM is not None and not REQUIRE_NATIVE, reason=f"native hipify scanner not usable: {NATIVE_PROBLEM}"
)
def test_native_module_is_usable_when_required() -> None:
    """The one line to look at when CI says the native scanner is broken."""
    _require_native()
    module = native_mod.load({ENV: "1"})
    assert module is not None and module.INTERFACE == native_mod.INTERFACE


# --- the loader --------------------------------------------------------------------------------------


def _fake_import(module: object | None) -> Any:
    def imp(name: str, package: str | None = None) -> object:
        assert name == "monarch_hipify_native"
        if module is None:
            raise ImportError("No module named 'monarch_hipify_native'")
        return module

    return imp


@pytest.mark.parametrize("value", ["bogus", "2", "yes please"])
def test_load_rejects_a_bad_choice(value: str) -> None:
    with pytest.raises(ToolError, match=ENV) as err:
        native_mod.load({ENV: value})
    assert "auto" in str(err.value) and "0" in str(err.value)


def test_load_required_but_not_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib, "import_module", _fake_import(None))
    with pytest.raises(ToolError, match=r"pip install \./rust/hipify_native") as err:
        native_mod.load({ENV: "1"})
    assert ENV in str(err.value)
    assert native_mod.load({ENV: "auto"}) is None
    assert native_mod.load({}) is None


def test_load_other_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    stale = types.SimpleNamespace(INTERFACE=native_mod.INTERFACE + 1, __file__="/stale/monarch_hipify_native.so")
    monkeypatch.setattr(importlib, "import_module", _fake_import(stale))
    assert native_mod.load({ENV: "auto"}) is None
    assert native_mod.load({}) is None
    with pytest.raises(ToolError, match="interface") as err:
        native_mod.load({ENV: "1"})
    assert "/stale/monarch_hipify_native.so" in str(err.value) and "pip install ./rust/hipify_native" in str(err.value)
    no_interface = types.SimpleNamespace()
    monkeypatch.setattr(importlib, "import_module", _fake_import(no_interface))
    assert native_mod.load({ENV: "auto"}) is None
    with pytest.raises(ToolError, match="interface"):
        native_mod.load({ENV: "1"})


def test_load_off_and_on(monkeypatch: pytest.MonkeyPatch) -> None:
    good = types.SimpleNamespace(INTERFACE=native_mod.INTERFACE)
    monkeypatch.setattr(importlib, "import_module", _fake_import(good))
    for off in ("0", "off", "python", " 0 "):
        assert native_mod.load({ENV: off}) is None
    for on in ("1", "auto", "", "native", "ON"):
        assert native_mod.load({ENV: on}) is good
    # "0" does not even try the import
    monkeypatch.setattr(importlib, "import_module", mock.Mock(side_effect=AssertionError("imported")))
    assert native_mod.load({ENV: "0"}) is None


def test_python_engine_ignores_the_native_module(db: MappingDatabase) -> None:
    # engine="python" never loads the module, whatever the environment says
    with mock.patch.dict(os.environ, {ENV: "bogus"}):
        assert Translator(db, (5, 2), engine="python")._native is None
        assert lint_bytes(b"__global__ void k() { int l = threadIdx.x & 31; }", [], engine="python")


# --- through the CLI ---------------------------------------------------------------------------------


def _cli(tmp_path: Path, choice: str, first_on_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "src"
    src.mkdir(exist_ok=True)
    (src / "k.cu").write_bytes(b"#include <cuda_runtime.h>\nvoid f() { cudaMalloc(0, 4); }\n")
    path = [str(first_on_path)] if first_on_path is not None else []
    return subprocess.run(
        [sys.executable, "-m", "tools", "hipify", str(src), "-o", str(tmp_path / "out"), "-q"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, ENV: choice, "PYTHONPATH": os.pathsep.join([*path, str(REPO)])},
        check=False,
        timeout=120,
    )


def _assert_one_paragraph_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr
    message = proc.stderr.strip()
    assert message.startswith("error:") and "\n\n" not in message, message
    for needle in needles:
        assert needle in message, message


@pytest.mark.fault
def test_cli_bad_choice_is_one_paragraph(tmp_path: Path) -> None:
    proc = _cli(tmp_path, "bogus")
    _assert_one_paragraph_error(proc, f"{ENV}='bogus'", "auto")
    assert not (tmp_path / "out" / "k.hip").exists()


@pytest.mark.fault
def test_cli_stale_native_module(tmp_path: Path) -> None:
    # a module built for another interface, first on the path: "1" refuses it, auto falls back to Python
    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / "monarch_hipify_native.py").write_text(f"INTERFACE = {native_mod.INTERFACE + 1}\n")
    proc = _cli(tmp_path, "1", stale)
    _assert_one_paragraph_error(proc, "interface", "pip install ./rust/hipify_native")
    proc = _cli(tmp_path, "auto", stale)
    assert proc.returncode == 0, proc.stderr
    assert b"hipMalloc" in (tmp_path / "out" / "k.hip").read_bytes()
