"""Preprocessor conditionals: which branches of a file a build compiles, as far as the build's defines decide it.

``directives`` lists a file's ``#if``/``#ifdef``/``#ifndef``/``#elif``/``#else``/``#endif`` and ``#define``/``#undef``
lines (outside comments and literals); ``parse`` reads a condition into a small tree (``defined``, integer
literals, the C operators); ``evaluate`` computes it three-valued: an integer, or ``None`` when it depends on a
macro nothing given decides. ``dead_lines`` gives the line ranges a compile does not see in any of the
environments it is asked about (the HIP-Clang device and host passes, a host C/C++ compiler: see
tools/hipify/scope.py). A branch is dead only when its condition is decided false; anything unknown keeps it.

Values follow the C preprocessor: a macro that is known to be undefined is 0, ``defined(X)`` is 0 or 1, arithmetic
is on 64-bit integers (``u``-suffixed literals as unsigned), and ``&&``, ``||``, ``?:`` short-circuit, so
``!defined(A) && X`` is decided by ``A`` alone.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

#: a macro known to be undefined
UNDEF = "undef"
#: a macro known to be defined, value unknown (``-D X=abc``)
DEFINED = "defined"

Value = int | str  # an integer, UNDEF or DEFINED
Lookup = Callable[[str], "Value | None"]  # None: nothing known about the name

# (kind, first line, last line, argument): kind is if/ifdef/ifndef/elif/else/endif/define/undef (elifdef and
# elifndef, C23/C++23, are read as elif with defined()/!defined()); the argument is the condition (if/elif, as
# written, comments blanked, continuations joined) or the macro name (ifdef/ifndef/define/undef)
Directive = tuple[str, int, int, str]

_NAME = re.compile(r"[A-Za-z_]\w*")


_DIRECTIVE = rb"#[ \t]*(if|ifdef|ifndef|elif|elifdef|elifndef|else|endif|define|undef)\b[ \t]*"
_NAME_BYTES = rb"[A-Za-z_]\w*"

#: (offset of the '#', keyword, the name after it or None) of directives, as the translator's scan finds them
Found = Sequence[tuple[int, bytes, "bytes | None"]]
_Scanned = tuple[str, int, int, int, str]  # (kind, first line, last line, offset of the argument, the argument)


def _one(  # noqa: PLR0917
    data: bytes, spans: Sequence[tuple[int, int]], starts: list[int], kind: str, line: int, arg: int
) -> _Scanned:
    """A directive whose keyword is ``kind`` and whose argument starts at ``arg``: the argument keeps its length
    (comments and literals blanked, a continuation's backslash and line end as spaces), so offsets in it are the
    file's; for a macro, its name."""
    if kind in ("define", "undef"):  # (its first line is all that is needed)
        m = re.compile(_NAME_BYTES).match(data, arg)
        return (kind, line, line, arg, m.group().decode("latin-1") if m else "")
    end = logical_end(data, arg)
    last_line = line + data.count(b"\n", arg, end)
    raw = data[arg:end]
    if b"/" in raw or b'"' in raw or b"'" in raw:
        raw = _blank(data, arg, end, spans, max(bisect_right(starts, arg) - 1, 0))
    if b"\\" in raw:
        raw = raw.replace(b"\\\r\n", b"   ").replace(b"\\\n", b"  ")
    return (kind, line, last_line, arg, raw.decode("latin-1"))


def _scan(data: bytes, spans: Sequence[tuple[int, int]], known: Found | None = None) -> list[_Scanned]:
    """The directives of ``data``: found here, or from ``known`` (the translator's scan: already at line starts and
    outside comments; a macro's name is all that is needed of it, and the keyword of #else/#endif)."""
    if b"#" not in data:
        return []
    starts = [a for a, _b in spans]
    out: list[_Scanned] = []
    line = 1
    last = 0
    count = data.count
    if known is not None:
        directive = re.compile(_DIRECTIVE).match
        for at, keyword, name in known:
            line += count(b"\n", last, at)
            last = at
            kind = keyword.decode()
            if name is not None and kind in ("define", "undef", "ifdef", "ifndef"):
                out.append((kind, line, line, at, name.decode("latin-1")))
            elif kind in ("else", "endif"):
                out.append((kind, line, line, at, ""))
            else:
                m = directive(data, at)
                if m is not None:
                    out.append(_one(data, spans, starts, kind, line, m.end()))
        return out
    skip_to = 0  # the end of the last directive (its continuation lines hold no directive)
    for m in re.finditer(_DIRECTIVE, data):  # (a literal first: re finds the candidates)
        at = m.start()
        if at < skip_to:
            continue
        line_start = data.rfind(b"\n", 0, at) + 1
        if line_start != at and data[line_start:at].strip(b" \t"):
            continue  # not at the start of a line
        k = bisect_right(starts, at) - 1
        if k >= 0 and at < spans[k][1]:
            continue  # inside a comment or literal
        line += count(b"\n", last, at)
        last = at
        one = _one(data, spans, starts, m.group(1).decode(), line, m.end())
        skip_to = logical_end(data, m.end())
        out.append(one)
    return out


def directives(data: bytes, spans: Sequence[tuple[int, int]] = (), known: Found | None = None) -> list[Directive]:
    """The conditional and macro directives of ``data``; ``spans`` are its comments and literals (sorted), whose
    text is blanked in a condition and inside which no directive starts; ``known``: what the translator found."""
    out: list[Directive] = []
    for written, line, last_line, _at, raw in _scan(data, spans, known):
        kind, text = written, raw if written in ("define", "undef") else " ".join(raw.split())
        if kind in ("ifdef", "ifndef", "elifdef", "elifndef"):
            name = _NAME.match(text)
            text = name.group() if name else ""
            if kind in ("elifdef", "elifndef"):
                kind, text = "elif", ("defined " if written == "elifdef" else "!defined ") + text
        out.append((kind, line, last_line, text))
    return out


def conditions(data: bytes, spans: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int, str]]:
    """The ``#if``/``#elif`` conditions: (first line, offset of the condition in ``data``, the condition with the
    file's offsets: ``text[i]`` is ``data[offset + i]``, comments blanked)."""
    return [(line, at, raw) for kind, line, _last, at, raw in _scan(data, spans) if kind in ("if", "elif")]


