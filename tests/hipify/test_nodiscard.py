"""hipError_t is [[nodiscard]] (HIP >= 5.2 headers, C++17): a call whose result the CUDA code discards gets an
explicit (void), reported as a note; nothing else about the code changes."""

from __future__ import annotations

import pytest

from tools.hipify.mapping import MappingDatabase
from tools.hipify.translate import Translator


@pytest.fixture(scope="module")
def tr(db: MappingDatabase) -> Translator:
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
def test_discarded_calls_get_void(tr: Translator, src: str, want: str) -> None:
    res = tr.translate(src.encode())
    assert res.data == want.encode()
    notes = [f for f in res.findings if f.rule == "nodiscard-void"]
    assert len(notes) == 1 and notes[0].kind == "note" and not notes[0].blocking
    assert "[[nodiscard]]" in notes[0].reason and "hipError_t" in notes[0].reason


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
def test_other_uses_are_left(tr: Translator, src: str) -> None:
    res = tr.translate(src.encode())
    assert b"(void)hip" not in res.data or src.startswith("(void)")
    assert not [f for f in res.findings if f.rule == "nodiscard-void"]


def test_only_where_the_target_has_nodiscard(db: MappingDatabase) -> None:
    assert Translator(db, (5, 2)).translate(b"cudaFree(p);").data == b"(void)hipFree(p);"  # checked in 5.2's header
    assert Translator(db, (5, 1)).translate(b"cudaFree(p);").data == b"hipFree(p);"  # not checked before


def test_semantics_unchanged(tr: Translator) -> None:
    """The only bytes added are "(void)" before calls; the rest is the plain translation."""
    src = (
        b"void f(void* p) {\n  cudaFree(p);\n  if (p) cudaFree(p); else cudaMalloc(&p, 4);\n  int e = cudaFree(p);\n}\n"
    )
    out = tr.translate(src).data
    assert out.count(b"(void)") == 3
    assert out.replace(b"(void)", b"") == src.replace(b"cuda", b"hip")
