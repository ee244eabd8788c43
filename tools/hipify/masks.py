"""The lane mask of a warp ``*_sync`` call: what it is, so the translation can widen it or say why it cannot.

CUDA's masks are 32-bit (a warp has 32 lanes). HIP >= 6.2 takes 64-bit masks only (its ``*_sync`` builtins
``static_assert`` that the mask is an 8-byte integer) and checks that every lane named by the mask calls the
builtin with the same mask; a CDNA wavefront has 64 lanes (RDNA: 32, where HIP ignores the mask's upper half).
So a mask that names the whole 32-lane warp means "the whole wavefront" and becomes the full 64-bit mask; a
mask naming part of the warp, or one computed at run time, cannot be widened by a rule and is reported.

``classify(data, call_start, mask)`` looks at the mask's text (bytes of one file) and, for a name, at its
``#define`` or its declaration before the call in the same file. Only the file itself is read: a mask macro
defined in another header is "computed at run time" here (see docs/hipify.md).
"""

from __future__ import annotations

import re

# The CUDA builtins whose first parameter is the lane mask (CUDA C++ Programming Guide, warp functions).
MASKED = frozenset(
    {
        b"__shfl_sync",
        b"__shfl_up_sync",
        b"__shfl_down_sync",
        b"__shfl_xor_sync",
        b"__ballot_sync",
        b"__any_sync",
        b"__all_sync",
        b"__match_any_sync",
        b"__match_all_sync",
        b"__syncwarp",
        b"__reduce_add_sync",
        b"__reduce_min_sync",
        b"__reduce_max_sync",
        b"__reduce_and_sync",
        b"__reduce_or_sync",
        b"__reduce_xor_sync",
    }
)
#: every name HIP declares only with the warp-sync macro on HIP 6.2-6.x (amd_warp_sync_functions.h, and
#: __activemask in amd_warp_functions.h)
SYNC_NAMES = MASKED | {b"__activemask"}
# HIP builtins that return the 64-bit lane masks (amd_warp_functions.h, amd_warp_sync_functions.h)
_MASK64_CALLS = frozenset({b"__ballot", b"__ballot64", b"__ballot_sync", b"__match_any_sync", b"__match_all_sync"})

# classes
FULL32 = "full32"  # names all 32 lanes of a CUDA warp, in a 32-bit value (or 0xffffffff in a 64-bit one)
FULL64 = "full64"  # all ones in 64 bits: already the full wavefront
ACTIVE = "active"  # __activemask() (64-bit in HIP)
ACTIVE32 = "active32"  # __activemask() kept in a 32-bit variable
WIDE = "wide"  # a 64-bit value computed at run time (HIP's own mask type): compiles, its lanes are the code's
PARTIAL = "partial"  # a constant naming only some lanes
RUNTIME = "runtime"  # computed at run time, not visibly 64-bit

# integer types: (width, signed) on LP64 Linux
_TYPES: dict[bytes, tuple[int, bool]] = {}
for _name, _spec in (
    ((b"int", b"signed", b"signed int", b"int32_t", b"std::int32_t", b"short", b"short int"), (32, True)),
    (
        (b"unsigned", b"unsigned int", b"uint", b"uint32_t", b"std::uint32_t", b"__uint32_t", b"unsigned short"),
        (32, False),
    ),
    ((b"long", b"long int", b"long long", b"long long int", b"signed long", b"signed long long"), (64, True)),
    ((b"int64_t", b"std::int64_t", b"__int64_t", b"ptrdiff_t", b"intptr_t"), (64, True)),
    (
        (
            b"unsigned long",
            b"unsigned long int",
            b"unsigned long long",
            b"unsigned long long int",
            b"ulong",
            b"ulonglong",
            b"uint64_t",
            b"std::uint64_t",
            b"__uint64_t",
            b"size_t",
            b"std::size_t",
            b"uintptr_t",
        ),
        (64, False),
    ),
):
    for _n in _name:
        _TYPES[_n] = _spec
_QUALIFIERS = {
    b"const",
    b"constexpr",
    b"static",
    b"volatile",
    b"inline",
    b"__device__",
    b"__host__",
    b"__constant__",
    b"__shared__",
    b"__forceinline__",
    b"register",
}
_IDENT = re.compile(rb"(?:::\s*)?[A-Za-z_]\w*\Z")
_LITERAL = re.compile(rb"(0[xX][0-9a-fA-F']+|0[bB][01']+|[0-9][0-9']*)([uUlL]*)")
_CAST_C = re.compile(rb"\(\s*((?:(?:std::)?[A-Za-z_]\w*\s*)+)\)")
_CAST_CPP = re.compile(rb"static_cast\s*<\s*((?:(?:std::)?[A-Za-z_]\w*\s*)+)>\s*\(")
_CALL = re.compile(rb"([A-Za-z_]\w*)\s*\(")
_WS = re.compile(rb"\s+")
_KEYWORDS_BEFORE_PAREN = (b"for", b"if", b"while", b"switch")
# words before a name that do not make it a declaration ("return mask;", "case X:", ...)
_NOT_TYPES = frozenset(
    {b"return", b"case", b"else", b"goto", b"throw", b"sizeof", b"new", b"delete", b"co_return", b"co_yield", b"do"}
)