def logical_end(data: bytes, i: int) -> int:
    """The end (the newline's offset, or len) of the line at ``i``, continued lines (backslash-newline, also
    before CRLF) included."""
    n = len(data)
    while True:
        end = data.find(b"\n", i)
        if end < 0:
            return n
        j = end - 1 if end > i and data[end - 1] == 0x0D else end
        if j <= i or data[j - 1] != 0x5C:  # no backslash before the line end
            return end
        i = end + 1


def _blank(data: bytes, lo: int, hi: int, spans: Sequence[tuple[int, int]], k: int) -> bytes:
    """``data[lo:hi]`` with the comment/literal spans in it replaced by spaces."""
    out = bytearray(data[lo:hi])
    while k < len(spans) and spans[k][0] < hi:
        a, b = spans[k]
        a, b = max(a, lo), min(b, hi)
        if a < b:
            out[a - lo : b - lo] = b" " * (b - a)
        k += 1
    return bytes(out)


# -- the expression --------------------------------------------------------------------------------------------
# A node: (op, start, end, *children); op is "num" (value), "id" (name), "defined" (name), "call" (name: a
# function-like macro or __has_include & co, unknown), "!", "~", "neg", "pos", a binary operator, or "?:".
Node = tuple[object, ...]

_TOKEN = re.compile(
    r"\s*(?:(?P<num>(?:0[xX][0-9a-fA-F']+|0[bB][01']+|\d[\d']*)[uUlL]*)(?![\w.])"
    r"|(?P<chr>'(?:\\.|[^'\\])+')"
    r"|(?P<id>[A-Za-z_]\w*)"
    r"|(?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&^|!~?:(),]))"
)
_BINARY = {
    "*": 10,
    "/": 10,
    "%": 10,
    "+": 9,
    "-": 9,
    "<<": 8,
    ">>": 8,
    "<": 7,
    ">": 7,
    "<=": 7,
    ">=": 7,
    "==": 6,
    "!=": 6,
    "&": 5,
    "^": 4,
    "|": 3,
    "&&": 2,
    "||": 1,
}
COMPARISONS = frozenset({"<", ">", "<=", ">=", "==", "!="})


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens: list[tuple[str, str, int, int]] = []  # (type, text, start, end)
        pos = 0
        n = len(text)
        while pos < n:
            m = _TOKEN.match(text, pos)
            if m is None:
                if text[pos:].strip():
                    raise ValueError(f"cannot read {text[pos:]!r}")
                break
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind), m.start(kind), m.end()))
            pos = m.end()
        self.i = 0

    def peek(self) -> tuple[str, str, int, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str, int, int]:
        tok = self.peek()
        if tok is None:
            raise ValueError("unexpected end")
        self.i += 1
        return tok

    def expect(self, op: str) -> tuple[str, str, int, int]:
        tok = self.take()
        if tok[1] != op:
            raise ValueError(f"expected {op!r}, got {tok[1]!r}")
        return tok

    def expression(self, min_prec: int = 0) -> Node:
        left = self.unary()
        while True:
            tok = self.peek()
            if tok is None or tok[0] != "op":
                break
            if tok[1] == "?" and min_prec == 0:
                self.take()
                then = self.expression()
                self.expect(":")
                other = self.expression()
                left = ("?:", left[1], other[2], left, then, other)
                continue
            prec = _BINARY.get(tok[1])
            if prec is None or prec < min_prec or prec == 0:
                break
            self.take()
            right = self.expression(prec + 1)
            left = (tok[1], left[1], right[2], left, right)
        return left

    def unary(self) -> Node:
        tok = self.take()
        kind, text, start, end = tok
        if kind == "op" and text in ("!", "~", "-", "+"):
            inner = self.unary()
            op = {"-": "neg", "+": "pos"}.get(text, text)
            return (op, start, inner[2], inner)
        if kind == "op" and text == "(":
            inner = self.expression()
            close = self.expect(")")
            return ("()", start, close[3], inner)
        if kind == "num":
            return ("num", start, end, _integer(text), "u" in text.lower())
        if kind == "chr":
            return ("call", start, end, text)  # a character constant: not evaluated
        if kind == "id":
            if text == "defined":
                nxt = self.take()
                if nxt[1] == "(":
                    name = self.take()
                    close = self.expect(")")
                    return ("defined", start, close[3], name[1])
                return ("defined", start, nxt[3], nxt[1])
            after = self.peek()
            if after is not None and after[1] == "(":  # a function-like macro, __has_include(...), ...: unknown
                depth = 0
                while True:
                    t = self.take()
                    if t[1] == "(":
                        depth += 1
                    elif t[1] == ")":
                        depth -= 1
                        if depth == 0:
                            return ("call", start, t[3], text)
            return ("id", start, end, text)
        raise ValueError(f"unexpected {text!r}")


