"""The preprocessor-conditional evaluator (tools/hipify/cond.py): C's semantics, checked against the C preprocessor
itself; three-valued (a macro nothing decides keeps its branch); branches and dead lines."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from tools.hipify import cond


def _lookup(known: dict[str, cond.Value]) -> cond.Lookup:
    return known.get


def _eval(text: str, known: dict[str, cond.Value] | None = None) -> int | None:
    node = cond.parse(text)
    assert node is not None, text
    return cond.evaluate(node, _lookup(known or {}))


@pytest.mark.parametrize(
    ("text", "known", "value"),
    [
        ("1 + 2 * 3 == 7", {}, 1),
        ("(1 + 2) * 3", {}, 9),
        ("-7 / 2 == -3 && -7 % 2 == -1", {}, 1),  # C truncates towards zero
        ("0x10u > 15 && 017 == 15 && 0b101 == 5 && 1'000 == 1000", {}, 1),
        ("1 << 62 > 0 && (1 << 63) < 0", {}, 1),  # 64-bit signed
        ("A ? 10 : 20", {"A": 0}, 20),
        ("defined(A) && defined B", {"A": 1, "B": cond.UNDEF}, 0),
        ("!defined(B) || X", {"B": cond.UNDEF}, 1),  # short-circuit: X is not needed
        ("!defined(G) && X >= 3", {"G": 1}, 0),
        ("X && 0", {}, 0),
        ("X * 0", {}, 0),
        ("X || 1", {}, 1),
        ("X >= 3", {}, None),  # nothing known about X
        ("defined(X)", {}, None),
        ("X", {"X": cond.UNDEF}, 0),  # an undefined macro is 0
        ("X == 1", {"X": cond.DEFINED}, None),  # -D X=abc: defined, value not known
        ("defined X", {"X": cond.DEFINED}, 1),
        ("1 / 0", {}, None),
        ("FOO(1, 2) || 1", {}, 1),  # a function-like macro: not known, but not needed
        ("X ? 1 : 1", {}, 1),
        ("__CUDA_ARCH__ != 610", {"__CUDA_ARCH__": 1}, 1),
    ],
)
def test_values(text: str, known: dict[str, cond.Value], value: int | None) -> None:
    assert _eval(text, known) == value


def test_unreadable_conditions_are_never_decided() -> None:
    assert cond.parse("__has_include(<x.h>)") is None
    assert cond.parse("1 +") is None and cond.parse("") is None and cond.parse("1.5 > 1") is None


def _random_expression(rng: random.Random, depth: int = 0) -> str:
    if depth > 3 or rng.random() < 0.3:
        return rng.choice(["0", "1", "2", "7", "-3", "0x1f", "010", "100u", "A", "B", "defined(A)", "defined C", "C"])
    op = rng.choice(["+", "-", "*", "/", "%", "<<", ">>", "<", ">", "<=", ">=", "==", "!=", "&", "^", "|", "&&", "||"])
    left, right = _random_expression(rng, depth + 1), _random_expression(rng, depth + 1)
    if op in ("/", "%"):
        right = f"(({right}) | 1)"  # never 0
    if op in ("<<", ">>"):
        right = f"(({right}) & 7)"
    shape = rng.random()
    if shape < 0.15:
        return f"!({left})"
    if shape < 0.25:
        return f"({left}) ? ({right}) : ({left} {op} 1)"
    return f"({left} {op} {right})"


def test_agrees_with_the_c_preprocessor() -> None:
    """Random expressions over A=5, B=0 and an undefined C, evaluated here and by the host's cpp."""
    cpp = shutil.which("cpp") or shutil.which("gcc")
    if cpp is None:
        pytest.skip("no C preprocessor")
    rng = random.Random(22)
    exprs = [_random_expression(rng) for _ in range(400)]
    source = "#define A 5\n#define B 0\n" + "".join(
        f"#if {e}\nyes {i}\n#else\nno {i}\n#endif\n" for i, e in enumerate(exprs)
    )
    argv = [cpp, "-P"] if cpp.endswith("cpp") else [cpp, "-E", "-P", "-x", "c", "-"]
    out = subprocess.run(argv, input=source, capture_output=True, text=True, check=True).stdout
    theirs = {int(n): w == "yes" for w, n in (line.split() for line in out.split("\n") if line.strip())}
    known: dict[str, cond.Value] = {"A": 5, "B": 0, "C": cond.UNDEF}
    for i, e in enumerate(exprs):
        assert bool(_eval(e, known)) == theirs[i], e


SOURCE = b"""#ifndef GUARD_H
#define GUARD_H
#if defined(USE_HIP) /* a comment */
int hip;
#elif X > 2
int maybe;
#else
int cuda;
#endif
#ifdef \\
  NOT_DEFINED
int never;
#if 1
int nested;
#endif
#endif
#endif
"""


def test_directives_and_branches() -> None:
    dirs = cond.directives(SOURCE, [(SOURCE.index(b"/*"), SOURCE.index(b"*/") + 2)])
    assert dirs[2] == ("if", 3, 3, "defined(USE_HIP)") and dirs[6] == ("ifdef", 10, 11, "NOT_DEFINED")
    bs = cond.branches(dirs)
    assert [(b.line, b.first, b.last, b.text) for b in bs] == [
        (1, 2, 16, "!defined GUARD_H"),
        (3, 4, 4, "defined(USE_HIP)"),
        (5, 6, 6, "X > 2"),
        (7, 8, 8, ""),
        (10, 12, 15, "defined NOT_DEFINED"),
        (13, 14, 14, "1"),
    ]
    known: dict[str, cond.Value] = {"USE_HIP": 1, "NOT_DEFINED": cond.UNDEF}
    assert cond.branch_states(bs, _lookup(known)) == [None, None, 0, 0, 0, 0]
    assert cond.dead_lines(bs, [_lookup(known)]) == [(6, 6), (8, 8), (12, 15)]
    # another environment that compiles the #else keeps it
    other: dict[str, cond.Value] = {"USE_HIP": cond.UNDEF, "X": 0, "NOT_DEFINED": cond.UNDEF}
    assert cond.dead_lines(bs, [_lookup(known), _lookup(other)]) == [(6, 6), (12, 15)]
    assert cond.dead_lines(bs, [_lookup({})]) == []  # nothing known: nothing dead


def test_an_earlier_branch_taken_decides_the_rest() -> None:
    bs = cond.branches(cond.directives(b"#if A\na\n#elif B\nb\n#else\nc\n#endif\n"))
    states, befores = cond.walk(bs, _lookup({"A": 1}))
    assert states == [1, 0, 0] and befores == [0, 1, 1]
    assert cond.branch_states(bs, _lookup({"A": 0})) == [0, None, None]
    assert cond.branch_states(bs, _lookup({"B": 1})) == [None, None, 0]


def test_conditions_keep_the_files_offsets() -> None:
    data = b"int x;\n#if defined(A) && \\\n    __CUDA_ARCH__ >= 700 // why\n#endif\n"
    comment = data.index(b"// why")
    ((line, at, text),) = cond.conditions(data, [(comment, comment + 6)])
    assert line == 2 and len(text) == len(data[at : data.index(b"\n#endif")])
    k = text.index("__CUDA_ARCH__")
    assert data[at + k : at + k + 13] == b"__CUDA_ARCH__" and "why" not in text