Value = tuple[int, int, bool]  # (value as unsigned bits, width, signed)


def _norm_type(words: bytes) -> bytes:
    return _WS.sub(b" ", words.strip())


def int_type(words: bytes) -> tuple[int, bool] | None:
    """(width, signed) of the integer type spelled ``words`` (qualifiers allowed); None when unknown."""
    kept = [w for w in _norm_type(words).split(b" ") if w and w not in _QUALIFIERS]
    return _TYPES.get(b" ".join(kept))


def _convert(value: Value, width: int, signed: bool) -> Value:
    """C's conversion of ``value`` to an integer type of ``width`` bits (a signed value is sign-extended)."""
    v, w, s = value
    if width > w and s and (v >> (w - 1)) & 1:
        v |= ((1 << width) - 1) ^ ((1 << w) - 1)
    return v & ((1 << width) - 1), width, signed


class _Expr:
    """A tiny evaluator of integer constant expressions: literals, ( ), unary ~ - +, binary * + - << >> & ^ |,
    with C's literal types (LP64) and usual arithmetic conversions; None when the text is not such a constant."""

    def __init__(self, text: bytes) -> None:
        self.toks = re.findall(rb"0[xX][0-9a-fA-F']+[uUlL]*|0[bB][01']+[uUlL]*|\d[\d']*[uUlL]*|<<|>>|\S", text)
        self.i = 0

    def parse(self) -> Value | None:
        try:
            value = self._level(0)
        except (ValueError, IndexError):
            return None
        return value if self.i == len(self.toks) else None

    def _peek(self) -> bytes:
        return self.toks[self.i] if self.i < len(self.toks) else b""

    _LEVELS = ((b"|",), (b"^",), (b"&",), (b"<<", b">>"), (b"+", b"-"), (b"*",))

    def _level(self, k: int) -> Value:
        if k == len(self._LEVELS):
            return self._unary()
        left = self._level(k + 1)
        while self._peek() in self._LEVELS[k]:
            op = self.toks[self.i]
            self.i += 1
            right = self._level(k + 1)
            if op in (b"<<", b">>"):
                width, signed = left[1], left[2]  # a shift has the left operand's type
            else:
                width = max(left[1], right[1])
                signed = left[2] and right[2] if left[1] == right[1] else (left if left[1] > right[1] else right)[2]
            a = _convert(left, width, signed)[0]
            b = right[0] if op in (b"<<", b">>") else _convert(right, width, signed)[0]
            if op == b"|":
                v = a | b
            elif op == b"^":
                v = a ^ b
            elif op == b"&":
                v = a & b
            elif op == b"<<":
                v = a << b
            elif op == b">>":
                v = a >> b
            elif op == b"+":
                v = a + b
            elif op == b"-":
                v = a - b
            else:
                v = a * b
            left = (v & ((1 << width) - 1), width, signed)
        return left

    def _unary(self) -> Value:
        tok = self._peek()
        if tok in (b"~", b"-", b"+"):
            self.i += 1
            v, width, signed = self._unary()
            mask = (1 << width) - 1
            if tok == b"~":
                return (~v) & mask, width, signed
            return ((-v) & mask if tok == b"-" else v), width, signed
        if tok == b"(":
            self.i += 1
            inner = self._level(0)
            if self._peek() != b")":
                raise ValueError("unbalanced")
            self.i += 1
            return inner
        m = _LITERAL.fullmatch(tok)
        if m is None:
            raise ValueError("not a literal")
        self.i += 1
        digits = m.group(1).replace(b"'", b"")
        suffix = m.group(2).lower()
        base = 16 if digits[:2] in (b"0x", b"0X") else 2 if digits[:2] in (b"0b", b"0B") else 10
        v = int(digits[2:] if base != 10 else digits, base)
        unsigned = b"u" in suffix
        # C's literal types on LP64 Linux: the first of int, unsigned int (not for decimals), long, unsigned long
        # that holds the value, starting at the suffix's type
        if b"l" not in suffix and v <= 0x7FFFFFFF:
            return v, 32, not unsigned
        if b"l" not in suffix and v <= 0xFFFFFFFF and (unsigned or base != 10):
            return v, 32, False
        return v & 0xFFFFFFFFFFFFFFFF, 64, not unsigned and v <= 0x7FFFFFFFFFFFFFFF


