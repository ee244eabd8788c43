"""The compiled cache (tools/hipify/cache.py): never stale, rebuilt when corrupt, optional when unwritable."""

from __future__ import annotations

import marshal
import os
import re
from pathlib import Path

import pytest

from tools.hipify import cache
from tools.hipify.mapping import COLUMNS, GENERATED_DB, load_database
from tools.hipify.translate import Translator

SAMPLE = (
    b"#include <cuda_runtime.h>\n#include <cublas_v2.h>\n// cudaMalloc in a comment\n"
    b"__global__ void k(float* p) { p[threadIdx.x & 31] = 0; }\nvoid f() { float* d; cudaMalloc(&d, 4); "
    b'cudaFree(d); cublasCreate(nullptr); cuFooBar(); make_cuComplex(1, 2); const char* s = "cudaFree"; }\n'
)


def _tsv(rows: list[tuple[str, str]]) -> str:
    lines = ["#!source\ttest", "\t".join(COLUMNS)]
    # pad past the size where a layer is kept as its bytes (TextRows), so that path is tested too
    rows = rows + [(f"cuPad{i:04d}", f"hipPad{i:04d}") for i in range(300)]
    for cuda, hip in rows:
        lines.append("\t".join([cuda, hip, "function", "runtime", "1", "", "", "", "", "", "", "", ""]))
    return "\n".join(lines) + "\n"


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "cache"
    monkeypatch.setenv(cache.ENV, str(where))
    return where


def _entries(where: Path) -> list[Path]:
    """The entries, but the code fingerprint's (computed once per process: present or not by test order)."""
    found = sorted(where.glob("*.marshal")) if where.is_dir() else []
    return [p for p in found if not p.name.startswith("codefp-")]