def _integer(text: str) -> int | None:
    body = text.rstrip("uUlL").replace("'", "")
    try:
        if body[:2] in ("0x", "0X"):
            return int(body[2:], 16)
        if body[:2] in ("0b", "0B"):
            return int(body[2:], 2)
        if len(body) > 1 and body[0] == "0":
            return int(body, 8)
        return int(body)
    except ValueError:
        return None


_SIMPLE = re.compile(r"\s*(!?)\s*defined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))\s*\Z")


@lru_cache(maxsize=4096)
def parse(text: str) -> Node | None:
    """The condition ``text`` as a tree, or None when it is not a plain integer expression (then it is never
    decided)."""
    simple = _SIMPLE.match(text)  # (#ifdef, #ifndef, include guards: most conditions)
    if simple is not None:
        name = simple.group(2) or simple.group(3)
        start = text.index("defined")
        node: Node = ("defined", start, len(text.rstrip()), name)
        return ("!", text.index("!"), node[2], node) if simple.group(1) else node
    try:
        p = _Parser(text)
        if not p.tokens:
            return None
        node = p.expression()
        return node if p.peek() is None else None
    except (ValueError, IndexError):
        return None


def names(node: Node) -> list[str]:
    """The macro names a condition reads (for ``defined`` and as values)."""
    op = node[0]
    if op in ("id", "defined"):
        return [str(node[3])]
    if op in ("num", "call"):
        return []
    out: list[str] = []
    for child in node[3:]:
        if isinstance(child, tuple):
            out += names(child)
    return out


_MASK = (1 << 64) - 1


def _signed(v: int) -> int:
    v &= _MASK
    return v - (1 << 64) if v >> 63 else v