def _strip_parens(text: bytes) -> bytes:
    text = text.strip()
    while text.startswith(b"(") and text.endswith(b")") and _balanced_inside(text[1:-1]):
        text = text[1:-1].strip()
    return text


def _balanced_inside(text: bytes) -> bool:
    depth = 0
    for c in text:
        if c == 0x28:
            depth += 1
        elif c == 0x29:
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


def _of_value(value: Value) -> str:
    v, width, _signed = value
    if width == 64 and v == 0xFFFFFFFFFFFFFFFF:
        return FULL64
    if v == 0xFFFFFFFF:
        return FULL32
    return PARTIAL


class Mask:
    """What a mask argument is: ``cls`` (one of the classes above), ``how`` (a short explanation for findings)."""

    __slots__ = ("cls", "how")

    def __init__(self, cls: str, how: str) -> None:
        self.cls = cls
        self.how = how

    def __repr__(self) -> str:
        return f"Mask({self.cls}, {self.how!r})"


def _casts(text: bytes) -> tuple[bytes, list[tuple[int, bool]]]:
    """``text`` without its leading casts, and the casts' types, outermost first."""
    casts: list[tuple[int, bool]] = []
    while True:
        m = _CAST_C.match(text)
        if m is not None and m.end() < len(text):
            spec = int_type(m.group(1))
            if spec is not None:
                casts.append(spec)
                text = _strip_parens(text[m.end() :])
                continue
        m = _CAST_CPP.match(text) or _CALL.match(text)  # static_cast<T>(x), and functional casts T(x)
        if m is not None and text.endswith(b")") and _balanced_inside(text[m.end() : -1]):
            spec = int_type(m.group(1))
            if spec is not None:
                casts.append(spec)
                text = _strip_parens(text[m.end() - 1 :])
                continue
        return text, casts


def constant(text: bytes) -> Value | None:
    """The value of an integer constant expression (casts included), or None."""
    inner, casts = _casts(_strip_parens(text))
    value = _Expr(inner).parse()
    if value is None:
        return None
    for width, signed in reversed(casts):
        value = _convert(value, width, signed)
    return value


def classify(data: bytes, call_start: int, mask: bytes, depth: int = 0) -> Mask:
    """The class of ``mask`` (the argument's text) of a call at ``call_start`` of the file ``data``."""
    text = _strip_parens(mask)
    shown = _WS.sub(b" ", text).decode("latin-1")
    value = constant(text)
    if value is not None:
        cls = _of_value(value)
        return Mask(cls, f"{shown} = {value[0]:#x}" if cls == PARTIAL else shown)
    inner, casts = _casts(text)
    width = casts[0][0] if casts else None
    call = _CALL.match(inner)
    if call is not None and inner.endswith(b")") and _balanced_inside(inner[call.end() : -1]):
        name = call.group(1)
        if name == b"__activemask":
            return Mask(ACTIVE32 if width == 32 else ACTIVE, shown)
        if name in _MASK64_CALLS and width != 32:
            return Mask(WIDE, shown)
        return Mask(RUNTIME, f"{shown} is computed at run time")
    if _IDENT.match(inner) and depth < 4:
        found = _named(data, call_start, inner.lstrip(b": \t"), shown, depth)
        if width == 32 and found.cls in (ACTIVE, FULL64, WIDE):
            return Mask(ACTIVE32 if found.cls == ACTIVE else RUNTIME, f"{shown}: a 32-bit cast of {found.how}")
        return found
    return Mask(RUNTIME, f"{shown} is computed at run time")


