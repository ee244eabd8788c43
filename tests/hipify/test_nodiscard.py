"""hipError_t is [[nodiscard]] (HIP >= 5.2 headers, C++17): a call whose result the CUDA code discards is left as
written and reported (one note per file: the compiler's warning is HIP's check for unchecked errors); with
``void_discarded`` (``--void-discarded``) it gets an explicit (void) instead. Nothing else about the code changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.hipify.cli import main
from tools.hipify.mapping import MappingDatabase
from tools.hipify.translate import Translator


@pytest.fixture(scope="module")
def tr(db: MappingDatabase) -> Translator:
    return Translator(db, (7, 2), void_discarded=True)


@pytest.fixture(scope="module")
def tr_default(db: MappingDatabase) -> Translator:
    return Translator(db, (7, 2))


@pytest.mark.parametrize(
    ("src", "want"),
    [
        ("cudaFree(p);", "(void)hipFree(p);"),
        ("  cudaDeviceSynchronize();", "  (void)hipDeviceSynchronize();"),
        ("{ cudaFree(p); }", "{ (void)hipFree(p); }"),
        ("x = 1; cudaFree(p);", "x = 1; (void)hipFree(p);"),
        ("if (p) cudaFree(p);", "if (p) (void)hipFree(p);"),
        ("if (p) {} else cudaFree(p);", "if (p) {} else (void)hipFree(p);"),
        ("for (;;) cudaFree(p);", "for (;;) (void)hipFree(p);"),
        ("while (p) cudaFree(p);", "while (p) (void)hipFree(p);"),
        ("do cudaFree(p); while (0);", "do (void)hipFree(p); while (0);"),
        ("switch (x) { case 1: cudaFree(p); }", "switch (x) { case 1: (void)hipFree(p); }"),
        ("switch (x) { default: cudaFree(p); }", "switch (x) { default: (void)hipFree(p); }"),
        ("/* free */ cudaFree(p);", "/* free */ (void)hipFree(p);"),
        ("x = 1; // done\n  cudaFree(p);", "x = 1; // done\n  (void)hipFree(p);"),
        ("#endif\ncudaFree(p);", "#endif\n(void)hipFree(p);"),
        (
            "#define SYNC() do { cudaDeviceSynchronize(); } while (0)",
            "#define SYNC() do { (void)hipDeviceSynchronize(); } while (0)",
        ),
        ("cudaMemcpy(d, s, n,\n    cudaMemcpyDeviceToHost);", "(void)hipMemcpy(d, s, n,\n    hipMemcpyDeviceToHost);"),
        ('cudaMemcpy(d, "a)b", 3, k) /* c */ ;', '(void)hipMemcpy(d, "a)b", 3, k) /* c */ ;'),
        ("cuInit(0);", "(void)hipInit(0);"),  # the driver API returns hipError_t too
        ("cudaGetLastError();", "(void)hipGetLastError();"),  # the idiom that clears the error
    ],
)
def test_discarded_calls_get_void(tr: Translator, tr_default: Translator, src: str, want: str) -> None:
    res = tr.translate(src.encode())
    assert res.data == want.encode()
    notes = [f for f in res.findings if f.rule == "nodiscard-void"]
    assert len(notes) == 1 and notes[0].kind == "note" and not notes[0].blocking
    assert "[[nodiscard]]" in notes[0].reason and "hipError_t" in notes[0].reason
    # by default: the same call, found the same way, left as written and reported
    plain = tr_default.translate(src.encode())
    assert plain.data == want.replace("(void)", "").encode()
    notes = [f for f in plain.findings if f.rule.startswith("nodiscard")]
    assert [(f.rule, f.kind, f.blocking) for f in notes] == [("nodiscard-discarded", "note", False)]
    assert "left as written" in notes[0].reason and "--void-discarded" in notes[0].suggestion


@pytest.mark.parametrize(
    "src",
    [
        "cudaError_t e = cudaFree(p);",
        "e = cudaFree(p);",
        "return cudaFree(p);",
        "CHECK(cudaFree(p));",
        "if (cudaFree(p) != cudaSuccess) {}",
        "(void)cudaFree(p);",
        "static_cast<void>(cudaFree(p));",
        "x ? cudaFree(a) : cudaFree(b);",
        "auto f = cudaFree;",  # not a call
        "cudaFree(p)",  # no ';': a macro body or an expression
        "x.cudaFree(p);",  # a member
        "#define FREE(p) cudaFree(p);",  # a macro's body: its context is where it is used
        "::cudaFree(p);",  # (void) cannot go between :: and the name
        "const char* s = cudaGetErrorString(e);",
        "cudaGetErrorString(e);",  # exempt: returns const char*, not hipError_t (data/targets.tsv)
        "cublasCreate(&h);",  # a library status, not hipError_t
        "cudaLaunchKernel(k, g, b, a, 0, s) == cudaSuccess;",
    ],
)
def test_other_uses_are_left(tr: Translator, tr_default: Translator, src: str) -> None:
    res = tr.translate(src.encode())
    assert b"(void)hip" not in res.data or src.startswith("(void)")
    assert not [f for f in res.findings if f.rule == "nodiscard-void"]
    assert not [f for f in tr_default.translate(src.encode()).findings if f.rule.startswith("nodiscard")]


def test_only_where_the_target_has_nodiscard(db: MappingDatabase) -> None:
    tr52 = Translator(db, (5, 2), void_discarded=True)
    assert tr52.translate(b"cudaFree(p);").data == b"(void)hipFree(p);"  # checked in 5.2's header
    assert Translator(db, (5, 1), void_discarded=True).translate(b"cudaFree(p);").data == b"hipFree(p);"  # not before
    assert not Translator(db, (5, 1)).translate(b"cudaFree(p);").findings


def test_one_note_per_file_lists_the_lines(tr_default: Translator) -> None:
    res = tr_default.translate(b"cudaFree(p);\nint e = cudaFree(p);\ncudaDeviceSynchronize();\n")
    notes = [f for f in res.findings if f.rule == "nodiscard-discarded"]
    assert len(notes) == 1 and notes[0].offset == 0
    assert "2 calls discard their hipError_t result (cudaDeviceSynchronize, cudaFree; lines 1, 3)" in notes[0].reason


def test_semantics_unchanged(tr: Translator) -> None:
    """The only bytes added are "(void)" before calls; the rest is the plain translation."""
    src = (
        b"void f(void* p) {\n  cudaFree(p);\n  if (p) cudaFree(p); else cudaMalloc(&p, 4);\n  int e = cudaFree(p);\n}\n"
    )
    out = tr.translate(src).data
    assert out.count(b"(void)") == 3
    assert out.replace(b"(void)", b"") == src.replace(b"cuda", b"hip")


@pytest.mark.parametrize("extra", [["--void-discarded"], ["--void-disc"]])  # the fast parse, and argparse's
def test_the_command_line_option(tmp_path: Path, extra: list[str]) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "k.cu").write_text("void f(void* p) { cudaFree(p); }\n", encoding="utf-8")
    plain = main([str(src), "-o", str(tmp_path / "plain"), "--hip-version", "6.4", "-q"])
    voided = main([str(src), "-o", str(tmp_path / "void"), "--hip-version", "6.4", "-q", *extra])
    assert plain == voided == 0
    assert b"{ hipFree(p); }" in (tmp_path / "plain" / "k.hip").read_bytes()
    assert b"{ (void)hipFree(p); }" in (tmp_path / "void" / "k.hip").read_bytes()