def evaluate(node: Node, lookup: Lookup, forced: Mapping[tuple[object, object], int] | None = None) -> int | None:
    """The value of a condition, or None when it is not decided by what ``lookup`` knows (``lookup(name)``: an
    integer, UNDEF, DEFINED, or None for nothing known). ``forced``: sub-expressions, by their (start, end) in the
    condition's text, taken to have the given value (to ask whether one decides the whole)."""
    if forced:
        hit = forced.get((node[1], node[2]))
        if hit is not None:
            return hit
    op = node[0]
    if op == "num":
        v = node[3]
        return v if isinstance(v, int) else None
    if op == "id":
        known = lookup(str(node[3]))
        if known is None or known == DEFINED:
            return None
        return 0 if known == UNDEF else int(known)
    if op == "defined":
        known = lookup(str(node[3]))
        if known is None:
            return None
        return 0 if known == UNDEF else 1
    if op == "call":
        return None
    kids = [c for c in node[3:] if isinstance(c, tuple)]
    if op == "()":
        return evaluate(kids[0], lookup, forced)
    if op in ("!", "~", "neg", "pos"):
        v = evaluate(kids[0], lookup, forced)
        if v is None:
            return None
        if _unsigned(kids[0]) and op in ("~", "neg"):
            return (~v if op == "~" else -v) & _MASK
        return {"!": int(not v), "~": _signed(~v), "neg": _signed(-v), "pos": v}[str(op)]
    if op == "?:":
        c = evaluate(kids[0], lookup, forced)
        a = evaluate(kids[1], lookup, forced)
        b = evaluate(kids[2], lookup, forced)
        if c is None:
            return a if a is not None and a == b else None
        return a if c else b
    a = evaluate(kids[0], lookup, forced)
    if op == "&&":
        if a == 0:
            return 0
        b = evaluate(kids[1], lookup, forced)
        if b == 0:
            return 0
        return None if a is None or b is None else 1
    if op == "||":
        if a is not None and a != 0:
            return 1
        b = evaluate(kids[1], lookup, forced)
        if b is not None and b != 0:
            return 1
        return None if a is None or b is None else 0
    b = evaluate(kids[1], lookup, forced)
    if a is None or b is None:
        if op == "*" and (a == 0 or b == 0):
            return 0
        return None
    if op in ("<<", ">>"):
        unsigned = _unsigned(kids[0])
    else:
        unsigned = _unsigned(kids[0]) or _unsigned(kids[1])
    if unsigned:  # C's usual arithmetic conversions: both operands become unsigned (uintmax_t)
        return _unsigned_binary(str(op), a & _MASK, b & _MASK)
    return _binary(str(op), a, b)


def _unsigned(node: Node) -> bool:
    """Whether a sub-expression has an unsigned type (a ``u`` literal, or arithmetic with one)."""
    op = node[0]
    if op == "num":
        return len(node) > 4 and bool(node[4])
    if op in ("id", "defined", "call", "!", "&&", "||") or op in COMPARISONS:
        return False
    kids = [c for c in node[3:] if isinstance(c, tuple)]
    if op == "?:":
        return _unsigned(kids[1]) or _unsigned(kids[2])
    if op in ("<<", ">>", "()", "~", "neg", "pos"):
        return _unsigned(kids[0])
    return any(_unsigned(k) for k in kids)