def _named(data: bytes, call_start: int, name: bytes, shown: str, depth: int) -> Mask:
    """A mask given by name: its #define, or its declaration before the call (the nearest one)."""
    word = re.escape(name)
    define = None
    for m in re.finditer(rb"^[ \t]*#[ \t]*define[ \t]+" + word + rb"[ \t]+([^\r\n]*)", data[:call_start], re.M):
        define = m
    if define is not None:
        body = define.group(1).split(b"//")[0].split(b"/*")[0].strip()
        if body and not body.endswith(b"\\"):
            inner = classify(data, call_start, body, depth + 1)
            return Mask(inner.cls, f"{shown} (#define {shown} {_WS.sub(b' ', body).decode('latin-1')})")
    decl = None
    pattern = rb"(?:^|(?<=[;{}(,]))([ \t]*(?:[A-Za-z_][\w:]*[ \t]+)+)" + word + rb"\s*(=|\{|;|,|\))"
    for m in re.finditer(pattern, data[:call_start], re.M):
        words = m.group(1).split()
        if int_type(m.group(1)) is not None or (
            m.group(2) in (b"=", b"{") and not _NOT_TYPES.intersection(words)  # a type of unknown width, or auto
        ):
            decl = m
    if decl is None:
        return Mask(RUNTIME, f"{shown} is not defined in this file (a parameter, or from another header)")
    words = decl.group(1)
    spec = int_type(words)
    tokens = _norm_type(words).split(b" ")
    const = b"const" in tokens or b"constexpr" in tokens
    width = spec[0] if spec is not None else None
    before = data[: decl.start()].rstrip()
    opener = before[-1:] if decl.start() > 0 and data[decl.start() - 1 : decl.start()] in (b"(", b",") else b""
    if opener == b"," or (opener == b"(" and not before[:-1].rstrip().endswith(_KEYWORDS_BEFORE_PAREN)):
        return _typed_runtime(shown, width, "a function parameter (its callers' values are not known here)")
    if decl.group(2) in (b";", b",", b")"):
        return _typed_runtime(shown, width, "declared without a value and assigned at run time")
    init = _initializer(data, decl.end())
    rest = data[decl.end() : call_start]
    assigned = re.search(rb"(?<![\w.>])" + word + rb"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|(?:\+\+|--)\s*" + word, rest)
    if assigned is not None and not const:
        return _typed_runtime(shown, width, "assigned again before the call")
    decl_text = (
        f"{_norm_type(words).decode('latin-1')} {shown} = {_WS.sub(b' ', _strip_parens(init)).decode('latin-1')}"
    )
    value = constant(init)
    if value is not None:
        if spec is not None:
            value = _convert(value, *spec)
        cls = _of_value(value)
        return Mask(cls, decl_text if cls != PARTIAL else f"{decl_text} = {value[0]:#x}")
    inner = classify(data, call_start, init, depth + 1)
    if inner.cls == ACTIVE:
        if width == 32:
            return Mask(ACTIVE32, decl_text)
        if width == 64 or b"auto" in tokens:
            return Mask(ACTIVE, decl_text)
        return Mask(RUNTIME, f"{decl_text}: a type of unknown width")
    if inner.cls in (FULL32, FULL64, PARTIAL, ACTIVE32):
        return Mask(FULL32 if inner.cls == FULL64 and width == 32 else inner.cls, decl_text)
    if inner.cls == WIDE:
        if width == 32:
            return Mask(RUNTIME, f"{decl_text}: a 64-bit lane mask kept in 32 bits")
        return Mask(WIDE if width == 64 or b"auto" in tokens else RUNTIME, decl_text)
    return _typed_runtime(shown, width, f"{decl_text}, computed at run time")


def _typed_runtime(shown: str, width: int | None, why: str) -> Mask:
    return Mask(WIDE if width == 64 else RUNTIME, f"{shown} is {why}")


def _initializer(data: bytes, at: int) -> bytes:
    """The initializer after ``=``/``{`` at ``at``: up to the ``;``/``,``/``}`` that ends it at depth 0."""
    depth = 0
    i = at
    n = len(data)
    while i < n:
        c = data[i]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            if depth == 0:
                break
            depth -= 1
        elif c in b";," and depth == 0:
            break
        i += 1
    return data[at:i]


def first_argument(data: bytes, end: int) -> tuple[int, int] | None:
    """For a name ending at ``end``: the span of its call's first argument, stripped of blanks, or None when
    the name is not called with arguments (``__syncwarp()``, a function pointer, a template-id)."""
    i = end
    n = len(data)
    while i < n and data[i] in b" \t\r\n":
        i += 1
    if i >= n or data[i] != 0x28:
        return None
    depth = 0
    j = i + 1
    while j < n:
        c = data[j]
        if c in b"([{":
            depth += 1
        elif c in b")]}":
            if depth == 0:
                break
            depth -= 1
        elif c == 0x2C and depth == 0:
            break
        elif c in b"\"'":
            k = j + 1
            while k < n and data[k] != c and data[k] != 0x0A:
                k += 2 if data[k] == 0x5C else 1
            j = k
        elif c == 0x3B:
            return None
        j += 1
    if j >= n:
        return None
    a, b = i + 1, j
    while a < b and data[a] in b" \t\r\n":
        a += 1
    while b > a and data[b - 1] in b" \t\r\n":
        b -= 1
    return (a, b) if a < b else None