def test_cached_database_and_translator_equal_uncached(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = load_database()  # builds the entries
    assert {p.name.split("-")[0] for p in _entries(cache_dir)} == {"db", "dbstat"}
    tr_first = Translator(first, (5, 2))
    assert {p.name.split("-")[0] for p in _entries(cache_dir)} == {"db", "dbstat", "prefixes", "scanner"}
    second = load_database()  # from the cache
    tr_second = Translator(second, (5, 2))
    monkeypatch.setenv(cache.ENV, "off")
    plain = load_database()
    tr_plain = Translator(plain, (5, 2))
    assert len(first) == len(second) == len(plain)
    assert first.fingerprint == second.fingerprint == plain.fingerprint
    assert first.meta == second.meta == plain.meta
    names = sorted(plain.names())
    assert sorted(second.names()) == names
    for name in [*names[::7], "cudaMalloc", "not_a_cuda_name", "#!source", "cuda\tMalloc"]:
        assert second.lookup(name) == plain.lookup(name), name
    assert tr_second.scanner.pattern == tr_plain.scanner.pattern
    assert tr_second.scanner.flags == tr_plain.scanner.flags
    assert tr_second.scanner.groupindex == tr_plain.scanner.groupindex
    for tr in (tr_first, tr_second):
        got, want = tr.translate(SAMPLE), tr_plain.translate(SAMPLE)
        assert got.data == want.data
        assert [repr(f) for f in got.findings] == [repr(f) for f in want.findings]
        assert got.comment_spans == want.comment_spans


def test_a_changed_layer_is_never_served_stale(cache_dir: Path, tmp_path: Path) -> None:
    layer = tmp_path / "base.tsv"
    layer.write_text(_tsv([("cudaThingA", "hipThingA")]), encoding="utf-8")
    before = load_database(base=layer)
    assert before.raw_hip_name("cudaThingA") == "hipThingA"
    again = load_database(base=layer)  # cached
    assert again.raw_hip_name("cudaThingA") == "hipThingA"
    assert Translator(again, None).translate(b"x = cudaThingA();\n").data == b"x = hipThingA();\n"
    # Same size, same mtime: only the content differs.
    stat = layer.stat()
    layer.write_text(_tsv([("cudaThingA", "hipThingB")]), encoding="utf-8")
    os.utime(layer, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert layer.stat().st_size == stat.st_size
    after = load_database(base=layer)
    assert after.raw_hip_name("cudaThingA") == "hipThingB"
    assert after.fingerprint != before.fingerprint
    assert Translator(after, None).translate(b"x = cudaThingA();\n").data == b"x = hipThingB();\n"


def test_corrupt_or_foreign_entries_are_rebuilt(cache_dir: Path, tmp_path: Path) -> None:
    layer = tmp_path / "base.tsv"
    layer.write_text(_tsv([("cudaThingA", "hipThingA")]), encoding="utf-8")
    fresh = load_database(base=layer)
    want = Translator(fresh, (5, 2)).translate(SAMPLE + b"cudaThingA();\n").data
    entries = _entries(cache_dir)
    assert len(entries) == 4
    blobs = {p: p.read_bytes() for p in entries}
    damages = [
        lambda blob: b"",  # empty
        lambda blob: blob[: len(blob) // 2],  # truncated
        lambda blob: b"\x00garbage" * 50,  # not marshal
        lambda blob: marshal.dumps((cache.FORMAT, "another python", "x", 1)),  # another Python / key
        lambda blob: marshal.dumps((cache.FORMAT, *tuple(marshal.loads(blob)[1:3]), ("wrong", "shape"))),
        lambda blob: marshal.dumps((cache.FORMAT, *tuple(marshal.loads(blob)[1:3]), "0" * 64)),  # a wrong hash
    ]
    for damage in damages:
        for path, blob in blobs.items():
            path.write_bytes(damage(blob))
        db = load_database(base=layer)
        assert db.raw_hip_name("cudaThingA") == "hipThingA"
        assert db.fingerprint == fresh.fingerprint
        assert Translator(db, (5, 2)).translate(SAMPLE + b"cudaThingA();\n").data == want
        for path, blob in blobs.items():
            assert path.read_bytes() == blob, "the damaged entry is rewritten"


def test_a_corrupt_regex_program_is_refused_and_rebuilt(cache_dir: Path) -> None:
    built = cache.regex("t", "k", lambda: rb"a(?P<x>b+)|c", re.S)
    (path,) = _entries(cache_dir)
    record = marshal.loads(path.read_bytes())
    pattern, flags, code, groups, groupindex, indexgroup = record[3]
    bad = [0xFFFF] * len(code)
    path.write_bytes(marshal.dumps((*record[:3], (pattern, flags, bad, groups, groupindex, indexgroup))))
    again = cache.regex("t", "k", lambda: rb"a(?P<x>b+)|c", re.S)
    for compiled in (built, again):
        m = compiled.search(b"zzabbb")
        assert m is not None and m.group("x") == b"bbb" and compiled.flags == re.compile(rb"x", re.S).flags


def test_unwritable_or_disabled_cache_still_works(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a directory")
    expected = Translator(load_database(), (5, 2)).translate(SAMPLE).data
    for setting in (str(blocker / "cache"), "off", "0"):
        monkeypatch.setenv(cache.ENV, setting)
        db = load_database()
        assert len(db) > 1000
        assert Translator(db, (5, 2)).translate(SAMPLE).data == expected
        assert not cache.store("t", "k", (1, 2))
        assert cache.load("t", "k") is None
    assert blocker.read_bytes() == b"not a directory"
    assert not list(tmp_path.glob("**/*.tmp"))


def test_cache_dir_defaults_to_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_dir() == str(tmp_path / "xdg" / "monarch-runtime" / "hipify")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.cache_dir() == str(tmp_path / "home" / ".cache" / "monarch-runtime" / "hipify")
    # nothing is written next to the data
    assert not list(GENERATED_DB.parent.glob("*.marshal"))


def test_code_fingerprint_from_the_index_equals_the_hash(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    compute = cache.code_fingerprint.__wrapped__  # (the cached function computes once per process)
    first = compute()  # hashes the files, stores the index
    assert list(cache_dir.glob("codefp-*.marshal"))
    assert compute() == first  # from the index
    monkeypatch.setenv(cache.ENV, "off")
    assert compute() == first