def _unsigned_binary(op: str, a: int, b: int) -> int | None:
    if op in ("/", "%"):
        return None if b == 0 else (a // b if op == "/" else a % b)
    if op in ("<<", ">>"):
        return None if not 0 <= b < 64 else ((a << b) & _MASK if op == "<<" else a >> b)
    if op in COMPARISONS:
        return int({"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b, "==": a == b, "!=": a != b}[op])
    return {"*": a * b, "+": a + b, "-": a - b, "&": a & b, "^": a ^ b, "|": a | b}[op] & _MASK


def _binary(op: str, a: int, b: int) -> int | None:
    if op in ("/", "%"):
        if b == 0:
            return None  # an error for the preprocessor: not decided here
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates towards zero
        return _signed(q if op == "/" else a - q * b)
    if op in ("<<", ">>"):
        if not 0 <= b < 64:
            return None
        return _signed(a << b) if op == "<<" else a >> b
    result = {
        "*": lambda: a * b,
        "+": lambda: a + b,
        "-": lambda: a - b,
        "<": lambda: int(a < b),
        ">": lambda: int(a > b),
        "<=": lambda: int(a <= b),
        ">=": lambda: int(a >= b),
        "==": lambda: int(a == b),
        "!=": lambda: int(a != b),
        "&": lambda: a & b,
        "^": lambda: a ^ b,
        "|": lambda: a | b,
    }[op]()
    return _signed(result)


# -- branches ----------------------------------------------------------------------------------------------------
class Branch:
    """One branch of a conditional group: ``#if``/``#ifdef``/``#ifndef``, an ``#elif`` or the ``#else``; its body
    runs from the line after its directive (``first``) to the line before the group's next directive (``last``)."""

    __slots__ = ("cond", "first", "group", "last", "line", "parent", "text")

    def __init__(  # noqa: PLR0917
        self, group: int, parent: int, line: int, first: int, cond: Node | None, text: str
    ) -> None:
        self.group = group  # groups are numbered in file order
        self.parent = parent  # the branch this group sits in (-1: the top level)
        self.line = line  # the directive's line
        self.first = first
        self.last = 1 << 60  # (an unterminated group runs to the end)
        self.cond = cond  # None: the #else, or a condition that cannot be read (kept: never decided)
        self.text = text  # the condition as written ("" for #else; "defined X"/"!defined X" for #ifdef/#ifndef)


_ELSE = ("else",)


def branches(dirs: Sequence[Directive]) -> list[Branch]:
    """The branches of a file's conditional groups, in order (a group's branches are consecutive)."""
    out: list[Branch] = []
    stack: list[tuple[int, int]] = []  # (group, index of its current branch)
    groups = 0
    for kind, line, last_line, arg in dirs:
        if kind in ("define", "undef"):
            continue
        if kind in ("if", "ifdef", "ifndef"):
            text = arg if kind == "if" else f"{'!' if kind == 'ifndef' else ''}defined {arg}"
            parent = stack[-1][1] if stack else -1
            out.append(Branch(groups, parent, line, last_line + 1, parse(text) if arg else None, text))
            stack.append((groups, len(out) - 1))
            groups += 1
        elif kind in ("elif", "else"):
            if not stack:
                continue
            group, current = stack[-1]
            out[current].last = line - 1
            parent = out[current].parent
            cond = parse(arg) if kind == "elif" and arg else None
            out.append(Branch(group, parent, line, last_line + 1, cond, arg if kind == "elif" else ""))
            if kind == "else":
                out[-1].cond = None
            stack[-1] = (group, len(out) - 1)
        elif kind == "endif" and stack:
            _group, current = stack.pop()
            out[current].last = line - 1
    return out


def branch_states(bs: Sequence[Branch], lookup: Lookup) -> list[int | None]:
    """Per branch, in one environment: 1 compiled, 0 not compiled, None not decided."""
    return walk(bs, lookup)[0]


def walk(bs: Sequence[Branch], lookup: Lookup) -> tuple[list[int | None], list[int | None]]:
    """Per branch, in one environment: its state (see ``branch_states``) and whether an earlier branch of its group
    was taken (1, 0, None)."""
    states: list[int | None] = []
    befores: list[int | None] = []
    taken: dict[int, int | None] = {}  # group -> whether an earlier branch was taken (None: not decided)
    for i, b in enumerate(bs):
        first_of_group = i == 0 or bs[i - 1].group != b.group
        before = 0 if first_of_group else taken[b.group]
        if b.cond is None:
            own: int | None = 1 if b.text == "" else None
        else:
            v = evaluate(b.cond, lookup)
            own = None if v is None else int(v != 0)
        if before == 1:
            state: int | None = 0
        elif before == 0:
            state = own
        else:
            state = 0 if own == 0 else None
        parent = states[b.parent] if b.parent >= 0 else 1
        if parent == 0:
            state = 0
        elif parent is None and state == 1:
            state = None
        states.append(state)
        befores.append(before)
        if own == 1:
            taken[b.group] = 1
        elif own == 0:
            taken[b.group] = before
        else:
            taken[b.group] = 1 if before == 1 else None
    return states, befores


def dead_lines(bs: Sequence[Branch], lookups: Sequence[Lookup]) -> list[tuple[int, int]]:
    """The line ranges (first, last; inclusive) of the branches no environment compiles (none when there is no
    environment)."""
    if not bs or not lookups:
        return []
    dead = [True] * len(bs)
    for lookup in lookups:
        for i, state in enumerate(branch_states(bs, lookup)):
            if state != 0:
                dead[i] = False
    out: list[tuple[int, int]] = []
    for i, b in enumerate(bs):
        if dead[i] and b.first <= b.last and not (out and out[-1][0] <= b.first and b.last <= out[-1][1]):
            out.append((b.first, b.last))
    return out


def in_ranges(line: int, ranges: Sequence[tuple[int, int]], firsts: Sequence[int] | None = None) -> bool:
    """Whether ``line`` lies in one of the sorted, disjoint ``ranges``."""
    starts = firsts if firsts is not None else [a for a, _b in ranges]
    k = bisect_right(starts, line) - 1
    return k >= 0 and line <= ranges[k][1]
